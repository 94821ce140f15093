"""Prompt-hook precision: labelled prompts over the httpx memos, through the real hook.

Downloads the pinned sdist named in ../recall_quality/labels.json (as that
benchmark does), records its 40 memos by words into a fresh database, then
runs ``explomemo.clients.hooks.prompt`` on every prompt of prompts.json, exactly as
``explomemo hook prompt`` does, and counts:

* precision: memos shown that the labels say answer the prompt, over all memos shown;
* recall: prompts with an answering memo that got one shown;
* silent: prompts no memo answers that got nothing added.

``tuning`` prompts chose the constants of explomemo/recall/prompts.py; ``heldout``
ones were written with them, before any scoring existed, and never chose
anything.

    .venv/bin/python benchmarks/hook_prompts/run.py [--verbose]
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

from run import fetch_codebase  # noqa: E402  (the recall benchmark's downloader)

from explomemo.clients.hooks import prompt  # noqa: E402
from explomemo.memos.cache import MemoCache  # noqa: E402
from explomemo.recall.sources import FixedModel  # noqa: E402

SHOWN = re.compile(r"^\[memo (\d+), ", re.MULTILINE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list every wrong or missed prompt")
    args = parser.parse_args()
    prompts = json.loads((HERE / "prompts.json").read_text())
    labels = json.loads((HERE / prompts["memos"]).resolve().read_text())
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
        print("| prompts | count | precision | recall | silent on unanswered |")
        print("|---|---|---|---|---|")
        for name in ("tuning", "heldout"):
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
