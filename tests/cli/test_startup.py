"""Start-up: the short commands import nothing heavy (their import budget)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import seed

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
        ["stats"],
        ["stats", "--json"],
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
                "import sys, explomemo.clients.hooks.run; print(sorted(sys.modules))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "explomemo.shapes" not in modules and "explomemo.memos.cache" not in modules


def _delegate_probe(db_path: Path, tree: Path, prompt: str) -> tuple[str, list[str]]:
    """Run the delegate hook on a delegation of ``prompt`` in a new process, the model
    allowed; its stdout and the heavy packages it imported."""
    probe = (
        "import sys\n"
        "from explomemo.cli.main import main\n"
        f"code = main(['--db', {str(db_path)!r}, 'hook', 'delegate', '--project', 'alpha'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'fastembed', 'onnxruntime',"
        " 'numpy', 'tokenizers', 'mcp', 'pydantic'})\n"
        "print(code, heavy, file=sys.stderr)\n"
    )
    hook_input = {
        "cwd": str(tree),
        "tool_name": "Agent",
        "tool_input": {"description": "explore", "prompt": prompt, "subagent_type": "Explore"},
        "transcript_path": str(tree / "none.jsonl"),
    }
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "on"},
    )
    *said, last = done.stderr.splitlines()
    assert said == [] and last.startswith("0 "), done.stderr
    return done.stdout, ast.literal_eval(last[2:])


def test_the_delegate_hook_imports_the_model_only_when_a_memo_comes_near(
    db_path: Path, tree: Path
) -> None:
    """The one exception of docs/design.md's start-up rule: no memo near the delegated
    prompt by words, no numpy and no onnxruntime (nor fastembed, ever)."""
    seed(db_path, tree)
    unrelated = "Explore the billing code and report where refunds and invoices are defined."
    assert _delegate_probe(db_path, tree, unrelated) == ("", [])
    near = "How do A and B relate, and where is each defined?"
    _, heavy = _delegate_probe(db_path, tree, near)
    assert heavy == ["numpy", "onnxruntime", "tokenizers"]


def test_tables_are_drawn_without_rich(db_path: Path, tree: Path, no_model: None) -> None:
    seed(db_path, tree)
    (tree / "pkg" / "b.py").write_text("changed")
    table = _probe(db_path, ["stale"])
    assert table.splitlines()[0].split() == ["id", "project", "question", "changed", "missing"]
    assert "pkg/b.py" in table and table.endswith("2 of 3 memos are stale.\n")
    listed = _probe(db_path, ["list"])
    assert listed.splitlines()[0].split() == [
        "id",
        "project",
        "question",
        "origin",
        "files",
        "recorded_at",
    ]
    assert "How do A and B relate?" in listed
