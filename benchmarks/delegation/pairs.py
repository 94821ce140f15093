"""The labelled delegation pairs of issue 39, resolved against the local transcript cache.

`pairs.jsonl` names runs by (codebase, tool_use id) only; the prompts and reports come from
`.cache/delegations.jsonl`, which `extract.py` writes from the public checkpoint branches.

    python benchmarks/delegation/pairs.py check   # every pair resolves and keeps the rules
    python benchmarks/delegation/pairs.py stats   # the figures README.md quotes
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "pairs.jsonl"
CACHE = HERE / ".cache" / "delegations.jsonl"

Label = Literal["whole", "part", "none"]
Split = Literal["dev", "heldout"]
Kind = Literal["real", "written", "near_miss"]
LABELS: tuple[Label, ...] = ("whole", "part", "none")
SPLITS: tuple[Split, ...] = ("dev", "heldout")
KINDS: tuple[Kind, ...] = ("real", "written", "near_miss")


@dataclass(frozen=True)
class Delegation:
    """One delegated subagent run as the cache holds it."""

    codebase: str
    tool_use_id: str
    session_id: str
    started: str
    finished: str | None
    subagent_type: str
    description: str
    prompt: str
    report: str | None
    reported: bool
    total_tokens: int | None
    edited: bool
    tools_seen: bool

    @property
    def is_memo_source(self) -> bool:
        """Whether this run may stand as an earlier run: it reported and edited nothing.

        A report is a finished run's answer, not a launch notice or an error. Edits are seen
        only where the transcript kept the subagent's tool calls (`tools_seen`).
        """
        return self.reported and not self.edited


@dataclass(frozen=True)
class Pair:
    """A labelled pair: does the earlier run's report answer the later delegated prompt?"""

    id: str
    codebase: str
    earlier: Delegation
    later_prompt: str
    later: Delegation | None
    label: Label
    split: Split
    kind: Kind
    why: str

    @property
    def earlier_prompt(self) -> str:
        """The memo's question: the prompt the earlier run was given."""
        return self.earlier.prompt

    @property
    def earlier_report(self) -> str:
        """The memo's conclusion: the earlier run's report."""
        return self.earlier.report or ""


def heldout_split(earlier_tool_use_id: str) -> Split:
    """The split rule fixed before labelling: odd SHA-256 of the earlier run's id is held out.

    All pairs of one earlier run fall on the same side, so no memo is seen in both halves.
    """
    digest = hashlib.sha256(earlier_tool_use_id.encode()).hexdigest()
    return "heldout" if int(digest, 16) % 2 else "dev"


def load_delegations(cache: Path = CACHE) -> dict[tuple[str, str], Delegation]:
    """Every cached delegation keyed by (codebase, tool_use id)."""
    if not cache.exists():
        raise FileNotFoundError(
            f"{cache} is missing: run `python benchmarks/delegation/extract.py` first"
        )
    runs = {}
    for line in cache.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        run = Delegation(
            codebase=raw["codebase"],
            tool_use_id=raw["tool_use_id"],
            session_id=raw["session_id"],
            started=raw["timestamp"],
            finished=raw.get("finished"),
            subagent_type=raw["subagent_type"],
            description=raw["description"],
            prompt=raw["prompt"],
            report=raw.get("report"),
            reported=raw["reported"],
            total_tokens=raw.get("total_tokens"),
            edited=raw["edited"],
            tools_seen=bool(raw.get("subagent_tools")),
        )
        runs[(run.codebase, run.tool_use_id)] = run
    return runs


def _pair(raw: dict[str, Any], runs: dict[tuple[str, str], Delegation]) -> Pair:
    where = f"pair {raw.get('id', '?')} in {PAIRS.name}"
    codebase = raw["codebase"]
    earlier = runs.get((codebase, raw["earlier"]))
    if earlier is None:
        raise ValueError(f"{where}: earlier run {raw['earlier']} is not in the cache of "
                         f"{codebase}; re-run extract.py on the pinned commits")
    later = None
    if "later" in raw:
        later = runs.get((codebase, raw["later"]))
        if later is None:
            raise ValueError(f"{where}: later run {raw['later']} is not in the cache of "
                             f"{codebase}; re-run extract.py on the pinned commits")
        later_prompt = later.prompt
    elif "written" in raw:
        later_prompt = raw["written"]
    else:
        raise ValueError(f"{where}: has neither 'later' nor 'written'; give one of them")
    if raw["label"] not in LABELS or raw["split"] not in SPLITS or raw["kind"] not in KINDS:
        raise ValueError(f"{where}: label/split/kind must be one of {LABELS}/{SPLITS}/{KINDS}")
    return Pair(raw["id"], codebase, earlier, later_prompt, later, raw["label"], raw["split"],
                raw["kind"], raw["why"])


