"""Replacing a file whole or not at all (atomic.py): the data is on disk before the rename, and
the one rule for links keeps a write inside its folder.

The writer's refusals through ``explomemo setup`` (FIFOs, folders, links out of the
project) are tested with setup, in tests/clients/test_setup.py, and through ``export -o``
in tests/memos/test_exchange.py (child processes); here the writer is called in process:
links planted at the staging name, into /proc and in loops, failed writes, an owner
that cannot be kept."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import resource
import secrets
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from explomemo.atomic import leads_out, replace_file
from explomemo.clients.setup import CONFIG_FILE
from explomemo.errors import SetupError


@pytest.mark.parametrize("existing", [False, True])
def test_the_staging_file_is_flushed_to_disk_before_it_is_renamed_over_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """Kills ``replace_file`` losing its ``os.fsync``: without it a crash just after the
    rename can leave an empty or half-written file where the old one was. The fsync
    must be of the staging file's descriptor (the file that becomes the target) and
    come before ``os.replace``."""
    target = tmp_path / "config.json"
    if existing:
        target.write_text('{"old": true}\n')
    calls: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        assert Path(dst) == target
        calls.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    written = replace_file(target, b'{"new": true}\n', CONFIG_FILE, within=tmp_path)
    monkeypatch.undo()
    assert written == target and target.read_bytes() == b'{"new": true}\n'
    staging = target.stat().st_ino
    assert ("replace", staging) in calls, calls
    renamed = calls.index(("replace", staging))
    assert ("fsync", staging) in calls[:renamed], calls
    assert os.listdir(tmp_path) == ["config.json"]


def test_a_sibling_folder_whose_name_starts_with_the_folders_is_outside_it(
    tmp_path: Path,
) -> None:
    """Kills ``leads_out`` comparing bare string prefixes: ``/x/shop-other`` starts with
    ``/x/shop`` and is not inside it."""
    shop, other = tmp_path / "shop", tmp_path / "shop-other"
    for folder in (shop, other):
        (folder / ".cursor").mkdir(parents=True)
    real_other = os.path.realpath(other / ".cursor" / "mcp.json")
    assert leads_out(other / ".cursor" / "mcp.json", shop) == real_other
    (shop / "linked").symlink_to(other / ".cursor")
    assert leads_out(shop / "linked" / "mcp.json", shop) == real_other
    assert leads_out(shop / ".cursor" / "mcp.json", shop) is None
    assert leads_out(shop, shop) is None
    assert leads_out(shop / ".cursor", Path(f"{shop}/")) is None


def _only(folder: Path, *names: str) -> None:
    """No staging file is left beside the target (and nothing else was made)."""
    assert sorted(os.listdir(folder)) == sorted(names)


def _refused(target: Path, within: Path, *fragments: str, data: bytes = b"{}") -> str:
    """The write of ``data`` to ``target`` is refused with the family's error, whose
    message holds each fragment and ends with what to do; returns the message."""
    with pytest.raises(SetupError) as refused:
        replace_file(target, data, CONFIG_FILE, within=within)
    message = str(refused.value)
    for fragment in (*fragments, CONFIG_FILE.instead):
        assert fragment in message, message
    return message


def test_a_file_named_as_long_as_the_staging_name_leaves_room_for_is_replaced(
    tmp_path: Path,
) -> None:
    """Kills ``replace_file`` naming its staging file with more random digits: the staging
    name is the target's with 18 characters more (a dot before, a dot, 12 hex digits and
    ``.tmp`` after), so a name up to the folder's name limit less 18 can be written."""
    longest = int(os.pathconf(tmp_path, "PC_NAME_MAX")) - 18
    target = tmp_path / ("c" * (longest - len(".json")) + ".json")
    target.write_text('{"old": true}\n')
    assert replace_file(target, b'{"new": true}\n', CONFIG_FILE, within=tmp_path) == target
    assert target.read_bytes() == b'{"new": true}\n'
    _only(tmp_path, target.name)


def test_a_link_planted_at_the_staging_name_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``replace_file`` opening its staging file without ``O_EXCL``, and its refusal
    losing its message: someone who guesses the staging name and puts a link there must
    not have the write go to the file the link leads to (nor the link renamed over the
    target). The write is refused, saying which file and what to do."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("the user's own\n")
    target = project / "config.json"
    target.write_text('{"old": true}\n')
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes: "0123456789ab")
    planted = project / ".config.json.0123456789ab.tmp"
    planted.symlink_to(victim)
    _refused(target, project, str(target), os.strerror(errno.EEXIST))
    assert victim.read_text() == "the user's own\n"
    assert target.read_text() == '{"old": true}\n' and not target.is_symlink()
    assert planted.is_symlink() and os.readlink(planted) == str(victim)


