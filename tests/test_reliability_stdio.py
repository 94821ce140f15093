"""The real server over stdio, carrying raw bytes.

These are the cases an in-process client cannot show: what a client such as
a JavaScript one actually puts on the wire (a lone surrogate escape), and a
server process living on while its database is swapped, deleted or locked by
another process.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from reliability_helpers import (
    PYTHON,
    RawServer,
    assert_tool_refused,
    assert_whole,
    cli_subprocess,
    counts,
    open_cache,
    sha256_bytes,
    tool_reply,
)

from explomemo.changes import snapshots
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel
from explomemo.shapes import CheckedFile

RECORD = "memory_exploration_record"
RECALL = "memory_exploration_recall"
STALE = "memory_exploration_stale"
FORGET = "memory_exploration_forget"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    return root


def _valid(tool: str, root: Path) -> dict[str, object]:
    return {
        RECORD: {
            "question": "where is A?",
            "conclusion": "in a.py",
            "files": ["a.py"],
            "project": "p",
            "root": str(root),
        },
        RECALL: {"query": "where is A", "project": "p", "root": str(root)},
        STALE: {"project": "p", "root": str(root)},
        FORGET: {"project": "p", "id": 1},
    }[tool]


def _with_surrogate(arguments: dict[str, object], argument: str, escape: bytes) -> bytes:
    """``arguments`` as JSON bytes, ``argument`` a string holding a lone surrogate escape."""
    bad = b'"a' + escape + b'b"'
    if isinstance(arguments[argument], list):
        bad = b"[" + bad + b"]"
    rest = json.dumps({k: v for k, v in arguments.items() if k != argument}).encode()
    return b'{"' + argument.encode() + b'": ' + bad + b", " + rest[1:]


#: (tool, argument, how the refusal names it): every string a tool takes.
SURROGATE_CASES = [
    (RECORD, "question", "question"),
    (RECORD, "conclusion", "conclusion"),
    (RECORD, "files", "files[0]"),
    (RECORD, "project", "project"),
    (RECORD, "root", "root"),
    (RECALL, "query", "query"),
    (RECALL, "project", "project"),
    (RECALL, "root", "root"),
    (STALE, "project", "project"),
    (STALE, "root", "root"),
    (FORGET, "project", "project"),
]


@pytest.mark.timeout(120)
def test_a_lone_surrogate_escape_gets_an_answer_naming_the_argument(
    tmp_path: Path, project: Path
) -> None:
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        cache.record(
            question="kept", conclusion="c", files=["a.py"], project="p", root=str(project)
        )
    before = counts(db)
    with RawServer(db, cwd=project) as server:
        for tool, argument, named in SURROGATE_CASES:
            for escape in (rb"\ud800", rb"\udfff", rb"\udbff\u0041"):
                raw = _with_surrogate(_valid(tool, project), argument, escape)
                reply = tool_reply(server.answer(server.call_raw(raw, tool), timeout=30))
                assert_tool_refused(reply, tool, named, "lone surrogate", "UTF-8")
        # A valid pair (an emoji) is text like any other, and the server still serves.
        emoji = rb'"question": "where is \ud83d\ude00 A?"'
        raw = json.dumps(_valid(RECORD, project)).encode()
        raw = raw.replace(b'"question": "where is A?"', emoji)
        reply = tool_reply(server.answer(server.call_raw(raw, RECORD)))
        assert not reply.is_error, reply.text
        assert server.call(STALE, _valid(STALE, project)).data["checked"] == 2
    assert counts(db)["memos"] == before["memos"] + 1


@pytest.mark.timeout(120)
def test_other_unreadable_requests_get_an_answer(tmp_path: Path, project: Path) -> None:
    db = tmp_path / "m.db"
    with RawServer(db, cwd=project) as server:
        # A number strict JSON does not allow, where the tool takes one.
        raw = json.dumps(_valid(RECALL, project)).encode().replace(b"{", b'{"limit": NaN, ', 1)
        reply = tool_reply(server.answer(server.call_raw(raw, RECALL), timeout=30))
        assert_tool_refused(reply, "limit: must be a JSON integer", "(got NaN)")
        # A surrogate outside a tool's arguments: a JSON-RPC error with the request's id.
        request = b'{"jsonrpc": "2.0", "id": "x", "method": "tools/list", "params": '
        server.send_raw(request + b'{"cursor": "\\ud800"}}')
        error = server.answer("x", timeout=30)["error"]
        assert error["code"] == -32602 and "params.cursor" in error["message"]
        # Not JSON at all: a parse error (id null, as JSON-RPC says), and the server goes on.
        server.send_raw(b"{this is not json")
        assert server.answer(None, timeout=30)["error"]["code"] == -32700
        # A notification nobody waits for gets no answer; the next request does.
        server.send_raw(
            b'{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}'
        )
        assert server.call(STALE, _valid(STALE, project)).data == {
            "project": "p",
            "root": str(project),
            "checked": 0,
            "stale": [],
        }
        code, err = server.close()
    assert code == 0, err
    assert "Traceback" not in err


# The database file swapped or deleted under a running server ----------------


def _record_args(root: Path, question: str) -> dict[str, object]:
    return {**_valid(RECORD, root), "question": question}


def _refused_everything(server: RawServer, root: Path, db: Path, what: str) -> None:
    for tool, args in (
        (RECORD, _record_args(root, "recorded after the swap")),
        (FORGET, {"project": "p", "id": 1}),
        (STALE, _valid(STALE, root)),
        (RECALL, _valid(RECALL, root)),
    ):
        reply = server.call(tool, args)
        assert_tool_refused(reply, str(db), what, "restart the server")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("replacement", ["another-database", "a-text-file"])
def test_a_database_replaced_under_a_running_server_is_left_alone(
    tmp_path: Path, project: Path, replacement: str
) -> None:
    db = tmp_path / "data" / "memos.db"
    other = tmp_path / "other.db"
    if replacement == "another-database":
        with open_cache(other) as cache:
            cache.record(question="the other memo", conclusion="c", files=["a.py"], project="p",
                         root=str(project))  # fmt: skip
    else:
        other.write_text("my notes, which are not a database\n" * 100)
    replaced_with = sha256_bytes(other)
    with RawServer(db, cwd=project) as server:
        first = server.call(RECORD, _record_args(project, "recorded before the swap"))
        assert not first.is_error, first.text
        # The user moves the database away and puts another file at its path.
        os.rename(db, tmp_path / "moved-away.db")
        os.rename(other, db)
        _refused_everything(server, project, db, "was replaced by another file")
        code, err = server.close()
    assert code == 0 and "Traceback" not in err, err
    # Not one byte of the file now at the path changed, on exit or later: the
    # server's write-ahead log (still named after the path) holds nothing that
    # could be read as part of it.
    assert sha256_bytes(db) == replaced_with
    assert not (tmp_path / "data" / "memos.db-wal").exists() or (
        (tmp_path / "data" / "memos.db-wal").stat().st_size == 0
    )
    if replacement == "another-database":
        with open_cache(db) as cache:
            assert [m.question for m in cache.list()] == ["the other memo"]
    else:
        refused = cli_subprocess(["--db", str(db), "list"])
        assert refused.returncode == 2 and "not an explomemo database" in refused.stderr
        assert sha256_bytes(db) == replaced_with
    # What the server acknowledged is in the file it opened, wherever that went.
    with open_cache(tmp_path / "moved-away.db") as cache:
        assert [m.question for m in cache.list()] == ["recorded before the swap"]


@pytest.mark.timeout(120)
def test_a_database_deleted_under_a_running_server_is_not_recreated(
    tmp_path: Path, project: Path
) -> None:
    db = tmp_path / "data" / "memos.db"
    with RawServer(db, cwd=project) as server:
        assert not server.call(RECORD, _record_args(project, "before")).is_error
        db.unlink()  # the write-ahead log and shared memory files stay
        _refused_everything(server, project, db, "was deleted")
        code, err = server.close()
    assert code == 0 and "Traceback" not in err, err
    assert not db.exists()
    # A database started later at that path starts empty: the old log is not replayed.
    with open_cache(db) as cache:
        assert cache.list() == []
    assert_whole(db)


# Reads do not queue behind this process's writes ------------------------------

LOCK_HOLDER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
"""


