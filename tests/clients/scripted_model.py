"""A scripted model behind the Anthropic Messages API, to drive the real Claude Code CLI.

Claude Code honours ``ANTHROPIC_BASE_URL``: pointed at :class:`ScriptedModel`
(an HTTP server on 127.0.0.1, on a port of its own), the real ``claude -p``
runs real tool calls (Read, Edit, Bash, MCP tools of ``explomemo serve``),
every hook, and writes a real transcript, while what "the model" does next is
read off a script.

The script maps each prompt to its steps (:class:`Read`, :class:`Tool`, :class:`Calls`
for several tools at once, :class:`Answer`, and :class:`OnDisk` for a change made by
someone else than the agent). A subagent's requests are answered by the steps of the prompt it was
delegated (its first user message, without the block explomemo's delegate hook may have added
after it), as a main agent's are. Which step comes next is
decided by the request's own message history: the turn starts at the last user message
holding the prompt as a text block, and each assistant message after it is a step taken.
An answer that is met by a blocking Stop hook (a user message after it) takes the next
step; a turn whose steps are spent answers :data:`SPENT`.

Claude Code defers MCP tools behind its ToolSearch tool (their schemas are not
in the request's ``tools`` until loaded): a :class:`Tool` step naming a tool
the request does not list first calls ``ToolSearch`` with ``select:NAME``, as a
model would; that call is not a step.

A request that is not part of a scripted turn (no tools, or no scripted prompt:
a title, a summary, a quota check) is answered :data:`SIDE_ANSWER` and consumes
nothing. Every request is kept in :attr:`ScriptedModel.requests`, its path in
:attr:`ScriptedModel.paths`; any path other than ``/v1/messages`` (and its
``count_tokens``) gets a 404 in the API's error shape.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from explomemo.clients.hooks.delegate import MARKER

#: What a turn whose steps are spent says (after a Stop hook blocked its last answer).
SPENT = "Nothing more to add."
#: What a request outside any scripted turn gets.
SIDE_ANSWER = "OK"
#: The tool that loads a deferred tool's schema.
TOOL_SEARCH = "ToolSearch"


@dataclass(frozen=True)
class Read:
    """The model reads one file (an absolute path), whole or from ``offset`` for ``limit`` lines."""

    file_path: str
    offset: int | None = None
    limit: int | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        given = {"offset": self.offset, "limit": self.limit}
        return "Read", {
            "file_path": self.file_path,
            **{k: v for k, v in given.items() if v is not None},
        }


@dataclass(frozen=True)
class Tool:
    """The model calls a tool by name with these arguments."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)

    def call(self) -> tuple[str, dict[str, Any]]:
        return self.name, dict(self.input)


@dataclass(frozen=True)
class Calls:
    """The model calls several tools at once, in one message (two subagents at a time)."""

    tools: tuple[Tool, ...]


@dataclass(frozen=True)
class Answer:
    """The model ends its turn with this text."""

    text: str


@dataclass(frozen=True)
class OnDisk:
    """Not the model: something changes the work tree before the model's next step
    (run once per script given to the model, when the step after it is about to be sent)."""

    change: Callable[[], None]


Step = Read | Tool | Calls | Answer | OnDisk
Script = Mapping[str, Sequence[Step]]


def recall(query: str) -> Tool:
    """A recall through explomemo's MCP server."""
    return Tool("mcp__explomemo__memory_exploration_recall", {"query": query})


def record(question: str, conclusion: str, files: Sequence[str]) -> Tool:
    """A record through explomemo's MCP server."""
    return Tool(
        "mcp__explomemo__memory_exploration_record",
        {"question": question, "conclusion": conclusion, "files": list(files)},
    )


@dataclass
class Seen:
    """One request to /v1/messages: its body, and the scripted prompt it belonged to."""

    body: dict[str, Any]
    prompt: str | None
    reply: str


