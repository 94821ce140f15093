"""Reading a Claude Code transcript (clients/transcripts.py): which entries make the last turn,
and which of its Read calls count as reads.

Each case writes a real JSON Lines file in Claude Code's format and reads it back
through :func:`tail_entries`, as the Stop hook does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from explomemo.clients.transcripts import last_turn, read_turn, tail_entries


def _user(content: Any, prompt_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "promptId": prompt_id,
        "message": {"role": "user", "content": content},
        **extra,
    }


def _read_call(ident: str, path: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": ident, "name": "Read", "input": {"file_path": path}}
            ],
        },
    }


def _result(ident: str, prompt_id: str) -> dict[str, Any]:
    return _user([{"type": "tool_result", "tool_use_id": ident, "content": "ok"}], prompt_id)


def _written(tmp_path: Path, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return tail_entries(str(path))


@pytest.mark.parametrize("prompt_id", [None, "p1"])
def test_a_meta_entry_inside_a_turn_does_not_start_a_new_one(
    tmp_path: Path, prompt_id: str | None
) -> None:
    """Kills ``_is_prompt`` taking a user entry marked ``isMeta`` (a blocking Stop hook's
    feedback, text content, the turn's own promptId) for a new prompt: the turn would
    then start there, and the reads made before it would be forgotten."""
    entries = _written(
        tmp_path,
        [
            _user("an earlier question", "p0"),
            _read_call("t0", "/repo/old.py"),
            _result("t0", "p0"),
            _user("how is the retry policy decided?", "p1"),
            _read_call("t1", "/repo/a.py"),
            _result("t1", "p1"),
            _read_call("t2", "/repo/b.py"),
            _result("t2", "p1"),
            _user("Stop hook feedback: record a memo", "p1", isMeta=True),
            _read_call("t3", "/repo/c.py"),
            _result("t3", "p1"),
        ],
    )
    turn = last_turn(entries, prompt_id)
    assert turn[0]["message"]["content"] == "how is the retry policy decided?"
    found = read_turn(turn)
    assert (found.read, found.recorded) == (["/repo/a.py", "/repo/b.py", "/repo/c.py"], False)


def test_a_read_that_never_got_a_result_is_not_a_read(tmp_path: Path) -> None:
    """Kills ``read_turn`` counting a Read call without its ``tool_result`` (the call was
    interrupted, or is still running): only calls answered without an error count."""
    entries = _written(
        tmp_path,
        [
            _user("where are tokens checked?", "p1"),
            _read_call("t1", "/repo/a.py"),
            _result("t1", "p1"),
            _read_call("t2", "/repo/never-answered.py"),
            _read_call("t3", "/repo/b.py"),
            _user(
                [{"type": "tool_result", "tool_use_id": "t3", "content": "no", "is_error": True}],
                "p1",
            ),
            _read_call("t4", "/repo/c.py"),
            _result("t4", "p1"),
        ],
    )
    found = read_turn(last_turn(entries, "p1"))
    assert (found.read, found.recorded) == (["/repo/a.py", "/repo/c.py"], False)
