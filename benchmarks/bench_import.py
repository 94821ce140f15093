"""``explomemo import`` of large exports: memos a second, and how the time grows.

Scenario: exports of 10,000, 20,000 and 40,000 memos, each memo resting on one and the
same file (the worst case for sharing blob ids: every row has the same content), in two
shapes: as earlier versions wrote them (no ``git_blob``) and as this one writes them
(with ``git_blob``, the reference). Each import is a new ``explomemo import`` process
into a new database, timed whole (start-up included), the median of ``--reps`` runs.

Goals: at least 2,000 memos a second at 10,000 and 40,000 memos, and 40,000 memos
taking at most 2.2 times what 20,000 take, for both shapes.

Usage: .venv/bin/python benchmarks/bench_import.py [--reps N] [--sizes 10000,20000,40000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import xxhash
from _common import EXPLOMEMO, load_line, machine_line, median, table

CONTENT = b"x = 1\n"
GIT_BLOB = hashlib.sha1(b"blob %d\0" % len(CONTENT) + CONTENT).hexdigest()


def write_export(path: Path, count: int, with_blobs: bool) -> None:
    """``count`` memos on one file, with or without the file's git blob id."""
    entry = {
        "path": "a.py",
        "sha256": hashlib.sha256(CONTENT).hexdigest(),
        "xxh3": xxhash.xxh3_128_hexdigest(CONTENT),
        "size": len(CONTENT),
    }
    if with_blobs:
        entry["git_blob"] = GIT_BLOB
    with path.open("w") as out:
        for i in range(1, count + 1):
            memo = {
                "id": i,
                "project": "bench",
                "question": f"Where is part {i} decided?",
                "conclusion": f"Part {i} is decided in a.py.",
                "recorded_at": "2026-01-01T00:00:00Z",
                "files": [entry],
            }
            out.write(json.dumps(memo, separators=(",", ":")) + "\n")


def time_import(export: Path, folder: Path, rep: int) -> float:
    db = folder / f"{export.stem}-{rep}.db"
    started = time.perf_counter()
    subprocess.run(
        [EXPLOMEMO, "--db", str(db), "import", str(export), "--root", str(folder)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    took = time.perf_counter() - started
    db.unlink()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="10000,20000,40000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(machine_line())
    rows = []
    seconds: dict[tuple[bool, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for with_blobs in (False, True):
            for count in sizes:
                export = folder / f"export-{count}-{'blobs' if with_blobs else 'old'}.jsonl"
                write_export(export, count, with_blobs)
                took = median([time_import(export, folder, rep) for rep in range(args.reps)])
                seconds[(with_blobs, count)] = took
                rows.append(
                    (
                        "with git_blob (reference)" if with_blobs else "no git_blob (earlier)",
                        f"{count:,}",
                        f"{took:.2f} s",
                        f"{count / took:,.0f}",
                        "PASS" if count / took >= 2000 else "FAIL",
                    )
                )
    print(
        table(
            ["export", "memos", "import (median)", "memos/s", "goal >= 2,000/s"],
            rows,
            title="explomemo import, one process each, every memo on one file",
        )
    )
    print(load_line())
    if 20000 in sizes and 40000 in sizes:
        growth = []
        for with_blobs in (False, True):
            ratio = seconds[(with_blobs, 40000)] / seconds[(with_blobs, 20000)]
            growth.append(
                (
                    "with git_blob (reference)" if with_blobs else "no git_blob (earlier)",
                    f"{ratio:.2f}x",
                    "PASS" if ratio <= 2.2 else "FAIL",
                )
            )
        print(table(["export", "40k / 20k", "goal <= 2.2x"], growth, title="growth"))


if __name__ == "__main__":
    main()
