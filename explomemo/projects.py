"""Project identity: which project a call belongs to when it names none.

An explicit project wins; then ``EXPLOMEMO_PROJECT``; then the folder name of
the repository's main work tree, found through git's common directory, so
every linked worktree of a repository and every clone in a folder of that
name share one project; then the name of the root folder itself.

A name is not an identity: :class:`Caller` holds the rule that leaves out the
memos of another repository of the same name (the identity itself, a
repository's first root commit, is git's to say: see
:func:`explomemo.changes.gitrepo.repository_identity`).

Git is not run: the ``.git`` entry at or above the root is read directly (a
folder in a main work tree; a ``gitdir:`` file in a linked worktree, whose
git directory holds a ``commondir`` file naming the shared one). Only
regular files are opened, non-blocking and at most a few kilobytes, so a
FIFO or a huge file named ``.git`` cannot hang or slow a hook.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

from explomemo import inputs
from explomemo.errors import InputError

ENV = "EXPLOMEMO_PROJECT"
#: How far above the root a ``.git`` entry is looked for.
_MAX_LEVELS = 64
#: ``.git`` and ``commondir`` files are one line; anything longer is not one of them.
_MAX_POINTER_BYTES = 4096


class Caller:
    """Who asks for memos: the project a call works on and the identity of the repository it
    works in, found by ``identity`` only when a memo has one to compare (at most once).

    ``project`` None (no name could be derived) leaves nothing out.
    """

    def __init__(self, project: str | None, identity: Callable[[], str | None]) -> None:
        self.project = project
        self._identity = identity
        self._found: list[str | None] = []

    def identity(self) -> str | None:
        """The caller's repository identity (None: unknown)."""
        if not self._found:
            self._found.append(self._identity())
        return self._found[0]

    def leaves_out(self, project: str, repository: str | None) -> bool:
        """Whether a memo of ``project`` recorded in ``repository`` belongs to another
        repository of the caller's project name: the names are equal and both identities
        known and different. A memo without an identity (recorded outside git, in a
        shallow clone, or before identities were kept) matches any."""
        if repository is None or project != self.project:
            return False
        here = self.identity()
        return here is not None and here != repository


def project_name(value: str, what: str = "project") -> str:
    """A project name as given (``--project``, a tool's ``project``, ``$EXPLOMEMO_PROJECT``),
    trimmed and checked; ``what`` names it in a refusal.

    Trimmed as questions are: a stray space from an agent or a configuration
    file must not quietly start a second project.
    """
    return inputs.check_text(
        what, value.strip() if isinstance(value, str) else value, inputs.MAX_PROJECT
    )


def resolve_project(project: str | None, root: str) -> str:
    """The project a call works on: ``project`` when given, else :func:`default_project`."""
    if project is not None:
        return project_name(project)
    return default_project(root)


def default_project(root: str) -> str:
    """``$EXPLOMEMO_PROJECT``, else the main work tree's folder name, else ``root``'s name.

    Names come from real paths: a root reached through a symbolic link (as a
    server's ``$PWD`` or a hook's ``cwd`` may be) is the project of the
    folder the link leads to.
    """
    from_env = os.environ.get(ENV, "")
    if from_env.strip():
        return project_name(from_env, ENV)
    real = os.path.realpath(root)
    main = main_work_tree(real)
    name = _folder_name(os.path.realpath(main) if main is not None else real)
    if not name:
        raise InputError(
            f"no project name can be derived from root {root!r}: pass project, or set {ENV}"
        )
    return name


def work_tree_top(start: str) -> str | None:
    """The work tree holding ``start`` (the folder with the ``.git`` entry), or None."""
    found = _find_git_entry(os.path.abspath(start))
    return None if found is None else os.path.dirname(found)


def main_work_tree(start: str) -> str | None:
    """The main work tree of the repository holding ``start`` (by path), or None outside one.

    For a bare repository's worktrees, whose common directory has no work
    tree, this is the common directory with a ``.git`` suffix taken off
    (``api.git`` names the project ``api``).
    """
    entry = _find_git_entry(os.path.abspath(start))
    if entry is None:
        return None
    if os.path.isdir(entry):
        return os.path.dirname(entry)
    git_dir = _pointer(entry, "gitdir:")
    if git_dir is None:
        return None
    git_dir = os.path.normpath(os.path.join(os.path.dirname(entry), git_dir))
    common = _pointer(os.path.join(git_dir, "commondir"), "")
    if common is None:
        # A submodule or a --separate-git-dir checkout: its own main work tree.
        return os.path.dirname(entry)
    common = os.path.normpath(os.path.join(git_dir, common))
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    return common.removesuffix(".git") if common.endswith(".git") else common


