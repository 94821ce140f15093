"""The delegate hook's match on the labelled pairs: precision and recall of both operating
points, with 95 % Wilson intervals, and the bytes a head start adds to a subagent's prompt.

Each pair is scored exactly as the hook scores a memo (:func:`explomemo.recall.delegations.
features` and :func:`~explomemo.recall.delegations.classify`, the shipped model's vectors of
the later prompt's chunks and of the earlier prompt as the memo's question): the earlier
run's prompt and report are the memo, the later delegated prompt is asked. "Answers whole"
is right when the pair is labelled ``whole``; "covers part or all" (a head start, or more)
when it is labelled ``whole`` or ``part``.

    python benchmarks/delegation/run.py sweep              # the dev half only: choose
    python benchmarks/delegation/run.py figures --split heldout   # run once, after choosing

Needs the local cache of the public transcripts (``extract.py``, see README.md).
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pairs import Pair, load_pairs  # noqa: E402

from explomemo.recall import delegations  # noqa: E402
from explomemo.recall.delegations import Features, features, prompt_chunks  # noqa: E402
from explomemo.recall.vectors import question_text  # noqa: E402

SCORED = Path(tempfile.gettempdir()) / "explomemo-delegation-scored.pickle"


@dataclass(frozen=True)
class Scored:
    """One pair with the features the hook would see."""

    pair: Pair
    features: Features


def score(pairs: list[Pair]) -> list[Scored]:
    """Every pair's features, with the shipped model (kept in a pickle beside the temp files:
    the vectors take about a minute)."""
    from explomemo.recall.embeddings import load_embedder

    embedder = load_embedder({})
    if embedder is None:
        raise SystemExit("the shipped model is needed (EXPLOMEMO_EMBEDDINGS is off)")
    vectors: dict[str, object] = {}

    def embed(text: str) -> object:
        if text not in vectors:
            vectors[text] = embedder.embed([text])[0]
        return vectors[text]

    scored = []
    for pair in pairs:
        chunks = [embed(chunk) for chunk in prompt_chunks(pair.later_prompt)]
        question = embed(question_text(pair.earlier_prompt, []))
        f = features(pair.later_prompt, pair.earlier_prompt, pair.earlier_report, chunks, question)  # type: ignore[arg-type]
        scored.append(Scored(pair, f))
    return scored


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of ``hits`` in ``n``."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


Rule = Callable[[Features], bool]


def point(scored: Iterable[Scored], chosen: Rule, right: Callable[[Pair], bool]) -> str:
    """Precision and recall of one operating point, each with its interval."""
    items = list(scored)
    picked = [s for s in items if chosen(s.features)]
    hits = sum(1 for s in picked if right(s.pair))
    wanted = sum(1 for s in items if right(s.pair))
    found = sum(1 for s in items if right(s.pair) and chosen(s.features))
    lo, hi = wilson(hits, len(picked))
    rlo, rhi = wilson(found, wanted)
    precision = hits / len(picked) if picked else float("nan")
    recall = found / wanted if wanted else float("nan")
    return (
        f"precision {hits}/{len(picked)} = {precision:.3f} [{lo:.3f}, {hi:.3f}]"
        f"  recall {found}/{wanted} = {recall:.3f} [{rlo:.3f}, {rhi:.3f}]"
    )


def is_whole(f: Features) -> bool:
    return delegations.classify(f) == "whole"


def covers(f: Features) -> bool:
    return delegations.classify(f) is not None


def whole_label(p: Pair) -> bool:
    return p.label == "whole"


def any_label(p: Pair) -> bool:
    return p.label != "none"


#: The grid of the sweep: every cut-off of classify, for each operating point.
WHOLE_GRID = {
    "WHOLE_SIMILARITY": (0.0, 0.70, 0.75, 0.80, 0.85),
    "WHOLE_SIMILARITY_MEAN": (0.0, 0.65, 0.70, 0.72, 0.75, 0.78),
    "WHOLE_QUESTION_WORDS": (0.0, 0.4, 0.5, 0.6, 0.7, 0.8),
    "WHOLE_PROMPT_WORDS": (0.0, 0.4, 0.5, 0.6, 0.7),
    "WHOLE_REPORT_WORDS": (0.0, 0.4, 0.5, 0.6),
}
PART_GRID = {
    "PART_SIMILARITY": (0.45, 0.50, 0.52, 0.54, 0.56, 0.58, 0.60, 0.65),
    "PART_QUESTION_WORDS": (0.0, 0.2, 0.3, 0.4, 0.5, 0.6),
    "PART_PROMPT_WORDS": (0.0, 0.1, 0.2),
    "PART_REPORT_WORDS": (0.0, 0.2, 0.3, 0.4),
}


def _passes(f: Features, cut: dict[str, float], prefix: str) -> bool:
    values = {
        "SIMILARITY": f.similarity or 0.0,
        "SIMILARITY_MEAN": f.similarity_mean or 0.0,
        "QUESTION_WORDS": f.question_words,
        "PROMPT_WORDS": f.prompt_words,
        "REPORT_WORDS": f.report_words,
    }
    return all(values[name.removeprefix(prefix)] >= value for name, value in cut.items())


def sweep(scored: list[Scored]) -> None:
    """On the dev half: the best cut-offs of each operating point by the README's rule."""
    dev = [s for s in scored if s.pair.split == "dev"]
    for grid, prefix, right, goal in (
        (WHOLE_GRID, "WHOLE_", whole_label, 1.0),
        (PART_GRID, "PART_", any_label, 0.9),
    ):
        results = []
        names = list(grid)
        for values in itertools.product(*(grid[n] for n in names)):
            cut = dict(zip(names, values, strict=True))
            picked = [s for s in dev if _passes(s.features, cut, prefix)]
            hits = sum(1 for s in picked if right(s.pair))
            wanted = sum(1 for s in dev if right(s.pair))
            if picked:
                results.append((hits / len(picked), hits / wanted, sum(values), cut))
        good = [r for r in results if r[0] >= goal]
        good.sort(key=lambda r: (-r[1], -r[2]))
        print(
            f"{prefix.strip('_').lower()}: precision >= {goal} on dev, most recall, then strictest"
        )
        for precision, recall, _, cut in good[:8]:
            shown = " ".join(f"{k}={v:g}" for k, v in cut.items())
            print(f"  precision {precision:.3f} recall {recall:.3f}  {shown}")


