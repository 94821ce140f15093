"""Recall-quality benchmark: labelled memos over a real codebase, paraphrased queries.

Downloads the pinned source distribution named in labels.json into a
temporary folder (never committed), records every memo with its real files,
then asks two sets of queries, once with embeddings + words and once with
words alone, and prints recall@1, recall@3 and how many unrelated queries
came back empty for each:

* tuning: each memo's two paraphrased queries and 10 unrelated queries (the
  cut-off and weights in explomemo/search.py were chosen on these);
* held-out: one more query per memo and 10 more unrelated queries, written
  before any run on them and never used to choose anything.

    .venv/bin/python benchmarks/recall_quality/run.py [--verbose] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explomemo import search
from explomemo.embeddings import load_embedder
from explomemo.memos import FixedModel, MemoCache

HERE = Path(__file__).resolve().parent
GOALS = {"recall@1": 0.90, "recall@3": 0.97, "unrelated_empty": 8, "words_recall@1": 0.60}


#: (name, field of each memo holding its queries, field of the unrelated queries)
QUERY_SETS = [("tuning", "queries", "unrelated"), ("held-out", "heldout", "heldout_unrelated")]


@dataclass
class Outcome:
    """What one mode scored on one query set."""

    mode: str
    queries: str
    at1: float
    at3: float
    unrelated_empty: int
    unrelated_total: int
    misses: list[str]
    #: With --sweep: every query's (gold id or None, [(id, score)]) with no cut-off.
    ranked: list[tuple[int | None, list[tuple[int, float]]]]


def fetch_codebase(name: str, version: str, into: Path) -> Path:
    """Download and unpack the pinned sdist; returns its top folder."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{name}=={version}",
            "-d",
            str(into),
        ],
        check=True,
    )
    archive = next(into.glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return next(p for p in into.iterdir() if p.is_dir())


def record_memos(
    labels: dict[str, Any], root: Path, db: Path, model: FixedModel
) -> tuple[MemoCache, dict[str, int]]:
    """Record every labelled memo into a fresh database; the open cache and each memo's id."""
    cache = MemoCache.open(db, model)
    ids: dict[str, int] = {}
    for memo in labels["memos"]:
        result = cache.record(
            question=memo["question"],
            conclusion=memo["conclusion"],
            files=memo["files"],
            project="bench",
            root=str(root),
        )
        ids[memo["key"]] = result.id
    return cache, ids


def run_mode(
    mode: str, labels: dict[str, Any], root: Path, db: Path, model: FixedModel, sweep: bool
) -> list[Outcome]:
    """Record every memo into a fresh database, then ask every query of each set."""
    cache, ids = record_memos(labels, root, db, model)
    outcomes = [
        _ask(cache, mode, name, labels, ids, field, unrelated_field, root, sweep)
        for name, field, unrelated_field in QUERY_SETS
    ]
    cache.close()
    return outcomes


def _ask(
    cache: MemoCache,
    mode: str,
    name: str,
    labels: dict[str, Any],
    ids: dict[str, int],
    field: str,
    unrelated_field: str,
    root: Path,
    sweep: bool,
) -> Outcome:
    ranked: list[tuple[int | None, list[tuple[int, float]]]] = []
    hits1 = hits3 = total = 0
    misses: list[str] = []
    for memo in labels["memos"]:
        queries = memo[field] if isinstance(memo[field], list) else [memo[field]]
        for query in queries:
            total += 1
            found = [
                m.id
                for m in cache.recall(query=query, project="bench", root=str(root), limit=3).matches
            ]
            want = ids[memo["key"]]
            hits1 += bool(found[:1] == [want])
            hits3 += want in found
            if found[:1] != [want]:
                misses.append(f"{memo['key']}: {query!r} -> {found}")
            if sweep:
                ranked.append((want, _uncut(cache, query, root)))
    empty = 0
    for query in labels[unrelated_field]:
        found = [m.id for m in cache.recall(query=query, project="bench", root=str(root)).matches]
        empty += not found
        if found:
            misses.append(f"unrelated: {query!r} -> {found}")
        if sweep:
            ranked.append((None, _uncut(cache, query, root)))
    return Outcome(
        mode,
        name,
        hits1 / total,
        hits3 / total,
        empty,
        len(labels[unrelated_field]),
        misses,
        ranked,
    )


def _uncut(cache: MemoCache, query: str, root: Path) -> list[tuple[int, float]]:
    saved = search.FUSED_CUTOFF, search.WORDS_CUTOFF
    search.FUSED_CUTOFF = search.WORDS_CUTOFF = 0.0
    try:
        result = cache.recall(query=query, project="bench", root=str(root), limit=20)
    finally:
        search.FUSED_CUTOFF, search.WORDS_CUTOFF = saved
    return [(m.id, m.score) for m in result.matches]


def print_sweep(outcome: Outcome) -> None:
    """recall@1, recall@3 and unrelated-empty for a range of cut-offs."""
    print(f"\n{outcome.mode}, {outcome.queries} queries: cut-off sweep")
    print(f"{'cut-off':>8} {'recall@1':>9} {'recall@3':>9} {'unrelated empty':>16}")
    for step in range(0, 13):
        cut = 0.20 + step * 0.02
        at1 = at3 = related = empty = unrelated = 0
        for want, matches in outcome.ranked:
            kept = [memo_id for memo_id, score in matches if score >= cut]
            if want is None:
                unrelated += 1
                empty += not kept
            else:
                related += 1
                at1 += kept[:1] == [want]
                at3 += want in kept[:3]
        print(f"{cut:>8.2f} {at1 / related:>9.3f} {at3 / related:>9.3f} {empty:>9}/{unrelated}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--verbose", action="store_true", help="list every miss")
    parser.add_argument("--labels", type=Path, default=HERE / "labels.json")
    parser.add_argument("--sweep", action="store_true", help="print a cut-off sweep")
    args = parser.parse_args()
    labels = json.loads(args.labels.read_text())
    base = labels["codebase"]
    with tempfile.TemporaryDirectory(prefix="explomemo-rq-") as tmp:
        root = fetch_codebase(base["name"], base["version"], Path(tmp) / "src")
        outcomes = [
            *run_mode(
                "embeddings+words",
                labels,
                root,
                Path(tmp) / "emb.db",
                FixedModel(load_embedder({})),
                args.sweep,
            ),
            *run_mode(
                "words alone", labels, root, Path(tmp) / "words.db", FixedModel(None), args.sweep
            ),
        ]
    queries = sum(len(m["queries"]) for m in labels["memos"])
    print(
        f"codebase {base['name']}=={base['version']}: {len(labels['memos'])} memos;"
        f" tuning: {queries} paraphrased queries, {len(labels['unrelated'])} unrelated;"
        f" held-out: {len(labels['memos'])} queries, {len(labels['heldout_unrelated'])} unrelated"
    )
    print(f"{'mode':<18} {'queries':<9} {'recall@1':>9} {'recall@3':>9} {'unrelated empty':>16}")
    for o in outcomes:
        print(
            f"{o.mode:<18} {o.queries:<9} {o.at1:>9.3f} {o.at3:>9.3f}"
            f" {o.unrelated_empty:>9}/{o.unrelated_total}"
        )
    by_key = {(o.mode, o.queries): o for o in outcomes}
    for name, _, _ in QUERY_SETS:
        both, words = by_key["embeddings+words", name], by_key["words alone", name]
        checks = [
            ("recall@1 >= 0.90 (embeddings+words)", both.at1 >= GOALS["recall@1"]),
            ("recall@3 >= 0.97 (embeddings+words)", both.at3 >= GOALS["recall@3"]),
            (
                ">= 8/10 unrelated empty (embeddings+words)",
                both.unrelated_empty >= GOALS["unrelated_empty"],
            ),
            ("recall@1 >= 0.60 (words alone)", words.at1 >= GOALS["words_recall@1"]),
        ]
        print(f"{name} queries:")
        for text, ok in checks:
            print(f"  {'met   ' if ok else 'MISSED'} {text}")
    if args.sweep:
        for o in outcomes:
            print_sweep(o)
    if args.verbose:
        for o in outcomes:
            print(f"\n{o.mode}, {o.queries} queries, misses:")
            for miss in o.misses:
                print("  " + miss)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
