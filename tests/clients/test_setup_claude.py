"""explomemo setup claude-code: the ``claude`` command it runs, and the hooks it merges.

A ``claude`` script on PATH stands in for Claude Code's CLI: it logs each call (its folder,
what its stdin is, its arguments), so these tests run ``setup`` in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXPLOMEMO, Repo, assert_one_error_line, invoke_cli

ADD = ["mcp", "add-json", "--scope", "local", "explomemo"]
REMOVE = ["mcp", "remove", "--scope", "local", "explomemo"]
NO_CLAUDE_NOTE = (
    "The claude command is not on PATH, so the server went into .mcp.json, approved in"
    " .claude/settings.local.json: Claude Code uses it once this folder is trusted (start"
    " claude here once and accept). .mcp.json now holds this machine's paths: commit it"
    " only if every teammate's are the same."
)


@pytest.fixture
def claude_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Claude Code's user configuration folder (empty: nothing registered yet)."""
    folder = tmp_path / "claude-config"
    folder.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder))
    return folder


def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str = "exit 0") -> Path:
    """A ``claude`` first on PATH that logs each call to ``calls.log``, then runs ``body``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = shlex.quote(str(tmp_path / "calls.log"))
    claude = bin_dir / "claude"
    claude.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$PWD" "$(readlink /proc/self/fd/0)" "$@" "--end--" >> {log}\n'
        f"{body}\n"
    )
    claude.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return claude


def calls(tmp_path: Path) -> list[tuple[str, str, list[str]]]:
    """Each call of the fake claude: (its folder, its stdin, its arguments)."""
    log = tmp_path / "calls.log"
    if not log.exists():
        return []
    found = []
    lines: list[str] = []
    for line in log.read_text().splitlines():
        if line != "--end--":
            lines.append(line)
            continue
        found.append((lines[0], lines[1], lines[2:]))
        lines = []
    return found


@contextlib.contextmanager
def stdin_a_pipe() -> Iterator[None]:
    """File descriptor 0 of this process a pipe (as in a terminal session, not /dev/null)."""
    read, write = os.pipe()
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)


def run_setup(db: Path, *args: str) -> tuple[int, str, str]:
    result = invoke_cli(["--db", str(db), "setup", "claude-code", *args])
    return result.exit_code, result.stdout, result.stderr


def server_entry(db: Path, project: str = "shop") -> dict[str, Any]:
    return {
        "type": "stdio",
        "command": EXPLOMEMO,
        "args": ["serve"],
        "env": {"EXPLOMEMO_DB": str(db), "EXPLOMEMO_PROJECT": project},
    }


# The claude command ------------------------------------------------------------


def test_with_claude_on_path_setup_runs_add_json_in_the_project_folder(
    shop: Repo,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    claude_config: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The server is added to Claude Code's local scope of the project's top folder (not the
    subfolder setup ran in), with claude's stdin closed (it can never wait for the user) and
    its chatter kept from explomemo's output; every line setup prints says what it did."""
    claude = fake_claude(tmp_path, monkeypatch, 'echo "claude chatter"; echo "claude noise" >&2')
    with stdin_a_pipe():
        code, out, err = run_setup(db_path, "--project", "café")
    assert code == 0 and err == "", err
    ((folder, stdin, argv),) = calls(tmp_path)
    assert folder == str(shop.path)
    assert stdin == "/dev/null"
    assert argv[:-1] == ADD
    assert json.loads(argv[-1]) == server_entry(db_path, "café")
    local = shop.path / ".claude" / "settings.local.json"
    ran = shlex.join([str(claude), *argv])
    assert "café" in ran
    assert out.splitlines() == [
        f"wrote {local}",
        f"ran: {ran}",
        f"explomemo is set up for Claude Code in {shop.path}: project 'café', database {db_path}.",
    ]
    assert "claude" not in "".join(capfd.readouterr())
    # The server is claude's to keep: no .mcp.json, nothing to approve.
    assert not (shop.path / ".mcp.json").exists()
    assert "enabledMcpjsonServers" not in json.loads(local.read_text())


