"""Streaming file digests (check/hashing.py): of the whole file, bounded, into reused buffers."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import xxhash

from explomemo.check import hashing
from explomemo.check.hashing import CHUNK, COUNTERS, hash_fd, xxh3_fd

# Hashing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "size", [0, 1, 4095, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 5]
)
def test_digests_are_of_the_whole_file(tmp_path: Path, size: int) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    for expected_size in (None, size, max(0, size - 1), size + 1):
        for sha256 in (True, False):
            fd = os.open(path, os.O_RDONLY)
            try:
                COUNTERS.reset()
                digest = hash_fd(fd, sha256=sha256, expected_size=expected_size)
                os.lseek(fd, 0, os.SEEK_SET)
                fast = xxh3_fd(fd, expected_size)
            finally:
                os.close(fd)
            assert (digest.size, digest.xxh3) == fast == (size, xxhash.xxh3_128_hexdigest(data))
            assert digest.sha256 == (hashlib.sha256(data).hexdigest() if sha256 else None)
            assert (COUNTERS.files, COUNTERS.bytes) == (2, 2 * size)


@pytest.mark.parametrize("limit", [0, 10, CHUNK - 1, CHUNK, 2 * CHUNK + 3])
def test_an_oversized_file_is_read_no_further_than_limit_plus_one(
    tmp_path: Path, limit: int
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    path = tmp_path / "big"
    path.write_bytes(os.urandom(3 * CHUNK + 5))
    fd = os.open(path, os.O_RDONLY)
    try:
        COUNTERS.reset()
        digest = hash_fd(fd, sha256=True, limit=limit, expected_size=3 * CHUNK + 5)
        assert os.lseek(fd, 0, os.SEEK_CUR) == limit + 1
    finally:
        os.close(fd)
    assert digest.size == limit + 1 > limit
    assert (COUNTERS.files, COUNTERS.bytes) == (1, limit + 1)


def test_a_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    data = os.urandom(CHUNK + 10)
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = hash_fd(fd, sha256=True, limit=len(data), expected_size=len(data))
    finally:
        os.close(fd)
    assert digest == hashing.Digest(
        len(data), xxhash.xxh3_128_hexdigest(data), hashlib.sha256(data).hexdigest()
    )


def test_hashing_reuses_its_buffers(tmp_path: Path) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    kept = max(1, len(hashing._free_buffers))
    for _ in range(50):
        fd = os.open(path, os.O_RDONLY)
        try:
            xxh3_fd(fd, 1000)
        finally:
            os.close(fd)
    assert 1 <= len(hashing._free_buffers) <= kept
