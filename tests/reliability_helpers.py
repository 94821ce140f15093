"""Shared helpers of the reliability & security tests (tests/test_reliability_*.py).

Everything here works on real SQLite files and real files; nothing loads the
embedding model (``FixedModel(None)`` / ``EXPLOMEMO_EMBEDDINGS=off``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from explomemo.memos.cache import MemoCache
from explomemo.recall.sources import FixedModel

PYTHON = sys.executable
EMBEDDINGS_OFF = {"EXPLOMEMO_EMBEDDINGS": "off"}
SECRET = b"TOP-SECRET-CONTENT-never-to-be-read\n"


def open_cache(db: Path) -> MemoCache:
    """A MemoCache over ``db`` with embeddings off."""
    return MemoCache.open(db, FixedModel(None))


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


# CLI -------------------------------------------------------------------------


@dataclass
class CliRun:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> CliRun:
    """Run ``explomemo.cli.main.main(args)`` in-process; returns exit code, stdout, stderr."""
    from explomemo.cli.main import main

    capsys.readouterr()
    code = main(args)
    captured = capsys.readouterr()
    return CliRun(code, captured.out, captured.err)


def assert_one_error_line(run: CliRun, *fragments: str) -> str:
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


# MCP -------------------------------------------------------------------------


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


# Hostile file system -------------------------------------------------------


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


# Child processes -----------------------------------------------------------

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
    import time

    start = time.time() + 0.1
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start}\n")
        proc.stdin.flush()


# A real server over stdio, raw bytes ---------------------------------------


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
        import time

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
