"""The least a recall answer can weigh: the right memo alone, whole, for each labelled query.

A whole recall match holds the question, the conclusion, and the SHA-256 and size of
every file (since issue 38 only a match that clearly answers comes so). For each
query with a right memo, this prints the bytes of the answer that holds that memo
alone, whole, counted as run.py counts them (the compact JSON text an agent reads,
the query echoed in it). An answer that hands the agent its memo weighs at least
that, less at most 8 B (a real match may say "both" where this one says "embedding",
and round its score shorter). A mean above run.py's goal (GOALS["related_bytes"])
means that goal is out of reach for that set as long as every query gets its memo.

No query is searched: the memos are recorded (words only, nothing is embedded)
and each answer is built from the labels, so a held-out set stays held out.

    .venv/bin/python benchmarks/recall_quality/floor.py [--labels FILE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import DEFAULT_LABELS, GOALS, HERE, fetch_codebase, queries_of, record_memos, sets_of
from tune import memo_sizes

from explomemo.recall.sources import FixedModel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--labels",
        type=Path,
        nargs="+",
        default=[HERE / name for name in (*DEFAULT_LABELS, "labels_jinja2.json")],
        help="labels files (default: all three codebases)",
    )
    args = parser.parse_args()
    goal = GOALS["related_bytes"]
    print(f"{'codebase':<8} {'set':<28} {'queries':>7} {'floor mean':>10} {'min':>6} {'max':>6}")
    for path in args.labels:
        labels = json.loads(path.read_text())
        base = labels["codebase"]
        with tempfile.TemporaryDirectory(prefix="explomemo-rq-") as tmp:
            root = fetch_codebase(base["name"], base["version"], Path(tmp) / "src")
            cache, ids = record_memos(labels, root, Path(tmp) / "memos.db", FixedModel(None))
            try:
                sizes = memo_sizes(cache, root)
            finally:
                cache.close()
        for query_set in sets_of(path, labels, tuning_only=False):
            floors = [
                sizes.answer(query, [ids[key]])
                for key, query in queries_of(labels, query_set)
                if key is not None
            ]
            if not floors:
                continue
            mean = sum(floors) / len(floors)
            print(
                f"{base['name']:<8} {query_set.name:<28} {len(floors):>7} {mean:>10.0f}"
                f" {min(floors):>6} {max(floors):>6}" + ("  above the goal" if mean > goal else "")
            )
    print(
        f"goal: a mean answer of at most {goal} B on real queries (run.py GOALS); a floor above"
        " it cannot be met while every query gets its memo"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
