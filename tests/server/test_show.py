"""memory_exploration_show and the shape of recall's matches, over a real ``explomemo serve``
child process and the real MCP client (stdio): a first match that clearly answers whole,
the others lean with ``"whole": false`` (every match lean when none clearly answers), and
show giving any of them whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Repo, assert_tool_refused, call_tools_stdio, invoke_cli

from explomemo.recall import search

RECALL = "memory_exploration_recall"
SHOW = "memory_exploration_show"
RECORD = "memory_exploration_record"
QUESTIONS = [
    ("how are retries of the parser wired?", "Retries of the parser live in parser.py."),
    ("where are parser retries counted?", "parser.py counts the parser retries in RETRIES."),
    ("which parser retries are logged?", "The parser retries are logged by log.py."),
]
LEAN = {"id", "question", "score", "matched_by", "status", "recorded_at", "origin", "whole"}


def _record_three(repo: Repo) -> list[tuple[str, dict[str, object]]]:
    repo.write("parser.py", "RETRIES = 3\n")
    repo.write("log.py", "import logging\n")
    repo.commit("files")
    return [
        (
            RECORD,
            {"question": q, "conclusion": c, "files": ["parser.py", "log.py"], "project": "demo"},
        )
        for q, c in QUESTIONS
    ]


def test_recall_without_a_clear_match_gives_every_match_lean_and_show_gives_them_whole(
    repo: Repo, db_path: Path
) -> None:
    calls = _record_three(repo)
    # "parser retries" is in all three questions alike: no match clearly answers.
    query = {"query": "parser retries", "project": "demo", "limit": 3}
    replies = call_tools_stdio(db_path, [*calls, (RECALL, query)], cwd=repo.path)
    assert not any(r.is_error for r in replies), [r.text for r in replies]
    matches = replies[-1].data["matches"]
    assert len(matches) == 3, replies[-1].text
    for match in matches:
        assert set(match) == LEAN and match["whole"] is False, match
        assert match["origin"] == "agent" and match["question"] in {q for q, _ in QUESTIONS}
    rest = matches
    # A changed file, so show's whole memo carries its diff.
    repo.write("parser.py", "RETRIES = 5\n")
    later = rest[-1]
    (shown,) = call_tools_stdio(
        db_path, [(SHOW, {"id": later["id"], "project": "demo"})], cwd=repo.path
    )
    assert not shown.is_error, shown.text
    memo = shown.data
    asked = next(c for q, c in QUESTIONS if q == later["question"])
    assert (memo["id"], memo["question"], memo["conclusion"]) == (
        later["id"],
        later["question"],
        asked,
    )
    assert (memo["project"], memo["status"], memo["recorded_at"]) == (
        "demo",
        "stale",
        later["recorded_at"],
    )
    files = {f["path"]: f for f in memo["files"]}
    assert files["log.py"]["state"] == "unchanged"
    assert files["parser.py"]["state"] == "changed"
    assert "-RETRIES = 3\n+RETRIES = 5" in files["parser.py"]["diff"]


def test_recall_gives_a_clear_match_whole_and_the_others_lean(repo: Repo, db_path: Path) -> None:
    calls = _record_three(repo)
    # Only the third question holds "logged": it clearly answers, the others share two words.
    query = {"query": "parser retries logged", "project": "demo", "limit": 3}
    replies = call_tools_stdio(db_path, [*calls, (RECALL, query)], cwd=repo.path)
    assert not any(r.is_error for r in replies), [r.text for r in replies]
    first, *rest = replies[-1].data["matches"]
    assert "whole" not in first
    assert (first["question"], first["conclusion"]) == QUESTIONS[2]
    assert first["origin"] == "agent"
    assert {f["path"]: f["state"] for f in first["files"]} == {
        "parser.py": "unchanged",
        "log.py": "unchanged",
    }
    assert len(rest) == 2
    for match in rest:
        assert set(match) == LEAN and match["whole"] is False, match
        assert first["score"] - match["score"] >= search.CLEAR_MARGIN


def test_a_lean_match_has_its_question_cut_and_a_stale_one_its_changed_files(
    repo: Repo, db_path: Path
) -> None:
    """A question over 120 characters comes cut to 120, the cut marked; a stale lean match
    names its changed files with the lines they changed, and its missing ones, no diff."""
    repo.write("parser.py", "RETRIES = 3\nDELAY = 1\n")
    repo.write("log.py", "import logging\n")
    repo.write("old.py", "OLD = 1\n")
    repo.commit("files")
    long = "how are retries of the parser wired " + "and then counted " * 10 + "in the end?"
    record = {"conclusion": "c", "files": ["parser.py", "log.py", "old.py"], "project": "demo"}
    calls = [
        (RECORD, {**record, "question": long}),
        (RECORD, {**record, "question": "where are parser retries counted?"}),
    ]
    assert not any(r.is_error for r in call_tools_stdio(db_path, calls, cwd=repo.path))
    repo.write("parser.py", "RETRIES = 5\nDELAY = 1\nJITTER = 2\n")
    (repo.path / "old.py").unlink()
    query = {"query": "parser retries", "project": "demo"}
    (reply,) = call_tools_stdio(db_path, [(RECALL, query)], cwd=repo.path)
    assert not reply.is_error, reply.text
    by_question = {m["question"][:20]: m for m in reply.data["matches"]}
    cut = by_question[long[:20]]
    assert cut["question"] == long[:119] + "…" and len(cut["question"]) == 120
    for match in reply.data["matches"]:
        assert set(match) == LEAN | {"changed"} and match["status"] == "stale", match
        # RETRIES = 3 became 5 (one line out, one in) and JITTER came: +2 -1.
        assert match["changed"] == {"parser.py": "+2 -1", "old.py": "missing"}
    assert "diff" not in reply.text and "sha256" not in reply.text
    (shown,) = call_tools_stdio(
        db_path, [(SHOW, {"id": cut["id"], "project": "demo"})], cwd=repo.path
    )
    assert shown.data["question"] == long


def test_show_of_an_unknown_id_or_another_project_s_is_an_error_naming_it(
    repo: Repo, db_path: Path
) -> None:
    calls = _record_three(repo)[:1]
    replies = call_tools_stdio(
        db_path,
        [
            *calls,
            (SHOW, {"id": 99, "project": "demo"}),
            (SHOW, {"id": 1, "project": "other"}),
            (SHOW, {"id": "1", "project": "demo"}),
            (SHOW, {"id": 1}),
        ],
        cwd=repo.path,
    )
    assert_tool_refused(replies[1], "no memo with id 99 in project 'demo'")
    assert_tool_refused(replies[2], "no memo with id 1 in project 'other'")
    assert_tool_refused(replies[3], "id: must be a JSON integer")
    # Left out, the project is the one holding this repository's memos, as for recall.
    assert not replies[4].is_error, replies[4].text
    assert json.loads(replies[4].text)["project"] == "demo"


def test_cli_recall_lists_lean_matches_readably(
    repo: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    call_tools_stdio(db_path, _record_three(repo), cwd=repo.path)
    recall = ["--db", str(db_path), "recall", "--project", "demo", "--root", str(repo.path)]
    result = invoke_cli([*recall, "--limit", "3", "parser retries logged"])
    assert result.exit_code == 0, result.output
    *shown, words, note = result.stdout.strip().split("\n")
    assert words == "(found by words only: no embedding model)"
    whole, *lean = "\n".join(shown).split("\n\n")
    assert "files:" in whole and "parser.py" in whole and "log.py" in whole
    assert len(lean) == 2
    for head in lean:
        assert head.startswith("#") and "(score " in head and "\n" not in head, head
    ids = ", ".join(head.split(" ")[0] for head in lean)
    assert note == f"({ids}: question only; explomemo show ID gives a memo whole)"
    answer = invoke_cli([*recall, "--limit", "3", "--json", "parser retries logged"])
    matches = json.loads(answer.stdout)["matches"]
    assert [m.get("whole", True) for m in matches] == [True, False, False]
    assert "conclusion" in matches[0] and "conclusion" not in matches[1]
    # No clear match, one stale: every match lean, the stale one's changed file with its lines.
    repo.write("parser.py", "RETRIES = 5\n")
    unclear = invoke_cli([*recall, "--limit", "3", "parser retries"])
    assert unclear.exit_code == 0, unclear.output
    *blocks, _, note = unclear.stdout.strip().split("\n")
    assert "    parser.py: +1 -1" in blocks and "files:" not in unclear.stdout
    assert note.startswith("(none clearly answers; #")
    assert note.endswith(
        ": question only; explomemo show ID gives a memo whole, explomemo diff ID what changed)"
    )
