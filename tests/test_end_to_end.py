"""End to end on a real git repository: record at one commit, check at another.

The same story runs through the CLI (in-process) and through the MCP
server over real stdio with the SDK's client.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CliResult, Repo, invoke_cli

MEMOS = [
    (
        "How is auth wired?",
        "Middleware in src/auth.py calls tokens.verify().",
        ["src/auth.py", "src/tokens.py"],
    ),
    (
        "Where is the retry policy decided?",
        "src/retry.py: RETRIES = 3 with backoff.",
        ["src/retry.py"],
    ),
    ("How is the database pool configured?", "src/db.py builds a pool of 5.", ["src/db.py"]),
    ("What does the README promise?", "README.md: a demo service.", ["README.md"]),
]


def build_history(repo: Repo) -> tuple[str, str]:
    """Commit A with five files; commit B changes tokens.py and deletes db.py."""
    repo.write(
        "src/auth.py", "from . import tokens\n\ndef middleware(req):\n    tokens.verify(req)\n"
    )
    repo.write("src/tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.write("src/retry.py", "RETRIES = 3\nBACKOFF = 0.5\n")
    repo.write("src/db.py", "POOL_SIZE = 5\n")
    repo.write("README.md", "# demo service\n")
    first = repo.commit("A")
    repo.write("src/tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    (repo.path / "src" / "db.py").unlink()
    second = repo.commit("B")
    repo.checkout(first)
    return first, second


def move_to(repo: Repo, rev: str) -> None:
    """Check out ``rev`` and touch retry.py (new mtime, same bytes)."""
    repo.checkout(rev)
    later = time.time_ns() + 5_000_000_000
    os.utime(repo.path / "src" / "retry.py", ns=(later, later))


def invoke(db: Path, *args: str) -> CliResult:
    return invoke_cli(["--db", str(db), *args])


def record_all(db: Path, repo: Repo) -> None:
    """Record MEMOS through the CLI; each must print its result JSON."""
    for question, conclusion, files in MEMOS:
        result = invoke(
            db,
            "record",
            "--project",
            "demo",
            "--root",
            str(repo.path),
            "--question",
            question,
            "--conclusion",
            conclusion,
            *files,
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["recorded"] is True


def test_cli_flags_exactly_the_changed_memos(repo: Repo, db_path: Path, no_model: None) -> None:
    first, second = build_history(repo)
    record_all(db_path, repo)
    fresh = invoke(
        db_path,
        "stale",
        "--project",
        "demo",
        "--root",
        str(repo.path),
        "--check",
        "--format",
        "json",
    )
    assert fresh.exit_code == 0
    assert json.loads(fresh.stdout) == {"checked": 4, "stale": []}

    move_to(repo, second)
    result = invoke(
        db_path,
        "stale",
        "--project",
        "demo",
        "--root",
        str(repo.path),
        "--check",
        "--format",
        "json",
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "checked": 4,
        "stale": [
            {
                "id": 1,
                "question": "How is auth wired?",
                "changed": ["src/tokens.py"],
                "missing": [],
                "project": "demo",
            },
            {
                "id": 3,
                "question": "How is the database pool configured?",
                "changed": [],
                "missing": ["src/db.py"],
                "project": "demo",
            },
        ],
    }
    github = invoke(db_path, "stale", "--root", str(repo.path), "--format", "github")
    assert github.exit_code == 0
    assert github.stdout.splitlines()[0].startswith("::warning file=src/tokens.py,line=2,title=")
    assert "src/db.py is missing" in github.stdout

    move_to(repo, first)
    back = invoke(db_path, "stale", "--project", "demo", "--check")
    assert back.exit_code == 0, back.output
    assert "All 4 memos are fresh." in back.stdout


def test_export_checked_in_ci_without_database(
    repo: Repo, db_path: Path, tmp_path: Path, no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = build_history(repo)
    record_all(db_path, repo)
    export = repo.path / ".explomemo" / "memos.jsonl"
    assert invoke(db_path, "export", "-o", str(export)).exit_code == 0
    repo.commit("memos")
    # CI: a clone at another path, no database at all.
    clone = tmp_path / "ci" / "clone"
    clone.parent.mkdir()
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    monkeypatch.chdir(clone)
    ok = invoke_cli(
        [
            "--db",
            str(tmp_path / "absent" / "x.db"),
            "stale",
            "--from",
            ".explomemo/memos.jsonl",
            "--check",
            "--format",
            "github",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert not (tmp_path / "absent").exists()
    subprocess.run(
        ["git", "-C", str(clone), "checkout", "-q", second, "--", "src/tokens.py"], check=True
    )
    (clone / "src" / "db.py").unlink()
    bad = invoke_cli(["stale", "--from", ".explomemo/memos.jsonl", "--check", "--format", "github"])
    assert bad.exit_code == 1
    lines = bad.stdout.splitlines()
    assert lines[0].startswith("::warning file=src/tokens.py,")
    assert lines[-1] == "2 of 4 memos are stale."


def test_mcp_over_stdio_flags_exactly_the_changed_memos(repo: Repo, db_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    _, second = build_history(repo)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "explomemo", "--db", str(db_path), "serve"],
        cwd=repo.path,
        env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "off"},
    )

    async def story() -> None:
        async with Client(params) as client:
            for question, conclusion, files in MEMOS:
                # No root: the server's working directory is the repository.
                result = await client.call_tool(
                    "memory_exploration_record",
                    {
                        "question": question,
                        "conclusion": conclusion,
                        "files": files,
                        "project": "demo",
                    },
                )
                assert not result.is_error, result.content
                assert result.structured_content is not None
                assert result.structured_content["root"] == str(repo.path)
                assert json.loads(result.content[0].text) == result.structured_content
            move_to(repo, second)
            stale = await client.call_tool("memory_exploration_stale", {"project": "demo"})
            assert stale.structured_content == {
                "project": "demo",
                "root": str(repo.path),
                "checked": 4,
                "stale": [
                    {
                        "id": 1,
                        "question": "How is auth wired?",
                        "changed": ["src/tokens.py"],
                        "missing": [],
                    },
                    {
                        "id": 3,
                        "question": "How is the database pool configured?",
                        "changed": [],
                        "missing": ["src/db.py"],
                    },
                ],
            }
            recall = await client.call_tool(
                "memory_exploration_recall", {"query": "database pool size", "project": "demo"}
            )
            matches = recall.structured_content["matches"]  # type: ignore[index]
            assert recall.structured_content["semantic_index"] is False  # type: ignore[index]
            assert [(m["id"], m["status"], m["matched_by"]) for m in matches] == [
                (3, "stale", "words")
            ]
            assert matches[0]["files"][0]["state"] == "missing"
            forgot = await client.call_tool(
                "memory_exploration_forget", {"project": "demo", "id": 3}
            )
            assert forgot.structured_content == {"forgotten": True, "id": 3, "project": "demo"}
            again = await client.call_tool(
                "memory_exploration_forget", {"project": "demo", "id": 3}
            )
            assert again.is_error
            assert "no memo with id 3 in project 'demo'" in again.content[0].text

    asyncio.run(story())
