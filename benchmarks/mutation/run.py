"""Mutation testing of explomemo's guarding code with mutmut (pinned in requirements.txt).

    python3 benchmarks/mutation/run.py                 # files, validity, inputs, exchange
    python3 benchmarks/mutation/run.py --modules files  # one module
    python3 benchmarks/mutation/run.py --report        # the last run's report again
    python3 benchmarks/mutation/run.py --save-verdicts # keep them in verdicts.json (commit it)
    python3 benchmarks/mutation/run.py --resume        # a new run from there, on any machine

It keeps a venv of its own (``benchmarks/mutation/.venv``: the pinned tool and
this project with its ``[test]`` extra), copies the project's source, tests and
migrations (tracked and untracked files git does not ignore) to
``benchmarks/mutation/work/``, runs ``mutmut run`` there on one worker at
``nice 10``, and prints the score of each module and the diff of every
mutant that survived. Each mutant runs only the tests that call the function
it mutates (mutmut records which tests call which function in a first,
traced run of the suite), fastest first, stopping at the first failure.

The score counts killed and timed-out mutants as caught, out of all mutants
but the ones RESULTS.md lists as equivalent (no test could tell them apart
from the code). See README.md beside this file.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = HERE / ".venv"
WORK = HERE / "work"
REQUIREMENTS = HERE / "requirements.txt"
RESULTS = HERE / "RESULTS.md"
#: The verdicts of the last run, committed: a run can stop with one session and go on
#: with the next (--save-verdicts, --resume).
VERDICTS = HERE / "verdicts.json"
#: What the run mutates: a whole module of explomemo/ by its dotted name, or only some
#: functions of a big one as ``module:function,Class.method`` (each the function
#: and every function whose name starts with it, as mutmut's patterns match).
GUARDING = [
    "files",
    "check.validity",
    "inputs",
    "memos.exchange",
    "changes.snapshots",
    "store.database:Store.collect_snapshots,Store.save_snapshots,Store.snapshot",
    "changes.gitrepo",
    "clients.hooks.run:run_hook,_one_line,_payload",
    "clients.hooks.payload:field,root_of",
    "printable",
]
#: What the copy holds: the package, its tests, and what the tests read besides.
COPIED = [
    "explomemo",
    "tests",
    "migrations",
    "docs",
    "pyproject.toml",
    "README.md",
    # tests/test_redaction.py runs its benchmark, on the project's committed memos too.
    "benchmarks/redaction",
    ".explomemo",
]
#: Left out of a run unless --all-tests: the tests marked slow (the hypothesis
#: state machines, 16 s a run; the crash test; the real races, each racing a
#: thread for 1.5 s: a kill by chance, not by design; and the tests of the store
#: under concurrency and with bad database files, not the logic of the guarding
#: modules). With them a surviving mutant of a function nearly every test calls
#: costs 30-50 s instead of about 10.
LEFT_OUT = [
    "-m",
    "not slow",
    # It checks the docs against the code: it reads the package's source for the
    # variables it uses (under mutmut that source holds the text of every mutant
    # too, "XXEXPLOMEMO_DBXX") and pages the copy does not hold (benchmarks/).
    "--ignore=tests/test_reference.py",
    # They check what a short command imports: mutmut's trampolines, in every
    # mutated module, import inspect and dataclasses themselves.
    "--deselect=tests/cli/test_startup.py::test_fast_commands_do_not_import_heavy_packages",
    "--deselect=tests/cli/test_startup.py::test_tables_are_drawn_without_rich",
]
#: A mutant skips the tests slower than this many seconds (mutmut's measure):
#: they start servers, a terminal or many processes, or run hypothesis, and a
#: survivor runs every test that calls its function, so they would make most
#: of a run's time. The clean run and mutmut's measure still run them.
SLOW_LIMIT = 2.0
#: mutmut stops a mutant after twice this many times the CPU time of its tests:
#: 4 times here (mutmut's default, 30, is minutes per mutant that loops for
#: ever); --timeouts gives 16 times, for mutants a loaded machine timed out.
TIMEOUT_MULTIPLIER = 2.0
SLOW_TIMEOUT_MULTIPLIER = 8.0
#: The statuses a run with --again tests once more: every one that is not caught.
CAUGHT = {"killed", "caught by type check", "timeout"}
EQUIVALENT = re.compile(r"`(explomemo\.[^`\s]+__mutmut_\d+)`")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules",
        nargs="+",
        metavar="NAME",
        help="modules of explomemo/ to mutate, or module:function,Class.method for some"
        f" functions of one (default: {' '.join(GUARDING)}; with --again or --report:"
        " those of the last run)",
    )
    parser.add_argument("--workers", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the run (default 10)")
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more pytest argument for selecting tests, e.g."
        " --pytest-arg=--ignore=tests/check/test_validity.py (repeatable)",
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        default=["tests"],
        metavar="PATH",
        help="test files or folders to run (default: tests)",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="PATH",
        help="leave this test file out of the copy, e.g. tests/check/test_validity.py for the score"
        " without it (repeatable)",
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="keep the last run's verdicts and test again only the mutants it did not"
        " catch, with the tests as they are now (the source must be unchanged)",
    )
    parser.add_argument(
        "--timeouts",
        action="store_true",
        help="with --again, also test again the mutants that timed out, with"
        f" {SLOW_TIMEOUT_MULTIPLIER / TIMEOUT_MULTIPLIER:g} times the time (a loaded machine"
        " can time out a mutant that survives)",
    )
    parser.add_argument(
        "--keep-stats",
        action="store_true",
        help="with --again, keep what mutmut measured of which test calls which function"
        " (it measures only the new tests): saves the measure's time; a test changed since"
        " may then be left out of a mutant's run, so a survivor may be one the tests catch,"
        " never the other way round",
    )
    parser.add_argument(
        "--all-tests",
        action="store_true",
        help="also run the tests marked slow: concurrency, crash, bad databases, races (slower)",
    )
    parser.add_argument(
        "--slow-limit",
        type=float,
        default=SLOW_LIMIT,
        metavar="SECONDS",
        help="a mutant skips the tests that took longer than this when mutmut measured them"
        f" (default {SLOW_LIMIT:g}; 0: none skipped)",
    )
    parser.add_argument(
        "--save-verdicts",
        type=Path,
        nargs="?",
        const=VERDICTS,
        metavar="FILE",
        help="after the run (alone: of the last run), write its verdicts to FILE (default"
        f" {VERDICTS.relative_to(ROOT)}), for --resume to go on from them",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        nargs="?",
        const=VERDICTS,
        metavar="FILE",
        help="a new run that keeps the verdicts saved in FILE (default"
        f" {VERDICTS.relative_to(ROOT)}) and tests only the mutants they leave not caught;"
        " the mutated modules must be as they were when saved",
    )
    parser.add_argument("--report", action="store_true", help="only print the last run's report")
    args = parser.parse_args()
    if Path(sys.prefix).resolve() != VENV.resolve():
        python = ensure_venv()
        os.execv(python, [python, str(Path(__file__).resolve()), *sys.argv[1:]])
    last = WORK / "targets.json"
    if args.resume is not None:
        targets = [(module, patterns) for module, patterns in _saved(args.resume)["targets"]]
    elif (
        args.modules is None and (args.again or args.report or args.save_verdicts) and last.exists()
    ):
        targets = [(module, patterns) for module, patterns in json.loads(last.read_text())]
    else:
        targets = _targets(args.modules)
    only_save = args.save_verdicts is not None and not (args.again or args.resume or args.modules)
    if not args.report and not only_save:
        started = time.monotonic()
        selection = [*args.tests, *([] if args.all_tests else LEFT_OUT), *args.pytest_arg]
        os.environ["MUTATION_SLOW_LIMIT"] = str(args.slow_limit)
        if args.again:
            code = run_again(
                targets, args.workers, args.nice, args.without, args.timeouts, args.keep_stats
            )
        elif args.resume is not None:
            code = resume(args.resume, args.workers, args.nice, selection, args.without)
        else:
            code = run_mutmut(targets, args.workers, args.nice, selection, args.without)
        took = time.monotonic() - started
        if code == 0:
            with open(WORK / "took.txt", "a") as runs:
                runs.write(f"{'again' if args.again else 'run'} {took:.0f}\n")
        if code != 0:
            print(f"mutmut run failed with exit code {code}: see {WORK / 'mutmut.log'}")
            return code
    if args.save_verdicts is not None:
        save_verdicts(targets, args.save_verdicts)
        if only_save:
            return 0
    report(targets)
    return 0


#: A module of explomemo/ and the patterns of the mutant names of it the run
#: tests (mutmut's fnmatch patterns; one for the whole module).
Target = tuple[str, list[str]]


def source_path(module: str) -> Path:
    """The file of a module of explomemo named by its dotted name (``check.validity``)."""
    return Path("explomemo", *module.split(".")).with_suffix(".py")


def _targets(specs: list[str] | None) -> list[Target]:
    """The targets named by ``specs`` (GUARDING when None): see GUARDING."""
    targets: list[Target] = []
    for spec in specs or GUARDING:
        module, _, functions = spec.partition(":")
        if not (ROOT / source_path(module)).is_file():
            raise SystemExit(f"no module {source_path(module)}: name one of explomemo/")
        patterns = [f"explomemo.{module}.*"]
        if functions:
            patterns = [
                f"explomemo.{module}." + (f"x\u01c1{owner}\u01c1{name}*" if owner else f"x_{name}*")
                for owner, _, name in (f.rpartition(".") for f in functions.split(","))
            ]
        targets.append((module, patterns))
    return targets


def _chosen(target: Target, name: str) -> bool:
    """Whether the mutant ``name`` is one the target tests."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in target[1])


