"""The stdio transport (server/transport.py): an answer to every request, even one it cannot
read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    FORGET,
    RECALL,
    RECORD,
    STALE,
    RawServer,
    _valid,
    assert_tool_refused,
    counts,
    open_cache,
    tool_reply,
)


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


# JSON nested past Python's recursion limit ------------------------------------


@pytest.mark.timeout(120)
def test_a_request_nested_too_deeply_gets_an_answer_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    with RawServer(tmp_path / "m.db", cwd=tmp_path) as server:
        # Past Python's recursion limit, and past only the SDK's parser's.
        for depth in (100_000, 300):
            arguments = b'{"project": ' + b"[" * depth + b"]" * depth + b"}"
            request = server.call_raw(arguments, "memory_exploration_stale")
            answer = server.answer(request, timeout=30)
            assert "result" in answer or "error" in answer, answer
            text = json.dumps(answer)
            assert "deeply" in text or "recursion" in text, text
        listed = server.answer(server.request("tools/list", {}), timeout=30)
        assert len(listed["result"]["tools"]) == 5
        code, err = server.close()
    assert code == 0, err
    assert "Traceback" not in err and "RecursionError" not in err


# A working directory whose path is not UTF-8 --------------------------------


@pytest.mark.timeout(120)
def test_a_server_started_in_a_folder_that_is_not_utf8_says_why(
    tmp_path: Path, bad_cwd: Path
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    with RawServer(tmp_path / "m.db", cwd=bad_cwd) as server:
        record = {"question": "q", "conclusion": "c", "files": ["a.py"], "project": "p"}
        assert_tool_refused(
            server.call("memory_exploration_record", record), "working directory", "UTF-8"
        )
        root = {"root": str(tmp_path), "project": "p"}
        assert not server.call("memory_exploration_stale", root).is_error
        code, err = server.close()
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.timeout(120)
def test_a_lone_surrogate_escape_gets_an_answer_naming_the_argument(
    tmp_path: Path, project: Path
) -> None:
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
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
    """What an in-process client cannot show: raw bytes on the wire, and a server process living
    on while its database is swapped, deleted or locked."""
    db = tmp_path / "m.db"
    with RawServer(db, cwd=project) as server:
        # A number strict JSON does not allow, where the tool takes one.
        raw = json.dumps(_valid(RECALL, project)).encode().replace(b"{", b'{"limit": NaN, ', 1)
        reply = tool_reply(server.answer(server.call_raw(raw, RECALL), timeout=30))
        assert_tool_refused(reply, "limit: must be a JSON integer", "(got NaN)")
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
