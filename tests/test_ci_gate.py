"""The CI gate: `stale --check` over a database or a committed export.

A misspelt `--project` is refused, not passed as "nothing stale"; an export
of memos recorded from different folders of one repository checks fresh
from the top of a clone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import invoke_cli
from reliability_helpers import CliRun, assert_one_error_line


def _cli(*args: str) -> CliRun:
    result = invoke_cli(list(args))
    return CliRun(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """A database with a memo of project "api" and one of "web", and their export."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    db = tmp_path / "m.db"
    for project in ("api", "web"):
        record = ["--db", str(db), "record", "--project", project, "--root", str(root)]
        assert _cli(*record, "--question", "q", "--conclusion", "c", "a.py").code == 0
    export = tmp_path / "memos.jsonl"
    assert _cli("--db", str(db), "export", "-o", str(export)).code == 0
    return db, export


@pytest.mark.usefixtures("no_model")
def test_stale_check_refuses_a_project_the_database_does_not_hold(
    two_projects: tuple[Path, Path],
) -> None:
    db, _ = two_projects
    run = _cli("--db", str(db), "stale", "--project", "apj", "--check")
    line = assert_one_error_line(run, "'apj'", f"database {db}", "'api', 'web'", "--project")
    assert run.out == "", line
    assert _cli("--db", str(db), "stale", "--project", "api", "--check").code == 0


@pytest.mark.usefixtures("no_model")
def test_stale_check_refuses_a_project_the_export_does_not_hold(
    two_projects: tuple[Path, Path],
) -> None:
    _, export = two_projects
    base = ["stale", "--from", str(export), "--check"]
    for shape in ([], ["--format", "json"], ["--format", "github"]):
        run = _cli(*base, *shape, "--project", "apj")
        assert_one_error_line(run, "'apj'", f"export file {export}", "'api', 'web'")
    root = str(export.parent / "proj")
    assert _cli(*base, "--project", "web", "--root", root).out == "The one memo is fresh.\n"


@pytest.mark.usefixtures("no_model")
def test_a_project_over_an_empty_source_is_refused_and_no_project_still_passes(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    db = tmp_path / "empty.db"
    run = _cli("stale", "--from", str(empty), "--project", "api", "--check")
    assert_one_error_line(
        run, "'api'", f"export file {empty}", "holds none", f"export --project api -o {empty}"
    )
    run = _cli("--db", str(db), "stale", "--project", "api", "--check")
    assert_one_error_line(run, "'api'", f"database {db}", "holds none", "--db")
    for source in (["stale", "--from", str(empty)], ["--db", str(db), "stale"]):
        run = _cli(*source, "--check")
        assert (run.code, run.out, run.err) == (0, "No memos to check.\n", "")
