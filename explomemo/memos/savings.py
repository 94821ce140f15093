"""What serving a memo spared an agent: the bytes of its files it did not read, or the
delegated run that did not happen.

One rule for every surface: a served memo counts as spared only when it can have
answered. For the surfaces that hand a memo to an agent (recall, show, the prompt hook)
that is a fresh memo served whole: a stale memo, a lean recall match shown by its
question only, a conclusion cut to fit the prompt hook's bytes, is not served and counts
nothing (callers pass only the memos they served whole). Each counts the recorded sizes
of the memo's files as spared, less the files the session read anyway, once per memo and
session. The Claude Code hooks know those from the transcript: at the end of each turn
the Stop hook takes the files the turn read off what was counted in the session
(:func:`settle_served`; a file read only in a turn before the memo was served stays
counted); the server and the CLI cannot know, and count every file.

A delegation answered from a memo (the delegate hook, :func:`count_delegation`) can have
answered when the agent did not delegate the same exploration again in that turn
(:func:`uncount_delegation` takes it back when it does). A fresh memo stands in for the
run, which does not happen: the tokens of the run that made the memo are spared. A stale
memo is handed to the run with what changed, and the run goes on: served, not spared.

Counting is a write that may be skipped: it waits for a lock no longer than a cache
write does (a hook's 50 ms), and a count that cannot be written is lost, never an error.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from explomemo.shapes import ProjectStats, StaleReport, Surface, SurfaceSavings
    from explomemo.store.database import MemoRow, ServedTotal, Store

#: The surfaces that serve memos, in the order ``explomemo stats`` shows them.
SURFACES: tuple[Surface, ...] = ("recall", "show", "prompt", "delegation")
#: The surface of delegations answered from a memo: it spares runs (tokens), not files.
DELEGATION: Surface = "delegation"


class SparedFile(Protocol):
    """A memo's recorded file as a surface served it: its path and recorded size."""

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int: ...


def spared_bytes(files: Iterable[SparedFile], read: Collection[str]) -> int:
    """The recorded sizes of ``files``, less those whose path is in ``read``."""
    return sum(f.size for f in files if f.path not in read)


def count_served(
    store: Store,
    *,
    session: str,
    surface: str,
    project: str,
    served: Iterable[tuple[int, Iterable[SparedFile]]],
    read: Collection[str] = frozenset(),
) -> list[int] | None:
    """Count the memos served whole in ``session`` (each memo id with its files), the files
    in ``read`` (paths relative to the memo's root) not spared; a memo already counted
    in ``session`` is not counted again.

    The ids counted now; None when the count could not be written (the database
    locked past a cache write's wait, read-only or damaged).
    """
    spared = [(memo_id, spared_bytes(files, read)) for memo_id, files in served]
    if not spared:
        return []
    served_at = _now()
    return store.write_cache(
        lambda conn: store.save_served(
            conn,
            session=session,
            project=project,
            surface=surface,
            spared=spared,
            served_at=served_at,
        )
    )


def count_delegation(
    store: Store,
    *,
    session: str,
    project: str,
    memo_id: int,
    fresh: bool,
    tokens: int | None,
) -> None:
    """Count that memo ``memo_id`` of ``project`` answered a delegation in ``session``:
    ``fresh``, the run did not happen and ``tokens`` (what the run that made the memo cost,
    None when unknown) were spared; stale, the run went on with the memo handed to it, and
    it was served, sparing nothing.

    Once per memo and session: a fresh answer takes the place of a stale one, and a
    delegation that of another surface's serve of the memo in the session (the agent
    delegated its exploration after that serve, which so did not answer). ``session`` is
    named as the prompt hook names it (``claude-code:`` and Claude Code's ``session_id``,
    :data:`explomemo.clients.hooks.memos.SESSION_PREFIX`), so that the two meet. Skipped,
    as every count is, when it cannot be written.
    """
    spared = tokens if fresh and tokens is not None and tokens > 0 else 0
    served_at = _now()
    store.write_cache(
        lambda conn: store.save_delegation(
            conn,
            session=session,
            project=project,
            memo_id=memo_id,
            fresh=fresh,
            tokens_spared=spared,
            served_at=served_at,
        )
    )


def uncount_delegation(store: Store, *, session: str, memo_id: int) -> None:
    """Take back memo ``memo_id``'s answer to a delegation in ``session``: the agent
    delegated the same exploration again in that turn, so the answer did not stand in
    for the run. Skipped, as a count is, when it cannot be written."""
    store.write_cache(lambda conn: store.drop_delegation(conn, session, memo_id))


