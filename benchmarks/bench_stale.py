"""Stale check of many memos in a warm process, beside plain SHA-256 tools over the same files.

Scenario (full size): 10,000 files of 100 KB (1 GB, deterministic content, on
disk under a temporary directory); 2,000 memos of 8 files each drawn from them.
One :class:`MemoCache` lives for the whole run, as in a running server, and
``cache.stale(project=..., root=...)`` is timed repeatedly in this process.

Reference, measured in the same run over the same *distinct* files: ``openssl
dgst -sha256`` fed by ``xargs`` in chunks of 1,000 files, serially and with one
process per core; ``sha256sum`` the same way. The fastest of the openssl runs
is the reference the goals are quoted against.

Cases:

a. nothing changed since the last check   goal <= 0.05x openssl, 0 bytes read
b. every file touched (new mtime, same bytes)   goal <= 0.5x openssl
c. 1% of the files changed (same size, new bytes)   exactly their memos flagged

Usage: .venv/bin/python benchmarks/bench_stale.py [--quick] [--reps N] [--profile] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Tree,
    load_line,
    machine_line,
    make_tree,
    median,
    ms,
    percentile,
    profile,
    run_quiet,
    table,
    timed,
    verdict,
    wait_for_quiet,
)

from explomemo.check.hashing import COUNTERS
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel
from explomemo.shapes import StaleResult

PROJECT = "bench-stale"
CHUNK = 1000


def reference_times(paths: list[str], reps: int) -> dict[str, list[float]]:
    """Wall time of plain SHA-256 tools over ``paths`` (xargs, serial and one per core)."""
    stdin = b"\0".join(p.encode() for p in paths) + b"\0"
    cores = os.cpu_count() or 1
    variants = {
        "openssl dgst -sha256 (xargs -P1)": ["openssl", "dgst", "-sha256"],
        f"openssl dgst -sha256 (xargs -P{cores})": ["openssl", "dgst", "-sha256"],
        "sha256sum (xargs -P1)": ["sha256sum"],
        f"sha256sum (xargs -P{cores})": ["sha256sum"],
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, tool in variants.items():
            parallel = "1" if "-P1)" in name else str(cores)
            argv = ["xargs", "-0", "-n", str(CHUNK), "-P", parallel, *tool]
            times[name].append(timed(partial(run_quiet, argv, stdin)))
    return times


def wait_until_not_racy(paths: list[Path], margin: float = 2.5) -> None:
    """Sleep until every file's mtime and ctime lie ``margin`` seconds in the past."""
    newest = max(max(p.stat().st_mtime, p.stat().st_ctime) for p in paths)
    delay = newest + margin - time.time()
    if delay > 0:
        time.sleep(delay)


