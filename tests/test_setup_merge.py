"""What setup merges into a user's configuration: their own entries stay theirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, invoke_cli


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    repo = Repo(tmp_path / "shop")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return repo


def test_a_users_hook_that_wraps_explomemos_command_stays_theirs(shop: Repo, db_path: Path) -> None:
    """Finding 7: setup took a user's own hook whose command merely contains
    explomemo's (a wrapper script that logs and then runs it) for its own, and
    overwrote it."""
    wrapper = f"/home/dev/bin/with-log /opt/explomemo --db {db_path} hook stop --project shop"
    settings = shop.path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": wrapper}]}]}})
    )
    result = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    assert result.exit_code == 0, result.output
    stops = json.loads(settings.read_text())["hooks"]["Stop"]
    commands = [entry["command"] for group in stops for entry in group["hooks"]]
    assert commands[0] == wrapper
    assert len(commands) == 2 and commands[1].endswith("hook stop --project shop")
    again = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    assert "nothing changed" in again.stdout


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_lone_surrogate_escape_in_a_config_file_is_kept(
    shop: Repo, db_path: Path, dry_run: bool
) -> None:
    """Finding 8: a configuration file holding a lone surrogate escape (``"\\ud800"``,
    valid JSON that no UTF-8 text can hold) made setup end in a traceback, exit 1, also
    with --dry-run. It is the user's value: written back as the same escape."""
    config = shop.path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    original = '{"note": "a\\ud800b", "mcpServers": {}}\n'
    config.write_text(original)
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "setup", "cursor"]
        + (["--dry-run"] if dry_run else []),
        cwd=shop.path,
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    if dry_run:
        assert config.read_text() == original
        assert b'+  "note": "a\\ud800b",\n' in done.stdout
    else:
        text = config.read_text()
        assert '  "note": "a\\ud800b",\n' in text
        data = json.loads(text)
        assert data["note"] == "a\ud800b" and "explomemo" in data["mcpServers"]
