"""The CI gate: `stale --check` over a database or a committed export.

A misspelt `--project` is refused, not passed as "nothing stale"; an export
of memos recorded from different folders of one repository checks fresh
from the top of a clone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import (
    CliResult,
    Repo,
    assert_one_error_line,
    assert_skipped_line,
    cli_subprocess,
    git,
    hostile_clone,
    invoke_cli,
    open_cache,
)


@pytest.fixture
def two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """A database with a memo of project "api" and one of "web", and their export."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    db = tmp_path / "m.db"
    for project in ("api", "web"):
        record = ["--db", str(db), "record", "--project", project, "--root", str(root)]
        assert invoke_cli([*record, "--question", "q", "--conclusion", "c", "a.py"]).code == 0
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(export)]).code == 0
    return db, export


EXPORT = ".explomemo/memos.jsonl"


def _run(args: list[str], cwd: Path) -> CliResult:
    """The CLI in-process, run from ``cwd`` (mutation testing sees only the calls made in
    the test's own process); the first test also runs the check as a real command."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.delenv("PWD", raising=False)
        patch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
        result = invoke_cli(args)
    return CliResult(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def committed(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose committed export holds a memo recorded in ``src/`` and one
    recorded at the top; returns (the repository, a clone of it at another path)."""
    repo = Repo(tmp_path / "dev" / "proj")
    repo.write("src/auth.py", "def check(token):\n    return token\n")
    repo.write("README", "proj\n")
    repo.commit("code")
    db = str(tmp_path / "dev.db")
    record = ["--db", db, "record", "--project", "proj"]
    auth = ["--question", "how is auth wired?", "--conclusion", "c", "auth.py"]
    readme = ["--question", "what is the readme?", "--conclusion", "c", "README"]
    assert _run([*record, *auth], repo.path / "src").code == 0
    assert _run([*record, *readme], repo.path).code == 0
    assert _run(["--db", db, "export", "--project", "proj", "-o", EXPORT], repo.path).code == 0
    repo.commit("memos")
    clone = tmp_path / "ci" / "proj"
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    return repo.path, clone


def _export_with_src_as(clone: Path, value: object) -> Path:
    """A copy of the clone's export whose memo recorded in ``src/`` has ``value`` (any
    JSON value) as its ``root_in_repo``."""
    copy = clone / "edited.jsonl"
    field = f'"root_in_repo":{json.dumps(value)}'
    copy.write_text((clone / EXPORT).read_text().replace('"root_in_repo":"src"', field))
    return copy


LENGTH = "root_in_repo is not a folder path of 1 to 1,024 characters"


def _not_plain(value: str) -> str:
    return (
        f"root_in_repo {value!r} is not a plain folder path inside the work tree (no leading"
        " /, no . or .. parts, / separators; . for the top)"
    )


@pytest.mark.usefixtures("no_model")
def test_stale_check_refuses_a_project_the_database_does_not_hold(
    two_projects: tuple[Path, Path],
) -> None:
    db, _ = two_projects
    run = invoke_cli(["--db", str(db), "stale", "--project", "apj", "--check"])
    line = assert_one_error_line(run, "'apj'", f"database {db}", "'api', 'web'", "--project")
    assert run.out == "", line
    assert invoke_cli(["--db", str(db), "stale", "--project", "api", "--check"]).code == 0


@pytest.mark.usefixtures("no_model")
def test_stale_check_refuses_a_project_the_export_does_not_hold(
    two_projects: tuple[Path, Path],
) -> None:
    _, export = two_projects
    base = ["stale", "--from", str(export), "--check"]
    for shape in ([], ["--format", "json"], ["--format", "github"]):
        run = invoke_cli([*base, *shape, "--project", "apj"])
        assert_one_error_line(run, "'apj'", f"export file {export}", "'api', 'web'")
    root = str(export.parent / "proj")
    assert invoke_cli([*base, "--project", "web", "--root", root]).out == "The one memo is fresh.\n"


