"""A hook's input and answer: fields of the JSON object Claude Code sends, the folder a
hook works in, and the JSON it answers with."""

from __future__ import annotations

import os
from typing import Any

from explomemo.errors import HookInputError

#: What a hook answers: the JSON object it writes on stdout, or None for nothing.
Answer = dict[str, Any] | None

#: Set by Claude Code for hook commands: the folder it was started in, the MCP
#: server's working directory (so its default root).
PROJECT_DIR = "CLAUDE_PROJECT_DIR"


def field(payload: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """``payload[name]``, refused (:class:`~explomemo.errors.HookInputError`) when it is
    missing (and no ``default`` is given) or not a ``kind``."""
    value = payload.get(name, default)
    if not isinstance(value, kind):
        raise HookInputError(
            f"field {name!r} of the hook input is missing or not a {kind.__name__}"
        )
    return value


def _project_dir() -> str | None:
    """$CLAUDE_PROJECT_DIR when it names an existing absolute folder."""
    given = os.environ.get(PROJECT_DIR, "")
    return given if os.path.isabs(given) and os.path.isdir(given) else None


def root_of(payload: dict[str, Any]) -> str:
    """The folder a hook checks memos against: Claude Code's project folder, else the
    session's ``cwd`` from the hook input.

    The ``cwd`` follows the session's shell into subfolders, where a memo's paths
    (relative to the project folder, the MCP server's working directory) would
    all be missing: so a hook sees a memo fresh or stale as the server does.
    """
    found = _project_dir()
    if found is not None:
        return found
    cwd: str = field(payload, "cwd", str, os.getcwd())
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise HookInputError(f"cwd {cwd!r} of the hook input is not an existing absolute folder")
    return cwd


def context(event: str, text: str) -> dict[str, Any]:
    """The answer that adds ``text`` to the agent's context at ``event``."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
