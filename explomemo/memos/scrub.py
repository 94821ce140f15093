"""Scrub: the secrets a database already holds, redacted or deleted (``explomemo scrub``).

Earlier versions redacted nothing: a captured turn kept the tokens and passwords its
prompt and answer held, and a ``.env`` or a key the agent read kept a snapshot. The scrub
redacts the secrets of every memo's question and conclusion (whatever its origin, as
capture does: see :mod:`explomemo.redaction`) and deletes the snapshot of every content
that holds secrets (by the name of a file recorded with it, or by what it holds), in one
transaction that zeroes what it deletes on disk. A memo whose redacted question is another
memo's of the same project is forgotten (the other one is kept). Scrubbing again finds
nothing.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from explomemo.changes.contents import restore
from explomemo.inputs import question_key
from explomemo.redaction import holds_secret, redact, secret_file
from explomemo.store.database import Store


class ScrubbedMemo(NamedTuple):
    """A memo the scrub changed."""

    id: int
    project: str
    #: The kinds of the secrets redacted, in order.
    kinds: list[str]
    #: Memo id whose question its redacted question is: this memo was forgotten.
    forgotten_for: int | None


class ScrubResult(NamedTuple):
    """What the scrub changed: the memos, and how many snapshots it deleted."""

    memos: list[ScrubbedMemo]
    snapshots: int


def scrub(store: Store) -> ScrubResult:
    """Redact the secrets of every stored memo and delete the snapshots of contents that
    hold secrets (see the module's text)."""
    scrubbed: list[ScrubbedMemo] = []
    with store.errors(), store.erasing() as conn:
        for memo in store.memos(conn):
            question, conclusion = redact(memo.question), redact(memo.conclusion)
            kinds = question.kinds + conclusion.kinds
            if not kinds:
                continue
            holder = store.question_holder(
                conn, memo.project, question_key(question.text), memo.repository
            )
            if holder is not None and holder[0] != memo.id:
                store.delete_memo(conn, None, memo.id)
                scrubbed.append(ScrubbedMemo(memo.id, memo.project, kinds, holder[0]))
                continue
            store.rewrite_memo_text(conn, memo, question.text, conclusion.text)
            scrubbed.append(ScrubbedMemo(memo.id, memo.project, kinds, None))
        secret_contents = [
            sha256
            for sha256, paths in store.snapshot_paths(conn).items()
            if any(secret_file(path) for path in paths) or _holds_secret(store, conn, sha256)
        ]
        deleted = store.delete_snapshots(conn, secret_contents)
        if scrubbed:
            store.purge_deleted_text(conn)
    return ScrubResult(scrubbed, deleted)


def _holds_secret(store: Store, conn: sqlite3.Connection, sha256: str) -> bool:
    """Whether the content a snapshot keeps holds a secret (a damaged one is left alone)."""
    kept = store.snapshot(conn, sha256)
    if kept is None:
        return False
    content = restore(*kept, sha256)
    return content is not None and holds_secret(content)
