"""The store: migrations shipped in the wheel, applied on open, never downgraded."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import xxhash

from explomemo.cli.main import main
from explomemo.clients.hooks.run import run_hook
from explomemo.errors import StoreError
from explomemo.memos.cache import MemoCache
from explomemo.store import database as store_module
from explomemo.store.database import Migration, Store, database_path, load_migrations

PROJECT = Path(__file__).resolve().parent.parent.parent


def _database_with_migrations(db: Path, numbers: set[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A database made by an explomemo that shipped only these migrations (as they were
    merged out of number order: 0001, 0002 and 0005, then 0004 too)."""

    def shipped(migration: Migration) -> Migration:
        if 4 in numbers:
            return migration
        # Without 0004 there was no snapshot for 0005 to collect.
        lines = migration.sql.splitlines(keepends=True)
        return migration._replace(sql="".join(x for x in lines if "snapshots" not in x))

    with monkeypatch.context() as patch:
        patch.setattr(
            store_module, "load_migrations", lambda: [
                shipped(m) for m in load_migrations() if m.number in numbers
            ],
        )  # fmt: skip
        Store.open(db).close()


def test_new_database_is_migrated_in_wal_mode(db_path: Path) -> None:
    store = Store.open(db_path)
    latest = load_migrations()[-1].number
    assert store.schema_version() == latest
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}
    assert {
        "memos",
        "memo_files",
        "file_stats",
        "embedding_cache",
        "memos_fts",
        "_sqlite_migrations",
    } <= tables
    store.close()
    assert Store.open(db_path).schema_version() == latest  # reopening changes nothing


def test_the_write_connection_has_room_for_an_import(db_path: Path) -> None:
    """An import is one transaction: with SQLite's 2 MB default cache it spilled pages
    to the file mid-way; the write connection's cache is WRITE_CACHE_KIB (32 MB)."""
    store = Store.open(db_path)
    try:
        assert store.conn.execute("PRAGMA cache_size").fetchone()[0] == -32_768
    finally:
        store.close()