def test_a_write_past_the_file_size_limit_leaves_the_old_file_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    """Kills the refusal of a write failing part way losing its message: past
    RLIMIT_FSIZE each write fails with EFBIG (SIGXFSZ ignored, as the CLI's tests do in
    a child); the old file stays whole, the staging file is removed, and the message
    names the file, the reason and both ways out."""
    target = tmp_path / "config.json"
    target.write_text('{"old": true}\n')
    limit = 64 * 1024
    big = b"x" * (4 * limit)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        said = (os.strerror(errno.EFBIG), "left as it was", "raise the file size limit")
        _refused(target, tmp_path, str(target), *said, data=big)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert target.read_text() == '{"old": true}\n'
    _only(tmp_path, "config.json")


def test_a_staging_file_removed_by_another_process_is_a_refusal_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``replace_file`` removing its staging file with ``missing_ok`` false: when a
    cleaner removed the staging file before the rename (the rename then fails), the
    write is refused with the family's error, not a FileNotFoundError from the clean-up."""
    target = tmp_path / "config.json"
    target.write_text('{"old": true}\n')
    real_fsync = os.fsync

    def fsync_after_a_cleaner(fd: int) -> None:
        for name in os.listdir(tmp_path):
            if name.endswith(".tmp"):
                os.unlink(tmp_path / name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_after_a_cleaner)
    _refused(target, tmp_path, str(target), os.strerror(errno.ENOENT), "it was left as it was")
    monkeypatch.undo()
    assert target.read_text() == '{"old": true}\n'
    _only(tmp_path, "config.json")


def test_a_staging_file_that_cannot_be_removed_after_a_failed_rename_is_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that turned read-only between the write and the rename fails the rename
    and then the clean-up of the staging file: the write is refused with the rename's
    reason and the family's error, never the clean-up's OSError."""
    target = tmp_path / "config.json"
    target.write_text('{"old": true}\n')
    real_unlink = os.unlink

    def read_only_replace(source: object, destination: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def read_only_unlink(path: object, *args: object, **kwargs: object) -> None:
        if str(path).endswith(".tmp"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", read_only_replace)
    monkeypatch.setattr(os, "unlink", read_only_unlink)
    _refused(target, tmp_path, str(target), os.strerror(errno.EROFS), "it was left as it was")
    monkeypatch.undo()
    assert target.read_text() == '{"old": true}\n'


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


@contextlib.contextmanager
def _without_cap_chown() -> Iterator[None]:
    """This thread without CAP_CHOWN (as a user who is not root): setting a file's owner
    to another user fails with EPERM until the block ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    assert libc.capget(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    effective = data[0].effective
    data[0].effective &= ~1  # CAP_CHOWN is capability 0
    assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        data[0].effective = effective
        assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())


@pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0,
    reason="a file of another user takes root to make (and Linux capabilities)",
)
def test_a_file_of_another_user_is_replaced_keeping_its_mode_when_its_owner_cannot_be_kept(
    tmp_path: Path,
) -> None:
    """Kills ``replace_file`` letting the PermissionError of ``fchown`` through: a user may
    replace a file of another user in a folder they can write (a file an earlier
    ``sudo`` run left), but not give the new file to that user. The file is replaced
    and keeps its mode; the owner is the writer's."""
    target = tmp_path / "config.json"
    target.write_text('{"old": true}\n')
    os.chmod(target, 0o640)
    os.chown(target, 12345, 12345)
    with _without_cap_chown():
        replace_file(target, b'{"new": true}\n', CONFIG_FILE, within=tmp_path)
    after = os.stat(target)
    assert target.read_bytes() == b'{"new": true}\n'
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert (after.st_uid, after.st_gid) == (os.geteuid(), os.getegid())
    _only(tmp_path, "config.json")


