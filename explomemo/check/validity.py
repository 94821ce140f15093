"""The validity engine: is each recorded file still byte-identical?

A check costs one ``lstat`` per distinct file (and per folder) when nothing
changed, and one read per changed file otherwise, however many memos share
it. As git's index
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

import errno
import itertools
import os
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Literal, NamedTuple

from explomemo.check.hashing import Digest, hash_fd
from explomemo.check.readers import Helper, HelperError, Row, read_row, unchanged_while_read
from explomemo.files import Opener, Root
from explomemo.store.database import FileRow, StatRow, Store

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

FileState = Literal["unchanged", "changed", "missing"]
#: Called with (files read so far, files to read) while a check reads files.
Progress = Callable[[int, int], None]
#: What a file is now: the xxh3-128 of its content, None when it is missing
#: (or not a regular file), or RESIZED when its size matches no recorded size.
Seen = str | None
RESIZED = ""

#: An entry taken less than this after the file's last change is racy (2 s: FAT's granularity).
RACY_NS = 2_000_000_000

#: A file's identity as the stat cache compares it: (dev, ino, size, mtime_ns,
#: ctime_ns) packed in one bytes object, so a check fetches and compares one
#: object per file instead of five ints (measured: 7 % off a nothing-changed
#: check). A time outside int64 nanoseconds (before 1677, after 2262) cannot be
#: packed; its key is the tuple, which never equals a packed one.
_StatKey = bytes | tuple[int, int, int, int, int]
_pack_key = struct.Struct("=QQqqq").pack


def _stat_key(dev: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> _StatKey:
    try:
        return _pack_key(dev, ino, size, mtime_ns, ctime_ns)
    except struct.error:
        return (dev, ino, size, mtime_ns, ctime_ns)


class Expected(NamedTuple):
    """One path a check looks at, with what the memos recorded of it."""

    rel: str
    #: The absolute path under the root's real path, built once (its hash is kept with it).
    path: str
    #: Every size the path was recorded at.
    sizes: set[int]
    #: The xxh3 every memo recorded for the path; None when they recorded different contents.
    digest: str | None
    #: The folder of ``rel`` ("" for root).
    folder: str


def expect(root: Root, files: Iterable[FileRow]) -> list[Expected]:
    """What a check of ``files`` under ``root`` expects: one entry per distinct path.

    In path order: a check then stats folder by folder and meets the stat
    cache's entries in the order they were loaded (measured 15 % faster than
    the memos' order when nothing changed).
    """
    sizes: dict[str, set[int]] = {}
    digests: dict[str, set[str]] = {}
    for f in files:
        sizes.setdefault(f.path, set()).add(f.size)
        digests.setdefault(f.path, set()).add(f.xxh3)
    return [
        Expected(
            rel,
            root.absolute(rel),
            sizes[rel],
            next(iter(d)) if len(d) == 1 else None,
            rel.rpartition("/")[0],
        )
        for rel, d in sorted(digests.items())
    ]


def _folders_out_of_root(prefix: str, folders: Iterable[str]) -> set[str]:
    """The folders under ``prefix`` (a root's real path and "/") that lead out of it.

    One ``lstat`` per distinct folder (ancestors included), parents first; a
    folder that is a symbolic link is resolved, and it and everything under
    it lead out of root when its real path is not inside root.
    """
    every: set[str] = set()
    for folder in folders:
        while folder and folder not in every:
            every.add(folder)
            folder = folder.rpartition("/")[0]
    out: set[str] = set()
    for folder in sorted(every):
        if folder.rpartition("/")[0] in out:
            out.add(folder)
            continue
        try:
            if not stat.S_ISLNK(os.lstat(prefix + folder).st_mode):
                continue
            real = os.path.realpath(prefix + folder)
        except (OSError, ValueError):
            continue  # its files are missing: their own lstat says so
        if not (real + "/").startswith(prefix):
            out.add(folder)
    return out


def state_of(changes: Mapping[str, Seen], recorded: FileRow) -> FileState:
    """A recorded file's state, given what :meth:`Validator.observe` found.

    A path ``changes`` leaves out holds the one content every memo recorded
    for it, so it holds ``recorded``'s.
    """
    now = changes.get(recorded.path, recorded.xxh3)
    if now is None:
        return "missing"
    return "unchanged" if now == recorded.xxh3 else "changed"


class Validator:
    """Observes files for validity checks, with a stat cache kept in memory and in the store.

    One Validator lives as long as its caller: a server keeps it warm across
    requests; a CLI run loads the entries under its root from the database
    once, in one range query.
    """

    def __init__(
        self, store: Store | None, workers: int | None = None, progress: Progress | None = None
    ) -> None:
        self.progress = progress
        self._store = store
        self._workers = workers or os.cpu_count() or 1
        # Roots (absolute prefixes ending in "/") whose store entries are
        # loaded: every path under them is known from then on.
        self._loaded: set[str] = set()
        # Entries old enough to be trusted, as (stat key, xxh3): the hot path
        # of a check is one dict lookup and one bytes comparison per file.
        self._settled: dict[str, tuple[_StatKey, str]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        # Helper processes not in use by a check, and whether one ever failed
        # (then this Validator reads without them from then on).
        self._idle_helpers: list[Helper] = []
        self._started_helpers = 0
        self._helpers_failed = False
        self._closed = False

    def clear(self) -> None:
        """Forget the entries held in memory (the next check consults the store again)."""
        with self._lock:
            self._loaded.clear()
            self._settled.clear()

    def close(self) -> None:
        """Stop the hashing threads and the helper processes."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self._give_back_helpers([])

    def observe(self, root: Root, expected: Sequence[Expected]) -> dict[str, Seen]:
        """What each expected path is now, for the paths that may not hold their recorded content.

        A path left out of the answer holds exactly its ``digest``: its
        ``lstat`` matches a settled entry of that content (it was not read),
        or it was read and found to hold it. Nothing changed costs one
        ``lstat`` per path and per folder, and an empty answer. A file whose
        size matches no recorded size is known changed without being read.
        """
        prefix = root.absolute("")
        if prefix not in self._loaded:
            self._load_root(prefix)
        # A file's stat does not change when a folder on its way is moved out
        # of root and linked back: the files under such a folder skip the
        # stat cache, and the Opener refuses them.
        outside = _folders_out_of_root(prefix, {e.folder for e in expected})
        settled_get = self._settled.get
        pack_key = _pack_key
        os_lstat = os.lstat
        is_regular = stat.S_ISREG
        is_link = stat.S_ISLNK
        changes: dict[str, Seen] = {}
        to_read: list[tuple[str, str | None]] = []
        to_read_bytes = 0
        for rel, path, sizes, digest, folder in expected:
            try:
                st = os_lstat(path)
            except (OSError, ValueError) as exc:
                if getattr(exc, "errno", None) == errno.ENAMETOOLONG:
                    # Over PATH_MAX with its root: the Opener reads it folder by folder.
                    to_read.append((rel, digest))
                else:
                    changes[rel] = None
                continue
            hit = settled_get(path)
            if hit is not None and not (outside and folder in outside):
                # _stat_key, inlined: this is the loop a check spends its time in.
                try:
                    key: _StatKey = pack_key(
                        st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
                    )
                except struct.error:
                    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                if hit[0] == key:
                    if hit[1] != digest:
                        changes[rel] = hit[1]
                    continue
            if is_link(st.st_mode):
                # A recorded file that is a link (allowed while it stays in
                # root) is read through the Opener every time: where it leads
                # may have moved without its target's stat changing.
                to_read.append((rel, digest))
            elif not is_regular(st.st_mode):
                changes[rel] = None
            elif st.st_size not in sizes:
                changes[rel] = RESIZED
            else:
                to_read.append((rel, digest))
                to_read_bytes += st.st_size
        if to_read:
            # In path order, folder by folder: measured about a tenth faster
            # than the memos' order (locality in the kernel's caches).
            to_read.sort(key=itemgetter(0))
            rels = [rel for rel, _ in to_read]
            rows = self._read_all(root, rels, to_read_bytes)
            self._take(prefix, rels, rows)
            for (rel, digest), row in zip(to_read, rows, strict=True):
                if row is None:
                    changes[rel] = None
                elif row[5] != digest:
                    changes[rel] = row[5]
        return changes

    def _take(self, prefix: str, rels: list[str], rows: list[Row | None]) -> None:
        """Keep what was read as stat-cache entries, where they can be trusted.

        An entry taken within :data:`RACY_NS` of its file's last change is
        never trusted, now or later (its times are fixed), so it is neither
        kept nor written: its file is read again next time, as it would be.
        """
        trusted: dict[str, StatRow] = {}
        untrusted: list[str] = []
        for rel, row in zip(rels, rows, strict=True):
            if row is None:
                untrusted.append(prefix + rel)
                continue
            _, _, _, mtime_ns, ctime_ns, _, cached_at_ns = row
            if cached_at_ns - max(mtime_ns, ctime_ns) > RACY_NS:
                trusted[prefix + rel] = StatRow(*row)
            else:
                untrusted.append(prefix + rel)
        with self._lock:
            for path in untrusted:
                self._settled.pop(path, None)
        if trusted:
            self.remember(trusted)

    def remember(self, entries: dict[str, StatRow], persist: bool = True) -> None:
        """Add stat-cache entries in memory, and in the store (when writable) if ``persist``.

        Only entries that can ever be trusted (not racy) are written, in one
        transaction and one ``executemany``.
        """
        with self._lock:
            self._learn(entries)
        if self._store is None or not persist:
            return
        lasting = {path: entry for path, entry in entries.items() if _trusted(entry)}
        if not lasting:
            return
        store = self._store
        # Never waits behind this process's other writes (a check must not queue
        # behind a record that waits for another process's lock). The stat cache
        # is only a speed-up: a read-only or busy database costs the next run a
        # re-read, never a wrong answer.
        store.write_cache(lambda conn: store.save_stat_rows(conn, lasting))

    def _learn(self, entries: dict[str, StatRow]) -> None:
        for path, entry in entries.items():
            if _trusted(entry):
                key = _stat_key(entry.dev, entry.ino, entry.size, entry.mtime_ns, entry.ctime_ns)
                self._settled[path] = (key, entry.xxh3)
            else:
                self._settled.pop(path, None)

    def _load_root(self, prefix: str) -> None:
        """Load every store entry under a root (one range query); all its paths become known.

        An entry this process already holds is kept: both are true of the
        stat key they carry, and a check trusts an entry only when the file's
        stat matches that key.
        """
        rows: list[tuple[str, int, int, int, int, int, str]] = []
        if self._store is not None:
            with self._store.errors(), self._store.read() as conn:
                rows = self._store.stat_rows_under(conn, prefix, RACY_NS)
        with self._lock:
            settled = self._settled
            settled.update(
                {
                    path: (_stat_key(dev, ino, size, mtime_ns, ctime_ns), xxh3)
                    for path, dev, ino, size, mtime_ns, ctime_ns, xxh3 in rows
                    if path not in settled
                }
            )
            self._loaded.add(prefix)

    def _read_all(self, root: Root, rels: list[str], nbytes: int) -> list[Row | None]:
        """Read each file once (``nbytes`` in all, as last seen); on every core when that is faster.

        Workers (the calling thread is one) take batches of files in turn.
        A read of at least :data:`HELPERS_MIN_BYTES` is shared with helper
        processes (:mod:`explomemo.check.readers`), one per other core, each fed by
        a thread here that waits for its answers; a smaller read of files
        that average :data:`PARALLEL_MEAN_BYTES` with threads; any other read
        is the calling thread's alone. A worker reading here keeps its own
        :class:`Opener`, whose folders stay open for the check.
        """
        total = len(rels)
        results: list[Row | None] = [None] * total
        if not total:
            return results
        # Earlier than any file's fstat: an entry is never trusted too soon.
        taken_at = time.time_ns()
        racy_ns = RACY_NS
        workers = max(1, min(self._workers, total // _MIN_FILES_PER_WORKER))
        processes: list[Helper] = []
        if workers > 1 and nbytes >= HELPERS_MIN_BYTES:
            processes = self._take_helpers(workers - 1)
        if processes:
            # Helpers found busy by another check are not made up for with threads.
            workers = 1 + len(processes)
        elif nbytes < PARALLEL_MEAN_BYTES * total:
            workers = 1
        batch = max(1, min(_MAX_BATCH, total // (workers * 4)))
        batches = itertools.count()
        done = [0] * workers
        stop = threading.Event()
        progress = self.progress

        def work(worker: int) -> None:
            helper = processes[worker - 1] if 0 < worker <= len(processes) else None
            try:
                with Opener(root) as opener:
                    while not stop.is_set():
                        start = next(batches) * batch
                        if start >= total:
                            return
                        end = min(start + batch, total)
                        if helper is not None:
                            try:
                                results[start:end] = helper.read(
                                    root, rels[start:end], taken_at, racy_ns
                                )
                            except HelperError:
                                # Its batch, and the rest of its share, are read here.
                                self._helpers_failed = True
                                helper = None
                        if helper is None:
                            for i in range(start, end):
                                results[i] = read_row(opener, rels[i], taken_at, racy_ns)
                        done[worker] += end - start
                        if worker == 0 and progress is not None:
                            progress(sum(done), total)
            except BaseException:
                stop.set()  # the other workers stop after their batch
                raise

        try:
            if workers == 1:
                work(0)
            else:
                self._work_on_threads(work, workers)
        finally:
            self._give_back_helpers(processes)
        if progress is not None:
            progress(total, total)
        return results

    def _work_on_threads(self, work: Callable[[int], None], workers: int) -> None:
        """Run ``work(0)`` here and ``work(1)`` … ``work(workers - 1)`` on the pool's threads."""
        # Imported here: concurrent.futures (and logging with it) costs a
        # command that reads on one thread a tenth of its start-up.
        from concurrent.futures import ThreadPoolExecutor, wait

        futures: list[Future[None]] = []
        with self._lock:
            if self._pool is None and not self._closed:
                self._pool = ThreadPoolExecutor(
                    max(1, self._workers - 1), thread_name_prefix="explomemo-hash"
                )
            pool = self._pool
        try:
            for worker in range(1, workers):
                if pool is not None:
                    futures.append(pool.submit(work, worker))
        except RuntimeError:
            pass  # closed meanwhile: the workers started take every batch
        try:
            work(0)
        finally:
            # Never return (or raise) while another worker still writes into results.
            wait(futures)
        for future in futures:
            future.result()  # another worker's exception is this call's

    def _take_helpers(self, count: int) -> list[Helper]:
        """Up to ``count`` helper processes for one read: idle ones, or new ones.

        No more than one per other core ever runs; a read that finds them all
        busy (another check is reading) goes without. None after one failed,
        or once the Validator is closed.
        """
        with self._lock:
            if self._helpers_failed or self._closed:
                return []
            taken = self._idle_helpers[:count]
            del self._idle_helpers[:count]
            starting = max(0, min(count - len(taken), self._workers - 1 - self._started_helpers))
            self._started_helpers += starting
        for _ in range(starting):
            try:
                taken.append(Helper())
            except HelperError:
                with self._lock:
                    self._helpers_failed = True
                    self._started_helpers -= 1
        return taken

    def _give_back_helpers(self, helpers: list[Helper]) -> None:
        """Keep the helpers of a finished read for the next; stop them all after a
        failure or once the Validator is closed."""
        with self._lock:
            if self._helpers_failed or self._closed:
                done = helpers + self._idle_helpers
                self._idle_helpers = []
                self._started_helpers -= len(done)
            else:
                self._idle_helpers += helpers
                done = []
        for helper in done:
            helper.close()


#: Files are read on every core only when they average at least this size. Each
#: file costs a few microseconds of Python holding the GIL and five or six
#: short calls that release it; below this size, threads spend more in
#: hand-offs of the GIL than they gain (measured on 2 cores: 100 KB files read
#: 1.3-2x slower on two threads, 256 KB ones 1.1-1.4x faster, 1 MB and more
#: 1.5-2x faster).
PARALLEL_MEAN_BYTES = 256 * 1024
#: A read of at least this many bytes is shared with helper processes, whatever
#: the files' sizes (they share no GIL). A helper starts in about 40 ms, during
#: which this process reads on; one that exists already is reused.
HELPERS_MIN_BYTES = 64 * 1024 * 1024
#: Fewer files than this per worker are read by fewer workers (threads cost more than they save).
_MIN_FILES_PER_WORKER = 16
#: Files a worker takes at a time: small enough to balance, large enough to spare hand-offs.
_MAX_BATCH = 64


def _trusted(entry: StatRow) -> bool:
    """Whether an entry was taken long enough after its file's last change to be trusted."""
    return entry.cached_at_ns - max(entry.mtime_ns, entry.ctime_ns) > RACY_NS


def digest_entry(
    fd: int,
    *,
    sha256: bool,
    limit: int | None = None,
    keep: int = 0,
) -> tuple[Digest, StatRow]:
    """Digest an open file and make the stat-cache entry that vouches for the digest.

    ``keep``: see :func:`~explomemo.check.hashing.hash_fd`.
    """
    taken_at = time.time_ns()
    before = os.fstat(fd)
    digest = hash_fd(fd, sha256=sha256, limit=limit, expected_size=before.st_size, keep=keep)
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
        cached_at_ns=taken_at if unchanged_while_read(before, after, digest.size) else 0,
    )
    return digest, entry
