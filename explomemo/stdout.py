"""Writing to standard output: a write that fails is an error of its own, said once.

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
