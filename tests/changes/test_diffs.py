"""A stale memo shows what changed: diffs from snapshots or git, moves, limits, exports.

Every case runs on a real git repository built in the test, through the MCP
server over real stdio or through the CLI, and asserts the exact diff text
or field."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import xxhash
from helpers import (
    Repo,
    git,
    git_commands,
    in_a_minute,
    invoke_cli,
    open_cache,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explomemo.changes.diffs import (
    AGENT_LIMITS,
    ANSWER_DIFF_CHARS,
    DIFF_MAX_BYTES,
    FILE_DIFF_CHARS,
    NO_LIMITS,
    ChangeFinder,
    Diff,
    Limits,
    unified_diff,
)
from explomemo.files import Root
from explomemo.memos.cache import MemoCache
from explomemo.shapes import CheckedFile, FileStateName
from explomemo.store.database import FileRow

TOKENS_DIFF = (
    "--- a/src/tokens.py\n"
    "+++ b/src/tokens.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def verify(req):\n"
    "-    return req.headers['Authorization']\n"
    "+    return req.cookies['session']\n"
)


NOTES_DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,3 @@\n alpha\n beta\n+gamma\n"


QUESTION = "How are tokens verified?"


def invoke(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        result = invoke_cli(["--db", str(db), *args])
    assert result.exit_code in (0, 1), (result.exit_code, result.output)
    return result


def record(db: Path, repo: Repo, question: str, *files: str, **env: str) -> int:
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
        f"answer to {question}",
        *files,
        env=env or None,
    )
    return int(json.loads(result.stdout)["id"])


def show(db: Path, memo_id: int) -> dict[str, Any]:
    return {
        f["path"]: f for f in json.loads(invoke(db, "show", str(memo_id), "--json").stdout)["files"]
    }


def snapshots(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {row[0] for row in conn.execute("SELECT sha256 FROM snapshots")}
    finally:
        conn.close()


def sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def build(repo: Repo) -> None:
    """Three committed files, then an untracked one."""
    repo.write("src/tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.write("src/db.py", "POOL_SIZE = 5\n")
    repo.write("src/old.py", "OLD = 1\n")
    repo.write("src/same.py", "SAME = 1\n")
    repo.commit("A")
    repo.write("notes.txt", "alpha\nbeta\n")


def change(repo: Repo) -> None:
    """Edit a committed file, delete one, git mv one, edit the untracked one."""
    repo.write("src/tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    (repo.path / "src" / "db.py").unlink()
    git(repo.path, "mv", "src/old.py", "src/new.py")
    repo.write("notes.txt", "alpha\nbeta\ngamma\n")


FILES = ["src/tokens.py", "src/db.py", "src/old.py", "src/same.py", "notes.txt"]


def _old_database(path: Path, root: Path, files: dict[str, bytes]) -> None:
    """A database as explomemo wrote it before blob ids and snapshots (migrations 0001-0002)."""
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    from explomemo.store.database import APPLICATION_ID, _statements, load_migrations

    conn = sqlite3.connect(path, isolation_level=None)
    steps = Migrations("explomemo")
    for migration in load_migrations()[:2]:

        def apply(db: Any, sql: str = migration.sql) -> None:
            for statement in _statements(sql):
                db.conn.execute(statement)

        steps(name=migration.name)(apply)
    steps.apply(Database(conn))
    conn.execute("PRAGMA user_version = 2")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(
        "INSERT INTO memos (id, project, question, question_key, conclusion, root, recorded_at)"
        " VALUES (1, 'demo', ?, ?, 'old answer', ?, '2026-01-01T00:00:00Z')",
        (QUESTION, QUESTION.casefold(), str(root)),
    )
    conn.executemany(
        "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES (1, ?, ?, ?, ?)",
        [(p, sha(d), xxhash.xxh3_128_hexdigest(d), len(d)) for p, d in files.items()],
    )
    conn.execute(
        "INSERT INTO memos_fts (rowid, question, conclusion, paths, project)"
        " VALUES (1, ?, 'old answer', ?, 'demo')",
        (QUESTION, " ".join(files)),
    )
    conn.close()


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_recall_over_stdio_shows_diffs_and_moves(repo: Repo, db_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    build(repo)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "explomemo", "--db", str(db_path), "serve"],
        cwd=repo.path,
        env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "off"},
    )

    async def story() -> dict[str, Any]:
        async with Client(params) as client:
            recorded = await client.call_tool(
                "memory_exploration_record",
                {
                    "question": QUESTION,
                    "conclusion": "verify() reads a header",
                    "files": FILES,
                    "project": "demo",
                },
            )
            assert not recorded.is_error, recorded.content
            change(repo)
            recalled = await client.call_tool(
                "memory_exploration_recall", {"query": QUESTION, "project": "demo"}
            )
            assert not recalled.is_error, recalled.content
            assert json.loads(recalled.content[0].text) == recalled.structured_content
            tools = await client.list_tools()
            recall_tool = next(t for t in tools.tools if t.name == "memory_exploration_recall")
            assert "read the diffs, check the conclusion" in (recall_tool.description or "")
            return recalled.structured_content  # type: ignore[return-value]

    result = asyncio.run(story())
    (match,) = result["matches"]
    assert match["status"] == "stale"
    files = {f["path"]: f for f in match["files"]}
    assert files["src/tokens.py"] == {
        "path": "src/tokens.py",
        "sha256": sha("def verify(req):\n    return req.headers['Authorization']\n"),
        "size": 57,
        "state": "changed",
        "diff": TOKENS_DIFF,
        "diff_source": "snapshot",
        "added": 1,
        "removed": 1,
    }
    assert files["notes.txt"]["diff"] == NOTES_DIFF
    assert (files["notes.txt"]["added"], files["notes.txt"]["removed"]) == (1, 0)
    assert files["src/db.py"] == {
        "path": "src/db.py",
        "sha256": sha("POOL_SIZE = 5\n"),
        "size": 14,
        "state": "missing",
        "moved_to": None,
    }
    assert files["src/old.py"]["moved_to"] == "src/new.py"
    # An unchanged file carries no diff fields at all (not nulls).
    assert sorted(files["src/same.py"]) == ["path", "sha256", "size", "state"]


def test_cli_untracked_file_diff_comes_from_its_snapshot_only(repo: Repo, db_path: Path) -> None:
    build(repo)
    memo = record(db_path, repo, QUESTION, *FILES)
    change(repo)
    files = show(db_path, memo)
    assert (files["notes.txt"]["diff"], files["notes.txt"]["diff_source"]) == (
        NOTES_DIFF,
        "snapshot",
    )
    assert files["src/old.py"]["moved_to"] == "src/new.py"
    assert files["src/db.py"]["moved_to"] is None
    # The same memo recorded with snapshots off: the untracked file has nothing to diff against.
    memo = record(db_path, repo, "Untracked, no snapshots", "notes.txt", EXPLOMEMO_SNAPSHOTS="off")
    repo.write("notes.txt", "alpha\n")
    assert show(db_path, memo)["notes.txt"] == {
        "path": "notes.txt",
        "sha256": sha("alpha\nbeta\ngamma\n"),
        "size": 17,
        "state": "changed",
        "diff": None,
        "diff_source": "unavailable",
        "added": None,
        "removed": None,
    }


def test_cli_snapshots_off_committed_file_diff_comes_from_git(repo: Repo, db_path: Path) -> None:
    build(repo)
    memo = record(db_path, repo, QUESTION, "src/tokens.py", EXPLOMEMO_SNAPSHOTS="off")
    assert snapshots(db_path) == set()
    change(repo)
    files = show(db_path, memo)
    assert files["src/tokens.py"]["diff"] == TOKENS_DIFF
    assert files["src/tokens.py"]["diff_source"] == "git"
    text = invoke(db_path, "show", str(memo)).stdout
    assert text.endswith("what changed:\n" + TOKENS_DIFF)


def test_file_over_the_cap_has_no_snapshot_and_says_so(repo: Repo, db_path: Path) -> None:
    line = "x" * 1023 + "\n"
    repo.write("big.txt", line * 1024 + "y")  # 1 MiB + 1 byte
    repo.write("edge.txt", line * 1024)  # exactly 1 MiB: kept
    memo = record(db_path, repo, "Big files", "big.txt", "edge.txt")
    assert snapshots(db_path) == {sha(line * 1024)}
    repo.write("big.txt", line * 1024 + "z")
    repo.write("edge.txt", line * 1023 + "edited\n")
    files = show(db_path, memo)
    assert files["big.txt"] == {
        "path": "big.txt",
        "sha256": sha(line * 1024 + "y"),
        "size": 1024 * 1024 + 1,
        "state": "changed",
        "diff": None,
        "diff_source": "too_large",
        "added": None,
        "removed": None,
    }
    assert files["edge.txt"]["diff"] == (
        f"--- a/edge.txt\n+++ b/edge.txt\n@@ -1021,4 +1021,4 @@\n {line} {line} {line}-{line}"
        "+edited\n"
    )
    assert "big.txt: changed; no diff: over 1 MiB" in invoke(db_path, "show", str(memo)).stdout


def test_both_truncation_limits_say_so_within_the_limits(repo: Repo, db_path: Path) -> None:
    # Five files whose whole diff is about 17,000 characters each, and a small one.
    names = ["a0.txt", "a1.txt", "a2.txt", "b.txt", "c0.txt", "c1.txt"]
    for name in names:
        repo.write(name, "".join(f"line {n:04d} of {name}\n" for n in range(400)))
    memo = record(db_path, repo, "Many changes", *names)
    for name in names:
        changed = 30 if name == "b.txt" else 400
        repo.write(
            name,
            "".join(f"{'LINE' if n < changed else 'line'} {n:04d} of {name}\n" for n in range(400)),
        )
    files = show(db_path, memo)
    per_file = (
        f"more lines cut (a file's diff shows {FILE_DIFF_CHARS:,} characters at most):"
        " read the file for the rest\n"
    )
    answer = "more lines cut (an answer's diffs are at their limit): read the file for the rest\n"
    diffs = [files[name]["diff"] for name in names]
    assert diffs[0].startswith("--- a/a0.txt\n+++ b/a0.txt\n@@ -1,400 +1,400 @@\n-line 0000")
    # The cut line counts within the limit.
    for diff in diffs[:3]:
        assert diff.endswith(f"\n-line 0277 of {diff[6:12]}\n... 522 {per_file}")
        assert len(diff) <= FILE_DIFF_CHARS
    assert "more lines cut" not in diffs[3] and diffs[3].count("\n+LINE ") == 30
    # The fifth file fits in part, to the answer's last character.
    assert diffs[4].endswith(f"\n-line 0218 of c0.txt\n... 581 {answer}")
    assert ANSWER_DIFF_CHARS - 21 < sum(len(d) for d in diffs[:5]) <= ANSWER_DIFF_CHARS
    # Past the budget a changed file shows no diff, and says why; the counts stay whole.
    assert {k: v for k, v in files["c1.txt"].items() if k not in ("sha256", "size")} == {
        "path": "c1.txt",
        "state": "changed",
        "diff": None,
        "diff_source": "budget",
        "added": 400,
        "removed": 400,
    }
    assert [(files[n]["added"], files[n]["removed"]) for n in names] == [(400, 400)] * 3 + [
        (30, 30)
    ] + [(400, 400)] * 2
    text = invoke(db_path, "show", str(memo)).stdout
    assert text.endswith(
        "\n1 more changed file without a diff here: the diffs are at their limit"
        f" (explomemo diff {memo} shows them all)\n"
    )
    # explomemo diff (for people) cuts nothing.
    full = invoke(db_path, "diff", str(memo)).stdout
    assert "more lines cut" not in full and full.count("\n+LINE ") == 5 * 400 + 30


def test_github_annotations_point_at_a_line_past_the_answer_budget(
    repo: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Six memos whose diffs (about 8,000 characters each) overrun an answer's budget.
    names = [f"f{i}.txt" for i in range(6)]
    for name in names:
        repo.write(name, "".join(f"line {n:04d} of {name}\n" for n in range(400)))
    repo.commit("files")
    for name in names:
        record(db_path, repo, f"What is in {name}?", name)
    export = repo.path / "memos.jsonl"
    invoke(db_path, "export", "-o", str(export))
    first_changed = {name: 5 + 7 * i for i, name in enumerate(names)}
    for name, first in first_changed.items():
        lines = [f"line {n:04d} of {name}\n" for n in range(400)]
        repo.write(name, "".join(lines[: first - 1] + [x.upper() for x in lines[first - 1 :]]))
    monkeypatch.chdir(repo.path)
    for args in (["stale"], ["stale", "--from", str(export)]):
        out = invoke(db_path, *args, "--format", "github").stdout
        warnings = [line for line in out.splitlines() if line.startswith("::warning")]
        assert [w.split(",title=")[0] for w in warnings] == [
            f"::warning file={name},line={first}" for name, first in first_changed.items()
        ], args


def test_snapshots_go_with_the_last_memo_resting_on_them(
    repo: Repo, db_path: Path, tmp_path: Path
) -> None:
    repo.write("a.py", "A\n")
    repo.write("b.py", "B\n")
    repo.write("c.py", "C\n")
    first = record(db_path, repo, "first", "a.py", "b.py")
    second = record(db_path, repo, "second", "b.py", "c.py")
    assert snapshots(db_path) == {sha("A\n"), sha("B\n"), sha("C\n")}
    invoke(db_path, "forget", str(first))
    assert snapshots(db_path) == {sha("B\n"), sha("C\n")}
    repo.write("c.py", "C2\n")
    assert record(db_path, repo, "SECOND", "c.py") == second  # replaces it
    assert snapshots(db_path) == {sha("C2\n")}
    # An import that replaces a memo takes its snapshots along too.
    export = tmp_path / "newer.jsonl"
    line = json.loads(invoke(db_path, "export").stdout)
    line |= {
        "recorded_at": in_a_minute(),
        "files": [
            {
                "path": "d.py",
                "sha256": sha("D\n"),
                "xxh3": xxhash.xxh3_128_hexdigest(b"D\n"),
                "size": 2,
            }
        ],
    }
    export.write_text(json.dumps(line) + "\n")
    invoke(db_path, "import", "--json", str(export), "--root", str(repo.path))
    assert snapshots(db_path) == set()


def test_export_holds_blob_ids_and_no_absolute_path(repo: Repo, db_path: Path) -> None:
    build(repo)
    record(db_path, repo, QUESTION, "src/tokens.py")
    text = invoke(db_path, "export").stdout
    assert str(repo.path) not in text and os.sep + "tmp" not in text
    (line,) = [json.loads(t) for t in text.splitlines()]
    assert "root" not in line
    blob = git(repo.path, "rev-parse", "HEAD:src/tokens.py")
    assert line["files"] == [
        {
            "path": "src/tokens.py",
            "sha256": sha("def verify(req):\n    return req.headers['Authorization']\n"),
            "xxh3": xxhash.xxh3_128_hexdigest(
                b"def verify(req):\n    return req.headers['Authorization']\n"
            ),
            "size": 57,
            "git_blob": blob,
        }
    ]


def test_ci_clone_shows_diffs_from_git_history(
    repo: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(repo)
    record(db_path, repo, QUESTION, "src/tokens.py", "src/db.py", "src/old.py")
    export = repo.path / ".explomemo" / "memos.jsonl"
    invoke(db_path, "export", "-o", str(export))
    repo.commit("memos")
    change(repo)
    (repo.path / "notes.txt").unlink()
    repo.commit("B")
    clone = tmp_path / "ci" / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    monkeypatch.chdir(clone)
    args = ["--db", str(tmp_path / "absent.db"), "stale", "--from", ".explomemo/memos.jsonl"]
    github = invoke_cli([*args, "--format", "github"])
    assert github.stdout.splitlines()[0].startswith(
        "::warning file=src/tokens.py,line=2,title=explomemo%3A memo 1 is stale::"
    )
    markdown = invoke_cli([*args, "--format", "markdown"]).stdout
    # Moves and deletions are a list; the diff block holds nothing but the diffs.
    assert markdown.endswith(
        "<details><summary>memo 1: what changed in 3 files</summary>\n\n"
        "- src/db.py: deleted\n- src/old.py: moved to src/new.py\n\n```diff\n"
        + TOKENS_DIFF
        + "```\n\n</details>\n"
    )
    assert not (tmp_path / "absent.db").exists()


def test_diff_writes_a_move_as_git_writes_a_rename(repo: Repo, db_path: Path) -> None:
    """``diff --git a/old b/new`` with git's rename lines; ``git apply`` takes it."""
    build(repo)
    memo = record(db_path, repo, QUESTION, "src/old.py", "src/db.py")
    change(repo)
    shown = invoke(db_path, "diff", str(memo)).stdout
    rename = (
        "diff --git a/src/old.py b/src/new.py\nsimilarity index 100%\n"
        "rename from src/old.py\nrename to src/new.py\n"
    )
    assert rename in shown, shown
    git(repo.path, "stash", "-q")  # back to the recorded tree
    patch = repo.path.parent / "rename.patch"
    patch.write_text(rename)
    git(repo.path, "apply", "--check", str(patch))


