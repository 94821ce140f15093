"""One input rule for what capture stores (issue 36): a NUL or a lone surrogate in a
captured turn is cleaned, never stored, and a parked capture the store cannot take is set
aside, never tried again by every writer. Through the surfaces where each broke: the real
hook process, real ``record``, ``forget``, ``export``, ``import`` and ``stale --from``."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
import xxhash
from helpers import Repo, cli_subprocess, invoke_cli, open_cache
from test_capture import memos, question_turn, show, stop, write_transcript

from explomemo.check.hashing import git_blob_id
from explomemo.store import pending
from explomemo.store.database import Store
from explomemo.store.pending import Capture, CapturedFile, pending_path

HALF_AN_EMOJI = "\ud83d"  # what JSON.stringify writes for a string cut inside an emoji


def quarantine_path(db: Path) -> Path:
    """Where the docs say a capture no write can store is set aside."""
    return Path(f"{db}.quarantined-captures.jsonl")


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "shop")
    repo.write("src/auth.py", "def check(token):\n    return verify(token)\n")
    repo.write("src/tokens.py", "".join(f"# line {n}\n" for n in range(1, 31)))
    repo.write("src/crlf.py", "a = 1\r\nb = 2\r\n")
    repo.commit("code")
    return repo


# One input rule --------------------------------------------------------------------


def test_a_nul_and_half_an_emoji_in_a_captured_turn_are_cleaned_and_its_export_imports(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """A NUL is dropped and a lone surrogate becomes U+FFFD, in the question and the
    answer: the memo is stored (a lone surrogate lost it), and the export of it is one
    that ``import`` and ``stale --from --check`` read (a NUL made them refuse the file)."""
    prompt = f"where are tokens\x00 checked? {HALF_AN_EMOJI}"
    answer = f"Tokens are checked\x00 in src/auth.py: check() calls verify(). {HALF_AN_EMOJI}"
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop, prompt))
    assert stop(db_path, path, shop.path, last=answer, process=True) == (None, "")
    (memo,) = memos(db_path)
    assert memo["question"] == "where are tokens checked? \ufffd"
    shown = show(db_path, memo["id"], shop.path)
    assert (
        shown["conclusion"] == "Tokens are checked in src/auth.py: check() calls verify(). \ufffd"
    )
    export = tmp_path / "memos.jsonl"
    run = invoke_cli(["--db", str(db_path), "export", "--project", "shop", "-o", str(export)])
    assert run.code == 0, run.err
    assert "\\u0000" not in export.read_text() and "\\ud83d" not in export.read_text()
    fresh = tmp_path / "other.db"
    run = invoke_cli(["--db", str(fresh), "import", str(export), "--root", str(shop.path)])
    assert run.code == 0, run.err
    run = invoke_cli(["stale", "--from", str(export), "--root", str(shop.path), "--check"])
    assert run.code == 0, run.output


def test_a_nul_an_earlier_release_stored_is_exported_cleaned(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """Captures stored before this release may hold a NUL: ``export`` writes them
    cleaned, so the committed file imports everywhere; the database keeps them as they are."""
    store = Store.open(db_path)
    try:
        with store.write() as conn:
            store.save_capture(
                conn, a_capture(shop.path, "where is the\x00 cart?", "In\x00 cart.py.")
            )
    finally:
        store.close()
    export = tmp_path / "memos.jsonl"
    run = invoke_cli(["--db", str(db_path), "export", "-o", str(export)])
    assert run.code == 0, run.err
    (line,) = export.read_text().splitlines()
    assert json.loads(line)["question"] == "where is the cart?"
    assert json.loads(line)["conclusion"] == "In cart.py."
    run = invoke_cli(["--db", str(tmp_path / "b.db"), "import", str(export)])
    assert run.code == 0, run.err


# A pending capture that cannot be stored ---------------------------------------------


def a_capture(root: Path, question: str, conclusion: str = "In cart.py.", **change: Any) -> Capture:
    data = (root / "src/auth.py").read_bytes()
    row = CapturedFile(
        "src/auth.py",
        hashlib.sha256(data).hexdigest(),
        xxhash.xxh3_128_hexdigest(data),
        len(data),
        git_blob_id(data),
    )
    capture = Capture(
        "shop", question, conclusion, str(root), "2026-12-01T10:00:00Z", [row], snapshots=[]
    )
    return capture._replace(**change)


def test_a_parked_capture_the_store_refuses_is_set_aside_and_no_writer_fails(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """A capture parked while the database was locked, whose question ends in half an
    emoji (as an earlier release parked it): every ``record``, ``forget`` and Stop capture
    after it ended in a traceback, exit 1, claiming the file again. Now the first writer
    sets it aside in the quarantine file beside the database, says so in one line, and
    stores the good capture parked beside it; the writers after it say nothing."""
    with open_cache(db_path) as cache:
        cache.record(question="other?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    bad = a_capture(shop.path, f"where is the cart total computed? {HALF_AN_EMOJI}")
    good = a_capture(shop.path, "where is the tax computed?")
    pending.keep(db_path, bad)
    pending.keep(db_path, good)
    record = ["--db", str(db_path), "record", "--root", str(shop.path), "--question"]
    done = cli_subprocess([*record, "third?", "--conclusion", "c", "src/auth.py"])
    aside = quarantine_path(db_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert str(aside) in done.stderr and "lone surrogate" in done.stderr
    assert aside.read_bytes() == pending.to_line(bad)
    assert stat.S_IMODE(aside.stat().st_mode) == 0o600
    assert not pending_path(db_path).exists() and list(tmp_path.glob("**/*.claimed")) == []
    questions = {m["question"]: m["id"] for m in memos(db_path)}
    assert set(questions) == {"other?", "third?", "where is the tax computed?"}
    done = cli_subprocess(["--db", str(db_path), "forget", str(questions["other?"])])
    assert (done.returncode, done.stderr) == (0, "")
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    assert stop(db_path, path, shop.path, process=True) == (None, "")
    assert aside.read_bytes() == pending.to_line(bad)


def test_every_pending_line_a_write_cannot_store_is_set_aside(
    tmp_path: Path, db_path: Path, shop: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a capture (cut by a crash), a NUL in the answer, a size SQLite cannot hold, a
    path ``record`` refuses: each is set aside, the others are stored in the same write."""
    Store.open(db_path).close()
    good = a_capture(shop.path, "where is the tax computed?")
    huge = good.files[0]._replace(size=1 << 70)
    lines = [
        pending.to_line(a_capture(shop.path, "q1?", "with a\x00 NUL")),
        b'{"project": "shop", "question": "cut by a cra\n',
        pending.to_line(a_capture(shop.path, "q2?", files=[huge])),
        pending.to_line(
            a_capture(shop.path, "q3?", files=[good.files[0]._replace(path="a\x00.py")])
        ),
        pending.to_line(good),
    ]
    pending.append(pending_path(db_path), b"".join(lines))
    store = Store.open(db_path)
    try:
        with store.write():
            pass
        with store.read() as conn:
            assert [m.question for m in store.memos(conn)] == ["where is the tax computed?"]
    finally:
        store.close()
    assert quarantine_path(db_path).read_bytes() == b"".join(lines[:4])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "4 pending captures" in err, err


def test_the_lock_message_says_the_wait_the_hook_made(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """The Stop hook waits 50 ms for a lock; its line said "locked ... for 30 s"."""
    with open_cache(db_path) as cache:
        cache.record(question="other?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    holder = sqlite3.connect(db_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        answer, err = stop(db_path, path, shop.path)
    finally:
        holder.close()
    assert answer is None and "for 0.05 s" in err and "30 s" not in err, err
