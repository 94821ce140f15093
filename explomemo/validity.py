"""The validity engine: is each recorded file still byte-identical?

A check costs one ``stat`` per distinct file when nothing changed, and one
read per changed file otherwise, however many memos share it. As git's index
and ccache's manifests do, a stat cache remembers each file's identity
(device, inode, size, mtime_ns, ctime_ns) with the xxh3-128 of its content.
The entry is trusted only when the stat is identical *and* the entry is not
racy: the file's mtime and ctime are older than the moment the entry was
taken by more than the coarsest timestamp granularity we allow for. Any other
file is re-read (only its xxh3; the SHA-256 is what was promised at record
time and stays with the memo). Putting back size and mtime by hand
(``os.utime``) cannot fool it: the ctime moves with every change and
``utime`` cannot set it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from explomemo.errors import StoreError
from explomemo.files import Refused, Root, open_regular
from explomemo.hashing import Digest, hash_fd
from explomemo.store import FileRow, StatRow, Store

FileState = Literal["unchanged", "changed", "missing"]
#: Called with (files read so far, files to read) while a check reads files.
Progress = Callable[[int, int], None]
#: What a file is now: the xxh3-128 of its content, None when it is missing
#: (or not a regular file), or RESIZED when its size matches no recorded size.
Seen = str | None
RESIZED = ""

#: An entry taken less than this after the file's last change is racy (2 s: FAT's granularity).
RACY_NS = 2_000_000_000

_StatKey = tuple[int, int, int, int, int]


def state_of(seen: Seen, recorded: FileRow) -> FileState:
    """A recorded file's state given what is on disk now."""
    if seen is None:
        return "missing"
    return "unchanged" if seen == recorded.xxh3 else "changed"


class Validator:
    """Observes files for validity checks, with a stat cache kept in memory and in the store.

    One Validator lives as long as its caller: a server keeps it warm across
    requests; a CLI run loads the entries it needs from the database once.
    """

    def __init__(
        self, store: Store | None, workers: int | None = None, progress: Progress | None = None
    ) -> None:
        self.progress = progress
        self._store = store
        self._workers = workers or os.cpu_count() or 1
        self._known: set[str] = set()
        # Entries old enough to be trusted, as (stat key, xxh3): the hot path
        # of a check is one dict lookup and one tuple comparison per file.
        self._settled: dict[str, tuple[_StatKey, str]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def clear(self) -> None:
        """Forget the entries held in memory (the next check consults the store again)."""
        with self._lock:
            self._known.clear()
            self._settled.clear()

    def close(self) -> None:
        """Stop the hashing threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def observe(self, root: Root, expected: Mapping[str, Collection[int]]) -> dict[str, Seen]:
        """What each relative path is now; ``expected`` maps it to the sizes memos recorded.

        A file whose size matches no recorded size is known changed without
        being read; a file whose stat matches a settled entry is not read.
        """
        prefix = root.absolute("")
        settled = self._settled
        seen: dict[str, Seen] = {}
        to_read: list[str] = []
        unknown: list[str] = []
        for rel in expected:
            path = prefix + rel
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                seen[rel] = None
                continue
            hit = settled.get(path)
            if hit is not None and hit[0] == (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ):
                seen[rel] = hit[1]
            elif path not in self._known:
                unknown.append(rel)
            elif not stat.S_ISREG(st.st_mode):
                seen[rel] = None
            elif st.st_size not in expected[rel]:
                seen[rel] = RESIZED
            else:
                to_read.append(rel)
        if unknown:
            # First sight of these paths in this process: ask the store's stat
            # cache, then look again.
            self._load_entries([prefix + rel for rel in unknown])
            seen.update(self.observe(root, {rel: expected[rel] for rel in unknown}))
        fresh_entries: dict[str, StatRow] = {}
        for rel, entry in zip(to_read, self._read_all(root, to_read), strict=True):
            if entry is None:
                seen[rel] = None
            else:
                seen[rel] = entry.xxh3
                fresh_entries[prefix + rel] = entry
        if fresh_entries:
            self.remember(fresh_entries)
        return seen

    def remember(self, entries: dict[str, StatRow], persist: bool = True) -> None:
        """Add stat-cache entries in memory, and in the store (when writable) if ``persist``."""
        with self._lock:
            self._learn(entries)
        if self._store is None or not persist:
            return
        try:
            with self._store.errors(), self._store.write() as conn:
                self._store.save_stat_rows(conn, entries)
        except (StoreError, sqlite3.Error):
            # The stat cache is only a speed-up: a read-only or busy database
            # costs the next run a re-read, never a wrong answer.
            pass

    def _learn(self, entries: dict[str, StatRow]) -> None:
        for path, entry in entries.items():
            self._known.add(path)
            if entry.cached_at_ns - max(entry.mtime_ns, entry.ctime_ns) > RACY_NS:
                key = (entry.dev, entry.ino, entry.size, entry.mtime_ns, entry.ctime_ns)
                self._settled[path] = (key, entry.xxh3)
            else:
                self._settled.pop(path, None)

    def _load_entries(self, abs_paths: list[str]) -> None:
        rows: dict[str, StatRow] = {}
        if self._store is not None:
            with self._store.errors(), self._store.read() as conn:
                rows = self._store.stat_rows(conn, abs_paths)
        with self._lock:
            self._known.update(abs_paths)
            self._learn(rows)

    def _read_all(self, root: Root, rels: list[str]) -> list[StatRow | None]:
        if len(rels) <= 1:
            return [read_entry(root, rel) for rel in rels]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="explomemo-hash")
        results = self._pool.map(lambda rel: read_entry(root, rel), rels)
        if self.progress is None:
            return list(results)
        done: list[StatRow | None] = []
        for result in results:
            done.append(result)
            self.progress(len(done), len(rels))
        return done


def read_entry(root: Root, rel: str) -> StatRow | None:
    """Read one file safely and return its new stat-cache entry (None: missing)."""
    try:
        fd = open_regular(root, rel)
    except Refused:
        return None
    try:
        return digest_entry(fd, sha256=False)[1]
    except OSError:
        return None
    finally:
        os.close(fd)


def digest_entry(fd: int, *, sha256: bool, limit: int | None = None) -> tuple[Digest, StatRow]:
    """Digest an open file and make the stat-cache entry that vouches for the digest."""
    taken_at = time.time_ns()
    before = os.fstat(fd)
    digest = hash_fd(fd, sha256=sha256, limit=limit)
    after = os.fstat(fd)
    entry = StatRow(
        dev=before.st_dev,
        ino=before.st_ino,
        size=digest.size,
        mtime_ns=before.st_mtime_ns,
        ctime_ns=before.st_ctime_ns,
        xxh3=digest.xxh3,
        # A file that changed while it was read gets an entry that is never
        # trusted, so the next check reads it again.
        cached_at_ns=taken_at if _same(before, after, digest.size) else 0,
    )
    return digest, entry


def _same(before: os.stat_result, after: os.stat_result, size: int) -> bool:
    return (
        before.st_size == after.st_size == size
        and before.st_mtime_ns == after.st_mtime_ns
        and before.st_ctime_ns == after.st_ctime_ns
    )
