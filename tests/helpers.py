"""What the tests share: the one CLI runner (``invoke_cli``), the one cache opener
(``open_cache``), real git repositories, database checks, MCP clients, hostile file
systems, child processes and a raw stdio server.

Everything here works on real SQLite files and real files; nothing loads the
embedding model (``FixedModel(None)`` / ``EXPLOMEMO_EMBEDDINGS=off``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from explomemo.changes import snapshots
from explomemo.check import hashing, readers, validity
from explomemo.cli.main import main
from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import (
    read_export,
)
from explomemo.recall.search import WordScores, WordSearch
from explomemo.recall.sources import FixedModel
from explomemo.shapes import ExportedMemo
from explomemo.store.database import FileRow, Store

PYTHON = sys.executable


EMBEDDINGS_OFF = {"EXPLOMEMO_EMBEDDINGS": "off"}


SECRET = b"TOP-SECRET-CONTENT-never-to-be-read\n"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return its output."""
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        },
    ).stdout.strip()


@dataclass
class CliResult:
    """What one in-process run of the CLI did."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr, for assertion messages."""
        return self.stdout + self.stderr

    @property
    def code(self) -> int:
        """The exit code (as ``exit_code``)."""
        return self.exit_code

    @property
    def out(self) -> str:
        """What went to stdout (as ``stdout``)."""
        return self.stdout

    @property
    def err(self) -> str:
        """What went to stderr (as ``stderr``)."""
        return self.stderr

    def __iter__(self) -> Iterator[Any]:
        """``code, out, err = invoke_cli(...)``."""
        return iter((self.exit_code, self.stdout, self.stderr))

    def __getitem__(self, index: int) -> Any:
        """``invoke_cli(...)[0]`` is the exit code, ``[1]`` stdout, ``[2]`` stderr."""
        return (self.exit_code, self.stdout, self.stderr)[index]


def invoke_cli(args: Sequence[str]) -> CliResult:
    """Run ``explomemo.cli.main.main(args)`` in-process, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return CliResult(code, out.getvalue(), err.getvalue())


#: The explomemo command installed beside this Python (what ``setup`` writes into clients).
EXPLOMEMO = str(Path(sys.executable).parent / "explomemo")


def claude_environment(home: Path, db: Path, path: str) -> dict[str, str]:
    """The environment of a real Claude Code CLI (and of the hooks and server it starts):
    a private HOME, no Anthropic or Claude variable of the caller's, no non-essential
    traffic, explomemo on ``db`` without the model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(
        HOME=str(home),
        PATH=path,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        EXPLOMEMO_DB=str(db),
        EXPLOMEMO_EMBEDDINGS="off",
    )
    return env


