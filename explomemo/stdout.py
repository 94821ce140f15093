"""Writing to standard output: a write that fails is an error of its own, said once;
and what standard output is (a terminal of some width, one that takes colour).

A full disk (``> /dev/full``) or a reader that has gone (``| head``) makes a
write fail. The failure becomes an :class:`~explomemo.errors.OutputError`,
and standard output is then pointed at ``/dev/null``: what is still buffered
would otherwise fail again when the interpreter flushes it at exit, with a
second message and exit code 120 (the handling Python's documentation of
``SIGPIPE`` recommends).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys

from explomemo.errors import OutputError


def write(text: str) -> None:
    """Write ``text`` to standard output and flush it."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        raise failed(exc) from exc


def write_whole(text: str, what: str, instead: str) -> None:
    """Write ``text`` (``what`` it is: "the export") to standard output straight to its
    descriptor, so nothing is left in a buffer that a failed flush at exit would report
    again. A failed write (a full disk, a file size limit) is an OutputError naming
    ``what`` and ending with ``instead``; a reader that left is quiet, as for every
    command."""
    try:
        _write_through(text)
    except BrokenPipeError as exc:
        raise failed(exc) from exc
    except OSError as exc:
        silence()
        raise OutputError(
            f"cannot write {what} to standard output ({exc.strerror}): free space or raise"
            f" the file size limit where it goes, or {instead}"
        ) from exc


def _write_through(text: str) -> None:
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        # Not a real file (a test runner's capture): its own writes.
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    view = memoryview(text.encode("utf-8"))
    while view:
        view = view[os.write(fd, view) :]


def failed(exc: OSError) -> OutputError:
    """The error for a failed write to standard output; standard output is silenced."""
    silence()
    gone = isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE
    return OutputError(
        f"cannot write to standard output ({exc.strerror}): free space where it goes, or send"
        " it to a file or a pipe that reads it all",
        reader_gone=gone,
    )


def silence() -> None:
    """Point standard output's descriptor at /dev/null (nothing left to fail at exit)."""
    with contextlib.suppress(AttributeError, ValueError, io.UnsupportedOperation, OSError):
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


def _is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int | None:
    """The width of the terminal standard output is, in cells: ``$COLUMNS`` when it is a
    positive whole number (as Rich and ``shutil`` read it), else the terminal's own; None
    when standard output is not a terminal (a pipe, a file, a CI log)."""
    if not _is_terminal():
        return None
    columns = os.environ.get("COLUMNS", "")
    # At most five digits: int() refuses a string of over 4,300.
    if columns.isascii() and columns.isdigit() and len(columns) <= 5 and int(columns) > 0:
        return int(columns)
    try:
        found = os.get_terminal_size(sys.stdout.fileno()).columns
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return None
    return found if found > 0 else None


def takes_colour() -> bool:
    """Whether to colour what is written: standard output is a terminal, ``$NO_COLOR`` is
    unset or empty (no-color.org), and ``$TERM`` is not ``dumb`` (a terminal that shows
    escape sequences as text)."""
    return (
        _is_terminal() and not os.environ.get("NO_COLOR") and os.environ.get("TERM", "") != "dumb"
    )
