"""Content snapshots (changes/snapshots.py): kept or not, restored exactly or not at all, and the
snapshot writer under locks, limits and failures."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from helpers import (
    _blob_id,
    _done_while_locked,
    _export_line,
    _held_writer,
    open_cache,
)

from explomemo.changes import snapshots
from explomemo.changes.snapshots import SnapshotWriter
from explomemo.memos.exchange import (
    export_memos,
    import_memos,
    read_export,
)
from explomemo.store.database import Store


def _snapshot_rows(db: Path) -> dict[str, str]:
    """{SHA-256: codec} of every snapshot the database holds."""
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT sha256, codec FROM snapshots"))
    finally:
        conn.close()


def _kept_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root holding ``a.py`` (``A = 1``), recorded with snapshots on."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "on")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    return root


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[Store, SnapshotWriter]]:
    """A snapshot writer over a fresh database, and that database's store."""
    store = Store.open(tmp_path / "memos.db")
    writer = SnapshotWriter(store, keep_snapshots=True)
    try:
        yield store, writer
    finally:
        writer.close()
        store.close()


def _blob_ids(db: Path) -> list[tuple[str, str | None]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT path, git_blob FROM memo_files ORDER BY path").fetchall()


# Snapshots: kept or not, restored exactly or not at all ----------------------


@pytest.mark.parametrize(
    ("setting", "kept"),
    [
        ("off", False),
        ("0", False),
        ("false", False),
        ("no", False),
        (" OFF ", False),
        ("No", False),
        ("on", True),
        ("", True),
        ("1", True),
    ],
)
def test_explomemo_snapshots_turns_snapshots_off_by_each_of_its_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, kept: bool
) -> None:
    """Kills ``contents.enabled`` losing one of off, 0, false and no, its strip or its
    lower-casing. (Any other value is refused: tests/test_switches.py.)"""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    db = tmp_path / "memos.db"
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", setting)
    with open_cache(db) as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
        cache.wait_for_snapshots()
        (line,) = export_memos(cache)
    assert bool(_snapshot_rows(db)) is kept
    # The git blob id is kept either way.
    assert json.loads(line)["files"][0]["git_blob"] == _blob_id("A = 1\n")


def test_a_snapshot_is_restored_exactly_whatever_its_codec_and_never_when_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``compress`` keeping the larger form or the wrong codec name, ``restore``
    reading one codec as another, and ``restore`` returning a damaged snapshot (its
    SHA-256 is checked): an untracked file's diff comes from its snapshot only."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "on")
    root = tmp_path / "proj"
    root.mkdir()
    noise = os.urandom(4096)
    text = "".join(f"line {n}\n" for n in range(200))
    (root / "noise.bin").write_bytes(noise)
    (root / "text.txt").write_text(text)
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        memo = cache.record(
            question="q",
            conclusion="c",
            files=["noise.bin", "text.txt"],
            project="p",
            root=str(root),
        ).id
        cache.wait_for_snapshots()
    rows = _snapshot_rows(db)
    assert sorted(rows.values()) == ["raw", "zlib"]
    assert rows[hashlib.sha256(noise).hexdigest()] == "raw"
    (root / "text.txt").write_text(text.replace("line 100\n", "line one hundred\n"))
    (root / "noise.bin").write_bytes(noise[::-1])
    with open_cache(db) as cache:
        files = {f.path: f for f in cache.show(memo).files}
    assert files["text.txt"].diff_source == "snapshot"
    assert "-line 100\n+line one hundred\n" in (files["text.txt"].diff or "")
    assert files["noise.bin"].diff_source == "snapshot"
    # Damaged, or of a codec no version wrote: no diff rather than a wrong one.
    conn = sqlite3.connect(db)
    with conn:
        for sha256, data in conn.execute("SELECT sha256, data FROM snapshots").fetchall():
            damaged = data[:-1] + bytes([data[-1] ^ 1])
            conn.execute("UPDATE snapshots SET data = ? WHERE sha256 = ?", (damaged, sha256))
    conn.close()
    with open_cache(db) as cache:
        assert {f.path: f.diff_source for f in cache.show(memo).files} == {
            "noise.bin": "unavailable",
            "text.txt": "unavailable",
        }
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE snapshots SET codec = 'zstd'")
    conn.close()
    with open_cache(db) as cache:
        assert {f.diff_source for f in cache.show(memo).files} == {"unavailable"}


# Hook failure handling: whatever fails, one line on stderr and exit 0 --------


