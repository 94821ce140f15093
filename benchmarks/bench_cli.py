"""The stale check through the CLI, start-up included, and proof the light commands stay light.

Same scenario as bench_stale.py (full size: 2,000 memos x 8 files drawn from
10,000 files of 100 KB), but every check is a fresh process:

    .venv/bin/explomemo --db DB stale --project P --root R --format json

beside ``python -c pass`` (the interpreter's own start-up) and ``openssl dgst
-sha256`` over the same distinct files. A CLI run has no warm in-memory stat
cache: it loads the entries it needs from the database.

It also runs ``stale``, ``list`` and ``show`` in a wrapper that reports, at
exit, whether fastembed, onnxruntime or mcp were imported (they must not be),
and the hashing counters (a no-change check must read no file content).

Usage: .venv/bin/python benchmarks/bench_cli.py [--quick] [--reps N] [--keep]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    EXPLOMEMO,
    PYTHON,
    load_line,
    machine_line,
    make_tree,
    median,
    ms,
    table,
    timed,
    wait_for_quiet,
)
from bench_stale import change_bytes, reference_times, wait_until_not_racy

from explomemo.memos import FixedModel, MemoCache

PROJECT = "bench-cli"
HEAVY = ("fastembed", "onnxruntime", "mcp", "mcp_types", "tokenizers")

WRAPPER = """
import json, sys
from explomemo.cli import main
rc = main(sys.argv[1:])
from explomemo.hashing import COUNTERS
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))
print(json.dumps({"rc": rc, "heavy": heavy, "files_read": COUNTERS.files,
                  "bytes_read": COUNTERS.bytes, "modules": len(sys.modules),
                  "numpy": "numpy" in sys.modules, "pydantic": "pydantic" in sys.modules}),
      file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def run(argv: list[str], ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run a command; fail loudly on an unexpected exit code."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def wrapped(args: list[str]) -> dict[str, object]:
    """Run the CLI in the wrapper; what it reported at exit."""
    done = run([PYTHON, "-c", WRAPPER, *args])
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return report


def import_times(args: list[str], top: int = 12) -> list[tuple[str, float, float]]:
    """The slowest imports (cumulative, any depth) of one CLI run, from -X importtime.

    Each entry is (name indented by its nesting depth, cumulative s, self s).
    """
    done = run([PYTHON, "-X", "importtime", "-c",
                "import sys; from explomemo.cli import main; sys.exit(main(sys.argv[1:]))", *args])
    found: list[tuple[str, float, float]] = []
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            depth = len(m.group(3)) // 2
            found.append(("  " * depth + m.group(4), int(m.group(2)) / 1e6, int(m.group(1)) / 1e6))
    return sorted(found, key=lambda item: -item[1])[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--reps", type=int, default=0, help="repetitions per command")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    n_files, size, n_memos, per_memo = (
        (1000, 20_000, 200, 8) if args.quick else (10_000, 100_000, 2_000, 8)
    )
    reps = args.reps or (5 if args.quick else 9)
    print(wait_for_quiet(10 if args.quick else 240))
    print(machine_line())
    print(
        f"scenario: {n_memos} memos x {per_memo} files drawn from {n_files} files of"
        f" {size:,} bytes; {reps} reps per command, each a new process"
    )
    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-cli-"))
    try:
        tree = make_tree(tmp / "repo", n_files, size)
        rng = random.Random(7)
        memo_files = [sorted(rng.sample(range(n_files), per_memo)) for _ in range(n_memos)]
        distinct = sorted({i for files in memo_files for i in files})
        distinct_paths = [str(tree.abs(tree.rels[i])) for i in distinct]
        db = tmp / "bench.db"
        root = str(tree.root)
        with MemoCache.open(db, FixedModel(None)) as cache:
            memos_of_file: dict[str, set[int]] = {}
            first_id = 0
            for m, files in enumerate(memo_files):
                rels = [tree.rels[i] for i in files]
                result = cache.record(
                    question=f"how is subsystem {m} wired?",
                    conclusion=f"Subsystem {m} is wired through {', '.join(rels)}.",
                    files=rels, project=PROJECT, root=root,
                )
                first_id = first_id or result.id
                for rel in rels:
                    memos_of_file.setdefault(rel, set()).add(result.id)
        print(f"setup: {len(distinct)} distinct files; {n_memos} memos recorded in-process")

        stale_args = ["--db", str(db), "stale", "--project", PROJECT, "--root", root,
                      "--format", "json"]
        list_args = ["--db", str(db), "list", "--project", PROJECT, "--json"]
        show_args = ["--db", str(db), "show", str(first_id), "--json"]

        wait_until_not_racy([tree.abs(tree.rels[i]) for i in distinct])
        started = time.perf_counter()
        run([EXPLOMEMO, *stale_args])  # fills the stat cache in the database
        print(f"setup: first CLI check (empty stat cache) {ms(time.perf_counter() - started)}")

        checks = {
            "stale": wrapped(stale_args),
            "list": wrapped(list_args),
            "show": wrapped(show_args),
        }

        commands: dict[str, list[str]] = {
            "python -c pass": [PYTHON, "-c", "pass"],
            "python -c 'import explomemo.cli'": [PYTHON, "-c", "import explomemo.cli"],
            "explomemo --version": [EXPLOMEMO, "--version"],
            "explomemo stale (nothing changed)": [EXPLOMEMO, *stale_args],
            "explomemo list --json": [EXPLOMEMO, *list_args],
            "explomemo show ID --json": [EXPLOMEMO, *show_args],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(reps):
            for name, argv in commands.items():
                times[name].append(timed(partial(run, argv)))
        out = run([EXPLOMEMO, *stale_args])
        report = json.loads(out.stdout)
        assert report["checked"] == n_memos and report["stale"] == [], report["stale"][:3]

        # 1% changed, each rep a new set of files, put back and settled afterwards.
        n_changed = max(1, n_files // 100)
        pick = random.Random(11)
        changed_times: list[float] = []
        flagged: list[int] = []
        for rep in range(max(3, reps // 2)):
            chosen = [tree.rels[i] for i in pick.sample(distinct, n_changed)]
            saved = {r: change_bytes(tree.abs(r), rep * 100_000 + n) for n, r in enumerate(chosen)}
            expected = {memo_id for r in chosen for memo_id in memos_of_file[r]}
            start = time.perf_counter()
            out = run([EXPLOMEMO, *stale_args])
            changed_times.append(time.perf_counter() - start)
            got = {entry["id"] for entry in json.loads(out.stdout)["stale"]}
            assert got == expected, f"flagged {len(got)}, expected {len(expected)}"
            flagged.append(len(got))
            for r, old in saved.items():
                tree.abs(r).write_bytes(old)
            wait_until_not_racy([tree.abs(r) for r in chosen])
            run([EXPLOMEMO, *stale_args])
        times[f"explomemo stale ({n_changed} files changed)"] = changed_times

        refs = reference_times(distinct_paths, max(2, reps // 3))
        ref_medians = {name: median(values) for name, values in refs.items()}
        openssl_name = min(
            (n for n in ref_medians if n.startswith("openssl")), key=ref_medians.__getitem__
        )
        reference = ref_medians[openssl_name]
        base = median(times["python -c pass"])

        print()
        rows = [
            [name, ms(median(values)), f"{median(values) / base:.1f}x",
             f"{median(values) / reference:.3f}x", len(values)]
            for name, values in times.items()
        ]
        rows.append([
            openssl_name + " (reference)", ms(reference), f"{reference / base:.1f}x", "1.000x",
            len(refs[openssl_name]),
        ])
        print(table(
            ["command (new process each time)", "median", "vs python -c pass", "vs openssl",
             "reps"],
            rows,
            title=(
                f"explomemo CLI, {n_memos} memos over {len(distinct)} distinct files;"
                f" flagged {median(flagged):.0f} memos in the 1% case (asserted exact)"
            ),
        ))
        print()
        check_rows = []
        for name, found in checks.items():
            heavy = found["heavy"]
            assert isinstance(heavy, list)
            check_rows.append([
                f"explomemo {name}",
                "PASS (none)" if not heavy else f"FAIL: {', '.join(heavy)}",
                found["modules"], found["numpy"], found["pydantic"],
                f"{found['files_read']} files / {found['bytes_read']} B", found["rc"],
            ])
        print(table(
            ["command", f"imports {'/'.join(HEAVY)}?", "modules loaded", "numpy", "pydantic",
             "content read", "exit"],
            check_rows,
            title="Import check (sys.modules at exit, via a wrapper around explomemo.cli.main)",
        ))
        print()
        print(table(
            ["import (indent = nesting)", "cumulative", "self"],
            [[name, ms(cum), ms(own)] for name, cum, own in import_times(stale_args)],
            title="Slowest imports of one `explomemo stale` run (python -X importtime)",
        ))
        print(f"at the end: {load_line()}")
        failed = [name for name, rep in checks.items() if rep["heavy"]]
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
