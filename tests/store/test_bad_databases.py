"""Bad databases: corrupt, not SQLite, another program's, newer than the code,
read-only, on a full disk. Each is one clear line naming the path and what to
do, exit code 2, and the bad file is left byte for byte as it was."""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import (
    EMBEDDINGS_OFF,
    PYTHON,
    assert_one_error_line,
    cli_subprocess,
    counts,
    immutable,
    integrity,
    invoke_cli,
    open_cache,
    sha256_bytes,
)

MEMOS = 30


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a = 1\n")
    return root


def make_good_db(path: Path, root: Path, n: int = MEMOS) -> Path:
    """A healthy explomemo database with ``n`` memos, closed (WAL folded back in)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_cache(path) as cache:
        for i in range(n):
            cache.record(
                question=f"question q{i}",
                conclusion=f"conclusion {i} " * 300,
                files=["a.py"],
                project="p",
                root=str(root),
            )
    assert not Path(f"{path}-wal").exists()
    return path


def _overwrite(path: Path, offset: int, length: int) -> None:
    junk = random.Random(offset).randbytes(length)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(junk)


def corrupt_header(path: Path, root: Path) -> None:
    make_good_db(path, root)
    _overwrite(path, 100, 3900)  # page 1 after the file header: the schema


def corrupt_memos_table(path: Path, root: Path) -> None:
    make_good_db(path, root)
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    rootpage = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'memos'").fetchone()[0]
    conn.close()
    _overwrite(path, (rootpage - 1) * page_size, page_size)


def not_sqlite_random(path: Path, root: Path) -> None:
    path.write_bytes(random.Random(7).randbytes(8192))


def not_sqlite_text(path: Path, root: Path) -> None:
    path.write_text("this is my shopping list, not a database\n" * 100)


def newer_schema_wal(path: Path, root: Path) -> None:
    make_good_db(path, root)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def newer_schema_rollback_journal(path: Path, root: Path) -> None:
    """A newer explomemo might not use WAL: the file must still be left as it is."""
    make_good_db(path, root)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def another_programs_database(path: Path, root: Path) -> None:
    """A valid SQLite file of some other program (user_version 0, its own tables)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE bookmarks (url TEXT)")
    conn.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
    conn.commit()
    conn.close()


BAD_KINDS: list[tuple[str, Callable[[Path, Path], None], tuple[str, ...]]] = [
    ("corrupt-schema-page", corrupt_header, ("damaged",)),
    ("corrupt-memos-table", corrupt_memos_table, ("damaged",)),
    ("not-sqlite-random-bytes", not_sqlite_random, ("not an explomemo database",)),
    ("not-sqlite-text", not_sqlite_text, ("not an explomemo database",)),
    ("newer-schema-wal", newer_schema_wal, ("99", "upgrade explomemo")),
    ("newer-schema-rollback-journal", newer_schema_rollback_journal, ("99", "upgrade")),
    ("another-programs-sqlite", another_programs_database, ("not an explomemo database",)),
]


def _commands(root: Path, tmp: Path) -> dict[str, list[str]]:
    export = tmp / "in.jsonl"
    export.write_text(
        '{"id":1,"project":"p","question":"imported q","conclusion":"c","root":"/x",'
        '"recorded_at":"2026-01-01T00:00:00Z","files":[{"path":"a.py","sha256":"'
        + "0" * 64
        + '","xxh3":"'
        + "0" * 32
        + '","size":6}]}\n'
    )
    return {
        "list": ["list"],
        "stale": ["stale", "--project", "p"],
        "stale-all": ["stale", "--format", "json"],
        "recall": ["recall", "--project", "p", "--root", str(root), "question q1"],
        "record": [
            "record",
            "--project",
            "p",
            "--root",
            str(root),
            "--question",
            "new q",
            "--conclusion",
            "c",
            "a.py",
        ],
        "record-same": [
            "record",
            "--project",
            "p",
            "--root",
            str(root),
            "--question",
            "question q1",
            "--conclusion",
            "c",
            "a.py",
        ],
        "show": ["show", "1"],
        "forget": ["forget", "1"],
        "export": ["export"],
        "import": ["import", "--json", str(export)],
    }


COMMANDS = [
    "list",
    "stale",
    "stale-all",
    "recall",
    "record",
    "record-same",
    "show",
    "forget",
    "export",
    "import",
]


