"""The race between checking a path and opening it (TOCTOU).

A file or folder swapped for a symbolic link out of root after the check
must never be read: explomemo.files.open_regular opens without following
links and verifies what it opened.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import SECRET, counts, open_cache

from explomemo.check import hashing
from explomemo.errors import PathError
from explomemo.files import Refused, open_regular, resolve_root

INSIDE = b"inside root\n"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "pkg" / "mod.py").write_bytes(SECRET)
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "a.py").write_bytes(INSIDE)
    (root / "pkg" / "mod.py").write_bytes(INSIDE)
    return {"root": root, "outside": outside, "secret": outside / "secret.txt"}


def _read_all(fd: int) -> bytes:
    try:
        chunks = []
        while piece := os.read(fd, 1 << 16):
            chunks.append(piece)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _swap_file_for_link(path: Path, target: Path) -> None:
    staging = path.with_name(path.name + ".swap")
    os.symlink(target, staging)
    os.replace(staging, path)  # atomic: the name never disappears


def _swap_dir_for_link(path: Path, target: Path) -> None:
    shutil.rmtree(path)
    os.symlink(target, path)


class Once:
    """Wraps a function: the first matching call runs ``action`` right after it returns."""

    def __init__(
        self,
        real: Callable[..., Any],
        action: Callable[[], None],
        when: Callable[..., bool] = lambda *a, **k: True,
    ) -> None:
        self.real, self.action, self.when, self.fired = real, action, when, False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.real(*args, **kwargs)
        if not self.fired and self.when(*args, **kwargs):
            self.fired = True
            self.action()
        return result


def _expect_refused(root: Path, rel: str) -> Refused:
    where = resolve_root(str(root))
    try:
        fd = open_regular(where, rel)
    except Refused as exc:
        return exc
    content = _read_all(fd)
    pytest.fail(f"open_regular opened {rel!r} after the swap and read {content!r}")


def _is_lstat(*args: Any, **kwargs: Any) -> bool:
    return kwargs.get("dir_fd") is not None and kwargs.get("follow_symlinks") is False


def _flip_file(stop: threading.Event, path: Path, secret: Path) -> None:
    master = path.with_name("master")
    master.write_bytes(INSIDE)
    while not stop.is_set():
        _swap_file_for_link(path, secret)
        staging = path.with_name(path.name + ".file")
        os.link(master, staging)
        os.replace(staging, path)


def _flip_folder(stop: threading.Event, folder: Path, target: Path) -> None:
    aside = folder.with_name(folder.name + ".aside")
    while not stop.is_set():
        os.rename(folder, aside)
        os.symlink(target, folder)
        os.unlink(folder)
        os.rename(aside, folder)


def _flipper(
    what: str, tree: dict[str, Path], stop: threading.Event
) -> tuple[str, threading.Thread]:
    root = tree["root"]
    if what == "file":
        thread = threading.Thread(target=_flip_file, args=(stop, root / "a.py", tree["secret"]))
        return "a.py", thread
    thread = threading.Thread(
        target=_flip_folder, args=(stop, root / "pkg", tree["outside"] / "pkg")
    )
    return "pkg/mod.py", thread


@pytest.mark.timeout(20)
def test_file_swapped_for_link_after_realpath_check(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder swapped for a link out of root between its check and its open must never
    be read (TOCTOU)."""
    spy = Once(os.path.realpath, lambda: _swap_file_for_link(tree["root"] / "a.py", tree["secret"]))
    monkeypatch.setattr(os.path, "realpath", spy)
    _expect_refused(tree["root"], "a.py")
    assert spy.fired


