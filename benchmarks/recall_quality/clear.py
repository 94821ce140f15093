"""Choose when a recall match comes whole (the "clear" rule of search.py) on the TUNING sets.

A recall answers its first match whole only when it clearly answers the query
(:func:`explomemo.recall.search.clearly_answers`); otherwise every match comes lean.
``collect`` records the labelled memos of labels.json and labels_click.json (as
run.py does), asks every tuning query at limit 5 once per mode (embeddings +
words, words alone) and keeps each match whole (through ``show``) in a pickle;
``sweep`` replays the rule on it for a grid of thresholds, building each answer
as recall builds it (:func:`explomemo.shapes.lean_match`) and counting its
bytes as run.py does (the compact JSON text an agent reads). Per setting:

* whole answers that are the right memo and that are not (on an unrelated
  question, any whole match is wrong);
* queries whose right memo came whole in one call;
* recall@3 (unchanged by the rule: every match still comes, lean or whole);
* the mean answer on unrelated questions, at limit 3 (run.py's) and 5 (the default).

The rule: in each mode, whole answers are the right memo at least 9 times in 10, over
every tuning set and over those without the identifier queries (each of which names a
name one memo alone holds: every one is right, and they would lift the share); then the
most right memos whole, both modes together; then the most with a model; then the larger
margin. (Written before the sweep was the pooled share alone; the identifier condition was
added after seeing that the pick of that rule was right 143 times in 167 without them:
it costs 15 right memos whole with a model and 22 without.) ``table --today`` prints the
same figures for the answer before it (the first match always whole, the others by id,
the question uncut). labels_jinja2.json is never read here.

    .venv/bin/python benchmarks/recall_quality/clear.py collect [--out FILE]   # about 2 minutes
    .venv/bin/python benchmarks/recall_quality/clear.py sweep [--prepared FILE]
    .venv/bin/python benchmarks/recall_quality/clear.py tail [--prepared FILE]

``tail`` chooses which matches past the third an answer keeps
(:data:`explomemo.recall.search.TAIL_MARGIN`): for each margin, the mean answer to an
unrelated question at limit 5 and recall@5 (recall@3 cannot change), per mode. The rule,
written before the run: the widest margin whose unrelated answer weighs at most 600 B in
both modes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (
    DEFAULT_LABELS,
    HERE,
    MODES,
    answer_bytes,
    fetch_codebase,
    print_revision,
    queries_of,
    record_memos,
    sets_of,
)

from explomemo.recall import search
from explomemo.recall.embeddings import load_embedder
from explomemo.recall.sources import FixedModel
from explomemo.shapes import Match, RecallResult, lean_match, replace

PREPARED = Path(tempfile.gettempdir()) / "explomemo-clear.pickle"
LIMITS = (3, 5)


@dataclass(frozen=True)
class Asked:
    """One tuning query's answer at limit 5, every match whole."""

    codebase: str
    queries: str
    mode: str
    want: int | None
    query: str
    root: str
    semantic_index: bool
    matches: list[Match]


def collect(out: Path) -> None:
    """Ask every tuning query of both codebases in both modes and keep the answers."""
    embedder = load_embedder({})
    asked: list[Asked] = []
    for name in DEFAULT_LABELS:
        path = HERE / name
        labels = json.loads(path.read_text())
        base = labels["codebase"]
        with tempfile.TemporaryDirectory(prefix="explomemo-rq-") as tmp:
            root = fetch_codebase(base["name"], base["version"], Path(tmp) / "src")
            for mode, model in zip(MODES, (FixedModel(embedder), FixedModel(None)), strict=True):
                cache, ids = record_memos(labels, root, Path(tmp) / f"{mode}.db", model)
                try:
                    for s in sets_of(path, labels, tuning_only=True):
                        for key, query in queries_of(labels, s):
                            result = cache.recall(
                                query=query, project="bench", root=str(root), limit=max(LIMITS)
                            )
                            if result.pending_vectors:
                                raise SystemExit(f"memos without vectors at {query!r}")
                            whole = []
                            for m in result.matches:
                                memo = cache.show(
                                    m.id, root=str(root), project="bench", any_project=False
                                )
                                whole.append(
                                    replace(
                                        m,
                                        question=memo.question,
                                        conclusion=memo.conclusion,
                                        files=memo.files,
                                        origin=memo.origin,
                                        whole=True,
                                    )
                                )
                            asked.append(
                                Asked(
                                    base["name"],
                                    s.name,
                                    mode,
                                    None if key is None else ids[key],
                                    query,
                                    str(root),
                                    result.semantic_index,
                                    whole,
                                )
                            )
                finally:
                    cache.close()
        print(f"{base['name']}=={base['version']}: asked", flush=True)
    out.write_bytes(pickle.dumps(asked))
    print(f"{len(asked)} answers kept in {out}")


