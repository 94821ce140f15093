"""``explomemo setup``: registering explomemo with Claude Code, Cursor and Codex.

Every client gets the MCP server; Claude Code also gets the three hooks
(:mod:`explomemo.clients.hooks`). The server and the hooks run this very explomemo
(the absolute path of its executable) on the database and project of the
command that set them up, so what the agent records, the hooks find.

Configuration files are merged: only explomemo's own entries are added or
updated, every other value stays as it was. A TOML file keeps its layout; a
JSON file is written again with its own indentation (the standard library
keeps no layout), so its values stay and its layout may not. A file that is
not valid JSON or TOML (or holds a number JSON cannot write back, such as
``1e400``) is refused with one line and left alone, and so is anything that
is not a regular file. Writes go through
:mod:`explomemo.atomic` (whole or not at all, permissions kept, a linked
file written through); a configuration folder that is a link leading out of
the project folder is refused. A second run finds nothing to change and says so; ``--dry-run``
prints the change as a unified diff (and the ``claude`` commands it would
run) and writes nothing.

Where things go, in the project folder (the top of the git work tree, unless
``--root`` says otherwise):

* Claude Code: the hooks in ``.claude/settings.local.json`` (they name this
  machine's paths, so not in the settings.json a team commits). The server with
  ``claude mcp add-json --scope local`` when the ``claude`` command is on PATH
  (connected at once, for this folder); otherwise in ``.mcp.json``, approved
  in ``.claude/settings.local.json`` (``enabledMcpjsonServers``), which
  Claude Code honours once the folder is trusted.
* Cursor: ``.cursor/mcp.json``.
* Codex: ``.codex/config.toml`` (Codex reads it for trusted projects).
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explomemo.atomic import Naming, leads_out, replace_file, writable_target
from explomemo.errors import SetupError
from explomemo.files import check_text_path, file_kind
from explomemo.printable import block, message, no_workflow_commands
from explomemo.projects import resolve_project, work_tree_top
from explomemo.store.database import database_path

SERVER_NAME = "explomemo"
#: Each Claude Code hook: (event, matcher, explomemo hook name, timeout in seconds).
CLAUDE_HOOKS = (
    ("SessionStart", "startup|resume|clear|compact", "session-start", 15),
    ("UserPromptSubmit", None, "prompt", 5),
    ("Stop", None, "stop", 10),
)
LABELS = {"claude-code": "Claude Code", "cursor": "Cursor", "codex": "Codex"}


@dataclass
class FileChange:
    """A configuration file, before (None: absent) and after the merge."""

    path: Path
    before: str | None
    after: str


@dataclass
class Plan:
    """What setting up one client changes: files, and ``claude`` commands to run."""

    files: list[FileChange] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """What the client is set up to run: explomemo, on which database and project, where."""

    folder: Path
    command: list[str]
    db: str
    project: str
    #: False: the Stop hook records no turn itself (``hook stop --no-capture``).
    capture: bool = True

    def server_env(self) -> dict[str, str]:
        """The environment the MCP server is started with."""
        return {"EXPLOMEMO_DB": self.db, "EXPLOMEMO_PROJECT": self.project}

    def server(self) -> dict[str, Any]:
        """The server's command, arguments and environment."""
        return {
            "command": self.command[0],
            "args": [*self.command[1:], "serve"],
            "env": self.server_env(),
        }

    def hook_command(self, event: str) -> str:
        """The shell command of one Claude Code hook."""
        off = ["--no-capture"] if event == "stop" and not self.capture else []
        return shlex.join(
            [*self.command, "--db", self.db, "hook", event, "--project", self.project, *off]
        )


