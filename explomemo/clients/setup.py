"""``explomemo setup``: registering explomemo with Claude Code, Cursor and Codex.

Every client gets the MCP server; Claude Code also gets the hooks
(:mod:`explomemo.clients.hooks`, one module per event). The server and the hooks run this
very explomemo (the absolute path of its executable) on the database and project of the
command that set them up, so what the agent records, the hooks find.

Configuration files are merged: only explomemo's own entries are added or
updated, every other value stays as it was. Within its own server entry setup
writes the command, its arguments, its environment and its folder itself: a
cloned repository can commit that entry with ``env: {LD_PRELOAD: ./evil.so}``
or a ``cwd``, which setup would otherwise keep and approve. It keeps the user's own
``EXPLOMEMO_*`` variables, drops every other variable, ``cwd`` and ``envFile``,
and says what it removed. In the Claude Code settings it writes, it names the
hooks, permissions and variables that are not its own, and leaves them as they
are. A TOML file keeps its layout; a JSON file is written again with its own
indentation (the standard library keeps no layout), so its values stay and its
layout may not. A file that is
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
from collections.abc import Callable, Mapping, Sequence
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
    ("PreToolUse", "Agent|Task", "delegate", 10),
    ("SubagentStop", None, "subagent-stop", 10),
)
#: What a hook a release added does, as setup says when it adds it to an earlier setup.
HOOKS_ADDED = {
    "PreToolUse": "a delegated exploration that a memo answers is answered from it, or"
    " handed it; --no-delegation turns it off",
    "SubagentStop": "a delegated run that read files and changed none becomes a memo;"
    " --no-capture turns it off",
}
LABELS = {"claude-code": "Claude Code", "cursor": "Cursor", "codex": "Codex"}
#: The prefix of the variables of explomemo's server entry that setup keeps.
OWN_VARIABLES = "EXPLOMEMO_"
#: Keys of explomemo's server entry that setup removes: it runs in the folder the client
#: gives it, with only the environment setup writes (Cursor's ``envFile`` loads one).
DROPPED_KEYS = ("cwd", "envFile", "env_file")
#: explomemo's own variables that name something to load: a file a repository commits
#: must not make the server read a model from wherever it points. Set them in the
#: environment the client runs in.
DROPPED_VARIABLES = ("EXPLOMEMO_MODEL", "EXPLOMEMO_MODEL_PATH")


@dataclass(frozen=True)
class HookChoice:
    """A choice of ``setup claude-code`` written into one hook's command as a flag.

    Running setup again keeps the flag the hook's command already has, unless the
    choice is given anew (``--capture`` takes ``--no-capture`` away).
    """

    #: The choice, as :func:`setup` takes it.
    name: str
    #: The explomemo hook whose command carries it.
    hook: str
    #: What the choice is when the flag is not written.
    default: bool
    #: The flag written when the choice is not the default.
    flag: str
    #: The setup option that takes the flag away.
    undo: str


HOOK_CHOICES = (
    HookChoice("capture", "stop", default=True, flag="--no-capture", undo="--capture"),
    HookChoice("capture", "subagent-stop", default=True, flag="--no-capture", undo="--capture"),
    HookChoice("remind", "stop", default=False, flag="--remind", undo="--no-remind"),
    HookChoice("delegation", "delegate", default=True, flag="--no-delegation", undo="--delegation"),
)


@dataclass
class FileChange:
    """A configuration file, before (None: absent) and after the merge."""

    path: Path
    before: str | None
    after: str
    #: What the file holds that is not explomemo's and may run or allow something, said
    #: when the file is written.
    foreign: list[str] = field(default_factory=list)


@dataclass
class Plan:
    """What setting up one client changes: files, and ``claude`` commands to run."""

    files: list[FileChange] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: What setup takes out of its own server entries (see :func:`own_server`).
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """What the client is set up to run: explomemo, on which database and project, where."""

    folder: Path
    command: list[str]
    db: str
    project: str
    #: The choices of :data:`HOOK_CHOICES` given to this setup; one left out (or None)
    #: stays as the hook's command had it.
    choices: Mapping[str, bool | None] = field(default_factory=dict)

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

    def hook_command(self, event: str, before: Sequence[str] = ()) -> str:
        """The shell command of one Claude Code hook; ``before``, the words of the
        command an earlier setup wrote, gives the choices not given to this one."""
        flags = [
            choice.flag
            for choice in HOOK_CHOICES
            if choice.hook == event and self.chosen(choice, before) != choice.default
        ]
        return shlex.join(
            [*self.command, "--db", self.db, "hook", event, "--project", self.project, *flags]
        )

    def chosen(self, choice: HookChoice, before: Sequence[str]) -> bool:
        """``choice`` as given, else as the earlier command ``before`` had it."""
        given = self.choices.get(choice.name)
        if given is not None:
            return given
        return choice.default != (choice.flag in before)

    def kept(self, event: str, before: Sequence[str]) -> list[HookChoice]:
        """The choices of hook ``event`` not given, whose flag the earlier command
        ``before`` had (so it stays)."""
        return [
            choice
            for choice in HOOK_CHOICES
            if choice.hook == event
            and self.choices.get(choice.name) is None
            and choice.flag in before
        ]


#: How long ``setup`` waits for another process's lock to read the project's name.
_READ_WAIT_MS = 200


def _project(db: Path | None, project: str | None, folder: str) -> str:
    """The project the client is set up for, as a call there would take it: with no
    ``project``, the one under which an existing database keeps this repository's memos
    (a clone in a folder of another name, after ``import``). The database is only read:
    none is created or migrated, and one that cannot be read now (missing, older, locked,
    damaged) leaves the name of the repository's folder."""
    from explomemo.errors import StoreError
    from explomemo.memos.cache import project_at
    from explomemo.store.database import Store

    if project is not None:
        return resolve_project(project, folder)
    try:
        store = Store.open_existing(db, _READ_WAIT_MS, migrate=False)
    except StoreError:
        return resolve_project(None, folder)
    try:
        return project_at(store, None, folder, remember=False)
    except StoreError:
        return resolve_project(None, folder)
    finally:
        store.close()