def test_old_database_is_migrated_and_finds_its_content_in_git(repo: Repo, db_path: Path) -> None:
    build(repo)
    db_path.parent.mkdir()
    _old_database(
        db_path,
        repo.path,
        {
            "src/tokens.py": (repo.path / "src" / "tokens.py").read_bytes(),
            "notes.txt": b"alpha\nbeta\n",
        },
    )
    change(repo)
    files = show(db_path, 1)
    assert (files["src/tokens.py"]["diff"], files["src/tokens.py"]["diff_source"]) == (
        TOKENS_DIFF,
        "git",
    )
    assert files["notes.txt"]["diff_source"] == "unavailable"
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 4
    # The blob id git gave is kept; the untracked file's is still unknown.
    assert conn.execute("SELECT path, git_blob FROM memo_files ORDER BY path").fetchall() == [
        ("notes.txt", None),
        ("src/tokens.py", _blob_id(b"def verify(req):\n    return req.headers['Authorization']\n")),
    ]
    conn.close()


def test_a_memo_without_blob_ids_searches_git_once_and_not_past_the_budget(
    repo: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = [f"f{i}.txt" for i in range(6)]
    old = [f"old{i}.txt" for i in range(3)]
    for name in [*big, *old]:
        repo.write(name, "".join(f"line {n:04d} of {name}\n" for n in range(400)))
    repo.commit("files")
    recorded = {name: (repo.path / name).read_bytes() for name in old}
    # The first memo's diffs (about 8,000 characters a file) spend an answer's budget.
    record(db_path, repo, "Many changes", *big)
    memo = record(db_path, repo, "Old memo", *old, EXPLOMEMO_SNAPSHOTS="off")
    with closing(sqlite3.connect(db_path)) as conn, conn:
        # As a memo recorded before blob ids: no blob id, no snapshot.
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = ?", (memo,))
    for name in [*big, *old]:
        repo.write(name, "".join(f"LINE {n:04d} of {name}\n" for n in range(400)))
    commands = git_commands(monkeypatch)
    with MemoCache.open(db_path) as cache:
        report = cache.stale_report(project="demo")
        changes = cache.stale_changes(report)
    # Past the budget: not searched for, and said so (the content may be in history).
    assert [(f.diff, f.diff_source, f.added) for f in changes[memo]] == [(None, "budget", None)] * 3
    assert "log" not in commands
    # Alone in an answer: one search of git history for its three files.
    files = show(db_path, memo)
    assert [files[name]["diff_source"] for name in old] == ["git"] * 3
    assert commands.count("log") == 1 and commands.count("ls-files") == 1
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute(
            "SELECT path, git_blob FROM memo_files WHERE memo_id = ? ORDER BY path", (memo,)
        ).fetchall() == [(name, _blob_id(recorded[name])) for name in old]
    # The blob ids found are kept: the next answer reads the contents by id.
    commands.clear()
    files = show(db_path, memo)
    assert [files[name]["diff_source"] for name in old] == ["git"] * 3
    assert commands == ["rev-parse", "cat-file"]


def _recorded_then_changed(repo: Repo, db_path: Path, *questions: str) -> list[int]:
    """Memos of ``questions`` on FILES of :func:`build` (snapshots stored), then the files
    changed by :func:`change`; their ids."""
    build(repo)
    with open_cache(db_path) as cache:
        ids = [
            cache.record(
                question=q, conclusion="c", files=FILES, project="demo", root=str(repo.path)
            ).id
            for q in questions
        ]
        cache.wait_for_snapshots()
    change(repo)
    return ids


def test_a_stale_report_describes_each_file_of_a_memo_by_its_state(
    repo: Repo, db_path: Path
) -> None:
    """The files of a stale memo, in the report's changes: the edited ones with their
    diff, the gone ones with their move, and the one still as recorded unchanged."""
    (memo,) = _recorded_then_changed(repo, db_path, QUESTION)
    with open_cache(db_path) as cache:
        report = cache.stale_report(project="demo")
        changes = cache.stale_changes(report)
    assert [entry.id for entry in report.stale] == [memo]
    described = {f.path: (f.state, f.moved_to) for f in changes[memo]}
    assert described == {
        "notes.txt": ("changed", None),
        "src/db.py": ("missing", None),
        "src/old.py": ("missing", "src/new.py"),
        "src/same.py": ("unchanged", None),
        "src/tokens.py": ("changed", None),
    }
    tokens = next(f for f in changes[memo] if f.path == "src/tokens.py")
    assert tokens.diff == TOKENS_DIFF


def test_a_memo_forgotten_between_the_report_and_its_diffs_is_left_out(
    repo: Repo, db_path: Path
) -> None:
    """Another process forgets a stale memo after ``stale --format markdown`` built its
    report and before the diffs: the diffs describe the memos still there (the report's
    format shows the forgotten one without them), not a KeyError."""
    ids = _recorded_then_changed(repo, db_path, QUESTION, "Where is the pool size set?")
    with open_cache(db_path) as cache:
        report = cache.stale_report(project="demo")
        assert [entry.id for entry in report.stale] == ids
        with open_cache(db_path) as other:
            other.forget(memo_id=ids[0], project="demo")
        changes = cache.stale_changes(report)
    assert list(changes) == [ids[1]]
    assert {f.path for f in changes[ids[1]]} == set(FILES)


def test_a_root_gone_between_the_report_and_its_diffs_leaves_the_changes_unavailable(
    repo: Repo, db_path: Path, tmp_path: Path
) -> None:
    """The memo's root is moved away after the report said which files changed: their
    diffs cannot be read now, and say so ("unavailable", not "too_large")."""
    (memo,) = _recorded_then_changed(repo, db_path, QUESTION)
    with open_cache(db_path) as cache:
        report = cache.stale_report(project="demo")
        repo.path.rename(tmp_path / "moved-away")
        changes = cache.stale_changes(report)
    changed = {f.path: f.diff_source for f in changes[memo] if f.state == "changed"}
    assert changed == {"notes.txt": "unavailable", "src/tokens.py": "unavailable"}


def test_old_export_is_imported(repo: Repo, db_path: Path, tmp_path: Path) -> None:
    build(repo)
    data = (repo.path / "src" / "tokens.py").read_bytes()
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps(
            {
                "id": 7,
                "project": "demo",
                "question": QUESTION,
                "conclusion": "old answer",
                "root": str(repo.path),
                "recorded_at": "2026-01-01T00:00:00Z",
                "files": [
                    {
                        "path": "src/tokens.py",
                        "sha256": sha(data),
                        "xxh3": xxhash.xxh3_128_hexdigest(data),
                        "size": len(data),
                    }
                ],
            }
        )
        + "\n"
    )
    # Its absolute root is not taken from the file (it could lead out of the clone).
    result = invoke(db_path, "import", "--json", str(old), "--root", str(repo.path))
    assert json.loads(result.stdout) == {"read": 1, "added": 1, "replaced": 0, "kept": 0}
    change(repo)
    detail = json.loads(invoke(db_path, "show", "7", "--json").stdout)
    assert detail["root"] == str(repo.path)
    assert (detail["files"][0]["diff"], detail["files"][0]["diff_source"]) == (TOKENS_DIFF, "git")
    # The blob id git gave its diff is kept, and exported.
    assert json.loads(invoke(db_path, "export").stdout)["files"][0] == {
        "path": "src/tokens.py",
        "sha256": sha(data),
        "xxh3": xxhash.xxh3_128_hexdigest(data),
        "size": len(data),
        "git_blob": _blob_id(data),
    }
    bad = tmp_path / "bad.jsonl"
    line = json.loads(old.read_text())
    line["files"][0]["git_blob"] = "XYZ"
    bad.write_text(json.dumps(line) + "\n")
    refused = invoke_cli(["--db", str(db_path), "import", "--json", str(bad)])
    assert refused.exit_code == 2
    assert "files[0].git_blob is not 40 lowercase hex digits" in refused.stderr


