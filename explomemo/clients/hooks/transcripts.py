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
import re
import stat
from collections.abc import Iterable
from typing import Any, NamedTuple

from explomemo.errors import TranscriptError

#: How much of the end of a transcript is read.
TAIL_BYTES = 8 * 1024 * 1024
#: What the Stop hook reads at a time, backwards, looking for the turn's prompt.
CHUNK_BYTES = 256 * 1024
#: The tool whose calls count as reading a file.
READ_TOOL = "Read"
#: A tool name ending so records a memo, whatever name the server was registered under.
RECORD_SUFFIX = "__memory_exploration_record"


def tail_entries(
    path: str, prompt_id: str | None = None, *, last_turn_only: bool = False
) -> list[dict[str, Any]]:
    """The JSON objects of the last :data:`TAIL_BYTES` of the transcript, in order.

    With ``last_turn_only``, the end of the file is read backwards, a
    :data:`CHUNK_BYTES` at a time, only until the turn's prompt (the one with
    ``prompt_id`` when given, else the last), and only the entries from it on are
    parsed: a long session's earlier turns cost nothing. A ``prompt_id`` the tail
    lacks gives the last turn; a tail without any prompt, the whole tail.

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
        first = max(0, info.st_size - TAIL_BYTES)
        start, data, checked, cut = info.st_size, b"", 0, False
        while start > first:
            start = max(first, start - (CHUNK_BYTES if last_turn_only else TAIL_BYTES))
            data = os.pread(fd, info.st_size - start - len(data), start) + data
            lines = data.split(b"\n")
            cut = _cut_at(fd, start)
            whole = lines[1:] if cut else lines
            if last_turn_only:
                found = _prompt_line(whole, len(whole) - checked, prompt_id)
                if found is not None:
                    return list(_parsed(whole[found:]))
                checked = len(whole)
    finally:
        os.close(fd)
    lines = data.split(b"\n")[1 if cut else 0 :]
    if last_turn_only and prompt_id is not None:
        # A prompt id the tail lacks: the last turn is the turn.
        found = _prompt_line(lines, len(lines), None)
        if found is not None:
            return list(_parsed(lines[found:]))
    return list(_parsed(lines))


def _cut_at(fd: int, offset: int) -> bool:
    """Whether reading from ``offset`` starts inside a line (not at the file's start, nor
    right after a line break)."""
    return offset > 0 and os.pread(fd, 1, offset - 1) != b"\n"


def _prompt_line(lines: list[bytes], end: int, prompt_id: str | None) -> int | None:
    """The index of the last line before ``end`` that is the turn's prompt, if any.

    Lines that cannot be it are skipped unparsed: those without the bytes ``user`` and
    the prompt id's. Claude Code writes its JSON with both as plain UTF-8 (the prompt id
    is a UUID), never as ``\\u`` escapes.
    """
    wanted = prompt_id.encode(errors="surrogatepass") if prompt_id is not None else b""
    for index in range(end - 1, -1, -1):
        line = lines[index]
        if b"user" not in line or wanted not in line:
            continue
        for entry in _parsed((line,)):
            if _is_prompt(entry) and (prompt_id is None or entry.get("promptId") == prompt_id):
                return index
    return None


def _parsed(lines: Iterable[bytes]) -> Iterable[dict[str, Any]]:
    """The JSON objects of ``lines``; a line that is none is skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            yield entry


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


#: Tools whose calls change files.
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
#: Tools whose calls delegate work to a subagent (``Task`` in older releases).
DELEGATING_TOOLS = frozenset({"Agent", "Task"})
#: Tool names ending so show memos (recall, show), whatever name the server has.
SERVING_SUFFIXES = ("__memory_exploration_recall", "__memory_exploration_show")
#: How Claude Code gives a blocking Stop hook's reason back to the agent.
STOP_FEEDBACK = "Stop hook feedback:"
#: How the prompt hook names a fresh memo in its context: at the start of a line (memo
#: text is quoted, so a header it forges never starts one).
_FRESH_IN_CONTEXT = re.compile(r"^\[memo \d+, fresh\b", re.MULTILINE)


class Turn(NamedTuple):
    """What a turn did, as its transcript entries say."""

    #: The prompt's text.
    prompt: str
    #: The files read by successful Read calls, in order, each once.
    read: list[str]
    #: (file_path, toolUseResult) of each successful Read call, in order.
    reads: list[tuple[str, Any]]
    #: An Edit, Write, MultiEdit or NotebookEdit call was made.
    edited: bool
    #: A memo was recorded (the MCP tool, or ``explomemo record`` through Bash).
    recorded: bool
    #: A fresh memo was served whole (the prompt hook's context, recall, show).
    fresh_served: bool
    #: The texts of Stop hook feedback the agent was given in this turn.
    feedback: list[str]
    #: The text of the turn's last assistant message.
    final_text: str
    #: The turn delegated work to a subagent (an Agent or Task call).
    delegated: bool = False


