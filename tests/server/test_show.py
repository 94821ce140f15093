"""memory_exploration_show and the shape of recall's matches, over a real ``explomemo serve``
child process and the real MCP client (stdio): the first match whole, the others by id
with ``"whole": false``, and show giving any of them whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Repo, assert_tool_refused, call_tools_stdio, invoke_cli

RECALL = "memory_exploration_recall"
SHOW = "memory_exploration_show"
RECORD = "memory_exploration_record"
QUESTIONS = [
    ("how are retries of the parser wired?", "Retries of the parser live in parser.py."),
    ("where are parser retries counted?", "parser.py counts the parser retries in RETRIES."),
    ("which parser retries are logged?", "The parser retries are logged by log.py."),
]
BY_ID = {"id", "question", "score", "matched_by", "status", "recorded_at", "whole"}


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


def test_recall_gives_the_first_match_whole_and_show_gives_the_others(
    repo: Repo, db_path: Path
) -> None:
    calls = _record_three(repo)
    query = {"query": "parser retries", "project": "demo", "limit": 3}
    replies = call_tools_stdio(db_path, [*calls, (RECALL, query)], cwd=repo.path)
    assert not any(r.is_error for r in replies), [r.text for r in replies]
    matches = replies[-1].data["matches"]
    assert len(matches) == 3, replies[-1].text
    first, *rest = matches
    assert "whole" not in first
    assert first["conclusion"] in {c for _, c in QUESTIONS}
    assert {f["path"]: f["state"] for f in first["files"]} == {
        "parser.py": "unchanged",
        "log.py": "unchanged",
    }
    for match in rest:
        assert set(match) == BY_ID and match["whole"] is False, match
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


def test_cli_recall_lists_the_matches_by_id_readably(
    repo: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    call_tools_stdio(db_path, _record_three(repo), cwd=repo.path)
    recall = ["--db", str(db_path), "recall", "--project", "demo", "--root", str(repo.path)]
    result = invoke_cli([*recall, "--limit", "3", "parser retries"])
    assert result.exit_code == 0, result.output
    *shown, words, note = result.stdout.strip().split("\n")
    assert words == "(found by words only: no embedding model)"
    whole, *by_id = "\n".join(shown).split("\n\n")
    assert "files:" in whole and "parser.py" in whole and "log.py" in whole
    assert len(by_id) == 2
    for head in by_id:
        assert head.startswith("#") and "(score " in head and "\n" not in head, head
    ids = ", ".join(head.split(" ")[0] for head in by_id)
    assert note == f"({ids}: question only; explomemo show ID gives a memo whole)"
    answer = invoke_cli([*recall, "--limit", "3", "--json", "parser retries"])
    matches = json.loads(answer.stdout)["matches"]
    assert [m.get("whole", True) for m in matches] == [True, False, False]
    assert "conclusion" in matches[0] and "conclusion" not in matches[1]
