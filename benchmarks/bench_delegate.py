"""The delegate hook (PreToolUse on Agent|Task) in a new process, as Claude Code starts it: a
delegation no memo comes near by words, and one a fresh memo answers whole, beside ``python -c
pass`` and a load of the shipped model (direct, its first vector).

The database holds ``--memos`` memos of delegated explorations (questions made from a template
over many subjects, each resting on two of 20 files), their vectors computed first (``explomemo
index``: as a running server fills them). Each of ``--runs`` rounds starts one process of each
kind in turn, timed whole from outside (p50, p95, max). The hook with a memo near is also run
in a process that times its own parts: explomemo's imports (the CLI and the hook modules), the
model's imports (numpy, onnxruntime, tokenizers), the model's load (its SHA-256 check, the
session, the tokenizer) and the match (words, the prompt's embedding, the stale check, the
answer).

Usage: .venv/bin/python benchmarks/bench_delegate.py [--runs N] [--memos N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import (
    EXPLOMEMO,
    PYTHON,
    machine_line,
    median,
    ms,
    percentile,
    run_quiet,
    table,
    wait_for_quiet,
)

SUBJECTS = [
    f"{thing} {verb}"
    for thing in (
        "a JWT token",
        "the retry policy",
        "the cache key",
        "a webhook",
        "the config file",
        "an upload",
        "a refund",
        "the session cookie",
        "a database migration",
        "the rate limit",
        "a search query",
        "the audit log",
        "an invoice",
        "the feature flag",
        "a background job",
        "the CSV export",
        "an email template",
        "the API version",
        "a user role",
        "the metrics endpoint",
        "a payment intent",
        "the password hash",
        "a file lock",
        "the plugin registry",
        "a websocket frame",
    )
    for verb in ("verified", "decided", "parsed", "stored", "retried", "logged", "built", "closed")
]
TEMPLATE = "Explore src/ and report where {subject}: the function and the file."
ANSWERED = "Explore src/ and report where JWT tokens are verified: which function and which file."
UNRELATED = "Explore the Terraform modules and report which buckets have versioning switched on."

PARTS = """\
import io, json, sys, time
start = time.perf_counter()
from explomemo.cli.main import main
from explomemo.clients.hooks import run
from explomemo.recall import delegations
imported = time.perf_counter()
spent = {{"imports": 0.0, "load": 0.0}}
shipped = delegations.shipped_embedder

def timed():
    begin = time.perf_counter()
    import numpy, onnxruntime, tokenizers
    spent["imports"] = time.perf_counter() - begin
    model = shipped()
    spent["load"] = time.perf_counter() - begin - spent["imports"]
    return model

delegations.shipped_embedder = timed
out = io.BytesIO()
run.run_hook("delegate", db={db!r}, project="bench", stdin=io.BytesIO({payload!r}), stdout=out)
done = time.perf_counter()
assert b'"deny"' in out.getvalue(), out.getvalue()
print(json.dumps([imported - start, spent["imports"], spent["load"],
                  done - imported - spent["imports"] - spent["load"]]))
"""
MODEL = (
    "from explomemo.recall import embeddings\n"
    "embeddings.load_embedder({}).embed(['where is the retry policy decided?'])\n"
)


def _database(base: Path, memos: int) -> tuple[Path, Path]:
    root = base / "repo"
    (root / "src").mkdir(parents=True)
    for n in range(20):
        (root / f"src/module{n}.py").write_text(f"def handler{n}(x):\n    return x + {n}\n")
    db = base / "memos.db"
    from explomemo import FixedModel, MemoCache

    with MemoCache.open(db, FixedModel(None)) as cache:
        for n in range(memos):
            subject = SUBJECTS[n % len(SUBJECTS)]
            again = "" if n < len(SUBJECTS) else f" (take {n // len(SUBJECTS)})"
            cache.record(
                question=TEMPLATE.format(subject=subject) + again,
                conclusion=f"src/module{n % 20}.py handler{n % 20}() is where {subject}.",
                files=[f"src/module{n % 20}.py", f"src/module{(n + 7) % 20}.py"],
                project="bench",
                root=str(root),
            )
    run_quiet([EXPLOMEMO, "--db", str(db), "index"])
    return db, root


def _payload(root: Path, prompt: str) -> bytes:
    return json.dumps(
        {
            "session_id": "bench",
            "transcript_path": str(root / "none.jsonl"),
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Agent",
            "tool_input": {"description": "explore", "prompt": prompt, "subagent_type": "Explore"},
        }
    ).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="processes of each kind")
    parser.add_argument("--memos", type=int, default=400, help="memos in the database")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-delegate-"))
    db, root = _database(base, args.memos)
    print(wait_for_quiet(120))
    print(machine_line())
    hook = [EXPLOMEMO, "--db", str(db), "hook", "delegate", "--project", "bench"]
    kinds = {
        "python -c pass": ([PYTHON, "-c", "pass"], None),
        "shipped model: load + first vector": ([PYTHON, "-c", MODEL], None),
        "hook delegate, no memo near": (hook, _payload(root, UNRELATED)),
        "hook delegate, a memo answers whole": (hook, _payload(root, ANSWERED)),
    }
    whole: dict[str, list[float]] = {kind: [] for kind in kinds}
    parts: list[list[float]] = []
    source = PARTS.format(db=str(db), payload=_payload(root, ANSWERED))
    for _ in range(args.runs):
        for kind, (argv, payload) in kinds.items():
            start = time.perf_counter()
            done = run_quiet(argv, stdin=payload)
            whole[kind].append(time.perf_counter() - start)
            assert done.returncode == 0 and not done.stderr, (kind, done.stderr)
            if kind.startswith("hook"):
                assert (b'"deny"' in done.stdout) == kind.endswith("whole"), done.stdout
        done = run_quiet([PYTHON, "-c", source])
        parts.append(json.loads(done.stdout))
    rows = [
        [
            kind,
            ms(median(times)),
            ms(percentile(times, 95)),
            ms(max(times)),
        ]
        for kind, times in whole.items()
    ]
    print(
        table(
            ["new process", "p50", "p95", "max"],
            rows,
            title=f"{args.runs} runs of each, {args.memos} memos with their vectors",
        )
    )
    names = ["explomemo's imports", "model's imports", "model's load", "match and answer"]
    split = [
        [name, ms(median([p[i] for p in parts])), ms(percentile([p[i] for p in parts], 95))]
        for i, name in enumerate(names)
    ]
    print(table(["hook delegate, a memo answers whole: part", "p50", "p95"], split))
    print(machine_line().splitlines()[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
