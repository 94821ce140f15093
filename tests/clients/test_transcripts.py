"""Reading a Claude Code transcript (clients/hooks/transcripts.py): which entries make the last
turn, and which of its Read calls count as reads.

Each case writes a real JSON Lines file in Claude Code's format and reads it back
through :func:`tail_entries`, as the Stop hook does."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from explomemo.clients.hooks import transcripts
from explomemo.clients.hooks.transcripts import Turn, last_turn, read_turn, tail_entries
from explomemo.errors import TranscriptError


def _user(content: Any, prompt_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "promptId": prompt_id,
        "message": {"role": "user", "content": content},
        **extra,
    }


def _read_call(ident: str, path: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": ident, "name": "Read", "input": {"file_path": path}}
            ],
        },
    }


def _result(ident: str, prompt_id: str) -> dict[str, Any]:
    return _user([{"type": "tool_result", "tool_use_id": ident, "content": "ok"}], prompt_id)


def _written(tmp_path: Path, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return tail_entries(str(path))


@pytest.mark.parametrize("prompt_id", [None, "p1"])
def test_a_meta_entry_inside_a_turn_does_not_start_a_new_one(
    tmp_path: Path, prompt_id: str | None
) -> None:
    """Kills ``_is_prompt`` taking a user entry marked ``isMeta`` (a blocking Stop hook's
    feedback, text content, the turn's own promptId) for a new prompt: the turn would
    then start there, and the reads made before it would be forgotten."""
    entries = _written(
        tmp_path,
        [
            _user("an earlier question", "p0"),
            _read_call("t0", "/repo/old.py"),
            _result("t0", "p0"),
            _user("how is the retry policy decided?", "p1"),
            _read_call("t1", "/repo/a.py"),
            _result("t1", "p1"),
            _read_call("t2", "/repo/b.py"),
            _result("t2", "p1"),
            _user("Stop hook feedback: record a memo", "p1", isMeta=True),
            _read_call("t3", "/repo/c.py"),
            _result("t3", "p1"),
        ],
    )
    turn = last_turn(entries, prompt_id)
    assert turn[0]["message"]["content"] == "how is the retry policy decided?"
    found = read_turn(turn)
    assert (found.read, found.recorded) == (["/repo/a.py", "/repo/b.py", "/repo/c.py"], False)


def test_a_read_that_never_got_a_result_is_not_a_read(tmp_path: Path) -> None:
    """Kills ``read_turn`` counting a Read call without its ``tool_result`` (the call was
    interrupted, or is still running): only calls answered without an error count."""
    entries = _written(
        tmp_path,
        [
            _user("where are tokens checked?", "p1"),
            _read_call("t1", "/repo/a.py"),
            _result("t1", "p1"),
            _read_call("t2", "/repo/never-answered.py"),
            _read_call("t3", "/repo/b.py"),
            _user(
                [{"type": "tool_result", "tool_use_id": "t3", "content": "no", "is_error": True}],
                "p1",
            ),
            _read_call("t4", "/repo/c.py"),
            _result("t4", "p1"),
        ],
    )
    found = read_turn(last_turn(entries, "p1"))
    assert (found.read, found.recorded) == (["/repo/a.py", "/repo/c.py"], False)


def _lines(tmp_path: Path, entries: list[dict[str, Any]], end: str = "\n") -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + end)
    return path


def _two_turns(after: int) -> list[dict[str, Any]]:
    """An earlier turn (p1), then a turn (p2) of its prompt and ``after`` more entries."""
    second = [_user("and where is it tested?", "p2")]
    for n in range(after):
        second.append(_result(f"u{n}", "p2") if n % 2 else _read_call(f"u{n + 1}", f"/{n}.py"))
    return [
        {"type": "summary", "summary": "an earlier session"},
        _user("how is the retry policy decided?", "p1"),
        _read_call("t1", "/repo/a.py"),
        _result("t1", "p1"),
        *second,
    ]


def test_a_tail_starting_one_byte_into_the_first_line_drops_that_line(tmp_path: Path) -> None:
    """A transcript one byte longer than the tail: the tail starts inside the first line
    (after its first byte), so what it holds of that line is dropped, even where it
    reads as an entry of its own."""
    cut = json.dumps({"type": "user", "promptId": "cut"}).encode()
    pad = json.dumps({"type": "assistant", "pad": ""}).encode()
    room = transcripts.TAIL_BYTES - len(cut) - 1 - len(pad) - 1
    last = {"type": "assistant", "pad": "x" * room}
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"X" + cut + b"\n" + json.dumps(last).encode() + b"\n")
    assert path.stat().st_size == transcripts.TAIL_BYTES + 1
    assert tail_entries(str(path)) == [last]


def test_the_whole_tail_is_every_entry_in_order(tmp_path: Path) -> None:
    """Without ``last_turn_only`` every entry comes back, the first line of a file
    smaller than the tail included; a blank or broken line in the middle is skipped,
    not the end of the reading."""
    entries = _two_turns(2)
    path = tmp_path / "session.jsonl"
    text = "".join(json.dumps(entry) + "\n" for entry in entries)
    path.write_text(text.replace("\n", "\n\n{not json\n", 2))
    assert tail_entries(str(path)) == entries
    assert tail_entries(str(path), "p2") == entries


@pytest.mark.parametrize("after", [0, 1, 2, 3])
@pytest.mark.parametrize("prompt_id", [None, "p2", "p9"])
def test_the_last_turn_alone_is_read_from_its_prompt(
    tmp_path: Path, after: int, prompt_id: str | None
) -> None:
    """``last_turn_only`` gives the entries from the last prompt on, whatever the turn's
    length; a prompt id the tail lacks (p9) gives the last turn too."""
    entries = _two_turns(after)
    path = _lines(tmp_path, entries)
    assert tail_entries(str(path), prompt_id, last_turn_only=True) == entries[4:]
    assert last_turn(entries, prompt_id) == (entries if prompt_id == "p9" else entries[4:])


def test_the_turn_of_an_earlier_prompt_id_is_read_from_that_prompt(tmp_path: Path) -> None:
    entries = _two_turns(2)
    path = _lines(tmp_path, entries)
    assert tail_entries(str(path), "p1", last_turn_only=True) == entries[1:]
    assert last_turn(entries, "p1") == entries[1:]
    path = _lines(tmp_path, entries[1:])  # the session's first prompt on the file's first line
    assert tail_entries(str(path), "p1", last_turn_only=True) == entries[1:]


def test_a_last_line_not_yet_ended_by_its_newline_is_read(tmp_path: Path) -> None:
    """The prompt just written as the file's last line, its newline not yet there."""
    entries = _two_turns(0)
    path = _lines(tmp_path, entries, end="")
    assert tail_entries(str(path), None, last_turn_only=True) == entries[4:]
    assert tail_entries(str(path), "p2", last_turn_only=True) == entries[4:]


def test_a_tail_without_a_prompt_is_the_whole_tail(tmp_path: Path) -> None:
    entries = [_read_call("t1", "/repo/a.py"), _result("t1", "p1")]
    path = _lines(tmp_path, entries)
    assert tail_entries(str(path), None, last_turn_only=True) == entries
    assert last_turn(entries, None) == entries
    assert last_turn([], None) == []
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert tail_entries(str(empty), "p1", last_turn_only=True) == []
    assert read_turn([]) == Turn("", [], [], False, False, False, [], "")


@pytest.mark.parametrize("prompt_id", [None, "p2", "p9"])
def test_a_turn_read_in_many_chunks_is_found_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompt_id: str | None
) -> None:
    """Read backwards a chunk at a time (made 100 bytes here), lines cut at chunk
    edges: the turn comes back whole, and so does the whole tail."""
    monkeypatch.setattr(transcripts, "CHUNK_BYTES", 100)
    entries = _two_turns(5)
    path = _lines(tmp_path, entries)
    assert tail_entries(str(path), prompt_id, last_turn_only=True) == entries[4:]
    assert tail_entries(str(path), "p1", last_turn_only=True) == entries[1:]
    assert tail_entries(str(path)) == entries