@pytest.mark.usefixtures("no_model")
def test_a_project_over_an_empty_source_is_refused_and_no_project_still_passes(
    tmp_path: Path,
) -> None:
    """An empty source with a named project is refused; without one, the report says there
    is nothing to check (exit 0), and a CI gate over nothing (``--check``) fails."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    db = tmp_path / "empty.db"
    open_cache(db).close()  # a database that exists and holds no memo
    run = invoke_cli(["stale", "--from", str(empty), "--project", "api", "--check"])
    assert_one_error_line(
        run, "'api'", f"export file {empty}", "holds none", f"export --project api -o {empty}"
    )
    run = invoke_cli(["--db", str(db), "stale", "--project", "api", "--check"])
    assert_one_error_line(run, "'api'", f"database {db}", "holds none", "--db")
    for source in (["stale", "--from", str(empty)], ["--db", str(db), "stale"]):
        run = invoke_cli(source)
        assert (run.code, run.out, run.err) == (0, "No memos to check.\n", "")
    run = invoke_cli(["stale", "--from", str(empty), "--check"])
    assert_one_error_line(run, f"export file {empty} holds no memo", "nothing to check")
    run = invoke_cli(["--db", str(db), "stale", "--check"])
    assert_one_error_line(run, f"database {db} holds no memo", "nothing to check", "--db")


# Memos recorded from different folders of one repository --------------------


def test_an_export_of_memos_from_two_folders_checks_fresh_in_a_clone(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clone = committed
    text = (clone / EXPORT).read_text()
    assert str(tmp_path) not in text  # still no absolute root
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line.get("root_in_repo") for line in lines] == ["src", None]
    check = ["stale", "--from", EXPORT, "--check"]
    run = _run(check, clone)
    assert (run.code, run.out) == (0, "All 2 memos are fresh.\n"), run
    done = cli_subprocess(check, cwd=clone)
    assert (done.returncode, done.stdout) == (0, "All 2 memos are fresh.\n"), done
    # From src/ the memo recorded there is found through the clone's top; the memo
    # recorded at the top has no folder in the export, and is checked against src/.
    run = _run(["stale", "--from", f"../{EXPORT}", "--format", "json"], clone / "src")
    assert [(e["id"], e["missing"]) for e in json.loads(run.out)["stale"]] == [(2, ["README"])]
    # From another folder, --root at the top does the same.
    run = _run(["stale", "--from", f"../{EXPORT}", "--check", "--root", str(clone)], clone / "src")
    assert (run.code, run.out) == (0, "All 2 memos are fresh.\n"), run
    # A change under src/ is flagged, and GitHub gets its path from the repository's top.
    (clone / "src" / "auth.py").write_text("def check(token):\n    return None\n")
    run = _run([*check, "--format", "github"], clone)
    assert run.code == 1, run
    assert run.out.startswith("::warning file=src/auth.py,line=2,"), run.out
    # A pull request's comment names it the same way.
    run = _run([*check, "--format", "markdown"], clone)
    assert "| 1 | proj | how is auth wired? | `src/auth.py` |  |" in run.out, run.out


def test_import_puts_each_memo_under_its_folder_and_exports_the_same_bytes(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clone = committed
    db = str(tmp_path / "ci.db")
    assert _run(["--db", db, "import", "--json", EXPORT], clone).code == 0
    listed = json.loads(_run(["--db", db, "list", "--json"], clone).out)
    assert [memo["root"] for memo in listed] == [str(clone / "src"), str(clone)]
    run = _run(["--db", db, "stale", "--check"], clone)
    assert (run.code, run.out) == (0, "All 2 memos are fresh.\n"), run
    again = _run(["--db", db, "export", "--project", "proj"], clone)
    assert again.out == (clone / EXPORT).read_text()


def test_an_export_line_without_the_field_is_checked_against_the_checking_root(
    committed: tuple[Path, Path],
) -> None:
    _, clone = committed
    old = clone / "old.jsonl"
    old.write_text((clone / EXPORT).read_text().replace(',"root_in_repo":"src"', ""))
    run = _run(["stale", "--from", "old.jsonl", "--format", "json"], clone)
    assert [(e["id"], e["missing"]) for e in json.loads(run.out)["stale"]] == [(1, ["auth.py"])]
    run = _run(["stale", "--from", "../old.jsonl", "--format", "json"], clone / "src")
    assert [(e["id"], e["missing"]) for e in json.loads(run.out)["stale"]] == [(2, ["README"])]


def test_outside_git_the_field_is_taken_from_the_checking_root(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clone = committed
    # Folder names ending in a space or an X: the containment check strips only "/".
    for name in ("tarball ", "tarballX"):
        plain = tmp_path / name
        shutil.copytree(clone, plain, ignore=shutil.ignore_patterns(".git"))
        run = _run(["stale", "--from", EXPORT, "--check"], plain)
        assert (run.code, run.out) == (0, "All 2 memos are fresh.\n"), (name, run)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        *((v, _not_plain(v)) for v in ("..", "../src", "/etc", "src/../src", "./src", "src/")),
        ("", LENGTH),
        (5, LENGTH),
        ("s" * 1025, LENGTH),
        ("src\x00", "root_in_repo holds a NUL byte or a lone surrogate"),
        ("src\ud800", "root_in_repo holds a NUL byte or a lone surrogate"),
    ],
)
def test_a_root_in_repo_that_is_not_a_plain_folder_is_refused(
    committed: tuple[Path, Path], value: object, reason: str
) -> None:
    """The line is named and skipped (never read under a root it does not name); the
    export's other memo is still checked and imported."""
    _, clone = committed
    bad = _export_with_src_as(clone, value)
    sentence = f"line 1 of {bad} is not an explomemo memo ({reason}); it was skipped"
    checked = _run(["stale", "--from", str(bad), "--check", "--format", "json"], clone)
    assert_skipped_line(checked, sentence)
    assert json.loads(checked.out)["checked"] == 1
    imported = _run(["--db", str(clone / "x.db"), "import", "--json", str(bad)], clone)
    assert_skipped_line(imported, sentence)
    listed = json.loads(_run(["--db", str(clone / "x.db"), "list", "--json"], clone).out)
    assert [memo["root"] for memo in listed] == [str(clone)]


