"""Captures waiting for the database: the file beside it that a Stop hook writes when it
cannot store a capture in time.

The Claude Code Stop hook waits at most 50 ms for another process's lock. A
capture it cannot store then is appended, as one JSON line, to
``<database>.pending-captures.jsonl`` (owner-only, 0600), and the next process
that writes to the database (a hook, a command, the server: see
:meth:`~explomemo.store.database.Store.write`) stores it. Nothing is lost
silently:

* an append holds an exclusive ``flock`` on the file for one ``write`` and checks
  that the file it locked is still the one at the path;
* a writer claims the file by renaming it, under the same lock, to a name of its
  own (``….<pid>.<n>.claimed``): appends after that go to a new file, and a
  claimed file is deleted only once its captures are committed. When storing
  fails, its lines go back to the pending file; when the claiming process died
  first, the next writer claims its file again;
* an empty file is never claimed, so an append that finds the file it locked
  claimed meanwhile tries again only because a line was written to the file it
  opened: a writer that claims over and over cannot starve the appends.

A line the store cannot take (not a capture: cut by a crash, or one no release writes,
see :func:`from_line`; or a capture that breaks the input rule of a record, see
:func:`check`, or that the database refuses) is never tried again: the writer that
claimed it appends it to the quarantine file beside the database
(``<database>.quarantined-captures.jsonl``, owner-only) and stores the others. A writer
never fails because of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from explomemo import inputs
from explomemo.files import check_text_path
from explomemo.inputs import MAX_FILES

#: The origins of a capture.
CAPTURED = (inputs.TRANSCRIPT, inputs.SUBAGENT)
#: What a pending file's name adds to the database's.
SUFFIX = ".pending-captures.jsonl"
#: What the quarantine file's name adds to the database's: lines no write can store.
QUARANTINE_SUFFIX = ".quarantined-captures.jsonl"
_CLAIMED = re.compile(r"\.pending-captures\.(\d+)\.(\d+)\.claimed")
_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
#: Numbers the claims of this process.
_CLAIMS = itertools.count()


class CapturedFile(NamedTuple):
    """A file of a capture, as the agent read it."""

    path: str
    sha256: str
    xxh3: str
    size: int
    git_blob: str | None


class Capture(NamedTuple):
    """A memo a hook captured (the Stop hook from a turn, the SubagentStop hook from a
    delegated run), with the snapshots of its contents."""

    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    files: list[CapturedFile]
    #: (SHA-256, codec, stored bytes) of the contents kept (see explomemo.changes.snapshots).
    snapshots: list[tuple[str, str, bytes]]
    #: The identity of the repository it was captured in (see MemoRow.repository).
    repository: str | None = None
    #: ``transcript`` (a turn) or ``subagent`` (a delegated run).
    origin: str = inputs.TRANSCRIPT
    #: For a delegated run: its agent's type (Explore, Plan, ...).
    agent_type: str | None = None
    #: For a delegated run: the tokens it cost, when known.
    cost_tokens: int | None = None


def pending_path(db: Path) -> Path:
    """The pending-captures file of the database ``db``."""
    return Path(f"{db}{SUFFIX}")


def quarantine_path(db: Path) -> Path:
    """The file of ``db``'s pending lines that no write can store."""
    return Path(f"{db}{QUARANTINE_SUFFIX}")


def to_line(capture: Capture) -> bytes:
    """A capture as one line of the pending file."""
    import base64

    data: dict[str, Any] = capture._asdict()
    data["files"] = [f._asdict() for f in capture.files]
    data["snapshots"] = [
        [sha256, codec, base64.b64encode(stored).decode()]
        for sha256, codec, stored in capture.snapshots
    ]
    return json.dumps(data, ensure_ascii=True).encode() + b"\n"


def from_line(line: bytes) -> Capture | None:
    """The capture of one pending line; None for a line that is not one: cut by a crash, or
    holding no file, more than the store takes or a file's field of another type (the hook
    captures only turns that read one and cuts them to 64; a line the store refuses would
    fail every write that stores the pending captures)."""
    import base64

    try:
        data = json.loads(line)
        files = [CapturedFile(**item) for item in data.pop("files")]
        snapshots = [
            (str(sha256), str(codec), base64.b64decode(stored))
            for sha256, codec, stored in data.pop("snapshots")
        ]
        capture = Capture(files=files, snapshots=snapshots, **data)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    fields = (capture.project, capture.question, capture.conclusion, capture.root)
    if not all(isinstance(value, str) for value in (*fields, capture.recorded_at)):
        return None
    if not isinstance(capture.repository, str | None) or not 1 <= len(capture.files) <= MAX_FILES:
        return None
    if capture.origin not in CAPTURED or not isinstance(capture.agent_type, str | None):
        return None
    if capture.cost_tokens is not None and (
        type(capture.cost_tokens) is not int or capture.cost_tokens < 0
    ):
        return None
    if not all(_is_file(f) for f in capture.files):
        return None
    return capture