@pytest.mark.timeout(20)
def test_folder_swapped_for_link_after_realpath_check(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder swapped for a link out of root between its check and its open must never
    be read (TOCTOU)."""
    spy = Once(
        os.path.realpath,
        lambda: _swap_dir_for_link(tree["root"] / "pkg", tree["outside"] / "pkg"),
    )
    monkeypatch.setattr(os.path, "realpath", spy)
    _expect_refused(tree["root"], "pkg/mod.py")
    assert spy.fired


@pytest.mark.timeout(20)
def test_file_swapped_for_link_between_lstat_and_open(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder swapped for a link out of root between its check and its open must never
    be read (TOCTOU)."""
    spy = Once(
        os.stat, lambda: _swap_file_for_link(tree["root"] / "a.py", tree["secret"]), _is_lstat
    )
    monkeypatch.setattr(os, "stat", spy)
    _expect_refused(tree["root"], "a.py")
    assert spy.fired


@pytest.mark.timeout(20)
def test_file_swapped_for_another_file_between_lstat_and_open(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file put in place (e.g. a hard link to a secret) is not the one checked."""
    decoy = tree["root"] / "decoy"
    decoy.write_bytes(SECRET)
    spy = Once(os.stat, lambda: os.replace(decoy, tree["root"] / "a.py"), _is_lstat)
    monkeypatch.setattr(os, "stat", spy)
    refused = _expect_refused(tree["root"], "a.py")
    assert spy.fired
    assert "replaced" in refused.reason


@pytest.mark.timeout(20)
def test_file_swapped_for_fifo_between_lstat_and_open_does_not_hang(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder swapped for a link out of root between its check and its open must never
    be read (TOCTOU)."""

    def swap() -> None:
        staging = tree["root"] / "fifo.swap"
        os.mkfifo(staging)
        os.replace(staging, tree["root"] / "a.py")

    spy = Once(os.stat, swap, _is_lstat)
    monkeypatch.setattr(os, "stat", spy)
    _expect_refused(tree["root"], "a.py")
    assert spy.fired


@pytest.mark.timeout(20)
def test_record_never_reads_a_file_swapped_after_the_check(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through MemoCache.record: a refusal naming the file, no byte hashed, nothing written."""
    db = tree["root"].parent / "race.db"
    spy = Once(
        os.stat, lambda: _swap_file_for_link(tree["root"] / "a.py", tree["secret"]), _is_lstat
    )
    with open_cache(db) as cache:
        monkeypatch.setattr(os, "stat", spy)
        hashing.COUNTERS.reset()
        try:
            with pytest.raises(PathError, match=r"a\.py"):
                cache.record(
                    question="q",
                    conclusion="c",
                    files=["a.py"],
                    project="p",
                    root=str(tree["root"]),
                )
        finally:
            monkeypatch.undo()
    assert spy.fired
    assert hashing.COUNTERS.files == 0 and hashing.COUNTERS.bytes == 0
    assert counts(db)["memos"] == 0


@pytest.mark.timeout(20)
def test_stale_check_never_reads_a_file_swapped_after_the_check(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validity engine reads through open_regular too: a swap makes the file missing."""
    (tree["root"] / "a.py").write_bytes(SECRET)  # same bytes as the secret outside root
    db = tree["root"].parent / "race.db"
    with open_cache(db) as cache:
        memo = cache.record(
            question="q", conclusion="c", files=["a.py"], project="p", root=str(tree["root"])
        )
    spy = Once(
        os.stat, lambda: _swap_file_for_link(tree["root"] / "a.py", tree["secret"]), _is_lstat
    )
    with open_cache(db) as cache:
        monkeypatch.setattr(os, "stat", spy)
        hashing.COUNTERS.reset()
        try:
            result = cache.stale(project="p", root=str(tree["root"]))
        finally:
            monkeypatch.undo()
    assert spy.fired
    assert hashing.COUNTERS.files == 0
    assert [(s.id, s.missing) for s in result.stale] == [(memo.id, ["a.py"])]


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["file", "folder"])
def test_real_race_never_yields_the_secret(tree: dict[str, Path], what: str) -> None:
    """A thread flips a file (or its folder) between real and a link out of root.

    Every open is refused or yields the bytes inside root; never the secret,
    and never an exception other than Refused (its documented contract).
    """
    stop = threading.Event()
    rel, flipper = _flipper(what, tree, stop)
    where = resolve_root(str(tree["root"]))
    opened = refused = 0
    escaped: list[OSError] = []
    flipper.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                fd = open_regular(where, rel)
            except Refused:
                refused += 1
                continue
            except OSError as exc:  # the library bug this test documents
                escaped.append(exc)
                continue
            opened += 1
            assert _read_all(fd) == INSIDE, "the secret outside root was read"
    finally:
        stop.set()
        flipper.join()
    assert opened + refused + len(escaped) > 100
    assert not escaped, (
        f"open_regular raised {len(escaped)} raw OSErrors (first: {escaped[0]!r}) instead of"
        " Refused: os.path.realpath raced with the swap"
    )


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["file", "folder"])
def test_stale_during_a_real_race_never_fails(tree: dict[str, Path], what: str) -> None:
    """stale() while a recorded file flips: it answers every time, never reads the secret."""
    db = tree["root"].parent / "race.db"
    stop = threading.Event()
    rel, flipper = _flipper(what, tree, stop)
    failures: list[Exception] = []
    with open_cache(db) as cache:
        try:
            cache.record(
                question="q", conclusion="c", files=[rel], project="p", root=str(tree["root"])
            )
            flipper.start()
            deadline = time.monotonic() + 1.5
            rounds = 0
            while time.monotonic() < deadline:
                rounds += 1
                cache.validator.clear()  # force a read each time, not a stat-cache hit
                try:
                    result = cache.stale(project="p", root=str(tree["root"]))
                except Exception as exc:  # the library bug this test documents
                    failures.append(exc)
                    continue
                for entry in result.stale:
                    assert entry.changed + entry.missing == [rel]
        finally:
            stop.set()
            if flipper.is_alive():
                flipper.join()
    assert rounds > 20
    assert not failures, (
        f"stale failed {len(failures)} of {rounds} times while a file was being swapped"
        f" (first: {failures[0]!r})"
    )