def run_quietly(
    argv: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a command with no standard input, its output captured, within 180 s."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


class Repo:
    """A real git repository built in the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")
        git(path, "config", "user.email", "dev@example.com")
        git(path, "config", "user.name", "Dev")

    def write(self, rel: str, text: str) -> Path:
        """Write a file (creating folders)."""
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def commit(self, message: str) -> str:
        """Commit everything; returns the commit id."""
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def checkout(self, rev: str) -> None:
        """Check out a commit."""
        git(self.path, "checkout", "-q", rev)


def open_cache(db: Path, **options: Any) -> MemoCache:
    """The one cache opener: a MemoCache over ``db`` with embeddings off (word search only)."""
    return MemoCache.open(db, FixedModel(None), **options)


#: The one file of a memo written by :func:`save_bare_memo`: a store refuses a memo
#: resting on none, and a name no test's query holds leaves word search as it was.
BARE_FILE = FileRow("zqzq", "0" * 64, "0" * 32, 1)


def save_captured_turn(
    db: Path, root: Path, rel: str, question: str, conclusion: str, project: str
) -> None:
    """Store a memo of ``root/rel`` captured from a turn (origin transcript), as the Stop
    hook stores one."""
    import xxhash

    from explomemo.store.pending import Capture, CapturedFile

    data = (root / rel).read_bytes()
    row = CapturedFile(
        rel,
        hashlib.sha256(data).hexdigest(),
        xxhash.xxh3_128_hexdigest(data),
        len(data),
        hashing.git_blob_id(data),
    )
    found = Capture(project, question, conclusion, str(root), "2026-11-30T10:00:00Z", [row], [])
    store = Store.open(db)
    try:
        with store.write() as conn:
            store.save_capture(conn, found)
    finally:
        store.close()


def save_bare_memo(
    store: Store,
    conn: sqlite3.Connection,
    question: str,
    wanted_id: int | None = None,
    conclusion: str = "c",
    index_identifiers: bool = True,
) -> int:
    """A memo of project "p" with only a question (conclusion "c" unless told, resting on
    :data:`BARE_FILE`), written straight to the store (its identifiers left pending when
    told); returns its id."""
    return store.save_memo(
        conn,
        memo_id=None,
        project="p",
        question=question,
        question_key=question,
        conclusion=conclusion,
        root="/",
        recorded_at="2026-01-01T00:00:00Z",
        files=[BARE_FILE],
        wanted_id=wanted_id,
        index_identifiers=index_identifiers,
    )


def word_scores(
    db: Path, memos: Sequence[str | tuple[str, str]], query: str, also: Sequence[int] = ()
) -> tuple[list[int], WordScores]:
    """The ids of ``memos`` (questions, or (question, conclusion)) written by
    :func:`save_bare_memo` to a new database ``db``, and a new word search's scores of
    ``query`` with the memos at the positions ``also`` as candidates found by vector."""
    store = Store.open(db)
    try:
        with store.write() as conn:
            ids = [
                save_bare_memo(store, conn, m)
                if isinstance(m, str)
                else save_bare_memo(store, conn, m[0], conclusion=m[1])
                for m in memos
            ]
        with store.read() as conn:
            found = WordSearch().scores(store, conn, "p", query, also=[ids[i] for i in also])
    finally:
        store.close()
    return ids, found


def sha256_bytes(path: Path) -> str:
    """SHA-256 of a file's bytes (to prove a bad database was left untouched)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ro(db: Path) -> sqlite3.Connection:
    # A plain read-write connection is needed when a WAL file is still there
    # (a read-only one cannot recover it); tests call this on closed databases.
    return sqlite3.connect(db, timeout=30)


def integrity(db: Path) -> str:
    """The result of ``PRAGMA integrity_check`` (``"ok"`` when healthy)."""
    conn = _ro(db)
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    return "; ".join(str(r[0]) for r in rows)


def fts_integrity(db: Path) -> None:
    """Run FTS5's own consistency check (raises sqlite3.DatabaseError when broken)."""
    conn = _ro(db)
    try:
        conn.execute("INSERT INTO memos_fts(memos_fts, rank) VALUES ('integrity-check', 1)")
        conn.commit()
    finally:
        conn.close()


def counts(db: Path) -> dict[str, int]:
    """Row counts of the memo tables; an absent database counts as empty."""
    if not db.exists():
        return {"memos": 0, "memo_files": 0, "memos_fts": 0}
    conn = _ro(db)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "memos" not in names:
            return {"memos": 0, "memo_files": 0, "memos_fts": 0}
        return {
            table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("memos", "memo_files", "memos_fts")
        }
    finally:
        conn.close()


def half_memos(db: Path) -> dict[str, list[Any]]:
    """Every sign of a half-written memo; all lists empty when the store is whole."""
    conn = _ro(db)
    try:
        q = conn.execute
        if q("SELECT 1 FROM sqlite_master WHERE name = 'memos'").fetchone() is None:
            return {}  # not migrated yet: no memo at all
        found = {
            "memos_without_files": q(
                "SELECT id FROM memos m WHERE NOT EXISTS"
                " (SELECT 1 FROM memo_files f WHERE f.memo_id = m.id)"
            ).fetchall(),
            "files_without_memo": q(
                "SELECT DISTINCT memo_id FROM memo_files f WHERE NOT EXISTS"
                " (SELECT 1 FROM memos m WHERE m.id = f.memo_id)"
            ).fetchall(),
            "fts_without_memo": q(
                "SELECT rowid FROM memos_fts WHERE rowid NOT IN (SELECT id FROM memos)"
            ).fetchall(),
            "memo_without_fts": q(
                "SELECT id FROM memos WHERE id NOT IN (SELECT rowid FROM memos_fts)"
            ).fetchall(),
            # The FTS row must describe the memo as it is now (a replace rewrites both).
            "fts_out_of_date": q(
                "SELECT m.id FROM memos m JOIN memos_fts t ON t.rowid = m.id"
                " WHERE t.question IS NOT m.question OR t.conclusion IS NOT m.conclusion"
                " OR t.project IS NOT m.project"
            ).fetchall(),
            "fk_violations": q("PRAGMA foreign_key_check").fetchall(),
        }
    finally:
        conn.close()
    return {k: v for k, v in found.items() if v}


def assert_whole(db: Path) -> None:
    """integrity_check ok, FTS consistent, and no half memo."""
    assert integrity(db) == "ok"
    fts_integrity(db)
    assert half_memos(db) == {}


def assert_one_error_line(run: CliResult, *fragments: str) -> str:
    """Exit 2 with exactly one ``explomemo: error:`` line on stderr holding every fragment."""
    assert run.code == 2, (run.code, run.out, run.err)
    lines = run.err.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {run.err!r}"
    line = lines[0]
    assert line.startswith("explomemo: error:"), line
    assert "Traceback" not in run.err
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    return line


def in_a_minute() -> str:
    """A ``recorded_at`` newer than any memo a test recorded, yet not in the future for
    ``import`` (within its allowance for clocks that drift)."""
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")


def assert_skipped_line(run: CliResult, *fragments: str) -> str:
    """Exit 0 with exactly one ``explomemo: warning:`` line on stderr, saying a line was
    skipped and holding every fragment."""
    assert run.code == 0, (run.code, run.out, run.err)
    lines = run.err.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {run.err!r}"
    line = lines[0]
    assert line.startswith("explomemo: warning: line "), line
    assert "it was skipped" in line and "Traceback" not in run.err
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    return line


def cli_subprocess(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child process (for limits that must not touch the test process)."""
    full_env = {**os.environ, **EMBEDDINGS_OFF, **(env or {})}
    return subprocess.run(
        [PYTHON, "-m", "explomemo", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
        **kwargs,
    )


@dataclass
class ToolReply:
    is_error: bool
    text: str
    data: Any


async def _replies(client: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolReply]:
    """Each call's reply from a connected client, in order, with its JSON when it has one."""
    replies = []
    for name, args in calls:
        result = await client.call_tool(name, args)
        text = result.content[0].text if result.content else ""
        data = None
        if not result.is_error:
            with contextlib.suppress(ValueError):
                data = json.loads(text)
        replies.append(ToolReply(bool(result.is_error), text, data))
    return replies


async def _call_tools(db: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolReply]:
    from mcp import Client

    from explomemo.server.tools import create_server

    async with Client(create_server(db, env=dict(EMBEDDINGS_OFF))) as client:
        return await _replies(client, calls)


def call_tools(db: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolReply]:
    """Call MCP tools in order through the in-process client of one server."""
    return asyncio.run(_call_tools(db, calls))


def call_tool(db: Path, name: str, args: dict[str, Any]) -> ToolReply:
    """Call one MCP tool through a fresh in-process server."""
    return call_tools(db, [(name, args)])[0]


async def _call_tools_stdio(
    db: Path, calls: list[tuple[str, dict[str, Any]]], cwd: Path
) -> list[ToolReply]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "explomemo", "--db", str(db), "serve"],
        cwd=cwd,
        env={**os.environ, **EMBEDDINGS_OFF},
    )
    async with Client(params) as client:
        return await _replies(client, calls)


