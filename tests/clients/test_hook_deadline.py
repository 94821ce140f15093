"""The hooks keep within the time Claude Code gives them (issue 36): reading and hashing
files stops at each hook's deadline, and the hook says so in one line rather than being
killed half-way. The deadline is passed in with a clock that moves as the test says, so no
test waits on the wall clock (``benchmarks/bench_stop_deadline.py`` times the real one)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import Repo, open_cache
from test_capture import ANSWER, PROMPT_ID, Turn, memos, write_transcript

from explomemo.store.pending import pending_path

QUESTION = "where are the twelve modules wired together?"


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "shop")


class Clock:
    """A clock that moves a second each time it is read: a deadline of 8 s passes at its
    eighth reading after the start, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def run(event: str, db: Path, payload: dict[str, Any], deadline: Any) -> tuple[int, bytes, bytes]:
    """``run_hook`` as ``explomemo hook EVENT`` calls it, with ``deadline``: (exit code,
    stdout, stderr)."""
    from explomemo.clients.hooks.run import run_hook

    out, err = io.BytesIO(), io.BytesIO()
    code = run_hook(
        event,
        db=db,
        project=None,
        stdin=io.BytesIO(json.dumps(payload).encode()),
        stdout=out,
        stderr=err,
        deadline=deadline,
    )
    return code, out.getvalue(), err.getvalue()


def test_the_stop_hook_stops_hashing_at_its_deadline_and_says_so(
    tmp_path: Path, db_path: Path, shop: Repo, hook_env: None
) -> None:
    """A turn that read 12 files, on a clock on which hashing each costs a second: the hook
    stops at its 8 s deadline, stores nothing, parks nothing, and says so in one line."""
    from explomemo.clients.hooks.deadline import Deadline
    from explomemo.clients.hooks.stop import DEADLINE_S as STOP_DEADLINE_S

    turn = Turn(QUESTION)
    for n in range(12):
        shop.write(f"src/m{n}.py", f"value = {n}\n")
        turn.read(shop.path / f"src/m{n}.py")
    turn.say(ANSWER)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    payload = {"transcript_path": str(path), "cwd": str(shop.path), "prompt_id": PROMPT_ID}
    code, out, err = run("stop", db_path, payload, Deadline(STOP_DEADLINE_S, clock=Clock()))
    assert (code, out) == (0, b"")
    line = err.decode()
    assert line.count("\n") == 1 and "8 s deadline" in line and "7 of 12 files" in line, line
    assert not db_path.exists() and not pending_path(db_path).exists()
    # The same turn within the deadline is captured.
    code, out, err = run("stop", db_path, payload, Deadline(STOP_DEADLINE_S))
    assert (code, out, err) == (0, b"", b"")
    (memo,) = memos(db_path)
    assert memo["files"] == 12


def test_a_hook_run_without_a_deadline_gets_its_own(
    tmp_path: Path, db_path: Path, shop: Repo, hook_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_hook`` with no deadline given (as ``explomemo hook stop`` calls it) takes the
    event's from ``DEADLINES``: at 0 s the Stop hook stores nothing and says so, where
    no deadline at all would capture the turn. Kills ``run_hook`` 10 of issue #36's run."""
    from explomemo.clients.hooks import run as hooks_run

    shop.write("src/m0.py", "value = 0\n")
    turn = Turn(QUESTION)
    turn.read(shop.path / "src/m0.py")
    turn.say(ANSWER)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    payload = {"transcript_path": str(path), "cwd": str(shop.path), "prompt_id": PROMPT_ID}
    monkeypatch.setitem(hooks_run.DEADLINES, "stop", 0.0)
    out, err = io.BytesIO(), io.BytesIO()
    code = hooks_run.run_hook(
        "stop", db=db_path, project=None, stdin=io.BytesIO(json.dumps(payload).encode()),
        stdout=out, stderr=err,
    )  # fmt: skip
    assert (code, out.getvalue()) == (0, b"")
    assert "deadline" in err.getvalue().decode()
    assert not db_path.exists() and not pending_path(db_path).exists()


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_hook_that_reads_files_stops_at_its_deadline_and_says_so(
    tmp_path: Path, db_path: Path, shop: Repo, hook_env: None, event: str
) -> None:
    """The session-start and prompt hooks read the files whose stat changed: on a clock on
    which its deadline has passed after the first batch, the hook adds nothing and says
    how far it read, in one line; with time enough it answers."""
    from explomemo.clients.hooks.deadline import Deadline

    names = [f"src/m{n}.py" for n in range(20)]
    for name in names:
        shop.write(name, f"value = '{name}'\n")
    with open_cache(db_path) as cache:
        cache.record(question=QUESTION, conclusion="In m0.", files=names, root=str(shop.path))
    for name in names:
        os.utime(shop.path / name, ns=(10**18, 10**18))  # its stat changed: read again
    payload = {"cwd": str(shop.path), "prompt": QUESTION, "session_id": "s"}
    code, out, err = run(event, db_path, payload, Deadline(1.0, clock=Clock()))
    line = err.decode()
    assert (code, out) == (0, b"")
    assert line.count("\n") == 1 and "1 s deadline" in line and "of 20 read" in line, line
    code, out, err = run(event, db_path, payload, Deadline(60.0))
    assert (code, err) == (0, b"") and QUESTION in out.decode()


def test_every_hooks_deadline_leaves_time_of_the_timeout_setup_gives_it() -> None:
    from explomemo.clients.hooks.run import DEADLINES
    from explomemo.clients.setup import CLAUDE_HOOKS

    timeouts = {name: seconds for _, _, name, seconds in CLAUDE_HOOKS}
    assert set(timeouts) == set(DEADLINES)
    assert all(DEADLINES[name] <= timeouts[name] - 1 for name in timeouts)
