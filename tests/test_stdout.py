"""Writing to standard output (stdout.py): a write that fails is one error line, said once."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import (
    _to,
    assert_one_error_line,
)


def _commands(db: Path, export: Path) -> list[list[str]]:
    return [
        ["--db", str(db), "list"],
        ["--db", str(db), "recall", "--json", "q", "--project", "p", "--root", str(export.parent)],
        ["stale", "--from", str(export), "--check"],
        ["--db", str(db), "setup", "claude-code", "--dry-run"],
        ["--db", str(db), "export"],
    ]


# A standard output that cannot be written -----------------------------------


def test_a_full_standard_output_is_one_error_line(one_memo: tuple[Path, Path]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    with open("/dev/full", "w") as full:
        for args in _commands(db, export):
            # stale --check must not read as "stale found" (1) nor "all fresh" (0).
            run = _to(full, args, export.parent)
            assert_one_error_line(run, "standard output", "No space left on device")


def test_a_reader_that_left_is_not_an_error_message(one_memo: tuple[Path, Path]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    for args in _commands(db, export):
        read, write = os.pipe()
        os.close(read)  # as `| head` does once it has what it wants
        try:
            run = _to(write, args, export.parent)
        finally:
            os.close(write)
        assert (run.code, run.err) == (2, ""), args
