"""Memo text in people's formats: it never drives a terminal or a CI runner.

Memo text comes from agents (which a repository's content can steer) and from
imported files. Every human format escapes control characters; JSON keeps
every value exact; no format but ``--format github`` can put a workflow
command at the start of a line, and ``--format github`` stays well formed.
"""

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
from markdown_it import MarkdownIt
from reliability_helpers import EMBEDDINGS_OFF, open_cache, run_cli

from explomemo.printable import one_line

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


@pytest.mark.timeout(120)
def test_memo_text_never_reaches_a_terminal_raw(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / PATH).write_text("x = 1\n")
    db = tmp_path / "memos.db"
    memo_id = _record(db, root)
    (root / PATH).write_text("x = 2\n")  # stale, so stale reports show it
    export = tmp_path / "memos.jsonl"
    assert run_cli_quiet(["--db", str(db), "export", "-o", str(export)]) == 0
    shown: dict[str, bytes] = {}
    for name, args in {
        "show": ["show", str(memo_id)],
        "recall": ["recall", "--project", PROJECT, "--root", str(root), "auth wired"],
        "list": ["list"],
        "stale-table": ["stale"],
        "stale-markdown": ["stale", "--format", "markdown"],
        "stale-github": ["stale", "--format", "github"],
        "stale-from": ["stale", "--from", str(export), "--root", str(root)],
        "error-line": ["import", str(tmp_path / f"missing{OSC52}.jsonl")],
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


def run_cli_quiet(args: list[str]) -> int:
    from explomemo.cli.main import main

    return main(args)


# Workflow commands -----------------------------------------------------------

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


@pytest.mark.timeout(60)
def test_no_human_format_starts_a_workflow_command(
    hostile_db: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
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
        run = run_cli(capsys, ["--db", str(db), *args])
        assert run.code == 0, (name, run.err)
        for line in _dotnet_lines(run.out):
            assert not line.startswith("::"), (name, line, run.out)
            assert "##[" not in line, (name, line)
        if name.startswith("recall"):
            assert "conclusion" in run.out, run.out  # the memo was found and shown


@pytest.mark.timeout(60)
def test_github_format_stays_one_annotation_per_file(
    hostile_db: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _, ids = hostile_db
    run = run_cli(capsys, ["--db", str(db), "stale", "--format", "github"])
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
    run = run_cli(capsys, ["--db", str(db), "stale", "--format", "markdown"])
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