def test_an_import_shares_blob_ids_with_every_row_of_a_content(
    repo: Repo, db_path: Path, tmp_path: Path
) -> None:
    build(repo)
    tokens, db = (repo.path / "src" / "tokens.py").read_bytes(), b"POOL_SIZE = 5\n"
    record(db_path, repo, QUESTION, "src/tokens.py")
    old = record(db_path, repo, "Where is the pool sized?", "src/db.py")
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = ?", (old,))

    def line(question: str, path: str, data: bytes, **blob: str) -> str:
        file = {
            "path": path,
            "sha256": sha(data),
            "xxh3": xxhash.xxh3_128_hexdigest(data),
            "size": len(data),
            **blob,
        }
        memo = {
            "id": 40 + len(question),
            "project": "demo",
            "question": question,
            "conclusion": "imported",
            "recorded_at": "2026-01-01T00:00:00Z",
            "files": [file],
        }
        return json.dumps(memo) + "\n"

    export = tmp_path / "in.jsonl"
    # One line without the blob id the database knows; one with the blob id a row lacks.
    export.write_text(
        line("Who verifies tokens?", "src/tokens.py", tokens)
        + line("What is the pool size?", "src/db.py", db, git_blob=_blob_id(db))
    )
    invoke(db_path, "import", "--json", str(export))
    with closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute("SELECT path, git_blob FROM memo_files ORDER BY path, memo_id")
        assert rows.fetchall() == [
            ("src/db.py", _blob_id(db)),
            ("src/db.py", _blob_id(db)),
            ("src/tokens.py", _blob_id(tokens)),
            ("src/tokens.py", _blob_id(tokens)),
        ]


