"""Files inside a root (files.py): root containment, links, the working directory as the user
reached it, and every refusal of a path, with its sentence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SECRET,
    CliResult,
    RawServer,
    _reads,
    assert_one_error_line,
    assert_tool_refused,
    call_tools_stdio,
    cli_subprocess,
    counts,
    invoke_cli,
    open_cache,
    stale_json,
    stale_of,
)

from explomemo.check import hashing, validity
from explomemo.errors import PathError
from explomemo.files import Root, relative_path, resolve_root, working_directory
from explomemo.memos.cache import MemoCache

RECORD = "memory_exploration_record"


RECALL = "memory_exploration_recall"


STALE = "memory_exploration_stale"


INSIDE = b"the file inside root\n"


def swap_link(link: Path, target: Path | str) -> None:
    """Point ``link`` at ``target`` atomically (the name never disappears)."""
    staging = link.with_name(link.name + ".swap")
    os.symlink(target, staging)
    os.replace(staging, link)


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


def _nested(root: Path, folders: int, length: int) -> str:
    """A file f.py under ``folders`` nested folders of ``length`` characters; its path."""
    parts = [f"{n:03d}" + "d" * (length - 3) for n in range(folders)]
    folder = root.joinpath(*parts)
    # One mkdir at a time, relative: the whole path may be over PATH_MAX.
    fd = os.open(root, os.O_RDONLY)
    try:
        for part in parts:
            os.mkdir(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with os.fdopen(os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            fd = -1
            f.write("F = 1\n")
    finally:
        if fd >= 0:
            os.close(fd)
    return str(folder.relative_to(root) / "f.py")


@pytest.fixture
def linked(tmp_path: Path) -> dict[str, Path]:
    """real/proj (a.py, sub/b.py, out -> ../../outside), link -> real, alias -> real/proj/sub."""
    proj = tmp_path / "real" / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "a.py").write_text("a = 1\n")
    (proj / "sub" / "b.py").write_text("b = 2\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("secret\n")
    (proj / "out").symlink_to(outside)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "alias").symlink_to(proj / "sub")
    return {
        "real": proj,
        "logical": tmp_path / "link" / "proj",
        "alias": tmp_path / "alias",
        "base": tmp_path,
    }


def _record(
    db: Path, cwd: Path, pwd: str, *files: str, root: str | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["--db", str(db), "record", "--project", "p", "--question", f"q {files}"]
    args += ["--conclusion", "c", *(["--root", root] if root else []), "--", *files]
    return cli_subprocess(args, env={"PWD": pwd}, cwd=cwd)


# Root containment: a sibling folder whose name starts with root's name ------


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
    run = invoke_cli(
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
        # The first match whole, the other by id: its files as show gives them.
        checked = {
            m.id: m.files or cache.show(m.id, root=str(siblings.root)).files
            for m in recalled.matches
        }
        assert {
            m.id: (m.status, [(f.path, f.state) for f in checked[m.id]]) for m in recalled.matches
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


# Survivors of the first mutation run (benchmarks/mutation/RESULTS.md) ----------------


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


# How a check spreads its reads (validity.Validator._read_all, _take_helpers) ------


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


# A folder where a file is expected ------------------------------------------


@pytest.mark.parametrize(
    ("given", "fragments"),
    [
        (".", ("'.' is root", "itself, a folder")),
        ("./", ("'./' is root", "itself, a folder")),
        ("pkg/..", ("'pkg/..' is root", "itself, a folder")),
        ("{root}", ("is root", "itself, a folder")),
        ("README/", ("'README/' ends with '/', so it names a folder, not a file",)),
        ("README/.", ("'README/.' ends with '/'",)),
        ("pkg/", ("'pkg/' ends with '/'",)),
        ("../outside/", ("is outside root",)),
    ],
)
def test_a_path_naming_a_folder_is_refused_for_what_it_is(
    tmp_path: Path, given: str, fragments: tuple[str, ...]
) -> None:
    """``record .`` is root itself, not "outside root"; ``record README/`` names a folder
    (the system refuses to open it), not the file README."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "README").write_text("read me\n")
    (root / "pkg" / "a.py").write_text("A = 1\n")
    db = str(tmp_path / "m.db")
    record = ["--db", db, "record", "--project", "p", "--root", str(root), "--question", "q"]
    run = invoke_cli([*record, "--conclusion", "c", "pkg/a.py", given.format(root=root)])
    assert_one_error_line(run, *fragments)
    assert invoke_cli(["--db", db, "list"]).out == "No memos.\n"


