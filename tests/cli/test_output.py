"""What the CLI prints (cli/report.py): memo text in people's formats never drives a terminal or a
CI runner; tables take the terminal's width; colour only where it is taken; counts read right."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    EMBEDDINGS_OFF,
    _to,
    invoke_cli,
    open_cache,
    seed,
)
from markdown_it import MarkdownIt

from explomemo.printable import one_line


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


#: Sequences a terminal acts on: an OSC 52 clipboard write, a window title,
#: clear-screen, the same through 8-bit C1 controls, a bell, a carriage return
#: that redraws the line, DEL, and a right-to-left override.
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"


TITLE = "\x1b]0;pwned\x1b\\"


CLEAR = "\x1b[2J\x1b[H"


C1 = "\x9b2J\x9d0;c1 title\x9c"


TRAPS = OSC52 + TITLE + CLEAR + C1 + "\x07\x7f\u202e"


QUESTION = f"how is auth{TRAPS} wired?\rfake question"


CONCLUSION = f"line one {OSC52}\nline two {CLEAR}\r\u2028{C1}"


PROJECT = f"proj{TITLE}"


PATH = f"mod{CLEAR}.py"


#: What the kernel's terminal driver and our own formats may put on a terminal.
RAW_TERMINAL_CODES = re.compile(
    rb"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
    rb"|\r(?!\n)"
)


def _record(db: Path, root: Path, **texts: str) -> int:
    with open_cache(db) as cache:
        return cache.record(
            question=texts.get("question", QUESTION),
            conclusion=texts.get("conclusion", CONCLUSION),
            project=texts.get("project", PROJECT),
            files=[texts.get("path", PATH)],
            root=str(root),
        ).id


def _on_a_terminal(args: list[str], cwd: Path) -> bytes:
    """What a terminal receives from ``explomemo ARGS`` on stdout, then its stderr.

    stderr is a pipe, so no progress bar (drawn on a terminal's stderr when a
    check takes a while) mixes its own escape codes in; error lines are the
    same on a terminal and off one.
    """
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "explomemo", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **EMBEDDINGS_OFF, "TERM": "xterm-256color", "COLUMNS": "120"},
        )
    finally:
        os.close(slave)
    received = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"explomemo {args} wrote nothing for 60 s"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal's slave side is closed
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
        _, err = proc.communicate(timeout=60)
    return received + err


#: Memo text that a GitHub Actions runner would run as workflow commands if it
#: began a line of the log (after leading white space), or held ``##[``.
COMMANDS = [
    "\n::add-mask::hunter2",
    "\r::error title=forged::from a question",
    "\n   ::stop-commands::tok",
    "\u2028::warning::separator",
    "\x85::notice::next line",
    "\u00a0::debug::nbsp",
    "x ##[error]legacy syntax anywhere",
]


NASTY_PATHS = [
    "a\n::add-mask::p.py",
    "b\r::error::p.py",
    "c`tick``s`.py",
    "`d`",
    "e|pipe.py",
    "f ##[error]g.py",
]


def _dotnet_lines(text: str) -> list[str]:
    """The lines a runner reads (.NET ReadLine: \\r, \\n or \\r\\n end a line), trimmed
    of leading white space as ``String.TrimStart`` does."""
    return [line.lstrip() for line in re.split(r"\r\n|\r|\n", text)]


@pytest.fixture
def hostile_db(tmp_path: Path) -> tuple[Path, Path, list[int]]:
    root = tmp_path / "root"
    root.mkdir()
    db = tmp_path / "memos.db"
    ids: list[int] = []
    for number, (command, path) in enumerate(zip(COMMANDS, NASTY_PATHS * 2, strict=False)):
        (root / path).write_text("v1\n")
        ids.append(
            _record(
                db,
                root,
                question=f"question {number} {command}",
                conclusion=f"conclusion {number}{command}\n::set-output name=x::y",
                project=f"project{command}",
                path=path,
            )
        )
    for path in NASTY_PATHS:
        (root / path).write_text("v2\n")  # every memo is stale
    return db, root, ids


# Tables at the terminal's width ---------------------------------------------------


def test_tables_take_the_terminal_s_width(db_path: Path, tree: Path, no_model: None) -> None:
    """On a 60-column terminal `list` and `stale` fit in 60 columns, laid out as Rich lays
    them out at 60; $COLUMNS wins over the terminal; through a pipe (a CI log) the width
    stays 120."""
    from explomemo.cli.report import list_table, stale_table
    from explomemo.cli.tables import _rich

    seed(db_path, tree)
    long = "How does the retry policy of the HTTP client decide when to give up? " * 2
    code, _, err = invoke_cli(
        [
            "--db",
            str(db_path),
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
        ],
    )
    assert code == 0, err
    (tree / "pkg" / "b.py").write_text("B = 3\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["EXPLOMEMO_EMBEDDINGS"] = "off"
    args = ["--db", str(db_path)]
    memos = json.loads(invoke_cli(["--db", str(db_path), "list", "--json"])[1])
    from explomemo.shapes import MemoSummary, StaleEntry, StaleReport

    summaries = [MemoSummary(**m) for m in memos]
    shown = _on_terminal([*args, "list"], 60, env)
    assert shown == list_table(summaries, 60) + "\n"
    assert (
        max(map(len, shown.splitlines())) <= 60 < max(map(len, list_table(summaries).splitlines()))
    )
    report = json.loads(invoke_cli(["--db", str(db_path), "stale", "--format", "json"])[1])
    stale = StaleReport(
        checked=report["checked"], stale=[StaleEntry(**entry) for entry in report["stale"]]
    )
    shown = _on_terminal([*args, "stale"], 60, env)
    assert shown == stale_table(stale, 60) + "\n"
    assert max(map(len, shown.splitlines())) <= 60
    # The layout here is Rich's at that width.
    headers = ("id", "project", "question", "origin", "files", "recorded_at")
    rows = [
        [str(m.id), m.project, m.question, m.origin, str(m.files), m.recorded_at] for m in summaries
    ]
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


# Nits: grammar, wording, positions ----------------------------------------------


def test_counts_of_zero_and_one_memo_read_right(one_memo: tuple[Path, Path]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    payload = json.dumps({"cwd": str(export.parent), "source": "startup"})
    args = ["--db", str(db), "hook", "session-start", "--project", "p"]
    hook = _to(subprocess.PIPE, args, export.parent, stdin=payload)
    context = json.loads(hook.out)["hookSpecificOutput"]["additionalContext"]
    assert "1 fresh memo of project 'p' (their files are unchanged" in context, context
    assert invoke_cli(["--db", str(db), "stale"]).out == "The one memo is fresh.\n"
    open_cache(db.with_name("empty.db")).close()
    empty = ["--db", str(db.with_name("empty.db")), "stale"]
    assert invoke_cli([*empty]).out == "No memos to check.\n"
    assert invoke_cli([*empty, "--format", "markdown"]).out == "No explomemo memos to check.\n"


def test_an_annotation_for_deleted_last_lines_points_inside_the_file(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    root = tmp_path / "proj"
    root.mkdir()
    source = root / "a.py"
    source.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    db = ["--db", str(tmp_path / "m.db")]
    record = ["record", "--project", "p", "--root", str(root), "--question", "q"]
    assert invoke_cli([*db, *record, "--conclusion", "c", "a.py"]).code == 0
    source.write_text("".join(f"line {n}\n" for n in range(1, 8)))
    run = invoke_cli([*db, "stale", "--format", "github"])
    assert "::warning file=a.py,line=7," in run.out, run.out
    source.write_text("")
    run = invoke_cli([*db, "stale", "--format", "github"])
    assert "::warning file=a.py,line=1," in run.out, run.out


@pytest.mark.timeout(120)
def test_memo_text_never_reaches_a_terminal_raw(tmp_path: Path) -> None:
    """Memo text comes from agents (which a repository can steer) and imported files: it must
    never drive a terminal or a CI runner."""
    root = tmp_path / "root"
    root.mkdir()
    (root / PATH).write_text("x = 1\n")
    db = tmp_path / "memos.db"
    memo_id = _record(db, root)
    (root / PATH).write_text("x = 2\n")  # stale, so stale reports show it
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(export)]).exit_code == 0
    shown: dict[str, bytes] = {}
    for name, args in {
        "show": ["show", str(memo_id)],
        "recall": ["recall", "--project", PROJECT, "--root", str(root), "auth wired"],
        "list": ["list"],
        "stale-table": ["stale"],
        "stale-markdown": ["stale", "--format", "markdown"],
        "stale-github": ["stale", "--format", "github"],
        "stale-from": ["stale", "--from", str(export), "--root", str(root)],
        "error-line": ["import", "--json", str(tmp_path / f"missing{OSC52}.jsonl")],
        "usage-error": [f"no-such-command{TITLE}"],
        "no-match": ["recall", "--project", PROJECT, f"zebra {OSC52}"],
    }.items():
        out = _on_a_terminal(["--db", str(db), *args], tmp_path)
        shown[name] = out
        assert not RAW_TERMINAL_CODES.findall(out), (name, out)
    # The text is shown, escaped, not dropped.
    assert b"\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown["show"]
    assert b"line one" in shown["show"] and b"\r\nline two" in shown["show"]
    assert b"\\x1b[2J" in shown["stale-table"] and b"\\x1b]0;pwned" in shown["list"]
    assert b"\\x9b2J" in shown["recall"] and b"\\u202e" in shown["show"]
    assert b"missing\\x1b]52" in shown["error-line"]
    # JSON stays exact: the same characters, as escapes a terminal does not act on.
    for args in (["list", "--json"], ["show", str(memo_id), "--json"]):
        out = _on_a_terminal(["--db", str(db), *args], tmp_path)
        assert not RAW_TERMINAL_CODES.findall(out.replace(b"\r\n", b"\n")), out
        data = json.loads(out.replace(b"\r\n", b"\n"))
        memo = data[0] if isinstance(data, list) else data
        assert (memo["question"], memo["project"]) == (QUESTION, PROJECT)
        if "conclusion" in memo:
            assert memo["conclusion"] == CONCLUSION
            assert memo["files"][0]["path"] == PATH


# Workflow commands -----------------------------------------------------------


@pytest.mark.timeout(60)
def test_no_human_format_starts_a_workflow_command(
    hostile_db: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Memo text comes from agents (which a repository can steer) and imported files: it must
    never drive a terminal or a CI runner."""
    db, root, ids = hostile_db
    outputs = {
        "stale-table": ["stale"],
        "stale-markdown": ["stale", "--format", "markdown"],
        "list": ["list"],
        **{f"show-{i}": ["show", str(i)] for i in ids},
    }
    for number, command in enumerate(COMMANDS):
        outputs[f"recall-{number}"] = [
            "recall",
            "--project",
            f"project{command}",
            "--root",
            str(root),
            f"question {number}",
        ]
    for name, args in outputs.items():
        run = invoke_cli(["--db", str(db), *args])
        assert run.code == 0, (name, run.err)
        for line in _dotnet_lines(run.out):
            assert not line.startswith("::"), (name, line, run.out)
            assert "##[" not in line, (name, line)
        if name.startswith("recall"):
            # The memo was found and shown (lean: its question and changed files; `show`
            # above prints each conclusion).
            assert f"question {name.removeprefix('recall-')}" in run.out, run.out


