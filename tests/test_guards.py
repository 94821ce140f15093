"""Tests that catch the bugs they exist for (issue #14): the guarding code under mutation.

Each test here kills one single-point bug that the rest of the suite let
through, and says which in its name and docstring. Each was proven by putting
that bug back in the source and watching the test fail; the mutation run
(``benchmarks/mutation/``) keeps proving it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git
from reliability_helpers import (
    SECRET,
    assert_one_error_line,
    assert_tool_refused,
    call_tools_stdio,
    counts,
    open_cache,
    run_cli,
)

from explomemo import printable
from explomemo.changes.snapshots import SnapshotWriter
from explomemo.check import hashing, validity
from explomemo.clients.hooks import run_hook
from explomemo.errors import ExportFileError, PathError
from explomemo.files import Root, relative_path, resolve_root, working_directory
from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import (
    export_changes,
    export_memos,
    import_memos,
    read_export,
    stale_from_export,
    write_export,
)
from explomemo.shapes import ExportedMemo, ImportResult
from explomemo.store.database import Store

RECORD = "memory_exploration_record"
RECALL = "memory_exploration_recall"
STALE = "memory_exploration_stale"

INSIDE = b"the file inside root\n"


def stale_of(
    cache: MemoCache, root: Path, project: str = "p"
) -> dict[int, tuple[list[str], list[str]]]:
    """{memo id: (changed, missing)} of the project's stale memos under ``root``."""
    return {
        s.id: (s.changed, s.missing) for s in cache.stale(project=project, root=str(root)).stale
    }


def stale_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """Run ``explomemo … stale --format json`` in-process: (exit code, the report)."""
    run = run_cli(capsys, [*argv, "--format", "json"])
    assert run.code in (0, 1), run.err
    return run.code, json.loads(run.out)


def edited(folder: Path, line: str, **changes: Any) -> ExportedMemo:
    """The memo of an export line with some fields changed, read back as ``import`` reads it."""
    path = folder / f"edited-{len(list(folder.glob('edited-*.jsonl')))}.jsonl"
    path.write_text(json.dumps({**json.loads(line), **changes}) + "\n")
    (memo,) = read_export(path)
    return memo


def swap_link(link: Path, target: Path | str) -> None:
    """Point ``link`` at ``target`` atomically (the name never disappears)."""
    staging = link.with_name(link.name + ".swap")
    os.symlink(target, staging)
    os.replace(staging, link)


# Root containment: a sibling folder whose name starts with root's name ------


@dataclass
class Siblings:
    """Root ``…/x/proj`` and, beside it, ``…/x/proj-secrets`` holding a key."""

    base: Path
    root: Path
    secrets: Path
    key: Path


@pytest.fixture
def siblings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Siblings:
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    base = tmp_path / "x"
    root = base / "proj"
    secrets = base / "proj-secrets"
    secrets.mkdir(parents=True)
    key = secrets / "key.txt"
    key.write_bytes(SECRET)
    (secrets / "mod.py").write_bytes(SECRET)
    root.mkdir()
    (root / "ok.py").write_text("print('ok')\n")
    # Inside root, the very bytes of the secrets: a check that hashed the
    # secret instead would find the memo fresh.
    (root / "real.txt").write_bytes(SECRET)
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_bytes(SECRET)
    os.symlink(key, root / "key_link.txt")
    os.symlink("../proj-secrets/key.txt", root / "rel_key_link.txt")
    os.symlink(secrets, root / "secrets_dir")
    return Siblings(base, root, secrets, key)


SIBLING_LINKS = ["key_link.txt", "rel_key_link.txt", "secrets_dir/key.txt"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("given", SIBLING_LINKS)
def test_record_refuses_a_link_into_a_sibling_folder_that_starts_with_roots_name(
    siblings: Siblings, given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``files._inside`` testing ``path.startswith(folder)`` without the "/".

    With that bug ``/x/proj-secrets/key.txt`` counts as inside root ``/x/proj``,
    so a link in root that leads there is hashed and recorded. Library and
    CLI: refused naming the file, nothing written, not a byte read.
    """
    db = siblings.base / "lib.db"
    cache = open_cache(db)
    hashing.COUNTERS.reset()
    try:
        for files in ([given], [str(siblings.root / given)]):
            with pytest.raises(PathError) as caught:
                cache.record(
                    question="where is the key?",
                    conclusion="c",
                    files=files,
                    project="p",
                    root=str(siblings.root),
                )
            assert files[0] in str(caught.value) and "outside root" in str(caught.value)
    finally:
        cache.close()
    assert hashing.COUNTERS.files == 0, "a file outside root was read"
    assert counts(db)["memos"] == 0
    db = siblings.base / "cli.db"
    run = run_cli(
        capsys,
        [
            "--db",
            str(db),
            "record",
            "--project",
            "p",
            "--root",
            str(siblings.root),
            "--question",
            "where is the key?",
            "--conclusion",
            "c",
            "--",
            given,
        ],
    )
    assert_one_error_line(run, given, "outside root")
    assert run.out == "" and counts(db)["memos"] == 0
    assert hashing.COUNTERS.files == 0


def _record_then_lead_into_the_sibling(siblings: Siblings, db: Path) -> tuple[int, int]:
    """Record a link to a file inside root and a file in a real folder; then make the
    link lead to the sibling's key and the folder a link to the sibling (same bytes)."""
    root = siblings.root
    os.symlink("real.txt", root / "link.txt")
    cache = open_cache(db)
    try:
        by_link = cache.record(
            question="What does the linked file hold?",
            conclusion="the linked secret",
            files=["link.txt"],
            project="p",
            root=str(root),
        ).id
        in_folder = cache.record(
            question="What does the module in the package hold?",
            conclusion="the package module",
            files=["pkg/mod.py"],
            project="p",
            root=str(root),
        ).id
    finally:
        cache.close()
    swap_link(root / "link.txt", siblings.key)
    (root / "pkg").rename(siblings.base / "pkg-aside")
    os.symlink(siblings.secrets, root / "pkg")
    return by_link, in_folder


@pytest.mark.timeout(30)
def test_checks_report_a_file_now_leading_into_the_sibling_folder_as_missing(
    siblings: Siblings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``files._inside`` testing ``path.startswith(folder)`` without the "/".

    A recorded link retargeted to ``/x/proj-secrets/key.txt``, and a recorded
    folder replaced by a link to ``/x/proj-secrets``, holding the very bytes
    recorded: with the bug they are hashed and reported unchanged. ``stale``
    (library and CLI), ``recall`` and ``show`` must say missing, reading nothing.
    """
    db = siblings.base / "s.db"
    by_link, in_folder = _record_then_lead_into_the_sibling(siblings, db)
    expected = {by_link: ([], ["link.txt"]), in_folder: ([], ["pkg/mod.py"])}
    hashing.COUNTERS.reset()
    cache = open_cache(db)
    try:
        assert stale_of(cache, siblings.root) == expected
        recalled = cache.recall(
            query="linked secret package module", project="p", root=str(siblings.root)
        )
        assert {
            m.id: (m.status, [(f.path, f.state) for f in m.files]) for m in recalled.matches
        } == {
            by_link: ("stale", [("link.txt", "missing")]),
            in_folder: ("stale", [("pkg/mod.py", "missing")]),
        }
        for memo_id, path in ((by_link, "link.txt"), (in_folder, "pkg/mod.py")):
            shown = cache.show(memo_id)
            assert (shown.status, [(f.path, f.state) for f in shown.files]) == (
                "stale",
                [(path, "missing")],
            )
    finally:
        cache.close()
    code, report = stale_json(capsys, "--db", str(db), "stale", "--check")
    assert code == 1
    assert {e["id"]: (e["changed"], e["missing"]) for e in report["stale"]} == expected
    assert hashing.COUNTERS.files == 0, "a file outside root was read"


@pytest.mark.timeout(60)
def test_mcp_over_stdio_refuses_and_reports_the_sibling_folder(siblings: Siblings) -> None:
    """Kills ``files._inside`` testing ``path.startswith(folder)`` without the "/", through
    a real ``explomemo serve`` over stdio: record refuses each link into
    ``/x/proj-secrets``, and stale/recall report a retargeted file missing."""
    db = siblings.base / "mcp.db"
    by_link, in_folder = _record_then_lead_into_the_sibling(siblings, db)
    before = counts(db)
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            RECORD,
            {
                "question": f"where is the key ({given})?",
                "conclusion": "c",
                "files": [given],
                "project": "p",
            },
        )
        for given in SIBLING_LINKS
    ]
    calls.append((STALE, {"project": "p"}))
    calls.append((RECALL, {"query": "linked secret", "project": "p"}))
    replies = call_tools_stdio(db, calls, cwd=siblings.root)
    for given, reply in zip(SIBLING_LINKS, replies, strict=False):
        assert_tool_refused(reply, given, "outside root")
    assert counts(db) == before
    stale, recall = replies[-2:]
    assert not stale.is_error, stale.text
    assert [(s["id"], s["missing"]) for s in stale.data["stale"]] == [
        (by_link, ["link.txt"]),
        (in_folder, ["pkg/mod.py"]),
    ]
    assert not recall.is_error, recall.text
    linked = [m for m in recall.data["matches"] if m["id"] == by_link]
    assert linked and linked[0]["status"] == "stale"
    assert linked[0]["files"][0]["state"] == "missing"


# The identity check after the open in Opener.open ---------------------------


def _is_lstat_of(name: str) -> Callable[..., bool]:
    def when(*args: Any, **kwargs: Any) -> bool:
        return (
            bool(args)
            and args[0] == name
            and kwargs.get("dir_fd") is not None
            and kwargs.get("follow_symlinks") is False
        )

    return when


class SwapAfter:
    """Wraps ``os.stat``: right after the first matching call returns, ``action`` runs."""

    def __init__(
        self, real: Callable[..., Any], when: Callable[..., bool], action: Callable[[], None]
    ):
        self.real, self.when, self.action, self.fired = real, when, action, False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.real(*args, **kwargs)
        if not self.fired and self.when(*args, **kwargs):
            self.fired = True
            self.action()
        return result


@pytest.mark.timeout(30)
@pytest.mark.parametrize("surface", ["stale", "show", "recall", "cli-stale"])
@pytest.mark.parametrize("decoy", [INSIDE, INSIDE.upper()], ids=["same-bytes", "other-bytes"])
def test_opener_never_reads_a_file_swapped_in_between_its_lstat_and_its_open(
    tmp_path: Path,
    surface: str,
    decoy: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kills the removal of the (device, inode) check after the open in ``Opener.open``.

    Another regular file is put in the recorded file's place between the
    ``lstat`` and the ``open`` of a check. Without the check the decoy is
    hashed (and, holding the recorded bytes, found unchanged); with it the
    file is refused: missing, and no byte read.
    """
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_bytes(INSIDE)
    db = tmp_path / "swap.db"
    cache = open_cache(db)
    try:
        memo = cache.record(
            question="what does a hold?",
            conclusion="a holds it",
            files=["a.py"],
            project="p",
            root=str(root),
        ).id
    finally:
        cache.close()
    (root / "decoy").write_bytes(decoy)
    spy = SwapAfter(
        os.stat, _is_lstat_of("a.py"), lambda: os.replace(root / "decoy", root / "a.py")
    )
    monkeypatch.setattr(os, "stat", spy)
    hashing.COUNTERS.reset()
    if surface == "cli-stale":
        code, report = stale_json(capsys, "--db", str(db), "stale", "--check")
        assert code == 1
        found = {e["id"]: (e["changed"], e["missing"]) for e in report["stale"]}
    else:
        cache = open_cache(db)
        try:
            if surface == "stale":
                found = stale_of(cache, root)
            elif surface == "show":
                shown = cache.show(memo)
                found = {memo: ([], [f.path for f in shown.files if f.state == "missing"])}
                assert shown.status == "stale"
            else:
                matches = cache.recall(
                    query="what does a hold", project="p", root=str(root)
                ).matches
                assert [(m.id, m.status) for m in matches] == [(memo, "stale")]
                found = {memo: ([], [f.path for f in matches[0].files if f.state == "missing"])}
        finally:
            monkeypatch.setattr(os, "stat", spy.real)
            cache.close()
    assert spy.fired
    assert found == {memo: ([], ["a.py"])}
    assert hashing.COUNTERS.files == 0, "the file swapped in was read"


# A deleted root --------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_deleted_root_makes_every_file_of_its_memos_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    """Kills ``MemoCache._observe`` reporting nothing (instead of every file missing)
    when a memo's recorded root no longer exists: ``stale`` without ``--root``
    and ``show`` must call every file of those memos missing."""
    gone = tmp_path / "gone"
    kept = tmp_path / "kept"
    for root in (gone, kept):
        (root / "pkg").mkdir(parents=True)
        (root / "a.py").write_text("a = 1\n")
        (root / "pkg" / "b.py").write_text("b = 2\n")
    db = tmp_path / "d.db"
    cache = open_cache(db)
    try:
        both = cache.record(
            question="q1", conclusion="c", files=["a.py", "pkg/b.py"], project="p", root=str(gone)
        ).id
        one = cache.record(
            question="q2", conclusion="c", files=["pkg/b.py"], project="q", root=str(gone)
        ).id
        other = cache.record(
            question="q3", conclusion="c", files=["a.py"], project="p", root=str(kept)
        ).id
    finally:
        cache.close()
    shutil.rmtree(gone)
    code, report = stale_json(capsys, "--db", str(db), "stale", "--check")
    assert code == 1
    assert report == {
        "checked": 3,
        "stale": [
            {
                "id": both,
                "project": "p",
                "question": "q1",
                "changed": [],
                "missing": ["a.py", "pkg/b.py"],
            },
            {"id": one, "project": "q", "question": "q2", "changed": [], "missing": ["pkg/b.py"]},
        ],
    }
    for memo_id, files in ((both, ["a.py", "pkg/b.py"]), (one, ["pkg/b.py"])):
        run = run_cli(capsys, ["--db", str(db), "show", str(memo_id), "--json"])
        assert run.code == 0, run.err
        shown = json.loads(run.out)
        assert shown["status"] == "stale"
        assert [(f["path"], f["state"]) for f in shown["files"]] == [(f, "missing") for f in files]
    run = run_cli(capsys, ["--db", str(db), "show", str(other), "--json"])
    assert json.loads(run.out)["status"] == "fresh"
    cache = open_cache(db)
    try:
        assert [(e.id, e.missing) for e in cache.stale_report(project="p").stale] == [
            (both, ["a.py", "pkg/b.py"])
        ]
    finally:
        cache.close()


# The question key: case folding, not lower-casing ---------------------------


def test_questions_differing_only_as_strasse_and_strasse_with_eszett_are_one(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``inputs.question_key`` using ``.lower()`` instead of ``.casefold()``:
    "STRASSE" and "straße" are one question (as under NFKC + case folding too),
    so the second record replaces the first and keeps its id, and an import
    of either keeps to the one memo."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "parse.py").write_text("def parse(street): ...\n")
    first = words_cache.record(
        question="Where is STRASSE parsed?",
        conclusion="one",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    second = words_cache.record(
        question="where is  straße parsed? ",
        conclusion="two",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    assert (second.id, second.replaced) == (first.id, True)
    assert [(m.id, m.question) for m in words_cache.list(project="p")] == [
        (first.id, "where is  straße parsed? ")
    ]
    older = edited(
        tmp_path,
        next(export_memos(words_cache)),
        id=99,
        question="WHERE IS STRASSE PARSED?",
        recorded_at="2000-01-01T00:00:00Z",
    )
    assert import_memos(words_cache, [older]) == ImportResult(read=1, added=0, replaced=0, kept=1)
    assert [m.id for m in words_cache.list(project="p")] == [first.id]


# Words alone: the cut-off ----------------------------------------------------

WORD_MEMOS = [
    (
        "How are retries decided for outgoing HTTP requests?",
        "src/net/retry.py: RetryPolicy allows three attempts with exponential backoff on 503.",
        ["src/net/retry.py"],
    ),
    (
        "Where is the database connection pool configured?",
        "src/db/pool.py builds the pool from settings.DB_POOL_SIZE at start-up.",
        ["src/db/pool.py"],
    ),
    (
        "How is authentication wired?",
        "src/auth/middleware.py checks the bearer token before any view runs.",
        ["src/auth/middleware.py"],
    ),
]


@pytest.fixture
def word_root(tmp_path: Path) -> Path:
    root = tmp_path / "svc"
    for _, _, files in WORD_MEMOS:
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text(f"# {f}\n")
    return root


UNRELATED = "Which colour palette does the marketing site use for its settings page?"
RELATED = "where is the connection pool size configured"


@pytest.mark.parametrize("through", ["library", "cli"])
def test_words_alone_return_nothing_for_an_unrelated_query_sharing_one_word(
    words_cache: MemoCache,
    word_root: Path,
    through: str,
    db_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_model: None,
) -> None:
    """Kills dropping the word-score cut-off without a model (``search.WORDS_CUTOFF``
    in ``fuse``): a query that shares only "settings" with one memo gets no match,
    while a related query still finds its memo (so the check is not vacuous)."""
    ids = [
        words_cache.record(question=q, conclusion=c, files=f, project="svc", root=str(word_root)).id
        for q, c, f in WORD_MEMOS
    ]
    if through == "library":
        unrelated = words_cache.recall(query=UNRELATED, project="svc", root=str(word_root))
        related = words_cache.recall(query=RELATED, project="svc", root=str(word_root))
        assert unrelated.semantic_index is False
        found = ([m.id for m in unrelated.matches], [m.id for m in related.matches])
    else:
        results = []
        for query in (UNRELATED, RELATED):
            run = run_cli(
                capsys,
                [
                    "--db",
                    str(db_path),
                    "recall",
                    "--project",
                    "svc",
                    "--root",
                    str(word_root),
                    "--json",
                    query,
                ],
            )
            assert run.code == 0, run.err
            results.append([m["id"] for m in json.loads(run.out)["matches"]])
        found = (results[0], results[1])
    assert found == ([], [ids[1]])


# Export order, and reading an export back --------------------------------------


@pytest.mark.timeout(60)
def test_export_sorts_by_project_then_id_and_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    """Kills exporting memos in id order instead of by project then id: with
    projects b, a, b recorded in that order the lines are (a, 2), (b, 1), (b, 3),
    through the CLI; ``import`` into a fresh database and ``stale --from`` read
    the file back (same bytes on a second export, the same stale memos)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "shared.py").write_text("S = 1\n")
    (root / "only_b.py").write_text("B = 1\n")
    db = tmp_path / "one.db"
    for project, question, files in (
        ("b", "How is B started?", ["shared.py", "only_b.py"]),
        ("a", "How is A started?", ["shared.py"]),
        ("b", "How is B stopped?", ["only_b.py"]),
    ):
        run = run_cli(
            capsys,
            [
                "--db",
                str(db),
                "record",
                "--project",
                project,
                "--root",
                str(root),
                "--question",
                question,
                "--conclusion",
                "c",
                *files,
            ],
        )
        assert run.code == 0, run.err
    export = tmp_path / "memos.jsonl"
    assert run_cli(capsys, ["--db", str(db), "export", "-o", str(export)]).code == 0
    text = export.read_text()
    assert [(m["project"], m["id"]) for m in map(json.loads, text.splitlines())] == [
        ("a", 2),
        ("b", 1),
        ("b", 3),
    ]
    assert run_cli(capsys, ["--db", str(db), "export"]).out == text
    only_b = run_cli(capsys, ["--db", str(db), "export", "--project", "b"]).out
    assert [(m["project"], m["id"]) for m in map(json.loads, only_b.splitlines())] == [
        ("b", 1),
        ("b", 3),
    ]
    fresh = tmp_path / "fresh.db"
    run = run_cli(capsys, ["--db", str(fresh), "import", str(export), "--root", str(root)])
    assert json.loads(run.out) == {"read": 3, "added": 3, "replaced": 0, "kept": 0}
    assert run_cli(capsys, ["--db", str(fresh), "export"]).out == text
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--check"
    )
    assert (code, report) == (0, {"checked": 3, "stale": []})
    (root / "shared.py").write_text("S = 2\n")
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--check"
    )
    assert code == 1
    assert [(e["project"], e["id"], e["changed"]) for e in report["stale"]] == [
        ("a", 2, ["shared.py"]),
        ("b", 1, ["shared.py"]),
    ]
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--project", "b"
    )
    assert [(e["project"], e["id"]) for e in report["stale"]] == [("b", 1)]


