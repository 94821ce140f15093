"""Diffs of stale memos on a real project's history: coverage, size, record cost, storage.

At run time it downloads pinned releases of a real project as sdists (``pip
download --no-deps --no-binary :all:``) into a temporary folder, commits each
release in order into a temporary git repository, records memos at the oldest
release (8 files each, every text file of the release), and checks them at
each later release. Nothing downloaded is kept. It prints:

* the share of changed files that get a diff: with snapshots (goal: all), and
  from git alone (``EXPLOMEMO_SNAPSHOTS=off``; goal ≥ 95 % of committed files);
* the median diff size as a share of the changed file's size (goal ≤ 0.15),
  whole and as an agent gets it (cut at the per-file limit);
* record p50 against main at ce975a8 (a ``git archive`` of it in a temporary
  folder), in alternating rounds in separate processes (goal: at most +20 %),
  with the median of the rounds' own ratios (``--compare REV`` adds another
  commit to the rounds, e.g. main beside this branch);
* database growth per distinct recorded content against its size (goal ≤ 0.4).

Run from the repository root: ``.venv/bin/python benchmarks/bench_diff.py``
(about 2 minutes; ``--quick``: 2 record rounds instead of 6; ``--pause 0``:
records back to back).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, REPO, load_line, machine_line, table, verdict, wait_for_quiet

PROJECT = "rich"
RELEASES = ["13.4.2", "13.5.3", "13.6.0", "13.7.0"]
REFERENCE = "ce975a8"
FILES_PER_MEMO = 8
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".rst", ".in", ".ini", ".yml", ".json"}

#: Records every memo of a plan into a fresh database and prints the timings (one process).
WORKER = r"""
import json, sys, time
from pathlib import Path
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel
plan = json.loads(sys.stdin.read())
PAUSE = plan["pause"]
times, background = [], []
with MemoCache.open(Path(plan["db"]), FixedModel(None)) as cache:
    cache.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    empty = Path(plan["db"]).stat().st_size
    wait = getattr(cache, "wait_for_snapshots", lambda: True)
    for n, files in enumerate(plan["memos"]):
        t = time.perf_counter()
        cache.record(question=f"memo {n}", conclusion="c" * 400, files=files,
                     project="bench", root=plan["root"])
        times.append(time.perf_counter() - t)
        # An agent records a memo every few minutes, not every millisecond: the
        # blob ids and snapshots of one record are stored before the next one,
        # and every code pauses as long after each record (the code without a
        # writer would otherwise record back to back, its caches warm).
        wait()
        background.append(time.perf_counter() - t)
        time.sleep(PAUSE)
