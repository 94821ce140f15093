"""What redaction redacts and keeps, and what it costs a hook to start.

Reads ``cases.jsonl`` (this folder): secrets, each written as its context with ``{}`` where
the secret goes and the secret in two parts (joined here, so that no scanner of this
repository takes the file for a leak), and lookalikes a memo holds all the time. For each
kind it prints how many secrets were redacted and how many lookalikes kept whole; every
secret must leave no run of 8 of its characters behind and be marked as its kind, every
lookalike must come out unchanged. It then checks that the project's own committed memos
(``.explomemo/memos.jsonl``) lose nothing, and measures:

* the start-up of a process that imports :mod:`explomemo.redaction` and redacts one
  text, beside ``python -c pass`` (median of ``--reps`` runs each, alternating);
* with ``--detect-secrets-python PATH`` (a Python where detect-secrets is installed),
  the same for detect-secrets' ``scan_line`` with its default plugins;
* :func:`explomemo.redaction.find` over 1 MiB of this package's source, in process.

Exit 1 when a secret survives or a lookalike or a committed memo is changed.

    .venv/bin/python benchmarks/redaction/run.py [--reps 15] [--detect-secrets-python P]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from explomemo.redaction import find, redact  # noqa: E402

CASES = HERE / "cases.jsonl"
MEMOS = REPO / ".explomemo" / "memos.jsonl"
#: The shortest run of a secret's characters that may not survive redaction.
RUN = 8


def load_cases(path: Path = CASES) -> list[dict[str, object]]:
    """The cases, each with ``text`` (a secret's put in its context) and, for a secret,
    ``value``."""
    cases: list[dict[str, object]] = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        if case["secret"]:
            case["value"] = "".join(case["parts"])
            case["text"] = case["context"].replace("{}", case["value"])
        cases.append(case)
    return cases


def survivors(value: str, redacted: str) -> list[str]:
    """The runs of ``RUN`` characters of ``value`` still in ``redacted``."""
    return [
        value[i : i + RUN] for i in range(len(value) - RUN + 1) if value[i : i + RUN] in redacted
    ]


def check_cases(cases: list[dict[str, object]]) -> tuple[list[str], list[str]]:
    """(table lines, failures)."""
    redacted: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    total: Counter[str] = Counter()
    failures: list[str] = []
    for case in cases:
        kind, text = str(case["kind"]), str(case["text"])
        total[kind, case["secret"]] += 1  # type: ignore[index]
        out = redact(text)
        if case["secret"]:
            left = survivors(str(case["value"]), out.text)
            if left or kind not in out.kinds:
                failures.append(f"secret kept or named otherwise ({kind}): {out.kinds}")
            else:
                redacted[kind] += 1
        elif out.text != text:
            failures.append(f"lookalike changed ({kind}): {out.text[:100]!r}")
        else:
            kept[kind] += 1
    lines = [f"{'kind':<24} {'secrets redacted':>17} {'lookalikes kept':>16}"]
    for kind, secret in sorted(total, key=lambda k: (not k[1], k[0])):
        n = total[kind, secret]
        if secret:
            lines.append(f"{kind:<24} {redacted[kind]:>9} of {n:<5} {'':>16}")
        else:
            lines.append(f"{kind:<24} {'':>17} {kept[kind]:>8} of {n:<5}")
    secrets = sum(n for (_, s), n in total.items() if s)
    looks = sum(n for (_, s), n in total.items() if not s)
    kinds = len({k for k, s in total if s})
    lines.append(
        f"{'all':<24} {sum(redacted.values()):>9} of {secrets:<5} {sum(kept.values()):>8} of"
        f" {looks:<5}  ({kinds} kinds of secret)"
    )
    return lines, failures


def check_memos(path: Path = MEMOS) -> tuple[str, list[str]]:
    """(one line, failures): the committed memos' questions and conclusions unchanged."""
    failures: list[str] = []
    count = 0
    for line in path.read_text().splitlines():
        memo = json.loads(line)
        count += 1
        for field in ("question", "conclusion"):
            for found in find(memo[field]):
                failures.append(
                    f"memo {memo['id']} {field}: {found.kind} at {found.start}"
                    f" ({memo[field][max(0, found.start - 20) : found.end + 20]!r})"
                )
    chars = sum(len(json.loads(line)["conclusion"]) for line in path.read_text().splitlines())
    return (
        f"{count} committed memos ({chars:,} characters of conclusion): {len(failures)} changed",
        failures,
    )


def _median_start(argv: list[str], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def startup(reps: int, detect_secrets: str | None) -> list[str]:
    """Median start-up (ms) of each way of redacting one text, beside ``python -c pass``."""
    text = "my token ghp_" + "a1B2" * 9
    ours = f"from explomemo.redaction import redact; redact({text!r})"
    runs = {
        "python -c pass": [sys.executable, "-c", "pass"],
        # What the Stop hook has loaded before it redacts: the cost of redaction is the
        # difference with the next line.
        "python -c 'import re, typing'": [sys.executable, "-c", "import re, typing"],
        "import explomemo.redaction + redact()": [sys.executable, "-c", ours],
    }
    if detect_secrets:
        runs["python -c pass (detect-secrets' python)"] = [detect_secrets, "-c", "pass"]
        runs["detect-secrets scan_line (default plugins)"] = [
            detect_secrets,
            "-c",
            "from detect_secrets.core.scan import scan_line\n"
            "from detect_secrets.settings import default_settings\n"
            f"with default_settings():\n    list(scan_line({text!r}))",
        ]
    medians: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(3):  # alternating rounds: a busy core hurts each the same
        for name, argv in runs.items():
            medians[name].append(_median_start(argv, reps))
    return [f"{name:<44} {statistics.median(ms):7.1f} ms" for name, ms in medians.items()]


def throughput() -> str:
    source = b"".join(p.read_bytes() for p in sorted((REPO / "explomemo").rglob("*.py")))
    text = (source * (1 + (1 << 20) // len(source)))[: 1 << 20].decode("utf-8", "replace")
    data = text.encode()
    times: dict[str, list[float]] = {"find": [], "zlib": []}
    for _ in range(7):
        start = time.perf_counter()
        find(text)
        times["find"].append(time.perf_counter() - start)
        start = time.perf_counter()
        zlib.compress(data, 6)  # what a snapshot of the same content costs anyway
        times["zlib"].append(time.perf_counter() - start)
    ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
    return (
        f"find() over 1 MiB of explomemo's source: median {ms['find']:.0f} ms"
        f" (zlib level 6 of the same bytes, as a snapshot compresses them: {ms['zlib']:.0f} ms)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--detect-secrets-python", metavar="PATH")
    args = parser.parse_args()
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"explomemo at {head}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
        f" load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print()
    cases = load_cases()
    lines, failures = check_cases(cases)
    memo_line, memo_failures = check_memos()
    print("\n".join(lines))
    print()
    print(memo_line)
    print()
    print("\n".join(startup(args.reps, args.detect_secrets_python)))
    print(throughput())
    for failure in failures + memo_failures:
        print(f"FAIL {failure}")
    return 1 if failures or memo_failures else 0


if __name__ == "__main__":
    sys.exit(main())
