"""A writer killed with SIGKILL at random points leaves a whole database."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from helpers import (
    assert_whole,
    counts,
    go,
    half_memos,
    integrity,
    kill_all,
    open_cache,
    start_child,
)

KILLS = 20


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_sigkill_at_random_points_leaves_no_half_memo(tmp_path: Path) -> None:
    """A writer killed with SIGKILL at random points leaves a whole database."""
    root = tmp_path / "root"
    root.mkdir()
    for i in range(12):
        (root / f"f{i:02d}.py").write_text(f"# file {i}\n" * (50 * (i + 1)))
    db = tmp_path / "crash.db"
    rng = random.Random(20260101)
    grew = 0
    for attempt in range(KILLS):
        proc = start_child("crash", db, root, attempt)
        try:
            go([proc])
            if attempt % 5 == 0:
                # Early: while the database is being opened, created or migrated.
                time.sleep(rng.uniform(0.0, 0.08))
            else:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                assert line.strip() == "writing", (line, proc.stderr.read() if proc.stderr else "")
                time.sleep(rng.uniform(0.0, 0.4))
            assert proc.poll() is None, "the writer stopped before it was killed"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.returncode == -signal.SIGKILL
        finally:
            kill_all([proc])
        if not db.exists():
            continue
        assert integrity(db) == "ok", f"after kill {attempt}"
        assert half_memos(db) == {}, f"after kill {attempt}"
        before = counts(db)["memos"]
        grew += before > 0
        # The next explomemo run opens it and works on it normally.
        with open_cache(db) as cache:
            listed = cache.list()
            assert len(listed) == before
            assert all(m.files > 0 for m in listed)
            cache.stale_report()
            cache.record(
                question="after the crash",
                conclusion="still works",
                files=["f00.py"],
                project="p0",
                root=str(root),
            )
    assert grew >= KILLS // 2, "the writer never got to write: the kills proved nothing"
    assert_whole(db)
