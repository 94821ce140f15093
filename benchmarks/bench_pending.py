"""Recall in every state where its answer used to depend on timing, each beside the steady state.

One database of ``--memos`` templated memos (_corpus.py, each on 2 of 200 files of 2 KB),
recorded through MCP, and the same ``--calls`` queries asked in each state. Quality is
agreement with the steady state on the same data: the share of queries whose answer is
the same memos in the same order (by question), and the share whose steady-state first
memo is among the first three.

- A, right after a burst: an in-process server with the real model; ``--memos``
  ``memory_exploration_record`` calls in a burst (each memo stored with its vectors
  before the record answers), then the first recall and the others timed at once.
- B, a fresh server's first recall: a new ``explomemo serve`` process (stdio) for each of
  ``--fresh`` queries, timed from the recall request sent right after the ``initialize``
  handshake (model load and the project's read included), on 25 memos and on the burst's.
- C, right after captures written by another process: a server on A's database, warm
  (the project's vectors in memory), then ``--captures`` memos written by ``explomemo
  record`` processes with embeddings off (as the Stop hook writes them, without vectors);
  the first recall asking for each, timed.
- D, right after an import: the burst exported and imported into a new database (a new
  process, timed: the import rate), then a new server's recalls while the backlog is
  searched by words (``pending_vectors``); then ``explomemo index`` fills it (timed: the
  embedding rate) and the steady state of that database is asked.

The steady state of A and C: the same server once nothing is left to fill, asked again.

Goals (issue 37): every answer of A, B and C from vectors and the same as the steady state;
A's p95 <= 30 ms; B's first recall <= 500 ms at 2,000 memos from the request; import
>= 2,000 memos a second.

Usage: .venv/bin/python benchmarks/bench_pending.py [--quick] [--memos N] [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _common import (
    EXPLOMEMO,
    load_line,
    machine_line,
    median,
    ms,
    percentile,
    table,
    verdict,
    wait_for_quiet,
)
from _corpus import make_pool, memo_text, queries

PROJECT = "bench-pending"
RECALL = "memory_exploration_recall"
GOAL_P95 = 0.030
GOAL_FRESH = 0.500
GOAL_IMPORT_RATE = 2_000

Answer = dict[str, Any]


def questions(answer: Answer) -> list[str]:
    return [m["question"] for m in answer["matches"]]


def agreement(answers: Sequence[Answer], steady: Sequence[Answer]) -> str:
    """Same memos in the same order; the steady first memo among the first three."""
    same = sum(questions(a) == questions(s) for a, s in zip(answers, steady, strict=True))
    asked = [(a, s) for a, s in zip(answers, steady, strict=True) if s["matches"]]
    top3 = sum(questions(s)[0] in questions(a)[:3] for a, s in asked)
    return f"{same}/{len(answers)} same; first in top 3 {top3}/{len(asked)}"


def by_vectors(answers: Sequence[Answer]) -> str:
    words = sum(not a["semantic_index"] or a.get("pending_vectors", 0) > 0 for a in answers)
    return "all" if not words else f"{len(answers) - words}/{len(answers)}"


class Server:
    """A real ``explomemo serve`` process driven over stdio by raw JSON-RPC lines."""

    def __init__(self, db: Path, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")}
        self.proc = subprocess.Popen(
            [EXPLOMEMO, "--db", str(db), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: [self._lines.put(x) for x in stdout], daemon=True).start()
        self._id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            message = json.loads(self._lines.get(timeout=300))
            if message.get("id") == self._id:
                return message

    def recall(self, query: str, root: Path) -> tuple[float, Answer]:
        start = time.perf_counter()
        reply = self.request(
            "tools/call",
            {"name": RECALL, "arguments": {"query": query, "project": PROJECT, "root": str(root)}},
        )
        took = time.perf_counter() - start
        return took, reply["result"]["structuredContent"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def fresh_first_recalls(
    db: Path, root: Path, asked: list[str]
) -> tuple[list[float], list[float], list[Answer]]:
    """B: each query the first recall of a new server, timed from the request and from the
    process's start."""
    times, spawned, answers = [], [], []
    for query in asked:
        start = time.perf_counter()
        server = Server(db, root)
        try:
            took, answer = server.recall(query, root)
        finally:
            server.close()
        spawned.append(time.perf_counter() - start)
        times.append(took)
        answers.append(answer)
    return times, spawned, answers


