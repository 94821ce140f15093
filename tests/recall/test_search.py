"""Search (recall/search.py): the rules of fusion (a best memo that stands out, unknown words) and
the cut-off of words alone."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder
from helpers import (
    RELATED,
    WORD_MEMOS,
    invoke_cli,
    save_bare_memo,
    word_scores,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from explomemo.memos.cache import MemoCache
from explomemo.recall import search
from explomemo.recall.search import VectorHits, WordScores, fuse
from explomemo.recall.sources import FixedModel
from explomemo.store.database import Store


def hits(scores: dict[int, float]) -> VectorHits:
    """Vector hits of a project whose memos are exactly ``scores``."""
    values = list(scores.values())
    return VectorHits(
        hits=sorted(scores.items(), key=lambda hit: -hit[1]),
        count=len(values),
        total=sum(values),
        squares=sum(v * v for v in values),
    )


def evenly(count: int, low: float = 0.50, step: float = 0.005) -> dict[int, float]:
    """``count`` memos whose scores climb evenly: none stands out from the others."""
    return {memo_id: low + step * memo_id for memo_id in range(count)}


UNRELATED = "Which colour palette does the marketing site use for its settings page?"


def test_a_project_where_no_memo_stands_out_gets_nothing() -> None:
    scores = evenly(search.SPREAD_MIN_MEMOS)
    assert min(scores.values()) > search.FUSED_CUTOFF
    assert fuse(hits(scores), WordScores({})) == []


def test_a_memo_that_stands_out_comes_back_with_the_others_above_the_cut_off() -> None:
    scores = {memo_id: 0.30 + 0.001 * memo_id for memo_id in range(1, 24)}
    scores[0] = 0.90
    found = fuse(hits(scores), WordScores({}))
    assert [c.id for c in found[:2]] == [0, 23]
    assert len(found) == 24


def test_words_make_a_memo_stand_out() -> None:
    scores = evenly(search.SPREAD_MIN_MEMOS)
    found = fuse(hits(scores), WordScores({7: 1.0}))
    assert found[0].id == 7
    assert found[0].matched_by == "both"


def test_of_memos_all_alike_none_stands_out_until_words_lift_one_a_little() -> None:
    alike = {memo_id: 0.5 for memo_id in range(search.SPREAD_MIN_MEMOS)}
    assert fuse(hits(alike), WordScores({})) == []
    # A bonus of 0.05 on one memo of 20: 0.95 x 0.05 above the mean, 4.4 deviations.
    found = fuse(hits(alike), WordScores({7: 0.2}))
    assert (found[0].id, found[0].matched_by) == (7, "both")
    assert sorted(c.id for c in found) == sorted(alike)


def test_a_best_memo_exactly_spread_z_deviations_above_the_mean_stands_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Half the memos at 0.25, half at 0.75: mean 0.5, deviation 0.25, both exact in binary,
    # so the best is exactly one deviation above the mean.
    monkeypatch.setattr(search, "SPREAD_Z", 1.0)
    half = search.SPREAD_MIN_MEMOS // 2
    scores = {memo_id: 0.25 if memo_id < half else 0.75 for memo_id in range(2 * half)}
    found = fuse(hits(scores), WordScores({}))
    assert sorted(c.id for c in found) == sorted(scores)


def test_fused_scores_at_the_cut_offs_are_kept_capped_at_1_and_rounded() -> None:
    at_cutoff, at_match = search.FUSED_CUTOFF, search.WORDS_MATCH
    found = fuse(
        hits({1: 0.9, 2: at_cutoff, 3: 0.5, 4: 0.41234567}),
        WordScores({1: 1.0, 3: at_match}, identifiers={1: 1.0}),
    )
    assert [(c.id, c.score, c.matched_by) for c in found] == [
        (1, 1.0, "both"),
        (3, round(0.5 + search.WORDS_WEIGHT * at_match, 4), "both"),
        (4, 0.4123, "embedding"),
        (2, at_cutoff, "embedding"),
    ]


def test_word_scores_at_the_cut_off_are_kept_capped_at_1_and_rounded() -> None:
    words = WordScores(
        {1: search.WORDS_CUTOFF, 2: 0.9, 3: 0.2, 4: 0.31234567}, identifiers={2: 1.0}
    )
    found = fuse(None, words)
    assert [(c.id, c.score, c.matched_by) for c in found] == [
        (2, 1.0, "words"),
        (4, 0.3123, "words"),
        (1, search.WORDS_CUTOFF, "words"),
    ]


def test_an_embedding_short_of_the_cut_off_lifted_over_it_by_words_matched_by_words() -> None:
    low = search.FUSED_CUTOFF - 0.07
    found = fuse(hits({1: low}), WordScores({1: 0.5}))
    assert [(c.id, c.score, c.matched_by) for c in found] == [
        (1, round(low + search.WORDS_WEIGHT * 0.5, 4), "words")
    ]


def test_memos_beyond_the_nearest_vectors_are_fused_at_the_lowest_cosine_there() -> None:
    """A memo found by words or by an identifier only, not among the nearest vectors,
    scores the lowest of their cosines plus its bonus; with no vector hit at all, 0."""
    found = fuse(hits({1: 0.30}), WordScores({2: 0.8}, identifiers={3: 0.5}))
    assert [(c.id, c.score, c.matched_by) for c in found] == [
        (3, round(0.30 + search.IDENTIFIER_WEIGHT * 0.5, 4), "both"),
        (2, round(0.30 + search.WORDS_WEIGHT * 0.8, 4), "both"),
        (1, 0.30, "embedding"),
    ]
    found = fuse(VectorHits(hits=[]), WordScores({2: 0.8}))
    assert [(c.id, c.score, c.matched_by) for c in found] == [
        (2, round(search.WORDS_WEIGHT * 0.8, 4), "words")
    ]


@pytest.mark.parametrize("model", [False, True])
def test_a_memo_found_by_an_identifier_alone_scores_by_its_rarity(model: bool) -> None:
    """Without a model (or without vectors yet), a memo holding a named identifier and
    none of the query's words scores IDENTIFIER_WEIGHT x its rarity: the only holder is
    pinned, one of two falls under the cut-off."""
    assert search.IDENTIFIER_WEIGHT * 0.5 < search.WORDS_CUTOFF
    words = WordScores({}, identifiers={1: 1.0, 2: 0.5}, pinned=frozenset({1}))
    vector_hits = hits({10: search.FUSED_CUTOFF - 0.1}) if model else None
    found = fuse(vector_hits, words, unindexed={1, 2})
    assert [(c.id, c.score, c.matched_by, c.pinned) for c in found] == [
        (1, search.IDENTIFIER_WEIGHT, "words", True)
    ]


def test_a_pinned_memo_comes_back_when_nothing_stands_out() -> None:
    scores = evenly(search.SPREAD_MIN_MEMOS)
    found = fuse(hits(scores), WordScores({}, pinned=frozenset({3})))
    assert [(c.id, c.pinned) for c in found] == [(3, True)]


@pytest.mark.parametrize("model", [False, True])
def test_the_fusion_lists_the_memo_that_alone_holds_a_named_identifier_first(
    model: bool,
) -> None:
    """Kills ``fuse`` ordering by score alone: a memo that alone holds an identifier the
    query names comes first whatever its score, with a model and without. Recall keeps
    only the fusion's first candidates (cache.recall cuts them at ``3 x limit``), so a
    pinned memo ranked by score could be cut before recall ranks again."""
    pinned = WordScores(
        {1: 0.95, 2: 0.30, 3: 0.60}, identifiers={2: 1.0, 3: 0.5}, pinned=frozenset({2})
    )
    found = fuse(hits({1: 0.90, 2: 0.20, 3: 0.40}) if model else None, pinned)
    assert found[0].id == 2 and found[0].pinned, found
    assert [c.id for c in found] == [2, 1, 3]
    assert found[1].score > found[0].score and not any(c.pinned for c in found[1:])


def test_a_small_project_is_not_asked_to_stand_out() -> None:
    scores = evenly(search.SPREAD_MIN_MEMOS - 1)
    found = fuse(hits(scores), WordScores({}))
    assert sorted(c.id for c in found) == sorted(scores)


def test_one_unknown_word_in_five_costs_little_and_all_unknown_costs_the_penalty() -> None:
    near = search.FUSED_CUTOFF + 0.03
    # Squared, a share of 1/5 costs UNKNOWN_PENALTY / 25 (0.024); linear, it would cost
    # UNKNOWN_PENALTY / 5 (0.12): more than the margin.
    assert search.UNKNOWN_PENALTY / 25 < 0.03 < search.UNKNOWN_PENALTY / 5
    assert [c.id for c in fuse(hits({1: near}), WordScores({}, unknown=0.2))] == [1]
    far = search.FUSED_CUTOFF + 0.9 * search.UNKNOWN_PENALTY
    assert fuse(hits({1: far}), WordScores({}, unknown=1.0)) == []
    assert [c.id for c in fuse(hits({1: far}), WordScores({}, unknown=0.0))] == [1]


def test_recall_answers_nothing_when_the_query_is_as_near_to_every_memo(
    tmp_path: Path, db_path: Path
) -> None:
    count = search.SPREAD_MIN_MEMOS + 4
    root = tmp_path / "root"
    root.mkdir()
    (root / "gadget.py").write_text("# gadget\n")

    def vector_of(text: str) -> list[float]:
        # Memo n leans on axis n and on a shared axis (the last), a little more for
        # higher n; the query "zorblat" lies on the shared axis, "quuxite 5" on axis 5.
        vector = [0.0] * (count + 1)
        asked = re.search(r"quuxite (\d+)", text)
        if asked:
            vector[int(asked.group(1))] = 0.9
            vector[count] = 0.3
            return vector
        memo = re.search(r"gadget (\d+)", text)
        if memo is None:
            vector[count] = 1.0
            return vector
        n = int(memo.group(1))
        vector[n] = 0.75
        vector[count] = 0.6 + 0.004 * n
        return vector

    with MemoCache.open(db_path, FixedModel(FakeEmbedder(vector_of))) as cache:
        ids = [
            cache.record(
                question=f"Where is gadget {n} set up?",
                conclusion=f"gadget.py builds gadget {n}.",
                files=["gadget.py"],
                project="svc",
                root=str(root),
            ).id
            for n in range(count)
        ]
        near_all = cache.recall(query="how is zorblat tuned?", project="svc", root=str(root))
        assert near_all.matches == []
        one = cache.recall(query="quuxite 5 tuning", project="svc", root=str(root))
        assert one.matches and one.matches[0].id == ids[5]


def test_the_query_words_are_its_content_words_of_two_letters_or_more() -> None:
    # "ui" and "db" name things; a single letter ("x") would be covered by any memo holding
    # a word that starts with it; stop words and repeats count for nothing.
    assert search.query_words("How is the UI of the DB x wired? Wired, x.") == [
        "ui",
        "db",
        "wired",
    ]


def test_word_counts_are_kept_until_the_memos_grew_by_more_than_a_tenth(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "memos.db")
    words = search.WordSearch()

    def add(count: int, subject: str) -> None:
        with store.write() as conn:
            for _ in range(count):
                key = f"where is {subject} set up? {store.memo_count(conn, 'p')}"
                save_bare_memo(store, conn, key)

    def found() -> int:
        with store.read() as conn:
            return len(words.scores(store, conn, "p", "zeta").scores)

    add(45, "zeta")
    add(55, "omega")
    assert search.COMMON_FLOOR == 50
    assert found() == 45  # held by 45 memos of 100: a rare word, it picks them
    add(10, "zeta")
    # 110 memos, no more than a tenth more: zeta still counts 45, and picks its 55 memos.
    assert found() == 55
    add(1, "omega")
    # 111: counted again, 55 memos hold zeta, more than COMMON_FLOOR: it picks none.
    assert found() == 0
    store.close()


# Words alone: the cut-off ----------------------------------------------------


@pytest.mark.parametrize("through", ["library", "cli"])
def test_words_alone_return_nothing_for_an_unrelated_query_sharing_one_word(
    words_cache: MemoCache,
    word_root: Path,
    through: str,
    db_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_model: None,
) -> None:
    """Kills dropping the word-score cut-off without a model (``search.WORDS_CUTOFF``
    in ``fuse``): a query that shares only "settings" with one memo gets no match,
    while a related query still finds its memo (so the check is not vacuous)."""
    ids = [
        words_cache.record(question=q, conclusion=c, files=f, project="svc", root=str(word_root)).id
        for q, c, f in WORD_MEMOS
    ]
    if through == "library":
        unrelated = words_cache.recall(query=UNRELATED, project="svc", root=str(word_root))
        related = words_cache.recall(query=RELATED, project="svc", root=str(word_root))
        assert unrelated.semantic_index is False
        found = ([m.id for m in unrelated.matches], [m.id for m in related.matches])
    else:
        results = []
        for query in (UNRELATED, RELATED):
            run = invoke_cli(
                [
                    "--db",
                    str(db_path),
                    "recall",
                    "--project",
                    "svc",
                    "--root",
                    str(word_root),
                    "--json",
                    query,
                ],
            )
            assert run.code == 0, run.err
            results.append([m["id"] for m in json.loads(run.out)["matches"]])
        found = (results[0], results[1])
    assert found == ([], [ids[1]])


# Words alone: the word score ---------------------------------------------------


def test_a_word_held_by_exactly_common_floor_memos_still_picks_them(tmp_path: Path) -> None:
    floor = search.COMMON_FLOOR
    memos = [f"where is {w} set up? {n}" for w in ("zeta", "omega") for n in range(floor)]
    _, found = word_scores(tmp_path / "memos.db", memos, "zeta")
    # 50 memos of 100: no more than COMMON_FLOOR (nor COMMON_SHARE of 100), so not common.
    assert len(found.scores) == floor


def test_a_query_sharing_no_word_or_name_with_any_memo_scores_nothing(tmp_path: Path) -> None:
    _, found = word_scores(tmp_path / "memos.db", ["where is omega set up?"], "zeta quuxite")
    assert found == WordScores({}, unknown=1.0, identifiers={}, pinned=frozenset())


def test_a_memo_found_by_vector_with_only_common_words_scores_its_share_of_their_idf(
    tmp_path: Path,
) -> None:
    """Words held by too many memos pick no candidates, so BM25 ranks none; a memo the
    vectors found (``also``) still scores its coverage: the share of the query's IDF
    (BM25's, ln(1 + (N - n + 0.5) / (n + 0.5))) its words hold, and nothing for BM25."""
    memos = (
        [f"where is alpha set up? {n}" for n in range(30)]
        + [f"where are alpha and beta? {n}" for n in range(51)]
        + [f"where is gamma set up? {n}" for n in range(19)]
    )
    ids, found = word_scores(tmp_path / "memos.db", memos, "alpha beta", also=[0, 30, 81])
    total, held = 100, {"alpha": 81, "beta": 51}
    assert all(n > search.COMMON_FLOOR for n in held.values())
    idf = {w: math.log(1 + (total - n + 0.5) / (n + 0.5)) for w, n in held.items()}
    share = idf["alpha"] / (idf["alpha"] + idf["beta"])
    assert found.scores == {
        ids[0]: pytest.approx(search.COVERAGE_WEIGHT * share, rel=1e-9),
        ids[30]: pytest.approx(search.COVERAGE_WEIGHT, rel=1e-9),
    }


def test_bm25_lifts_the_memo_that_holds_the_words_where_they_weigh_more(tmp_path: Path) -> None:
    """Of two memos covering the query's words, the one holding them in its question
    (where BM25 weighs them four times the conclusion) scores more; both score above
    their coverage alone and at most 1."""
    memos = ["how is zorblat tuned?", ("how is it tuned?", "zorblat is tuned")]
    memos += [f"where is omega set up? {n}" for n in range(20)]
    (asked, told, *_), found = word_scores(tmp_path / "memos.db", memos, "zorblat")
    assert 1.0 >= found.scores[asked] > found.scores[told] > search.COVERAGE_WEIGHT


def test_a_word_whose_stem_starts_a_longer_ones_is_covered_through_it(tmp_path: Path) -> None:
    """ "tokenizer" holds "token": a memo that only says "tokenizer" covers both words of
    "token tokenizer", as a memo saying both does."""
    memos = ["where does the tokenizer live?", "where is omega set up?"]
    (longer, _), found = word_scores(tmp_path / "memos.db", memos, "token tokenizer")
    assert found.scores[longer] >= search.COVERAGE_WEIGHT


_TEXT = st.text(alphabet="abcdeéİ_1 .\n-", max_size=60)


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.lists(st.text(alphabet="abcdeé1", min_size=2, max_size=6), max_size=4))
def test_the_stem_matcher_holds_a_word_when_a_stem_starts_a_word_of_the_text(
    text: str, words: list[str]
) -> None:
    """Equal to reading every word of the text (letters and digits; "_" and the rest
    separate them) and asking whether it starts with a query word's stem."""
    text = text.lower()
    tokens = re.findall(r"[^\W_]+", text)
    expected = {w for w in words if any(t.startswith(search.stem(w)) for t in tokens)}
    assert search.StemMatcher(words).words_in(text) == expected


def test_the_stem_matcher_reads_names_and_skips_a_stem_inside_a_word() -> None:
    matcher = search.StemMatcher(["retries", "token", "tokenizer"])
    assert matcher.words_in("max_retries=3") == {"retries"}
    assert matcher.words_in("the retokenizer and maxretries") == set()
    assert matcher.words_in("a tokenizer") == {"token", "tokenizer"}
