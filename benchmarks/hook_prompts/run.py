"""Prompt-hook precision: labelled prompts over the httpx memos, through the real hook.

Downloads the pinned sdist named in ../recall_quality/labels.json (as that
benchmark does), records its 40 memos by words into a fresh database, then
runs ``explomemo.clients.hooks.prompt.prompt`` on every prompt of prompts.json, exactly as
``explomemo hook prompt`` does, and counts:

* precision: memos shown that the labels say answer the prompt, over all memos shown;
* recall: prompts with an answering memo that got one shown;
* silent: prompts no memo answers that got nothing added.

``tuning`` prompts chose the constants of explomemo/recall/prompts.py; ``heldout``
ones were written with them, before any scoring existed, and never chose
anything. ``--prompts prompts_jinja2.json`` asks the third, final held-out set
(jinja2 3.1.4, issue 22; a ``heldout`` list only): run it once, at the end of
issue 22. The output starts with the commit it ran and whether the tree was dirty.

    .venv/bin/python benchmarks/hook_prompts/run.py [--verbose] [--prompts FILE] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "recall_quality"))

from run import fetch_codebase, print_revision  # noqa: E402  (the recall benchmark's)

from explomemo.clients.hooks.prompt import prompt  # noqa: E402
from explomemo.memos.cache import MemoCache  # noqa: E402
from explomemo.recall.sources import FixedModel  # noqa: E402

SHOWN = re.compile(r"^\[memo (\d+), ", re.MULTILINE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list every wrong or missed prompt")
    parser.add_argument(
        "--prompts",
        type=Path,
        default=HERE / "prompts.json",
        help="prompts file (default: prompts.json over httpx; prompts_jinja2.json only when named)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="list the sets and how many prompts each would run, then stop (nothing is run)",
    )
    args = parser.parse_args()
    print_revision()
    prompts = json.loads(args.prompts.read_text())
    labels = json.loads((args.prompts.parent / prompts["memos"]).resolve().read_text())
    sets = [name for name in ("tuning", "heldout") if name in prompts]
    if args.dry_run:
        base = labels["codebase"]
        memos = len(labels["memos"])
        print(f"{args.prompts.name}: {base['name']}=={base['version']}, {memos} memos")
        for name in sets:
            answered = sum(bool(item["answers"]) for item in prompts[name])
            print(f"  {name}: {answered} answered, {len(prompts[name]) - answered} unanswered")
        return 0
    with tempfile.TemporaryDirectory(prefix="explomemo-hp-") as tmp:
        base = labels["codebase"]
        root = fetch_codebase(base["name"], base["version"], Path(tmp) / "src")
        db = Path(tmp) / "memos.db"
        keys: dict[int, str] = {}
        with MemoCache.open(db, FixedModel(None)) as cache:
            for memo in labels["memos"]:
                result = cache.record(
                    question=memo["question"],
                    conclusion=memo["conclusion"],
                    files=memo["files"],
                    project="bench",
                    root=str(root),
                )
                keys[result.id] = memo["key"]
        print(f"{args.prompts.name}: {base['name']}=={base['version']}, {len(keys)} memos")
        print("| prompts | count | precision | recall | silent on unanswered |")
        print("|---|---|---|---|---|")
        for name in sets:
            shown = right = answered = hit = unanswered = silent = 0
            for item in prompts[name]:
                answer = prompt({"cwd": str(root), "prompt": item["prompt"]}, db, "bench")
                text = answer["hookSpecificOutput"]["additionalContext"] if answer else ""
                got = [keys[int(i)] for i in SHOWN.findall(text)]
                gold = set(item["answers"])
                shown += len(got)
                right += sum(key in gold for key in got)
                if gold:
                    answered += 1
                    hit += any(key in gold for key in got)
                else:
                    unanswered += 1
                    silent += not got
                wrong = [key for key in got if key not in gold]
                if args.verbose and (wrong or (gold and not gold & set(got))):
                    print(f"  {name}: {item['prompt']!r} showed {got}, labels {sorted(gold)}")
            precision = right / shown if shown else 1.0
            print(
                f"| {name} | {len(prompts[name])} | {precision:.3f} ({right}/{shown}) |"
                f" {hit / answered:.3f} ({hit}/{answered}) | {silent}/{unanswered} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
