"""The stdio transport: the MCP SDK's, plus an answer to every request it cannot read.

The SDK parses each line of stdin with a strict JSON parser. A request that
parser refuses never reaches a handler: the SDK drops it without an answer,
and the client waits for its own timeout. The commonest case is not even
malformed JSON: a lone surrogate escape such as ``"a\\ud800b"``, which
JavaScript's ``JSON.stringify`` writes for half of an emoji. Here such a
request gets an answer naming the argument at fault: a tool error for
``tools/call`` (as any other bad argument), a JSON-RPC error otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
)
from pydantic import ValidationError


async def serve_stdio(lowlevel: Server[Any]) -> None:
    """Serve ``lowlevel`` (an MCPServer's low-level server) on stdin and stdout until
    stdin closes, as ``MCPServer.run_stdio_async`` does, answering what the SDK cannot read."""
    async with stdio_server() as (read_stream, write_stream):
        readable_send, readable_receive = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_answer_unreadable, read_stream, readable_send, write_stream)
            await lowlevel.run(
                readable_receive, write_stream, lowlevel.create_initialization_options()
            )


async def _answer_unreadable(
    source: ObjectReceiveStream[SessionMessage | Exception],
    readable: ObjectSendStream[SessionMessage | Exception],
    replies: ObjectSendStream[SessionMessage],
) -> None:
    """Pass on what the SDK read; answer what it could not."""
    async with readable:
        async for item in source:
            if isinstance(item, Exception):
                answer = unreadable_answer(item)
                if answer is not None:
                    await replies.send(SessionMessage(answer))
                    continue
            await readable.send(item)


def unreadable_answer(error: Exception) -> JSONRPCMessage | None:
    """The answer to a line the SDK could not parse (``error`` says which), or None."""
    refused = _refused_line(error)
    if refused is None or not refused[0].strip():
        return None
    line, reason = refused
    too_deep = False
    try:
        message = json.loads(line)
    except ValueError as exc:
        return _error(None, PARSE_ERROR, f"parse error: the line is not JSON ({exc})")
    except RecursionError:
        # Nested past Python's own limit: the id and method are read without descending.
        message, too_deep = top_level_scalars(line), True
    if not isinstance(message, dict) or "method" not in message:
        return _error(None, PARSE_ERROR, "parse error: the line is not a JSON-RPC request")
    request_id = message.get("id")
    if request_id is None:
        return None  # a notification: nobody waits for an answer
    if not _is_plain_id(request_id):
        return _error(None, PARSE_ERROR, "parse error: the request id is not valid JSON text")
    if too_deep:
        return _error(
            request_id,
            INVALID_PARAMS,
            "invalid params: the request nests arrays or objects too deeply to be read:"
            " send the arguments as the tool's input schema describes them",
        )
    params = message.get("params")
    if message.get("method") == "tools/call" and isinstance(params, dict):
        tool = params.get("name")
        fault = _fault(params.get("arguments"), "")
        if isinstance(tool, str) and _is_text(tool) and fault is not None:
            return JSONRPCResponse(
                jsonrpc="2.0",
                id=request_id,
                result={
                    "content": [
                        {
                            "type": "text",
                            "text": f"invalid arguments for {tool}: {fault}, and call again",
                        }
                    ],
                    "isError": True,
                },
            )
    fault = _fault(params, "params")
    if fault is None:
        fault = f"the request is not JSON the server can read ({reason}): send strict JSON"
    return _error(request_id, INVALID_PARAMS, f"invalid params: {fault}")


def _refused_line(error: Exception) -> tuple[str, str] | None:
    """The line the SDK could not parse, and its parser's reason."""
    # The SDK reports a line it cannot parse as pydantic's json_invalid
    # error, which carries the line.
    if not isinstance(error, ValidationError):
        return None
    for item in error.errors(include_url=False):
        found = item.get("input")
        if item.get("type") == "json_invalid" and isinstance(found, str):
            return found, item["msg"]
    return None


def _error(request_id: int | str | None, code: int, text: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_plain_id(value: object) -> bool:
    if isinstance(value, str):
        return _is_text(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _fault(value: object, where: str) -> str | None:
    """The first string under ``where`` that strict JSON cannot carry, described."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"{where or 'the argument'} is not valid Unicode text (it holds the lone"
                f" surrogate \\u{ord(value[exc.start]):04x}): send UTF-8 text"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if not _is_text(str(key)):
                return f"the argument name {key!r} is not valid Unicode text: send UTF-8 text"
            found = _fault(item, name)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _fault(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


#: A JSON string, or one bracket outside strings.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_DECODER = json.JSONDecoder()


def top_level_scalars(line: str) -> dict[str, Any]:
    """The members of the JSON object ``line`` whose values are neither arrays nor objects,
    read without recursion (so however deeply the rest nests); as many as could be read."""
    found: dict[str, Any] = {}
    at = _skip_space(line, 0)
    if not line.startswith("{", at):
        return found
    try:
        while True:
            at = _skip_space(line, at + 1)
            if not line.startswith('"', at):
                return found
            key, at = _DECODER.raw_decode(line, at)
            at = _skip_space(line, at)
            if not line.startswith(":", at):
                return found
            at = _skip_space(line, at + 1)
            if line.startswith(("[", "{"), at):
                at = _past_nested(line, at)
            else:
                found[key], at = _DECODER.raw_decode(line, at)
            at = _skip_space(line, at)
            if not line.startswith(",", at):
                return found
    except ValueError:
        return found


def _skip_space(line: str, at: int) -> int:
    while line.startswith((" ", "\t", "\n", "\r"), at):
        at += 1
    return at


def _past_nested(line: str, at: int) -> int:
    """Where the array or object starting at ``at`` ends (the end of ``line`` if it does not)."""
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(line, at):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
        elif bracket in ("]", "}"):
            depth -= 1
            if depth == 0:
                return token.end()
    return len(line)
