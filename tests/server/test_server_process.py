"""A real server process over stdio living on while its database is swapped, deleted or locked by
another process."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest
from helpers import (
    FORGET,
    LOCK_HOLDER,
    MEMOS,
    PYTHON,
    RECALL,
    RECORD,
    STALE,
    RawServer,
    _done_while_locked,
    _held_writer,
    _valid,
    assert_tool_refused,
    assert_whole,
    cli_subprocess,
    counts,
    open_cache,
    sha256_bytes,
    tool_reply,
)

from explomemo.shapes import CheckedFile


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


# The database file swapped or deleted under a running server ----------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("replacement", ["another-database", "a-text-file"])
def test_a_database_replaced_under_a_running_server_is_left_alone(
    tmp_path: Path, project: Path, replacement: str
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
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
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
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


@pytest.mark.timeout(120)
def test_reads_answer_while_a_record_waits_for_another_process(
    tmp_path: Path, project: Path
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
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
    with open_cache(db, snapshots=True) as cache:
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


# Recall does not depend on when it is asked (issue 37) -------------------------------


@pytest.mark.timeout(300)
def test_memos_recorded_at_once_after_start_are_found_by_meaning_by_the_next_server(
    tmp_path: Path, app: Path
) -> None:
    """The shipped model, real servers: records sent as soon as the server answers
    initialize (its model still loading), the server closed, a new one's first recall."""
    db = tmp_path / "data" / "memos.db"
    model_on = {"EXPLOMEMO_EMBEDDINGS": "on"}
    with RawServer(db, cwd=app, env=model_on) as first:
        for question, conclusion, files in MEMOS.values():
            recorded = first.call(
                RECORD,
                {"question": question, "conclusion": conclusion, "files": files,
                 "project": "svc", "root": str(app)},
            )  # fmt: skip
            assert not recorded.is_error, recorded.text
            assert recorded.data["semantic_index"] is True
        code, err = first.close()
    assert code == 0 and "Traceback" not in err, err
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute(
            "SELECT count(*) FROM memos WHERE embedding IS NOT NULL"
            " AND question_embedding IS NOT NULL"
        ).fetchone() == (len(MEMOS),)
    with RawServer(db, cwd=app, env=model_on) as second:
        found = second.call(
            RECALL, {"query": "where are JWTs checked?", "project": "svc", "root": str(app)}
        )
        code, err = second.close()
    assert code == 0 and "Traceback" not in err, err
    assert found.data["semantic_index"] is True and "pending_vectors" not in found.data
    assert found.data["matches"][0]["question"] == MEMOS["auth"][0]
    assert found.data["matches"][0]["matched_by"] in {"embedding", "both"}
