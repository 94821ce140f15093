"""What changed in a stale memo's files: unified diffs from the recorded content, and moves.

The recorded content comes from, in order: the memo's snapshot
(:mod:`explomemo.changes.snapshots`); the root's git object store, by the recorded
blob id (or, for a file recorded before blob ids, found in the path's
history by its size and SHA-256; :mod:`explomemo.changes.gitrepo`); else there is
none and the diff is ``unavailable``. Every recorded content is checked
against its SHA-256 before it is used. The current content is read through
the same safe opener as a check (:func:`~explomemo.files.open_regular`).

A diff is cut at a per-file limit, and the diffs of one answer at a total
budget, each cut at a whole line and ending with a line that says so (that
line counts within the limit). Once a diff is cut at the answer's budget,
the budget is spent: every later changed file of the answer gets no diff
(``budget``). ``added`` and ``removed`` always count the whole diff.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from explomemo.changes.contents import SNAPSHOT_MAX_BYTES, restore
from explomemo.changes.gitrepo import GitRepo
from explomemo.check.hashing import git_blob_id, hash_fd
from explomemo.files import Refused, Root, open_regular
from explomemo.shapes import CheckedFile, DiffSource, FileStateName, StaleEntry, replace
from explomemo.store.database import FileRow, Store

#: Lines of context around each change, as git and diff -u show.
DIFF_CONTEXT = 3
#: Files larger than this on either side get no diff (``too_large``), as they get no snapshot.
DIFF_MAX_BYTES = SNAPSHOT_MAX_BYTES
#: One file's diff in an answer to an agent, at most (about 1,500 tokens).
FILE_DIFF_CHARS = 6_000
#: All the diffs of one answer to an agent, at most (about 6,000 tokens).
ANSWER_DIFF_CHARS = 24_000
#: git's test for a binary file: a NUL byte among the first 8,000.
_BINARY_PROBE = 8_000
#: Lines a diff cut at the answer's budget keeps at least (---, +++, @@ and one line).
_HUNK_START = 4


@dataclass(frozen=True)
class Limits:
    """How much diff text one file and one answer may carry (None: no limit)."""

    file_chars: int | None
    answer_chars: int | None


#: What recall, show and the stale report give: a small part of an agent's context.
AGENT_LIMITS = Limits(FILE_DIFF_CHARS, ANSWER_DIFF_CHARS)
#: What a lean recall match needs: the lines added and removed, no diff text.
COUNTED_ONLY = Limits(None, 0)
#: What ``explomemo diff`` prints for a person: everything.
NO_LIMITS = Limits(None, None)


@dataclass(frozen=True)
class Diff:
    """A whole unified diff and its line counts (None for a binary file)."""

    text: str
    added: int | None
    removed: int | None


def unified_diff(path: str, old: bytes, new: bytes) -> Diff:
    """The unified diff (``--- a/PATH`` / ``+++ b/PATH``, 3 lines of context) from old to new.

    Lines end at ``\\n`` only; a last line without one is marked as git marks
    it. Text is decoded as UTF-8, a byte that is not being shown as U+FFFD.
    A file with a NUL byte among its first 8,000 is binary, as git decides.
    """
    if b"\0" in old[:_BINARY_PROBE] or b"\0" in new[:_BINARY_PROBE]:
        return Diff(f"Binary files a/{path} and b/{path} differ\n", None, None)
    a = _lines(old.decode("utf-8", "replace"))
    b = _lines(new.decode("utf-8", "replace"))
    codes = _opcodes(a, b)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag in ("insert", "replace"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag in ("delete", "replace"))
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for group in _grouped(codes, DIFF_CONTEXT):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_line(" ", line) for line in a[i1:i2]]
                continue
            out += [_line("-", line) for line in a[i1:i2]]
            out += [_line("+", line) for line in b[j1:j2]]
    return Diff("".join(out), added, removed)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def _line(mark: str, line: str) -> str:
    if line.endswith("\n"):
        return mark + line
    return f"{mark}{line}\n\\ No newline at end of file\n"


def _range(start: int, stop: int) -> str:
    # As diff -u and git write it: "5" for one line, "4,0" before an empty range.
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + (1 if length else 0)},{length}"


Opcode = tuple[str, int, int, int, int]


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    """difflib's opcodes, matched only between the common first and last lines.

    Most edits touch a few places of a long file: leaving the common ends out
    of the matcher makes it fast and keeps its junk heuristic away from them.
    """
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[-1 - end] == b[-1 - end]:
        end += 1
    codes: list[Opcode] = [("equal", 0, start, 0, start)] if start else []
    matcher = difflib.SequenceMatcher(None, a[start : len(a) - end], b[start : len(b) - end])
    codes += [
        (tag, i1 + start, i2 + start, j1 + start, j2 + start)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]
    if end:
        codes.append(("equal", len(a) - end, len(a), len(b) - end, len(b)))
    return codes


def _grouped(codes: list[Opcode], context: int) -> Iterator[list[Opcode]]:
    """The hunks: changes with ``context`` equal lines around them, as difflib groups them."""
    codes = [c for c in codes if c[1] != c[2] or c[3] != c[4]]
    if not codes or all(c[0] == "equal" for c in codes):
        return
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, i1 + context, j1, j1 + context))
            yield group
            group = []
            i1, j1 = i2 - context, j2 - context
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def cut(text: str, limit: int, why: str, least: int = 0) -> str | None:
    """``text`` cut to whole lines and a last line saying so, all within ``limit`` characters.

    None when that keeps fewer than ``least`` lines of ``text``, or when even
    the last line alone is over ``limit``.
    """
    if len(text) <= limit:
        return text
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    # The note is longest when every line is cut: room for that one is kept.
    room = limit - len(_cut_note(lines, why))
    keep = text.rfind("\n", 0, max(0, room)) + 1
    kept = text.count("\n", 0, keep)
    if room < 0 or kept < least:
        return None
    return text[:keep] + _cut_note(lines - kept, why)


def _cut_note(lines: int, why: str) -> str:
    return f"... {lines} more lines cut ({why}): read the file for the rest\n"


@dataclass
class _Found:
    """What is known of one recorded content while an answer is put together."""

    source: DiffSource = "unavailable"
    content: bytes | None = None
    blob: str | None = None


@dataclass
class ChangeFinder:
    """Describes the changed and missing files of one answer (a recall, a show, a report).

    Snapshots come from ``pending`` (the contents this process recorded
    whose snapshots are not stored yet, by SHA-256), then from ``store``
    (None: an export checked without a database); git is asked only when a
    content has no snapshot or a file is missing, at most once per root for
    the index.
    """

    store: Store | None
    limits: Limits = AGENT_LIMITS
    pending: Callable[[Iterable[str]], Mapping[str, bytes]] | None = None
    _repos: dict[str, GitRepo | None] = field(default_factory=dict, init=False)
    _tracked: dict[str, dict[str, list[str]]] = field(default_factory=dict, init=False)
    _budget: int | None = field(default=None, init=False)
    #: Recorded contents not searched for in git history because the budget was spent.
    _unsearched: set[str] = field(default_factory=set, init=False)
    root: Root | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._budget = self.limits.answer_chars

    def check(
        self, root: Root | None, files: Sequence[tuple[FileRow, FileStateName]]
    ) -> list[CheckedFile]:
        """Each file with its state; a changed one with its diff, a missing one with moved_to.

        ``root`` is where the files are now (None: a root that no longer
        exists). Files are described in order, and the answer's budget is
        spent in that order: call it for the memos of an answer in the order
        they are shown.
        """
        self.root = root
        found = self._recorded(
            [row for row, state in files if state == "changed"],
            [row for row, state in files if state == "missing"],
        )
        checked: list[CheckedFile] = []
        for row, state in files:
            base = CheckedFile(path=row.path, sha256=row.sha256, size=row.size, state=state)
            if state == "changed":
                checked.append(self._changed(row, found[row.sha256], base))
            elif state == "missing":
                moved_to = self._moved_to(row, found[row.sha256])
                checked.append(replace(base, moved_to=moved_to))
            else:
                checked.append(base)
        return checked

    def check_within(
        self,
        root: Root | None,
        files: Sequence[tuple[FileRow, FileStateName]],
        excess: Callable[[list[CheckedFile]], int],
    ) -> list[CheckedFile]:
        """As :meth:`check`, the diffs then cut further while ``excess`` of the files
        described (the characters they are over their room in an answer) is positive.

        Each try describes the files again with what their diffs took, less
        the excess, until they fit or show no diff.
        """
        start = self._budget
        checked = self.check(root, files)
        while start is not None and self._budget is not None:
            over = excess(checked)
            spent = start - self._budget
            if over <= 0 or spent == 0:
                break
            start = self._budget = max(0, spent - over)
            checked = self.check(root, files)
        return checked

    def _changed(self, row: FileRow, recorded: _Found, base: CheckedFile) -> CheckedFile:
        current, too_large = self._current(row.path)
        if row.size > DIFF_MAX_BYTES or too_large:
            return replace(base, diff_source="too_large")
        if recorded.content is None or current is None:
            unsearched = current is not None and row.sha256 in self._unsearched
            return replace(base, diff_source="budget" if unsearched else "unavailable")
        whole = unified_diff(row.path, recorded.content, current)
        shown = self._spend(whole.text)
        return replace(
            base,
            diff=shown,
            diff_source=recorded.source if shown is not None else "budget",
            added=whole.added,
            removed=whole.removed,
        )

    def _spend(self, text: str) -> str | None:
        """The diff as the limits let it through (its cut line included), taken from the
        answer's budget; None once the budget is spent."""
        file_chars, budget = self.limits.file_chars, self._budget
        if (
            budget is not None
            and len(text) > budget
            and (file_chars is None or budget < file_chars)
        ):
            # Cut at the budget: the budget is spent, and a cut that keeps
            # less than a hunk's first line shows nothing.
            self._budget = 0
            return cut(text, budget, "an answer's diffs are at their limit", least=_HUNK_START)
        shown: str | None = text
        if file_chars is not None:
            shown = cut(text, file_chars, f"a file's diff shows {file_chars:,} characters at most")
        if budget is not None and shown is not None:
            self._budget = budget - len(shown)
        return shown

    def _recorded(self, changed: list[FileRow], missing: list[FileRow]) -> dict[str, _Found]:
        """What is known of each content (by SHA-256) of the changed and missing rows.

        A changed file's content comes from its snapshot, else from git; a
        missing file needs only its blob id (recorded, or from its snapshot).
        """
        found = {row.sha256: _Found(blob=row.git_blob) for row in [*changed, *missing]}
        wanted = [
            row
            for row in [*changed, *(r for r in missing if r.git_blob is None)]
            if row.size <= DIFF_MAX_BYTES
        ]
        # Asked before the database: a content stored meanwhile is there.
        held = dict(self.pending([r.sha256 for r in wanted])) if self.pending and wanted else {}
        wanted = [r for r in wanted if r.sha256 not in held]
        if self.store is not None and wanted:
            with self.store.errors(), self.store.read() as conn:
                stored = {r.sha256: self.store.snapshot(conn, r.sha256) for r in wanted}
            for sha256, snapshot in stored.items():
                data = None if snapshot is None else restore(*snapshot, sha256)
                if data is not None:
                    held[sha256] = data
        for sha256, data in held.items():
            found[sha256] = _Found("snapshot", data, found[sha256].blob or git_blob_id(data))
        lacking = [
            r for r in changed if r.size <= DIFF_MAX_BYTES and found[r.sha256].content is None
        ]
        unknown = [r for r in missing if found[r.sha256].blob is None]
        repo = self._git() if lacking or unknown else None
        if repo is not None:
            by_id = repo.blobs(r.git_blob for r in lacking if r.git_blob)
            for row in lacking:
                data = by_id.get(row.git_blob or "")
                if data is not None and hashlib.sha256(data).hexdigest() == row.sha256:
                    found[row.sha256] = _Found("git", data, row.git_blob)
            # Only a search of git history finds a content recorded without a
            # blob id: one search for all of them, and none for a diff once
            # the answer's diffs are spent (it would show none of it).
            search = [*unknown]
            unsearched = [r for r in lacking if r.git_blob is None]
            if self._budget != 0:
                search += unsearched
            else:
                self._unsearched.update(r.sha256 for r in unsearched)
            wanted_there = [(r.path, r.sha256, r.size) for r in search]
            for sha256, (blob, data) in repo.find_contents(wanted_there).items():
                found[sha256] = _Found("git", data, blob)
        self._keep_blobs([*changed, *missing], found)
        return found

    def _keep_blobs(self, rows: Sequence[FileRow], found: Mapping[str, _Found]) -> None:
        """Store the blob ids found for contents recorded without one, so no later answer
        searches git history for them; skipped when the database is busy."""
        blobs = {
            row.sha256: blob
            for row in rows
            if row.git_blob is None and (blob := found[row.sha256].blob) is not None
        }
        if self.store is None or not blobs:
            return
        store = self.store
        # A read must not wait for writes: this one is a cache's.
        store.write_cache(lambda conn: store.set_git_blobs(conn, blobs.items()))

    def _moved_to(self, row: FileRow, recorded: _Found) -> str | None:
        """A tracked path in root holding the recorded content now, from git's index."""
        repo = self._git()
        if repo is None or self.root is None or recorded.blob is None:
            return None
        tracked = self._tracked.get(self.root.real)
        if tracked is None:
            tracked = self._tracked[self.root.real] = repo.tracked()
        for path in tracked.get(recorded.blob, []):
            if path != row.path and self._holds(path, row):
                return path
        return None

    def _holds(self, path: str, row: FileRow) -> bool:
        assert self.root is not None
        try:
            fd = open_regular(self.root, path)
        except Refused:
            return False
        try:
            digest = hash_fd(fd, sha256=False, limit=row.size)
        finally:
            os.close(fd)
        return digest.size == row.size and digest.xxh3 == row.xxh3

    def _current(self, rel: str) -> tuple[bytes | None, bool]:
        """The file's bytes now (None when it cannot be read), and whether it is too large."""
        if self.root is None:
            return None, False
        try:
            fd = open_regular(self.root, rel)
        except Refused:
            return None, False
        try:
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = stream.read(DIFF_MAX_BYTES + 1)
        except OSError:
            return None, False
        finally:
            os.close(fd)
        if len(data) > DIFF_MAX_BYTES:
            return None, True
        return data, False

    def _git(self) -> GitRepo | None:
        if self.root is None:
            return None
        if self.root.real not in self._repos:
            self._repos[self.root.real] = GitRepo.at(self.root)
        return self._repos[self.root.real]


def stale_changes(
    finder: ChangeFinder,
    entries: Sequence[StaleEntry],
    files: Mapping[int, Sequence[FileRow]],
    roots: Mapping[int, Root | None],
) -> dict[int, list[CheckedFile]]:
    """The files of each stale memo of a report, described (by memo id, in the report's order)."""
    described: dict[int, list[CheckedFile]] = {}
    for entry in entries:
        changed, missing = set(entry.changed), set(entry.missing)
        described[entry.id] = finder.check(
            roots[entry.id],
            [
                (
                    f,
                    "changed"
                    if f.path in changed
                    else "missing"
                    if f.path in missing
                    else "unchanged",
                )
                for f in files.get(entry.id, ())
            ],
        )
    return described
