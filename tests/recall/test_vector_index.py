"""The int8 vector index ranks and scores as the float32 vectors it was built from."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from explomemo.recall import search
from explomemo.recall.embeddings import Embedder
from explomemo.recall.search import VectorIndex, build_vector_index
from explomemo.store.database import Store

#: How far an int8 cosine may be from the float32 one (see VectorIndex).
TOLERANCE = 0.003


SUBJECTS = [
    "the login form",
    "the retry policy of outgoing HTTP calls",
    "the database connection pool",
    "JWT signature checks",
    "the cache of rendered templates",
    "background job scheduling",
    "the settings loaded from environment variables",
    "the CSV export of invoices",
    "rate limiting per API key",
    "the websocket reconnect loop",
]


ASPECTS = ["Where is {} configured?", "How is {} tested?", "Who calls {}?", "Why does {} fail?"]


def texts() -> list[str]:
    return [aspect.format(subject) for subject in SUBJECTS for aspect in ASPECTS]


def exact_top(
    whole: npt.NDArray[np.float32],
    question: npt.NDArray[np.float32],
    ids: list[int],
    query: npt.NDArray[np.float32],
    n: int,
) -> list[tuple[int, float]]:
    sims = search.vector_score(whole @ query, question @ query)
    order = np.argsort(-sims)[:n]
    return [(ids[i], float(sims[i])) for i in order]


def assert_close(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert len(got) == len(want)
    exact = dict(want)
    for (got_id, got_sim), (_, want_sim) in zip(got, want, strict=True):
        # Same scores rank by rank; where two memos are closer than the
        # tolerance they may swap, so each id's own cosine is checked too.
        assert abs(got_sim - want_sim) <= TOLERANCE
        if got_id in exact:
            assert abs(got_sim - exact[got_id]) <= TOLERANCE


def test_index_built_from_the_store_matches_float32(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SCAN_ROWS", 7)  # several full blocks and a partial one
    store = Store.open(tmp_path / "memos.db")
    vectors = embedder.embed(texts())
    questions = np.roll(vectors, 1, axis=0)
    ids: list[int] = []
    with store.write() as conn:
        for i, vector in enumerate(vectors):
            memo_id = store.save_memo(
                conn,
                memo_id=None,
                project="p",
                question=f"q{i}",
                question_key=f"q{i}",
                conclusion="c",
                root="/",
                recorded_at="2026-01-01T00:00:00Z",
                files=[],
            )
            # The question vector is another memo's, so the two are told apart.
            other = questions[i]
            store.set_embedding(conn, memo_id, vector.tobytes(), other.tobytes(), "m", f"h{i}")
            ids.append(memo_id)
    with store.read() as conn:
        index = build_vector_index(conn, "p", "m", vectors.shape[1], 1)
    store.close()
    assert index.lacking == 0
    queries = embedder.embed(["where do we configure login?", "how are invoices exported?"])
    for query in [*queries, vectors[7]]:
        assert_close(index.top(query, 10).hits, exact_top(vectors, questions, ids, query, 10))
    cosines = index.cosines(vectors[7])
    assert list(index.ids) == ids
    assert cosines[6, 0] == pytest.approx(float(vectors[6] @ vectors[7]), abs=TOLERANCE)
    assert cosines[6, 1] == pytest.approx(float(questions[6] @ vectors[7]), abs=TOLERANCE)


def test_rows_added_and_replaced_in_place(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SCAN_ROWS", 64)
    rng = np.random.default_rng(3)
    count = 64 * 2 + 5  # more than one block of the product
    vectors = rng.standard_normal((2, count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=2, keepdims=True)
    whole, question = vectors
    index = VectorIndex.empty(384, 1, "m")
    ids = list(range(10, 10 + count))
    for memo_id, w, q in zip(ids, whole, question, strict=True):
        index.upsert(memo_id, w.tobytes(), q.tobytes())
    query = embedder.embed(["a query"])[0]
    # Memo ids[3] recorded again with another text.
    whole[3] = question[3] = query
    index.upsert(ids[3], query.tobytes(), query.tobytes())
    assert_close(index.top(query, 20).hits, exact_top(whole, question, ids, query, 20))
    found = index.top(query, 1)
    assert found.hits[0][0] == ids[3]
    # Every memo's vector score counts in the spread, not only the hits'.
    every = search.vector_score(whole @ query, question @ query).astype(np.float64)
    assert found.count == count
    assert found.total == pytest.approx(float(every.sum()), abs=count * TOLERANCE)
    assert found.squares == pytest.approx(float(every @ every), abs=2 * count * TOLERANCE)


def test_a_vector_of_zeros_or_not_finite_scores_zero() -> None:
    index = VectorIndex.empty(3, 1, "m")
    rows = [[0, 0, 0], [np.nan, 1, 0], [np.inf, 0, 0], [1e-45, 0, 0], [0.6, 0.8, 0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value encountered in cast"
        for memo_id, row in enumerate(rows, start=1):
            vector = np.array(row, dtype=np.float32).tobytes()
            index.upsert(memo_id, vector, vector)
        found = dict(index.top(np.array([0.6, 0.8, 0], dtype=np.float32), 5).hits)
    assert found[5] == pytest.approx(1.0, abs=TOLERANCE)
    assert [found[i] for i in (1, 2, 3, 4)] == [0.0, 0.0, 0.0, 0.0]
