"""The pending-captures file (store/pending.py): appends are never lost, whoever claims the
file; a writer that died leaves its claimed file to the next; a failed store gives the lines
back."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from explomemo.store import pending
from explomemo.store.database import Store
from explomemo.store.pending import Capture, CapturedFile


def captures(claimed: list[Path]) -> list[Capture]:
    """The captures the claimed files hold, in order."""
    return [capture for _, capture in pending.lines(claimed) if capture is not None]


def a_capture(n: int, root: str = "/r") -> Capture:
    row = CapturedFile("a.py", f"{n:064x}", "0" * 32, 1, None)
    return Capture("p", f"question {n}?", "answer", root, "2026-11-30T10:00:00Z", [row], [])


def test_a_line_round_trips_with_its_snapshots() -> None:
    capture = a_capture(1)._replace(snapshots=[("f" * 64, "zlib", b"\x00\xffdata")])
    assert pending.from_line(pending.to_line(capture)) == capture
    assert pending.from_line(b'{"project": "p"}\n') is None
    assert pending.from_line(b"{cut by a cra") is None
    for files in ([], capture.files * 65, [capture.files[0]._replace(size="1")]):
        assert pending.from_line(pending.to_line(capture._replace(files=files))) is None


def test_appends_racing_claims_are_all_kept(tmp_path: Path) -> None:
    db = tmp_path / "memos.db"
    claimed: list[Path] = []
    done = threading.Event()

    def claimer() -> None:
        while not done.is_set():
            claimed.extend(pending.claim(db))

    thread = threading.Thread(target=claimer)
    thread.start()
    try:
        for n in range(300):
            pending.keep(db, a_capture(n))
    finally:
        done.set()
        thread.join()
    claimed.extend(pending.claim(db))
    found = captures(claimed)
    assert sorted(c.question for c in found) == sorted(f"question {n}?" for n in range(300))
    for path in claimed:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_empty_pending_file_is_not_claimed(tmp_path: Path) -> None:
    """An append creates the file before it locks and writes it; a claim that took the
    empty file would send the append round again, and a writer claiming over and over
    could make it give up (the racing test above failed so in CI, 1 run in many)."""
    db = tmp_path / "memos.db"
    path = pending.pending_path(db)
    path.touch(0o600)
    assert not pending.waiting(db)
    assert pending.claim(db) == []
    assert path.exists() and list(tmp_path.glob("*.claimed")) == []
    pending.keep(db, a_capture(1))
    assert pending.waiting(db)
    (claimed,) = pending.claim(db)
    assert [c.question for c in captures([claimed])] == ["question 1?"]


def test_a_file_claimed_by_a_process_that_died_is_stored_by_the_next_writer(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memos.db"
    Store.open(db).close()
    pending.keep(db, a_capture(1, str(tmp_path)))
    code = (
        "import os, sys\nfrom pathlib import Path\nfrom explomemo.store import pending\n"
        f"pending.claim(Path({str(db)!r}))\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    (left,) = tmp_path.glob("*.claimed")
    assert not pending.pending_path(db).exists()
    store = Store.open(db)
    try:
        with store.write():
            pass
        with store.read() as conn:
            assert [m.question for m in store.memos(conn)] == ["question 1?"]
    finally:
        store.close()
    assert not left.exists() and list(tmp_path.glob("*.claimed")) == []


def test_captures_that_cannot_be_stored_go_back_to_the_pending_file(tmp_path: Path) -> None:
    db = tmp_path / "memos.db"
    for n in range(3):
        pending.keep(db, a_capture(n))
    claimed = pending.claim(db)
    pending.keep(db, a_capture(9))  # appended after the claim: to a new file
    pending.give_back(db, claimed)
    assert all(not path.exists() for path in claimed)
    back = captures([pending.pending_path(db)])
    assert sorted(c.question for c in back) == [f"question {n}?" for n in (0, 1, 2, 9)]
    assert stat.S_IMODE(os.stat(pending.pending_path(db)).st_mode) == 0o600


def test_a_write_passes_over_an_empty_pending_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that died between creating the file and writing its line leaves it empty,
    and no claim takes it: the writes after a store's first only look at its size (they
    claimed it each time, a folder listing, an open and a lock, while it was there)."""
    db = tmp_path / "memos.db"
    store = Store.open(db)
    pending.pending_path(db).touch(0o600)
    try:
        with store.write():
            pass
        claims: list[Path] = []
        monkeypatch.setattr(pending, "claim", lambda path: claims.append(path) or [])
        with store.write():
            pass
    finally:
        store.close()
    assert claims == []