def call_tools_stdio(
    db: Path, calls: list[tuple[str, dict[str, Any]]], cwd: Path
) -> list[ToolReply]:
    """Call MCP tools in order through a real ``explomemo serve`` child process over stdio."""
    return asyncio.run(_call_tools_stdio(db, calls, cwd))


def assert_tool_refused(reply: ToolReply, *fragments: str) -> None:
    """A tool error of one plain sentence naming the input; never a stack trace."""
    assert reply.is_error, reply.text
    assert "Traceback" not in reply.text and 'File "' not in reply.text, reply.text
    assert "\n" not in reply.text.strip(), reply.text
    for fragment in fragments:
        assert fragment in reply.text, f"{fragment!r} not in {reply.text!r}"


@dataclass
class World:
    """A project root full of traps, and a secret outside it."""

    base: Path
    root: Path
    outside: Path
    secret: Path


def make_world(base: Path) -> World:
    """Build the root with every kind of file a hostile path can lead to."""
    outside = base / "outside"
    (outside / "dir").mkdir(parents=True)
    secret = outside / "secret.txt"
    secret.write_bytes(SECRET)
    (outside / "dir" / "secret2.txt").write_bytes(SECRET)
    root = base / "root"
    root.mkdir()
    (root / "ok.py").write_text("print('ok')\n")
    (root / "subdir").mkdir()
    (root / "subdir" / "inner.py").write_text("x = 1\n")
    os.symlink(secret, root / "link_out")
    os.symlink("../outside/secret.txt", root / "rel_link_out")
    os.symlink(outside / "dir", root / "linkdir")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("self_loop", root / "self_loop")
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "sock"))
    finally:
        sock.close()
    os.symlink("/dev/null", root / "devnull")
    os.symlink("/dev/zero", root / "devzero")
    with open(root / "big.bin", "wb") as f:
        f.truncate(32 * 1024 * 1024 + 1)
    with open(root / "exact.bin", "wb") as f:
        f.truncate(32 * 1024 * 1024)
    fd = os.open(os.fsencode(root) + b"/bad\xff.py", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"non utf-8 name\n")
    os.close(fd)
    (root / "many").mkdir()
    for i in range(65):
        (root / "many" / f"f{i:02d}.py").write_text(f"n = {i}\n")
    (base / "a_file.txt").write_text("not a directory\n")
    return World(base, root, outside, secret)


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i`` on a path for the block (root cannot write it either)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: cannot make a path immutable")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)


