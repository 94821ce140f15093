"""Capture-rule precision and recall on the labelled turns of turns.jsonl.

Runs :func:`explomemo.clients.hooks.capture.should_capture`, the function the Stop hook
runs, on each labelled turn's prompt and facts (reads inside the root, edits, a memo
recorded, answered from a fresh memo) and compares with the label ``record``:

* precision: turns the rule records that the labels say to record, over all it records;
* recall: turns the labels say to record that the rule records.

The ``tuning`` half chose the rule; ``--heldout`` runs the other half (spent: the rule
changed after its one run), ``--heldout2`` the second held-out set (heldout2.jsonl,
labelled without seeing the rule; spent since), ``--heldout3`` the third (heldout3.jsonl,
likewise; spent since), ``--heldout4`` the fourth (heldout4.jsonl, likewise), once, after
the rule is fixed (see README.md).
Recall is also given apart for the real turns and the written ones.

    .venv/bin/python benchmarks/capture/run.py [--heldout | --heldout2 | ... | --heldout4]
        [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _common import code_line  # noqa: E402

from explomemo.clients.hooks.capture import TurnFacts, should_capture  # noqa: E402

#: Each set's file of labels, by its name (the flag that runs it, and its ``split``).
LABELS = {
    "tuning": "turns.jsonl",
    "heldout": "turns.jsonl",
    "heldout2": "heldout2.jsonl",
    "heldout3": "heldout3.jsonl",
    "heldout4": "heldout4.jsonl",
}
#: The goals of issue 24.
PRECISION_GOAL = 0.95
RECALL_GOAL = 0.8


def facts(turn: dict[str, object]) -> TurnFacts:
    """The rule's facts of one labelled turn."""
    return TurnFacts(
        reads=int(turn["reads"]),  # type: ignore[call-overload]
        edits=bool(turn["edits"]),
        recorded=bool(turn["recorded"]),
        answered_from_fresh_memo=bool(turn["answered_from_fresh_memo"]),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sets = parser.add_mutually_exclusive_group()
    sets.add_argument("--heldout", action="store_true", help="Run the held-out half.")
    sets.add_argument(
        "--heldout2", action="store_true", help="Run the second held-out set (heldout2.jsonl)."
    )
    sets.add_argument(
        "--heldout3", action="store_true", help="Run the third held-out set (heldout3.jsonl)."
    )
    sets.add_argument(
        "--heldout4", action="store_true", help="Run the fourth held-out set (heldout4.jsonl)."
    )
    parser.add_argument("--verbose", action="store_true", help="List every wrong call.")
    args = parser.parse_args()
    split = next((name for name in LABELS if getattr(args, name, False)), "tuning")
    labels = LABELS[split]
    rows = [json.loads(line) for line in (HERE / labels).read_text().splitlines()]
    rows = [row for row in rows if row["split"] == split]
    found = {"tp": [], "fp": [], "fn": [], "tn": []}
    for row in rows:
        said = should_capture(row["prompt"], facts(row["turn"]))
        kind = ("t" if said == row["record"] else "f") + ("p" if said else "n")
        found[kind].append(row)
    tp, fp, fn = len(found["tp"]), len(found["fp"]), len(found["fn"])
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(f"capture rule on the {split} half ({len(rows)} turns)")
    print(code_line())
    print(f"| precision | {precision:.3f} ({tp}/{tp + fp}) | goal >= {PRECISION_GOAL} |")
    print(f"| recall    | {recall:.3f} ({tp}/{tp + fn}) | goal >= {RECALL_GOAL} |")
    print(f"recorded {tp + fp}, left {len(found['tn']) + fn}; wrong: {fp} recorded, {fn} missed")
    for name, written in (("real", False), ("written", True)):
        hit = sum((row["source"] == "written") == written for row in found["tp"])
        missed = sum((row["source"] == "written") == written for row in found["fn"])
        if hit + missed:
            print(f"recall on the {name} turns: {hit / (hit + missed):.3f} ({hit}/{hit + missed})")
    if args.verbose:
        for kind, label in (("fp", "recorded, label false"), ("fn", "missed, label true")):
            for row in found[kind]:
                print(f"  {label}: {row['id']} {row['prompt'][:100]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
