"""Streaming file digests: SHA-256 (what a memo promises) and xxh3-128 (fast re-checks).

A file is read in 1 MiB pieces into one reused buffer, never whole. Both
hashlib and xxhash release the GIL on large buffers, so files hash in
parallel on threads. :data:`COUNTERS` counts every file opened and byte read
for hashing, so benchmarks and tests can prove a check read nothing.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass

import xxhash

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


def hash_fd(fd: int, *, sha256: bool, limit: int | None = None) -> Digest:
    """Digest an open file from its start, reading at most ``limit + 1`` bytes.

    With ``sha256`` false only the xxh3-128 is computed (the fast re-check).
    Reading stops past ``limit`` so an oversized file is never read whole; the
    caller sees ``size > limit``.
    """
    fast = xxhash.xxh3_128()
    slow = hashlib.sha256() if sha256 else None
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    size = 0
    with open(fd, "rb", buffering=0, closefd=False) as stream:
        while True:
            n = stream.readinto(buffer)
            if not n:
                break
            piece = view[:n]
            fast.update(piece)
            if slow is not None:
                slow.update(piece)
            size += n
            if limit is not None and size > limit:
                break
    COUNTERS.add(1, size)
    return Digest(size, fast.hexdigest(), None if slow is None else slow.hexdigest())


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a trusted file (the shipped model), streamed."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for piece in iter(lambda: stream.read(CHUNK), b""):
            digest.update(piece)
    return digest.hexdigest()
