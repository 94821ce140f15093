"""The fast paths of a stale check keep every guarantee of the slow ones.

A re-check opens files through :class:`explomemo.files.Opener` (folders kept
open for the check), hashes into reused buffers, may read on several threads,
and loads a root's stat cache in one range query. Each of those is held here
to what :func:`explomemo.files.open_regular` and the plain paths promise.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import xxhash
from reliability_helpers import SECRET

from explomemo.check import hashing, readers, validity
from explomemo.check.hashing import CHUNK, COUNTERS, hash_fd, xxh3_fd
from explomemo.files import Opener, Refused, open_regular, resolve_root
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel
from explomemo.store.database import FileRow, StatRow, Store

INSIDE = b"inside root\n"


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[dict[str, Path]]:
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "pkg" / "mod.py").write_bytes(SECRET)
    root = tmp_path / "root"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "a.py").write_bytes(INSIDE)
    (root / "pkg" / "mod.py").write_bytes(INSIDE + b"mod\n")
    (root / "pkg" / "sub" / "deep.py").write_bytes(INSIDE + b"deep\n")
    os.symlink("a.py", root / "link.py")  # a link that stays inside root: allowed
    os.symlink("pkg", root / "alias")  # a folder link inside root: allowed
    os.symlink(outside / "secret.txt", root / "out.py")
    os.symlink(outside / "pkg", root / "outdir")
    os.mkfifo(root / "fifo")
    (root / "plain").write_bytes(b"not a folder")
    yield {"root": root, "outside": outside}


PATHS = [
    "a.py",
    "pkg/mod.py",
    "pkg/sub/deep.py",
    "link.py",
    "alias/mod.py",
    "alias/sub/deep.py",
    "out.py",
    "outdir/mod.py",
    "fifo",
    "pkg",
    "nope.py",
    "gone/x.py",
    "gone/deeper/x.py",
    "plain/x.py",
    "pkg/./mod.py",
    "pkg/../a.py",
    "pkg//mod.py",
    "../outside/secret.txt",
    "pkg/../../outside/secret.txt",
]


def _outcome(open_one: Callable[[], int]) -> tuple[str, bytes | bool]:
    try:
        fd = open_one()
    except Refused as exc:
        return "refused", exc.missing
    try:
        chunks = []
        while piece := os.read(fd, 1 << 16):
            chunks.append(piece)
        return "read", b"".join(chunks)
    finally:
        os.close(fd)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("rel", PATHS)
def test_opener_agrees_with_open_regular(tree: dict[str, Path], rel: str) -> None:
    root = resolve_root(str(tree["root"]))
    expected = _outcome(lambda: open_regular(root, rel))
    with Opener(root) as opener:
        got = _outcome(lambda: opener.open(rel)[0])
        # A second open in the same check goes through the cached folders.
        again = _outcome(lambda: opener.open(rel)[0])
    assert got == expected == again
    assert got[1] != SECRET


def test_opener_gives_the_fstat_of_what_it_opened(tree: dict[str, Path]) -> None:
    root = resolve_root(str(tree["root"]))
    with Opener(root) as opener:
        for rel in ("a.py", "pkg/sub/deep.py", "link.py", "alias/mod.py"):
            fd, opened = opener.open(rel)
            try:
                now = os.fstat(fd)
            finally:
                os.close(fd)
            assert (opened.st_dev, opened.st_ino, opened.st_size) == (
                now.st_dev,
                now.st_ino,
                now.st_size,
            )


@pytest.mark.timeout(30)
def test_a_helper_process_reads_and_refuses_as_this_one_does(
    tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = resolve_root(str(tree["root"]))
    # Started from a folder with a package of our name (as a checked project
    # may have): the helper must not import it.
    decoy = tmp_path / "decoy"
    (decoy / "explomemo").mkdir(parents=True)
    (decoy / "explomemo" / "__init__.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\n"
    )
    monkeypatch.chdir(decoy)
    taken_at = time.time_ns()
    with Opener(root) as opener:
        here = [readers.read_row(opener, rel, taken_at, 0) for rel in PATHS]
    helper = readers.Helper()
    COUNTERS.reset()
    try:
        there = helper.read(root, PATHS, taken_at, 0)
    finally:
        helper.close()
    assert there == here
    read = [rel for rel, row in zip(PATHS, there, strict=True) if row is not None]
    assert read == [*PATHS[:6], "pkg/./mod.py", "pkg/../a.py", "pkg//mod.py"]
    assert COUNTERS.files == len(read)  # the helper's reads are counted in this process
    assert not (tmp_path / "imported").exists()


@pytest.mark.timeout(30)
def test_a_helper_running_another_copy_is_refused(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "_THIS_FILE", "/another/explomemo/check/readers.py")
    _assert_given_up(readers.Helper(), tree["root"], "another")


@pytest.mark.timeout(30)
def test_a_helper_that_never_greets_is_given_up(
    tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hanging = tmp_path / "hanging-python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hanging))
    monkeypatch.setattr(readers, "GREETING_SECONDS", 0.5)
    _assert_given_up(readers.Helper(), tree["root"], "greeting")


def _assert_given_up(helper: readers.Helper, root: Path, why: str) -> None:
    """The helper's first read fails with ``why`` in the error, and the helper is killed."""
    try:
        with pytest.raises(readers.HelperError, match=why):
            helper.read(resolve_root(str(root)), ["a.py"], time.time_ns(), 0)
        assert helper._process.wait(10) is not None
    finally:
        helper.close()


