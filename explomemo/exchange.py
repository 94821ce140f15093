"""Export and import: memos as deterministic JSON Lines, and stale checks of an export.

An export is one memo a line, sorted by project then id, keys in a fixed
order, so the same memos always give the same bytes and a file committed to a
repository diffs cleanly. It carries each file's SHA-256 and xxh3-128, so a CI
job can check it (``explomemo stale --from``) with no database at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from explomemo import inputs
from explomemo.errors import ExportFileError
from explomemo.files import resolve_root
from explomemo.memos import MemoCache, stale_entries
from explomemo.models import (
    ExportedFile,
    ExportedMemo,
    ImportResult,
    StaleReport,
)
from explomemo.store import FileRow, MemoRow
from explomemo.validity import Progress, Validator, expect


def export_memos(cache: MemoCache, project: str | None = None) -> Iterator[str]:
    """The export's lines (without newlines), sorted by project then id."""
    store = cache.store
    with store.errors(), store.read() as conn:
        memos = store.memos(conn, project=project)
        files = store.all_files(conn, project)
    for memo in memos:
        exported = ExportedMemo(
            id=memo.id,
            project=memo.project,
            question=memo.question,
            conclusion=memo.conclusion,
            root=memo.root,
            recorded_at=memo.recorded_at,
            files=[
                ExportedFile(path=f.path, sha256=f.sha256, xxh3=f.xxh3, size=f.size)
                for f in files.get(memo.id, [])
            ],
        )
        yield json.dumps(exported.model_dump(), ensure_ascii=False, separators=(",", ":"))


def write_export(path: Path, text: str) -> None:
    """Write an export atomically: a reader never sees half a file."""
    staging = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging.write_text(text, encoding="utf-8")
        staging.replace(path)
    except OSError as exc:
        staging.unlink(missing_ok=True)
        raise ExportFileError(
            f"cannot write export file {path} ({exc.strerror}): pick a writable path with -o"
        ) from exc


def read_export(path: Path) -> list[ExportedMemo]:
    """Parse an export file, refusing it whole at the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExportFileError(
            f"export file {path} does not exist: create it with explomemo export -o {path}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportFileError(f"cannot read export file {path} ({exc}): check the file") from exc
    memos: list[ExportedMemo] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            memo = ExportedMemo.model_validate_json(line)
            inputs.check_text("project", memo.project, inputs.MAX_PROJECT)
            inputs.check_text("question", memo.question, inputs.MAX_QUESTION)
            inputs.check_text("conclusion", memo.conclusion, inputs.MAX_CONCLUSION)
        except (ValidationError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            raise ExportFileError(
                f"line {number} of {path} is not an explomemo memo ({first}):"
                " regenerate the file with explomemo export"
            ) from None
        if not memo.files:
            raise ExportFileError(
                f"line {number} of {path} has a memo without files:"
                " regenerate the file with explomemo export"
            )
        for f in memo.files:
            if (
                f.path.startswith("/")
                or f.path == ".."
                or f.path.startswith("../")
                or "/../" in f.path
            ):
                raise ExportFileError(
                    f"line {number} of {path} names file {f.path!r} outside its root:"
                    " regenerate the file with explomemo export"
                )
        memos.append(memo)
    return memos


def stale_from_export(
    memos: Iterable[ExportedMemo], root: str | None, progress: Progress | None = None
) -> StaleReport:
    """Check exported memos against ``root`` (default: the current directory), no database."""
    where = resolve_root(root)
    rows: list[MemoRow] = []
    files: dict[int, list[FileRow]] = {}
    for memo in memos:
        rows.append(
            MemoRow(
                memo.id, memo.project, memo.question, memo.conclusion, memo.root, memo.recorded_at
            )
        )
        files[memo.id] = [FileRow(f.path, f.sha256, f.xxh3, f.size) for f in memo.files]
    validator = Validator(None, progress=progress)
    try:
        changes = validator.observe(where, expect(where, (f for fs in files.values() for f in fs)))
    finally:
        validator.close()
    stale = stale_entries(rows, files, changes)
    stale.sort(key=lambda e: (e.project, e.id))
    return StaleReport(checked=len(rows), stale=stale)


def import_memos(cache: MemoCache, memos: Iterable[ExportedMemo]) -> ImportResult:
    """Merge exported memos: for the same project and question, the newer memo is kept.

    Ties keep the memo already in the database. Everything lands in one
    transaction. Imported memos gain vectors the next time a model is used.
    """
    store = cache.store
    memo_list = list(memos)
    added = replaced = kept = 0
    with store.errors(), store.write() as conn:
        for memo in memo_list:
            key = inputs.question_key(memo.question)
            existing = store.find_by_question(conn, memo.project, key)
            if existing is not None:
                current = conn.execute(
                    "SELECT recorded_at FROM memos WHERE id = ?", (existing,)
                ).fetchone()[0]
                if current >= memo.recorded_at:
                    kept += 1
                    continue
            store.save_memo(
                conn,
                memo_id=existing,
                project=memo.project,
                question=memo.question,
                question_key=key,
                conclusion=memo.conclusion,
                root=memo.root,
                recorded_at=memo.recorded_at,
                files=[FileRow(f.path, f.sha256, f.xxh3, f.size) for f in memo.files],
                wanted_id=memo.id,
            )
            if existing is None:
                added += 1
            else:
                replaced += 1
    return ImportResult(read=len(memo_list), added=added, replaced=replaced, kept=kept)
