"""Resident memory of `explomemo serve` with 100,000 memos, beside the model runtime alone.

A database of 100,000 memos with real-model vectors is populated through the
store (see _corpus.py), then a real ``explomemo --db DB serve`` subprocess is
driven over stdio with the MCP client (``Client(StdioServerParameters(...))``).
VmRSS and VmHWM (peak) are read from /proc/PID/status: after start-up, after the
first recall (the vector index is in memory), after 20 more recalls, and after a
record followed by a recall (the record updates the index in place).

References, each a fresh process measured at its exit the same way:
``python -c pass``, ``python -c "import fastembed, onnxruntime"`` (the brief's
reference), and a process that loads the shipped model and embeds one text.

Goal: the server's VmHWM <= 400 MB (MB = 2**20 bytes here). Beside each stage, its
recalls' quality in the same run: how many answered from vectors, and how many gave the
same memos in the same order as the same query asked again at the end (the steady state).

Usage: .venv/bin/python benchmarks/bench_memory.py [--quick] [--memos N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _common import (
    EXPLOMEMO,
    PYTHON,
    children_of,
    load_line,
    machine_line,
    median,
    rss_of,
    table,
    verdict,
    wait_for_quiet,
)
from _corpus import Pool, base_vectors, make_pool, populate, queries

PROJECT = "bench-memory"
GOAL_MB = 400.0

REPORT = (
    "import json;"
    "s={l.split(':')[0]: int(l.split()[1]) for l in open('/proc/self/status')"
    " if l.startswith(('VmHWM', 'VmRSS'))};print(json.dumps(s))"
)
REFERENCES = {
    "python -c pass": "pass",
    'python -c "import fastembed, onnxruntime"': "import fastembed, onnxruntime",
    "load shipped model + embed 1 text": (
        "from explomemo.recall.embeddings import load_embedder;"
        " load_embedder().embed(['hello world'])"
    ),
}


def reference_rss(code: str) -> dict[str, int]:
    """VmHWM/VmRSS (KiB) of a fresh interpreter running ``code``, read at its end."""
    done = subprocess.run(
        [PYTHON, "-c", f"{code}\n{REPORT}"], capture_output=True, text=True, check=True
    )
    found: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def server_pid() -> int:
    """The pid of the `explomemo serve` child of this process."""
    for pid in children_of(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in cmdline:
            return pid
    raise RuntimeError("explomemo serve child process not found")


def _ids(out: Any) -> tuple[list[int], bool]:
    """A recall's memo ids in order, and whether it answered from vectors."""
    assert not out.is_error, out.content
    found = out.structured_content
    by_vectors = bool(found["semantic_index"]) and not found.get("pending_vectors")
    return [m["id"] for m in found["matches"]], by_vectors