@pytest.mark.timeout(60)
def test_github_format_stays_one_annotation_per_file(
    hostile_db: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Memo text comes from agents (which a repository can steer) and imported files: it must
    never drive a terminal or a CI runner."""
    db, _, ids = hostile_db
    run = invoke_cli(["--db", str(db), "stale", "--format", "github"])
    lines = _dotnet_lines(run.out.rstrip("\n"))
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == len(ids), run.out
    assert all(line.startswith("::warning file=") for line in commands)
    assert lines[-1] == f"{len(ids)} of {len(ids)} memos are stale."
    assert len(lines) == len(ids) + 1, run.out
    assert not RAW_TERMINAL_CODES.findall(run.out.replace("\n", "").encode())


@pytest.mark.timeout(60)
def test_markdown_rows_and_code_spans_hold(
    hostile_db: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each stale memo is one table row of five cells; each path one code span, exact."""
    db, _, ids = hostile_db
    run = invoke_cli(["--db", str(db), "stale", "--format", "markdown"])
    tokens = MarkdownIt("commonmark").enable("table").parse(run.out)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 1 + len(ids)  # the header and one row per memo
    cells = [t for t in tokens if t.type in ("td_open", "th_open")]
    assert len(cells) == 5 * (1 + len(ids))
    spans = [c.content for t in tokens if t.children for c in t.children if c.type == "code_inline"]
    # A path holding "##[" cannot be a code span (no escape works inside one):
    # it is escaped text instead.
    in_spans = [p for p in (NASTY_PATHS * 2)[: len(ids)] if "##[" not in p]
    assert sorted(spans) == sorted(one_line(p) for p in in_spans)
    texts = "".join(c.content for t in tokens if t.children for c in t.children if c.type == "text")
    assert "question 6 x ##[error]legacy syntax anywhere" in texts
    assert "f ##[error]g.py" in texts