def test_waiting_for_snapshots_gives_up_after_its_timeout_while_work_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter.wait`` ignoring its timeout, or calling the work done while
    a job is still queued or being stored: while this thread holds the store's lock
    the writer cannot store the record's snapshot, so a wait of no time finds the work
    left; once it lets go, a wait without a timeout sees it stored. (Fast: a mutation
    run skips tests slower than 2 s, as the 32 MiB to compress here once was.)"""
    root = _kept_root(tmp_path, monkeypatch)
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        with cache.store.lock:
            cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
            assert cache.wait_for_snapshots(timeout=0) is False
        assert cache.wait_for_snapshots() is True
        assert len(_snapshot_rows(db)) == 1


def test_a_record_resting_on_a_content_already_kept_stores_its_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Store.snapshot_contents`` reading another column than the SHA-256
    (``row[1]``): the writer asks which of a record's contents have a snapshot
    already; with one of them kept, the record's new content is still stored."""
    root = _kept_root(tmp_path, monkeypatch)
    (root / "b.py").write_text("B = 1\n")
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        for question, files in (("first", ["a.py"]), ("second", ["a.py", "b.py"])):
            cache.record(
                question=question, conclusion="c", files=files, project="p", root=str(root)
            )
            assert cache.wait_for_snapshots() is True
    kept = {hashlib.sha256((root / name).read_bytes()).hexdigest() for name in ("a.py", "b.py")}
    assert set(_snapshot_rows(db)) == kept


def test_a_writer_that_finds_the_store_locked_past_its_timeout_logs_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills ``SnapshotWriter._store_job`` giving up on a locked store without saying so
    (``return`` for ``break``), or changing what it says: the one warning names the
    database and how long it stayed locked, and that the diffs come from git."""
    root = _kept_root(tmp_path, monkeypatch)
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        cache.store.busy_timeout_ms = 200
        with cache.store.lock:
            cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
            assert cache.wait_for_snapshots(30) is True
    warnings = [r.getMessage() for r in caplog.records if r.name == "explomemo"]
    assert warnings == [
        f"could not store snapshots: database {db} stayed locked for 0.2 s: a record's"
        " contents keep no snapshot (their diffs come from git)"
    ]
    assert _snapshot_rows(db) == {}


def test_a_show_right_after_a_record_takes_the_old_side_from_the_writers_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter.__init__`` starting without an empty current job
    (``None``): a show right after a record, before the writer's thread
    took the job (it waits here for the writer's lock, held by this thread), asks the
    writer for the contents it holds, and shows the diff from the snapshot not yet
    stored."""
    root = _kept_root(tmp_path, monkeypatch)
    with open_cache(tmp_path / "memos.db") as cache:
        writer = cache._snapshots.get()
        with writer._changed:
            memo = cache.record(
                question="q", conclusion="c", files=["a.py"], project="p", root=str(root)
            )
            (root / "a.py").write_text("A = 2\n")
            (found,) = cache.show(memo.id).files
        assert found.diff_source == "snapshot"
        assert "-A = 1" in (found.diff or "")


def test_with_snapshots_off_a_record_still_gives_its_blob_ids_to_older_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter.submit`` dropping a job that has blob ids but no contents
    to keep (``job.blobs`` for ``not job.blobs``): with snapshots off, a record still
    gives its content's blob id to an older memo's row of that content (an import of
    an export without blob ids)."""
    import xxhash

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    root = tmp_path / "proj"
    root.mkdir()
    data = b"A = 1\n"
    (root / "a.py").write_bytes(data)
    old = {
        "path": "a.py",
        "sha256": hashlib.sha256(data).hexdigest(),
        "xxh3": xxhash.xxh3_128_hexdigest(data),
        "size": len(data),
    }
    export = tmp_path / "old.jsonl"
    export.write_text(_export_line(1, files=[old]) + "\n")
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    with open_cache(tmp_path / "memos.db") as cache:
        import_memos(cache, read_export(export), str(root))
        cache.record(question="new", conclusion="c", files=["a.py"], project="p", root=str(root))
        assert cache.wait_for_snapshots(30) is True
        lines = [json.loads(line) for line in export_memos(cache)]
    assert [line["files"][0].get("git_blob") for line in lines] == [blob, blob]


def test_closing_a_writer_with_nothing_left_stops_its_thread_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter._work`` going on when woken to close with no job left
    (``and`` for ``or``: it takes a job from an empty queue and dies with a stack
    trace): the writer's thread ends without an exception."""
    import threading

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "on")
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    with open_cache(tmp_path / "memos.db") as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
        assert cache.wait_for_snapshots(30) is True
    assert died == []
    assert len(_snapshot_rows(tmp_path / "memos.db")) == 1