def test_diff_is_coloured_on_a_terminal_only(repo: Repo, db_path: Path) -> None:
    import pty

    build(repo)
    memo = record(db_path, repo, QUESTION, "src/tokens.py")
    change(repo)
    command = [sys.executable, "-m", "explomemo", "--db", str(db_path), "diff", str(memo)]
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    piped = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    assert "\x1b[" not in piped
    assert piped == (
        f"memo {memo} [stale]: {QUESTION}\ndiff --git a/src/tokens.py b/src/tokens.py\n"
        + TOKENS_DIFF
    )
    leader, follower = pty.openpty()
    with subprocess.Popen(command, stdout=follower, stderr=follower, env=env) as child:
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        child.wait(timeout=60)
    os.close(leader)
    screen = seen.decode().replace("\r\n", "\n")
    assert "\x1b[31m-    return req.headers['Authorization']\x1b[m\n" in screen
    assert "\x1b[32m+    return req.cookies['session']\x1b[m\n" in screen
    assert "\x1b[36m@@ -1,2 +1,2 @@\x1b[m\n" in screen


def test_database_is_owner_only(tmp_path: Path, repo: Repo) -> None:
    repo.write("a.py", "A\n")
    db = tmp_path / "new" / "deeper" / "x.db"
    record(db, repo, "perms", "a.py")
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.parent.parent.stat().st_mode) == 0o700
    # A database made by an earlier version (world-readable) is tightened when opened.
    db.chmod(0o644)
    invoke(db, "list")
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


# Hook failure handling: whatever fails, one line on stderr and exit 0 --------


