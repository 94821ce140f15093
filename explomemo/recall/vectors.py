"""Vector upkeep: each memo's two vectors, and the in-memory indexes.

A memo has two vectors: one of its whole text (question, file names,
conclusion) and one of its question with its file names. Both are stored as
float32 bytes with the model that made them; an embedding cache keyed by
xxh3 of (model, text) means no text is embedded twice.

A memo this process records gets its vectors before it is stored
(:meth:`Vectors.compute`). :class:`Vectors` keeps each searched project's
:class:`~explomemo.recall.search.VectorIndex` in memory, updated in place after
this process's own writes and brought up to date after another process's; in a
server (:meth:`Vectors.keep_filled`) one thread fills the vectors of the memos other
processes wrote without them and reads the outdated indexes again.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import xxhash

from explomemo.errors import ExplomemoError
from explomemo.recall.memory import release_freed_memory
from explomemo.store.database import Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from explomemo.recall.embeddings import Embedder
    from explomemo.recall.search import VectorHits, VectorIndex

#: Memos embedded at a time by a fill: a closing fill stops between batches, so
#: a batch (two texts a memo, up to 100 ms a long text) bounds how long close waits.
FILL_BATCH = 2
#: How often an idle server looks whether another process wrote memos.
POLL_SECONDS = 2.0

logger = logging.getLogger("explomemo")


def embedding_text(question: str, conclusion: str, paths: Sequence[str]) -> str:
    """What a memo's whole vector is computed from: question, file names, conclusion."""
    return f"{question_text(question, paths)}\n{conclusion}"


def question_text(question: str, paths: Sequence[str]) -> str:
    """What a memo's question vector is computed from: the question and its file names.

    File names without folders and extensions ("httpx/_client.py" is "client")
    carry the meaning of a path in a few tokens; the model reads at most 256.
    They come in path order, so the text does not depend on the order the
    files were given in.
    """
    names: list[str] = []
    for path in sorted(paths):
        name = path.rsplit("/", 1)[-1].split(".", 1)[0].strip("_").replace("_", " ")
        if name and name not in names:
            names.append(name)
    return f"{question}\n{' '.join(names)}"


def text_hash(model_id: str, text: str) -> str:
    """The embedding-cache key of a text for a model."""
    return xxhash.xxh3_128_hexdigest(model_id.encode() + b"\x00" + text.encode())


@dataclass(frozen=True)
class MemoTexts:
    """The two texts a memo's vectors are computed from."""

    whole: str
    question: str

    @classmethod
    def of(cls, question: str, conclusion: str, paths: Sequence[str]) -> MemoTexts:
        """The texts of a memo with this question, conclusion and file paths."""
        return cls(embedding_text(question, conclusion, paths), question_text(question, paths))


@dataclass(frozen=True)
class MemoVectors:
    """A memo's two vectors as stored (float32 bytes), the model, and the whole text's key."""

    whole: bytes
    question: bytes
    model_id: str
    text_hash: str


@dataclass(frozen=True)
class Computed:
    """A memo's vectors, and those of its texts the embedding cache did not hold yet
    (by key: stored in the transaction that stores the memo)."""

    vectors: MemoVectors
    fresh: dict[str, bytes]


@dataclass(frozen=True)
class Searched:
    """A search of an index: its hits, and the index's version, memos without vectors and
    memos with vectors as they were when it was searched."""

    hits: VectorHits
    version: int
    lacking: int
    count: int


@dataclass(frozen=True)
class _FillJob:
    """Give every memo without vectors of the embedder's model its vectors."""

    embedder: Embedder


@dataclass(frozen=True)
class _BuildJob:
    """Read a project's index from the database for the first time."""

    project: str
    model_id: str
    dim: int


