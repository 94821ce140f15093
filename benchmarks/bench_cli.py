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

Then the Claude Code hooks and start-up, each run a new process beside
``python -c pass``: start-up of ``--version``, ``list``, ``stale``, ``show``
and the three hooks on a 10-memo database; the prompt hook's p50/p95 at 1k and
10k memos (templated memos of benchmarks/_corpus.py over small real files,
prompts from its query generator, about one in eight unrelated); session-start
at 1k. ``explomemo/`` is byte-compiled first, as pip does on install.

Usage: .venv/bin/python benchmarks/bench_cli.py [--quick] [--reps N] [--keep] [--hooks-only]
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
    REPO,
    load_line,
    machine_line,
    make_tree,
    median,
    ms,
    percentile,
    table,
    timed,
    verdict,
    wait_for_quiet,
)
from _corpus import make_pool, memo_text, queries
from bench_stale import change_bytes, reference_times, wait_until_not_racy

from explomemo import inputs
from explomemo.memos.cache import MemoCache, now_iso
from explomemo.recall.sources import FixedModel
from explomemo.store.database import Store

PROJECT = "bench-cli"
HEAVY = ("fastembed", "onnxruntime", "mcp", "mcp_types", "tokenizers")

WRAPPER = """
import json, sys
from explomemo.cli.main import main
rc = main(sys.argv[1:])
from explomemo.check.hashing import COUNTERS
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
    done = run(
        [
            PYTHON,
            "-X",
            "importtime",
            "-c",
            "import sys; from explomemo.cli.main import main; sys.exit(main(sys.argv[1:]))",
            *args,
        ]
    )
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
    parser.add_argument(
        "--hooks-only", action="store_true", help="only start-up and the Claude Code hooks"
    )
    args = parser.parse_args()
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(REPO / "explomemo")], check=True)
    if args.hooks_only:
        print(wait_for_quiet(10 if args.quick else 240))
        print(machine_line())
        return hooks_and_start_up(args.quick, args.reps)

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
                    files=rels,
                    project=PROJECT,
                    root=root,
                )
                first_id = first_id or result.id
                for rel in rels:
                    memos_of_file.setdefault(rel, set()).add(result.id)
        print(f"setup: {len(distinct)} distinct files; {n_memos} memos recorded in-process")

        stale_args = [
            "--db",
            str(db),
            "stale",
            "--project",
            PROJECT,
            "--root",
            root,
            "--format",
            "json",
        ]
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
            "python -c 'import explomemo.cli.main'": [PYTHON, "-c", "import explomemo.cli.main"],
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
            [
                name,
                ms(median(values)),
                f"{median(values) / base:.1f}x",
                f"{median(values) / reference:.3f}x",
                len(values),
            ]
            for name, values in times.items()
        ]
        rows.append(
            [
                openssl_name + " (reference)",
                ms(reference),
                f"{reference / base:.1f}x",
                "1.000x",
                len(refs[openssl_name]),
            ]
        )
        print(
            table(
                [
                    "command (new process each time)",
                    "median",
                    "vs python -c pass",
                    "vs openssl",
                    "reps",
                ],
                rows,
                title=(
                    f"explomemo CLI, {n_memos} memos over {len(distinct)} distinct files;"
                    f" flagged {median(flagged):.0f} memos in the 1% case (asserted exact)"
                ),
            )
        )
        print()
        check_rows = []
        for name, found in checks.items():
            heavy = found["heavy"]
            assert isinstance(heavy, list)
            check_rows.append(
                [
                    f"explomemo {name}",
                    "PASS (none)" if not heavy else f"FAIL: {', '.join(heavy)}",
                    found["modules"],
                    found["numpy"],
                    found["pydantic"],
                    f"{found['files_read']} files / {found['bytes_read']} B",
                    found["rc"],
                ]
            )
        print(
            table(
                [
                    "command",
                    f"imports {'/'.join(HEAVY)}?",
                    "modules loaded",
                    "numpy",
                    "pydantic",
                    "content read",
                    "exit",
                ],
                check_rows,
                title="Import check (sys.modules at exit, via a wrapper around explomemo's main)",
            )
        )
        print()
        print(
            table(
                ["import (indent = nesting)", "cumulative", "self"],
                [[name, ms(cum), ms(own)] for name, cum, own in import_times(stale_args)],
                title="Slowest imports of one `explomemo stale` run (python -X importtime)",
            )
        )
        print(f"at the end: {load_line()}")
        failed = [name for name, rep in checks.items() if rep["heavy"]]
        return max(1 if failed else 0, hooks_and_start_up(args.quick, args.reps))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def write_memos(db: Path, project: str, count: int, root: Path) -> None:
    """``count`` templated memos, each resting on 4 of 400 small real files under ``root``."""
    pool = make_pool(root, 400, 2_000)
    pick = random.Random(count)
    store = Store.open(db)
    try:
        with store.write() as conn:
            for i in range(count):
                question, conclusion = memo_text(i)
                question = f"{question} (variant {i})" if i >= 2_000 else question
                store.save_memo(
                    conn,
                    memo_id=None,
                    project=project,
                    question=question,
                    question_key=inputs.question_key(question),
                    conclusion=conclusion,
                    root=str(root),
                    recorded_at=now_iso(),
                    files=sorted(pick.sample(pool.rows, 4), key=lambda f: f.path),
                )
    finally:
        store.close()


def hooks_and_start_up(quick: bool, reps: int) -> int:
    """Start-up of the fast commands and the hooks; the prompt hook at 1k and 10k memos."""
    reps = reps or (5 if quick else 15)
    calls = 20 if quick else 60
    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-hooks-"))
    try:
        sizes = (1_000,) if quick else (1_000, 10_000)
        roots = {n: tmp / f"repo{n}" for n in (10, *sizes)}
        for n, root in roots.items():
            write_memos(tmp / f"{n}.db", PROJECT, n, root)
        wait_until_not_racy(list(roots[10].rglob("*.py")))
        transcript = tmp / "t.jsonl"
        transcript.write_text('{"type": "user", "message": {"content": "hi"}}\n')

        def hook(n: int, event: str, payload: dict[str, object]) -> list[str]:
            data = tmp / f"{event}-{n}-{abs(hash(json.dumps(payload)))}.json"
            data.write_text(json.dumps({"cwd": str(roots[n]), **payload}))
            return [
                "sh",
                "-c",
                f'exec "$0" "$@" < {data}',
                EXPLOMEMO,
                "--db",
                str(tmp / f"{n}.db"),
                "hook",
                event,
                "--project",
                PROJECT,
            ]

        small = ["--db", str(tmp / "10.db")]
        start_up: dict[str, list[str]] = {
            "python -c pass": [PYTHON, "-c", "pass"],
            "explomemo --version": [EXPLOMEMO, "--version"],
            "explomemo list --json": [EXPLOMEMO, *small, "list", "--json"],
            "explomemo list (table)": [EXPLOMEMO, *small, "list"],
            "explomemo stale --format json": [EXPLOMEMO, *small, "stale", "--format", "json"],
            "explomemo show 1 --json": [EXPLOMEMO, *small, "show", "1", "--json"],
            "explomemo hook session-start": hook(10, "session-start", {}),
            "explomemo hook prompt (no match)": hook(10, "prompt", {"prompt": "hello there"}),
            "explomemo hook stop": hook(10, "stop", {"transcript_path": str(transcript)}),
        }
        for argv in start_up.values():
            run(argv)  # warm the page cache
        times: dict[str, list[float]] = {name: [] for name in start_up}
        for _ in range(reps):
            for name, argv in start_up.items():
                times[name].append(timed(partial(run, argv)))
        base = median(times["python -c pass"])
        print()
        print(
            table(
                [
                    "command (10 memos; a new process each time)",
                    "median",
                    "vs python -c pass",
                    "goal",
                    "reps",
                ],
                [
                    [
                        name,
                        ms(median(v)),
                        f"{median(v) / base:.1f}x",
                        ""
                        if name == "python -c pass" or "version" in name or "table" in name
                        else verdict(median(v) / base, 5.0),
                        len(v),
                    ]
                    for name, v in times.items()
                ],
                title="Start-up (goal: stale, list, show and hook within 5x python -c pass)",
            )
        )

        rows = []
        prompts = queries(calls, 50_000)
        for n in sizes:
            for event, label in [("prompt", "prompt"), ("session-start", "session-start")]:
                if event == "session-start" and n != 1_000:
                    continue
                samples: list[float] = []
                answered = 0
                for i in range(calls if event == "prompt" else max(5, calls // 4)):
                    payload = {"prompt": prompts[i]} if event == "prompt" else {}
                    argv = hook(n, event, payload)
                    started = time.perf_counter()
                    done = run(argv)
                    samples.append(time.perf_counter() - started)
                    answered += bool(done.stdout.strip())
                    assert done.stderr == "", done.stderr
                p95 = percentile(samples, 95)
                rows.append(
                    [
                        f"hook {label}",
                        f"{n:,}",
                        ms(median(samples)),
                        ms(p95),
                        f"{median(samples) / base:.1f}x",
                        verdict(p95, 0.150) if event == "prompt" and n == 10_000 else "",
                        f"{answered}/{len(samples)}",
                    ]
                )
        print()
        print(
            table(
                [
                    "hook",
                    "memos",
                    "p50",
                    "p95",
                    "p50 vs python -c pass",
                    "goal p95 <= 150 ms",
                    "answered",
                ],
                rows,
                title=f"Claude Code hooks, a new process each call (python -c pass: {ms(base)})",
            )
        )
        print(f"at the end: {load_line()}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
