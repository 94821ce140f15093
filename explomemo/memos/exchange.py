"""Export and import: memos as deterministic JSON Lines, and stale checks of an export.

An export is one memo a line, sorted by project then id, keys in a fixed
order, so the same memos always give the same bytes and a file committed to a
repository diffs cleanly. It carries each file's SHA-256 and xxh3-128, so a CI
job can check it (``explomemo stale --from``) with no database at all, and
its git blob id, so the job can show what changed from git history. It holds
no absolute root: a committed export must not carry a developer's paths.
Instead, a memo recorded inside a git work tree carries its root relative to
that work tree's top (``root_in_repo``), and checking or importing puts it
under the top of the work tree being checked: memos recorded from different
folders of one repository check from anywhere in a clone. A memo recorded in a
repository carries its identity (``repository``, the first root commit): another
repository of the same name neither checks nor imports it as its own.
Exports of earlier versions (with ``root``, without blob ids) are still read.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explomemo import inputs
from explomemo.atomic import Naming, leads_out, replace_file
from explomemo.check.stale import check_memos
from explomemo.check.validity import Progress, Validator
from explomemo.errors import ExportFileError, InputError, NotFoundError, PathError
from explomemo.files import (
    MAX_PATH_CHARS,
    MAX_ROOT_CHARS,
    Root,
    check_text_path,
    resolve_root,
)
from explomemo.inputs import AGENT, ORIGINS
from explomemo.memos.cache import MemoCache, caller, left_no_memo, require_project
from explomemo.printable import json_text
from explomemo.projects import work_tree_top
from explomemo.shapes import (
    CheckedFile,
    ExportedFile,
    ExportedMemo,
    ImportResult,
    StaleReport,
    to_dict,
)
from explomemo.store.database import MAX_ID, FileRow, MemoRow

if TYPE_CHECKING:
    from explomemo.changes.diffs import Limits


def export_memos(
    cache: MemoCache, project: str | None = None, origin: str | None = None
) -> Iterator[str]:
    """The export's lines (without newlines), sorted by project then id (see
    :func:`exported_memos`)."""
    return (export_line(memo) for memo in exported_memos(cache, project, origin))


def exported_memos(
    cache: MemoCache, project: str | None = None, origin: str | None = None
) -> Iterator[ExportedMemo]:
    """The export's memos (of one ``origin``, when given), sorted by project then id; each
    line of the file is :func:`export_line` of one. Their question and conclusion are
    written as :func:`~explomemo.inputs.cleaned` makes them, so ``import`` reads them.

    A project named but without memos is refused: a misspelt name must not
    empty a committed export. So is a memo whose question or conclusion holds a secret
    (see :mod:`explomemo.redaction`), before any memo is given: an export is meant to be
    committed."""
    if project is not None:
        inputs.check_text("project", project, inputs.MAX_PROJECT)
    if origin is not None:
        origin = inputs.check_origin(origin)
    store = cache.store
    with store.errors(), store.read() as conn:
        memos = store.memos(conn, project=project)
        cache.require_project(conn, project, memos)
        files = store.all_files(conn, project)
    chosen = [memo for memo in memos if origin is None or memo.origin == origin]
    _refuse_secrets(chosen)
    in_repo: dict[str, str | None] = {}
    for memo in chosen:
        if memo.root not in in_repo:
            in_repo[memo.root] = root_in_repo(memo.root)
        exported = ExportedMemo(
            id=memo.id,
            project=memo.project,
            # Written as import reads them: a capture stored before the input rule held
            # for captures may hold a NUL, which import refuses.
            question=inputs.cleaned(memo.question),
            conclusion=inputs.cleaned(memo.conclusion),
            root_in_repo=in_repo[memo.root],
            recorded_at=memo.recorded_at,
            origin=inputs.check_origin(memo.origin),
            agent_type=memo.agent_type,
            cost_tokens=memo.cost_tokens,
            files=[
                ExportedFile(
                    path=f.path, sha256=f.sha256, xxh3=f.xxh3, size=f.size, git_blob=f.git_blob
                )
                for f in files.get(memo.id, [])
            ],
            repository=memo.repository,
        )
        yield exported


def _refuse_secrets(memos: Iterable[MemoRow]) -> None:
    """Refuse to export memos whose text holds a secret, naming each."""
    from explomemo.redaction import secrets_in

    named: dict[int, list[str]] = {}
    for memo in memos:
        found = [
            f"{kind} in its {field}"
            for field, text in (("question", memo.question), ("conclusion", memo.conclusion))
            for kind in secrets_in(text)
        ]
        if found:
            named[memo.id] = found
    if not named:
        return
    first, found = next(iter(named.items()))
    what = ", ".join(found)
    held = (
        f"memo {first} holds a secret ({what})"
        if len(named) == 1
        else f"memos {', '.join(map(str, named))} hold secrets (memo {first}: {what})"
    )
    raise InputError(
        f"{held}, and an export is meant to be committed: nothing was exported; run"
        " `explomemo scrub` to redact the secrets in the database, or `explomemo forget"
        f" {first}`"
    )


def export_line(memo: ExportedMemo) -> str:
    """One line of an export (without its newline): keys in a fixed order, ``origin`` only
    for a captured memo (see :class:`~explomemo.shapes.ExportedMemo`)."""
    # Characters some readers take for line ends (U+2028, U+2029, U+0085)
    # or a terminal for commands (C1, DEL) are written as \u escapes.
    return json_text(json.dumps(to_dict(memo), ensure_ascii=False, separators=(",", ":")))


def root_in_repo(root: str) -> str | None:
    """``root`` relative to the top of the git work tree that holds it (``/``
    separators), or None when it is the top or outside a work tree.

    The top is the folder with the ``.git`` entry (see
    :func:`~explomemo.projects.work_tree_top`), found from the real path, as
    :func:`checking_base` finds it where the export is checked. None for the
    top keeps such memos' lines as earlier versions wrote them (checked against
    the checking root, which a CI job runs at the top), so a committed export
    does not change on upgrade and imports at the top export the same bytes.
    """
    real = os.path.realpath(root)
    top = work_tree_top(real)
    if top is None or real == top:
        return None
    return Path(os.path.relpath(real, top)).as_posix()


def checking_base(where: Root) -> Root:
    """What an export's ``root_in_repo`` is relative to when checked or imported at
    ``where``: the top of the git work tree holding it, else ``where`` itself."""
    top = work_tree_top(where.real)
    return where if top is None else Root(path=top, real=top)


def _memo_root_path(memo: ExportedMemo, base: Root) -> str:
    """Where ``memo`` (with a ``root_in_repo``) lies under ``base``, refusing a
    folder that leads out of it through a symbolic link."""
    assert memo.root_in_repo is not None
    if memo.root_in_repo == ".":
        return base.path
    path = os.path.join(base.path, memo.root_in_repo)
    real = os.path.realpath(path)
    if real != base.real and not real.startswith(base.real.rstrip("/") + "/"):
        raise ExportFileError(
            f"memo {memo.id} of project {memo.project!r} has root_in_repo"
            f" {memo.root_in_repo!r}, which leads out of {base.path} through a symbolic link:"
            " remove the link, or check the export from a clone without it"
        )
    return path


def _memo_roots(memos: Iterable[ExportedMemo], root: str | None) -> dict[int, Root | None]:
    """The root each memo is checked against, by id: with a ``root_in_repo``, that
    folder under :func:`checking_base` (None when it does not exist); else ``root``
    (default: the current directory)."""
    where = resolve_root(root)
    base: Root | None = None
    found: dict[str, Root | None] = {}
    roots: dict[int, Root | None] = {}
    for memo in memos:
        if memo.root_in_repo is None:
            roots[memo.id] = where
            continue
        if base is None:
            base = checking_base(where)
        path = _memo_root_path(memo, base)
        if path not in found:
            try:
                found[path] = resolve_root(path)
            except PathError:
                found[path] = None  # a folder this checkout lacks: its files are missing
        roots[memo.id] = found[path]
    return roots


def write_export(target: Path, text: str) -> None:
    """Write an export to the file ``target``.

    A failed write (a full disk, a file size limit) is an error, never a
    silent half export. A file is replaced whole or not at all (written next
    to it, then renamed over it) and keeps its permissions; a symbolic link
    is written through (the file it leads to is replaced, the link stays)
    only while it leads inside :func:`export_folder`.
    Anything that is not a regular file (a device, a FIFO, ``/dev/stdout``
    when standard output is not a file) is refused.
    """
    replace_file(target, text.encode("utf-8"), _EXPORT_FILE, within=export_folder(target))


def export_folder(target: Path) -> Path:
    """The folder an export file must stay in: the git work tree (outside git, the folder)
    that holds the first symbolic link on its path leading out of the work tree or folder
    holding that link; with no such link, the one holding the file.

    A repository can commit links (``.explomemo`` leading to the user's home), and a
    link of the user's own above the work tree (``/home`` leading to ``/var/home``) is
    none of its business: each link on the path is judged by where it stands. ``..``
    is taken after the link before it, as the system takes it.
    """
    current = Path("/")
    for part in (Path(os.getcwd()) / target).parts[1:]:
        if part == "..":
            current = current.parent
            continue
        step = current / part
        if not step.is_symlink():
            current = step
            continue
        holder = Path(work_tree_top(str(current)) or current)
        reached = Path(os.path.realpath(step))
        if leads_out(reached, holder) is not None:
            return holder
        current = reached
    return Path(work_tree_top(str(current.parent)) or current.parent)


_EXPORT_FILE = Naming(
    error=ExportFileError,
    what="export file",
    instead="pass the path of a regular file you can write with -o, or -o - for standard output",
)


def read_export(
    path: Path, skipped: list[str] | None = None, latest: str | None = None
) -> list[ExportedMemo]:
    """Parse an export file: its memos, in file order.

    Every rule ``record`` enforces holds for each line (lengths, no NUL nor lone
    surrogate, at most 64 distinct files inside root, 64-hex SHA-256, 40-hex git blob
    ids, sizes up to 32 MiB, ids a database can hold), and each refusal names the line
    and the field. ``root`` (exports of earlier versions) and ``git_blob`` may be left
    out. With ``latest`` (a UTC time written as ``recorded_at`` is), a memo recorded
    after it is refused too: a date in the future would win every "newer wins" merge.

    A bad line (one that is not UTF-8 or JSON, breaks a rule, repeats an id, or comes
    from a later explomemo) refuses the whole file, unless ``skipped`` is given: then
    the line is left out, its warning (naming the line and what is wrong) is appended
    to ``skipped``, and the other lines are read, so that one bad memo never leaves a
    team's import or CI gate unable to read the rest; a file of which no line can be
    read is refused at its first bad line either way. Lines end at ``\n`` only: a
    memo's text may hold any other line separator. Only a regular file is read, so
    ``/dev/zero`` or a FIFO cannot hang it or grow without bound.
    """
    raw = _read_regular(path)
    memos: list[ExportedMemo] = []
    ids: set[int] = set()
    refusals: list[str] = []
    # A byte-order mark is not JSON, but editors on Windows add one: it is ignored.
    for number, data in enumerate(raw.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problem = f"is not UTF-8 text (byte {exc.start} of the line)"
        else:
            if not line.strip():
                continue
            try:
                memo = _parse_line(line, latest)
            except _BadLine as exc:
                problem = f"is not an explomemo memo ({exc})"
            else:
                if memo.id not in ids:
                    ids.add(memo.id)
                    memos.append(memo)
                    continue
                problem = f"repeats memo id {memo.id}: each memo of an export has its own id;"
        refusal = f"line {number} of {path} {problem}"
        if skipped is None:
            raise ExportFileError(_refused(refusal))
        refusals.append(refusal)
    if refusals and not memos:
        # Nothing else to go on with: the file is not an export (or not one of ours).
        raise ExportFileError(_refused(refusals[0]))
    if skipped is not None:
        skipped.extend(f"{r.rstrip(';')}; it was skipped: {_FIX}" for r in refusals)
    return memos


_FIX = "regenerate the file with explomemo export"


def _refused(refusal: str) -> str:
    return f"{refusal}{' ' if refusal.endswith(';') else ': '}{_FIX}"


#: How far in the future an imported memo's ``recorded_at`` may be (clocks of teammates'
#: machines drift); past it the line is refused.
CLOCK_SKEW_SECONDS = 300


def read_for_import(path: Path, skipped: list[str]) -> list[ExportedMemo]:
    """:func:`read_export` as ``import`` reads a file: bad lines skipped into ``skipped``,
    and a memo recorded after now (give or take :data:`CLOCK_SKEW_SECONDS`) is one."""
    from datetime import UTC, timedelta

    latest = datetime.now(UTC) + timedelta(seconds=CLOCK_SKEW_SECONDS)
    return read_export(path, skipped, latest.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _read_regular(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ExportFileError(
            f"export file {path} does not exist: create it with explomemo export -o {path}"
        ) from None
    except OSError as exc:
        raise ExportFileError(
            f"cannot read export file {path} ({exc.strerror}): check the file"
        ) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        # Checked before fdopen, which refuses a directory with its own exception.
        os.close(fd)
        raise ExportFileError(
            f"export file {path} is not a regular file: pass the path of a file written"
            " by explomemo export"
        )
    with os.fdopen(fd, "rb") as stream:
        try:
            return stream.read()
        except OSError as exc:
            raise ExportFileError(
                f"cannot read export file {path} ({exc.strerror}): check the file"
            ) from exc


class _BadLine(Exception):
    """What is wrong with one line of an export, naming the field."""


#: A run's cost read from an export at most (SQLite's integers hold far more).
MAX_COST_TOKENS = 10**15
_SHA256 = re.compile(r"[0-9a-f]{64}")
_XXH3 = re.compile(r"[0-9a-f]{32}")
_GIT_BLOB = re.compile(r"[0-9a-f]{40}")
_RECORDED_AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def _parse_line(line: str, latest: str | None = None) -> ExportedMemo:
    try:
        data = json.loads(line, parse_int=_whole)
    except ValueError as exc:
        raise _BadLine(f"not JSON: {exc}") from None
    except RecursionError:
        raise _BadLine("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise _BadLine("not a JSON object")
    memo_id = _integer(data, "id", 1, MAX_ID)
    project = _text(data, "project", inputs.MAX_PROJECT)
    question = _text(data, "question", inputs.MAX_QUESTION)
    conclusion = _text(data, "conclusion", inputs.MAX_CONCLUSION)
    in_repo = data.get("root_in_repo")
    if in_repo is not None:
        in_repo = _root_in_repo_field(in_repo)
    recorded_at = data.get("recorded_at")
    if not isinstance(recorded_at, str) or not _RECORDED_AT.fullmatch(recorded_at):
        raise _BadLine("recorded_at is not a UTC time such as 2026-11-30T10:00:00Z")
    try:
        datetime.strptime(recorded_at, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise _BadLine(f"recorded_at {recorded_at!r} is not a real date and time") from None
    if latest is not None and recorded_at > latest:
        raise _BadLine(
            f"recorded_at {recorded_at} is in the future (this machine's clock says {latest},"
            " give or take a few minutes)"
        )
    origin = data.get("origin", AGENT)
    if origin not in ORIGINS:
        raise _BadLine(
            f"origin {str(origin)[:20]!r} is not one of {', '.join(ORIGINS)}: it may come from"
            " a later explomemo"
        )
    agent_type = (
        None if data.get("agent_type") is None else _text(data, "agent_type", inputs.MAX_AGENT_TYPE)
    )
    cost_tokens = (
        None
        if data.get("cost_tokens") is None
        else _integer(data, "cost_tokens", 0, MAX_COST_TOKENS)
    )
    listed = data.get("files")
    if not isinstance(listed, list) or not listed:
        raise _BadLine("files is not a list of 1 to 64 files")
    if len(listed) > inputs.MAX_FILES:
        raise _BadLine(f"files holds {len(listed)} files, over the limit of {inputs.MAX_FILES}")
    exported: list[ExportedFile] = []
    seen: set[str] = set()
    for index, item in enumerate(listed):
        where = f"files[{index}]"
        if not isinstance(item, dict):
            raise _BadLine(f"{where} is not a JSON object")
        path = _path(item, where)
        if path != _normal_path(path):
            raise _BadLine(
                f"{where}.path {path!r} is not a plain path relative to root (no leading /,"
                " no . or .. parts, / separators)"
            )
        if path in seen:
            raise _BadLine(f"{where}.path {path!r} appears twice in one memo")
        seen.add(path)
        sha256 = item.get("sha256")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise _BadLine(f"{where}.sha256 is not 64 lowercase hex digits")
        xxh3 = item.get("xxh3")
        if not isinstance(xxh3, str) or not _XXH3.fullmatch(xxh3):
            raise _BadLine(f"{where}.xxh3 is not 32 lowercase hex digits")
        size = _integer(item, "size", 0, inputs.MAX_FILE_BYTES, where)
        git_blob = item.get("git_blob")
        if git_blob is not None and (
            not isinstance(git_blob, str) or not _GIT_BLOB.fullmatch(git_blob)
        ):
            raise _BadLine(f"{where}.git_blob is not 40 lowercase hex digits")
        exported.append(
            ExportedFile(path=path, sha256=sha256, xxh3=xxh3, size=size, git_blob=git_blob)
        )
    repository = data.get("repository")
    if repository is not None and (
        not isinstance(repository, str) or not _GIT_BLOB.fullmatch(repository)
    ):
        raise _BadLine("repository is not a commit id of 40 lowercase hex digits")
    return ExportedMemo(
        id=memo_id,
        project=project,
        question=question,
        conclusion=conclusion,
        root_in_repo=in_repo,
        recorded_at=recorded_at,
        origin=inputs.check_origin(origin),
        agent_type=agent_type,
        cost_tokens=cost_tokens,
        files=exported,
        repository=repository,
    )


def _root_in_repo_field(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ROOT_CHARS:
        raise _BadLine(f"root_in_repo is not a folder path of 1 to {MAX_ROOT_CHARS:,} characters")
    try:
        check_text_path(value, "root_in_repo")
    except PathError:
        raise _BadLine("root_in_repo holds a NUL byte or a lone surrogate") from None
    if value != "." and value != _normal_path(value):
        raise _BadLine(
            f"root_in_repo {value!r} is not a plain folder path inside the work tree (no leading"
            " /, no . or .. parts, / separators; . for the top)"
        )
    return value


def _whole(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:
        # Past 4,300 digits int() refuses with advice for Python programmers, not users.
        raise _BadLine(f"it holds a number of {len(digits.lstrip('-')):,} digits") from None


def _text(data: dict[str, Any], name: str, maximum: int, within: str = "") -> str:
    label = f"{within}.{name}" if within else name
    value = data.get(name)
    if not isinstance(value, str):
        raise _BadLine(f"{label} is missing or not a string")
    try:
        return inputs.check_text(label, value, maximum)
    except InputError as exc:
        raise _BadLine(str(exc).split(":")[0]) from None


def _path(item: dict[str, Any], where: str) -> str:
    # Not _text: a file name may be all white space, and record accepts it.
    path = item.get("path")
    if not isinstance(path, str) or not path:
        raise _BadLine(f"{where}.path is missing, empty or not a string")
    if len(path) > MAX_PATH_CHARS:
        raise _BadLine(f"{where}.path is {len(path):,} characters long, over {MAX_PATH_CHARS:,}")
    try:
        check_text_path(path, f"{where}.path")
    except PathError:
        raise _BadLine(f"{where}.path holds a NUL byte or a lone surrogate") from None
    return path


def _integer(data: dict[str, Any], name: str, low: int, high: int, within: str = "") -> int:
    label = f"{within}.{name}" if within else name
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadLine(f"{label} is missing or not a whole number")
    if not low <= value <= high:
        raise _BadLine(f"{label} {value} is out of range ({low:,} to {high:,})")
    return value


def _normal_path(path: str) -> str:
    normal = posixpath.normpath(path)
    if normal.startswith(("/", "../")) or normal in (".", ".."):
        return ""
    return normal


def stale_from_export(
    memos: Iterable[ExportedMemo],
    root: str | None,
    progress: Progress | None = None,
    *,
    project: str | None = None,
    source: Path | None = None,
    require_memos: bool = False,
) -> StaleReport:
    """Check exported memos (of ``project`` only, when given) against ``root`` (default: the
    current directory), no database.

    A ``project`` without memos among them is refused (see
    :func:`~explomemo.memos.cache.require_project`), naming ``source``, the file they were
    read from; so is an export without memos when ``require_memos`` (a CI gate: a
    check of nothing must not pass).
    """
    if project is not None:
        inputs.check_text("project", project, inputs.MAX_PROJECT)
    memos = list(memos)
    chosen = [m for m in memos if project is None or m.project == project]
    require_project(
        project,
        chosen,
        "the export" if source is None else f"export file {source}",
        lambda: (m.project for m in memos),
        _write_export_fix(project, source),
    )
    named = "the export" if source is None else f"export file {source}"
    if require_memos and not chosen:
        raise NotFoundError(
            f"{named} holds no memo, so there is nothing to check:"
            f" {_write_export_fix(project, source)}"
        )
    asking = caller(project, root)
    kept = [m for m in chosen if not asking.leaves_out(m.project, m.repository)]
    if require_memos and not kept:
        raise NotFoundError(left_no_memo(named, asking))
    chosen = kept
    roots = _memo_roots(chosen, root)
    rows: list[MemoRow] = []
    files: dict[int, list[FileRow]] = {}
    for memo in chosen:
        where = roots[memo.id]
        rows.append(
            MemoRow(
                memo.id,
                memo.project,
                memo.question,
                memo.conclusion,
                "" if where is None else where.path,
                memo.recorded_at,
                memo.origin,
                memo.repository,
            )
        )
        files[memo.id] = _file_rows(memo)
    validator = Validator(None)
    try:
        return check_memos(rows, files, lambda row: roots[row.id], validator, progress=progress)
    finally:
        validator.close()


def _write_export_fix(project: str | None, source: Path | None) -> str:
    from shlex import quote

    target = "FILE" if source is None else quote(str(source))
    return f"write it with explomemo export --project {quote(project or 'P')} -o {target}"


def export_changes(
    memos: Iterable[ExportedMemo],
    report: StaleReport,
    root: str | None,
    limits: Limits | None = None,
) -> dict[int, list[CheckedFile]]:
    """The files of each stale memo of ``report`` (from :func:`stale_from_export`) with their
    diffs from git history and their moves, by memo id: no database, so no snapshots.

    ``limits`` as for :meth:`~explomemo.memos.cache.MemoCache.stale_changes`.
    """
    from explomemo.changes.diffs import AGENT_LIMITS, ChangeFinder, stale_changes

    stale_ids = {entry.id for entry in report.stale}
    memo_list = [memo for memo in memos if memo.id in stale_ids]
    files = {memo.id: _file_rows(memo) for memo in memo_list}
    finder = ChangeFinder(None, limits or AGENT_LIMITS)
    return stale_changes(finder, report.stale, files, _memo_roots(memo_list, root))


def repo_folders(memos: Iterable[ExportedMemo]) -> dict[int, str]:
    """By memo id, the folder (ending in ``/``) of the repository that a memo's paths are
    relative to, for the memos recorded below the top of their work tree."""
    return {m.id: m.root_in_repo + "/" for m in memos if m.root_in_repo not in (None, ".")}


def _file_rows(memo: ExportedMemo) -> list[FileRow]:
    return [FileRow(f.path, f.sha256, f.xxh3, f.size, f.git_blob) for f in memo.files]


def import_memos(
    cache: MemoCache, memos: Iterable[ExportedMemo], root: str | None = None
) -> ImportResult:
    """Merge exported memos: for the same project and question, the newer memo is kept.

    Origin comes first, as for a record: an agent's memo replaces a captured one
    whatever their times, and a captured memo never replaces an agent's; between
    memos of one origin the newer is kept, and ties keep the memo already in the
    database. An imported memo keeps its origin and is marked ``imported``: the claim
    of whoever committed the export, shown as such. Everything lands in one
    transaction. Imported memos gain vectors the next time a model is used. A blob id
    known for a content (from the export or the database) is given to every row of it.
    A memo's root is, when the export gives its ``root_in_repo``, that folder
    under :func:`checking_base` of ``root`` (default: the current directory);
    else ``root`` itself. An absolute root that an older export carries is
    never used: it could lead anywhere, and the memo's files would then be
    read (and shown in its diffs) from there. Snapshots of the
    memos an import replaces go with them when nothing else rests on them.
    """
    store = cache.store
    memo_list = list(memos)
    where = resolve_root(root)
    base = checking_base(where) if any(m.root_in_repo is not None for m in memo_list) else where
    memo_roots = {m.id: _memo_root_path(m, base) for m in memo_list if m.root_in_repo is not None}
    added = replaced = kept = 0
    with store.errors(), store.write() as conn:
        for memo in memo_list:
            key = inputs.question_key(memo.question)
            holder = store.question_holder(conn, memo.project, key, memo.repository)
            existing = None if holder is None else holder[0]
            if holder is not None and not _import_replaces(memo, holder[1], holder[2]):
                kept += 1
                continue
            store.save_memo(
                conn,
                memo_id=existing,
                project=memo.project,
                question=memo.question,
                question_key=key,
                conclusion=memo.conclusion,
                root=memo_roots.get(memo.id) or where.path,
                recorded_at=memo.recorded_at,
                files=_file_rows(memo),
                wanted_id=memo.id,
                origin=memo.origin,
                repository=memo.repository,
                imported=True,
                agent_type=memo.agent_type,
                cost_tokens=memo.cost_tokens,
            )
            if existing is None:
                added += 1
            else:
                replaced += 1
        # A blob id known for a content, from the export or the database, is
        # given to every row of that content.
        store.share_git_blobs(conn, (f.sha256 for memo in memo_list for f in memo.files))
    return ImportResult(read=len(memo_list), added=added, replaced=replaced, kept=kept)


def _import_replaces(memo: ExportedMemo, origin: str, recorded_at: str) -> bool:
    """Whether ``memo`` replaces the database's memo of its question (of ``origin``,
    recorded at ``recorded_at``)."""
    if inputs.AGENT in (memo.origin, origin) and memo.origin != origin:
        return inputs.replaces(memo.origin, origin)
    return memo.recorded_at > recorded_at
