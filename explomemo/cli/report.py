"""How results look to people and CI: tables, Markdown, GitHub annotations, progress.

Pure functions from result models to text, and a progress bar that appears
on a terminal's stderr only when a check takes longer than a moment. Rich is
imported only where a bar is drawn, or a table :mod:`explomemo.cli.tables` leaves
to it.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from explomemo.cli.tables import draw
from explomemo.inputs import provenance
from explomemo.printable import block, no_workflow_commands, one_line
from explomemo.shapes import (
    RECALL_CHARS,
    CheckedFile,
    ImportResult,
    MemoDetail,
    MemoSummary,
    RecallResult,
    StaleReport,
    StatsResult,
    SurfaceSavings,
    to_json,
)

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress, TaskID


#: Width of the tables, in terminal cells, when they are not shown on a terminal.
TABLE_WIDTH = 120
#: The narrowest a table is drawn, whatever the terminal: narrower, its columns
#: hold a letter or none (at 5 cells every row is blank), so it wraps instead.
MIN_TABLE_WIDTH = 40


def table_width() -> int:
    """How wide to draw a table: the width of the terminal standard output is (never under
    :data:`MIN_TABLE_WIDTH`), else :data:`TABLE_WIDTH` (a pipe, a file, a CI log)."""
    from explomemo.stdout import terminal_width

    width = terminal_width()
    return TABLE_WIDTH if width is None else max(width, MIN_TABLE_WIDTH)


def stale_table(report: StaleReport, width: int = TABLE_WIDTH) -> str:
    """The stale report as a plain-text table at most ``width`` cells wide, with a
    summary line."""
    if not report.stale:
        return _all_fresh(report.checked, "memos")
    rows = [
        [
            str(entry.id),
            one_line(entry.project),
            one_line(entry.question),
            _paths_cell(entry.changed),
            _paths_cell(entry.missing),
        ]
        for entry in report.stale
    ]
    table = draw(("id", "project", "question", "changed", "missing"), rows, width)
    summary = f"{len(report.stale)} of {report.checked} memos are stale."
    return no_workflow_commands(table + "\n" + summary)


def _paths_cell(paths: Sequence[str]) -> str:
    return "\n".join(one_line(path) for path in paths)


def stale_json(report: StaleReport) -> str:
    """The stale report as JSON: the tool's shape, each entry with its project."""
    return to_json(report)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _all_fresh(checked: int, memos: str) -> str:
    if checked == 0:
        return f"No {memos} to check."
    if checked == 1:
        return f"The one {memos.removesuffix('s')} is fresh."
    return f"All {checked} {memos} are fresh."


def stale_github(
    report: StaleReport,
    changes: Mapping[int, Sequence[CheckedFile]] | None = None,
    folders: Mapping[int, str] | None = None,
) -> str:
    """GitHub Actions workflow commands: a warning on each changed file of a stale memo.

    With ``changes`` (see :meth:`~explomemo.memos.cache.MemoCache.stale_changes`), a
    warning points at the first changed line of the file (``line=``). ``folders``
    holds, by memo id, the folder of the repository a memo's paths are relative
    to (see :func:`~explomemo.memos.exchange.repo_folders`): GitHub places an annotation
    by its path from the repository's top.
    """
    lines: list[str] = []
    for entry in report.stale:
        title = _escape_property(f"explomemo: memo {entry.id} is stale")
        # block(): no escape sequence reaches a terminal (a pre-commit hook
        # prints this format there); new lines are %-escaped below.
        about = block(f'memo {entry.id} ({entry.project}) "{entry.question}"')
        first_lines = {
            f.path: first_changed_line(f.diff) for f in (changes or {}).get(entry.id, ())
        }
        folder = (folders or {}).get(entry.id, "")
        for raw_path in entry.changed:
            path = block(folder + raw_path)
            line = first_lines.get(raw_path)
            at = "" if line is None else f",line={line}"
            lines.append(
                f"::warning file={_escape_property(path)}{at},title={title}::"
                + _escape_data(
                    f"{path} changed since {about} was recorded: re-read it"
                    " and record the memo again, or forget it"
                )
            )
        for path in (block(folder + p) for p in entry.missing):
            lines.append(
                f"::warning title={title}::"
                + _escape_data(
                    f"{path} is missing; {about} rests on it: record the memo again, or forget it"
                )
            )
    lines.append(f"{len(report.stale)} of {report.checked} memos are stale.")
    return "\n".join(lines)


