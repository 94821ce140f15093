"""The prompt hook counts what its fresh memos spared, less the files the session's
transcript shows read already; the session-start index says the total. Real hook
processes on a real database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import EMBEDDINGS_OFF, invoke_cli, open_cache, record_sized

from explomemo.clients.hooks.session_start import INDEX_BYTES
from explomemo.store.database import Store

QUESTION = "Where are JWT tokens validated?"


@pytest.fixture
def shop(tmp_path: Path, db_path: Path) -> Path:
    """A project with one memo resting on a file of 100 bytes and one of 250."""
    root = tmp_path / "shop"
    record_sized(db_path, root, QUESTION, {"auth.py": 100, "tokens.py": 250})
    return root


def _transcript(path: Path, reads: list[Path]) -> Path:
    """An earlier turn of the session that read ``reads`` with the Read tool."""
    entries: list[dict[str, Any]] = [
        {"type": "user", "promptId": "p0", "message": {"role": "user", "content": "look"}}
    ]
    for n, read in enumerate(reads):
        arguments = {"file_path": str(read)}
        call = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": arguments}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "…"}
        entries.append({"type": "assistant", "message": {"role": "assistant", "content": [call]}})
        entries.append({"type": "user", "promptId": "p0", "message": {"content": [result]}})
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def _hook(db: Path, event: str, payload: dict[str, Any]) -> str:
    """Run a hook process; what it added (its stderr must be empty)."""
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db), "hook", event, "--project", "shop"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, **EMBEDDINGS_OFF},
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    if not done.stdout:
        return ""
    text: str = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def _in_session(db: Path, root: Path, event: str, session: str, transcript: Path) -> str:
    """Run the prompt or stop hook of a turn of ``session``; what it added."""
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(root),
    }
    if event == "prompt":
        payload |= {"hook_event_name": "UserPromptSubmit", "prompt": QUESTION.lower()}
    else:
        payload |= {"hook_event_name": "Stop", "stop_hook_active": False}
    return _hook(db, event, payload)


def _prompt(db: Path, root: Path, session: str, transcript: Path) -> str:
    return _in_session(db, root, "prompt", session, transcript)


def _stop(db: Path, root: Path, session: str, transcript: Path) -> str:
    return _in_session(db, root, "stop", session, transcript)


def _prompt_savings(db: Path) -> tuple[int, int, int]:
    run = invoke_cli(["--db", str(db), "stats", "--json"])
    assert run.code == 0, run.err
    (project,) = json.loads(run.out)["projects"]
    (prompt,) = [s for s in project["surfaces"] if s["surface"] == "prompt"]
    return prompt["served"], prompt["bytes_spared"], project["sessions"]


def test_a_file_the_turn_read_anyway_is_not_spared_once_per_session(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    """The prompt hook counts both files; the turn's Stop takes off the one its transcript
    shows read; the same session served again counts nothing more, another session does."""
    transcript = _transcript(tmp_path / "s1.jsonl", [shop / "auth.py"])
    assert QUESTION in _prompt(db_path, shop, "s1", transcript)
    assert _prompt_savings(db_path) == (1, 350, 1)
    assert _stop(db_path, shop, "s1", transcript) == ""
    assert _prompt_savings(db_path) == (1, 250, 1)
    # The same session asks again: nothing more was spared.
    assert QUESTION in _prompt(db_path, shop, "s1", transcript)
    assert _stop(db_path, shop, "s1", transcript) == ""
    assert _prompt_savings(db_path) == (1, 250, 1)
    # Another session that read nothing is spared both files.
    other = _transcript(tmp_path / "s2.jsonl", [])
    assert QUESTION in _prompt(db_path, shop, "s2", other)
    assert _stop(db_path, shop, "s2", other) == ""
    assert _prompt_savings(db_path) == (2, 600, 2)


def test_a_stale_memo_served_by_the_hook_spares_nothing(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    (shop / "tokens.py").write_text("changed\n")
    assert "stale (changed: tokens.py)" in _prompt(
        db_path, shop, "s1", _transcript(tmp_path / "t.jsonl", [])
    )
    assert _prompt_savings(db_path) == (0, 0, 0)


def test_a_locked_database_still_gets_its_answer_and_counts_nothing(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert QUESTION in _prompt(db_path, shop, "s1", _transcript(tmp_path / "t.jsonl", []))
    finally:
        holder.close()
    assert _prompt_savings(db_path) == (0, 0, 0)


def test_the_session_start_index_says_what_was_spared(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    start = {"session_id": "s9", "cwd": str(shop), "source": "startup"}
    assert "spared" not in _hook(db_path, "session-start", start)
    for session in ("s1", "s2"):
        _prompt(db_path, shop, session, _transcript(tmp_path / f"{session}.jsonl", []))
    index = _hook(db_path, "session-start", start)
    line = "explomemo has spared 700 B of reading in this project across 2 sessions."
    assert line in index.splitlines() and f"#1 {QUESTION}" in index


def test_the_prompt_hook_never_creates_a_database(shop: Path, tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(missing), "hook", "prompt"],
        input=json.dumps({"session_id": "s", "cwd": str(shop), "prompt": QUESTION}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "" and done.stderr == "" and not missing.exists()


def test_the_stop_hook_takes_off_the_files_read_after_the_memo_was_served(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    """Served whole by the prompt hook, then the agent read tokens.py anyway in that
    turn: the Stop hook leaves 100 of the 350 bytes; another session's count is not
    touched, and a memo forgotten since keeps what it spared."""
    transcript = _transcript(tmp_path / "s1.jsonl", [])
    _prompt(db_path, shop, "s1", transcript)
    _prompt(db_path, shop, "s2", _transcript(tmp_path / "s2.jsonl", []))
    assert _prompt_savings(db_path) == (2, 700, 2)
    _transcript(transcript, [shop / "tokens.py"])
    assert _stop(db_path, shop, "s1", transcript) == ""
    assert _prompt_savings(db_path) == (2, 450, 2)
    assert invoke_cli(["--db", str(db_path), "forget", "1"]).code == 0
    _transcript(transcript, [shop / "tokens.py", shop / "auth.py"])
    assert _stop(db_path, shop, "s2", transcript) == ""
    assert _prompt_savings(db_path) == (2, 450, 2)


def test_the_stop_hook_without_a_database_creates_none(shop: Path, tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    assert _stop(missing, shop, "s1", _transcript(tmp_path / "t.jsonl", [shop / "a.py"])) == ""
    assert not missing.exists()


def test_a_conclusion_cut_to_fit_the_hook_is_not_served_whole(
    db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "long"
    record_sized(db_path, root, QUESTION, {"auth.py": 100})
    with open_cache(db_path) as cache:
        cache.record(
            question=QUESTION,
            conclusion="auth.py verify() " * 400,
            files=["auth.py"],
            project="shop",
            root=str(root),
        )
    added = _prompt(db_path, root, "s1", _transcript(tmp_path / "t.jsonl", []))
    assert QUESTION in added and added.endswith("…")
    assert _prompt_savings(db_path) == (0, 0, 0)


def _delegated(db: Path, session: str, *, fresh: bool, tokens: int | None) -> None:
    """Memo 1 answered a delegation of ``session`` (as the delegate hook counts it)."""
    from explomemo.memos.savings import count_delegation

    store = Store.open(db)
    try:
        count_delegation(
            store,
            session=f"claude-code:{session}",
            project="shop",
            memo_id=1,
            fresh=fresh,
            tokens=tokens,
        )
    finally:
        store.close()


def test_the_session_start_index_says_the_delegated_runs_spared(
    shop: Path, db_path: Path, tmp_path: Path
) -> None:
    """Runs spared are fresh answers (the run did not happen); a stale answer, served with
    its diffs while the run went on, is not in the line."""
    start = {"session_id": "s9", "cwd": str(shop), "source": "startup"}
    _delegated(db_path, "s2", fresh=False, tokens=90_000)
    assert "spared" not in _hook(db_path, "session-start", start)
    _delegated(db_path, "s3", fresh=True, tokens=78_000)
    index = _hook(db_path, "session-start", start)
    line = "explomemo has spared 1 delegated run (78,000 tokens) in this project across 1 session."
    assert line in index.splitlines()
    _prompt(db_path, shop, "s1", _transcript(tmp_path / "s1.jsonl", []))
    _delegated(db_path, "s4", fresh=True, tokens=78_000)
    index = _hook(db_path, "session-start", start)
    line = (
        "explomemo has spared 350 B of reading and 2 delegated runs (156,000 tokens) in this"
        " project across 3 sessions."
    )
    assert line in index.splitlines() and f"#1 {QUESTION}" in index
    assert len(index.encode()) <= INDEX_BYTES