# Damage inside a table is found only when that table is read (see the report):
# serve cannot refuse it before serving without a full integrity check.
OPEN_TIME_KINDS = [k for k in BAD_KINDS if k[0] != "corrupt-memos-table"]


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a file or folder unwritable, as root too (chattr +i), else by mode bits."""
    if os.geteuid() == 0:
        with immutable(path):
            yield
        return
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        path.chmod(mode)


def _record(db: Path, root: Path) -> list[str]:
    return [
        "--db",
        str(db),
        "record",
        "--project",
        "p",
        "--root",
        str(root),
        "--question",
        "a new question",
        "--conclusion",
        "c",
        "a.py",
    ]


BIG_CONCLUSION = " ".join(
    "".join(random.Random(i).choice("abcdefghijklmnop") for _ in range(7)) for i in range(2400)
)


def _limit_file_size(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


@contextlib.contextmanager
def tiny_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder``, then free ``leave`` bytes."""
    reserve = folder / "reserve"
    reserve.write_bytes(b"\0" * leave)
    chunk = b"\0" * 4096
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    reserve.unlink()


@pytest.mark.slow
@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("kind", "make", "fragments"), BAD_KINDS, ids=[k[0] for k in BAD_KINDS])
def test_bad_database_is_one_clear_line_and_left_untouched(
    tmp_path: Path,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    make: Callable[[Path, Path], None],
    fragments: tuple[str, ...],
    command: str,
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    db = tmp_path / "bad.db"
    make(db, project)
    before = sha256_bytes(db)
    run = invoke_cli(["--db", str(db), *_commands(project, tmp_path)[command]])
    assert_one_error_line(run, str(db), *fragments)
    assert run.out == ""
    assert sha256_bytes(db) == before, f"{kind}: the bad database was modified by {command}"


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("kind", "make", "fragments"), OPEN_TIME_KINDS, ids=[k[0] for k in OPEN_TIME_KINDS]
)
def test_serve_refuses_a_bad_database_before_serving(
    tmp_path: Path,
    project: Path,
    kind: str,
    make: Callable[[Path, Path], None],
    fragments: tuple[str, ...],
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    db = tmp_path / "bad.db"
    make(db, project)
    before = sha256_bytes(db)
    done = cli_subprocess(["--db", str(db), "serve"], stdin=subprocess.DEVNULL, timeout=30)
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("explomemo: error:"), done.stderr
    assert str(db) in lines[0]
    assert sha256_bytes(db) == before


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_mcp_server_on_a_newer_database_fails_without_touching_it(
    tmp_path: Path, project: Path
) -> None:
    """The in-process server cannot start on it; the file is unchanged."""
    from helpers import call_tool

    db = tmp_path / "newer.db"
    newer_schema_wal(db, project)
    before = sha256_bytes(db)
    with pytest.raises(BaseException) as caught:  # any failure to start
        call_tool(db, "memory_exploration_stale", {"project": "p", "root": str(project)})
    assert "schema version 99" in repr(caught.value) or "99" in str(caught.value)
    assert sha256_bytes(db) == before


# Read-only locations -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_read_only_database_file(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    db = make_good_db(tmp_path / "ro" / "memos.db", project)
    before = sha256_bytes(db)
    with read_only(db):
        line = assert_one_error_line(invoke_cli(_record(db, project)), str(db))
        assert "read-only" in line or "writable" in line
        listed = invoke_cli(["--db", str(db), "list"])
        if listed.code != 0:  # reading may work; if not, it is one clear line
            assert_one_error_line(listed, str(db))
    assert sha256_bytes(db) == before
    assert counts(db)["memos"] == MEMOS


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_database_in_a_read_only_folder(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    folder = tmp_path / "ro"
    db = make_good_db(folder / "memos.db", project)
    before = sha256_bytes(db)
    with read_only(folder):
        assert_one_error_line(invoke_cli(_record(db, project)), str(db))
        for argv in (["list"], ["stale"]):
            run = invoke_cli(["--db", str(db), *argv])
            if run.code != 0:
                assert_one_error_line(run, str(db))
        new = folder / "new.db"
        assert_one_error_line(invoke_cli(["--db", str(new), "list"]), str(new))
        deeper = folder / "sub" / "new.db"
        assert_one_error_line(invoke_cli(["--db", str(deeper), "list"]), str(deeper))
    assert sha256_bytes(db) == before
    assert not (folder / "new.db").exists() and not (folder / "sub").exists()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_database_on_a_read_only_mount(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    source = tmp_path / "src"
    db_src = make_good_db(source / "memos.db", project)
    before = sha256_bytes(db_src)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    bind = subprocess.run(
        ["mount", "--bind", str(source), str(mnt)], capture_output=True, check=False
    )
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    try:
        ro = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(mnt)], capture_output=True, check=False
        )
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.decode().strip()}")
        db = mnt / "memos.db"
        assert_one_error_line(invoke_cli(_record(db, project)), str(db))
        run = invoke_cli(["--db", str(db), "list"])
        if run.code != 0:
            assert_one_error_line(run, str(db))
        new = mnt / "fresh" / "memos.db"
        assert_one_error_line(invoke_cli(["--db", str(new), "list"]), str(new))
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, check=False)
    assert sha256_bytes(db_src) == before


