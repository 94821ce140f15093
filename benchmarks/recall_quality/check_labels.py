"""Sanity-check labels.json for the recall-quality benchmark.

Usage: python check_labels.py SDIST_ROOT [LABELS_JSON]

SDIST_ROOT is the unpacked source distribution's top folder (e.g.
/tmp/rq_src/httpx-0.28.1). Structural problems exit with status 1; the
lexical overlap figures are printed for information.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from statistics import mean
from typing import Any

EXPECTED_MEMOS = 40
QUERIES_PER_MEMO = 2
EXPECTED_UNRELATED = 10
MAX_FILES = 8

_STOP_WORDS_TEXT = """
    the and for with how what where when which who why whom whose
    does did doing done are was were been being has have had having
    this that these those there their them they then than into onto
    from over under about after before between through during without
    can could should would will shall may might must not but any all
    some such each every other same also only own too very just more
    most get gets got its our out you your yours his her she him
    via per use used using way ways
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

WORD_RE = re.compile(r"[a-z]+")


def content_words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if len(w) >= 3 and w not in STOP_WORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def check_structure(labels: dict[str, Any], root: Path) -> list[str]:
    problems: list[str] = []
    codebase = labels.get("codebase")
    if not isinstance(codebase, dict) or not codebase.get("name") or not codebase.get("version"):
        problems.append("codebase must have a name and a version")

    memos = labels.get("memos")
    if not isinstance(memos, list):
        return [*problems, "memos must be a list"]
    if len(memos) != EXPECTED_MEMOS:
        problems.append(f"expected {EXPECTED_MEMOS} memos, found {len(memos)}")

    seen: set[str] = set()
    for i, memo in enumerate(memos):
        key = memo.get("key")
        where = f"memo #{i} ({key!r})"
        if not isinstance(key, str) or not key:
            problems.append(f"{where}: missing key")
        elif key in seen:
            problems.append(f"{where}: duplicate key")
        else:
            seen.add(key)
        for field in ("question", "conclusion"):
            if not isinstance(memo.get(field), str) or not memo[field].strip():
                problems.append(f"{where}: missing {field}")
        files = memo.get("files")
        if not isinstance(files, list) or not 1 <= len(files) <= MAX_FILES:
            problems.append(f"{where}: files must be a list of 1..{MAX_FILES} paths")
        else:
            if len(set(files)) != len(files):
                problems.append(f"{where}: duplicate file entries")
            for rel in files:
                if not (root / rel).is_file():
                    problems.append(f"{where}: file not in sdist: {rel}")
        queries = memo.get("queries")
        if not isinstance(queries, list) or len(queries) != QUERIES_PER_MEMO:
            problems.append(f"{where}: needs exactly {QUERIES_PER_MEMO} queries")
        elif not all(isinstance(q, str) and q.strip() for q in queries):
            problems.append(f"{where}: empty query")
        heldout = memo.get("heldout")
        if not isinstance(heldout, str) or not heldout.strip():
            problems.append(f"{where}: needs one held-out query")

    unrelated = labels.get("unrelated")
    if not isinstance(unrelated, list) or len(unrelated) != EXPECTED_UNRELATED:
        problems.append(f"expected {EXPECTED_UNRELATED} unrelated queries")
    elif len(set(unrelated)) != len(unrelated):
        problems.append("duplicate unrelated queries")
    heldout_unrelated = labels.get("heldout_unrelated")
    if not isinstance(heldout_unrelated, list) or len(heldout_unrelated) != EXPECTED_UNRELATED:
        problems.append(f"expected {EXPECTED_UNRELATED} held-out unrelated queries")
    elif set(heldout_unrelated) & set(unrelated or []):
        problems.append("a held-out unrelated query is also in the tuning set")
    return problems


def report_overlap(memos: list[dict[str, Any]], field: str) -> None:
    vs_question: list[float] = []
    vs_memo: list[float] = []
    worst: tuple[float, str] = (-1.0, "")
    for memo in memos:
        q_words = content_words(memo["question"])
        full_words = q_words | content_words(memo["conclusion"])
        queries = memo[field] if isinstance(memo[field], list) else [memo[field]]
        for query in queries:
            words = content_words(query)
            score = jaccard(words, q_words)
            vs_question.append(score)
            vs_memo.append(jaccard(words, full_words))
            if score > worst[0]:
                worst = (score, f"{memo['key']}: {query}")
    print(f"{field}: {len(vs_question)} queries")
    print(f"query vs question:            mean {mean(vs_question):.3f}  max {max(vs_question):.3f}")
    print(f"query vs question+conclusion: mean {mean(vs_memo):.3f}  max {max(vs_memo):.3f}")
    print(f"highest query/question overlap: {worst[0]:.3f} ({worst[1]})")


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    labels_path = Path(argv[2]) if len(argv) == 3 else Path(__file__).with_name("labels.json")
    if not root.is_dir():
        print(f"not a directory: {root}", file=sys.stderr)
        return 2
    labels = json.loads(labels_path.read_text(encoding="utf-8"))
    problems = check_structure(labels, root)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    memos = labels.get("memos")
    if isinstance(memos, list) and memos and not problems:
        report_overlap(memos, "queries")
        report_overlap(memos, "heldout")
    print(
        f"memos: {len(memos) if isinstance(memos, list) else 0}, "
        f"unrelated: {len(labels.get('unrelated') or [])}, "
        f"problems: {len(problems)}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