def setup(
    client: str,
    *,
    db: Path | None,
    project: str | None,
    root: str | None,
    dry_run: bool,
    capture: bool | None = None,
    remind: bool | None = None,
    delegation: bool | None = None,
) -> list[str]:
    """Set up ``client`` for the project folder; returns the lines to print.

    Claude Code: ``capture`` False writes the Stop hook with ``--no-capture`` (it then
    records no turn itself), ``remind`` True with ``--remind`` (it then asks the agent
    to record after a turn that changed files), ``delegation`` False the delegate hook with
    ``--no-delegation`` (it then lets every delegated run through untouched). None keeps
    what an earlier setup wrote.

    The lines are safe to show: paths, and the files' contents in a diff, come
    from the project (a cloned repository), so their control characters are
    escaped (:mod:`explomemo.printable`).
    """
    folder = _folder(root)
    target = Target(
        folder=folder,
        command=_explomemo_command(),
        db=os.path.abspath(database_path(db)),
        project=_project(db, project, str(folder)),
        choices={"capture": capture, "remind": remind, "delegation": delegation},
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
    said = [message(f"{'would remove' if dry_run else 'removed'} {what}") for what in plan.removed]
    said += [
        message(f"left as it is in {change.path}, not explomemo's: {what}")
        for change in changes
        for what in change.foreign
    ]
    if dry_run:
        for change in changes:
            lines.append(no_workflow_commands(block(_diff(change, folder).rstrip("\n"))))
        lines += [message(f"would run: {shlex.join(argv)}") for argv in plan.commands]
        lines += said
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
    lines += said
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


def _merge_json(
    path: Path,
    change: Callable[[dict[str, Any]], None],
    foreign: Callable[[dict[str, Any]], list[str]] | None = None,
) -> FileChange:
    """The change of one JSON file: ``change`` edits its object in place; ``foreign``
    names what the changed object holds that is not explomemo's."""
    before = _read(path)
    data = _json_object(path, before)
    change(data)
    after = _surrogates_escaped(json.dumps(data, indent=_indent(before), ensure_ascii=False))
    after += "\n"
    if before is not None and json.loads(after) == _json_object(path, before):
        after = before
    return FileChange(path, before, after, foreign(data) if foreign is not None else [])


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


def _set_server(servers: dict[str, Any], entry: dict[str, Any], where: str) -> list[str]:
    """Set explomemo's entry in ``servers`` (see :func:`own_server`); what it removed."""
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict):
        return own_server(current, entry, where)
    servers[SERVER_NAME] = entry
    return []


