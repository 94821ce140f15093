"""The held-out part of the replay and its candidate pairs, for labelling by hand.

Held out: the last :data:`HELDOUT_SHARE` of each codebase's sessions by start time
(chosen before any figure of the replay was seen). In those sessions, the
question-shaped prompts (:func:`replay.question_shaped`, the prompts the replay
sends to recall) are the later prompts; a seeded sample of at most
:data:`PROMPTS_PER_CODEBASE` of them per codebase is labelled. For each, the earlier
turns of the same developer (earlier sessions, or earlier in the same session) that
could become a memo (a typed prompt, at least one Read inside the session's folder, a
final text) are ranked by TF-IDF cosine of the later prompt against the earlier turn's
prompt and answer (a ranking of this script, not explomemo's), and the first
:data:`CANDIDATES` are the pairs to label: does the earlier answer answer the later
prompt (right), help without answering (related), or not (wrong).

``pairs.py --write`` writes the pairs with their texts to ``.cache/pairs.txt`` (to read;
never committed) and the pairs without text to ``labels/pairs_todo.jsonl``; the labels
read from it are ``labels/pairs.jsonl`` (ids only, committed before the held-out run).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from replay import prompt_text, question_shaped, turns, typed  # noqa: E402
from sources import CACHE, CODEBASES, Codebase, load_index, load_session  # noqa: E402

HELDOUT_SHARE = 0.3
PROMPTS_PER_CODEBASE = 40
CANDIDATES = 3
SEED = 38
_WORD = re.compile(r"[a-z0-9_]{2,}")


def heldout_ids(codebase: Codebase) -> set[str]:
    """The held-out sessions of a codebase: the last 30 % by start time."""
    listed = load_index(codebase)
    keep = math.ceil(len(listed) * HELDOUT_SHARE)
    return {meta["id"] for meta in listed[len(listed) - keep :]}


def final_text(entries: list[dict[str, Any]]) -> str:
    """The turn's last assistant text."""
    for entry in reversed(entries):
        if entry.get("type") != "assistant":
            continue
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, list):
            texts = [
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            ]
            if any(t.strip() for t in texts):
                return "\n".join(texts)
    return ""


def reads_inside(entries: list[dict[str, Any]], cwd: str) -> int:
    count = 0
    for entry in entries:
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "assistant" and isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "Read":
                    path = (b.get("input") or {}).get("file_path")
                    if isinstance(path, str) and path.startswith(cwd.rstrip("/") + "/"):
                        count += 1
    return count


def all_turns(codebase: Codebase) -> list[dict[str, Any]]:
    """Every typed turn of the codebase, in time order, with what the labels need."""
    found = []
    for meta in load_index(codebase):
        entries = load_session(codebase, meta["id"])
        for first, end in turns(entries):
            text = prompt_text(entries[first]) or ""
            if not typed(text):
                continue
            found.append(
                {
                    "session": meta["id"],
                    "developer": meta["developer"],
                    "uuid": entries[first].get("uuid"),
                    "prompt": text,
                    "answer": final_text(entries[first:end]),
                    "reads": reads_inside(entries[first:end], meta["cwd"]),
                }
            )
    return found


def words(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def candidates(codebase: Codebase) -> list[dict[str, Any]]:
    """The pairs to label of one codebase."""
    held = heldout_ids(codebase)
    every = all_turns(codebase)
    docs = [words(t["prompt"] + " " + t["answer"][:4000]) for t in every]
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)

    def vector(c: Counter[str]) -> dict[str, float]:
        v = {w: (1 + math.log(k)) * math.log((n + 1) / (df.get(w, 0) + 1)) for w, k in c.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {w: x / norm for w, x in v.items()}

    vectors = [vector(d) for d in docs]
    later = [
        i for i, t in enumerate(every) if t["session"] in held and question_shaped(t["prompt"])
    ]
    rng = random.Random(f"{SEED}-{codebase.name}")
    chosen = sorted(rng.sample(later, min(PROMPTS_PER_CODEBASE, len(later))))
    pairs = []
    for i in chosen:
        q = vector(words(every[i]["prompt"]))
        scored = []
        for j in range(i):
            t = every[j]
            if t["developer"] != every[i]["developer"] or t["reads"] < 1 or not t["answer"].strip():
                continue
            score = sum(x * vectors[j].get(w, 0.0) for w, x in q.items())
            scored.append((score, j))
        for score, j in sorted(scored, reverse=True)[:CANDIDATES]:
            pairs.append(
                {
                    "codebase": codebase.name,
                    "later": every[i]["uuid"],
                    "earlier": every[j]["uuid"],
                    "score": round(score, 3),
                    "_later": every[i],
                    "_earlier": every[j],
                }
            )
        if not scored:
            pairs.append(
                {
                    "codebase": codebase.name,
                    "later": every[i]["uuid"],
                    "earlier": None,
                    "score": 0.0,
                    "_later": every[i],
                    "_earlier": None,
                }
            )
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    text = []
    todo = []
    for codebase in CODEBASES:
        for k, pair in enumerate(candidates(codebase)):
            todo.append({key: v for key, v in pair.items() if not key.startswith("_")})
            later, earlier = pair["_later"], pair["_earlier"]
            ids = f"later={pair['later']} earlier={pair['earlier']} score={pair['score']}"
            text.append(f"=== {codebase.name} #{k} {ids}")
            text.append("LATER PROMPT: " + later["prompt"][:700])
            if earlier is not None:
                text.append("EARLIER PROMPT: " + earlier["prompt"][:500])
                text.append("EARLIER ANSWER: " + earlier["answer"][:1200])
    if args.write:
        (CACHE / "pairs.txt").write_text("\n".join(text), encoding="utf-8")
        (HERE / "labels").mkdir(exist_ok=True)
        with open(HERE / "labels" / "pairs_todo.jsonl", "w", encoding="utf-8") as out:
            for pair in todo:
                out.write(json.dumps(pair) + "\n")
    print(len(todo), "pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