def test_moves_are_found_among_tracked_names_holding_a_tab_or_bytes_that_are_not_utf_8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.tracked`` splitting an index entry at its last tab (a name with
    a tab), or decoding names strictly (a name that is not UTF-8 breaks every move)."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("old.py", "MOVED = True\n")
    repo.write("other.py", "OTHER = 1\n")
    (repo.path / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    repo.commit("A")
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        memo = cache.record(
            question="q",
            conclusion="c",
            files=["old.py", "other.py"],
            project="p",
            root=str(repo.path),
        ).id
    git(repo.path, "mv", "old.py", "new\tname.py")
    repo.write("other.py", "OTHER = 2\n")
    with open_cache(db) as cache:
        files = {f.path: f for f in cache.show(memo).files}
    assert files["old.py"].moved_to == "new\tname.py"
    assert files["other.py"].diff_source == "git"


# Against git itself --------------------------------------------------------------


def _git_diff(folder: Path, old: bytes, new: bytes, *options: str) -> str:
    """What ``git diff --no-index`` writes from ``old`` to ``new`` (files ``old`` and
    ``new`` of ``folder``), a byte that is not UTF-8 read as U+FFFD."""
    (folder / "old").write_bytes(old)
    (folder / "new").write_bytes(new)
    done = subprocess.run(
        [
            "git",
            "-c",
            "core.autocrlf=false",
            "diff",
            "--no-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--diff-algorithm=myers",
            "-U3",
            *options,
            "--",
            "old",
            "new",
        ],
        cwd=folder,
        capture_output=True,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.decode("utf-8", "replace")


def _git_hunks(folder: Path, old: bytes, new: bytes) -> str:
    """The hunks of ``git diff --no-index`` from ``old`` to ``new`` (from the first ``@@``),
    without the function name git writes after a hunk header."""
    text = _git_diff(folder, old, new)
    hunks = text[text.index("@@") :] if "@@" in text else ""
    return re.sub(r"^(@@ -\S+ \+\S+ @@).*$", r"\1", hunks, flags=re.MULTILINE)


def _our_hunks(old: bytes, new: bytes) -> str:
    text = unified_diff("f.py", old, new).text
    assert text.startswith("--- a/f.py\n+++ b/f.py\n"), text
    return text.split("\n", 2)[2]


def _numbered(count: int) -> list[str]:
    return [f"line {n:02d}\n" for n in range(1, count + 1)]


def _edited(lines: list[str], changes: dict[int, str]) -> bytes:
    """``lines`` with the lines at those 1-based numbers replaced."""
    return "".join(changes.get(n, line) for n, line in enumerate(lines, 1)).encode()


TWENTY = _numbered(20)

GIT_CASES = {
    # Six unchanged lines between two edits: git gives one hunk (the gap is 2 x 3
    # lines of context), never two touching ones.
    "six lines apart": (TWENTY, {3: "three\n", 10: "ten\n"}),
    "seven lines apart": (TWENTY, {3: "three\n", 11: "eleven\n"}),
    "five lines apart": (TWENTY, {3: "three\n", 9: "nine\n"}),
    "first and last lines": (TWENTY, {1: "one\n", 20: "twenty\n"}),
    "three hunks": (_numbered(40), {2: "b\n", 15: "o\n", 30: "dd\n"}),
    "two lines apart, near the end": (TWENTY, {16: "p\n", 19: "s\n"}),
}


@pytest.mark.parametrize("case", sorted(GIT_CASES))
def test_hunks_are_those_git_diff_writes(tmp_path: Path, case: str) -> None:
    """Kills ``_grouped`` splitting two edits six unchanged lines apart into two hunks
    that touch (``>=`` for ``>`` against twice the context), or any other grouping or
    hunk-header range that differs from ``git diff --no-index``'s."""
    lines, changes = GIT_CASES[case]
    old, new = "".join(lines).encode(), _edited(lines, changes)
    ours = _our_hunks(old, new)
    assert ours == _git_hunks(tmp_path, old, new)
    if case == "six lines apart":
        assert ours.count("@@ -") == 1 and ours.startswith("@@ -1,13 +1,13 @@\n"), ours


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"a\nb\nc", b"a\nb\nd"),
        (b"a\nb\nc", b"a\nb\nc\n"),
        (b"a\nb\nc\n", b"a\nb\nc"),
        (b"", b"one\ntwo\n"),
        (b"one\ntwo\n", b""),
        (b"x\n", b"new\nx\n"),
        (b"".join(s.encode() for s in TWENTY), b"".join(s.encode() for s in TWENTY[:-4])),
    ],
)
def test_ends_and_empty_files_are_diffed_as_git_diffs_them(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """A last line without a new line, an empty side, an insert at the top and a delete
    at the end: the same hunks, ranges and markers as ``git diff --no-index``."""
    assert _our_hunks(old, new) == _git_hunks(tmp_path, old, new)


@st.composite
def _small_edits(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A file of distinct lines and an edit of it: runs of 0 to 9 unchanged lines (so
    gaps on both sides of twice the context) between edits that replace, delete or
    insert 1 or 2 lines, each side maybe without its last new line. Every line is
    unique, so any minimal diff is the one diff: git's and difflib's must agree."""
    old: list[str] = []
    new: list[str] = []

    def kept(count: int) -> None:
        for _ in range(count):
            line = f"line {len(old):02d}\n"
            old.append(line)
            new.append(line)

    for _ in range(draw(st.integers(0, 4))):
        kept(draw(st.integers(0, 9)))
        op, count = draw(st.sampled_from(["replace", "delete", "insert"])), draw(st.integers(1, 2))
        for _ in range(count):
            if op != "insert":
                old.append(f"line {len(old):02d}\n")
            if op != "delete":
                new.append(f"new {len(new):02d}\n")
    kept(draw(st.integers(0, 9)))
    old_text, new_text = "".join(old), "".join(new)
    if draw(st.booleans()):
        old_text = old_text.removesuffix("\n")
    if draw(st.booleans()):
        new_text = new_text.removesuffix("\n")
    return old_text.encode(), new_text.encode()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edit=_small_edits())
def test_small_random_edits_are_diffed_as_git_diffs_them(
    tmp_path: Path, edit: tuple[bytes, bytes]
) -> None:
    """Hunk headers and lines equal ``git diff --no-index``'s for random edits of a
    small file: whatever the gaps between edits, at the ends, with or without a last
    new line."""
    old, new = edit
    assert _our_hunks(old, new) == _git_hunks(tmp_path, old, new)


def _git_counts(folder: Path, old: bytes, new: bytes) -> tuple[int | None, int | None]:
    """Lines added and removed as ``git diff --numstat`` counts them (None for binary)."""
    added, removed, _ = _git_diff(folder, old, new, "--numstat").split("\t")
    return (None if added == "-" else int(added)), (None if removed == "-" else int(removed))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"a\nb\n", b"a\nnew\nb\n"),  # an insert only
        (b"a\ngone\nb\n", b"a\nb\n"),  # a delete only
        (b"a\nb\nc\n", b"a\nB\nc\nd\n"),  # a replace and an insert
        (_edited(TWENTY, {}), b"".join(s.encode() for s in [*TWENTY[2:], "end\n"])),
        (b"", b"one\ntwo\n"),
        (b"one\ntwo\n", b""),
        (b"text\n", b"text\0\n"),
    ],
)
def test_lines_added_and_removed_are_those_git_counts(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """A diff's added and removed counts are ``git diff --numstat``'s: lines inserted or
    deleted alone count as much as replaced ones; a binary file has none."""
    whole = unified_diff("f.py", old, new)
    assert (whole.added, whole.removed) == _git_counts(tmp_path, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [(b"text\n", b"text\0\n"), (b"bin\0ary\n", b"text\n"), (b"\0a\n", b"\0b\n")],
)
def test_a_file_binary_on_either_side_is_said_to_differ_as_git_says_it(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """A NUL byte on either side (or both) makes the file binary: git's one line, no lines."""
    said = _git_diff(tmp_path, old, new).splitlines(keepends=True)[-1]
    assert said == "Binary files a/old and b/new differ\n"
    assert unified_diff("f.py", old, new) == Diff(
        "Binary files a/f.py and b/f.py differ\n", None, None
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"caf\xe9\nkept\n", b"cafe\nkept\n"),  # Latin-1 on the old side only
        (b"kept\n", b"kept\nna\xefve \xff\n"),  # on the new side only
        (b"\xc3(\nold\n", b"\xc3(\nnew\n"),  # in a line of context
    ],
)
def test_bytes_that_are_not_utf_8_are_diffed_as_replacement_characters(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """A file that is not UTF-8 (Latin-1, a broken sequence) on either side is diffed,
    each byte that is not UTF-8 shown as U+FFFD where git writes the byte."""
    ours = _our_hunks(old, new)
    assert "\ufffd" in ours
    assert ours == _git_hunks(tmp_path, old, new)


def _moved_in_the_index(tmp_path: Path) -> tuple[Repo, Path, int]:
    """A memo on the committed ``old.py``, since moved by ``git mv`` to ``new.py``."""
    repo = Repo(tmp_path / "repo")
    repo.write("old.py", "VALUE = 1\n")
    repo.commit("A")
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        memo = cache.record(
            question="q", conclusion="c", files=["old.py"], project="p", root=str(repo.path)
        ).id
    git(repo.path, "mv", "old.py", "new.py")
    return repo, db, memo


def _only_file(db: Path, memo: int) -> CheckedFile:
    """The one file of ``memo``, missing, as show describes it."""
    with open_cache(db) as cache:
        (missing,) = cache.show(memo).files
    assert missing.state == "missing"
    return missing


def test_a_path_holding_the_recorded_content_in_the_index_but_edited_since_is_no_move(
    tmp_path: Path,
) -> None:
    """Kills ``_holds`` trusting the size alone: git's index says ``new.py`` holds the
    missing file's content, but its working copy was edited at the same size since; a
    move is reported only to a file whose bytes are the recorded ones now."""
    repo, db, memo = _moved_in_the_index(tmp_path)
    assert _only_file(db, memo).moved_to == "new.py"
    repo.write("new.py", "VALUE = 2\n")  # the same size, not staged
    assert _only_file(db, memo).moved_to is None


# One answer's room: check_within and the budget --------------------------------

ANSWER_NOTE = "more lines cut (an answer's diffs are at their limit): read the file for the rest\n"
FILE_NOTE = (
    f"more lines cut (a file's diff shows {FILE_DIFF_CHARS:,} characters at most):"
    " read the file for the rest\n"
)


def _finder_and_rows(
    tmp_path: Path, contents: dict[str, tuple[bytes, bytes]], limits: Limits = AGENT_LIMITS
) -> tuple[ChangeFinder, Root, list[tuple[FileRow, FileStateName]]]:
    """A finder over files of ``tmp_path`` holding each new content now, its recorded
    (old) content held as this process's pending snapshot."""
    held = {sha(old): old for old, _ in contents.values()}
    finder = ChangeFinder(None, limits, lambda wanted: {s: held[s] for s in wanted})
    rows: list[tuple[FileRow, FileStateName]] = []
    for name, (old, new) in contents.items():
        (tmp_path / name).write_bytes(new)
        row = FileRow(name, sha(old), xxhash.xxh3_128_hexdigest(old), len(old))
        rows.append((row, "changed" if old != new else "unchanged"))
    return finder, Root(str(tmp_path), os.path.realpath(tmp_path)), rows


def _every_line_changed(name: str, count: int) -> tuple[bytes, bytes]:
    old = "".join(f"line {n:04d} of {name}\n" for n in range(count))
    return old.encode(), old.upper().encode()


class _Room:
    """An ``excess``: how far the diffs described are over ``room`` characters; a call
    past the tenth fails the test (the cutting must end)."""

    def __init__(self, room: int) -> None:
        self.room, self.calls = room, 0

    def __call__(self, files: list[CheckedFile]) -> int:
        self.calls += 1
        assert self.calls <= 10, "check_within does not stop cutting"
        return sum(len(f.diff or "") for f in files) - self.room


def test_diffs_are_cut_to_the_room_left_in_an_answer(tmp_path: Path) -> None:
    """A recall's first match over its room gets its diffs cut until it fits: at the
    answer's budget, to the room's last whole line, one character over as much as many."""
    contents = {name: _every_line_changed(name, 100) for name in ("a.txt", "b.txt")}
    whole = {name: unified_diff(name, old, new).text for name, (old, new) in contents.items()}
    spent = sum(map(len, whole.values()))
    for room in (spent - 1, spent - 2_000):
        finder, root, rows = _finder_and_rows(tmp_path, contents)
        first, second = finder.check_within(root, rows, _Room(room))
        assert (first.diff, first.diff_source) == (whole["a.txt"], "snapshot")
        assert second.diff is not None and second.diff.endswith(ANSWER_NOTE)
        kept = second.diff[: second.diff.rindex("... ")]
        assert kept.endswith("\n") and whole["b.txt"].startswith(kept)
        # Within the room, and short of it by less than the next line and the note.
        assert room - 2 * len(ANSWER_NOTE) < len(first.diff) + len(second.diff) <= room
        assert (second.diff_source, second.added, second.removed) == ("snapshot", 100, 100)


def test_diffs_that_fit_the_room_or_have_no_limit_are_left_whole(tmp_path: Path) -> None:
    contents = {name: _every_line_changed(name, 100) for name in ("a.txt", "b.txt")}
    whole = [unified_diff(name, old, new).text for name, (old, new) in contents.items()]
    # To the last character of the room: nothing is cut.
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    fits = _Room(sum(map(len, whole)))
    assert [f.diff for f in finder.check_within(root, rows, fits)] == whole
    # ``explomemo diff``'s limits (none): never cut, however far over a room.
    finder, root, rows = _finder_and_rows(tmp_path, contents, NO_LIMITS)
    assert [f.diff for f in finder.check_within(root, rows, _Room(10))] == whole


def test_a_room_too_small_for_any_diff_leaves_the_counts(tmp_path: Path) -> None:
    """Over the room even without diffs (a long conclusion): every diff goes, the counts
    stay, and the cutting ends; with no diff to cut it ends at once."""
    contents = {name: _every_line_changed(name, 100) for name in ("a.txt", "b.txt")}
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    checked = finder.check_within(root, rows, _Room(-1_000))
    assert [(f.diff, f.diff_source, f.added, f.removed) for f in checked] == [
        (None, "budget", 100, 100)
    ] * 2
    finder, root, rows = _finder_and_rows(tmp_path, {"same.txt": (b"same\n", b"same\n")})
    room = _Room(-1_000)
    assert [f.state for f in finder.check_within(root, rows, room)] == ["unchanged"]
    assert room.calls == 1


def _diff_of(name: str, length: int) -> tuple[bytes, bytes]:
    """Contents (old, new) whose diff is ``length`` characters long."""
    head = len(unified_diff(name, b"a\n", b"\n").text)
    return b"a\n", b"b" * (length - head) + b"\n"


def test_a_diff_cut_at_the_file_limit_when_the_budget_equals_it_leaves_the_rest(
    tmp_path: Path,
) -> None:
    """With exactly a file's limit of the answer's budget left, a long diff is cut at the
    file's limit (and says so); the characters its cut leaves stay for a small diff."""

    contents = {name: _diff_of(name, FILE_DIFF_CHARS) for name in ("f0.txt", "f1.txt", "f2.txt")}
    contents["long.txt"] = (
        # Lines of 206 characters: the cut at 6,000 leaves 56 unused.
        b"".join(b"%04d %s\n" % (n, b"x" * 200) for n in range(100)),
        b"".join(b"%04d %s\n" % (n, b"y" * 200) for n in range(100)),
    )
    contents["small.txt"] = (b"a\n", b"b\n")
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    checked = finder.check(root, rows)
    assert [len(f.diff or "") for f in checked[:3]] == [FILE_DIFF_CHARS] * 3
    long, small = checked[3:]
    assert long.diff is not None and long.diff.endswith(FILE_NOTE), long.diff[-200:]
    assert small.diff == unified_diff("small.txt", b"a\n", b"b\n").text
    assert sum(len(f.diff or "") for f in checked) <= ANSWER_DIFF_CHARS


def _diff_of_length(name: str, length: int) -> tuple[bytes, bytes]:
    """A recorded and a current content whose diff is ``length`` characters long."""
    head = len(unified_diff(name, b"a\n", b"\n").text)
    return b"a\n", b"b" * (length - head) + b"\n"


@pytest.mark.parametrize("short", [0, 1])
def test_a_cut_at_the_answer_budget_keeps_a_hunks_first_line_or_shows_nothing(
    tmp_path: Path, short: int
) -> None:
    """With room left for exactly a diff's ---, +++, @@ and first changed line and the
    longest note (every line cut), those four lines are shown; one character less, and no
    diff is shown at all (no ---/+++ without a change), the counts kept."""
    long_old, long_new = _every_line_changed("long.txt", 50)
    long = unified_diff("long.txt", long_old, long_new).text
    total = long.count("\n")
    head = "".join(long.splitlines(keepends=True)[:4])
    left = len(head) + len(f"... {total} {ANSWER_NOTE}") - short
    contents = {f"f{n}.txt": _diff_of_length(f"f{n}.txt", FILE_DIFF_CHARS) for n in range(3)}
    contents["f3.txt"] = _diff_of_length("f3.txt", ANSWER_DIFF_CHARS - 3 * FILE_DIFF_CHARS - left)
    contents["long.txt"] = (long_old, long_new)
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    *spent, cut = finder.check(root, rows)
    assert sum(len(f.diff or "") for f in spent) == ANSWER_DIFF_CHARS - left
    if short:
        assert (cut.diff, cut.diff_source) == (None, "budget")
    else:
        assert (cut.diff, cut.diff_source) == (head + f"... {total - 4} {ANSWER_NOTE}", "snapshot")
    assert (cut.added, cut.removed) == (50, 50)


def test_a_diff_line_longer_than_the_file_limit_is_cut_to_its_note(tmp_path: Path) -> None:
    """A binary file at a path of 3,000 characters: git's one line for it is over a
    file's 6,000, so only the note is shown, and the answer's budget is not spent."""
    name = "/".join(["d" * 249] * 12) + "/b.bin"
    (tmp_path / name).parent.mkdir(parents=True)
    contents = {name: (b"\0old\n", b"\0new\n"), "small.txt": (b"a\n", b"b\n")}
    assert len(unified_diff(name, *contents[name]).text) > FILE_DIFF_CHARS
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    binary, small = finder.check(root, rows)
    assert (binary.diff, binary.diff_source) == (f"... 1 {FILE_NOTE}", "snapshot")
    assert (binary.added, binary.removed) == (None, None)
    assert small.diff == unified_diff("small.txt", b"a\n", b"b\n").text


def test_a_file_limit_with_room_for_the_note_alone_shows_the_note(tmp_path: Path) -> None:
    """A file's limit exactly as long as the note saying its diff is cut: the note alone
    is shown; one character less, and nothing is."""
    contents = {"a.txt": _every_line_changed("a.txt", 5)}
    lines = unified_diff("a.txt", *contents["a.txt"]).text.count("\n")

    def note(limit: int) -> str:
        why = f"a file's diff shows {limit:,} characters at most"
        return f"... {lines} more lines cut ({why}): read the file for the rest\n"

    limit = next(n for n in range(200) if len(note(n)) == n)
    for file_chars, shown in ((limit, note(limit)), (limit - 1, None)):
        finder, root, rows = _finder_and_rows(tmp_path, contents, Limits(file_chars, None))
        (checked,) = finder.check(root, rows)
        assert (checked.diff, checked.added) == (shown, 5)


# Moves ----------------------------------------------------------------------------


def test_an_old_memo_finds_a_moved_file_by_its_content_in_git_history(
    repo: Repo, db_path: Path
) -> None:
    """A memo recorded before blob ids, without snapshots: git history gives the moved
    file's blob id (one search with the changed file's), and the index its new path."""
    build(repo)
    db_path.parent.mkdir()
    recorded = {name: (repo.path / name).read_bytes() for name in ("src/tokens.py", "src/old.py")}
    _old_database(db_path, repo.path, recorded)
    change(repo)
    files = show(db_path, 1)
    assert (files["src/old.py"]["state"], files["src/old.py"]["moved_to"]) == (
        "missing",
        "src/new.py",
    )
    assert (files["src/tokens.py"]["diff"], files["src/tokens.py"]["diff_source"]) == (
        TOKENS_DIFF,
        "git",
    )


def test_a_snapshot_gives_the_blob_id_of_a_row_recorded_without_one(
    repo: Repo, db_path: Path
) -> None:
    """A file never committed, recorded with a snapshot but no blob id (as a row whose
    snapshot job had not run), is found moved once staged under a new name; the blob id
    the snapshot gives is kept."""
    repo.write("kept.py", "KEPT = 1\n")
    repo.commit("A")
    repo.write("notes.txt", "alpha\nbeta\n")
    with open_cache(db_path) as cache:
        memo = cache.record(
            question="q", conclusion="c", files=["notes.txt"], project="p", root=str(repo.path)
        ).id
        cache.wait_for_snapshots()
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL")
    (repo.path / "notes.txt").rename(repo.path / "moved.txt")
    git(repo.path, "add", "moved.txt")
    with open_cache(db_path) as cache:
        (moved,) = cache.show(memo).files
    assert (moved.state, moved.moved_to) == ("missing", "moved.txt")
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT git_blob FROM memo_files").fetchall() == [
            (_blob_id(b"alpha\nbeta\n"),)
        ]