def git_files_plain(start: str) -> bool:
    """Whether the files git opens to find the repository holding ``start`` are regular
    files (or folders): for a ``.git`` folder, or the git directory a ``.git`` file names,
    and for the common directory its ``commondir`` names, their ``commondir``, ``HEAD``
    and ``config``. git opens them as it starts: a FIFO among them holds it until its
    timeout. True outside a repository, where git finds nothing to open.
    """
    found = _git_dirs(start)
    if found is None:
        return True  # none, or not a git directory: git refuses it without waiting
    git_dir, common = found
    for folder in [git_dir] if common is None else [git_dir, common]:
        for name in ("commondir", "HEAD", "config"):
            try:
                mode = os.stat(os.path.join(folder, name)).st_mode
            except (OSError, ValueError):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return False
    return True


#: A commit id as git writes it in HEAD and ref files (SHA-1 or SHA-256).
_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: A branch name read from HEAD that is looked up as a plain file of the git directory.
_BRANCH = re.compile(r"refs/heads/(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+")


def head_commit(start: str) -> str | None:
    """The commit HEAD points to in the repository holding ``start``, read from git's files
    without running git: a detached HEAD, or a branch of a plain ref file; None whenever
    it is not that simple (a packed or reftable ref, a shallow clone, an unborn branch,
    outside git), for git itself to say.

    Only the ``.git`` entry, ``HEAD``, ``commondir``, ``shallow`` and that branch's file
    inside the git directories are looked at, each a small regular file opened
    non-blocking (see :func:`_pointer`); a branch name with ``..`` is not looked up.
    """
    found = _git_dirs(start)
    if found is None:
        return None
    git_dir, common = found
    common_dir = git_dir if common is None else common
    if os.path.lexists(os.path.join(common_dir, "shallow")):
        return None
    head = _pointer(os.path.join(git_dir, "HEAD"), "")
    if head is not None and head.startswith("ref:"):
        branch = head[len("ref:") :].strip()
        if not _BRANCH.fullmatch(branch) or ".." in branch:
            return None
        head = _pointer(os.path.join(common_dir, *branch.split("/")), "")
    return head if head is not None and _COMMIT.fullmatch(head) else None


def _git_dirs(start: str) -> tuple[str, str | None] | None:
    """The git directory git finds for ``start`` (a ``.git`` folder, or the one a ``.git``
    file names) and the common directory its ``commondir`` names (None without one); None
    outside git, or when the ``.git`` file names no git directory."""
    entry = _find_git_entry(os.path.abspath(start))
    if entry is None:
        return None
    git_dir = entry
    if not os.path.isdir(entry):
        pointer = _pointer(entry, "gitdir:")
        if pointer is None:
            return None
        # Resolved as the system resolves it (a ".." after a link leaves the link's
        # target), not lexically: the files looked at must be those git opens.
        git_dir = os.path.realpath(os.path.join(os.path.dirname(entry), pointer))
    common = _pointer(os.path.join(git_dir, "commondir"), "")
    return git_dir, None if common is None else os.path.realpath(os.path.join(git_dir, common))


def _find_git_entry(path: str) -> str | None:
    for _ in range(_MAX_LEVELS):
        candidate = os.path.join(path, ".git")
        try:
            mode = os.stat(candidate).st_mode
        except (OSError, ValueError):
            mode = 0
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            return candidate
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None


def _pointer(path: str, prefix: str) -> str | None:
    """The one-line content of a small regular file after ``prefix``, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_POINTER_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_POINTER_BYTES:
        return None
    lines = os.fsdecode(data).splitlines()
    if not lines or not lines[0].startswith(prefix):
        return None
    value = lines[0][len(prefix) :].strip()
    return value or None


def _folder_name(path: str) -> str:
    """A folder's name as a valid project name (non-UTF-8 bytes replaced, at most 200 chars)."""
    name = os.path.basename(os.path.normpath(path))
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return name[: inputs.MAX_PROJECT]
