"""Sanity-check a labels file for the recall-quality benchmark.

Usage: python check_labels.py SDIST_ROOT [LABELS_JSON]

SDIST_ROOT is the unpacked source distribution's top folder of the codebase
the labels file names (e.g. /tmp/rq_src/httpx-0.28.1 for labels.json,
/tmp/labels_src/click-8.1.7 for labels_click.json, /tmp/labels22/jinja2-3.1.4
for labels_jinja2.json, whose shape SHAPES sets). LABELS_JSON defaults to
labels.json beside this script. Structural problems exit with status 1; the
lexical overlap figures are printed for information.

Optional fields are checked when present:

* ``identifier_queries`` on a memo: 0..2 queries, each naming one code
  identifier; the parallel list ``identifiers`` names it. The identifier must
  occur verbatim in its query and in its memo's question, conclusion or file
  paths, and (case-insensitively) in no other memo's.
* ``near_unrelated`` at the top: 10..15 questions close to the codebase's
  domain that no memo answers (that they are unanswered was checked by hand).
* ``tuning_agent_queries`` on a memo (one query, asked the way an agent does)
  and ``tuning_near_unrelated`` at the top (10..25 near-domain questions no
  memo answers): the fourth round's tuning additions, in no other set.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from statistics import mean
from typing import Any

#: Allowed memo counts by codebase name; other codebases take DEFAULT_MEMO_RANGE.
EXPECTED_MEMOS = {"httpx": (40, 40)}
DEFAULT_MEMO_RANGE = (25, 30)
QUERIES_PER_MEMO = 2
EXPECTED_UNRELATED = 10
#: The third, final held-out set (jinja2, issue 22) has its own shape: one paraphrase
#: per memo, 15 unrelated questions (far and near-domain) and no held-out unrelated list.
SHAPES = {"jinja2": (1, 15, 0)}
MAX_FILES = 8
MAX_IDENTIFIER_QUERIES = 2
MIN_IDENTIFIER_QUERIES_TOTAL = 25
NEAR_UNRELATED_RANGE = (10, 15)
TUNING_NEAR_UNRELATED_RANGE = (10, 25)

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


def looks_like_code(name: str) -> bool:
    """snake_case, _private, dotted.names, file.py, __dunder__ or CamelCase, not a plain word."""
    return len(name) >= 3 and ("_" in name or "." in name or any(c.isupper() for c in name[1:]))


def memo_text(memo: dict[str, Any]) -> str:
    """What a memo says: its question, conclusion and file paths."""
    parts = [memo.get("question"), memo.get("conclusion"), *(memo.get("files") or [])]
    return " ".join(part for part in parts if isinstance(part, str))


def memo_range(labels: dict[str, Any]) -> tuple[int, int]:
    codebase = labels.get("codebase")
    name = codebase.get("name") if isinstance(codebase, dict) else None
    return EXPECTED_MEMOS.get(name or "", DEFAULT_MEMO_RANGE)


def shape(labels: dict[str, Any]) -> tuple[int, int, int]:
    """Queries per memo, unrelated and held-out unrelated questions expected of a labels file."""
    codebase = labels.get("codebase")
    name = codebase.get("name") if isinstance(codebase, dict) else None
    return SHAPES.get(name or "", (QUERIES_PER_MEMO, EXPECTED_UNRELATED, EXPECTED_UNRELATED))


def check_structure(labels: dict[str, Any], root: Path) -> list[str]:
    problems: list[str] = []
    codebase = labels.get("codebase")
    if not isinstance(codebase, dict) or not codebase.get("name") or not codebase.get("version"):
        problems.append("codebase must have a name and a version")

    memos = labels.get("memos")
    if not isinstance(memos, list):
        return [*problems, "memos must be a list"]
    queries_per_memo, expected_unrelated, expected_heldout_unrelated = shape(labels)
    low, high = memo_range(labels)
    if not low <= len(memos) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        problems.append(f"expected {expected} memos, found {len(memos)}")

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
        if not isinstance(queries, list) or len(queries) != queries_per_memo:
            problems.append(f"{where}: needs exactly {queries_per_memo} queries")
        elif not all(isinstance(q, str) and q.strip() for q in queries):
            problems.append(f"{where}: empty query")
        heldout = memo.get("heldout")
        if not isinstance(heldout, str) or not heldout.strip():
            problems.append(f"{where}: needs one held-out query")

    unrelated = labels.get("unrelated")
    if not isinstance(unrelated, list) or len(unrelated) != expected_unrelated:
        problems.append(f"expected {expected_unrelated} unrelated queries")
    elif len(set(unrelated)) != len(unrelated):
        problems.append("duplicate unrelated queries")
    heldout_unrelated = labels.get("heldout_unrelated") or []
    if not isinstance(heldout_unrelated, list) or len(heldout_unrelated) != (
        expected_heldout_unrelated
    ):
        problems.append(f"expected {expected_heldout_unrelated} held-out unrelated queries")
    elif set(heldout_unrelated) & set(unrelated or []):
        problems.append("a held-out unrelated query is also in the tuning set")

    problems.extend(check_identifier_queries(memos))
    problems.extend(check_near_unrelated(labels))
    problems.extend(check_fourth_round_tuning(labels, memos))
    return problems


def check_identifier_queries(memos: list[dict[str, Any]]) -> list[str]:
    """The optional identifier queries: each names one code identifier of its memo only."""
    if not any("identifier_queries" in memo or "identifiers" in memo for memo in memos):
        return []
    problems: list[str] = []
    texts = [memo_text(memo) for memo in memos]
    seen_queries: set[str] = set()
    total = 0
    for i, memo in enumerate(memos):
        where = f"memo #{i} ({memo.get('key')!r})"
        queries = memo.get("identifier_queries")
        names = memo.get("identifiers")
        if not isinstance(queries, list) or not isinstance(names, list):
            problems.append(f"{where}: identifier_queries and identifiers must both be lists")
            continue
        if len(queries) > MAX_IDENTIFIER_QUERIES:
            problems.append(f"{where}: at most {MAX_IDENTIFIER_QUERIES} identifier queries")
        if len(queries) != len(names):
            problems.append(f"{where}: identifiers must name one identifier per query")
            continue
        for query, name in zip(queries, names, strict=True):
            total += 1
            if not isinstance(query, str) or not query.strip():
                problems.append(f"{where}: empty identifier query")
                continue
            if query in seen_queries:
                problems.append(f"{where}: duplicate identifier query {query!r}")
            seen_queries.add(query)
            if not isinstance(name, str) or not looks_like_code(name):
                problems.append(f"{where}: {name!r} does not look like a code identifier")
                continue
            if name not in query:
                problems.append(f"{where}: identifier {name!r} is not in its query {query!r}")
            if name not in texts[i]:
                problems.append(f"{where}: identifier {name!r} does not occur in its memo")
            others = [
                memos[j].get("key")
                for j, text in enumerate(texts)
                if j != i and name.lower() in text.lower()
            ]
            if others:
                problems.append(f"{where}: identifier {name!r} also occurs in {others}")
    if total < MIN_IDENTIFIER_QUERIES_TOTAL:
        problems.append(
            f"expected at least {MIN_IDENTIFIER_QUERIES_TOTAL} identifier queries, found {total}"
        )
    return problems


def check_near_unrelated(labels: dict[str, Any]) -> list[str]:
    if "near_unrelated" not in labels:
        return []
    near = labels["near_unrelated"]
    low, high = NEAR_UNRELATED_RANGE
    if not isinstance(near, list) or not low <= len(near) <= high:
        return [f"expected {low} to {high} near-domain unrelated queries"]
    problems: list[str] = []
    if not all(isinstance(q, str) and q.strip() for q in near):
        problems.append("empty near-domain unrelated query")
    if len(set(near)) != len(near):
        problems.append("duplicate near-domain unrelated queries")
    other = set(labels.get("unrelated") or []) | set(labels.get("heldout_unrelated") or [])
    if set(near) & other:
        problems.append("a near-domain unrelated query is also in another unrelated set")
    return problems


def check_fourth_round_tuning(labels: dict[str, Any], memos: list[dict[str, Any]]) -> list[str]:
    """The optional fourth-round tuning sets: one agent-style query per memo, near unrelated."""
    problems: list[str] = []
    every_query: set[str] = set()
    for memo in memos:
        for field in ("queries", "identifier_queries"):
            every_query.update(q for q in memo.get(field) or [] if isinstance(q, str))
        if isinstance(memo.get("heldout"), str):
            every_query.add(memo["heldout"])
    if any("tuning_agent_queries" in memo for memo in memos):
        for i, memo in enumerate(memos):
            where = f"memo #{i} ({memo.get('key')!r})"
            queries = memo.get("tuning_agent_queries")
            if not isinstance(queries, list) or len(queries) != 1 or not queries[0].strip():
                problems.append(f"{where}: needs exactly one tuning agent query")
            elif queries[0] in every_query:
                problems.append(f"{where}: its tuning agent query is also in another set")
    if "tuning_near_unrelated" in labels:
        near = labels["tuning_near_unrelated"]
        low, high = TUNING_NEAR_UNRELATED_RANGE
        if not isinstance(near, list) or not low <= len(near) <= high:
            return [*problems, f"expected {low} to {high} tuning near-domain unrelated queries"]
        if len(set(near)) != len(near) or not all(isinstance(q, str) and q.strip() for q in near):
            problems.append("empty or duplicate tuning near-domain unrelated queries")
        other = {
            q
            for field in ("unrelated", "heldout_unrelated", "near_unrelated")
            for q in labels.get(field) or []
        }
        if set(near) & (other | every_query):
            problems.append("a tuning near-domain unrelated query is also in another set")
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
    if not vs_question:
        print(f"{field}: no queries")
        return
    print(f"{field}: {len(vs_question)} queries")
    print(f"query vs question:            mean {mean(vs_question):.3f}  max {max(vs_question):.3f}")
    print(f"query vs question+conclusion: mean {mean(vs_memo):.3f}  max {max(vs_memo):.3f}")
    print(f"highest query/question overlap: {worst[0]:.3f} ({worst[1]})")


def report_identifier_mix(memos: list[dict[str, Any]]) -> None:
    """How many identifier queries also carry content words found in other memos."""
    words_by_memo = [content_words(memo_text(memo)) for memo in memos]
    total = mixed = 0
    for i, memo in enumerate(memos):
        for query, name in zip(memo["identifier_queries"], memo["identifiers"], strict=True):
            total += 1
            rest = content_words(query.replace(name, " "))
            if any(rest & words for j, words in enumerate(words_by_memo) if j != i):
                mixed += 1
    print(
        f"identifier queries with a content word (besides the identifier) "
        f"found in another memo: {mixed} of {total}"
    )


def report_unrelated_overlap(memos: list[dict[str, Any]], queries: list[str], field: str) -> None:
    """For each unrelated question, its overlap with the nearest memo's question+conclusion."""
    full = [
        (memo["key"], content_words(memo["question"]) | content_words(memo["conclusion"]))
        for memo in memos
    ]
    nearest: list[float] = []
    worst: tuple[float, str] = (-1.0, "")
    for query in queries:
        words = content_words(query)
        score, key = max((jaccard(words, memo_words), key) for key, memo_words in full)
        nearest.append(score)
        if score > worst[0]:
            worst = (score, f"{query} ~ {key}")
    print(
        f"{field}: {len(queries)} questions, vs nearest memo's question+conclusion: "
        f"mean {mean(nearest):.3f}  max {max(nearest):.3f} ({worst[1]})"
    )


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
    codebase = labels.get("codebase") or {}
    expected_dir = f"{codebase.get('name')}-{codebase.get('version')}"
    if root.name != expected_dir:
        print(f"note: {labels_path.name} is about {expected_dir}, the folder is {root.name}")
    problems = check_structure(labels, root)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    memos = labels.get("memos")
    if isinstance(memos, list) and memos and not problems:
        report_overlap(memos, "queries")
        report_overlap(memos, "heldout")
        if any("tuning_agent_queries" in memo for memo in memos):
            report_overlap(memos, "tuning_agent_queries")
        if any("identifier_queries" in memo for memo in memos):
            report_overlap(memos, "identifier_queries")
            report_identifier_mix(memos)
        for field in ("unrelated", "heldout_unrelated", "near_unrelated", "tuning_near_unrelated"):
            if field in labels:
                report_unrelated_overlap(memos, labels[field], field)
    memo_list = memos if isinstance(memos, list) else []
    identifier_total = sum(
        len(m.get("identifier_queries") or []) for m in memo_list if isinstance(m, dict)
    )
    print(
        f"memos: {len(memo_list)}, "
        f"unrelated: {len(labels.get('unrelated') or [])}, "
        f"identifier queries: {identifier_total}, "
        f"near-domain unrelated: {len(labels.get('near_unrelated') or [])}, "
        f"problems: {len(problems)}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