@dataclass(frozen=True)
class Sized:
    """One answer's bytes both ways: its first match whole, or every match lean."""

    asked: Asked
    whole: dict[int, int]
    lean: dict[int, int]
    today: dict[int, int]


def sized(asked: Asked) -> Sized:
    """The bytes of ``asked``'s answer at each limit, built as recall builds it."""
    ways: dict[str, dict[int, int]] = {"whole": {}, "lean": {}, "today": {}}
    for limit in LIMITS:
        shown = asked.matches[:limit]
        made = {
            "whole": [m if i == 0 else lean_match(m) for i, m in enumerate(shown)],
            "lean": [lean_match(m) for m in shown],
            "today": [m if i == 0 else today(m) for i, m in enumerate(shown)],
        }
        for way, matches in made.items():
            result = RecallResult(
                project="bench",
                root=asked.root,
                query=asked.query,
                semantic_index=asked.semantic_index,
                matches=matches,
            )
            ways[way][limit] = answer_bytes(result)[0]
    return Sized(asked, ways["whole"], ways["lean"], ways["today"])


Rule = Callable[[list[Match]], bool]


@dataclass
class Figures:
    """What one rule gives over a group of answers (at limit 3, bytes at 3 and 5)."""

    related: int = 0
    at1: int = 0
    at3: int = 0
    whole_right: int = 0
    whole_wrong: int = 0
    unrelated: int = 0
    unrelated_empty: int = 0
    unrelated_bytes3: int = 0
    unrelated_bytes5: int = 0

    def add(self, other: Figures) -> None:
        """Add ``other``'s counts to these."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def wrong_share(self) -> float:
        """Share of whole answers that are not the right memo."""
        whole = self.whole_right + self.whole_wrong
        return self.whole_wrong / whole if whole else 0.0

    def mean_unrelated(self, limit: int) -> float:
        """The mean answer to an unrelated question at ``limit``, in bytes."""
        spent = self.unrelated_bytes3 if limit == 3 else self.unrelated_bytes5
        return spent / self.unrelated if self.unrelated else 0.0

    def row(self) -> str:
        """The figures as one table row."""
        whole = self.whole_right + self.whole_wrong
        return (
            f"{self.related:>4} {self.at1:>4} {self.at3:>4} {self.whole_right:>5} {whole:>5}"
            f" {self.wrong_share:>6.3f} {self.unrelated:>4} {self.unrelated_empty:>4}"
            f" {self.mean_unrelated(3):>6.0f} {self.mean_unrelated(5):>6.0f}"
        )


HEADER = (
    f"{'n':>4} {'r@1':>4} {'r@3':>4} {'right':>5} {'whole':>5} {'wrong':>6} {'unr':>4}"
    f" {'empt':>4} {'B@3':>6} {'B@5':>6}"
)


def today(first: Match) -> Match:
    """A match as recall answered it before lean matches: by id, question whole, no origin."""
    return replace(first, conclusion=None, files=None, origin=None, whole=False)


def figures(answers: Iterable[Sized], rule: Rule | None) -> Figures:
    """``rule`` replayed on ``answers`` (None: the answer before lean matches, the first
    always whole)."""
    found = Figures()
    for s in answers:
        a = s.asked
        whole = bool(a.matches) and (rule is None or rule(a.matches))
        sizes = s.today if rule is None else s.whole if whole else s.lean
        if a.want is None:
            found.unrelated += 1
            found.unrelated_empty += not a.matches
            found.unrelated_bytes3 += sizes[3]
            found.unrelated_bytes5 += sizes[5]
            found.whole_wrong += whole
        else:
            found.related += 1
            found.at1 += a.matches[:1] != [] and a.matches[0].id == a.want
            found.at3 += any(m.id == a.want for m in a.matches[:3])
            right = whole and a.matches[0].id == a.want
            found.whole_right += right
            found.whole_wrong += whole and not right
    return found


def rule_of(score: dict[str, float], margin: float) -> Rule:
    """Whole when the first match's score reaches ``score[matched_by]`` and stands
    ``margin`` above the best of the others."""

    def clear(matches: list[Match]) -> bool:
        first = matches[0]
        after = max((m.score for m in matches[1:]), default=0.0)
        return first.score >= score[first.matched_by] and first.score - after >= margin

    return clear


def shipped(matches: list[Match]) -> bool:
    """The rule as search.py ships it."""
    after = max((m.score for m in matches[1:]), default=None)
    return search.clearly_answers(matches[0].score, matches[0].matched_by, after)


def table(answers: list[Sized], rule: Rule | None) -> None:
    """The figures of ``rule`` per set and mode, then pooled."""
    print(f"{'codebase':<8} {'queries':<28} {'mode':<17} {HEADER}")
    groups: dict[tuple[str, str, str], list[Sized]] = {}
    for s in answers:
        groups.setdefault((s.asked.codebase, s.asked.queries, s.asked.mode), []).append(s)
    pooled = {mode: Figures() for mode in MODES}
    for (codebase, queries, mode), group in groups.items():
        f = figures(group, rule)
        pooled[mode].add(f)
        print(f"{codebase:<8} {queries:<28} {mode:<17} {f.row()}")
    both = Figures()
    for mode, f in pooled.items():
        both.add(f)
        print(f"{'pooled':<8} {'':<28} {mode:<17} {f.row()}")
    print(f"{'pooled':<8} {'':<28} {'both modes':<17} {both.row()}")


def sweep(answers: list[Sized]) -> None:
    """The rule's order over a grid of thresholds, the best 15 first. ``embedding`` stays at
    0.70: first matches found by meaning alone scored 0.45 at most when right, up to 0.66
    when wrong, so none comes whole."""
    firsts: dict[str, list[tuple[str, float, float, bool, bool]]] = {m: [] for m in MODES}
    for s in answers:
        a = s.asked
        if a.matches:
            first = a.matches[0]
            after = max((m.score for m in a.matches[1:]), default=0.0)
            firsts[a.mode].append(
                (
                    first.matched_by,
                    first.score,
                    round(first.score - after, 4),
                    first.id == a.want,
                    a.queries == "identifiers",
                )
            )

    def counts(mode: str, least: dict[str, float], margin: float, names: bool) -> tuple[int, int]:
        right = wrong = 0
        for matched_by, score, ahead, ok, named in firsts[mode]:
            if (names or not named) and score >= least[matched_by] and ahead >= margin:
                right += ok
                wrong += not ok
        return right, wrong

    rows = []
    for both, words, margin in itertools.product(
        [x / 1000 for x in range(250, 800, 25)],
        [x / 1000 for x in range(450, 1000, 25)],
        [x / 100 for x in range(31)],
    ):
        least = {"embedding": 0.70, "words": words, "both": both}
        found = {
            (mode, names): counts(mode, least, margin, names)
            for mode in MODES
            for names in (True, False)
        }
        if all(wrong <= 0.1 * (right + wrong) for right, wrong in found.values()):
            right = [found[mode, True][0] for mode in MODES]
            rows.append(((sum(right), right[0], margin), (both, words, margin), found))
    rows.sort(key=lambda row: row[0], reverse=True)
    print(f"{'both':>6} {'words':>6} {'margin':>6}  right/wrong: all, without identifiers")
    for _, (both, words, margin), found in rows[:15]:
        cells = "  ".join(
            f"{mode}: {found[mode, True][0]}/{found[mode, True][1]},"
            f" {found[mode, False][0]}/{found[mode, False][1]}"
            for mode in MODES
        )
        print(f"{both:>6.3f} {words:>6.3f} {margin:>6.2f}  {cells}")


TAIL_MARGINS = (0.05, 0.08, 0.10, 0.12, 0.15, 0.20, None)


def tail(asked: list[Asked]) -> None:
    """Per tail margin (None: every match kept, as before) and mode: the mean and largest
    answer to an unrelated question at limit 5, and recall@5 of the labelled queries."""
    print(f"{'margin':<7} {'mode':<17} {'unrelated mean B':>16} {'max B':>6} {'r@5':>9}")
    for margin in TAIL_MARGINS:
        for mode in MODES:
            spent: list[int] = []
            found = total = 0
            for a in (a for a in asked if a.mode == mode):
                shown = a.matches[:5]
                kept = [
                    m
                    for i, m in enumerate(shown)
                    if margin is None or i < search.TAIL_RANK or shown[0].score - m.score <= margin
                ]
                whole = bool(kept) and shipped(shown)
                matches = [m if i == 0 and whole else lean_match(m) for i, m in enumerate(kept)]
                if a.want is None:
                    result = RecallResult(
                        project="bench",
                        root=a.root,
                        query=a.query,
                        semantic_index=a.semantic_index,
                        matches=matches,
                    )
                    spent.append(answer_bytes(result)[0])
                else:
                    total += 1
                    found += any(m.id == a.want for m in kept)
            name = "all" if margin is None else f"{margin:.2f}"
            mean = sum(spent) / len(spent)
            print(f"{name:<7} {mode:<17} {mean:>16.0f} {max(spent):>6} {found:>4}/{total}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["collect", "sweep", "table", "tail"])
    parser.add_argument("--prepared", type=Path, default=PREPARED)
    parser.add_argument("--today", action="store_true", help="table: the answer before the rule")
    args = parser.parse_args()
    print_revision()
    if args.step == "collect":
        collect(args.prepared)
        return 0
    asked: list[Asked] = pickle.loads(args.prepared.read_bytes())
    if args.step == "tail":
        tail(asked)
        return 0
    answers = [sized(a) for a in asked]
    if args.step == "sweep":
        sweep(answers)
    else:
        table(answers, None if args.today else shipped)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