#: Backslash-escaped in Markdown text: what could start a link, an emphasis,
#: HTML, a cell border or (as ``##[``) a workflow command.
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~#"})


def _md_cell(text: str) -> str:
    return one_line(text).translate(_MD_SPECIAL)


def _md_code(text: str) -> str:
    """``text`` as a Markdown code span in a table cell, whatever backticks it holds.

    Inside a code span no escape works, so text holding ``##[`` (a workflow
    command to a CI runner) is escaped text instead.
    """
    shown = one_line(text).replace("|", "\\|")
    if "##[" in shown:
        return _md_cell(text)
    fence = "`" * (max(map(len, re.findall("`+", shown)), default=0) + 1)
    edges = shown[:1] + shown[-1:]
    pad = " " if "`" in edges or (edges == "  " and shown.strip(" ")) else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def stale_markdown(
    report: StaleReport,
    changes: Mapping[int, Sequence[CheckedFile]] | None = None,
    folders: Mapping[int, str] | None = None,
) -> str:
    """The stale report as a Markdown table (for a PR comment or a job summary).

    With ``changes``, each stale memo then gets a collapsible section with its diffs.
    ``folders``: as for :func:`stale_github`, in front of the table's paths.
    """
    if not report.stale:
        return _all_fresh(report.checked, "explomemo memos")
    lines = [
        f"**{len(report.stale)} of {report.checked} explomemo memos are stale.**",
        "",
        "| id | project | question | changed | missing |",
        "|---:|---|---|---|---|",
    ]
    for e in report.stale:
        folder = (folders or {}).get(e.id, "")
        changed = "<br>".join(_md_code(folder + p) for p in e.changed)
        missing = "<br>".join(_md_code(folder + p) for p in e.missing)
        lines.append(
            f"| {e.id} | {_md_cell(e.project)} | {_md_cell(e.question)} | {changed} | {missing} |"
        )
    for e in report.stale:
        files = (changes or {}).get(e.id)
        if files:
            lines += ["", markdown_changes(e.id, files)]
    return no_workflow_commands("\n".join(lines))


def format_stale(
    report: StaleReport,
    fmt: str,
    changes: Mapping[int, Sequence[CheckedFile]] | None = None,
    folders: Mapping[int, str] | None = None,
    width: int = TABLE_WIDTH,
) -> str:
    """The stale report as ``table`` (at most ``width`` cells wide), ``json``, ``github`` or
    ``markdown`` (the choices of ``explomemo stale --format``; ``changes``: diffs, for
    github and markdown; ``folders``: see :func:`stale_github`)."""
    if fmt == "github":
        return stale_github(report, changes, folders)
    if fmt == "markdown":
        return stale_markdown(report, changes, folders)
    return stale_table(report, width) if fmt == "table" else stale_json(report)


# What changed: diffs and moves for people ----------------------------------
#
# Kept apart from the rest so that escaping (or other changes to how text is
# shown) can wrap them in one place.

_NO_DIFF = {
    "unavailable": "no diff: the recorded content is in no snapshot and not in git",
    "too_large": "no diff: over 1 MiB",
}
_HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def change_lines(f: CheckedFile) -> list[str]:
    """What became of one changed or missing file, as plain lines (none for an unchanged one)."""
    if f.state == "changed":
        if f.diff is not None:
            return [one_line(line) for line in f.diff.rstrip("\n").split("\n")]
        return [f"{one_line(f.path)}: changed; {_NO_DIFF.get(f.diff_source or '', 'no diff')}"]
    if f.state == "missing":
        if f.moved_to is not None:
            return [f"{one_line(f.path)}: moved to {one_line(f.moved_to)}"]
        return [f"{one_line(f.path)}: deleted"]
    return []