def test_a_last_line_longer_than_a_chunk_still_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcripts, "CHUNK_BYTES", 100)
    entries = _two_turns(1)
    path = _lines(tmp_path, entries)
    with path.open("a") as file:
        file.write('{"type": "assistant", "message": {"content": "' + "x" * 300)
    assert tail_entries(str(path), None, last_turn_only=True) == entries[4:]


def test_only_the_tail_is_read_its_cut_first_line_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file longer than the tail (made small here): the line the tail's start cuts
    is skipped, every whole line after it read; a prompt id found there is found."""
    entries = _two_turns(2)
    path = _lines(tmp_path, entries)
    first = len(json.dumps(entries[0]))
    monkeypatch.setattr(transcripts, "TAIL_BYTES", path.stat().st_size - first // 2)
    assert tail_entries(str(path)) == entries[1:]
    assert tail_entries(str(path), "p1", last_turn_only=True) == entries[1:]
    assert tail_entries(str(path), "p9", last_turn_only=True) == entries[4:]


@pytest.mark.parametrize("prompt_id", [None, "p2"])
def test_a_line_without_the_plain_bytes_user_is_not_taken_for_the_prompt(
    tmp_path: Path, prompt_id: str | None
) -> None:
    """The backward read skips unparsed every line without the bytes ``user`` (Claude Code
    never writes them as ``\\u`` escapes): a prompt whose ``"user"`` is written
    ``"\\u0075ser"`` does not start the turn, the plain prompt before it does."""
    entries = _two_turns(2)
    path = _lines(tmp_path, entries)
    escaped = json.dumps(entries[4]).replace('"user"', '"\\u0075ser"')
    path.write_text(path.read_text().replace(json.dumps(entries[4]), escaped))
    assert b"user" not in path.read_bytes().split(b"\n")[4]
    assert tail_entries(str(path), prompt_id, last_turn_only=True) == entries[1:]


def test_a_prompt_id_no_line_can_hold_gives_the_last_turn(tmp_path: Path) -> None:
    """A hook input's prompt id holding a lone surrogate (valid JSON) matches no line: the
    last turn is the turn, as for any prompt id the tail lacks."""
    entries = _two_turns(2)
    path = _lines(tmp_path, entries)
    assert tail_entries(str(path), "\ud800", last_turn_only=True) == entries[4:]


@pytest.mark.parametrize("chunk", [transcripts.CHUNK_BYTES, 100])
def test_a_tail_starting_at_a_line_start_keeps_that_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The tail (made small here) starts exactly where a line starts: that line is whole,
    so it is read, though it is the tail's first; whole chunks read backwards alike."""
    monkeypatch.setattr(transcripts, "CHUNK_BYTES", chunk)
    entries = _two_turns(2)
    path = _lines(tmp_path, entries)
    first = len(json.dumps(entries[0])) + 1
    monkeypatch.setattr(transcripts, "TAIL_BYTES", path.stat().st_size - first)
    assert tail_entries(str(path)) == entries[1:]
    assert tail_entries(str(path), "p1", last_turn_only=True) == entries[1:]
    assert read_turn(tail_entries(str(path), "p1", last_turn_only=True)).prompt == (
        "how is the retry policy decided?"
    )


