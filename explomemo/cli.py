"""The ``explomemo`` command: parse, call the library, print.

:func:`main` is the one place that turns errors into exit codes: an
:class:`~explomemo.errors.ExplomemoError` or a usage error becomes exit code 2
and one line on stderr. ``stale``, ``list`` and ``show`` import neither
fastembed, onnxruntime nor the MCP SDK, so they start fast.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from explomemo.errors import ExplomemoError

if TYPE_CHECKING:
    from explomemo.memos import MemoCache

EXIT_OK = 0
EXIT_STALE = 1
EXIT_ERROR = 2


class StaleFound(Exception):
    """``stale --check`` found stale memos: exit code 1."""


@contextmanager
def _cache(ctx: click.Context, with_model: bool) -> Iterator[MemoCache]:
    from explomemo.memos import FixedModel, MemoCache

    model = FixedModel(None)
    if with_model:
        from explomemo.embeddings import load_embedder
        from explomemo.errors import ModelError

        try:
            model = FixedModel(load_embedder())
        except ModelError as exc:
            click.echo(f"explomemo: warning: {exc}; searching by words only", err=True)
    with MemoCache.open(ctx.obj["db"], model) as cache:
        yield cache


class ExplomemoGroup(click.Group):
    """The command group, and the one place where errors become exit codes."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> int:
        """Run a command; exit (or, not standalone, return) 0, 1 or 2."""
        code = self._run(args, prog_name or "explomemo", complete_var, **extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def _run(
        self, args: Sequence[str] | None, prog_name: str, complete_var: str | None, **extra: Any
    ) -> int:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except StaleFound:
            return EXIT_STALE
        except ExplomemoError as exc:
            click.echo(f"explomemo: error: {exc}", err=True)
            return EXIT_ERROR
        except click.exceptions.Abort:
            click.echo("explomemo: error: aborted", err=True)
            return EXIT_ERROR
        except click.ClickException as exc:
            hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                hint = f" (see {exc.ctx.command_path} --help)"
            click.echo(f"explomemo: error: {exc.format_message()}{hint}", err=True)
            return EXIT_ERROR
        return result if isinstance(result, int) else EXIT_OK


@click.group(cls=ExplomemoGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="explomemo")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="EXPLOMEMO_DB",
    help="Database file (default: $EXPLOMEMO_DB, or explomemo.db in the user data directory).",
)
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """Remember what was learned about a codebase, keyed by the SHA-256 of every file read."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


@cli.command()
def serve() -> None:
    """Run the MCP server on stdio."""
    from explomemo.server import run

    run(click.get_current_context().obj["db"])


@cli.command()
@click.option("--project", required=True, help="Project name (1 to 200 characters).")
@click.option("--root", help="Absolute project directory (default: the current directory).")
@click.option("--question", required=True, help="The structural question answered.")
@click.option("--conclusion", required=True, help="The answer, as the agent concluded it.")
@click.argument("files", nargs=-1, required=True)
@click.pass_context
def record(
    ctx: click.Context,
    project: str,
    root: str | None,
    question: str,
    conclusion: str,
    files: tuple[str, ...],
) -> None:
    """Record a conclusion with the SHA-256 of FILES; prints the result JSON."""
    from explomemo.models import to_json

    with _cache(ctx, with_model=True) as cache:
        result = cache.record(
            question=question, conclusion=conclusion, files=list(files), project=project, root=root
        )
    click.echo(to_json(result))


@cli.command()
@click.option("--project", required=True, help="Project name.")
@click.option("--root", help="Absolute project directory (default: the current directory).")
@click.option("--limit", type=click.IntRange(1, 20), default=5, show_default=True)
@click.option("--include-stale/--fresh-only", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON.")
@click.argument("query")
@click.pass_context
def recall(
    ctx: click.Context,
    project: str,
    root: str | None,
    limit: int,
    include_stale: bool,
    as_json: bool,
    query: str,
) -> None:
    """Find memos of a project relevant to QUERY, each marked fresh or stale."""
    from explomemo.models import to_json
    from explomemo.report import recall_text

    with _cache(ctx, with_model=True) as cache:
        result = cache.recall(
            query=query, project=project, root=root, limit=limit, include_stale=include_stale
        )
    click.echo(to_json(result) if as_json else recall_text(result))


@cli.command()
@click.option("--project", help="Only this project's memos.")
@click.option(
    "--root",
    help="Check every memo against this directory (default: each memo's recorded root;"
    " with --from, the current directory).",
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Check an export file (JSON Lines) instead of the database.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "github", "markdown"]),
    default="table",
    show_default=True,
)
@click.option("--check", is_flag=True, help="Exit 1 when any memo is stale.")
@click.pass_context
def stale(
    ctx: click.Context,
    project: str | None,
    root: str | None,
    from_file: Path | None,
    fmt: str,
    check: bool,
) -> None:
    """Report memos whose files changed or vanished."""
    from explomemo.report import StderrProgress, format_stale

    with_diffs = fmt in ("github", "markdown")
    changes = None
    with StderrProgress("checking files") as progress:
        if from_file is not None:
            from explomemo.exchange import export_changes, read_export, stale_from_export

            memos = read_export(from_file)
            if project is not None:
                memos = [m for m in memos if m.project == project]
            report = stale_from_export(memos, root, progress=progress)
            if with_diffs:
                changes = export_changes(memos, report, root)
        else:
            with _cache(ctx, with_model=False) as cache:
                cache.validator.progress = progress
                report = cache.stale_report(project=project, root=root)
                if with_diffs:
                    changes = cache.stale_changes(report, root)
    click.echo(format_stale(report, fmt, changes))
    if check and report.stale:
        raise StaleFound


@cli.command(name="list")
@click.option("--project", help="Only this project's memos.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_memos(ctx: click.Context, project: str | None, as_json: bool) -> None:
    """List memos without re-hashing their files."""
    from explomemo.models import to_json
    from explomemo.report import list_table

    with _cache(ctx, with_model=False) as cache:
        memos = cache.list(project=project)
    click.echo(to_json(memos) if as_json else list_table(memos))


@cli.command()
@click.argument("memo_id", metavar="ID", type=int)
@click.option("--root", help="Check files against this directory (default: the recorded root).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def show(ctx: click.Context, memo_id: int, root: str | None, as_json: bool) -> None:
    """Show one memo in full, with the state of each file and what changed."""
    from explomemo.models import to_json
    from explomemo.report import show_text

    with _cache(ctx, with_model=False) as cache:
        memo = cache.show(memo_id, root=root)
    click.echo(to_json(memo) if as_json else show_text(memo))


@cli.command()
@click.argument("memo_id", metavar="ID", type=int)
@click.option("--root", help="Compare with this directory (default: the recorded root).")
@click.pass_context
def diff(ctx: click.Context, memo_id: int, root: str | None) -> None:
    """Show what changed in each file of a memo since it was recorded (colour on a terminal)."""
    import os

    from explomemo.diffs import NO_LIMITS
    from explomemo.report import diff_text

    with _cache(ctx, with_model=False) as cache:
        memo = cache.show(memo_id, root=root, limits=NO_LIMITS)
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    click.echo(diff_text(memo, colour=colour), color=colour)


@cli.command()
@click.argument("memo_id", metavar="ID", type=int)
@click.pass_context
def forget(ctx: click.Context, memo_id: int) -> None:
    """Delete one memo."""
    from explomemo.models import to_json

    with _cache(ctx, with_model=False) as cache:
        result = cache.forget(project=None, memo_id=memo_id)
    click.echo(to_json(result))


@cli.command()
@click.option("--project", help="Only this project's memos.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of stdout.",
)
@click.pass_context
def export(ctx: click.Context, project: str | None, output: Path | None) -> None:
    """Write memos as deterministic JSON Lines, sorted by project then id."""
    from explomemo.exchange import export_memos

    with _cache(ctx, with_model=False) as cache:
        text = "".join(line + "\n" for line in export_memos(cache, project))
    if output is None:
        click.echo(text, nl=False)
        return
    from explomemo.exchange import write_export

    write_export(output, text)


@cli.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--root",
    help="The imported memos' root (default: the root an old export names, else the current"
    " directory).",
)
@click.pass_context
def import_file(ctx: click.Context, file: Path, root: str | None) -> None:
    """Merge an export: for the same project and question, the newer memo is kept."""
    from explomemo.exchange import import_memos, read_export
    from explomemo.models import to_json

    memos = read_export(file)
    with _cache(ctx, with_model=False) as cache:
        result = import_memos(cache, memos, root)
    click.echo(to_json(result))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 stale found by --check, 2 error)."""
    code: int = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    return code


if __name__ == "__main__":
    sys.exit(main())