def test_a_path_the_index_names_but_deleted_since_is_no_move(tmp_path: Path) -> None:
    repo, db, memo = _moved_in_the_index(tmp_path)
    (repo.path / "new.py").unlink()  # still in git's index, gone from the working tree
    assert _only_file(db, memo).moved_to is None


def test_a_large_file_at_a_path_the_index_names_is_read_only_to_the_recorded_size(
    tmp_path: Path,
) -> None:
    """git's index says ``new.py`` holds the missing file's content, but 8 MiB were
    appended to it since: no move, and the check reads one byte past the recorded size."""
    from explomemo.check import hashing

    repo, db, memo = _moved_in_the_index(tmp_path)
    with (repo.path / "new.py").open("ab") as grown:
        grown.write(b"#" * (8 << 20))
    with open_cache(db) as cache:
        hashing.COUNTERS.reset()
        (missing,) = cache.show(memo).files
        read = hashing.COUNTERS.bytes
    assert (missing.state, missing.moved_to) == ("missing", None)
    assert read == len("VALUE = 1\n") + 1


def test_a_diff_cut_to_less_than_a_hunks_first_line_is_left_out(tmp_path: Path) -> None:
    """With less of the answer's budget left than a diff's ---, +++ and @@ lines and one
    more line with the note, the diff is left out (``budget``), not shown as a header."""
    left = 140
    contents = {name: _diff_of(name, FILE_DIFF_CHARS) for name in ("f0.txt", "f1.txt", "f2.txt")}
    contents["f3.txt"] = _diff_of("f3.txt", FILE_DIFF_CHARS - left)
    contents["last.txt"] = _every_line_changed("last.txt", 100)
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    *full, last = finder.check(root, rows)
    assert sum(len(f.diff or "") for f in full) == ANSWER_DIFF_CHARS - left
    assert (last.diff, last.diff_source, last.added, last.removed) == (None, "budget", 100, 100)