#: A child process: waits for "go" on stdin, then writes or reads the database.
#: argv: role db root k [count]. Prints "ready" once the imports are done, and a
#: JSON summary at the end; any exception is a traceback on stderr and exit 3.
CHILD_SOURCE = r"""
import json, os, random, sys, time, traceback
from pathlib import Path
os.environ["EXPLOMEMO_EMBEDDINGS"] = "off"
from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel

role, db, root, k = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
count = int(sys.argv[5]) if role in ("writer", "opener") else 0
files = sorted(p for p in os.listdir(root) if p.endswith(".py"))
rng = random.Random(k)
print("ready", flush=True)
start = float(sys.stdin.readline())

def question(n, k):
    text = f"How is module {n} wired to the rest?"
    # The same question spelled differently by different processes.
    return ("  " + text.upper() + " ") if k % 2 else text.replace(" ", "   ")

def fail(exc):
    traceback.print_exc()
    sys.exit(3)

try:
    if role == "opener":
        # Open (create and migrate) databases db.0, db.1, ... in step with the others.
        for j in range(count):
            time.sleep(max(0.0, start + 0.1 * j - time.time()))  # in lockstep
            with MemoCache.open(Path(f"{db}.{j}"), FixedModel(None)) as cache:
                cache.record(question=f"opener {k}", conclusion="c", files=files[:1],
                             project="p", root=root)
        print(json.dumps({"done": count}))
    elif role == "writer":
        done = 0
        with MemoCache.open(db, FixedModel(None)) as cache:
            for i in range(count):
                n = k * 200 + i
                picked = rng.sample(files, rng.randint(1, 3))
                cache.record(question=question(n, k), conclusion=f"module {n} by writer {k}",
                             files=picked, project="p", root=root)
                done += 1
        print(json.dumps({"done": done}))
    elif role == "reader":
        stop = Path(sys.argv[5])
        rounds = 0
        with MemoCache.open(db, FixedModel(None)) as cache:
            while not stop.exists():
                n = rng.randrange(1000)
                cache.recall(query=f"module {n} wired", project="p", root=root)
                cache.stale(project="p", root=root)
                cache.stale_report()  # every project: "p" may have no memo yet, which is refused
                cache.list(project="p")
                rounds += 1
        print(json.dumps({"rounds": rounds}))
    elif role == "crash":
        # Record, replace and forget for ever, until killed.
        cache = MemoCache.open(db, FixedModel(None))
        print("writing", flush=True)
        i = 0
        while True:
            i += 1
            n = rng.randrange(60)
            picked = rng.sample(files, rng.randint(1, min(8, len(files))))
            result = cache.record(question=f"question {n}", conclusion=f"answer {i} " * 50,
                                  files=picked, project=f"p{n % 3}", root=root)
            if i % 7 == 0:
                cache.forget(project=result.project, memo_id=result.id)
            if i % 11 == 0:
                cache.stale(project="p0", root=root)
    else:
        raise SystemExit(f"unknown role {role}")
except Exception as exc:
    fail(exc)
"""


