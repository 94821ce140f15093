"""Vector upkeep: each memo's two vectors, computed off the request path, and the in-memory indexes.

A memo has two vectors: one of its whole text (question, file names,
conclusion) and one of its question with its file names. Both are stored as
float32 bytes with the model that made them; an embedding cache keyed by
xxh3 of (model, text) means no text is embedded twice.

:class:`Vectors` owns one thread that computes the vectors of the memos this
process records (so ``record`` answers before the model has run) and fills
the memos that lack them once the model is loaded; it keeps each searched
project's :class:`~explomemo.recall.search.VectorIndex` in memory, updated in place
after this process's own writes and rebuilt when another process wrote.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
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

#: How long ``close`` goes on computing queued vectors before it leaves the
#: rest to the next fill (the memos are stored; only their vectors wait).
CLOSE_SECONDS = 2.0
#: Memos embedded at a time by a fill: a closing fill stops between batches, so
#: a batch (two texts a memo, up to 100 ms a long text) bounds how long close waits.
FILL_BATCH = 2
#: How often an idle server's vector thread looks whether another process wrote memos.
POLL_SECONDS = 2.0
#: A server reads the first index of a project of more memos than this on its vector
#: thread, not in the recall that asks for it (reading takes 16 to 24 us a memo: a recall
#: waits 50 ms at most). Smaller ones are read at once.
READ_INLINE_MEMOS = 2_000

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
class Searched:
    """A search of an index: its hits, and the index's version, memos without vectors and
    memos with vectors as they were when it was searched."""

    hits: VectorHits
    version: int
    lacking: int
    count: int


@dataclass(frozen=True)
class _VectorJob:
    """A recorded memo whose vectors are computed after the record returned."""

    memo_id: int
    project: str
    texts: MemoTexts
    embedder: Embedder


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

    A search never computes a memo's vectors: it uses the index as it is and
    searches the memos without vectors by words. In a server
    (:meth:`keep_filled`) the vector thread fills them, then brings the indexes
    up to date after another process wrote; elsewhere (a command) an index
    another process left behind is read again at the next search.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.Lock()
        # _pending counts the jobs of each project not finished yet.
        self._jobs: queue.SimpleQueue[_VectorJob | _FillJob | _BuildJob | None] = (
            queue.SimpleQueue()
        )
        self._pending: dict[str, int] = {}
        self._pending_changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._deadline = 0.0
        # Set by keep_filled: the embedder the vector thread fills and refreshes with.
        self._filling: Embedder | None = None
        self._fill_queued = False
        self._fill_running = False
        # The memo version the vector thread last saw (moved by any writer).
        self._seen_version = -1
        # Projects whose first index the vector thread is reading, and its signal when done.
        self._building: set[str] = set()
        self._built = threading.Condition(self._lock)
        # When the read of a project's index last failed (time.monotonic()).
        self._read_failed: dict[str, float] = {}

    def close(self) -> None:
        """Stop the vector thread: vectors being computed are stored, queued ones computed
        for up to :data:`CLOSE_SECONDS`; memos left without vectors get them on a later fill."""
        with self._pending_changed:
            self._deadline = time.monotonic() + CLOSE_SECONDS
            self._closing = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    # Recorded memos --------------------------------------------------------

    def cached(self, embedder: Embedder, texts: MemoTexts) -> MemoVectors | None:
        """Both vectors of ``texts`` from the embedding cache, or None."""
        model_id = embedder.model_id
        keys = (text_hash(model_id, texts.whole), text_hash(model_id, texts.question))
        with self.store.errors(), self.store.read() as conn:
            found = self.store.cached_vectors(conn, keys)
        if not all(key in found for key in keys):
            return None
        return MemoVectors(found[keys[0]], found[keys[1]], model_id, keys[0])

    def recorded(
        self,
        project: str,
        before: int,
        after: int,
        memo_id: int,
        *,
        stored: MemoVectors | None,
        embedder: Embedder | None,
        texts: MemoTexts,
    ) -> None:
        """Inside the write transaction that recorded a memo (with ``stored`` vectors, or
        none yet): update the project's index, and compute the vectors on the vector
        thread when the model is there and they were not stored."""
        self._update_in_place(project, before, after, memo_id, stored)
        if embedder is not None and stored is None and self._expect(project):
            self._jobs.put(_VectorJob(memo_id, project, texts, embedder))

    def keep_filled(self, embedder: Embedder) -> None:
        """From now on the vector thread gives vectors of ``embedder``'s model to the memos
        without them (now, and whenever any process wrote some), and brings the indexes
        up to date after another process's writes."""
        with self._pending_changed:
            if self._closing:
                return
            self._filling = embedder
            self._start()
        self.fill_later()

    def fill_later(self) -> None:
        """Queue a fill on the vector thread (once: a fill queued already covers it)."""
        with self._pending_changed:
            if self._closing or self._filling is None or self._fill_queued:
                return
            self._fill_queued = True
            self._start()
        self._jobs.put(_FillJob(self._filling))

    def wait(self, project: str, timeout: float | None = None, most: int | None = None) -> bool:
        """Wait until the vectors of ``project``'s memos recorded here are stored.

        False when ``timeout`` seconds passed first, or at once when more than
        ``most`` of them are still to come.
        """
        with self._pending_changed:
            if most is not None and self._pending.get(project, 0) > most:
                return False
            return self._pending_changed.wait_for(lambda: not self._pending.get(project), timeout)

    def settled(self, timeout: float | None = None) -> bool:
        """Wait until no fill and no first read of an index is queued or running and every
        recorded memo's vectors are stored (what a server's vector thread was given is
        done); False when ``timeout`` seconds passed first."""
        with self._pending_changed:
            return self._pending_changed.wait_for(self._idle, timeout)

    def _idle(self) -> bool:
        # _building is read without its lock (a set's size): taking _lock under
        # _pending_changed would order the two locks against _build_step's.
        return not (
            self._fill_queued or self._fill_running or self._building or any(self._pending.values())
        )

    def _expect(self, project: str) -> bool:
        """Count one vector job to come for ``project``; False once closing."""
        with self._pending_changed:
            if self._closing:
                return False
            self._pending[project] = self._pending.get(project, 0) + 1
            self._start()
            return True

    def _start(self) -> None:
        """Start the vector thread if it is not running (``_pending_changed`` held)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, name="explomemo-vectors", daemon=True
            )
            self._thread.start()

    def _next_job(self) -> _VectorJob | _FillJob | _BuildJob | None:
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
                continue
            if isinstance(job, _BuildJob):
                self._build_step(job)
                continue
            try:
                if not self._closing or time.monotonic() < self._deadline:
                    self._write_vectors(job)
            except Exception as exc:
                # The memo stays without vectors; the server's next fill gives
                # them, so nothing is lost.
                logger.warning("could not embed memo %d: %s", job.memo_id, _one_line(exc))
            finally:
                with self._pending_changed:
                    self._pending[job.project] -= 1
                    self._pending_changed.notify_all()

    def _fill_step(self, job: _FillJob) -> None:
        """One batch of a fill; the rest goes back in the queue, behind the memos
        recorded meanwhile (a recall may wait for those, never for the whole fill).
        Once none is left, the indexes another process's writes outdated are read again."""
        with self._pending_changed:
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
            # of the fill to the next one; the thread lives on for the memos
            # recorded next.
            logger.warning("could not embed memos recorded without a model: %s", _one_line(exc))
            more = False
        if more:
            self.fill_later()
        with self._pending_changed:
            self._fill_running = False
            self._pending_changed.notify_all()

    def _write_vectors(self, job: _VectorJob) -> None:
        model_id = job.embedder.model_id
        whole, question = (row.tobytes() for row in job.embedder.embed(_pair(job.texts)))
        key = text_hash(model_id, job.texts.whole)
        vectors = MemoVectors(whole, question, model_id, key)
        with self.store.errors(), self.store.write() as conn:
            before = self.store.memo_version(conn)
            self.store.cache_vectors(
                conn, {key: whole, text_hash(model_id, job.texts.question): question}
            )
            if self._current_texts(conn, [job.memo_id]).get(job.memo_id) != job.texts:
                # Forgotten or recorded again since: whatever replaced it
                # brings its own vectors (inline, by its own job, or by a fill).
                return
            _store(self.store, conn, job.memo_id, vectors)
            self._update_in_place(
                job.project, before, self.store.memo_version(conn), job.memo_id, vectors
            )

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

    def _fill_batch(self, embedder: Embedder, batch: int, project: str | None = None) -> int:
        """Give vectors to up to ``batch`` memos (of ``project``, or all) without them;
        returns how many it embedded."""
        with self.store.errors(), self.store.read() as conn:
            ids = self.store.memos_needing_embedding(conn, embedder.model_id, batch, project)
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

    # Indexes ---------------------------------------------------------------

    def index(
        self, embedder: Embedder, project: str, dim: int, wait: float | None = None
    ) -> VectorIndex | None:
        """The project's vectors of the embedder's model, as far as they are computed.

        Built from the database the first time; after that kept up to date in
        place by this process's writes. When another process wrote, a server's
        vector thread reads it again (this search uses it as it is, and
        searches the memos it lacks by words); elsewhere it is read again now.
        In a server the first one of a large project is read on the vector
        thread too: None when it is not there after ``wait`` seconds (1.6 s
        at 100,000 memos; the search goes by words meanwhile). It never embeds
        a memo.
        """
        with self.store.errors():
            version = self.store.memo_version()
            with self._lock:
                index = self._indexes.get(project)
            if index is not None and index.model_id == embedder.model_id:
                if index.version == version:
                    return index
                if self._filling is not None:
                    self.fill_later()
                    return index
            # A read under way is waited for without counting the memos again.
            if (
                wait is not None
                and self._filling is not None
                and (project in self._building or self._large(project))
            ):
                return self._built_within(project, embedder.model_id, dim, wait)
            # Two arrays of a large project must not live at once.
            self.drop_index(project)
            del index
            index = self._build(embedder.model_id, project, dim)
        release_freed_memory()
        with self._lock:
            self._indexes[project] = index
        return index

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
        was built."""
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

    def _large(self, project: str) -> bool:
        """Whether ``project`` holds more than :data:`READ_INLINE_MEMOS` memos."""
        with self.store.read() as conn:
            return self.store.memo_count(conn, project) > READ_INLINE_MEMOS

    def read_ahead(self, embedder: Embedder, project: str) -> None:
        """Have the vector thread read a large project's index now, before a recall asks
        for it (a smaller one is read by the recall at no cost to speak of)."""
        if self._closing:
            return
        try:
            with self.store.errors():
                if not self._large(project):
                    return
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
        self, project: str, model_id: str, dim: int, wait: float
    ) -> VectorIndex | None:
        """Have the vector thread read the project's index (once), and give it if it is
        there within ``wait`` seconds."""

        def built() -> VectorIndex | None:
            index = self._indexes.get(project)
            return index if index is not None and index.model_id == model_id else None

        with self._lock:
            failed = self._read_failed.get(project)
            if (
                built() is None
                and project not in self._building
                and not self._closing
                and (failed is None or time.monotonic() - failed > POLL_SECONDS)
            ):
                self._building.add(project)
                self._jobs.put(_BuildJob(project, model_id, dim))
            if project not in self._building:
                return built()  # nothing is being read: no use waiting
            self._built.wait_for(lambda: built() is not None, wait)
            return built()

    def _build_step(self, job: _BuildJob) -> None:
        """Read a project's first index. This process's writers go on meanwhile: one that
        lands during the read leaves the index behind the memo version, and it is read
        again (see :meth:`index`), as after another process's write."""
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
            # Searched by words until a search asks again, POLL_SECONDS later at the
            # soonest (a read failing at once is not repeated on every recall).
            logger.warning("could not read the vectors of %s: %s", job.project, _one_line(exc))
            with self._lock:
                self._read_failed[job.project] = time.monotonic()
        finally:
            with self._lock:
                self._building.discard(job.project)
                self._built.notify_all()
            with self._pending_changed:
                self._pending_changed.notify_all()

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
            self._read_failed.pop(project, None)
        del fresh
        release_freed_memory()

    def drop_index(self, project: str) -> None:
        """Forget the project's index (the next search builds it again)."""
        with self._lock:
            self._indexes.pop(project, None)

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
