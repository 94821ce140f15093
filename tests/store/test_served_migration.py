"""Migration 0007 (served memos) on a database made before it: a command that only reads
migrates it, and its memos are then counted when served."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import xxhash
from helpers import invoke_cli

from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations


def test_stats_migrates_a_database_made_before_served_memos(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "shop"
    root.mkdir()
    content = b"a" * 99 + b"\n"
    (root / "a.py").write_bytes(content)
    old = [m for m in load_migrations() if m.number < 7]
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: old)
        Store.open(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
            " recorded_at) VALUES (1, 'shop', 'Where is A?', 'where is a?', 'a.py', ?,"
            " '2026-01-01T00:00:00Z')",
            (str(root),),
        )
        conn.execute(
            "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES (1, 'a.py', ?,"
            " ?, 100)",
            (hashlib.sha256(content).hexdigest(), xxhash.xxh3_128_hexdigest(content)),
        )
        conn.execute(
            "INSERT INTO memos_fts (rowid, question, conclusion, paths, project)"
            " VALUES (1, 'Where is A?', 'a.py', 'a.py', 'shop')"
        )
    with sqlite3.connect(db_path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "memos" in tables and "served" not in tables
    base = ["--db", str(db_path)]
    run = invoke_cli([*base, "stats", "--json"])
    assert run.code == 0, run.err
    (project,) = json.loads(run.out)["projects"]
    assert (project["memos"], project["fresh"], project["served"]) == (1, 1, 0)
    assert invoke_cli([*base, "show", "1"]).code == 0
    (project,) = json.loads(invoke_cli([*base, "stats", "--json"]).out)["projects"]
    assert (project["served"], project["bytes_spared"]) == (1, 100)
