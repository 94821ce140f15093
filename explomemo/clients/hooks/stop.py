"""The Stop hook: a turn that answered a question about the code is recorded.

The rule is :mod:`explomemo.clients.hooks.capture`'s. Only when the user opted in
(``EXPLOMEMO_REMIND=on``, or ``--remind``, as ``setup --remind`` writes it): when the turn
changed files, read :data:`MIN_FILES_READ` files or more inside the root (files ``record``
would take) and recorded no memo, it blocks once with a reason listing them; never when
``stop_hook_active`` is set (the agent is already answering a block). A turn that
delegated to a subagent is not recorded: its run is
(:mod:`explomemo.clients.hooks.subagent_stop`).

The files each turn read are taken off what the memos served in the session spared (see
:mod:`explomemo.memos.savings`), in an existing database only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explomemo.clients.hooks.capture import inside_root, store_capture
from explomemo.clients.hooks.memos import BUSY_TIMEOUT_MS, SESSION_PREFIX
from explomemo.clients.hooks.payload import Answer, field, root_of
from explomemo.inputs import switched_on
from explomemo.projects import resolve_project
from explomemo.store.database import Store

if TYPE_CHECKING:
    from explomemo.clients.hooks.deadline import Deadline
    from explomemo.clients.hooks.transcripts import Turn

#: Files a turn must have read for the Stop hook to ask for a memo.
MIN_FILES_READ = 3
#: The switch that turns the Stop hook's reminder on (off unless the user opts in: each
#: block costs the user one more model turn).
REMIND_SWITCH = "EXPLOMEMO_REMIND"
#: How the Stop hook's reason starts (a turn given it once is not given it again).
REASON_START = "explomemo: this turn read "
#: Files named in the Stop hook's reason.
MAX_FILES_NAMED = 20
#: Seconds after its start when the hook hashes no more files (four fifths of the 10 s
#: ``setup`` gives it).
DEADLINE_S = 8.0


def stop(
    payload: dict[str, Any],
    db: Path | None,
    project: str | None,
    *,
    capture: bool = True,
    remind: bool = False,
    deadline: Deadline | None = None,
) -> Answer:
    """Record the turn when it answered a question (see
    :mod:`explomemo.clients.hooks.capture`); else, when the reminder is on, block once
    when it changed files, read several and recorded no memo; else None.

    ``capture`` False (``--no-capture``, as ``setup --no-capture`` writes it) or
    ``EXPLOMEMO_CAPTURE=off`` turns capture off. The reminder is off unless
    ``EXPLOMEMO_REMIND`` is on, or unset with ``remind`` True (``--remind``, as
    ``setup --remind`` writes it). Hashing the turn's files stops at ``deadline``
    (none: no deadline).
    """
    from explomemo.clients.hooks.capture import TurnFacts, capture_enabled, should_capture
    from explomemo.clients.hooks.transcripts import last_turn, read_turn, tail_entries

    path = field(payload, "transcript_path", str)
    given = payload.get("prompt_id")
    prompt_id = given if isinstance(given, str) else None
    entries = tail_entries(path, prompt_id, last_turn_only=True)
    turn = read_turn(last_turn(entries, prompt_id))
    root = root_of(payload)
    inside = inside_root(turn.read, root)
    settle_served(payload, db, inside)
    facts = TurnFacts(
        reads=len(inside),
        edits=turn.edited,
        recorded=turn.recorded,
        answered_from_fresh_memo=turn.fresh_served,
        delegated=turn.delegated,
    )
    if capture and capture_enabled(os.environ) and should_capture(turn.prompt, facts):
        last = payload.get("last_assistant_message")
        answer = last if isinstance(last, str) and last.strip() else turn.final_text
        if answer.strip():
            _record_turn(turn, answer, root, db, project, deadline)
            return None
    if not switched_on(os.environ, REMIND_SWITCH, default=remind):
        return None
    reminded = any(text.startswith(REASON_START) for text in turn.feedback)
    if field(payload, "stop_hook_active", bool, False) or reminded:
        return None
    if not turn.edited or turn.recorded or len(inside) < MIN_FILES_READ:
        return None
    return {"decision": "block", "reason": stop_reason(inside)}


def settle_served(payload: dict[str, Any], db: Path | None, read: Sequence[str]) -> None:
    """Take the files this turn read (``read``, relative to the root) off what the memos
    served in the session spared (see :func:`~explomemo.memos.savings.settle_served`):
    the agent read them anyway. Nothing without a database or a session id; a failure
    to settle never stops the hook."""
    from explomemo.errors import ExplomemoError
    from explomemo.memos.savings import settle_served as settle

    session = payload.get("session_id")
    if not read or not isinstance(session, str) or not session:
        return
    try:
        store = Store.open_existing(db, BUSY_TIMEOUT_MS)
    except ExplomemoError:
        return
    try:
        settle(store, f"{SESSION_PREFIX}{session}", set(read))
    except ExplomemoError:
        return
    finally:
        store.close()


def _record_turn(
    turn: Turn,
    answer: str,
    root: str,
    db: Path | None,
    project: str | None,
    deadline: Deadline | None = None,
) -> None:
    """Store the turn's memo (origin transcript; see
    :func:`~explomemo.clients.hooks.capture.store_capture`). At ``deadline`` hashing stops,
    and nothing is stored (:class:`~explomemo.errors.DeadlineError` says so)."""
    from explomemo.changes.contents import enabled
    from explomemo.clients.hooks.capture import capture_of, read_results, typed
    from explomemo.files import resolve_root
    from explomemo.store.database import now_iso

    where = resolve_root(root)
    found = capture_of(
        project=resolve_project(project, where.path),
        root=where,
        question=typed(turn.prompt),
        conclusion=answer,
        reads=read_results(turn.reads),
        recorded_at=now_iso(),
        snapshots=enabled(os.environ),
        deadline=deadline,
    )
    if found is not None:
        store_capture(found, where.path, db)


def stop_reason(read: Sequence[str]) -> str:
    """Why the Stop hook sends the agent back: the files it read (relative to the root),
    and what to record."""
    shown = read[:MAX_FILES_NAMED]
    more = f" and {len(read) - len(shown)} more" if len(read) > len(shown) else ""
    return (
        f"{REASON_START}{len(read)} files ({', '.join(shown)}{more}) and recorded"
        " no memo. If it answered a structural question about this codebase (how something"
        " is wired, where something is decided), record it now with memory_exploration_record:"
        " the question, your conclusion and the files it rests on, so a later session can"
        " reuse it without reading them again. Otherwise, finish as you were."
    )