async def drive(db: Path, pool: Pool) -> list[tuple[str, dict[str, int], str]]:
    """Start the real server over stdio and sample its memory at each stage, with the
    quality of that stage's recalls."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=EXPLOMEMO,
        args=["--db", str(db), "serve"],
        cwd=str(pool.root),
        env={**os.environ},
    )
    root = str(pool.root)
    texts = queries(40, 700_000)
    samples: list[tuple[str, dict[str, int], list[int]]] = []
    answers: dict[int, tuple[list[int], bool]] = {}

    async def recall(at: int) -> tuple[list[int], bool]:
        out = await client.call_tool(
            "memory_exploration_recall", {"query": texts[at], "project": PROJECT, "root": root}
        )
        return _ids(out)

    async with Client(params) as client:
        pid = server_pid()
        await client.list_tools()
        samples.append(("after start-up (tools/list answered)", rss_of(pid), []))
        start = time.perf_counter()
        answers[0] = await recall(0)
        first = time.perf_counter() - start
        samples.append(
            (f"after first recall ({first:.1f} s: model load + index)", rss_of(pid), [0])
        )
        for at in range(1, 21):
            answers[at] = await recall(at)
        samples.append(("after 20 more recalls", rss_of(pid), list(range(1, 21))))
        out = await client.call_tool(
            "memory_exploration_record",
            {
                "question": "How is the memory benchmark wired?",
                "conclusion": "Through bench_memory.py.",
                "files": [row.path for row in pool.rows[:8]],
                "project": PROJECT,
                "root": root,
            },
        )
        assert not out.is_error, out.content
        answers[21] = await recall(21)
        samples.append(("after a record + recall (index updated in place)", rss_of(pid), [21]))
        steady = {at: (await recall(at))[0] for at in answers}
    graded = []
    for label, rss, asked in samples:
        quality = "-"
        if asked:
            vectors = sum(answers[at][1] for at in asked)
            same = sum(answers[at][0] == steady[at] for at in asked)
            quality = f"{vectors}/{len(asked)} from vectors, {same}/{len(asked)} same as steady"
        graded.append((label, rss, quality))
    return graded


def mb(kib: float) -> float:
    """KiB to MB (2**20 bytes)."""
    return kib / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--memos", type=int, default=0, help="memo count (default 100,000)")
    parser.add_argument("--reps", type=int, default=0, help="server runs (median taken)")
    args = parser.parse_args()
    count = args.memos or (2_000 if args.quick else 100_000)
    distinct = 200 if args.quick else 2_000
    reps = args.reps or (1 if args.quick else 2)
    print(wait_for_quiet(10 if args.quick else 240))
    print(machine_line())
    print(
        f"scenario: explomemo serve over stdio with {count:,} memos"
        " (two 384-dim float32 vectors each)"
    )

    from explomemo.recall.embeddings import load_embedder

    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-memory-"))
    try:
        embedder = load_embedder()
        assert embedder is not None, "embeddings are off (EXPLOMEMO_EMBEDDINGS)"
        vectors = base_vectors(embedder, distinct)
        pool = make_pool(tmp / "repo", 200 if args.quick else 2_000, 10_000)
        db = tmp / "memos.db"
        seconds = populate(db, PROJECT, count, pool, vectors, embedder.model_id)
        print(
            f"setup: populated {count:,} memos in {seconds:.1f} s; database"
            f" {db.stat().st_size / 2**20:.0f} MB;"
            f" vectors alone {count * 2 * 384 * 4 / 2**20:.0f} MB"
        )
        del embedder
        time.sleep(2.5)

        runs = [asyncio.run(drive(db, pool)) for _ in range(reps)]
        refs = {
            name: [reference_rss(code) for _ in range(reps)] for name, code in REFERENCES.items()
        }

        fastembed_ref = median([r["VmHWM"] for r in refs[list(REFERENCES)[1]]])
        rows = []
        for name, values in refs.items():
            hwm = median([v["VmHWM"] for v in values])
            rows.append(
                [
                    name + " (reference)",
                    f"{mb(median([v['VmRSS'] for v in values])):.0f}",
                    f"{mb(hwm):.0f}",
                    f"{hwm / fastembed_ref:.2f}x",
                    "-",
                    "-",
                    "-",
                ]
            )
        for stage in range(len(runs[0])):
            label = runs[0][stage][0]
            rss = median([run[stage][1]["VmRSS"] for run in runs])
            hwm = median([run[stage][1]["VmHWM"] for run in runs])
            rows.append(
                [
                    f"explomemo serve: {label}",
                    f"{mb(rss):.0f}",
                    f"{mb(hwm):.0f}",
                    f"{hwm / fastembed_ref:.2f}x",
                    "; ".join(run[stage][2] for run in runs),
                    f"<= {GOAL_MB:.0f}",
                    verdict(mb(hwm), GOAL_MB),
                ]
            )
        print()
        print(
            table(
                [
                    "process",
                    "VmRSS MB",
                    "VmHWM MB",
                    "HWM vs import fastembed,onnxruntime",
                    "recalls of the stage (each run)",
                    "goal",
                    "verdict (HWM)",
                ],
                rows,
                title=f"Resident memory, {count:,} memos; median of {reps} run(s)",
            )
        )
        print(f"at the end: {load_line()}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