def setup(
    client: str,
    *,
    db: Path | None,
    project: str | None,
    root: str | None,
    dry_run: bool,
    capture: bool = True,
) -> list[str]:
    """Set up ``client`` for the project folder; returns the lines to print.

    ``capture`` False writes the Claude Code Stop hook with ``--no-capture``: it then
    records no turn itself (running setup again without it turns capture back on).

    The lines are safe to show: paths, and the files' contents in a diff, come
    from the project (a cloned repository), so their control characters are
    escaped (:mod:`explomemo.printable`).
    """
    folder = _folder(root)
    target = Target(
        folder=folder,
        command=_explomemo_command(),
        db=os.path.abspath(database_path(db)),
        project=resolve_project(project, str(folder)),
        capture=capture,
    )
    plan = PLANNERS[client](target)
    label = LABELS[client]
    changes = [change for change in plan.files if change.before != change.after]
    if not changes and not plan.commands:
        return [
            message(
                f"explomemo is already set up for {label} in {folder} (project"
                f" {target.project!r}, database {target.db}): nothing changed."
            )
        ]
    for change in changes:
        # Every file is checked before the first is written (and in a dry run too): a
        # refusal never leaves a setup half done.
        writable_target(change.path, CONFIG_FILE, folder)
    lines: list[str] = []
    if dry_run:
        for change in changes:
            lines.append(no_workflow_commands(block(_diff(change, folder).rstrip("\n"))))
        lines += [message(f"would run: {shlex.join(argv)}") for argv in plan.commands]
        lines.append("dry run: nothing was written.")
        return lines
    for change in changes:
        written = replace_file(
            change.path, change.after.encode("utf-8"), CONFIG_FILE, within=folder
        )
        through = "" if written == change.path else f" (through its link, to {written})"
        lines.append(message(f"wrote {change.path}{through}"))
    for argv in plan.commands:
        _run(argv, folder)
        lines.append(message(f"ran: {shlex.join(argv)}"))
    lines.append(
        message(
            f"explomemo is set up for {label} in {folder}: project {target.project!r},"
            f" database {target.db}."
        )
    )
    return lines + plan.notes


def _folder(root: str | None) -> Path:
    if root is not None:
        check_text_path(root, "--root", "pass a folder whose path is UTF-8")
        if not os.path.isdir(root):
            raise SetupError(f"--root {root!r} is not a folder: pass the project's folder")
        return Path(os.path.abspath(root))
    cwd = os.getcwd()
    folder = work_tree_top(cwd) or cwd
    check_text_path(folder, "the project folder", "set up a folder whose path is UTF-8 (--root)")
    return Path(folder)