async def warm_server_states(
    db: Path, root: Path, files: list[str], count: int, asked: list[str], captures: int
) -> dict[str, Any]:
    """A and C, in one in-process server (its cache is what the states are about)."""
    from mcp import Client

    from explomemo.server.tools import create_server

    found: dict[str, Any] = {}
    server = create_server(db)
    async with Client(server) as client:

        async def recall(query: str) -> tuple[float, Answer]:
            start = time.perf_counter()
            out = await client.call_tool(
                RECALL, {"query": query, "project": PROJECT, "root": str(root)}
            )
            took = time.perf_counter() - start
            assert not out.is_error, out.content
            assert out.structured_content is not None
            return took, out.structured_content

        record_times = []
        started = time.perf_counter()
        for i in range(count):
            question, conclusion = memo_text(i)
            t0 = time.perf_counter()
            out = await client.call_tool(
                "memory_exploration_record",
                {
                    "question": f"{question} (variant {i})",
                    "conclusion": conclusion,
                    "files": [files[i % len(files)], files[(i * 7 + 3) % len(files)]],
                    "project": PROJECT,
                    "root": str(root),
                },
            )
            record_times.append(time.perf_counter() - t0)
            assert not out.is_error, out.content
        found["burst_s"] = time.perf_counter() - started
        found["record"] = record_times
        found["burst"] = [await recall(q) for q in asked]
        found["steady"] = [(await recall(q))[1] for q in asked]
        if captures:
            await recall(asked[0] if asked else "warm up")  # the project's vectors in memory

        # C: memos another process wrote without vectors, asked for by their questions.
        written = []
        for k in range(captures):
            question, conclusion = memo_text(count + 10_000 + k)
            question = f"{question} (captured {k})"
            done = subprocess.run(
                [EXPLOMEMO, "--db", str(db), "record", "--project", PROJECT, "--root", str(root),
                 "--question", question, "--conclusion", conclusion, files[k % len(files)]],
                capture_output=True, text=True, check=False,
                env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "off"},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            written.append(question)
        after = [await recall(q) for q in written]
        found["captures"] = after
        found["captured_first"] = sum(
            bool(a["matches"]) and a["matches"][0]["question"] == q
            for q, (_, a) in zip(written, after, strict=True)
        )
        found["captures_steady"] = [(await recall(q))[1] for q in written]
    return found


async def import_window(db: Path, root: Path, asked: list[str]) -> list[tuple[float, Answer]]:
    """D: a new server's recalls while an import's backlog is searched by words."""
    from mcp import Client

    from explomemo.server.tools import create_server

    async with Client(create_server(db)) as client:
        answers = []
        for query in asked:
            start = time.perf_counter()
            out = await client.call_tool(
                RECALL, {"query": query, "project": PROJECT, "root": str(root)}
            )
            assert out.structured_content is not None
            answers.append((time.perf_counter() - start, out.structured_content))
    return answers