@pytest.mark.parametrize(
    ("stderr", "stdout"),
    [("  not logged\n  in  ", ""), ("", "not logged in")],
    ids=["stderr", "stdout"],
)
def test_a_failing_claude_command_is_one_error_line_with_what_it_said(
    shop: Repo,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    claude_config: Path,
    stderr: str,
    stdout: str,
) -> None:
    body = f"printf %s {shlex.quote(stderr)} >&2; printf %s {shlex.quote(stdout)}; exit 1"
    claude = fake_claude(tmp_path, monkeypatch, body)
    run = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    ((_, _, argv),) = calls(tmp_path)
    assert_one_error_line(
        run,
        f"{shlex.join([str(claude), *argv])} failed (not logged in): fix that, then run setup"
        " again",
    )


def test_what_a_failing_claude_said_is_cut_to_300_characters(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_config: Path
) -> None:
    said = " ".join(f"w{n:03d}" for n in range(100))
    fake_claude(tmp_path, monkeypatch, f"echo {shlex.quote(said)} >&2; exit 3")
    line = assert_one_error_line(invoke_cli(["--db", str(db_path), "setup", "claude-code"]))
    assert line.endswith(f" failed ({said[:300]}): fix that, then run setup again")


def test_a_claude_that_cannot_start_is_one_error_line(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_config: Path
) -> None:
    claude = fake_claude(tmp_path, monkeypatch)
    claude.write_text("#!/nonexistent/interpreter\n")
    run = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    add = shlex.join([str(claude), *ADD, json.dumps(server_entry(db_path))])
    assert_one_error_line(run, f"{add} could not run (", "No such file or directory")


def test_a_claude_that_hangs_is_given_up_after_two_minutes(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_config: Path
) -> None:
    """A stub for a claude that outlives setup's wait (two minutes: too long for a test)."""
    claude = fake_claude(tmp_path, monkeypatch)
    real_run = subprocess.run

    def hangs(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] != str(claude):
            return real_run(argv, **kwargs)
        raise subprocess.TimeoutExpired(argv, kwargs.get("timeout"))

    monkeypatch.setattr(subprocess, "run", hangs)
    result = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    assert_one_error_line(result, "could not run (", "timed out after 120 seconds)")


def test_a_server_claude_has_for_the_folder_is_removed_then_added_keeping_the_users_keys(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_config: Path
) -> None:
    """Claude Code keys its local scope by the folder as reached (here through a link, with
    ``--root``): that entry is found and replaced."""
    claude = fake_claude(tmp_path, monkeypatch)
    link = tmp_path / "shop-link"
    link.symlink_to(shop.path)
    mine = {"type": "sse", "command": "/old", "timeout": 60}
    config = {"projects": {str(link): {"mcpServers": {"explomemo": mine}}}}
    (claude_config / ".claude.json").write_text(json.dumps(config))
    code, out, _ = run_setup(db_path, "--root", str(link), "--dry-run")
    assert code == 0
    remove, add = [line for line in out.splitlines() if line.startswith("would run")]
    assert remove == f"would run: {shlex.join([str(claude), *REMOVE])}"
    argv = shlex.split(add.removeprefix("would run: "))
    assert argv[:-1] == [str(claude), *ADD]
    assert json.loads(argv[-1]) == {**server_entry(db_path), "timeout": 60}


