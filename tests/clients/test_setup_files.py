"""explomemo setup: the project folder, the command it writes, and each client's file as
written (layout, diff, refusals), Cursor's and Codex's in particular."""

from __future__ import annotations

import difflib
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import EXPLOMEMO, Repo, assert_one_error_line, invoke_cli

CURSOR_NOTE = "Cursor lists it under Settings > MCP; switch it on there if it is off."
CODEX_NOTE = "Codex reads a project's .codex/config.toml once the project is trusted."


def run_setup(db: Path, *args: str) -> tuple[int, str, str]:
    result = invoke_cli(["--db", str(db), "setup", *args])
    return result.exit_code, result.stdout, result.stderr


def cursor_server(db: Path, command: str = EXPLOMEMO, args: tuple[str, ...] = ()) -> Any:
    return {
        "command": command,
        "args": [*args, "serve"],
        "env": {"EXPLOMEMO_DB": str(db), "EXPLOMEMO_PROJECT": "shop"},
    }


# The project folder -------------------------------------------------------------


def test_a_root_whose_path_is_not_utf8_is_refused(tmp_path: Path, db_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(raw)
    run = invoke_cli(["--db", str(db_path), "setup", "cursor", "--root", os.fsdecode(raw)])
    assert_one_error_line(
        run,
        f"--root '{tmp_path}/caf\\xe9' is not valid UTF-8: explomemo stores paths as UTF-8;"
        " pass a folder whose path is UTF-8",
    )
    assert os.listdir(raw) == []


def test_a_current_folder_whose_path_is_not_utf8_is_refused(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(raw)
    monkeypatch.chdir(raw)
    run = invoke_cli(["--db", str(db_path), "setup", "cursor"])
    assert_one_error_line(
        run,
        f"the project folder '{tmp_path}/caf\\xe9' is not valid UTF-8: explomemo stores paths"
        " as UTF-8; set up a folder whose path is UTF-8 (--root)",
    )
    assert os.listdir(raw) == []


def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path, db_path: Path) -> None:
    root = str(tmp_path / "nowhere")
    run = invoke_cli(["--db", str(db_path), "setup", "cursor", "--root", root])
    assert_one_error_line(run, f"--root {root!r} is not a folder: pass the project's folder")


# The command the client runs ----------------------------------------------------


@pytest.mark.parametrize("runs", [True, False])
def test_the_explomemo_script_that_runs_setup_is_the_command_written_if_it_can_run(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: bool
) -> None:
    """Else the explomemo beside this Python."""
    script = tmp_path / "bin" / "explomemo"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755 if runs else 0o644)
    monkeypatch.setattr(sys, "argv", [str(script)])
    assert run_setup(db_path, "cursor")[0] == 0
    config = json.loads((shop.path / ".cursor" / "mcp.json").read_text())
    expected = cursor_server(db_path, str(script) if runs else EXPLOMEMO)
    assert config["mcpServers"]["explomemo"] == expected


@pytest.mark.parametrize("argv", [[""], []], ids=["empty-name", "no-argv"])
def test_without_an_explomemo_script_the_command_is_python_m_explomemo(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """Also when Python was embedded and left ``sys.argv`` empty."""
    python = str(tmp_path / "python" / "bin" / "python3")
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "executable", python)
    assert run_setup(db_path, "cursor")[0] == 0
    config = json.loads((shop.path / ".cursor" / "mcp.json").read_text())
    expected = cursor_server(db_path, python, ("-m", "explomemo"))
    assert config["mcpServers"]["explomemo"] == expected


