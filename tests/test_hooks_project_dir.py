"""The hooks check memos against Claude Code's project folder ($CLAUDE_PROJECT_DIR), as the
MCP server does, not against the session's cwd, which follows its shell into subfolders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo
from test_hooks import context, hook, project, stop_payload, transcript

__all__ = ["project"]


def test_a_session_in_a_subfolder_sees_the_memos_fresh(
    project: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = str(project.path / "src")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project.path))
    answer, err = hook("session-start", {"cwd": src, "source": "startup"}, db_path)
    assert err == ""
    assert "(3 fresh, 0 stale)" in context(answer, "SessionStart")
    payload = {"cwd": src, "prompt": "where are JWT tokens validated?"}
    text = context(hook("prompt", payload, db_path)[0], "UserPromptSubmit")
    assert "[memo 2, fresh, 3 files unchanged] Where are JWT tokens validated?" in text
    assert "missing" not in text


def test_without_a_usable_project_dir_the_cwd_is_the_root(
    project: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    src = str(project.path / "src")
    # Unset: the cwd, where every recorded path is missing.
    text = context(hook("session-start", {"cwd": src}, db_path)[0], "SessionStart")
    assert "(0 fresh, 3 stale)" in text
    # Relative, or not an existing folder: the cwd, here the project's top.
    for given in ("shop", str(tmp_path / "gone"), str(project.path / "src" / "auth.py")):
        monkeypatch.setenv("CLAUDE_PROJECT_DIR", given)
        text = context(
            hook("session-start", {"cwd": str(project.path)}, db_path)[0], "SessionStart"
        )
        assert "(3 fresh, 0 stale)" in text, given
        text = context(hook("session-start", {"cwd": src}, db_path)[0], "SessionStart")
        assert "(0 fresh, 3 stale)" in text, given


def test_stop_names_the_files_read_relative_to_the_project_dir(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "top"
    (top / "src").mkdir(parents=True)
    reads = [str(top / "src" / f"{name}.py") for name in ("a", "b", "c")]
    path = transcript(tmp_path / "t.jsonl", reads, record=False)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(top))
    answer, _ = hook("stop", stop_payload(path, str(top / "src")), db_path)
    assert "read 3 files (src/a.py, src/b.py, src/c.py)" in answer["reason"]


def test_the_command_reads_the_variable_claude_code_sets(project: Repo, db_path: Path) -> None:
    # As Claude Code runs it: its own process, the variable in its environment.
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "hook", "session-start"],
        input=json.dumps({"cwd": str(project.path / "src"), "source": "startup"}),
        capture_output=True,
        text=True,
        cwd=project.path / "src",
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(project.path)},
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    assert "(3 fresh, 0 stale)" in context(json.loads(done.stdout), "SessionStart")