def spawn_child(role: str, db: Path, root: Path, k: int, *extra: str) -> subprocess.Popen[str]:
    """Start a CHILD_SOURCE process (call wait_ready before go)."""
    return subprocess.Popen(
        [PYTHON, "-c", CHILD_SOURCE, role, str(db), str(root), str(k), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **EMBEDDINGS_OFF},
    )


def start_child(role: str, db: Path, root: Path, k: int, *extra: str) -> subprocess.Popen[str]:
    """Start a CHILD_SOURCE process; returns once it printed ``ready``."""
    proc = spawn_child(role, db, root, k, *extra)
    wait_ready(proc)
    return proc


def wait_ready(proc: subprocess.Popen[str]) -> None:
    """Wait for a child's ``ready`` line."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"child {proc.args[3:6]} did not start: {line!r} {err}")


def kill_all(procs: list[subprocess.Popen[str]]) -> None:
    """Kill (by their own ids) the children of a test that are still running."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def go(procs: list[subprocess.Popen[str]]) -> None:
    """Release children waiting for ``go`` all at once (0.1 s from now)."""

    start = time.time() + 0.1
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start}\n")
        proc.stdin.flush()


class RawServer:
    """A real ``explomemo serve`` child process, driven by raw JSON-RPC lines.

    What a client sends is bytes on the server's stdin, exactly as given (a
    lone surrogate escape, say, which the SDK's own client never sends);
    answers are read from its stdout on a thread, so a missing answer is a
    timeout in the test, not a hang.
    """

    def __init__(
        self,
        db: Path,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        import queue
        import threading

        self.proc = subprocess.Popen(
            command or [PYTHON, "-m", "explomemo", "--db", str(db), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **EMBEDDINGS_OFF, **(env or {})},
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._answers: dict[Any, dict[str, Any]] = {}
        self._next_id = 0
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        threading.Thread(
            target=lambda: [self._lines.put(line) for line in stdout], daemon=True
        ).start()
        init = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"},
            },
        )
        assert "result" in self.answer(init), "the server did not initialize"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send_raw(self, line: bytes) -> None:
        """Write one line (a newline is added) to the server's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        self.send_raw(json.dumps(message).encode())

    def request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; returns its id (see :meth:`answer`)."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def call_raw(self, arguments_json: bytes, tool: str) -> int:
        """Send tools/call with ``arguments_json`` spliced in as raw bytes; returns the id."""
        self._next_id += 1
        call = {"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call"}
        head = json.dumps({**call, "params": {"name": tool}}).encode()
        self.send_raw(head[:-2] + b', "arguments": ' + arguments_json + b"}}")
        return self._next_id

    def answer(self, request_id: Any, timeout: float = 60) -> dict[str, Any]:
        """The answer to ``request_id``, waiting up to ``timeout`` seconds for it."""
        import queue

        deadline = time.monotonic() + timeout
        while request_id not in self._answers:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0))
            except queue.Empty:
                raise AssertionError(
                    f"no answer to request {request_id!r} within {timeout} s"
                ) from None
            message = json.loads(line)
            self._answers[message.get("id")] = message
        return self._answers.pop(request_id)

    def answered(self, request_id: Any) -> bool:
        """Whether the answer to ``request_id`` has arrived (without waiting for it)."""
        import queue

        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return request_id in self._answers
            message = json.loads(line)
            self._answers[message.get("id")] = message

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 60) -> ToolReply:
        """Call a tool and wait for its answer."""
        reply = self.answer(
            self.request("tools/call", {"name": tool, "arguments": arguments}), timeout
        )
        return tool_reply(reply)

    def close(self, timeout: float = 60) -> tuple[int, str]:
        """Close stdin (the client leaves); the exit code and stderr."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return code, self.proc.stderr.read().decode("utf-8", "replace")

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.close()


