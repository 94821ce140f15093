"""Export and import under hostile and careless use, through the command line.

Any memo ``record`` accepts survives export -> import -> export byte for byte
and is read by ``stale --from``; an export file is refused whole, naming the
line and the field, when one line breaks a rule ``record`` enforces, and
nothing is written; a failed write of an export is exit code 2, never a
silent half file; only regular files are read or replaced.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_helpers import (
    EMBEDDINGS_OFF,
    PYTHON,
    assert_one_error_line,
    cli_subprocess,
    counts,
    open_cache,
    run_cli,
    sha256_bytes,
)

from explomemo.cli.main import main
from explomemo.errors import InputError

# Round trip, fuzzed --------------------------------------------------------

#: Any character UTF-8 can carry (no lone surrogates) but NUL: record refuses those.
CHARS = st.characters(codec="utf-8", exclude_characters="\x00")
#: Line breaks of every kind, which must not break an export's lines.
BREAKS = st.sampled_from(["\u2028", "\u2029", "\x85", "\r", "\n", "\x0b", "\x0c", "\x1c", "\x1e"])
TEXT = st.lists(st.one_of(CHARS, BREAKS), min_size=1, max_size=60).map("".join)
SOME_TEXT = TEXT.filter(lambda s: s.strip())


def _component_ok(name: str) -> bool:
    return name not in (".", "..") and len(name.encode()) <= 200


COMPONENT = (
    st.lists(
        st.one_of(st.characters(codec="utf-8", exclude_characters="\x00/"), BREAKS),
        min_size=1,
        max_size=12,
    )
    .map("".join)
    .filter(_component_ok)
)
PATH = st.lists(COMPONENT, min_size=1, max_size=3).map("/".join)


@st.composite
def memo_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    paths = draw(st.lists(PATH, min_size=1, max_size=4, unique=True))
    # No path may also be a folder of another.
    paths = [p for p in paths if not any(q.startswith(p + "/") for q in paths)]
    memos = []
    for _ in range(draw(st.integers(1, 4))):
        memos.append(
            {
                "project": draw(SOME_TEXT),
                "question": draw(SOME_TEXT),
                "conclusion": draw(SOME_TEXT),
                "files": draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3)),
            }
        )
    return memos


def _quiet(args: list[str]) -> tuple[int, str]:
    """Run the CLI in-process; its exit code and stdout (stderr is left to pytest)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


@pytest.mark.timeout(600)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(memos=memo_sets(), content=st.binary(max_size=64))
def test_any_recordable_memo_survives_export_import_export(
    memos: list[dict[str, Any]], content: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "root"
        for path in {p for memo in memos for p in memo["files"]}:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content + path.encode())
        source, target = base / "source.db", base / "target.db"
        with open_cache(source) as cache:
            for memo in memos:
                cache.record(**memo, root=str(root))
            recorded = {(m.project, m.question) for m in cache.list()}
        first, second = base / "first.jsonl", base / "second.jsonl"
        assert _quiet(["--db", str(source), "export", "-o", str(first)])[0] == 0
        assert _quiet(["--db", str(target), "import", str(first), "--root", str(root)])[0] == 0
        assert _quiet(["--db", str(target), "export", "-o", str(second)])[0] == 0
        assert first.read_bytes() == second.read_bytes()
        assert _quiet(["--db", str(target), "export"])[1].encode() == first.read_bytes()
        # One memo a line: a line break inside text never splits one.
        lines = first.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) - 1 == len(recorded)
        exported = {(m["project"], m["question"]) for m in map(json.loads, lines[:-1])}
        assert exported == recorded
        code, out = _quiet(
            ["stale", "--from", str(first), "--root", str(root), "--format", "json", "--check"]
        )
        assert code == 0 and json.loads(out) == {"checked": len(recorded), "stale": []}


