"""explomemo setup: merged into existing configuration, idempotent, dry-run, refusing bad files."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import (
    DEEP,
    Repo,
    assert_one_error_line,
    git,
    hostile_clone,
    invoke_cli,
    user_files,
)

EXISTING_SETTINGS = """{
    "permissions": {"allow": ["Bash(ls)"]},
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo bye"}]}]}
}
"""


def setup(db: Path, *args: str) -> tuple[int, str, str]:
    result = invoke_cli(["--db", str(db), "setup", *args])
    return result.exit_code, result.stdout, result.stderr


# A folder where a file is expected ------------------------------------------


@pytest.mark.parametrize(
    ("client", "parts"),
    [
        ("claude-code", (".mcp.json",)),
        ("claude-code", (".claude", "settings.local.json")),
        ("cursor", (".cursor", "mcp.json")),
        ("codex", (".codex", "config.toml")),
    ],
)
def test_a_configuration_file_that_is_a_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, parts: tuple[str, ...]
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    folder = tmp_path.joinpath(*parts)
    folder.mkdir(parents=True)
    run = invoke_cli(["setup", client, "--root", str(tmp_path)])
    assert_one_error_line(run, str(folder), "is a directory, not a regular file")
    assert folder.is_dir() and not any(folder.iterdir())


# JSON nested past Python's recursion limit ------------------------------------


def test_a_configuration_file_nested_too_deeply_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text(DEEP)
    run = invoke_cli(["setup", "cursor", "--root", str(tmp_path)])
    assert_one_error_line(run, f"{config} is not valid JSON (nested too deeply)")
    assert config.read_text() == DEEP


# Client configuration holding numbers JSON cannot write back -----------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_a_configuration_with_a_number_json_cannot_carry_is_refused(
    tmp_path: Path, number: str
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    text = '{"f": ' + number + ', "mcpServers": {}}\n'
    config.write_text(text)
    for dry_run in (["--dry-run"], []):
        run = invoke_cli(["setup", "cursor", "--root", str(tmp_path), *dry_run])
        assert_one_error_line(run, str(config), number, "finite")
        assert config.read_text() == text


def test_claude_code_merges_hooks_and_server_and_a_second_run_changes_nothing(
    shop: Repo, db_path: Path
) -> None:
    shared = shop.path / ".claude" / "settings.json"
    shared.parent.mkdir()
    shared.write_text(EXISTING_SETTINGS)
    settings = shop.path / ".claude" / "settings.local.json"
    settings.write_text(
        '{\n  "permissions": {"allow": ["Bash(ls)"]},\n  "hooks": {"Stop": [\n'
        '    {"hooks": [{"type": "command", "command": "echo bye"}]}]}\n}\n'
    )
    code, out, err = setup(db_path, "claude-code")
    assert code == 0 and err == "", err
    assert f"wrote {settings}" in out and str(shared) not in out
    # The hooks hold this machine's paths: not in the settings a team commits.
    assert shared.read_text() == EXISTING_SETTINGS
    merged = json.loads(settings.read_text())
    assert merged["permissions"] == {"allow": ["Bash(ls)"]}
    stops = merged["hooks"]["Stop"]
    assert stops[0] == {"hooks": [{"type": "command", "command": "echo bye"}]}
    commands = {
        event: groups[-1]["hooks"][0]["command"] for event, groups in merged["hooks"].items()
    }
    for event, name in [("SessionStart", "session-start"), ("UserPromptSubmit", "prompt")]:
        argv = shlex.split(commands[event])
        assert os.path.isabs(argv[0])
        assert argv[1:] == ["--db", str(db_path), "hook", name, "--project", "shop"]
    assert merged["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    server = json.loads((shop.path / ".mcp.json").read_text())["mcpServers"]["explomemo"]
    assert server["args"] == ["serve"]
    assert server["env"] == {"EXPLOMEMO_DB": str(db_path), "EXPLOMEMO_PROJECT": "shop"}
    assert server["command"] == shlex.split(commands["Stop"])[0]
    assert merged["enabledMcpjsonServers"] == ["explomemo"]

    snapshot = {
        p: p.read_bytes() for p in shop.path.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    code, out, _ = setup(db_path, "claude-code")
    assert code == 0 and "nothing changed" in out and out.count("\n") == 1
    assert snapshot == {p: p.read_bytes() for p in snapshot}


def test_an_earlier_setups_hooks_leave_the_shared_settings(shop: Repo, db_path: Path) -> None:
    shared = shop.path / ".claude" / "settings.json"
    shared.parent.mkdir()
    shared.write_text(EXISTING_SETTINGS)
    assert setup(db_path, "claude-code")[0] == 0
    local = shop.path / ".claude" / "settings.local.json"
    earlier = json.loads(local.read_text())
    hooks = json.loads(json.dumps(earlier["hooks"]))
    hooks["Stop"].insert(0, {"hooks": [{"type": "command", "command": "echo bye"}]})
    mine = {"permissions": {"allow": ["Bash(ls)"]}, "hooks": hooks}
    shared.write_text(json.dumps(mine, indent=4) + "\n")  # as an earlier setup wrote it
    local.unlink()
    code, out, _ = setup(db_path, "claude-code")
    assert code == 0 and f"wrote {shared}" in out
    assert json.loads(shared.read_text()) == {
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo bye"}]}]},
    }
    assert json.loads(local.read_text())["hooks"] == earlier["hooks"]


def test_dry_run_shows_a_diff_and_writes_nothing(shop: Repo, db_path: Path) -> None:
    code, out, _ = setup(db_path, "claude-code", "--dry-run")
    assert code == 0
    assert "--- /dev/null\n+++ b/.claude/settings.local.json" in out
    assert '+        "UserPromptSubmit": [' in out or '+    "UserPromptSubmit": [' in out
    assert out.rstrip().endswith("dry run: nothing was written.")
    assert not (shop.path / ".claude").exists() and not (shop.path / ".mcp.json").exists()


def test_an_invalid_config_file_is_refused_and_left_alone(shop: Repo, db_path: Path) -> None:
    settings = shop.path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": {,}}')
    code, out, err = setup(db_path, "claude-code")
    assert code == 2 and out == ""
    assert (
        err.startswith(f"explomemo: error: {settings} is not valid JSON") and err.count("\n") == 1
    )
    assert settings.read_text() == '{"hooks": {,}}'
    codex = shop.path / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text("[mcp_servers\n")
    code, _, err = setup(db_path, "codex")
    assert code == 2 and "is not valid TOML" in err and codex.read_text() == "[mcp_servers\n"


def test_cursor_merges_into_its_mcp_json(shop: Repo, db_path: Path) -> None:
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"mcpServers": {"other": {"command": "x"}}, "keep": 1}\n')
    assert setup(db_path, "cursor", "--project", "named")[0] == 0
    config = json.loads(path.read_text())
    assert config["keep"] == 1 and config["mcpServers"]["other"] == {"command": "x"}
    assert config["mcpServers"]["explomemo"]["env"]["EXPLOMEMO_PROJECT"] == "named"
    assert "nothing changed" in setup(db_path, "cursor", "--project", "named")[1]


def test_codex_merges_into_its_config_toml_keeping_comments(shop: Repo, db_path: Path) -> None:
    path = shop.path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('# mine\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "x"\n')
    assert setup(db_path, "codex")[0] == 0
    text = path.read_text()
    assert text.startswith('# mine\nmodel = "o4"\n')
    config = tomllib.loads(text)
    assert config["mcp_servers"]["other"] == {"command": "x"}
    server = config["mcp_servers"]["explomemo"]
    assert server["args"] == ["serve"] and server["env"]["EXPLOMEMO_PROJECT"] == "shop"
    assert "nothing changed" in setup(db_path, "codex")[1]
    assert path.read_text() == text


def test_setup_hook_and_transcript_errors_are_of_the_one_family() -> None:
    import explomemo.errors as errors

    for name in ("SetupError", "HookInputError", "TranscriptError"):
        cls = getattr(errors, name)
        assert cls.__module__ == "explomemo.errors" and issubclass(cls, errors.ExplomemoError)


def test_a_linked_config_file_is_written_through_keeping_its_mode(
    shop: Repo, db_path: Path, tmp_path: Path
) -> None:
    """A configuration file linked to another file of the project is written through; a
    link out of the project is refused (see the committed-link test)."""
    shared = shop.path / "config" / "mcp.json"
    shared.parent.mkdir()
    shared.write_text('{"mcpServers": {}}\n')
    os.chmod(shared, 0o640)
    link = shop.path / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(shared)
    code, out, err = setup(db_path, "cursor")
    assert code == 0 and err == "", err
    assert f"wrote {link} (through its link, to {shared})" in out
    assert link.is_symlink() and os.readlink(link) == str(shared)
    assert "explomemo" in json.loads(shared.read_text())["mcpServers"]
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640


def test_a_new_config_file_honours_the_umask(shop: Repo, db_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert setup(db_path, "cursor")[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((shop.path / ".cursor" / "mcp.json").stat().st_mode) == 0o640


@pytest.mark.timeout(20)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_fifo_in_place_of_a_config_file_is_refused_without_hanging(
    shop: Repo, db_path: Path, dry_run: bool
) -> None:
    fifo = shop.path / ".cursor" / "mcp.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    code, out, err = setup(db_path, "cursor", *(["--dry-run"] if dry_run else []))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{fifo} is a FIFO, not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_is_refused_by_the_writer_before_it_is_opened(tmp_path: Path) -> None:
    from explomemo.atomic import replace_file
    from explomemo.clients.setup import CONFIG_FILE
    from explomemo.errors import SetupError

    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(SetupError, match="is a FIFO, not a regular file"):
        replace_file(fifo, b"{}", CONFIG_FILE, within=tmp_path)
    assert os.listdir(tmp_path) == ["config.json"]


@pytest.mark.parametrize(
    ("client", "folder", "name"),
    [
        ("cursor", ".cursor", "mcp.json"),
        ("codex", ".codex", "config.toml"),
        ("claude-code", ".claude", "settings.json"),
    ],
)
def test_a_config_folder_linked_out_of_the_project_is_refused(
    shop: Repo, db_path: Path, tmp_path: Path, client: str, folder: str, name: str
) -> None:
    home = tmp_path / "home" / folder
    home.mkdir(parents=True)
    (home / name).write_text("# the user's own\n")
    (shop.path / folder).symlink_to(home)
    for args in ([client], [client, "--dry-run"]):
        code, out, err = setup(db_path, *args)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"{shop.path / folder} is a symbolic link that leads out of the project" in err
        assert "replace the link with a folder of the project" in err
    assert os.listdir(home) == [name] and (home / name).read_text() == "# the user's own\n"


def test_a_config_folder_linked_inside_the_project_is_used(shop: Repo, db_path: Path) -> None:
    (shop.path / "config" / "cursor").mkdir(parents=True)
    (shop.path / ".cursor").symlink_to(shop.path / "config" / "cursor")
    assert setup(db_path, "cursor")[0] == 0
    assert (
        "explomemo"
        in json.loads((shop.path / "config" / "cursor" / "mcp.json").read_text())["mcpServers"]
    )


@pytest.mark.parametrize(
    ("client", "folder", "name"),
    [
        ("cursor", ".cursor", "mcp.json"),
        ("codex", ".codex", "config.toml"),
        ("claude-code", ".claude", "settings.local.json"),
    ],
)
def test_a_config_folder_linked_to_a_sibling_whose_name_starts_with_the_projects_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, folder: str, name: str
) -> None:
    """Kills ``leads_out`` taking a path that merely starts with the project folder's
    (``/x/shop-other`` for ``/x/shop``) for one inside it: a committed link from the
    project's configuration folder to the sibling's must be refused, as it is for
    ``record`` (tests/test_files.py)."""
    shop = Repo(tmp_path / "x" / "shop")
    sibling = tmp_path / "x" / "shop-other" / folder
    sibling.mkdir(parents=True)
    (sibling / name).write_text("# the other project's own\n")
    (shop.path / folder).symlink_to(Path("..", "shop-other", folder))
    git(shop.path, "add", "-f", folder)
    shop.commit("a link to the sibling's configuration")
    monkeypatch.chdir(shop.path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for args in ([client, "--dry-run"], [client]):
        code, out, err = setup(tmp_path / "memos.db", *args)
        assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
        assert f"{shop.path / folder} is a symbolic link that leads out of the project" in err
        assert str(sibling) in err
    assert os.listdir(sibling) == [name]
    assert (sibling / name).read_text() == "# the other project's own\n"


def test_claude_code_creates_no_shared_settings_in_a_project_without_them(
    shop: Repo, db_path: Path
) -> None:
    """Kills ``plan_claude_code`` writing ``.claude/settings.json`` (the file a team
    commits) where there was none: it only takes an earlier setup's hooks out of an
    existing one, and the dry run shows no change to it either."""
    shared = shop.path / ".claude" / "settings.json"
    code, out, _ = setup(db_path, "claude-code", "--dry-run")
    assert code == 0 and "settings.json" not in out.replace("settings.local.json", "")
    code, out, err = setup(db_path, "claude-code")
    assert code == 0 and err == "", err
    assert f"wrote {shop.path / '.claude' / 'settings.local.json'}" in out
    assert str(shared) not in out
    assert not shared.exists()
    assert sorted(os.listdir(shop.path / ".claude")) == ["settings.local.json"]


def test_the_users_own_keys_in_explomemos_entry_stay(shop: Repo, db_path: Path) -> None:
    mcp = shop.path / ".mcp.json"
    mcp.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "explomemo": {
                        "command": "/old/explomemo",
                        "timeout": 60,
                        "env": {"EXPLOMEMO_SNAPSHOTS": "off", "EXPLOMEMO_DB": "/old.db"},
                    }
                }
            }
        )
    )
    codex = shop.path / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text(
        "[mcp_servers.explomemo]\n"
        'command = "/old/explomemo"\n'
        "startup_timeout_sec = 60 # slow disk\n"
        "[mcp_servers.explomemo.env]\n"
        'EXPLOMEMO_SNAPSHOTS = "off"\n'
    )
    assert setup(db_path, "claude-code")[0] == 0
    assert setup(db_path, "codex")[0] == 0
    server = json.loads(mcp.read_text())["mcpServers"]["explomemo"]
    assert server["timeout"] == 60 and server["command"] != "/old/explomemo"
    assert server["env"] == {
        "EXPLOMEMO_SNAPSHOTS": "off",
        "EXPLOMEMO_DB": str(db_path),
        "EXPLOMEMO_PROJECT": "shop",
    }
    text = codex.read_text()
    assert "startup_timeout_sec = 60 # slow disk" in text
    table = tomllib.loads(text)["mcp_servers"]["explomemo"]
    assert table["env"] == {
        "EXPLOMEMO_SNAPSHOTS": "off",
        "EXPLOMEMO_DB": str(db_path),
        "EXPLOMEMO_PROJECT": "shop",
    }
    assert table["args"] == ["serve"] and table["command"] == server["command"]
    snapshot = {mcp: mcp.read_bytes(), codex: codex.read_bytes()}
    assert "nothing changed" in setup(db_path, "claude-code")[1]
    assert "nothing changed" in setup(db_path, "codex")[1]
    assert snapshot == {path: path.read_bytes() for path in snapshot}


def test_claude_local_scope_keeps_the_users_own_keys(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text("#!/bin/sh\nexit 0\n")
    claude.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    (tmp_path / "cc").mkdir()
    mine = {
        "type": "stdio",
        "command": "/old",
        "timeout": 60,
        "env": {"EXPLOMEMO_SNAPSHOTS": "off"},
    }
    config = {"projects": {str(shop.path): {"mcpServers": {"explomemo": mine}}}}
    (tmp_path / "cc" / ".claude.json").write_text(json.dumps(config))
    code, out, _ = setup(db_path, "claude-code", "--dry-run")
    assert code == 0
    (line,) = [line for line in out.splitlines() if "add-json" in line]
    entry = json.loads(shlex.split(line.removeprefix("would run: "))[-1])
    assert entry["timeout"] == 60 and entry["args"] == ["serve"]
    assert entry["env"] == {
        "EXPLOMEMO_SNAPSHOTS": "off",
        "EXPLOMEMO_DB": str(db_path),
        "EXPLOMEMO_PROJECT": "shop",
    }
    config["projects"][str(shop.path)]["mcpServers"]["explomemo"] = entry
    (tmp_path / "cc" / ".claude.json").write_text(json.dumps(config))
    assert "would run" not in setup(db_path, "claude-code", "--dry-run")[1]


def test_setup_output_and_its_diff_escape_control_characters(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    folder = tmp_path / "proj\x1b]0;TITLE\x07"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".claude" / "settings.local.json").write_text(
        '{\n  "note": "\x9b2J\u202egnp.exe",\n  "x": 1\n}\n'
    )
    code, out, _ = setup(db_path, "claude-code", "--root", str(folder), "--dry-run")
    assert code == 0
    assert "\\x9b2J\\u202egnp.exe" in out and '   "note"' in out
    code, out, _ = setup(db_path, "claude-code", "--root", str(folder))
    assert code == 0 and "proj\\x1b]0;TITLE\\x07" in out
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in out


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


def test_a_refused_file_is_refused_before_anything_is_written(shop: Repo, db_path: Path) -> None:
    """A second reader's finding: with ``.mcp.json`` a link to a file that does not exist,
    ``setup claude-code`` wrote ``.claude/settings.local.json`` and then refused
    ``.mcp.json``; ``--dry-run`` showed both diffs and exited 0. Every file is checked
    before the first is written."""
    (shop.path / ".mcp.json").symlink_to("notyet.json")
    for args in (["claude-code", "--dry-run"], ["claude-code"]):
        code, out, err = setup(db_path, *args)
        assert code == 2 and out == "", (code, out, err)
        assert "symbolic link to a file that does not exist" in err
    assert not (shop.path / ".claude").exists()