def _now() -> str:
    """The time of a count, as stored."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def settle_served(store: Store, session: str, read: Collection[str]) -> None:
    """Take the files in ``read`` off what each memo served in ``session`` spared: the
    agent read them anyway. Skipped, as a count is, when it cannot be written."""
    with store.errors(), store.read() as conn:
        served = store.served_in(conn, session)
        if not served:
            return
        files = store.files_of(conn, list(served))
    lower = [
        (memo_id, left)
        for memo_id, spared in served.items()
        # A memo forgotten since has no files left: what it spared stays.
        if files[memo_id] and (left := spared_bytes(files[memo_id], read)) < spared
    ]
    if lower:
        store.write_cache(lambda conn: store.lower_spared(conn, session, lower))


def size_text(size: int) -> str:
    """A byte count as people read it: 350 B, 12.3 KiB, 4.0 MiB."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def tokens_text(tokens: int) -> str:
    """A token count as people read it: 156,000 tokens."""
    return f"{tokens:,} token{'' if tokens == 1 else 's'}"


def spared_line(served: Iterable[ServedTotal], sessions: int) -> str | None:
    """The session-start index's line on what the project's memos spared (``served``, its
    totals by surface) across ``sessions``: bytes of reading, and the delegated runs that
    did not happen with their tokens; None when they spared nothing yet."""
    totals = list(served)
    spared = sum(t.bytes_spared for t in totals)
    runs = sum(t.fresh for t in totals if t.surface == DELEGATION)
    tokens = sum(t.tokens_spared for t in totals)
    parts = [f"{size_text(spared)} of reading"] if spared > 0 else []
    if runs > 0:
        cost = f" ({tokens_text(tokens)})" if tokens > 0 else ""
        parts.append(f"{runs} delegated run{'' if runs == 1 else 's'}{cost}")
    if not parts:
        return None
    return (
        f"explomemo has spared {' and '.join(parts)} in this project across"
        f" {sessions} session{'' if sessions == 1 else 's'}."
    )


def project_stats(
    memos: Sequence[MemoRow],
    report: StaleReport,
    served: Iterable[ServedTotal],
    sessions: Mapping[str, int],
) -> list[ProjectStats]:
    """Each project's counts, by project name: its ``memos`` (stale as ``report`` found,
    by origin), and what each surface ``served``."""
    from explomemo.shapes import ProjectStats

    stale = {entry.id for entry in report.stale}
    by_project: dict[str, list[MemoRow]] = {}
    for memo in memos:
        by_project.setdefault(memo.project, []).append(memo)
    surfaces: dict[str, dict[str, ServedTotal]] = {}
    for total in served:
        surfaces.setdefault(total.project, {})[total.surface] = total
        by_project.setdefault(total.project, [])
    found: list[ProjectStats] = []
    for project in sorted(by_project):
        own = by_project[project]
        counts = surfaces.get(project, {})
        parts = [_surface_savings(s, counts.get(s)) for s in SURFACES]
        by_origin: dict[str, int] = {}
        for memo in own:
            by_origin[memo.origin] = by_origin.get(memo.origin, 0) + 1
        found.append(
            ProjectStats(
                project=project,
                memos=len(own),
                fresh=sum(1 for m in own if m.id not in stale),
                stale=sum(1 for m in own if m.id in stale),
                origins=dict(sorted(by_origin.items())),
                served=sum(p.served for p in parts),
                bytes_spared=sum(p.bytes_spared for p in parts),
                tokens_spared=sum(p.tokens_spared or 0 for p in parts),
                sessions=sessions.get(project, 0),
                surfaces=parts,
            )
        )
    return found


def _surface_savings(surface: Surface, total: ServedTotal | None) -> SurfaceSavings:
    """One surface's savings: memos served and bytes spared; for delegations also how many
    answers were fresh and stale, and the tokens spared."""
    from explomemo.shapes import SurfaceSavings

    served, fresh, spared, tokens = (
        (0, 0, 0, 0)
        if total is None
        else (total.served, total.fresh, total.bytes_spared, total.tokens_spared)
    )
    if surface != DELEGATION:
        return SurfaceSavings(surface=surface, served=served, bytes_spared=spared)
    return SurfaceSavings(
        surface=surface,
        served=served,
        bytes_spared=spared,
        fresh=fresh,
        stale=served - fresh,
        tokens_spared=tokens,
    )