def test_a_transcript_that_is_no_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO is opened without waiting for a writer, then refused; a missing file and a
    folder are refused too, each message naming the path and the fault."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    raised: list[BaseException] = []

    def read() -> None:
        try:
            tail_entries(str(fifo))
        except TranscriptError as exc:
            raised.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    blocked = reader.is_alive()
    if blocked:  # waiting for a writer to open the FIFO: one lets it go
        with open(fifo, "wb"):
            reader.join()
    assert not blocked
    assert [str(e) for e in raised] == [f"transcript {fifo} is not a regular file"]
    with pytest.raises(TranscriptError, match=f"^transcript {tmp_path} is not a regular file$"):
        tail_entries(str(tmp_path))
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(TranscriptError, match=r"missing\.jsonl cannot be opened \(No such file"):
        tail_entries(str(missing))


def test_a_terminal_given_as_transcript_is_refused_without_becoming_the_controlling_one() -> None:
    """A session leader with no terminal (a hook started detached) handed a terminal's
    path refuses it, and the open (``O_NOCTTY``) did not make it the session's terminal.
    The leader is a forked child, so the code under test is this process's."""
    master, slave = os.openpty()
    name = os.ttyname(slave)
    os.close(slave)
    # Read here too, so that a tool mapping tests to the code they run (mutmut) sees it.
    with pytest.raises(TranscriptError, match=rf"^transcript {name} is not a regular file$"):
        tail_entries(name)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which only exits
        code = 3
        try:
            os.setsid()
            try:
                tail_entries(name)
            except TranscriptError:
                code = 2
            try:
                os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
            except OSError:  # ENXIO: the session still has no terminal
                code -= 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0


