"""What serving a fresh memo whole spared an agent: the bytes of its files it did not read.

Each time a surface serves a fresh memo whole (recall, show, the prompt hook),
the recorded sizes of the memo's files are counted as spared, less the files
the session read anyway, once per memo and session. The Claude Code hooks know
those from the transcript: at the end of each turn the Stop hook takes the
files the turn read off what the prompt hook counted in the session
(:func:`settle_served`; a file read only in a turn before the memo was served
stays counted); the server and the CLI cannot know, and count every file. A match shown by id
only, or a stale memo, is not served: callers pass only the memos they served
whole. Counting is a write that may be skipped: it waits for a lock no longer
than a cache write does (a hook's 50 ms), and a count that cannot be written
is lost, never an error.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from explomemo.shapes import ProjectStats, StaleReport, Surface
    from explomemo.store.database import MemoRow, Store

#: The surfaces that serve memos, in the order ``explomemo stats`` shows them.
SURFACES: tuple[Surface, ...] = ("recall", "show", "prompt")


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
    served_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
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


def spared_line(spared: int, sessions: int) -> str | None:
    """The session-start index's line on what the project's memos spared; None when
    they spared nothing yet."""
    if spared <= 0:
        return None
    return (
        f"explomemo has spared {size_text(spared)} of reading in this project across"
        f" {sessions} session{'' if sessions == 1 else 's'}."
    )


def project_stats(
    memos: Sequence[MemoRow],
    report: StaleReport,
    served: Iterable[tuple[str, str, int, int]],
    sessions: Mapping[str, int],
) -> list[ProjectStats]:
    """Each project's counts, by project name: its ``memos`` (stale as ``report`` found,
    by origin), and what each surface ``served`` ((project, surface, memos, bytes) rows)."""
    from explomemo.shapes import ProjectStats, SurfaceSavings

    stale = {entry.id for entry in report.stale}
    by_project: dict[str, list[MemoRow]] = {}
    for memo in memos:
        by_project.setdefault(memo.project, []).append(memo)
    surfaces: dict[str, dict[str, tuple[int, int]]] = {}
    for project, surface, count, spared in served:
        surfaces.setdefault(project, {})[surface] = (count, spared)
        by_project.setdefault(project, [])
    found: list[ProjectStats] = []
    for project in sorted(by_project):
        own = by_project[project]
        counts = surfaces.get(project, {})
        parts = [
            SurfaceSavings(surface=s, served=n, bytes_spared=b)
            for s in SURFACES
            for n, b in [counts.get(s, (0, 0))]
        ]
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
                sessions=sessions.get(project, 0),
                surfaces=parts,
            )
        )
    return found