class OpenSpy:
    """Records every name os.open is asked to open."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.real = os.open

    def __call__(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        self.names.append(os.fsdecode(path))
        return self.real(path, flags, *args, **kwargs)


@pytest.mark.timeout(20)
def test_opener_never_opens_a_fifo_or_a_link_out(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = resolve_root(str(tree["root"]))
    spy = OpenSpy()
    monkeypatch.setattr(os, "open", spy)
    with Opener(root) as opener:
        for rel in ("fifo", "out.py", "outdir/mod.py", "../outside/secret.txt"):
            with pytest.raises(Refused):
                opener.open(rel)
    monkeypatch.undo()
    opened = {os.path.basename(name) for name in spy.names}
    assert not opened & {"fifo", "secret.txt", "outside"}, spy.names


def _is_lstat(*args: Any, **kwargs: Any) -> bool:
    return kwargs.get("dir_fd") is not None and kwargs.get("follow_symlinks") is False


@pytest.mark.timeout(20)
def test_opener_refuses_a_file_swapped_for_a_link_after_its_lstat(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = resolve_root(str(tree["root"]))
    real_stat = os.stat
    fired: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = real_stat(*args, **kwargs)
        if not fired and _is_lstat(*args, **kwargs):
            fired.append(True)
            staging = tree["root"] / "a.py.swap"
            os.symlink(tree["outside"] / "secret.txt", staging)
            os.replace(staging, tree["root"] / "a.py")
        return result

    monkeypatch.setattr(os, "stat", spy)
    with Opener(root) as opener, pytest.raises(Refused):
        opener.open("a.py")
    assert fired


@pytest.mark.timeout(20)
def test_opener_refuses_a_folder_swapped_for_a_link_after_it_was_opened(
    tree: dict[str, Path],
) -> None:
    """The folder descriptor kept for the check never leads out of root."""
    root = resolve_root(str(tree["root"]))
    with Opener(root) as opener:
        assert _outcome(lambda: opener.open("pkg/mod.py")[0]) == ("read", INSIDE + b"mod\n")
        shutil.rmtree(tree["root"] / "pkg")
        os.symlink(tree["outside"] / "pkg", tree["root"] / "pkg")
        outcome = _outcome(lambda: opener.open("pkg/mod.py")[0])
    assert outcome[0] == "refused"
    # A new check (a new Opener) sees the link and refuses it too.
    with Opener(root) as opener:
        assert _outcome(lambda: opener.open("pkg/mod.py")[0])[0] == "refused"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fds_into(folder: Path) -> set[tuple[str, str]]:
    """This process's open descriptors on ``folder`` or on pipes (helper processes), by
    number and target. Only these: a thread left by another test may open or close a
    file of its own meanwhile, which a bare count would take for a leak."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith((f"{folder}/", "pipe:")) or target == str(folder):
            found.add((fd, target))
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_opener_closes_every_folder(tree: dict[str, Path]) -> None:
    root = resolve_root(str(tree["root"]))
    before = _open_fds()
    opener = Opener(root)
    for rel in PATHS:
        try:
            fd, _ = opener.open(rel)
        except Refused:
            continue
        os.close(fd)
    assert _open_fds() > before  # folders are kept open during the check
    opener.close()
    assert _open_fds() == before