def _is_file(row: CapturedFile) -> bool:
    texts = (row.path, row.sha256, row.xxh3)
    return (
        all(isinstance(value, str) for value in texts)
        and type(row.size) is int
        and isinstance(row.git_blob, str | None)
    )


def waiting(db: Path) -> bool:
    """Whether a pending file of ``db`` holds anything to claim (it exists, not empty)."""
    try:
        return os.stat(pending_path(db), follow_symlinks=False).st_size > 0
    except OSError:
        return False


def keep(db: Path, capture: Capture) -> Path:
    """Append ``capture`` to the pending file of ``db``; returns the file's path."""
    append(pending_path(db), to_line(capture))
    return pending_path(db)


def append(path: Path, data: bytes) -> None:
    """Append ``data`` (whole lines) to the pending (or quarantine) file ``path``, created
    owner-only."""
    for _ in range(8):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _FLAGS, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                os.fchmod(fd, 0o600)
                _write_all(fd, data)
                return
        finally:
            os.close(fd)
    raise OSError(f"{path} kept being claimed while a capture was appended")


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open ``fd`` is the file at ``path`` now (not one claimed meanwhile)."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def claim(db: Path) -> list[Path]:
    """Take the pending file of ``db`` (and any claimed by a process that died) for this
    process: their new names, to read with :func:`lines` and then :func:`release`
    or :func:`give_back`."""
    path = pending_path(db)
    claimed: list[Path] = []
    for stray in _strays(db):
        target = _claimed_name(db)
        with contextlib.suppress(FileNotFoundError):
            os.rename(stray, target)
            claimed.append(target)
    try:
        fd = os.open(path, os.O_RDONLY | _FLAGS)
    except FileNotFoundError:
        return claimed
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # An empty file is left where it is: it may be one that an append has just created
        # and not yet written to, and claiming it would send that append round again.
        if _same_file(fd, path) and os.fstat(fd).st_size > 0:
            target = _claimed_name(db)
            os.rename(path, target)
            claimed.append(target)
    finally:
        os.close(fd)
    return claimed


def _claimed_name(db: Path) -> Path:
    """A name no claimed file has: a rename onto an existing one would lose its lines."""
    while True:
        found = Path(f"{db}.pending-captures.{os.getpid()}.{next(_CLAIMS)}.claimed")
        if not os.path.lexists(found):
            return found


def _strays(db: Path) -> Iterator[Path]:
    """Files claimed by processes no longer running."""
    folder = db.parent
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not name.startswith(db.name):
            continue
        found = _CLAIMED.fullmatch(name[len(db.name) :])
        if found is None:
            continue
        pid = int(found.group(1))
        if pid != os.getpid() and not _running(pid):
            yield folder / name


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check(capture: Capture) -> None:
    """Refuse, with :class:`~explomemo.errors.InputError`, a capture whose texts or paths
    ``record`` would refuse (a NUL, a lone surrogate, a text too long): an earlier release
    parked such captures."""
    inputs.check_text("project", capture.project, inputs.MAX_PROJECT)
    inputs.check_text("question", capture.question, inputs.MAX_QUESTION)
    inputs.check_text("conclusion", capture.conclusion, inputs.MAX_CONCLUSION)
    if capture.agent_type is not None:
        inputs.check_text("agent type", capture.agent_type, inputs.MAX_AGENT_TYPE)
    for row in capture.files:
        check_text_path(row.path, "path")


def lines(claimed: list[Path]) -> Iterator[tuple[bytes, Capture | None]]:
    """Each line the claimed files hold, in order, with its capture (None: not one)."""
    for path in claimed:
        with open(path, "rb") as stream:
            for line in stream:
                if line.strip():
                    yield (line if line.endswith(b"\n") else line + b"\n"), from_line(line)


def set_aside(db: Path, refused: list[bytes]) -> Path:
    """Append the pending lines ``refused`` to the quarantine file of ``db``, their secrets
    redacted (an earlier release parked captures as they came); its path."""
    from explomemo.redaction import redact

    path = quarantine_path(db)
    kept = (
        redact(line.decode("utf-8", "surrogateescape")).text.encode("utf-8", "surrogateescape")
        for line in refused
    )
    append(path, b"".join(kept))
    return path


def release(claimed: list[Path]) -> None:
    """Delete claimed files whose captures are stored."""
    for path in claimed:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def give_back(db: Path, claimed: list[Path]) -> None:
    """Put the lines of claimed files that could not be stored back into the pending file."""
    for path in claimed:
        data = path.read_bytes()
        if data:
            append(pending_path(db), data if data.endswith(b"\n") else data + b"\n")
        os.unlink(path)