# Sizes and reads of the current file ----------------------------------------------


def _committed_rows(
    tmp_path: Path, contents: dict[str, bytes]
) -> tuple[Repo, Root, dict[str, FileRow]]:
    """A repository with ``contents`` committed, and their rows as recorded (blob ids, no
    snapshot: a finder without a store reads them from git)."""
    repo = Repo(tmp_path / "repo")
    for name, data in contents.items():
        (repo.path / name).write_bytes(data)
    repo.commit("A")
    rows = {
        name: FileRow(name, sha(data), xxhash.xxh3_128_hexdigest(data), len(data), _blob_id(data))
        for name, data in contents.items()
    }
    return repo, Root(str(repo.path), os.path.realpath(repo.path)), rows


def test_a_file_of_the_size_limit_is_diffed_and_one_past_it_on_either_side_is_too_large(
    tmp_path: Path,
) -> None:
    """Exactly 1 MiB recorded and now: a diff from git, as git writes it; 1 MiB and one
    byte on the recorded side or on the current side: no diff, ``too_large``."""
    line = b"x" * 1023 + b"\n"
    edge, over = line * 1024, line * 1024 + b"y"
    assert len(edge) == DIFF_MAX_BYTES
    repo, root, rows = _committed_rows(
        tmp_path, {"edge.txt": edge, "shrunk.txt": over, "grown.txt": b"small\n"}
    )
    edited = line * 1023 + b"e" * 1023 + b"\n"
    (repo.path / "edge.txt").write_bytes(edited)
    (repo.path / "shrunk.txt").write_bytes(b"small\n")
    (repo.path / "grown.txt").write_bytes(over)
    edge_file, shrunk, grown = ChangeFinder(None).check(
        root, [(rows[name], "changed") for name in ("edge.txt", "shrunk.txt", "grown.txt")]
    )
    assert edge_file.diff_source == "git" and edge_file.diff is not None
    assert edge_file.diff.split("\n", 2)[2] == _git_hunks(tmp_path, edge, edited)
    assert [(f.diff, f.diff_source, f.added) for f in (shrunk, grown)] == [
        (None, "too_large", None)
    ] * 2