@settings(max_examples=60, deadline=None)
@given(
    before=TEXT,
    after=TEXT,
    surrogate=st.integers(0xD800, 0xDFFF),
    field=st.sampled_from(["question", "conclusion", "project"]),
)
def test_lone_surrogates_are_refused_at_record_time(
    before: str, after: str, surrogate: int, field: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "a.py").write_text("a\n")
        args = {"question": "q", "conclusion": "c", "project": "p", "files": ["a.py"]}
        args[field] = before + chr(surrogate) + after
        with open_cache(root / "m.db") as cache:
            with pytest.raises(InputError, match=field):
                cache.record(**args, root=str(root))
            assert cache.list() == []


def _line(memo_id: int, **change: Any) -> dict[str, Any]:
    memo: dict[str, Any] = {
        "id": memo_id,
        "project": "p",
        "question": f"question {memo_id} \u2028 with \x85 odd \u2029 breaks",
        "conclusion": "c\u2028d",
        "root": "/somewhere",
        "recorded_at": "2026-01-01T00:00:00Z",
        "files": [{"path": "a.py", "sha256": "a" * 64, "xxh3": "b" * 32, "size": 3}],
    }
    memo.update(change)
    return memo


def _raw(memo: dict[str, Any]) -> str:
    # As an older export wrote it: U+2028, U+2029 and U+0085 raw.
    return json.dumps(memo, ensure_ascii=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    good=st.integers(0, 6),
    bad_at=st.integers(0, 6),
    bad=st.sampled_from(
        [
            ("{not json", "not JSON"),
            ('"just a string"', "not a JSON object"),
            (_raw(_line(99, id=0)), "id 0 is out of range"),
            (_raw(_line(99, question="")), "question"),
            (_raw(_line(99, files=[])), "files"),
        ]
    ),
)
def test_one_bad_line_is_named_among_odd_line_breaks(
    good: int, bad_at: int, bad: tuple[str, str]
) -> None:
    bad_at = min(bad_at, good)
    lines = [_raw(_line(i + 1)) for i in range(good)]
    lines.insert(bad_at, bad[0])
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "memos.jsonl"
        export.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for args in (["import", str(export)], ["stale", "--from", str(export)]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["--db", str(Path(tmp) / "m.db"), *args])
            assert code == 2 and out.getvalue() == ""
            message = err.getvalue()
            assert message.count("\n") == 1
            assert f"line {bad_at + 1} of {export}" in message, message
            assert bad[1] in message, message
        assert not (Path(tmp) / "m.db").exists()


def test_odd_line_breaks_in_an_older_export_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "old.jsonl"
    export.write_text("".join(_raw(_line(i)) + "\n" for i in (1, 2, 3)), encoding="utf-8")
    db = tmp_path / "m.db"
    run = run_cli(capsys, ["--db", str(db), "import", str(export)])
    assert run.code == 0, run.err
    assert json.loads(run.out)["added"] == 3
    again = run_cli(capsys, ["--db", str(db), "export"])
    # Written back with those characters escaped: one memo a line for any reader.
    assert again.out.splitlines() == again.out.split("\n")[:-1]
    # An older export's root is not written back (an export holds no absolute root).
    older = [{k: v for k, v in _line(i).items() if k != "root"} for i in (1, 2, 3)]
    assert [json.loads(line) for line in again.out.splitlines()] == older


# Every rule record enforces, on import -----------------------------------

SHA = "a" * 64
XXH = "b" * 32


def _file(**change: Any) -> dict[str, Any]:
    return {"path": "a.py", "sha256": SHA, "xxh3": XXH, "size": 3, **change}


