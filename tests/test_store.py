"""The store: migrations shipped in the wheel, applied on open, never downgraded."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from explomemo.cli import main
from explomemo.errors import StoreError
from explomemo.store import Store, default_db_path, load_migrations

PROJECT = Path(__file__).resolve().parent.parent


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
    target = tmp_path / "deep" / "er" / "x.db"
    monkeypatch.setenv("EXPLOMEMO_DB", str(target))
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    assert main(["list"]) == 0
    assert target.is_file()


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
    assert "explomemo/model/tokenizer.json" in names


def test_tests_never_touch_the_real_user_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autouse fixtures of conftest.py point the default database at a temporary HOME."""
    import pwd

    real_home = pwd.getpwuid(os.getuid()).pw_dir
    assert os.environ["HOME"] != real_home
    monkeypatch.delenv("EXPLOMEMO_DB")
    default = str(default_db_path())
    assert default.startswith(os.environ["HOME"] + "/"), default
    assert not default.startswith(real_home + "/")