@pytest.mark.timeout(120)
def test_reads_answer_while_a_record_waits_for_another_process(
    tmp_path: Path, project: Path
) -> None:
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        cache.record(
            question="how is the tokenizer wired?",
            conclusion="the tokenizer lives in a.py",
            files=["a.py"],
            project="p",
            root=str(project),
        )
    with RawServer(db, cwd=project) as server:
        assert server.call(STALE, _valid(STALE, project)).data["checked"] == 1
        (project / "a.py").write_text("A = 2\n")  # the reads must read the file again
        holder = subprocess.Popen(
            [PYTHON, "-c", LOCK_HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            record = server.request(
                "tools/call", {"name": RECORD, "arguments": _record_args(project, "new one")}
            )
            # Only so the record reaches its wait for the lock first, and the change
            # is more than 2 s old when the reads look (so what they read is worth
            # keeping in the stat cache: a write they must not wait for either).
            time.sleep(2.5)
            stale = server.request(
                "tools/call", {"name": STALE, "arguments": _valid(STALE, project)}
            )
            query = {**_valid(RECALL, project), "query": "tokenizer wiring"}
            recall = server.request("tools/call", {"name": RECALL, "arguments": query})
            # The server's busy timeout is 30 s: a read queued behind the record
            # would come after the record's own answer, 30 s from now.
            stale_reply = tool_reply(server.answer(stale, timeout=25))
            recall_reply = tool_reply(server.answer(recall, timeout=25))
            assert not server.answered(record), "the record finished while the lock was held"
        finally:
            assert holder.stdin is not None
            holder.stdin.write("release\n")
            holder.stdin.close()
            holder.wait(timeout=60)
        assert stale_reply.data["stale"][0]["changed"] == ["a.py"]
        assert [m["status"] for m in recall_reply.data["matches"]] == ["stale"]
        recorded = tool_reply(server.answer(record))
        assert not recorded.is_error and recorded.data["files"][0]["sha256"]
    assert counts(db)["memos"] == 2


def test_reads_answer_while_the_snapshot_writer_waits_for_another_process(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recall, show and stale report right after a record show its diff from the
    content the snapshot writer still holds, while its write waits for a lock."""
    taken, go = _held_writer(monkeypatch)
    db = tmp_path / "m.db"
    # Not a git work tree: the recorded content can come from nowhere but the writer.
    assert not (project / ".git").exists()
    with MemoCache.open(db, FixedModel(None), snapshots=True) as cache:
        memo = cache.record(
            question="how is the tokenizer wired?",
            conclusion="the tokenizer lives in a.py",
            files=["a.py"],
            project="p",
            root=str(project),
        ).id
        assert taken.wait(30)
        (project / "a.py").write_text("A = 2\n")
        described: list[list[CheckedFile]] = []

        def read() -> None:
            recall = cache.recall(query="tokenizer wiring", project="p", root=str(project))
            described.append(recall.matches[0].files)
            described.append(cache.show(memo).files)
            report = cache.stale_report(project="p")
            described.append(cache.stale_changes(report)[memo])

        answered_while_locked = _done_while_locked(db, go, read)
        assert answered_while_locked, "a read waited for the snapshot writer's write"
        assert len(described) == 3
        for files in described:
            (checked,) = files
            assert (checked.state, checked.diff_source) == ("changed", "snapshot")
            assert checked.diff is not None and "-A = 1\n+A = 2\n" in checked.diff
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)


def _held_writer(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """(taken, go): the snapshot writer sets ``taken`` when it compresses, then waits for ``go``."""
    taken, go = threading.Event(), threading.Event()
    compress = snapshots.compress

    def held_compress(data: bytes) -> tuple[str, bytes]:
        taken.set()
        assert go.wait(30)
        return compress(data)

    monkeypatch.setattr(snapshots, "compress", held_compress)
    return taken, go


def _done_while_locked(db: Path, go: threading.Event, work: Callable[[], None]) -> bool:
    """Whether ``work`` (on a thread) ends while another process holds the database's lock,
    taken before ``go`` is set (and released after at most 25 s)."""
    holder = subprocess.Popen(
        [PYTHON, "-c", LOCK_HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    worker = threading.Thread(target=work)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        go.set()
        worker.start()
        worker.join(25)
        return not worker.is_alive()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("release\n")
        holder.stdin.close()
        holder.wait(timeout=60)
        worker.join(120)


def _blob_ids(db: Path) -> list[tuple[str, str | None]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT path, git_blob FROM memo_files ORDER BY path").fetchall()


def test_a_record_stores_its_blob_ids_itself(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken, go = _held_writer(monkeypatch)
    db = tmp_path / "m.db"
    with MemoCache.open(db, FixedModel(None), snapshots=True) as cache:
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
    monkeypatch.setattr(snapshots, "CLOSE_SECONDS", 0.5)
    taken, go = _held_writer(monkeypatch)
    db = tmp_path / "m.db"
    cache = MemoCache.open(db, FixedModel(None), snapshots=True)
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
    compress = snapshots.compress
    failures = [RuntimeError("zlib ran out\nof memory")]

    def failing_once(data: bytes) -> tuple[str, bytes]:
        if failures:
            raise failures.pop()
        return compress(data)

    monkeypatch.setattr(snapshots, "compress", failing_once)
    db = tmp_path / "m.db"
    with MemoCache.open(db, FixedModel(None), snapshots=True) as cache:
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
