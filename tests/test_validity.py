"""The validity engine: stat cache, racy entries, and content changes that hide."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import xxhash

from explomemo.check import validity
from explomemo.check.hashing import COUNTERS
from explomemo.files import resolve_root
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel
from explomemo.store.database import FileRow


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


def test_unchanged_files_are_not_read_again(words_cache: MemoCache, old_tree: Path) -> None:
    record_all(words_cache, old_tree)
    assert stale_ids(words_cache, old_tree) == {}
    COUNTERS.reset()
    assert stale_ids(words_cache, old_tree) == {}
    assert (COUNTERS.files, COUNTERS.bytes) == (0, 0)


def test_stat_cache_persists_across_processes(old_tree: Path, db_path: Path) -> None:
    with MemoCache.open(db_path, FixedModel(None)) as first:
        record_all(first, old_tree)
        assert stale_ids(first, old_tree) == {}
    with MemoCache.open(db_path, FixedModel(None)) as second:
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