def test_a_file_grown_past_memory_is_too_large_and_read_only_to_the_limit(
    tmp_path: Path,
) -> None:
    """A file now of a TiB (a sparse one, as a disk image can be): too large for a diff,
    found so by reading one byte past the limit, never the whole file."""
    held = {sha(b"small\n"): b"small\n"}
    finder = ChangeFinder(None, AGENT_LIMITS, lambda wanted: {s: held[s] for s in wanted})
    with (tmp_path / "disk.img").open("wb") as image:
        image.truncate(1 << 40)
    row = FileRow("disk.img", sha(b"small\n"), xxhash.xxh3_128_hexdigest(b"small\n"), 6)
    (grown,) = finder.check(Root(str(tmp_path), os.path.realpath(tmp_path)), [(row, "changed")])
    assert (grown.diff, grown.diff_source, grown.added) == (None, "too_large", None)


def test_a_changed_file_gone_or_unreadable_when_diffed_has_no_diff_available(
    tmp_path: Path,
) -> None:
    """A file checked changed but deleted before its diff is read, or whose read fails
    (``/proc/PID/mem`` is a regular file whose first bytes give EIO), has no diff:
    ``unavailable``, not ``too_large``."""
    contents = {"gone.txt": (b"old\n", b"new\n")}
    finder, root, rows = _finder_and_rows(tmp_path, contents)
    (tmp_path / "gone.txt").unlink()
    assert [(f.diff, f.diff_source) for f in finder.check(root, rows)] == [(None, "unavailable")]
    if not Path(f"/proc/{os.getpid()}/mem").is_file():
        pytest.skip("no /proc/PID/mem here")
    proc = f"/proc/{os.getpid()}"
    held = {sha(b"old\n"): b"old\n"}
    finder = ChangeFinder(None, AGENT_LIMITS, lambda wanted: {s: held[s] for s in wanted})
    row = FileRow("mem", sha(b"old\n"), xxhash.xxh3_128_hexdigest(b"old\n"), 4)
    (unread,) = finder.check(Root(proc, proc), [(row, "changed")])
    assert (unread.diff, unread.diff_source) == (None, "unavailable")


# Contents from git, moves and git's calls --------------------------------------------


def test_a_staged_move_of_a_content_never_committed_is_found_by_its_blob_id(
    tmp_path: Path,
) -> None:
    """A file recorded (with its blob id) before it was ever committed, then renamed and
    staged under the new name: the index names the new path by the recorded blob id."""
    repo = Repo(tmp_path / "repo")
    repo.write("kept.py", "KEPT = 1\n")
    repo.commit("A")
    data = b"NEW = 1\n"
    (repo.path / "draft.py").write_bytes(data)
    row = FileRow("draft.py", sha(data), xxhash.xxh3_128_hexdigest(data), len(data), _blob_id(data))
    (repo.path / "draft.py").rename(repo.path / "final.py")
    git(repo.path, "add", "final.py")
    root = Root(str(repo.path), os.path.realpath(repo.path))
    (moved,) = ChangeFinder(None).check(root, [(row, "missing")])
    assert (moved.state, moved.moved_to) == ("missing", "final.py")


def test_two_files_of_one_content_one_edited_one_moved_get_a_diff_and_a_move(
    tmp_path: Path,
) -> None:
    """Two empty ``__init__.py`` (one content): one edited, one moved by ``git mv``. The
    content read from git for the edited one still names the moved one's blob."""
    repo, root, rows = _committed_rows(
        tmp_path, {"a.py": b"", "b.py": b"", "other.py": b"OTHER = 1\n"}
    )
    (repo.path / "a.py").write_bytes(b"A = 1\n")
    git(repo.path, "mv", "b.py", "c.py")
    edited, moved = ChangeFinder(None).check(
        root, [(rows["a.py"], "changed"), (rows["b.py"], "missing")]
    )
    assert (edited.diff_source, edited.added) == ("git", 1)
    assert moved.moved_to == "c.py"


def test_git_is_asked_for_the_index_once_per_root_and_not_at_all_with_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ChangeFinder promises: git's index is read at most once per root for one answer
    however many files moved, and no git runs when every changed content has a snapshot."""
    repo, root, rows = _committed_rows(tmp_path, {"a.py": b"A = 1\n", "b.py": b"B = 1\n"})
    git(repo.path, "mv", "a.py", "a2.py")
    git(repo.path, "mv", "b.py", "b2.py")
    commands = git_commands(monkeypatch)
    finder = ChangeFinder(None)
    moves = [(rows["a.py"], "missing"), (rows["b.py"], "missing")]
    assert [f.moved_to for f in finder.check(root, moves)] == ["a2.py", "b2.py"]
    assert [f.moved_to for f in finder.check(root, moves)] == ["a2.py", "b2.py"]
    assert commands.count("ls-files") == 1
    commands.clear()
    held = {rows["a.py"].sha256: b"A = 1\n"}
    (repo.path / "a2.py").write_bytes(b"A = 2\n")
    finder = ChangeFinder(None, AGENT_LIMITS, lambda wanted: {s: held[s] for s in wanted})
    changed = rows["a.py"]._replace(path="a2.py")
    (diffed,) = finder.check(root, [(changed, "changed")])
    assert diffed.diff_source == "snapshot"
    assert commands == []
