"""Vector upkeep (recall/vectors.py): vectors stored with the memo, a few missing ones embedded by
the recall, more filled by a server or ``explomemo index``, and the indexes following every
writer."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fake_embedder import FakeEmbedder, HeldEmbedder
from helpers import (
    MEMOS,
    Repo,
    as_default_project,
    open_cache,
    record_all,
    record_all_with_vectors,
)

from explomemo.memos import cache as cache_module
from explomemo.memos.cache import MemoCache
from explomemo.recall import search as search_module
from explomemo.recall import vectors as vectors_module
from explomemo.recall.embeddings import DEFAULT_MODEL_ID, Embedder
from explomemo.recall.search import VectorIndex
from explomemo.recall.sources import FixedModel
from explomemo.shapes import to_json


def _axis(index: int, dim: int = 8) -> list[float]:
    return [1.0 if i == index else 0.0 for i in range(dim)]


def _stored_vectors(db_path: Path) -> list[tuple[int, str | None, str | None]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT id, embedding_model, embedding_text_hash FROM memos ORDER BY id"
        ).fetchall()


def test_a_few_memos_without_vectors_are_embedded_by_the_recall_that_needs_them(
    embedder: Embedder, app: Path, db_path: Path
) -> None:
    """Memos another process wrote without vectors (the Stop hook, a command without the
    model): the recall embeds them itself and finds them by meaning at once."""
    question, conclusion, files = MEMOS["auth"]
    with open_cache(db_path) as before:
        assert not before.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        ).semantic_index
    with MemoCache.open(db_path, FixedModel(embedder)) as after:
        found = after.recall(
            query="where is the JWT signature checked?", project="svc", root=str(app)
        )
        assert found.semantic_index and found.pending_vectors == 0
        assert [m.matched_by for m in found.matches] in (["embedding"], ["both"])
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT embedding_model, length(embedding) FROM memos").fetchall() == [
            (DEFAULT_MODEL_ID, 384 * 4)
        ]


def test_more_memos_without_vectors_are_found_by_words_then_by_embedding(
    embedder: Embedder, app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 0)  # one memo: more than it embeds
    question, conclusion, files = MEMOS["auth"]
    with open_cache(db_path) as before:
        before.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
    model = HeldEmbedder(embedder)
    with MemoCache.open(db_path, FixedModel(model)) as after:
        # The recall embeds nothing of the memo: it is found by words, and says so.
        pending = after.recall(
            query="where is the JWT signature checked?", project="svc", root=str(app)
        )
        assert pending.semantic_index and pending.pending_vectors == 1
        assert [m.matched_by for m in pending.matches] == ["words"]
        assert not [text for text in model.embedded if "\n" in text]
        model.gate.set()
        assert after.fill_embeddings(model) == 1
        found = after.recall(
            query="where is the JWT signature checked?", project="svc", root=str(app)
        )
        assert found.pending_vectors == 0 and '"pending_vectors"' not in to_json(found)
        assert [m.matched_by for m in found.matches] in (["embedding"], ["both"])


def test_model_change_reembeds_and_cache_avoids_repeats(app: Path, db_path: Path) -> None:
    first = FakeEmbedder(lambda text: _axis(len(text) % 8), model_id="model-a")
    with MemoCache.open(db_path, FixedModel(first)) as cache:
        record_all(cache, app)
        assert len(first.embedded) == 6  # two texts a memo: whole, and question with file names
        cache.record(
            question=MEMOS["db"][0],
            conclusion=MEMOS["db"][1],
            files=MEMOS["db"][2],
            project="svc",
            root=str(app),
        )
        assert len(first.embedded) == 6  # same text again: served by the embedding cache
    second = FakeEmbedder(lambda text: _axis(len(text) % 8), model_id="model-b")
    with MemoCache.open(db_path, FixedModel(second)) as cache:
        assert cache.fill_embeddings(second) == 3
        assert cache.fill_embeddings(second) == 0


def test_indexes_follow_own_and_other_writers(app: Path, db_path: Path) -> None:
    def vector_of(text: str) -> list[float]:
        return _axis("ABCDabcd".index(text[0]))

    fake = FakeEmbedder(vector_of)
    with (
        MemoCache.open(db_path, FixedModel(fake)) as cache,
        MemoCache.open(db_path, FixedModel(fake)) as other,
    ):

        def found(query: str) -> list[int]:
            return [m.id for m in cache.recall(query=query, project="svc", root=str(app)).matches]

        def record(by: MemoCache, question: str) -> int:
            return by.record(
                question=question,
                conclusion="c",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            ).id

        first = record(cache, "A first")
        assert found("A?") == [first]
        second = record(cache, "B second")  # this process: the index is updated in place
        assert found("B?") == [second]
        assert cache.stale(project="svc", root=str(app)).checked == 2
        third = record(other, "C third")  # another writer: the index is rebuilt
        assert found("C?") == [third]
        assert cache.stale(project="svc", root=str(app)).checked == 3
        assert record(cache, "a FIRST") == first  # replaced in place: same id, new vector
        assert found("a?") == [first]
        assert found("A?") == []


def test_a_recorded_memo_has_its_vectors_when_record_answers(app: Path, db_path: Path) -> None:
    model = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        question, conclusion, files = MEMOS["db"]
        recorded = cache.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
        assert recorded.semantic_index
        assert _stored_vectors(db_path)[-1][:2] == (recorded.id, "fake-model")
        result = cache.recall(query="pool size", project="svc", root=str(app))
        assert result.pending_vectors == 0
        assert [(m.id, m.matched_by) for m in result.matches] == [(recorded.id, "both")]


def test_a_record_waits_for_the_model_still_loading(app: Path, db_path: Path) -> None:
    """A record that comes while a server's model loads is stored with its vectors once the
    load ends, not without them."""
    from explomemo.recall.embeddings import ModelLoader

    fake = FakeEmbedder(lambda text: _axis(0))
    loading = threading.Event()
    loader = ModelLoader({}, load=lambda env: fake if loading.wait(30) else None)
    loader.start()
    answers: list[Any] = []
    with MemoCache.open(db_path, loader) as cache:
        question, conclusion, files = MEMOS["db"]
        recording = threading.Thread(
            target=lambda: answers.append(
                cache.record(
                    question=question,
                    conclusion=conclusion,
                    files=files,
                    project="svc",
                    root=str(app),
                )
            )
        )
        recording.start()
        recording.join(0.2)
        loading.set()
        recording.join(30)
    assert [a.semantic_index for a in answers] == [True]
    assert [m for _, m, _ in _stored_vectors(db_path)] == ["fake-model"]


def test_files_given_in_any_order_get_the_memo_its_vector(app: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(FakeEmbedder(lambda text: _axis(0)))) as cache:
        recorded = cache.record(
            question="How is auth wired?",
            conclusion="Tokens are checked in the middleware.",
            files=["app/tokens.py", "app/middleware.py"],
            project="svc",
            root=str(app),
        )
        assert _stored_vectors(db_path)[0][:2] == (recorded.id, "fake-model")


def test_a_fill_does_not_store_the_vector_of_an_outdated_text(app: Path, db_path: Path) -> None:
    question, conclusion, files = MEMOS["db"]
    with open_cache(db_path) as first:
        first.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
    cache: MemoCache
    rewritten: list[bool] = []

    def vector_of(text: str) -> list[float]:
        if text.endswith(conclusion) and not rewritten:
            rewritten.append(True)
            # While the fill embeds the old text, the memo is recorded again
            # and its new vector stored.
            cache.record(
                question=question,
                conclusion="Rewritten.",
                files=files,
                project="svc",
                root=str(app),
            )
        return _axis(0)

    model = FakeEmbedder(vector_of)
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        cache.fill_embeddings(model)
        expected = vectors_module.text_hash(
            "fake-model", vectors_module.embedding_text(question, "Rewritten.", files)
        )
        assert _stored_vectors(db_path)[0][2] == expected


def test_a_failed_vector_is_given_by_the_next_recall(
    app: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = FakeEmbedder(lambda text: _axis(0))
    broken.embed = lambda texts: (_ for _ in ()).throw(RuntimeError("model crashed"))  # type: ignore[method-assign]
    with MemoCache.open(db_path, FixedModel(broken)) as cache:
        ids = record_all(cache, app)  # stored all the same
        assert "could not embed the memo" in caplog.text
        assert [m for _, m, _ in _stored_vectors(db_path)] == [None, None, None]
    working = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(working)) as cache:
        result = cache.recall(query="pool size", project="svc", root=str(app))
        assert result.matches[0].id == ids["db"] and result.pending_vectors == 0
        assert result.matches[0].matched_by == "both"
        assert [m for _, m, _ in _stored_vectors(db_path)] == ["fake-model"] * 3


def test_close_stops_a_fill_after_its_batch_and_the_next_server_finishes(
    app: Path, db_path: Path
) -> None:
    with open_cache(db_path) as writer:
        for n in range(20):
            writer.record(
                question=f"question {n}",
                conclusion="c",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            )
    started = threading.Event()

    class Slow(FakeEmbedder):
        def embed(self, texts: Any) -> Any:
            started.set()
            time.sleep(0.05)
            return super().embed(texts)

    with MemoCache.open(db_path, FixedModel(Slow(lambda text: _axis(0)))) as server:
        server.fill_when_loaded()  # as a server starts
        assert started.wait(30)
    stored = [model for _, model, _ in _stored_vectors(db_path)]
    # The batch under way when the server closed was stored; the rest was left.
    assert 1 <= stored.count("fake-model") < 20
    with MemoCache.open(db_path, FixedModel(FakeEmbedder(lambda text: _axis(0)))) as again:
        again.fill_when_loaded()
        assert again.wait_for_fill(30)
    assert [model for _, model, _ in _stored_vectors(db_path)] == ["fake-model"] * 20


def test_a_failed_fill_leaves_the_vector_thread_alive(
    app: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_cache(db_path) as first:
        record_all(first, app)

    class FailsOnce(FakeEmbedder):
        """A model whose first run raises what onnxruntime raises: not one of our errors."""

        def embed(self, texts: Any) -> Any:
            if not self.embedded:
                self.embedded.append("")
                raise RuntimeError("onnxruntime: transient failure\nsecond line")
            return super().embed(texts)

    model = FailsOnce(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        cache.fill_when_loaded()
        assert cache.wait_for_fill(10)
        warnings = [r.getMessage() for r in caplog.records if r.name == "explomemo"]
        assert warnings == [
            "could not embed memos recorded without a model:"
            " RuntimeError: onnxruntime: transient failure second line"
        ]
        assert any(t.name == "explomemo-vectors" for t in threading.enumerate())
        cache.vectors.fill_later()  # as when another process writes next
        assert cache.wait_for_fill(10)
        assert [m for _, m, _ in _stored_vectors(db_path)] == ["fake-model"] * len(MEMOS)


def test_an_index_of_one_project_embeds_only_its_memos(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        for project in ("svc", "other"):
            for question, conclusion, files in MEMOS.values():
                cache.record(
                    question=f"{question} ({project})",
                    conclusion=conclusion,
                    files=files,
                    project=project,
                    root=str(app),
                )
    with closing(sqlite3.connect(db_path)) as conn, conn:
        # As migration 0003 leaves every memo: no question vector yet (and none
        # in the embedding cache either).
        conn.execute("UPDATE memos SET question_embedding = NULL")
        conn.execute("DELETE FROM embedding_cache")
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 0)  # a backlog the recall leaves
    model = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        result = cache.recall(query="pool size", project="svc", root=str(app))
        assert result.matches[0].matched_by == "words"
        assert result.pending_vectors == len(MEMOS)
        assert [text for text in model.embedded if "\n" in text] == []  # recall embeds none
        assert cache.fill_embeddings(model, project="svc") == len(MEMOS)  # explomemo index
        result = cache.recall(query="pool size", project="svc", root=str(app))
        assert result.matches[0].matched_by == "both"
    # The two texts of each of svc's memos (memo texts hold a line break; the
    # query may come from the query cache): nothing of the other project.
    memo_texts = [text for text in model.embedded if "\n" in text]
    assert len(memo_texts) == 2 * len(MEMOS)
    assert all("(svc)" in text for text in memo_texts)
    with closing(sqlite3.connect(db_path)) as conn:
        lacking = conn.execute(
            "SELECT project, count(*) FROM memos WHERE question_embedding IS NULL GROUP BY project"
        ).fetchall()
    assert lacking == [("other", len(MEMOS))]


def test_vectors_stored_during_a_search_leave_its_memos_counted_as_searched_by_words(
    embedder: Embedder, app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector thread puts vectors into the index a search has just used: that search
    still searched those memos by words, and its answer says so (it once said none, while
    the memo, held by no word of the query, was not found)."""
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 0)  # a backlog the recall leaves
    question, conclusion, files = MEMOS["auth"]
    with open_cache(db_path) as before:
        before.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
    model = HeldEmbedder(embedder)
    model.gate.set()
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        searched = VectorIndex.top

        def top_then_vectors_arrive(index: VectorIndex, query: Any, n: int) -> Any:
            hits = searched(index, query, n)
            if not cache.vectors.lacking(model.model_id):
                return hits
            assert cache.fill_embeddings(model) == 1
            return hits

        monkeypatch.setattr(VectorIndex, "top", top_then_vectors_arrive)
        ask = {"query": "where is the JWT signature checked?", "project": "svc", "root": str(app)}
        during = cache.recall(**ask)
        assert during.pending_vectors == 1
        assert [m.matched_by for m in during.matches] == ["words"]
        after = cache.recall(**ask)
        assert after.pending_vectors == 0
        assert [m.matched_by for m in after.matches] in (["embedding"], ["both"])