def _assistant(content: Any, ident: str | None = None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if ident is not None:
        message["id"] = ident
    return {"type": "assistant", "message": message, **extra}


def _call(ident: str, name: str | None, arguments: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": ident, "input": arguments}
    return _assistant([block] if name is None else [{**block, "name": name}])


def _answered(ident: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": ident, "content": content}
    return _user([block], "p1", **extra)


def test_a_turn_says_what_it_read_edited_and_what_each_read_returned() -> None:
    """The prompt given as text blocks, each Read with its ``toolUseResult``; calls that
    read nothing (an Edit of a file_path, a call without a name or with odd input, a
    malformed block or message) neither count as reads nor stop the reading."""
    read_only = read_turn(
        [
            _user(
                [
                    {"type": "text", "text": "where is X?"},
                    "odd",
                    {"type": "image"},
                    {"type": "text", "text": "(in the server)"},
                ],
                "p1",
            ),
            {"type": "user", "message": "not a message"},
            _read_call("t1", "/repo/a.py"),
            _user(
                [None, {"type": "tool_result", "tool_use_id": "t1", "content": "1"}],
                "p1",
                toolUseResult={"file": {"filePath": "/repo/a.py"}},
            ),
            _call("t2", None, {"file_path": "/repo/b.py"}),
            _answered("t2"),
            _call("t3", "Grep", None),
            _answered("t3"),
            _assistant([None, {"type": "text", "text": "X is in a.py"}]),
        ]
    )
    assert read_only == Turn(
        prompt="where is X?\n(in the server)",
        read=["/repo/a.py"],
        reads=[("/repo/a.py", {"file": {"filePath": "/repo/a.py"}})],
        edited=False,
        recorded=False,
        fresh_served=False,
        feedback=[],
        final_text="X is in a.py",
    )
    edited = read_turn(
        [_user("fix it", "p1"), _call("e1", "Edit", {"file_path": "/repo/a.py"}), _answered("e1")]
    )
    assert (edited.read, edited.edited) == ([], True)


def test_a_sub_agents_calls_and_prompts_are_not_the_turns() -> None:
    """A sidechain entry (a sub-agent's) neither answers the main agent's call, nor
    makes a call the main agent's result answers, nor starts a turn."""
    entries = [
        _user("how is the retry policy decided?", "p1"),
        _user("sub-agent task", "p1", isSidechain=True),
        _read_call("t1", "/repo/main-call.py"),
        _answered("t1", isSidechain=True),
        {**_read_call("t2", "/repo/sub-call.py"), "isSidechain": True},
        _answered("t2"),
        _read_call("t3", "/repo/a.py"),
        _answered("t3"),
        _assistant("the answer"),
        _assistant("a sub-agent's answer", isSidechain=True),
    ]
    turn = last_turn(entries, None)
    assert turn == entries
    found = read_turn(turn)
    assert (found.prompt, found.read, found.final_text) == (
        "how is the retry policy decided?",
        ["/repo/a.py"],
        "the answer",
    )


@pytest.mark.parametrize(
    ("name", "arguments", "recorded"),
    [
        ("mcp__explomemo__memory_exploration_record", {"question": "q"}, True),
        ("mcp__other__memory_exploration_record", {}, True),
        ("Bash", {"command": "explomemo record --question q"}, True),
        ("Bash", {"command": "cd /r && /home/u/.local/bin/explomemo record -q x"}, True),
        ("Bash", {"command": "explomemo list"}, False),
        ("Bash", {"command": "record explomemo list"}, False),
        ("Bash", {"command": ["explomemo", "record"]}, False),
        ("Bash", {}, False),
        ("Grep", {"command": "explomemo record"}, False),
    ],
)
def test_a_memo_is_recorded_by_the_tool_or_by_explomemo_record_through_bash(
    name: str, arguments: dict[str, Any], recorded: bool
) -> None:
    turn = read_turn([_user("q?", "p1"), _call("r1", name, arguments), _answered("r1")])
    assert turn.recorded is recorded


def _memo(status: str, **more: Any) -> dict[str, Any]:
    return {"id": 1, "status": status, **more}


@pytest.mark.parametrize(
    ("tool", "answer", "fresh"),
    [
        (
            "recall",
            {"matches": [_memo("stale", conclusion="c"), _memo("fresh", conclusion="")]},
            True,
        ),
        ("recall", {"matches": [_memo("stale", conclusion="c"), _memo("fresh")]}, False),
        ("recall", {"matches": []}, False),
        ("show", _memo("fresh", conclusion="c"), True),
        ("show", _memo("stale", conclusion="c"), False),
        ("show", _memo("fresh"), False),
        ("show", [_memo("fresh", conclusion="c")], False),
        ("show", "not json", False),
    ],
)
def test_a_fresh_memo_is_served_when_recall_or_show_gave_it_whole(
    tool: str, answer: Any, fresh: bool
) -> None:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    name = f"mcp__explomemo__memory_exploration_{tool}"
    for content in (text, [{"type": "text", "text": text}]):
        turn = read_turn(
            [_user("q?", "p1"), _call("s1", name, {"id": 1}), _answered("s1", content)]
        )
        assert turn.fresh_served is fresh


def _context(
    content: Any, event: str = "UserPromptSubmit", kind: str = "hook_additional_context"
) -> dict[str, Any]:
    attachment = {"type": kind, "hookEvent": event, "content": content}
    return {"type": "attachment", "attachment": attachment}


@pytest.mark.parametrize(
    ("context", "fresh"),
    [
        ([_context(["[memo 3, fresh] how retries work"])], True),
        ([_context("[memo 3, fresh] how retries work")], True),
        ([_context(["[memo 3, stale] how retries work", 5])], False),
        ([_context(["[memo 3, fresh] x"], event="SessionStart")], False),
        ([_context(["[memo 3, fresh] x"], kind="hook_success")], False),
        ([{"type": "user", "attachment": _context(["[memo 3, fresh] x"])["attachment"]}], False),
        ([{"type": "attachment", "attachment": "[memo 3, fresh] x"}], False),
        (
            [
                _context(["[memo 1, fresh] x"], kind="hook_success"),
                _context(["[memo 2, fresh] x"], event="SessionStart"),
                _context(["[memo 3, fresh] x"]),
            ],
            True,
        ),
    ],
)
def test_a_fresh_memo_is_served_when_the_prompt_hooks_context_named_one(
    context: list[dict[str, Any]], fresh: bool
) -> None:
    assert read_turn([_user("q?", "p1"), *context, _assistant("a")]).fresh_served is fresh


def test_the_stop_hooks_feedback_is_the_meta_entries_that_carry_it() -> None:
    entries = [
        _user("Stop hook feedback: typed by the user", "p1"),
        _user("Stop hook feedback:\nrecord a memo ", "p1", isMeta=True),
        _user("Caveat: a local command ran", "p1", isMeta=True),
        {"type": "system", "isMeta": True, "message": {"content": "Stop hook feedback: no"}},
    ]
    assert read_turn(entries).feedback == ["record a memo"]


@pytest.mark.parametrize(
    ("entries", "final"),
    [
        (
            [
                _assistant([{"type": "text", "text": "Let me look."}], "m1"),
                _read_call("t1", "/repo/a.py"),
                _answered("t1"),
                _assistant([{"type": "text", "text": "The answer"}], "m2"),
                _assistant([{"type": "tool_use", "id": "t2", "name": "Read"}], "m2"),
                _assistant([{"type": "text", "text": "part two"}], "m2"),
                _assistant(None, "m3"),
                _assistant("a sub-agent's answer", "m4", isSidechain=True),
                _user("Caveat: a local command ran", "p1", isMeta=True),
            ],
            "The answer\npart two",
        ),
        ([_assistant("thinking aloud"), _answered("t1"), _assistant("the answer")], "the answer"),
        (
            [_assistant("a first message", "m1"), {"type": "system"}, _assistant("the last", "m2")],
            "the last",
        ),
    ],
    ids=["one-message-in-entries", "no-message-ids", "two-messages"],
)
def test_the_final_text_is_the_text_of_the_last_assistant_message(
    entries: list[dict[str, Any]], final: str
) -> None:
    assert read_turn([_user("q?", "p1"), *entries]).final_text == final


def test_the_last_turn_is_read_without_reading_the_earlier_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is read backwards only until the turn's prompt: behind 2 MB of earlier
    turns, a short last turn costs one chunk of reading, not the whole tail."""
    entries = _two_turns(2)
    earlier = [_user("x" * 100_000, f"e{n}") for n in range(20)]
    path = _lines(tmp_path, [*earlier, *entries])
    read: list[int] = []
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        data = real_pread(fd, size, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", pread)
    assert tail_entries(str(path), "p2", last_turn_only=True) == entries[4:]
    # One chunk, and the byte before it (whether the chunk starts a line).
    assert sum(read) <= transcripts.CHUNK_BYTES + 1 < path.stat().st_size