def load_pairs(pairs: Path = PAIRS, cache: Path = CACHE) -> list[Pair]:
    """Every labelled pair with its earlier run and later prompt resolved from the cache."""
    runs = load_delegations(cache)
    lines = pairs.read_text(encoding="utf-8").splitlines()
    return [_pair(json.loads(line), runs) for line in lines if line.strip()]


def problems(pairs: list[Pair]) -> list[str]:
    """What breaks the labelling rules; empty when all pairs are sound."""
    found = []
    ids = Counter(p.id for p in pairs)
    found += [f"{i}: id used {n} times" for i, n in ids.items() if n > 1]
    keys = Counter((p.codebase, p.earlier.tool_use_id, p.later_prompt) for p in pairs)
    found += [f"{k[1]}: the same pair is labelled {n} times" for k, n in keys.items() if n > 1]
    for p in pairs:
        if not p.earlier.is_memo_source:
            found.append(f"{p.id}: earlier run has no report or edited files")
        if p.split != heldout_split(p.earlier.tool_use_id):
            found.append(f"{p.id}: split {p.split} breaks the hash rule")
        if p.later is not None:
            if p.kind == "written":
                found.append(f"{p.id}: a real later run is marked written")
            if not p.earlier.finished or p.earlier.finished > p.later.started:
                found.append(f"{p.id}: earlier run had not finished when the later one began")
        elif p.kind != "written":
            found.append(f"{p.id}: a written prompt must be of kind written")
    return found


def _table(title: str, counts: Iterable[tuple[Any, int]]) -> None:
    print(title)
    for key, n in sorted(counts, key=lambda kv: str(kv[0])):
        print(f"  {key}: {n}")


def stats(pairs: list[Pair], runs: dict[tuple[str, str], Delegation]) -> None:
    """Print the pair counts and the run statistics README.md quotes."""
    _table("pairs by codebase and label", Counter((p.codebase, p.label) for p in pairs).items())
    _table("pairs by split and label", Counter((p.split, p.label) for p in pairs).items())
    _table("pairs by kind and label", Counter((p.kind, p.label) for p in pairs).items())
    _table("held-out pairs by kind and label",
           Counter((p.kind, p.label) for p in pairs if p.split == "heldout").items())
    real_laters = {p.later.tool_use_id for p in pairs if p.later is not None}
    covered = {p.later.tool_use_id: p.label for p in pairs
               if p.later is not None and p.label != "none"}
    print(f"real later prompts labelled: {len(real_laters)}; with an earlier report covering "
          f"part: {sum(v == 'part' for v in covered.values())}; answering whole: "
          f"{sum(v == 'whole' for v in covered.values())}")
    all_runs = list(runs.values())
    _table("delegations per codebase", Counter(r.codebase for r in all_runs).items())
    _table("memo sources (reported, edited nothing) per codebase",
           Counter(r.codebase for r in all_runs if r.is_memo_source).items())
    _table("delegations by subagent type",
           Counter(r.subagent_type.rsplit(":", 1)[-1] for r in all_runs).items())
    for codebase in sorted({r.codebase for r in all_runs}):
        for kind in ("Explore", None):
            tokens = [r.total_tokens for r in all_runs if r.codebase == codebase
                      and r.total_tokens and (kind is None or r.subagent_type == kind)]
            if tokens:
                print(f"median totalTokens {codebase} {kind or 'all types'}: "
                      f"{statistics.median(tokens):,.0f} over {len(tokens)} runs "
                      f"({sum(tokens):,} in all)")
    print(f"runs that edited files: {sum(r.edited for r in all_runs)}; runs whose tool calls "
          f"the transcript kept: {sum(r.tools_seen for r in all_runs)}")
    _table("pairs by the earlier run's subagent type",
           Counter(p.earlier.subagent_type for p in pairs).items())


def main(argv: list[str]) -> int:
    if argv[1:] not in (["check"], ["stats"]):
        print("usage: pairs.py check|stats", file=sys.stderr)
        return 2
    pairs = load_pairs()
    if argv[1] == "stats":
        stats(pairs, load_delegations())
        return 0
    found = problems(pairs)
    for problem in found:
        print(problem)
    print(f"{len(pairs)} pairs resolve; {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