@pytest.mark.parametrize(
    "config",
    [
        None,
        "",
        "[]",
        "{not json",
        '{"projects": []}',
        '{"projects": {"SHOP": "not an object"}}',
        '{"projects": {"SHOP": {"allowedTools": []}}}',
        '{"projects": {"SHOP": {"mcpServers": {"explomemo": "not an object"}}}}',
        '{"projects": {"/elsewhere": {"mcpServers": {"explomemo": {}}}}}',
    ],
    ids=[
        "absent",
        "empty",
        "array",
        "invalid",
        "projects-array",
        "entry-string",
        "no-servers",
        "server-string",
        "other-folder",
    ],
)
def test_without_a_server_registered_for_the_folder_claude_only_adds(
    shop: Repo,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    claude_config: Path,
    config: str | None,
) -> None:
    claude = fake_claude(tmp_path, monkeypatch)
    if config is not None:
        text = config.replace("SHOP", str(shop.path))
        (claude_config / ".claude.json").write_text(text)
    code, out, err = run_setup(db_path, "--dry-run")
    assert code == 0 and err == "", err
    assert [line for line in out.splitlines() if line.startswith("would run")] == [
        f"would run: {shlex.join([str(claude), *ADD, json.dumps(server_entry(db_path))])}"
    ]


def test_without_claude_config_dir_claudes_config_is_in_the_home_folder(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = fake_claude(tmp_path, monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    entry = server_entry(db_path)
    config = {"projects": {str(shop.path): {"mcpServers": {"explomemo": entry}}}}
    (home / ".claude.json").write_text(json.dumps(config))
    code, out, _ = run_setup(db_path)
    assert code == 0 and "ran:" not in out and calls(tmp_path) == []
    entry["env"] = {"EXPLOMEMO_DB": "/old.db"}
    (home / ".claude.json").write_text(json.dumps(config))
    code, out, _ = run_setup(db_path, "--dry-run")
    assert f"would run: {shlex.join([str(claude), *REMOVE])}" in out.splitlines()


# Without claude: .mcp.json -----------------------------------------------------


def test_without_claude_the_server_goes_into_mcp_json_with_a_note(
    shop: Repo, db_path: Path
) -> None:
    code, out, _ = run_setup(db_path)
    assert code == 0
    assert out.splitlines()[-1] == NO_CLAUDE_NOTE
    config = json.loads((shop.path / ".mcp.json").read_text())
    assert config == {"mcpServers": {"explomemo": server_entry(db_path)}}


@pytest.mark.parametrize(
    ("rel", "text", "refusal"),
    [
        (".mcp.json", '{"mcpServers": []}', "'mcpServers' in {path} is not an object"),
        (".claude/settings.local.json", '{"hooks": []}', "'hooks' in {path} is not an object"),
        (
            ".claude/settings.local.json",
            '{"hooks": {"Stop": {}}}',
            "hooks.Stop in {path} is not a list: fix it; it was left as is",
        ),
        (
            ".claude/settings.local.json",
            '{"enabledMcpjsonServers": "explomemo"}',
            "enabledMcpjsonServers in {path} is not a list",
        ),
    ],
    ids=["mcp-servers", "hooks", "hooks-stop", "enabled-servers"],
)
def test_a_misshapen_value_in_claudes_files_is_refused_naming_the_file(
    shop: Repo, db_path: Path, rel: str, text: str, refusal: str
) -> None:
    path = shop.path / rel
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    run = invoke_cli(["--db", str(db_path), "setup", "claude-code"])
    assert_one_error_line(run, refusal.format(path=path))
    assert path.read_text() == text


# The hooks ---------------------------------------------------------------------


def hook(db: Path, name: str, timeout: int, command: list[str] | None) -> dict[str, Any]:
    """explomemo's hook ``name`` as setup writes it, running ``command`` (this explomemo)."""
    explomemo = command or [EXPLOMEMO]
    argv = [*explomemo, "--db", str(db), "hook", name, "--project", "shop"]
    return {"type": "command", "command": shlex.join(argv), "timeout": timeout}


def own_hooks(db: Path, command: list[str] | None = None) -> dict[str, Any]:
    return {
        "SessionStart": [
            {
                "matcher": "startup|resume|clear|compact",
                "hooks": [hook(db, "session-start", 15, command)],
            }
        ],
        "UserPromptSubmit": [{"hooks": [hook(db, "prompt", 5, command)]}],
        "Stop": [{"hooks": [hook(db, "stop", 10, command)]}],
        "PreToolUse": [{"matcher": "Agent|Task", "hooks": [hook(db, "delegate", 10, command)]}],
        "SubagentStop": [{"hooks": [hook(db, "subagent-stop", 10, command)]}],
    }


def test_the_five_hooks_are_commands_with_their_timeouts(shop: Repo, db_path: Path) -> None:
    assert run_setup(db_path)[0] == 0
    settings = json.loads((shop.path / ".claude" / "settings.local.json").read_text())
    assert settings["hooks"] == own_hooks(db_path)


def test_the_users_odd_hook_entries_stay_theirs(shop: Repo, db_path: Path) -> None:
    """Entries that are not explomemo's hook (no command, a command shlex cannot split, an
    empty one, another module run with ``-m``, a group that is not an object) are kept as
    they are, and explomemo's hook is added beside them."""
    theirs = [
        "a group that is not an object",
        {
            "hooks": [
                "not an object",
                {"type": "command"},
                {"type": "command", "command": ""},
                {"type": "command", "command": "echo 'unbalanced"},
                {"type": "command", "command": "python3 -m explomemo_extra hook stop"},
                {"type": "command", "command": "echo a b hook stop"},
            ]
        },
    ]
    settings = shop.path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"Stop": theirs}}))
    assert run_setup(db_path)[0] == 0
    hooks = json.loads(settings.read_text())["hooks"]
    assert hooks == {**own_hooks(db_path), "Stop": [*theirs, *own_hooks(db_path)["Stop"]]}