def _explomemo_command() -> list[str]:
    """This explomemo as an absolute command: its script, or this Python with ``-m``."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "explomemo" and os.access(script, os.X_OK):
        return [script]
    beside = Path(sys.executable).parent / "explomemo"
    if os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "explomemo"]


def _run(argv: list[str], folder: Path) -> None:
    try:
        done = subprocess.run(
            argv, cwd=folder, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"{shlex.join(argv)} could not run ({exc})") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        raise SetupError(f"{shlex.join(argv)} failed ({said}): fix that, then run setup again")


def _diff(change: FileChange, folder: Path) -> str:
    name = os.path.relpath(change.path, folder)
    before = [] if change.before is None else change.before.splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(
            before,
            change.after.splitlines(keepends=True),
            fromfile="/dev/null" if change.before is None else f"a/{name}",
            tofile=f"b/{name}",
        )
    )


CONFIG_FILE = Naming(
    error=SetupError,
    what="configuration file",
    instead="make it a regular file you can write (or move it away), then run setup again",
)


def config_path(folder: Path, *parts: str) -> Path:
    """A configuration file in the project folder, refused when it, or a folder on its way,
    is a symbolic link that leads out of it (:func:`~explomemo.atomic.leads_out`).

    A cloned repository may commit ``.cursor`` as a link to ``~/.cursor``, or
    ``.cursor/mcp.json`` as a link to ``~/.cursor/mcp.json``: setup would then
    rewrite the user's own configuration, not the project's. A link that stays
    inside the project is followed (its file is rewritten, the link stays).
    """
    path = folder.joinpath(*parts)
    for link, kind in ((path.parent, "folder"), (path, "file")):
        reached = leads_out(link, folder)
        if reached is not None:
            changed = Path(reached, path.name) if kind == "folder" else Path(reached)
            raise SetupError(
                f"{link} is a symbolic link that leads out of the project folder {folder}"
                f" (to {reached}): setup would change {changed} there, not the project's;"
                f" replace the link with a {kind} of the project, then run setup again"
            )
    return path


# JSON files -------------------------------------------------------------------


def _read(path: Path) -> str | None:
    """The text of a configuration file, None when there is none; only a regular file is read
    (a FIFO would block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SetupError(
            f"{path} cannot be read ({exc.strerror}): fix it or move it away"
        ) from None
    found = os.fstat(fd).st_mode
    if not stat.S_ISREG(found):
        # Checked before fdopen, which refuses a directory with its own exception.
        os.close(fd)
        raise SetupError(f"{path} is {file_kind(found)}, not a regular file: {CONFIG_FILE.instead}")
    with os.fdopen(fd, "rb") as stream:
        try:
            return stream.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SetupError(f"{path} cannot be read ({exc}): fix it or move it away") from None


def _json_object(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise SetupError(
                f"{path} holds the number {number}, which is not finite: JSON has no way to"
                " write it back; fix it, then run setup again; it was left as it is"
            )
        return value

    try:
        data = json.loads(text, parse_float=finite, parse_constant=finite)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise SetupError(
            f"{path} is not valid JSON ({why}): fix it, then run setup again; it was left as it is"
        ) from None
    if not isinstance(data, dict):
        raise SetupError(f"{path} does not hold a JSON object: fix it; it was left as it is")
    return data


def _indent(text: str | None) -> int | str:
    """The indentation of a JSON file's first indented line: a count of spaces, or the
    tabs themselves; 2 when none is indented."""
    for line in (text or "").split("\n")[1:]:  # JSON lines: U+2028 may sit in a string
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            leading = line[: len(line) - len(stripped)]
            return leading if "\t" in leading else len(leading)
    return 2


def _merge_json(path: Path, change: Callable[[dict[str, Any]], None]) -> FileChange:
    """The change of one JSON file: ``change`` edits its object in place."""
    before = _read(path)
    data = _json_object(path, before)
    change(data)
    after = _surrogates_escaped(json.dumps(data, indent=_indent(before), ensure_ascii=False))
    after += "\n"
    if before is not None and json.loads(after) == _json_object(path, before):
        after = before
    return FileChange(path, before, after)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogates_escaped(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its ``\\u`` escape, as the user's
    file had it: valid JSON (``"\\ud800"``) can hold one, UTF-8 text cannot."""
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    found = data.setdefault(key, {})
    if not isinstance(found, dict):
        raise SetupError(f"{key!r} in {path} is not an object: fix it; it was left as it is")
    return found


def _set_server(servers: dict[str, Any], entry: dict[str, Any]) -> None:
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict):
        merge_into(current, entry)
    else:
        servers[SERVER_NAME] = entry


def merge_into(current: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Set ``wanted``'s keys in ``current``, merging nested tables key by key.

    The user's own keys in explomemo's entry (an ``env`` variable of theirs,
    a ``timeout``, a TOML comment) stay; a key already holding the wanted
    value is not assigned again, so a TOML table keeps its layout.
    """
    for key, value in wanted.items():
        mine = current.get(key)
        if isinstance(value, dict) and isinstance(mine, dict):
            merge_into(mine, value)
        elif mine != value:
            current[key] = value


# Claude Code ------------------------------------------------------------------


def _add_hooks(target: Target, settings: dict[str, Any], path: Path) -> None:
    """Add (or update) explomemo's three hooks in the settings object of ``path``."""
    hooks = _table(settings, "hooks", path)
    for event, matcher, name, timeout in CLAUDE_HOOKS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SetupError(f"hooks.{event} in {path} is not a list: fix it; it was left as is")
        wanted = {"type": "command", "command": target.hook_command(name), "timeout": timeout}
        mine = next((e for g in _groups_entries(groups) for e in g[1] if _is_own(e, name)), None)
        if mine is not None:
            mine.update(wanted)
            continue
        group: dict[str, Any] = {"hooks": [wanted]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        groups.append(group)


def _drop_hooks(settings: dict[str, Any]) -> None:
    """Take explomemo's hooks out of a settings object (an earlier setup's, in the shared
    settings.json), with the groups and events they leave empty; the rest stays."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event, _, name, _ in CLAUDE_HOOKS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        for group, entries in _groups_entries(groups):
            kept = [entry for entry in entries if not _is_own(entry, name)]
            if len(kept) < len(entries):
                group["hooks"] = kept
                if not kept:
                    groups.remove(group)
                if not groups:
                    del hooks[event]
    if not hooks:
        del settings["hooks"]


def _groups_entries(groups: list[Any]) -> list[tuple[dict[str, Any], list[Any]]]:
    """Each hook group of an event with its list of hooks (misshapen groups are skipped)."""
    return [
        (group, group["hooks"])
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
    ]


def _is_own(entry: Any, name: str) -> bool:
    """Whether a hook entry is explomemo's hook ``name``: a command that runs explomemo
    itself (a program named explomemo, or ``PYTHON -m explomemo``), as setup writes it
    (``EXPLOMEMO [--db DB] hook NAME …``). A user's command that merely contains it (a
    wrapper script) is theirs."""
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv and os.path.basename(argv[0]) == SERVER_NAME:
        rest = argv[1:]
    elif argv[1:3] == ["-m", SERVER_NAME]:
        rest = argv[3:]
    else:
        return False
    if rest[:1] == ["--db"]:
        rest = rest[2:]
    return rest[:2] == ["hook", name]


def _claude_config() -> Path:
    folder = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(folder) / ".claude.json" if folder else Path.home() / ".claude.json"


def _claude_local_server(folder: Path) -> dict[str, Any] | None:
    """The server Claude Code has registered for ``folder`` in local scope, if any."""
    try:
        config = json.loads(_read(_claude_config()) or "null")
    except (SetupError, ValueError, RecursionError):
        return None
    projects = config.get("projects") if isinstance(config, dict) else None
    if not isinstance(projects, dict):
        return None
    for key in (str(folder), os.path.realpath(folder)):
        entry = projects.get(key)
        servers = entry.get("mcpServers") if isinstance(entry, dict) else None
        if isinstance(servers, dict) and isinstance(servers.get(SERVER_NAME), dict):
            return servers[SERVER_NAME]  # type: ignore[no-any-return]
    return None


def plan_claude_code(target: Target) -> Plan:
    """Hooks in .claude/settings.local.json; the server through ``claude`` or in .mcp.json.

    The hooks hold this machine's paths (explomemo's executable, the
    database), so they go into the settings Claude Code keeps per person, not
    the shared settings.json a team commits; an earlier setup's hooks there
    are taken out.
    """
    folder = target.folder
    local = config_path(folder, ".claude", "settings.local.json")
    mcp_json = config_path(folder, ".mcp.json")
    server = target.server()
    claude = shutil.which("claude")

    def local_settings(settings: dict[str, Any]) -> None:
        _add_hooks(target, settings, local)
        if claude is None:
            approved = settings.setdefault("enabledMcpjsonServers", [])
            if not isinstance(approved, list):
                raise SetupError(
                    f"enabledMcpjsonServers in {local} is not a list: fix it; it was left as it is"
                )
            if SERVER_NAME not in approved:
                approved.append(SERVER_NAME)

    def add_server(config: dict[str, Any]) -> None:
        _set_server(_table(config, "mcpServers", mcp_json), {"type": "stdio", **server})

    plan = Plan(files=[_merge_json(local, local_settings)])
    shared = _merge_json(config_path(folder, ".claude", "settings.json"), _drop_hooks)
    if shared.before is not None:
        plan.files.append(shared)
    if claude is not None:
        current = _claude_local_server(folder)
        wanted = copy.deepcopy(current) if current is not None else {}
        merge_into(wanted, {"type": "stdio", **server})
        if wanted != current:
            if current is not None:
                plan.commands.append([claude, "mcp", "remove", "--scope", "local", SERVER_NAME])
            add = [claude, "mcp", "add-json", "--scope", "local", SERVER_NAME]
            plan.commands.append([*add, json.dumps(wanted, ensure_ascii=False)])
        return plan
    plan.files.append(_merge_json(mcp_json, add_server))
    plan.notes.append(
        "The claude command is not on PATH, so the server went into .mcp.json, approved in"
        " .claude/settings.local.json: Claude Code uses it once this folder is trusted (start"
        " claude here once and accept). .mcp.json now holds this machine's paths: commit it"
        " only if every teammate's are the same."
    )
    return plan


# Cursor and Codex -------------------------------------------------------------


def plan_cursor(target: Target) -> Plan:
    """The server in .cursor/mcp.json."""
    path = config_path(target.folder, ".cursor", "mcp.json")

    def add_server(config: dict[str, Any]) -> None:
        _set_server(_table(config, "mcpServers", path), target.server())

    return Plan(
        files=[_merge_json(path, add_server)],
        notes=["Cursor lists it under Settings > MCP; switch it on there if it is off."],
    )


def plan_codex(target: Target) -> Plan:
    """The server in .codex/config.toml."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    path = config_path(target.folder, ".codex", "config.toml")
    before = _read(path)
    try:
        document = tomlkit.parse(before or "")
    except TOMLKitError as exc:
        raise SetupError(
            f"{path} is not valid TOML ({exc}): fix it, then run setup again; it was left as it is"
        ) from None
    servers = document.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        document["mcp_servers"] = servers
    if not isinstance(servers, dict):
        raise SetupError(f"mcp_servers in {path} is not a table: fix it; it was left as it is")
    server = target.server()
    env = tomlkit.table()
    env.update(server["env"])
    wanted = {"command": server["command"], "args": server["args"], "env": env}
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict):
        merge_into(current, wanted)
    else:
        entry = tomlkit.table()
        entry.update(wanted)
        servers[SERVER_NAME] = entry
    return Plan(
        files=[FileChange(path, before, tomlkit.dumps(document))],
        notes=["Codex reads a project's .codex/config.toml once the project is trusted."],
    )


PLANNERS: dict[str, Callable[[Target], Plan]] = {
    "claude-code": plan_claude_code,
    "cursor": plan_cursor,
    "codex": plan_codex,
}
