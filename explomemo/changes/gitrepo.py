"""Reading a root's git object store: blobs by id, tracked paths, a path's history, and the
repository's identity (its first root commit).

Only when the root is inside a git work tree, and only to read. git runs as
a subprocess with an argument list (no shell), a timeout and no standard
input, in an environment built from nothing but ``PATH``: no ``GIT_DIR``,
``GIT_WORK_TREE``, ``GIT_INDEX_FILE`` or any other ``GIT_*`` variable of
the caller's, no system or global configuration, no optional locks (a read
never writes the index), no replace objects nor grafts, no pager, no colour, no
protocol (so a partial clone cannot fetch), and the repository's own
settings that run a program in a read overridden on the command line
(``core.fsmonitor``, ``core.hooksPath``, ``log.showSignature``). The
commands used (``rev-parse``, ``rev-list``, ``merge-base --is-ancestor``,
``cat-file --batch``, ``ls-files -s``, ``log --raw``) neither apply filters
or textconv nor run hooks. git's own ``safe.directory`` check stays on: a
repository owned by another user is read only when the user's own git
configuration lists it there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from explomemo.errors import PathError
from explomemo.files import Root, resolve_root
from explomemo.projects import git_files_plain, head_commit

if TYPE_CHECKING:
    from explomemo.store.database import Store

#: Seconds one git command may take before it is stopped (its answer is then "unavailable").
GIT_TIMEOUT = 10.0
#: Commits of a path's history searched for a content recorded without a blob id.
HISTORY_DEPTH = 200

_BLOB_ID = re.compile(rb"[0-9a-f]{40}")
#: A commit id: SHA-1, or SHA-256 in a repository made with --object-format=sha256.
COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_NO_BLOB = "0" * 40
_SETTINGS = (
    "core.fsmonitor=false",
    "core.hooksPath=" + os.devnull,
    "core.untrackedCache=false",
    "log.showSignature=false",
    "protocol.allow=never",
    "color.ui=never",
    "core.pager=cat",
)
_FLAGS = ["--no-pager", "--no-replace-objects", "--literal-pathspecs"]


def _environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_ALLOW_PROTOCOL": "none",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_PAGER": "cat",
        # git 2.39 still reads .git/info/grafts, which gives commits other parents, and
        # --no-replace-objects leaves it on: a commit's roots must be its own.
        "GIT_GRAFT_FILE": os.devnull,
    }


#: The user's own safe.directory entries (read once, only when git refused a repository).
_trusted_folders: list[str] | None = None


def _user_safe_directories(git: str) -> list[str]:
    """The ``safe.directory`` values of the user's global and system git configuration.

    git honours them there (and only there); our commands ignore those files
    for everything else, so they are read on their own, outside any repository.
    """
    global _trusted_folders
    if _trusted_folders is None:
        import subprocess

        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        found: list[str] = []
        for scope in ("--system", "--global"):
            try:
                done = subprocess.run(
                    [git, "config", scope, "--get-all", "safe.directory"],
                    cwd="/",
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=GIT_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                continue
            found += done.stdout.decode("utf-8", "replace").splitlines()
        _trusted_folders = [value for value in found if value]
    return _trusted_folders


class GitRepo:
    """The git repository a root lies in, read through safe git commands."""

    def __init__(self, root: Root, git: str, settings: Sequence[str]) -> None:
        self.root = root
        self._git = git
        self._settings = list(settings)
        #: Whether the last command failed on git's safe.directory check.
        self._refused_as_unsafe = False

    @classmethod
    def at(cls, root: Root) -> GitRepo | None:
        """The repository whose work tree holds ``root``; None when there is none (or no git),
        or when a file git would open to find it is not a regular file (a FIFO there would
        hold git until its timeout; see :func:`~explomemo.projects.git_files_plain`)."""
        import shutil

        git = shutil.which("git")
        if git is None or not git_files_plain(root.real):
            return None
        repo = cls(root, git, _SETTINGS)
        answer = repo._run(["rev-parse", "--is-inside-work-tree"])
        if answer is None and repo._refused_as_unsafe:
            trusted = _user_safe_directories(git)
            if trusted:
                repo = cls(root, git, [*_SETTINGS, *(f"safe.directory={t}" for t in trusted)])
                answer = repo._run(["rev-parse", "--is-inside-work-tree"])
        return repo if answer is not None and answer.strip() == b"true" else None

    def _run(self, args: list[str], given: bytes | None = None) -> bytes | None:
        """git's standard output, or None when it failed, timed out or could not start."""
        # Imported here: a hook that finds an identity from git's files runs no git.
        import subprocess

        command = [self._git, *_FLAGS]
        for setting in self._settings:
            command += ["-c", setting]
        try:
            done = subprocess.run(
                [*command, *args],
                cwd=self.root.real,
                env=_environment(),
                input=given,
                stdin=None if given is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0:
            self._refused_as_unsafe = b"dubious ownership" in done.stderr
            return None
        return done.stdout

    def root_commit(self, known: tuple[str, str] | None = None) -> tuple[str, str] | None:
        """(HEAD's commit id, the repository's identity): its first root commit (``git
        rev-list --max-parents=0 HEAD``, the smallest id when history has several); None
        in a shallow clone (its cut-off commits look like roots) or without commits.

        The roots of a commit are fixed by its id (replace objects and grafts are off), so
        ``known``, a commit id and its first root commit as found before, answers for
        that commit at once, and when HEAD descends from it only the commits since are
        walked: a long history is walked once, not at every call.
        """
        out = (self._run(["rev-parse", "--is-shallow-repository", "HEAD"]) or b"").split()
        if len(out) != 2 or out[0] != b"false" or not COMMIT_ID.fullmatch(out[1].decode()):
            return None
        head = out[1].decode()
        if known is not None and not all(COMMIT_ID.fullmatch(i) for i in known):
            known = None
        if known is not None and known[0] == head:
            return head, known[1]
        walk = ["rev-list", "--max-parents=0", "HEAD"]
        roots: list[str] = []
        if (
            known is not None
            and self._run(["merge-base", "--is-ancestor", known[0], head]) is not None
        ):
            walk += ["--not", known[0]]
            roots.append(known[1])
        listed = self._run(walk)
        if listed is None:
            return None
        roots += [line for line in listed.decode().split() if COMMIT_ID.fullmatch(line)]
        return (head, min(roots)) if roots else None

    def blobs(self, ids: Iterable[str]) -> dict[str, bytes]:
        """The content of each blob the object store holds, by id (others are left out)."""
        wanted = sorted({i for i in ids if _BLOB_ID.fullmatch(i.encode())})
        if not wanted:
            return {}
        out = self._run(["cat-file", "--batch"], "".join(f"{i}\n" for i in wanted).encode())
        return {} if out is None else _parse_batch(out)

    def sizes(self, ids: Iterable[str]) -> dict[str, int]:
        """The size of each blob the object store holds, by id."""
        wanted = sorted({i for i in ids if _BLOB_ID.fullmatch(i.encode())})
        if not wanted:
            return {}
        out = self._run(["cat-file", "--batch-check"], "".join(f"{i}\n" for i in wanted).encode())
        found: dict[str, int] = {}
        for line in (out or b"").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == b"blob":
                found[parts[0].decode()] = int(parts[2])
        return found

    def tracked(self) -> dict[str, list[str]]:
        """Each blob id of the index under root, with its paths (relative to root, sorted)."""
        out = self._run(["ls-files", "--stage", "-z"])
        found: dict[str, list[str]] = {}
        for entry in (out or b"").split(b"\0"):
            head, _, path = entry.partition(b"\t")
            parts = head.split()
            if len(parts) == 3 and parts[2] == b"0":
                found.setdefault(parts[1].decode(), []).append(
                    path.decode("utf-8", "surrogateescape")
                )
        for paths in found.values():
            paths.sort()
        return found

    def find_contents(self, wanted: Sequence[tuple[str, str, int]]) -> dict[str, tuple[str, bytes]]:
        """(blob id, content) of each content recorded without a blob id, by SHA-256.

        ``wanted`` holds (path, SHA-256, size). Searched among the blobs the
        paths held in the index and in the last :data:`HISTORY_DEPTH` commits
        per path (one ``git log`` for all the paths) of any branch: those of a
        recorded size are read, and the ones with a recorded SHA-256 are they.
        Four git commands however many paths.
        """
        if not wanted:
            return {}
        paths = sorted({path for path, _, _ in wanted})
        candidates: list[str] = []
        staged = self._run(["ls-files", "--stage", "-z", "--", *paths]) or b""
        for entry in staged.split(b"\0"):
            candidates += [m.decode() for m in _BLOB_ID.findall(entry.split(b"\t")[0])]
        log = self._run(
            [
                "log",
                "--all",
                "--format=",
                "--raw",
                "--no-abbrev",
                "--no-renames",
                "--no-textconv",
                "--no-ext-diff",
                f"-n{HISTORY_DEPTH * len(paths)}",
                "--",
                *paths,
            ]
        )
        for line in (log or b"").splitlines():
            if line.startswith(b":"):
                fields = line.split(b"\t", 1)[0].split()
                candidates += [f.decode() for f in fields[2:4] if _BLOB_ID.fullmatch(f)]
        ordered = [c for c in dict.fromkeys(candidates) if c != _NO_BLOB]
        sizes = {size for _, _, size in wanted}
        sha256s = {sha256 for _, sha256, _ in wanted}
        import hashlib  # only here: the hooks import this module to find an identity

        found: dict[str, tuple[str, bytes]] = {}
        sized = [i for i, n in self.sizes(ordered).items() if n in sizes]
        for blob_id, data in self.blobs(sized).items():
            digest = hashlib.sha256(data).hexdigest()
            if digest in sha256s:
                found[digest] = (blob_id, data)
        return found


#: Each root's repository identity, by the path asked and by real path, once per process.
_identities: dict[str, str | None] = {}


def repository_identity(root: str, store: Store | None = None) -> str | None:
    """The identity of the repository whose work tree holds the folder ``root`` (see
    :meth:`GitRepo.root_commit`); None outside git, where git is missing or refuses the
    repository, or when ``root`` is not an existing folder. Found once per root a process;
    with a ``store``, the commit and identity found last under the root are kept there, so
    a new process (a hook) walks no history already walked."""
    if root in _identities:
        return _identities[root]
    try:
        where = resolve_root(root)
    except PathError:
        return None
    if where.real not in _identities:
        _identities[where.real] = _identity_at(where, store)
    _identities[root] = _identities[where.real]
    return _identities[root]


def _identity_at(where: Root, store: Store | None) -> str | None:
    known = None
    if store is not None:
        with store.errors(), store.read() as conn:
            known = store.known_head(conn, where.real)
    valid = known is not None and all(COMMIT_ID.fullmatch(i) for i in known)
    if known is not None and valid and head_commit(where.real) == known[0]:
        return known[1]  # HEAD has not moved since: no git at all
    repo = GitRepo.at(where)
    if repo is None:
        return None
    found = repo.root_commit(known)
    if found is None:
        return None
    if store is not None and found != known:
        store.write_cache(lambda conn: store.save_head(conn, where.real, *found))
    return found[1]


def _parse_batch(out: bytes) -> dict[str, bytes]:
    """The blobs of a ``git cat-file --batch`` answer, by id."""
    found: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        end = out.find(b"\n", at)
        if end < 0:
            break
        parts = out[at:end].split()
        at = end + 1
        if len(parts) != 3:
            continue  # "<id> missing"
        size = int(parts[2])
        if parts[1] == b"blob":
            found[parts[0].decode()] = out[at : at + size]
        at += size + 1
    return found
