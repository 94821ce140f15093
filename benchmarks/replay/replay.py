"""Replay public Claude Code sessions through explomemo's real hooks (issue #38).

Per codebase (see :mod:`sources`), one database and one simulated project folder per
developer (the user folder of the session's ``cwd`` tells them apart), sessions in time
order. For each session:

* ``explomemo hook session-start``;
* for each typed prompt: ``explomemo hook prompt``; then, when the prompt is shaped as
  a question (:func:`question_shaped`, a rule of this benchmark, not explomemo's), the
  call an agent that follows the server's advice makes before exploring:
  ``explomemo recall --json``;
* for each delegated run (a ``Task`` or ``Agent`` call) in the turn: ``explomemo hook
  delegate`` before it (what it decided is recorded; the session goes on as it went) and
  ``explomemo hook subagent-stop`` at its end, on the run's own messages (the main
  transcript's ``agent_progress`` entries) written as Claude Code writes a subagent's
  transcript (:func:`run_transcript`);
* the turn's file changes applied to the simulated folder (each file as its Reads
  returned it, each Edit, MultiEdit and Write applied, the subagents' too), then
  ``explomemo hook stop`` with the session's real transcript entries up to the end of
  that turn (paths moved to the simulated folder) as ``transcript_path``.

At the end: ``explomemo stats --json`` and ``explomemo list --json`` per database.
Every call runs in this process through ``explomemo.cli.main.main(argv)`` with
standard input and output swapped, and every byte each one printed is kept in the
run's log (``.cache/runs/…``, with the transcripts' text: never committed).

The environment of every call: ``EXPLOMEMO_DB`` of the developer's database, ``HOME``
a temporary folder, ``EXPLOMEMO_REMIND`` unset (the default: no reminder), ``--project``
the codebase's name.

    .venv/bin/python benchmarks/replay/replay.py [--codebase NAME ...] [--sessions N]
        [--name RUN]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sources import CACHE, CODEBASES, Codebase, load_index, load_session  # noqa: E402

#: Where the simulated folders are made: the same path in every run. Memos hold it (a
#: delegated prompt names files by their path), and a random one made two runs of the
#: same code match differently.
WORK = Path(tempfile.gettempdir()) / "explomemo-replay"
#: Prompts that are not typed by the user: shell input and output, command caveats.
_NOT_TYPED = (
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<local-command",
    "<task-notification>",
    "[Request interrupted",
)
#: What an app (Conductor) puts before what the user typed.
_PREAMBLE = re.compile(r"^\s*<system_instruction>.*?</system_instruction>\s*", re.DOTALL)
#: The question shape of this benchmark: a question mark, or a question word first.
_QUESTION_WORDS = re.compile(
    r"^(?:q:\s*)?(?:what|why|how|where|when|which|who|whose|is|are|does|do|did|can|could|"
    r"should|would|will|explain|show me|find|tell me|walk me|describe)\b",
    re.IGNORECASE,
)
MAX_QUESTION_CHARS = 2000


def prompt_text(entry: dict[str, Any]) -> str | None:
    """The text of a user entry that starts a turn (as Claude Code's Stop hook sees
    turns: not a tool result, not meta); None for any other entry."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain"):
        return None
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return None


def typed(text: str) -> bool:
    """Whether a prompt is one the user submitted (what UserPromptSubmit fires for)."""
    return bool(text.strip()) and not text.lstrip().startswith(_NOT_TYPED)


def question_shaped(text: str) -> bool:
    """Whether an agent asked to recall before exploring would take the prompt for a
    question: typed, not a slash command, under 2,000 characters, with a question mark
    or a question word first."""
    stripped = _PREAMBLE.sub("", text).strip()
    if (
        not typed(stripped)
        or stripped.startswith("<command-")
        or len(stripped) > MAX_QUESTION_CHARS
    ):
        return False
    return "?" in stripped or _QUESTION_WORDS.match(stripped) is not None


