"""Giving memory back to the system after large, short-lived allocations."""

from __future__ import annotations


def release_freed_memory() -> None:
    """Return memory that glibc keeps after a large load (the model, a vector index).

    Loading the model frees about 50 MB, and reading 100,000 vectors row by row
    leaves as much behind; a long-running server gives it back. A no-op where
    glibc's malloc_trim is not available.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
