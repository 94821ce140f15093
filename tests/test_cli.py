"""The command line: every command, formats, exit codes, one-line errors, fast start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke_cli

from explomemo.cli.main import main


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "pkg" / "b.py").write_text("B = 2\n")
    return root


def run(db: Path, *args: str) -> tuple[int, str, str]:
    result = invoke_cli(["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def seed(db: Path, root: Path) -> None:
    for project, question, files in [
        ("beta", "Where is B defined?", ["pkg/b.py"]),
        ("alpha", "Where is A defined?", ["pkg/a.py"]),
        ("alpha", "How do A and B relate?", ["pkg/a.py", "pkg/b.py"]),
    ]:
        code, _, err = run(
            db,
            "record",
            "--project",
            project,
            "--root",
            str(root),
            "--question",
            question,
            "--conclusion",
            f"answer to {question}",
            *files,
        )
        assert code == 0, err


def test_list_show_forget(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    code, out, _ = run(db_path, "list", "--json")
    listed = json.loads(out)
    assert [(m["id"], m["project"], m["files"]) for m in listed] == [
        (2, "alpha", 1),
        (3, "alpha", 2),
        (1, "beta", 1),
    ]
    code, out, _ = run(db_path, "list", "--project", "beta")
    assert code == 0 and "Where is B defined?" in out and "alpha" not in out
    (tree / "pkg" / "b.py").write_text("B = 3\n")
    code, out, _ = run(db_path, "show", "3")
    assert code == 0
    assert "memo 3 [stale]" in out and "changed   pkg/b.py" in out and "unchanged pkg/a.py" in out
    code, out, _ = run(db_path, "show", "3", "--json")
    assert json.loads(out)["status"] == "stale"
    code, out, _ = run(db_path, "forget", "3")
    assert code == 0 and json.loads(out) == {"forgotten": True, "id": 3, "project": "alpha"}
    code, out, err = run(db_path, "forget", "3")
    assert code == 2 and out == ""
    assert err.startswith("explomemo: error: no memo with id 3: list the ids with explomemo list")
    assert err.count("\n") == 1


def test_recall_readable_and_json(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    code, out, _ = run(db_path, "recall", "--project", "alpha", "--root", str(tree), "relate A B")
    assert code == 0 and out.startswith("#3 [fresh] How do A and B relate?")
    assert "found by words only" in out
    code, out, _ = run(
        db_path,
        "recall",
        "--project",
        "alpha",
        "--root",
        str(tree),
        "--json",
        "--limit",
        "1",
        "defined",
    )
    result = json.loads(out)
    assert result["query"] == "defined" and len(result["matches"]) == 1


def test_recall_fresh_only_says_stale_memos_were_left_out(
    db_path: Path, tree: Path, no_model: None
) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "b.py").write_text("B = 3\n")  # memo 3 (A and B) is stale now
    ask = ["recall", "--project", "alpha", "--root", str(tree), "--fresh-only"]
    code, out, _ = run(db_path, *ask, "relate A B")
    assert code == 0
    assert out == (
        "No fresh memo of 'alpha' matches 'relate A B'; 1 stale memo matched and was left out"
        " (--fresh-only): recall without --fresh-only to see what changed since.\n"
    )
    code, out, _ = run(db_path, *ask, "--json", "relate A B")
    assert json.loads(out)["stale_left_out"] == 1
    # A fresh match comes back, with a note of the stale one left out.
    code, out, _ = run(db_path, *ask, "where is A defined, how do A and B relate")
    assert out.startswith("#2 [fresh] Where is A defined?"), out
    assert out.endswith("(1 stale memo also matched, left out by --fresh-only)\n"), out
    # Nothing matched at all: said as before, and no count in the JSON.
    code, out, _ = run(db_path, *ask, "unrelated words entirely")
    assert out == "No memo of 'alpha' matches 'unrelated words entirely'.\n"
    code, out, _ = run(db_path, *ask[:-1], "--json", "relate A B")
    assert "stale_left_out" not in json.loads(out)


def test_stale_formats_and_check(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "a.py").unlink()
    code, out, _ = run(db_path, "stale", "--format", "markdown", "--check")
    assert code == 1
    assert out.splitlines()[0] == "**2 of 3 explomemo memos are stale.**"
    assert "| 2 | alpha | Where is A defined? |  | `pkg/a.py` |" in out
    code, out, _ = run(db_path, "stale", "--project", "beta", "--check", "--format", "json")
    assert code == 0 and json.loads(out) == {"checked": 1, "stale": []}
    code, out, _ = run(db_path, "stale", "--format", "table")
    assert code == 0 and "2 of 3 memos are stale." in out


def test_export_is_deterministic_and_import_round_trips(
    db_path: Path, tree: Path, tmp_path: Path, no_model: None
) -> None:
    seed(db_path, tree)
    run(db_path, "forget", "1")
    first = tmp_path / "one.jsonl"
    assert run(db_path, "export", "-o", str(first))[0] == 0
    code, out, _ = run(db_path, "export")
    assert out == first.read_text()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(m["project"], m["id"]) for m in lines] == [("alpha", 2), ("alpha", 3)]
    other = tmp_path / "other.db"
    # Imported at the recorded root (outside git): imported at the working
    # directory, the memos would carry where that lies in its repository.
    code, out, _ = run(other, "import", str(first), "--root", str(tree))
    assert code == 0 and json.loads(out) == {"read": 2, "added": 2, "replaced": 0, "kept": 2 - 2}
    assert run(other, "export")[1] == first.read_text()
    # Importing again keeps what is there (same age); a newer memo replaces it.
    newer = lines[0] | {"conclusion": "revised", "recorded_at": "2099-01-01T00:00:00Z"}
    update = tmp_path / "newer.jsonl"
    update.write_text(json.dumps(newer) + "\n" + json.dumps(lines[1]) + "\n")
    code, out, _ = run(other, "import", str(update))
    assert json.loads(out) == {"read": 2, "added": 0, "replaced": 1, "kept": 1}
    code, out, _ = run(other, "show", "2", "--json")
    assert json.loads(out)["conclusion"] == "revised"


def test_bad_export_file_is_one_line_exit_2(tmp_path: Path, no_model: None) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    code, out, err = run(tmp_path / "x.db", "stale", "--from", str(bad))
    assert code == 2 and out == ""
    assert err.startswith(f"explomemo: error: line 1 of {bad} is not an explomemo memo")
    assert err.count("\n") == 1
    code, _, err = run(tmp_path / "x.db", "import", str(tmp_path / "nope.jsonl"))
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


#: What the short commands leave out of their start-up, besides the heavy packages:
#: dataclasses (and inspect with it), Rich, and the modules only recall, record
#: or a diff need (each measured at a tenth of a short command's start-up or more).
START_UP_GUARD = {
    "dataclasses",
    "inspect",
    "rich",
    "hashlib",
    "logging",
    "explomemo.recall.search",
    "explomemo.recall.vectors",
    "explomemo.changes.snapshots",
    "explomemo.changes.diffs",
    "explomemo.changes.gitrepo",
    "explomemo.recall.embeddings",
}


def _probe(db_path: Path, args: list[str], hook_input: dict[str, Any] | None = None) -> str:
    """Run the CLI in a new process; its exit code and the guarded modules it imported."""
    probe = (
        "import sys\n"
        "from explomemo.cli.main import main\n"
        f"code = main(['--db', {str(db_path)!r}, *{args!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in"
        " {'fastembed', 'onnxruntime', 'mcp', 'tokenizers', 'sqlite_utils', 'numpy', 'pydantic',"
        f" 'click'}} or m in {sorted(START_UP_GUARD)!r})\n"
        "print(code, heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(hook_input or {}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr.splitlines()[-1] == "0 []", done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["stale"],
        ["stale", "--format", "json"],
        ["list"],
        ["list", "--json"],
        ["show", "1"],
        ["show", "1", "--json"],
        ["hook", "session-start"],
        ["hook", "prompt"],
        ["hook", "stop"],
    ],
)
def test_fast_commands_do_not_import_heavy_packages(
    db_path: Path, tree: Path, tmp_path: Path, no_model: None, command: list[str]
) -> None:
    seed(db_path, tree)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type": "user", "message": {"content": "hi"}}\n')
    hook_input = {
        "cwd": str(tree),
        "prompt": "where is A defined?",
        "transcript_path": str(transcript),
        "stop_hook_active": False,
    }
    args = [*command, "--project", "alpha"] if command[0] == "hook" else command
    out = _probe(db_path, args, hook_input)
    if command == ["hook", "prompt"]:
        assert "A = 1" not in out and "Where is A defined?" in out
    if command[0] == "hook":
        # The hooks print no result shape: they do not even import them.
        modules = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, explomemo.clients.hooks; print(sorted(sys.modules))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "explomemo.shapes" not in modules and "explomemo.memos.cache" not in modules


def test_tables_are_drawn_without_rich(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "b.py").write_text("changed")
    table = _probe(db_path, ["stale"])
    assert table.splitlines()[0].split() == ["id", "project", "question", "changed", "missing"]
    assert "pkg/b.py" in table and table.endswith("2 of 3 memos are stale.\n")
    listed = _probe(db_path, ["list"])
    assert listed.splitlines()[0].split() == ["id", "project", "question", "files", "recorded_at"]
    assert "How do A and B relate?" in listed


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
    import asyncio

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


# Tables at the terminal's width ---------------------------------------------------


def _on_terminal(args: list[str], columns: int, env: dict[str, str]) -> str:
    """What ``explomemo ARGS`` prints on a pseudo-terminal ``columns`` cells wide."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    with subprocess.Popen(
        [sys.executable, "-m", "explomemo", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proc:
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_tables_take_the_terminal_s_width(db_path: Path, tree: Path, no_model: None) -> None:
    """On a 60-column terminal `list` and `stale` fit in 60 columns, laid out as Rich lays
    them out at 60; $COLUMNS wins over the terminal; through a pipe (a CI log) the width
    stays 120."""
    from explomemo.cli.report import list_table, stale_table
    from explomemo.cli.tables import _rich

    seed(db_path, tree)
    long = "How does the retry policy of the HTTP client decide when to give up? " * 2
    code, _, err = run(
        db_path,
        "record",
        "--project",
        "alpha",
        "--root",
        str(tree),
        "--question",
        long,
        "--conclusion",
        "c",
        "pkg/a.py",
    )
    assert code == 0, err
    (tree / "pkg" / "b.py").write_text("B = 3\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["EXPLOMEMO_EMBEDDINGS"] = "off"
    args = ["--db", str(db_path)]
    memos = json.loads(run(db_path, "list", "--json")[1])
    from explomemo.shapes import MemoSummary, StaleEntry, StaleReport

    summaries = [MemoSummary(**m) for m in memos]
    shown = _on_terminal([*args, "list"], 60, env)
    assert shown == list_table(summaries, 60) + "\n"
    assert (
        max(map(len, shown.splitlines())) <= 60 < max(map(len, list_table(summaries).splitlines()))
    )
    report = json.loads(run(db_path, "stale", "--format", "json")[1])
    stale = StaleReport(
        checked=report["checked"], stale=[StaleEntry(**entry) for entry in report["stale"]]
    )
    shown = _on_terminal([*args, "stale"], 60, env)
    assert shown == stale_table(stale, 60) + "\n"
    assert max(map(len, shown.splitlines())) <= 60
    # The layout here is Rich's at that width.
    headers = ("id", "project", "question", "files", "recorded_at")
    rows = [[str(m.id), m.project, m.question, str(m.files), m.recorded_at] for m in summaries]
    assert list_table(summaries, 60) == _rich(headers, rows, 60)
    # $COLUMNS, as Rich and shutil read it, wins over the terminal's own width.
    assert (
        _on_terminal([*args, "list"], 60, {**env, "COLUMNS": "45"})
        == list_table(summaries, 45) + "\n"
    )
    # A $COLUMNS too long to be a width is ignored; a terminal narrower than a table
    # can be read at gets the narrowest table, which the terminal wraps.
    huge = "9" * 5000
    shown = _on_terminal([*args, "list"], 60, {**env, "COLUMNS": huge})
    assert shown == list_table(summaries, 60) + "\n"
    assert _on_terminal([*args, "list"], 5, env) == list_table(summaries, 40) + "\n"
    # Not a terminal: the fixed width, whatever $COLUMNS says.
    piped = subprocess.run(
        [sys.executable, "-m", "explomemo", *args, "list"],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "45"},
        check=True,
        timeout=60,
    )
    assert piped.stdout == list_table(summaries) + "\n"


def test_diff_is_coloured_only_on_a_terminal_that_takes_colour(
    db_path: Path, tree: Path, no_model: None
) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "b.py").write_text("B = 3\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    args = ["--db", str(db_path), "diff", "1"]
    assert "\x1b[31m-B = 2" in _on_terminal(args, 80, {**env, "TERM": "xterm-256color"})
    for plain in ({**env, "TERM": "dumb"}, {**env, "TERM": "xterm", "NO_COLOR": "1"}):
        shown = _on_terminal(args, 80, plain)
        assert "-B = 2\n+B = 3" in shown and "\x1b" not in shown, shown
