"""The validity engine (check/validity.py): stat cache, racy entries, content changes that hide,
how a check spreads its reads over threads and helper processes, and roots that vanish."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import xxhash
from helpers import (
    SECRET,
    _helpers_take_part,
    _many_files,
    _reads,
    invoke_cli,
    open_cache,
    stale_json,
    stale_of,
)

from explomemo.check import hashing, readers, validity
from explomemo.check.hashing import CHUNK, COUNTERS
from explomemo.errors import PathError
from explomemo.files import Opener, resolve_root
from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import (
    export_memos,
)
from explomemo.store.database import FileRow, StatRow, Store

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


def _record_a(cache: MemoCache, root: Path) -> int:
    memo = cache.record(
        question="what is in a?", conclusion="c", files=["a.py"], project="p", root=str(root)
    )
    # The snapshot writer's transaction would make the next check's stat-cache
    # write give way (it never waits): the store would miss the entry.
    cache.wait_for_snapshots()
    return memo.id


def _reads_elsewhere(
    cache: MemoCache, root: Path
) -> tuple[dict[int, tuple[list[str], list[str]]], int]:
    """``_reads`` in a new MemoCache on the same database, as another process checks."""
    with open_cache(Path(cache.store.path)) as other:
        return _reads(other, root)


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


def xxh3_hex(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


@pytest.fixture
def old_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Files whose stat entries are never racy (the racy window is shrunk to 0)."""
    monkeypatch.setattr(validity, "RACY_NS", -(10**18))
    root = tmp_path / "proj"
    root.mkdir()
    for i in range(5):
        (root / f"m{i}.py").write_text(f"module {i}\n" * 100)
    return root


def record_all(cache: MemoCache, root: Path) -> None:
    cache.record(
        question="a", conclusion="c", files=["m0.py", "m1.py"], project="p", root=str(root)
    )
    cache.record(
        question="b", conclusion="c", files=["m1.py", "m2.py", "m3.py"], project="p", root=str(root)
    )
    cache.record(question="c", conclusion="c", files=["m4.py"], project="p", root=str(root))


def stale_ids(cache: MemoCache, root: Path) -> dict[int, tuple[list[str], list[str]]]:
    return {s.id: (s.changed, s.missing) for s in cache.stale(project="p", root=str(root)).stale}


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


def _recorder(calls: list[tuple[int, int]]) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        calls.append((done, total))

    return progress


#: How a Validator reads: (workers, PARALLEL_MEAN_BYTES, HELPERS_MIN_BYTES).
READ_MODES = {
    "one thread": (1, 0, 0),
    "two threads": (2, 0, 1 << 62),
    "three threads": (3, 0, 1 << 62),
    "a helper process": (2, 1 << 62, 0),
    "two helper processes": (3, 1 << 62, 0),
}


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