def tool_reply(message: dict[str, Any]) -> ToolReply:
    """A tools/call answer (a JSON-RPC message) as a ToolReply."""
    assert "result" in message, message
    result = message["result"]
    text = result["content"][0]["text"] if result.get("content") else ""
    data = result.get("structuredContent")
    return ToolReply(bool(result.get("isError")), text, data)


def seed(db: Path, root: Path) -> None:
    for project, question, files in [
        ("beta", "Where is B defined?", ["pkg/b.py"]),
        ("alpha", "Where is A defined?", ["pkg/a.py"]),
        ("alpha", "How do A and B relate?", ["pkg/a.py", "pkg/b.py"]),
    ]:
        code, _, err = invoke_cli(
            [
                "--db",
                str(db),
                "record",
                "--project",
                project,
                "--root",
                str(root),
                "--question",
                question,
                "--conclusion",
                f"answer to {question}",
                *files,
            ],
        )
        assert code == 0, err


def stale_of(
    cache: MemoCache, root: Path, project: str = "p"
) -> dict[int, tuple[list[str], list[str]]]:
    """{memo id: (changed, missing)} of the project's stale memos under ``root``."""
    return {
        s.id: (s.changed, s.missing) for s in cache.stale(project=project, root=str(root)).stale
    }


def stale_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """Run ``explomemo … stale --format json`` in-process: (exit code, the report)."""
    run = invoke_cli([*argv, "--format", "json"])
    assert run.code in (0, 1), run.err
    return run.code, json.loads(run.out)


def edited(folder: Path, line: str, **changes: Any) -> ExportedMemo:
    """The memo of an export line with some fields changed, read back as ``import`` reads it."""
    path = folder / f"edited-{len(list(folder.glob('edited-*.jsonl')))}.jsonl"
    path.write_text(json.dumps({**json.loads(line), **changes}) + "\n")
    (memo,) = read_export(path)
    return memo


WORD_MEMOS = [
    (
        "How are retries decided for outgoing HTTP requests?",
        "src/net/retry.py: RetryPolicy allows three attempts with exponential backoff on 503.",
        ["src/net/retry.py"],
    ),
    (
        "Where is the database connection pool configured?",
        "src/db/pool.py builds the pool from settings.DB_POOL_SIZE at start-up.",
        ["src/db/pool.py"],
    ),
    (
        "How is authentication wired?",
        "src/auth/middleware.py checks the bearer token before any view runs.",
        ["src/auth/middleware.py"],
    ),
]


RELATED = "where is the connection pool size configured"


def _reads(cache: MemoCache, root: Path) -> tuple[dict[int, tuple[list[str], list[str]]], int]:
    hashing.COUNTERS.reset()
    found = stale_of(cache, root)
    return found, hashing.COUNTERS.files


def _blob_id(text: str) -> str:
    return subprocess.run(
        ["git", "hash-object", "--stdin"], input=text, capture_output=True, text=True, check=True
    ).stdout.strip()


EXPORT_SHA = "a" * 64


EXPORT_XXH = "b" * 32


def _export_file(**change: Any) -> dict[str, Any]:
    return {"path": "a.py", "sha256": EXPORT_SHA, "xxh3": EXPORT_XXH, "size": 3, **change}


