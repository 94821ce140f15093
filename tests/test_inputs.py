"""The input rules (inputs.py): lengths, ranges, and "the same question"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    FULL_WIDTH,
    NFC,
    NFD,
    RELATED,
    WORD_MEMOS,
    edited,
    invoke_cli,
)

from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import (
    export_memos,
    import_memos,
)
from explomemo.shapes import ImportResult

# The question key: case folding, not lower-casing ---------------------------


def test_questions_differing_only_as_strasse_and_strasse_with_eszett_are_one(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``inputs.question_key`` using ``.lower()`` instead of ``.casefold()``:
    "STRASSE" and "straße" are one question (as under NFKC + case folding too),
    so the second record replaces the first and keeps its id, and an import
    of either keeps to the one memo."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "parse.py").write_text("def parse(street): ...\n")
    first = words_cache.record(
        question="Where is STRASSE parsed?",
        conclusion="one",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    second = words_cache.record(
        question="where is  straße parsed? ",
        conclusion="two",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    assert (second.id, second.replaced) == (first.id, True)
    assert [(m.id, m.question) for m in words_cache.list(project="p")] == [
        (first.id, "where is  straße parsed? ")
    ]
    older = edited(
        tmp_path,
        next(export_memos(words_cache)),
        id=99,
        question="WHERE IS STRASSE PARSED?",
        recorded_at="2000-01-01T00:00:00Z",
    )
    assert import_memos(words_cache, [older]) == ImportResult(read=1, added=0, replaced=0, kept=1)
    assert [m.id for m in words_cache.list(project="p")] == [first.id]


# Survivors of the first mutation run (benchmarks/mutation/RESULTS.md) ----------------


@pytest.mark.parametrize("limit", [0, 21, -1, True, False, "5", 2.0, None])
def test_recall_refuses_a_limit_outside_1_to_20(
    words_cache: MemoCache, tmp_path: Path, limit: Any
) -> None:
    """Kills each part of ``inputs.check_limit`` (the bool test, the int test, both ends
    of 1..20) and its message."""
    from explomemo.errors import InputError

    with pytest.raises(InputError) as caught:
        words_cache.recall(query="q", project="p", root=str(tmp_path), limit=limit)
    assert str(caught.value) == f"limit {limit!r} is out of range: pass a whole number from 1 to 20"


def test_recall_accepts_a_limit_of_1_and_of_20(words_cache: MemoCache, word_root: Path) -> None:
    """Kills the ends of 1..20 in ``inputs.check_limit`` moved inwards."""
    for q, c, f in WORD_MEMOS:
        words_cache.record(question=q, conclusion=c, files=f, project="svc", root=str(word_root))
    for limit in (1, 20):
        found = words_cache.recall(query=RELATED, project="svc", root=str(word_root), limit=limit)
        assert len(found.matches) == 1


def test_the_question_key_is_stored_as_the_schema_says(
    words_cache: MemoCache, tmp_path: Path, db_path: Path
) -> None:
    """Kills ``inputs.question_key`` joining words with anything but one space: the key
    is stored, so memos recorded by an earlier version must keep matching it
    (trimmed, white space collapsed, case-folded: "where is strasse parsed?")."""

    root = tmp_path / "proj"
    root.mkdir()
    (root / "parse.py").write_text("p\n")
    words_cache.record(
        question="  Where   is\tSTRASSE parsed? ",
        conclusion="c",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("SELECT question_key FROM memos").fetchall() == [
            ("where is strasse parsed?",)
        ]
    finally:
        conn.close()


def test_text_inputs_accept_their_maximum_length_and_name_a_non_string(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``inputs.check_text`` refusing a text of exactly its maximum length, and its
    message for a value that is not a string."""
    from explomemo import inputs
    from explomemo.errors import InputError

    assert inputs.check_text("question", "q" * 2000, 2000) == "q" * 2000
    with pytest.raises(InputError) as caught:
        inputs.check_text("question", 7, 2000)  # type: ignore[arg-type]
    assert str(caught.value) == "question must be a string of 1 to 2,000 characters"
    with pytest.raises(InputError) as caught:
        inputs.check_files("a.py")  # type: ignore[arg-type]
    assert str(caught.value) == "files is empty: pass 1 to 64 paths of the files you read"


def test_questions_equal_after_nfkc_and_case_folding_are_one_memo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Questions that differ only by Unicode normalization, case or white space are one memo."""
    assert NFC != NFD
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a\n")
    db = tmp_path / "m.db"
    replies = []
    for question in (NFC, NFD, NFC.upper(), f"  {NFD}\u00a0 ", "where is the retry policy?"):
        run = invoke_cli(
            [
                "--db",
                str(db),
                "record",
                "--project",
                "p",
                "--root",
                str(root),
                "--question",
                question,
                "--conclusion",
                "in a.py",
                "a.py",
            ],
        )
        assert run.code == 0, run.err
        replies.append(json.loads(run.out))
    assert [r["replaced"] for r in replies] == [False, True, True, True, False]
    assert len({r["id"] for r in replies[:4]}) == 1
    run = invoke_cli(["--db", str(db), "record", "--project", "p", "--root", str(root),
                           "--question", FULL_WIDTH, "--conclusion", "c", "a.py"])  # fmt: skip
    assert json.loads(run.out) == {**replies[4], "replaced": True}
    run = invoke_cli(
        ["--db", str(db), "recall", "--project", "p", "--root", str(root), "--json", "café"]
    )
    # First: in a project this small (no spread test) a weak match may follow it.
    assert [m["id"] for m in json.loads(run.out)["matches"]][:1] == [replies[0]["id"]]


def test_provenance_names_an_origin_it_has_no_words_for_by_itself() -> None:
    """Every stored origin has its words; one it has none for (a library caller's) is
    shown as it is, never as None (kills provenance 4-6 of issue #36's mutation run)."""
    from explomemo.inputs import provenance

    assert provenance("transcript", False) == "captured here from a turn"
    assert provenance("imported-elsewhere", False) == "imported-elsewhere"
    assert provenance("agent", True).startswith("imported: ")
