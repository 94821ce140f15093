"""Replacing a file whole or not at all: the one writer of exports and client configuration.

The new content is written to a file of a random name next to the target
(created exclusively, so no other writer's file and no link planted there is
ever written through), flushed to disk, then renamed over the target: a
reader sees the old file or the new one, never half of either. The target
keeps its permissions (and its owner when the user may set it); a new file
gets ``0666`` less the umask, as any program's would.

Every write names the folder it must stay in (the project folder, the work
tree an export stands in), and :func:`leads_out` is the one rule for links: a
symbolic link on the way (the file's own, or a folder's) is followed only
while it leads to a place inside that folder; the file it leads to is then
replaced and the link stays. A repository can commit a link, and a link
leading out of it would have a command rewrite a file of the user's own.
Refused too, before anything is opened: a target that is not a regular file (a
directory, FIFO, socket or device: a FIFO opened for writing would block), a
link to a file that does not exist, and a path that leads into ``/proc`` (as
``/dev/stdout`` does: a file renamed there would replace whatever the shell
redirected to).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from explomemo.errors import ExplomemoError
from explomemo.files import file_kind

#: As many symbolic links as Linux follows in one path (MAXSYMLINKS).
MOST_LINKS = 40


@dataclass(frozen=True)
class Naming:
    """How a caller's refusals name the file and say what to do instead."""

    #: The exception raised (a class of the one family).
    error: type[ExplomemoError]
    #: What the file is, for the user: "export file", "configuration file".
    what: str
    #: What to do instead, ending each refusal ("pick another path with -o").
    instead: str


def replace_file(target: Path, data: bytes, naming: Naming, *, within: Path) -> Path:
    """Replace ``target`` (links followed while they stay inside ``within``) with ``data``;
    returns the path of the file written.

    A failed write (a full disk, a file size limit) leaves the previous file
    as it was and removes the staging file.
    """
    final, owner = writable_target(target, naming, within)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{final.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise naming.error(
            f"cannot write {naming.what} {target} ({exc.strerror}): {naming.instead}"
        ) from exc
    try:
        try:
            if owner is not None:
                os.fchmod(fd, owner.permissions)
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, owner.uid, owner.gid)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staging, final)
    except OSError as exc:
        # The folder may refuse the clean-up for the reason it refused the
        # write; the write's reason is the one to report.
        with contextlib.suppress(OSError):
            staging.unlink()
        raise naming.error(
            f"cannot write {naming.what} {target} ({exc.strerror}): it was left as it was;"
            f" free space or raise the file size limit, or {naming.instead}"
        ) from exc
    return final


@dataclass(frozen=True)
class Owner:
    """Permissions and owner of a file being replaced."""

    permissions: int
    uid: int
    gid: int


def leads_out(path: Path, within: Path) -> str | None:
    """Where ``path`` really is, when a symbolic link on its way (its own, or a folder's)
    leads out of the folder ``within``; None when it stays inside."""
    reached = os.path.realpath(path)
    home = os.path.realpath(within)
    if reached == home or reached.startswith(home.rstrip("/") + "/"):
        return None
    return reached


def writable_target(target: Path, naming: Naming, within: Path) -> tuple[Path, Owner | None]:
    """The regular file a write to ``target`` replaces (links followed while they stay inside
    ``within``), and its owner and permissions when it exists; a refusal (see the module)
    otherwise."""
    if _through_proc(str(target)):
        raise naming.error(
            f"{naming.what} {target} leads to a process's open file through /proc (as"
            f" /dev/stdout does): {naming.instead}"
        )
    try:
        found = os.stat(target)
    except FileNotFoundError:
        if os.path.lexists(target):
            raise naming.error(
                f"{naming.what} {target} is a symbolic link to a file that does not exist:"
                f" {naming.instead}"
            ) from None
        _refuse_a_link_out(target, naming, within)
        return Path(os.path.realpath(target)), None
    except OSError as exc:
        raise naming.error(
            f"cannot write {naming.what} {target} ({exc.strerror}): {naming.instead}"
        ) from exc
    if not stat.S_ISREG(found.st_mode):
        raise naming.error(
            f"{naming.what} {target} is {file_kind(found.st_mode)}, not a regular file:"
            f" {naming.instead}"
        )
    _refuse_a_link_out(target, naming, within)
    return Path(os.path.realpath(target)), Owner(
        stat.S_IMODE(found.st_mode), found.st_uid, found.st_gid
    )


def _refuse_a_link_out(target: Path, naming: Naming, within: Path) -> None:
    out = leads_out(target, within)
    if out is not None:
        raise naming.error(
            f"{naming.what} {target} is a symbolic link that leads out of {within} (to {out}):"
            f" replace the link with a file of its own, or {naming.instead}"
        )


def _through_proc(path: str) -> bool:
    """Whether ``path`` or a symbolic link on its way leads into /proc."""
    current = os.path.abspath(path)
    # Each turn follows one link; the last turn looks where the last link led.
    for _ in range(MOST_LINKS + 1):
        folder = os.path.realpath(os.path.dirname(current))
        if folder == "/proc" or folder.startswith("/proc/"):
            return True
        current = os.path.join(folder, os.path.basename(current))
        try:
            current = os.path.join(folder, os.readlink(current))
        except OSError:
            return False
    return False