@pytest.mark.slow
@pytest.mark.timeout(30)
@pytest.mark.parametrize("where", ["parent-is-a-file", "under-proc", "is-a-directory"])
def test_impossible_database_locations(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    if where == "parent-is-a-file":
        parent = tmp_path / "a_file"
        parent.write_text("x")
        db = parent / "memos.db"
    elif where == "under-proc":
        db = Path("/proc/explomemo-test/memos.db")
    else:
        db = tmp_path / "folder.db"
        db.mkdir()
    for argv in (["list"], ["stale"], _record(db, project)[2:]):
        run = invoke_cli(["--db", str(db), *argv])
        assert_one_error_line(run, str(db) if where != "is-a-directory" else db.name)
    if where == "parent-is-a-file":
        assert (tmp_path / "a_file").read_text() == "x"


@pytest.mark.slow
@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "socket", "dev-zero-link", "dev-null"])
def test_database_path_that_is_not_a_regular_file(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """--db naming a FIFO, socket or device: no hang, one line, and no wrong advice."""
    if kind == "fifo":
        db = tmp_path / "db.fifo"
        os.mkfifo(db)
    elif kind == "socket":
        db = tmp_path / "db.sock"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(db))
        sock.close()
    elif kind == "dev-zero-link":
        db = tmp_path / "zero.db"
        os.symlink("/dev/zero", db)
    else:
        db = Path("/dev/null")
    for argv in (["list"], _record(db, project)[2:]):
        line = assert_one_error_line(invoke_cli(["--db", str(db), *argv]), str(db))
        # It is not a matter of disk space: the message must not send the user there.
        assert "free disk space" not in line, line


# Full disk -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_file_size_limit_while_recording(tmp_path: Path, project: Path) -> None:
    """RLIMIT_FSIZE (no privileges needed): the write fails cleanly, nothing half written."""
    db = make_good_db(tmp_path / "memos.db", project)
    before_counts = counts(db)
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "explomemo",
            "--db",
            str(db),
            "record",
            "--project",
            "p",
            "--root",
            str(project),
            "--question",
            "too big to fit",
            "--conclusion",
            BIG_CONCLUSION[:19_999],
            "a.py",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **EMBEDDINGS_OFF},
        preexec_fn=_limit_file_size(40 * 1024),
    )
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("explomemo: error:"), done.stderr
    assert str(db) in lines[0]
    assert integrity(db) == "ok"
    assert counts(db) == before_counts


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("leave", [0, 96 * 1024], ids=["no-byte-left", "96k-left"])
def test_full_disk(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str], leave: int
) -> None:
    """A bad database file is one clear line naming the path and what to do, exit code 2, and it
    is left byte for byte as it was."""
    good = make_good_db(tmp_path / "good.db", project)
    with tiny_tmpfs(tmp_path / "tiny", "1m") as fs:
        db = fs / "memos.db"
        shutil.copyfile(good, db)
        before_counts = counts(db)
        _fill(fs, leave)
        run = invoke_cli(
            [*_record(db, project)[:-3], "--conclusion", BIG_CONCLUSION[:19_999], "a.py"]
        )
        line = assert_one_error_line(run, str(db))
        assert "disk" in line or "space" in line, line
        listed = invoke_cli(["--db", str(db), "list"])
        if listed.code != 0:
            assert_one_error_line(listed, str(db))
        (fs / "filler").unlink()
        assert integrity(db) == "ok"
        assert counts(db) == before_counts
        # With space again, it works.
        assert invoke_cli(_record(db, project)).code == 0
