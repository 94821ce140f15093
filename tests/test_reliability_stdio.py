"""The real server over stdio, carrying raw bytes.

These are the cases an in-process client cannot show: what a client such as
a JavaScript one actually puts on the wire (a lone surrogate escape), and a
server process living on while its database is swapped, deleted or locked by
another process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reliability_helpers import RawServer, assert_tool_refused, counts, open_cache, tool_reply

RECORD = "memory_exploration_record"
RECALL = "memory_exploration_recall"
STALE = "memory_exploration_stale"
FORGET = "memory_exploration_forget"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    return root


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


def _with_surrogate(arguments: dict[str, object], argument: str, escape: bytes) -> bytes:
    """``arguments`` as JSON bytes, ``argument`` a string holding a lone surrogate escape."""
    bad = b'"a' + escape + b'b"'
    if isinstance(arguments[argument], list):
        bad = b"[" + bad + b"]"
    rest = json.dumps({k: v for k, v in arguments.items() if k != argument}).encode()
    return b'{"' + argument.encode() + b'": ' + bad + b", " + rest[1:]


#: (tool, argument, how the refusal names it): every string a tool takes.
SURROGATE_CASES = [
    (RECORD, "question", "question"),
    (RECORD, "conclusion", "conclusion"),
    (RECORD, "files", "files[0]"),
    (RECORD, "project", "project"),
    (RECORD, "root", "root"),
    (RECALL, "query", "query"),
    (RECALL, "project", "project"),
    (RECALL, "root", "root"),
    (STALE, "project", "project"),
    (STALE, "root", "root"),
    (FORGET, "project", "project"),
]


@pytest.mark.timeout(120)
def test_a_lone_surrogate_escape_gets_an_answer_naming_the_argument(
    tmp_path: Path, project: Path
) -> None:
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        cache.record(
            question="kept", conclusion="c", files=["a.py"], project="p", root=str(project)
        )
    before = counts(db)
    with RawServer(db, cwd=project) as server:
        for tool, argument, named in SURROGATE_CASES:
            for escape in (rb"\ud800", rb"\udfff", rb"\udbff\u0041"):
                raw = _with_surrogate(_valid(tool, project), argument, escape)
                reply = tool_reply(server.answer(server.call_raw(raw, tool), timeout=30))
                assert_tool_refused(reply, tool, named, "lone surrogate", "UTF-8")
        # A valid pair (an emoji) is text like any other, and the server still serves.
        emoji = rb'"question": "where is \ud83d\ude00 A?"'
        raw = json.dumps(_valid(RECORD, project)).encode()
        raw = raw.replace(b'"question": "where is A?"', emoji)
        reply = tool_reply(server.answer(server.call_raw(raw, RECORD)))
        assert not reply.is_error, reply.text
        assert server.call(STALE, _valid(STALE, project)).data["checked"] == 2
    assert counts(db)["memos"] == before["memos"] + 1


@pytest.mark.timeout(120)
def test_other_unreadable_requests_get_an_answer(tmp_path: Path, project: Path) -> None:
    db = tmp_path / "m.db"
    with RawServer(db, cwd=project) as server:
        # A number strict JSON does not allow, where the tool takes one.
        raw = json.dumps(_valid(RECALL, project)).encode().replace(b"{", b'{"limit": NaN, ', 1)
        reply = tool_reply(server.answer(server.call_raw(raw, RECALL), timeout=30))
        assert_tool_refused(reply, "limit", "finite")
        # A surrogate outside a tool's arguments: a JSON-RPC error with the request's id.
        request = b'{"jsonrpc": "2.0", "id": "x", "method": "tools/list", "params": '
        server.send_raw(request + b'{"cursor": "\\ud800"}}')
        error = server.answer("x", timeout=30)["error"]
        assert error["code"] == -32602 and "params.cursor" in error["message"]
        # Not JSON at all: a parse error (id null, as JSON-RPC says), and the server goes on.
        server.send_raw(b"{this is not json")
        assert server.answer(None, timeout=30)["error"]["code"] == -32700
        # A notification nobody waits for gets no answer; the next request does.
        server.send_raw(
            b'{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}'
        )
        assert server.call(STALE, _valid(STALE, project)).data == {
            "project": "p",
            "root": str(project),
            "checked": 0,
            "stale": [],
        }
        code, err = server.close()
    assert code == 0, err
    assert "Traceback" not in err
