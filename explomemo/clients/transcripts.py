"""Reading a Claude Code session transcript: what the last turn read, and whether it recorded.

A transcript is JSON Lines. A turn starts at the ``user`` entry that carries
the prompt (text content, not a tool result, not ``isMeta``: the feedback of
a blocking Stop hook is meta and belongs to the turn it continues), and every
entry of the turn up to the next such prompt carries the same ``promptId``.
The model's tool calls are ``assistant`` entries holding ``tool_use`` blocks;
their results come back as ``user`` entries holding ``tool_result`` blocks,
with ``is_error`` set when the call failed. Sub-agents write their own files
(``isSidechain``): their reads are not the main agent's.

Only the end of the file is read (at most :data:`TAIL_BYTES`): a long
session's transcript grows to many megabytes, and the Stop hook runs after
every answer.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from typing import Any

from explomemo.errors import TranscriptError

#: How much of the end of a transcript is read.
TAIL_BYTES = 8 * 1024 * 1024
#: The tool whose calls count as reading a file.
READ_TOOL = "Read"
#: A tool name ending so records a memo, whatever name the server was registered under.
RECORD_SUFFIX = "__memory_exploration_record"


def tail_entries(path: str) -> list[dict[str, Any]]:
    """The JSON objects of the last :data:`TAIL_BYTES` of the transcript, in order.

    A line cut by the start of the tail, one being written, or one nested
    too deep for the JSON parser, is skipped.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TranscriptError(f"transcript {path} cannot be opened ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TranscriptError(f"transcript {path} is not a regular file")
        start = max(0, info.st_size - TAIL_BYTES)
        data = os.pread(fd, info.st_size - start, start)
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]
    entries: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _is_prompt(entry: dict[str, Any]) -> bool:
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain"):
        return False
    content = _message(entry).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


def last_turn(entries: list[dict[str, Any]], prompt_id: str | None) -> list[dict[str, Any]]:
    """The entries of the last turn (of the turn whose prompt has ``prompt_id``, when given)."""
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if _is_prompt(entry) and (prompt_id is None or entry.get("promptId") == prompt_id):
            return entries[index:]
    return entries


def _blocks(entries: Iterable[dict[str, Any]], kind: str, role: str) -> Iterable[dict[str, Any]]:
    for entry in entries:
        if entry.get("type") != role or entry.get("isSidechain"):
            continue
        content = _message(entry).get("content")
        if isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict) and b.get("type") == kind)


def turn_reads(entries: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """The files the turn read (successful Read calls, in order) and whether it recorded a memo.

    A memo counts as recorded through the MCP tool, or through ``explomemo
    record`` run with the Bash tool.
    """
    failed = {
        block.get("tool_use_id")
        for block in _blocks(entries, "tool_result", "user")
        if block.get("is_error")
    }
    answered = {block.get("tool_use_id") for block in _blocks(entries, "tool_result", "user")}
    files: dict[str, None] = {}
    recorded = False
    for call in _blocks(entries, "tool_use", "assistant"):
        ident = call.get("id")
        if ident not in answered or ident in failed:
            continue
        name = call.get("name")
        arguments = call.get("input")
        arguments = arguments if isinstance(arguments, dict) else {}
        if name == READ_TOOL and isinstance(arguments.get("file_path"), str):
            files[arguments["file_path"]] = None
        elif _records(name, arguments):
            recorded = True
    return list(files), recorded


def _records(name: object, arguments: dict[str, Any]) -> bool:
    if isinstance(name, str) and name.endswith(RECORD_SUFFIX):
        return True
    command = arguments.get("command")
    if name != "Bash" or not isinstance(command, str):
        return False
    words = command.split()
    return any(
        os.path.basename(word) == "explomemo" and "record" in words[i + 1 :]
        for i, word in enumerate(words)
    )
