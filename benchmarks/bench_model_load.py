"""The shipped model's load in a new process: direct (onnxruntime and tokenizers) and through
fastembed (the same files, as before), beside ``python -c pass``.

Each of ``--runs`` rounds starts one process of each kind, in turn; a process times itself
from its first line to its first vector (imports, the SHA-256 check, the session, the
tokenizer, one embedding), and the run is timed whole from outside. Medians and the
slowest run.

Usage: .venv/bin/python benchmarks/bench_model_load.py [--runs N]
"""

from __future__ import annotations

import argparse
import time

from _common import PYTHON, machine_line, median, ms, run_quiet, table, wait_for_quiet

LOAD = (
    "import time\n"
    "start = time.perf_counter()\n"
    "from explomemo.recall import embeddings\n"
    "{load}\n"
    "model.embed(['where is the retry policy decided?'])\n"
    "print(time.perf_counter() - start)\n"
)
KINDS = {
    "python -c pass": "pass",
    "shipped model, direct (now)": LOAD.format(load="model = embeddings.load_embedder({})"),
    "shipped model through fastembed (before)": LOAD.format(
        load="model = embeddings.FastembedEmbedder(embeddings.DEFAULT_MODEL_ID,"
        " embeddings.DEFAULT_MODEL_NAME, str(embeddings.default_model_dir()))"
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="processes of each kind")
    args = parser.parse_args()
    print(wait_for_quiet(120))
    print(machine_line())
    whole: dict[str, list[float]] = {kind: [] for kind in KINDS}
    inside: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(args.runs):
        for kind, source in KINDS.items():
            start = time.perf_counter()
            done = run_quiet([PYTHON, "-c", source])
            whole[kind].append(time.perf_counter() - start)
            if done.stdout.strip():
                inside[kind].append(float(done.stdout))
    rows = [
        [
            kind,
            f"{ms(median(inside[kind]))} / {ms(max(inside[kind]))}" if inside[kind] else "-",
            f"{ms(median(whole[kind]))} / {ms(max(whole[kind]))}",
        ]
        for kind in KINDS
    ]
    print(
        table(
            ["new process", "load + first vector, p50 / max", "whole process, p50 / max"],
            rows,
            title=f"{args.runs} runs of each",
        )
    )
    print(machine_line().splitlines()[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