def _stat_rows(db: Path) -> dict[str, tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return {row[0]: row[1:] for row in conn.execute("SELECT * FROM file_stats")}
    finally:
        conn.close()


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
        run = invoke_cli(["--db", str(db), "show", str(memo_id), "--json"])
        assert run.code == 0, run.err
        shown = json.loads(run.out)
        assert shown["status"] == "stale"
        assert [(f["path"], f["state"]) for f in shown["files"]] == [(f, "missing") for f in files]
    run = invoke_cli(["--db", str(db), "show", str(other), "--json"])
    assert json.loads(run.out)["status"] == "fresh"
    cache = open_cache(db)
    try:
        assert [(e.id, e.missing) for e in cache.stale_report(project="p").stale] == [
            (both, ["a.py", "pkg/b.py"])
        ]
    finally:
        cache.close()


# The racy stat-cache rule ------------------------------------------------------


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


# How a check spreads its reads (validity.Validator._read_all, _take_helpers) ------


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


@pytest.mark.timeout(60)
def test_close_waits_for_the_threads_of_a_read_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``Validator.close`` returning before its hashing threads are done
    (``shutdown(wait=False)``): a thread still reading a file when ``close`` is called
    has finished it when ``close`` returns."""

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


# validity.py: survivors of the final run (2026-12-01, main at f459728) ------------


def test_a_file_too_large_for_a_snapshot_is_recorded_with_its_git_blob_id(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Kills ``validity.digest_entry`` not giving the read the size its ``fstat`` found
    (``expected_size=None``, or left out): a file over 1 MiB is kept as no snapshot, so
    its git blob id (how a later diff finds its old content in git) comes only from
    hashing git's header, which holds that size, with the file's bytes as they are read."""
    from explomemo.changes.contents import SNAPSHOT_MAX_BYTES

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
    run = invoke_cli([*record, "--conclusion", "c", "a.py"])
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


def test_unchanged_files_are_not_read_again(words_cache: MemoCache, old_tree: Path) -> None:
    record_all(words_cache, old_tree)
    assert stale_ids(words_cache, old_tree) == {}
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {}
    assert (COUNTERS.files, COUNTERS.bytes) == (0, 0)


def test_stat_cache_persists_across_processes(old_tree: Path, db_path: Path) -> None:
    with open_cache(db_path) as first:
        record_all(first, old_tree)
        assert stale_ids(first, old_tree) == {}
    with open_cache(db_path) as second:
        COUNTERS.reset()
        assert stale_ids(second, old_tree) == {}
        assert COUNTERS.files == 0


def test_touched_file_is_reread_once_and_stays_fresh(
    words_cache: MemoCache, old_tree: Path
) -> None:
    record_all(words_cache, old_tree)
    stale_ids(words_cache, old_tree)
    os.utime(old_tree / "m1.py", ns=(time.time_ns(), time.time_ns()))
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {}
    assert COUNTERS.files == 1  # m1.py is shared by two memos but read once


def test_content_change_hidden_by_utime_is_caught(words_cache: MemoCache, old_tree: Path) -> None:
    record_all(words_cache, old_tree)
    stale_ids(words_cache, old_tree)
    target = old_tree / "m2.py"
    before = target.stat()
    data = target.read_bytes()
    target.write_bytes(data[:-2] + b"X\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert stale_ids(words_cache, old_tree) == {2: (["m2.py"], [])}


def test_racy_entry_is_not_trusted(words_cache: MemoCache, tmp_path: Path) -> None:
    # The real 2 s window: a file changed within the same timestamp tick as
    # the check must be re-read next time, even when its stat looks identical.
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("one")
    words_cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(root))
    stale_ids(words_cache, root)
    COUNTERS.reset()
    stale_ids(words_cache, root)
    assert COUNTERS.files == 1


def test_deleted_replaced_and_resized_files(words_cache: MemoCache, old_tree: Path) -> None:
    record_all(words_cache, old_tree)
    (old_tree / "m0.py").unlink()
    (old_tree / "m3.py").unlink()
    (old_tree / "m3.py").mkdir()
    (old_tree / "m4.py").write_text("longer than before " * 100)
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {
        1: ([], ["m0.py"]),
        2: ([], ["m3.py"]),
        3: (["m4.py"], []),
    }
    assert COUNTERS.files == 0  # a new size is a change without reading a byte


def test_unreadable_file_is_missing(words_cache: MemoCache, old_tree: Path) -> None:
    record_all(words_cache, old_tree)
    target = old_tree / "m4.py"
    target.unlink()
    target.symlink_to("/dev/zero")
    assert stale_ids(words_cache, old_tree) == {3: ([], ["m4.py"])}


def test_clone_at_another_path_is_fresh(
    words_cache: MemoCache, old_tree: Path, tmp_path: Path
) -> None:
    record_all(words_cache, old_tree)
    clone = tmp_path / "elsewhere" / "clone"
    clone.mkdir(parents=True)
    for f in old_tree.iterdir():
        (clone / f.name).write_bytes(f.read_bytes())
    assert stale_ids(words_cache, clone) == {}
    (clone / "m1.py").write_text("edited")
    assert stale_ids(words_cache, clone) == {1: (["m1.py"], []), 2: (["m1.py"], [])}


def test_file_recorded_with_two_contents_then_deleted(
    words_cache: MemoCache, old_tree: Path
) -> None:
    # In a server the project's files stay in memory between checks; a path
    # recorded with two different contents is then suspect whatever is seen.
    words_cache.record(
        question="a", conclusion="c", files=["m0.py"], project="p", root=str(old_tree)
    )
    assert stale_ids(words_cache, old_tree) == {}
    (old_tree / "m0.py").write_text("edited\n")
    words_cache.record(
        question="b", conclusion="c", files=["m0.py"], project="p", root=str(old_tree)
    )
    assert stale_ids(words_cache, old_tree) == {1: (["m0.py"], [])}
    (old_tree / "m0.py").unlink()
    assert stale_ids(words_cache, old_tree) == {1: ([], ["m0.py"]), 2: ([], ["m0.py"])}


def test_file_recorded_with_two_contents_then_put_back(
    words_cache: MemoCache, old_tree: Path
) -> None:
    first = (old_tree / "m0.py").read_bytes()
    words_cache.record(
        question="a", conclusion="c", files=["m0.py"], project="p", root=str(old_tree)
    )
    (old_tree / "m0.py").write_bytes(first.upper())
    words_cache.record(
        question="b", conclusion="c", files=["m0.py"], project="p", root=str(old_tree)
    )
    (old_tree / "m0.py").write_bytes(first)
    # Read once, then answered from the stat cache: the same answer both times.
    assert stale_ids(words_cache, old_tree) == {2: (["m0.py"], [])}
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {2: (["m0.py"], [])}
    assert COUNTERS.files == 0


@pytest.mark.parametrize("contents", [1, 2])
def test_link_out_of_root_with_a_recorded_size_is_missing(
    words_cache: MemoCache, old_tree: Path, contents: int
) -> None:
    data = (old_tree / "m0.py").read_bytes()
    for i in range(contents):
        (old_tree / "m0.py").write_bytes(data if i == 0 else data.upper())
        words_cache.record(
            question=f"q{i}", conclusion="c", files=["m0.py"], project="p", root=str(old_tree)
        )
    outside = old_tree.parent / "outside.py"
    outside.write_bytes(data)  # the size and bytes of what was recorded first
    (old_tree / "m0.py").unlink()
    (old_tree / "m0.py").symlink_to(outside)
    assert stale_ids(words_cache, old_tree) == {i + 1: ([], ["m0.py"]) for i in range(contents)}


def test_observe_answers_only_paths_that_may_differ(old_tree: Path) -> None:
    root = resolve_root(str(old_tree))
    data = [(old_tree / f"m{i}.py").read_bytes() for i in range(5)]
    rows = [FileRow(f"m{i}.py", "", xxh3_hex(data[i]), len(data[i])) for i in range(5)]
    validator = validity.Validator(None)
    expected = validity.expect(root, rows)
    assert validator.observe(root, expected) == {}
    edited = b"x" * len(data[2])
    (old_tree / "m2.py").write_bytes(edited)
    COUNTERS.reset()
    assert validator.observe(root, expected) == {"m2.py": xxh3_hex(edited)}
    assert COUNTERS.files == 1
    # Two recorded contents: the path is answered with what it holds, unchanged or not.
    two = validity.expect(root, [*rows, rows[0]._replace(xxh3="0" * 32)])
    assert validator.observe(root, two) == {"m0.py": rows[0].xxh3, "m2.py": xxh3_hex(edited)}


def test_a_path_the_system_cannot_take_is_missing(old_tree: Path) -> None:
    # Only a hand-edited database holds such a path (record and import refuse
    # a NUL): lstat raises ValueError, which carries no errno.
    root = resolve_root(str(old_tree))
    data = (old_tree / "m0.py").read_bytes()
    rows = [FileRow(p, "", xxh3_hex(data), len(data)) for p in ("m0.py", "m\x00.py")]
    validator = validity.Validator(None)
    assert validator.observe(root, validity.expect(root, rows)) == {"m\x00.py": None}


def test_a_file_dated_after_2262_is_checked(words_cache: MemoCache, old_tree: Path) -> None:
    # No int64 holds its time in nanoseconds, so its stat key cannot be packed.
    record_all(words_cache, old_tree)
    far = 2**63 + 10**12
    try:
        os.utime(old_tree / "m4.py", ns=(far, far))
    except (OSError, OverflowError):
        pytest.skip("this file system cannot store a time after 2262")
    if (old_tree / "m4.py").stat().st_mtime_ns != far:
        pytest.skip("this file system does not keep a time after 2262")
    assert stale_ids(words_cache, old_tree) == {}
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {}
    assert COUNTERS.files == 1  # a time in the future is never trusted: read again
    (old_tree / "m4.py").write_text("module 9\n" * 100)
    os.utime(old_tree / "m4.py", ns=(far, far))
    assert stale_ids(words_cache, old_tree) == {3: (["m4.py"], [])}


def test_a_record_during_a_check_does_not_leave_it_an_outdated_list(
    words_cache: MemoCache, old_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_all(words_cache, old_tree)
    snapshot = words_cache._project_files("p")
    root = resolve_root(str(old_tree))
    real_expect = validity.expect

    def expect_while_recording(*args: Any) -> list[validity.Expected]:
        # A record lands while the check builds what it expects.
        monkeypatch.setattr(validity, "expect", real_expect)
        words_cache.record(
            question="d", conclusion="c", files=["m0.py", "new.py"], project="p", root=str(old_tree)
        )
        return real_expect(*args)

    (old_tree / "new.py").write_text("new\n")
    monkeypatch.setattr(validity, "expect", expect_while_recording)
    assert "new.py" not in {e.rel for e in snapshot.expected(root)}  # built before the record
    assert "new.py" in {e.rel for e in snapshot.expected(root)}
    (old_tree / "new.py").unlink()
    assert stale_ids(words_cache, old_tree) == {4: ([], ["new.py"])}


def test_a_folder_moved_out_of_root_and_linked_back_is_missing(
    words_cache: MemoCache, old_tree: Path
) -> None:
    (old_tree / "lib").mkdir()
    (old_tree / "lib" / "a.py").write_text("a\n")
    (old_tree / "pkg").mkdir()
    (old_tree / "pkg" / "b.py").write_text("b\n")
    (old_tree / "alias").symlink_to("pkg")  # a folder link inside root: allowed
    (old_tree / "link.py").symlink_to("lib/a.py")  # a file link inside root: allowed
    for question, path in (("a", "lib/a.py"), ("b", "alias/b.py"), ("c", "link.py")):
        words_cache.record(
            question=question, conclusion="c", files=[path], project="p", root=str(old_tree)
        )
    assert stale_ids(words_cache, old_tree) == {}
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {}
    assert COUNTERS.files == 1  # only link.py: a file link is read every time
    # The files keep their inode and ctime: only the folder moved.
    (old_tree / "lib").rename(old_tree.parent / "lib-outside")
    (old_tree / "lib").symlink_to(old_tree.parent / "lib-outside")
    assert stale_ids(words_cache, old_tree) == {1: ([], ["lib/a.py"]), 3: ([], ["link.py"])}


# The validator ----------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_parallel_reads_match_one_thread(
    root_tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads and helper processes read exactly what one thread does, refuse what it
    refuses, count what they read here; progress ends at the total; no fd leaks."""
    root_path = tmp_path / "proj"
    sizes = [0, 1, 100, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] + [5000] * 150
    rels = _many_files(root_path, sizes)
    os.symlink(rels[2], root_path / "link.bin")
    os.symlink(root_tree["outside"] / "secret.txt", root_path / "out.bin")
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
def test_a_worker_error_is_raised_and_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
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


def test_a_new_process_loads_its_root_in_one_query_and_stats_once(
    settled_tree: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    with open_cache(db_path) as first:
        _record(first, settled_tree)
    with open_cache(db_path) as second:
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
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
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


def test_only_entries_that_can_be_trusted_are_written(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A racy entry is never trusted (its times are fixed), so writing it is wasted."""
    root = tmp_path / "proj"
    _many_files(root, [400] * 16)
    with open_cache(db_path) as cache:
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
