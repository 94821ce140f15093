"""Inputs and outputs at the edges, met where users meet them (the CLI, a real server).

A folder where a file is expected, JSON nested past Python's recursion limit,
a working directory whose path is not UTF-8, a standard output that cannot be
written, paths longer than an export can carry: each is refused with one line
(exit 2), never a traceback, and a hook still exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke_cli
from reliability_helpers import (
    EMBEDDINGS_OFF,
    PYTHON,
    CliRun,
    RawServer,
    assert_one_error_line,
    assert_tool_refused,
    call_tools,
    call_tools_stdio,
    cli_subprocess,
)


def _cli(*args: str) -> CliRun:
    result = invoke_cli(list(args))
    return CliRun(result.exit_code, result.stdout, result.stderr)


# A folder where a file is expected ------------------------------------------


def test_an_export_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    assert_one_error_line(_cli("import", str(folder)), str(folder), "not a regular file")
    run = cli_subprocess(["stale", "--from", str(folder), "--check"], cwd=tmp_path)
    assert_one_error_line(
        CliRun(run.returncode, run.stdout, run.stderr), str(folder), "not a regular file"
    )


@pytest.mark.parametrize(
    ("given", "fragments"),
    [
        (".", ("'.' is root", "itself, a folder")),
        ("./", ("'./' is root", "itself, a folder")),
        ("pkg/..", ("'pkg/..' is root", "itself, a folder")),
        ("{root}", ("is root", "itself, a folder")),
        ("README/", ("'README/' ends with '/', so it names a folder, not a file",)),
        ("README/.", ("'README/.' ends with '/'",)),
        ("pkg/", ("'pkg/' ends with '/'",)),
        ("../outside/", ("is outside root",)),
    ],
)
def test_a_path_naming_a_folder_is_refused_for_what_it_is(
    tmp_path: Path, given: str, fragments: tuple[str, ...]
) -> None:
    """``record .`` is root itself, not "outside root"; ``record README/`` names a folder
    (the system refuses to open it), not the file README."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "README").write_text("read me\n")
    (root / "pkg" / "a.py").write_text("A = 1\n")
    db = str(tmp_path / "m.db")
    record = ["--db", db, "record", "--project", "p", "--root", str(root), "--question", "q"]
    run = _cli(*record, "--conclusion", "c", "pkg/a.py", given.format(root=root))
    assert_one_error_line(run, *fragments)
    assert _cli("--db", db, "list").out == "No memos.\n"


@pytest.mark.parametrize(
    ("client", "parts"),
    [
        ("claude-code", (".mcp.json",)),
        ("claude-code", (".claude", "settings.local.json")),
        ("cursor", (".cursor", "mcp.json")),
        ("codex", (".codex", "config.toml")),
    ],
)
def test_a_configuration_file_that_is_a_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, parts: tuple[str, ...]
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    folder = tmp_path.joinpath(*parts)
    folder.mkdir(parents=True)
    run = _cli("setup", client, "--root", str(tmp_path))
    assert_one_error_line(run, str(folder), "is a directory, not a regular file")
    assert folder.is_dir() and not any(folder.iterdir())


# JSON nested past Python's recursion limit ------------------------------------

DEEP = "[" * 100_000


def test_an_export_line_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP + "\n")
    # The test's folder is named after it: "nested" alone is in the path.
    expected = (f"line 1 of {deep} is not an explomemo memo (JSON nested too deeply)",)
    assert_one_error_line(_cli("import", str(deep)), *expected)
    run = cli_subprocess(["stale", "--from", str(deep), "--check"], cwd=tmp_path)
    assert_one_error_line(CliRun(run.returncode, run.stdout, run.stderr), *expected)


def test_a_configuration_file_nested_too_deeply_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text(DEEP)
    run = _cli("setup", "cursor", "--root", str(tmp_path))
    assert_one_error_line(run, f"{config} is not valid JSON (nested too deeply)")
    assert config.read_text() == DEEP


