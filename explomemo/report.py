"""How results look to people and CI: tables, Markdown, GitHub annotations, progress.

Pure functions from result models to text, and a progress bar that appears
on a terminal's stderr only when a check takes longer than a moment. Rich is
imported only where a table or a bar is drawn.
"""

from __future__ import annotations

import io
import re
import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from explomemo.models import MemoDetail, MemoSummary, RecallResult, StaleReport, to_json
from explomemo.printable import block, no_workflow_commands, one_line

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

STALE_FORMATS = ("table", "json", "github", "markdown")


def _render(renderable: Any, width: int | None = None) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 100,
        force_terminal=False,
        color_system=None,
        highlight=False,
        soft_wrap=False,
    )
    console.print(renderable)
    return buffer.getvalue().rstrip("\n")


def _cell(text: str) -> Any:
    """A table cell showing ``text`` as it is: escaped, and never read as Rich markup."""
    from rich.text import Text

    return Text(one_line(text))


def stale_table(report: StaleReport) -> str:
    """The stale report as a plain-text table, with a summary line."""
    if not report.stale:
        return f"All {report.checked} memos are fresh."
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("id", "project", "question", "changed", "missing"):
        table.add_column(column, overflow="fold")
    for entry in report.stale:
        table.add_row(
            str(entry.id),
            _cell(entry.project),
            _cell(entry.question),
            _paths_cell(entry.changed),
            _paths_cell(entry.missing),
        )
    summary = f"{len(report.stale)} of {report.checked} memos are stale."
    return no_workflow_commands(_render(table, width=120) + "\n" + summary)


def _paths_cell(paths: Sequence[str]) -> Any:
    from rich.text import Text

    return Text("\n".join(one_line(path) for path in paths))


def stale_json(report: StaleReport) -> str:
    """The stale report as JSON: the tool's shape, each entry with its project."""
    return to_json(report)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def stale_github(report: StaleReport) -> str:
    """GitHub Actions workflow commands: a warning on each changed file of a stale memo."""
    lines: list[str] = []
    for entry in report.stale:
        title = _escape_property(f"explomemo: memo {entry.id} is stale")
        # block(): no escape sequence reaches a terminal (a pre-commit hook
        # prints this format there); new lines are %-escaped below.
        about = block(f'memo {entry.id} ({entry.project}) "{entry.question}"')
        for path in map(block, entry.changed):
            lines.append(
                f"::warning file={_escape_property(path)},title={title}::"
                + _escape_data(
                    f"{path} changed since {about} was recorded: re-read it"
                    " and record the memo again, or forget it"
                )
            )
        for path in map(block, entry.missing):
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


def stale_markdown(report: StaleReport) -> str:
    """The stale report as a Markdown table (for a PR comment or a job summary)."""
    if not report.stale:
        return f"All {report.checked} explomemo memos are fresh."
    lines = [
        f"**{len(report.stale)} of {report.checked} explomemo memos are stale.**",
        "",
        "| id | project | question | changed | missing |",
        "|---:|---|---|---|---|",
    ]
    for e in report.stale:
        changed = "<br>".join(_md_code(p) for p in e.changed)
        missing = "<br>".join(_md_code(p) for p in e.missing)
        lines.append(
            f"| {e.id} | {_md_cell(e.project)} | {_md_cell(e.question)} | {changed} | {missing} |"
        )
    return no_workflow_commands("\n".join(lines))


def format_stale(report: StaleReport, fmt: str) -> str:
    """The stale report in one of STALE_FORMATS."""
    return {
        "table": stale_table,
        "json": stale_json,
        "github": stale_github,
        "markdown": stale_markdown,
    }[fmt](report)


def recall_text(result: RecallResult) -> str:
    """Recalled memos as a readable list."""
    if not result.matches:
        return no_workflow_commands(
            f"No memo of {one_line(repr(result.project))} matches {one_line(repr(result.query))}."
        )
    blocks: list[str] = []
    for m in result.matches:
        head = (
            f"#{m.id} [{m.status}] {one_line(m.question)}  (score {m.score:.2f}, by {m.matched_by})"
        )
        files = "\n".join(f"    {f.state:<9} {one_line(f.path)}" for f in m.files)
        blocks.append(f"{head}\n  {block(m.conclusion)}\n  files:\n{files}")
    note = "" if result.semantic_index else "\n(found by words only: no embedding model)"
    return no_workflow_commands("\n\n".join(blocks) + note)


def list_table(memos: Sequence[MemoSummary]) -> str:
    """Memos as a plain-text table."""
    if not memos:
        return "No memos."
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("id", "project", "question", "files", "recorded_at"):
        table.add_column(column, overflow="fold")
    for m in memos:
        table.add_row(str(m.id), _cell(m.project), _cell(m.question), str(m.files), m.recorded_at)
    return no_workflow_commands(_render(table, width=120))


def show_text(memo: MemoDetail) -> str:
    """One memo in full."""
    files = "\n".join(
        f"  {f.state:<9} {one_line(f.path)}  sha256 {f.sha256}  {f.size} B" for f in memo.files
    )
    return no_workflow_commands(
        f"memo {memo.id} [{memo.status}]  project {one_line(memo.project)}\n"
        f"question: {one_line(memo.question)}\n"
        f"recorded: {memo.recorded_at} in {one_line(memo.root)}\n\n"
        f"{block(memo.conclusion)}\n\nfiles:\n{files}"
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
