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

import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from pairs import final_text, heldout_ids, reads_inside
from replay import prompt_text, turns, typed
from sources import CACHE, CODEBASES, load_index, load_session

EDIT = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
DELEG = {"Task", "Agent"}
out = []
for cb in CODEBASES:
    held = heldout_ids(cb)
    for meta in load_index(cb):
        if meta["id"] not in held:
            continue
        entries = load_session(cb, meta["id"])
        for first, end in turns(entries):
            text = prompt_text(entries[first]) or ""
            if not typed(text):
                continue
            tools = set()
            for e in entries[first:end]:
                c = (e.get("message") or {}).get("content")
                if e.get("type") == "assistant" and isinstance(c, list):
                    tools |= {
                        b.get("name")
                        for b in c
                        if isinstance(b, dict) and b.get("type") == "tool_use"
                    }
            if tools & EDIT or tools & DELEG:
                continue
            if reads_inside(entries[first:end], meta["cwd"]) < 1:
                continue
            out.append(
                {
                    "codebase": cb.name,
                    "turn": entries[first]["uuid"],
                    "prompt": text,
                    "answer": final_text(entries[first:end]),
                }
            )
print(len(out))
import collections

print(collections.Counter(o["codebase"] for o in out))
with open(str(CACHE / "capture_candidates.txt"), "w") as f:
    for i, o in enumerate(out):
        import re

        p = re.sub(
            r"^\s*<system_instruction>.*?</system_instruction>\s*", "", o["prompt"], flags=re.S
        )
        f.write(
            f"## {o['codebase']}#{i} {o['turn']}\nP: {' '.join(p.split())[:400]}\nA: {' '.join(o['answer'].split())[:500]}\n"
        )