def test_a_write_that_fails_on_the_disk_is_one_line_naming_the_file(
    shop: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration file whose write fails (here the disk's flush: EIO) ends setup with
    exit 2 and one line that names the file, the reason and what to do."""

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    run = invoke_cli(["--db", str(db_path), "setup", "cursor"])
    monkeypatch.undo()
    path = shop.path / ".cursor" / "mcp.json"
    assert_one_error_line(run, f"cannot write configuration file {path}", os.strerror(errno.EIO))
    assert "then run setup again" in run.stderr
    assert not path.exists()


def test_the_project_is_named_for_the_root_given_not_the_current_directory(
    shop: Repo, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``setup --root`` from a folder outside the project: the project is the root's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("EXPLOMEMO_PROJECT", raising=False)
    assert run_setup(db_path, "cursor", "--root", str(shop.path))[0] == 0
    config = json.loads((shop.path / ".cursor" / "mcp.json").read_text())
    assert config["mcpServers"]["explomemo"]["env"]["EXPLOMEMO_PROJECT"] == "shop"
    assert not (elsewhere / ".cursor").exists()


def test_a_configuration_file_that_is_not_utf8_is_refused_in_one_line(
    shop: Repo, db_path: Path
) -> None:
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_bytes(b'{"caf\xe9": 1}\n')
    run = invoke_cli(["--db", str(db_path), "setup", "cursor"])
    assert_one_error_line(run, f"{path} cannot be read", "fix it or move it away")
    assert path.read_bytes() == b'{"caf\xe9": 1}\n'


# Cursor -------------------------------------------------------------------------


def test_cursor_gets_the_server_and_a_note(shop: Repo, db_path: Path) -> None:
    code, out, _ = run_setup(db_path, "cursor")
    path = shop.path / ".cursor" / "mcp.json"
    assert code == 0
    assert out.splitlines() == [
        f"wrote {path}",
        f"explomemo is set up for Cursor in {shop.path}: project 'shop', database {db_path}.",
        CURSOR_NOTE,
    ]
    assert json.loads(path.read_text()) == {"mcpServers": {"explomemo": cursor_server(db_path)}}


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"mcpServers": []}', "'mcpServers' in {path} is not an object: fix it; it was left"),
        ("[]", "{path} does not hold a JSON object: fix it; it was left as it is"),
        (
            '{"a": }',
            "{path} is not valid JSON (Expecting value: line 1 column 7 (char 6)): fix it, then"
            " run setup again; it was left as it is",
        ),
        (
            '{"a": 1e400}',
            "{path} holds the number 1e400, which is not finite: JSON has no way to write it"
            " back; fix it, then run setup again; it was left as it is",
        ),
    ],
    ids=["mcp-servers", "array", "invalid", "not-finite"],
)
def test_a_cursor_file_setup_cannot_merge_into_is_refused_saying_why(
    shop: Repo, db_path: Path, text: str, refusal: str
) -> None:
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(text)
    assert_one_error_line(
        invoke_cli(["--db", str(db_path), "setup", "cursor"]), refusal.format(path=path)
    )
    assert path.read_text() == text


def test_a_config_file_in_a_folder_that_is_a_file_is_refused(shop: Repo, db_path: Path) -> None:
    (shop.path / ".cursor").write_text("not a folder\n")
    run = invoke_cli(["--db", str(db_path), "setup", "cursor"])
    assert_one_error_line(
        run, f"{shop.path / '.cursor' / 'mcp.json'} cannot be read (Not a directory): fix it"
    )
    assert (shop.path / ".cursor").read_text() == "not a folder\n"


def test_a_misshapen_explomemo_entry_gets_the_servers_values(shop: Repo, db_path: Path) -> None:
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    entry = {"command": "/old", "args": {"a": 1}, "env": "broken", "timeout": 60}
    path.write_text(json.dumps({"mcpServers": {"explomemo": entry}}))
    assert run_setup(db_path, "cursor")[0] == 0
    server = json.loads(path.read_text())["mcpServers"]["explomemo"]
    assert server == {**cursor_server(db_path), "timeout": 60}


def test_a_lone_surrogate_escape_is_written_back_as_the_same_escape(
    shop: Repo, db_path: Path
) -> None:
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"note": "a\\ud800b", "mcpServers": {}}\n')
    assert run_setup(db_path, "cursor")[0] == 0
    text = path.read_text()
    assert '  "note": "a\\ud800b",\n' in text
    assert json.loads(text)["note"] == "a\ud800b"


# A JSON file keeps its indentation ------------------------------------------------


@pytest.mark.parametrize(
    ("before", "indent"),
    [
        (json.dumps({"keep": {"nested": {"deep": 1}}, "mcpServers": {}}, indent=4), 4),
        (json.dumps({"keep": {"nested": [1, 2]}, "mcpServers": {}}, indent=3), 3),
        ('{\n\t"keep": 1,\n\t"mcpServers": {}\n}\n', "\t"),
        ('{\n\t\t"keep": 1,\n\t\t"mcpServers": {}\n}\n', "\t\t"),
        ('{\n"keep": 1,\n"mcpServers": {}\n}\n', 2),
        ('{"keep": 1, "mcpServers": {}}', 2),
        ("", 2),
    ],
    ids=["four", "three", "tab", "two-tabs", "none", "one-line", "empty"],
)
def test_a_json_file_is_written_with_the_indentation_it_has(
    shop: Repo, db_path: Path, before: str, indent: int | str
) -> None:
    """The first indented line after the first gives the indentation (spaces or tabs; a
    file not indented gets two spaces)."""
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(before)
    assert run_setup(db_path, "cursor")[0] == 0
    data = json.loads(before or "{}")
    data.setdefault("mcpServers", {})["explomemo"] = cursor_server(db_path)
    assert path.read_text() == json.dumps(data, indent=indent) + "\n"


def test_a_line_that_starts_with_a_carriage_return_gives_no_indentation(
    shop: Repo, db_path: Path
) -> None:
    """JSON's whitespace holds the carriage return, but only spaces and tabs indent: a line
    that starts with one (LF CR line breaks) is passed over for the next."""
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    before = '{\n\r "keep": 1,\n    "mcpServers": {}\n}\n'
    path.write_bytes(before.encode())
    assert run_setup(db_path, "cursor")[0] == 0
    data = json.loads(before)
    data["mcpServers"]["explomemo"] = cursor_server(db_path)
    assert path.read_text() == json.dumps(data, indent=4) + "\n"


@pytest.mark.parametrize("inside", ["X", "   b"], ids=["letter", "spaces"])
def test_a_line_break_inside_a_json_string_gives_no_indentation(
    shop: Repo, db_path: Path, inside: str
) -> None:
    """U+2028 inside a string ends a line for str.splitlines, not for JSON: what follows it
    (a letter, or spaces that look like an indent) starts no line, so the file, on one line,
    gets two spaces."""
    path = shop.path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    before = '{"keep": "a\u2028' + inside + '", "mcpServers": {}}\n'
    path.write_text(before, encoding="utf-8")
    assert run_setup(db_path, "cursor")[0] == 0
    data = json.loads(before)
    data["mcpServers"]["explomemo"] = cursor_server(db_path)
    after = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert path.read_text(encoding="utf-8") == after


# Codex ------------------------------------------------------------------------------


@pytest.mark.parametrize("before", [None, "", "\n"])
def test_codex_gets_a_config_toml_holding_only_the_server(
    shop: Repo, db_path: Path, before: str | None
) -> None:
    path = shop.path / ".codex" / "config.toml"
    if before is not None:
        path.parent.mkdir()
        path.write_text(before)
    code, out, _ = run_setup(db_path, "codex")
    assert code == 0 and out.splitlines()[-1] == CODEX_NOTE
    assert path.read_text() == (before or "") + (
        "[mcp_servers.explomemo]\n"
        f'command = "{EXPLOMEMO}"\n'
        'args = ["serve"]\n'
        "\n"
        "[mcp_servers.explomemo.env]\n"
        f'EXPLOMEMO_DB = "{db_path}"\n'
        'EXPLOMEMO_PROJECT = "shop"\n'
    )


def test_codex_mcp_servers_that_is_not_a_table_is_refused(shop: Repo, db_path: Path) -> None:
    path = shop.path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text("mcp_servers = 1\n")
    run = invoke_cli(["--db", str(db_path), "setup", "codex"])
    assert_one_error_line(
        run, f"mcp_servers in {path} is not a table: fix it; it was left as it is"
    )
    assert path.read_text() == "mcp_servers = 1\n"


# The dry run ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "last", ["# three   ", "# three X", "# three"], ids=["spaces", "x", "plain"]
)
def test_the_dry_run_prints_exactly_the_diff_setup_then_makes(
    shop: Repo, db_path: Path, last: str
) -> None:
    """Line for line, to the last character of the last line of the diff (here a line of
    the user's that ends in spaces or an X)."""
    path = shop.path / ".codex" / "config.toml"
    path.parent.mkdir()
    before = (
        "[mcp_servers.explomemo]\n"
        'command = "/old/explomemo"\n'
        'args = ["serve"]\n'
        "# one\n"
        f"{last}\n"
        "# four\n"
        "# five\n"
        "\n"
        "[mcp_servers.explomemo.env]\n"
        f'EXPLOMEMO_DB = "{db_path}"\n'
        'EXPLOMEMO_PROJECT = "shop"\n'
    )
    path.write_text(before)
    code, out, _ = run_setup(db_path, "codex", "--dry-run")
    assert code == 0 and path.read_text() == before
    assert run_setup(db_path, "codex")[0] == 0
    after = path.read_text()
    diff = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="a/.codex/config.toml",
        tofile="b/.codex/config.toml",
    )
    assert out == "".join(diff) + "dry run: nothing was written.\n"
    assert out.splitlines()[-2] == f" {last}"


@pytest.mark.parametrize(
    ("client", "folder", "name"),
    [("cursor", ".cursor", "mcp.json"), ("codex", ".codex", "config.toml")],
)
def test_a_link_out_of_the_project_is_refused_naming_the_file_it_would_change(
    shop: Repo, db_path: Path, tmp_path: Path, client: str, folder: str, name: str
) -> None:
    home = tmp_path / "home" / folder
    home.mkdir(parents=True)
    (shop.path / folder).symlink_to(home)
    line = assert_one_error_line(invoke_cli(["--db", str(db_path), "setup", client]))
    assert f"(to {home}): setup would change {home / name} there, not the project's" in line
    (shop.path / folder).unlink()
    (shop.path / folder).mkdir()
    (shop.path / folder / name).symlink_to(home / "mine")
    line = assert_one_error_line(invoke_cli(["--db", str(db_path), "setup", client]))
    assert f"setup would change {home / 'mine'} there, not the project's;" in line
    assert "replace the link with a file of the project" in line
