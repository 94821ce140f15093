"""The ``explomemo`` command: parse, call the library, print.

:func:`main` is the one place that turns errors into exit codes: an
:class:`~explomemo.errors.ExplomemoError` or a usage error becomes exit code 2
and one line on stderr. The parser is the standard library's argparse and
every command imports what it uses when it runs: ``stale``, ``list``,
``show`` and ``hook`` must start within a few times ``python -c pass``, and
importing Click alone costs about one ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from explomemo import __version__
from explomemo.errors import ExplomemoError, OutputError
from explomemo.inputs import check_switches

if TYPE_CHECKING:
    from pathlib import Path

    from explomemo.memos.cache import MemoCache
    from explomemo.recall.embeddings import Embedder

EXIT_OK = 0
EXIT_STALE = 1
EXIT_ERROR = 2

STALE_FORMATS = ("table", "json", "github", "markdown")
HOOK_EVENTS = ("session-start", "prompt", "stop", "delegate", "subagent-stop")
CLIENTS = ("claude-code", "cursor", "codex")
PROJECT_HELP = (
    "Project name (default: $EXPLOMEMO_PROJECT, else the repository's name, else the"
    " root folder's name)."
)


class UsageError(Exception):
    """The command line itself is wrong (unknown option, missing argument, bad value)."""


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, sized without importing shutil.

    argparse builds a formatter for every argument it adds, and the default
    one imports shutil (and with it bz2, lzma and zlib) to size the terminal.
    """

    def __init__(self, prog: str) -> None:
        try:
            width = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size().columns
        except (ValueError, OSError):
            width = 80
        super().__init__(prog, width=max(40, width - 2))


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are raised, not printed with the usage."""

    def __init__(self, **options: Any) -> None:
        super().__init__(formatter_class=_Formatter, allow_abbrev=False, **options)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _echo(text: str) -> None:
    from explomemo import stdout

    stdout.write(text + "\n")


def _err(text: str) -> None:
    """One line on stderr, with anything a terminal or a CI runner would act on escaped."""
    from explomemo.printable import message

    sys.stderr.write(message(f"explomemo: {text}") + "\n")


@contextmanager
def _cache(db: Path | None, with_model: bool, create: bool = True) -> Iterator[MemoCache]:
    """The memo cache of ``db``; a command that only reads passes ``create`` False, so a
    misspelt path is refused, not created."""
    from explomemo.memos.cache import MemoCache
    from explomemo.recall.sources import FixedModel, LazyModel, ModelSource

    model: ModelSource = FixedModel(None)
    if with_model:
        from explomemo.recall.embeddings import model_id

        model = LazyModel(model_id(), _load_model)
    with MemoCache.open(db, model, create=create) as cache:
        yield cache


def _load_model() -> Embedder | None:
    """The model, or None (with a warning) when it cannot be loaded."""
    from explomemo.errors import ModelError
    from explomemo.recall.embeddings import load_embedder

    try:
        return load_embedder()
    except ModelError as exc:
        _err(f"warning: {exc}; searching by words only")
        return None


# Commands ------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from explomemo.server.tools import run

    run(args.db)
    return EXIT_OK


def _record(args: argparse.Namespace) -> int:
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=True) as cache:
        result = cache.record(
            question=args.question,
            conclusion=args.conclusion,
            files=list(args.files),
            project=args.project,
            root=args.root,
        )
    _echo(to_json(result))
    return EXIT_OK


def _recall(args: argparse.Namespace) -> int:
    from explomemo.cli.report import recall_text
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=True, create=False) as cache:
        result = cache.recall(
            query=args.query,
            project=args.project,
            root=args.root,
            limit=args.limit,
            include_stale=args.include_stale,
        )
    _echo(to_json(result) if args.json else recall_text(result))
    return EXIT_OK


def _stale(args: argparse.Namespace) -> int:
    from explomemo.cli.report import StderrProgress, format_stale, table_width

    with_diffs = args.format in ("github", "markdown")
    limits = None
    if args.format == "github":
        from explomemo.changes.diffs import NO_LIMITS

        # No diff is printed, and each annotation needs its whole diff's first changed line.
        limits = NO_LIMITS
    changes = None
    folders = None
    with StderrProgress("checking files") as progress:
        if args.from_file is not None:
            from explomemo.memos.exchange import (
                export_changes,
                read_export,
                repo_folders,
                stale_from_export,
            )

            skipped: list[str] = []
            memos = read_export(args.from_file, skipped)
            for warning in skipped:
                _err(f"warning: {warning}")
            report = stale_from_export(
                memos,
                args.root,
                progress,
                project=args.project,
                source=args.from_file,
                require_memos=args.check,
            )
            if with_diffs:
                changes = export_changes(memos, report, args.root, limits)
            folders = repo_folders(memos)
        else:
            with _cache(args.db, with_model=False, create=False) as cache:
                report = cache.stale_report(
                    project=args.project,
                    root=args.root,
                    progress=progress,
                    require_memos=args.check,
                )
                if with_diffs:
                    changes = cache.stale_changes(report, args.root, limits)
    _echo(format_stale(report, args.format, changes, folders, table_width()))
    return EXIT_STALE if args.check and report.stale else EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from explomemo.cli.report import list_table, table_width
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=False, create=False) as cache:
        memos = cache.list(project=args.project, origin=args.origin)
    _echo(to_json(memos) if args.json else list_table(memos, table_width()))
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    from explomemo.cli.report import show_text
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=False, create=False) as cache:
        memo = cache.show(args.id, root=args.root)
    _echo(to_json(memo) if args.json else show_text(memo))
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    from explomemo.changes.diffs import NO_LIMITS
    from explomemo.cli.report import diff_text

    with _cache(args.db, with_model=False, create=False) as cache:
        memo = cache.show(args.id, root=args.root, limits=NO_LIMITS, served=False)
    from explomemo.stdout import takes_colour

    _echo(diff_text(memo, colour=takes_colour()))
    return EXIT_OK


def _stats(args: argparse.Namespace) -> int:
    from explomemo.cli.report import stats_table, table_width
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=False, create=False) as cache:
        stats = cache.stats(project=args.project)
    _echo(to_json(stats) if args.json else stats_table(stats, table_width()))
    return EXIT_OK


def _forget(args: argparse.Namespace) -> int:
    from explomemo.shapes import to_json

    with _cache(args.db, with_model=False) as cache:
        result = cache.forget(memo_id=args.id, any_project=True)
    _echo(to_json(result))
    return EXIT_OK


def _scrub(args: argparse.Namespace) -> int:
    from explomemo.memos.scrub import scrub
    from explomemo.printable import one_line

    with _cache(args.db, with_model=False, create=False) as cache:
        result = scrub(cache.store)
    for memo in result.memos:
        what = ", ".join(dict.fromkeys(memo.kinds))
        if memo.forgotten_for is None:
            _echo(f"memo {memo.id} ({one_line(memo.project)}): redacted {what}")
        else:
            _echo(
                f"memo {memo.id} ({one_line(memo.project)}): forgotten (held {what}; once"
                f" redacted, its question is memo {memo.forgotten_for}'s)"
            )
    if result.snapshots:
        plural = "s" if result.snapshots != 1 else ""
        _echo(f"deleted {result.snapshots} snapshot{plural} of files that hold secrets")
    if not result.memos and not result.snapshots:
        _echo("Nothing to scrub: no memo or snapshot holds a secret.")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from explomemo.inputs import AGENT
    from explomemo.memos.exchange import export_line, exported_memos, write_export

    with _cache(args.db, with_model=False, create=False) as cache:
        memos = list(exported_memos(cache, args.project, args.origin))
    text = "".join(export_line(memo) + "\n" for memo in memos)
    if args.output is None or str(args.output) == "-":
        from explomemo import stdout

        stdout.write_whole(text, "the export", "write it with -o FILE")
    else:
        write_export(args.output, text)
    captured = sum(memo.origin != AGENT for memo in memos)
    if captured:
        _err(
            f"wrote {captured} captured memo{'' if captured == 1 else 's'} (origin transcript"
            " or subagent: users' prompts, delegated prompts and agents' answers); leave them"
            " out with --origin agent"
        )
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from explomemo.cli.report import import_text
    from explomemo.memos.exchange import import_memos, read_for_import
    from explomemo.shapes import to_json

    skipped: list[str] = []
    memos = read_for_import(args.file, skipped)
    for warning in skipped:
        _err(f"warning: {warning}")
    with _cache(args.db, with_model=False) as cache:
        result = import_memos(cache, memos, args.root)
    _echo(to_json(result) if args.json else import_text(result, args.file))
    return EXIT_OK


def _index(args: argparse.Namespace) -> int:
    from explomemo.cli.report import StderrProgress
    from explomemo.errors import ModelError
    from explomemo.memos.cache import MemoCache
    from explomemo.recall.embeddings import load_embedder
    from explomemo.recall.sources import FixedModel

    embedder = load_embedder()
    if embedder is None:
        raise ModelError(
            "embeddings are off (EXPLOMEMO_EMBEDDINGS), so there are no vectors to compute:"
            " unset EXPLOMEMO_EMBEDDINGS to index"
        )
    with (
        MemoCache.open(args.db, FixedModel(embedder)) as cache,
        StderrProgress("computing vectors") as progress,
    ):
        done = cache.fill_embeddings(embedder, project=args.project, progress=progress)
    _echo(f"Computed the vectors of {done} memo{'s' if done != 1 else ''}.")
    return EXIT_OK


def _hook(args: argparse.Namespace) -> int:
    from explomemo.clients.hooks.run import run_hook

    return run_hook(
        args.event,
        db=args.db,
        project=args.project,
        capture=not args.no_capture,
        remind=args.remind,
        delegation=not args.no_delegation,
    )


def _setup(args: argparse.Namespace) -> int:
    from explomemo.clients.setup import setup

    for line in setup(
        args.client,
        db=args.db,
        project=args.project,
        root=args.root,
        dry_run=args.dry_run,
        capture=args.capture,
        remind=args.remind,
        delegation=args.delegation,
    ):
        _echo(line)
    return EXIT_OK


# The parser -----------------------------------------------------------------


def _path(value: str) -> Path:
    from pathlib import Path

    if not value:
        # Path("") is the current directory: never what an empty word meant.
        raise argparse.ArgumentTypeError("the path is empty: pass a file path")
    return Path(value)


def _project(value: str) -> str:
    from explomemo.errors import InputError
    from explomemo.projects import project_name

    try:
        return project_name(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit(value: str) -> int:
    from explomemo.errors import InputError
    from explomemo.inputs import check_limit

    try:
        return check_limit(int(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memo_id(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a memo id (a whole number)") from None


def _record_arguments(sub: argparse.ArgumentParser) -> None:
    _project_option(sub)
    _root_option(sub, CWD_ROOT)
    sub.add_argument("--question", required=True, help="The structural question answered.")
    sub.add_argument("--conclusion", required=True, help="The answer, as concluded.")
    sub.add_argument("files", nargs="+", metavar="FILE", help="Every file read to conclude.")


def _recall_arguments(sub: argparse.ArgumentParser) -> None:
    from explomemo import inputs

    _project_option(sub)
    _root_option(sub, CWD_ROOT)
    sub.add_argument(
        "--limit",
        type=_limit,
        default=inputs.DEFAULT_LIMIT,
        help=f"1 to {inputs.MAX_LIMIT} (default: {inputs.DEFAULT_LIMIT}).",
    )
    stale_choice = sub.add_mutually_exclusive_group()
    stale_choice.add_argument(
        "--include-stale",
        dest="include_stale",
        action="store_true",
        default=True,
        help="Also return stale memos (the default).",
    )
    stale_choice.add_argument(
        "--fresh-only", dest="include_stale", action="store_false", help="Only fresh memos."
    )
    sub.add_argument("--json", action="store_true", help="Print the result JSON.")
    sub.add_argument("query", metavar="QUERY")


def _stale_arguments(sub: argparse.ArgumentParser) -> None:
    _project_option(sub, "Only this project's memos (default: every project).")
    _root_option(
        sub,
        "Check every memo against this directory (default: each memo's recorded root;"
        " with --from, the current directory).",
    )
    sub.add_argument(
        "--from",
        dest="from_file",
        type=_path,
        metavar="FILE",
        help="Check an export file (JSON Lines) instead of the database.",
    )
    sub.add_argument("--format", choices=STALE_FORMATS, default="table", help="(default: table)")
    sub.add_argument("--check", action="store_true", help="Exit 1 when any memo is stale.")


def _list_arguments(sub: argparse.ArgumentParser) -> None:
    _project_option(sub, "Only this project's memos (default: every project).")
    _origin_option(sub)
    sub.add_argument("--json", action="store_true", help="Print JSON.")


def _show_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("id", type=_memo_id, metavar="ID")
    _root_option(sub, "Check files against this directory (default: the recorded root).")
    sub.add_argument("--json", action="store_true", help="Print JSON.")


def _diff_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("id", type=_memo_id, metavar="ID")
    _root_option(sub, "Compare with this directory (default: the recorded root).")


def _forget_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("id", type=_memo_id, metavar="ID")


def _export_arguments(sub: argparse.ArgumentParser) -> None:
    _project_option(sub, "Only this project's memos (default: every project).")
    _origin_option(sub)
    sub.add_argument(
        "-o",
        "--output",
        type=_path,
        metavar="FILE",
        help="Write to FILE (replaced whole, keeping its permissions) instead of stdout;"
        " - is stdout.",
    )


def _import_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("file", type=_path, metavar="FILE")
    sub.add_argument("--json", action="store_true", help="Print the counts as JSON.")
    _root_option(
        sub,
        "The imported memos' root (default: the current directory; memos recorded below the"
        " top of their work tree go below the top of this one).",
    )


def _index_arguments(sub: argparse.ArgumentParser) -> None:
    _project_option(sub, "Only this project's memos (default: every project's).")


def _hook_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("event", choices=HOOK_EVENTS, metavar="|".join(HOOK_EVENTS))
    _project_option(sub)
    sub.add_argument(
        "--no-capture",
        action="store_true",
        help="stop, subagent-stop: never record the turn or the delegated run itself (as"
        " setup --no-capture writes it).",
    )
    sub.add_argument(
        "--remind",
        action="store_true",
        help="stop: ask the agent once to record after a turn that changed files and read"
        " several, unless EXPLOMEMO_REMIND is off (as setup --remind writes it).",
    )
    sub.add_argument(
        "--no-delegation",
        action="store_true",
        help="delegate: let every delegated run through untouched (as setup --no-delegation"
        " writes it).",
    )


def _setup_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("client", choices=CLIENTS, metavar="|".join(CLIENTS))
    _project_option(sub)
    _root_option(
        sub,
        "The project folder to set up (default: the top of the current git work tree,"
        " else the current directory).",
    )
    sub.add_argument(
        "--dry-run", action="store_true", help="Show the change as a diff; write nothing."
    )
    sub.add_argument(
        "--capture",
        action=argparse.BooleanOptionalAction,
        help="Claude Code: --no-capture writes the Stop and SubagentStop hooks so that they"
        " never record a turn or a delegated run themselves; --capture takes that away"
        " (default: as the earlier setup wrote it).",
    )
    sub.add_argument(
        "--remind",
        action=argparse.BooleanOptionalAction,
        help="Claude Code: --remind writes the Stop hook so that it asks the agent once to"
        " record after a turn that changed files and read several; --no-remind takes that"
        " away (default: as the earlier setup wrote it; else no reminder).",
    )
    sub.add_argument(
        "--delegation",
        action=argparse.BooleanOptionalAction,
        help="Claude Code: --no-delegation writes the delegate hook (PreToolUse on Agent|Task)"
        " so that it lets every delegated run through untouched; --delegation takes that away"
        " (default: as the earlier setup wrote it; else delegations are answered from memos).",
    )


def _origin_option(sub: argparse.ArgumentParser) -> None:
    from explomemo.inputs import ORIGINS

    sub.add_argument(
        "--origin",
        choices=ORIGINS,
        help="Only memos of this origin: agent (recorded), transcript (captured by the"
        " Stop hook) or subagent (captured from a delegated run).",
    )


def _project_option(sub: argparse.ArgumentParser, text: str = PROJECT_HELP) -> None:
    sub.add_argument("--project", type=_project, help=text)


def _root_option(sub: argparse.ArgumentParser, text: str) -> None:
    sub.add_argument("--root", help=text)


CWD_ROOT = "Absolute project directory (default: the current directory)."

#: Each command: what runs it, its help, and what adds its arguments.
COMMANDS: dict[
    str,
    tuple[Callable[[argparse.Namespace], int], str, Callable[[argparse.ArgumentParser], None]],
] = {
    "serve": (_serve, "Run the MCP server on stdio.", lambda sub: None),
    "record": (_record, "Record a conclusion with the SHA-256 of FILES.", _record_arguments),
    "recall": (
        _recall,
        "Find memos relevant to QUERY, each fresh or stale.",
        _recall_arguments,
    ),
    "stale": (_stale, "Report memos whose files changed or vanished.", _stale_arguments),
    "list": (_list, "List memos without re-hashing their files.", _list_arguments),
    "show": (
        _show,
        "Show one memo in full, with the state of each file and what changed.",
        _show_arguments,
    ),
    "diff": (
        _diff,
        "Show what changed in each file of a memo since it was recorded (colour on a terminal).",
        _diff_arguments,
    ),
    "forget": (_forget, "Delete one memo (of whichever project holds it).", _forget_arguments),
    "stats": (
        _stats,
        "Count memos (fresh, stale, by origin), the memos served and the reading they spared.",
        _list_arguments,
    ),
    "scrub": (
        _scrub,
        "Redact the secrets stored memos hold and delete the snapshots of files that hold secrets.",
        lambda sub: None,
    ),
    "export": (
        _export,
        "Write memos as JSON Lines, sorted by project then id.",
        _export_arguments,
    ),
    "import": (
        _import,
        "Merge an export: the newer memo of a question is kept.",
        _import_arguments,
    ),
    "index": (
        _index,
        "Compute the vectors of the memos without them (a server does it by itself).",
        _index_arguments,
    ),
    "hook": (
        _hook,
        "A Claude Code hook: reads the hook's JSON on stdin, answers on stdout.",
        _hook_arguments,
    ),
    "setup": (
        _setup,
        "Register the MCP server (and, for Claude Code, the hooks) with a client.",
        _setup_arguments,
    ),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only`` (a command), just that command's parser.

    argparse builds a parser for each command (and looks up translations of
    its texts on disk each time): all of them cost a short command a tenth
    of its start-up. Parsing a command's words gives the same result with
    only its parser, so :func:`main` builds the rest only for help, errors
    about the command word, and ``--version``.
    """
    parser = _Parser(
        prog="explomemo",
        description="Remember what was learned about a codebase, keyed by the SHA-256 of every"
        " file read.",
    )
    parser.add_argument("--version", action="version", version=f"explomemo {__version__}")
    parser.add_argument(
        "--db",
        type=_path,
        help="Database file (default: $EXPLOMEMO_DB, or explomemo.db in the user data directory);"
        " a leading ~ is expanded.",
    )
    # prog given: working it out imports shutil and sizes the terminal.
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", prog="explomemo", required=True
    )
    for name, (run, text, arguments) in COMMANDS.items():
        if only is None or name == only:
            sub = commands.add_parser(name, help=text, description=text)
            sub.set_defaults(run=run)
            arguments(sub)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first word not an option or --db's value)."""
    words = iter(argv)
    for word in words:
        if word == "--db":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 stale found by --check, 2 error)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(args_list)
    lean = command in COMMANDS and not {"-h", "--help", "--version"} & set(args_list)
    try:
        args = build_parser(command if lean else None).parse_args(args_list)
        if command != "hook":  # a hook says it in its own way (see run_hook)
            check_switches(os.environ)
        code: int = args.run(args)
        return code
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except UsageError as exc:
        _err(f"error: {exc}")
        # A hook that exits 2 blocks the user's prompt in Claude Code: a hook
        # never fails the client, even when its own command line is wrong.
        return EXIT_OK if _command_of(args_list) == "hook" else EXIT_ERROR
    except OutputError as exc:
        # A reader that left (`| head`) is not news to the user: exit 2 quietly, as
        # `stale --check` must not read as "fresh" or "stale" with its output lost.
        if not exc.reader_gone:
            _err(f"error: {exc}")
        return EXIT_ERROR
    except ExplomemoError as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err("error: aborted")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