def read_turn(entries: list[dict[str, Any]]) -> Turn:
    """What the turn of ``entries`` (from :func:`last_turn`) did."""
    answered: dict[Any, tuple[dict[str, Any], Any]] = {}
    for entry in entries:
        if entry.get("type") != "user" or entry.get("isSidechain"):
            continue
        for block in _content_blocks(entry, "tool_result"):
            answered[block.get("tool_use_id")] = (block, entry.get("toolUseResult"))
    files: dict[str, None] = {}
    reads: list[tuple[str, Any]] = []
    recorded = edited = fresh = delegated = False
    for call in _blocks(entries, "tool_use", "assistant"):
        name = call.get("name")
        if name in EDIT_TOOLS:
            edited = True
        delegated = delegated or name in DELEGATING_TOOLS
        found = answered.get(call.get("id"))
        if found is None or found[0].get("is_error"):
            continue
        arguments = call.get("input")
        arguments = arguments if isinstance(arguments, dict) else {}
        if name == READ_TOOL and isinstance(arguments.get("file_path"), str):
            files[arguments["file_path"]] = None
            reads.append((arguments["file_path"], found[1]))
        elif _records(name, arguments):
            recorded = True
        elif isinstance(name, str) and name.endswith(SERVING_SUFFIXES):
            fresh = fresh or _serves_fresh(found[0].get("content"))
    return Turn(
        prompt=_prompt_text(entries),
        read=list(files),
        reads=reads,
        edited=edited,
        recorded=recorded,
        fresh_served=fresh or _context_names_fresh(entries),
        feedback=_feedback(entries),
        final_text=_final_text(entries),
        delegated=delegated,
    )


class Run(NamedTuple):
    """What a delegated run did, as the subagent's own transcript says (its entries are all
    ``isSidechain``; its first, without a parent, is the prompt it was given)."""

    #: The prompt the main agent delegated; empty when the transcript does not start with it.
    prompt: str
    #: The files read by successful Read calls, in order, each once.
    read: list[str]
    #: (file_path, the text the model was given) of each successful Read call, in order.
    reads: list[tuple[str, str]]
    #: An Edit, Write, MultiEdit or NotebookEdit call was made.
    edited: bool
    #: The command of each Bash call, made or refused.
    commands: list[str]
    #: A memo was recorded (the MCP tool, or ``explomemo record`` through Bash).
    recorded: bool
    #: A fresh memo was served whole (recall, show).
    fresh_served: bool
    #: The tokens of the run's requests: input, cache writes and output, each response
    #: once; cache reads not counted. None when no response gave its usage.
    tokens: int | None
    #: The text of the run's last assistant message.
    final_text: str


def read_run(entries: list[dict[str, Any]]) -> Run:
    """What the delegated run of ``entries`` (a subagent's transcript) did."""
    run = [e for e in entries if e.get("isSidechain")]
    answered: dict[Any, dict[str, Any]] = {}
    for entry in run:
        if entry.get("type") == "user":
            for block in _content_blocks(entry, "tool_result"):
                answered[block.get("tool_use_id")] = block
    files: dict[str, None] = {}
    reads: list[tuple[str, str]] = []
    commands: list[str] = []
    recorded = edited = fresh = False
    for entry in run:
        if entry.get("type") != "assistant":
            continue
        for call in _content_blocks(entry, "tool_use"):
            name = call.get("name")
            arguments = call.get("input")
            arguments = arguments if isinstance(arguments, dict) else {}
            edited = edited or name in EDIT_TOOLS
            if name == "Bash":
                command = arguments.get("command")
                commands.append(command if isinstance(command, str) else "")
            found = answered.get(call.get("id"))
            if found is None or found.get("is_error"):
                continue
            if name == READ_TOOL and isinstance(arguments.get("file_path"), str):
                files[arguments["file_path"]] = None
                reads.append((arguments["file_path"], _text_of(found.get("content"))))
            elif _records(name, arguments):
                recorded = True
            elif isinstance(name, str) and name.endswith(SERVING_SUFFIXES):
                fresh = fresh or _serves_fresh(found.get("content"))
    first = run[0] if run else {}
    started = first.get("type") == "user" and first.get("parentUuid") is None
    return Run(
        prompt=_text_of(_message(first).get("content")) if started else "",
        read=list(files),
        reads=reads,
        edited=edited,
        commands=commands,
        recorded=recorded,
        fresh_served=fresh,
        tokens=_tokens(run),
        final_text=_final_text(run, sidechain=True),
    )


