"""The memos a hook works on: the project and repository they belong to, which are stale,
and their text as a hook quotes it.

Memo text is untrusted: every line of it is quoted with ``| `` under a header of the
hook's own, and made inert (:func:`~explomemo.printable.inert`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from explomemo.printable import inert, one_line
from explomemo.projects import Caller, resolve_project
from explomemo.store.database import FileRow, MemoRow, Store

if TYPE_CHECKING:
    from explomemo.clients.hooks.deadline import Deadline
    from explomemo.shapes import StaleEntry

#: Longest a hook waits for another process's lock on the database.
BUSY_TIMEOUT_MS = 50
#: Before a Claude Code ``session_id``: the key its memos served are counted under.
SESSION_PREFIX = "claude-code:"


def project_of(store: Store, project: str | None, root: str) -> str:
    """The project a hook works on: the one ``setup`` named (``--project``), else as any
    call takes it (:func:`~explomemo.memos.cache.project_at`: the project holding this
    repository's memos, else the folder's name); the library is imported only then."""
    if project is not None:
        return resolve_project(project, root)
    from explomemo.memos.cache import project_at

    return project_at(store, None, root)


def of_this_repository(
    store: Store, project: str, root: str, memos: Sequence[MemoRow]
) -> list[MemoRow]:
    """``memos`` but those of another repository of the project's name (see
    :class:`~explomemo.projects.Caller`): git runs (and its module is imported) only when a
    memo has an identity."""

    def identity() -> str | None:
        from explomemo.changes.gitrepo import repository_identity

        return repository_identity(root, store)

    asking = Caller(project, identity)
    return [m for m in memos if not asking.leaves_out(m.project, m.repository)]


def stale_of(
    store: Store,
    root: str,
    memos: Sequence[MemoRow],
    files: dict[int, list[FileRow]],
    deadline: Deadline | None = None,
) -> dict[int, StaleEntry]:
    """The stale ones of ``memos`` under ``root``, by id (see
    :func:`~explomemo.check.stale.check_memos`); the files to read are read until
    ``deadline``."""
    from explomemo.check.stale import check_memos
    from explomemo.check.validity import Validator
    from explomemo.files import resolve_root

    validator = Validator(store)
    progress = None if deadline is None else deadline.reading
    try:
        report = check_memos(memos, files, resolve_root(root), validator, progress=progress)
    finally:
        validator.close()
    return {entry.id: entry for entry in report.stale}


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes (on a character), marked with an ellipsis."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "…"


def count(number: int, noun: str) -> str:
    """``number`` and ``noun``, plural unless one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def project_name(project: str) -> str:
    """A project's name as the hooks' heads show it: a name can come from an imported
    export (see :func:`~explomemo.memos.cache.project_at`), so it is made inert too."""
    return inert(one_line(repr(project)))


def quoted_question(question: str, chars: int) -> str:
    """A memo's question on one line, cut to ``chars`` (the cut marked), made inert."""
    text = " ".join(question.split())
    if len(text) > chars:
        text = text[: chars - 1] + "…"
    return inert(one_line(text))


def quoted(text: str) -> str:
    """Memo text as a hook hands it on: inert, every line quoted with ``| ``."""
    return "\n".join(f"| {line}" for line in inert(text).split("\n"))