def changes_lines(memo_id: int, files: Sequence[CheckedFile]) -> list[str]:
    """What became of a memo's changed and missing files, as plain lines; the files
    past the diffs' budget of an answer share one last line."""
    lines = [line for f in files if f.diff_source != "budget" for line in change_lines(f)]
    return lines + _spent_line(memo_id, files)


def _spent_line(memo_id: int, files: Sequence[CheckedFile]) -> list[str]:
    """The line naming how many changed files are past the diffs' budget (none if none)."""
    spent = sum(f.diff_source == "budget" for f in files)
    if not spent:
        return []
    return [
        f"{spent} more changed file{'s' if spent != 1 else ''} without a diff here: the"
        f" diffs are at their limit (explomemo diff {memo_id} shows them all)"
    ]


def first_changed_line(diff: str | None) -> int | None:
    """The line of the current file where a unified diff's first change is (1-based)."""
    if diff is None:
        return None
    line: int | None = None
    last = 1
    for text in diff.split("\n"):
        if line is None:
            found = _HUNK.match(text)
            if found:
                line = int(found.group(1))
                count = 1 if found.group(2) is None else int(found.group(2))
                # Lines deleted at the end come after the hunk's last current line:
                # point at that line (the file's last), or 1 in an empty file.
                last = line + count - 1 if count else line
            continue
        if text.startswith(("+", "-")):
            return max(1, min(line, last))
        if text.startswith(" "):
            line += 1
    return None


_COLOURS = {"@@": "\x1b[36m", "-": "\x1b[31m", "+": "\x1b[32m", "head": "\x1b[1m"}
_RESET = "\x1b[m"


def diff_text(memo: MemoDetail, colour: bool = False) -> str:
    """``explomemo diff``: git-style output of what changed in each file, coloured if asked."""

    def paint(kind: str, text: str) -> str:
        return f"{_COLOURS[kind]}{text}{_RESET}" if colour else text

    out = [f"memo {memo.id} [{memo.status}]: {one_line(memo.question)}"]
    for f in memo.files:
        if f.state == "unchanged":
            continue
        path = one_line(f.path)
        if f.state == "missing" and f.moved_to is not None:
            # As git writes a rename: moved_to holds the recorded content, byte for byte.
            moved = one_line(f.moved_to)
            out += [
                paint("head", f"diff --git a/{path} b/{moved}"),
                paint("head", "similarity index 100%"),
                paint("head", f"rename from {path}"),
                paint("head", f"rename to {moved}"),
            ]
            continue
        out.append(paint("head", f"diff --git a/{path} b/{path}"))
        if f.state == "missing":
            out.append(paint("head", "deleted file"))
            continue
        if f.diff is None:
            out.append(_NO_DIFF.get(f.diff_source or "", "no diff"))
            continue
        # Each line escaped before it is painted: a file's own escape
        # sequences never reach the terminal, only ours do.
        for line in map(one_line, f.diff.rstrip("\n").split("\n")):
            if line.startswith(("--- a/", "+++ b/")):
                out.append(paint("head", line))
            elif line.startswith("@@"):
                out.append(paint("@@", line))
            elif line.startswith(("+", "-")):
                out.append(paint(line[0], line))
            else:
                out.append(line)
    if memo.status == "fresh":
        out.append("Every file is as it was recorded.")
    return no_workflow_commands("\n".join(out))