def figures(scored: list[Scored], split: str) -> None:
    """Both operating points on one half, pooled and by kind and codebase."""
    part = [s for s in scored if s.pair.split == split]
    print(f"{split}: {len(part)} pairs")
    groups: list[tuple[str, list[Scored]]] = [("all", part)]
    for kind in ("real", "written", "near_miss"):
        groups.append((f"kind {kind}", [s for s in part if s.pair.kind == kind]))
    for codebase in sorted({s.pair.codebase for s in part}):
        groups.append((codebase, [s for s in part if s.pair.codebase == codebase]))
    for name, items in groups:
        print(f"{name} ({len(items)} pairs)")
        print(f"  answers whole:      {point(items, is_whole, whole_label)}")
        print(f"  covers part or all: {point(items, covers, any_label)}")


def head_start_bytes(scored: list[Scored], split: str) -> None:
    """The bytes the head start adds to a subagent's prompt for each pair of ``split`` the
    match hands on in part (one memo: the pair's; the hook hands two at most, within
    :data:`~explomemo.clients.hooks.delegate.HEAD_START_BYTES`), as the hook writes it."""
    from explomemo.clients.hooks.delegate import head_start
    from explomemo.store.database import MemoRow

    sizes = []
    for s in scored:
        if s.pair.split != split or delegations.classify(s.features) != "part":
            continue
        memo = MemoRow(
            1,
            "bench",
            s.pair.earlier_prompt,
            s.pair.earlier_report,
            "/",
            s.pair.earlier.started,
            "subagent",
        )
        sizes.append(len(("\n\n" + head_start([memo], {1: []}, {})).encode()))
    if sizes:
        print(
            f"head start added to the prompt ({len(sizes)} pairs handed on in part):"
            f" median {statistics.median(sizes):,.0f} B, max {max(sizes):,} B"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["sweep", "figures"])
    parser.add_argument("--split", choices=["dev", "heldout"], default="dev")
    parser.add_argument("--rescore", action="store_true", help="compute the features again")
    args = parser.parse_args()
    if args.rescore or not SCORED.exists():
        SCORED.write_bytes(pickle.dumps(score(load_pairs())))
    scored: list[Scored] = pickle.loads(SCORED.read_bytes())
    if args.step == "sweep":
        sweep(scored)
    else:
        figures(scored, args.split)
        head_start_bytes(scored, args.split)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