BAD_LINES: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("id-zero", {"id": 0}, ("id 0", "out of range")),
    ("id-negative", {"id": -5}, ("id -5",)),
    ("id-2**63", {"id": 2**63}, ("id", str(2**63))),
    ("id-2**64", {"id": 2**64}, ("id", str(2**64))),
    ("id-float", {"id": 1.0}, ("id", "whole number")),
    ("id-bool", {"id": True}, ("id", "whole number")),
    ("id-string", {"id": "1"}, ("id", "whole number")),
    ("size-2**70", {"files": [_file(size=2**70)]}, ("files[0].size", str(2**70))),
    ("size-over-32-mib", {"files": [_file(size=32 * 1024 * 1024 + 1)]}, ("files[0].size",)),
    ("size-negative", {"files": [_file(size=-1)]}, ("files[0].size",)),
    (
        "duplicate-path",
        {"files": [_file(), _file(sha256="c" * 64)]},
        ("files[1].path", "appears twice"),
    ),
    (
        "65-files",
        {"files": [_file(path=f"f{i}.py") for i in range(65)]},
        ("files", "65", "64"),
    ),
    ("no-files", {"files": []}, ("files",)),
    ("sha-short", {"files": [_file(sha256="a" * 63)]}, ("files[0].sha256", "64")),
    ("sha-upper", {"files": [_file(sha256="A" * 64)]}, ("files[0].sha256",)),
    ("sha-not-hex", {"files": [_file(sha256="g" * 64)]}, ("files[0].sha256",)),
    ("xxh3-bad", {"files": [_file(xxh3="z" * 32)]}, ("files[0].xxh3", "32")),
    ("date-month-13", {"recorded_at": "2026-13-01T00:00:00Z"}, ("recorded_at",)),
    ("date-feb-30", {"recorded_at": "2026-02-30T00:00:00Z"}, ("recorded_at",)),
    ("date-words", {"recorded_at": "yesterday"}, ("recorded_at",)),
    ("date-offset", {"recorded_at": "2026-01-01T00:00:00+02:00"}, ("recorded_at",)),
    ("path-dotdot", {"files": [_file(path="../x.py")]}, ("files[0].path",)),
    ("path-absolute", {"files": [_file(path="/etc/passwd")]}, ("files[0].path",)),
    ("path-dot-part", {"files": [_file(path="a/./b.py")]}, ("files[0].path",)),
    ("path-nul", {"files": [_file(path="a\x00.py")]}, ("files[0].path", "NUL")),
    ("path-empty", {"files": [_file(path="")]}, ("files[0].path", "empty")),
    ("path-too-long", {"files": [_file(path="d/" * 2100 + "a.py")]}, ("files[0].path", "4,096")),
    ("question-empty", {"question": "  "}, ("question", "empty")),
    ("question-too-long", {"question": "q" * 2001}, ("question", "2,000")),
    ("conclusion-nul", {"conclusion": "a\x00b"}, ("conclusion", "NUL")),
    ("project-too-long", {"project": "p" * 201}, ("project", "200")),
    ("project-missing", {"project": None}, ("project",)),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("cid", "change", "names"), BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_import_refuses_what_record_refuses(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cid: str,
    change: dict[str, Any],
    names: tuple[str, ...],
) -> None:
    db = tmp_path / "m.db"
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("abc")
    with open_cache(db) as cache:
        cache.record(question="kept", conclusion="c", project="p", files=["a.py"], root=str(root))
    before = sha256_bytes(db), counts(db)
    export = tmp_path / "bad.jsonl"
    good = json.dumps(_line(7))
    export.write_text(good + "\n" + json.dumps(_line(8, **change)) + "\n")
    run = run_cli(capsys, ["--db", str(db), "import", str(export)])
    assert_one_error_line(run, f"line 2 of {export}", *names)
    assert run.out == ""
    assert (sha256_bytes(db), counts(db)) == before


@pytest.mark.timeout(60)
def test_import_refuses_a_surrogate_escape_and_repeated_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.db"
    export = tmp_path / "bad.jsonl"
    export.write_text(
        json.dumps(_line(1)) + "\n" + json.dumps(_line(2, question="a\ud800b")) + "\n"
    )
    assert_one_error_line(
        run_cli(capsys, ["--db", str(db), "import", str(export)]), "line 2", "question"
    )
    export.write_text(json.dumps(_line(4)) + "\n" + json.dumps(_line(4, question="other")) + "\n")
    assert_one_error_line(
        run_cli(capsys, ["--db", str(db), "import", str(export)]), "line 2", "id 4"
    )
    assert not db.exists()


