"""Bad inputs through the library, the CLI and the MCP tools: record, recall, stale and forget
refuse them clearly, naming the input, and write nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import (
    STALE,
    World,
    _baseline,
    assert_one_error_line,
    assert_tool_refused,
    call_tool,
    call_tools,
    counts,
    invoke_cli,
    open_cache,
)

from explomemo.check import hashing
from explomemo.errors import ExplomemoError

RECORD = "memory_exploration_record"


RECALL = "memory_exploration_recall"


FORGET = "memory_exploration_forget"


Value = Any  # a literal, or a callable of the World


def _v(value: Value, world: World) -> Any:
    return value(world) if callable(value) else value


@dataclass
class Case:
    """One hostile record call: what differs from a valid call, and what the refusal names."""

    id: str
    files: Value = field(default_factory=lambda: ["ok.py"])
    root: Value = field(default_factory=lambda: lambda w: str(w.root))
    question: Value = "how is the thing wired?"
    conclusion: Value = "it is wired in ok.py"
    project: Value = "proj"
    names: tuple[Value, ...] = ()
    reads: bool = False  # the refusal may read the file (only the oversized one)
    mcp_names: tuple[Value, ...] | None = None  # when MCP's schema names it differently


def _root(w: World) -> str:
    return str(w.root)


PATH_CASES = [
    Case(
        "dotdot", files=["../outside/secret.txt"], names=("../outside/secret.txt", "outside root")
    ),
    Case(
        "dotdot-inner",
        files=["subdir/../../outside/secret.txt"],
        names=("subdir/../../outside/secret.txt", "outside root"),
    ),
    Case("absolute-outside", files=lambda w: [str(w.secret)], names=(lambda w: str(w.secret),)),
    Case(
        "absolute-dotdot",
        files=lambda w: [f"{w.root}/../outside/secret.txt"],
        names=(lambda w: f"{w.root}/../outside/secret.txt",),
    ),
    Case("absolute-etc", files=["/etc/passwd"], names=("/etc/passwd",)),
    Case("symlink-out", files=["link_out"], names=("link_out", "symbolic link")),
    Case("relative-symlink-out", files=["rel_link_out"], names=("rel_link_out",)),
    Case("symlinked-parent", files=["linkdir/secret2.txt"], names=("linkdir/secret2.txt",)),
    Case("symlink-loop", files=["loop_a"], names=("loop_a",)),
    Case("self-loop", files=["self_loop"], names=("self_loop",)),
    Case("loop-as-folder", files=["loop_a/x.py"], names=("loop_a/x.py",)),
    Case("fifo", files=["fifo"], names=("fifo", "FIFO")),
    Case("socket", files=["sock"], names=("sock", "socket")),
    Case("dev-null-link", files=["devnull"], names=("devnull",)),
    Case("dev-zero-link", files=["devzero"], names=("devzero",)),
    Case("dev-null-root-dev", files=["null"], root="/dev", names=("null", "device")),
    Case("dev-zero-root-dev", files=["/dev/zero"], root="/dev", names=("/dev/zero", "device")),
    Case("directory", files=["subdir"], names=("subdir", "directory")),
    Case("root-itself", files=["."], names=("'.'",)),
    Case("root-itself-absolute", files=lambda w: [str(w.root)], names=(lambda w: str(w.root),)),
    Case("missing-file", files=["nope.py"], names=("nope.py", "does not exist")),
    Case("over-32-mib", files=["big.bin"], names=("big.bin", "32 MiB"), reads=True),
    Case(
        "65-files",
        files=[f"many/f{i:02d}.py" for i in range(65)],
        names=("files", "64"),
    ),
    Case("empty-path", files=[""], names=("files[0]", "empty")),
    Case("nul-in-path", files=["ok.py\x00.txt"], names=("ok.py", "NUL")),
    Case(
        "lone-surrogate-path",
        files=["bad\udcff.py"],
        names=("bad", "UTF-8"),
        mcp_names=("files",),
    ),
    Case("no-files", files=[], names=("files",)),
    Case("root-is-a-file", root=lambda w: str(w.base / "a_file.txt"), names=("a_file.txt",)),
    Case("root-missing", root=lambda w: str(w.base / "nowhere"), names=("nowhere",)),
    Case("root-relative", root="root", names=("'root'", "absolute")),
    Case("root-dotdot-relative", root="../root", names=("../root",)),
    Case("root-empty", root="", names=("root",)),
    Case("root-dev-null", root="/dev/null", names=("/dev/null",)),
    Case("root-nul", root=lambda w: f"{w.root}\x00", names=("root", "NUL")),
    Case("root-over-long", root="/" + "r" * 1100, names=("root", "1024")),
    Case(
        "root-lone-surrogate",
        root=lambda w: f"{w.root}\udcff",
        names=("root", "UTF-8"),
        mcp_names=("root",),
    ),
]


TEXT_CASES = [
    Case("question-empty", question="", names=("question",)),
    Case("question-blank", question=" \t\n ", names=("question",)),
    Case(
        "question-over-long",
        question="q" * 2001,
        names=("question", "2,000"),
        mcp_names=("question",),
    ),
    Case("question-nul", question="how\x00now", names=("question", "NUL")),
    Case("question-lone-surrogate", question="how \ud800 now", names=("question",)),
    Case("conclusion-empty", conclusion="", names=("conclusion",)),
    Case(
        "conclusion-over-long",
        conclusion="c" * 20_001,
        names=("conclusion", "20,000"),
        mcp_names=("conclusion",),
    ),
    Case("conclusion-nul", conclusion="\x00", names=("conclusion",)),
    Case("conclusion-lone-surrogate", conclusion="\udfff", names=("conclusion",)),
    Case("project-empty", project="", names=("project",)),
    Case("project-over-long", project="p" * 201, names=("project", "200")),
    Case("project-nul", project="p\x00", names=("project", "NUL")),
    Case("project-lone-surrogate", project="p\udc80", names=("project",)),
]


ALL_CASES = PATH_CASES + TEXT_CASES


def _args(case: Case, w: World) -> dict[str, Any]:
    return {
        "question": _v(case.question, w),
        "conclusion": _v(case.conclusion, w),
        "files": _v(case.files, w),
        "project": _v(case.project, w),
        "root": _v(case.root, w),
    }


class OpenSpy:
    """Wraps os.open to remember every name opened (by explomemo.files)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._real = os.open

    def __call__(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        self.names.append(os.fsdecode(path) if not isinstance(path, int) else str(path))
        return self._real(path, flags, *args, **kwargs)


def _trap_name(files: list[str]) -> str | None:
    if len(files) != 1 or not files[0]:
        return None
    name = os.path.basename(files[0].rstrip("/"))
    return None if name in ("", ".", "..", "ok.py", "big.bin") else name


ROOT_CASES: list[tuple[str, Value, tuple[Value, ...]]] = [
    (
        "root-is-a-file",
        lambda w: str(w.base / "a_file.txt"),
        (lambda w: str(w.base / "a_file.txt"),),
    ),
    ("root-missing", lambda w: str(w.base / "nowhere"), ("nowhere",)),
    ("root-relative", "root", ("'root'",)),
    ("root-empty", "", ("root",)),
    ("root-dev-zero", "/dev/zero", ("/dev/zero",)),
    ("root-nul", lambda w: f"{w.root}\x00", ("root",)),
    ("root-over-long", "/" + "r" * 1100, ("root",)),
]


QUERY_CASES: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("query-empty", {"query": ""}, ("query",)),
    ("query-blank", {"query": "   "}, ("query",)),
    ("query-over-long", {"query": "w " * 1001}, ("query",)),
    ("query-nul", {"query": "a\x00b"}, ("query",)),
    ("query-surrogate", {"query": "a\ud800b"}, ("query",)),
    ("query-fts-syntax", {"query": 'NEAR( "AND OR NOT * ^ :'}, ()),
    ("limit-zero", {"limit": 0}, ("limit",)),
    ("limit-21", {"limit": 21}, ("limit",)),
    ("limit-huge", {"limit": 2**70}, ("limit",)),
    ("limit-string", {"limit": "five"}, ("limit",)),
    ("project-empty", {"project": ""}, ("project",)),
    ("project-long", {"project": "p" * 201}, ("project",)),
]


