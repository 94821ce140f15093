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
from collections.abc import Sequence
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
    from explomemo.recall.search import VectorIndex

#: How long ``close`` goes on computing queued vectors before it leaves the
#: rest to the next fill (the memos are stored; only their vectors wait).
CLOSE_SECONDS = 2.0
#: Memos embedded at a time by a fill: a closing fill stops between batches, so
#: a batch (two texts a memo, up to 100 ms a long text) bounds how long close waits.
FILL_BATCH = 4

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


class Vectors:
    """The vectors of one database's memos: their upkeep and the in-memory indexes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # Rebuilt only when the database's memo version moved (any process's
        # record, forget, import or new vectors).
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.Lock()
        # _pending counts the jobs of each project not finished yet.
        self._jobs: queue.SimpleQueue[_VectorJob | _FillJob | None] = queue.SimpleQueue()
        self._pending: dict[str, int] = {}
        self._pending_changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._deadline = 0.0

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
        """After this process recorded a memo (with ``stored`` vectors, or none yet):
        update the project's index, and compute the vectors on the vector thread
        when the model is there and they were not stored."""
        # Counted as pending before the index is marked current, so a recall on
        # another thread cannot search the index without waiting for it.
        follows = embedder is not None and stored is None and self._expect(project)
        self._update_in_place(project, before, after, memo_id, stored, follows)
        if follows:
            assert embedder is not None
            self._jobs.put(_VectorJob(memo_id, project, texts, embedder))

    def fill_later(self, embedder: Embedder) -> None:
        """Fill the memos without vectors of ``embedder``'s model, on the vector thread."""
        with self._pending_changed:
            if self._closing:
                return
            self._start()
        self._jobs.put(_FillJob(embedder))

    def wait(self, project: str, timeout: float | None = None) -> bool:
        """Wait until the vectors of ``project``'s memos recorded here are stored.

        False when ``timeout`` seconds passed first.
        """
        with self._pending_changed:
            return self._pending_changed.wait_for(lambda: not self._pending.get(project), timeout)

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

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            if isinstance(job, _FillJob):
                self._fill_step(job)
                continue
            try:
                if not self._closing or time.monotonic() < self._deadline:
                    self._write_vectors(job)
            except Exception as exc:
                # The memo stays without vectors; the next index build of its
                # project embeds it (fill), so nothing is lost.
                logger.warning("could not embed memo %d: %s", job.memo_id, _one_line(exc))
                self.drop_index(job.project)
            finally:
                with self._pending_changed:
                    self._pending[job.project] -= 1
                    self._pending_changed.notify_all()

    def _fill_step(self, job: _FillJob) -> None:
        """One batch of a fill; the rest goes back in the queue, behind the memos
        recorded meanwhile (a recall waits for those, not for the whole fill)."""
        try:
            more = not self._closing and self._fill_batch(job.embedder, FILL_BATCH) > 0
        except Exception as exc:
            # Any failure (onnxruntime raises its own errors) leaves the rest
            # of the fill to the next index build of each project; the thread
            # lives on for the memos recorded next.
            logger.warning("could not embed memos recorded without a model: %s", _one_line(exc))
            return
        if more:
            self._jobs.put(job)

    def _write_vectors(self, job: _VectorJob) -> None:
        model_id = job.embedder.model_id
        whole, question = (row.tobytes() for row in job.embedder.embed(_pair(job.texts)))
        key = text_hash(model_id, job.texts.whole)
        vectors = MemoVectors(whole, question, model_id, key)
        with self.store.errors(), self.store.write() as conn:
            before = self.store.memo_version()
            self.store.cache_vectors(
                conn, {key: whole, text_hash(model_id, job.texts.question): question}
            )
            if self._current_texts(conn, [job.memo_id]).get(job.memo_id) != job.texts:
                # Forgotten or recorded again since: whatever replaced it
                # brings its own vectors (inline, by its own job, or by a fill).
                return
            _store(self.store, conn, job.memo_id, vectors)
            after = self.store.memo_version()
        self._update_in_place(job.project, before, after, job.memo_id, vectors, False)

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

    def fill(self, embedder: Embedder, batch: int = FILL_BATCH, project: str | None = None) -> int:
        """Give both vectors of ``embedder``'s model to every memo (of ``project``, or all)
        without them; returns how many.

        Stops between batches once closing (what it computed is stored).
        """
        done = 0
        while not self._closing:
            filled = self._fill_batch(embedder, batch, project)
            if not filled:
                break
            done += filled
        return done

    def _fill_batch(self, embedder: Embedder, batch: int, project: str | None = None) -> int:
        """Give vectors to up to ``batch`` memos (of ``project``, or all) without them;
        returns how many it embedded."""
        with self.store.errors(), self.store.read() as conn:
            ids = self.store.memos_needing_embedding(conn, embedder.model_id, batch, project)
            texts = self._current_texts(conn, ids)
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
                _store(self.store, conn, memo_id, vectors)
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

    def index(self, embedder: Embedder, project: str, dim: int) -> VectorIndex:
        """The project's vectors of the embedder's model, embedding its memos that lack them."""
        from explomemo.recall.search import build_vector_index

        with self.store.errors():
            version = self.store.memo_version()
            with self._lock:
                index = self._indexes.get(project)
            if index is not None and index.version == version:
                return index
            # Two arrays of a large project must not live at once.
            self.drop_index(project)
            del index
            with self.store.read() as conn:
                index = build_vector_index(conn, project, embedder.model_id, dim, version)
            if index.lacking:
                # This project's only: the others are embedded when they are
                # searched, or by a server's fill on the vector thread.
                self.fill(embedder, project=project)
                version = self.store.memo_version()
                with self.store.read() as conn:
                    index = build_vector_index(conn, project, embedder.model_id, dim, version)
        release_freed_memory()
        with self._lock:
            self._indexes[project] = index
        return index

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
        follows: bool,
    ) -> None:
        """After this process's own write, bring the project's index up to date.

        Only when nothing else wrote in between (the version the index was
        built at is the one our transaction started from); otherwise the
        next search rebuilds it. At 100,000 memos a rebuild costs a second.
        When the vectors follow, the index stays as it is until then (a
        recall waits for them).
        """
        with self._lock:
            index = self._indexes.get(project)
            if index is None:
                return
            if index.version == before and follows:
                index.version = after
            elif (
                index.version == before
                and vectors is not None
                and (vectors.model_id == index.model_id)
            ):
                try:
                    index.upsert(memo_id, vectors.whole, vectors.question)
                    index.version = after
                except ValueError:
                    del self._indexes[project]
            else:
                del self._indexes[project]


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