@pytest.mark.timeout(120)
def test_a_request_nested_too_deeply_gets_an_answer_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    with RawServer(tmp_path / "m.db", cwd=tmp_path) as server:
        # Past Python's recursion limit, and past only the SDK's parser's.
        for depth in (100_000, 300):
            arguments = b'{"project": ' + b"[" * depth + b"]" * depth + b"}"
            request = server.call_raw(arguments, "memory_exploration_stale")
            answer = server.answer(request, timeout=30)
            assert "result" in answer or "error" in answer, answer
            text = json.dumps(answer)
            assert "deeply" in text or "recursion" in text, text
        listed = server.answer(server.request("tools/list", {}), timeout=30)
        assert len(listed["result"]["tools"]) == 4
        code, err = server.close()
    assert code == 0, err
    assert "Traceback" not in err and "RecursionError" not in err


# A working directory whose path is not UTF-8 --------------------------------


@pytest.fixture
def bad_cwd(tmp_path: Path) -> Path:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffdir"))
    folder.mkdir()
    (folder / "a.py").write_text("A = 1\n")
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--question", "q", "--conclusion", "c", "a.py"],
        ["recall", "x"],
        ["recall", "x", "--project", "ok"],
        ["setup", "cursor", "--dry-run"],
    ],
)
def test_a_working_directory_that_is_not_utf8_is_refused(
    tmp_path: Path, bad_cwd: Path, args: list[str]
) -> None:
    run = cli_subprocess(["--db", str(tmp_path / "m.db"), *args], cwd=bad_cwd)
    line = assert_one_error_line(
        CliRun(run.returncode, run.stdout, run.stderr), "bad\\xffdir'", "not valid UTF-8"
    )
    assert "file" not in line, line


@pytest.mark.timeout(120)
def test_a_server_started_in_a_folder_that_is_not_utf8_says_why(
    tmp_path: Path, bad_cwd: Path
) -> None:
    with RawServer(tmp_path / "m.db", cwd=bad_cwd) as server:
        record = {"question": "q", "conclusion": "c", "files": ["a.py"], "project": "p"}
        assert_tool_refused(
            server.call("memory_exploration_record", record), "working directory", "UTF-8"
        )
        root = {"root": str(tmp_path), "project": "p"}
        assert not server.call("memory_exploration_stale", root).is_error
        code, err = server.close()
    assert code == 0 and "Traceback" not in err, err


def test_a_working_directory_over_the_root_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path.joinpath(*["d" * 200] * 6)
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("PWD", str(deep))
    run = _cli("--db", str(tmp_path / "m.db"), "recall", "x", "--project", "p")
    assert_one_error_line(run, "the working directory is", "over the limit of 1024")


# A standard output that cannot be written -----------------------------------