def markdown_changes(memo_id: int, files: Sequence[CheckedFile]) -> str:
    """A collapsible Markdown section with a stale memo's moves and deletions (a list), then
    its diffs (one ``diff`` block, holding nothing but diffs)."""
    diffs: list[str] = []
    notes: list[str] = []
    for f in files:
        if f.diff_source != "budget":
            shown = diffs if f.state == "changed" and f.diff is not None else notes
            shown += change_lines(f)
    parts = ["\n".join(f"- {_md_cell(note)}" for note in notes + _spent_line(memo_id, files))]
    if diffs:
        body = "\n".join(diffs)
        longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
        fence = "`" * max(3, longest + 1)
        parts.append(f"{fence}diff\n{body}\n{fence}")
    count = sum(f.state != "unchanged" for f in files)
    return (
        f"<details><summary>memo {memo_id}: what changed in {count} file"
        f"{'s' if count != 1 else ''}</summary>\n\n"
        + "\n\n".join(part for part in parts if part)
        + "\n\n</details>"
    )


def recall_text(result: RecallResult) -> str:
    """Recalled memos as a readable list."""
    left_out = result.stale_left_out
    stale = f"{left_out} stale memo{'s' if left_out != 1 else ''}"
    pending = [pending_note(result.pending_vectors)] if result.pending_vectors else []
    if not result.matches:
        if left_out:
            return no_workflow_commands(
                f"No fresh memo of {one_line(repr(result.project))} matches"
                f" {one_line(repr(result.query))}; {stale} matched and"
                f" {'were' if left_out != 1 else 'was'} left out (--fresh-only): recall"
                " without --fresh-only to see what changed since."
            )
        return no_workflow_commands(
            f"No memo of {one_line(repr(result.project))} matches {one_line(repr(result.query))}."
            + "".join(f"\n{n}" for n in pending)
        )
    blocks: list[str] = []
    for m in result.matches:
        head = (
            f"#{m.id} [{m.status}{', imported' if m.imported else ''}] {one_line(m.question)}"
            f"  (score {m.score:.2f}, by {m.matched_by})"
        )
        if m.conclusion is None or m.files is None:
            changed = (m.changed or {}).items()
            blocks.append(head + "".join(f"\n    {one_line(p)}: {c}" for p, c in changed))
            continue
        files = "\n".join(f"    {f.state:<9} {one_line(f.path)}" for f in m.files)
        changes = "".join(f"\n      {line}" for line in changes_lines(m.id, m.files))
        made = provenance(m.origin or "agent", m.imported)
        blocks.append(f"{head}\n  ({made})\n  {block(m.conclusion)}\n  files:\n{files}{changes}")
    no_model = not result.semantic_index and not result.pending_vectors
    notes = ["(found by words only: no embedding model)"] if no_model else []
    notes.extend(pending)
    lean = [m for m in result.matches if not m.whole]
    if lean:
        unclear = "" if result.served_whole else "none clearly answers; "
        diff = ", explomemo diff ID what changed" if any(m.changed for m in lean) else ""
        notes.append(
            f"({unclear}{', '.join(f'#{m.id}' for m in lean)}: question only;"
            f" explomemo show ID gives a memo whole{diff})"
        )
    if left_out:
        notes.append(f"({stale} also matched, left out by --fresh-only)")
    if result.omitted:
        notes.append(
            f"({result.omitted} more match{'es' if result.omitted != 1 else ''} left out to"
            " keep the answer within"
            f" {RECALL_CHARS:,} characters: ask a narrower question to see them)"
        )
    return no_workflow_commands("\n\n".join(blocks) + "".join(f"\n{n}" for n in notes))


def import_text(result: ImportResult, source: Path) -> str:
    """What ``explomemo import`` did, in a line."""
    counts = f"{result.added} added, {result.replaced} replaced, {result.kept} kept"
    kept = " (the database held them as newer, or as an agent's memo)" if result.kept else ""
    return no_workflow_commands(
        f"Read {result.read} memo{'s' if result.read != 1 else ''} from"
        f" {one_line(str(source))}: {counts}{kept}."
    )