@pytest.mark.parametrize("trailing", [" ", "X"])
def test_a_project_named_as_a_sibling_with_a_character_more_holds_only_its_own_files(
    tmp_path: Path, trailing: str
) -> None:
    """Kills ``leads_out`` stripping more than the slash from the folder's path (spaces,
    other characters): the project ``shop `` or ``shopX`` does not hold ``shop``'s
    files, and holds its own."""
    sibling, project = tmp_path / "shop", tmp_path / f"shop{trailing}"
    sibling.mkdir()
    project.mkdir()
    (sibling / "config.json").write_text("the sibling's own\n")
    link = project / "config.json"
    link.symlink_to(sibling / "config.json")
    with pytest.raises(SetupError, match="is a symbolic link that leads out of"):
        replace_file(link, b"{}", CONFIG_FILE, within=project)
    assert (sibling / "config.json").read_text() == "the sibling's own\n"
    own = project / "own.json"
    own.write_text("old\n")
    assert replace_file(own, b"new\n", CONFIG_FILE, within=project) == own
    assert own.read_text() == "new\n"


def test_a_new_file_behind_a_folder_link_leading_out_is_refused(tmp_path: Path) -> None:
    """Kills ``writable_target`` losing the naming of the refusal of a file that does not
    exist yet: a folder of the project linked out of it is refused with the family's
    error (not an AttributeError), and nothing is made where it leads."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / ".cursor").symlink_to(outside)
    target = project / ".cursor" / "mcp.json"
    _refused(target, project, f"{target} is a symbolic link that leads out of {project}")
    assert os.listdir(outside) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("relative", [False, True])
def test_a_link_to_a_process_open_file_is_refused_though_it_leads_to_a_file_inside(
    tmp_path: Path, relative: bool
) -> None:
    """Kills ``_through_proc`` (and ``writable_target``'s call of it) missing a way into
    /proc: a link to ``/proc/self/fd/N`` (what /dev/stdout is), where N is a log file of
    the project, must not have the log replaced. The link is absolute, or relative
    through a link to the folder ``/proc/self/fd``; the message names the link."""
    log = tmp_path / "log"
    log.write_text("the shell's log\n")
    link = tmp_path / "stdout"
    with log.open("ab") as held:
        if relative:
            (tmp_path / "fd").symlink_to("/proc/self/fd")
            link.symlink_to(f"fd/{held.fileno()}")
        else:
            link.symlink_to(f"/proc/self/fd/{held.fileno()}")
        _refused(link, tmp_path, f"{link} leads to a process's open file through /proc")
    assert log.read_text() == "the shell's log\n" and link.is_symlink()
    _only(tmp_path, "log", "stdout", *(["fd"] if relative else []))


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs /proc")
def test_a_file_right_in_proc_is_refused_as_a_proc_path_before_any_write(
    tmp_path: Path,
) -> None:
    """Kills ``_through_proc`` losing the test for a file whose folder is ``/proc`` itself:
    ``-o /proc/version`` (its folder, ``/proc``, is the one it must stay in) is refused
    as a path into /proc, not by a failed attempt to make a staging file there."""
    proc = Path("/proc")
    _refused(proc / "version", proc, "/proc/version leads to a process's open file through /proc")


def test_a_loop_of_links_is_refused_with_the_systems_reason(tmp_path: Path) -> None:
    """Kills ``_through_proc`` calling a path into /proc every path whose links it stops
    following, and ``writable_target``'s refusal of a file it cannot look at losing its
    message: a loop of links is refused as too many levels of links, naming the file."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.symlink_to(second)
    second.symlink_to(first)
    assert "/proc" not in _refused(first, tmp_path, str(first), os.strerror(errno.ELOOP))
    assert first.is_symlink() and second.is_symlink()
    _only(tmp_path, "first.json", "second.json")


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs /proc")
@pytest.mark.parametrize("count", [40, 41])
def test_a_path_through_as_many_links_as_the_system_follows_into_proc_is_refused(
    tmp_path: Path, count: int
) -> None:
    """A chain of 40 links (as many as Linux follows in one path) ending in /proc is
    refused as a path into /proc, before anything is opened: the check follows the
    chain as far as the system does. One link more and the system itself refuses the
    path: the refusal gives its reason."""
    links = [tmp_path / f"link{n:02}" for n in range(count)]
    for here, there in itertools.pairwise(links):
        here.symlink_to(there.name)
    links[-1].symlink_to("/proc/version")
    if count == 40:
        assert Path(os.path.realpath(links[0])) == Path("/proc/version")
        reason = f"{links[0]} leads to a process's open file through /proc"
    else:
        reason = os.strerror(errno.ELOOP)
    message = _refused(links[0], Path("/proc"), str(links[0]), reason)
    assert ("through /proc" in message) == (count == 40)
    _only(tmp_path, *(link.name for link in links))
