"""The stale check end to end: record at one commit, check at another (CLI and MCP over stdio),
and files swapped for traps after the record."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import (
    SECRET,
    STALE,
    Repo,
    World,
    _baseline,
    assert_one_error_line,
    call_tool,
    invoke_cli,
    open_cache,
)

from explomemo.check import hashing
from explomemo.errors import ExplomemoError

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


def record_all(db: Path, repo: Repo) -> None:
    """Record MEMOS through the CLI; each must print its result JSON."""
    for question, conclusion, files in MEMOS:
        result = invoke_cli(
            [
                "--db",
                str(db),
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
            ],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["recorded"] is True


SWAPS: list[tuple[str, Callable[[Path, World], None]]] = [
    ("symlink-to-identical-secret", lambda p, w: os.symlink(w.secret, p)),
    ("symlinked-parent", lambda p, w: None),  # handled below: the folder is swapped
    ("fifo", lambda p, w: os.mkfifo(p)),
    ("dev-zero-link", lambda p, w: os.symlink("/dev/zero", p)),
    ("dev-null-link", lambda p, w: os.symlink("/dev/null", p)),
    ("directory", lambda p, w: p.mkdir()),
    ("symlink-loop", lambda p, w: os.symlink(p.name, p)),
]


def test_cli_flags_exactly_the_changed_memos(repo: Repo, db_path: Path, no_model: None) -> None:
    first, second = build_history(repo)
    record_all(db_path, repo)
    fresh = invoke_cli(
        [
            "--db",
            str(db_path),
            "stale",
            "--project",
            "demo",
            "--root",
            str(repo.path),
            "--check",
            "--format",
            "json",
        ],
    )
    assert fresh.exit_code == 0
    assert json.loads(fresh.stdout) == {"checked": 4, "stale": []}

    move_to(repo, second)
    result = invoke_cli(
        [
            "--db",
            str(db_path),
            "stale",
            "--project",
            "demo",
            "--root",
            str(repo.path),
            "--check",
            "--format",
            "json",
        ],
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
    github = invoke_cli(
        ["--db", str(db_path), "stale", "--root", str(repo.path), "--format", "github"]
    )
    assert github.exit_code == 0
    assert github.stdout.splitlines()[0].startswith("::warning file=src/tokens.py,line=2,title=")
    assert "src/db.py is missing" in github.stdout

    move_to(repo, first)
    back = invoke_cli(["--db", str(db_path), "stale", "--project", "demo", "--check"])
    assert back.exit_code == 0, back.output
    assert "All 4 memos are fresh." in back.stdout


def test_export_checked_in_ci_without_database(
    repo: Repo, db_path: Path, tmp_path: Path, no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = build_history(repo)
    record_all(db_path, repo)
    export = repo.path / ".explomemo" / "memos.jsonl"
    assert invoke_cli(["--db", str(db_path), "export", "-o", str(export)]).exit_code == 0
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
            # Lean (words alone do not answer it clearly): its missing file named all the same.
            assert matches[0]["whole"] is False
            assert matches[0]["changed"] == {"src/db.py": "missing"}
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


# Recorded files later swapped for traps ----------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("cid", "swap"), SWAPS, ids=[s[0] for s in SWAPS])
@pytest.mark.parametrize("content", [SECRET, b""], ids=["secret-bytes", "empty"])
def test_stale_never_reads_a_trap_swapped_in(
    world: World,
    cid: str,
    swap: Callable[[Path, World], None],
    content: bytes,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A recorded file replaced by a link out of root, a FIFO or a device is missing."""
    db = world.base / "s.db"
    folder = world.root / "pkg"
    folder.mkdir()
    target = folder / "mod.py"
    target.write_bytes(content)
    (world.outside / "dir" / "mod.py").write_bytes(content)
    with open_cache(db) as cache:
        memo = cache.record(
            question="trap",
            conclusion="c",
            files=["pkg/mod.py"],
            project="proj",
            root=str(world.root),
        )
    if cid == "symlinked-parent":
        shutil.rmtree(folder)
        os.symlink(world.outside / "dir", folder)
    else:
        target.unlink()
        swap(target, world)
    hashing.COUNTERS.reset()
    with open_cache(db) as cache:
        result = cache.stale(project="proj", root=str(world.root))
    assert hashing.COUNTERS.files == 0, "a file outside root or a special file was read"
    assert [s.id for s in result.stale] == [memo.id]
    entry = result.stale[0]
    assert entry.changed + entry.missing == ["pkg/mod.py"]
    if content == SECRET and cid == "symlink-to-identical-secret":
        assert entry.missing == ["pkg/mod.py"]
    reply = call_tool(db, STALE, {"project": "proj", "root": str(world.root)})
    assert not reply.is_error and reply.data["stale"][0]["id"] == memo.id
    run = invoke_cli(["--db", str(db), "stale", "--check", "--format", "json"])
    assert run.code == 1, run.err


@pytest.mark.timeout(30)
def test_stale_from_hostile_export_is_refused_or_contained(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """An export naming paths out of root is refused; one through a link reads nothing."""
    import json

    def line(path: str) -> str:
        return json.dumps(
            {
                "id": 1,
                "project": "p",
                "question": "q",
                "conclusion": "c",
                "root": "/x",
                "recorded_at": "2026-01-01T00:00:00Z",
                "files": [
                    {"path": path, "sha256": "0" * 64, "xxh3": "0" * 32, "size": len(SECRET)}
                ],
            }
        )

    for bad in ("../outside/secret.txt", "/etc/passwd", "a/../../outside/secret.txt"):
        export = world.base / "bad.jsonl"
        export.write_text(line(bad) + "\n")
        run = invoke_cli(["stale", "--from", str(export), "--root", str(world.root)])
        assert_one_error_line(run, str(export))
    export = world.base / "link.jsonl"
    export.write_text(line("link_out") + "\n" + line("fifo").replace('"id": 1', '"id": 2') + "\n")
    hashing.COUNTERS.reset()
    run = invoke_cli(
        ["stale", "--from", str(export), "--root", str(world.root), "--format", "json", "--check"],
    )
    assert run.code == 1, run.err
    assert hashing.COUNTERS.files == 0
    assert "link_out" in run.out and "fifo" in run.out


@pytest.mark.timeout(30)
def test_non_utf8_file_name_on_disk_does_not_break_checks(world: World) -> None:
    """A non-UTF-8 name in root is refused on record but never breaks stale/recall."""
    db = world.base / "u.db"
    _baseline(db, world)
    with open_cache(db) as cache:
        with pytest.raises(ExplomemoError, match="UTF-8"):
            cache.record(
                question="u",
                conclusion="c",
                files=["bad\udcff.py"],
                project="proj",
                root=str(world.root),
            )
        assert cache.stale(project="proj", root=str(world.root)).stale == []
        cache.recall(query="baseline memo", project="proj", root=str(world.root))
        assert cache.stale_report().stale == []