def _tokens(entries: list[dict[str, Any]]) -> int | None:
    """The tokens of the responses of ``entries`` (see :attr:`Run.tokens`): a response
    written as several entries (one a content block) gives its usage in each."""
    seen: dict[Any, int] = {}
    for index, entry in enumerate(entries):
        if entry.get("type") != "assistant":
            continue
        message = _message(entry)
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        counted = (
            usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "output_tokens")
        )
        ident = message.get("id")
        seen[ident if isinstance(ident, str) else index] = sum(
            n for n in counted if isinstance(n, int) and not isinstance(n, bool) and n > 0
        )
    return sum(seen.values()) if seen else None


def _content_blocks(entry: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = _message(entry).get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _text_of(content: Any) -> str:
    """The text of a message's or a tool result's content (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _prompt_text(entries: list[dict[str, Any]]) -> str:
    for entry in entries:
        if _is_prompt(entry):
            return _text_of(_message(entry).get("content"))
    return ""


def _final_text(entries: list[dict[str, Any]], *, sidechain: bool = False) -> str:
    """The text blocks of the last assistant message (its entries share the message id):
    the main agent's, or with ``sidechain`` a subagent's."""
    last: Any = None
    parts: list[str] = []
    for entry in reversed(entries):
        if entry.get("type") != "assistant" or bool(entry.get("isSidechain")) != sidechain:
            if parts and entry.get("type") == "user":
                break
            continue
        ident = _message(entry).get("id")
        if parts and ident != last:
            break
        text = _text_of(_message(entry).get("content"))
        if text:
            last = ident
            parts.append(text)
    return "\n".join(reversed(parts))


def answered_delegations(entries: list[dict[str, Any]], mark: str) -> dict[str, int]:
    """The prompts (white space collapsed) of the delegations of ``entries`` (Agent or Task
    calls of the main agent) whose result was a refusal holding ``mark`` followed by a memo
    id: those the delegate hook answered from a memo, with that memo's id."""
    refused: dict[Any, int] = {}
    answer = re.compile(re.escape(mark) + r" (\d+)")
    for entry in entries:
        if entry.get("type") != "user" or entry.get("isSidechain"):
            continue
        for block in _content_blocks(entry, "tool_result"):
            said = answer.search(_text_of(block.get("content")))
            if block.get("is_error") and said is not None:
                refused[block.get("tool_use_id")] = int(said.group(1))
    found: dict[str, int] = {}
    for call in _blocks(entries, "tool_use", "assistant"):
        arguments = call.get("input")
        prompt = arguments.get("prompt") if isinstance(arguments, dict) else None
        memo = refused.get(call.get("id")) if call.get("name") in DELEGATING_TOOLS else None
        if memo is not None and isinstance(prompt, str):
            found[" ".join(prompt.split())] = memo
    return found


def _feedback(entries: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for entry in entries:
        if entry.get("type") == "user" and entry.get("isMeta"):
            text = _text_of(_message(entry).get("content"))
            if text.startswith(STOP_FEEDBACK):
                found.append(text[len(STOP_FEEDBACK) :].strip())
    return found


def _context_names_fresh(entries: list[dict[str, Any]]) -> bool:
    """Whether the prompt hook's context in this turn named a fresh memo."""
    for entry in entries:
        attachment = entry.get("attachment")
        if entry.get("type") != "attachment" or not isinstance(attachment, dict):
            continue
        if attachment.get("type") != "hook_additional_context":
            continue
        if attachment.get("hookEvent") != "UserPromptSubmit":
            continue
        texts = attachment.get("content")
        texts = texts if isinstance(texts, list) else [texts]
        if any(isinstance(t, str) and _FRESH_IN_CONTEXT.search(t) for t in texts):
            return True
    return False


def _serves_fresh(content: Any) -> bool:
    """Whether a recall or show answer held a fresh memo whole (with its conclusion)."""
    try:
        answer = json.loads(_text_of(content))
    except (ValueError, RecursionError):
        return False
    if not isinstance(answer, dict):
        return False
    matches = answer.get("matches")
    shown = matches if isinstance(matches, list) else [answer]
    return any(
        isinstance(m, dict) and m.get("status") == "fresh" and "conclusion" in m for m in shown
    )


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
