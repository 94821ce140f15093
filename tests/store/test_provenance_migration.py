"""Migration 0010: a database made by the release before it keeps every memo, file,
identifier and vector through the rebuild of its memos table, and gains provenance."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import Repo, invoke_cli, open_cache

from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations


def _database_of_the_last_release(db: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memos recorded by the code with migrations 0001-0009, as the last release has it."""
    old = [m for m in load_migrations() if m.number <= 9]
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: old)
        patch.setattr(store_module, "shipped_migrations", lambda: [m.name for m in old])
        Store.open(db).close()
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA foreign_keys = ON")
            for memo_id, origin in ((1, "agent"), (2, "transcript")):
                conn.execute(
                    "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                    " recorded_at, origin, embedding) VALUES (?, 'shop', ?, ?, 'c', ?,"
                    " '2026-01-01T00:00:00Z', ?, x'00000000')",
                    (memo_id, f"q{memo_id}", f"q{memo_id}", str(root), origin),
                )
                conn.execute(
                    "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES"
                    " (?, 'a.py', 'aa', 'bb', 1)",
                    (memo_id,),
                )
                conn.execute(
                    "INSERT INTO memo_identifiers (project, identifier, memo_id) VALUES"
                    " ('shop', 'load_config', ?)",
                    (memo_id,),
                )
                conn.execute(
                    "INSERT INTO memos_without_repository (memo_id) VALUES (?)", (memo_id,)
                )
            conn.execute("INSERT INTO memos_without_identifiers (memo_id) VALUES (2)")
        assert Store.open(db).schema_version() == 9


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(sql).fetchall())


def test_migration_0010_keeps_every_memo_and_what_refers_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills a rebuild that drops a memo's files, identifiers or pending marks (dropping
    the old table deletes them by cascade), its vector, or its origin."""
    db = tmp_path / "memos.db"
    _database_of_the_last_release(db, tmp_path, monkeypatch)
    with sqlite3.connect(db) as conn:
        version = conn.execute("SELECT version FROM memo_version").fetchone()[0]
    with open_cache(db) as cache:
        assert cache.store.schema_version() == 10
    assert _rows(db, "SELECT memo_id, path FROM memo_files") == [(1, "a.py"), (2, "a.py")]
    assert _rows(db, "SELECT memo_id FROM memo_identifiers") == [(1,), (2,)]
    assert _rows(db, "SELECT memo_id FROM memos_without_identifiers") == [(2,)]
    assert _rows(
        db, "SELECT id, origin, imported, agent_type, cost_tokens, embedding FROM memos"
    ) == [
        (1, "agent", 0, None, None, b"\x00\x00\x00\x00"),
        (2, "transcript", 0, None, None, b"\x00\x00\x00\x00"),
    ]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # The rebuilt table keeps its triggers: a reader's copy of the memos is renewed.
        assert conn.execute("SELECT version FROM memo_version").fetchone()[0] > version
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"memos_inserted", "memos_updated", "memos_deleted", "memos_by_repository"} <= names
    assert not any(name.startswith("kept_") or name == "memos_0010" for name in names)


def test_a_memo_imported_into_a_migrated_database_says_so_and_its_origin_holds(
    tmp_path: Path,
) -> None:
    """Kills ``import`` leaving ``imported`` unset, and the shapes not showing it."""
    repo = Repo(tmp_path / "shop")
    repo.write("a.py", "A = 1\n")
    repo.commit("a")
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], root=str(repo.path))
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(export)]).exit_code == 0
    other = tmp_path / "other.db"
    assert (
        invoke_cli(["--db", str(other), "import", str(export), "--root", str(repo.path)]).exit_code
        == 0
    )
    listed = invoke_cli(["--db", str(other), "list", "--json"])
    assert '"imported": true' in listed.stdout
    assert '"imported"' not in invoke_cli(["--db", str(db), "list", "--json"]).stdout
    shown = invoke_cli(["--db", str(other), "show", "1"])
    assert "(imported: the claim of a committed export, not recorded here)" in shown.stdout
    # An export never carries the mark: the next teammate's import makes its own.
    again = invoke_cli(["--db", str(other), "export"]).stdout
    assert again == export.read_text() and "imported" not in again


def test_migration_0010_keeps_what_was_served_and_counts_delegations_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memo the last release counted as served (a recall) stays counted, fresh, with no
    tokens; a delegation answered from a memo is counted once migrated. Kills served rows
    lost or taken for stale by the new columns, and delegations without a place to go."""
    from explomemo.memos.savings import count_delegation

    db = tmp_path / "memos.db"
    _database_of_the_last_release(db, tmp_path, monkeypatch)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO served (session, memo_id, project, surface, bytes_spared, served_at)"
            " VALUES ('mcp:1', 1, 'shop', 'recall', 700, '2026-01-02T00:00:00Z')"
        )
    run = invoke_cli(["--db", str(db), "stats", "--json"])
    assert run.code == 0, run.err
    (project,) = json.loads(run.out)["projects"]
    assert (project["served"], project["bytes_spared"], project["tokens_spared"]) == (1, 700, 0)
    surfaces = {s["surface"]: s for s in project["surfaces"]}
    assert (surfaces["recall"]["served"], surfaces["recall"]["bytes_spared"]) == (1, 700)
    assert surfaces["delegation"] == {
        "surface": "delegation",
        "served": 0,
        "bytes_spared": 0,
        "fresh": 0,
        "stale": 0,
        "tokens_spared": 0,
    }
    assert _rows(db, "SELECT session, fresh, tokens_spared FROM served") == [("mcp:1", 1, 0)]
    store = Store.open(db)
    try:
        count_delegation(
            store, session="claude-code:s", project="shop", memo_id=2, fresh=True, tokens=78_000
        )
    finally:
        store.close()
    (project,) = json.loads(invoke_cli(["--db", str(db), "stats", "--json"]).out)["projects"]
    assert (project["served"], project["tokens_spared"], project["sessions"]) == (2, 78_000, 2)
