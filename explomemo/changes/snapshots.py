"""Snapshots: a compressed copy of each distinct recorded content, to show what changed.

A record reads every byte of its files once; that read gives each file's
git blob id, stored with the memo, and the bytes of each file of at most
:data:`~explomemo.changes.contents.SNAPSHOT_MAX_BYTES`, handed to a :class:`SnapshotWriter`, whose
thread compresses the contents no snapshot holds yet, off the request path
(zlib at 25-60 MB/s would otherwise double a record's time); a content that holds a
secret (:func:`~explomemo.redaction.holds_secret`) gets none. A snapshot is
stored once per SHA-256, shared by every memo that read that content, and
deleted with the last memo resting on it
(:meth:`~explomemo.store.database.Store.collect_snapshots`). ``EXPLOMEMO_SNAPSHOTS=off``
keeps the blob ids and no snapshot. The same thread stores the code
identifiers of each recorded memo (:meth:`~explomemo.store.database.Store.index_identifiers`),
which a record leaves pending.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from explomemo.changes.contents import compress
from explomemo.errors import StoreError
from explomemo.redaction import holds_secret
from explomemo.store.database import Store

#: Kept contents waiting for the writer, at most: a record waits beyond it.
_PENDING_MAX_BYTES = 256 << 20
#: How long ``close`` goes on storing snapshots before it drops the rest
#: (as :data:`explomemo.recall.vectors.CLOSE_SECONDS` for vectors).
CLOSE_SECONDS = 2.0

logger = logging.getLogger("explomemo")


@dataclass(frozen=True)
class _Job:
    """What one record leaves to the writer: its contents' blob ids, the bytes to keep, and
    the memo whose identifiers to index."""

    blobs: dict[str, str]
    contents: dict[str, bytes]
    memos: tuple[int, ...] = ()


class SnapshotWriter:
    """One thread that compresses and stores the snapshots of recorded contents.

    A record stores its files' blob ids itself; :meth:`submit` hands the
    writer the contents of one record (by SHA-256) and their blob ids once
    the record's transaction committed: it stores the snapshots no memo had
    yet, and gives each blob id to the older rows of that content that lack
    one. :meth:`pending` gives a read the contents not stored yet (a recall,
    show or stale report never waits for the writer); :meth:`wait` returns
    when everything submitted is stored; :meth:`close` goes on for up to
    :data:`CLOSE_SECONDS` and drops the rest (those contents get no snapshot;
    their diffs come from git). A content whose memo was forgotten or
    replaced meanwhile is not stored.
    """

    def __init__(self, store: Store, keep_snapshots: bool) -> None:
        self.keep_snapshots = keep_snapshots
        self._store = store
        self._jobs: list[_Job] = []
        # The job being stored: its contents are still pending until it is.
        self._current = _Job({}, {})
        self._pending_bytes = 0
        self._busy = False
        self._closing = False
        self._close_by = math.inf
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, contents: dict[str, bytes], blobs: dict[str, str], memo_id: int) -> None:
        """Store the snapshots of these contents soon, give their blob ids (by SHA-256)
        to the older rows of each content, and index the identifiers of memo ``memo_id``."""
        # Only what must happen now, on the record's path: the writer's thread
        # does the rest.
        job = _Job(blobs, contents if self.keep_snapshots else {}, (memo_id,))
        size = _size(job)
        with self._changed:
            if self._pending_bytes + size > _PENDING_MAX_BYTES:
                self._changed.wait_for(
                    lambda: self._pending_bytes + size <= _PENDING_MAX_BYTES or not self._jobs
                )
            if self._closing:
                return
            self._jobs.append(job)
            self._pending_bytes += size
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="explomemo-snapshots", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def pending(self, contents: Iterable[str]) -> dict[str, bytes]:
        """The bytes of the contents among ``contents`` (SHA-256s) submitted and not stored yet.

        What a read needs of a content the writer holds, without waiting for
        its write (which may wait for another process's lock): ask before
        reading the database, so a content stored meanwhile is found there.
        """
        with self._changed:
            held = [job.contents for job in (self._current, *self._jobs)]
            return {sha256: job[sha256] for sha256 in contents for job in held if sha256 in job}

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every submitted content is stored; False when ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._jobs and not self._busy, timeout)

    def close(self) -> None:
        """Store what was submitted for up to :data:`CLOSE_SECONDS`, drop the rest, stop the
        thread."""
        with self._changed:
            self._closing = True
            self._close_by = time.monotonic() + CLOSE_SECONDS
            thread = self._thread
            self._changed.notify_all()
        if thread is not None:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._jobs or self._closing)
                if not self._jobs or time.monotonic() >= self._close_by:
                    self._jobs.clear()
                    return
                job = self._current = self._jobs.pop(0)
                self._busy = True
            try:
                self._store_job(job, time.monotonic() + self._store.busy_timeout_ms / 1000)
            except Exception as exc:
                # Those contents keep no snapshot: their diffs come from git.
                # Any failure, so the thread lives on for the next records
                # (a record waits for it when too much is pending).
                logger.warning("could not store snapshots: %s", " ".join(str(exc).split()))
            finally:
                with self._changed:
                    self._busy = False
                    self._current = _Job({}, {})
                    self._pending_bytes -= _size(job)
                    self._changed.notify_all()

    def _store_job(self, job: _Job, give_up: float) -> None:
        """Store a job's snapshots and blob ids, unless ``give_up`` (or the close's deadline)
        passes first; a busy database is tried again meanwhile."""
        store = self._store
        snapshots: list[tuple[str, str, bytes]] = []
        if job.contents:
            with store.errors(), store.read() as conn:
                present = store.snapshot_contents(conn, job.contents)
            for sha256, data in job.contents.items():
                if sha256 not in present:
                    if time.monotonic() >= self._close_by:
                        return
                    if not holds_secret(data):
                        snapshots.append((sha256, *compress(data)))
        with store.errors():
            while (left := min(give_up, self._close_by) - time.monotonic()) > 0:
                if not store.lock.acquire(timeout=left):
                    break
                try:
                    # Waits for another process only briefly, so a close's
                    # deadline is kept whatever holds the database.
                    with store.write(wait=False) as conn:
                        store.set_git_blobs(conn, sorted(job.blobs.items()))
                        store.save_snapshots(conn, snapshots)
                        if job.memos:
                            # Read again here: a replace may have changed the memo.
                            store.index_identifiers(conn, ids=job.memos)
                    return
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                        raise
                finally:
                    store.lock.release()
        if time.monotonic() < self._close_by:
            raise StoreError(
                f"database {store.path} stayed locked for {store.busy_timeout_ms / 1000:g} s:"
                " a record's contents keep no snapshot (their diffs come from git)"
            )


def _size(job: _Job) -> int:
    return sum(len(data) for data in job.contents.values())