# The racy stat-cache rule ------------------------------------------------------

TWO_SECONDS = 2_000_000_000


class Clock:
    """Stands in for the ``time`` module inside ``explomemo.check.validity``."""

    def __init__(self, now: int) -> None:
        self.now = now

    def time_ns(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(0)
    monkeypatch.setattr(validity, "time", fake)
    return fake


def _last_change(path: Path) -> int:
    st = os.lstat(path)
    return max(st.st_mtime_ns, st.st_ctime_ns)


@pytest.fixture
def one_file(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_bytes(b"version one\n" * 50)
    return root


def _record_a(cache: MemoCache, root: Path) -> int:
    memo = cache.record(
        question="what is in a?", conclusion="c", files=["a.py"], project="p", root=str(root)
    )
    # The snapshot writer's transaction would make the next check's stat-cache
    # write give way (it never waits): the store would miss the entry.
    cache.wait_for_snapshots()
    return memo.id


def _reads(cache: MemoCache, root: Path) -> tuple[dict[int, tuple[list[str], list[str]]], int]:
    hashing.COUNTERS.reset()
    found = stale_of(cache, root)
    return found, hashing.COUNTERS.files


def _reads_elsewhere(
    cache: MemoCache, root: Path
) -> tuple[dict[int, tuple[list[str], list[str]]], int]:
    """``_reads`` in a new MemoCache on the same database, as another process checks."""
    with open_cache(Path(cache.store.path)) as other:
        return _reads(other, root)


def test_a_same_size_edit_inside_the_racy_window_is_reported_changed(
    words_cache: MemoCache, one_file: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills trusting a racy stat-cache entry (``validity.RACY_NS``, ``_trusted``,
    ``_take``): an entry taken 2 s (exactly) after the file's last change is not
    trusted. The file is then rewritten with the same size and its mtime put back,
    on a file system whose clock did not move (``lstat`` shows the stat recorded,
    as within one timestamp tick): the check must read it and say changed."""
    a = one_file / "a.py"
    recorded = os.lstat(a)
    clock.now = _last_change(a) + TWO_SECONDS
    memo = _record_a(words_cache, one_file)
    assert _reads(words_cache, one_file) == ({}, 1)
    assert _reads(words_cache, one_file) == ({}, 1)
    a.write_bytes(b"version two\n" * 50)
    os.utime(a, ns=(recorded.st_atime_ns, recorded.st_mtime_ns))
    real_lstat = os.lstat
    path = os.path.realpath(a)

    def coarse_lstat(name: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if not args and not kwargs and os.fspath(name) == path:
            return recorded
        return real_lstat(name, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", coarse_lstat)
    assert _reads(words_cache, one_file) == ({memo: (["a.py"], [])}, 1)
    assert _reads_elsewhere(words_cache, one_file) == ({memo: (["a.py"], [])}, 1)


def test_an_entry_taken_more_than_2_s_after_the_last_change_is_trusted_without_a_read(
    words_cache: MemoCache, one_file: Path, clock: Clock
) -> None:
    """Kills a racy rule stricter than 2 s (``RACY_NS`` or its comparisons moved, the
    store's filter dropped): an entry taken 2 s + 1 ns after the file's last change
    is trusted, in memory and from the store in another process: no read."""
    clock.now = _last_change(one_file / "a.py") + TWO_SECONDS + 1
    _record_a(words_cache, one_file)
    assert _reads(words_cache, one_file) == ({}, 0)
    assert _reads_elsewhere(words_cache, one_file) == ({}, 0)


def test_an_entry_taken_by_a_check_is_kept_only_past_the_racy_window(
    words_cache: MemoCache, one_file: Path, clock: Clock
) -> None:
    """Kills the check-time racy rule going wrong either way (``Validator._take``,
    ``remember``): a read at exactly 2 s after the last change leaves no trusted
    entry (the next check reads again); a read 1 ns later does, in memory and in
    the store."""
    last = _last_change(one_file / "a.py")
    clock.now = last + TWO_SECONDS
    _record_a(words_cache, one_file)
    assert _reads(words_cache, one_file) == ({}, 1)
    assert _reads(words_cache, one_file) == ({}, 1)
    clock.now = last + TWO_SECONDS + 1
    assert _reads(words_cache, one_file) == ({}, 1)
    assert _reads(words_cache, one_file) == ({}, 0)
    assert _reads_elsewhere(words_cache, one_file) == ({}, 0)


# Import keeps ids -----------------------------------------------------------------


def _three_memos(cache: MemoCache, root: Path) -> list[str]:
    for project, question in (
        ("b", "How is B started?"),
        ("a", "How is A started?"),
        ("b", "How is B stopped?"),
    ):
        cache.record(
            question=question,
            conclusion=f"answer: {question}",
            files=["a.py"],
            project=project,
            root=str(root),
        )
    return list(export_memos(cache))


def test_import_keeps_free_ids_renumbers_taken_ones_and_round_trips_byte_identical(
    one_file: Path, tmp_path: Path
) -> None:
    """Kills import dropping the exported id (``wanted_id``), taking an id that is not
    free, or counting ties as replacements: export → import → export gives the same
    bytes, a taken id gets a new one, a tie keeps the memo there, a newer one
    replaces it in place and an older one does not."""
    source = open_cache(tmp_path / "source.db")
    try:
        lines = _three_memos(source, one_file)
    finally:
        source.close()
    exported = tmp_path / "memos.jsonl"
    exported.write_text("".join(line + "\n" for line in lines))
    memos = read_export(exported)
    assert [(m.project, m.id) for m in memos] == [("a", 2), ("b", 1), ("b", 3)]
    target = open_cache(tmp_path / "target.db")
    try:
        assert import_memos(target, memos, str(one_file)) == ImportResult(
            read=3, added=3, replaced=0, kept=0
        )
        assert list(export_memos(target)) == lines
        assert import_memos(target, memos, str(one_file)) == ImportResult(
            read=3, added=0, replaced=0, kept=3
        )
        assert list(export_memos(target)) == lines
        newer = edited(tmp_path, lines[1], conclusion="revised", recorded_at="2099-01-01T00:00:00Z")
        older = edited(
            tmp_path, lines[2], conclusion="outdated", recorded_at="2000-01-01T00:00:00Z"
        )
        assert import_memos(target, [newer, older], str(one_file)) == ImportResult(
            read=2, added=0, replaced=1, kept=1
        )
        assert {m.id: m.conclusion for m in (target.show(i) for i in (1, 2, 3))} == {
            1: "revised",
            2: memos[0].conclusion,
            3: memos[2].conclusion,
        }
    finally:
        target.close()
    taken = open_cache(tmp_path / "taken.db")
    try:
        for question in ("z1", "z2", "z3"):
            taken.record(
                question=question, conclusion="z", files=["a.py"], project="z", root=str(one_file)
            )
        taken.forget(project="z", memo_id=1)
        taken.forget(project="z", memo_id=2)
        assert import_memos(taken, memos) == ImportResult(read=3, added=3, replaced=0, kept=0)
        assert {(m.id, m.project, m.question) for m in taken.list()} == {
            (1, "b", "How is B started?"),
            (2, "a", "How is A started?"),
            (3, "z", "z3"),
            (4, "b", "How is B stopped?"),
        }
        report = stale_from_export(memos, str(one_file))
        assert (report.checked, report.stale) == (3, [])
    finally:
        taken.close()


# Survivors of the first mutation run (benchmarks/mutation/RESULTS.md) ----------------


def test_a_folder_two_levels_down_moved_out_of_root_and_linked_back_is_missing(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``validity.expect`` taking a file's first folder (``rel.partition``) instead of
    its own (``rel.rpartition``): ``pkg/sub`` moved out of root and linked back keeps
    its files' stat, so only the folder check keeps them from the stat cache."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    root = tmp_path / "proj"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "a.py").write_text("a = 1\n")
    memo = words_cache.record(
        question="q", conclusion="c", files=["pkg/sub/a.py"], project="p", root=str(root)
    ).id
    assert _reads(words_cache, root) == ({}, 0)
    (root / "pkg" / "sub").rename(tmp_path / "sub-outside")
    (root / "pkg" / "sub").symlink_to(tmp_path / "sub-outside")
    assert _reads(words_cache, root) == ({memo: ([], ["pkg/sub/a.py"])}, 0)


def test_a_one_letter_file_name_is_checked(words_cache: MemoCache, tmp_path: Path) -> None:
    """Kills ``Opener.open`` looking at ``rel[1]`` instead of ``rel[0]`` (an IndexError
    on a one-letter path)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "x").write_text("x\n")
    memo = words_cache.record(
        question="q", conclusion="c", files=["x"], project="p", root=str(root)
    ).id
    assert stale_of(words_cache, root) == {}
    (root / "x").write_text("y\n")
    assert stale_of(words_cache, root) == {memo: (["x"], [])}


REFUSALS: list[tuple[str, Callable[[Path], None], str, bool]] = [
    ("missing", lambda root: None, "does not exist (No such file or directory)", True),
    ("directory", lambda root: (root / "it").mkdir(), "is a directory, not a regular file", False),
    ("fifo", lambda root: os.mkfifo(root / "it"), "is a FIFO, not a regular file", False),
    (
        "link-out",
        lambda root: os.symlink(root.parent / "outside.txt", root / "it"),
        "leads outside root through a symbolic link",
        False,
    ),
    (
        "folder-missing",
        lambda root: None,
        "a folder on the way cannot be opened (No such file or directory)",
        True,
    ),
]


@pytest.mark.parametrize(
    ("cid", "make", "reason", "missing"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_each_refusal_says_why_and_whether_the_file_is_missing(
    tmp_path: Path, cid: str, make: Callable[[Path], None], reason: str, missing: bool
) -> None:
    """Kills ``Refused`` losing its reason or its ``missing`` flag, and each reason's text
    changed (``files._kind``, ``open_regular``): the reason is what a refused record
    names, for both ways a file is opened."""
    from explomemo.files import Opener, Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    make(root_path)
    rel = "gone/it" if cid == "folder-missing" else "it"
    root = resolve_root(str(root_path))
    with pytest.raises(Refused) as by_path:
        open_regular(root, rel)
    with Opener(root) as opener, pytest.raises(Refused) as by_opener:
        opener.open(rel)
    for caught in (by_path.value, by_opener.value):
        assert (caught.reason, str(caught), caught.missing) == (reason, reason, missing)


@pytest.mark.parametrize(
    ("kind", "make", "reason"),
    [
        ("fifo", lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
        ("directory", lambda p: p.mkdir(), "is a directory, not a regular file"),
        ("socket", None, "is a socket, not a regular file"),
    ],
)
def test_record_names_what_a_refused_file_is(
    words_cache: MemoCache, tmp_path: Path, kind: str, make: Any, reason: str
) -> None:
    """Kills each kind's name in ``files._kind`` changed: a refused record says exactly
    what the file is."""
    import socket

    root = tmp_path / "proj"
    root.mkdir()
    target = root / "it"
    if make is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(target))
        finally:
            sock.close()
    else:
        make(target)
    with pytest.raises(PathError) as caught:
        words_cache.record(question="q", conclusion="c", files=["it"], project="p", root=str(root))
    assert (
        str(caught.value)
        == f"file 'it' {reason}: record only regular files inside root {str(root)!r}"
    )


def test_record_names_a_device_and_a_link_swapped_in_after_the_check(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the names "a device" and "a symbolic link" changed in ``files._kind``."""
    with pytest.raises(PathError) as caught:
        words_cache.record(question="q", conclusion="c", files=["null"], project="p", root="/dev")
    device = "file 'null' is a device, not a regular file"
    assert str(caught.value) == f"{device}: record only regular files inside root '/dev'"
    from explomemo.files import Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "a.py").write_text("a\n")
    (root_path / "b.py").write_text("b\n")
    root = resolve_root(str(root_path))
    spy = SwapAfter(
        os.path.realpath, lambda *a, **k: True, lambda: swap_link(root_path / "a.py", "b.py")
    )
    monkeypatch.setattr(os.path, "realpath", spy)
    with pytest.raises(Refused) as refused:
        open_regular(root, "a.py")
    assert spy.fired
    assert refused.value.reason == "is a symbolic link, not a regular file"


@pytest.mark.parametrize("how", ["open_regular", "opener"])
def test_a_failing_fstat_closes_what_was_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Kills the descriptor left open (or a TypeError from ``os.close(None)``) when the
    ``fstat`` after an open fails (``files._fall_back``, ``Opener.open``)."""
    from explomemo.files import Opener, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "a.py").write_text("a\n")
    os.symlink("a.py", root_path / "link.py")  # the Opener hands a link to open_regular
    root = resolve_root(str(root_path))
    before = sorted(os.listdir("/proc/self/fd"))

    real_fstat = os.fstat
    calls: list[int] = []

    def failing_fstat(fd: int) -> os.stat_result:
        # Through a link, open_regular's own fstat (the first) passes; _fall_back's fails.
        calls.append(fd)
        if len(calls) == (1 if how == "opener" else 2):
            raise OSError(5, "Input/output error")
        return real_fstat(fd)

    opener = Opener(root)
    try:
        opener._open_folder("")  # the folder is opened before the fstat fails
        held = sorted(os.listdir("/proc/self/fd"))
        monkeypatch.setattr(os, "fstat", failing_fstat)
        with pytest.raises(OSError, match="Input/output error"):
            if how == "opener":
                opener.open("a.py")
            else:
                opener.open("link.py")
        monkeypatch.undo()
        assert sorted(os.listdir("/proc/self/fd")) == held
    finally:
        opener.close()
    assert sorted(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("limit", [0, 21, -1, True, False, "5", 2.0, None])
def test_recall_refuses_a_limit_outside_1_to_20(
    words_cache: MemoCache, tmp_path: Path, limit: Any
) -> None:
    """Kills each part of ``inputs.check_limit`` (the bool test, the int test, both ends
    of 1..20) and its message."""
    from explomemo.errors import InputError

    with pytest.raises(InputError) as caught:
        words_cache.recall(query="q", project="p", root=str(tmp_path), limit=limit)
    assert str(caught.value) == f"limit {limit!r} is out of range: pass a whole number from 1 to 20"


def test_recall_accepts_a_limit_of_1_and_of_20(words_cache: MemoCache, word_root: Path) -> None:
    """Kills the ends of 1..20 in ``inputs.check_limit`` moved inwards."""
    for q, c, f in WORD_MEMOS:
        words_cache.record(question=q, conclusion=c, files=f, project="svc", root=str(word_root))
    for limit in (1, 20):
        found = words_cache.recall(query=RELATED, project="svc", root=str(word_root), limit=limit)
        assert len(found.matches) == 1


def test_the_question_key_is_stored_as_the_schema_says(
    words_cache: MemoCache, tmp_path: Path, db_path: Path
) -> None:
    """Kills ``inputs.question_key`` joining words with anything but one space: the key
    is stored, so memos recorded by an earlier version must keep matching it
    (trimmed, white space collapsed, case-folded: "where is strasse parsed?")."""
    import sqlite3

    root = tmp_path / "proj"
    root.mkdir()
    (root / "parse.py").write_text("p\n")
    words_cache.record(
        question="  Where   is\tSTRASSE parsed? ",
        conclusion="c",
        files=["parse.py"],
        project="p",
        root=str(root),
    )
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("SELECT question_key FROM memos").fetchall() == [
            ("where is strasse parsed?",)
        ]
    finally:
        conn.close()


def test_text_inputs_accept_their_maximum_length_and_name_a_non_string(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``inputs.check_text`` refusing a text of exactly its maximum length, and its
    message for a value that is not a string."""
    from explomemo import inputs
    from explomemo.errors import InputError

    assert inputs.check_text("question", "q" * 2000, 2000) == "q" * 2000
    with pytest.raises(InputError) as caught:
        inputs.check_text("question", 7, 2000)  # type: ignore[arg-type]
    assert str(caught.value) == "question must be a string of 1 to 2,000 characters"
    with pytest.raises(InputError) as caught:
        inputs.check_files("a.py")  # type: ignore[arg-type]
    assert str(caught.value) == "files is empty: pass 1 to 64 paths of the files you read"


# How a check spreads its reads (validity.Validator._read_all, _take_helpers) ------


@dataclass
class ReadSpies:
    """What a check used: pools made, workers submitted, helper processes started,
    and whether ``read_row`` ran off the calling thread."""

    pools: list[Any]
    submits: list[Any]
    helpers: list[Any]
    off_main: list[str]
    #: The number of threads each pool was made for (None: Python's default).
    sizes: list[int | None]


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> ReadSpies:
    import concurrent.futures
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from explomemo.check import readers

    found = ReadSpies([], [], [], [], [])

    class Pool(ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            found.pools.append(self)
            found.sizes.append(args[0] if args else kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            found.submits.append(args)
            return super().submit(fn, *args, **kwargs)

    class CountedHelper(validity.Helper):
        def __init__(self) -> None:
            found.helpers.append(self)
            super().__init__()

    real_row = validity.read_row

    def read_row(*args: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            found.off_main.append(args[1])
        return real_row(*args)

    # Wherever validity takes them from (at import or when a read starts), the spies.
    for module in (concurrent.futures, validity):
        monkeypatch.setattr(module, "ThreadPoolExecutor", Pool, raising=False)
    for module in (readers, validity):
        monkeypatch.setattr(module, "Helper", CountedHelper, raising=False)
        monkeypatch.setattr(module, "read_row", read_row, raising=False)
    return found


def _files(root_path: Path, count: int, size: int) -> tuple[Any, list[validity.Expected]]:
    """``count`` files of ``size`` bytes, and what a check of them (every one read) expects."""
    from explomemo.files import resolve_root

    root_path.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root_path / f"f{i:03d}.bin").write_bytes(bytes([i % 251]) * size)
    root = resolve_root(str(root_path))
    expected = [
        validity.Expected(f"f{i:03d}.bin", root.absolute(f"f{i:03d}.bin"), {size}, None, "")
        for i in range(count)
    ]
    return root, expected


def test_a_read_of_small_files_stays_on_one_thread(tmp_path: Path, spies: ReadSpies) -> None:
    """Kills the read policy of ``Validator._read_all`` sending small files to helper
    processes (``or`` for ``and``) or to threads (the mean-size test or its ``workers = 1``
    changed): 40 files of 1,000 bytes are read here, on the calling thread alone."""
    root, expected = _files(tmp_path / "proj", 40, 1000)
    validator = validity.Validator(None, workers=2)
    try:
        assert len(validator.observe(root, expected)) == 40
    finally:
        validator.close()
    assert (len(spies.pools), len(spies.submits), len(spies.helpers), spies.off_main) == (
        0,
        0,
        0,
        [],
    )


def test_files_averaging_256_kib_are_read_on_two_threads_from_one_pool(
    tmp_path: Path, spies: ReadSpies
) -> None:
    """Kills ``Validator._read_all`` reading files that average exactly 256 KiB on one
    thread (``<=`` for ``<``), and making a pool per read or after ``close``; and
    ``_work_on_threads`` making the pool of two workers for more than one thread (no
    size: Python's default of cores + 4; ``max(2, …)``; ``workers + 1``): checks that
    overlap, as a server's do, share that one thread instead of adding more."""
    root, expected = _files(tmp_path / "proj", 32, 256 * 1024)
    validator = validity.Validator(None, workers=2)
    try:
        for _ in range(2):
            assert len(validator.observe(root, expected)) == 32
        assert (len(spies.pools), len(spies.submits), len(spies.helpers)) == (1, 2, 0)
        assert spies.sizes == [1]
        validator.close()
        assert len(validator.observe(root, expected)) == 32
    finally:
        validator.close()
    assert (len(spies.pools), len(spies.submits)) == (1, 2)


@pytest.mark.timeout(60)
def test_a_large_read_starts_one_helper_per_other_worker_and_keeps_it(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._read_all`` and ``_take_helpers`` starting more helper processes
    than the read has other workers (32 files: two workers of three), giving a thread
    a share besides the helper, starting a new helper when one is idle, or wanting
    more than ``HELPERS_MIN_BYTES`` (``>`` for ``>=``)."""
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 32 * 100)  # this read, exactly
    root, expected = _files(tmp_path / "proj", 32, 100)
    validator = validity.Validator(None, workers=3)
    try:
        for _ in range(2):
            assert len(validator.observe(root, expected)) == 32
            assert not validator._helpers_failed
        assert (len(spies.helpers), len(spies.submits), spies.off_main) == (1, 2, [])
    finally:
        validator.close()


def test_no_helper_is_started_again_after_one_failed_or_once_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._take_helpers`` trying helpers again after one failed to start
    (the failure not remembered, ``and`` for ``or``), or after ``close``."""
    from explomemo.check.readers import HelperError

    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    root, expected = _files(tmp_path / "proj", 32, 100)
    tried: list[int] = []

    class Failing:
        def __init__(self) -> None:
            tried.append(1)
            raise HelperError("no helper today")

    monkeypatch.setattr(validity, "Helper", Failing)
    validator = validity.Validator(None, workers=2)
    try:
        for _ in range(2):
            assert len(validator.observe(root, expected)) == 32
    finally:
        validator.close()
    assert len(tried) == 1
    validator = validity.Validator(None, workers=2)
    validator.close()
    assert len(validator.observe(root, expected)) == 32
    assert len(tried) == 1


def test_progress_is_reported_after_each_file_of_a_small_read(tmp_path: Path) -> None:
    """Kills ``Validator._read_all`` reporting progress from another worker than the
    calling thread's, or batches of another size than a quarter of a worker's share
    (at least one file)."""
    root, expected = _files(tmp_path / "proj", 3, 10)
    calls: list[tuple[int, int]] = []
    validator = validity.Validator(
        None, workers=1, progress=lambda done, total: calls.append((done, total))
    )
    try:
        validator.observe(root, expected)
    finally:
        validator.close()
    assert calls == [(1, 3), (2, 3), (3, 3), (3, 3)]
    root, expected = _files(tmp_path / "eight", 8, 10)
    calls.clear()
    validator = validity.Validator(
        None, workers=1, progress=lambda done, total: calls.append((done, total))
    )
    try:
        validator.observe(root, expected)
    finally:
        validator.close()
    assert calls == [(2, 8), (4, 8), (6, 8), (8, 8), (8, 8)]


def test_every_folder_is_checked_for_a_link_out_of_root_whatever_comes_before_it(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``validity._folders_out_of_root`` stopping at the first folder that is not a
    link, that is gone or that is under a way out (``break`` for ``continue``), or taking
    a link to root itself for a way out: folders ``a`` (kept), ``b`` (deleted), ``c``
    and ``e`` (moved out of root and linked back, ``c`` with a folder ``c/d``) and
    ``here`` (a link to root), checked in that order."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    root = tmp_path / "proj"
    for folder in ("a", "b", "c", "c/d", "e"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x.py").write_text(f"{folder} = 1\n")
    (root / "y.py").write_text("y = 1\n")
    (root / "here").symlink_to(".")
    ids = {
        path: words_cache.record(
            question=path, conclusion="c", files=[path], project="p", root=str(root)
        ).id
        for path in ("a/x.py", "b/x.py", "c/x.py", "c/d/x.py", "e/x.py", "here/y.py")
    }
    assert _reads(words_cache, root) == ({}, 0)
    shutil.rmtree(root / "b")
    for folder in ("c", "e"):
        (root / folder).rename(tmp_path / f"{folder}-outside")
        (root / folder).symlink_to(tmp_path / f"{folder}-outside")
    gone = ("b/x.py", "c/x.py", "c/d/x.py", "e/x.py")
    assert _reads(words_cache, root) == ({ids[path]: ([], [path]) for path in gone}, 0)


def test_a_record_entry_vouches_for_what_was_read_unless_the_file_changed_meanwhile(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``validity.digest_entry`` getting a field of its stat-cache entry wrong, or
    trusting (or not) an entry whatever happened during the read: the entry is the
    file's stat before the read with the moment taken, or never trusted (0) when the
    file changed while it was read."""
    import hashlib

    import xxhash

    from explomemo.store.database import StatRow

    path = tmp_path / "a.py"
    path.write_bytes(b"one\n" * 100)
    clock.now = _last_change(path) + 10 * TWO_SECONDS
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        digest, entry = validity.digest_entry(fd, sha256=True, limit=1000)
        assert (digest.size, digest.sha256) == (
            400,
            hashlib.sha256(b"one\n" * 100).hexdigest(),
        )
        assert entry == StatRow(
            dev=st.st_dev,
            ino=st.st_ino,
            size=400,
            mtime_ns=st.st_mtime_ns,
            ctime_ns=st.st_ctime_ns,
            xxh3=xxhash.xxh3_128_hexdigest(b"one\n" * 100),
            cached_at_ns=clock.now,
        )
        real_hash = validity.hash_fd

        def hash_then_grow(*args: Any, **kwargs: Any) -> Any:
            found = real_hash(*args, **kwargs)
            with open(path, "ab") as grow:
                grow.write(b"more\n")
            return found

        monkeypatch.setattr(validity, "hash_fd", hash_then_grow)
        os.lseek(fd, 0, os.SEEK_SET)
        _, changed = validity.digest_entry(fd, sha256=True, limit=1000)
        assert (changed.size, changed.cached_at_ns) == (400, 0)
    finally:
        os.close(fd)


def test_an_oversized_file_is_refused_after_reading_no_more_than_32_mib_and_one_byte(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``validity.digest_entry`` dropping the read limit: a 40 MiB file is refused
    having read 32 MiB + 1 byte, not all of it."""
    root = tmp_path / "proj"
    root.mkdir()
    with open(root / "big.bin", "wb") as big:
        big.truncate(40 * 1024 * 1024)
    hashing.COUNTERS.reset()
    with pytest.raises(PathError, match="larger than 32 MiB"):
        words_cache.record(
            question="q", conclusion="c", files=["big.bin"], project="p", root=str(root)
        )
    assert hashing.COUNTERS.bytes == 32 * 1024 * 1024 + 1


@pytest.mark.timeout(60)
def test_a_check_that_finds_the_helpers_busy_starts_no_more_than_one_per_other_core(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._take_helpers`` counting its helpers wrong (``+`` for ``-`` in
    the cap, ``=`` or ``-=`` for ``+=``): while one check holds the only helper two
    cores allow, two more checks in another thread go without one."""
    import threading

    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    root, expected = _files(tmp_path / "proj", 32, 100)
    entered, release = threading.Event(), threading.Event()
    real_read = validity.Helper.read

    def held_read(self: Any, *args: Any) -> Any:
        if self is spies.helpers[0]:
            entered.set()
            # Held until released, or until a second helper shows (then the
            # check that started it would wait for this one's thread).
            for _ in range(600):
                if release.wait(0.05) or len(spies.helpers) > 1:
                    break
        return real_read(self, *args)

    monkeypatch.setattr(validity.Helper, "read", held_read)
    validator = validity.Validator(None, workers=2)
    first: list[Any] = []
    holder = threading.Thread(target=lambda: first.append(validator.observe(root, expected)))
    holder.start()
    try:
        assert entered.wait(30), "the first check never handed its helper a batch"
        for _ in range(2):
            assert len(validator.observe(root, expected)) == 32
        assert len(spies.helpers) == 1
    finally:
        release.set()
        holder.join(30)
        validator.close()
    assert len(first[0]) == 32


@pytest.mark.timeout(60)
def test_a_read_takes_an_idle_helper_and_starts_only_the_ones_it_lacks(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._take_helpers`` adding the helpers it took to those it starts
    (``count + len(taken)``): on four cores a read of 32 files uses one helper, a read of
    48 files two (the idle one and one more), never three."""
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    small, expected_small = _files(tmp_path / "small", 32, 100)
    large, expected_large = _files(tmp_path / "large", 48, 100)
    validator = validity.Validator(None, workers=4)
    try:
        assert len(validator.observe(small, expected_small)) == 32
        assert len(spies.helpers) == 1
        assert len(validator.observe(large, expected_large)) == 48
        assert len(spies.helpers) == 2
    finally:
        validator.close()


def test_a_refused_file_does_not_keep_the_files_after_it_from_the_stat_cache(
    tmp_path: Path, clock: Clock
) -> None:
    """Kills ``Validator._take`` stopping at the first file it could not read (``break``
    for ``continue``): ``a.lnk`` (a link out of root, refused) comes before ``b.py``, whose
    entry must still be kept, so the next check reads nothing."""
    from explomemo.files import resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "b.py").write_text("b\n")
    (tmp_path / "outside.py").write_text("b\n")
    (root_path / "a.lnk").symlink_to(tmp_path / "outside.py")
    clock.now = _last_change(root_path / "b.py") + 10 * TWO_SECONDS
    root = resolve_root(str(root_path))
    expected = [
        validity.Expected(rel, root.absolute(rel), {2}, None, "") for rel in ("a.lnk", "b.py")
    ]
    validator = validity.Validator(None, workers=1)
    try:
        assert validator.observe(root, expected)["a.lnk"] is None
        hashing.COUNTERS.reset()
        again = validator.observe(root, expected)
        assert (again["a.lnk"], "b.py" in again, hashing.COUNTERS.files) == (None, True, 0)
    finally:
        validator.close()


def test_root_slash_records_and_checks_a_file(words_cache: MemoCache, tmp_path: Path) -> None:
    """Kills ``files._inside`` and ``Root.absolute`` getting root ``/`` wrong: with root
    ``/`` a file is stored relative to it, found unchanged, then changed."""
    target = tmp_path / "a.py"
    target.write_text("a = 1\n")
    real = os.path.realpath(target)
    result = words_cache.record(
        question="q", conclusion="c", files=[str(target)], project="p", root="/"
    )
    assert [f.path for f in result.files] == [real[1:]]
    assert stale_of(words_cache, Path("/")) == {}
    target.write_text("a = 2\n")
    assert stale_of(words_cache, Path("/")) == {result.id: ([real[1:]], [])}


def test_a_root_given_through_a_link_takes_absolute_paths_under_either_name(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``files.relative_path`` choosing the wrong base for an absolute path when
    root is given through a symbolic link: a path under the link's name and one under
    the real folder are both the same file inside root; one beside it is not."""
    real = tmp_path / "real-root"
    real.mkdir()
    (real / "a.py").write_text("a\n")
    (tmp_path / "real-rootless.py").write_text("x\n")
    link = tmp_path / "link-root"
    link.symlink_to(real)
    for given in (str(link / "a.py"), str(real / "a.py")):
        result = words_cache.record(
            question=given, conclusion="c", files=[given], project="p", root=str(link)
        )
        assert (result.root, [f.path for f in result.files]) == (str(link), ["a.py"])
    beside = str(tmp_path / "real-rootless.py")
    with pytest.raises(PathError) as caught:
        words_cache.record(
            question="q", conclusion="c", files=[beside], project="p", root=str(link)
        )
    assert str(caught.value) == (
        f"files[0] {beside!r} is outside root {str(link)!r}: record only files inside root,"
        " or pass a root that contains them"
    )


def test_a_link_to_root_itself_is_refused_by_name(words_cache: MemoCache, tmp_path: Path) -> None:
    """Kills ``files.relative_path`` letting a link to root itself through (``and`` for
    ``or``): it is refused as a way out of root, named as given."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "here").symlink_to(".")
    with pytest.raises(PathError) as caught:
        words_cache.record(
            question="q", conclusion="c", files=["here"], project="p", root=str(root)
        )
    assert str(caught.value) == (
        f"files[0] 'here' leads outside root {str(root)!r} through a symbolic link:"
        " record the file it points to inside root, or pass a root that contains it"
    )


def test_each_bad_root_is_refused_with_its_own_sentence(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills the checks and sentences of ``files.resolve_root`` and ``check_text_path``
    changed, and the 1,024-character limit moved: a root of exactly 1,024 characters is
    looked up (it does not exist), one of 1,025 is refused for its length."""
    (tmp_path / "file.txt").write_text("x\n")
    at_limit = str(tmp_path) + "/" + "r" * (1024 - len(str(tmp_path)) - 1)
    over = at_limit + "r"
    cases = {
        "": "root is empty: pass an absolute directory, or leave it out",
        "proj": "root 'proj' is not an absolute path: pass an absolute directory",
        f"{tmp_path}\x00": (
            f"root {str(tmp_path) + chr(0)!r} contains a NUL byte: pass a real file path"
        ),
        f"{tmp_path}\udcff": (
            f"root '{tmp_path}\\xff' is not valid UTF-8: explomemo stores paths as UTF-8;"
            " pass a root whose path is UTF-8"
        ),
        # A lone surrogate from JSON ("\ud800"), not a byte of a file name: no
        # surrogate escape holds it, so it is written as its code point.
        f"{tmp_path}{chr(0xD800)}": (
            f"root '{tmp_path}\\ud800' is not valid UTF-8: explomemo stores paths as UTF-8;"
            " pass a root whose path is UTF-8"
        ),
        at_limit: f"root {at_limit!r} does not exist: pass an existing directory",
        over: (
            "root is 1025 characters long, over the limit of 1024:"
            " pass a shorter absolute directory"
        ),
        str(tmp_path / "file.txt"): (
            f"root {str(tmp_path / 'file.txt')!r} is not a directory: pass the project's directory"
        ),
    }
    for root, sentence in cases.items():
        with pytest.raises(PathError) as caught:
            words_cache.stale(project="p", root=root)
        assert str(caught.value) == sentence, root


def test_a_file_that_cannot_be_opened_is_refused_as_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the reasons and ``missing`` flags of the opens that fail after the checks
    (``open_regular``, ``Opener``): a file or folder that cannot be opened (here: made to
    fail with EACCES, as it would for another user), and a root deleted meanwhile."""
    import errno

    from explomemo.files import Opener, Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    (root_path / "pkg").mkdir(parents=True)
    (root_path / "a.py").write_text("a\n")
    (root_path / "pkg" / "b.py").write_text("b\n")
    root = resolve_root(str(root_path))
    real_open = os.open
    denied: set[str] = set()

    def open_denied(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if isinstance(path, str) and path in denied:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_denied)
    cases = [
        ("a.py", "a.py", "cannot be opened (Permission denied)"),
        ("pkg", "pkg/b.py", "a folder on the way cannot be opened (Permission denied)"),
    ]
    for name, rel, reason in cases:
        denied.clear()
        denied.add(name)
        for opener in (None, Opener(root)):
            with pytest.raises(Refused) as caught:
                open_regular(root, rel) if opener is None else opener.open(rel)
            if opener is not None:
                opener.close()
            assert (caught.value.reason, caught.value.missing) == (reason, True)
    denied.clear()
    monkeypatch.undo()
    shutil.rmtree(root_path)
    for opener in (None, Opener(root)):
        with pytest.raises(Refused) as caught:
            open_regular(root, "a.py") if opener is None else opener.open("a.py")
        assert (caught.value.reason, caught.value.missing) == (
            "root cannot be opened (No such file or directory)",
            True,
        )


def test_a_path_that_cannot_be_resolved_is_refused_as_missing(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the sentences and the ``missing`` flag of a path ``os.path.realpath`` fails on
    (it can, when a link changes under it): ``open_regular`` refuses it as missing, and a
    record names the file."""
    import errno

    from explomemo.files import Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "a.py").write_text("a\n")
    root = resolve_root(str(root_path))

    real_realpath = os.path.realpath

    def failing_realpath(path: Any, *args: Any, **kwargs: Any) -> str:
        if str(path).endswith("a.py"):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        return real_realpath(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", failing_realpath)
    with pytest.raises(Refused) as caught:
        open_regular(root, "a.py")
    assert (caught.value.reason, caught.value.missing) == (
        "cannot be resolved (Too many levels of symbolic links)",
        True,
    )
    with pytest.raises(PathError) as refused:
        words_cache.record(
            question="q", conclusion="c", files=["a.py"], project="p", root=str(root_path)
        )
    assert str(refused.value) == (
        "files[0] 'a.py' cannot be resolved (Too many levels of symbolic links): pass a file"
        " that exists inside root and is not being replaced"
    )


def test_the_opener_refuses_a_file_whose_device_or_kind_changed_by_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Opener.open`` checking the opened file's device or kind with ``and``
    instead of ``or``, and its sentence: a file whose ``fstat`` shows another device
    (same inode), or another kind, than its ``lstat`` is refused as replaced."""
    import stat as stat_module

    from explomemo.files import Opener, Refused, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "a.py").write_text("a\n")
    root = resolve_root(str(root_path))
    real_fstat = os.fstat

    class Shown:
        def __init__(self, real: os.stat_result, **changed: int) -> None:
            self._real, self._changed = real, changed

        def __getattr__(self, name: str) -> Any:
            return self._changed.get(name, getattr(self._real, name))

    for changed in (
        {"st_dev": real_fstat(0).st_dev + 12345},
        {"st_mode": stat_module.S_IFIFO | 0o644},
    ):
        monkeypatch.setattr(
            os, "fstat", lambda fd, changed=changed: Shown(real_fstat(fd), **changed)
        )
        with Opener(root) as opener, pytest.raises(Refused) as caught:
            opener.open("a.py")
        monkeypatch.undo()
        assert (caught.value.reason, caught.value.missing) == (
            "was replaced while it was being opened",
            False,
        )
    decoy = root_path / "decoy"
    decoy.write_text("b\n")
    spy = SwapAfter(os.stat, _is_lstat_of("a.py"), lambda: os.replace(decoy, root_path / "a.py"))
    monkeypatch.setattr(os, "stat", spy)
    with Opener(root) as opener, pytest.raises(Refused) as caught:
        opener.open("a.py")
    assert spy.fired and caught.value.reason == "was replaced while it was being opened"


def test_a_read_just_under_helpers_min_bytes_stays_here(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator.observe`` counting the bytes to read from 1 instead of 0: a read
    of one byte less than ``HELPERS_MIN_BYTES`` starts no helper process."""
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 32 * 100 + 1)
    root, expected = _files(tmp_path / "proj", 32, 100)
    validator = validity.Validator(None, workers=3)
    try:
        assert len(validator.observe(root, expected)) == 32
    finally:
        validator.close()
    assert spies.helpers == []


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: a check reads on one thread")
def test_a_validator_uses_every_core_by_default(tmp_path: Path, spies: ReadSpies) -> None:
    """Kills ``Validator`` taking one worker instead of one per core when none is given."""
    root, expected = _files(tmp_path / "proj", 32, 256 * 1024)
    validator = validity.Validator(None)
    try:
        assert len(validator.observe(root, expected)) == 32
    finally:
        validator.close()
    assert len(spies.submits) == min(os.cpu_count() or 1, 2) - 1


@pytest.mark.timeout(60)
def test_every_helper_process_is_stopped_on_close(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._give_back_helpers`` dropping the idle helpers when a read gives
    its own back (``=`` for ``+=``): a read with two helpers, then one with one, then
    ``close``: both helper processes have exited."""
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    large, expected_large = _files(tmp_path / "large", 48, 100)
    small, expected_small = _files(tmp_path / "small", 32, 100)
    validator = validity.Validator(None, workers=3)
    try:
        assert len(validator.observe(large, expected_large)) == 48
        assert len(validator.observe(small, expected_small)) == 32
        assert len(spies.helpers) == 2
    finally:
        validator.close()
    assert [helper._process.poll() is not None for helper in spies.helpers] == [True, True]


@pytest.mark.timeout(60)
def test_three_workers_read_on_two_named_threads_beside_the_caller(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator._read_all`` making its pool smaller than its other workers (they
    would wait for each other), or naming its threads otherwise: with three workers
    the calling thread waits until both ``explomemo-hash`` threads have read a file."""
    import threading

    monkeypatch.setattr(validity, "PARALLEL_MEAN_BYTES", 0)
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 1 << 62)
    root, expected = _files(tmp_path / "proj", 48, 100)
    readers: set[str] = set()
    both = threading.Event()
    meet = threading.Barrier(2, timeout=5)
    real_row = validity.read_row

    def read_row(*args: Any) -> Any:
        name = threading.current_thread().name
        if threading.current_thread() is threading.main_thread():
            both.wait(10)
        elif name not in readers:
            readers.add(name)
            # Each thread reads its first file only once the other is there too.
            try:
                meet.wait()
                both.set()
            except threading.BrokenBarrierError:
                pass
        return real_row(*args)

    monkeypatch.setattr(validity, "read_row", read_row)
    validator = validity.Validator(None, workers=3)
    try:
        assert len(validator.observe(root, expected)) == 48
    finally:
        validator.close()
    assert both.is_set()
    assert sorted(name.rpartition("_")[0] for name in readers) == ["explomemo-hash"] * 2


def test_folders_above_a_file_are_checked_for_a_link_out_of_root_at_every_level(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``validity._folders_out_of_root`` checking fewer folders than every ancestor
    of each file (``folder = None``, ``partition``, ``[1]``) or finding a folder under a
    way out by its first component only: ``p`` (above ``p/q/y.py``) and ``a/b`` (above
    ``a/b/c/x.py``) are moved out of root and linked back."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    root = tmp_path / "proj"
    for rel in ("a/b/c/x.py", "p/q/y.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    ids = {
        rel: words_cache.record(
            question=rel, conclusion="c", files=[rel], project="p", root=str(root)
        ).id
        for rel in ("a/b/c/x.py", "p/q/y.py")
    }
    assert _reads(words_cache, root) == ({}, 0)
    for folder in ("a/b", "p"):
        (root / folder).rename(tmp_path / folder.replace("/", "-"))
        (root / folder).symlink_to(tmp_path / folder.replace("/", "-"))
    assert _reads(words_cache, root) == ({memo: ([], [rel]) for rel, memo in ids.items()}, 0)


def test_root_slash_trusts_its_stat_cache(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Root.absolute`` putting a second "/" after root ``/``: a folder that is a
    link inside root would then look like a way out of root, and its files be read at
    every check."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("a\n")
    (tmp_path / "alias").symlink_to(tmp_path / "pkg")
    words_cache.record(
        question="q",
        conclusion="c",
        files=[str(tmp_path / "alias" / "a.py")],
        project="p",
        root="/",
    )
    assert _reads(words_cache, Path("/")) == ({}, 0)


@pytest.mark.parametrize("rel", ["/etc/passwd", ".", "pkg/.", "pkg/..", "pkg/", "gone/sub/it"])
def test_the_opener_refuses_odd_paths_as_open_regular_does(tmp_path: Path, rel: str) -> None:
    """Kills ``Opener.open`` and ``Opener._open_folder`` taking the strict walk for a path
    it must hand to ``open_regular`` (an absolute path, a last part "", "." or ".."), or
    losing the reason of a folder under one that cannot be opened: the Opener refuses
    each as ``open_regular`` does."""
    from explomemo.files import Opener, Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    (root_path / "pkg").mkdir(parents=True)
    root = resolve_root(str(root_path))
    with pytest.raises(Refused) as by_path:
        open_regular(root, rel)
    with Opener(root) as opener, pytest.raises(Refused) as by_opener:
        opener.open(rel)
    assert (by_opener.value.reason, by_opener.value.missing) == (
        by_path.value.reason,
        by_path.value.missing,
    )


def test_dot_and_dot_dot_and_a_root_realpath_fails_on_are_refused_with_their_sentence(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the checks of ``files.relative_path`` for "." and ".." changed (each would
    then be refused later, with the sentence for a link), the sentence of a file name
    that is not UTF-8 (the default advice of ``check_text_path``), and of a root
    ``os.path.realpath`` fails on in ``resolve_root``."""
    import errno

    root = tmp_path / "proj"
    root.mkdir()
    expected = {
        ".": f"files[0] '.' is root {str(root)!r} itself, a folder: pass the files in it"
        " that the conclusion rests on",
        "..": f"files[0] '..' is outside root {str(root)!r}: record only files inside root,"
        " or pass a root that contains them",
        "a.py/": "files[0] 'a.py/' ends with '/', so it names a folder, not a file: pass the"
        " path of a file, without the '/'",
        ("d" * 99 + "/") * 40 + "x" * 97: "files[0] is 4,097 characters long relative to root,"
        " over 4,096: record files with shorter paths, or pass a root nearer to them",
        "bad\udcff.py": "files[0] 'bad\\xff.py' is not valid UTF-8: explomemo stores paths as"
        " UTF-8; rename the file",
    }
    for given, sentence in expected.items():
        with pytest.raises(PathError) as caught:
            words_cache.record(
                question="q", conclusion="c", files=[given], project="p", root=str(root)
            )
        assert str(caught.value) == sentence
    # At the limit a path is looked up (and here does not exist), not refused for its length.
    with pytest.raises(PathError, match="a folder on the way cannot be opened"):
        words_cache.record(
            question="q",
            conclusion="c",
            files=[("d" * 99 + "/") * 40 + "x" * 96],
            project="p",
            root=str(root),
        )

    def failing_realpath(path: Any, *args: Any, **kwargs: Any) -> str:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))

    monkeypatch.setattr(os.path, "realpath", failing_realpath)
    with pytest.raises(PathError) as caught:
        words_cache.stale(project="p", root=str(root))
    assert str(caught.value) == (
        f"root {str(root)!r} cannot be resolved (Too many levels of symbolic links):"
        " pass an existing directory"
    )


def test_open_regular_names_a_file_replaced_between_its_lstat_and_its_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the sentence of ``open_regular``'s identity check changed."""
    from explomemo.files import Refused, open_regular, resolve_root

    root_path = tmp_path / "proj"
    root_path.mkdir()
    (root_path / "a.py").write_text("a\n")
    (root_path / "decoy").write_text("b\n")
    root = resolve_root(str(root_path))
    spy = SwapAfter(
        os.stat, _is_lstat_of("a.py"), lambda: os.replace(root_path / "decoy", root_path / "a.py")
    )
    monkeypatch.setattr(os, "stat", spy)
    with pytest.raises(Refused) as caught:
        open_regular(root, "a.py")
    assert spy.fired
    assert (caught.value.reason, caught.value.missing) == (
        "was replaced while it was being opened",
        False,
    )


@pytest.mark.timeout(60)
def test_close_waits_for_the_threads_of_a_read_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator.close`` returning before its hashing threads are done
    (``shutdown(wait=False)``): a thread still reading a file when ``close`` is called
    has finished it when ``close`` returns."""
    import threading

    monkeypatch.setattr(validity, "PARALLEL_MEAN_BYTES", 0)
    root, expected = _files(tmp_path / "proj", 32, 100)
    inside, go, done = threading.Event(), threading.Event(), threading.Event()
    real_row = validity.read_row

    def read_row(*args: Any) -> Any:
        if threading.current_thread().name.startswith("explomemo-hash") and not inside.is_set():
            inside.set()
            go.wait(10)
            found = real_row(*args)
            done.set()
            return found
        return real_row(*args)

    monkeypatch.setattr(validity, "read_row", read_row)
    validator = validity.Validator(None, workers=2)
    checking = threading.Thread(target=validator.observe, args=(root, expected))
    checking.start()
    try:
        assert inside.wait(10), "no hashing thread read a file"
        threading.Timer(0.2, go.set).start()
        validator.close()
        assert done.is_set()
    finally:
        go.set()
        checking.join(10)


def test_a_validator_reads_on_one_thread_when_the_cores_are_unknown(
    tmp_path: Path, spies: ReadSpies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator`` assuming two workers when ``os.cpu_count()`` cannot tell."""
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    root, expected = _files(tmp_path / "proj", 32, 256 * 1024)
    validator = validity.Validator(None)
    try:
        assert len(validator.observe(root, expected)) == 32
    finally:
        validator.close()
    assert (spies.pools, spies.submits, spies.helpers) == ([], [], [])


# Control characters: what people's formats escape, and JSON keeps exact -----

#: The characters docs/reference.md ("What people's formats show") says are
#: never shown raw, written out here on their own: C0, DEL, C1, U+2028/U+2029,
#: the bidirectional embeddings and overrides (U+202A-U+202E) and isolates
#: (U+2066-U+2069).
NEVER_RAW = frozenset(
    [
        *range(0x20),
        0x7F,
        *range(0x80, 0xA0),
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
)
#: Every code point near the ones above, and a few far from them.
NEAR = [*range(0x00, 0x2100), 0x200E, 0x200F, 0x061C, 0xFEFF, 0x1F600]


def _escaped(code: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    return named.get(code, f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def test_one_line_escapes_each_control_character_and_nothing_else() -> None:
    """Kills a changed bound of a range of unsafe characters, a changed escape and a
    character escaped that should not be (LRM, RLM and ALM stay, as does U+00A0)."""
    for code in NEAR:
        text = f"a{chr(code)}b"
        wanted = f"a{_escaped(code)}b" if code in NEVER_RAW else text
        assert printable.one_line(text) == wanted, hex(code)
        assert printable.message(text) == wanted, hex(code)


def test_block_keeps_new_lines_and_tabs_and_escapes_the_rest() -> None:
    """Kills ``block`` escaping a new line or a tab, or showing another control raw."""
    for code in NEAR:
        text = f"a{chr(code)}b"
        kept = code not in NEVER_RAW or code in (0x09, 0x0A)
        assert printable.block(text) == (text if kept else f"a{_escaped(code)}b"), hex(code)


def test_json_text_writes_unsafe_characters_as_u_escapes_of_the_same_value() -> None:
    """Kills ``json_text`` leaving DEL, C1, a separator or a bidi control raw, escaping
    another character, or writing an escape that reads back as another value."""
    for code in NEAR:
        text = f"a{chr(code)}b"
        shown = printable.json_text(json.dumps(text, ensure_ascii=False))
        assert json.loads(shown) == text, hex(code)
        assert not NEVER_RAW & {ord(c) for c in shown}, hex(code)
        if code >= 0x7F:
            raw = code not in NEVER_RAW
            assert (chr(code) in shown) == raw, hex(code)
            assert (f"\\u{code:04x}" in shown) == (not raw), hex(code)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("::error::x", "\\::error::x"),
        ("  ::warning::x", "  \\::warning::x"),
        ("\t::notice::x", "\t\\::notice::x"),
        ("ok\n::add-mask::x\nok", "ok\n\\::add-mask::x\nok"),
        ("a ##[error]b ##[group]c", "a ##\\[error]b ##\\[group]c"),
        ("::a\n##[b", "\\::a\n##\\[b"),
        ("a::b", "a::b"),
        (":x:", ":x:"),
        ("# [a] ## [b] ##(c)", "# [a] ## [b] ##(c)"),
        ("", ""),
    ],
)
def test_no_line_becomes_a_workflow_command(text: str, shown: str) -> None:
    """Kills a line starting with ``::`` (after white space) or holding ``##[`` left as
    it is, another line changed, or a line's leading white space lost."""
    assert printable.no_workflow_commands(text) == shown


def test_an_error_message_is_one_line_that_is_no_workflow_command() -> None:
    """Kills ``message`` skipping either step: a new line would start a command."""
    assert printable.message("bad\n::error::x ##[y]") == "bad\\n::error::x ##\\[y]"
    assert printable.message("::error::x\r") == "\\::error::x\\r"


# git subprocesses: the hostile repository, read in this process -------------


def test_git_read_in_process_ignores_the_callers_variables_and_the_repositorys_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``gitrepo`` passing on a ``GIT_*`` variable of the caller's, reading the
    global or system configuration, or losing a guard of its environment or command
    line: the hostile repository of ``test_diff_git_safety``, read by the library in
    this process (where a mutation run sees the calls), shows its diffs from git,
    runs none of its programs and writes nothing into it."""
    from test_diff_git_safety import TOKENS_DIFF, fingerprint, hostile_repo

    repo, markers, env = hostile_repo(tmp_path)
    caller = {k: v for k, v in env.items() if k.startswith(("GIT_", "EXPLOMEMO_"))}
    # The caller's global configuration would point git at another object store.
    elsewhere = tmp_path / "elsewhere" / ".git" / "objects"
    (tmp_path / "gitconfig").write_text(
        f"[core]\n\tfsmonitor = {tmp_path / 'traps' / 'fsmonitor'}\n"
    )
    caller["GIT_CONFIG_GLOBAL"] = str(tmp_path / "gitconfig")
    caller["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(elsewhere)
    db = tmp_path / "db" / "x.db"
    untracked = "def f():\n    return 1\n"
    repo.write("scratch.py", untracked)
    record = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    with monkeypatch.context() as hostile:
        for key, value in caller.items():
            hostile.setenv(key, value)
        for question, files in [
            ("How are tokens verified?", ["tokens.py", "old.py", "scratch.py"]),
            ("Tokens, recorded before blob ids", ["tokens.py"]),
        ]:
            run = run_cli(
                capsys,
                [*record, "--question", question, "--conclusion", "c", *files],
            )
            assert run.code == 0, run.err
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = 2")
    conn.close()
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    git(repo.path, "mv", "old.py", "new.py")
    repo.write("scratch.py", untracked + "# edited\n")
    for marker in markers.iterdir():
        marker.unlink()
    before = fingerprint(repo.path)
    with monkeypatch.context() as hostile:
        for key, value in caller.items():
            hostile.setenv(key, value)
        shown = run_cli(capsys, ["--db", str(db), "show", "1", "--json"])
        old = run_cli(capsys, ["--db", str(db), "show", "2", "--json"])
    assert shown.code == old.code == 0, (shown.err, old.err)
    files = {f["path"]: f for f in json.loads(shown.out)["files"]}
    assert (files["tokens.py"]["diff"], files["tokens.py"]["diff_source"]) == (TOKENS_DIFF, "git")
    assert files["old.py"]["moved_to"] == "new.py"
    assert files["scratch.py"]["diff_source"] == "unavailable"
    first = json.loads(old.out)["files"][0]
    assert (first["diff"], first["diff_source"]) == (TOKENS_DIFF, "git")
    assert sorted(p.name for p in markers.iterdir()) == []
    assert fingerprint(repo.path) == before


# Snapshots: kept or not, restored exactly or not at all ----------------------


def _snapshot_rows(db: Path) -> dict[str, str]:
    """{SHA-256: codec} of every snapshot the database holds."""
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT sha256, codec FROM snapshots"))
    finally:
        conn.close()


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
        ("offline", True),
    ],
)
def test_explomemo_snapshots_turns_snapshots_off_by_each_of_its_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, kept: bool
) -> None:
    """Kills ``snapshots.enabled`` losing one of off, 0, false and no, its strip or its
    lower-casing, or taking any other value for off."""
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


class FailingStdin(io.BytesIO):
    """Standard input whose read fails with ``error`` (an I/O error of the pipe)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def read(self, size: int | None = -1) -> bytes:
        raise self.error


def _hook_error(event: str, error: BaseException) -> bytes:
    out, err = io.BytesIO(), io.BytesIO()
    code = run_hook(event, db=None, project=None, stdin=FailingStdin(error), stdout=out, stderr=err)
    assert (code, out.getvalue()) == (0, b"")
    return err.getvalue()


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop"])
def test_a_hook_error_is_one_line_of_at_most_400_characters(event: str) -> None:
    """Kills ``_one_line`` cutting at another length, without its ellipsis, keeping
    new lines and runs of white space, or losing the error's kind when it has no
    message."""
    head = f"explomemo hook {event}: ".encode()
    assert _hook_error(event, OSError("e" * 400)) == head + b"e" * 400 + b"\n"
    assert _hook_error(event, OSError("e" * 401)) == head + ("e" * 399 + "…").encode() + b"\n"
    assert _hook_error(event, OSError(" a \n\tb  c\n")) == head + b"a b c\n"
    assert _hook_error(event, OSError()) == head + b"OSError\n"
    assert _hook_error(event, ValueError("")) == head + b"ValueError\n"


def test_a_hook_error_that_is_not_utf_8_is_still_written() -> None:
    """Kills the error line's encoding failing (``errors="replace"`` dropped) on a
    message holding a file name that is not UTF-8 (a surrogate escape)."""
    line = _hook_error("prompt", OSError("no database at /tmp/caf\udce9/x.db"))
    assert line == b"explomemo hook prompt: no database at /tmp/caf?/x.db\n"


def test_the_hook_command_reads_stdin_and_answers_on_stdout_in_process(
    project_with_a_memo: Path,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """Kills ``run_hook`` taking other streams than the process's own when none is
    given, or answering with anything but one JSON object and a new line."""
    from explomemo.cli.main import main

    payload = {"cwd": str(project_with_a_memo), "prompt": "where are JWT tokens validated?"}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    assert main(["--db", str(db_path), "hook", "prompt"]) == 0
    out, err = capsysbinary.readouterr()
    assert err == b"" and out.endswith(b"}\n") and out.count(b"\n") == 1
    answer = json.loads(out)
    assert "tokens.verify()" in answer["hookSpecificOutput"]["additionalContext"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"[]")))
    assert main(["--db", str(db_path), "hook", "prompt"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == b"" and err.startswith(b"explomemo hook prompt: ") and err.count(b"\n") == 1


@pytest.fixture
def project_with_a_memo(tmp_path: Path, db_path: Path) -> Path:
    """A folder with one memo recorded by words about JWT tokens."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "tokens.py").write_text("def verify(token): ...\n")
    with open_cache(db_path) as cache:
        cache.record(
            question="Where are JWT tokens validated?",
            conclusion="tokens.py: tokens.verify() checks the signature.",
            files=["tokens.py"],
            project="shop",
            root=str(root),
        )
    return root


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a repository to another user takes root")
def test_a_repository_of_another_user_is_read_only_when_the_users_own_config_trusts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``GitRepo.at`` or ``_user_safe_directories`` losing git's ``safe.directory``
    rule either way: a repository owned by another user gives no diff, until the
    user's global git configuration lists it; then its history gives the diff."""
    from explomemo.changes import gitrepo

    repo = Repo(tmp_path / "theirs")
    repo.write("tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.commit("A")
    db = tmp_path / "memos.db"
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    record = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    run = run_cli(capsys, [*record, "--question", "q", "--conclusion", "c", "tokens.py"])
    assert run.code == 0, run.err
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    for folder, _, names in os.walk(repo.path):
        for name in [".", *names]:
            os.chown(os.path.join(folder, name), 12345, 12345, follow_symlinks=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    # What git's safe.directory entries were, read once per process: not yet.
    monkeypatch.setattr(gitrepo, "_trusted_folders", None, raising=False)

    def diff_source() -> str:
        shown = run_cli(capsys, ["--db", str(db), "show", "1", "--json"])
        assert shown.code == 0, shown.err
        source: str = json.loads(shown.out)["files"][0]["diff_source"]
        return source

    (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {tmp_path / 'elsewhere'}\n")
    assert diff_source() == "unavailable"
    monkeypatch.setattr(gitrepo, "_trusted_folders", None, raising=False)
    (home / ".gitconfig").write_bytes(
        b"[safe]\n\tdirectory = /srv/caf\xe9\n"
        + f"\tdirectory = {tmp_path / 'elsewhere'}\n\tdirectory = {repo.path}\n".encode()
    )
    # The user's own configuration is read whatever the caller's GIT_* variables say,
    # and from wherever the process runs (here a folder deleted since).
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert diff_source() == "git"


def _version(n: int) -> str:
    """Content number ``n`` of a file: every version has the same size."""
    return f"VALUE = {n:04d}  # one of several versions of the same size\n"


def _without_blob_ids(db: Path) -> None:
    """Forget every recorded git blob id, as a database of an older version holds none."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL")
    conn.close()


def test_a_content_recorded_without_a_blob_id_is_found_wherever_git_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.find_content`` losing a place to look (the index, history on
    any branch), misreading ``log --raw`` (abbreviated ids, only the last line, only
    a commit's new side) or ``sizes`` asking for one id only: contents staged only,
    in the middle of history, on another branch, and older than the history searched
    (then the one commit searched names it as its old side) each give their diff."""
    from explomemo.changes import gitrepo

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    db = tmp_path / "memos.db"
    ids: dict[str, int] = {}

    def remember(name: str, version: int) -> None:
        repo.write("a.py", _version(version))
        with open_cache(db) as cache:
            ids[name] = cache.record(
                question=f"memo {name}",
                conclusion="c",
                files=["a.py"],
                project="p",
                root=str(repo.path),
            ).id

    for version in (1, 2, 3):
        if version == 2:
            remember("middle", 2)
        repo.write("a.py", _version(version))
        repo.commit(f"v{version}")
    git(repo.path, "checkout", "-q", "-b", "other")
    remember("branch", 4)
    repo.commit("v4")
    git(repo.path, "checkout", "-q", "main")
    remember("staged", 5)
    git(repo.path, "add", "a.py")
    repo.write("a.py", _version(6))
    _without_blob_ids(db)
    # git is asked for the sizes of all the versions at once, in the order of their
    # ids: the one wanted must not come first, or only one asked for would do.
    assert min(_blob_id(_version(v)) for v in (1, 2, 3, 4, 5)) != _blob_id(_version(2))
    with open_cache(db) as cache:
        for name, version in (("middle", 2), ("branch", 4), ("staged", 5)):
            (found,) = cache.show(ids[name]).files
            assert found.diff_source == "git", name
            assert f"-VALUE = {version:04d}" in (found.diff or ""), name
            assert "+VALUE = 0006" in (found.diff or ""), name
    # Only the newest commit searched: it names the version it replaced as its old side.
    monkeypatch.setattr(gitrepo, "HISTORY_DEPTH", 1)
    line = Repo(tmp_path / "line")
    line.write("a.py", _version(1))
    with open_cache(db) as cache:
        first = cache.record(
            question="first", conclusion="c", files=["a.py"], project="p", root=str(line.path)
        ).id
    line.commit("v1")
    line.write("a.py", _version(2))
    line.commit("v2")
    line.write("a.py", _version(6))
    _without_blob_ids(db)
    with open_cache(db) as cache:
        (found,) = cache.show(first).files
    assert (found.diff_source, "-VALUE = 0001" in (found.diff or "")) == ("git", True)


def test_contents_without_blob_ids_are_found_for_every_path_of_a_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.find_contents`` reading the index for one path only (``ls-files``
    without ``-z``, or its answer split otherwise: only the first entry's id), taking
    a path that starts with ``-`` for an option (``--`` lost), or giving ``log`` a
    depth that is not a whole number (``HISTORY_DEPTH / len(paths)``): two staged
    contents, ``-dash.py`` first, each give their diff; so do two contents that only
    the newest commit names, with one commit searched per path."""
    from explomemo.changes import gitrepo

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    names = ["-dash.py", "b.py"]
    offset = {"-dash.py": 0, "b.py": 10}  # each file its own contents
    db = tmp_path / "memos.db"

    def write(repo: Repo, version: int) -> None:
        for name in names:
            repo.write(name, _version(version + offset[name]))

    def record(repo: Repo) -> int:
        with open_cache(db) as cache:
            return cache.record(
                question=repo.path.name,
                conclusion="c",
                files=names,
                project="p",
                root=str(repo.path),
            ).id

    def old_sides(memo: int) -> dict[str, str]:
        _without_blob_ids(db)
        with open_cache(db) as cache:
            return {f.path: f.diff or "" for f in cache.show(memo).files}

    repo = Repo(tmp_path / "repo")
    write(repo, 1)
    repo.commit("v1")
    write(repo, 2)
    staged = record(repo)
    git(repo.path, "add", "--", *names)
    write(repo, 3)
    diffs = old_sides(staged)
    for name in names:
        assert f"-VALUE = {2 + offset[name]:04d}" in diffs[name], name
    monkeypatch.setattr(gitrepo, "HISTORY_DEPTH", 1)
    line = Repo(tmp_path / "line")
    write(line, 1)
    first = record(line)
    line.commit("v1")
    write(line, 2)
    line.commit("v2")
    write(line, 3)
    diffs = old_sides(first)
    for name in names:
        assert f"-VALUE = {1 + offset[name]:04d}" in diffs[name], name


def _blob_id(text: str) -> str:
    return subprocess.run(
        ["git", "hash-object", "--stdin"], input=text, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_hook_input_without_cwd_answers_for_the_working_directory(
    project_with_a_memo: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``_root`` losing its default: Claude Code may leave ``cwd`` out, and the
    hook then answers for the folder it runs in."""
    monkeypatch.chdir(project_with_a_memo)
    out, err = io.BytesIO(), io.BytesIO()
    payload = json.dumps({"prompt": "where are JWT tokens validated?"}).encode()
    assert (
        run_hook(
            "prompt", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out, stderr=err
        )
        == 0
    )
    assert err.getvalue() == b""
    assert (
        "tokens.verify()" in json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    )


def test_the_escapes_are_the_same_when_the_module_is_loaded_afresh() -> None:
    """Kills a wrong escape in ``_shown``, which builds the tables once, on import: a
    mutation run's tests start after the import, so this one imports it again."""
    import importlib

    fresh = importlib.reload(printable)
    for code in NEAR:
        text = f"a{chr(code)}b"
        wanted = f"a{_escaped(code)}b" if code in NEVER_RAW else text
        assert fresh.one_line(text) == wanted, hex(code)


@pytest.mark.parametrize("cwd", [".", "shop", "../shop"])
def test_a_relative_cwd_is_refused_even_when_it_names_a_folder(
    project_with_a_memo: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str
) -> None:
    """Kills ``_root`` taking a relative ``cwd`` that happens to exist from where the
    hook runs, or refusing it without naming it."""
    monkeypatch.chdir(project_with_a_memo)
    out, err = io.BytesIO(), io.BytesIO()
    payload = json.dumps({"cwd": cwd, "prompt": "where are JWT tokens validated?"}).encode()
    code = run_hook(
        "prompt", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out, stderr=err
    )
    assert (code, out.getvalue()) == (0, b"")
    line = err.getvalue().decode()
    assert line.startswith(f"explomemo hook prompt: cwd {cwd!r} ") and line.count("\n") == 1


@pytest.mark.parametrize("stdin", [b"[1, 2]", b'"text"', b"3", b"null"])
def test_json_that_is_not_an_object_is_named_as_such(db_path: Path, stdin: bytes) -> None:
    """Kills the refusal of a JSON value that is not an object losing its words."""
    out, err = io.BytesIO(), io.BytesIO()
    assert (
        run_hook("stop", db=db_path, project=None, stdin=io.BytesIO(stdin), stdout=out, stderr=err)
        == 0
    )
    assert err.getvalue().startswith(b"explomemo hook stop: stdin is not a JSON object")


def test_moves_are_found_among_tracked_names_holding_a_tab_or_bytes_that_are_not_utf_8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.tracked`` splitting an index entry at its last tab (a name with
    a tab), or decoding names strictly (a name that is not UTF-8 breaks every move)."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("old.py", "MOVED = True\n")
    repo.write("other.py", "OTHER = 1\n")
    (repo.path / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    repo.commit("A")
    db = tmp_path / "memos.db"
    with open_cache(db) as cache:
        memo = cache.record(
            question="q",
            conclusion="c",
            files=["old.py", "other.py"],
            project="p",
            root=str(repo.path),
        ).id
    git(repo.path, "mv", "old.py", "new\tname.py")
    repo.write("other.py", "OTHER = 2\n")
    with open_cache(db) as cache:
        files = {f.path: f for f in cache.show(memo).files}
    assert files["old.py"].moved_to == "new\tname.py"
    assert files["other.py"].diff_source == "git"


def test_stale_from_an_export_takes_its_diffs_from_the_root_given_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``export_changes`` reading git at the working directory instead of root."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path))
        lines = list(export_memos(cache))
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(line + "\n" for line in lines))
    repo.write("a.py", "A = 2\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    memos = read_export(export)
    report = stale_from_export(memos, str(repo.path))
    (changed,) = export_changes(memos, report, str(repo.path))[report.stale[0].id]
    assert (changed.diff_source, changed.diff) == (
        "git",
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n",
    )


def test_git_is_found_and_run_when_the_caller_has_no_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``gitrepo._environment`` passing on a missing ``PATH`` as nothing (git
    would not start): without ``PATH``, git is looked for where ``os.defpath`` says."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        memo = cache.record(
            question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path)
        ).id
    repo.write("a.py", "A = 2\n")
    if shutil.which("git", path=os.defpath) is None:
        pytest.skip("git is not in os.defpath")
    monkeypatch.delenv("PATH")
    with open_cache(tmp_path / "memos.db") as cache:
        (found,) = cache.show(memo).files
    assert found.diff_source == "git"


def test_blobs_asked_together_each_come_back_whatever_git_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``_parse_batch`` stopping at a blob git lacks, or losing its place after a
    blob: the recorded blob ids of three changed files are asked for at once, and git
    lacks the one (never committed) whose id comes first."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    committed = {name: f"{name.upper()} = 1\n" for name in ("b", "c")}
    for name, text in committed.items():
        repo.write(f"{name}.py", text)
    repo.commit("b and c")
    lacking = next(
        text
        for n in range(100)
        if _blob_id(text := f"# scratch {n}\n") < min(_blob_id(t) for t in committed.values())
    )
    repo.write("scratch.py", lacking)
    with open_cache(tmp_path / "memos.db") as cache:
        memo = cache.record(
            question="q",
            conclusion="c",
            files=["b.py", "c.py", "scratch.py"],
            project="p",
            root=str(repo.path),
        ).id
    for name in ("b", "c", "scratch"):
        repo.write(f"{name}.py", "changed\n")
    with open_cache(tmp_path / "memos.db") as cache:
        sources = {f.path: f.diff_source for f in cache.show(memo).files}
    assert sources == {"b.py": "git", "c.py": "git", "scratch.py": "unavailable"}


def _kept_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root holding ``a.py`` (``A = 1``), recorded with snapshots on."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "on")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    return root


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


# The working directory as the user reached it ----------------------------------------


@pytest.mark.parametrize(
    ("pwd", "logical"),
    [
        (None, False),  # unset
        ("", False),
        ("via", False),  # relative
        ("{tmp}/via/.", False),
        ("{tmp}/via/../via", False),
        ("{tmp}/via", True),  # a link to the directory: the path as reached
        ("{tmp}/via/", True),
        ("{tmp}/other", False),  # another directory
        ("{tmp}/gone", False),  # no such directory
        ("{tmp}/via\udcff", False),  # not text: the same directory, but not UTF-8
    ],
)
def test_the_working_directory_is_pwd_only_when_pwd_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pwd: str | None, logical: bool
) -> None:
    """Kills ``files.working_directory`` trusting a ``$PWD`` it should not: unset,
    relative, with ``.`` or ``..`` parts, naming another or no directory, or not
    UTF-8 (a root must be text an agent can send back). Where ``$PWD`` names the
    directory, the path as the user reached it is the root."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "other").mkdir()
    os.symlink(real, tmp_path / "via")
    os.symlink(real, os.fsencode(tmp_path) + b"/via\xff")
    monkeypatch.chdir(real)
    if pwd is None:
        monkeypatch.delenv("PWD", raising=False)
    else:
        monkeypatch.setenv("PWD", pwd.format(tmp=tmp_path))
    expected = pwd.format(tmp=tmp_path) if logical and pwd else os.getcwd()
    assert working_directory() == expected


def test_the_working_directory_as_root_is_checked_like_a_root_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``files.resolve_root`` skipping or garbling the checks of a root left out
    (the working directory), which only commands run without ``--root`` meet: the
    directory itself is the root; a name that is not UTF-8 and a path over the
    1,024-character limit are refused with sentences that say to pass ``--root``."""
    monkeypatch.delenv("PWD", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_root(None) == Root(path=str(tmp_path), real=str(tmp_path))
    odd = os.fsencode(tmp_path) + b"/w\xff"
    os.mkdir(odd)
    monkeypatch.chdir(odd)
    with pytest.raises(PathError) as caught:
        resolve_root(None)
    assert str(caught.value) == (
        f"the working directory '{tmp_path}/w\\xff' is not valid UTF-8: explomemo stores"
        " paths as UTF-8; pass a root whose path is UTF-8 (--root), or work from such a folder"
    )
    at_limit = "/" + "r" * 1023
    monkeypatch.setattr("explomemo.files.working_directory", lambda: at_limit)
    with pytest.raises(PathError, match="does not exist"):
        resolve_root(None)
    monkeypatch.setattr("explomemo.files.working_directory", lambda: at_limit + "r")
    with pytest.raises(PathError) as caught:
        resolve_root(None)
    assert str(caught.value) == (
        "the working directory is 1025 characters long, over the limit of 1024 for a root:"
        " pass a shorter root, or work from a shorter path"
    )


def test_an_absolute_path_through_another_link_to_a_folder_in_root_is_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``files.relative_path`` getting the third way in wrong (a path under
    neither root as given nor its real path, reached through another link to a folder
    in root): the file is where its folder really is, relative to root, whatever the
    working directory; a link of that kind to a folder outside root is still refused."""
    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "mod.py").write_text("secret\n")
    os.symlink(real / "pkg", tmp_path / "alias")
    os.symlink(tmp_path / "outside", tmp_path / "away")
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    root = resolve_root(str(real))
    assert relative_path(root, str(tmp_path / "alias" / "mod.py"), "file") == "pkg/mod.py"
    with pytest.raises(PathError, match="outside root"):
        relative_path(root, str(tmp_path / "away" / "mod.py"), "file")


# validity.py: survivors of the final run (2026-12-01, main at f459728) ------------


def test_a_file_too_large_for_a_snapshot_is_recorded_with_its_git_blob_id(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``validity.digest_entry`` not giving the read the size its ``fstat`` found
    (``expected_size=None``, or left out): a file over 1 MiB is kept as no snapshot, so
    its git blob id (how a later diff finds its old content in git) comes only from
    hashing git's header, which holds that size, with the file's bytes as they are read."""
    from explomemo.changes.snapshots import SNAPSHOT_MAX_BYTES

    root = tmp_path / "proj"
    root.mkdir()
    data = b"0123456789abcdef\n" * 100_000
    assert len(data) > SNAPSHOT_MAX_BYTES
    (root / "big.txt").write_bytes(data)
    words_cache.record(question="q", conclusion="c", files=["big.txt"], project="p", root=str(root))
    words_cache.wait_for_snapshots()
    (line,) = export_memos(words_cache)
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert json.loads(line)["files"][0]["git_blob"] == blob


@pytest.mark.timeout(60)
def test_a_checks_stat_cache_write_gives_way_to_a_write_in_progress(
    words_cache: MemoCache, one_file: Path, clock: Clock
) -> None:
    """Kills ``Validator.remember`` waiting for this process's other writes
    (``write(wait=True)``): while another thread holds the store's write transaction
    (a record waiting for another process's lock), a check that read a file answers
    without waiting for it, and leaves its entry out of the store (another process
    reads the file again; this one keeps the entry in memory)."""
    import threading

    last = _last_change(one_file / "a.py")
    clock.now = last  # the record's entry is racy: the check reads the file
    _record_a(words_cache, one_file)
    clock.now = last + 10 * TWO_SECONDS
    holding, release, let_go = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with words_cache.store.write():
            holding.set()
            release.wait(30)
        let_go.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        found = _reads(words_cache, one_file)
        waited = let_go.is_set()
    finally:
        release.set()
        holder.join()
    assert (found, waited) == (({}, 1), False)
    assert _reads(words_cache, one_file) == ({}, 0)
    assert _reads_elsewhere(words_cache, one_file) == ({}, 1)


def test_a_file_dated_past_2262_is_recorded_and_its_entry_trusted_in_memory(
    words_cache: MemoCache,
    one_file: Path,
    clock: Clock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kills ``Validator.observe`` losing the stat key of a file whose times do not fit
    64-bit nanoseconds (``key = None`` when ``struct`` cannot pack them): its entry,
    trusted, spares the next check's read. And the bug that showed: SQLite cannot
    hold such a time either, and recording the file (or a check storing its entry)
    failed with an ``OverflowError`` and a stack trace; now its entry is kept in
    memory only, and another process reads the file again."""
    a = one_file / "a.py"
    future = 2**63 + 10**18  # 2 300 and some, in nanoseconds since 1970
    os.utime(a, ns=(future, future))
    if os.lstat(a).st_mtime_ns < 2**63:
        pytest.skip("this file system cannot date a file after 2262")
    record = ["record", "--root", str(one_file), "--project", "cli", "--question", "q"]
    run = run_cli(capsys, [*record, "--conclusion", "c", "a.py"])
    assert (run.code, run.err) == (0, "")
    clock.now = future + 10 * TWO_SECONDS
    memo = _record_a(words_cache, one_file)
    assert _reads(words_cache, one_file) == ({}, 0)
    second = open_cache(Path(words_cache.store.path))
    try:
        assert _reads(second, one_file) == ({}, 1)
        assert _reads(second, one_file) == ({}, 0)
        a.write_bytes(b"version two\n" * 50)
        os.utime(a, ns=(future, future))
        assert _reads(second, one_file) == ({memo: (["a.py"], [])}, 1)
    finally:
        second.close()


# exchange.py: survivors of the final run (2026-12-01, main at dc59139) -------------

EXPORT_SHA = "a" * 64
EXPORT_XXH = "b" * 32


def _export_file(**change: Any) -> dict[str, Any]:
    return {"path": "a.py", "sha256": EXPORT_SHA, "xxh3": EXPORT_XXH, "size": 3, **change}


def _export_line(memo_id: int, **change: Any) -> str:
    memo = {
        "id": memo_id,
        "project": "p",
        "question": f"question {memo_id}",
        "conclusion": "c",
        "recorded_at": "2026-01-01T00:00:00Z",
        "files": [_export_file()],
        **change,
    }
    return json.dumps(memo, ensure_ascii=False)


def _refusal(path: Path) -> str:
    with pytest.raises(ExportFileError) as refused:
        read_export(path)
    return str(refused.value)


BAD_EXPORT_LINES: list[tuple[str, str, str]] = [
    ("array", "[1]", "not a JSON object"),
    ("id-string", _export_line(1, id="1"), "id is missing or not a whole number"),
    ("project-number", _export_line(1, project=5), "project is missing or not a string"),
    (
        "question-long",
        _export_line(1, question="q" * 2001),
        "question is 2,001 characters long, over the limit of 2,000",
    ),
    (
        "date-number",
        _export_line(1, recorded_at=5),
        "recorded_at is not a UTC time such as 2026-11-30T10:00:00Z",
    ),
    (
        "date-words",
        _export_line(1, recorded_at="yesterday"),
        "recorded_at is not a UTC time such as 2026-11-30T10:00:00Z",
    ),
    ("no-files", _export_line(1, files=[]), "files is not a list of 1 to 64 files"),
    ("file-number", _export_line(1, files=[3]), "files[0] is not a JSON object"),
    (
        "path-dot-part",
        _export_line(1, files=[_export_file(path="a/./b.py")]),
        "files[0].path 'a/./b.py' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
    (
        "path-dot",
        _export_line(1, files=[_export_file(path=".")]),
        "files[0].path '.' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
    (
        "path-dot-dot",
        _export_line(1, files=[_export_file(path="..")]),
        "files[0].path '..' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
]


@pytest.mark.parametrize(
    ("line", "why"), [c[1:] for c in BAD_EXPORT_LINES], ids=[c[0] for c in BAD_EXPORT_LINES]
)
def test_each_refusal_of_an_export_line_is_its_whole_sentence(
    tmp_path: Path, line: str, why: str
) -> None:
    """Kills ``read_export``, ``_parse_line``, ``_text`` and ``_integer`` changing what a
    refused line's message says (a field named otherwise, a message lost or changed,
    the text of ``record``'s refusal kept whole); ``_parse_line`` taking a
    ``recorded_at`` that is not text to the date parser (``and`` for ``or``), and
    ``_normal_path`` taking ``.`` or ``..`` for a file's path."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(7) + "\n" + line + "\n")
    assert _refusal(export) == (
        f"line 2 of {export} is not an explomemo memo ({why}):"
        " regenerate the file with explomemo export"
    )


def test_an_export_that_is_not_utf_8_or_repeats_an_id_is_refused_by_its_line(
    tmp_path: Path,
) -> None:
    """Kills ``read_export`` numbering the line that is not UTF-8 otherwise (line 3:
    two new lines before it), or changing the message of that refusal or of an id
    given twice."""
    export = tmp_path / "memos.jsonl"
    good = (_export_line(1) + "\n" + _export_line(2) + "\n").encode()
    export.write_bytes(good + b'{"id": 3, "question": "\xff"}\n')
    assert _refusal(export) == (
        f"line 3 of {export} is not UTF-8 text (byte {len(good) + 23}): regenerate the file"
        " with explomemo export"
    )
    export.write_text(_export_line(7) + "\n" + _export_line(7, question="other") + "\n")
    assert _refusal(export) == (
        f"line 2 of {export} repeats memo id 7: each memo of an export has its own id;"
        " regenerate the file with explomemo export"
    )


def test_an_export_line_at_each_limit_is_read_and_blank_lines_are_skipped(
    tmp_path: Path,
) -> None:
    """Kills ``_parse_line`` refusing a line at one of its limits (64 files, a file of
    0 bytes, of 32 MiB), ``_path`` refusing a path of exactly 4,096 characters, and
    ``read_export`` stopping at a blank line (``break`` for ``continue``)."""
    long_path = "d/" * 2046 + "a.py"
    assert len(long_path) == 4096
    many = [_export_file(path=f"f{i}.py") for i in range(64)]
    limits = [_export_file(path="empty.py", size=0), _export_file(size=32 * 1024 * 1024)]
    export = tmp_path / "memos.jsonl"
    export.write_text(
        "\n".join(
            [
                _export_line(1, files=many),
                "",
                "   ",
                _export_line(2, files=limits),
                _export_line(2**63 - 1, files=[_export_file(path=long_path)]),
            ]
        )
        + "\n"
    )
    memos = read_export(export)
    assert [(m.id, len(m.files)) for m in memos] == [(1, 64), (2, 2), (2**63 - 1, 1)]
    assert [f.size for f in memos[1].files] == [0, 32 * 1024 * 1024]
    assert memos[2].files[0].path == long_path


@pytest.mark.timeout(30)
def test_an_export_that_cannot_be_read_says_why_and_a_fifo_never_blocks(tmp_path: Path) -> None:
    """Kills ``_read_regular`` opening without ``O_NONBLOCK`` (a FIFO with no writer would
    hang the import), or changing its messages: not a regular file (a FIFO, a folder),
    a path that cannot be opened, a file that cannot be read (``/proc/self/mem``:
    reading its start fails with EIO)."""
    fifo = tmp_path / "memos.fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        assert _refusal(path) == (
            f"export file {path} is not a regular file: pass the path of a file written"
            " by explomemo export"
        )
    (tmp_path / "a.txt").write_text("x\n")
    under_a_file = tmp_path / "a.txt" / "memos.jsonl"
    assert _refusal(under_a_file) == (
        f"cannot read export file {under_a_file} (Not a directory): check the file"
    )
    memory = Path("/proc/self/mem")
    if memory.is_file():
        assert _refusal(memory) == (
            f"cannot read export file {memory} (Input/output error): check the file"
        )


def test_an_export_to_standard_output_is_its_exact_bytes_or_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``_write_stdout`` writing to standard output's descriptor anything but the
    whole UTF-8 text (nothing, another encoding, the wrong descriptor), and
    ``write_export`` changing its message when that write fails (``/dev/full``)."""
    text = "".join(line + "\n" for line in (_export_line(1, question="Wie groß?"),) * 3000)
    with open(tmp_path / "out.jsonl", "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        write_export(None, text)
    assert (tmp_path / "out.jsonl").read_bytes() == text.encode("utf-8")
    if not os.path.exists("/dev/full"):
        return
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        with pytest.raises(ExportFileError) as refused:
            write_export(None, text)
    assert str(refused.value) == (
        "cannot write the export to standard output (No space left on device): free space"
        " or raise the file size limit where it goes, or write it with -o FILE"
    )


def test_an_export_line_is_compact_json_holding_its_text_as_utf_8(
    words_cache: MemoCache, one_file: Path
) -> None:
    """Kills ``export_memos`` writing separators with spaces, or escaping every
    character outside ASCII (``ensure_ascii`` true or left out): a line is the
    memo's compact JSON, its text as written."""
    words_cache.record(
        question="Wie groß ist die Straße?",
        conclusion="Ça dépend",
        files=["a.py"],
        project="p",
        root=str(one_file),
    )
    (line,) = export_memos(words_cache)
    assert line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
    assert '"question":"Wie groß ist die Straße?","conclusion":"Ça dépend"' in line


def test_import_counts_every_replacement_and_roots_memos_at_the_root_given(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``import_memos`` counting only one replacement (``replaced = 1``), or
    rooting the memos of an export (which holds no root) at the working directory
    when a root is given."""
    root = tmp_path / "proj"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(_export_line(i) + "\n" for i in (1, 2)))
    first = import_memos(words_cache, read_export(export), str(root))
    assert (first.added, first.replaced) == (2, 0)
    assert {words_cache.show(i).root for i in (1, 2)} == {str(root)}
    newer = "2027-01-01T00:00:00Z"
    export.write_text("".join(_export_line(i, recorded_at=newer) + "\n" for i in (1, 2)))
    second = import_memos(words_cache, read_export(export), str(root))
    assert (second.added, second.replaced, second.kept) == (0, 2, 0)


def test_stale_from_an_export_reports_progress_and_names_a_bad_project(
    tmp_path: Path, one_file: Path
) -> None:
    """Kills ``stale_from_export`` dropping its progress callback, or naming a bad
    ``project`` otherwise."""
    from explomemo.errors import InputError

    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(1, files=[_export_file(path="a.py", size=600)]) + "\n")
    calls: list[tuple[int, int]] = []
    report = stale_from_export(
        read_export(export), str(one_file), lambda done, total: calls.append((done, total))
    )
    assert [e.changed for e in report.stale] == [["a.py"]]
    assert calls and calls[-1] == (1, 1)
    with pytest.raises(InputError, match=r"^project is empty: "):
        stale_from_export(read_export(export), str(one_file), project=" ")
    # Read by a caller that names no file: the sentence says "the export", and the
    # fix names no path.
    from explomemo.errors import NotFoundError

    with pytest.raises(NotFoundError) as caught:
        stale_from_export([], str(one_file), project="nope")
    assert str(caught.value) == (
        "project 'nope' has no memos in the export, which holds none:"
        " write it with explomemo export --project nope -o FILE"
    )


def test_stale_from_an_export_diffs_within_the_limits_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``export_changes`` dropping the ``limits`` given (an agent's 6,000
    characters a file instead): with no limits the whole diff comes back."""
    from explomemo.changes.diffs import FILE_DIFF_CHARS, NO_LIMITS

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "".join(f"A{i} = {i}\n" for i in range(2000)))
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path))
        lines = list(export_memos(cache))
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(line + "\n" for line in lines))
    repo.write("a.py", "".join(f"A{i} = {i + 1}\n" for i in range(2000)))
    memos = read_export(export)
    report = stale_from_export(memos, str(repo.path))
    (changed,) = export_changes(memos, report, str(repo.path), NO_LIMITS)[report.stale[0].id]
    assert changed.diff is not None and len(changed.diff) > FILE_DIFF_CHARS
    assert "+A1999 = 2000" in changed.diff


def test_an_export_whose_reader_left_ends_quietly_with_exit_2(
    tmp_path: Path,
    one_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills ``write_export`` passing anything but the pipe's error on (in-process; the
    real closed pipe is test_reliability_edges', left out of mutation runs as slow)."""
    from explomemo.memos import exchange

    db = str(tmp_path / "m.db")
    record = ["--db", db, "record", "--project", "p", "--root", str(one_file)]
    assert run_cli(capsys, [*record, "--question", "q", "--conclusion", "c", "a.py"]).code == 0

    def closed(text: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(exchange, "_write_stdout", closed)
    monkeypatch.setattr("explomemo.stdout.silence", lambda: None)
    run = run_cli(capsys, ["--db", db, "export"])
    assert (run.code, run.out, run.err) == (2, "", "")


def test_a_library_export_names_a_bad_project(words_cache: MemoCache) -> None:
    """Kills ``export_memos`` checking the project under another name (the CLI checks
    ``--project`` while parsing, so only a library caller meets this check)."""
    from explomemo.errors import InputError

    with pytest.raises(InputError, match=r"^project is empty: "):
        list(export_memos(words_cache, project=""))
    with pytest.raises(InputError, match=r"^project is 201 characters long"):
        list(export_memos(words_cache, project="p" * 201))