def test_imported_ids_can_be_shown_and_forgotten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The largest id SQLite holds goes in, and comes back out through show and forget."""
    db = tmp_path / "m.db"
    export = tmp_path / "ids.jsonl"
    export.write_text(json.dumps(_line(1)) + "\n" + json.dumps(_line(2**63 - 1)) + "\n")
    assert run_cli(capsys, ["--db", str(db), "import", str(export)]).code == 0
    for memo_id in ("1", str(2**63 - 1)):
        assert run_cli(capsys, ["--db", str(db), "show", memo_id, "--json"]).code == 0
        assert run_cli(capsys, ["--db", str(db), "forget", memo_id]).code == 0
    assert counts(db)["memos"] == 0


def test_a_byte_order_mark_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / "bom.jsonl"
    export.write_bytes(b"\xef\xbb\xbf" + (json.dumps(_line(1)) + "\n").encode())
    db = tmp_path / "m.db"
    run = run_cli(capsys, ["--db", str(db), "import", str(export)])
    assert run.code == 0, run.err
    assert json.loads(run.out)["added"] == 1
    run = run_cli(capsys, ["stale", "--from", str(export), "--format", "json"])
    assert run.code == 0 and json.loads(run.out)["checked"] == 1
    # A mark anywhere else is not ignored: it is named.
    export.write_bytes((json.dumps(_line(1)) + "\n\ufeff" + json.dumps(_line(2))).encode())
    assert_one_error_line(run_cli(capsys, ["--db", str(db), "import", str(export)]), "line 2")


# Only regular files are read -----------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["import", "stale-from"])
@pytest.mark.parametrize("source", ["/dev/zero", "fifo", "/dev/null"])
def test_an_export_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, command: str, source: str
) -> None:
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
        source = str(tmp_path / "fifo")
    db = tmp_path / "m.db"
    args = ["import", source] if command == "import" else ["stale", "--from", source]
    done = cli_subprocess(["--db", str(db), *args], timeout=30)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("explomemo: error:") and source in done.stderr
    assert "not a regular file" in done.stderr
    assert not db.exists()


# Writing an export ---------------------------------------------------------


@pytest.fixture
def big_db(tmp_path: Path) -> Path:
    """A database whose export is about 400 KB."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a\n")
    db = tmp_path / "big.db"
    with open_cache(db) as cache:
        for i in range(20):
            cache.record(
                question=f"question {i}",
                conclusion=f"{i:02d}" * 9500,
                project="p",
                files=["a.py"],
                root=str(root),
            )
    return db


LIMIT = 256 * 1024


