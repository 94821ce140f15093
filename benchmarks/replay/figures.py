"""The replay's figures, per codebase, from a run's log (``.cache/runs/NAME``) and the labels.

* ``labels/pairs.jsonl`` (made before the held-out run): pairs of a later question-shaped
  prompt of a held-out session and an earlier turn; right / related / wrong.
* ``labels/turns.jsonl`` (made before the held-out run): held-out turns a Stop hook could
  capture; keep or not.
* ``labels/answers.jsonl`` (made after the run, from the answers): each prompt-hook injection
  and a seeded sample of recall answers on held-out prompts, each memo it brought paired
  with the turn it was captured from, labelled as the pairs are. ``--todo`` writes the
  pairs still to label (texts into the run's folder, ids into ``labels/answers_todo.jsonl``).
* ``../delegation/pairs.jsonl`` (the delegation benchmark's): does an earlier run's report
  answer a later delegated prompt (whole / part / none), runs named by their call's
  tool_use id; what the delegate hook brought is looked up there (:func:`delegation_figures`).

    .venv/bin/python benchmarks/replay/figures.py [--name RUN] [--todo]
    .venv/bin/python benchmarks/replay/figures.py --markdown [RUN ...]   # the README's tables
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

from pairs import final_text, heldout_ids  # noqa: E402
from replay import delegations, prompt_text, turns, typed  # noqa: E402
from sources import CACHE, CODEBASES, Codebase, load_index, load_session  # noqa: E402

#: The labels of the delegation benchmark: does an earlier run's report answer a later
#: delegated prompt (whole / part / none), runs named by tool_use id.
DELEGATION_PAIRS = HERE.parent / "delegation" / "pairs.jsonl"
#: What the delegate hook decided (see ``replay.decision``), in the order shown.
DECISIONS = ("answered", "check", "head start", "untouched")
RECALL_SAMPLE = 30
SEED = 38
Z = 1.96


def wilson(k: int, n: int) -> str:
    """``k/n = p [lo, hi]``, the Wilson 95 % interval."""
    if n == 0:
        return "n/a (0 of 0)"
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return f"{k}/{n} = {p:.2f} [{max(0.0, centre - half):.2f}, {min(1.0, centre + half):.2f}]"


def context_bytes(event: dict[str, Any]) -> int:
    """The UTF-8 bytes of the text a hook's answer adds to the agent's context."""
    if not event["stdout"].strip():
        return 0
    found = json.loads(event["stdout"]).get("hookSpecificOutput", {}).get("additionalContext")
    return len(found.encode()) if isinstance(found, str) else 0


def whole(match: dict[str, Any]) -> bool:
    """Whether a recall match came whole (with its conclusion), not lean."""
    return "conclusion" in match


def as_read(event: dict[str, Any]) -> dict[str, Any]:
    """A recall event with ``stdout_bytes`` counted as an agent reads the answer: the MCP
    tool's text content, the compact JSON of ``recall --json``'s indented output (the CLI's
    own count is kept as ``cli_bytes``)."""
    if event.get("event") != "recall" or not event.get("stdout"):
        return event
    try:
        answer = json.loads(event["stdout"])
    except ValueError:
        return event
    compact = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()
    return {**event, "cli_bytes": event["stdout_bytes"], "stdout_bytes": len(compact)}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def question_of(prompt: str) -> str:
    """The question a captured memo of this prompt holds (explomemo's own ``typed``)."""
    from explomemo.clients.hooks.capture import typed as captured

    return " ".join(captured(prompt).split())


def turn_index(codebase: Codebase) -> dict[str, dict[str, Any]]:
    """Every typed turn by the uuid of its prompt."""
    found = {}
    for meta in load_index(codebase):
        entries = load_session(codebase, meta["id"])
        for first, end in turns(entries):
            text = prompt_text(entries[first]) or ""
            if typed(text):
                found[entries[first]["uuid"]] = {
                    "session": meta["id"],
                    "developer": meta["developer"],
                    "prompt": text,
                    "answer": final_text(entries[first:end]),
                    "order": len(found),
                }
    return found


def delegation_index(codebase: Codebase) -> dict[str, dict[str, Any]]:
    """Every delegated run by its tool_use id, as :func:`turn_index` gives turns: its
    prompt, and its report as its ``answer``."""
    found = {}
    for meta in load_index(codebase):
        for run in delegations(load_session(codebase, meta["id"])):
            found.setdefault(
                run.id, {"prompt": str(run.input.get("prompt", "")), "answer": run.report}
            )
    return found


def memo_turns(
    memos: list[dict[str, Any]], developer: str, index: dict[str, dict[str, Any]]
) -> dict[int, str]:
    """Each captured memo's turn (the last turn of the developer whose prompt it holds)."""
    by_question: dict[str, str] = {}
    for uuid, turn in sorted(index.items(), key=lambda x: x[1]["order"]):
        if turn["developer"] == developer:
            by_question[question_of(turn["prompt"])] = uuid
    found = {}
    for memo in memos:
        uuid = by_question.get(" ".join(memo["question"].split()))
        if uuid is not None:
            found[memo["id"]] = uuid
    return found


def analyse(codebase: Codebase, run: Path, todo: list[dict[str, Any]]) -> dict[str, Any]:
    log = [as_read(e) for e in read_jsonl(run / f"{codebase.name}.jsonl")]
    if not log:
        return {}
    held = heldout_ids(codebase)
    index = turn_index(codebase)
    pair_labels = {
        (p["later"], p["earlier"]): p["label"]
        for p in read_jsonl(HERE / "labels" / "pairs.jsonl")
        + read_jsonl(HERE / "labels" / "answers.jsonl")
        if p["codebase"] == codebase.name and p.get("label")
    }
    sampled = {
        p["later"]
        for p in read_jsonl(HERE / "labels" / "pairs.jsonl")
        if p["codebase"] == codebase.name
    }
    turn_labels = {
        t["turn"]: t["keep"]
        for t in read_jsonl(HERE / "labels" / "turns.jsonl")
        if t["codebase"] == codebase.name
    }
    ends = [e for e in log if e["event"] == "end"]
    memo_of: dict[tuple[str, int], str] = {}
    origins: Counter[str] = Counter()
    captured_turns: set[str] = set()
    for end in ends:
        memos = end.get("memos") if isinstance(end.get("memos"), list) else []
        origins.update(m["origin"] for m in memos)
        for memo_id, uuid in memo_turns(memos, end["developer"], index).items():
            memo_of[end["developer"], memo_id] = uuid
            captured_turns.add(uuid)
    # A memo captured from a delegated run is named by the run's tool_use id, as the
    # delegation benchmark names runs.
    run_of: dict[tuple[str, int], str] = {
        (e["developer"], e["memo"]): e["delegation"]
        for e in log
        if e["event"] == "subagent_stop" and e.get("memo") is not None
    }
    memo_of.update(run_of)
    run_labels = {
        (p["earlier"], p["later"]): p["label"]
        for p in read_jsonl(DELEGATION_PAIRS)
        if p["codebase"] == codebase.repo and p.get("label") and "later" in p
    } | {
        (p["earlier"], p["later"]): p["label"]
        for p in read_jsonl(HERE / "labels" / "answers.jsonl")
        if p["codebase"] == codebase.name and p.get("label") and p["later"].startswith("toolu_")
    }
    out: dict[str, Any] = {
        "codebase": codebase.name,
        "developers": len(ends),
        "memos": dict(origins),
    }
    out["stats"] = [e.get("stats") for e in ends]
    for part, keep in (("all", lambda s: True), ("heldout", lambda s: s in held)):
        events = [e for e in log if e["event"] not in ("end", "version") and keep(e["session"])]
        sessions = {e["session"] for e in events}
        n = len(sessions) or 1
        figures: dict[str, Any] = {"sessions": len(sessions)}
        for kind in ("session-start", "prompt", "stop", "recall", "delegate", "subagent_stop"):
            of = [e for e in events if e["event"] == kind]
            figures[kind] = {
                "calls": len(of),
                "bytes": sum(e["stdout_bytes"] for e in of),
                "per_session": round(sum(e["stdout_bytes"] for e in of) / n),
                "nonempty": sum(1 for e in of if e["stdout_bytes"]),
                "stderr_lines": sum(1 for e in of if e["stderr_bytes"]),
                "max": max((e["stdout_bytes"] for e in of), default=0),
            }
        figures["stop"]["blocks"] = sum(
            1 for e in events if e["event"] == "stop" and '"block"' in e["stdout"]
        )
        figures["delegations"] = delegation_figures(codebase, events, run_of, run_labels, todo)
        starts = [e for e in events if e["event"] == "session-start"]
        # The 600 bytes are what reaches the agent: the index's text, as Claude Code
        # hands it on, not the JSON (escapes and all) the hook prints around it.
        figures["session-start"]["over_600"] = sum(1 for e in starts if context_bytes(e) > 600)
        # Prompt hook injections: which memos, and their labels.
        injections = []
        for e in events:
            if e["event"] != "prompt" or not e["stdout_bytes"]:
                continue
            ids = [int(x) for x in re.findall(r"memo (\d+)", e["stdout"])] or [
                int(x) for x in re.findall(r"#(\d+)", e["stdout"])
            ]
            labels = []
            for memo_id in ids:
                uuid = memo_of.get((e["developer"], memo_id))
                label = pair_labels.get((e["prompt"], uuid))
                labels.append(label)
                if label is None:
                    todo.append(
                        {
                            "codebase": codebase.name,
                            "later": e["prompt"],
                            "earlier": uuid,
                            "why": "prompt hook",
                            "memo": memo_id,
                        }
                    )
            injections.append(labels)
        figures["prompt_injections"] = {
            "prompts": len(injections),
            "memos": sum(len(x) for x in injections),
            "right": sum(x.count("right") for x in injections),
            "related": sum(x.count("related") for x in injections),
            "wrong": sum(x.count("wrong") for x in injections),
            "unlabelled": sum(x.count(None) for x in injections),
        }
        # Recall answers.
        recalls = [e for e in events if e["event"] == "recall"]
        answered = []
        for e in recalls:
            try:
                result = json.loads(e["stdout"])
            except ValueError:
                continue
            if result.get("matches"):
                answered.append((e, result))
        figures["recall"]["answered"] = len(answered)
        figures["recall"]["mean"] = round(
            sum(e["stdout_bytes"] for e in recalls) / (len(recalls) or 1)
        )
        figures["recall"]["whole_answers"] = sum(
            1 for _, r in answered if any(whole(m) for m in r["matches"])
        )
        # Every whole match (its conclusion served): labelled, for the share that is wrong
        # (held-out) and for what stats counts as spared (fresh ones, every session).
        whole_labels: Counter[str] = Counter()
        stats_like = labels_spared = 0
        fresh_labels: Counter[str] = Counter()
        for e, result in answered:
            for m in result["matches"]:
                if not whole(m):
                    continue
                uuid = memo_of.get((e["developer"], m["id"]))
                label = pair_labels.get((e["prompt"], uuid))
                if label is None and (m["status"] == "fresh" or part == "heldout"):
                    todo.append(
                        {
                            "codebase": codebase.name,
                            "later": e["prompt"],
                            "earlier": uuid,
                            "why": "whole",
                            "memo": m["id"],
                        }
                    )
                whole_labels[label or "unlabelled"] += 1
                if m["status"] == "fresh":
                    fresh_labels[label or "unlabelled"] += 1
                    size = sum(f.get("size", 0) for f in m.get("files", []))
                    stats_like += size
                    if label == "right":
                        labels_spared += size
        figures["recall"]["whole_matches"] = dict(whole_labels)
        figures["recall"]["fresh_whole_matches"] = dict(fresh_labels)
        figures["recall"]["fresh_whole_bytes"] = stats_like
        figures["recall"]["labels_spared_bytes"] = labels_spared
        if part == "heldout":
            rng = random.Random(f"{SEED}-{codebase.name}")
            sample = sorted(rng.sample(range(len(answered)), min(RECALL_SAMPLE, len(answered))))
            graded = Counter()
            whole_graded = Counter()
            right_prompts = set()
            for k in sample:
                e, result = answered[k]
                labels = []
                for m in result["matches"][:3]:
                    uuid = memo_of.get((e["developer"], m["id"]))
                    label = pair_labels.get((e["prompt"], uuid))
                    if label is None:
                        todo.append(
                            {
                                "codebase": codebase.name,
                                "later": e["prompt"],
                                "earlier": uuid,
                                "why": "recall",
                                "memo": m["id"],
                            }
                        )
                    labels.append(label)
                    if whole(m):
                        whole_graded[label or "unlabelled"] += 1
                grade = (
                    "right"
                    if "right" in labels
                    else "related"
                    if "related" in labels
                    else "unlabelled"
                    if None in labels
                    else "wrong"
                )
                graded[grade] += 1
                if grade == "right":
                    right_prompts.add(e["prompt"])
            for (later, _), label in pair_labels.items():
                if label == "right":
                    right_prompts.add(later)
            figures["recall"]["sample"] = dict(graded)
            figures["recall"]["sample_whole_matches"] = dict(whole_graded)
            no_answer = [
                e for e in recalls if e["prompt"] in sampled and e["prompt"] not in right_prompts
            ]
            # An answer's `,"query":"…"`; a recall before any database existed answered
            # nothing (exit 2, one line on stderr).
            echo = sum(
                len(json.dumps(json.loads(e["stdout"])["query"], ensure_ascii=False).encode()) + 9
                for e in no_answer
                if e["stdout"].strip()
            )
            figures["recall"]["no_right_memo"] = {
                "prompts": len(no_answer),
                "mean": round(sum(e["stdout_bytes"] for e in no_answer) / (len(no_answer) or 1)),
                "mean_without_query_echo": round(
                    (sum(e["stdout_bytes"] for e in no_answer) - echo) / (len(no_answer) or 1)
                ),
                "max": max((e["stdout_bytes"] for e in no_answer), default=0),
            }
            held_turns = {u for u in turn_labels}
            caught = [u for u in captured_turns if index.get(u, {}).get("session") in held]
            figures["capture"] = {
                "captured": len(caught),
                "keep": sum(1 for u in caught if turn_labels.get(u) is True),
                "not_keep": sum(1 for u in caught if turn_labels.get(u) is False),
                "unlabelled": [u for u in caught if u not in held_turns],
                "labelled_keep_not_captured": sum(
                    1 for u, k in turn_labels.items() if k and u not in captured_turns
                ),
            }
        out[part] = figures
    return out


def delegation_figures(
    codebase: Codebase,
    events: list[dict[str, Any]],
    run_of: dict[tuple[str, int], str],
    run_labels: dict[tuple[str, str], str],
    todo: list[dict[str, Any]],
) -> dict[str, Any]:
    """The delegated runs: how many, what the delegate hook decided (and its bytes), the
    labels of what it brought (a memo of an earlier run against this delegation, from the
    delegation benchmark's pairs or ``labels/answers.jsonl``), what the SubagentStop hook
    captured and which runs were not replayed."""
    hooked = [e for e in events if e["event"] == "delegate"]
    skipped = [e for e in events if e["event"] == "subagent_skipped"]
    stops = [e for e in events if e["event"] == "subagent_stop"]
    decided: Counter[str] = Counter(e["decision"] for e in hooked)
    sizes: Counter[str] = Counter()
    labels: dict[str, Counter[str]] = {kind: Counter() for kind in DECISIONS}
    served = []
    for e in hooked:
        sizes[e["decision"]] += e.get("brought_bytes", e["stdout_bytes"])
        for memo in e["memos"]:
            run = run_of.get((e["developer"], memo))
            label = run_labels.get((run, e["delegation"])) if run else None
            labels[e["decision"]][label or ("unlabelled" if run else "a turn's memo")] += 1
            served.append(
                {
                    "decision": e["decision"],
                    "developer": e["developer"],
                    "memo": memo,
                    "run": run,
                    "delegation": e["delegation"],
                    "label": label,
                    "bytes": e["stdout_bytes"],
                }
            )
            if label is None and run is not None and e["decision"] in ("answered", "check"):
                todo.append(
                    {
                        "codebase": codebase.name,
                        "later": e["delegation"],
                        "earlier": run,
                        "why": f"delegate {e['decision']}",
                        "memo": memo,
                    }
                )
    return {
        "seen": len({e["delegation"] for e in hooked + skipped}),
        "hooked": len(hooked),
        "decisions": {kind: decided.get(kind, 0) for kind in DECISIONS},
        "bytes": {kind: sizes.get(kind, 0) for kind in DECISIONS},
        "labels": {kind: dict(counts) for kind, counts in labels.items()},
        "served": served,
        "stops": len(stops),
        "captured": sum(1 for e in stops if e.get("memo") is not None),
        "skipped": dict(Counter(e["why"] for e in skipped)),
    }


def _kb(n: float) -> str:
    return f"{n:,.0f} B" if n < 10_000 else f"{n / 1024:,.1f} KiB"


def _labels(counts: dict[str, int]) -> str:
    parts = [f"{counts.get(k, 0)} {k}" for k in ("right", "related", "wrong")]
    if counts.get("unlabelled"):
        parts.append(f"{counts['unlabelled']} unlabelled")
    return " / ".join(parts)


def _rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The README's rows of one run of one codebase."""
    a, h = r["all"], r["heldout"]
    spared = sum(
        p["bytes_spared"] for s in r["stats"] if isinstance(s, dict) for p in s["projects"]
    )
    served = sum(p["served"] for s in r["stats"] if isinstance(s, dict) for p in s["projects"])
    inj = a["prompt_injections"]
    hinj = h["prompt_injections"]
    rec = h["recall"]
    none = rec["no_right_memo"]
    whole = rec["whole_matches"]
    cap = h["capture"]
    labelled_cap = cap["keep"] + cap["not_keep"]
    origins = ", ".join(f"{n} {o}" for o, n in sorted(r["memos"].items())) or "none"

    def per(kind: str) -> str:
        if kind not in h:
            return "not replayed"
        return f"{_kb(h[kind]['per_session'])} ({_kb(a[kind]['per_session'])})"

    return [
        (
            "sessions: held-out (all); databases",
            f"{h['sessions']} ({a['sessions']}); {r['developers']}",
        ),
        ("memos at the end, by origin", origins),
        ("session-start: bytes a session", per("session-start")),
        (
            "session-start: sessions over 600 B of text, held-out",
            f"{h['session-start']['over_600']} of {h['sessions']}",
        ),
        (
            "session-start and prompt hook: stderr lines, all",
            str(a["session-start"]["stderr_lines"] + a["prompt"]["stderr_lines"]),
        ),
        ("prompt hook: bytes a session", per("prompt")),
        ("prompt hook: prompts injected, held-out (all)", f"{hinj['prompts']} ({inj['prompts']})"),
        ("prompt hook: memos injected, all sessions", f"{inj['memos']}: {_labels(inj)}"),
        (
            "prompt hook: precision, all sessions",
            wilson(inj["right"], inj["memos"] - inj["unlabelled"]),
        ),
        ("stop: bytes a session", per("stop")),
        ("stop: turns blocked, held-out (all)", f"{h['stop']['blocks']} ({a['stop']['blocks']})"),
        ("recall: bytes a session", per("recall")),
        ("recall: calls / answered with a match, held-out", f"{rec['calls']} / {rec['answered']}"),
        ("recall: mean answer, held-out", _kb(rec["mean"])),
        ("recall: sample of answers, held-out", _labels(rec.get("sample", {}))),
        ("recall: whole matches, held-out", f"{sum(whole.values())}: {_labels(whole)}"),
        (
            "recall: whole matches right, held-out",
            wilson(whole.get("right", 0), sum(whole.values()) - whole.get("unlabelled", 0)),
        ),
        (
            "recall: mean answer on labelled prompts no memo answers (without the echoed query)",
            f"{_kb(none['mean'])} ({_kb(none['mean_without_query_echo'])}),"
            f" {none['prompts']} prompts",
        ),
        ("stats: served / spared, all", f"{served} / {_kb(spared)}"),
        (
            "labels: spared (fresh whole matches labelled right), all",
            _kb(a["recall"]["labels_spared_bytes"]),
        ),
        ("labels: fresh whole matches, all", _labels(a["recall"].get("fresh_whole_matches", {}))),
        ("turn capture: held-out turns captured", str(cap["captured"])),
        (
            "turn capture: worth keeping / captured, held-out",
            wilson(cap["keep"], labelled_cap)
            + (f" (+{len(cap['unlabelled'])} labelled after the run)" if cap["unlabelled"] else ""),
        ),
        (
            "turn capture: labelled worth keeping, not captured",
            str(cap["labelled_keep_not_captured"]),
        ),
        *_delegation_rows(a.get("delegations"), h.get("delegations"), per),
    ]


def _delegation_rows(
    a: dict[str, Any] | None, h: dict[str, Any] | None, per: Any
) -> list[tuple[str, str]]:
    """The rows on delegated runs (a run made before they were replayed has none)."""
    labels = [
        "delegations: seen, all (delegate hook / subagent-stop replayed)",
        "delegations: not replayed at their end, all",
        "delegate hook: answered whole / stale check / head start / untouched, held-out (all)",
        "delegate hook: bytes a session",
        "delegate hook: bytes brought (the answer, or what it added to the prompt): answered"
        " whole / stale check / head start, all",
        "delegate hook: answered whole, labels of (memo's run, delegation), all",
        "delegate hook: stale check, labels of (memo's run, delegation), all",
        "delegate hook: head start, labels of (memo's run, delegation), all",
        "subagent-stop: runs captured as memos, held-out (all)",
    ]
    if a is None or h is None:
        return [(label, "not replayed") for label in labels]

    def decided(f: dict[str, Any]) -> str:
        return " / ".join(str(f["decisions"][k]) for k in DECISIONS)

    def graded(kind: str) -> str:
        counts = a["labels"][kind]
        order = ("whole", "part", "none", "unlabelled", "a turn's memo")
        return f"{sum(counts.values())}: " + " / ".join(
            f"{counts.get(k, 0)} {k}" for k in order if counts.get(k) or k in order[:3]
        )

    skipped = ", ".join(f"{n} {why}" for why, n in sorted(a["skipped"].items())) or "none"
    return list(
        zip(
            labels,
            [
                f"{a['seen']} ({a['hooked']} / {a['stops']})",
                skipped,
                f"{decided(h)} ({decided(a)})",
                per("delegate"),
                " / ".join(_kb(a["bytes"][k]) for k in DECISIONS[:3]),
                graded("answered"),
                graded("check"),
                graded("head start"),
                f"{h['captured']} ({a['captured']})",
            ],
            strict=True,
        )
    )


def markdown(runs: list[str]) -> str:
    """One table a codebase: a row a figure, a column a run."""
    loaded = {
        name: {
            r["codebase"]: r
            for r in json.loads((CACHE / "runs" / name / "figures.json").read_text())
        }
        for name in runs
    }
    out = []
    for codebase in CODEBASES:
        columns = [loaded[name].get(codebase.name) for name in runs]
        if not any(columns):
            continue
        rows = [_rows(c) if c else [] for c in columns]
        out.append(f"### {codebase.name} ({codebase.repo} at {codebase.commit[:12]})\n")
        out.append("| figure | " + " | ".join(runs) + " |")
        out.append("|---|" + "---|" * len(runs))
        for k, (label, _) in enumerate(rows[0]):
            out.append(f"| {label} | " + " | ".join(r[k][1] if r else "" for r in rows) + " |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="after")
    parser.add_argument("--todo", action="store_true")
    parser.add_argument("--markdown", nargs="+", metavar="RUN")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(args.markdown))
        return 0
    run = CACHE / "runs" / args.name
    todo: list[dict[str, Any]] = []
    results = []
    for codebase in CODEBASES:
        found = analyse(codebase, run, todo)
        if found:
            results.append(found)
            print(json.dumps(found, indent=1))
    (run / "figures.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    if args.todo:
        seen = set()
        unique = []
        for item in todo:
            key = (item["codebase"], item["later"], item["earlier"])
            if key not in seen and item["earlier"] is not None:
                seen.add(key)
                unique.append(item)
        with open(HERE / "labels" / "answers_todo.jsonl", "w", encoding="utf-8") as out:
            for item in unique:
                out.write(json.dumps(item) + "\n")
        indexes = {c.name: turn_index(c) | delegation_index(c) for c in CODEBASES}
        lines = []
        for k, item in enumerate(unique):
            index = indexes[item["codebase"]]
            later, earlier = index.get(item["later"], {}), index.get(item["earlier"], {})
            lines.append(f"## {k} {item['codebase']} {item['why']}")
            lines.append("L: " + " ".join(later.get("prompt", "?").split())[:400])
            lines.append("E-P: " + " ".join(earlier.get("prompt", "?").split())[:250])
            lines.append("E-A: " + " ".join(earlier.get("answer", "?").split())[:600])
        # Beside the run's log: another run's list (the cache is shared) is left alone.
        (run / "answers_todo.txt").write_text("\n".join(lines), encoding="utf-8")
        print(len(unique), "pairs to label", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