# The validator ----------------------------------------------------------------


def _many_files(root: Path, sizes: list[int]) -> list[str]:
    rels = []
    for i, size in enumerate(sizes):
        rel = f"d{i % 7}/sub{i % 3}/f{i:03d}.bin"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes((i + j) % 251 for j in range(size)))
        rels.append(rel)
    return rels


def _recorder(calls: list[tuple[int, int]]) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        calls.append((done, total))

    return progress


def _helpers_take_part(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make each read start only once a helper process was handed a batch; count the batches.

    Without it, this thread could read every file while the helper starts.
    """
    handed = threading.Event()
    batches: list[int] = []
    real_read, real_row = readers.Helper.read, readers.read_row

    def helper_read(self: readers.Helper, root: Any, rels: list[str], *args: Any) -> Any:
        batches.append(len(rels))
        handed.set()
        return real_read(self, root, rels, *args)

    def read_row(*args: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            assert handed.wait(10), "no helper process was handed a batch"
        return real_row(*args)

    monkeypatch.setattr(readers.Helper, "read", helper_read)
    monkeypatch.setattr(validity, "read_row", read_row)
    return batches


#: How a Validator reads: (workers, PARALLEL_MEAN_BYTES, HELPERS_MIN_BYTES).
READ_MODES = {
    "one thread": (1, 0, 0),
    "two threads": (2, 0, 1 << 62),
    "three threads": (3, 0, 1 << 62),
    "a helper process": (2, 1 << 62, 0),
    "two helper processes": (3, 1 << 62, 0),
}


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_parallel_reads_match_one_thread(
    tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads and helper processes read exactly what one thread does, refuse what it
    refuses, count what they read here; progress ends at the total; no fd leaks."""
    root_path = tmp_path / "proj"
    sizes = [0, 1, 100, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] + [5000] * 150
    rels = _many_files(root_path, sizes)
    os.symlink(rels[2], root_path / "link.bin")
    os.symlink(tree["outside"] / "secret.txt", root_path / "out.bin")
    rels += ["link.bin", "out.bin", "missing.bin"]
    root = resolve_root(str(root_path))
    # No recorded digest: every path is reported with what it holds now.
    expected = [
        validity.Expected(
            rel, root.absolute(rel), set(sizes) | {100, len(SECRET)}, None, rel.rpartition("/")[0]
        )
        for rel in rels
    ]
    results = {}
    counted = {}
    before = _fds_into(tmp_path)
    for mode, (workers, parallel_from, helpers_from) in READ_MODES.items():
        monkeypatch.setattr(validity, "PARALLEL_MEAN_BYTES", parallel_from)
        monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", helpers_from)
        if "helper" in mode:
            helper_batches = _helpers_take_part(monkeypatch)
        calls: list[tuple[int, int]] = []
        validator = validity.Validator(None, workers=workers, progress=_recorder(calls))
        COUNTERS.reset()
        try:
            results[mode] = validator.observe(root, expected)
            assert not validator._helpers_failed
        finally:
            validator.close()
        counted[mode] = (COUNTERS.files, COUNTERS.bytes)
        if "helper" in mode:
            assert helper_batches
            monkeypatch.undo()
        assert calls[-1] == (len(rels) - 1, len(rels) - 1)  # the missing file is not read
        assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert all(found == results["one thread"] for found in results.values())
    assert all(count == (len(rels) - 2, sum(sizes) + 100) for count in counted.values())
    found = results["one thread"]
    assert found["missing.bin"] is None
    assert found["out.bin"] is None
    assert found["link.bin"] == found[rels[2]]
    for i, size in enumerate(sizes):
        data = bytes((i + j) % 251 for j in range(size))
        assert found[rels[i]] == xxhash.xxh3_128_hexdigest(data)
    assert _fds_into(tmp_path) == before


@pytest.mark.timeout(60)
def test_a_helper_process_that_dies_is_replaced_by_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root_path = tmp_path / "proj"
    rels = _many_files(root_path, [300] * 200)
    root = resolve_root(str(root_path))
    expected = [
        validity.Expected(rel, root.absolute(rel), {300}, None, rel.rpartition("/")[0])
        for rel in rels
    ]
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    monkeypatch.setattr(validity, "RACY_NS", 10**18)  # no entry is trusted: all read each time
    batches = _helpers_take_part(monkeypatch)
    validator = validity.Validator(None, workers=2)
    try:
        first = validator.observe(root, expected)
        assert batches
        [helper] = validator._idle_helpers  # kept for the next read
        helper._process.kill()
        helper._process.wait()
        (root_path / rels[150]).write_bytes(b"y" * 300)
        _helpers_take_part(monkeypatch)  # this thread waits until the dead helper is handed one
        second = validator.observe(root, expected)
        assert validator._helpers_failed and not validator._idle_helpers
    finally:
        validator.close()
    assert second == {**first, rels[150]: xxhash.xxh3_128_hexdigest(b"y" * 300)}


@pytest.mark.timeout(60)
def test_a_worker_error_is_raised_and_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root_path = tmp_path / "proj"
    rels = _many_files(root_path, [300] * 200)
    root = resolve_root(str(root_path))
    real = readers.read_row

    def failing(opener: Opener, rel: str, taken_at: int, racy_ns: int) -> Any:
        if rel == rels[137]:
            raise RuntimeError("boom")
        return real(opener, rel, taken_at, racy_ns)

    monkeypatch.setattr(validity, "read_row", failing)
    monkeypatch.setattr(validity, "PARALLEL_MEAN_BYTES", 0)
    validator = validity.Validator(None, workers=2)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            validator.observe(root, validity.expect(root, [FileRow(r, "", "", 300) for r in rels]))
    finally:
        validator.close()


class Calls:
    """Counts calls of a method (``wrapper`` goes in the class in its place)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.count = 0

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        self.wrapper = wrapper


@pytest.fixture
def settled_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Files whose stat entries are never racy (the racy window is shrunk to 0)."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    root = tmp_path / "proj"
    _many_files(root, [400] * 40)
    return root


def _record(cache: MemoCache, root: Path) -> None:
    rels = sorted(str(p.relative_to(root)) for p in root.rglob("*.bin"))
    for i in range(0, len(rels), 8):
        cache.record(
            question=f"q{i}", conclusion="c", files=rels[i : i + 8], project="p", root=str(root)
        )
    # The snapshot writer's transaction would otherwise hold the write lock when a
    # check stores its stat-cache entries, and the check skips that write.
    assert cache.wait_for_snapshots(30)


def test_a_new_process_loads_its_root_in_one_query_and_stats_once(
    settled_tree: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoCache.open(db_path, FixedModel(None)) as first:
        _record(first, settled_tree)
    with MemoCache.open(db_path, FixedModel(None)) as second:
        ranges = Calls(Store.stat_rows_under)
        monkeypatch.setattr(Store, "stat_rows_under", ranges.wrapper)
        real_lstat = os.lstat
        full_path_stats: list[str] = []
        prefix = f"{settled_tree.resolve()}/"

        def counting_lstat(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, str) and path.startswith(prefix):
                full_path_stats.append(path)
            return real_lstat(path, *args, **kwargs)

        monkeypatch.setattr(os, "lstat", counting_lstat)
        COUNTERS.reset()
        result = second.stale(project="p", root=str(settled_tree))
        monkeypatch.setattr(os, "lstat", real_lstat)
        assert result.stale == [] and result.checked == 5
        assert COUNTERS.files == 0
        assert ranges.count == 1  # the only way the store hands out stat-cache rows
        files = [path for path in full_path_stats if not os.path.isdir(path)]
        folders = [path for path in full_path_stats if os.path.isdir(path)]
        assert len(files) == len(set(files)) == 40  # one lstat per file
        assert len(folders) == len(set(folders))  # and one per folder
        second.stale(project="p", root=str(settled_tree))
        assert ranges.count == 1  # the root is loaded once per process
        second.validator.clear()
        second.stale(project="p", root=str(settled_tree))
        assert ranges.count == 2


def test_range_query_stays_inside_its_root(db_path: Path) -> None:
    store = Store.open(db_path)
    try:
        trusted = StatRow(1, 2, 3, 10, 10, "x" * 32, 10**18)
        racy = StatRow(1, 2, 3, 10, 10, "y" * 32, 11)
        paths = ["/r/a", "/r/b/c", "/r/é/ü", "/r", "/r0/x", "/r-1/y", "/rr/z", "/q/z", "/r/racy"]
        with store.write() as conn:
            store.save_stat_rows(
                conn, {p: (racy if p.endswith("racy") else trusted) for p in paths}
            )
        with store.read() as conn:
            found = sorted(row[0] for row in store.stat_rows_under(conn, "/r/", 2))
            everything = sorted(row[0] for row in store.stat_rows_under(conn, "/", 2))
        assert found == ["/r/a", "/r/b/c", "/r/é/ü"]
        assert everything == sorted(p for p in paths if not p.endswith("racy"))
    finally:
        store.close()


def _stat_rows(db: Path) -> dict[str, tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return {row[0]: row[1:] for row in conn.execute("SELECT * FROM file_stats")}
    finally:
        conn.close()


def test_only_entries_that_can_be_trusted_are_written(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A racy entry is never trusted (its times are fixed), so writing it is wasted."""
    root = tmp_path / "proj"
    _many_files(root, [400] * 16)
    with MemoCache.open(db_path, FixedModel(None)) as cache:
        _record(cache, root)
        before = _stat_rows(db_path)
        cache.validator.clear()
        COUNTERS.reset()
        assert cache.stale(project="p", root=str(root)).stale == []
        assert COUNTERS.files == 16  # just written: racy, read again
        assert _stat_rows(db_path) == before  # and nothing written
        for path in root.rglob("*.bin"):
            os.utime(path, ns=(10**18, 10**18))
        monkeypatch.setattr(validity, "RACY_NS", -(10**18))
        cache.validator.clear()
        COUNTERS.reset()
        assert cache.stale(project="p", root=str(root)).stale == []
        assert COUNTERS.files == 16
        after = _stat_rows(db_path)
        assert set(after) == set(before)
        assert all(after[p] != before[p] for p in after)  # trusted now: written
        COUNTERS.reset()
        cache.validator.clear()
        assert cache.stale(project="p", root=str(root)).stale == []
        assert COUNTERS.files == 0


# Hashing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "size", [0, 1, 4095, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 5]
)
def test_digests_are_of_the_whole_file(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    for expected_size in (None, size, max(0, size - 1), size + 1):
        for sha256 in (True, False):
            fd = os.open(path, os.O_RDONLY)
            try:
                COUNTERS.reset()
                digest = hash_fd(fd, sha256=sha256, expected_size=expected_size)
                os.lseek(fd, 0, os.SEEK_SET)
                fast = xxh3_fd(fd, expected_size)
            finally:
                os.close(fd)
            assert (digest.size, digest.xxh3) == fast == (size, xxhash.xxh3_128_hexdigest(data))
            assert digest.sha256 == (hashlib.sha256(data).hexdigest() if sha256 else None)
            assert (COUNTERS.files, COUNTERS.bytes) == (2, 2 * size)


@pytest.mark.parametrize("limit", [0, 10, CHUNK - 1, CHUNK, 2 * CHUNK + 3])
def test_an_oversized_file_is_read_no_further_than_limit_plus_one(
    tmp_path: Path, limit: int
) -> None:
    path = tmp_path / "big"
    path.write_bytes(os.urandom(3 * CHUNK + 5))
    fd = os.open(path, os.O_RDONLY)
    try:
        COUNTERS.reset()
        digest = hash_fd(fd, sha256=True, limit=limit, expected_size=3 * CHUNK + 5)
        assert os.lseek(fd, 0, os.SEEK_CUR) == limit + 1
    finally:
        os.close(fd)
    assert digest.size == limit + 1 > limit
    assert (COUNTERS.files, COUNTERS.bytes) == (1, limit + 1)


def test_a_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    data = os.urandom(CHUNK + 10)
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = hash_fd(fd, sha256=True, limit=len(data), expected_size=len(data))
    finally:
        os.close(fd)
    assert digest == hashing.Digest(
        len(data), xxhash.xxh3_128_hexdigest(data), hashlib.sha256(data).hexdigest()
    )


def test_hashing_reuses_its_buffers(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    kept = max(1, len(hashing._free_buffers))
    for _ in range(50):
        fd = os.open(path, os.O_RDONLY)
        try:
            xxh3_fd(fd, 1000)
        finally:
            os.close(fd)
    assert 1 <= len(hashing._free_buffers) <= kept


def _flip(stop: threading.Event, root: Path, outside: Path, what: str) -> None:
    if what == "file":
        master = root / "master"
        master.write_bytes(INSIDE)
        while not stop.is_set():
            staging = root / "a.py.swap"
            os.symlink(outside / "secret.txt", staging)
            os.replace(staging, root / "a.py")
            os.link(master, staging)
            os.replace(staging, root / "a.py")
    else:
        folder, aside = root / "pkg", root / "pkg.aside"
        while not stop.is_set():
            os.rename(folder, aside)
            os.symlink(outside / "pkg", folder)
            os.unlink(folder)
            os.rename(aside, folder)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["file", "folder"])
def test_one_opener_during_a_real_race_never_yields_the_secret(
    tree: dict[str, Path], what: str
) -> None:
    """A thread flips a file (or its folder) between real and a link out of root.

    One Opener serves the whole run, as in a long check, so its folder
    descriptors outlive many flips: every open is refused or yields the bytes
    inside root, never the secret, and nothing but Refused is raised.
    """
    rel = "a.py" if what == "file" else "pkg/mod.py"
    inside = INSIDE if what == "file" else INSIDE + b"mod\n"
    root = resolve_root(str(tree["root"]))
    stop = threading.Event()
    flipper = threading.Thread(target=_flip, args=(stop, tree["root"], tree["outside"], what))
    opened = refused = 0
    flipper.start()
    try:
        with Opener(root) as opener:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                outcome = _outcome(lambda: opener.open(rel)[0])
                if outcome[0] == "refused":
                    refused += 1
                else:
                    opened += 1
                    assert outcome[1] == inside, "the secret outside root was read"
    finally:
        stop.set()
        flipper.join()
    assert opened + refused > 100
