"""Migration 0005: questions that are now "the same question" are merged, keeping the newest."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from helpers import FULL_WIDTH, NFC, NFD, assert_whole, invoke_cli, open_cache

from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations

CIRCLED = "How does step ① reach step ②?"


def _old_key(question: str) -> str:
    """The key of migrations 0001-0002: trimmed, white space collapsed, case-folded."""
    return " ".join(question.split()).casefold()


def _old_database(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as explomemo with migrations 0001-0002 made it."""
    old = [m for m in load_migrations() if m.number <= 2]
    assert [m.number for m in old] == [1, 2]
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: old)
        store = Store.open(db)
    try:
        assert store.schema_version() == 2
        memos = [
            # (id, project, question, recorded_at, files)
            (1, "p", NFC, "2026-01-01T00:00:00Z", ["a.py"]),
            (2, "p", NFD, "2026-02-01T00:00:00Z", ["b.py"]),  # newer: stays
            (3, "p", "where is the retry policy?", "2026-03-01T00:00:00Z", ["a.py"]),
            (4, "p", FULL_WIDTH, "2026-03-01T00:00:00Z", ["b.py"]),  # same time, higher id
            (5, "p", CIRCLED, "2026-05-01T00:00:00Z", ["a.py", "b.py"]),  # newer: stays
            (6, "p", "HOW DOES STEP 1 REACH STEP 2?", "2026-04-01T00:00:00Z", ["b.py"]),
            (7, "q", NFC, "2026-01-01T00:00:00Z", ["a.py"]),  # another project
            # Two memos of which one's new key ("ix") is the other's stored key.
            (8, "r", "Ⅸ", "2026-01-01T00:00:00Z", ["a.py"]),
            (9, "r", "ﬀ", "2026-01-01T00:00:00Z", ["a.py"]),
        ]
        with store.write() as conn:
            # Written as schema 2 has it (today's save_memo writes newer columns).
            for memo_id, project, question, recorded_at, files in memos:
                conn.execute(
                    "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                    " recorded_at) VALUES (?, ?, ?, ?, ?, '/r', ?)",
                    (memo_id, project, question, _old_key(question), f"conclusion {memo_id}",
                     recorded_at),
                )  # fmt: skip
                conn.executemany(
                    "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size)"
                    " VALUES (?, ?, 'aaaa', 'bbbb', 1)",
                    [(memo_id, f) for f in files],
                )
                conn.execute(
                    "INSERT INTO memos_fts (rowid, question, conclusion, paths, project)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (memo_id, question, f"conclusion {memo_id}", " ".join(files), project),
                )
            # A key left by another rule: memo 8's new key is memo 9's stored one,
            # and the pair is unique at every row.
            conn.execute("UPDATE memos SET question_key = 'ix' WHERE id = 9")
    finally:
        store.close()


def test_migration_merges_questions_that_are_now_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Questions that differ only by Unicode normalization, case or white space are one memo."""
    db = tmp_path / "old.db"
    _old_database(db, monkeypatch)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM memos").fetchone() == (9,)
    run = invoke_cli(["--db", str(db), "list", "--json"])  # opening migrates
    assert run.code == 0, run.err
    listed = {m["id"]: m for m in json.loads(run.out)}
    assert sorted(listed) == [2, 4, 5, 7, 8, 9]
    assert listed[5]["files"] == 2 and listed[2]["question"] == NFD
    conn = sqlite3.connect(db)
    try:
        keys = dict(conn.execute("SELECT id, question_key FROM memos"))
        files = sorted(conn.execute("SELECT DISTINCT memo_id FROM memo_files"))
        fts = sorted(r[0] for r in conn.execute("SELECT rowid FROM memos_fts"))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    from explomemo.inputs import question_key

    assert keys == {i: question_key(listed[i]["question"]) for i in listed}
    assert keys[2] == question_key(NFC) and keys[4] == "where is the retry policy?"
    assert files == [(i,) for i in sorted(listed)] and fts == sorted(listed)
    assert version == load_migrations()[-1].number
    assert_whole(db)
    # The merged memo is the one a record of the same question replaces.
    with open_cache(db) as cache:
        root = tmp_path / "root"
        root.mkdir()
        (root / "a.py").write_text("a\n")
        again = cache.record(
            question=NFC.upper(), conclusion="c", project="p", files=["a.py"], root=str(root)
        )
    assert again.replaced and again.id == 2


def test_migration_leaves_a_question_that_is_not_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row only another program could write (a BLOB question) keeps its key; the
    migration does not fail on it."""
    db = tmp_path / "old.db"
    _old_database(db, monkeypatch)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memos SET question = X'C0FF', question_key = 'blob' WHERE id = 7")
    Store.open(db).close()
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT question, question_key FROM memos WHERE id = 7").fetchone()
    assert row == (b"\xc0\xff", "blob")