def pending_note(count: int) -> str:
    """What a recall says of the ``count`` memos it searched by words only."""
    return (
        f"({count} memo{'s' if count != 1 else ''} searched by words only: their vectors are"
        " being computed by a running server, or by explomemo index)"
    )


def list_table(memos: Sequence[MemoSummary], width: int = TABLE_WIDTH) -> str:
    """Memos as a plain-text table at most ``width`` cells wide."""
    if not memos:
        return "No memos."
    rows = [
        [
            str(m.id),
            one_line(m.project),
            one_line(m.question),
            f"{m.origin}, imported" if m.imported else m.origin,
            str(m.files),
            m.recorded_at,
        ]
        for m in memos
    ]
    headers = ("id", "project", "question", "origin", "files", "recorded_at")
    table = draw(headers, rows, width)
    return no_workflow_commands(table)


def stats_table(stats: StatsResult, width: int = TABLE_WIDTH) -> str:
    """Each project's memos and what serving them spared, as a plain-text table: a surface's
    cell is the memos it served and, in brackets, what they spared (bytes; for delegations,
    tokens, after the count of stale answers when any)."""
    from explomemo.memos.savings import SURFACES, size_text, tokens_text

    if not stats.projects:
        return "No memos."
    rows = [
        [
            one_line(p.project),
            str(p.memos),
            str(p.fresh),
            str(p.stale),
            ", ".join(f"{origin} {count}" for origin, count in p.origins.items()) or "-",
            *(_surface_cell(s) for s in p.surfaces),
            size_text(p.bytes_spared)
            + (f", {tokens_text(p.tokens_spared)}" if p.tokens_spared else ""),
            str(p.sessions),
        ]
        for p in stats.projects
    ]
    headers = ("project", "memos", "fresh", "stale", "origin", *SURFACES, "spared", "sessions")
    return no_workflow_commands(draw(headers, rows, width))


def _surface_cell(savings: SurfaceSavings) -> str:
    """A surface's cell of the stats table: ``2 (700 B)``, ``3, 1 stale (156,000 tokens)``."""
    from explomemo.memos.savings import size_text, tokens_text

    if savings.tokens_spared is None:
        return f"{savings.served} ({size_text(savings.bytes_spared)})"
    stale = f", {savings.stale} stale" if savings.stale else ""
    return f"{savings.served}{stale} ({tokens_text(savings.tokens_spared)})"


def show_text(memo: MemoDetail) -> str:
    """One memo in full."""
    files = "\n".join(
        f"  {f.state:<9} {one_line(f.path)}  sha256 {f.sha256}  {f.size} B" for f in memo.files
    )
    changes = "\n".join(changes_lines(memo.id, memo.files))
    run = [one_line(memo.agent_type)] if memo.agent_type is not None else []
    run += [f"{memo.cost_tokens:,} tokens"] if memo.cost_tokens is not None else []
    return no_workflow_commands(
        f"memo {memo.id} [{memo.status}]  project {one_line(memo.project)}\n"
        f"question: {one_line(memo.question)}\n"
        f"recorded: {memo.recorded_at} in {one_line(memo.root)}"
        f" ({provenance(memo.origin, memo.imported)})\n"
        + (f"run: {', '.join(run)}\n" if run else "")
        + "\n"
        f"{block(memo.conclusion)}\n\nfiles:\n{files}"
        + (f"\n\nwhat changed:\n{changes}" if changes else "")
    )


class StderrProgress:
    """A Rich progress bar on stderr, shown only on a terminal and only after ``delay`` s."""

    def __init__(self, description: str, delay: float = 0.5) -> None:
        self._description = description
        self._delay = delay
        self._start = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        """Report ``done`` of ``total`` files read."""
        if not self._enabled or time.monotonic() - self._start < self._delay:
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(stderr=True), transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=total)
        assert self._task is not None
        self._progress.update(self._task, completed=done, total=total)

    def __enter__(self) -> StderrProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
