"""Capture: the Stop hook, run as a real process on real transcripts (in the format Claude Code
2.1.332 and 2.1.197 write, ``toolUseResult.file`` included), records a turn that answered a
question about the code, hashed as the agent read it; and records nothing otherwise."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers import Repo, invoke_cli, open_cache

from explomemo.cli.main import main
from explomemo.store.pending import pending_path

PROMPT_ID = "d7b862e4-c8ff-4ec2-81ec-7587d377dd18"
QUESTION = "where are tokens checked?"
ANSWER = "Tokens are checked in src/auth.py: check() calls verify()."


class Turn:
    """One turn of a transcript, written as Claude Code writes it."""

    def __init__(self, prompt: str, prompt_id: str = PROMPT_ID) -> None:
        self.prompt_id = prompt_id
        self.entries: list[dict[str, Any]] = [self._user(prompt)]
        self.calls = 0

    def _user(self, content: Any, **extra: Any) -> dict[str, Any]:
        return {
            "type": "user",
            "isSidechain": False,
            "promptId": self.prompt_id,
            "message": {"role": "user", "content": content},
            **extra,
        }

    def call(self, name: str, arguments: dict[str, Any], result: Any = None, **block: Any) -> None:
        self.calls += 1
        ident = f"toolu_{self.prompt_id[:4]}{self.calls}"
        self.entries.append(
            {
                "type": "assistant",
                "isSidechain": False,
                "message": {
                    "id": f"msg_{self.calls}",
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": ident, "name": name, "input": arguments}
                    ],
                },
            }
        )
        extra = {} if result is None else {"toolUseResult": result}
        content = [{"tool_use_id": ident, "type": "tool_result", "content": "ok", **block}]
        self.entries.append(self._user(content, **extra))

    def read(self, path: Path, offset: int | None = None, limit: int | None = None) -> None:
        """A Read call of ``path`` as it is now (lines offset.. offset+limit-1)."""
        lines = path.read_text().replace("\r\n", "\n").split("\n")
        start = offset or 1
        chosen = lines[start - 1 : None if limit is None else start - 1 + limit]
        arguments: dict[str, Any] = {"file_path": str(path)}
        if offset is not None:
            arguments["offset"] = offset
        if limit is not None:
            arguments["limit"] = limit
        file = {
            "filePath": str(path),
            "content": "\n".join(chosen),
            "numLines": len(chosen),
            "startLine": start,
            "totalLines": len(lines),
        }
        self.call("Read", arguments, {"type": "text", "file": file})

    def attach(self, attachment: dict[str, Any]) -> None:
        self.entries.insert(1, {"type": "attachment", "attachment": attachment})

    def say(self, text: str) -> None:
        self.entries.append(
            {
                "type": "assistant",
                "isSidechain": False,
                "message": {
                    "id": "msg_final",
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                },
            }
        )

    def feedback(self, reason: str) -> None:
        self.entries.append(self._user(f"Stop hook feedback:\n{reason}", isMeta=True))


def write_transcript(path: Path, *turns: Turn) -> Path:
    earlier = Turn("an earlier question, long done?", prompt_id="0000-earlier")
    earlier.say("Earlier answer.")
    lines = [json.dumps({"type": "queue-operation", "operation": "enqueue"})]
    lines += [json.dumps(e) for t in (earlier, *turns) for e in t.entries]
    path.write_text("\n".join(lines) + "\n")
    return path


def stop(
    db: Path,
    transcript: Path,
    root: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    last: str | None = ANSWER,
    active: bool = False,
    prompt_id: str | None = PROMPT_ID,
    process: bool = False,
) -> tuple[Any, str]:
    """Run ``explomemo hook stop`` as Claude Code does: (its answer or None, its stderr).

    In this process by default, with the environment the hook would get (so mutation
    testing, which traces only this process, sees which tests call the capture code);
    with ``process``, as a real child process, as Claude Code starts it."""
    payload: dict[str, Any] = {
        "session_id": "s",
        "transcript_path": str(transcript),
        "cwd": str(root),
        "hook_event_name": "Stop",
        "stop_hook_active": active,
    }
    if prompt_id is not None:
        payload["prompt_id"] = prompt_id
    if last is not None:
        payload["last_assistant_message"] = last
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")}
    environment.pop("CLAUDE_PROJECT_DIR", None)
    environment.update(env or {}, EXPLOMEMO_EMBEDDINGS="off")
    argv = ["--db", str(db), "hook", "stop", *extra]
    if not process:
        stdin, out, err = io.BytesIO(json.dumps(payload).encode()), io.BytesIO(), io.BytesIO()
        streams = {"stdin": _Binary(stdin), "stdout": _Binary(out), "stderr": _Binary(err)}
        with (
            mock.patch.dict(os.environ, environment, clear=True),
            mock.patch.multiple(sys, **streams),
        ):
            assert main(argv) == 0
        text = out.getvalue().decode()
        return (json.loads(text) if text else None), err.getvalue().decode()
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", *argv],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return (json.loads(done.stdout) if done.stdout else None), done.stderr


class _Binary:
    """A standard stream as the hook reads it: its bytes under ``buffer``."""

    def __init__(self, buffer: io.BytesIO) -> None:
        self.buffer = buffer


def memos(db: Path) -> list[dict[str, Any]]:
    run = invoke_cli(["--db", str(db), "list", "--json"])
    assert run.code == 0, run.err
    return json.loads(run.out)  # type: ignore[no-any-return]


def show(db: Path, memo_id: int, root: Path) -> dict[str, Any]:
    run = invoke_cli(["--db", str(db), "show", str(memo_id), "--root", str(root), "--json"])
    assert run.code == 0, run.err
    return json.loads(run.out)  # type: ignore[no-any-return]


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "shop")
    repo.write("src/auth.py", "def check(token):\n    return verify(token)\n")
    repo.write("src/tokens.py", "".join(f"# line {n}\n" for n in range(1, 31)))
    repo.write("src/crlf.py", "a = 1\r\nb = 2\r\n")
    repo.commit("code")
    return repo


def question_turn(shop: Repo, prompt: str = QUESTION) -> Turn:
    turn = Turn(prompt)
    turn.read(shop.path / "src/auth.py")
    turn.read(shop.path / "src/tokens.py", offset=3, limit=5)
    turn.read(shop.path / "src/crlf.py")
    turn.say(ANSWER)
    return turn


# What is recorded ------------------------------------------------------------------


def test_a_read_only_question_is_recorded_fresh_on_exactly_the_files_read(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    assert not db_path.exists()  # a missing database is created, as record creates it
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    assert stop(db_path, path, shop.path, process=True) == (None, "")
    (memo,) = memos(db_path)
    assert memo["origin"] == "transcript" and memo["question"] == QUESTION
    assert memo["project"] == "shop" and memo["files"] == 3
    shown = show(db_path, memo["id"], shop.path)
    assert shown["status"] == "fresh" and shown["conclusion"] == ANSWER
    assert [f["path"] for f in shown["files"]] == ["src/auth.py", "src/crlf.py", "src/tokens.py"]
    # Hashed as record hashes them: the same SHA-256 as the bytes on disk.
    with open_cache(db_path) as cache:
        again = cache.record(
            question="another question?", conclusion="c", files=["src/crlf.py"], root=str(shop.path)
        )
    crlf = next(f for f in shown["files"] if f["path"] == "src/crlf.py")
    assert again.files[0].sha256 == crlf["sha256"]


def test_the_question_is_what_the_user_typed_without_the_ides_preamble(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """Claude Code in an IDE puts the opened file or the selection before the prompt: the
    rule judges what follows, and the memo's question is that, as the user typed it."""
    preamble = (
        "<ide_opened_file>The user opened the file src/auth.py in the IDE. This may or may"
        " not be related to the current task.</ide_opened_file>\n"
    )
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop, preamble + QUESTION))
    assert stop(db_path, path, shop.path) == (None, "")
    (memo,) = memos(db_path)
    assert memo["question"] == QUESTION