def test_a_servers_first_recall_waits_for_the_read_of_its_vectors_under_way(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector thread reads the default project's vectors ahead (a second at 100,000
    memos): a recall that comes meanwhile waits for that read, not answer by words."""
    fake = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    record_all_with_vectors(db_path, app, fake)
    as_default_project(app, monkeypatch)
    held = threading.Event()
    reading = threading.Event()
    reads: list[str] = []
    build = search_module.build_vector_index

    def slow_build(conn: sqlite3.Connection, project: str, *args: Any) -> Any:
        reads.append(project)
        reading.set()
        assert held.wait(30), "the test never let the index be read"
        return build(conn, project, *args)

    monkeypatch.setattr(search_module, "build_vector_index", slow_build)
    answers: list[Any] = []
    with MemoCache.open(db_path, FixedModel(fake)) as server:
        server.fill_when_loaded(ahead=True)  # as a server starts
        assert reading.wait(30)
        asking = threading.Thread(
            target=lambda: answers.append(server.recall(query="how big is the connection pool?"))
        )
        asking.start()
        asking.join(0.2)
        held.set()
        asking.join(30)
    assert reads == ["svc"]  # read once, by the vector thread
    (first,) = answers
    assert first.semantic_index and first.pending_vectors == 0
    assert first.matches[0].matched_by in ("embedding", "both")


def test_a_server_reads_its_default_projects_vectors_before_the_first_recall(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    record_all_with_vectors(db_path, app, fake)
    as_default_project(app, monkeypatch)
    with MemoCache.open(db_path, FixedModel(fake)) as server:
        server.fill_when_loaded(ahead=True)  # as a server starts
        assert server.vectors.settled(10)
        # Read ahead: the first recall has every vector, without waiting for a read.
        monkeypatch.setattr(vectors_module.Vectors, "_built_within", None)
        first = server.recall(query="how big is the connection pool?")
        assert first.semantic_index and first.pending_vectors == 0
        assert first.matches[0].matched_by in ("embedding", "both")


def test_a_server_reads_ahead_the_project_holding_this_repositorys_memos(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Working in a clone whose folder is not named as the project of its memos (svc, in
    app-root), with no $EXPLOMEMO_PROJECT: the server reads ahead svc, the project every
    call there takes, not the folder's name."""
    Repo(app).commit("app")
    fake = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    record_all_with_vectors(db_path, app, fake)
    monkeypatch.chdir(app)
    monkeypatch.delenv("EXPLOMEMO_PROJECT", raising=False)
    reads: list[str] = []
    build = search_module.build_vector_index

    def counted(conn: sqlite3.Connection, project: str, *args: Any) -> Any:
        reads.append(project)
        return build(conn, project, *args)

    monkeypatch.setattr(search_module, "build_vector_index", counted)
    with MemoCache.open(db_path, FixedModel(fake)) as server:
        server.fill_when_loaded(ahead=True)  # as a server starts
        assert server.vectors.settled(10)
    assert reads == ["svc"]


def test_a_model_loaded_after_close_starts_nothing_and_says_nothing(
    app: Path, db_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that leaves while the model loads: the load ends after the cache closed."""
    from explomemo.recall.embeddings import ModelLoader

    fake = FakeEmbedder(lambda text: _axis(0))
    record_all_with_vectors(db_path, app, fake)
    as_default_project(app, monkeypatch)
    loading = threading.Event()
    loader = ModelLoader({}, load=lambda env: fake if loading.wait(30) else None)
    server = MemoCache.open(db_path, loader)
    loader.start()
    server.fill_when_loaded(ahead=True)  # as a server starts
    server.close()
    loading.set()
    assert loader.wait(30) is fake
    assert loader._thread is not None
    loader._thread.join(30)  # its callbacks run on it, after the load
    assert server.vectors._thread is None  # no vector thread started on the closed store
    assert "could not" not in caplog.text
