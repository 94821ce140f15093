"""When a recall match comes whole: the rule "clearly answers" (docs/reference.md) at its
boundary, by how the match was found, and what a whole or lean match counts as served."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder
from helpers import save_captured_turn

from explomemo.memos.cache import MemoCache
from explomemo.recall import search
from explomemo.recall.search import CLEAR_EMBEDDING, CLEAR_MARGIN, clear_score, clearly_answers
from explomemo.recall.sources import FixedModel

#: Below what the int8 vectors and four-decimal scores can blur.
STEP = 0.01


@pytest.mark.parametrize("matched_by", ["embedding", "words", "both"])
def test_a_match_is_clear_from_its_threshold_and_margin_on(matched_by: str) -> None:
    least = clear_score(matched_by)  # type: ignore[arg-type]
    assert clearly_answers(least, matched_by, None)  # type: ignore[arg-type]
    assert clearly_answers(least, matched_by, least - CLEAR_MARGIN)  # type: ignore[arg-type]
    assert not clearly_answers(least - STEP, matched_by, None)  # type: ignore[arg-type]
    assert not clearly_answers(
        least + STEP,
        matched_by,  # type: ignore[arg-type]
        least + STEP - CLEAR_MARGIN + STEP,
    )


def _cache_at(db: Path, cosines: dict[str, float]) -> MemoCache:
    """A cache whose model puts each memo (by its question's first word, at most two) at the
    given cosine from every query (vectors of one dimension in every test: a query's vector
    is kept by the process for its model)."""

    def vector_of(text: str) -> list[float]:
        for n, (name, cosine) in enumerate(cosines.items()):
            if text.startswith(name):
                angle = math.acos(cosine)
                vector = [math.cos(angle), 0.0, 0.0]
                vector[n + 1] = math.sin(angle)
                return vector
        return [1.0, 0.0, 0.0]

    return MemoCache.open(db, FixedModel(FakeEmbedder(vector_of)))


def _plane_cache(db: Path, cosines: dict[str, float]) -> MemoCache:
    """A cache whose model puts each memo (by its question's first word, any number) at the
    given cosine from every query: all its vectors in one plane with the query's."""

    def vector_of(text: str) -> list[float]:
        angle = math.acos(cosines.get(text.split()[0], 1.0))
        return [math.cos(angle), math.sin(angle), 0.0]

    return MemoCache.open(db, FixedModel(FakeEmbedder(vector_of)))


@pytest.mark.parametrize(
    ("first", "second", "whole"),
    [
        # Over the threshold and the margin: whole.
        (
            CLEAR_EMBEDDING + 0.05,
            CLEAR_EMBEDDING + 0.05 - CLEAR_MARGIN - 0.02,
            True,
        ),
        # The same first match with a second one just inside the margin: lean.
        (
            CLEAR_EMBEDDING + 0.05,
            CLEAR_EMBEDDING + 0.05 - CLEAR_MARGIN + 0.02,
            False,
        ),
        # Alone (no margin to keep) but just under the threshold: lean.
        (CLEAR_EMBEDDING - 0.02, None, False),
    ],
)
def test_recall_answers_whole_only_a_clear_first_match(
    app: Path,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: float,
    second: float | None,
    whole: bool,
) -> None:
    # The query's word is in no memo: no word score, and no penalty for it here, so each
    # memo scores its cosine.
    monkeypatch.setattr(search, "UNKNOWN_PENALTY", 0.0)
    cosines = {"Alpha": first} | ({"Beta": second} if second is not None else {})
    with _cache_at(db_path, cosines) as cache:
        ids = {
            name: cache.record(
                question=f"{name} memo",
                conclusion="x",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            ).id
            for name in cosines
        }
        result = cache.recall(query="zzz", project="svc", root=str(app))
        assert [m.id for m in result.matches] == list(ids.values())
        top = result.matches[0]
        assert top.matched_by == "embedding"
        assert abs(top.score - first) < 0.005
        assert top.whole is whole
        assert (top.conclusion, top.files is not None) == (("x", True) if whole else (None, False))
        assert all(m.whole is False and m.conclusion is None for m in result.matches[1:])
        # Only a whole fresh match counts as served.
        assert [
            s.served
            for s in cache.stats(project="svc").projects[0].surfaces
            if s.surface == "recall"
        ] == [int(whole)]


@pytest.mark.parametrize(
    ("cosines", "kept"),
    [
        # Past the third match, only those within TAIL_MARGIN of the first stay.
        ({"A": 0.80, "B": 0.78, "C": 0.76, "D": 0.70, "E": 0.60}, "ABCD"),
        # The first three stay however far below the first they score.
        ({"A": 0.90, "B": 0.55, "C": 0.50, "D": 0.48, "E": 0.45}, "ABC"),
        # A close cluster stays whole.
        ({"A": 0.62, "B": 0.61, "C": 0.60, "D": 0.59, "E": 0.58}, "ABCDE"),
    ],
)
def test_a_weak_tail_past_the_third_match_is_left_out(
    app: Path,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cosines: dict[str, float],
    kept: str,
) -> None:
    """A question no memo answers gets few matches, and small ones (docs/reference.md,
    "the tail"): a match past the third comes only within TAIL_MARGIN of the first."""
    monkeypatch.setattr(search, "UNKNOWN_PENALTY", 0.0)

    with _plane_cache(db_path, cosines) as cache:
        names = {
            cache.record(
                question=f"{name} memo",
                conclusion="x",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            ).id: name
            for name in cosines
        }
        result = cache.recall(query="zzz", project="svc", root=str(app), limit=5)
    assert "".join(names[m.id] for m in result.matches) == kept
    assert result.omitted == 0  # left out for relevance, not for the answer's size


def test_recall_echoes_a_long_query_cut_short(app: Path, db_path: Path) -> None:
    """The query comes back cut as a lean question is (an agent wrote it: a long prompt
    echoed whole would weigh more than the matches of an answer that finds nothing)."""
    query = "where is the pool sized? " + "and more context " * 40
    with MemoCache.open(db_path, FixedModel(None)) as cache:
        result = cache.recall(query=query, project="svc", root=str(app))
    assert result.query == query[:119] + "…"


def test_a_captured_turn_comes_only_when_it_scores_what_a_clear_answer_needs(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A captured turn (judged by no one) below the clear threshold of how it was found is
    left out of recall; an agent's memo of the same score comes, lean."""
    monkeypatch.setattr(search, "UNKNOWN_PENALTY", 0.0)
    cosines = {"Turn": CLEAR_EMBEDDING - 0.1, "Agent": CLEAR_EMBEDDING - 0.1, "Near": 0.95}
    save_captured_turn(db_path, app, "app/db.py", "Turn memo", "x", "svc")
    save_captured_turn(db_path, app, "app/db.py", "Near memo", "y", "svc")

    with _plane_cache(db_path, cosines) as cache:
        cache.record(
            question="Agent memo", conclusion="z", files=["app/db.py"], project="svc", root=str(app)
        )
        result = cache.recall(query="zzz", project="svc", root=str(app))
    assert [m.question for m in result.matches] == ["Near memo", "Agent memo"]
    assert all(m.whole is False for m in result.matches)


def test_a_captured_turn_left_out_leaves_room_for_the_next_match(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second reader's finding: a weak captured turn ranked first used up ``limit`` before
    it was left out, and a recall at limit 1 answered nothing."""
    monkeypatch.setattr(search, "UNKNOWN_PENALTY", 0.0)
    cosines = {"Turn": CLEAR_EMBEDDING - 0.05, "Agent": CLEAR_EMBEDDING - 0.15}
    save_captured_turn(db_path, app, "app/db.py", "Turn memo", "x", "svc")

    with _plane_cache(db_path, cosines) as cache:
        cache.record(
            question="Agent memo", conclusion="z", files=["app/db.py"], project="svc", root=str(app)
        )
        result = cache.recall(query="zzz", project="svc", root=str(app), limit=1)
    assert [m.question for m in result.matches] == ["Agent memo"]


@pytest.mark.parametrize(("origin", "whole"), [("agent", True), ("subagent", False)])
def test_a_delegated_runs_memo_clearly_first_comes_lean(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch, origin: str, whole: bool
) -> None:
    """Judged by no one, a run's memo comes lean however clearly it matches (on replayed
    real sessions 1 of 19 such whole answers was right, each 30 KB and more); show gives it."""
    monkeypatch.setattr(search, "UNKNOWN_PENALTY", 0.0)
    cosines = {"Run": CLEAR_EMBEDDING + 0.2, "Far": CLEAR_EMBEDDING - 0.3}
    save_captured_turn(db_path, app, "app/db.py", "Run memo", "a long report", "svc")
    save_captured_turn(db_path, app, "app/db.py", "Far memo", "y", "svc")
    with MemoCache.open(db_path, FixedModel(None)) as cache, cache.store.write() as conn:
        conn.execute("UPDATE memos SET origin = ? WHERE question = 'Run memo'", (origin,))
    with _plane_cache(db_path, cosines) as cache:
        result = cache.recall(query="zzz", project="svc", root=str(app))
    assert result.matches[0].question == "Run memo"
    assert result.matches[0].whole is whole
