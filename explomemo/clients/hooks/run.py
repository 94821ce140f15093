"""Running a hook: ``explomemo hook EVENT`` reads the hook's JSON on stdin, calls the
event's module and writes its answer on stdout; whatever goes wrong, it exits 0 with one
line on stderr.

Each hook reads and hashes files until its deadline (:data:`DEADLINES`), within the
timeout ``setup`` gives it; a lock is waited for at most
:data:`~explomemo.clients.hooks.memos.BUSY_TIMEOUT_MS`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from explomemo.clients.hooks import delegate, prompt, session_start, stop, subagent_stop
from explomemo.clients.hooks.deadline import Deadline
from explomemo.clients.hooks.payload import Answer
from explomemo.errors import HookInputError
from explomemo.inputs import check_switches
from explomemo.printable import message

#: Standard input a hook reads at most (8 MiB): Claude Code's hook inputs are a few
#: kilobytes, a prompt with a long paste a few megabytes. Past it a hook adds nothing.
MAX_INPUT_BYTES = 8 * 1024 * 1024
#: What is read at once of an input past MAX_INPUT_BYTES, to drop it.
_DRAIN_BYTES = 1024 * 1024

_HANDLERS: dict[str, Callable[..., Answer]] = {
    "session-start": session_start.session_start,
    "prompt": prompt.prompt,
    "stop": stop.stop,
    "subagent-stop": subagent_stop.subagent_stop,
    "delegate": delegate.delegate,
}
#: Each hook's deadline, in seconds from its start.
DEADLINES: dict[str, float] = {
    "session-start": session_start.DEADLINE_S,
    "prompt": prompt.DEADLINE_S,
    "stop": stop.DEADLINE_S,
    "subagent-stop": subagent_stop.DEADLINE_S,
    "delegate": delegate.DEADLINE_S,
}


def run_hook(
    event: str,
    *,
    db: Path | None,
    project: str | None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
    capture: bool = True,
    remind: bool = False,
    delegation: bool = True,
    deadline: Deadline | None = None,
) -> int:
    """Answer one hook event; always returns 0 (a hook never fails the client).

    ``capture`` False turns the Stop and SubagentStop hooks' capture off
    (``--no-capture``); ``remind`` True the Stop hook's reminder on (``--remind``), unless
    ``EXPLOMEMO_REMIND`` is off; ``delegation`` False the delegate hook's answers off
    (``--no-delegation``). A hook reads and hashes files until ``deadline``: by
    default its own (:data:`DEADLINES`) from now."""
    err = stderr if stderr is not None else _stream(sys.stderr)
    try:
        if deadline is None:
            deadline = Deadline(DEADLINES[event])
        source = stdin if stdin is not None else _stream(sys.stdin)
        out = stdout if stdout is not None else _stream(sys.stdout)
        payload = _payload(_bounded(source))
        check_switches(os.environ)
        options: dict[str, Any] = {"deadline": deadline}
        if event in ("stop", "subagent-stop"):
            options["capture"] = capture
        if event == "stop":
            options["remind"] = remind
        if event == "delegate":
            options["delegation"] = delegation
        answer = _HANDLERS[event](payload, db, project, **options)
        if answer is not None:
            _write(out, answer)
    except Exception as exc:  # whatever it is, the client must go on
        line = message(f"explomemo hook {event}: {_one_line(exc)}")
        err.write(f"{line}\n".encode(errors="replace"))
        err.flush()
    return 0


def _write(out: BinaryIO, answer: dict[str, Any]) -> None:
    try:
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()
    except OSError as exc:
        from explomemo.stdout import failed

        raise failed(exc) from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:399] + "…"


def _stream(stream: Any) -> BinaryIO:
    """The bytes of a standard stream; one that is closed (None: the hook was started
    without it) reads nothing and writes nowhere."""
    found = getattr(stream, "buffer", None)
    if found is None:
        return open(os.devnull, "r+b")  # open for the life of the process
    return found  # type: ignore[no-any-return]


def _bounded(source: BinaryIO) -> bytes:
    """Standard input, refused past MAX_INPUT_BYTES; as much again is read and dropped,
    so that a client still writing meets no closed pipe, and no more: an input that
    never ends (``/dev/zero``) does not hold the hook."""
    data = source.read(MAX_INPUT_BYTES + 1)
    if len(data) <= MAX_INPUT_BYTES:
        return data
    dropped = len(data)
    while dropped < 2 * MAX_INPUT_BYTES and (chunk := source.read(_DRAIN_BYTES)):
        dropped += len(chunk)
    raise HookInputError(
        f"stdin holds more than {MAX_INPUT_BYTES:,} bytes: the hook reads no more and adds nothing"
    )


def _payload(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise HookInputError("stdin is not UTF-8 JSON: Claude Code sends a JSON object") from None
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise HookInputError(
            f"stdin is not JSON ({exc}): Claude Code sends a JSON object"
        ) from None
    if not isinstance(payload, dict):
        raise HookInputError("stdin is not a JSON object: Claude Code sends one")
    return payload
