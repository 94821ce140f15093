"""A hostile git environment cannot make explomemo run anything or write into the repository.

The repository's own configuration sets every hook, ``core.fsmonitor``, a
signature program, a pager, an external diff, filters, textconv and a
promisor remote whose upload-pack is a program; the caller's environment
points ``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE`` and ``GIT_TRACE``
at another repository. Each trap would leave a marker file; plain git is
shown to fall into them first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Repo, git

PYTHON = sys.executable
HOOKS = [
    "pre-commit", "post-checkout", "post-merge", "post-index-change", "reference-transaction",
    "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "pre-push", "post-commit",
]  # fmt: skip
TOKENS_DIFF = (
    "--- a/tokens.py\n+++ b/tokens.py\n@@ -1,2 +1,2 @@\n def verify(req):\n"
    "-    return req.headers['Authorization']\n+    return req.cookies['session']\n"
)


def trap(path: Path, markers: Path, name: str) -> str:
    path.write_text(f"#!/bin/sh\ntouch '{markers}/{name}'\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder`` (.git included): its bytes and its mtime."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(folder))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                path.stat().st_mtime_ns,
            )
    return found


def hostile_repo(tmp_path: Path) -> tuple[Repo, Path, dict[str, str]]:
    markers = tmp_path / "markers"
    markers.mkdir()
    traps = tmp_path / "traps"
    traps.mkdir()
    repo = Repo(tmp_path / "repo")
    repo.write("tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.write("old.py", "OLD = 1\n")
    repo.commit("A")
    hooks = traps / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        trap(hooks / name, markers, f"hook-{name}")
        trap(repo.path / ".git" / "hooks" / name, markers, f"git-hook-{name}")
    server = Repo(tmp_path / "server")
    server.write("x", "x\n")
    server.commit("x")
    for key, value in {
        "core.hooksPath": str(hooks),
        "core.fsmonitor": trap(traps / "fsmonitor", markers, "fsmonitor"),
        "log.showSignature": "true",
        "gpg.program": trap(traps / "gpg", markers, "gpg"),
        "core.pager": trap(traps / "pager", markers, "pager"),
        "pager.log": trap(traps / "pager-log", markers, "pager-log"),
        "diff.external": trap(traps / "external", markers, "external-diff"),
        "filter.trap.smudge": trap(traps / "smudge", markers, "smudge"),
        "filter.trap.clean": trap(traps / "clean", markers, "clean"),
        "diff.trap.textconv": trap(traps / "textconv", markers, "textconv"),
        "core.repositoryformatversion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.url": str(server.path),
        "remote.origin.promisor": "true",
        "remote.origin.uploadpack": trap(traps / "upload-pack", markers, "upload-pack"),
    }.items():
        git(repo.path, "config", key, value)
    (repo.path / ".git" / "info" / "attributes").write_text("* filter=trap diff=trap\n")
    # Plain git falls into the traps: reading the index runs the fsmonitor, and
    # looking up an object the repository lacks runs the promisor's upload-pack.
    for command in (["status"], ["cat-file", "-p", "1" * 40]):
        subprocess.run(
            ["git", *command],
            cwd=repo.path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert {p.name for p in markers.iterdir()} >= {"fsmonitor", "upload-pack"}
    for marker in markers.iterdir():
        marker.unlink()
    elsewhere = Repo(tmp_path / "elsewhere")
    elsewhere.write("tokens.py", "something else\n")
    elsewhere.commit("other")
    env = {
        **os.environ,
        "EXPLOMEMO_EMBEDDINGS": "off",
        "EXPLOMEMO_SNAPSHOTS": "off",
        "GIT_DIR": str(elsewhere.path / ".git"),
        "GIT_WORK_TREE": str(elsewhere.path),
        "GIT_INDEX_FILE": str(elsewhere.path / ".git" / "index"),
        "GIT_TRACE": str(markers / "trace"),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{traps / 'fsmonitor'}'",
    }
    return repo, markers, env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "explomemo", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_hostile_git_runs_nothing_and_writes_nothing(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    repo, markers, env = hostile_repo(tmp_path)
    db = tmp_path / "db" / "x.db"
    untracked = "def f():\n    return 1\n"
    repo.write("scratch.py", untracked)
    base = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    for question, files in [
        ("How are tokens verified?", ["tokens.py", "old.py", "scratch.py"]),
        ("Tokens, recorded before blob ids", ["tokens.py"]),
    ]:
        done = cli(env, *base, "--question", question, "--conclusion", "c", *files)
        assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = 2")
    conn.close()
    assert sorted(p.name for p in markers.iterdir()) == []
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    git(repo.path, "mv", "old.py", "new.py")  # plain git: it falls into the traps
    repo.write("scratch.py", untracked + "# edited\n")
    for marker in markers.iterdir():
        marker.unlink()
    before = fingerprint(repo.path)

    shown = cli(env, "--db", str(db), "show", "1", "--json")
    assert shown.returncode == 0, shown.stderr
    files = {f["path"]: f for f in json.loads(shown.stdout)["files"]}
    assert (files["tokens.py"]["diff"], files["tokens.py"]["diff_source"]) == (TOKENS_DIFF, "git")
    assert files["old.py"]["moved_to"] == "new.py"
    # Its blob is in no object store: looking it up must not fetch from the promisor remote.
    assert files["scratch.py"]["diff_source"] == "unavailable"
    old = json.loads(cli(env, "--db", str(db), "show", "2", "--json").stdout)["files"][0]
    assert (old["diff"], old["diff_source"]) == (TOKENS_DIFF, "git")
    assert cli(env, "--db", str(db), "diff", "1").returncode == 0
    github = cli(env, "--db", str(db), "stale", "--format", "github").stdout
    assert "::warning file=tokens.py,line=2," in github

    params = StdioServerParameters(
        command=PYTHON, args=["-m", "explomemo", "--db", str(db), "serve"], cwd=repo.path, env=env
    )

    async def recall() -> Any:
        async with Client(params) as client:
            result = await client.call_tool(
                "memory_exploration_recall",
                {"query": "How are tokens verified?", "project": "demo"},
            )
            return result.structured_content

    matches = asyncio.run(recall())["matches"]
    assert matches and all(
        f["diff_source"] == "git" for m in matches for f in m["files"] if f["path"] == "tokens.py"
    )
    assert sorted(p.name for p in markers.iterdir()) == []
    assert fingerprint(repo.path) == before
