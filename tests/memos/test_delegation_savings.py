"""Delegated runs answered from a memo, counted for ``explomemo stats``: a fresh answer
spares the tokens of the run that made the memo (the run did not happen), a stale one is
served and spares nothing, once per memo and session; an answer the agent delegated again
in that turn does not count. Counted through the library the delegate hook calls, shown
through the real ``stats`` command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import invoke_cli, record_sized

from explomemo.memos.savings import (
    count_delegation,
    count_served,
    spared_line,
    uncount_delegation,
)
from explomemo.store.database import FileRow, ServedTotal, Store

SESSION = "claude-code:s1"


@pytest.fixture
def shop(tmp_path: Path, db_path: Path) -> Path:
    """A project ``shop`` with two memos: #1 on files of 100 and 250 bytes, #2 on one of
    500."""
    root = tmp_path / "shop"
    record_sized(db_path, root, "How is the retry policy decided?", {"retry.py": 100, "c.py": 250})
    record_sized(db_path, root, "Where are tokens validated?", {"auth.py": 500})
    return root


def _stats(db: Path, *args: str) -> dict[str, Any]:
    run = invoke_cli(["--db", str(db), "stats", "--json", *args])
    assert run.code == 0, run.err
    (project,) = json.loads(run.out)["projects"]
    data: dict[str, Any] = project
    return data


def _surface(db: Path, name: str) -> dict[str, Any]:
    (found,) = [s for s in _stats(db)["surfaces"] if s["surface"] == name]
    return found


def _delegations(db: Path) -> tuple[int, int, int, int]:
    """The delegation surface's (served, fresh, stale, tokens_spared)."""
    d = _surface(db, "delegation")
    return d["served"], d["fresh"], d["stale"], d["tokens_spared"]


def _count(db: Path, session: str, memo_id: int, *, fresh: bool, tokens: int | None) -> None:
    store = Store.open(db)
    try:
        count_delegation(
            store, session=session, project="shop", memo_id=memo_id, fresh=fresh, tokens=tokens
        )
    finally:
        store.close()


def _uncount(db: Path, session: str, memo_id: int) -> None:
    store = Store.open(db)
    try:
        uncount_delegation(store, session=session, memo_id=memo_id)
    finally:
        store.close()


def test_a_fresh_answer_spares_the_run_a_stale_one_is_served_and_spares_nothing(
    shop: Path, db_path: Path
) -> None:
    assert _delegations(db_path) == (0, 0, 0, 0)
    _count(db_path, SESSION, 1, fresh=True, tokens=78_000)
    _count(db_path, "claude-code:s2", 2, fresh=False, tokens=50_000)
    assert _delegations(db_path) == (2, 1, 1, 78_000)
    project = _stats(db_path)
    # Served and spared kept apart: both answers served, one run spared, no file bytes.
    assert (project["served"], project["bytes_spared"], project["tokens_spared"]) == (2, 0, 78_000)
    # Only the session whose run did not happen was spared anything.
    assert project["sessions"] == 1
    assert _surface(db_path, "delegation")["bytes_spared"] == 0
    # A fresh answer whose run's cost is unknown counts as a run spared, with no tokens.
    _count(db_path, "claude-code:s3", 2, fresh=True, tokens=None)
    assert _delegations(db_path) == (3, 2, 1, 78_000)
    assert _stats(db_path)["sessions"] == 2


def test_the_other_surfaces_carry_no_delegation_fields(shop: Path, db_path: Path) -> None:
    shown = {s["surface"]: sorted(s) for s in _stats(db_path)["surfaces"]}
    assert list(shown) == ["recall", "show", "prompt", "delegation"]
    assert shown["recall"] == ["bytes_spared", "served", "surface"]
    assert shown["delegation"] == [
        "bytes_spared",
        "fresh",
        "served",
        "stale",
        "surface",
        "tokens_spared",
    ]


def test_an_answer_delegated_again_in_the_turn_is_uncounted(shop: Path, db_path: Path) -> None:
    _count(db_path, SESSION, 1, fresh=True, tokens=78_000)
    _count(db_path, SESSION, 2, fresh=False, tokens=9_000)
    _uncount(db_path, SESSION, 1)
    assert _delegations(db_path) == (1, 0, 1, 0)
    _uncount(db_path, SESSION, 2)
    assert _delegations(db_path) == (0, 0, 0, 0)
    assert _stats(db_path)["sessions"] == 0
    # Uncounting what was never counted, or another session's answer, changes nothing.
    _count(db_path, "claude-code:s2", 1, fresh=True, tokens=78_000)
    _uncount(db_path, SESSION, 1)
    assert _delegations(db_path) == (1, 1, 0, 78_000)


def test_uncount_leaves_another_surfaces_serve_alone(shop: Path, db_path: Path) -> None:
    """The prompt hook served memo 1 in the session; no delegation was answered by it."""
    store = Store.open(db_path)
    try:
        files = [FileRow("retry.py", "0" * 64, "0" * 32, 100)]
        count_served(store, session=SESSION, surface="prompt", project="shop", served=[(1, files)])
        uncount_delegation(store, session=SESSION, memo_id=1)
    finally:
        store.close()
    assert (_surface(db_path, "prompt")["served"], _surface(db_path, "prompt")["bytes_spared"]) == (
        1,
        100,
    )


