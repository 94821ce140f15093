"""What project identity costs the prompt hook (issue 23 finding 5).

A memo recorded in a git repository keeps the repository's identity (its first root
commit); the hook then finds the identity of the session's repository to compare, but only
when a memo it would add has one. Measured here, a new process each call as Claude Code
runs it, on repositories of 1 and 5,000 commits whose one memo answers the prompt:

* ``no identity``: the memo has none (as every memo had before; the reference run),
* ``identity, head known``: the database holds the identity found for this HEAD,
* ``identity, new HEAD``: a commit since (the identity is found from the commits since),
* ``identity, no row``: nothing kept (a whole walk of the history, as after a rebase).

The second table times the identity step alone, in this process (what the hook adds,
less the import of the module), where other work on the machine blurs less.

Run: ``.venv/bin/python benchmarks/bench_identity.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import (
    EXPLOMEMO,
    load_line,
    machine_line,
    median,
    ms,
    percentile,
    table,
    timed,
    wait_for_quiet,
)

QUESTION = "Which license covers this code?"
PROMPT = "which license covers this code?"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "PATH": "/usr/bin:/bin",
}


def git(repo: Path, *args: str, given: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, input=given, capture_output=True, check=True, env=GIT_ENV
    )
    return done.stdout.decode().strip()


def make_repo(folder: Path, commits: int) -> Path:
    """A repository of ``commits`` commits (through fast-import), LICENSE in the last."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    stream = []
    for i in range(commits):
        data = f"line {i}\n".encode()
        stream.append(
            b"commit refs/heads/main\n"
            + f"committer Bench <b@example.com> {1_700_000_000 + i} +0000\n".encode()
            + b"data 2\nc\n"
            + f"M 100644 inline file{i % 50}.txt\ndata {len(data)}\n".encode()
            + data
            + b"\n"
        )
    git(folder, "fast-import", "--quiet", given=b"".join(stream))
    git(folder, "checkout", "-q", "-f", "main")
    (folder / "LICENSE").write_text("MIT License\n")
    git(folder, "add", "LICENSE")
    git(folder, "commit", "-q", "-m", "license")
    return folder


def hook_call(db: Path, root: Path) -> Callable[[], object]:
    payload = json.dumps({"cwd": str(root), "prompt": PROMPT}).encode()

    def call() -> object:
        done = subprocess.run(
            [EXPLOMEMO, "--db", str(db), "hook", "prompt", "--project", "app"],
            input=payload,
            capture_output=True,
            check=True,
            env={"PATH": "/usr/bin:/bin", "EXPLOMEMO_EMBEDDINGS": "off", "HOME": str(db.parent)},
        )
        assert b"MIT" in done.stdout, done
        return done

    return call


def step_times(db: Path, root: Path, reps: int) -> list[tuple[str, float, float]]:
    """(case, p50, p95) of finding the identity at ``root`` as a new process would."""
    from explomemo.changes import gitrepo
    from explomemo.store.database import Store

    store = Store.open(db)
    found = []
    try:
        identity = gitrepo.repository_identity(str(root), store)
        head = git(root, "rev-parse", "HEAD")
        cases: list[tuple[str, Callable[[], None]]] = [
            ("head known (files only)", lambda: None),
            ("new HEAD (one commit since)", lambda: forget(store, root, f"{head}~1", identity)),
            ("no row (whole history)", lambda: forget(store, root, None, identity)),
        ]
        for label, before in cases:
            samples = []
            for _ in range(reps):
                before()
                gitrepo._identities.clear()
                samples.append(timed(lambda: gitrepo.repository_identity(str(root), store)))
            found.append((label, median(samples), percentile(samples, 95)))
    finally:
        store.close()
    return found


def forget(store: object, root: Path, rev: str | None, identity: str | None) -> None:
    """Leave the database's row for ``root`` at ``rev`` (None: no row)."""
    from explomemo.store.database import Store

    assert isinstance(store, Store)
    real = str(root.resolve())
    with store.write() as conn:
        conn.execute("DELETE FROM repository_heads WHERE root = ?", (real,))
        if rev is not None and identity is not None:
            store.save_head(conn, real, git(root, "rev-parse", rev), identity)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=21)
    args = parser.parse_args()
    print(wait_for_quiet())
    print(machine_line())
    tmp = Path(tempfile.mkdtemp(prefix="explomemo-bench-identity-"))
    rows = []
    steps = []
    try:
        for commits in (1, 5_000):
            root = make_repo(tmp / f"c{commits}" / "app", commits)
            db = tmp / f"c{commits}.db"
            subprocess.run(
                [EXPLOMEMO, "--db", str(db), "record", "--root", str(root), "--question",
                 QUESTION, "--conclusion", "MIT, in LICENSE.", "LICENSE"],
                check=True, capture_output=True, env={**GIT_ENV, "EXPLOMEMO_EMBEDDINGS": "off"},
            )  # fmt: skip
            call = hook_call(db, root)
            identity = sqlite3.connect(db).execute("SELECT repository FROM memos").fetchone()[0]

            def sql(statement: str, db: Path = db) -> None:
                with sqlite3.connect(db) as conn:
                    conn.execute(statement)

            def new_head(root: Path = root) -> None:
                with (root / "notes.txt").open("a") as notes:
                    notes.write("x\n")
                git(root, "add", "notes.txt")
                git(root, "commit", "-q", "-m", "x")

            cases: list[tuple[str, Callable[[], None]]] = [
                ("no identity", lambda: sql("UPDATE memos SET repository = NULL")),
                ("identity, head known", lambda: None),
                ("identity, new HEAD", new_head),
                ("identity, no row", lambda: sql("DELETE FROM repository_heads")),
            ]
            for label, before in cases:
                if label == "identity, head known":
                    sql(f"UPDATE memos SET repository = '{identity}'")
                call()  # warm the page cache and the database's row
                samples = []
                for _ in range(args.reps):
                    before()
                    samples.append(timed(call))
                rows.append(
                    [f"{commits:,}", label, ms(median(samples)), ms(percentile(samples, 95))]
                )
            new_head()  # a commit since the last row written, for "new HEAD"
            steps += [[f"{commits:,}", label, ms(p50), ms(p95)]
                      for label, p50, p95 in step_times(db, root, args.reps * 3)]  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(
        table(
            ["commits", "memo", "p50", "p95"],
            rows,
            title="hook prompt, one memo answering, a new process each call",
        )
    )
    print()
    print(table(["commits", "identity step", "p50", "p95"], steps,
                title="the identity step alone, in process"))  # fmt: skip
    print(f"at the end: {load_line()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