HUGE = 2**70


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_library_record_refuses(world: World, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "lib.db"
    _baseline(db, world)
    before = counts(db)
    spy = OpenSpy()
    with open_cache(db) as cache:
        monkeypatch.setattr(os, "open", spy)
        hashing.COUNTERS.reset()
        try:
            with pytest.raises(ExplomemoError) as caught:
                cache.record(**_args(case, world))
        finally:
            monkeypatch.setattr(os, "open", spy._real)
    message = str(caught.value)
    assert "\n" not in message
    for name in case.names:
        assert _v(name, world) in message, message
    assert counts(db) == before
    if not case.reads:
        assert hashing.COUNTERS.files == 0, "a refused file was read"
    files = _v(case.files, world)
    trap = _trap_name(files) if isinstance(files, list) else None
    if trap is not None:
        assert trap not in spy.names, f"{trap!r} was opened: {spy.names}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_cli_record_refuses(world: World, case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "cli.db"
    _baseline(db, world)
    before = counts(db)
    a = _args(case, world)
    argv = [
        "--db",
        str(db),
        "record",
        "--project",
        a["project"],
        "--root",
        a["root"],
        "--question",
        a["question"],
        "--conclusion",
        a["conclusion"],
        "--",
        *a["files"],
    ]
    hashing.COUNTERS.reset()
    run = invoke_cli(argv)
    if case.id == "no-files":
        # the parser itself refuses a missing FILE argument (a usage error).
        assert_one_error_line(run, "FILE")
    else:
        assert_one_error_line(run, *(_v(n, world) for n in case.names))
    assert run.out == ""
    assert counts(db) == before
    if not case.reads:
        assert hashing.COUNTERS.files == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_mcp_record_refuses(world: World, case: Case) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "mcp.db"
    _baseline(db, world)
    before = counts(db)
    hashing.COUNTERS.reset()
    reply = call_tool(db, RECORD, _args(case, world))
    names = case.mcp_names if case.mcp_names is not None else case.names
    assert_tool_refused(reply, *(_v(n, world) for n in names))
    assert counts(db) == before
    if not case.reads:
        assert hashing.COUNTERS.files == 0


@pytest.mark.timeout(30)
def test_boundaries_are_accepted(world: World) -> None:
    """The limits themselves are allowed: 64 files, exactly 32 MiB, the longest strings."""
    db = world.base / "ok.db"
    with open_cache(db) as cache:
        r64 = cache.record(
            question="q" * 2000,
            conclusion="c" * 20_000,
            project="p" * 200,
            files=[f"many/f{i:02d}.py" for i in range(64)],
            root=str(world.root),
        )
        assert len(r64.files) == 64
        exact = cache.record(
            question="exact",
            conclusion="c",
            project="p",
            files=["exact.bin"],
            root=str(world.root),
        )
        assert exact.files[0].size == 32 * 1024 * 1024
        # 65 entries that are 64 distinct files after removing duplicates are fine.
        dup = cache.record(
            question="dups",
            conclusion="c",
            project="p",
            root=str(world.root),
            files=[*(f"many/f{i:02d}.py" for i in range(64)), "many/f00.py"],
        )
        assert len(dup.files) == 64
        # A symbolic link that stays inside root is recorded under its own path.
        os.symlink("subdir/inner.py", world.root / "inner_link.py")
        inner = cache.record(
            question="inner link",
            conclusion="c",
            project="p",
            files=["inner_link.py"],
            root=str(world.root),
        )
        assert inner.files[0].path == "inner_link.py"


@pytest.mark.timeout(30)
def test_mcp_text_stays_plain_for_non_string_files(world: World) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "mcp.db"
    _baseline(db, world)
    before = counts(db)
    for files in ([1, 2], "ok.py", [None], [["ok.py"]]):
        reply = call_tool(
            db,
            RECORD,
            {
                "question": "q",
                "conclusion": "c",
                "files": files,
                "project": "proj",
                "root": str(world.root),
            },
        )
        assert_tool_refused(reply, "files")
    assert counts(db) == before


# Recall, stale and forget -------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("cid", "root", "names"), ROOT_CASES, ids=[c[0] for c in ROOT_CASES])
def test_read_tools_refuse_bad_roots(
    world: World,
    cid: str,
    root: Value,
    names: tuple[Value, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "r.db"
    _baseline(db, world)
    before = counts(db)
    bad_root = _v(root, world)
    fragments = [_v(n, world) for n in names]
    recall, stale = call_tools(
        db,
        [
            (RECALL, {"query": "baseline", "project": "proj", "root": bad_root}),
            (STALE, {"project": "proj", "root": bad_root}),
        ],
    )
    assert_tool_refused(recall, *fragments)
    assert_tool_refused(stale, *fragments)
    for argv in (
        ["recall", "--project", "proj", "--root", bad_root, "baseline"],
        ["stale", "--project", "proj", "--root", bad_root],
        ["stale", "--root", bad_root],
    ):
        assert_one_error_line(invoke_cli(["--db", str(db), *argv]), *fragments)
    assert counts(db) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("cid", "change", "names"), QUERY_CASES, ids=[c[0] for c in QUERY_CASES])
def test_mcp_recall_refuses_bad_arguments(
    world: World, cid: str, change: dict[str, Any], names: tuple[str, ...]
) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "q.db"
    _baseline(db, world)
    args = {"query": "baseline", "project": "proj", "root": str(world.root), **change}
    reply = call_tool(db, RECALL, args)
    if not names:
        # Search syntax in a query is text, not an error: it must simply not crash.
        assert not reply.is_error, reply.text
        return
    assert_tool_refused(reply, *names)


@pytest.mark.timeout(30)
def test_cli_recall_refuses_bad_arguments(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "q.db"
    _baseline(db, world)
    base = ["--db", str(db), "recall", "--root", str(world.root)]
    for argv, fragment in (
        ([*base, "--project", "proj", ""], "query"),
        ([*base, "--project", "proj", "x" * 2001], "query"),
        ([*base, "--project", "proj", "a\x00b"], "query"),
        ([*base, "--project", "proj", "a\udcffb"], "query"),
        ([*base, "--project", "", "baseline"], "project"),
        ([*base, "--project", "proj", "--limit", "0", "baseline"], "limit"),
        ([*base, "--project", "proj", "--limit", "21", "baseline"], "limit"),
    ):
        assert_one_error_line(invoke_cli(argv), fragment)
    ok = invoke_cli([*base, "--project", "proj", 'NEAR( "AND OR * ^ :'])
    assert ok.code == 0, ok.err


@pytest.mark.timeout(30)
def test_forget_refuses_unknown_and_foreign_ids(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "f.db"
    _baseline(db, world)
    before = counts(db)
    replies = call_tools(
        db,
        [
            (FORGET, {"project": "proj", "id": 999}),
            (FORGET, {"project": "another", "id": 1}),  # memo 1 belongs to "proj"
            (FORGET, {"project": "proj", "id": -1}),
            (FORGET, {"project": "proj", "id": "1; DROP TABLE memos"}),
            (FORGET, {"project": "", "id": 1}),
        ],
    )
    assert_tool_refused(replies[0], "999")
    assert_tool_refused(replies[1], "1", "another")
    assert_tool_refused(replies[2], "-1")
    assert_tool_refused(replies[3], "id")
    assert_tool_refused(replies[4], "project")
    assert_one_error_line(invoke_cli(["--db", str(db), "forget", "999"]), "999")
    assert_one_error_line(invoke_cli(["--db", str(db), "show", "999"]), "999")
    assert_one_error_line(invoke_cli(["--db", str(db), "forget", "one"]), "one")
    assert counts(db) == before


@pytest.mark.timeout(30)
def test_mcp_forget_refuses_an_id_too_large_for_sqlite(world: World) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "f.db"
    _baseline(db, world)
    before = counts(db)
    reply = call_tool(db, FORGET, {"project": "proj", "id": HUGE})
    assert_tool_refused(reply, str(HUGE))
    assert "Python int" not in reply.text
    assert counts(db) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["forget", "show"])
def test_cli_refuses_an_id_too_large_for_sqlite(
    world: World, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile input is a clear refusal naming it: nothing written, nothing read outside root,
    no FIFO, socket or device opened, never a hang."""
    db = world.base / "f.db"
    _baseline(db, world)
    before = counts(db)
    try:
        run = invoke_cli(["--db", str(db), command, str(HUGE)])
    except OverflowError as exc:  # pragma: no cover - the bug this test documents
        pytest.fail(f"explomemo {command} {HUGE} crashed with a traceback: {exc!r}")
    assert_one_error_line(run, str(HUGE))
    assert counts(db) == before