@pytest.fixture
def one_memo(tmp_path: Path) -> tuple[Path, Path]:
    """A database with one fresh memo of a.py, and an export of it; returns (db, export)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    db = tmp_path / "m.db"
    base = ["--db", str(db)]
    record = ["record", "--project", "p", "--root", str(root)]
    assert _cli(*base, *record, "--question", "q", "--conclusion", "c", "a.py").code == 0
    export = root / "memos.jsonl"
    assert _cli(*base, "export", "-o", str(export)).code == 0
    return db, export


def _to(stdout: Any, args: list[str], cwd: Path, stdin: str | None = None) -> CliRun:
    run = subprocess.run(
        [PYTHON, "-m", "explomemo", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        input=stdin,
        text=True,
        cwd=cwd,
        env={**os.environ, **EMBEDDINGS_OFF},
        timeout=60,
        check=False,
    )
    return CliRun(run.returncode, run.stdout or "", run.stderr)


def _commands(db: Path, export: Path) -> list[list[str]]:
    return [
        ["--db", str(db), "list"],
        ["--db", str(db), "recall", "--json", "q", "--project", "p", "--root", str(export.parent)],
        ["stale", "--from", str(export), "--check"],
        ["--db", str(db), "setup", "claude-code", "--dry-run"],
        ["--db", str(db), "export"],
    ]


def test_a_full_standard_output_is_one_error_line(one_memo: tuple[Path, Path]) -> None:
    db, export = one_memo
    with open("/dev/full", "w") as full:
        for args in _commands(db, export):
            # stale --check must not read as "stale found" (1) nor "all fresh" (0).
            run = _to(full, args, export.parent)
            assert_one_error_line(run, "standard output", "No space left on device")


def test_a_reader_that_left_is_not_an_error_message(one_memo: tuple[Path, Path]) -> None:
    db, export = one_memo
    for args in _commands(db, export):
        read, write = os.pipe()
        os.close(read)  # as `| head` does once it has what it wants
        try:
            run = _to(write, args, export.parent)
        finally:
            os.close(write)
        assert (run.code, run.err) == (2, ""), args


def test_a_hook_whose_output_cannot_be_written_exits_0(one_memo: tuple[Path, Path]) -> None:
    db, export = one_memo
    payload = json.dumps({"cwd": str(export.parent), "source": "startup"})
    args = ["--db", str(db), "hook", "session-start", "--project", "p"]
    with open("/dev/full", "w") as full:
        run = _to(full, args, export.parent, stdin=payload)
    assert run.code == 0 and len(run.err.splitlines()) == 1, run.err
    assert "explomemo hook session-start:" in run.err and "standard output" in run.err
    assert "Traceback" not in run.err


# Paths longer than an export can carry ----------------------------------------


def _nested(root: Path, folders: int, length: int) -> str:
    """A file f.py under ``folders`` nested folders of ``length`` characters; its path."""
    parts = [f"{n:03d}" + "d" * (length - 3) for n in range(folders)]
    folder = root.joinpath(*parts)
    # One mkdir at a time, relative: the whole path may be over PATH_MAX.
    fd = os.open(root, os.O_RDONLY)
    try:
        for part in parts:
            os.mkdir(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with os.fdopen(os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            fd = -1
            f.write("F = 1\n")
    finally:
        if fd >= 0:
            os.close(fd)
    return str(folder.relative_to(root) / "f.py")


def test_record_refuses_a_path_an_export_cannot_carry(tmp_path: Path) -> None:
    rel = _nested(tmp_path, 17, 250)
    assert len(rel) == 4271
    base = ["--db", str(tmp_path / "m.db"), "record", "--root", str(tmp_path)]
    run = _cli(*base, "--question", "q", "--conclusion", "c", rel)
    assert_one_error_line(run, "files[0] is 4,271 characters long", "over 4,096")
    assert len(run.err) < 1000


def test_a_path_over_path_max_with_its_root_is_checked_not_missing(tmp_path: Path) -> None:
    rel = _nested(tmp_path, 16, 254)
    assert len(rel) <= 4096 < len(str(tmp_path)) + 1 + len(rel)
    db = ["--db", str(tmp_path / "m.db")]
    record = ["record", "--project", "p", "--root", str(tmp_path), "--question", "q"]
    assert _cli(*db, *record, "--conclusion", "c", rel).code == 0
    stale = _cli(*db, "stale", "--format", "json")
    assert json.loads(stale.out) == {"checked": 1, "stale": []}, stale.err
    export = tmp_path / "memos.jsonl"
    assert _cli(*db, "export", "-o", str(export)).code == 0
    checked = _cli("stale", "--from", str(export), "--root", str(tmp_path), "--check")
    assert (checked.code, checked.out) == (0, "The one memo is fresh.\n"), checked.err
    imported = _cli("--db", str(tmp_path / "other.db"), "import", str(export))
    assert imported.code == 0, imported.err


# Client configuration holding numbers JSON cannot write back -----------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_a_configuration_with_a_number_json_cannot_carry_is_refused(
    tmp_path: Path, number: str
) -> None:
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    text = '{"f": ' + number + ', "mcpServers": {}}\n'
    config.write_text(text)
    for dry_run in (["--dry-run"], []):
        run = _cli("setup", "cursor", "--root", str(tmp_path), *dry_run)
        assert_one_error_line(run, str(config), number, "finite")
        assert config.read_text() == text


# The command line without a command -------------------------------------------


@pytest.mark.parametrize("args", [[], ["--db", "x.db"]])
def test_no_command_is_bad_usage(args: list[str]) -> None:
    assert_one_error_line(_cli(*args), "required: COMMAND", "explomemo --help")


@pytest.mark.parametrize("args", [["--db", ""], ["--db", "", "list"], ["import", ""]])
def test_an_empty_path_is_bad_usage(args: list[str]) -> None:
    assert_one_error_line(_cli(*args), "empty")


# --project of list and export --------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["export"]])
@pytest.mark.parametrize("project", ["", " ", "p" * 201])
def test_list_and_export_check_the_project_as_stale_does(
    one_memo: tuple[Path, Path], command: list[str], project: str
) -> None:
    db, _ = one_memo
    stale = _cli("--db", str(db), "stale", "--project", project)
    expected = assert_one_error_line(stale, "project").replace("explomemo stale --help", "")
    run = _cli("--db", str(db), *command, "--project", project)
    assert assert_one_error_line(run).replace(f"explomemo {command[0]} --help", "") == expected


def test_an_export_of_a_project_without_memos_leaves_the_file_alone(
    one_memo: tuple[Path, Path],
) -> None:
    db, export = one_memo
    before = export.read_bytes()
    run = _cli("--db", str(db), "export", "--project", "typo", "-o", str(export))
    assert_one_error_line(run, "project 'typo' has no memos", str(db), "projects are 'p'")
    assert export.read_bytes() == before
    assert _cli("--db", str(db), "export", "--project", "typo").out == ""
    # A project that has memos, and no --project (every project), still export.
    assert _cli("--db", str(db), "export", "--project", "p").out.encode() == before


# MCP forget's id ----------------------------------------------------------------


def test_forget_takes_only_a_whole_number_in_range(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    record = {"question": "q", "conclusion": "c", "files": ["a.py"], "project": "p"}
    forget = "memory_exploration_forget"
    bad_ids: list[object] = ["1", True, 1.0, 0, -1, 2**63]
    replies = call_tools(
        tmp_path / "m.db",
        [
            ("memory_exploration_record", {**record, "root": str(root)}),
            *[(forget, {"id": bad, "project": "p"}) for bad in bad_ids],
            ("memory_exploration_stale", {"project": "p", "root": str(root)}),
        ],
    )
    for bad, reply in zip(bad_ids, replies[1:-1], strict=True):
        assert_tool_refused(reply, "id")
        assert "1 was forgotten" not in reply.text, bad
    assert replies[-1].data["checked"] == 1


def test_forget_s_id_schema_carries_its_limits(tmp_path: Path) -> None:
    async def listed() -> dict[str, Any]:
        from mcp import Client

        from explomemo.server.tools import create_server

        async with Client(create_server(tmp_path / "m.db", env=dict(EMBEDDINGS_OFF))) as client:
            tools = (await client.list_tools()).tools
        return {tool.name: tool.input_schema for tool in tools}

    schema = asyncio.run(listed())["memory_exploration_forget"]["properties"]["id"]
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("integer", 1, 2**63 - 1)


# Every tool's parameters are strict, as forget's id is ------------------------


def test_recall_takes_only_json_integers_and_booleans(tmp_path: Path) -> None:
    """``"limit": true`` is not 1 and ``"include_stale": "false"`` is not false: over a
    real stdio server, each wrong type is refused naming the parameter and what to send."""
    root = tmp_path / "proj"
    root.mkdir()
    for name in ("a.py", "b.py"):
        (root / name).write_text(f"{name} = 1\n")
    recall = "memory_exploration_recall"
    query = {"query": "how is the parser wired?", "project": "p"}
    bad: list[tuple[str, dict[str, Any], str]] = [
        (recall, {**query, "limit": True}, "limit: must be a JSON integer"),
        (recall, {**query, "limit": "5"}, "limit: must be a JSON integer (a number without"),
        (recall, {**query, "limit": 2.0}, "limit: must be a JSON integer"),
        (recall, {**query, "include_stale": "false"}, "include_stale: must be a JSON boolean"),
        (recall, {**query, "include_stale": 0}, "include_stale: must be a JSON boolean"),
        (recall, {**query, "project": 5}, "project: must be a JSON string (got 5)"),
        (
            "memory_exploration_record",
            {"question": "q", "conclusion": "c", "files": "a.py", "project": "p"},
            'files: must be a JSON array (got "a.py")',
        ),
        (
            "memory_exploration_record",
            {"question": 7, "conclusion": "c", "files": ["a.py"], "project": "p"},
            "question: must be a JSON string (got 7)",
        ),
        ("memory_exploration_stale", {"project": "p", "root": True}, "root: must be a JSON"),
    ]
    record = {"conclusion": "the parser is wired in a.py", "files": ["a.py", "b.py"]}
    replies = call_tools_stdio(
        tmp_path / "m.db",
        [
            ("memory_exploration_record", {**record, "question": "parser wiring?", "project": "p"}),
            ("memory_exploration_record", {**record, "question": "parser files?", "project": "p"}),
            *[(tool, args) for tool, args, _ in bad],
            (recall, {**query, "limit": 1, "include_stale": False}),
        ],
        cwd=root,
    )
    for (_, args, expected), reply in zip(bad, replies[2:-1], strict=True):
        assert_tool_refused(reply, expected)
        assert "matches" not in reply.text, args
    assert replies[-1].data["project"] == "p"
    assert len(replies[-1].data["matches"]) == 1, replies[-1].text


# Nits: grammar, wording, positions ----------------------------------------------


def test_counts_of_zero_and_one_memo_read_right(one_memo: tuple[Path, Path]) -> None:
    db, export = one_memo
    payload = json.dumps({"cwd": str(export.parent), "source": "startup"})
    args = ["--db", str(db), "hook", "session-start", "--project", "p"]
    hook = _to(subprocess.PIPE, args, export.parent, stdin=payload)
    context = json.loads(hook.out)["hookSpecificOutput"]["additionalContext"]
    assert "project 'p' has 1 memo (1 fresh, 0 stale)" in context, context
    assert _cli("--db", str(db), "stale").out == "The one memo is fresh.\n"
    empty = ["--db", str(db.with_name("empty.db")), "stale"]
    assert _cli(*empty).out == "No memos to check.\n"
    assert _cli(*empty, "--format", "markdown").out == "No explomemo memos to check.\n"


def test_a_name_too_long_for_the_file_system_is_not_said_to_be_missing(tmp_path: Path) -> None:
    base = ["--db", str(tmp_path / "m.db"), "record", "--root", str(tmp_path)]
    run = _cli(*base, "--question", "q", "--conclusion", "c", "x" * 300)
    line = assert_one_error_line(run, "cannot be examined (File name too long)")
    assert "does not exist" not in line


def test_an_overlong_number_in_an_export_is_named_plainly(tmp_path: Path) -> None:
    export = tmp_path / "memos.jsonl"
    export.write_text('{"id": ' + "1" * 5000 + "}\n")
    line = assert_one_error_line(_cli("import", str(export)), "line 1", "5,000 digits")
    assert "set_int_max_str_digits" not in line


def test_an_annotation_for_deleted_last_lines_points_inside_the_file(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    source = root / "a.py"
    source.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    db = ["--db", str(tmp_path / "m.db")]
    record = ["record", "--project", "p", "--root", str(root), "--question", "q"]
    assert _cli(*db, *record, "--conclusion", "c", "a.py").code == 0
    source.write_text("".join(f"line {n}\n" for n in range(1, 8)))
    run = _cli(*db, "stale", "--format", "github")
    assert "::warning file=a.py,line=7," in run.out, run.out
    source.write_text("")
    run = _cli(*db, "stale", "--format", "github")
    assert "::warning file=a.py,line=1," in run.out, run.out


def test_export_creates_the_folders_missing_on_its_way(one_memo: tuple[Path, Path]) -> None:
    db, export = one_memo
    target = export.parent / "new" / ".explomemo" / "memos.jsonl"
    assert _cli("--db", str(db), "export", "-o", str(target)).code == 0
    assert target.read_bytes() == export.read_bytes()