def _names(targets: list[Target]) -> list[str]:
    """mutmut's arguments naming the mutants of ``targets``: none when each is a whole module."""
    if all(patterns == [f"explomemo.{module}.*"] for module, patterns in targets):
        return []
    return [pattern for _, patterns in targets for pattern in patterns]


def ensure_venv() -> str:
    """This script's venv with the pinned tool and the project; (re)installed when
    requirements.txt or pyproject.toml changed."""
    python = VENV / "bin" / "python"
    stamp = VENV / "installed.sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    if python.exists() and stamp.exists() and stamp.read_text() == wanted.hexdigest():
        return str(python)
    print(f"setting up {VENV} (mutmut and explomemo[test]) ...", flush=True)
    if not python.exists():
        venv.create(VENV, with_pip=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS), "-e", f"{ROOT}[test]"],
        check=True,
    )
    stamp.write_text(wanted.hexdigest())
    return str(python)


def _copy(paths: list[str], without: list[str], to: Path = WORK) -> None:
    """Copy the project's files under ``paths`` to ``to`` (tracked, and untracked ones
    git does not ignore), leaving out ``without``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    left_out = {str(Path(p)) for p in without}
    for rel in sorted({name for name in listed.decode().split("\0") if name} - left_out):
        source = ROOT / rel
        if source.is_file():
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / rel)


def run_mutmut(
    targets: list[Target],
    workers: int,
    niceness: int,
    selection: list[str],
    without: list[str],
    verdicts: dict[str, dict[str, object]] | None = None,
) -> int:
    """Copy the project to WORK and run mutmut there; returns mutmut's exit code.

    With ``verdicts`` (mutmut's ``.meta`` contents by module path, see
    :func:`resume`), the mutants they decided keep their verdicts and only the
    others are tested.
    """
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    (WORK / "targets.json").write_text(json.dumps(targets, ensure_ascii=False))
    modules = sorted({module for module, _ in targets})
    _copy(COPIED, without)
    (WORK / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = explomemo\n"
        "only_mutate =\n"
        + "".join(f"    {source_path(m)}\n" for m in modules)
        + "also_copy =\n"
        + "".join(f"    {name}\n" for name in COPIED if name not in ("explomemo", "tests"))
        + "    mutmut_fixups.py\n"
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -p\n    mutmut_fixups\n"
        "pytest_add_cli_args_test_selection =\n"
        + "".join(f"    {a}\n" for a in selection)
        + "use_git_change_detection = false\n"
        + f"timeout_multiplier = {TIMEOUT_MULTIPLIER}\n"
    )
    shutil.copy2(HERE / "mutmut_fixups.py", WORK / "mutmut_fixups.py")
    # It must exist before mutmut starts: Python remembers a path of
    # PYTHONPATH that did not exist as one to skip for good.
    (WORK / "mutants").mkdir()
    if verdicts is None:
        names = _names(targets)
    else:
        for path, meta in verdicts.items():
            (WORK / "mutants" / f"{path}.meta").parent.mkdir(parents=True, exist_ok=True)
            (WORK / "mutants" / f"{path}.meta").write_text(json.dumps(meta))
        names = _untested(targets)
        print(f"resuming: testing the {len(names)} mutants the saved verdicts did not catch")
        if not names:
            return 0
    return _mutmut(["run", "--max-children", str(workers), *names], niceness, modules)


def resume(
    saved_file: Path, workers: int, niceness: int, selection: list[str], without: list[str]
) -> int:
    """A new run in WORK that starts from the verdicts :func:`save_verdicts` wrote.

    mutmut keeps a mutant's verdict while the hash of its function is the one
    in its ``.meta`` file, and tests only the mutants named to it: so the
    saved verdicts are put where mutmut reads them, and the run names the
    mutants they leave not caught (untested, or alive and not listed as
    equivalent). The mutated modules must be byte for byte as they were saved:
    mutants are numbered within their function, and a changed module makes
    other mutants of the same names.
    """
    saved = _saved(saved_file)
    verdicts: dict[str, dict[str, object]] = {}
    for entry in saved["modules"]:
        path = source_path(entry["module"])
        digest = hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            raise SystemExit(
                f"{path} changed since the verdicts in {saved_file} were saved: run without"
                " --resume (or with --modules for the other modules)"
            )
        codes: dict[str, int | None] = {}
        for function, numbered in entry["codes"].items():
            for number, code in enumerate(numbered, start=1):
                codes[f"{function}__mutmut_{number}"] = code
        verdicts[str(path)] = {
            "exit_code_by_key": codes,
            "hash_by_function_name": entry["hashes"],
            "type_check_error_by_key": {},
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
    targets = [(module, patterns) for module, patterns in saved["targets"]]
    return run_mutmut(targets, workers, niceness, selection, without, verdicts)


def save_verdicts(targets: list[Target], to: Path) -> None:
    """Write the last run's verdicts of ``targets`` to ``to``: for each module its
    source's SHA-256, mutmut's hash of each function and each mutant's exit code
    (null: not tested), numbered as mutmut numbers them within a function."""
    from mutmut.mutation.data import SourceFileMutationData

    here = os.getcwd()
    os.chdir(WORK)
    try:
        modules = []
        for module in sorted({module for module, _ in targets}):
            data = SourceFileMutationData(path=source_path(module))
            data.load()
            chosen = {
                name: code
                for name, code in data.exit_code_by_key.items()
                if any(_chosen(target, name) for target in targets if target[0] == module)
            }
            codes: dict[str, list[int | None]] = {}
            for name, code in sorted(chosen.items(), key=lambda kv: _natural(kv[0])):
                function, _, number = name.rpartition("__mutmut_")
                numbered = codes.setdefault(function, [])
                numbered.extend([None] * (int(number) - len(numbered)))
                numbered[int(number) - 1] = code
            source = (WORK / source_path(module)).read_bytes()
            modules.append(
                {
                    "module": module,
                    "sha256": hashlib.sha256(source).hexdigest(),
                    "hashes": data.hash_by_function_name,
                    "codes": codes,
                }
            )
    finally:
        os.chdir(here)
    saved = {"saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "targets": targets}
    # One line a module: a diff of two saves shows which modules moved on.
    lines = ",\n".join(json.dumps(m, separators=(",", ":")) for m in modules)
    to.write_text(json.dumps(saved)[:-1] + ',"modules":[\n' + lines + "\n]}\n")
    untested = sum(c is None for m in modules for cs in m["codes"].values() for c in cs)
    print(f"wrote the verdicts of {len(modules)} modules to {to} ({untested} mutants untested)")


def _saved(path: Path) -> dict[str, Any]:
    """The verdicts :func:`save_verdicts` wrote to ``path``."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read saved verdicts {path}: {error}") from None
    if not isinstance(saved, dict) or not {"targets", "modules"} <= saved.keys():
        raise SystemExit(f"{path} holds no saved verdicts: write them with --save-verdicts")
    return saved