def test_a_root_in_repo_at_the_length_limit_is_a_folder_to_look_for(
    committed: tuple[Path, Path],
) -> None:
    _, clone = committed
    long = _export_with_src_as(clone, "s" * 1024)
    run = _run(["stale", "--from", str(long), "--format", "json"], clone)
    assert [(e["id"], e["missing"]) for e in json.loads(run.out)["stale"]] == [(1, ["auth.py"])]


def test_an_export_made_from_another_folder_gives_the_same_bytes(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    """``root_in_repo`` is relative to the work tree's top, not to where export runs."""
    repo, _ = committed
    db = str(tmp_path / "dev.db")
    for cwd in (repo / "src", tmp_path):
        run = _run(["--db", db, "export", "--project", "proj"], cwd)
        assert run.out == (repo / EXPORT).read_text(), cwd


def test_a_root_in_repo_through_a_link_out_of_the_clone_is_refused(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, clone = committed
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "auth.py").write_text("secret\n")
    (clone / "out").symlink_to(outside)
    bad = _export_with_src_as(clone, "out")
    for args in (
        ["stale", "--from", str(bad), "--format", "github"],
        ["--db", str(clone / "x.db"), "import", "--json", str(bad)],
    ):
        assert_one_error_line(
            _run(args, clone),
            f"memo 1 of project 'proj' has root_in_repo 'out', which leads out of {clone}"
            " through a symbolic link: remove the link, or check the export from a clone"
            " without it",
        )


def test_a_folder_the_clone_lacks_makes_its_memos_files_missing(
    committed: tuple[Path, Path],
) -> None:
    _, clone = committed
    (clone / "src").rename(clone / "lib")
    run = _run(["stale", "--from", EXPORT, "--check", "--format", "json"], clone)
    assert run.code == 1, run
    assert [(e["id"], e["missing"]) for e in json.loads(run.out)["stale"]] == [(1, ["auth.py"])]


def test_import_below_the_top_puts_memos_under_the_clone_top(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    """An export whose every memo has a folder, imported from a subfolder: each memo
    goes under the clone's top, not under the folder the import ran in."""
    _, clone = committed
    only_src = clone / "src.jsonl"
    only_src.write_text((clone / EXPORT).read_text().splitlines()[0] + "\n")
    db = str(tmp_path / "sub.db")
    assert _run(["--db", db, "import", "--json", str(only_src)], clone / "src").code == 0
    listed = json.loads(_run(["--db", db, "list", "--json"], clone).out)
    assert [memo["root"] for memo in listed] == [str(clone / "src")]


def test_an_earlier_exports_root_gives_way_to_the_root_given(
    committed: tuple[Path, Path], tmp_path: Path
) -> None:
    """The absolute root of an earlier export's line is never used: the memo goes under
    --root when given, else the directory the import runs in."""
    _, clone = committed
    line = json.loads((clone / EXPORT).read_text().splitlines()[1])
    old = clone / "old.jsonl"
    old.write_text(json.dumps({**line, "root": str(tmp_path / "elsewhere")}) + "\n")
    (clone / "sub").mkdir()
    for given, root in ((["--root", str(clone / "sub")], str(clone / "sub")), ([], str(clone))):
        db = str(tmp_path / f"old{len(given)}.db")
        assert _run(["--db", db, "import", "--json", str(old), *given], clone).code == 0
        listed = json.loads(_run(["--db", db, "list", "--json"], clone).out)
        assert [memo["root"] for memo in listed] == [root]


def test_a_root_in_repo_of_dot_is_the_top_and_adds_no_folder_to_paths(
    committed: tuple[Path, Path],
) -> None:
    """A hand-written ``"root_in_repo": "."`` means the top: GitHub and the markdown
    table get ``README``, not ``./README``, and an import gives the top as root."""
    _, clone = committed
    lines = [json.loads(line) for line in (clone / EXPORT).read_text().splitlines()]
    lines[1]["root_in_repo"] = "."
    dot = clone / "dot.jsonl"
    dot.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (clone / "README").write_text("proj, changed\n")
    run = _run(["stale", "--from", "dot.jsonl", "--format", "github"], clone)
    assert run.out.startswith("::warning file=README,line=1,"), run.out
    run = _run(["stale", "--from", "dot.jsonl", "--format", "markdown"], clone)
    assert "| 2 | proj | what is the readme? | `README` |  |" in run.out, run.out
    db = str(clone / "dot.db")
    assert _run(["--db", db, "import", "--json", "../dot.jsonl"], clone / "src").code == 0
    listed = json.loads(_run(["--db", db, "list", "--json"], clone).out)
    assert [memo["root"] for memo in listed] == [str(clone / "src"), str(clone)]


def test_a_ci_gate_over_an_empty_export_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 4: ``stale --from EMPTY --check`` exited 0: an emptied export passed the gate."""
    clone = hostile_clone(tmp_path, {})
    monkeypatch.chdir(clone)
    (clone / "memos.jsonl").write_text("")
    result = invoke_cli(["stale", "--from", "memos.jsonl", "--check"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "explomemo: error: export file memos.jsonl holds no memo, so there is nothing to"
        " check: write it with explomemo export --project P -o memos.jsonl\n"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["stale", "--check"],
        ["stale"],
        ["list"],
        ["show", "1"],
        ["diff", "1"],
        ["export"],
        ["recall", "--project", "p", "how are retries done?"],
    ],
)
def test_a_read_only_command_on_a_misspelt_database_fails_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Finding 4: ``stale --check`` with a misspelt ``--db`` exited 0 and created that
    database (so did ``show``; and ``recall``, found by the replay of real sessions)."""
    monkeypatch.chdir(tmp_path)
    misspelt = tmp_path / "memso.db"
    result = invoke_cli(["--db", str(misspelt), *command])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"explomemo: error: there is no database at {misspelt}: check the path (--db,"
        " $EXPLOMEMO_DB), or record a memo first, which creates it\n"
    )
    assert list(tmp_path.glob("memso.db*")) == []


def test_a_read_only_command_refuses_a_dangling_link_as_its_database(tmp_path: Path) -> None:
    """A second reader's finding: ``--db`` naming a link to a file that does not exist
    passed the check (the link exists) and the database was created where it led."""
    (tmp_path / "link.db").symlink_to(tmp_path / "target.db")
    result = invoke_cli(["--db", str(tmp_path / "link.db"), "list"])
    assert result.exit_code == 2, result.output
    assert "there is no database at" in result.stderr
    assert not (tmp_path / "target.db").exists()
