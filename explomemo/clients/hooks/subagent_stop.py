"""The SubagentStop hook: a delegated run that explored and changed nothing becomes a memo.

``explomemo hook subagent-stop`` reads Claude Code's SubagentStop input (``agent_id``,
``agent_type``, ``agent_transcript_path``, ``last_assistant_message``, with
``session_id``, ``transcript_path``, ``prompt_id`` and ``cwd``), reads the subagent's own
transcript (:func:`~explomemo.clients.hooks.transcripts.read_run`) and, when :func:`should_capture`
says so, stores a memo of origin ``subagent``: the prompt the main agent delegated as its
question, the subagent's report as its conclusion, exactly the files it read, each hashed as
it read them, its agent type and what the run cost
(:attr:`~explomemo.clients.hooks.transcripts.Run.tokens`).
It goes through :func:`~explomemo.clients.hooks.capture.capture_of` as a captured turn does
(secrets redacted, ``<private>`` honoured, texts cleaned and cut) and is stored, or kept in
the pending file, as the Stop hook stores a turn
(:func:`~explomemo.clients.hooks.capture.store_capture`). A run the delegate hook handed
memos to (:mod:`~explomemo.clients.hooks.delegate`) was given a prompt that ends with a
block of ours: its question is the prompt the main agent delegated, cut at the block's
marker (:func:`~explomemo.clients.hooks.delegate.delegated_prompt`), and a run asked to
check a stale memo captured here from a delegated run replaces that memo, keeping its id.
It adds nothing to the client's context.

A run is captured when:

* its transcript starts with the prompt it was given (a transcript longer than the
  reader's tail lost its start, and with it reads the memo would leave out);
* it read at least one file inside the root with the Read tool;
* it changed none: no Edit, Write, MultiEdit or NotebookEdit call, and every Bash command
  it ran or tried is read-only (:func:`read_only`);
* it recorded no memo, and no fresh memo was served to it whole;
* neither the delegated prompt, nor the report, nor the prompt of the user's turn that
  delegated it holds ``<private>`` (:func:`~explomemo.clients.hooks.capture.private`).

Any agent type counts (Explore, Plan, general-purpose, one of the project's own).
``EXPLOMEMO_CAPTURE=off``, or ``--no-capture`` (as ``setup --no-capture`` writes it),
turns it off.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explomemo.clients.hooks.capture import inside_root, store_capture
from explomemo.clients.hooks.payload import Answer, field, root_of
from explomemo.inputs import SUBAGENT
from explomemo.projects import resolve_project

if TYPE_CHECKING:
    from explomemo.clients.hooks.deadline import Deadline
    from explomemo.clients.hooks.transcripts import Run

#: Seconds after its start when the hook hashes no more files (four fifths of the 10 s
#: ``setup`` gives it).
DEADLINE_S = 8.0
#: Commands a Bash call may start with and still count as reading only, with the
#: subcommands allowed after git. Anything else (an interpreter, a build tool, ``xargs``,
#: ``awk``, ``tee``, a package manager) may write.
READ_ONLY_COMMANDS = frozenset(
    "ls find grep egrep fgrep rg cat head tail wc file stat pwd tree du sort uniq cut tr"
    " basename dirname realpath readlink which echo printf true cd diff cmp nl column"
    " sed git".split()
)
#: git's subcommands that only read.
READ_ONLY_GIT = frozenset(
    "log show diff status blame grep ls-files ls-tree rev-parse describe shortlog cat-file".split()
)
#: Options that make a listed command write or run something, by command (a word that
#: starts so); ``--output`` for every command.
_WRITING_OPTIONS: dict[str, tuple[str, ...]] = {
    "find": ("-exec", "-ok", "-delete", "-fprint", "-fls"),
    "sed": ("-i", "--in-place"),
    "sort": ("-o", "--compress-program"),
    "tree": ("-o",),
    "rg": ("--pre",),
    "file": ("-C", "--compile"),
    "git": ("-O", "--open-files-in-pager"),
}
#: The one sed script taken as reading: print lines by number (``-n '10,40p'``); any other
#: (``w`` writes a file, ``e`` and ``s///e`` run a command) counts as writing.
_SED_PRINT = re.compile(r"(?:\d+|\$)?(?:,(?:\d+|\$))?p")
#: Redirections that write nowhere (``/dev/null`` as a whole word).
_HARMLESS_REDIRECTIONS = re.compile(r"[0-9]?>(?:\s*/dev/null|&[0-9])(?=$|[\s;&|])")
#: Short options that write when they come in a cluster (``sort -uo OUT``), by command.
_WRITING_LETTERS: dict[str, str] = {"sort": "o", "tree": "o", "sed": "efi"}
#: What splits a command line into commands outside quotes (pipes, lists, background).
_SEPARATORS = "|&;\n"
#: What may follow ``$`` in an expansion inside double quotes (a variable, a parameter),
#: and outside them (also ``$'…'`` and ``$"…"``).
_EXPANDED_QUOTED = re.compile(r"[\w{(@*#?!$-]")
_EXPANDED = re.compile(r"[\w{(@*#?!$'\"-]")


def read_only(command: str) -> bool:
    """Whether a Bash ``command`` only reads, by a short allowlist: each of the commands
    it chains (``|``, ``&&``, ``||``, ``;``, ``&``, new lines) starts with one of
    :data:`READ_ONLY_COMMANDS` (git with one of :data:`READ_ONLY_GIT`; sed only as
    ``sed -n 'A,Bp'``; uniq with no output file), with no option that writes or runs a
    program (``--output``, find's ``-exec`` or ``-delete``, sed's ``-i``, sort's ``-o``,
    rg's ``--pre``, git grep's ``-O``: :data:`_WRITING_OPTIONS`), and the line holds no
    redirection but to ``/dev/null`` and no substitution (``$(``, backticks, ``<(``)."""
    text = _HARMLESS_REDIRECTIONS.sub(" ", command)
    if any(mark in text for mark in (">", "`", "$(", "<(", "<<")):
        return False
    try:
        commands = _commands(text)
    except ValueError:  # what this reader does not follow: never taken as reading
        return False
    for words in commands:
        name, options = words[0], words[1:]
        if name not in READ_ONLY_COMMANDS:
            return False
        writing = ("--output", *_WRITING_OPTIONS.get(name, ()))
        if any(word.startswith(writing) for word in options):
            return False
        letters = _WRITING_LETTERS.get(name, "")
        if any(
            w.startswith("-") and not w.startswith("--") and set(w[1:]) & set(letters)
            for w in options
        ):
            return False
        if name == "git" and (not options or options[0] not in READ_ONLY_GIT):
            return False
        operands = [word for word in options if not word.startswith("-")]
        if name == "sed" and (
            "-n" not in options or not operands or not _SED_PRINT.fullmatch(operands[0])
        ):
            return False
        if name == "uniq" and len(operands) > 1:  # ``uniq IN OUT`` writes OUT
            return False
    return True


def _commands(text: str) -> list[list[str]]:
    """The words of each command ``text`` chains, read as bash reads them: quotes and
    backslashes make a ``|``, ``;`` or ``&`` part of a word (``grep -n 'a|b'``), and
    only one outside them splits. Raises ValueError for what this reader does not follow
    (an unclosed quote, an expansion ``$NAME``, ``${…}``, ``$'…'``, a brace ``{a,b}``,
    a ``#`` starting a comment): such a line is never taken as reading."""
    commands: list[list[str]] = [[]]
    word: list[str] = []
    started = False  # a word has begun (``''`` is a word, though empty)
    at = 0

    def end_word() -> None:
        nonlocal started
        if started:
            commands[-1].append("".join(word))
        word.clear()
        started = False

    while at < len(text):
        char = text[at]
        if char == "\\":
            if text[at + 1 : at + 2] != "\n":  # a backslash-newline joins lines
                word.append(text[at + 1 : at + 2])
                started = True
            at += 2
            continue
        if char == "'":
            close = text.find("'", at + 1)
            if close < 0:
                raise ValueError("an unclosed quote")
            word.append(text[at + 1 : close])
            started, at = True, close + 1
            continue
        if char == '"':
            at += 1
            while at < len(text) and text[at] != '"':
                if text[at] == "\\" and text[at + 1 : at + 2] in ('"', "\\", "$", "`"):
                    at += 1
                elif text[at] == "$" and _EXPANDED_QUOTED.match(text, at + 1):
                    raise ValueError("an expansion")
                word.append(text[at])
                at += 1
            if at >= len(text):
                raise ValueError("an unclosed quote")
            started, at = True, at + 1
            continue
        if (char == "$" and _EXPANDED.match(text, at + 1)) or char == "{":
            raise ValueError("an expansion")
        if char == "#" and not started:
            raise ValueError("a comment")
        if char in " \t\r":
            end_word()
        elif char in _SEPARATORS:
            end_word()
            if commands[-1]:
                commands.append([])
        else:
            word.append(char)
            started = True
        at += 1
    end_word()
    return [words for words in commands if words]


def should_capture(run: Run, reads_inside: int) -> bool:
    """The rule (see the module's text) but for privacy, which :func:`subagent_stop`
    checks: whether this run, which read ``reads_inside`` files inside the root, becomes a
    memo."""
    if not run.prompt.strip() or reads_inside < 1:
        return False
    if run.edited or run.recorded or run.fresh_served:
        return False
    return all(read_only(command) for command in run.commands)


def subagent_stop(
    payload: dict[str, Any],
    db: Path | None,
    project: str | None,
    *,
    capture: bool = True,
    deadline: Deadline | None = None,
) -> Answer:
    """Store the delegated run's memo when :func:`should_capture` says so; always None
    (nothing is added to the client's context). ``capture`` False (``--no-capture``) or
    ``EXPLOMEMO_CAPTURE=off`` turns it off; hashing stops at ``deadline``."""
    from explomemo.clients.hooks.capture import capture_enabled, private
    from explomemo.clients.hooks.delegate import delegated_prompt
    from explomemo.clients.hooks.transcripts import read_run, tail_entries

    if not capture or not capture_enabled(os.environ):
        return None
    run = read_run(tail_entries(field(payload, "agent_transcript_path", str)))
    root = root_of(payload)
    if not should_capture(run, len(inside_root(run.read, root))):
        return None
    report = payload.get("last_assistant_message")
    report = report if isinstance(report, str) and report.strip() else run.final_text
    if not report.strip() or private(delegated_prompt(run.prompt)):
        return None
    if private(_delegating_prompt(payload)):
        return None
    agent_type = payload.get("agent_type")
    _record_run(
        run,
        report,
        agent_type if isinstance(agent_type, str) and agent_type.strip() else None,
        root,
        db,
        project,
        deadline,
    )
    return None


def _delegating_prompt(payload: dict[str, Any]) -> str:
    """The prompt of the user's turn that delegated the run (the main transcript's turn of
    the input's ``prompt_id``, else its last turn)."""
    from explomemo.clients.hooks.transcripts import last_turn, read_turn, tail_entries

    path = field(payload, "transcript_path", str)
    given = payload.get("prompt_id")
    prompt_id = given if isinstance(given, str) else None
    entries = tail_entries(path, prompt_id, last_turn_only=True)
    return read_turn(last_turn(entries, prompt_id)).prompt


def _record_run(
    run: Run,
    report: str,
    agent_type: str | None,
    root: str,
    db: Path | None,
    project: str | None,
    deadline: Deadline | None,
) -> None:
    """Store the run's memo (origin subagent), as the Stop hook stores a turn's."""
    from explomemo.changes.contents import enabled
    from explomemo.clients.hooks.capture import capture_of, numbered_results
    from explomemo.clients.hooks.delegate import checked_memo, delegated_prompt, handed_memos
    from explomemo.files import resolve_root
    from explomemo.store.database import now_iso

    where = resolve_root(root)
    found = capture_of(
        project=resolve_project(project, where.path),
        root=where,
        question=delegated_prompt(run.prompt),
        conclusion=report,
        reads=numbered_results(run.reads),
        recorded_at=now_iso(),
        snapshots=enabled(os.environ),
        deadline=deadline,
        origin=SUBAGENT,
        agent_type=agent_type,
        cost_tokens=run.tokens,
    )
    if found is not None:
        store_capture(
            found,
            where.path,
            db,
            replacing=checked_memo(run.prompt),
            handed=handed_memos(run.prompt),
        )
