"""Snapshots: a compressed copy of each distinct recorded content, to show what changed.

A record reads every byte of its files once; the bytes of each file of at
most :data:`SNAPSHOT_MAX_BYTES` are kept from that read and handed to a
:class:`SnapshotWriter`, whose thread computes their git blob ids and
compresses the contents no snapshot holds yet, off the request path (zlib
at 25-60 MB/s would otherwise double a record's time). A snapshot is stored
once per SHA-256, shared by every memo that read that content, and deleted
with the last memo resting on it (:meth:`~explomemo.store.Store.collect_snapshots`).
``EXPLOMEMO_SNAPSHOTS=off`` keeps the blob ids and no snapshot.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import zlib
from collections.abc import Iterable, Mapping

from explomemo.errors import StoreError
from explomemo.hashing import git_blob_id
from explomemo.store import Store

#: Files up to this size get a snapshot (and a diff); a larger one gets neither.
SNAPSHOT_MAX_BYTES = 1 << 20
#: zlib's default level: of stdlib zlib 1/3/6 and zstd 1/3/6 on 24 MB of
#: Python source, the smallest (0.255 of the size); its 25 MB/s runs off the
#: request path.
_LEVEL = 6
#: Kept contents waiting for the writer, at most: a record waits beyond it.
_PENDING_MAX_BYTES = 256 << 20

logger = logging.getLogger("explomemo")


def enabled(env: Mapping[str, str]) -> bool:
    """False when ``EXPLOMEMO_SNAPSHOTS=off`` (or 0, false, no)."""
    return env.get("EXPLOMEMO_SNAPSHOTS", "").strip().lower() not in {"off", "0", "false", "no"}


def compress(data: bytes) -> tuple[str, bytes]:
    """(codec, stored bytes) of a content: zlib, or the bytes as they are when that is smaller."""
    packed = zlib.compress(data, _LEVEL)
    return ("zlib", packed) if len(packed) < len(data) else ("raw", data)


def restore(codec: str, stored: bytes, sha256: str) -> bytes | None:
    """The content a snapshot holds; None when its codec is unknown or it is damaged."""
    try:
        if codec == "zlib":
            data = zlib.decompress(stored)
        elif codec == "raw":
            data = stored
        else:
            return None
    except zlib.error:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256 else None


class SnapshotWriter:
    """One thread that stores the blob ids and snapshots of recorded contents.

    :meth:`submit` hands it the contents of one record (by SHA-256) once the
    record's transaction committed; :meth:`pending` gives a read the contents
    not stored yet (a recall, show or stale report never waits for the
    writer); :meth:`wait` returns when everything submitted is stored;
    :meth:`close` finishes the work and stops the thread. A content whose
    memo was forgotten or replaced meanwhile is not stored.
    """

    def __init__(self, store: Store, keep_snapshots: bool) -> None:
        self.keep_snapshots = keep_snapshots
        self._store = store
        self._jobs: list[dict[str, bytes]] = []
        # The job being stored: its contents are still pending until it is.
        self._current: dict[str, bytes] = {}
        self._pending_bytes = 0
        self._busy = False
        self._closing = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, contents: dict[str, bytes]) -> None:
        """Store the blob ids (and snapshots) of these contents soon."""
        if not contents:
            return
        size = sum(len(data) for data in contents.values())
        with self._changed:
            self._changed.wait_for(
                lambda: self._pending_bytes + size <= _PENDING_MAX_BYTES or not self._jobs
            )
            if self._closing:
                return
            self._jobs.append(contents)
            self._pending_bytes += size
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="explomemo-snapshots", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def pending(self, contents: Iterable[str]) -> dict[str, bytes]:
        """The bytes of the contents among ``contents`` (SHA-256s) submitted, not stored yet,
        and to be snapshotted.

        What a read needs of a content the writer holds, without waiting for
        its write (which may wait for another process's lock): ask before
        reading the database, so a content stored meanwhile is found there.
        """
        if not self.keep_snapshots:
            return {}
        with self._changed:
            held = [self._current, *self._jobs]
            return {sha256: job[sha256] for sha256 in contents for job in held if sha256 in job}

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every submitted content is stored; False when ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._jobs and not self._busy, timeout)

    def close(self) -> None:
        """Store what was submitted, then stop the thread."""
        with self._changed:
            self._closing = True
            thread = self._thread
            self._changed.notify_all()
        if thread is not None:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._jobs or self._closing)
                if not self._jobs:
                    return
                contents = self._current = self._jobs.pop(0)
                self._busy = True
            try:
                self._store_contents(contents)
            except StoreError as exc:
                # The memo keeps no blob id or snapshot: its diffs come from
                # git history, found by its size and SHA-256.
                logger.warning("could not store snapshots: %s", exc)
            finally:
                with self._changed:
                    self._busy = False
                    self._current = {}
                    self._pending_bytes -= sum(len(data) for data in contents.values())
                    self._changed.notify_all()

    def _store_contents(self, contents: dict[str, bytes]) -> None:
        store = self._store
        blobs = [(sha256, git_blob_id(data)) for sha256, data in contents.items()]
        snapshots: list[tuple[str, str, bytes]] = []
        if self.keep_snapshots:
            with store.errors(), store.read() as conn:
                present = store.snapshot_contents(conn, contents)
            snapshots = [
                (sha256, *compress(data))
                for sha256, data in contents.items()
                if sha256 not in present
            ]
        with store.errors(), store.write() as conn:
            store.set_git_blobs(conn, blobs)
            store.save_snapshots(conn, snapshots)