def own_server(current: dict[str, Any], wanted: dict[str, Any], where: str) -> list[str]:
    """Make ``current``, explomemo's server entry in ``where``, the server ``wanted``;
    returns what was removed, one line each.

    setup writes what the entry runs: the command and its arguments, its environment
    (the user's own ``EXPLOMEMO_*`` switches stay; every other variable goes, and so do
    :data:`DROPPED_VARIABLES`, which name a model to load) and its
    folder (a ``cwd`` goes, and so does an ``envFile``: see :data:`DROPPED_KEYS`).
    The user's other keys (a ``timeout``, a comment) stay.
    """
    removed = []
    for key in DROPPED_KEYS:
        if key in current:
            del current[key]
            removed.append(f"{key} from explomemo's server entry in {where}")
    env = current.get("env")
    if isinstance(env, dict):
        dropped = [n for n in env if not n.startswith(OWN_VARIABLES) or n in DROPPED_VARIABLES]
        for name in dropped:
            del env[name]
            removed.append(f"the variable {name} from explomemo's server entry in {where}")
    merge_into(current, wanted)
    return removed


def merge_into(current: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Set ``wanted``'s keys in ``current``, merging nested tables key by key.

    The keys ``wanted`` does not name (a ``timeout``, a TOML comment, an ``env``
    variable) stay; a key already holding the wanted value is not assigned again,
    so a TOML table keeps its layout.
    """
    for key, value in wanted.items():
        mine = current.get(key)
        if isinstance(value, dict) and isinstance(mine, dict):
            merge_into(mine, value)
        elif mine != value:
            current[key] = value


# Claude Code ------------------------------------------------------------------


def _add_hooks(
    target: Target, settings: dict[str, Any], path: Path, earlier: Mapping[str, list[str]]
) -> tuple[list[HookChoice], list[str]]:
    """Add (or update) explomemo's hooks (:data:`CLAUDE_HOOKS`) in the settings object of
    ``path``.

    A hook's choices not given to this setup stay as its command in ``path`` had them,
    else as ``earlier`` (the words of its command elsewhere, by hook name) had them; a
    hook no earlier setup wrote (one a release added) takes them from the other hooks of
    the same choice (``--no-capture`` on the Stop hook gives it to the SubagentStop hook);
    returns the choices so kept, and the events of the hooks added beside those an earlier
    setup wrote."""
    hooks = _table(settings, "hooks", path)
    mine: dict[str, dict[str, Any]] = {}
    words: dict[str, list[str]] = {}
    for event, _, name, _ in CLAUDE_HOOKS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SetupError(f"hooks.{event} in {path} is not a list: fix it; it was left as is")
        found = next((e for g in _groups_entries(groups) for e in g[1] if _is_own(e, name)), None)
        if found is not None:
            mine[name] = found
            words[name] = _command_words(found)
        elif name in earlier:
            words[name] = earlier[name]
    kept = []
    added = []
    for event, matcher, name, timeout in CLAUDE_HOOKS:
        before = words[name] if name in words else _sibling_flags(name, words)
        if name not in words and words:
            added.append(event)
        kept += target.kept(name, before)
        command = target.hook_command(name, before)
        wanted = {"type": "command", "command": command, "timeout": timeout}
        if name in mine:
            mine[name].update(wanted)
            continue
        group: dict[str, Any] = {"hooks": [wanted]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        hooks[event].append(group)
    return kept, added


def _sibling_flags(name: str, words: Mapping[str, list[str]]) -> list[str]:
    """The flags of hook ``name``'s choices that another hook of the same choice has in
    ``words`` (the words of each hook's command, by hook name)."""
    return [
        choice.flag
        for choice in HOOK_CHOICES
        if choice.hook == name
        and any(
            other.name == choice.name and other.flag in words.get(other.hook, [])
            for other in HOOK_CHOICES
        )
    ]


def _own_hooks(settings: dict[str, Any]) -> dict[str, list[str]]:
    """The words of the command of each of explomemo's hooks in a settings object, by
    hook name."""
    hooks = settings.get("hooks")
    found: dict[str, list[str]] = {}
    if not isinstance(hooks, dict):
        return found
    for event, _, name, _ in CLAUDE_HOOKS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        for _, entries in _groups_entries(groups):
            for entry in entries:
                if _is_own(entry, name):
                    found.setdefault(name, _command_words(entry))
    return found


def _foreign_settings(settings: dict[str, Any]) -> list[str]:
    """What a Claude Code settings object holds that may run or allow something and is
    not explomemo's: other hooks, permissions, approved servers, variables."""
    found = []
    hooks = settings.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                if not any(_is_own(entry, name) for _, _, name, _ in CLAUDE_HOOKS):
                    found.append(f"the {event} hook {_hook_text(entry)}")
    permissions = settings.get("permissions")
    if isinstance(permissions, dict):
        for key in ("allow", "additionalDirectories"):
            listed = permissions.get(key)
            for value in listed if isinstance(listed, list) else ():
                found.append(f"permissions.{key} {json.dumps(value, ensure_ascii=False)}")
        mode = permissions.get("defaultMode")
        if mode is not None and mode != "default":
            found.append(f"permissions.defaultMode {json.dumps(mode, ensure_ascii=False)}")
    if settings.get("enableAllProjectMcpServers") is True:
        found.append("enableAllProjectMcpServers true (every server of .mcp.json approved)")
    approved = settings.get("enabledMcpjsonServers")
    for name in approved if isinstance(approved, list) else ():
        if name != SERVER_NAME:
            found.append(f"the approved server {json.dumps(name, ensure_ascii=False)}")
    env = settings.get("env")
    for name in env if isinstance(env, dict) else ():
        found.append(f"the variable {name} (set for Claude Code and every hook)")
    return found


def _hook_text(entry: Any) -> str:
    """A hook entry in a few words: its command, else the entry itself."""
    command = entry.get("command") if isinstance(entry, dict) else None
    shown = command if isinstance(command, str) else json.dumps(entry, ensure_ascii=False)
    return repr(shown if len(shown) <= 200 else shown[:199] + "…")


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
    argv = _command_words(entry)
    if argv and os.path.basename(argv[0]) == SERVER_NAME:
        rest = argv[1:]
    elif argv[1:3] == ["-m", SERVER_NAME]:
        rest = argv[3:]
    else:
        return False
    if rest[:1] == ["--db"]:
        rest = rest[2:]
    return rest[:2] == ["hook", name]


def _command_words(entry: Any) -> list[str]:
    """The words of a hook entry's command; none when it has no command a shell can split."""
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, str):
        return []
    try:
        return shlex.split(command)
    except ValueError:
        return []


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
    plan = Plan()
    earlier: dict[str, list[str]] = {}

    def shared_settings(settings: dict[str, Any]) -> None:
        earlier.update(_own_hooks(settings))
        _drop_hooks(settings)

    shared = _merge_json(
        config_path(folder, ".claude", "settings.json"), shared_settings, _foreign_settings
    )

    def local_settings(settings: dict[str, Any]) -> None:
        kept, added = _add_hooks(target, settings, local, earlier)
        if added:
            plan.notes.append(
                f"Added the {', '.join(added)} hook{'' if len(added) == 1 else 's'} beside"
                " those an earlier setup wrote ("
                + "; ".join(f"{e}: {HOOKS_ADDED[e]}" if e in HOOKS_ADDED else e for e in added)
                + ")."
            )
        for choice in kept:
            event = next(event for event, _, name, _ in CLAUDE_HOOKS if name == choice.hook)
            plan.notes.append(
                f"The {event} hook keeps {choice.flag} from the earlier setup: setup"
                f" claude-code {choice.undo} takes it away."
            )
        if claude is None:
            approved = settings.setdefault("enabledMcpjsonServers", [])
            if not isinstance(approved, list):
                raise SetupError(
                    f"enabledMcpjsonServers in {local} is not a list: fix it; it was left as it is"
                )
            if SERVER_NAME not in approved:
                approved.append(SERVER_NAME)

    def add_server(config: dict[str, Any]) -> None:
        servers = _table(config, "mcpServers", mcp_json)
        plan.removed += _set_server(servers, {"type": "stdio", **server}, str(mcp_json))

    plan.files.append(_merge_json(local, local_settings, _foreign_settings))
    if shared.before is not None:
        plan.files.append(shared)
    if claude is not None:
        current = _claude_local_server(folder)
        wanted = copy.deepcopy(current) if current is not None else {}
        where = f"Claude Code's local scope for {folder}"
        plan.removed += own_server(wanted, {"type": "stdio", **server}, where)
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
    plan = Plan(notes=["Cursor lists it under Settings > MCP; switch it on there if it is off."])

    def add_server(config: dict[str, Any]) -> None:
        plan.removed += _set_server(_table(config, "mcpServers", path), target.server(), str(path))

    plan.files.append(_merge_json(path, add_server))
    return plan


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
    removed = []
    if isinstance(current, dict):
        removed = own_server(current, wanted, str(path))
    else:
        entry = tomlkit.table()
        entry.update(wanted)
        servers[SERVER_NAME] = entry
    return Plan(
        files=[FileChange(path, before, tomlkit.dumps(document))],
        notes=["Codex reads a project's .codex/config.toml once the project is trusted."],
        removed=removed,
    )


PLANNERS: dict[str, Callable[[Target], Plan]] = {
    "claude-code": plan_claude_code,
    "cursor": plan_cursor,
    "codex": plan_codex,
}