def test_records_beyond_the_pending_limit_wait_for_the_writer_and_never_for_ever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter.submit`` waiting while nothing is queued: with a limit
    of one pending byte every record is over it, and each still goes through (the
    writer takes the queued job, then the next record's). The writer is one daemon
    thread, named for ``ps`` and debuggers, so a process that never closes exits."""
    import threading

    from explomemo.changes import snapshots

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "on")
    monkeypatch.setattr(snapshots, "_PENDING_MAX_BYTES", 1)
    root = tmp_path / "proj"
    root.mkdir()
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        for n in range(3):
            (root / f"f{n}.py").write_text(f"N = {n}\n" * 100)
            cache.record(
                question=f"q{n}", conclusion="c", files=[f"f{n}.py"], project="p", root=str(root)
            )
        assert cache.wait_for_snapshots() is True
        writers = [t for t in threading.enumerate() if t.name == "explomemo-snapshots"]
        assert len(writers) == 1 and writers[0].daemon
    assert len(_snapshot_rows(db)) == 3


def test_a_record_waits_only_while_the_pending_bytes_would_pass_the_limit(
    writer: tuple[Store, SnapshotWriter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``SnapshotWriter.submit`` getting its limit wrong (``-`` for ``+``, ``>=``
    for ``>``): with the writer held (the store's lock taken), contents that bring the
    pending bytes exactly to the limit go through at once, and one byte more waits until
    the writer stores what is queued."""
    import threading

    from explomemo.changes import snapshots

    store, held = writer
    monkeypatch.setattr(snapshots, "_PENDING_MAX_BYTES", 1200)

    def submit(n: int, size: int) -> threading.Thread:
        data = bytes([n]) * size
        sha256 = hashlib.sha256(data).hexdigest()
        thread = threading.Thread(target=held.submit, args=({sha256: data}, {}, n))
        thread.start()
        return thread

    def up_to_the_limit_then_one_byte_more() -> None:
        with store.lock:
            for n in (1, 2):
                submit(n, 400).join(10)
            at_limit = submit(3, 400)
            at_limit.join(10)
            assert not at_limit.is_alive(), "contents up to the limit waited"
            over = submit(4, 1)
            over.join(0.5)
            assert over.is_alive(), "contents over the limit did not wait"
        over.join(10)
        assert not over.is_alive()
        assert held.wait(10)
        # Stored is no longer pending (white-box: only a race could show it otherwise).
        assert held._pending_bytes == 0

    up_to_the_limit_then_one_byte_more()
    # Again: what the writer stored no longer counts as pending.
    up_to_the_limit_then_one_byte_more()


def test_waiting_for_the_writer_includes_the_job_it_is_storing(
    writer: tuple[Store, SnapshotWriter],
) -> None:
    """Kills ``SnapshotWriter`` busy before its first job, or ``_work`` not marking itself
    busy while it stores a job: with the writer held (the store's lock taken), the job
    it took is not stored, so waiting for the writer times out until the lock is let go."""
    store, held = writer
    assert held.wait(0) is True  # nothing submitted: nothing to wait for
    with store.lock:
        data = b"x = 1\n"
        held.submit({hashlib.sha256(data).hexdigest(): data}, {}, 1)
        for _ in range(10):
            assert held.wait(0.05) is False
    assert held.wait(10) is True


# Reads do not queue behind this process's writes ------------------------------


def test_a_record_stores_its_blob_ids_itself(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
    taken, go = _held_writer(monkeypatch)
    db = tmp_path / "m.db"
    with open_cache(db, snapshots=True) as cache:
        cache.record(
            question="where is A?", conclusion="in a.py", files=["a.py"], root=str(project)
        )
        assert taken.wait(30)
        # The writer has not written anything: the blob id came with the memo.
        assert _blob_ids(db) == [("a.py", hashlib.sha1(b"blob 6\0A = 1\n").hexdigest())]
        go.set()


@pytest.mark.timeout(120)
def test_close_drops_snapshots_a_lock_keeps_out_and_keeps_the_blob_ids(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
    monkeypatch.setattr(snapshots, "CLOSE_SECONDS", 0.5)
    taken, go = _held_writer(monkeypatch)
    db = tmp_path / "m.db"
    cache = open_cache(db, snapshots=True)
    for n in range(3):
        (project / f"f{n}.py").write_text(f"F = {n}\n")
        cache.record(
            question=f"where is F{n}?", conclusion="here", files=[f"f{n}.py"], root=str(project)
        )
    assert taken.wait(30)
    # Each of the three writes waits for the lock (30 s busy timeout).
    assert _done_while_locked(db, go, cache.close), "close waited for the snapshot writer"
    # What was not written is not snapshotted, and nothing else is lost.
    assert all(blob is not None for _, blob in _blob_ids(db))
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (0,)
    assert "could not store snapshots" not in caplog.text


def test_a_failed_snapshot_leaves_the_writer_alive(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
    compress = snapshots.compress
    failures = [RuntimeError("zlib ran out\nof memory")]

    def failing_once(data: bytes) -> tuple[str, bytes]:
        if failures:
            raise failures.pop()
        return compress(data)

    monkeypatch.setattr(snapshots, "compress", failing_once)
    db = tmp_path / "m.db"
    with open_cache(db, snapshots=True) as cache:
        cache.record(
            question="where is A?", conclusion="in a.py", files=["a.py"], root=str(project)
        )
        assert cache.wait_for_snapshots(30)
        (project / "b.py").write_text("B = 1\n")
        cache.record(
            question="where is B?", conclusion="in b.py", files=["b.py"], root=str(project)
        )
        assert cache.wait_for_snapshots(30)
    warnings = [r.getMessage() for r in caplog.records if r.name == "explomemo"]
    assert warnings == ["could not store snapshots: zlib ran out of memory"]
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)