def change_bytes(path: Path, seed: int) -> bytes:
    """Overwrite a few bytes in place (same size, new content); returns the old content."""
    old = path.read_bytes()
    data = bytearray(old)
    rng = random.Random(seed)
    for _ in range(8):
        i = rng.randrange(len(data))
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return old


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--reps", type=int, default=0, help="repetitions per case")
    parser.add_argument("--profile", action="store_true", help="cProfile one check of each case")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    n_files, size, n_memos, per_memo = (
        (1000, 20_000, 200, 8) if args.quick else (10_000, 100_000, 2_000, 8)
    )
    reps = args.reps or (5 if args.quick else 9)
    slow_reps = max(3, reps // 2)
    print(wait_for_quiet(10 if args.quick else 240))
    print(machine_line())
    print(
        f"scenario: {n_memos} memos x {per_memo} files drawn from {n_files} files of"
        f" {size:,} bytes ({n_files * size / 1e9:.2f} GB); {reps} reps (a), {slow_reps} reps (b,c)"
    )

    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-stale-"))
    try:
        started = time.perf_counter()
        tree: Tree = make_tree(tmp / "repo", n_files, size)
        print(f"setup: wrote {n_files} files in {time.perf_counter() - started:.1f} s under {tmp}")
        rng = random.Random(7)
        memo_files = [sorted(rng.sample(range(n_files), per_memo)) for _ in range(n_memos)]
        distinct = sorted({i for files in memo_files for i in files})
        distinct_paths = [str(tree.abs(tree.rels[i])) for i in distinct]
        print(
            f"setup: {len(distinct)} distinct files referenced"
            f" ({len(distinct) * size / 1e9:.2f} GB)"
        )

        with MemoCache.open(tmp / "bench.db", FixedModel(None)) as cache:
            root = str(tree.root)
            record_times: list[float] = []
            ids: list[int] = []
            for m, files in enumerate(memo_files):
                rels = [tree.rels[i] for i in files]
                start = time.perf_counter()
                recorded = cache.record(
                    question=f"how is subsystem {m} wired?",
                    conclusion=f"Subsystem {m} is wired through {', '.join(rels)}.",
                    files=rels,
                    project=PROJECT,
                    root=root,
                )
                record_times.append(time.perf_counter() - start)
                ids.append(recorded.id)
            memos_of_file: dict[str, set[int]] = {}
            for memo_id, files in zip(ids, memo_files, strict=True):
                for i in files:
                    memos_of_file.setdefault(tree.rels[i], set()).add(memo_id)
            print(
                f"setup: recorded {n_memos} memos with cache.record (FixedModel(None)): median"
                f" {ms(median(record_times))}, p95 {ms(percentile(record_times, 95))} per memo"
            )

            def check() -> StaleResult:
                return cache.stale(project=PROJECT, root=root)

            # Files must be older than the validator's 2 s racy window before the
            # first check, or their entries are never trusted.
            wait_until_not_racy([tree.abs(tree.rels[i]) for i in distinct])
            COUNTERS.reset()
            first = timed(check)
            first_files = COUNTERS.files
            print(f"setup: first check after recording {ms(first)}, read {first_files} files")

            refs_before = reference_times(distinct_paths, max(2, reps // 3))

            # (a) nothing changed ------------------------------------------------
            a_times: list[float] = []
            floor_times: list[float] = []
            a_read = (0, 0)
            for _ in range(reps):
                # The floor of case (a), in the same rep: one os.stat per distinct
                # file from a plain Python loop, nothing else.
                start = time.perf_counter()
                for path in distinct_paths:
                    os.stat(path)
                floor_times.append(time.perf_counter() - start)
                COUNTERS.reset()
                start = time.perf_counter()
                result = cache.stale(project=PROJECT, root=root)
                a_times.append(time.perf_counter() - start)
                assert result.checked == n_memos and not result.stale, result.stale[:3]
                a_read = (max(a_read[0], COUNTERS.files), max(a_read[1], COUNTERS.bytes))
            assert a_read == (0, 0), f"nothing changed, yet files were read: {a_read}"
            profiles: dict[str, str] = {}
            if args.profile:
                profiles["a"] = profile(check)

            # (b) every file touched ---------------------------------------------
            all_paths = [tree.abs(rel) for rel in tree.rels]
            base_ns = time.time_ns() - 3600 * 10**9
            b_times: list[float] = []
            b_read: list[int] = []
            for rep in range(slow_reps + (1 if args.profile else 0)):
                stamp = base_ns + rep * 10**9
                for path in all_paths:
                    os.utime(path, ns=(stamp, stamp))
                COUNTERS.reset()
                if args.profile and rep == slow_reps:
                    profiles["b"] = profile(check)
                    break
                start = time.perf_counter()
                result = cache.stale(project=PROJECT, root=root)
                b_times.append(time.perf_counter() - start)
                assert not result.stale, result.stale[:3]
                b_read.append(COUNTERS.files)

            # Settle: entries taken within 2 s of the touch are racy; re-read once later.
            wait_until_not_racy([tree.abs(tree.rels[i]) for i in distinct])
            check()
            COUNTERS.reset()
            check()
            assert COUNTERS.files == 0, "stat cache did not settle"

            # (c) 1% changed -----------------------------------------------------
            c_times: list[float] = []
            c_flagged: list[int] = []
            c_read: list[int] = []
            n_changed = max(1, n_files // 100)
            pick = random.Random(11)
            for rep in range(slow_reps + (1 if args.profile else 0)):
                chosen = [tree.rels[i] for i in pick.sample(distinct, n_changed)]
                saved = {
                    rel: change_bytes(tree.abs(rel), rep * 100_000 + n)
                    for n, rel in enumerate(chosen)
                }
                expected = {
                    memo_id: sorted(rel for rel in chosen if memo_id in memos_of_file[rel])
                    for rel in chosen
                    for memo_id in memos_of_file[rel]
                }
                COUNTERS.reset()
                if args.profile and rep == slow_reps:
                    profiles["c"] = profile(check)
                else:
                    start = time.perf_counter()
                    result = cache.stale(project=PROJECT, root=root)
                    c_times.append(time.perf_counter() - start)
                    got = {entry.id: entry.changed for entry in result.stale}
                    assert got == expected, (
                        f"flagged {len(got)} memos, expected {len(expected)};"
                        f" extra {sorted(set(got) - set(expected))[:5]},"
                        f" missed {sorted(set(expected) - set(got))[:5]}"
                    )
                    assert all(not entry.missing for entry in result.stale)
                    c_flagged.append(len(got))
                    c_read.append(COUNTERS.files)
                for rel, old in saved.items():
                    tree.abs(rel).write_bytes(old)
                wait_until_not_racy([tree.abs(rel) for rel in chosen])
                settled = check()
                assert not settled.stale

            refs_after = reference_times(distinct_paths, max(2, reps // 3))

        refs = {name: refs_before[name] + refs_after[name] for name in refs_before}
        ref_medians = {name: median(values) for name, values in refs.items()}
        openssl_name = min(
            (n for n in ref_medians if n.startswith("openssl")), key=ref_medians.__getitem__
        )
        reference = ref_medians[openssl_name]

        print()
        print(
            table(
                ["reference (same distinct files)", "median", "reps"],
                [[name, ms(ref_medians[name]), len(refs[name])] for name in refs],
                title=f"Reference: SHA-256 of the {len(distinct)} distinct files (page cache warm)",
            )
        )
        print()
        rows = [
            [
                "(a) nothing changed",
                ms(median(a_times)),
                f"{median(a_times) / reference:.4f}x",
                "<= 0.05x, 0 bytes",
                verdict(median(a_times) / reference, 0.05),
                f"{a_read[0]} files / {a_read[1]} B",
                "0 stale",
            ],
            [
                "(a) floor: os.stat loop, same files (info)",
                ms(median(floor_times)),
                f"{median(floor_times) / reference:.4f}x",
                "-",
                f"(a) is {median(a_times) / median(floor_times):.2f}x the floor",
                f"{len(distinct_paths)} stats",
                "-",
            ],
            [
                "(b) all files touched",
                ms(median(b_times)),
                f"{median(b_times) / reference:.3f}x",
                "<= 0.5x",
                verdict(median(b_times) / reference, 0.5),
                f"{median(b_read):.0f} files",
                "0 stale",
            ],
            [
                f"(c) 1% changed ({n_changed} files)",
                ms(median(c_times)),
                f"{median(c_times) / reference:.3f}x",
                "exact memos",
                "PASS (asserted)",
                f"{median(c_read):.0f} files",
                f"{median(c_flagged):.0f} memos flagged = expected",
            ],
            [
                "first check after record (info)",
                ms(first),
                f"{first / reference:.3f}x",
                "-",
                "-",
                f"{first_files} files",
                "single run",
            ],
        ]
        print(
            table(
                [
                    "explomemo cache.stale()",
                    "median",
                    "vs openssl",
                    "goal",
                    "verdict",
                    "read",
                    "result",
                ],
                rows,
                title=(
                    f"explomemo stale check, {n_memos} memos, warm MemoCache in-process;"
                    f" reference = {openssl_name} = {ms(reference)}"
                ),
            )
        )
        print()
        print(
            f"record (info): cache.record of 8 files x {size:,} B, median"
            f" {ms(median(record_times))} per memo"
        )
        for case, text in profiles.items():
            print(f"\n--- cProfile of one check, case ({case}) ---\n{text}")
        print(f"at the end: {load_line()}")
        return 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