def _limited() -> None:
    # Writes past LIMIT bytes fail with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _export(
    db: Path, *args: str, stdout: Path | None = None, limited: bool = False
) -> subprocess.CompletedProcess[str]:
    """``explomemo export`` in a child process, its stdout sent to a file if given."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(stdout.open("wb")) if stdout else subprocess.PIPE
        return subprocess.run(
            [PYTHON, "-m", "explomemo", "--db", str(db), "export", *args],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **EMBEDDINGS_OFF},
            preexec_fn=_limited if limited else None,
            timeout=60,
            check=False,
        )


@pytest.mark.timeout(60)
def test_export_to_stdout_that_cannot_be_written_exits_2(big_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _export(big_db, stdout=out, limited=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("explomemo: error: cannot write the export to standard output")
    assert "File too large" in done.stderr
    assert out.stat().st_size == LIMIT  # what fitted; the exit code says it is not all


@pytest.mark.timeout(60)
def test_export_to_a_file_that_cannot_be_written_exits_2_and_keeps_it(
    big_db: Path, tmp_path: Path
) -> None:
    target = tmp_path / "out" / "memos.jsonl"
    target.parent.mkdir()
    target.write_text("the previous export\n")
    done = _export(big_db, "-o", str(target), limited=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and str(target) in done.stderr
    assert "File too large" in done.stderr
    assert target.read_text() == "the previous export\n"
    assert os.listdir(target.parent) == ["memos.jsonl"]  # no staging file left


def _seeded(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "a.py").write_text("a\n")
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        cache.record(question="q", conclusion="c", project="p", files=["a.py"], root=str(root))
    return db


def test_dash_is_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _seeded(tmp_path)
    monkeypatch.chdir(tmp_path)
    run = run_cli(capsys, ["--db", str(db), "export", "-o", "-"])
    assert run.code == 0 and run.out == run_cli(capsys, ["--db", str(db), "export"]).out
    assert json.loads(run.out)["question"] == "q"
    assert not (tmp_path / "-").exists()


def test_export_file_keeps_its_permissions_and_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _seeded(tmp_path)
    target = tmp_path / "memos.jsonl"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    os.chown(target, 1234, 1234) if os.geteuid() == 0 else None
    before = os.stat(target)
    assert run_cli(capsys, ["--db", str(db), "export", "-o", str(target)]).code == 0
    after = os.stat(target)
    assert json.loads(target.read_text())["question"] == "q"
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    fresh = tmp_path / "new" / "memos.jsonl"
    assert run_cli(capsys, ["--db", str(db), "export", "-o", str(fresh)]).code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o666 & ~umask


def test_export_writes_through_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _seeded(tmp_path)
    real = tmp_path / "shared" / "memos.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "memos.jsonl"
    link.symlink_to(real)
    assert run_cli(capsys, ["--db", str(db), "export", "-o", str(link)]).code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["question"] == "q"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere" / "x.jsonl")
    run = run_cli(capsys, ["--db", str(db), "export", "-o", str(dangling)])
    assert_one_error_line(run, str(dangling), "does not exist")
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.timeout(60)
def test_export_refuses_targets_that_are_not_regular_files(tmp_path: Path) -> None:
    db = _seeded(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    # What /dev/stdout is: a link to the process's descriptor 1 (here a pipe).
    # Links of its own, not /dev/stdout and /dev/null themselves: a regression
    # run as root must not replace the system's.
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    (tmp_path / "null").symlink_to("/dev/null")
    for target, kind in (
        (tmp_path / "fifo", "a FIFO"),
        (tmp_path / "stdout", "/proc"),
        (tmp_path / "null", "a device"),
    ):
        done = cli_subprocess(["--db", str(db), "export", "-o", str(target)], timeout=30)
        assert done.returncode == 2, done
        assert done.stderr.count("\n") == 1 and str(target) in done.stderr, done.stderr
        assert kind in done.stderr and "-o -" in done.stderr
        assert done.stdout == ""
    assert (tmp_path / "stdout").is_symlink() and (tmp_path / "null").is_symlink()
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    leftovers = [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert leftovers == []


def test_export_to_dev_stdout_when_it_is_a_file(tmp_path: Path) -> None:
    """A link to /proc/self/fd/1 with standard output sent to a file (``>> log``) is
    refused: renaming an export over that file would replace the whole log."""
    db = _seeded(tmp_path)
    out = tmp_path / "out.jsonl"
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    done = _export(db, "-o", str(tmp_path / "stdout"), stdout=out)
    assert done.returncode == 2, done.stderr
    assert "-o -" in done.stderr
    assert (tmp_path / "stdout").is_symlink()
    assert out.read_bytes() == b""


def test_windows_line_ends_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export checked out with CRLF line ends (git's autocrlf) reads the same."""
    export = tmp_path / "crlf.jsonl"
    export.write_bytes(b"".join((json.dumps(_line(i)) + "\r\n").encode() for i in (1, 2)))
    run = run_cli(capsys, ["stale", "--from", str(export), "--format", "json"])
    assert run.code == 0, run.err
    assert json.loads(run.out)["checked"] == 2


def test_stale_from_an_export_checks_one_project_in_the_library(tmp_path: Path) -> None:
    from explomemo.memos.exchange import export_memos, read_export, stale_from_export

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a\n")
    with open_cache(tmp_path / "m.db") as cache:
        for project in ("p", "q"):
            cache.record(
                question="q", conclusion="c", project=project, files=["a.py"], root=str(root)
            )
        export = tmp_path / "memos.jsonl"
        export.write_text("".join(line + "\n" for line in export_memos(cache)))
    (root / "a.py").write_text("changed\n")
    memos = read_export(export)
    assert stale_from_export(memos, str(root)).checked == 2
    report = stale_from_export(memos, str(root), project="q")
    assert report.checked == 1 and [entry.project for entry in report.stale] == ["q"]
    with pytest.raises(InputError, match="project"):
        stale_from_export(memos, str(root), project=" ")