def test_migration_collects_the_snapshots_of_the_memos_it_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database that had 0004 (snapshots) before 0005: the older memo of two questions
    now the same goes, and so does every snapshot only it rested on."""
    db = tmp_path / "v4.db"
    with monkeypatch.context() as patch:
        patch.setattr(
            store_module, "load_migrations", lambda: [m for m in load_migrations() if m.number <= 4]
        )
        Store.open(db).close()
    contents = {name: f"{name} = 1\n".encode() for name in ("old", "new", "shared")}
    sha = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (4,)
        for memo_id, question, recorded_at, names in (
            (1, NFC, "2026-01-01T00:00:00Z", ["old", "shared"]),
            (2, NFD, "2026-02-01T00:00:00Z", ["new", "shared"]),  # newer: stays
        ):
            conn.execute(
                "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                " recorded_at) VALUES (?, 'p', ?, ?, 'c', '/r', ?)",
                (memo_id, question, _old_key(question), recorded_at),
            )
            conn.executemany(
                "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES (?, ?, ?, ?, ?)",
                [(memo_id, f"{n}.py", sha[n], "0" * 32, len(contents[n])) for n in names],
            )
            conn.execute(
                "INSERT INTO memos_fts (rowid, question, conclusion, paths, name_parts, project)"
                " VALUES (?, ?, 'c', '', '', 'p')",
                (memo_id, question),
            )
        conn.executemany(
            "INSERT INTO snapshots (sha256, codec, data) VALUES (?, 'raw', ?)",
            [(sha[n], contents[n]) for n in contents],
        )
    run = invoke_cli(["--db", str(db), "list", "--json"])  # opening migrates
    assert run.code == 0, run.err
    assert [m["id"] for m in json.loads(run.out)] == [2]
    with sqlite3.connect(db) as conn:
        kept = {row[0] for row in conn.execute("SELECT sha256 FROM snapshots")}
    assert kept == {sha["new"], sha["shared"]}
    assert_whole(db)


def test_migration_0006_gives_every_memo_of_todays_release_origin_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database as the release before origin made it (migrations 0001-0005), with a memo
    recorded through it: opening it adds ``origin``, ``agent`` for that memo, and the
    memo keeps everything else."""
    db = tmp_path / "v5.db"
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a = 1\n")
    with monkeypatch.context() as patch:
        patch.setattr(
            store_module, "load_migrations", lambda: [m for m in load_migrations() if m.number <= 5]
        )
        patch.setattr(
            store_module,
            "shipped_migrations",
            lambda: [m.name for m in load_migrations() if m.number <= 5],
        )
        store = Store.open(db)
        try:
            assert store.schema_version() == 5
            with store.write() as conn:
                columns = [row[1] for row in conn.execute("PRAGMA table_info(memos)")]
                assert "origin" not in columns
                conn.execute(
                    "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                    " recorded_at) VALUES (7, 'p', 'Where?', 'where?', 'Here.', ?,"
                    " '2026-11-30T10:00:00Z')",
                    (str(root),),
                )
                conn.execute(
                    "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size)"
                    " VALUES (7, 'a.py', ?, '0', 6)",
                    (hashlib.sha256(b"a = 1\n").hexdigest(),),
                )
                conn.execute(
                    "INSERT INTO memos_fts (rowid, question, conclusion, paths, name_parts,"
                    " project) VALUES (7, 'Where?', 'Here.', 'a.py', '', 'p')"
                )
        finally:
            store.close()
    run = invoke_cli(["--db", str(db), "list", "--json"])  # opening migrates
    assert run.code == 0, run.err
    (memo,) = json.loads(run.out)
    assert (memo["id"], memo["question"], memo["origin"], memo["files"]) == (
        7,
        "Where?",
        "agent",
        1,
    )
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT origin FROM memos").fetchall() == [("agent",)]
        assert conn.execute("PRAGMA user_version").fetchone() == (load_migrations()[-1].number,)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE memos SET origin = 'other'")
    assert_whole(db)
