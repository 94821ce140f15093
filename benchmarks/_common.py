"""Shared helpers of the explomemo benchmarks: machine facts, statistics, tables, fixtures.

Every benchmark puts explomemo beside a reference measured in the same run, and
quotes medians (or percentiles) of several repetitions and ratios, never one
absolute time: the benchmark machine has few, noisy cores.
"""

from __future__ import annotations

import cProfile
import io
import os
import platform
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
EXPLOMEMO = str(VENV_BIN / "explomemo")


# Machine ---------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's best guess)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    """Lines naming the machine (cores, CPU, Python, OS), the code, and the load now."""
    return (
        f"machine: nproc={os.cpu_count()}  cpu={cpu_model()!r}  python={platform.python_version()}"
        f"  {platform.system()} {platform.release()}\n{code_line()}\n{load_line()}"
    )


def load_line() -> str:
    """The load average now: other work on the machine skews every figure."""
    try:
        load = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return "load: unknown"
    return f"load average (1/5/15 min): {' '.join(load)}"


# Statistics ------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    """The median."""
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def timed(action: Callable[[], object]) -> float:
    """Seconds one call of ``action`` takes."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def ms(seconds: float) -> str:
    """Seconds as milliseconds text."""
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


# Tables ----------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], title: str = "") -> str:
    """A plain monospace table (Markdown-compatible pipes)."""
    text_rows = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    if title:
        lines.append(title)
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in text_rows:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(lines)


def verdict(value: float, goal: float) -> str:
    """PASS/FAIL against an upper bound, with how far off."""
    if value <= goal:
        return "PASS"
    return f"FAIL ({value / goal:.1f}x over)"


# Profiling -------------------------------------------------------------------


def profile(action: Callable[[], object], top: int = 25, sort: str = "cumulative") -> str:
    """cProfile one call of ``action``; the top entries as text."""
    profiler = cProfile.Profile()
    profiler.enable()
    action()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(sort).print_stats(top)
    return out.getvalue()


# Fixtures --------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """A directory of deterministic files: root and the relative paths."""

    root: Path
    rels: list[str]

    def abs(self, rel: str) -> Path:
        """The absolute path of a relative one."""
        return self.root / rel


def make_tree(root: Path, count: int, size: int, seed: int = 1, per_dir: int = 100) -> Tree:
    """``count`` files of ``size`` pseudo-random bytes (deterministic) under ``root``."""
    rels: list[str] = []
    for i in range(count):
        rel = f"d{i // per_dir:04d}/f{i:06d}.bin"
        path = root / rel
        if i % per_dir == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(random.Random(seed * 1_000_003 + i).randbytes(size))
        rels.append(rel)
    return Tree(root, rels)


def rss_of(pid: int | str = "self") -> dict[str, int]:
    """VmHWM and VmRSS (KiB) of a process from /proc/PID/status."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in {"VmHWM", "VmRSS"}:
            found[key] = int(value.split()[0])
    return found


def children_of(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (from /proc)."""
    kids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, so split after ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            kids.append(int(entry.name))
    return kids


def run_quiet(
    argv: Sequence[str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a command, capture its output, fail loudly on a non-zero exit."""
    done = subprocess.run(list(argv), input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:4])} … exited {done.returncode}: {done.stderr.decode()[-2000:]}"
        )
    return done


def code_line() -> str:
    """Which explomemo code ran: git HEAD, and a digest of explomemo/*.py (edits show)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((REPO / "explomemo").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "explomemo", "migrations"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        head, dirty = "?", ""
    state = "with uncommitted changes" if dirty else "clean"
    return f"code: git {head or '?'} ({state}), explomemo/*.py sha256 {digest.hexdigest()[:12]}"


def cpu_busy(seconds: float = 1.0) -> float:
    """Share of all cores busy over ``seconds`` (from /proc/stat), 0..1."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    if total1 == total0:
        return 0.0
    return 1.0 - (idle1 - idle0) / (total1 - total0)


def wait_for_quiet(max_seconds: float = 180.0, busy: float = 0.15) -> str:
    """Wait (up to ``max_seconds``) until other work leaves the cores idle; says what happened."""
    try:
        start = time.monotonic()
        while True:
            now = cpu_busy()
            if now <= busy:
                waited = time.monotonic() - start
                return f"quiet check: cores {now:.0%} busy after {waited:.0f} s wait"
            if time.monotonic() - start > max_seconds:
                return (
                    f"quiet check: WARNING cores still {now:.0%} busy after {max_seconds:.0f} s;"
                    " figures are skewed by other work"
                )
            time.sleep(2.0)
    except OSError:
        return "quiet check: /proc/stat unavailable"


def read_entries(
    ident: str,
    prompt_id: str,
    path: Path,
    text: str,
    shown: str | None = None,
    lines: int | None = None,
) -> list[dict[str, object]]:
    """A Read call and its result, as Claude Code writes them in a main transcript: the
    numbered lines as the model saw them (``shown`` stands in for them where numbering
    ``text`` would cost more than the benchmark measures) and ``text`` as the Read returned
    it, of ``lines`` lines (default: counted)."""
    count = len(text.split("\n")) if lines is None else lines
    if shown is None:
        shown = "".join(f"{n}\t{line}\n" for n, line in enumerate(text.split("\n"), 1))
    return [
        {
            "type": "assistant",
            "isSidechain": False,
            "message": {
                "id": f"msg_{ident}",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": ident,
                        "name": "Read",
                        "input": {"file_path": str(path)},
                    }
                ],
            },
        },
        {
            "type": "user",
            "isSidechain": False,
            "promptId": prompt_id,
            "message": {
                "role": "user",
                "content": [{"tool_use_id": ident, "type": "tool_result", "content": shown}],
            },
            "toolUseResult": {
                "type": "text",
                "file": {
                    "filePath": str(path),
                    "content": text,
                    "numLines": count,
                    "startLine": 1,
                    "totalLines": count,
                },
            },
        },
    ]