def test_newer_schema_is_refused_untouched(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Store.open(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA user_version = 999")
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match="schema version 999, newer than this explomemo"):
        Store.open(db_path)
    assert main(["--db", str(db_path), "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(db_path) in err and "upgrade explomemo" in err
    assert db_path.read_bytes() == before


def test_not_a_database_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("these are my notes, not a database\n" * 200)
    before = bogus.read_bytes()
    assert main(["--db", str(bogus), "stale"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"explomemo: error: database {bogus} is damaged or is not an")
    assert "move it aside" in err and err.count("\n") == 1
    assert bogus.read_bytes() == before


def test_default_database_location_honours_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that writes creates the database where EXPLOMEMO_DB says, with its
    folders; one that only reads then finds it there."""
    target = tmp_path / "deep" / "er" / "x.db"
    monkeypatch.setenv("EXPLOMEMO_DB", str(target))
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    assert main(["list"]) == 2
    assert not target.parent.exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["import", "--json", str(empty)]) == 0
    assert target.is_file()
    assert main(["list"]) == 0


def test_wheel_ships_the_migrations(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(PROJECT),
        ],
        check=True,
    )
    wheel = next(tmp_path.glob("explomemo-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n for n in names if n.startswith("explomemo/migrations/"))
    assert shipped == sorted(
        f"explomemo/migrations/{p.name}" for p in (PROJECT / "migrations").glob("*.sql")
    )
    assert "explomemo/recall/model/tokenizer.json" in names
    assert "explomemo/recall/model/model.onnx" in names
    assert "explomemo/py.typed" in names


def test_tests_never_touch_the_real_user_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autouse fixtures of conftest.py point the default database at a temporary HOME."""
    import pwd

    real_home = pwd.getpwuid(os.getuid()).pw_dir
    assert os.environ["HOME"] != real_home
    monkeypatch.delenv("EXPLOMEMO_DB")
    default = str(database_path())
    assert default.startswith(os.environ["HOME"] + "/"), default
    assert not default.startswith(real_home + "/")


@pytest.mark.parametrize("numbers", [{1, 2, 5}, {1, 2, 4, 5}])
def test_a_database_that_skipped_a_migration_is_migrated(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    numbers: set[int],
) -> None:
    db = tmp_path / "skipped.db"
    _database_with_migrations(db, numbers, monkeypatch)
    root = tmp_path / "shop"
    root.mkdir()
    (root / "retry.py").write_text("RETRIES = 3\n")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (5,)
        # A memo as that version wrote it (no blob id, no identifiers, no second vector).
        conn.execute(
            "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
            " recorded_at) VALUES (1, 'shop', 'Where is the retry policy?',"
            " 'where is the retry policy?', 'RETRIES in retry.py', ?, '2026-01-01T00:00:00Z')",
            (str(root),),
        )
        conn.execute(
            "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES (1, 'retry.py',"
            " ?, ?, 12)",
            (
                hashlib.sha256(b"RETRIES = 3\n").hexdigest(),
                xxhash.xxh3_128_hexdigest(b"RETRIES = 3\n"),
            ),
        )
        conn.execute(
            "INSERT INTO memos_fts (rowid, question, conclusion, paths, project) VALUES"
            " (1, 'Where is the retry policy?', 'RETRIES in retry.py', 'retry.py', 'shop')"
        )

    def applied() -> list[str]:
        with sqlite3.connect(db) as conn:
            return [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")]

    assert len(applied()) == len(numbers)
    # A hook that only reads migrates it, as a command would, and answers from it.
    out, err = io.BytesIO(), io.BytesIO()
    payload = json.dumps({"cwd": str(root), "source": "startup"}).encode()
    run_hook("session-start", db=db, project=None, stdin=io.BytesIO(payload), stdout=out,
             stderr=err)  # fmt: skip
    assert err.getvalue() == b""
    assert "1 fresh memo of project 'shop'" in out.getvalue().decode()
    assert applied() == [m.name for m in load_migrations()]
    # Every command then works on it.
    for args in (
        ["stale", "--check"],
        ["recall", "--project", "shop", "--root", str(root), "--json", "retry policy"],
        ["record", "--root", str(root), "--question", "q", "--conclusion", "c", "retry.py"],
        ["show", "1"],
    ):
        assert main(["--db", str(db), *args]) == 0, capsys.readouterr().err
    out = io.BytesIO()
    run_hook("session-start", db=db, project=None, stdin=io.BytesIO(payload), stdout=out)
    assert "2 fresh memos of project 'shop'" in out.getvalue().decode()


def test_collect_snapshots_deletes_only_unused_contents_and_counts_them(
    tmp_path: Path, words_cache: MemoCache
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A\n")
    words_cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
    used = hashlib.sha256(b"A\n").hexdigest()
    # More than one batch of SQL variables: the counts of every batch add up.
    unused = [f"{n:064x}" for n in range(store_module._BATCH + 2)]
    store = words_cache.store
    with store.write() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO snapshots (sha256, codec, data) VALUES (?, 'raw', x'00')",
            [(sha,) for sha in (used, *unused)],
        )
        assert store.collect_snapshots(conn, [used, *unused, "f" * 64]) == len(unused)
        assert store.collect_snapshots(conn, [used, *unused]) == 0
        assert store.snapshot_contents(conn, [used, *unused]) == {used}
        assert used > unused[-1]  # in the last batch, after every unused one


def test_giving_blob_ids_reads_only_the_rows_without_one(db_path: Path) -> None:
    """After each record the snapshot writer gives its contents' blob ids to the memo files
    of the same content without one; with only the index on sha256 that reads every row of
    a content most memos rest on, under the write lock."""
    store = Store.open(db_path)
    statements: list[str] = []
    try:
        with store.write() as conn:
            conn.set_trace_callback(statements.append)
            store.set_git_blobs(conn, [("a" * 64, "b" * 40)])
            conn.set_trace_callback(None)
            (update,) = [s for s in statements if s.lstrip().upper().startswith("UPDATE")]
            plan = " ".join(str(row) for row in conn.execute(f"EXPLAIN QUERY PLAN {update}"))
    finally:
        store.close()
    assert "memo_files_without_blob" in plan, plan
