"""What a cloned repository holds never makes explomemo read or write outside it.

Each test repeats one finding of an attack run as a hostile repository would: the
repository commits links (or an old export), a user clones it and runs the documented
commands in the clone, and the user's own files outside it must stay as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Repo, git, invoke_cli

#: The user's own files a hostile repository's links lead to (under the test's HOME).
USER_FILES = {
    ".cursor/mcp.json": '{"mcpServers": {"mine": {"command": "mine"}}}\n',
    ".claude/settings.json": '{"permissions": {"allow": ["Bash(ls)"]}}\n',
    ".claude.json": '{"projects": {}}\n',
    ".codex/config.toml": '[mcp_servers.mine]\ncommand = "mine"\n',
    "keys.txt": "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home holding their own configuration files."""
    folder = tmp_path / "home"
    for rel, text in USER_FILES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder / ".claude-config"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return folder


def hostile_clone(tmp_path: Path, links: dict[str, Path]) -> Path:
    """A repository committing each of ``links`` (path in the repository: where it leads),
    cloned the way a user gets it; returns the clone's folder."""
    upstream = Repo(tmp_path / "upstream" / "app")
    upstream.write("app.py", "print('hello')\n")
    for rel, target in links.items():
        link = upstream.path / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        # Forced: Claude Code puts its local settings in the user's global git ignore.
        git(upstream.path, "add", "-f", rel)
    upstream.commit("a helpful project")
    clone = tmp_path / "src" / "app"
    clone.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    for rel in links:
        assert (clone / rel).is_symlink(), rel
    return clone


def user_files(home: Path) -> dict[str, str]:
    return {rel: (home / rel).read_text() for rel in USER_FILES}


@pytest.mark.parametrize(
    ("client", "rel", "user_file"),
    [
        ("cursor", ".cursor/mcp.json", ".cursor/mcp.json"),
        ("claude-code", ".claude/settings.local.json", ".claude/settings.json"),
        ("claude-code", ".mcp.json", ".claude.json"),
        ("codex", ".codex/config.toml", ".codex/config.toml"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_setup_refuses_a_committed_link_to_the_users_configuration(
    tmp_path: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
    rel: str,
    user_file: str,
    dry_run: bool,
) -> None:
    """Finding 1: a repository committing ``.cursor/mcp.json`` (or Claude Code's local
    settings, ``.mcp.json``, Codex's config) as a link into the home folder had
    ``explomemo setup`` rewrite the user's own configuration; ``--dry-run`` showed only
    the path in the repository."""
    clone = hostile_clone(tmp_path, {rel: home / user_file})
    monkeypatch.chdir(clone)
    before = user_files(home)
    result = invoke_cli(
        ["--db", str(tmp_path / "memos.db"), "setup", client, *(["--dry-run"] * dry_run)]
    )
    assert user_files(home) == before
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert f"{clone / rel} is a symbolic link that leads out of the project folder" in (
        result.stderr
    )
    assert str(home / user_file) in result.stderr


def test_export_refuses_a_committed_link_out_of_the_work_tree(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2: a repository whose ``.explomemo/memos.jsonl`` is a link into the home
    folder had the documented team command replace the file it leads to (a key file),
    and the link stayed, so ``git status`` showed nothing."""
    clone = hostile_clone(tmp_path, {".explomemo/memos.jsonl": home / "keys.txt"})
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    recorded = invoke_cli(
        [
            "--db",
            db,
            "record",
            "--question",
            "What does app.py print?",
            "--conclusion",
            "hello",
            "app.py",
        ]
    )
    assert recorded.exit_code == 0, recorded.output
    before = user_files(home)
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", ".explomemo/memos.jsonl"])
    assert user_files(home) == before
    assert result.exit_code == 2, result.output
    assert f"export file .explomemo/memos.jsonl is a symbolic link that leads out of {clone}" in (
        result.stderr
    )
    assert git(clone, "status", "--porcelain") == ""


def test_export_writes_through_a_link_inside_the_work_tree(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link that stays inside the work tree is written through, as before."""
    clone = hostile_clone(tmp_path, {".explomemo/memos.jsonl": Path("../shared/memos.jsonl")})
    (clone / "shared").mkdir()
    (clone / "shared" / "memos.jsonl").write_text("")
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    invoke_cli(["--db", db, "record", "--question", "Q?", "--conclusion", "C", "app.py"])
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", ".explomemo/memos.jsonl"])
    assert result.exit_code == 0, result.output
    assert (clone / ".explomemo" / "memos.jsonl").is_symlink()
    assert '"question":"Q?"' in (clone / "shared" / "memos.jsonl").read_text()


def test_import_never_takes_an_absolute_root_from_the_file(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 3: an export line of an older version naming an absolute ``root`` outside
    the clone, with a recorded SHA-256 a snapshot already holds (an empty file's), had
    ``show``, ``diff`` and ``stale --format markdown`` print a file from outside the clone
    whole, as the added lines of a diff."""
    clone = hostile_clone(tmp_path, {})
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    (clone / "empty.txt").write_text("")
    recorded = invoke_cli(
        [
            "--db",
            db,
            "record",
            "--question",
            "Is empty.txt empty?",
            "--conclusion",
            "yes",
            "empty.txt",
        ]
    )
    assert recorded.exit_code == 0, recorded.output
    exported = invoke_cli(["--db", db, "export", "--project", "app"])
    line = json.loads(exported.stdout.splitlines()[0])
    line.update(question="What is in keys.txt?", root=str(home), id=2)
    line["files"][0]["path"] = "keys.txt"
    hostile = clone / "old-export.jsonl"
    hostile.write_text(json.dumps(line) + "\n")
    imported = invoke_cli(["--db", db, "import", str(hostile)])
    assert imported.exit_code == 0, imported.output
    listed = json.loads(invoke_cli(["--db", db, "list", "--json"]).stdout)
    assert {memo["root"] for memo in listed} == {str(clone)}
    ids = [str(memo["id"]) for memo in listed]
    shown = [
        invoke_cli(["--db", db, command, i]).stdout for command in ("show", "diff") for i in ids
    ]
    markdown = invoke_cli(["--db", db, "stale", "--format", "markdown"]).stdout
    for text in [*shown, markdown]:
        assert "PRIVATE KEY" not in text


def test_a_ci_gate_over_an_empty_export_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 4: ``stale --from EMPTY --check`` exited 0: an emptied export passed the gate."""
    clone = hostile_clone(tmp_path, {})
    monkeypatch.chdir(clone)
    (clone / "memos.jsonl").write_text("")
    result = invoke_cli(["stale", "--from", "memos.jsonl", "--check"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "explomemo: error: export file memos.jsonl holds no memo, so there is nothing to"
        " check: write it with explomemo export --project P -o memos.jsonl\n"
    )


@pytest.mark.parametrize(
    "command", [["stale", "--check"], ["stale"], ["list"], ["show", "1"], ["diff", "1"], ["export"]]
)
def test_a_read_only_command_on_a_misspelt_database_fails_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Finding 4: ``stale --check`` with a misspelt ``--db`` exited 0 and created that
    database (so did ``show``)."""
    monkeypatch.chdir(tmp_path)
    misspelt = tmp_path / "memso.db"
    result = invoke_cli(["--db", str(misspelt), *command])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"explomemo: error: there is no database at {misspelt}: check the path (--db,"
        " $EXPLOMEMO_DB), or record a memo first, which creates it\n"
    )
    assert list(tmp_path.glob("memso.db*")) == []