def _untested(targets: list[Target]) -> list[str]:
    """The mutants of ``targets`` in WORK's verdicts that are not caught nor listed equivalent."""
    equivalent = equivalent_mutants()
    return [
        name
        for name, status in _verdicts(targets)
        if status not in CAUGHT and name not in equivalent
    ]


def run_again(
    targets: list[Target],
    workers: int,
    niceness: int,
    without: list[str],
    timeouts: bool = False,
    keep_stats: bool = False,
) -> int:
    """Test again the mutants the last run did not catch, with the tests as they are now.

    With ``timeouts``, those that timed out too, with more time each. With
    ``keep_stats``, mutmut keeps what it learnt of the tests it knows (see below) and
    learns only what the new ones call.

    Adding tests cannot save a caught mutant, so its verdict stands; nor can
    they kill one listed as equivalent, which is not run again. The rest
    of the package is copied as it is now (new tests may need newer code), and
    mutmut learns again which functions every test calls: it would otherwise
    keep what a test it knows by name called before that test changed.
    """
    if not (WORK / "mutants").is_dir():
        raise SystemExit(f"no earlier run in {WORK}: run without --again first")
    modules = sorted({module for module, _ in targets})
    mutated = {str(source_path(module)) for module in modules}
    for rel in sorted(mutated):
        if (ROOT / rel).read_bytes() != (WORK / rel).read_bytes():
            raise SystemExit(f"{rel} changed since the last run: run without --again")
    shutil.rmtree(WORK / "tests")
    _copy([name for name in COPIED if name != "explomemo"], without)
    for folder in (WORK, WORK / "mutants"):
        _copy(["explomemo"], [*without, *mutated], folder)
    if not keep_stats:
        (WORK / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    shutil.rmtree(WORK / "mutants" / "tests")
    for folder in (WORK, WORK / "mutants"):
        shutil.copy2(HERE / "mutmut_fixups.py", folder / "mutmut_fixups.py")
    caught = CAUGHT - {"timeout"} if timeouts else CAUGHT
    multiplier = SLOW_TIMEOUT_MULTIPLIER if timeouts else TIMEOUT_MULTIPLIER
    settings = WORK / "setup.cfg"
    settings.write_text(
        re.sub(
            r"^timeout_multiplier = .*$",
            f"timeout_multiplier = {multiplier}",
            settings.read_text(),
            flags=re.MULTILINE,
        )
    )
    left = [name for name, status in _verdicts(targets) if status not in caught]
    # No test can kill a mutant listed as equivalent: each would cost a run of every
    # test that calls its function.
    equivalent = equivalent_mutants()
    names = [name for name in left if name not in equivalent]
    print(
        f"testing again the {len(names)} mutants not caught"
        f" ({len(left) - len(names)} listed equivalent in RESULTS.md left out)"
    )
    if not names:
        return 0
    return _mutmut(["run", "--max-children", str(workers), *names], niceness, modules)


def _verdicts(targets: list[Target]) -> list[tuple[str, str]]:
    """(mutant name, status) of every mutant of ``targets`` in the last run."""
    here = os.getcwd()
    os.chdir(WORK)
    try:
        from mutmut.stats import status_by_exit_code

        return [
            (name, status_by_exit_code[code])
            for target in targets
            for name, code in _codes(target).items()
        ]
    finally:
        os.chdir(here)


def _codes(target: Target) -> dict[str, int | None]:
    """The exit code of each mutant of ``target`` in the last run (None: not tested)."""
    from mutmut.mutation.data import SourceFileMutationData

    data = SourceFileMutationData(path=source_path(target[0]))
    data.load()
    return {k: v for k, v in data.exit_code_by_key.items() if _chosen(target, k)}


def _mutmut(arguments: list[str], niceness: int, modules: list[str]) -> int:
    """Run mutmut in WORK (output to the terminal and to work/mutmut.log)."""
    env = {
        **os.environ,
        # Tests start explomemo in child processes (the CLI, `serve`, readers'
        # helpers): they import the mutated copy too, and run the same mutant.
        "PYTHONPATH": str(WORK / "mutants"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("EXPLOMEMO_DB", None)
    command = [str(VENV / "bin" / "mutmut"), *arguments]
    print(f"mutmut {arguments[0]} in {WORK}, nice {niceness}: {' '.join(modules)}")
    with open(WORK / "mutmut.log", "ab") as log:
        process = subprocess.Popen(
            command,
            cwd=WORK,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.nice(niceness),
        )
        assert process.stdout is not None
        while chunk := process.stdout.read1(65536):
            log.write(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        return process.wait()


def equivalent_mutants() -> dict[str, str]:
    """The mutants RESULTS.md lists as equivalent (its table rows), with their reasons."""
    found: dict[str, str] = {}
    if not RESULTS.exists():
        return found
    for line in RESULTS.read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        match = EQUIVALENT.search(cells[0])
        if match and len(cells) > 1:
            found[match.group(1)] = cells[-1]
    return found


def report(targets: list[Target]) -> None:
    """Print the score of each module and every surviving mutant with its diff."""
    os.chdir(WORK)
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    equivalent = equivalent_mutants()
    columns = ["killed", "timeout", "survived", "no tests", "other", "equivalent", "total"]
    rows: list[tuple[str, dict[str, int]]] = []
    left: list[tuple[str, str, str]] = []
    killed_but_listed: list[str] = []
    for target in targets:
        module = target[0]
        path = source_path(module)
        tally = dict.fromkeys(columns, 0)
        for name, code in sorted(_codes(target).items(), key=lambda kv: _natural(kv[0])):
            status = status_by_exit_code[code]
            tally["total"] += 1
            if status in ("killed", "caught by type check"):
                tally["killed"] += 1
                if name in equivalent:
                    killed_but_listed.append(name)
            elif name in equivalent:
                # Before timeouts: a listed mutant that timed out was slow, not caught.
                tally["equivalent"] += 1
            elif status == "timeout":
                tally["timeout"] += 1
            elif status in ("survived", "no tests"):
                tally[status] += 1
                left.append((name, status, get_diff_for_mutant(name, path=path)))
            else:
                tally["other"] += 1
                left.append((name, status, get_diff_for_mutant(name, path=path)))
        whole = target[1] == [f"explomemo.{module}.*"]
        shown = str(path.relative_to("explomemo")) + ("" if whole else " (some functions)")
        rows.append((shown, tally))
    total = {c: sum(t[c] for _, t in rows) for c in columns}
    rows.append(("all", total))
    took = WORK / "took.txt"
    print()
    runs = [line.split() for line in took.read_text().splitlines()] if took.exists() else []
    spent = ", ".join(f"{kind} {int(seconds) / 60:.0f} min" for kind, seconds in runs)
    print(f"Mutation score (mutmut, {time.strftime('%Y-%m-%d')})" + (f": {spent}" if spent else ""))
    print()
    print("| module | " + " | ".join(columns) + " | score |")
    print("|---" * (len(columns) + 2) + "|")
    for name, tally in rows:
        counted = tally["total"] - tally["equivalent"]
        caught = tally["killed"] + tally["timeout"]
        score = f"{100 * caught / counted:.1f} %" if counted else "-"
        print(f"| {name} | " + " | ".join(str(tally[c]) for c in columns) + f" | {score} |")
    print()
    print("score = (killed + timeout) / (total - equivalent); equivalent: listed in RESULTS.md")
    made = {name for target in targets for name in _codes(target)}
    stale = sorted(set(equivalent) - made)
    if stale:
        print(f"RESULTS.md lists {len(stale)} equivalent mutant(s) this run did not make:")
        for name in stale:
            print(f"  {name}")
    if killed_but_listed:
        print(f"RESULTS.md lists {len(killed_but_listed)} killed mutant(s) as equivalent: take out")
        for name in killed_but_listed:
            print(f"  {name}")
    print()
    if not left:
        print("No mutant left alive.")
        return
    print(f"{len(left)} mutant(s) left alive (not killed, not listed as equivalent):")
    for name, status, diff in left:
        print()
        print(f"# {name}: {status}")
        print(diff)


def _natural(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("__mutmut_")
    return stem, int(number) if number.isdigit() else 0


if __name__ == "__main__":
    sys.exit(main())
