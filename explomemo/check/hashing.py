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
from typing import TYPE_CHECKING, NamedTuple

import xxhash

if TYPE_CHECKING:
    import hashlib

CHUNK = 1 << 20


class ReadCounters:
    """How many files were read for hashing and how many bytes, since the last reset."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
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


class Digest(NamedTuple):
    """What a file held when it was read."""

    size: int
    xxh3: str
    sha256: str | None
    #: The bytes themselves, when asked for and the file is no larger than asked.
    content: bytes | None = None
    #: The git blob id, when asked for (None for a file larger than the bytes
    #: kept whose size moved while it was read).
    git_blob: str | None = None


def git_blob_id(data: bytes | memoryview) -> str:
    """The id git gives a blob of these bytes: SHA-1 of ``blob <size>\\0`` and the bytes."""
    digest = _sha1(_blob_header(len(data)))
    digest.update(data)
    return digest.hexdigest()


def _blob_header(size: int) -> bytes:
    return b"blob %d\x00" % size


#: Reads into a buffer from the file offset, releasing the GIL meanwhile.
_readv: Callable[[int, list[memoryview]], int] = getattr(os, "readv", None) or (
    lambda fd, buffers: _readv_fallback(fd, buffers)
)
#: Read buffers not in use: a buffer is taken per file and given back, so no
#: file allocates one and the process keeps only as many as ever read at once.
_free_buffers: list[memoryview] = []


def hash_fd(
    fd: int,
    *,
    sha256: bool,
    limit: int | None = None,
    expected_size: int | None = None,
    keep: int = 0,
) -> Digest:
    """Digest an open file from its start, reading at most ``limit + 1`` bytes.

    With ``sha256`` false only the xxh3-128 is computed (the fast re-check).
    Reading stops past ``limit`` so an oversized file is never read whole; the
    caller sees ``size > limit``. ``expected_size`` is the size an ``fstat``
    just gave: it only spares the read that would return end-of-file (see
    :func:`xxh3_fd`).

    With ``keep`` (and ``sha256``), the same read also gives what a memo needs
    to show a change later: its git blob id (SHA-1 over the same pieces; its
    header needs the size first, so a file whose size moved from
    ``expected_size`` while it was read gets one only when its bytes are
    kept) and the bytes of a file of at most ``keep`` bytes (a copy made
    while they are in the buffer anyway).
    """
    return _digest(fd, sha256, limit, expected_size, keep)


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
            digest = _digest_from(fd, view, n, CHUNK, False, None, expected_size, 0)
            size, fast_hex = digest.size, digest.xxh3
    finally:
        _free_buffers.append(view)
    COUNTERS.add(1, size)
    return size, fast_hex


def _digest(
    fd: int, sha256: bool, limit: int | None, expected_size: int | None, keep: int = 0
) -> Digest:
    try:
        view = _free_buffers.pop()
    except IndexError:
        view = memoryview(bytearray(CHUNK))
    try:
        want = CHUNK if limit is None else min(CHUNK, limit + 1)
        n = _readv(fd, [view if want == CHUNK else view[:want]])
        if not n or (n < want and n == expected_size):
            piece = view[:n]
            content = blob = None
            if keep:
                blob = git_blob_id(piece)
                if n <= keep:
                    content = bytes(piece)
            digest = Digest(
                n,
                xxhash.xxh3_128_hexdigest(piece),
                _sha256(piece).hexdigest() if sha256 else None,
                content,
                blob,
            )
        else:
            digest = _digest_from(fd, view, n, want, sha256, limit, expected_size, keep)
    finally:
        _free_buffers.append(view)
    COUNTERS.add(1, digest.size)
    return digest


def _digest_from(
    fd: int,
    view: memoryview,
    n: int,
    want: int,
    sha256: bool,
    limit: int | None,
    expected_size: int | None,
    keep: int,
) -> Digest:
    """Digest a file whose first read put ``n`` of the ``want`` bytes asked for in ``view``."""
    fast = xxhash.xxh3_128()
    slow = _sha256() if sha256 else None
    # A file expected to fit in ``keep`` is copied piece by piece; its blob
    # id comes from the same pieces.
    kept: list[bytes] | None = [] if keep else None
    blob = None
    if keep and expected_size is not None:
        blob = _sha1(_blob_header(expected_size))
        if expected_size > keep:
            kept = None
    size = 0
    while n:
        piece = view if n == CHUNK else view[:n]
        fast.update(piece)  # releases the GIL for pieces over 64 KiB
        if slow is not None:
            slow.update(piece)
        if blob is not None:
            blob.update(piece)
        size += n
        if kept is not None and size <= keep:
            kept.append(bytes(piece))
        else:
            kept = None
        if limit is not None and size > limit:
            break
        if n < want and size == expected_size:
            break
        want = CHUNK if limit is None else min(CHUNK, limit + 1 - size)
        n = _readv(fd, [view if want == CHUNK else view[:want]])
    content = None if kept is None else b"".join(kept)
    blob_id = blob.hexdigest() if blob is not None and size == expected_size else None
    if blob_id is None and content is not None:
        blob_id = git_blob_id(content)
    return Digest(
        size,
        fast.hexdigest(),
        None if slow is None else slow.hexdigest(),
        content,
        blob_id,
    )


def _sha256(data: bytes | memoryview = b"") -> hashlib._Hash:
    # hashlib loads OpenSSL: only a record (or the model check) needs SHA-256,
    # and a short command that only checks files must not pay for it.
    import hashlib

    return hashlib.sha256(data)


def _sha1(data: bytes) -> hashlib._Hash:
    import hashlib

    return hashlib.sha1(data, usedforsecurity=False)


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
