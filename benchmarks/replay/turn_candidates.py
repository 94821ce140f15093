"""The held-out turns a Stop hook could capture, for labelling by hand (labels/turns.jsonl).

A turn of a held-out session (see :mod:`pairs`) whose prompt was typed, that read at least
one file inside the session's folder and changed none (no Edit, Write, MultiEdit or
NotebookEdit) and delegated nothing (no Task or Agent call): the facts capture requires,
without its rule on the prompt. Each is labelled ``keep``: would a careful person want it
kept as a memo (it answers, on its own, a lasting question about how the code is; not a
plan, review, status, advice or follow-up). Writes the texts to
``.cache/capture_candidates.txt`` (to read, never committed).

    .venv/bin/python benchmarks/replay/turn_candidates.py
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pairs import final_text, heldout_ids, reads_inside  # noqa: E402
from replay import prompt_text, turns, typed  # noqa: E402
from sources import CACHE, CODEBASES, load_index, load_session  # noqa: E402

CHANGING = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
DELEGATING = {"Task", "Agent"}
_PREAMBLE = re.compile(r"^\s*<system_instruction>.*?</system_instruction>\s*", re.DOTALL)


def tools_of(entries: list[dict[str, Any]]) -> set[str]:
    """The tools the turn's assistant called."""
    found: set[str] = set()
    for entry in entries:
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "assistant" and isinstance(content, list):
            found |= {
                str(b.get("name"))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
    return found


def candidates() -> list[dict[str, Any]]:
    """The held-out turns to label, in codebase and time order."""
    found = []
    for codebase in CODEBASES:
        held = heldout_ids(codebase)
        for meta in load_index(codebase):
            if meta["id"] not in held:
                continue
            entries = load_session(codebase, meta["id"])
            for first, end in turns(entries):
                text = prompt_text(entries[first]) or ""
                if not typed(text) or tools_of(entries[first:end]) & (CHANGING | DELEGATING):
                    continue
                if reads_inside(entries[first:end], meta["cwd"]) < 1:
                    continue
                found.append(
                    {
                        "codebase": codebase.name,
                        "turn": entries[first]["uuid"],
                        "prompt": text,
                        "answer": final_text(entries[first:end]),
                    }
                )
    return found


def main() -> int:
    found = candidates()
    with open(CACHE / "capture_candidates.txt", "w", encoding="utf-8") as out:
        for k, turn in enumerate(found):
            prompt = " ".join(_PREAMBLE.sub("", turn["prompt"]).split())[:400]
            answer = " ".join(turn["answer"].split())[:500]
            out.write(f"## {turn['codebase']}#{k} {turn['turn']}\nP: {prompt}\nA: {answer}\n")
    print(len(found), dict(Counter(t["codebase"] for t in found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
