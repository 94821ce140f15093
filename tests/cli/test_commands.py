"""The command line: every command, formats, exit codes, one-line errors, usage."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    assert_one_error_line,
    in_a_minute,
    invoke_cli,
    seed,
)

from explomemo.cli.main import main


def test_list_show_forget(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    code, out, _ = invoke_cli(["--db", str(db_path), "list", "--json"])
    listed = json.loads(out)
    assert [(m["id"], m["project"], m["files"]) for m in listed] == [
        (2, "alpha", 1),
        (3, "alpha", 2),
        (1, "beta", 1),
    ]
    code, out, _ = invoke_cli(["--db", str(db_path), "list", "--project", "beta"])
    assert code == 0 and "Where is B defined?" in out and "alpha" not in out
    (tree / "pkg" / "b.py").write_text("B = 3\n")
    code, out, _ = invoke_cli(["--db", str(db_path), "show", "3"])
    assert code == 0
    assert "memo 3 [stale]" in out and "changed   pkg/b.py" in out and "unchanged pkg/a.py" in out
    code, out, _ = invoke_cli(["--db", str(db_path), "show", "3", "--json"])
    assert json.loads(out)["status"] == "stale"
    code, out, _ = invoke_cli(["--db", str(db_path), "forget", "3"])
    assert code == 0 and json.loads(out) == {"forgotten": True, "id": 3, "project": "alpha"}
    code, out, err = invoke_cli(["--db", str(db_path), "forget", "3"])
    assert code == 2 and out == ""
    assert err.startswith("explomemo: error: no memo with id 3: list the ids with explomemo list")
    assert err.count("\n") == 1


def test_recall_readable_and_json(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    code, out, _ = invoke_cli(
        ["--db", str(db_path), "recall", "--project", "alpha", "--root", str(tree), "relate A B"]
    )
    assert code == 0 and out.startswith("#3 [fresh] How do A and B relate?")
    assert "found by words only" in out
    code, out, _ = invoke_cli(
        [
            "--db",
            str(db_path),
            "recall",
            "--project",
            "alpha",
            "--root",
            str(tree),
            "--json",
            "--limit",
            "1",
            "defined",
        ],
    )
    result = json.loads(out)
    assert result["query"] == "defined" and len(result["matches"]) == 1


def test_recall_fresh_only_says_stale_memos_were_left_out(
    db_path: Path, tree: Path, no_model: None
) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "b.py").write_text("B = 3\n")  # memo 3 (A and B) is stale now
    ask = ["recall", "--project", "alpha", "--root", str(tree), "--fresh-only"]
    code, out, _ = invoke_cli(["--db", str(db_path), *ask, "relate A B"])
    assert code == 0
    assert out == (
        "No fresh memo of 'alpha' matches 'relate A B'; 1 stale memo matched and was left out"
        " (--fresh-only): recall without --fresh-only to see what changed since.\n"
    )
    code, out, _ = invoke_cli(["--db", str(db_path), *ask, "--json", "relate A B"])
    assert json.loads(out)["stale_left_out"] == 1
    # A fresh match comes back, with a note of the stale one left out.
    code, out, _ = invoke_cli(
        ["--db", str(db_path), *ask, "where is A defined, how do A and B relate"]
    )
    assert out.startswith("#2 [fresh] Where is A defined?"), out
    assert out.endswith("(1 stale memo also matched, left out by --fresh-only)\n"), out
    # Nothing matched at all: said as before, and no count in the JSON.
    code, out, _ = invoke_cli(["--db", str(db_path), *ask, "unrelated words entirely"])
    assert out == "No memo of 'alpha' matches 'unrelated words entirely'.\n"
    code, out, _ = invoke_cli(["--db", str(db_path), *ask[:-1], "--json", "relate A B"])
    assert "stale_left_out" not in json.loads(out)


def test_stale_formats_and_check(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "a.py").unlink()
    code, out, _ = invoke_cli(["--db", str(db_path), "stale", "--format", "markdown", "--check"])
    assert code == 1
    assert out.splitlines()[0] == "**2 of 3 explomemo memos are stale.**"
    assert "| 2 | alpha | Where is A defined? |  | `pkg/a.py` |" in out
    code, out, _ = invoke_cli(
        ["--db", str(db_path), "stale", "--project", "beta", "--check", "--format", "json"]
    )
    assert code == 0 and json.loads(out) == {"checked": 1, "stale": []}
    code, out, _ = invoke_cli(["--db", str(db_path), "stale", "--format", "table"])
    assert code == 0 and "2 of 3 memos are stale." in out


def test_export_is_deterministic_and_import_round_trips(
    db_path: Path, tree: Path, tmp_path: Path, no_model: None
) -> None:
    seed(db_path, tree)
    invoke_cli(["--db", str(db_path), "forget", "1"])
    first = tmp_path / "one.jsonl"
    assert invoke_cli(["--db", str(db_path), "export", "-o", str(first)])[0] == 0
    code, out, _ = invoke_cli(["--db", str(db_path), "export"])
    assert out == first.read_text()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(m["project"], m["id"]) for m in lines] == [("alpha", 2), ("alpha", 3)]
    other = tmp_path / "other.db"
    # Imported at the recorded root (outside git): imported at the working
    # directory, the memos would carry where that lies in its repository.
    code, out, _ = invoke_cli(
        ["--db", str(other), "import", "--json", str(first), "--root", str(tree)]
    )
    assert code == 0 and json.loads(out) == {"read": 2, "added": 2, "replaced": 0, "kept": 2 - 2}
    assert invoke_cli(["--db", str(other), "export"])[1] == first.read_text()
    # Importing again keeps what is there (same age); a newer memo replaces it.
    newer = lines[0] | {"conclusion": "revised", "recorded_at": in_a_minute()}
    update = tmp_path / "newer.jsonl"
    update.write_text(json.dumps(newer) + "\n" + json.dumps(lines[1]) + "\n")
    code, out, _ = invoke_cli(["--db", str(other), "import", "--json", str(update)])
    assert json.loads(out) == {"read": 2, "added": 0, "replaced": 1, "kept": 1}
    code, out, _ = invoke_cli(["--db", str(other), "show", "2", "--json"])
    assert json.loads(out)["conclusion"] == "revised"


def test_bad_export_file_is_one_line_exit_2(tmp_path: Path, no_model: None) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    code, out, err = invoke_cli(["--db", str(tmp_path / "x.db"), "stale", "--from", str(bad)])
    assert code == 2 and out == ""
    assert err.startswith(f"explomemo: error: line 1 of {bad} is not an explomemo memo")
    assert err.count("\n") == 1
    code, _, err = invoke_cli(
        ["--db", str(tmp_path / "x.db"), "import", "--json", str(tmp_path / "nope.jsonl")]
    )
    assert code == 2 and "does not exist" in err


def test_usage_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    assert main(["stale", "--format", "xml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "invalid choice: 'xml'" in err and "explomemo stale --help" in err
    assert main(["record", "--project", "p"]) == 2
    err = capsys.readouterr().err
    assert "required: --question, --conclusion, FILE" in err and err.count("\n") == 1
    assert main(["nosuchcommand"]) == 2
    assert main(["--help"]) == 0


def test_main_exit_codes(
    db_path: Path, tree: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    seed(db_path, tree)
    assert main(["--db", str(db_path), "stale", "--check"]) == 0
    (tree / "pkg" / "b.py").write_text("changed")
    assert main(["--db", str(db_path), "stale", "--check"]) == 1
    assert main(["--db", str(db_path), "show", "99"]) == 2


# A leading ~ in the database path ------------------------------------------------


def test_a_leading_tilde_in_the_database_path_is_the_home_folder(
    tmp_path: Path, tree: Path, no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``EXPLOMEMO_DB=~/…`` (an MCP client's JSON env, no shell) and ``--db ~/…`` (an
    argument list, no shell) are the home folder, not a folder named ``~`` here."""
    import pwd

    from explomemo.store.database import database_path

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tree)
    record = ["record", "--project", "p", "--question", "q", "--conclusion", "c", "pkg/a.py"]
    monkeypatch.setenv("EXPLOMEMO_DB", "~/env/memos.db")
    assert main(record) == 0
    monkeypatch.delenv("EXPLOMEMO_DB")
    assert main(["--db", "~/arg/memos.db", *record]) == 0
    assert (home / "env" / "memos.db").is_file() and (home / "arg" / "memos.db").is_file()
    assert not (tree / "~").exists()
    # setup writes the expanded, absolute path into the client's configuration.
    result = invoke_cli(["--db", "~/arg/memos.db", "setup", "cursor", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert str(home / "arg" / "memos.db") in result.stdout and "/~/" not in result.stdout
    # ~user is that user's home; a ~ inside the path is a name like any other.
    user = pwd.getpwuid(os.getuid())
    assert database_path(f"~{user.pw_name}/m.db") == Path(user.pw_dir) / "m.db"
    assert database_path("data/~/m.db") == Path("data/~/m.db")


def test_the_server_expands_a_tilde_in_its_environment(tmp_path: Path, tree: Path) -> None:
    """As an MCP client starts it: ``EXPLOMEMO_DB`` from the JSON ``env``, the project
    folder as working directory, over stdio."""

    from mcp import Client, StdioServerParameters

    home = tmp_path / "home"
    home.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "explomemo", "serve"],
        cwd=tree,
        env={
            **os.environ,
            "HOME": str(home),
            "EXPLOMEMO_DB": "~/memos.db",
            "EXPLOMEMO_EMBEDDINGS": "off",
        },
    )

    async def story() -> Any:
        async with Client(params) as client:
            return await client.call_tool(
                "memory_exploration_record",
                {"question": "q", "conclusion": "c", "files": ["pkg/a.py"], "project": "p"},
            )

    result = asyncio.run(story())
    assert not result.is_error, result.content
    assert (home / "memos.db").is_file() and not (tree / "~").exists()


# The command line without a command -------------------------------------------


@pytest.mark.parametrize("args", [[], ["--db", "x.db"]])
def test_no_command_is_bad_usage(args: list[str]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    assert_one_error_line(invoke_cli([*args]), "required: COMMAND", "explomemo --help")


@pytest.mark.parametrize("args", [["--db", ""], ["--db", "", "list"], ["import", "--json", ""]])
def test_an_empty_path_is_bad_usage(args: list[str]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    assert_one_error_line(invoke_cli([*args]), "empty")


# --project of list and export --------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["export"]])
@pytest.mark.parametrize("project", ["", " ", "p" * 201])
def test_list_and_export_check_the_project_as_stale_does(
    one_memo: tuple[Path, Path], command: list[str], project: str
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, _ = one_memo
    stale = invoke_cli(["--db", str(db), "stale", "--project", project])
    expected = assert_one_error_line(stale, "project").replace("explomemo stale --help", "")
    run = invoke_cli(["--db", str(db), *command, "--project", project])
    assert assert_one_error_line(run).replace(f"explomemo {command[0]} --help", "") == expected
