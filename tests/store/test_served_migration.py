"""Migration 0007 (served memos) on a database made before it: a command that only reads
migrates it, and its memos are then counted when served."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import invoke_cli, open_cache

from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations


def test_stats_migrates_a_database_made_before_served_memos(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "a.py").write_bytes(b"a" * 99 + b"\n")
    old = [m for m in load_migrations() if m.number < 7]
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: old)
        patch.setattr(store_module, "shipped_migrations", lambda: [m.name for m in old])
        Store.open(db_path).close()
        with open_cache(db_path) as cache:
            cache.record(
                question="Where is A?", conclusion="a.py", files=["a.py"], project="shop",
                root=str(root),
            )  # fmt: skip
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