print(json.dumps({"times": times, "stored": background, "empty": empty}))
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def build_history(work: Path) -> tuple[Path, list[str]]:
    """The releases committed in order into a new repository; their commit ids."""
    downloads = work / "sdists"
    downloads.mkdir()
    repo = work / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    commits = []
    for version in RELEASES:
        subprocess.run(
            [PYTHON, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{PROJECT}=={version}", "-d", str(downloads)],
            check=True, capture_output=True,
        )  # fmt: skip
        (archive,) = downloads.glob(f"{PROJECT}-{version}.tar.gz")
        unpacked = work / f"unpacked-{version}"
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        (top,) = unpacked.iterdir()
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        for child in top.iterdir():
            shutil.move(str(child), repo / child.name)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"{PROJECT} {version}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def plan_memos(repo: Path) -> list[list[str]]:
    files = sorted(
        str(p.relative_to(repo))
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.parts and p.suffix in TEXT_SUFFIXES
    )
    return [files[i : i + FILES_PER_MEMO] for i in range(0, len(files), FILES_PER_MEMO)]


def db_bytes(db: Path) -> int:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db.stat().st_size


def archived(work: Path, commit: str) -> Path:
    """The code at ``commit``, as ``git archive`` gives it, in a new folder."""
    folder = work / f"code-{commit}"
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def record_rounds(
    work: Path,
    repo: Path,
    memos: list[list[str]],
    rounds: int,
    pause: float,
    compare: list[str],
) -> dict[str, dict[str, list[float]]]:
    """Record every memo with this code, main at REFERENCE and each ``compare`` commit,
    in rounds of one process each; each round starts one code further on."""
    codes = [("this code", REPO), (f"main {REFERENCE}", archived(work, REFERENCE))]
    codes += [(f"commit {commit}", archived(work, commit)) for commit in compare]
    found: dict[str, dict[str, list[float]]] = {
        name: {"times": [], "stored": [], "db": [], "p50": []} for name, _ in codes
    }
    plan = json.dumps({"root": str(repo), "memos": memos, "pause": pause})
    for n in range(rounds):
        for k, (name, code) in enumerate(codes[n % len(codes) :] + codes[: n % len(codes)]):
            db = work / f"db-{n}-{k}" / "x.db"
            env = {**os.environ, "PYTHONPATH": str(code), "EXPLOMEMO_EMBEDDINGS": "off"}
            env.pop("EXPLOMEMO_SNAPSHOTS", None)
            done = subprocess.run(
                [PYTHON, "-c", WORKER],
                input=json.dumps({**json.loads(plan), "db": str(db)}),
                capture_output=True, text=True, check=True, env=env, cwd=str(code),
            )  # fmt: skip
            result = json.loads(done.stdout)
            found[name]["times"] += result["times"]
            found[name]["stored"] += result["stored"]
            found[name]["p50"].append(statistics.median(result["times"]))
            found[name]["db"].append(db_bytes(db) - result["empty"])
    return found


def check_releases(
    work: Path, repo: Path, commits: list[str], memos: list[list[str]]
) -> list[list[object]]:
    """Record at the oldest release (with and without snapshots); check at each later one."""
    from explomemo.changes.diffs import NO_LIMITS
    from explomemo.memos.cache import MemoCache
    from explomemo.recall.sources import FixedModel

    git(repo, "checkout", "-q", commits[0])
    caches = {}
    for snapshots in (True, False):
        cache = MemoCache.open(work / f"check-{snapshots}" / "x.db", FixedModel(None), snapshots)
        for n, files in enumerate(memos):
            cache.record(question=f"memo {n}", conclusion="c", files=files, project="bench",
                         root=str(repo))  # fmt: skip
        cache.wait_for_snapshots()
        caches[snapshots] = cache
    rows: list[list[object]] = []
    try:
        for version, commit in zip(RELEASES[1:], commits[1:], strict=True):
            git(repo, "checkout", "-q", commit)
            for snapshots, cache in caches.items():
                whole: dict[str, tuple[str | None, str | None, int]] = {}
                delivered: dict[str, str | None] = {}
                for memo in cache.list(project="bench"):
                    for f in cache.show(memo.id, limits=NO_LIMITS).files:
                        if f.state == "changed":
                            size = (repo / f.path).stat().st_size
                            whole[f.path] = (f.diff, f.diff_source, size)
                    for f in cache.show(memo.id).files:
                        if f.state == "changed":
                            delivered[f.path] = f.diff
                with_diff = [p for p, (d, _, _) in whole.items() if d is not None]
                shares = [len(whole[p][0] or "") / max(1, whole[p][2]) for p in with_diff]
                cut = [len(delivered[p] or "") / max(1, whole[p][2]) for p in with_diff]
                sources = sorted({s or "" for _, s, _ in whole.values()})
                rows.append([
                    f"{RELEASES[0]} -> {version}",
                    "snapshots" if snapshots else "git only",
                    len(whole),
                    f"{len(with_diff)} ({len(with_diff) / max(1, len(whole)):.1%})",
                    ", ".join(sources),
                    f"{statistics.median(shares):.3f}" if shares else "-",
                    f"{statistics.median(cut):.3f}" if cut else "-",
                ])  # fmt: skip
    finally:
        for cache in caches.values():
            cache.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="record rounds per code (default 6)")
    parser.add_argument("--quick", action="store_true", help="2 record rounds")
    parser.add_argument(
        "--pause", type=float, default=0.02, help="seconds after each record (default 0.02)"
    )
    parser.add_argument(
        "--compare", action="append", default=[], metavar="REV",
        help="another commit to record with in the same rounds (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    print(machine_line())
    print(wait_for_quiet(max_seconds=240))
    with tempfile.TemporaryDirectory(prefix="explomemo-bench-diff-") as folder:
        work = Path(folder)
        repo, commits = build_history(work)
        git(repo, "checkout", "-q", commits[0])
        memos = plan_memos(repo)
        distinct = {(repo / p).read_bytes() for files in memos for p in files}
        content = sum(len(d) for d in distinct)
        print(
            f"\n{PROJECT} {', '.join(RELEASES)}: {sum(map(len, memos))} text files in"
            f" {len(memos)} memos of up to {FILES_PER_MEMO}, {len(distinct)} distinct contents,"
            f" {content:,} bytes"
        )
        timings = record_rounds(work, repo, memos, rounds, args.pause, args.compare)
        rows = check_releases(work, repo, commits, memos)

    print()
    print(table(
        ["releases", "diffs from", "changed files", "with a diff", "sources",
         "median diff/file (whole)", "median diff/file (as cut for an agent)"],
        rows, "Changed files and their diffs (goal: all with snapshots, >= 95 % git only; <= 0.15)",
    ))  # fmt: skip
    ours, ref = timings["this code"], timings[f"main {REFERENCE}"]
    p50, ref_p50 = statistics.median(ours["times"]), statistics.median(ref["times"])

    def per_round(t: dict[str, list[float]]) -> float:
        return statistics.median(a / b for a, b in zip(t["p50"], ref["p50"], strict=True))

    print()
    print(table(
        ["code", "record p50", "record p90", "record + blob ids and snapshots stored, p50",
         "database growth", f"median of the rounds' p50 / {REFERENCE}"],
        [[name, f"{statistics.median(t['times']) * 1000:.2f} ms",
          f"{statistics.quantiles(t['times'], n=10)[-1] * 1000:.2f} ms",
          f"{statistics.median(t['stored']) * 1000:.2f} ms",
          f"{statistics.median(t['db']):,.0f} B", f"{per_round(t):.3f}"]
         for name, t in timings.items()],
        f"Record, {rounds} rounds of {len(memos)} memos in turn, a fresh database each, a"
        f" {args.pause * 1000:g} ms pause after each record (growth: from the empty migrated"
        " database)",
    ))  # fmt: skip
    ratio = p50 / ref_p50
    print(f"record p50: {ratio:.3f}x main ({(ratio - 1):+.1%}; the rounds' median"
          f" {per_round(ours):.3f}x); goal <= +20 %: {verdict(ratio, 1.2)}")  # fmt: skip
    growth = statistics.median(ours["db"]) / content
    extra = (statistics.median(ours["db"]) - statistics.median(ref["db"])) / content
    print(
        f"database per distinct content byte: {growth:.3f} (of which {extra:.3f} more than main:"
        f" blob ids, snapshots, the SHA-256 index); goal <= 0.4: {verdict(growth, 0.4)}"
    )
    print(load_line())


if __name__ == "__main__":
    main()
