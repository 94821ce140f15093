"""Recall by meaning with the real offline model, the word fallback, cut-off and ranking."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_embedder import FakeEmbedder
from helpers import record_all

from explomemo.memos.cache import MemoCache
from explomemo.recall import embeddings, search
from explomemo.recall.embeddings import Embedder, load_embedder
from explomemo.recall.sources import FixedModel


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
        # Only the first comes whole: the stale one by id, its files with show.
        assert result.matches[1].whole is False and result.matches[1].files is None
        assert cache.show(stale, root=str(app)).files[0].state == "changed"
        only_fresh = cache.recall(query="zzz", project="svc", root=str(app), include_stale=False)
        assert [m.id for m in only_fresh.matches] == [fresh]


def _checked_paths(cache: MemoCache, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the cache's validator is asked to check from now on, in order."""
    seen: list[str] = []
    original = cache.validator.observe

    def spy(root: Any, expected: Any) -> Any:
        seen.extend(e.rel for e in expected)
        return original(root, expected)

    monkeypatch.setattr(cache.validator, "observe", spy)
    return seen


def test_recall_rehashes_only_returned_memos(
    words_cache: MemoCache, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_all(words_cache, app)
    seen = _checked_paths(words_cache, monkeypatch)
    words_cache.recall(query="database pool", project="svc", root=str(app))
    assert seen == ["app/db.py"]


def test_recall_checks_memos_best_first_until_the_shown_ones_are_settled(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the files of the memos that could still be shown are checked: a stale memo ranks
    a little lower, so the next one is checked too; the answer is the one a check of every
    candidate gives."""
    # All four pass the cut-off, even with the penalty for "zzz", a word no memo holds.
    cosines = {"Alpha": 0.95, "Beta": 0.93, "Gamma": 0.85, "Delta": 0.80}
    files = {"Alpha": "app/http.py", "Beta": "app/db.py", "Gamma": "app/tokens.py"}
    files["Delta"] = "app/middleware.py"

    def vector_of(text: str) -> list[float]:
        for name, cosine in cosines.items():
            if text.startswith(name):
                return [cosine, math.sqrt(1 - cosine**2), 0.0]
        return [1.0, 0.0, 0.0]

    with MemoCache.open(db_path, FixedModel(FakeEmbedder(vector_of))) as cache:
        ids = {
            name: cache.record(
                question=f"{name} question",
                conclusion="c",
                files=[path],
                project="svc",
                root=str(app),
            ).id
            for name, path in files.items()
        }
        seen = _checked_paths(cache, monkeypatch)

        def recall(limit: int, include_stale: bool = True) -> list[tuple[int, str]]:
            seen.clear()
            result = cache.recall(
                query="zzz",
                project="svc",
                root=str(app),
                limit=limit,
                include_stale=include_stale,
            )
            return [(m.id, m.status) for m in result.matches]

        assert recall(1) == [(ids["Alpha"], "fresh")]
        assert seen == ["app/http.py"]
        assert recall(2) == [(ids["Alpha"], "fresh"), (ids["Beta"], "fresh")]
        assert sorted(seen) == ["app/db.py", "app/http.py"]
        (app / "app" / "http.py").write_text("# changed\n")
        # Alpha is stale (0.95 less STALE_PENALTY is below Beta's 0.93): Beta, checked
        # next, goes first. Gamma is never looked at: it ranks below both, whatever it holds.
        assert recall(1) == [(ids["Beta"], "fresh")]
        assert sorted(seen) == ["app/db.py", "app/http.py"]
        assert recall(2) == [(ids["Beta"], "fresh"), (ids["Alpha"], "stale")]
        assert sorted(seen) == ["app/db.py", "app/http.py"]
        # Leaving stale memos out checks every candidate, to count them.
        assert recall(1, include_stale=False) == [(ids["Beta"], "fresh")]
        assert sorted(seen) == sorted(files.values())


def test_server_lists_tools_while_the_model_loads_and_records_with_it(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp import Client

    from explomemo.server.tools import create_server

    release = threading.Event()
    fake = FakeEmbedder(lambda text: [1.0, 0.0])

    def slow_load(env: Any) -> FakeEmbedder:
        assert release.wait(30), "the test never let the model load"
        return fake

    monkeypatch.setattr(embeddings, "load_embedder", slow_load)

    async def story() -> None:
        async with Client(create_server(db_path, env={})) as client:
            # Answered while the model loads.
            assert len((await client.list_tools()).tools) == 5
            threading.Timer(0.2, release.set).start()
            # The record waits for the load, and is stored with its vectors.
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
            assert recorded.structured_content["semantic_index"] is True  # type: ignore[index]
            ask = {"query": "anything", "project": "svc", "root": str(app)}
            recall = await client.call_tool("memory_exploration_recall", ask)
            assert recall.structured_content["semantic_index"] is True  # type: ignore[index]
            assert "pending_vectors" not in recall.structured_content  # type: ignore[operator]
            assert [m["id"] for m in recall.structured_content["matches"]] == [1]  # type: ignore[index]

    asyncio.run(story())
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT embedding_model FROM memos").fetchall() == [("fake-model",)]


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