def test_the_same_memo_twice_in_a_session_counts_once_fresh_over_stale(
    shop: Path, db_path: Path
) -> None:
    _count(db_path, SESSION, 1, fresh=True, tokens=78_000)
    _count(db_path, SESSION, 1, fresh=True, tokens=78_000)
    _count(db_path, SESSION, 1, fresh=False, tokens=78_000)
    assert _delegations(db_path) == (1, 1, 0, 78_000)
    # A stale answer, then the memo that run left (same id) answering fresh later on.
    _count(db_path, "claude-code:s2", 2, fresh=False, tokens=40_000)
    _count(db_path, "claude-code:s2", 2, fresh=True, tokens=41_000)
    assert _delegations(db_path) == (2, 2, 0, 119_000)


def test_a_delegation_takes_the_place_of_an_earlier_serve_of_its_memo(
    shop: Path, db_path: Path
) -> None:
    """The prompt hook served memo 1 and the agent delegated its exploration anyway: the
    prompt's serve did not answer, the delegation's did. A later serve by the prompt hook
    leaves the delegation's count as it is."""
    store = Store.open(db_path)
    try:
        files = [FileRow("retry.py", "0" * 64, "0" * 32, 100)]
        count_served(store, session=SESSION, surface="prompt", project="shop", served=[(1, files)])
        count_delegation(
            store, session=SESSION, project="shop", memo_id=1, fresh=True, tokens=78_000
        )
        again = count_served(
            store, session=SESSION, surface="prompt", project="shop", served=[(1, files)]
        )
    finally:
        store.close()
    assert again == []
    assert _surface(db_path, "prompt")["served"] == 0
    assert _delegations(db_path) == (1, 1, 0, 78_000)
    assert (_stats(db_path)["bytes_spared"], _stats(db_path)["tokens_spared"]) == (0, 78_000)


def test_a_count_while_the_database_is_locked_is_skipped_silently(
    shop: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _count(db_path, SESSION, 2, fresh=True, tokens=5_000)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = Store.open(db_path, busy_timeout_ms=50)
        try:
            count_delegation(
                store, session=SESSION, project="shop", memo_id=1, fresh=True, tokens=78_000
            )
            uncount_delegation(store, session=SESSION, memo_id=2)
        finally:
            store.close()
    finally:
        holder.close()
    assert capsys.readouterr() == ("", "")
    assert _delegations(db_path) == (1, 1, 0, 5_000)


def _cells(table: str) -> dict[str, str]:
    """The one row of a stats table, each cell by its column's header, a cell folded over
    several lines joined with spaces."""
    header, *lines = table.splitlines()
    names = header.split()
    starts = [header.index(f" {name}") + 1 if n else 0 for n, name in enumerate(names)]
    ends = [*starts[1:], None]
    return {
        name: " ".join(" ".join(line[start:end].strip() for line in lines).split())
        for name, start, end in zip(names, starts, ends, strict=True)
    }


def test_stats_table_shows_the_delegations_and_the_tokens_they_spared(
    shop: Path, db_path: Path
) -> None:
    _count(db_path, SESSION, 1, fresh=True, tokens=78_000)
    _count(db_path, "claude-code:s2", 2, fresh=False, tokens=9_000)
    _count(db_path, "claude-code:s3", 2, fresh=True, tokens=78_000)
    run = invoke_cli(["--db", str(db_path), "stats"])
    assert run.code == 0, run.err
    assert _cells(run.out) == {
        "project": "shop",
        "memos": "2",
        "fresh": "2",
        "stale": "0",
        "origin": "agent 2",
        "recall": "0 (0 B)",
        "show": "0 (0 B)",
        "prompt": "0 (0 B)",
        "delegation": "3, 1 stale (156,000 tokens)",
        "spared": "0 B, 156,000 tokens",
        "sessions": "2",
    }


def test_a_project_without_delegations_shows_none_in_the_table(shop: Path, db_path: Path) -> None:
    run = invoke_cli(["--db", str(db_path), "stats"])
    assert run.code == 0, run.err
    assert len(run.out.splitlines()) == 2
    cells = _cells(run.out)
    assert (cells["delegation"], cells["spared"]) == ("0 (0 tokens)", "0 B")


def test_the_spared_line_says_each_part_only_when_it_spared_something() -> None:
    def total(surface: str, served: int, fresh: int, spared: int, tokens: int) -> ServedTotal:
        return ServedTotal("shop", surface, served, fresh, spared, tokens)

    stale_only = [total("delegation", 2, 0, 0, 0)]
    assert spared_line(stale_only, 0) is None
    unknown_cost = [total("delegation", 1, 1, 0, 0)]
    assert spared_line(unknown_cost, 1) == (
        "explomemo has spared 1 delegated run in this project across 1 session."
    )
    both = [total("recall", 3, 3, 12_595, 0), total("delegation", 3, 2, 0, 156_000)]
    assert spared_line(both, 4) == (
        "explomemo has spared 12.3 KiB of reading and 2 delegated runs (156,000 tokens) in"
        " this project across 4 sessions."
    )
    assert spared_line([total("prompt", 1, 1, 350, 0)], 1) == (
        "explomemo has spared 350 B of reading in this project across 1 session."
    )
