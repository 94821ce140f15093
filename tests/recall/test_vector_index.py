"""The int8 vector index ranks and scores as the float32 vectors it was built from."""

from __future__ import annotations

import sqlite3
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from fake_embedder import FakeEmbedder
from helpers import save_bare_memo

from explomemo.recall import search
from explomemo.recall.embeddings import Embedder
from explomemo.recall.search import VectorIndex, build_vector_index
from explomemo.recall.vectors import Vectors
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


def _save(
    store: Store,
    conn: sqlite3.Connection,
    question: str,
    whole: bytes | None,
    question_vector: bytes | None,
    model: str = "m",
    wanted_id: int | None = None,
) -> int:
    """A memo of project "p" with these two vectors (None: the column left empty)."""
    memo_id = save_bare_memo(store, conn, question, wanted_id)
    store.set_embedding(conn, memo_id, whole or b"", question_vector or b"", model, f"h{memo_id}")
    if whole is None or question_vector is None:
        # As a database from before question vectors (migration 0003) holds them.
        conn.execute(
            "UPDATE memos SET embedding = ?, question_embedding = ? WHERE id = ?",
            (whole, question_vector, memo_id),
        )
    return memo_id


def test_index_built_from_the_store_matches_float32(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SCAN_ROWS", 7)  # several full blocks and a partial one
    store = Store.open(tmp_path / "memos.db")
    vectors = embedder.embed(texts())
    questions = np.roll(vectors, 1, axis=0)
    with store.write() as conn:
        # The question vector is another memo's, so the two are told apart.
        ids = [
            _save(store, conn, f"q{i}", vector.tobytes(), questions[i].tobytes())
            for i, vector in enumerate(vectors)
        ]
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
    # The last: the smallest largest component whose scale (it / 127) is a normal number.
    least = 127 * float(np.finfo(np.float32).tiny)
    rows = [[0, 0, 0], [np.nan, 1, 0], [np.inf, 0, 0], [1e-45, 0, 0], [0.6, 0.8, 0], [least, 0, 0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value encountered in cast"
        for memo_id, row in enumerate(rows, start=1):
            vector = np.array(row, dtype=np.float32).tobytes()
            index.upsert(memo_id, vector, vector)
        found = dict(index.top(np.array([0.6, 0.8, 0], dtype=np.float32), 6).hits)
    assert found[5] == pytest.approx(1.0, abs=TOLERANCE)
    assert [found[i] for i in (1, 2, 3, 4)] == [0.0, 0.0, 0.0, 0.0]
    assert found[6] == pytest.approx(0.6 * least, rel=1e-3, abs=0)


def test_a_memo_without_both_vectors_of_the_model_and_dimension_is_searched_by_words(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "memos.db")
    good = np.array([0.6, 0.8, 0.0], dtype=np.float32).tobytes()
    longer = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32).tobytes()
    with store.write() as conn:
        # An import keeps ids; SQLite's go up to 2**63 - 1, past float64's exact integers.
        indexed = _save(store, conn, "both vectors", good, good, wanted_id=2**53 + 1)
        lacking = {
            _save(store, conn, "whole vector only", good, None),
            _save(store, conn, "question vector only", None, good),
            _save(store, conn, "question vector of another dimension", good, longer),
            _save(store, conn, "whole vector of another dimension", longer, good),
            _save(store, conn, "another model's vectors", good, good, model="other"),
        }
    with store.read() as conn:
        index = build_vector_index(conn, "p", "m", 3, 5)
    store.close()
    assert list(index.ids) == [indexed]
    assert index.pending == lacking
    hits = index.top(np.array([0.6, 0.8, 0.0], dtype=np.float32), 10).hits
    assert [memo_id for memo_id, _ in hits] == [indexed]


def test_an_index_is_read_once_and_again_only_after_another_writer(tmp_path: Path) -> None:
    good = np.array([0.6, 0.8, 0.0], dtype=np.float32).tobytes()
    store, other = Store.open(tmp_path / "memos.db"), Store.open(tmp_path / "memos.db")
    fake = FakeEmbedder(lambda text: [0.6, 0.8, 0.0], model_id="m")
    vectors = Vectors(store)
    with store.write() as conn:
        first = _save(store, conn, "first", good, good)
    index = vectors.index(fake, "p", 3)
    assert vectors.index(fake, "p", 3) is index
    with other.write() as conn:
        second = _save(other, conn, "second", good, good)
    again = vectors.index(fake, "p", 3)
    assert again is not index
    assert sorted(again.ids) == [first, second]
    assert vectors.index(fake, "p", 3) is again
    # Another model's index is not this one's.
    another = FakeEmbedder(lambda text: [0.6, 0.8, 0.0], model_id="n")
    assert vectors.index(another, "p", 3) is not again
    store.close()
    other.close()


def test_an_empty_index_keeps_its_version_model_and_int64_ids() -> None:
    index = VectorIndex.empty(3, 7, "m")
    assert (index.version, index.model_id, index.count, index.dim) == (7, "m", 0, 3)
    assert index.ids.dtype == np.int64
    # SQLite ids go up to 2**63 - 1: one past float64's exact integers stays exact.
    big = 2**53 + 1
    vector = np.array([0.6, 0.8, 0.0], dtype=np.float32).tobytes()
    index.upsert(big, vector, vector)
    assert index.ids.tolist() == [big]
    assert index.top(np.array([0.6, 0.8, 0.0], dtype=np.float32), 1).hits[0][0] == big


def test_a_vector_of_another_dimension_is_refused_and_the_index_kept() -> None:
    index = VectorIndex.empty(3, 1, "m")
    vector = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    index.upsert(1, vector.tobytes(), vector.tobytes())
    index.pending.add(2)
    longer = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32).tobytes()
    for memo_id in (2, 1):  # a new memo, a memo the index holds
        with pytest.raises(ValueError) as refused:
            index.upsert(memo_id, longer, longer)
        assert str(refused.value) == "a vector of another dimension than the index's"
    assert (index.count, index.pending) == (1, {2})
    assert index.top(vector, 2).hits == [(1, pytest.approx(1.0, abs=TOLERANCE))]


@pytest.mark.parametrize("n", [1, 2, 60, 299, 300])
def test_top_is_the_n_best_of_many_memos(n: int) -> None:
    rng = np.random.default_rng(5)
    count = 300  # more than a block of numpy's selection
    vectors = rng.standard_normal((2, count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=2, keepdims=True)
    whole, question = vectors
    index = VectorIndex.empty(384, 1, "m")
    ids = list(range(1, count + 1))
    for memo_id, w, q in zip(ids, whole, question, strict=True):
        index.upsert(memo_id, w.tobytes(), q.tobytes())
    query = whole[123]
    assert_close(index.top(query, n).hits, exact_top(whole, question, ids, query, n))


@pytest.mark.parametrize("way", ["built", "added"])
def test_the_index_holds_its_vectors_in_less_than_half_the_memory_of_float32(
    way: str, tmp_path: Path
) -> None:
    count, dim = 2_100, 384  # past 2,048 memos, the spare rows are a share of them
    rng = np.random.default_rng(7)
    vectors = [row.tobytes() for row in rng.standard_normal((count, dim)).astype(np.float32)]
    store = Store.open(tmp_path / "memos.db")
    if way == "built":
        with store.write() as conn:
            for i, vector in enumerate(vectors):
                _save(store, conn, f"q{i}", vector, vector)
    tracemalloc.start()
    try:
        if way == "built":
            with store.read() as conn:
                index = build_vector_index(conn, "p", "m", dim, 1)
        else:
            index = VectorIndex.empty(dim, 1, "m")
            for memo_id, vector in enumerate(vectors, start=1):
                index.upsert(memo_id, vector, vector)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.close()
    assert index.count == count
    # int8 is a quarter of float32; rows of spare capacity make it at most 3/8.
    assert held < count * 2 * dim * 4 / 2


def test_a_memo_scores_the_same_whether_its_index_was_read_or_added_to(tmp_path: Path) -> None:
    """Reading the store and adding a record in place quantize alike, to the bit: the second
    component's code sits at a half step in float32 (5.5), and a half step below it in
    float64, so a build computing in another precision than upsert gives another code."""
    vector = np.array([1.0, 0.04330708459019661], dtype=np.float32).tobytes()
    store = Store.open(tmp_path / "memos.db")
    with store.write() as conn:
        memo_id = _save(store, conn, "q", vector, vector)
    with store.read() as conn:
        built = build_vector_index(conn, "p", "m", 2, 1)
    store.close()
    added = VectorIndex.empty(2, 1, "m")
    added.upsert(memo_id, vector, vector)
    query = np.array([0.0, 1.0], dtype=np.float32)
    assert built.cosines(query).tobytes() == added.cosines(query).tobytes()
