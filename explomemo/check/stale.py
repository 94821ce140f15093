"""The one stale check: which memos rest on a file that changed or vanished.

Every surface asks it the same way: the MCP stale tool, ``explomemo stale``
(from the database or from an export, with no database), and the
session-start and prompt hooks each hand :func:`check_memos` memos, their
recorded files and a root, and print the :class:`~explomemo.shapes.StaleReport`
it returns in their own way. Recall and ``show`` state each file of a memo
with :func:`checked_files`, from the same observation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from explomemo.check.validity import Expected, Progress, Seen, Validator, expect, state_of
from explomemo.shapes import CheckedFile, StaleEntry, StaleReport

if TYPE_CHECKING:
    from explomemo.files import Root
    from explomemo.store.database import FileRow, MemoRow


def check_memos(
    memos: Iterable[MemoRow],
    files: Mapping[int, Sequence[FileRow]],
    root: Root | Callable[[MemoRow], Root | None] | None,
    validator: Validator,
    *,
    progress: Progress | None = None,
    expected: Sequence[Expected] | None = None,
) -> StaleReport:
    """Check ``memos`` (their recorded ``files`` by memo id) under ``root``.

    ``root`` is one root for every memo, or a function giving each memo's; None
    is a root that no longer exists, under which every file is missing.
    Each distinct file is looked at once per root, however many memos rest on
    it (see :meth:`Validator.observe`). The report counts every memo checked
    and lists the stale ones by project then id. ``progress`` is told how
    many files have been read of how many, for a check that reads many;
    ``expected`` is what :func:`~explomemo.check.validity.expect` gives for
    all ``files`` under the one ``root``, when the caller keeps it between
    checks.
    """
    groups: dict[Root | None, list[MemoRow]] = {}
    checked = 0
    for memo in memos:
        checked += 1
        where = root(memo) if callable(root) else root
        groups.setdefault(where, []).append(memo)
    stale: list[StaleEntry] = []
    before = validator.progress
    validator.progress = progress
    try:
        for where, group in groups.items():
            group_files = [f for memo in group for f in files.get(memo.id, ())]
            changes = observe(validator, where, group_files, expected)
            if changes:
                stale += _stale_entries(group, files, changes)
    finally:
        validator.progress = before
    stale.sort(key=lambda entry: (entry.project, entry.id))
    return StaleReport(checked=checked, stale=stale)


def observe(
    validator: Validator,
    root: Root | None,
    files: Iterable[FileRow],
    expected: Sequence[Expected] | None = None,
) -> dict[str, Seen]:
    """The paths of ``files`` that may not hold their recorded content (see
    :meth:`Validator.observe`); under a root that no longer exists, every one."""
    if root is None:
        return {f.path: None for f in files}
    return validator.observe(root, expect(root, files) if expected is None else expected)


def checked_files(files: Sequence[FileRow], changes: Mapping[str, Seen]) -> list[CheckedFile]:
    """Each of a memo's recorded ``files`` with its state, given what :func:`observe`
    found (no diff: see :mod:`explomemo.changes.diffs`)."""
    return [
        CheckedFile(path=f.path, sha256=f.sha256, size=f.size, state=state_of(changes, f))
        for f in files
    ]


def _stale_entries(
    memos: Iterable[MemoRow], files: Mapping[int, Sequence[FileRow]], changes: Mapping[str, Seen]
) -> list[StaleEntry]:
    """The stale ones among ``memos``, each with its changed and missing files."""
    stale: list[StaleEntry] = []
    for memo in memos:
        changed: list[str] = []
        missing: list[str] = []
        for f in files.get(memo.id, ()):
            state = state_of(changes, f)
            if state == "missing":
                missing.append(f.path)
            elif state == "changed":
                changed.append(f.path)
        if changed or missing:
            stale.append(
                StaleEntry(
                    id=memo.id,
                    project=memo.project,
                    question=memo.question,
                    changed=changed,
                    missing=missing,
                )
            )
    return stale
