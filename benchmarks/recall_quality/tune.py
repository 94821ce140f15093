"""Choose the fusion settings of explomemo/search.py on the TUNING queries only.

Records the labelled memos (as run.py does), computes once per tuning query
each memo's two cosines (whole memo, question) and the word scores, then
replays the ranking for every combination of: how the two cosines make the
vector score (the whole memo's alone; the better of the two with the
question's discounted, as explomemo does; a linear mix), the word weight, the
unknown-word penalty and the cut-off. Prints the best settings of each
under the rule used since the first round (the best recall@1 with at least 8
of 10 unrelated queries answered with nothing, ties broken by recall@3, then
by the distance to the nearest cut-off that loses either), with identifier
matches on and off, and the words-alone cut-off sweep.

The unknown-word penalty is not chosen by that rule: the tuning set's
unrelated queries are far from the domain (React, GPUs, Kubernetes), so every
word of theirs is unknown to every memo, and the higher the penalty the lower
the cut-off the rule picks (0.3 gives 0.17). The code takes the lowest
penalty at which the tuning figures stay no worse than before this round
(0.650 / 0.812 / 8 of 10), so that the cut-off leans least on unrelated
questions sharing no word with the memos.

Held-out queries are never read here.

    .venv/bin/python benchmarks/recall_quality/tune.py [--labels FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from run import HERE, fetch_codebase, record_memos

from explomemo import search
from explomemo.embeddings import load_embedder
from explomemo.memos import FixedModel
from explomemo.vectors import query_vector

Cosines = npt.NDArray[np.float32]
#: How a memo's two cosines (whole memo, question) make its vector score.
MIXES: dict[str, Callable[[Cosines, Cosines], Cosines]] = {
    "whole memo only (question vector off)": lambda w, q: w,
    **{
        f"max(whole, question - {d:.2f})": (lambda w, q, d=d: np.maximum(w, q - d))
        for d in (0.0, 0.02, 0.04, 0.05, 0.06, 0.08, 0.10)
    },
    **{
        f"{1 - a:.1f} whole + {a:.1f} question": (lambda w, q, a=a: (1 - a) * w + a * q)
        for a in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
    },
}
#: The mix explomemo uses (search.vector_score).
CHOSEN = f"max(whole, question - {search.QUESTION_DISCOUNT:.2f})"
WORDS_WEIGHTS = [0.1, 0.15, 0.2, 0.25, 0.3, 0.4]
PENALTIES = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
CUTOFFS = [round(0.16 + i * 0.01, 2) for i in range(25)]
WORDS_CUTOFFS = [round(0.14 + i * 0.01, 2) for i in range(24)]


@dataclass
class Query:
    """One tuning query: the memo it is about (None: unrelated) and what ranking needs."""

    want: int | None
    text: str
    words: search.WordScores
    #: Vector hits (the nearest memos, with their vector score) for each mix.
    hits: dict[str, list[tuple[int, float]]]


@dataclass(frozen=True)
class Score:
    """recall@1, recall@3 and unrelated queries answered with nothing."""

    at1: float
    at3: float
    empty: int


@contextmanager
def settings(**values: Any) -> Iterator[None]:
    """explomemo.search's module settings set to ``values`` for the block."""
    saved = {name: getattr(search, name) for name in values}
    for name, value in values.items():
        setattr(search, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(search, name, value)


def tuning_queries(labels: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(memo key or None, query) of every tuning query."""
    found: list[tuple[str | None, str]] = [
        (memo["key"], query) for memo in labels["memos"] for query in memo["queries"]
    ]
    return found + [(None, query) for query in labels["unrelated"]]


def prepare(labels: dict[str, Any], root: Path, db: Path, model: FixedModel) -> list[Query]:
    """Record the memos, then compute each tuning query's word scores and vector hits."""
    cache, ids = record_memos(labels, root, db, model)
    prepared: list[Query] = []
    try:
        embedder = model.embedder
        for key, text in tuning_queries(labels):
            want = None if key is None else ids[key]
            hits: dict[str, list[tuple[int, float]]] = {}
            also: list[int] = []
            if embedder is not None:
                vector = query_vector(embedder, text)
                index = cache.vectors.index(embedder, "bench", len(vector))
                also = [int(i) for i in index.ids]
                cosines = index.cosines(vector)
                for name, mix in MIXES.items():
                    scores = mix(cosines[:, 0], cosines[:, 1])
                    best = np.argsort(-scores)[: search.CANDIDATES]
                    hits[name] = [(also[i], float(scores[i])) for i in best]
            with cache.store.read() as conn:
                words = search.WordSearch().scores(cache.store, conn, "bench", text, also=also)
            prepared.append(Query(want, text, words, hits))
    finally:
        cache.close()
    return prepared


def evaluate(queries: list[Query], mix: str | None) -> Score:
    """Rank every query with the current settings; ``mix`` None: words alone."""
    at1 = at3 = related = empty = 0
    for query in queries:
        found = [c.id for c in search.fuse(None if mix is None else query.hits[mix], query.words)]
        if query.want is None:
            empty += not found
        else:
            related += 1
            at1 += found[:1] == [query.want]
            at3 += query.want in found[:3]
    return Score(at1 / related, at3 / related, empty)


def without_identifiers(queries: list[Query]) -> list[Query]:
    """The same queries with identifier matches left out of their word scores."""
    return [replace(q, words=replace(q.words, identifiers={}, pinned=frozenset())) for q in queries]


def sweep(queries: list[Query], mixes: Iterator[str] | list[str]) -> dict[tuple[Any, ...], Score]:
    """Every combination of settings with its score."""
    found: dict[tuple[Any, ...], Score] = {}
    for mix, words_weight, penalty, cutoff in itertools.product(
        mixes, WORDS_WEIGHTS, PENALTIES, CUTOFFS
    ):
        with settings(WORDS_WEIGHT=words_weight, UNKNOWN_PENALTY=penalty, FUSED_CUTOFF=cutoff):
            found[mix, words_weight, penalty, cutoff] = evaluate(queries, mix)
    return found


def best(found: dict[tuple[Any, ...], Score]) -> tuple[tuple[Any, ...], Score]:
    """The rule: best recall@1 with >= 8 of 10 unrelated empty, then recall@3, then margin."""
    eligible = {k: s for k, s in found.items() if s.empty >= 8}

    def margin(key: tuple[Any, ...]) -> int:
        # How many cut-off steps either way keep the same recall@1 and >= 8 empty.
        mix, words_weight, penalty, cutoff = key
        at = CUTOFFS.index(cutoff)
        steps = 0
        for step in range(1, len(CUTOFFS)):
            for side in (at - step, at + step):
                if not 0 <= side < len(CUTOFFS):
                    return steps
                near = found[mix, words_weight, penalty, CUTOFFS[side]]
                if near.empty < 8 or near.at1 < found[key].at1:
                    return steps
            steps = step
        return steps

    key = max(eligible, key=lambda k: (eligible[k].at1, eligible[k].at3, margin(k)))
    return key, eligible[key]


def describe(key: tuple[Any, ...], score: Score) -> str:
    """One line for a setting and its score."""
    mix, words_weight, penalty, cutoff = key
    return (
        f"{mix}; words weight {words_weight}; unknown penalty {penalty}; cut-off {cutoff}:"
        f" recall@1 {score.at1:.3f}, recall@3 {score.at3:.3f}, unrelated empty {score.empty}/10"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labels", type=Path, default=HERE / "labels.json")
    args = parser.parse_args()
    labels = json.loads(args.labels.read_text())
    base = labels["codebase"]
    with tempfile.TemporaryDirectory(prefix="explomemo-tune-") as tmp:
        root = fetch_codebase(base["name"], base["version"], Path(tmp) / "src")
        with_model = prepare(labels, root, Path(tmp) / "emb.db", FixedModel(load_embedder({})))
        words_alone = prepare(labels, root, Path(tmp) / "words.db", FixedModel(None))
    print(f"{base['name']}=={base['version']}: {len(labels['memos'])} memos, tuning queries only")
    for name, queries in [
        ("identifiers on", with_model),
        ("identifiers off", without_identifiers(with_model)),
    ]:
        everything = sweep(queries, list(MIXES))
        print(f"\n{name}, best settings for each way of scoring the two vectors")
        print(f"  (unknown-word penalty {search.UNKNOWN_PENALTY} as in the code):")
        for mix in MIXES:
            chosen = "*" if mix == CHOSEN else " "
            at_penalty = {
                k: s
                for k, s in everything.items()
                if k[0] == mix and k[2] == search.UNKNOWN_PENALTY
            }
            print(f" {chosen}", describe(*best(at_penalty)))
        print(f"  {CHOSEN}, best settings for each unknown-word penalty:")
        for penalty in PENALTIES:
            at_penalty = {k: s for k, s in everything.items() if k[0] == CHOSEN and k[2] == penalty}
            print("   ", describe(*best(at_penalty)))
        print(f"  cut-off sweep of {CHOSEN} at the settings in the code:")
        for cutoff in CUTOFFS:
            score = everything[CHOSEN, search.WORDS_WEIGHT, search.UNKNOWN_PENALTY, cutoff]
            print(
                f"    {cutoff:.2f}: recall@1 {score.at1:.3f}, recall@3 {score.at3:.3f},"
                f" unrelated empty {score.empty}/10"
            )
    print("\nwords alone (cut-off sweep):")
    for name, queries in [
        ("identifiers on", words_alone),
        ("identifiers off", without_identifiers(words_alone)),
    ]:
        for cutoff in WORDS_CUTOFFS:
            with settings(WORDS_CUTOFF=cutoff):
                score = evaluate(queries, None)
            print(
                f"  {name}, cut-off {cutoff:.2f}: recall@1 {score.at1:.3f},"
                f" recall@3 {score.at3:.3f}, unrelated empty {score.empty}/10"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
