"""How import's work grows with the export: in proportion, never with its square."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import xxhash

from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import import_memos, read_export

CONTENT = b"x = 1\n"


def _export(path: Path, count: int) -> Path:
    """An export as earlier versions wrote it: no git blob ids, every memo on one file."""
    sha256 = hashlib.sha256(CONTENT).hexdigest()
    xxh3 = xxhash.xxh3_128_hexdigest(CONTENT)
    lines = (
        json.dumps(
            {
                "id": i,
                "project": "p",
                "question": f"question {i}?",
                "conclusion": f"conclusion {i}",
                "recorded_at": "2026-01-01T00:00:00Z",
                "files": [{"path": "a.py", "sha256": sha256, "xxh3": xxh3, "size": len(CONTENT)}],
            }
        )
        for i in range(1, count + 1)
    )
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _steps(tmp_path: Path, count: int) -> int:
    """SQLite virtual-machine steps (in thousands) of importing ``count`` such memos."""
    memos = read_export(_export(tmp_path / f"export-{count}.jsonl", count))
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    with MemoCache.open(tmp_path / f"memos-{count}.db") as cache:
        cache.store.conn.set_progress_handler(step, 1000)
        result = import_memos(cache, memos, str(tmp_path))
    assert result.added == count
    return steps


def test_an_export_without_blob_ids_imports_in_linear_work(tmp_path: Path) -> None:
    """Finding 6: an export without git blob ids (as earlier versions wrote), every line
    resting on one file, imported in quadratic time (10k lines 24 s, 40k 459 s), in one
    write transaction that held off every other writer. Counted in SQLite's own steps,
    not seconds: twice the lines cost about twice the work."""
    small, large = _steps(tmp_path, 1000), _steps(tmp_path, 2000)
    assert large < 2.5 * small, (small, large)
