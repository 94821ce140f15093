"""What served memos spared: counted once per memo and session, by the MCP server over
stdio, the CLI's recall and show, and shown by ``explomemo stats``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import call_tools_stdio, invoke_cli, open_cache, record_sized

from explomemo.memos.savings import count_served, size_text, spared_bytes
from explomemo.store.database import FileRow, Store

RECALL = "memory_exploration_recall"
QUESTION = "How is the retry policy of the HTTP client decided?"
#: A query the HTTP client's memo clearly answers (it comes whole), the parser's less so.
QUERY = "http retry policy"


@pytest.fixture
def retry(tmp_path: Path, db_path: Path) -> Path:
    """A project ``shop`` with one fresh memo resting on two files of 100 and 250 bytes,
    and one resting on a third file that is then changed (stale)."""
    root = tmp_path / "shop"
    record_sized(db_path, root, QUESTION, {"retry.py": 100, "client.py": 250})
    parser = "How is the retry policy of the parser decided?"
    record_sized(db_path, root, parser, {"parser.py": 500})
    (root / "parser.py").write_bytes(b"changed\n")
    return root


def _stats(db: Path, *args: str) -> dict[str, Any]:
    run = invoke_cli(["--db", str(db), "stats", "--json", *args])
    assert run.code == 0, run.err
    data: dict[str, Any] = json.loads(run.out)
    return data


def _surfaces(db: Path) -> dict[str, tuple[int, int]]:
    """The surfaces that spare files: (memos served, bytes spared) of each."""
    (project,) = _stats(db)["projects"]
    return {
        s["surface"]: (s["served"], s["bytes_spared"])
        for s in project["surfaces"]
        if s["surface"] != "delegation"
    }


def _recall(db: Path, root: Path, times: int) -> None:
    args = {"query": QUERY, "project": "shop", "root": str(root)}
    replies = call_tools_stdio(db, [(RECALL, args)] * times, cwd=root)
    for reply in replies:
        assert not reply.is_error, reply.text
        statuses = {m["id"]: m["status"] for m in reply.data["matches"]}
        assert statuses == {1: "fresh", 2: "stale"}


def test_a_memo_recalled_twice_in_one_server_session_counts_its_files_once(
    retry: Path, db_path: Path
) -> None:
    """Two files of 100 and 250 bytes: 350 once for one server process; a second server
    process (another client session) counts them again; the stale memo it also returns
    counts nothing."""
    _recall(db_path, retry, times=2)
    assert _surfaces(db_path) == {"recall": (1, 350), "show": (0, 0), "prompt": (0, 0)}
    _recall(db_path, retry, times=1)
    (project,) = _stats(db_path)["projects"]
    assert (project["served"], project["bytes_spared"], project["sessions"]) == (2, 700, 2)
    assert (project["memos"], project["fresh"], project["stale"]) == (2, 1, 1)
    assert project["origins"] == {"agent": 2}


def test_a_lean_match_serves_nothing_and_show_serves_it(retry: Path, db_path: Path) -> None:
    """ "retry policy" is in both questions: neither clearly answers, both come lean and the
    fresh one counts nothing until the agent asks for it whole."""
    args = {"query": "retry policy", "project": "shop", "root": str(retry)}
    recall, show = call_tools_stdio(
        db_path,
        [(RECALL, args), ("memory_exploration_show", {"id": 1, "project": "shop"})],
        cwd=retry,
    )
    assert [(m["id"], m["whole"]) for m in recall.data["matches"]] == [(1, False), (2, False)]
    assert not show.is_error, show.text
    assert _surfaces(db_path) == {"recall": (0, 0), "show": (1, 350), "prompt": (0, 0)}


def test_each_cli_recall_and_show_is_a_session_and_diff_serves_nothing(
    retry: Path, db_path: Path
) -> None:
    base = ["--db", str(db_path)]
    for _ in range(2):
        run = invoke_cli([*base, "recall", "--project", "shop", "--root", str(retry), QUERY])
        assert run.code == 0 and QUESTION in run.out, run.err
    assert invoke_cli([*base, "show", "1"]).code == 0
    assert invoke_cli([*base, "diff", "1"]).code == 0
    assert invoke_cli([*base, "show", "2"]).code == 0  # stale: not served
    assert _surfaces(db_path) == {"recall": (2, 700), "show": (1, 350), "prompt": (0, 0)}


def test_one_cache_is_one_session_across_recall_and_show(retry: Path, db_path: Path) -> None:
    """A memo recalled then shown by the same server (one cache) was served once: the
    first surface keeps it."""
    with open_cache(db_path) as cache:
        cache.recall(query=QUERY, project="shop", root=str(retry))
        cache.show(1)
        cache.show(1)
    assert _surfaces(db_path) == {"recall": (1, 350), "show": (0, 0), "prompt": (0, 0)}


def test_spared_bytes_leave_out_the_files_read_anyway(db_path: Path, retry: Path) -> None:
    files = [FileRow("retry.py", "0" * 64, "0" * 32, 100), FileRow("client.py", "0" * 64, "", 250)]
    assert spared_bytes(files, {"retry.py"}) == 250
    assert spared_bytes(files, set()) == 350
    store = Store.open(db_path)
    try:
        first = count_served(
            store, session="s", surface="prompt", project="shop", served=[(1, files)], read={"x"}
        )
        again = count_served(store, session="s", surface="recall", project="shop", served=[(1, [])])
    finally:
        store.close()
    assert (first, again) == ([1], [])
    assert _surfaces(db_path)["prompt"] == (1, 350)


def test_a_count_that_cannot_be_written_is_skipped_not_raised(retry: Path, db_path: Path) -> None:
    """Another process holds the write lock: the recall still answers, counting nothing,
    and the next recall of the same session counts it."""
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with open_cache(db_path) as cache:
            found = cache.recall(query=QUERY, project="shop", root=str(retry))
            assert found.matches[0].question == QUESTION
            holder.execute("COMMIT")
            assert _surfaces(db_path)["recall"] == (0, 0)
            cache.recall(query=QUERY, project="shop", root=str(retry))
    finally:
        holder.close()
    assert _surfaces(db_path)["recall"] == (1, 350)


def test_stats_table_names_each_surface(retry: Path, db_path: Path) -> None:
    _recall(db_path, retry, times=1)
    run = invoke_cli(["--db", str(db_path), "stats"])
    assert run.code == 0, run.err
    header, row = run.out.splitlines()
    assert header.split() == [
        "project",
        "memos",
        "fresh",
        "stale",
        "origin",
        "recall",
        "show",
        "prompt",
        "delegation",
        "spared",
        "sessions",
    ]
    cells = ["shop", "2", "1", "1", "agent 2", "1 (350 B)", "0 (0 B)", "0 (0 B)", "0 (0 tokens)"]
    cells += ["350 B", "1"]
    assert row.split() == " ".join(cells).split()


def test_stats_never_creates_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "m.db"
    run = invoke_cli(["--db", str(missing), "stats"])
    assert run.code == 2 and "there is no database at" in run.err and run.out == ""
    assert not missing.parent.exists()


def test_stats_of_a_project_without_memos_is_refused(retry: Path, db_path: Path) -> None:
    run = invoke_cli(["--db", str(db_path), "stats", "--project", "shpo"])
    assert run.code == 2 and "'shpo' has no memos" in run.err and "'shop'" in run.err
    assert _stats(db_path, "--project", "shop")["projects"][0]["project"] == "shop"


def test_sizes_read_as_people_read_them() -> None:
    assert [size_text(n) for n in (0, 1023, 1024, 12_595, 5 * 1024**2, 3 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "12.3 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]


def test_stats_counts_memos_by_origin(retry: Path, db_path: Path) -> None:
    """A memo the Stop hook captured (origin transcript) beside the two an agent recorded."""
    with open_cache(db_path) as cache:
        (files,) = cache.store.files_of(cache.store.conn, [1]).values()
        with cache.store.write() as conn:
            cache.store.save_memo(
                conn,
                memo_id=None,
                project="shop",
                question="where is the retry policy read?",
                question_key="where is the retry policy read?",
                conclusion="client.py send()",
                root=str(retry),
                recorded_at="2026-12-01T00:00:00Z",
                files=files,
                origin="transcript",
            )
    (project,) = _stats(db_path)["projects"]
    assert project["origins"] == {"agent": 2, "transcript": 1}
    assert (project["memos"], project["fresh"], project["stale"]) == (3, 2, 1)
    table = invoke_cli(["--db", str(db_path), "stats"]).out
    assert "agent 2, transcript 1" in " ".join(table.split())
