"""Planted bugs: each patch of ``benchmarks/mutation/planted/`` must make the tests fail.

    python3 benchmarks/mutation/planted.py              # each patch against the tests it names
    python3 benchmarks/mutation/planted.py --suite      # each patch against the suite (not slow)
    python3 benchmarks/mutation/planted.py --only 11 17 # the patches whose names start so

Each patch is one plausible bug (a unified diff made with ``git diff``, applying
with ``git apply`` from the repository's top), its first line naming the tests
written to catch it: ``# tests: tests/x/test_y.py::test_z ...``. For each patch,
in order, the script copies the project (the package, tests, migrations, docs and
the pages the tests read; tracked files and untracked ones git does not ignore)
to a temporary folder, applies the patch there, and runs pytest there with the
project's venv Python (``.venv/bin/python``, else the one running this script;
``--python`` names another) and ``PYTHONPATH`` set to the copy, so that the CLI
and the servers the tests start import the bug too. First the same tests run
once on an unpatched copy: they must pass.

A patch is *caught* when pytest exits 1 (tests failed), *MISSED* when it exits 0;
any other exit (no test collected, a usage error) is an error of the patch's
header. The script prints a table and exits 1 when a patch is missed or fails so.
See README.md beside this file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PATCHES = HERE / "planted"
#: What a copy holds: the package, its tests, and what the tests read besides.
COPIED = [
    "explomemo",
    "tests",
    "migrations",
    "docs",
    ".ci",
    "pyproject.toml",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
    "benchmarks/README.md",
]
#: The pytest arguments of every run; --suite adds SUITE.
PYTEST = ["-q", "-p", "no:cacheprovider"]
#: The whole suite less the slow tests, stopping at the first failure (one is enough).
SUITE = ["-m", "not slow", "-x", "tests"]
HEADER = re.compile(r"^# tests: (.+)$", re.MULTILINE)
#: The Python the tests run with: the project's venv, which has the test dependencies.
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Outcome:
    """One run of pytest over one copy."""

    code: int
    summary: str

    @property
    def verdict(self) -> str:
        """caught, MISSED, or the error."""
        if self.code == 1:
            return "caught"
        if self.code == 0:
            return "MISSED"
        return f"ERROR (pytest exit {self.code})"


def named_tests(patch: Path) -> list[str]:
    """The test ids of a patch's ``# tests:`` line."""
    found = HEADER.search(patch.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f"{patch.name} has no '# tests: ...' line")
    return found[1].split()


def project_files() -> list[str]:
    """The files of COPIED that git tracks or does not ignore, relative to the top."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *COPIED],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    return sorted(
        {name for name in os.fsdecode(listed).split("\0") if name and (ROOT / name).is_file()}
    )


def copy_project(files: list[str], into: Path) -> None:
    for name in files:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)


def apply(patch: Path, copy: Path) -> None:
    """Apply ``patch`` in ``copy`` and check that it changed the files it names."""
    touched = subprocess.run(
        ["git", "apply", "--numstat", str(patch)], cwd=copy, check=True, capture_output=True
    ).stdout.decode()
    names = [line.split("\t", 2)[2] for line in touched.splitlines() if line]
    before = {name: (copy / name).read_bytes() for name in names}
    done = subprocess.run(["git", "apply", str(patch)], cwd=copy, capture_output=True, text=True)
    if done.returncode != 0 or not names:
        raise SystemExit(f"{patch.name} does not apply: {done.stderr.strip()}")
    if any((copy / name).read_bytes() == data for name, data in before.items()):
        raise SystemExit(f"{patch.name} changed nothing in {copy}")


def run_tests(python: str, copy: Path, tests: list[str]) -> Outcome:
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run(
        [python, "-c", "import explomemo; print(explomemo.__file__)"],
        cwd=copy,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the copy's tests would import explomemo from {where}, not the copy")
    done = subprocess.run(
        [python, "-m", "pytest", *PYTEST, *tests],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else done.stderr.strip()[-200:]
    return Outcome(done.returncode, summary)


def in_a_copy(python: str, files: list[str], patch: Path | None, tests: list[str]) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="explomemo-planted-") as folder:
        copy = Path(folder)
        copy_project(files, copy)
        if patch is not None:
            apply(patch, copy)
        return run_tests(python, copy, tests)


def table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("patch", "tests run", "result", "pytest said")
    lines = [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}"]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite",
        action="store_true",
        help="run the whole suite less the slow tests (stopping at the first failure)"
        " against each patch, not only the tests its header names",
    )
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="PREFIX", help="the patches named so"
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the run of the same tests on an unpatched copy",
    )
    parser.add_argument(
        "--python",
        default=str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable,
        help="the Python that runs pytest (default: the project's .venv, else this one)",
    )
    args = parser.parse_args(argv)
    patches = sorted(PATCHES.glob("*.patch"))
    if args.only:
        patches = [p for p in patches if p.name.startswith(tuple(args.only))]
    if not patches:
        raise SystemExit(f"no patch in {PATCHES}")
    files = project_files()
    chosen = {p: SUITE if args.suite else named_tests(p) for p in patches}
    if not args.no_baseline:
        every = SUITE if args.suite else sorted({t for ts in chosen.values() for t in ts})
        base = in_a_copy(args.python, files, None, every)
        print(f"baseline, no patch: {base.summary}", flush=True)
        if base.code != 0:
            print("the tests fail without a patch: fix that first", file=sys.stderr)
            return 1
    rows: list[tuple[str, str, str, str]] = []
    for patch in patches:
        outcome = in_a_copy(args.python, files, patch, chosen[patch])
        shown = "the suite (not slow)" if args.suite else f"{len(chosen[patch])} named"
        rows.append((patch.name, shown, outcome.verdict, outcome.summary))
        print(f"{patch.name}: {outcome.verdict} ({outcome.summary})", flush=True)
    print()
    print(table(rows))
    return 0 if all(row[2] == "caught" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
