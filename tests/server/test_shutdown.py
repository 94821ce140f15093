"""A real server over stdio, with the real model, whose client goes away at any moment.

An MCP client ends a stdio server by closing its stdin. That can happen
while the model is still loading (onnxruntime aborted the interpreter's exit
with "terminate called without an active exception" when a thread was inside
its loading), while the vector thread embeds recorded memos, or while memos
recorded without a model are being filled. Each time the server must exit
with code 0, say nothing alarming on stderr, and keep every memo it answered
for.

The server is driven with raw JSON-RPC lines, so stdin can be closed between
any two messages.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp_types import LATEST_PROTOCOL_VERSION

#: What must never be on the server's stderr at shutdown.
ALARMS = ("terminate called", "Cannot operate on a closed database", "Traceback", "Fatal")


#: A long conclusion: about 256 tokens, the longest text the model reads (100 ms or so).
CONCLUSION = " ".join(f"step{i} calls helper_{i} in mod{i}.py" for i in range(60))


@dataclass
class Server:
    """``explomemo serve`` in a subprocess, spoken to line by line."""

    db: Path
    root: Path
    proc: subprocess.Popen[bytes] = field(init=False)
    recorded: list[str] = field(default_factory=list)
    _next_id: int = 0

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "explomemo", "--db", str(self.db), "serve"],
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ},
        )

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read its answer."""
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert answer.get("id") == self._next_id, answer
        return answer

    def initialize(self) -> None:
        """The MCP handshake."""
        self.request(
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "shutdown-test", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool; returns its structured result (an error fails the test)."""
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        result: dict[str, Any] = answer["result"]
        assert not result.get("isError"), result
        return result

    def record(self) -> None:
        """Record one more memo (a new question, a long conclusion)."""
        question = f"How is feature {len(self.recorded)} wired?"
        self.call(
            "memory_exploration_record",
            {"question": question, "conclusion": CONCLUSION, "files": ["a.py"], "project": "p"},
        )
        self.recorded.append(question)

    def close_stdin_and_wait(self) -> tuple[int, str]:
        """Close stdin (the client went away); the exit code and stderr."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        assert self.proc.stderr is not None and self.proc.stdout is not None
        stderr = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, stderr


def _stored(db: Path) -> list[tuple[str, bool, bool]]:
    """(question, has whole vector, has question vector) of every memo."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT question, embedding IS NOT NULL, question_embedding IS NOT NULL FROM memos"
        ).fetchall()
    return [(q, bool(w), bool(v)) for q, w, v in rows]


def _assert_clean(server: Server, code: int, stderr: str) -> None:
    assert code == 0, stderr
    for alarm in ALARMS:
        assert alarm not in stderr, stderr
    stored = _stored(server.db) if server.db.exists() else []
    assert sorted(q for q, _, _ in stored) == sorted(server.recorded)
    # A memo has both vectors or neither (the rest come on the next fill).
    assert all(whole == question for _, whole, question in stored), stored


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    return folder


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_closed_at_many_points_while_the_model_loads(root: Path, tmp_path: Path) -> None:
    """Right after start, after the handshake, after 1, 5 and 20 records, and after
    recording for a while (the model loads in about a second on an idle machine)."""
    for n, (records, seconds) in enumerate(
        [(None, 0.0), (0, 0.0), (1, 0.0), (5, 0.0), (20, 0.0), (0, 0.4), (0, 0.8), (0, 1.2)]
    ):
        server = Server(tmp_path / f"memos-{n}.db", root)
        if records is not None:
            server.initialize()
            for _ in range(records):
                server.record()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                server.record()
        started = time.monotonic()
        code, stderr = server.close_stdin_and_wait()
        _assert_clean(server, code, stderr)
        # Nothing waits for the model: each record answered with its vectors stored, so
        # only a record under way when stdin closed may hold the exit.
        assert time.monotonic() - started < 15


def _until_model_loaded(server: Server) -> None:
    for _ in range(400):
        asked = server.call("memory_exploration_recall", {"query": "anything", "project": "p"})
        if asked["structuredContent"]["semantic_index"]:
            return
        time.sleep(0.25)
    raise AssertionError("the model did not load within 100 s")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_closed_while_vectors_are_computed(root: Path, tmp_path: Path) -> None:
    """With the model loaded, records queue vector jobs; without it, a fill follows the load."""
    for n, records in enumerate([1, 8, 30]):
        server = Server(tmp_path / f"loaded-{n}.db", root)
        server.initialize()
        # Once a recall used the model, each record queues a job (a recall waits for
        # the model 50 ms at most, so it is asked until it did).
        _until_model_loaded(server)
        for _ in range(records):
            server.record()
        code, stderr = server.close_stdin_and_wait()
        _assert_clean(server, code, stderr)
        if records == 1:
            # The one job in flight is finished and stored.
            assert _stored(server.db) == [(server.recorded[0], True, True)]
    # Memos recorded before the model loaded, filled once it is: closed mid-fill.
    server = Server(tmp_path / "filling.db", root)
    server.initialize()
    for _ in range(40):
        server.record()
    time.sleep(3)
    code, stderr = server.close_stdin_and_wait()
    _assert_clean(server, code, stderr)