def test_an_earlier_setups_hooks_run_with_python_m_are_replaced_in_place(
    shop: Repo, db_path: Path
) -> None:
    """An earlier setup from a Python without the explomemo script wrote ``PYTHON -m
    explomemo …``: those hooks are explomemo's, updated where they are, not added again."""
    earlier = own_hooks(db_path.parent / "old.db", ["/usr/bin/python3", "-m", "explomemo"])
    settings = shop.path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": earlier}))
    assert run_setup(db_path)[0] == 0
    assert json.loads(settings.read_text())["hooks"] == own_hooks(db_path)


SHARED_CASES = [
    pytest.param(
        lambda own: {"permissions": {"allow": ["Bash(ls)"]}, "hooks": own},
        {"permissions": {"allow": ["Bash(ls)"]}},
        id="only-explomemos-hooks",
    ),
    pytest.param(
        lambda own: {"hooks": {"Stop": own["Stop"]}, "x": 1},
        {"x": 1},
        id="only-the-stop-hook",
    ),
    pytest.param(
        lambda own: {
            "hooks": {
                "Stop": [
                    {
                        "hooks": [
                            {"type": "command", "command": "echo bye"},
                            *own["Stop"][0]["hooks"],
                        ]
                    }
                ]
            }
        },
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo bye"}]}]}},
        id="beside-the-users-hook",
    ),
]


@pytest.mark.parametrize(("before", "after"), SHARED_CASES)
def test_explomemos_hooks_leave_the_shared_settings(
    shop: Repo, db_path: Path, before: Any, after: dict[str, Any]
) -> None:
    shared = shop.path / ".claude" / "settings.json"
    shared.parent.mkdir()
    shared.write_text(json.dumps(before(own_hooks(db_path))))
    code, out, _ = run_setup(db_path)
    assert code == 0 and f"wrote {shared}" in out.splitlines()
    assert json.loads(shared.read_text()) == after


def test_shared_settings_without_explomemos_hooks_are_left_byte_for_byte(
    shop: Repo, db_path: Path
) -> None:
    shared = shop.path / ".claude" / "settings.json"
    shared.parent.mkdir()
    text = json.dumps({"hooks": {"Stop": [{"matcher": "x", "hooks": []}], "Other": 1}}) + "\n"
    shared.write_text(text)
    code, out, _ = run_setup(db_path)
    assert code == 0 and str(shared) not in out
    assert shared.read_text() == text
