"""Files inside a root: resolving the paths an agent names, and opening them safely.

Paths come from a model that can be wrong or manipulated. A path is accepted
only when it leads inside root: a relative path stays inside lexically (no
``..`` out of it), an absolute one is inside root as given or once its folder
is resolved (root may have been reached through a symbolic link, as a shell's
``$PWD`` often is), and every symbolic link on the way, resolved, stays inside
root. Opening walks the resolved path one
component at a time from a descriptor of root with ``O_NOFOLLOW``, so a file
or folder swapped for a link after the check is never followed; anything that
is not a regular file is refused from its ``lstat`` before it is opened, and
``O_NONBLOCK`` keeps even a FIFO swapped in at the last moment from hanging.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from explomemo.errors import PathError

MAX_ROOT_CHARS = 1024
#: Longest path relative to root a memo keeps (an export carries no longer one).
MAX_PATH_CHARS = 4096

_OPEN_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Root(NamedTuple):
    """A project root: the absolute path as given and its real path."""

    path: str
    real: str

    def absolute(self, rel: str) -> str:
        """The absolute path of a stored relative path, under the real root."""
        return self.real + "/" + rel if self.real != "/" else "/" + rel


def check_text_path(value: str, what: str, fix: str = "rename the file") -> None:
    """Refuse NUL bytes and names that are not valid UTF-8 (lone surrogates); ``fix`` ends
    the refusal of a name that is not UTF-8."""
    if "\x00" in value:
        raise PathError(f"{what} {value!r} contains a NUL byte: pass a real file path")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PathError(
            f"{what} '{_escaped(value)}' is not valid UTF-8: explomemo stores paths as UTF-8; {fix}"
        ) from None


def _escaped(value: str) -> str:
    """A path that is not UTF-8 with each byte of it that UTF-8 cannot read as ``\\xff``."""
    try:
        # A name read from the file system carries its bytes as surrogate escapes.
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode()
    return raw.decode("utf-8", "backslashreplace")


def working_directory() -> str:
    """The current directory as the user reached it: ``$PWD`` when it names it, as
    ``pwd -L`` does (an absolute path without ``.`` or ``..`` parts that is the same
    directory), else the physical path ``os.getcwd()`` gives."""
    physical = os.getcwd()
    logical = os.environ.get("PWD", "")
    if not os.path.isabs(logical) or {".", ".."} & set(logical.split("/")):
        return physical
    try:
        logical.encode("utf-8")
        if os.path.samestat(os.stat(logical), os.stat(physical)):
            return logical
    except (OSError, UnicodeEncodeError):
        pass
    return physical


def resolve_root(root: str | None) -> Root:
    """Check a root (absolute, existing directory) and resolve it; None is the
    working directory (:func:`working_directory`)."""
    if root is None:
        given = working_directory()
        check_text_path(
            given,
            "the working directory",
            "pass a root whose path is UTF-8 (--root), or work from such a folder",
        )
        if len(given) > MAX_ROOT_CHARS:
            raise PathError(
                f"the working directory is {len(given)} characters long, over the limit of"
                f" {MAX_ROOT_CHARS} for a root: pass a shorter root, or work from a shorter path"
            )
    else:
        check_text_path(root, "root", "pass a root whose path is UTF-8")
        if len(root) > MAX_ROOT_CHARS:
            raise PathError(
                f"root is {len(root)} characters long, over the limit of {MAX_ROOT_CHARS}:"
                " pass a shorter absolute directory"
            )
        if not root:
            raise PathError("root is empty: pass an absolute directory, or leave it out")
        if not os.path.isabs(root):
            raise PathError(f"root {root!r} is not an absolute path: pass an absolute directory")
        given = root
    given = os.path.normpath(given)
    try:
        real = os.path.realpath(given)
    except OSError as exc:
        raise PathError(
            f"root {given!r} cannot be resolved ({exc.strerror}): pass an existing directory"
        ) from exc
    if not os.path.exists(given):
        raise PathError(f"root {given!r} does not exist: pass an existing directory")
    if not os.path.isdir(given):
        raise PathError(f"root {given!r} is not a directory: pass the project's directory")
    return Root(path=given, real=real)


def relative_path(root: Root, given: str, what: str) -> str:
    """The normalised root-relative ``/`` path of ``given``, refusing any way out of root."""
    check_text_path(given, what)
    if not given:
        raise PathError(f"{what} is empty: pass a file path relative to root")
    if os.path.isabs(given):
        candidate = os.path.normpath(given)
        if _inside(candidate, root.path):
            lexical = os.path.relpath(candidate, root.path)
        elif _inside(candidate, root.real):
            lexical = os.path.relpath(candidate, root.real)
        else:
            # Reached another way (through a link to root or to a folder in
            # it): where its folder really is decides. A link at the file
            # itself is checked below like any other.
            folder = os.path.realpath(os.path.dirname(candidate))
            real_candidate = os.path.join(folder, os.path.basename(candidate))
            lexical = os.path.relpath(real_candidate, root.real)
    else:
        lexical = os.path.normpath(given)
    if lexical == ".":
        raise PathError(
            f"{what} {given!r} is root {root.path!r} itself, a folder: pass the files in it"
            " that the conclusion rests on"
        )
    if lexical == ".." or lexical.startswith("../") or os.path.isabs(lexical):
        raise PathError(
            f"{what} {given!r} is outside root {root.path!r}: record only files inside root,"
            " or pass a root that contains them"
        )
    if given.endswith(("/", "/.")):
        # The system refuses to open "README/" (ENOTDIR): the path names a folder,
        # whatever normalising it would make of it.
        raise PathError(
            f"{what} {given!r} ends with '/', so it names a folder, not a file: pass the"
            " path of a file, without the '/'"
        )
    if len(lexical) > MAX_PATH_CHARS:
        raise PathError(
            f"{what} is {len(lexical):,} characters long relative to root, over {MAX_PATH_CHARS:,}:"
            " record files with shorter paths, or pass a root nearer to them"
        )
    try:
        real = os.path.realpath(os.path.join(root.real, lexical))
    except OSError as exc:
        raise PathError(
            f"{what} {given!r} cannot be resolved ({exc.strerror}): pass a file that exists"
            " inside root and is not being replaced"
        ) from exc
    if not _inside(real, root.real) or real == root.real:
        raise PathError(
            f"{what} {given!r} leads outside root {root.path!r} through a symbolic link:"
            " record the file it points to inside root, or pass a root that contains it"
        )
    return lexical.replace(os.sep, "/")


def _inside(path: str, folder: str) -> bool:
    if folder == "/":
        return path.startswith("/")
    return path == folder or path.startswith(folder + "/")


def _absent(exc: OSError) -> str:
    """Why a file's ``lstat`` failed: it is not there, or it cannot be looked at."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"does not exist ({exc.strerror})"
    return f"cannot be examined ({exc.strerror})"