@pytest.mark.parametrize("prompt_id", [None, "not-in-the-transcript"])
def test_without_the_turns_prompt_id_the_last_turn_is_the_turn(
    tmp_path: Path, db_path: Path, shop: Repo, prompt_id: str | None
) -> None:
    """An input without ``prompt_id`` (an older Claude Code), or with one the transcript
    lacks: the last turn's reads only, never an earlier turn's."""
    earlier = Turn("where is the line counter?", prompt_id="1111-earlier")
    earlier.read(shop.path / "src/tokens.py")
    earlier.say("In tokens.py.")
    turn = Turn(QUESTION)
    turn.read(shop.path / "src/auth.py")
    turn.say(ANSWER)
    path = write_transcript(tmp_path / "t.jsonl", earlier, turn)
    assert stop(db_path, path, shop.path, prompt_id=prompt_id) == (None, "")
    (memo,) = memos(db_path)
    assert memo["question"] == QUESTION
    assert [f["path"] for f in show(db_path, memo["id"], shop.path)["files"]] == ["src/auth.py"]


def test_a_turn_longer_than_what_the_hook_reads_at_once_is_found_whole(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """The hook reads the transcript backwards, 256 KiB at a time, until the turn's
    prompt: a turn of 1.5 MB (two Reads of a 700 KB file) behind 3 MB of earlier turns."""
    from explomemo.clients.hooks.transcripts import CHUNK_BYTES

    shop.write("src/big.py", "".join(f"value_{n} = {n}\n" for n in range(50_000)))
    earlier = [Turn(f"earlier question {n}?", prompt_id=f"e{n}") for n in range(4)]
    for old in earlier:
        old.read(shop.path / "src/big.py")
        old.say("ok")
    turn = Turn(QUESTION)
    turn.read(shop.path / "src/auth.py")
    turn.read(shop.path / "src/big.py")
    turn.read(shop.path / "src/big.py", offset=10, limit=5)
    turn.say(ANSWER)
    path = write_transcript(tmp_path / "t.jsonl", *earlier, turn)
    assert path.stat().st_size > 4 * 1024 * 1024 and CHUNK_BYTES < 1024 * 1024
    assert stop(db_path, path, shop.path) == (None, "")
    (memo,) = memos(db_path)
    shown = show(db_path, memo["id"], shop.path)
    assert [f["path"] for f in shown["files"]] == ["src/auth.py", "src/big.py"]
    assert shown["status"] == "fresh"


def test_the_conclusion_falls_back_to_the_transcripts_final_text(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    turn = question_turn(shop)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    assert stop(db_path, path, shop.path, last=None) == (None, "")
    (memo,) = memos(db_path)
    assert show(db_path, memo["id"], shop.path)["conclusion"] == ANSWER


def test_a_file_changed_between_its_read_and_the_stop_is_born_stale_with_a_diff(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    shop.write("src/auth.py", "def check(token):\n    return True\n")  # the agent's Bash, say
    assert stop(db_path, path, shop.path) == (None, "")
    (memo,) = memos(db_path)
    shown = show(db_path, memo["id"], shop.path)
    assert shown["status"] == "stale"
    (auth,) = [f for f in shown["files"] if f["state"] != "unchanged"]
    assert auth["path"] == "src/auth.py" and auth["diff_source"] == "snapshot"
    assert "-    return verify(token)\n+    return True" in auth["diff"]


def test_a_partial_read_is_checked_on_the_lines_it_returned(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    """Lines 3-7 of tokens.py were read: a change at line 20 leaves the memo fresh (its hash
    is the file's at Stop), a change at line 5 makes it stale."""
    tokens = shop.path / "src/tokens.py"
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    tokens.write_text(tokens.read_text().replace("# line 20\n", "# line twenty\n"))
    stop(db_path, path, shop.path)
    (memo,) = memos(db_path)
    assert show(db_path, memo["id"], shop.path)["status"] == "fresh"

    other = tmp_path / "other.db"
    tokens.write_text(tokens.read_text().replace("# line 5\n", "# line five\n"))
    stop(other, path, shop.path)
    (memo,) = memos(other)
    shown = show(other, memo["id"], shop.path)
    (changed,) = [f for f in shown["files"] if f["state"] != "unchanged"]
    assert changed["path"] == "src/tokens.py"
    assert "-# line 5\n+# line five" in changed["diff"]
    assert changed["added"] == 1 and changed["removed"] == 1


def test_a_file_gone_before_the_stop_is_recorded_missing(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    (shop.path / "src/auth.py").unlink()
    stop(db_path, path, shop.path)
    (memo,) = memos(db_path)
    states = {f["path"]: f["state"] for f in show(db_path, memo["id"], shop.path)["files"]}
    assert states == {
        "src/auth.py": "missing",
        "src/crlf.py": "unchanged",
        "src/tokens.py": "unchanged",
    }


def test_a_long_prompt_and_answer_are_cut_with_the_cut_said(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    prompt = "where are tokens checked? " + "x" * 3000
    turn = question_turn(shop, prompt)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    stop(db_path, path, shop.path, last="y" * 25_000)
    (memo,) = memos(db_path)
    shown = show(db_path, memo["id"], shop.path)
    assert len(shown["question"]) == 2_000 and len(shown["conclusion"]) == 20_000
    assert shown["question"].endswith("of 3,026 characters kept]")
    assert shown["conclusion"].endswith("of 25,000 characters kept]")


def test_files_outside_the_root_are_left_out(tmp_path: Path, db_path: Path, shop: Repo) -> None:
    """Outside root, through a link leading out, or not a regular file (a FIFO, never
    opened): what record refuses, capture leaves out."""
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    turn = Turn(QUESTION)
    turn.read(outside)
    (shop.path / "src/link.py").symlink_to(outside)
    turn.read(shop.path / "src/link.py")
    fifo = shop.path / "src/fifo.py"
    fifo.write_text("y = 2\n")
    turn.read(fifo)
    fifo.unlink()
    os.mkfifo(fifo)
    turn.read(shop.path / "src/auth.py")
    turn.say(ANSWER)
    stop(db_path, write_transcript(tmp_path / "t.jsonl", turn), shop.path)
    (memo,) = memos(db_path)
    assert [f["path"] for f in show(db_path, memo["id"], shop.path)["files"]] == ["src/auth.py"]


# What is not recorded ----------------------------------------------------------------


def _edit(turn: Turn, shop: Repo) -> None:
    turn.call("Edit", {"file_path": str(shop.path / "src/auth.py"), "old_string": "a"})


@pytest.mark.parametrize(
    "case",
    ["edited", "task", "follow-up", "private", "recorded", "fresh-context", "fresh-recall"],
)
def test_turns_that_did_not_answer_a_new_question_leave_no_memo(
    tmp_path: Path, db_path: Path, shop: Repo, case: str
) -> None:
    prompt = {
        "task": "fix the parser",
        "follow-up": "why?",
        "private": "where are tokens checked? <private>ticket 4411</private>",
    }.get(case, QUESTION)
    turn = Turn(prompt)
    turn.read(shop.path / "src/auth.py")
    if case == "edited":
        _edit(turn, shop)
    if case == "recorded":
        turn.call("mcp__explomemo__memory_exploration_record", {"question": QUESTION})
    if case == "fresh-context":
        turn.attach(
            {
                "type": "hook_additional_context",
                "hookEvent": "UserPromptSubmit",
                "content": ["explomemo: memos …\n\n[memo 3, fresh, 1 file unchanged] q\nc"],
            }
        )
    if case == "fresh-recall":
        answer = {"matches": [{"id": 3, "question": "q", "conclusion": "c", "status": "fresh"}]}
        turn.call(
            "mcp__explomemo__memory_exploration_recall",
            {"query": QUESTION},
            content=[{"type": "text", "text": json.dumps(answer)}],
        )
    turn.say(ANSWER)
    assert stop(db_path, write_transcript(tmp_path / "t.jsonl", turn), shop.path) == (None, "")
    assert not db_path.exists()


def test_a_stale_recall_answer_does_not_stop_the_capture(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    turn = question_turn(shop)
    answer = {"matches": [{"id": 3, "question": "q", "conclusion": "c", "status": "stale"}]}
    turn.call(
        "mcp__explomemo__memory_exploration_recall",
        {"query": QUESTION},
        content=[{"type": "text", "text": json.dumps(answer)}],
    )
    stop(db_path, write_transcript(tmp_path / "t.jsonl", turn), shop.path)
    assert len(memos(db_path)) == 1


@pytest.mark.parametrize(
    ("extra", "env"),
    [
        ((), {"EXPLOMEMO_CAPTURE": "off"}),
        ((), {"EXPLOMEMO_CAPTURE": " False "}),
        (("--no-capture",), {}),
    ],
)
def test_capture_can_be_turned_off(
    tmp_path: Path, db_path: Path, shop: Repo, extra: tuple[str, ...], env: dict[str, str]
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    assert stop(db_path, path, shop.path, *extra, env=env) == (None, "")
    assert not db_path.exists()


@pytest.mark.parametrize("given", [{}, {"capture": True}, {"capture": False}])
def test_run_hook_captures_unless_told_not_to(
    tmp_path: Path, db_path: Path, shop: Repo, given: dict[str, bool]
) -> None:
    """``run_hook`` called as a function (as ``test_a_hook_that_writes_imports_no_model``
    does in a child process) captures the turn unless ``capture=False`` says not to: the
    CLI always passes ``capture``, so only this test, in process, pins the default. Kills
    ``run_hook__mutmut_1`` (``capture: bool = False``)."""
    from explomemo.clients.hooks.run import run_hook

    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    payload = {"transcript_path": str(path), "cwd": str(shop.path), "prompt_id": PROMPT_ID}
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")}
    environment.pop("CLAUDE_PROJECT_DIR", None)
    environment["EXPLOMEMO_EMBEDDINGS"] = "off"
    out, err = io.BytesIO(), io.BytesIO()
    with mock.patch.dict(os.environ, environment, clear=True):
        code = run_hook(
            "stop",
            db=db_path,
            project=None,
            stdin=io.BytesIO(json.dumps(payload).encode()),
            stdout=out,
            stderr=err,
            **given,
        )
    assert (code, out.getvalue(), err.getvalue()) == (0, b"", b"")
    if given.get("capture", True):
        assert [m["origin"] for m in memos(db_path)] == ["transcript"]
    else:
        assert not db_path.exists()


@pytest.mark.parametrize("data", [b"\x00\xff not json at all\n", b"", b"[" * 50_000 + b"\n"])
def test_a_transcript_it_cannot_parse_adds_nothing_and_never_blocks(
    tmp_path: Path, db_path: Path, shop: Repo, data: bytes
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    assert stop(db_path, path, shop.path) == (None, "")
    assert not db_path.exists()


# Origin: an agent's memo wins -----------------------------------------------------------


def test_an_agents_memo_is_never_replaced_and_replaces_a_captured_one(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    stop(db_path, path, shop.path)
    (captured,) = memos(db_path)
    with open_cache(db_path) as cache:
        mine = cache.record(
            question="Where are tokens checked?",
            conclusion="the agent's own words",
            files=["src/auth.py"],
            root=str(shop.path),
        )
    assert mine.replaced and mine.id == captured["id"] and mine.origin == "agent"
    stop(db_path, path, shop.path)  # the same turn again: capture records nothing
    (memo,) = memos(db_path)
    assert memo["origin"] == "agent"
    assert show(db_path, memo["id"], shop.path)["conclusion"] == "the agent's own words"


def test_a_capture_replaces_a_capture_of_the_same_question(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    stop(db_path, path, shop.path)
    stop(db_path, path, shop.path, last="A better answer.")
    (memo,) = memos(db_path)
    assert show(db_path, memo["id"], shop.path)["conclusion"] == "A better answer."


# The reminder: only when the user opted in, and it gives way ------------------------------

REMIND = {"EXPLOMEMO_REMIND": "on"}


@pytest.mark.parametrize(
    ("extra", "env", "blocks"),
    [
        ((), {}, False),
        ((), {"EXPLOMEMO_REMIND": "off"}, False),
        ((), REMIND, True),
        ((), {"EXPLOMEMO_REMIND": " Yes "}, True),
        (("--remind",), {}, True),
        (("--remind",), {"EXPLOMEMO_REMIND": "off"}, False),
    ],
)
def test_the_reminder_asks_only_when_the_user_opted_in(
    tmp_path: Path,
    db_path: Path,
    shop: Repo,
    extra: tuple[str, ...],
    env: dict[str, str],
    blocks: bool,
) -> None:
    """Issue 38: each block costs the user one more model turn. A real hook process, on a
    turn that changed files and read three: no reminder unless ``EXPLOMEMO_REMIND`` is on
    or the hook was set up with ``--remind`` (an explicit ``off`` wins over it)."""
    turn = question_turn(shop)
    _edit(turn, shop)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    answer, err = stop(db_path, path, shop.path, *extra, env=env, process=True)
    assert err == ""
    if blocks:
        assert answer["decision"] == "block"
        assert "read 3 files (src/auth.py, src/tokens.py, src/crlf.py)" in answer["reason"]
    else:
        assert answer is None
    assert not db_path.exists()


def test_the_reminder_asks_once_for_a_turn_that_changed_files(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    turn = question_turn(shop)
    _edit(turn, shop)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    answer, err = stop(db_path, path, shop.path, env=REMIND)
    assert answer["decision"] == "block" and err == ""
    assert "read 3 files (src/auth.py, src/tokens.py, src/crlf.py)" in answer["reason"]
    # Claude Code gives the reason back as meta feedback: never a second time in the turn,
    # even without stop_hook_active.
    turn.feedback(answer["reason"])
    turn.say("done")
    path = write_transcript(tmp_path / "t.jsonl", turn)
    assert stop(db_path, path, shop.path, env=REMIND) == (None, "")
    assert stop(db_path, path, shop.path, env=REMIND, active=True) == (None, "")
    assert not db_path.exists()


def test_a_read_only_turn_is_recorded_not_reminded(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    for name in ("a", "b", "c"):
        shop.write(f"src/{name}.py", f"{name} = 1\n")
    turn = Turn("how is the retry policy decided?")
    for name in ("a", "b", "c"):
        turn.read(shop.path / f"src/{name}.py")
    turn.say(ANSWER)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    assert stop(db_path, path, shop.path, env=REMIND) == (None, "")
    assert len(memos(db_path)) == 1


# A hook that writes: a locked database ---------------------------------------------------


@pytest.mark.timeout(60)
def test_a_capture_the_database_cannot_take_in_time_waits_and_is_stored_by_the_next_writer(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    with open_cache(db_path) as cache:
        cache.record(question="other?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    holder = sqlite3.connect(db_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process writing for long
        answer, err = stop(db_path, path, shop.path)
    finally:
        holder.close()
    waiting = pending_path(db_path)
    assert answer is None and err.count("\n") == 1 and str(waiting) in err
    assert stat.S_IMODE(waiting.stat().st_mode) == 0o600
    assert len(waiting.read_bytes().splitlines()) == 1
    assert [m["origin"] for m in memos(db_path)] == ["agent"]  # a read stores nothing
    # The next process that writes (here a record through the CLI) stores it.
    run = invoke_cli(
        ["--db", str(db_path), "record", "--root", str(shop.path), "--question", "third?",
         "--conclusion", "c", "src/auth.py"]
    )  # fmt: skip
    assert run.code == 0, run.err
    assert sorted(m["origin"] for m in memos(db_path)) == ["agent", "agent", "transcript"]
    assert not waiting.exists()
    assert list(tmp_path.glob("**/*.claimed")) == []
    captured = next(m for m in memos(db_path) if m["origin"] == "transcript")
    assert show(db_path, captured["id"], shop.path)["status"] == "fresh"


def test_a_hook_that_writes_imports_no_model(tmp_path: Path, db_path: Path, shop: Repo) -> None:
    """On a database that exists (creating or migrating one runs sqlite-utils once, which
    imports numpy where it is installed)."""
    with open_cache(db_path) as cache:
        cache.record(question="other?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    path = write_transcript(tmp_path / "t.jsonl", question_turn(shop))
    payload = {"transcript_path": str(path), "cwd": str(shop.path), "prompt_id": PROMPT_ID}
    code = (
        "import io, json, sys\n"
        "from explomemo.clients.hooks.run import run_hook\n"
        f"run_hook('stop', db=__import__('pathlib').Path({str(db_path)!r}), project=None,"
        f" stdin=io.BytesIO({json.dumps(payload).encode()!r}), stdout=io.BytesIO())\n"
        "heavy = [m for m in ('fastembed', 'onnxruntime', 'numpy', 'mcp', 'pydantic')"
        " if m in sys.modules]\n"
        "print(json.dumps(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == [] and done.stderr == ""
    assert [m["origin"] for m in memos(db_path)] == ["agent", "transcript"]
