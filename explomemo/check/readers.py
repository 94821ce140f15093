"""Reading files for a check: one file into a stat-cache row, here or in a helper process.

Threads share the GIL, and a file of 100 KB costs five short system calls
that each hand it over; on two cores two threads read such files more slowly
than one (see :data:`explomemo.check.validity.PARALLEL_MEAN_BYTES`). Helper
processes share nothing: a :class:`Helper` is a ``python -P`` started in
``/`` that imports this very package by its folder and names the file it
runs, then takes a batch of paths on its stdin and answers with their rows on
its stdout, both pickled, until its stdin closes. It reads through the same
:class:`~explomemo.files.Opener` as this process, so it opens nothing this
process would refuse, and imports nothing from the folder being checked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from explomemo.check.hashing import COUNTERS, xxh3_fd
from explomemo.files import Opener, Refused, Root

if TYPE_CHECKING:
    import subprocess

#: A new stat-cache entry as read: (dev, ino, size, mtime_ns, ctime_ns, xxh3, cached_at_ns).
Row = tuple[int, int, int, int, int, str, int]


def read_row(opener: Opener, rel: str, taken_at: int, racy_ns: int) -> Row | None:
    """Read one file through an opener into a stat-cache row (None: missing).

    ``taken_at`` is a time before the check's first read; an entry of a file
    changed less than ``racy_ns`` before it is never trusted. A plain tuple,
    not a StatRow: this is the hot path of a re-read.
    """
    try:
        fd, before = opener.open(rel)
    except Refused:
        return None
    mtime_ns = before.st_mtime_ns
    ctime_ns = before.st_ctime_ns
    # An entry of a file changed within the racy window of the check is never
    # trusted, whatever happens during the read: no second fstat is needed to decide.
    racy = taken_at - max(mtime_ns, ctime_ns) <= racy_ns
    try:
        size, xxh3 = xxh3_fd(fd, before.st_size)
        # A file that changed while it was read gets an entry that is never
        # trusted, so the next check reads it again.
        if racy:
            cached_at_ns = 0
        else:
            cached_at_ns = taken_at if unchanged_while_read(before, os.fstat(fd), size) else 0
    except OSError:
        return None
    finally:
        os.close(fd)
    return (before.st_dev, before.st_ino, size, mtime_ns, ctime_ns, xxh3, cached_at_ns)


def unchanged_while_read(before: os.stat_result, after: os.stat_result, size: int) -> bool:
    """Whether a file read as ``size`` bytes kept its size and times from before to after."""
    return (
        before.st_size == after.st_size == size
        and before.st_mtime_ns == after.st_mtime_ns
        and before.st_ctime_ns == after.st_ctime_ns
    )


class HelperError(Exception):
    """A helper process failed or went away; its batch is to be read here instead."""


class Helper:
    """One helper process that reads batches of files under a root.

    It starts as ``python -P`` in ``/``: nothing from the folder being
    checked (which may hold a package or a module named like one of ours or
    the standard library's) comes on its import path. It imports the
    explomemo package this process runs from by its folder, whatever copy the
    import path would find. Its first answer names the file it runs; one that
    runs another copy of explomemo is not used.
    """

    def __init__(self) -> None:
        # Imported here: the CLI starts without them unless a large read needs a helper.
        import subprocess

        self._process: subprocess.Popen[bytes]
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOTSTRAP, str(Path(__file__).resolve().parents[1])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/",
            )
        except (OSError, ValueError, TypeError) as exc:
            raise HelperError(f"cannot start a helper process: {exc}") from exc
        self._greeted = False

    def read(self, root: Root, rels: list[str], taken_at: int, racy_ns: int) -> list[Row | None]:
        """The rows of ``rels`` under ``root``, read by the helper (its reads are counted here)."""
        import pickle
        import select

        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        try:
            if not self._greeted:
                # A wrong interpreter, or one that hangs at start-up, must not
                # hold the check: it gets GREETING_SECONDS to name its file.
                ready, _, _ = select.select([stdout], [], [], GREETING_SECONDS)
                if not ready:
                    raise TimeoutError(f"no greeting within {GREETING_SECONDS} s")
                runs = pickle.load(stdout)
                if runs != _THIS_FILE:
                    raise ValueError(f"it runs {runs!r}, not {_THIS_FILE!r}")
                self._greeted = True
            pickle.dump((root.real, rels, taken_at, racy_ns), stdin, pickle.HIGHEST_PROTOCOL)
            stdin.flush()
            rows, files, nbytes = pickle.load(stdout)
            if not isinstance(rows, list) or len(rows) != len(rels):
                raise ValueError(f"{len(rels)} paths asked, an answer of another shape")
        except BaseException as exc:
            # Whatever state it is in (an answer may be left in the pipe), it
            # is of no more use.
            self._process.kill()
            if not isinstance(exc, Exception):
                raise
            raise HelperError(f"helper process {self._process.pid} failed: {exc!r}") from exc
        COUNTERS.add(files, nbytes)
        return rows

    def close(self) -> None:
        """Let the helper finish (its stdin closes), or stop it."""
        import subprocess

        try:
            if self._process.stdin is not None:
                self._process.stdin.close()
            self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            if self._process.stdout is not None:
                self._process.stdout.close()


#: A helper's program: import the explomemo package this process runs from, by its
#: folder (argv[1]), whichever other copy the import path holds, then serve.
_BOOTSTRAP = """
import importlib.util, sys
folder = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "explomemo", folder + "/__init__.py", submodule_search_locations=[folder]
)
package = importlib.util.module_from_spec(spec)
sys.modules["explomemo"] = package
spec.loader.exec_module(package)
from explomemo.check.readers import main
main()
"""

#: How long a new helper may take to name its file (Python starts in about 40 ms).
GREETING_SECONDS = 30.0

#: The file this module runs from, as a helper names it in its first answer.
_THIS_FILE = str(Path(__file__).resolve())


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """A helper's loop: name this file, then read each batch asked for and answer with
    its rows and read counts, until ``requests`` ends."""
    import pickle

    pickle.dump(_THIS_FILE, answers, pickle.HIGHEST_PROTOCOL)
    answers.flush()
    while True:
        try:
            root_real, rels, taken_at, racy_ns = pickle.load(requests)
        except EOFError:
            return
        COUNTERS.reset()
        with Opener(Root(root_real, root_real)) as opener:
            rows = [read_row(opener, rel, taken_at, racy_ns) for rel in rels]
        pickle.dump((rows, COUNTERS.files, COUNTERS.bytes), answers, pickle.HIGHEST_PROTOCOL)
        answers.flush()


def main() -> None:
    """A helper process: serve requests on stdin, answers on stdout."""
    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    # Nothing but answers may reach the channel.
    sys.stdout = sys.stderr
    serve(channel_in, channel_out)
