"""Several processes on one database at once: writers never lose or duplicate a memo,
readers never fail, the database stays whole."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    assert_whole,
    go,
    kill_all,
    open_cache,
    spawn_child,
    start_child,
    wait_ready,
)

from explomemo.inputs import question_key

WRITERS = 4


PER_WRITER = 250


def _project_root(tmp_path: Path, n: int = 20) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(n):
        (root / f"mod{i:02d}.py").write_text(f"# module {i}\n" * (i + 1))
    return root


def _finish(proc: subprocess.Popen[str], timeout: float) -> dict[str, int]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"child failed (exit {proc.returncode}):\n{err}"
    assert err.strip() == "", f"child wrote to stderr:\n{err}"
    return json.loads(out.strip().splitlines()[-1])


OPENERS = 6


ROUNDS = 40


def _race_openers(tmp_path: Path, db: Path, root: Path) -> None:
    openers: list[subprocess.Popen[str]] = []
    try:
        openers = [spawn_child("opener", db, root, k, str(ROUNDS)) for k in range(OPENERS)]
        for proc in openers:
            wait_ready(proc)
        go(openers)
        for proc in openers:
            assert _finish(proc, timeout=60) == {"done": ROUNDS}
    finally:
        kill_all(openers)
    for j in range(ROUNDS):
        path = Path(f"{db}.{j}")
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT count(*) FROM memos").fetchone()[0] == OPENERS
            assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            conn.close()
        assert_whole(path)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    """Several processes on one database at once: writers never lose or duplicate a memo,
    readers never fail, the database stays whole."""
    root = _project_root(tmp_path)
    db = tmp_path / "shared.db"
    stop = tmp_path / "stop-readers"
    # Create the database first; the first open racing is the next test's subject.
    open_cache(db).close()
    writers: list[subprocess.Popen[str]] = []
    readers: list[subprocess.Popen[str]] = []
    try:
        for k in range(WRITERS):
            writers.append(start_child("writer", db, root, k, str(PER_WRITER)))
        for k in range(2):
            readers.append(start_child("reader", db, root, 100 + k, str(stop)))
        started = time.monotonic()
        go(writers + readers)
        try:
            results = [_finish(w, timeout=100) for w in writers]
        finally:
            stop.touch()
        reads = [_finish(r, timeout=30) for r in readers]
    finally:
        kill_all(writers + readers)
    elapsed = time.monotonic() - started
    assert [r["done"] for r in results] == [PER_WRITER] * WRITERS
    assert all(r["rounds"] > 0 for r in reads), reads

    expected = {
        question_key(f"How is module {k * 200 + i} wired to the rest?")
        for k in range(WRITERS)
        for i in range(PER_WRITER)
    }
    assert len(expected) == 3 * 200 + PER_WRITER
    conn = sqlite3.connect(db)
    try:
        keys = [r[0] for r in conn.execute("SELECT question_key FROM memos WHERE project = 'p'")]
        conclusions = dict(conn.execute("SELECT question_key, conclusion FROM memos"))
    finally:
        conn.close()
    assert len(keys) == len(set(keys)), "a question is stored twice"
    assert set(keys) == expected
    for key, conclusion in conclusions.items():
        n = int(key.split()[3])
        assert conclusion.startswith(f"module {n} by writer "), (key, conclusion)
    assert_whole(db)
    assert elapsed < 100


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_concurrent_first_open_of_a_new_database(tmp_path: Path) -> None:
    """Six processes create and migrate the same new database at the same moment (40 times)."""
    root = _project_root(tmp_path, 2)
    _race_openers(tmp_path, tmp_path / "deep" / "folder" / "new.db", root)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_concurrent_migration_of_an_empty_wal_database(tmp_path: Path) -> None:
    """Already in WAL mode, not yet migrated: six processes migrate it at once (40 times)."""
    root = _project_root(tmp_path, 2)
    db = tmp_path / "empty.db"
    for j in range(ROUNDS):
        conn = sqlite3.connect(f"{db}.{j}")
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        conn.close()
    _race_openers(tmp_path, db, root)
