"""Streaming file digests: SHA-256 (what a memo promises) and xxh3-128 (fast re-checks).

A file is read in 1 MiB pieces into a reused buffer, never whole; the read
releases the GIL. A file that fits in one piece is hashed in one call that
holds the GIL (a few microseconds); the pieces of a larger file go through
``update``, which releases it (xxhash over 64 KiB, hashlib over 2 KiB), so
large files hash in parallel on threads. :data:`COUNTERS` counts every file
opened and byte read for hashing, so benchmarks and tests can prove a check
read nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import xxhash

if TYPE_CHECKING:
    import hashlib

CHUNK = 1 << 20


@dataclass
class ReadCounters:
    """How many files were read for hashing and how many bytes, since the last reset."""

    files: int = 0
    bytes: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, files: int, nbytes: int) -> None:
        """Count one more read."""
        with self._lock:
            self.files += files
            self.bytes += nbytes

    def reset(self) -> None:
        """Start counting from zero."""
        with self._lock:
            self.files = 0
            self.bytes = 0


COUNTERS = ReadCounters()


@dataclass(frozen=True)
class Digest:
    """What a file held when it was read."""

    size: int
    xxh3: str
    sha256: str | None


#: Reads into a buffer from the file offset, releasing the GIL meanwhile.
_readv: Callable[[int, list[memoryview]], int] = getattr(os, "readv", None) or (
    lambda fd, buffers: _readv_fallback(fd, buffers)
)
#: Read buffers not in use: a buffer is taken per file and given back, so no
#: file allocates one and the process keeps only as many as ever read at once.
_free_buffers: list[memoryview] = []


def hash_fd(
    fd: int, *, sha256: bool, limit: int | None = None, expected_size: int | None = None
) -> Digest:
    """Digest an open file from its start, reading at most ``limit + 1`` bytes.

    With ``sha256`` false only the xxh3-128 is computed (the fast re-check).
    Reading stops past ``limit`` so an oversized file is never read whole; the
    caller sees ``size > limit``. ``expected_size`` is the size an ``fstat``
    just gave: it only spares the read that would return end-of-file (see
    :func:`xxh3_fd`).
    """
    size, fast, slow = _digest(fd, sha256, limit, expected_size)
    return Digest(size, fast, slow)


def xxh3_fd(fd: int, expected_size: int | None = None) -> tuple[int, str]:
    """The size and xxh3-128 of an open file from its start: the fast re-check.

    A file read whole by one read that stops short exactly at
    ``expected_size`` (the size an ``fstat`` just gave) is not read again to
    see end-of-file. While the file stays as it was, that changes nothing;
    one that grows meanwhile is for the caller's second ``fstat`` to catch,
    as it must anyway for a file written while it is read.
    """
    try:
        view = _free_buffers.pop()
    except IndexError:
        view = memoryview(bytearray(CHUNK))
    try:
        n = _readv(fd, [view])
        if n < CHUNK and (n == expected_size or not n):
            # The whole file in one read (the common case): hash it in one
            # call, holding the GIL (a few microseconds; releasing it for so
            # little costs more in hand-offs between threads than it frees).
            size = n
            fast_hex = xxhash.xxh3_128_hexdigest(view[:n])
        else:
            size, fast_hex, _ = _digest_from(fd, view, n, CHUNK, False, None, expected_size)
    finally:
        _free_buffers.append(view)
    COUNTERS.add(1, size)
    return size, fast_hex


def _digest(
    fd: int, sha256: bool, limit: int | None, expected_size: int | None
) -> tuple[int, str, str | None]:
    try:
        view = _free_buffers.pop()
    except IndexError:
        view = memoryview(bytearray(CHUNK))
    try:
        want = CHUNK if limit is None else min(CHUNK, limit + 1)
        n = _readv(fd, [view if want == CHUNK else view[:want]])
        if not n or (n < want and n == expected_size):
            piece = view[:n]
            size = n
            fast_hex = xxhash.xxh3_128_hexdigest(piece)
            slow_hex = _sha256(piece).hexdigest() if sha256 else None
        else:
            size, fast_hex, slow_hex = _digest_from(fd, view, n, want, sha256, limit, expected_size)
    finally:
        _free_buffers.append(view)
    COUNTERS.add(1, size)
    return size, fast_hex, slow_hex


def _digest_from(
    fd: int,
    view: memoryview,
    n: int,
    want: int,
    sha256: bool,
    limit: int | None,
    expected_size: int | None,
) -> tuple[int, str, str | None]:
    """Digest a file whose first read put ``n`` of the ``want`` bytes asked for in ``view``."""
    fast = xxhash.xxh3_128()
    slow = _sha256() if sha256 else None
    size = 0
    while n:
        piece = view if n == CHUNK else view[:n]
        fast.update(piece)  # releases the GIL for pieces over 64 KiB
        if slow is not None:
            slow.update(piece)
        size += n
        if limit is not None and size > limit:
            break
        if n < want and size == expected_size:
            break
        want = CHUNK if limit is None else min(CHUNK, limit + 1 - size)
        n = _readv(fd, [view if want == CHUNK else view[:want]])
    return size, fast.hexdigest(), None if slow is None else slow.hexdigest()


def _sha256(data: bytes | memoryview = b"") -> hashlib._Hash:
    # hashlib loads OpenSSL: only a record (or the model check) needs SHA-256,
    # and a short command that only checks files must not pay for it.
    import hashlib

    return hashlib.sha256(data)


def _readv_fallback(fd: int, buffers: list[memoryview]) -> int:  # pragma: no cover (no readv)
    with open(fd, "rb", buffering=0, closefd=False) as stream:
        return stream.readinto(buffers[0]) or 0


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a trusted file (the shipped model), streamed."""
    digest = _sha256()
    with open(path, "rb") as stream:
        for piece in iter(lambda: stream.read(CHUNK), b""):
            digest.update(piece)
    return digest.hexdigest()
