"""End to end with the real Claude Code CLI (from npm, pinned), in a repository set up by explomemo.

``claude -p`` runs the SessionStart and UserPromptSubmit hooks even when not
logged in (it then exits 1 with "Not logged in"), and its session transcript
under ``$HOME/.claude/projects/`` records what each hook added to the
model's context (``attachment.type == "hook_additional_context"``) and any
hook failure (``hook_non_blocking_error``, ``hook_cancelled``). No network:
HOME is a temporary folder, nothing is logged in, non-essential traffic is
off.

The CLI is the ``claude`` fixture (tests/conftest.py): ``$EXPLOMEMO_TEST_CLAUDE``
(``.ci/run`` installs it once), else ``npm install`` into a temporary folder once per
test session. Only a machine without npm skips these tests, and never under CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import EXPLOMEMO, Repo, claude_environment, run_quietly

MEMOS = [
    (
        "Where are JWT tokens validated?",
        "src/auth.py middleware() calls tokens.verify(), which checks the HS256 signature"
        " against SIGNING_KEY in src/tokens.py.",
        ["src/auth.py", "src/tokens.py"],
    ),
    (
        "How is the retry policy of the HTTP client decided?",
        "src/retry.py: RETRIES = 3 with exponential backoff, read by Client.send().",
        ["src/retry.py"],
    ),
]


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    """A repository named shop with two memos recorded through the CLI."""
    repo = Repo(tmp_path / "shop")
    for name in ("auth", "tokens", "retry"):
        repo.write(f"src/{name}.py", f"# {name}\n")
    repo.commit("code")
    for question, conclusion, files in MEMOS:
        done = subprocess.run(
            [
                EXPLOMEMO,
                "record",
                "--root",
                str(repo.path),
                "--question",
                question,
                "--conclusion",
                conclusion,
                *files,
            ],
            env={
                **os.environ,
                "EXPLOMEMO_DB": str(tmp_path / "memos.db"),
                "EXPLOMEMO_EMBEDDINGS": "off",
            },
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout)["project"] == "shop"
    return repo


def session(claude: Path, repo: Path, env: dict[str, str], prompt: str) -> list[dict[str, Any]]:
    """Run ``claude -p PROMPT`` (not logged in) and return its hook attachments."""
    session_id = str(uuid.uuid4())
    done = run_quietly([str(claude), "-p", prompt, "--session-id", session_id], repo, env)
    assert "Not logged in" in done.stdout, (done.returncode, done.stdout, done.stderr)
    (transcript,) = Path(env["HOME"], ".claude", "projects").glob(f"*/{session_id}.jsonl")
    entries = [json.loads(line) for line in transcript.read_text().splitlines() if line]
    return [
        e["attachment"]
        for e in entries
        if e.get("type") == "attachment" and e["attachment"].get("type", "").startswith("hook")
    ]


def added(attachments: list[dict[str, Any]], event: str) -> list[str]:
    return [
        text
        for a in attachments
        if a["type"] == "hook_additional_context" and a["hookEvent"] == event
        for text in a["content"]
    ]


def assert_no_hook_error(attachments: list[dict[str, Any]]) -> None:
    failures = [
        a for a in attachments if a["type"] in ("hook_non_blocking_error", "hook_cancelled")
    ]
    assert failures == []


@pytest.mark.slow
def test_hooks_bring_memos_into_a_real_claude_session(
    claude: Path, shop: Repo, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = claude_environment(home, tmp_path / "memos.db", f"{claude.parent}:{os.environ['PATH']}")
    setup = run_quietly([EXPLOMEMO, "setup", "claude-code"], shop.path, env)
    assert setup.returncode == 0, setup.stderr
    assert "ran: " in setup.stdout and "mcp add-json --scope local explomemo" in setup.stdout

    listing = run_quietly([str(claude), "mcp", "list"], shop.path, env)
    assert f"explomemo: {EXPLOMEMO} serve - ✔ Connected" in listing.stdout, listing.stdout
    again = run_quietly([EXPLOMEMO, "setup", "claude-code"], shop.path, env)
    assert "nothing changed" in again.stdout, again.stdout + again.stderr

    attachments = session(claude, shop.path, env, "where do we validate the JWT tokens?")
    assert_no_hook_error(attachments)
    (index,) = added(attachments, "SessionStart")
    assert "2 fresh memos of project 'shop' (their files are unchanged" in index
    assert "#1 Where are JWT tokens validated?" in index
    (answer,) = added(attachments, "UserPromptSubmit")
    assert "[memo 1, fresh, 2 files unchanged, recorded here]" in answer
    assert "checks the HS256 signature against SIGNING_KEY" in answer
    assert "RETRIES" not in answer

    attachments = session(claude, shop.path, env, "how do I center a div in CSS?")
    assert_no_hook_error(attachments)
    assert len(added(attachments, "SessionStart")) == 1
    assert added(attachments, "UserPromptSubmit") == []


@pytest.mark.slow
def test_without_claude_on_path_the_project_mcp_json_is_approved(
    claude: Path, shop: Repo, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = claude_environment(home, tmp_path / "memos.db", os.environ["PATH"])
    setup = run_quietly([EXPLOMEMO, "setup", "claude-code"], shop.path, env)
    assert setup.returncode == 0, setup.stderr
    assert (shop.path / ".mcp.json").is_file()
    # The approval in .claude/settings.local.json counts once the folder is trusted,
    # which an interactive first start asks for.
    (home / ".claude.json").write_text(
        json.dumps({"projects": {str(shop.path): {"hasTrustDialogAccepted": True}}})
    )
    listing = run_quietly([str(claude), "mcp", "list"], shop.path, env)
    assert f"explomemo: {EXPLOMEMO} serve - ✔ Connected" in listing.stdout, listing.stdout
    attachments = session(claude, shop.path, env, "where are JWT tokens validated?")
    assert_no_hook_error(attachments)
    assert "SIGNING_KEY" in added(attachments, "UserPromptSubmit")[0]