class Refused(Exception):
    """An open that must not happen; ``reason`` says why, for a message or a state."""

    def __init__(self, reason: str, missing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing = missing


def file_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, for a message: "a directory", "a FIFO"..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def open_regular(root: Root, rel: str) -> int:
    """Open ``rel`` under root for reading without following any link; returns a descriptor.

    Raises :class:`Refused` when the file is missing, leaves root, or is not a
    regular file. Nothing but a regular file inside root is ever opened.
    """
    try:
        real = os.path.realpath(os.path.join(root.real, rel))
    except OSError as exc:
        raise Refused(f"cannot be resolved ({exc.strerror})", missing=True) from exc
    if not _inside(real, root.real) or real == root.real:
        raise Refused("leads outside root through a symbolic link")
    parts = os.path.relpath(real, root.real).split(os.sep)
    try:
        dir_fd = os.open(root.real, _DIR_FLAGS)
    except OSError as exc:
        raise Refused(f"root cannot be opened ({exc.strerror})", missing=True) from exc
    try:
        for part in parts[:-1]:
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise Refused(
                    f"a folder on the way cannot be opened ({exc.strerror})", missing=True
                ) from exc
            os.close(dir_fd)
            dir_fd = next_fd
        name = parts[-1]
        try:
            before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise Refused(_absent(exc), missing=True) from exc
        if not stat.S_ISREG(before.st_mode):
            raise Refused(f"is {file_kind(before.st_mode)}, not a regular file")
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise Refused(f"cannot be opened ({exc.strerror})", missing=True) from exc
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            os.close(fd)
            raise Refused("was replaced while it was being opened")
        return fd
    finally:
        os.close(dir_fd)


#: What opening a folder fails with when it is a symbolic link or not a folder:
#: ELOOP on Linux, EMLINK on FreeBSD, ENOTDIR. The strict walk then hands the
#: file to :func:`open_regular`, which follows a link only when it stays in root.
_LINK_ERRORS = frozenset(
    code for code in (errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", None)) if code
)
#: A folder the strict walk cannot take: its files go through open_regular.
_FALL_BACK = -1
#: A folder that cannot be opened at all (missing, no permission): its files are refused.
_REFUSED = -2


class Opener:
    """Opens regular files under one root for one check, keeping each folder open.

    The same guarantees as :func:`open_regular`, at a fraction of its cost per
    file: each folder is opened once, component by component from a
    descriptor of root with ``O_NOFOLLOW | O_DIRECTORY`` (so no link is ever
    followed), and each file is ``lstat``-ed (anything but a regular file is
    refused unopened), opened with ``O_NOFOLLOW | O_NONBLOCK`` against its
    folder and checked by ``fstat`` to be the file that was looked at. A path
    the strict walk cannot take (a folder or the file itself is a symbolic
    link, which is allowed while it stays inside root, or a component such
    as ``.``) goes through :func:`open_regular`, which resolves it and
    refuses it when it leads out of root.

    One Opener serves one thread for one check; :meth:`close` closes every
    folder it holds.
    """

    def __init__(self, root: Root) -> None:
        self.root = root
        # Root-relative folder ("" is root) -> its descriptor, _FALL_BACK or _REFUSED.
        self._dirs: dict[str, int] = {}
        # Why each _REFUSED folder cannot be opened.
        self._reasons: dict[str, str] = {}

    def close(self) -> None:
        """Close every folder descriptor held."""
        dirs, self._dirs = self._dirs, {}
        for fd in dirs.values():
            if fd >= 0:
                os.close(fd)

    def __enter__(self) -> Opener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, rel: str) -> tuple[int, os.stat_result]:
        """Open ``rel`` as :func:`open_regular` does; the descriptor and its ``fstat``.

        Raises :class:`Refused` when the file is missing, leaves root, or is
        not a regular file.
        """
        folder, _, name = rel.rpartition("/")
        if name in ("", ".", "..") or rel[0] == "/":
            return _fall_back(self.root, rel)
        dir_fd = self._dirs.get(folder)
        if dir_fd is None:
            dir_fd = self._open_folder(folder)
        if dir_fd < 0:
            if dir_fd == _REFUSED:
                raise Refused(self._reasons[folder], missing=True)
            return _fall_back(self.root, rel)
        try:
            before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except ValueError:
            return _fall_back(self.root, rel)
        except OSError as exc:
            raise Refused(_absent(exc), missing=True) from exc
        mode = before.st_mode
        if not stat.S_ISREG(mode):
            if stat.S_ISLNK(mode):
                # A link to a file inside root is allowed: open_regular resolves it.
                return _fall_back(self.root, rel)
            raise Refused(f"is {file_kind(mode)}, not a regular file")
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise Refused(f"cannot be opened ({exc.strerror})", missing=True) from exc
        try:
            opened = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if (
            opened.st_ino != before.st_ino
            or opened.st_dev != before.st_dev
            or not stat.S_ISREG(opened.st_mode)
        ):
            os.close(fd)
            raise Refused("was replaced while it was being opened")
        return fd, opened

    def _open_folder(self, folder: str) -> int:
        """Open a root-relative folder strictly and remember the outcome."""
        found = _REFUSED
        if not folder:
            try:
                found = os.open(self.root.real, _DIR_FLAGS)
            except OSError as exc:
                self._reasons[folder] = f"root cannot be opened ({exc.strerror})"
            except ValueError:
                found = _FALL_BACK
            self._dirs[folder] = found
            return found
        parent, _, name = folder.rpartition("/")
        parent_fd = self._dirs.get(parent)
        if parent_fd is None:
            parent_fd = self._open_folder(parent)
        if parent_fd == _REFUSED:
            self._reasons[folder] = self._reasons[parent]
        elif parent_fd == _FALL_BACK or name in ("", ".", ".."):
            found = _FALL_BACK
        else:
            try:
                found = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRORS:
                    # A link (allowed while it stays inside root) or a file in
                    # the folder's place: open_regular decides for each file.
                    found = _FALL_BACK
                else:
                    self._reasons[folder] = f"a folder on the way cannot be opened ({exc.strerror})"
            except ValueError:
                found = _FALL_BACK
        self._dirs[folder] = found
        return found


def _fall_back(root: Root, rel: str) -> tuple[int, os.stat_result]:
    fd = open_regular(root, rel)
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