def _export_line(memo_id: int, **change: Any) -> str:
    memo = {
        "id": memo_id,
        "project": "p",
        "question": f"question {memo_id}",
        "conclusion": "c",
        "recorded_at": "2026-01-01T00:00:00Z",
        "files": [_export_file()],
        **change,
    }
    return json.dumps(memo, ensure_ascii=False)


MEMOS = {
    "auth": (
        "How is authentication wired?",
        "The auth middleware in app/middleware.py decodes the bearer token and checks"
        " the JWT signature with app/tokens.py before any view runs.",
        ["app/middleware.py", "app/tokens.py"],
    ),
    "retry": (
        "Where is the retry policy decided?",
        "app/http.py wraps outgoing calls: three attempts with exponential backoff,"
        " only on connection errors and 503 responses.",
        ["app/http.py"],
    ),
    "db": (
        "How is the database connection pool configured?",
        "app/db.py creates one SQLAlchemy engine with pool_size=5 from DATABASE_URL.",
        ["app/db.py"],
    ),
}


def record_all(cache: MemoCache, root: Path) -> dict[str, int]:
    return {
        key: cache.record(question=q, conclusion=c, files=f, project="svc", root=str(root)).id
        for key, (q, c, f) in MEMOS.items()
    }


def record_all_with_vectors(db: Path, root: Path, embedder: Any) -> dict[str, int]:
    """:func:`record_all` into ``db`` with ``embedder`` (each memo stored with its vectors)."""
    with MemoCache.open(db, FixedModel(embedder)) as cache:
        return record_all(cache, root)


