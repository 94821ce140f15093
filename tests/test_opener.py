"""The Opener of a stale check (files.Opener) keeps every guarantee of files.open_regular."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import INSIDE, PATHS, SECRET

from explomemo.files import Opener, Refused, open_regular, resolve_root


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


class OpenSpy:
    """Records every name os.open is asked to open."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.real = os.open

    def __call__(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        self.names.append(os.fsdecode(path))
        return self.real(path, flags, *args, **kwargs)


def _is_lstat(*args: Any, **kwargs: Any) -> bool:
    return kwargs.get("dir_fd") is not None and kwargs.get("follow_symlinks") is False


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


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


@pytest.mark.timeout(20)
@pytest.mark.parametrize("rel", PATHS)
def test_opener_agrees_with_open_regular(root_tree: dict[str, Path], rel: str) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
    expected = _outcome(lambda: open_regular(root, rel))
    with Opener(root) as opener:
        got = _outcome(lambda: opener.open(rel)[0])
        # A second open in the same check goes through the cached folders.
        again = _outcome(lambda: opener.open(rel)[0])
    assert got == expected == again
    assert got[1] != SECRET


def test_opener_gives_the_fstat_of_what_it_opened(root_tree: dict[str, Path]) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
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


@pytest.mark.timeout(20)
def test_opener_never_opens_a_fifo_or_a_link_out(
    root_tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
    spy = OpenSpy()
    monkeypatch.setattr(os, "open", spy)
    with Opener(root) as opener:
        for rel in ("fifo", "out.py", "outdir/mod.py", "../outside/secret.txt"):
            with pytest.raises(Refused):
                opener.open(rel)
    monkeypatch.undo()
    opened = {os.path.basename(name) for name in spy.names}
    assert not opened & {"fifo", "secret.txt", "outside"}, spy.names


@pytest.mark.timeout(20)
def test_opener_refuses_a_file_swapped_for_a_link_after_its_lstat(
    root_tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
    real_stat = os.stat
    fired: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = real_stat(*args, **kwargs)
        if not fired and _is_lstat(*args, **kwargs):
            fired.append(True)
            staging = root_tree["root"] / "a.py.swap"
            os.symlink(root_tree["outside"] / "secret.txt", staging)
            os.replace(staging, root_tree["root"] / "a.py")
        return result

    monkeypatch.setattr(os, "stat", spy)
    with Opener(root) as opener, pytest.raises(Refused):
        opener.open("a.py")
    assert fired


@pytest.mark.timeout(20)
def test_opener_refuses_a_folder_swapped_for_a_link_after_it_was_opened(
    root_tree: dict[str, Path],
) -> None:
    """The folder descriptor kept for the check never leads out of root."""
    root = resolve_root(str(root_tree["root"]))
    with Opener(root) as opener:
        assert _outcome(lambda: opener.open("pkg/mod.py")[0]) == ("read", INSIDE + b"mod\n")
        shutil.rmtree(root_tree["root"] / "pkg")
        os.symlink(root_tree["outside"] / "pkg", root_tree["root"] / "pkg")
        outcome = _outcome(lambda: opener.open("pkg/mod.py")[0])
    assert outcome[0] == "refused"
    # A new check (a new Opener) sees the link and refuses it too.
    with Opener(root) as opener:
        assert _outcome(lambda: opener.open("pkg/mod.py")[0])[0] == "refused"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_opener_closes_every_folder(root_tree: dict[str, Path]) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
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


# Hashing ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["file", "folder"])
def test_one_opener_during_a_real_race_never_yields_the_secret(
    root_tree: dict[str, Path], what: str
) -> None:
    """A thread flips a file (or its folder) between real and a link out of root.

    One Opener serves the whole run, as in a long check, so its folder
    descriptors outlive many flips: every open is refused or yields the bytes
    inside root, never the secret, and nothing but Refused is raised.
    """
    rel = "a.py" if what == "file" else "pkg/mod.py"
    inside = INSIDE if what == "file" else INSIDE + b"mod\n"
    root = resolve_root(str(root_tree["root"]))
    stop = threading.Event()
    flipper = threading.Thread(
        target=_flip, args=(stop, root_tree["root"], root_tree["outside"], what)
    )
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
