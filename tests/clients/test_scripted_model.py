"""The scripted model the Claude Code end-to-end tests drive the real CLI with: what it
streams, and which step of its script it takes, read off the request's own history."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_model import SIDE_ANSWER, SPENT, Answer, OnDisk, Read, ScriptedModel, record

TOOLS = ["Read", "ToolSearch"]
RECORD = "mcp__explomemo__memory_exploration_record"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as served:
        yield served


def post(model: ScriptedModel, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        model.url + path, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def streamed(
    model: ScriptedModel, messages: list[dict[str, Any]], tools: list[str] = TOOLS
) -> list[dict[str, Any]]:
    """The content blocks of the streamed answer, put together from its events."""
    listed = [{"name": name} for name in tools]
    body = {"stream": True, "tools": listed, "messages": messages}
    status, data = post(model, "/v1/messages?beta=true", body)
    assert status == 200
    events = [chunk.split("\n") for chunk in data.decode().split("\n\n") if chunk]
    names = [lines[0].removeprefix("event: ") for lines in events]
    payloads = [json.loads(lines[1].removeprefix("data: ")) for lines in events]
    assert names == [p["type"] for p in payloads]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks: list[dict[str, Any]] = []
    for payload in payloads:
        if payload["type"] == "content_block_start":
            blocks.append(dict(payload["content_block"]))
        elif payload["type"] == "content_block_delta":
            delta = payload["delta"]
            if delta["type"] == "text_delta":
                blocks[payload["index"]]["text"] += delta["text"]
            else:
                blocks[payload["index"]]["input"] = json.loads(delta["partial_json"])
    stop = payloads[-2]["delta"]["stop_reason"]
    assert stop == ("tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn")
    return blocks


def prompt(text: str) -> dict[str, Any]:
    reminder = {"type": "text", "text": "<system-reminder>context</system-reminder>"}
    return {"role": "user", "content": [reminder, {"type": "text", "text": text}]}


def took(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant message of ``block`` and its tool result."""
    result = {"type": "tool_result", "tool_use_id": block.get("id"), "content": "ok"}
    return [{"role": "assistant", "content": [block]}, {"role": "user", "content": [result]}]


def test_each_step_follows_from_the_messages_and_a_deferred_tool_is_loaded_first(
    model: ScriptedModel,
) -> None:
    changed: list[str] = []
    model.script = {
        "q": [
            Read("/r/a.py"),
            OnDisk(lambda: changed.append("a.py")),
            record("q", "c", ["a.py"]),
            Answer("done"),
        ]
    }
    history = [prompt("q")]
    (first,) = streamed(model, history)
    assert (first["name"], first["input"]) == ("Read", {"file_path": "/r/a.py"})
    assert changed == []
    history += took(first)
    (search,) = streamed(model, history)
    assert (search["name"], search["input"]["query"]) == ("ToolSearch", f"select:{RECORD}")
    assert changed == ["a.py"]
    history += took(search)
    (call,) = streamed(model, history, [*TOOLS, RECORD])
    assert (call["name"], call["input"]["files"]) == (RECORD, ["a.py"])
    history += took(call)
    assert streamed(model, history, [*TOOLS, RECORD]) == [{"type": "text", "text": "done"}]
    # Blocked by a Stop hook, a turn whose steps are spent says so, and nothing runs again.
    history += [{"role": "assistant", "content": [{"type": "text", "text": "done"}]}]
    history += [{"role": "user", "content": "Stop hook feedback: record it"}]
    assert streamed(model, history) == [{"type": "text", "text": SPENT}]
    assert changed == ["a.py"]
    assert [seen.prompt for seen in model.requests] == ["q"] * 5


def test_the_last_turn_counts_and_side_requests_consume_nothing(model: ScriptedModel) -> None:
    model.script = {"q": [Answer("one")], "again": [Read("/r/b.py"), Answer("two")]}
    earlier = [prompt("q"), {"role": "assistant", "content": [{"type": "text", "text": "one"}]}]
    (block,) = streamed(model, [*earlier, prompt("again")])
    assert block["input"] == {"file_path": "/r/b.py"}
    status, data = post(model, "/v1/messages", {"messages": [prompt("again")]})
    assert status == 200 and json.loads(data)["content"] == [{"type": "text", "text": SIDE_ANSWER}]
    assert streamed(model, [prompt("not scripted")]) == [{"type": "text", "text": SIDE_ANSWER}]
    (block,) = streamed(model, [prompt("again")])
    assert block["name"] == "Read"
    assert [seen.prompt for seen in model.requests] == ["again", None, None, "again"]


def test_other_paths_get_the_apis_answers(model: ScriptedModel) -> None:
    assert post(model, "/v1/messages/count_tokens", {"messages": []}) == (
        200,
        b'{"input_tokens": 1}',
    )
    status, data = post(model, "/v1/other", {})
    assert status == 404 and json.loads(data)["type"] == "error"
    assert model.paths == ["POST /v1/messages/count_tokens", "POST /v1/other"]