class Vectors:
    """The vectors of one database's memos: their upkeep and the in-memory indexes.

    A memo this process records is stored with its vectors. A search uses the
    index as the database holds it: read the first time, followed in place by
    this process's writes, and after another process's writes caught up with
    the memos recorded since (:meth:`index`). The memos it still lacks vectors
    of are embedded by the search itself when they are few (:meth:`catch_up`),
    otherwise searched by words. In a server (:meth:`keep_filled`) the vector
    thread fills them and reads outdated indexes again; elsewhere (a command)
    an outdated index is read again at the next search.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_FillJob | _BuildJob | None] = queue.SimpleQueue()
        self._state = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        # Set by keep_filled: the embedder the vector thread fills and refreshes with.
        self._filling: Embedder | None = None
        self._fill_queued = False
        self._fill_running = False
        # The memo version the vector thread last saw (moved by any writer).
        self._seen_version = -1
        # Projects whose first index the vector thread is reading, and its signal when done.
        self._building: set[str] = set()
        self._built = threading.Condition(self._lock)
        # The memo version up to which each project's index has caught up with the memos
        # other processes recorded (see _catch_up_newer).
        self._newer_seen: dict[str, int] = {}

    def close(self) -> None:
        """Stop the vector thread: a fill stops after the batch under way (at most
        :data:`FILL_BATCH` memos), a first read of an index is not begun. Memos this
        process recorded hold their vectors already."""
        with self._state:
            self._closing = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    # Recorded memos --------------------------------------------------------

    def compute(self, embedder: Embedder, texts: MemoTexts) -> Computed:
        """Both vectors of ``texts``, from the embedding cache or computed now."""
        model_id = embedder.model_id
        keys = (text_hash(model_id, texts.whole), text_hash(model_id, texts.question))
        with self.store.errors(), self.store.read() as conn:
            found = self.store.cached_vectors(conn, keys)
        missing = [(key, text) for key, text in zip(keys, _pair(texts), strict=True)]
        missing = [(key, text) for key, text in missing if key not in found]
        fresh: dict[str, bytes] = {}
        if missing:
            rows = embedder.embed([text for _, text in missing])
            fresh = {key: rows[n].tobytes() for n, (key, _) in enumerate(missing)}
        vectors = {**found, **fresh}
        return Computed(MemoVectors(vectors[keys[0]], vectors[keys[1]], model_id, keys[0]), fresh)

    def recorded(
        self, project: str, before: int, after: int, memo_id: int, stored: MemoVectors | None
    ) -> None:
        """Inside the write transaction that recorded a memo (with ``stored`` vectors, or
        none): update the project's index."""
        self._update_in_place(project, before, after, memo_id, stored)

    def keep_filled(self, embedder: Embedder) -> None:
        """From now on the vector thread gives vectors of ``embedder``'s model to the memos
        without them (now, and whenever any process wrote some), and brings the indexes
        up to date after another process's writes."""
        with self._state:
            if self._closing:
                return
            self._filling = embedder
            self._start()
        self.fill_later()

    def fill_later(self) -> None:
        """Queue a fill on the vector thread (once: a fill queued already covers it)."""
        with self._state:
            if self._closing or self._filling is None or self._fill_queued:
                return
            self._fill_queued = True
            self._start()
        self._jobs.put(_FillJob(self._filling))

    def settled(self, timeout: float | None = None) -> bool:
        """Wait until no fill and no first read of an index is queued or running (what a
        server's vector thread was given is done); False when ``timeout`` seconds passed
        first."""
        with self._state:
            return self._state.wait_for(self._idle, timeout)

    def _idle(self) -> bool:
        # _building is read without its lock (a set's size): taking _lock under
        # _state would order the two locks against _build_step's.
        return not (self._fill_queued or self._fill_running or self._building)

    def _start(self) -> None:
        """Start the vector thread if it is not running (``_state`` held)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, name="explomemo-vectors", daemon=True
            )
            self._thread.start()

    def _next_job(self) -> _FillJob | _BuildJob | None:
        """The next job; while a server keeps the vectors filled, a fill whenever the
        memo version moved without a job of ours (another process wrote)."""
        while True:
            try:
                return self._jobs.get(timeout=POLL_SECONDS if self._filling else None)
            except queue.Empty:
                self.notice_writes()

    def notice_writes(self) -> None:
        """Queue a fill when another process wrote memos since this was last asked.

        Cheap (one row read): called by each search and by an idle vector thread.
        """
        if self._filling is None:
            return
        try:
            with self.store.errors():
                version = self.store.memo_version()
        except ExplomemoError:
            return
        if version != self._seen_version:
            self.fill_later()

    def _work(self) -> None:
        while (job := self._next_job()) is not None:
            if isinstance(job, _FillJob):
                self._fill_step(job)
            else:
                self._build_step(job)

    def _fill_step(self, job: _FillJob) -> None:
        """One batch of a fill; the rest goes back in the queue. Once none is left, the
        indexes another process's writes outdated are read again."""
        with self._state:
            self._fill_queued = False
            self._fill_running = True
        try:
            with self.store.errors():
                version = self.store.memo_version()
            more = not self._closing and self._fill_batch(job.embedder, FILL_BATCH) > 0
            if not more and not self._closing:
                self._seen_version = version
                self._refresh(job.embedder)
        except Exception as exc:
            # Any failure (onnxruntime raises its own errors) leaves the rest
            # of the fill to the next one; the thread lives on.
            logger.warning("could not embed memos recorded without a model: %s", _one_line(exc))
            more = False
        if more:
            self.fill_later()
        with self._state:
            self._fill_running = False
            self._state.notify_all()

    def _current_texts(self, conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, MemoTexts]:
        """The texts of each memo as the database holds it now."""
        files = self.store.files_of(conn, ids)
        return {
            memo.id: MemoTexts.of(
                memo.question, memo.conclusion, [f.path for f in files.get(memo.id, [])]
            )
            for memo in self.store.memos(conn, ids=ids)
        }

    # Fills -----------------------------------------------------------------

    def fill(
        self,
        embedder: Embedder,
        batch: int = FILL_BATCH,
        project: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Give both vectors of ``embedder``'s model to every memo (of ``project``, or all)
        without them; returns how many. ``progress(done, total)`` is called after each batch.

        Each batch is committed as it is computed, so a fill stopped on the way
        (once closing, between batches) keeps what it did.
        """
        total = self.lacking(embedder.model_id, project)
        done = 0
        while not self._closing:
            filled = self._fill_batch(embedder, batch, project)
            if not filled:
                break
            done += filled
            if progress is not None:
                progress(done, max(total, done))
        return done

    def lacking(self, model_id: str, project: str | None = None) -> int:
        """How many memos (of ``project``, or all) lack both vectors of ``model_id``."""
        with self.store.errors(), self.store.read() as conn:
            return len(self.store.memos_needing_embedding(conn, model_id, -1, project))

    def backlog(self, model_id: str, project: str, most: int) -> int:
        """How many of ``project``'s memos lack vectors of ``model_id``, counted up to
        ``most`` + 1 (more than ``most`` is all a caller needs to know)."""
        with self.store.errors(), self.store.read() as conn:
            return len(self.store.memos_needing_embedding(conn, model_id, most + 1, project))

    def _fill_batch(self, embedder: Embedder, batch: int, project: str | None = None) -> int:
        """Give vectors to up to ``batch`` memos (of ``project``, or all) without them;
        returns how many it embedded."""
        with self.store.errors(), self.store.read() as conn:
            ids = self.store.memos_needing_embedding(conn, embedder.model_id, batch, project)
        return self._embed_memos(embedder, ids)

    def _embed_memos(self, embedder: Embedder, ids: Sequence[int]) -> int:
        """Give vectors to the memos ``ids`` (committed together); returns how many it
        embedded (a memo gone meanwhile is not)."""
        with self.store.errors(), self.store.read() as conn:
            texts = self._current_texts(conn, ids)
            projects = {m.id: m.project for m in self.store.memos(conn, ids=ids)}
        computed = self._embed(embedder, [t for pair in texts.values() for t in _pair(pair)])
        with self.store.errors(), self.store.write() as conn:
            # A memo recorded again while its text was embedded keeps the
            # vectors of its new text (and is embedded again by the next batch).
            current = self._current_texts(conn, ids)
            for n, (memo_id, pair) in enumerate(texts.items()):
                if current.get(memo_id) != pair:
                    continue
                vectors = MemoVectors(
                    computed[2 * n],
                    computed[2 * n + 1],
                    embedder.model_id,
                    text_hash(embedder.model_id, pair.whole),
                )
                before = self.store.memo_version(conn)
                _store(self.store, conn, memo_id, vectors)
                self._update_in_place(
                    projects[memo_id], before, self.store.memo_version(conn), memo_id, vectors
                )
        return len(texts)

    def _embed(self, embedder: Embedder, texts: Sequence[str]) -> list[bytes]:
        """float32 bytes of each text, through the embedding cache."""
        keys = [text_hash(embedder.model_id, t) for t in texts]
        with self.store.errors(), self.store.read() as conn:
            cached = self.store.cached_vectors(conn, keys)
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in cached}
        if missing:
            rows = embedder.embed(list(missing.values()))
            fresh = {k: rows[n].tobytes() for n, k in enumerate(missing)}
            with self.store.errors(), self.store.write() as conn:
                self.store.cache_vectors(conn, fresh)
            cached.update(fresh)
        return [cached[k] for k in keys]

    def catch_up(self, embedder: Embedder, project: str, most: int) -> int:
        """Embed the memos of ``project`` its index lacks vectors of, when there are at
        most ``most`` (a few memos another process wrote: the search embeds them rather
        than search them by words); returns how many it embedded."""
        with self._lock:
            index = self._indexes.get(project)
            if index is None or index.model_id != embedder.model_id:
                return 0
            if not index.pending or len(index.pending) > most:
                return 0
            ids = sorted(index.pending)
        return self._embed_memos(embedder, ids)

    # Indexes ---------------------------------------------------------------

    def index(self, embedder: Embedder, project: str, dim: int) -> VectorIndex:
        """The project's vectors of the embedder's model, as far as they are computed.

        Read from the database the first time (or waited for, when a server's vector
        thread is reading it ahead: 1.6 s at 100,000 memos); after that kept up to date in
        place by this process's writes. When another process wrote, a server's index
        takes in the memos recorded since it was read (their ids are higher) and is
        read again whole by the vector thread; elsewhere it is read again now. It
        never embeds a memo.
        """
        with self.store.errors():
            version = self.store.memo_version()
            with self._lock:
                index = self._indexes.get(project)
            if index is not None and index.model_id == embedder.model_id:
                if index.version == version:
                    return index
                if self._filling is not None:
                    self._catch_up_newer(index, project, version)
                    self.fill_later()
                    return index
            if project in self._building:
                # Read ahead by the vector thread: wait for that read, not begin another.
                built = self._built_within(project, embedder.model_id, dim, None)
                if built is not None:
                    return built
            # Two arrays of a large project must not live at once.
            self.drop_index(project)
            del index
            index = self._build(embedder.model_id, project, dim)
        release_freed_memory()
        with self._lock:
            self._indexes[project] = index
        return index

    def _catch_up_newer(self, index: VectorIndex, project: str, version: int) -> None:
        """Put into ``index`` the memos another process recorded since it was read: those of
        higher ids, with their vectors, or counted as lacking them. (A memo another process
        recorded again or forgot is brought up to date by the whole read that follows.)"""
        with self._lock:
            if self._newer_seen.get(project) == version:
                return
            after = index.newest
        from explomemo.recall.search import read_newer

        with self.store.read() as conn:
            rows = read_newer(conn, project, index.model_id, after)
        with self._lock:
            if self._indexes.get(project) is not index:
                return
            for memo_id, whole, question in rows:
                if whole is not None and question is not None:
                    try:
                        index.upsert(memo_id, whole, question)
                    except ValueError:
                        index.pending.add(memo_id)
                        index.newest = max(index.newest, memo_id)
                else:
                    index.pending.add(memo_id)
                    index.newest = max(index.newest, memo_id)
            self._newer_seen[project] = version

    def search(self, index: VectorIndex, query: npt.NDArray[np.float32], n: int) -> Searched:
        """``index.top(query, n)``, with what the index held when it was searched.

        The vector thread may put vectors into the index at any moment: the memos
        it gave vectors to after this moment were still searched by words.
        """
        with self._lock:
            seen = (index.version, index.lacking, index.count)
        return Searched(index.top(query, n), *seen)

    def searched_by_words(self, searched: Searched, project: str) -> int:
        """How many of ``project``'s memos a search found by words only: those the index
        lacked vectors of when it was searched, and those another process wrote since it
        was read and the index has not taken in."""
        if searched.version == self.store.memo_version():
            return searched.lacking
        with self.store.errors(), self.store.read() as conn:
            total = self.store.memo_count(conn, project)
        return max(searched.lacking, total - searched.count)

    def _build(self, model_id: str, project: str, dim: int) -> VectorIndex:
        from explomemo.recall.search import build_vector_index

        # Not on the shared read connection: the other threads' reads go on meanwhile.
        with self.store.read_apart() as conn:
            version = self.store.memo_version(conn)
            return build_vector_index(conn, project, model_id, dim, version)

    def read_ahead(self, embedder: Embedder, project: str) -> None:
        """Have the vector thread read a project's index now, before a recall asks for it."""
        if self._closing:
            return
        try:
            dim = int(embedder.embed(["dimension"]).shape[1])
        except Exception as exc:
            # Only a head start: the first recall asks for the index anyway.
            if not self._closing:
                logger.warning(
                    "could not read the vectors of %s ahead: %s", project, _one_line(exc)
                )
            return
        self._built_within(project, embedder.model_id, dim, 0)

    def _built_within(
        self, project: str, model_id: str, dim: int, wait: float | None
    ) -> VectorIndex | None:
        """Have the vector thread read the project's index (once), and give it if it is
        there within ``wait`` seconds (None: until the read ends). None too when the read
        failed, or was not begun (closing)."""

        def built() -> VectorIndex | None:
            index = self._indexes.get(project)
            return index if index is not None and index.model_id == model_id else None

        with self._lock:
            if built() is None and project not in self._building and not self._closing:
                self._building.add(project)
                self._jobs.put(_BuildJob(project, model_id, dim))
            self._built.wait_for(lambda: project not in self._building, wait)
            return built()

    def _build_step(self, job: _BuildJob) -> None:
        """Read a project's first index. This process's writers go on meanwhile: one that
        lands during the read leaves the index behind the memo version, and it catches up
        (see :meth:`index`), as after another process's write."""
        try:
            if self._closing:
                return
            with self._lock:
                current = self._indexes.get(job.project)
                done = current is not None and current.model_id == job.model_id
            del current
            if not done:
                self._read_again(job.model_id, job.project, job.dim)
        except Exception as exc:
            # Only a head start: the recall that asks reads the index itself.
            logger.warning("could not read the vectors of %s: %s", job.project, _one_line(exc))
        finally:
            with self._lock:
                self._building.discard(job.project)
                self._built.notify_all()
            with self._state:
                self._state.notify_all()

    def _refresh(self, embedder: Embedder) -> None:
        """Read again each index another process's writes outdated (on the vector thread).

        Each is read while this process's writers wait (they would be missing
        from it), so the new one is exact as of its version.
        """
        with self.store.errors():
            version = self.store.memo_version()
        with self._lock:
            outdated = [
                (p, i.dim)
                for p, i in self._indexes.items()
                if i.model_id == embedder.model_id and i.version != version
            ]
        for project, dim in outdated:
            with self.store.lock:
                self._read_again(embedder.model_id, project, dim)

    def _read_again(self, model_id: str, project: str, dim: int) -> None:
        """Replace the project's index with one read now (the old one dropped first: two
        arrays of a large project must not live at once)."""
        self.drop_index(project)
        with self.store.errors():
            fresh = self._build(model_id, project, dim)
        with self._lock:
            self._indexes[project] = fresh
        del fresh
        release_freed_memory()

    def drop_index(self, project: str) -> None:
        """Forget the project's index (the next search reads it again)."""
        with self._lock:
            self._indexes.pop(project, None)
            self._newer_seen.pop(project, None)

    def _update_in_place(
        self,
        project: str,
        before: int,
        after: int,
        memo_id: int,
        vectors: MemoVectors | None,
    ) -> None:
        """Inside this process's write transaction (so in the order the writes land), bring
        the project's index up to date: the memo's vectors in place, or the memo counted
        as lacking them until they come.

        The index stays current only when nothing else wrote since it was
        built (its version is the one the transaction started from); otherwise
        it is marked outdated and read again later (see :meth:`index`). At
        100,000 memos a rebuild costs a second.
        """
        with self._lock:
            if self._seen_version == before:
                self._seen_version = after
            index = self._indexes.get(project)
            if index is None:
                return
            if vectors is not None and vectors.model_id == index.model_id:
                try:
                    index.upsert(memo_id, vectors.whole, vectors.question)
                except ValueError:
                    del self._indexes[project]
                    return
            elif index.without_vectors([memo_id]):
                index.pending.add(memo_id)
                index.newest = max(index.newest, memo_id)
            if index.version == before:
                index.version = after


def _one_line(exc: Exception) -> str:
    """An error as one log line: its message's lines joined, after its type unless it is ours."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, ExplomemoError) else f"{type(exc).__name__}: {text}"


def _pair(texts: MemoTexts) -> tuple[str, str]:
    return (texts.whole, texts.question)


def _store(store: Store, conn: sqlite3.Connection, memo_id: int, vectors: MemoVectors) -> None:
    store.set_embedding(
        conn, memo_id, vectors.whole, vectors.question, vectors.model_id, vectors.text_hash
    )


_query_cache: dict[tuple[str, str], npt.NDArray[np.float32]] = {}


def query_vector(embedder: Embedder, query: str) -> npt.NDArray[np.float32]:
    """The vector of a query (the last 256 queries are remembered)."""
    key = (embedder.model_id, query)
    vector = _query_cache.get(key)
    if vector is None:
        vector = embedder.embed([query])[0]
        if len(_query_cache) > 256:
            _query_cache.clear()
        _query_cache[key] = vector
    return vector