def turns(entries: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(first, end) indices of each turn: from a prompt to the next one."""
    starts = [i for i, e in enumerate(entries) if prompt_text(e) is not None]
    return [
        (s, starts[k + 1] if k + 1 < len(starts) else len(entries)) for k, s in enumerate(starts)
    ]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent that is a module, not a package
        return False


#: Whether the release replayed has the hooks of delegated runs (the release the issue
#: measured has neither: its runs still feed the simulated folder, as its files were).
DELEGATION_HOOKS = _has_module("explomemo.clients.hooks.delegate")
#: The tools that delegate a run to a subagent.
DELEGATING = ("Task", "Agent")
#: Lines a Read gives when called with no offset nor limit: fewer, and it gave the whole file.
READ_DEFAULT_LINES = 2000
#: A background run's first result.
_LAUNCHED = "Async agent launched"
#: What Claude Code puts after a run's report in the result: not the report.
_TRAILER = re.compile(r"^agentId: \w+")


def agent_message(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The subagent's own message (``{type, message, uuid, timestamp}``) a main transcript's
    ``agent_progress`` entry carries, or None."""
    data = entry.get("data")
    if entry.get("type") != "progress" or not isinstance(data, dict):
        return None
    message = data.get("message")
    if data.get("type") != "agent_progress" or not isinstance(message, dict):
        return None
    return message if isinstance(message.get("message"), dict) else None


def text_of(content: Any) -> str:
    """The text of a message's or tool result's content (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def as_result(tool: str, given: dict[str, Any], content: Any) -> dict[str, Any]:
    """A subagent's tool result as the main transcript's ``toolUseResult`` would hold it:
    for a Read, the lines off the numbered text its model was given, the whole file when it
    was called with no offset nor limit and gave fewer than :data:`READ_DEFAULT_LINES`
    lines; for an Edit or Write, nothing (the version before is the folder's)."""
    if tool != "Read":
        return {}
    lines, start = numbered_lines(text_of(content))
    if not lines:
        return {}
    whole = "offset" not in given and "limit" not in given and len(lines) < READ_DEFAULT_LINES
    file = {"content": "\n".join(lines), "startLine": start}
    return {"file": {**file, "totalLines": len(lines)} if whole else file}


#: A line of a Read result as the model is given it: its number, a tab (an arrow in
#: older releases), the line.
NUMBERED = re.compile(r" *(\d+)(?:\t|\u2192)")


def numbered_lines(text: str) -> tuple[list[str], int]:
    """The file's lines of a Read result's text (``N<tab>line``, numbered on from the
    first; a reminder after the last is not the file's), and the first one's number. The
    benchmark's own reader, as explomemo's (``numbered_results``) reads them: the simulated
    folder must be the same whichever release is replayed."""
    lines: list[str] = []
    start = 1
    for line in text.split("\n"):
        number = NUMBERED.match(line)
        if number is None or (lines and int(number.group(1)) != start + len(lines)):
            break
        if not lines:
            start = int(number.group(1))
        lines.append(line[number.end() :])
    return lines, start


class Delegation:
    """One delegated run of a session: the main agent's call, the subagent's own messages
    (its ``agent_progress`` entries), and where in the session it starts and ends."""

    def __init__(self, ident: str, tool: str, given: dict[str, Any], at: int) -> None:
        self.id, self.tool, self.input, self.at = ident, tool, given, at
        #: The subagent's messages in order, and the index of the last one's entry.
        self.messages: list[dict[str, Any]] = []
        self.last_message_at: int | None = None
        self.agent_id: str | None = None
        #: The index of the entry holding the call's result, and its text.
        self.result_at: int | None = None
        self.result = ""

    @property
    def background(self) -> bool:
        return bool(self.input.get("run_in_background")) or self.result.startswith(_LAUNCHED)

    @property
    def end(self) -> int | None:
        """Where the run's end is replayed: after its result's entry; for a background run
        (whose result only says it started), after its last message; None: not replayed."""
        if not self.messages:
            return None
        if self.background:
            return None if self.last_message_at is None else self.last_message_at + 1
        return None if self.result_at is None else self.result_at + 1

    @property
    def report(self) -> str:
        """The run's last message (what Claude Code gives SubagentStop), else the report
        its result holds."""
        for message in reversed(self.messages):
            if message.get("type") == "assistant":
                text = text_of(message["message"].get("content")).strip()
                if text:
                    return text
        return "\n".join(
            line for line in self.result.split("\n\n") if not _TRAILER.match(line)
        ).strip()


def delegations(entries: list[dict[str, Any]]) -> list[Delegation]:
    """The session's delegated runs, in the order of their calls."""
    found: dict[str, Delegation] = {}
    seen: set[Any] = set()
    for index, entry in enumerate(entries):
        message = agent_message(entry)
        if message is not None:
            run = found.get(str(entry.get("parentToolUseID")))
            if run is not None and message.get("uuid") not in seen:
                seen.add(message.get("uuid"))
                run.messages.append(message)
                run.last_message_at = index
                run.agent_id = run.agent_id or (entry.get("data") or {}).get("agentId")
            continue
        content = (entry.get("message") or {}).get("content")
        if not isinstance(content, list) or entry.get("isSidechain"):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if (
                entry.get("type") == "assistant"
                and block.get("type") == "tool_use"
                and block.get("name") in DELEGATING
                and isinstance(block.get("input"), dict)
            ):
                ident = str(block.get("id"))
                found[ident] = Delegation(ident, block["name"], block["input"], index)
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in found:
                run = found[block["tool_use_id"]]
                if run.result_at is None:
                    run.result_at = index
                    run.result = text_of(block.get("content"))
    return list(found.values())


def run_transcript(run: Delegation, sid: str, cwd: str, root: str) -> str:
    """The subagent's transcript as Claude Code writes it (every entry a sidechain one, the
    first the delegated prompt with no parent, each later one's parent the one before),
    paths moved to the simulated folder."""
    base = {"isSidechain": True, "userType": "external", "cwd": cwd, "sessionId": sid}
    base["agentId"] = run.agent_id
    messages = list(run.messages)
    first = messages[0] if messages else {"message": {}}
    content = first["message"].get("content")
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    if first.get("type") != "user" or (isinstance(content, list) and results):
        prompt = {"role": "user", "content": str(run.input.get("prompt", ""))}
        messages.insert(
            0,
            {
                "type": "user",
                "message": prompt,
                "uuid": f"prompt-{run.id}",
                "timestamp": first.get("timestamp"),
            },
        )
    lines, parent = [], None
    for message in messages:
        entry = {
            "parentUuid": parent,
            **base,
            "type": message.get("type"),
            "message": message["message"],
            "uuid": message.get("uuid"),
            "timestamp": message.get("timestamp"),
        }
        lines.append(moved(entry, cwd, root))
        parent = message.get("uuid")
    return "\n".join(lines) + "\n"


def decision(stdout: bytes, prompt: str) -> tuple[str, list[int], int]:
    """What the delegate hook decided, from its output for a call delegating ``prompt``:
    answered (denied, the memo as the run's result), check (a stale memo to check), head
    start, or untouched; the memos it brought; and the bytes it brought (the reason that
    stands in for the run's report, or what it added to the prompt)."""
    try:
        answer = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        return "unreadable", [], 0
    out = answer.get("hookSpecificOutput") or {}
    if out.get("permissionDecision") == "deny":
        reason = str(out.get("permissionDecisionReason", ""))
        memos = [int(n) for n in re.findall(r"delegation from memo (\d+)", reason)]
        return "answered", memos, len(reason.encode())
    extended = str((out.get("updatedInput") or {}).get("prompt", ""))
    if not extended:
        return "untouched", [], 0
    from explomemo.clients.hooks.delegate import checked_memo, handed_memos

    added = len(extended.encode()) - len(prompt.encode())
    checked = checked_memo(extended)
    if checked is not None:
        return "check", [checked], added
    return "head start", handed_memos(extended), added


def cuts(points: dict[int, Any], first: int, end: int) -> list[int]:
    """The points of a turn ``first``..``end`` where a hook runs inside it, then its end."""
    return [*sorted(p for p in points if first < p < end), end]


class Folder:
    """The simulated project folder: each file as the session's Reads returned it, with
    its Edits and Writes applied.

    A Read returns part of a file; the lines it did not return are unknown, and filling
    them in later must not look like a change (the real file did not change). So the
    sessions are gone through twice. The first pass (:meth:`apply`) cuts each file's life
    into versions: a new version starts at each Edit, MultiEdit or Write, and when a Read
    returns a line that differs from what a Read or change of the same version gave (the
    file changed outside the sessions: another developer's commit, a branch switch; such a
    version starts with only what that Read returned); every line any Read returned in a
    version is that version's. The second pass
    (:meth:`write`) puts each file on disk as the whole version it is at, at the end of
    each turn. Lines no Read returned in the version are empty."""

    def __init__(self, root: Path) -> None:
        self.root = root
        #: Each version's lines (None: unknown), by version number.
        self.versions: list[list[str | None]] = []
        #: The current version of each file (relative path).
        self.current: dict[str, int] = {}
        #: Version numbers each file reached, in order: (rel, version, why).
        self.log: list[tuple[str, int, str]] = []
        self.on_disk: dict[str, str] = {}
        #: Each tool call seen by id: (tool, input).
        self.inputs: dict[str, tuple[str, dict[str, Any]]] = {}

    @staticmethod
    def relative(path: object, cwd: str) -> str | None:
        """``path`` relative to the session's folder, when inside it."""
        if not isinstance(path, str) or not path.startswith(cwd.rstrip("/") + "/"):
            return None
        rel = path[len(cwd.rstrip("/")) + 1 :]
        if not rel or rel.startswith(("../", ".git/")) or "/../" in rel or "/./" in rel:
            return None
        return rel

    def _new(self, rel: str, lines: list[str | None], why: str) -> list[str | None]:
        self.versions.append(lines)
        self.current[rel] = len(self.versions) - 1
        self.log.append((rel, len(self.versions) - 1, why))
        return lines

    def apply(self, entries: list[dict[str, Any]], cwd: str) -> list[str]:
        """First pass over a part of one turn's ``entries`` (a subagent's messages
        included: :func:`agent_message`): the files whose version it moved. A call's
        result may come in a later part than the call (a Read made beside a delegation)."""
        touched: list[str] = []
        for outer in entries:
            entry = agent_message(outer) or outer
            content = (entry.get("message") or {}).get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                    self.inputs[str(block.get("id"))] = (str(block.get("name")), block["input"])
                if block.get("type") == "tool_result" and not block.get("is_error"):
                    call = self.inputs.get(str(block.get("tool_use_id")))
                    if call is None:
                        continue
                    result = entry.get("toolUseResult")
                    if not isinstance(result, dict):
                        # A subagent's message mostly keeps no toolUseResult: what its
                        # model was given stands in.
                        result = as_result(call[0], call[1], block.get("content"))
                    rel = self._result(call[0], call[1], result, cwd)
                    if rel is not None and rel not in touched:
                        touched.append(rel)
        return touched

    def _seen(self, rel: str, start: int, returned: list[str], total: Any) -> None:
        """A Read (or an Edit's whole file before it) returned ``returned`` from line
        ``start``: in the current version, or a new one when it differs.

        A file is held as its text split at line breaks, so a file that ends with one has
        an empty last line, as Claude Code counts ``totalLines``; a part of a file that a
        Read returned with a line break at its end does not end in an empty line."""
        if isinstance(total, int):
            room = max(total - (start - 1), 0)
            if len(returned) > room or (returned and returned[-1] == "" and len(returned) < room):
                returned = returned[: min(room, len(returned) - (returned[-1] == ""))]
        at = self.current.get(rel)
        known = self.versions[at] if at is not None else None
        differs = known is None or (isinstance(total, int) and len(known) != total)
        if known is not None and not differs:
            for offset, line in enumerate(returned):
                index = start - 1 + offset
                if index < len(known) and known[index] is not None and known[index] != line:
                    differs = True
                    break
        if differs:
            # What changed outside is unknown beyond this Read: lines of the version before
            # are not carried over, or a later Read of another part of the same file (in a
            # state it really had) would disagree with them and make a version that never
            # existed.
            known = self._new(rel, [], "outside" if at is not None else "first read")
        assert known is not None
        if isinstance(total, int):
            known[total:] = []
            known.extend([None] * (total - len(known)))
        end = start - 1 + len(returned)
        if len(known) < end:
            known.extend([None] * (end - len(known)))
        known[start - 1 : end] = returned

    def _result(self, tool: str, given: dict[str, Any], result: Any, cwd: str) -> str | None:
        rel = self.relative(given.get("file_path"), cwd)
        if rel is None or not isinstance(result, dict):
            return None
        if tool == "Read":
            file = result.get("file")
            if not isinstance(file, dict) or not isinstance(file.get("content"), str):
                return None
            start = file.get("startLine") if isinstance(file.get("startLine"), int) else 1
            self._seen(rel, start, file["content"].split("\n"), file.get("totalLines"))
        elif tool == "Write" and isinstance(given.get("content"), str):
            self._new(rel, list(given["content"].split("\n")), "write")
        elif tool in ("Edit", "MultiEdit"):
            original = result.get("originalFile")
            if isinstance(original, str):
                lines = original.split("\n")
                self._seen(rel, 1, lines, len(lines))
                text = original
            else:
                at = self.current.get(rel)
                text = "\n".join(x or "" for x in self.versions[at]) if at is not None else ""
            edits = given.get("edits") if tool == "MultiEdit" else [given]
            for edit in edits if isinstance(edits, list) else []:
                old, new = edit.get("old_string"), edit.get("new_string")
                if isinstance(old, str) and isinstance(new, str):
                    count = -1 if edit.get("replace_all") else 1
                    text = text.replace(old, new, count)
            self._new(rel, list(text.split("\n")), "edit")
        else:
            return None
        return rel

    def write(self, rel: str, version: int) -> None:
        """Second pass: put ``rel`` on disk as the whole ``version``."""
        data = "\n".join(line or "" for line in self.versions[version])
        if self.on_disk.get(rel) == data:
            return
        target = self.root / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or (target.exists() and not target.is_file()):
                return
            target.write_text(data, encoding="utf-8")
            self.on_disk[rel] = data
        except (OSError, UnicodeEncodeError):
            return


@contextlib.contextmanager
def work_folder(codebase: Codebase) -> Iterator[Path]:
    """The codebase's folder under :data:`WORK`, empty, for one run at a time (another
    run of the same codebase waits), removed at the end."""
    WORK.mkdir(exist_ok=True)
    with open(WORK / f"{codebase.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{codebase.name}: waiting for another replay of it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        folder = WORK / codebase.name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def _model() -> Any:
    from explomemo.recall.embeddings import load_embedder

    return load_embedder()


def call(argv: Sequence[str], stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """Run ``explomemo ARGV`` in this process: (exit code, stdout, stderr)."""
    from explomemo.cli import main as cli

    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        code = cli.main(list(argv))
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue(), err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def moved(entry: dict[str, Any], cwd: str, root: str) -> str:
    """The entry as a JSON line, with the session's folder replaced by the simulated one."""
    return json.dumps(entry, ensure_ascii=False).replace(cwd.rstrip("/"), root)


def replay_database(
    codebase: Codebase, developer: str, listed: list[dict[str, Any]], work: Path, log: Any
) -> dict[str, Any]:
    """Replay one developer's sessions on their own database; the totals."""
    root = work / f"root-{developer}"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "-c",
            "user.name=replay",
            "-c",
            "user.email=replay@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "replay",
        ],
        check=True,
    )
    db = work / f"{developer}.db"
    os.environ["EXPLOMEMO_DB"] = str(db)
    os.chdir(root)  # Claude Code runs its hooks in the project folder
    folder = Folder(root)
    project = ["--project", codebase.name]

    def record(
        kind: str, session: str, at: str | None, code: int, out: bytes, err: bytes, **more: Any
    ) -> None:
        log.write(
            json.dumps(
                {
                    "event": kind,
                    "codebase": codebase.name,
                    "developer": developer,
                    "session": session,
                    "prompt": at,
                    "exit": code,
                    "stdout_bytes": len(out),
                    "stderr_bytes": len(err),
                    "stdout": out.decode("utf-8", "replace"),
                    "stderr": err.decode("utf-8", "replace"),
                    **more,
                },
                ensure_ascii=False,
            )
            + "\n"
        )

    subagent_memos: set[int] = set()

    def about(run: Delegation) -> dict[str, Any]:
        """What the log says of a run at each of its events."""
        return {
            "delegation": run.id,
            "subagent_type": run.input.get("subagent_type"),
            "background": run.background,
        }

    def delegate(run: Delegation, base: dict[str, Any], at: str | None, cwd: str) -> None:
        """``hook delegate`` before the run, as Claude Code calls it (PreToolUse on
        Agent|Task); what it decided is recorded, the session goes on as it went."""
        if not DELEGATION_HOOKS:
            return
        given = json.loads(moved(run.input, cwd, str(root)))
        payload = {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": run.tool,
            "tool_input": given,
            "tool_use_id": run.id,
        }
        code, out, err = call(["hook", "delegate", *project], json.dumps(payload).encode())
        kind, memos, brought = decision(out, str(given.get("prompt", "")))
        record(
            "delegate",
            base["session_id"],
            at,
            code,
            out,
            err,
            **about(run),
            decision=kind,
            memos=memos,
            brought_bytes=brought,
        )

    def subagent_stop(run: Delegation, base: dict[str, Any], at: str | None, cwd: str) -> None:
        """``hook subagent-stop`` at the run's end, on its transcript as Claude Code writes
        it; the memo it captured, if any."""
        if not DELEGATION_HOOKS:
            return
        path = work / f"agent-{run.id}.jsonl"
        path.write_text(run_transcript(run, base["session_id"], cwd, str(root)), "utf-8")
        payload = {
            **base,
            "hook_event_name": "SubagentStop",
            "stop_hook_active": False,
            "agent_id": run.agent_id or run.id,
            "agent_type": run.input.get("subagent_type") or "general-purpose",
            "agent_transcript_path": str(path),
            "last_assistant_message": run.report.replace(cwd.rstrip("/"), str(root)),
        }
        code, out, err = call(["hook", "subagent-stop", *project], json.dumps(payload).encode())
        path.unlink()
        listed_code, listed_out, _ = call(["list", "--json", "--origin", "subagent", *project])
        now = {m["id"] for m in json.loads(listed_out)} if listed_code == 0 else set()
        new = sorted(now - subagent_memos)
        subagent_memos.update(now)
        record(
            "subagent_stop",
            base["session_id"],
            at,
            code,
            out,
            err,
            **about(run),
            messages=len(run.messages),
            memo=new[0] if new else None,
        )

    sessions = [(meta, load_session(codebase, meta["id"])) for meta in listed]
    runs: dict[str, list[Delegation]] = {}
    copies: dict[str, list[Delegation]] = {}
    played: set[str] = set()
    for meta, entries in sessions:
        # A resumed session repeats the runs of the one it resumed: played once, at first.
        found = delegations(entries)
        runs[meta["id"]] = [run for run in found if run.id not in played]
        copies[meta["id"]] = [run for run in found if run.id in played]
        played.update(run.id for run in found)
    # Where in each session a hook runs inside a turn: before a delegated run (after the
    # entry of its call) and at its end.
    hooks_at: dict[str, dict[int, list[tuple[str, Delegation]]]] = {}
    for meta, _ in sessions:
        at = hooks_at[meta["id"]] = {}
        for run in runs[meta["id"]]:
            at.setdefault(run.at + 1, []).append(("delegate", run))
            if run.end is not None:
                at.setdefault(run.end, []).append(("subagent_stop", run))
    # First pass: the file versions at each point a hook runs, from the turn's first entry
    # to its end, cut where a delegated run starts and ends.
    at_point: dict[tuple[str, int], list[tuple[str, int]]] = {}
    at_end: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for meta, entries in sessions:
        for first, end in turns(entries):
            whole: dict[str, int] = {}
            start = first
            for point in cuts(hooks_at[meta["id"]], first, end):
                touched = folder.apply(entries[start:point], meta["cwd"])
                at_point[meta["id"], point] = [(rel, folder.current[rel]) for rel in touched]
                whole.update(at_point[meta["id"], point])
                start = point
            at_end[meta["id"], first] = list(whole.items())
        spans = turns(entries)
        for run in runs[meta["id"]] + copies[meta["id"]]:
            why = None
            if run in copies[meta["id"]]:
                why = "a copy in a resumed session"
            elif not any(first < run.at + 1 <= end for first, end in spans):
                why = "outside a turn"
            elif not run.messages:
                why = (
                    "background run, no subagent messages"
                    if run.background
                    else "no subagent messages"
                )
            elif run.end is None:
                why = "no result"
            if why is not None:
                log.write(
                    json.dumps(
                        {
                            "event": "subagent_skipped",
                            "codebase": codebase.name,
                            "developer": developer,
                            "session": meta["id"],
                            "delegation": run.id,
                            "background": run.background,
                            "why": why,
                        }
                    )
                    + "\n"
                )
    for rel, version, why in folder.log:
        log.write(
            json.dumps(
                {
                    "event": "version",
                    "codebase": codebase.name,
                    "developer": developer,
                    "file": rel,
                    "version": version,
                    "why": why,
                }
            )
            + "\n"
        )
    for meta, entries in sessions:
        sid, cwd = meta["id"], meta["cwd"]
        transcript = work / f"{sid}.jsonl"
        base = {"session_id": sid, "transcript_path": str(transcript), "cwd": str(root)}
        transcript.write_text("", encoding="utf-8")
        payload = {**base, "hook_event_name": "SessionStart", "source": "startup"}
        record(
            "session-start",
            sid,
            None,
            *call(["hook", "session-start", *project], json.dumps(payload).encode()),
        )
        for first, end in turns(entries):
            text = prompt_text(entries[first]) or ""
            uuid = entries[first].get("uuid")
            with open(transcript, "a", encoding="utf-8") as out:
                out.write(moved(entries[first], cwd, str(root)) + "\n")
            if typed(text):
                payload = {
                    **base,
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": text.replace(cwd.rstrip("/"), str(root)),
                }
                record(
                    "prompt",
                    sid,
                    uuid,
                    *call(["hook", "prompt", *project], json.dumps(payload).encode()),
                )
                if question_shaped(text):
                    record(
                        "recall",
                        sid,
                        uuid,
                        *call(["recall", "--json", *project, "--root", str(root), text]),
                    )
            written = first + 1
            for point in cuts(hooks_at[sid], first, end):
                for rel, version in at_point[sid, point]:
                    folder.write(rel, version)
                with open(transcript, "a", encoding="utf-8") as out:
                    for entry in entries[written:point]:
                        out.write(moved(entry, cwd, str(root)) + "\n")
                written = point
                for kind, run in hooks_at[sid].get(point, []):
                    if kind == "delegate":
                        delegate(run, base, uuid, cwd)
                    else:
                        subagent_stop(run, base, uuid, cwd)
            if typed(text):
                payload = {**base, "hook_event_name": "Stop", "stop_hook_active": False}
                record(
                    "stop",
                    sid,
                    uuid,
                    *call(["hook", "stop", *project], json.dumps(payload).encode()),
                    files=at_end[sid, first],
                )
        transcript.unlink()
    totals: dict[str, Any] = {}
    if db.exists():
        code, out, err = call(["stats", "--json", *project])
        totals["stats"] = json.loads(out) if code == 0 else err.decode()
        code, out, err = call(["list", "--json", *project])
        memos = json.loads(out) if code == 0 else err.decode()
        code, out, _ = call(["stale", "--format", "json", *project, "--root", str(root)])
        totals["memos"] = memos
        totals["stale"] = json.loads(out) if out.strip() else None
    log.write(
        json.dumps(
            {"event": "end", "codebase": codebase.name, "developer": developer, **totals},
            ensure_ascii=False,
        )
        + "\n"
    )
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--codebase", action="append", choices=[c.name for c in CODEBASES])
    parser.add_argument(
        "--sessions", type=int, help="only the first N sessions of each codebase (a dev run)"
    )
    parser.add_argument("--name", default="run", help="the run's folder under .cache/runs/")
    args = parser.parse_args()
    out_dir = CACHE / "runs" / args.name
    out_dir.mkdir(parents=True, exist_ok=True)
    home = tempfile.mkdtemp(prefix="replay-home-")
    os.environ["HOME"] = home
    os.environ.pop("EXPLOMEMO_REMIND", None)
    for name in ("EXPLOMEMO_PROJECT", "EXPLOMEMO_CAPTURE"):
        os.environ.pop(name, None)
    import explomemo
    from explomemo.cli import main as cli

    package = Path(explomemo.__file__).resolve().parent
    head = subprocess.run(
        ["git", "-C", str(package), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"explomemo {explomemo.__version__} from {package} (git {head or '?'})", flush=True)
    cli._load_model = lambda: _model()  # type: ignore[attr-defined]  # load once, not per call
    if DELEGATION_HOOKS:
        from explomemo.recall import delegations as matching

        matching.shipped_embedder = lambda: _model()  # the delegate hook's model, loaded once
    for codebase in CODEBASES:
        if args.codebase and codebase.name not in args.codebase:
            continue
        listed = load_index(codebase)
        if args.sessions:
            listed = listed[: args.sessions]
        by_dev: dict[str, list[dict[str, Any]]] = {}
        for meta in listed:
            by_dev.setdefault(meta["developer"], []).append(meta)
        started = time.monotonic()
        with (
            work_folder(codebase) as work,
            open(out_dir / f"{codebase.name}.jsonl", "w", encoding="utf-8") as log,
        ):
            for developer, metas in by_dev.items():
                replay_database(codebase, developer, metas, work, log)
        print(
            f"{codebase.name}: {len(listed)} sessions in {time.monotonic() - started:.0f} s",
            flush=True,
        )
    if not args.sessions:
        from figures import analyse, markdown

        found = [analyse(codebase, out_dir, []) for codebase in CODEBASES]
        figures = json.dumps([f for f in found if f], indent=1)
        (out_dir / "figures.json").write_text(figures, encoding="utf-8")
        print(markdown([args.name]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