def run_cli(*args: str, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([EXPLOMEMO, *args], capture_output=True, text=True, cwd=cwd, check=False)
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    return took, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--memos", type=int, default=0, help="memos recorded in the burst")
    parser.add_argument("--calls", type=int, default=0, help="queries asked in each state")
    parser.add_argument("--fresh", type=int, default=0, help="fresh servers timed (B)")
    parser.add_argument("--captures", type=int, default=5, help="memos written by hooks (C)")
    args = parser.parse_args()
    count = args.memos or (200 if args.quick else 2_000)
    calls = args.calls or (20 if args.quick else 100)
    fresh = args.fresh or (3 if args.quick else 10)
    print(wait_for_quiet(10 if args.quick else 240))
    print(machine_line())
    print(
        f"data: {count:,} memos recorded through MCP; {calls} queries asked in each state;"
        f" {fresh} fresh servers; {args.captures} captures"
    )
    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-pending-"))
    try:
        pool = make_pool(tmp / "repo", 200, 2_000)
        files = [row.path for row in pool.rows]
        root = pool.root
        time.sleep(2.5)  # files older than the validator's racy window
        asked = queries(calls, 700_000)

        # B on 25 memos first (its own database), then A and C on the burst's.
        small = tmp / "small.db"
        asyncio.run(warm_server_states(small, root, files, 25, asked[:1], 0))
        small_times, small_spawned, _ = fresh_first_recalls(small, root, queries(fresh, 800_000))

        db = tmp / "burst.db"
        warm = asyncio.run(warm_server_states(db, root, files, count, asked, 0))
        fresh_times, fresh_spawned, fresh_answers = fresh_first_recalls(db, root, asked[:fresh])
        captured = asyncio.run(warm_server_states(db, root, files, 0, [], args.captures))
        warm.update({k: v for k, v in captured.items() if k.startswith("captur")})

        export = tmp / "memos.jsonl"
        run_cli("--db", str(db), "export", "--project", PROJECT, "-o", str(export), cwd=root)
        imported = tmp / "imported.db"
        import_s, _ = run_cli("--db", str(imported), "import", str(export), cwd=root)
        exported = sum(1 for _ in export.open())
        window = asyncio.run(import_window(imported, root, asked))
        index_s, _ = run_cli("--db", str(imported), "index", cwd=root)
        steady_import = asyncio.run(import_window(imported, root, asked))

        print()
        burst_times = [t for t, _ in warm["burst"]]
        burst_answers = [a for _, a in warm["burst"]]
        p95 = percentile(burst_times[1:], 95)
        capture_times = [t for t, _ in warm["captures"]]
        capture_answers = [a for _, a in warm["captures"]]
        window_times = [t for t, _ in window]
        window_answers = [a for _, a in window]
        pending = [a.get("pending_vectors", 0) for a in window_answers]
        rate = exported / import_s
        print(
            table(
                ["state", "latency", "from vectors", "quality vs steady state", "goal", "verdict"],
                [
                    [f"A: burst of {count:,} records (record p50 / p95)",
                     f"{ms(median(warm['record']))} / {ms(percentile(warm['record'], 95))}",
                     "-", f"{warm['burst_s']:.1f} s in all", "-", "-"],
                    ["A: first recall right after it", ms(burst_times[0]),
                     by_vectors(burst_answers[:1]), "-", "-", "-"],
                    ["A: recalls right after it, p50 / p95",
                     f"{ms(median(burst_times[1:]))} / {ms(p95)}", by_vectors(burst_answers),
                     agreement(burst_answers, warm["steady"]), f"p95 <= {ms(GOAL_P95)}",
                     verdict(p95, GOAL_P95)],
                    ["B: fresh server's first recall, 25 memos, p50 / max",
                     f"{ms(median(small_times))} / {ms(max(small_times))}", "-", "-", "-", "-"],
                    ["B: the same from the process's start, p50",
                     ms(median(small_spawned)), "-", "-", "-", "-"],
                    [f"B: fresh server's first recall, {count:,} memos, p50 / max",
                     f"{ms(median(fresh_times))} / {ms(max(fresh_times))}",
                     by_vectors(fresh_answers),
                     agreement(fresh_answers, warm["steady"][:fresh]),
                     f"<= {ms(GOAL_FRESH)}", verdict(median(fresh_times), GOAL_FRESH)],
                    ["B: the same from the process's start, p50",
                     ms(median(fresh_spawned)), "-", "-", "-", "-"],
                    [f"C: first recall after {args.captures} captures, p50 / max",
                     f"{ms(median(capture_times))} / {ms(max(capture_times))}",
                     by_vectors(capture_answers),
                     f"{agreement(capture_answers, warm['captures_steady'])};"
                     f" capture first {warm['captured_first']}/{args.captures}", "-", "-"],
                    [f"D: import of {exported:,} memos (new process)",
                     f"{import_s:.2f} s, {rate:,.0f} memos/s", "-", "-",
                     f">= {GOAL_IMPORT_RATE:,}/s",
                     "PASS" if rate >= GOAL_IMPORT_RATE else "FAIL"],
                    [f"D: recalls right after it (pending {min(pending):,}-{max(pending):,}),"
                     " p50 / p95", f"{ms(median(window_times))} / "
                     f"{ms(percentile(window_times, 95))}", by_vectors(window_answers),
                     agreement(window_answers, [a for _, a in steady_import]), "-", "-"],
                    [f"D: explomemo index of {exported:,} memos (new process)",
                     f"{index_s:.1f} s, {exported / index_s:,.0f} memos/s", "-", "-", "-", "-"],
                ],
                title="explomemo recall in each state, beside the steady state",
            )
        )  # fmt: skip
        print(f"at the end: {load_line()}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