class ScriptedModel:
    """The server; ``with ScriptedModel() as model:`` runs it in a thread.

    ``model.script`` may be replaced between sessions (one server serves many); its
    :class:`OnDisk` steps then run again.
    """

    def __init__(self, script: Script | None = None) -> None:
        self._script: Script = dict(script or {})
        self.requests: list[Seen] = []
        self.paths: list[str] = []
        #: The OnDisk steps of the script that have run, by position (prompt, index).
        self._done: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def script(self) -> Script:
        """The steps of each prompt."""
        return self._script

    @script.setter
    def script(self, script: Script) -> None:
        with self._lock:
            self._script = dict(script)
            self._done.clear()

    @property
    def url(self) -> str:
        """What ANTHROPIC_BASE_URL is set to."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def scripted(self, prompt: str) -> list[Seen]:
        """The requests of the turns of ``prompt``."""
        return [seen for seen in self.requests if seen.prompt == prompt]

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message answering ``body`` (a Messages API request)."""
        with self._lock:
            prompt, content = self._next(body)
            self.requests.append(Seen(body, prompt, json.dumps(content)))
        stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
        return {
            "id": f"msg_scripted_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _next(self, body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
        messages = body.get("messages") or []
        tools = {tool.get("name") for tool in body.get("tools") or []}
        found = _turn(messages, self.script) if tools else None
        if found is None:
            return None, [_text(SIDE_ANSWER)]
        prompt, after = found
        steps = self.script[prompt]
        taken = sum(
            1
            for message in after
            if message.get("role") == "assistant" and not _searches_tools(message)
        )
        index = 0
        for step in steps:
            if not isinstance(step, OnDisk):
                if taken == 0:
                    break
                taken -= 1
            index += 1
        for position in range(index):
            step = steps[position]
            if isinstance(step, OnDisk) and (prompt, position) not in self._done:
                self._done.add((prompt, position))
                step.change()
        if index >= len(steps):
            return prompt, [_text(SPENT)]
        step = steps[index]
        if isinstance(step, Answer):
            return prompt, [_text(step.text)]
        assert not isinstance(step, OnDisk)
        if isinstance(step, Calls):
            return prompt, [
                {
                    "type": "tool_use",
                    "id": f"toolu_scripted_{len(self.requests)}_{n}",
                    "name": tool.name,
                    "input": dict(tool.input),
                }
                for n, tool in enumerate(step.tools)
            ]
        name, arguments = step.call()
        if name not in tools:
            name, arguments = TOOL_SEARCH, {"query": f"select:{name}", "max_results": 1}
        ident = f"toolu_scripted_{len(self.requests)}"
        return prompt, [{"type": "tool_use", "id": ident, "name": name, "input": arguments}]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [_text(content)]
    return [block for block in content or [] if isinstance(block, dict)]


def _searches_tools(message: Mapping[str, Any]) -> bool:
    return any(
        block.get("type") == "tool_use" and block.get("name") == TOOL_SEARCH
        for block in _blocks(message)
    )


def _turn(
    messages: Sequence[Mapping[str, Any]], script: Script
) -> tuple[str, Sequence[Mapping[str, Any]]] | None:
    """The scripted prompt of the last turn in ``messages`` and the messages after it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        for block in _blocks(message):
            text = block.get("text", "") if block.get("type") == "text" else ""
            # A delegated prompt the delegate hook extended with a block of its own.
            text = text.split(f"\n\n{MARKER}", 1)[0].strip()
            if text in script:
                return text, messages[index + 1 :]
    return None


def events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``message`` as the Messages API streams it (server-sent events, in order)."""
    yield _event("message_start", message={**message, "content": [], "stop_reason": None})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _event("content_block_start", index=index, content_block=empty)
        yield _event("content_block_delta", index=index, delta=delta)
        yield _event("content_block_stop", index=index)
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield _event("message_delta", delta=stop, usage={"output_tokens": 1})
    yield _event("message_stop")


def _event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


def _handler(model: ScriptedModel) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the paths are kept in ``model.paths``."""

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, value: object) -> None:
            self._send(status, "application/json", json.dumps(value).encode())

        def _not_found(self) -> None:
            error = {"type": "not_found_error", "message": f"{self.command} {self.path}"}
            self._json(404, {"type": "error", "error": error})

        def do_GET(self) -> None:
            model.paths.append(f"GET {self.path}")
            self._not_found()

        def do_HEAD(self) -> None:
            model.paths.append(f"HEAD {self.path}")
            self._send(200, "application/json", b"")

        def do_POST(self) -> None:
            model.paths.append(f"POST {self.path}")
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.split("?", 1)[0]
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": 1})
            elif path == "/v1/messages":
                message = model.respond(body)
                if not body.get("stream"):
                    self._json(200, message)
                    return
                stream = "".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events(message)
                )
                self._send(200, "text/event-stream", stream.encode())
            else:
                self._not_found()

    return Handler