# A working directory whose path is not UTF-8 --------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--question", "q", "--conclusion", "c", "a.py"],
        ["recall", "x"],
        ["recall", "x", "--project", "ok"],
        ["setup", "cursor", "--dry-run"],
    ],
)
def test_a_working_directory_that_is_not_utf8_is_refused(
    tmp_path: Path, bad_cwd: Path, args: list[str]
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    MemoCache.open(tmp_path / "m.db").close()  # recall reads an existing database only
    run = cli_subprocess(["--db", str(tmp_path / "m.db"), *args], cwd=bad_cwd)
    line = assert_one_error_line(
        CliResult(run.returncode, run.stdout, run.stderr), "bad\\xffdir'", "not valid UTF-8"
    )
    assert "file" not in line, line


def test_a_working_directory_over_the_root_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    deep = tmp_path.joinpath(*["d" * 200] * 6)
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("PWD", str(deep))
    MemoCache.open(tmp_path / "m.db").close()  # recall reads an existing database only
    run = invoke_cli(["--db", str(tmp_path / "m.db"), "recall", "x", "--project", "p"])
    assert_one_error_line(run, "the working directory is", "over the limit of 1024")


# Paths longer than an export can carry ----------------------------------------


def test_record_refuses_a_path_an_export_cannot_carry(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    rel = _nested(tmp_path, 17, 250)
    assert len(rel) == 4271
    base = ["--db", str(tmp_path / "m.db"), "record", "--root", str(tmp_path)]
    run = invoke_cli([*base, "--question", "q", "--conclusion", "c", rel])
    assert_one_error_line(run, "files[0] is 4,271 characters long", "over 4,096")
    assert len(run.err) < 1000


def test_a_path_over_path_max_with_its_root_is_checked_not_missing(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    rel = _nested(tmp_path, 16, 254)
    assert len(rel) <= 4096 < len(str(tmp_path)) + 1 + len(rel)
    db = ["--db", str(tmp_path / "m.db")]
    record = ["record", "--project", "p", "--root", str(tmp_path), "--question", "q"]
    assert invoke_cli([*db, *record, "--conclusion", "c", rel]).code == 0
    stale = invoke_cli([*db, "stale", "--format", "json"])
    assert json.loads(stale.out) == {"checked": 1, "stale": []}, stale.err
    export = tmp_path / "memos.jsonl"
    assert invoke_cli([*db, "export", "-o", str(export)]).code == 0
    checked = invoke_cli(["stale", "--from", str(export), "--root", str(tmp_path), "--check"])
    assert (checked.code, checked.out) == (0, "The one memo is fresh.\n"), checked.err
    imported = invoke_cli(["--db", str(tmp_path / "other.db"), "import", "--json", str(export)])
    assert imported.code == 0, imported.err


# Nits: grammar, wording, positions ----------------------------------------------


def test_a_name_too_long_for_the_file_system_is_not_said_to_be_missing(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    base = ["--db", str(tmp_path / "m.db"), "record", "--root", str(tmp_path)]
    run = invoke_cli([*base, "--question", "q", "--conclusion", "c", "x" * 300])
    line = assert_one_error_line(run, "cannot be examined (File name too long)")
    assert "does not exist" not in line


@pytest.mark.timeout(120)
def test_cli_accepts_absolute_paths_under_a_linked_working_directory(
    linked: dict[str, Path],
) -> None:
    """A root reached through a symbolic link accepts the absolute paths a user or agent sees
    there; a link inside root that leads out is still refused."""
    db = linked["base"] / "m.db"
    logical, real = linked["logical"], linked["real"]
    # The shell's view: cwd reached through "link", $PWD says so.
    done = _record(db, logical, str(logical), f"{logical}/a.py", f"{logical}/sub/b.py")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [f["path"] for f in result["files"]] == ["a.py", "sub/b.py"]
    assert result["root"] == str(logical)  # the root as the user reached it
    # The physical path, and a second link into root, lead to the same files.
    done = _record(db, logical, str(logical), f"{real}/a.py", f"{linked['alias']}/b.py")
    assert done.returncode == 0, done.stderr
    assert [f["path"] for f in json.loads(done.stdout)["files"]] == ["a.py", "sub/b.py"]
    # A root given through the link, with files named by the physical path.
    done = _record(db, linked["base"], "/", f"{real}/a.py", root=str(logical))
    assert done.returncode == 0, done.stderr
    # A $PWD that is not the working directory is not believed.
    done = _record(db, logical, str(linked["base"]), "a.py")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["root"] == str(real)
    assert counts(db)["memos"] == 4


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "bad",
    [
        "{logical}/out/secret.py",  # a link inside root that leads out
        "{real}/out/secret.py",
        "{base}/outside/secret.py",
        "{logical}/../../outside/secret.py",
        "{alias}/../../../outside/secret.py",
    ],
)
def test_cli_still_refuses_paths_that_lead_out(linked: dict[str, Path], bad: str) -> None:
    """A root reached through a symbolic link accepts the absolute paths a user or agent sees
    there; a link inside root that leads out is still refused."""
    db = linked["base"] / "m.db"
    path = bad.format(**{k: str(v) for k, v in linked.items()})
    done = _record(db, linked["logical"], str(linked["logical"]), path)
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and path in done.stderr
    assert "outside root" in done.stderr
    assert counts(db)["memos"] == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pwd", ["logical", "inherited"])
def test_serve_accepts_absolute_paths_under_a_linked_working_directory(
    linked: dict[str, Path], pwd: str
) -> None:
    """The client starts the server in a linked folder; $PWD may or may not say so."""
    db = linked["base"] / "m.db"
    logical = linked["logical"]
    env = {"PWD": str(logical) if pwd == "logical" else str(linked["base"])}
    with RawServer(db, cwd=logical, env=env) as server:
        reply = server.call(
            RECORD,
            {
                "question": "where are a and b?",
                "conclusion": "c",
                "project": "p",
                "files": [f"{logical}/a.py", f"{logical}/sub/b.py", f"{linked['alias']}/b.py"],
            },
        )
        assert not reply.is_error, reply.text
        assert [f["path"] for f in reply.data["files"]] == ["a.py", "sub/b.py"]
        assert reply.data["root"] == str(logical if pwd == "logical" else linked["real"])
        refused = server.call(
            RECORD,
            {
                "question": "and the secret?",
                "conclusion": "c",
                "project": "p",
                "files": [f"{logical}/out/secret.py"],
            },
        )
        assert_tool_refused(refused, "out/secret.py", "outside root")
    assert counts(db)["memos"] == 1