def as_default_project(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make project svc the default one (working in ``root``), the one a server reads ahead."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("EXPLOMEMO_PROJECT", "svc")


DEEP = "[" * 100_000


def _to(stdout: Any, args: list[str], cwd: Path, stdin: str | None = None) -> CliResult:
    run = subprocess.run(
        [PYTHON, "-m", "explomemo", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        input=stdin,
        text=True,
        cwd=cwd,
        env={**os.environ, **EMBEDDINGS_OFF},
        timeout=60,
        check=False,
    )
    return CliResult(run.returncode, run.stdout or "", run.stderr)


STALE = "memory_exploration_stale"


def _baseline(db: Path, w: World) -> None:
    with open_cache(db) as cache:
        cache.record(
            question="baseline",
            conclusion="baseline memo",
            files=["ok.py"],
            project="proj",
            root=str(w.root),
        )


NFC = unicodedata.normalize("NFC", "Où est décidé le café ?")


NFD = unicodedata.normalize("NFD", NFC)


#: "WHERE is the retry policy?" in full-width letters and ideographic spaces.
FULL_WIDTH = "".join(
    chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" for c in "WHERE is the retry policy?"
)


RECORD = "memory_exploration_record"


RECALL = "memory_exploration_recall"


FORGET = "memory_exploration_forget"


def _valid(tool: str, root: Path) -> dict[str, object]:
    return {
        RECORD: {
            "question": "where is A?",
            "conclusion": "in a.py",
            "files": ["a.py"],
            "project": "p",
            "root": str(root),
        },
        RECALL: {"query": "where is A", "project": "p", "root": str(root)},
        STALE: {"project": "p", "root": str(root)},
        FORGET: {"project": "p", "id": 1},
    }[tool]


LOCK_HOLDER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
"""


def _held_writer(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """(taken, go): the snapshot writer sets ``taken`` when it compresses, then waits for ``go``."""
    taken, go = threading.Event(), threading.Event()
    compress = snapshots.compress

    def held_compress(data: bytes) -> tuple[str, bytes]:
        taken.set()
        assert go.wait(30)
        return compress(data)

    monkeypatch.setattr(snapshots, "compress", held_compress)
    return taken, go


def _done_while_locked(db: Path, go: threading.Event, work: Callable[[], None]) -> bool:
    """Whether ``work`` (on a thread) ends while another process holds the database's lock,
    taken before ``go`` is set (and released after at most 25 s)."""
    holder = subprocess.Popen(
        [PYTHON, "-c", LOCK_HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    worker = threading.Thread(target=work)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        go.set()
        worker.start()
        worker.join(25)
        return not worker.is_alive()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("release\n")
        holder.stdin.close()
        holder.wait(timeout=60)
        worker.join(120)


INSIDE = b"inside root\n"


PATHS = [
    "a.py",
    "pkg/mod.py",
    "pkg/sub/deep.py",
    "link.py",
    "alias/mod.py",
    "alias/sub/deep.py",
    "out.py",
    "outdir/mod.py",
    "fifo",
    "pkg",
    "nope.py",
    "gone/x.py",
    "gone/deeper/x.py",
    "plain/x.py",
    "pkg/./mod.py",
    "pkg/../a.py",
    "pkg//mod.py",
    "../outside/secret.txt",
    "pkg/../../outside/secret.txt",
]


def _many_files(root: Path, sizes: list[int]) -> list[str]:
    rels = []
    for i, size in enumerate(sizes):
        rel = f"d{i % 7}/sub{i % 3}/f{i:03d}.bin"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes((i + j) % 251 for j in range(size)))
        rels.append(rel)
    return rels


def _helpers_take_part(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make each read start only once a helper process was handed a batch; count the batches.

    Without it, this thread could read every file while the helper starts.
    """
    handed = threading.Event()
    batches: list[int] = []
    real_read, real_row = readers.Helper.read, readers.read_row

    def helper_read(self: readers.Helper, root: Any, rels: list[str], *args: Any) -> Any:
        batches.append(len(rels))
        handed.set()
        return real_read(self, root, rels, *args)

    def read_row(*args: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            assert handed.wait(10), "no helper process was handed a batch"
        return real_row(*args)

    monkeypatch.setattr(readers.Helper, "read", helper_read)
    monkeypatch.setattr(validity, "read_row", read_row)
    return batches


USER_FILES = {
    ".cursor/mcp.json": '{"mcpServers": {"mine": {"command": "mine"}}}\n',
    ".claude/settings.json": '{"permissions": {"allow": ["Bash(ls)"]}}\n',
    ".claude.json": '{"projects": {}}\n',
    ".codex/config.toml": '[mcp_servers.mine]\ncommand = "mine"\n',
    "keys.txt": "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n",
}


def hostile_clone(tmp_path: Path, links: dict[str, Path]) -> Path:
    """A repository committing each of ``links`` (path in the repository: where it leads),
    cloned the way a user gets it; returns the clone's folder."""
    upstream = Repo(tmp_path / "upstream" / "app")
    upstream.write("app.py", "print('hello')\n")
    for rel, target in links.items():
        link = upstream.path / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        # Forced: Claude Code puts its local settings in the user's global git ignore.
        git(upstream.path, "add", "-f", rel)
    upstream.commit("a helpful project")
    clone = tmp_path / "src" / "app"
    clone.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    for rel in links:
        assert (clone / rel).is_symlink(), rel
    return clone


def user_files(home: Path) -> dict[str, str]:
    return {rel: (home / rel).read_text() for rel in USER_FILES}


def record_sized(db: Path, root: Path, question: str, sizes: dict[str, int]) -> None:
    """Record a memo of project ``shop`` under ``root`` resting on new files of these
    sizes (path: bytes)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, size in sizes.items():
        (root / name).write_bytes(name[0].encode() * (size - 1) + b"\n")
    with open_cache(db) as cache:
        cache.record(
            question=question,
            conclusion=f"the answer to {question!r} rests on {', '.join(sizes)}",
            files=list(sizes),
            project="shop",
            root=str(root),
        )


def git_commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git commands explomemo runs from now on (their first argument), in order."""
    from explomemo.changes.gitrepo import GitRepo

    commands: list[str] = []
    run = GitRepo._run

    def counted(self: GitRepo, args: list[str], given: bytes | None = None) -> bytes | None:
        commands.append(args[0])
        return run(self, args, given)

    monkeypatch.setattr(GitRepo, "_run", counted)
    return commands
