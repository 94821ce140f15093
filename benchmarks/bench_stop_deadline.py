"""The Stop hook on a turn that read 70 files of just under 32 MiB: wall time and peak
memory of the real hook process, beside ``python -c pass``.

The files hold short lines (``x\\n``: 16 million lines each, the case that cost most),
in a plain folder, with a database that holds one memo. Two transcripts in Claude
Code's format, each one turn that asks a question and reads the 70 files (each Read
returns the first 2,000 lines, as Claude Code's Read does by default):

* match: the Read results are the files' lines: each file is hashed as it is now;
* differ: every Read result differs from the file (``y`` where the file has ``x``): each
  file is rebuilt as the agent saw it before it is hashed.

Each call runs ``explomemo hook stop`` as Claude Code does (the Stop input on stdin)
and waits for it with ``os.wait4``: the wall time and the child's peak resident memory
(``ru_maxrss``), its exit code, its stderr, and whether the memo was stored.

The goal (issue 36): the hook ends within the 10 s ``setup`` gives it, its own deadline
being 8 s (``explomemo.clients.hooks.stop.DEADLINE_S``), and never holds the files at
once.

Usage: .venv/bin/python benchmarks/bench_stop_deadline.py [--reps N] [--files N] [--mib N]
       [--explomemo PATH]   (another install's command: an earlier release, say)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    EXPLOMEMO,
    PYTHON,
    load_line,
    machine_line,
    median,
    read_entries,
    run_quiet,
    table,
    wait_for_quiet,
)

PROMPT_ID = "d7b862e4-c8ff-4ec2-81ec-7587d377dd18"
QUESTION = "where is the retry policy decided?"
READ_LINES = 2_000
#: Setup's timeout for the Stop hook.
BUDGET_S = 10.0


def transcript(path: Path, files: list[Path], line: str) -> Path:
    """A transcript of one turn reading ``files``, each Read returning ``line`` 2,000 times."""
    entries: list[dict[str, object]] = [
        {
            "type": "user",
            "isSidechain": False,
            "promptId": PROMPT_ID,
            "message": {"role": "user", "content": QUESTION},
        }
    ]
    text = "\n".join([line] * READ_LINES)
    for n, file in enumerate(files):
        entries += read_entries(f"toolu_{n:03d}", PROMPT_ID, file, text, "(lines)", READ_LINES)
    entries.append(
        {
            "type": "assistant",
            "message": {
                "id": "msg_final",
                "role": "assistant",
                "content": [{"type": "text", "text": "It is decided in d/f000.txt."}],
            },
        }
    )
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def build(tmp: Path, count: int, size: int, command: str) -> tuple[Path, Path, dict[str, Path]]:
    """The folder of ``count`` files of ``size`` bytes, the database, the transcripts."""
    root = tmp / "repo"
    (root / "d").mkdir(parents=True)
    body = b"x\n" * (size // 2)
    files = []
    for n in range(count):
        path = root / "d" / f"f{n:03d}.txt"
        path.write_bytes(body)
        files.append(path)
    db = tmp / "memos.db"
    subprocess.run(
        [command, "--db", str(db), "record", "--root", str(root), "--question", "seed?",
         "--conclusion", "c", "d/f000.txt"],
        check=True, capture_output=True, env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "off"},
    )  # fmt: skip
    transcripts = {
        "match": transcript(tmp / "match.jsonl", files, "x"),
        "differ": transcript(tmp / "differ.jsonl", files, "y"),
    }
    return root, db, transcripts


def run(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, int, int, bytes]:
    """Wall seconds, peak RSS (KiB), exit code and stderr of one child process."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        assert child.stdin is not None
        child.stdin.write(stdin)
        child.stdin.close()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return wall, usage.ru_maxrss, child.returncode, err.read()


def captured(db: Path, command: str) -> int:
    """How many captured memos the database holds (then forgets them: each call starts alike)."""
    conn = sqlite3.connect(db)
    try:
        ids = [str(i) for (i,) in conn.execute("SELECT id FROM memos WHERE origin = 'transcript'")]
    finally:
        conn.close()
    if ids:
        subprocess.run([command, "--db", str(db), "forget", *ids], check=True, capture_output=True)
    return len(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=70)
    parser.add_argument("--mib", type=int, default=32, help="each file is 2 bytes under this")
    parser.add_argument("--explomemo", default=EXPLOMEMO, help="the explomemo command to time")
    args = parser.parse_args()
    print(wait_for_quiet(max_seconds=30))
    print(machine_line())
    size = args.mib * 1024 * 1024 - 2
    print(
        f"scenario: a turn that read {args.files} files of {size:,} bytes (x\\n lines), Stop hook"
    )
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        root, db, transcripts = build(tmp, args.files, size, args.explomemo)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")},
            "EXPLOMEMO_EMBEDDINGS": "off",
            "CLAUDE_PROJECT_DIR": str(root),
        }
        python = str(Path(args.explomemo).parent / "python")
        where = run_quiet([python, "-c", "import explomemo; print(explomemo.__file__)"])
        print(f"explomemo run: {where.stdout.decode().strip()}")
        rows = []
        for name, path in transcripts.items():
            payload = {
                "session_id": "bench",
                "transcript_path": str(path),
                "cwd": str(root),
                "hook_event_name": "Stop",
                "stop_hook_active": False,
                "prompt_id": PROMPT_ID,
            }
            walls, peaks, lines, stored = [], [], set(), []
            for _ in range(args.reps):
                wall, peak, code, err = run(
                    [args.explomemo, "--db", str(db), "hook", "stop"],
                    json.dumps(payload).encode(),
                    env,
                )
                assert code == 0, err
                walls.append(wall)
                peaks.append(peak)
                lines.add(err.decode(errors="replace").strip()[:100] or "(none)")
                stored.append(captured(db, args.explomemo))
            rows.append(
                (
                    f"Read results {name}",
                    f"{median(walls):.2f} s (max {max(walls):.2f})",
                    f"{median(peaks) / 1024:.0f} MiB (max {max(peaks) / 1024:.0f})",
                    f"{sum(stored)} of {args.reps}",
                    "PASS" if max(walls) <= BUDGET_S else f"FAIL ({max(walls) / BUDGET_S:.1f}x)",
                    " / ".join(sorted(lines)),
                )
            )
        refs = [run([PYTHON, "-c", "pass"], b"", env) for _ in range(5)]
        print(
            table(
                [
                    "turn",
                    "wall (median)",
                    "peak RSS",
                    "memo stored",
                    f"<= {BUDGET_S:g} s",
                    "stderr",
                ],
                rows,
                title=f"explomemo hook stop, {args.reps} runs each (a new process each)",
            )
        )
        print(
            table(
                ["python -c pass: wall (median)", "peak RSS"],
                [
                    (
                        f"{median([r[0] for r in refs]) * 1000:.0f} ms",
                        f"{median([r[1] for r in refs]) / 1024:.0f} MiB",
                    )
                ],
                title="Reference measured in the same run",
            )
        )
        shutil.rmtree(tmp / "repo")
    print(f"at the end: {load_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
