"""The Claude Code hooks: what each adds, when it stays silent, which folder it checks against, and
that it never fails."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    Repo,
    _to,
    invoke_cli,
    open_cache,
    save_captured_turn,
)

from explomemo.check import validity
from explomemo.clients.hooks.memos import BUSY_TIMEOUT_MS
from explomemo.clients.hooks.prompt import PROMPT_BYTES, STALE_LINES
from explomemo.clients.hooks.run import run_hook
from explomemo.clients.hooks.session_start import INDEX_BYTES
from explomemo.recall import prompts


class FailingStdin(io.BytesIO):
    """Standard input whose read fails with ``error`` (an I/O error of the pipe)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def read(self, size: int | None = -1) -> bytes:
        raise self.error


def _hook_error(event: str, error: BaseException) -> bytes:
    out, err = io.BytesIO(), io.BytesIO()
    code = run_hook(event, db=None, project=None, stdin=FailingStdin(error), stdout=out, stderr=err)
    assert (code, out.getvalue()) == (0, b"")
    return err.getvalue()


@pytest.fixture
def project_with_a_memo(tmp_path: Path, db_path: Path) -> Path:
    """A folder with one memo recorded by words about JWT tokens."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "tokens.py").write_text("def verify(token): ...\n")
    with open_cache(db_path) as cache:
        cache.record(
            question="Where are JWT tokens validated?",
            conclusion="tokens.py: tokens.verify() checks the signature.",
            files=["tokens.py"],
            project="shop",
            root=str(root),
        )
    return root


MEMOS = [
    (
        "How is the retry policy of the HTTP client decided?",
        "src/retry.py: RETRIES = 3 with exponential backoff; the client reads it in send().",
        ["src/retry.py", "src/client.py"],
    ),
    (
        "Where are JWT tokens validated?",
        "src/auth.py middleware() calls tokens.verify(); verify() checks the signature.",
        ["src/auth.py", "src/tokens.py", "src/client.py"],
    ),
    (
        "How does the parser handle escape sequences?",
        "src/parser.py unescape() maps backslash sequences through ESCAPES.",
        ["src/parser.py"],
    ),
]


@pytest.fixture
def project(tmp_path: Path, db_path: Path) -> Iterator[Repo]:
    """A repository named shop with three memos recorded by words."""
    repo = Repo(tmp_path / "shop")
    for name in ("retry", "client", "auth", "tokens", "parser"):
        repo.write(f"src/{name}.py", f"# {name}\n")
    repo.commit("code")
    with open_cache(db_path) as cache:
        for question, conclusion, files in MEMOS:
            cache.record(question=question, conclusion=conclusion, files=files, root=str(repo.path))
    yield repo


def hook(event: str, payload: Any, db: Path, project: str | None = None) -> tuple[Any, str]:
    """Run a hook in-process: (its JSON answer or None, its stderr)."""
    out, err = io.BytesIO(), io.BytesIO()
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    code = run_hook(event, db=db, project=project, stdin=io.BytesIO(data), stdout=out, stderr=err)
    assert code == 0
    text = out.getvalue().decode()
    return (json.loads(text) if text else None), err.getvalue().decode()


def context(answer: Any, event: str) -> str:
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text: str = answer["hookSpecificOutput"]["additionalContext"]
    return text


def _entry(kind: str, content: Any, prompt_id: str | None = None, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": kind, "message": {"role": kind, "content": content}}
    if prompt_id is not None:
        entry["promptId"] = prompt_id
    return {**entry, **extra}


def transcript(
    path: Path, reads: list[str], record: bool, error_on: str | None = None, edit: bool = True
) -> Path:
    """A transcript in Claude Code's format: an earlier turn, then a turn with these calls
    (and, with ``edit``, an Edit call: the reminder is for turns that changed files)."""
    entries = [
        _entry("user", "earlier question", "p0"),
        _entry(
            "assistant",
            [{"type": "tool_use", "id": "t0", "name": "Read", "input": {"file_path": "/old/x.py"}}],
        ),
        _entry("user", [{"type": "tool_result", "tool_use_id": "t0", "content": "x"}], "p0"),
        _entry("user", "how is the retry policy decided?", "p1"),
    ]
    calls = [("Read", {"file_path": f}) for f in reads]
    if edit:
        calls.append(("Edit", {"file_path": "/old/x.py", "old_string": "a", "new_string": "b"}))
    if record:
        calls.append(("mcp__explomemo__memory_exploration_record", {"question": "q"}))
    for n, (name, arguments) in enumerate(calls):
        ident = f"t{n + 1}"
        entries.append(
            _entry(
                "assistant", [{"type": "tool_use", "id": ident, "name": name, "input": arguments}]
            )
        )
        result = {"type": "tool_result", "tool_use_id": ident, "content": "ok"}
        if error_on is not None and arguments.get("file_path") == error_on:
            result["is_error"] = True
        entries.append(_entry("user", [result], "p1"))
    entries.append(_entry("assistant", [{"type": "text", "text": "The answer."}]))
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def stop_payload(path: Path, cwd: str, active: bool = False) -> dict[str, Any]:
    return {
        "session_id": "s",
        "transcript_path": str(path),
        "cwd": cwd,
        "prompt_id": "p1",
        "hook_event_name": "Stop",
        "stop_hook_active": active,
    }


def _top(tmp_path: Path) -> str:
    """The session's folder: the root the Stop hook checks reads against."""
    top = tmp_path / "repo"
    top.mkdir(exist_ok=True)
    return str(top)


# Hook failure handling: whatever fails, one line on stderr and exit 0 --------


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop"])
def test_a_hook_error_is_one_line_of_at_most_400_characters(event: str) -> None:
    """Kills ``_one_line`` cutting at another length, without its ellipsis, keeping
    new lines and runs of white space, or losing the error's kind when it has no
    message."""
    head = f"explomemo hook {event}: ".encode()
    assert _hook_error(event, OSError("e" * 400)) == head + b"e" * 400 + b"\n"
    assert _hook_error(event, OSError("e" * 401)) == head + ("e" * 399 + "…").encode() + b"\n"
    assert _hook_error(event, OSError(" a \n\tb  c\n")) == head + b"a b c\n"
    assert _hook_error(event, OSError()) == head + b"OSError\n"
    assert _hook_error(event, ValueError("")) == head + b"ValueError\n"


def test_a_hook_error_that_is_not_utf_8_is_still_written() -> None:
    """Kills the error line's encoding failing (``errors="replace"`` dropped) on a
    message holding a file name that is not UTF-8 (a surrogate escape)."""
    line = _hook_error("prompt", OSError("no database at /tmp/caf\udce9/x.db"))
    assert line == b"explomemo hook prompt: no database at /tmp/caf?/x.db\n"


def test_the_hook_command_reads_stdin_and_answers_on_stdout_in_process(
    project_with_a_memo: Path,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """Kills ``run_hook`` taking other streams than the process's own when none is
    given, or answering with anything but one JSON object and a new line."""
    from explomemo.cli.main import main

    payload = {"cwd": str(project_with_a_memo), "prompt": "where are JWT tokens validated?"}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    assert main(["--db", str(db_path), "hook", "prompt"]) == 0
    out, err = capsysbinary.readouterr()
    assert err == b"" and out.endswith(b"}\n") and out.count(b"\n") == 1
    answer = json.loads(out)
    assert "tokens.verify()" in answer["hookSpecificOutput"]["additionalContext"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"[]")))
    assert main(["--db", str(db_path), "hook", "prompt"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == b"" and err.startswith(b"explomemo hook prompt: ") and err.count(b"\n") == 1


def test_a_hook_input_without_cwd_answers_for_the_working_directory(
    project_with_a_memo: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``_root`` losing its default: Claude Code may leave ``cwd`` out, and the
    hook then answers for the folder it runs in."""
    monkeypatch.chdir(project_with_a_memo)
    out, err = io.BytesIO(), io.BytesIO()
    payload = json.dumps({"prompt": "where are JWT tokens validated?"}).encode()
    assert (
        run_hook(
            "prompt", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out, stderr=err
        )
        == 0
    )
    assert err.getvalue() == b""
    assert (
        "tokens.verify()" in json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    )


@pytest.mark.parametrize("cwd", [".", "shop", "../shop"])
def test_a_relative_cwd_is_refused_even_when_it_names_a_folder(
    project_with_a_memo: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str
) -> None:
    """Kills ``_root`` taking a relative ``cwd`` that happens to exist from where the
    hook runs, or refusing it without naming it."""
    monkeypatch.chdir(project_with_a_memo)
    out, err = io.BytesIO(), io.BytesIO()
    payload = json.dumps({"cwd": cwd, "prompt": "where are JWT tokens validated?"}).encode()
    code = run_hook(
        "prompt", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out, stderr=err
    )
    assert (code, out.getvalue()) == (0, b"")
    line = err.getvalue().decode()
    assert line.startswith(f"explomemo hook prompt: cwd {cwd!r} ") and line.count("\n") == 1


@pytest.mark.parametrize("stdin", [b"[1, 2]", b'"text"', b"3", b"null"])
def test_json_that_is_not_an_object_is_named_as_such(db_path: Path, stdin: bytes) -> None:
    """Kills the refusal of a JSON value that is not an object losing its words."""
    out, err = io.BytesIO(), io.BytesIO()
    assert (
        run_hook("stop", db=db_path, project=None, stdin=io.BytesIO(stdin), stdout=out, stderr=err)
        == 0
    )
    assert err.getvalue().startswith(b"explomemo hook stop: stdin is not a JSON object")


def test_session_start_indexes_fresh_memos_and_counts_stale(project: Repo, db_path: Path) -> None:
    answer, err = hook("session-start", {"cwd": str(project.path), "source": "startup"}, db_path)
    text = context(answer, "SessionStart")
    assert err == ""
    assert "3 fresh memos of project 'shop' (their files are unchanged" in text
    # Most files first: the JWT memo rests on three files.
    assert text.index("#2 Where are JWT tokens validated?") < text.index("#1 How is the retry")
    project.write("src/parser.py", "# changed\n")
    text = context(hook("session-start", {"cwd": str(project.path)}, db_path)[0], "SessionStart")
    assert "2 fresh memos of project 'shop'" in text and "1 stale not listed" in text
    assert "#3 " not in text
    assert len(text.encode()) <= INDEX_BYTES


def test_a_folder_reached_through_a_link_is_the_project_it_leads_to(
    project: Repo, tmp_path: Path, db_path: Path
) -> None:
    linked = tmp_path / "linked-shop"
    linked.symlink_to(project.path)
    text = context(hook("session-start", {"cwd": str(linked)}, db_path)[0], "SessionStart")
    assert "3 fresh memos of project 'shop' (their files are unchanged" in text
    # Recorded through the link, it is the same project's memo.
    with open_cache(db_path) as cache:
        recorded = cache.record(
            question="Where is the client built?",
            conclusion="src/client.py",
            files=["src/client.py"],
            root=str(linked),
        )
    assert recorded.project == "shop"
    text = context(hook("session-start", {"cwd": str(project.path)}, db_path)[0], "SessionStart")
    assert "4 fresh memos of project 'shop' (their files are unchanged" in text


def test_session_start_adds_nothing_for_a_project_without_memos(
    project: Repo, db_path: Path
) -> None:
    answer, err = hook("session-start", {"cwd": str(project.path)}, db_path, project="other")
    assert answer is None and err == ""


def test_session_start_index_stays_within_its_budget(tmp_path: Path, db_path: Path) -> None:
    repo = Repo(tmp_path / "big")
    repo.write("a.py", "A = 1\n")
    repo.commit("a")
    with open_cache(db_path) as cache:
        for i in range(200):
            cache.record(
                question=f"question number {i} about a rather long subject " * 3,
                conclusion="c",
                files=["a.py"],
                root=str(repo.path),
            )
    text = context(hook("session-start", {"cwd": str(repo.path)}, db_path)[0], "SessionStart")
    assert len(text.encode()) <= INDEX_BYTES
    assert text.endswith("more.")


def test_prompt_brings_the_memo_that_answers_it(project: Repo, db_path: Path) -> None:
    payload = {"cwd": str(project.path), "prompt": "where do we validate the JWT tokens?"}
    answer, err = hook("prompt", payload, db_path)
    text = context(answer, "UserPromptSubmit")
    assert err == ""
    assert (
        "[memo 2, fresh, 3 files unchanged, recorded here]\n| Where are JWT tokens validated?"
        in text
    )
    assert "tokens.verify()" in text
    assert "memo 1" not in text and "memo 3" not in text


def test_prompt_counts_one_file_as_one_file(project: Repo, db_path: Path) -> None:
    payload = {"cwd": str(project.path), "prompt": "how does the parser handle escape sequences?"}
    text = context(hook("prompt", payload, db_path)[0], "UserPromptSubmit")
    assert (
        "[memo 3, fresh, 1 file unchanged, recorded here]\n| How does the parser handle" in text
    ), text


@pytest.mark.parametrize(
    "prompt",
    [
        "fix the failing test in the parser",
        "commit these changes",
        "how do I center a div in CSS?",
        "hello",
    ],
)
def test_prompt_adds_nothing_when_no_memo_answers(
    project: Repo, db_path: Path, prompt: str
) -> None:
    answer, err = hook("prompt", {"cwd": str(project.path), "prompt": prompt}, db_path)
    assert answer is None and err == ""


def test_prompt_shows_a_stale_memo_with_its_small_diff(project: Repo, db_path: Path) -> None:
    project.write("src/tokens.py", "# rotated keys\n")
    payload = {"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}
    text = context(hook("prompt", payload, db_path)[0], "UserPromptSubmit")
    assert "[memo 2, stale (changed: src/tokens.py), recorded here]" in text
    assert "[memo 2: what changed since it was recorded]" in text
    assert "| -# tokens\n| +# rotated keys" in text


@pytest.mark.parametrize("change", ["many lines", "a missing file"])
def test_prompt_leaves_out_a_stale_memo_whose_change_it_cannot_show(
    project: Repo, db_path: Path, change: str
) -> None:
    """A stale memo comes unasked only with a change small enough to show (STALE_LINES)."""
    if change == "many lines":
        project.write("src/tokens.py", "".join(f"line {n}\n" for n in range(STALE_LINES + 1)))
    else:
        (project.path / "src" / "auth.py").unlink()
    payload = {"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}
    answer, err = hook("prompt", payload, db_path)
    assert err == ""
    assert answer is None or "memo 2" not in context(answer, "UserPromptSubmit")


@pytest.mark.parametrize(
    "prompt",
    [
        "why does Settings __init__ validate every key?",
        "why does load_config validate every key?",
    ],
)
def test_prompt_finds_identifiers_as_recall_does_per_project(
    project: Repo, db_path: Path, prompt: str
) -> None:
    """The memo's question shares no word with the prompt: only a distinctive identifier
    (``__init__``, which the hook's own rule missed; ``load_config``, which three memos
    of another project hold too) brings it."""
    project.write("src/settings.py", "KEYS = ()\n")
    project.commit("settings")
    with open_cache(db_path) as cache:
        cache.record(
            question="How is the configuration loaded at start-up?",
            conclusion="src/settings.py: load_config() reads config.toml; __init__ of Settings"
            " validates every key.",
            files=["src/settings.py"],
            root=str(project.path),
        )
        for i in range(3):
            cache.record(
                question=f"What does loader {i} do?",
                conclusion=f"load_config() and __init__ of loader {i} validate every key.",
                files=["src/settings.py"],
                project="other",
                root=str(project.path),
            )
    answer, err = hook("prompt", {"cwd": str(project.path), "prompt": prompt}, db_path)
    assert err == ""
    assert "]\n| How is the configuration loaded at start-up?" in context(
        answer, "UserPromptSubmit"
    )


def test_an_identifier_two_memos_hold_brings_them_and_one_three_hold_does_not(
    project: Repo, db_path: Path
) -> None:
    """Kills ``_naming_rarely`` taking "at most IDENTIFIER_MEMOS" for "fewer than" (or
    more): the memo's question shares one word with the prompt, so only the
    identifier, held by exactly two memos of the project, brings it; once a third
    memo holds it, it is no longer distinctive and nothing does."""
    project.write("src/settings.py", "KEYS = ()\n")
    project.commit("settings")
    prompt = {"cwd": str(project.path), "prompt": "why does load_config validate every key?"}
    question = "How is the configuration loaded at start-up?"
    with open_cache(db_path) as cache:
        cache.record(
            question=question,
            conclusion="src/settings.py: load_config() reads config.toml and validates every key.",
            files=["src/settings.py"],
            root=str(project.path),
        )
        cache.record(
            question="What runs at exit?",
            conclusion="atexit hooks; nothing calls load_config() again.",
            files=["src/settings.py"],
            root=str(project.path),
        )
    answer, err = hook("prompt", prompt, db_path)
    assert err == "" and answer is not None, "the identifier of two memos brought nothing"
    assert f"]\n| {question}" in context(answer, "UserPromptSubmit")
    with open_cache(db_path) as cache:
        cache.record(
            question="How are plugins configured?",
            conclusion="plugins call load_config() for their own section.",
            files=["src/settings.py"],
            root=str(project.path),
        )
    answer, err = hook("prompt", prompt, db_path)
    assert err == ""
    assert answer is None or question not in context(answer, "UserPromptSubmit")


def test_task_words_are_not_what_a_prompt_is_about(project: Repo, db_path: Path) -> None:
    """Kills the prompt hook counting task words (fix, add, test, ...) as content words:
    no memo holds them, so their rarity would outweigh what the prompt is about and
    the memo that answers it would not come."""
    assert prompts.content_stems("please fix and test the failing parser") == {"parser": "parser"}
    payload = {
        "cwd": str(project.path),
        "prompt": "please fix, add and test the retry policy of the HTTP client",
    }
    answer, err = hook("prompt", payload, db_path)
    assert err == "" and answer is not None, "the task words outweighed the prompt's subject"
    text = context(answer, "UserPromptSubmit")
    assert "]\n| How is the retry policy of the HTTP client decided?" in text


def _shown(db: Path, root: Path, prompt: str) -> str:
    """What the prompt hook adds for ``prompt`` in ``root`` ("" for nothing), with no error."""
    answer, err = hook("prompt", {"cwd": str(root), "prompt": prompt}, db)
    assert err == ""
    return "" if answer is None else context(answer, "UserPromptSubmit")


#: A memo: (question, conclusion, project; None: its folder's, "jobs").
Memo = tuple[str, str, str | None]


def _jobs(tmp_path: Path, db: Path, memos: list[Memo], files: Sequence[str] = ("a.py",)) -> Path:
    """A folder named jobs holding ``files`` (whose words no prompt below uses, unless
    said), and ``memos`` recorded on them."""
    root = tmp_path / "jobs"
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("A = 1\n")
    with open_cache(db) as cache:
        for question, conclusion, project in memos:
            cache.record(
                question=question,
                conclusion=conclusion,
                files=list(files),
                project=project,
                root=str(root),
            )
    return root


def _logging(count: int) -> list[Memo]:
    """``count`` memos of another project about what the queue worker logs on retry."""
    return [
        (f"What does the queue worker log, case {i}?", "Each retry.", "other") for i in range(count)
    ]


@pytest.mark.parametrize(
    ("memos", "prompt", "answers", "does_not"),
    [
        # Words are weighed by how few memos hold them: "queue" and "worker" are in all
        # five memos, "retry" in four; the memo without "retry" does not answer.
        pytest.param(
            [
                ("How does the queue worker retry?", "a.py: three times, then dropped.", None),
                ("Where is the queue worker?", "a.py starts it at boot.", None),
                *_logging(3),
            ],
            "how does the queue worker retry?",
            "How does the queue worker retry?",
            "Where is the queue worker?",
            id="words-every-memo-holds",
        ),
        # Two-letter words are content: "db" and "ui" tell the two memos apart.
        pytest.param(
            [
                ("How is the DB schema migrated?", "a.py runs the steps in order.", None),
                ("How is the UI schema migrated?", "a.py keeps the layout versions.", None),
            ],
            "how is the db schema migrated?",
            "How is the DB schema migrated?",
            "How is the UI schema migrated?",
            id="two-letter-words",
        ),
        # A question of stop words only asks nothing a prompt could cover: its memo does
        # not come by words, even though its conclusion holds every word of the prompt.
        pytest.param(
            [
                ("What does it do?", "The retry backoff doubles each time.", None),
                ("Where is the retry backoff?", "a.py doubles it each time.", None),
            ],
            "what is the retry backoff?",
            "Where is the retry backoff?",
            "What does it do?",
            id="question-without-content-words",
        ),
        # The memo holding only "billing" ranks first by BM25 (the other words are in half
        # the memos, so BM25 gives them nearly nothing) but covers too little of the
        # prompt: it is passed over, and the memo after it still comes.
        pytest.param(
            [
                ("What is billing?", "Invoices.", None),
                ("How does the queue worker retry with backoff?", "a.py doubles it.", None),
                *[
                    ("How does the queue worker retry with backoff?", "Once.", f"other{i}")
                    for i in range(3)
                ],
                *[
                    (f"How is the logger configured, case {i}?", "In a.py.", "other")
                    for i in range(3)
                ],
            ],
            "how does the queue worker retry with backoff for billing?",
            "How does the queue worker retry with backoff?",
            "What is billing?",
            id="first-candidate-does-not-answer",
        ),
    ],
)
def test_of_two_memos_sharing_words_with_a_prompt_only_the_one_answering_it_comes(
    tmp_path: Path, db_path: Path, memos: list[Memo], prompt: str, answers: str, does_not: str
) -> None:
    text = _shown(db_path, _jobs(tmp_path, db_path, memos), prompt)
    assert f"]\n| {answers}" in text
    assert does_not not in text


def test_a_prompt_word_no_memo_holds_weighs_most(tmp_path: Path, db_path: Path) -> None:
    """No memo holds "billing", the rarest word of the prompt: the memo about the queue
    worker's retries (words three or four of the seven memos hold) does not answer a
    prompt about the billing queue worker, while it answers the same prompt without it."""
    answer = "How does the queue worker retry?"
    root = _jobs(
        tmp_path,
        db_path,
        [
            (answer, "a.py: three times, then dropped.", None),
            *_logging(2),
            ("Who starts the queue worker?", "The scheduler.", "other"),
            *[(f"How is the logger configured, case {i}?", "In a.py.", "other") for i in range(3)],
        ],
    )
    assert f"]\n| {answer}" in _shown(db_path, root, "how does the queue worker retry?")
    assert _shown(db_path, root, "how does the billing queue worker retry?") == ""


def test_the_paths_of_a_memo_are_words_it_holds(tmp_path: Path, db_path: Path) -> None:
    """The words "lexer" and "tokens" are only in the memo's file paths, each path a word apart
    from the next: the memo holds every word of the prompt and answers it."""
    question = "Where is the grammar?"
    root = _jobs(
        tmp_path,
        db_path,
        [(question, "It is split in two.", None)],
        files=("a.py", "lexer/x.py", "tokens/y.py"),
    )
    assert f"]\n| {question}" in _shown(db_path, root, "where is the grammar of the lexer tokens?")


def test_the_memo_that_answers_best_comes_first(project: Repo, db_path: Path) -> None:
    """Memo 4 asks the prompt's question word for word; memo 1, recorded before it, lacks
    "uploads": both answer, memo 4 first."""
    question = "How is the retry policy of the HTTP client decided for uploads?"
    with open_cache(db_path) as cache:
        cache.record(
            question=question,
            conclusion="src/retry.py: uploads retry 5 times.",
            files=["src/retry.py"],
            root=str(project.path),
        )
    text = _shown(db_path, project.path, question)
    assert f"[memo 4, fresh, 1 file unchanged, recorded here]\n| {question}" in text
    assert "[memo 1, " in text
    assert text.index("[memo 4, ") < text.index("[memo 1, ")


#: Twenty words that no stop word, task word or stem of another makes one.
NATO = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike"
    " november oscar papa quebec romeo sierra tango"
).split()


def _cutoff_share() -> int:
    """How many of NATO's words hold exactly CUTOFF of their weight when all weigh the same."""
    held = round(prompts.CUTOFF * len(NATO))
    assert held / len(NATO) == prompts.CUTOFF
    return held


def test_a_memo_scoring_exactly_the_cutoff_comes(tmp_path: Path, db_path: Path) -> None:
    """Twenty prompt words, each held by one memo, weigh the same; the memo holding
    CUTOFF of them (9 of 20) scores the cut-off exactly, and a memo scoring it comes."""
    held = _cutoff_share()
    question = " ".join(NATO[:held]) + "?"
    memos: list[Memo] = [(question, "Nothing else.", None), (" ".join(NATO[held:]), "No.", "other")]
    assert f"]\n| {question}" in _shown(db_path, _jobs(tmp_path, db_path, memos), " ".join(NATO))


def test_an_identifier_lifts_only_a_memo_its_words_leave_under_the_cutoff(
    tmp_path: Path, db_path: Path
) -> None:
    """The memo holding ``load_config`` scores the cut-off exactly by words (the prompt
    covers 9 of the 20 words of its question): it keeps that score, below the memo of
    plain words that covers the question whole and half the prompt, and comes after it."""
    held = _cutoff_share()
    named = " ".join(NATO) + "?"
    plain = "How do amber basil cedar daisy elm fern ginger hazel load config?"
    memos: list[Memo] = [(named, "load_config() reads it.", None), (plain, "No.", None)]
    prompt = " ".join(NATO[:held]) + " amber basil cedar daisy elm fern ginger hazel load_config"
    text = _shown(db_path, _jobs(tmp_path, db_path, memos), prompt)
    assert f"]\n| {named}" in text and f"]\n| {plain}" in text
    assert text.index(plain) < text.index(named)


def test_a_word_index_row_whose_memo_is_gone_is_skipped(project: Repo, db_path: Path) -> None:
    """A database another program edited can hold a word-index row whose memo row was
    deleted; when it ranks first, the memos after it still come."""
    with open_cache(db_path) as cache:
        cache.record(
            question="JWT tokens validated: JWT tokens?",
            conclusion="JWT tokens validated.",
            files=["src/tokens.py"],
            root=str(project.path),
        )
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM memos WHERE id = 4")
    conn.close()
    text = _shown(db_path, project.path, "where are JWT tokens validated?")
    assert (
        "[memo 2, fresh, 3 files unchanged, recorded here]\n| Where are JWT tokens validated?"
        in text
    )
    assert "[memo 4" not in text


def test_a_memo_of_another_project_that_cannot_be_read_leaves_the_match_alone(
    project: Repo, tmp_path: Path, db_path: Path
) -> None:
    """A database another program edited can hold text that is not UTF-8; the hook reads
    only the memos it matched, so one of another project does not stop its answer."""
    _jobs(tmp_path, db_path, [("How are invoices numbered?", "a.py: A counts them.", "other")])
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE memos SET conclusion = CAST(X'C328' AS TEXT) WHERE project = 'other'")
    conn.close()
    text = _shown(db_path, project.path, "where are JWT tokens validated?")
    assert (
        "[memo 2, fresh, 3 files unchanged, recorded here]\n| Where are JWT tokens validated?"
        in text
    )


def test_prompt_context_stays_within_its_budget(tmp_path: Path, db_path: Path) -> None:
    repo = Repo(tmp_path / "verbose")
    repo.write("a.py", "A = 1\n")
    repo.commit("a")
    with open_cache(db_path) as cache:
        for i in range(4):
            cache.record(
                question=f"How is the frobnicator pipeline wired, variant {i}?",
                conclusion="The frobnicator pipeline is wired like this. " * 400,
                files=["a.py"],
                root=str(repo.path),
            )
    payload = {"cwd": str(repo.path), "prompt": "how is the frobnicator pipeline wired?"}
    text = context(hook("prompt", payload, db_path)[0], "UserPromptSubmit")
    assert len(text.encode()) <= PROMPT_BYTES
    assert text.count("[memo ") == 3


# Stop --------------------------------------------------------------------------


@pytest.fixture
def remind_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Stop hook's reminder switched on (it is off unless the user opts in)."""
    monkeypatch.setenv("EXPLOMEMO_REMIND", "on")


def test_the_stop_hook_setup_writes_reminds_only_when_set_up_with_remind(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Stop hook's command exactly as ``setup claude-code`` writes it, run as Claude Code
    runs it (its own process, the hook input on stdin): after a turn that changed files
    and read three, it blocks only when set up with ``--remind`` or when
    ``EXPLOMEMO_REMIND`` is on (issue 38)."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no claude: setup writes files only
    top = _top(tmp_path)
    path = transcript(tmp_path / "t.jsonl", [f"{top}/src/{n}.py" for n in "abc"], record=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPLOMEMO_", "CLAUDE"))}

    def stop_hook(*options: str, **more: str) -> Any:
        run = invoke_cli(["--db", str(db_path), "setup", "claude-code", "--root", top, *options])
        assert run.exit_code == 0, run.stderr
        settings = json.loads(Path(top, ".claude", "settings.local.json").read_text())
        (group,) = settings["hooks"]["Stop"]
        done = subprocess.run(
            group["hooks"][0]["command"],
            shell=True,
            input=json.dumps(stop_payload(path, top)),
            capture_output=True,
            text=True,
            env={**env, **more},
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        return json.loads(done.stdout) if done.stdout else None

    assert stop_hook() is None
    assert stop_hook(EXPLOMEMO_REMIND="on")["decision"] == "block"
    answer = stop_hook("--remind")
    assert answer["decision"] == "block"
    assert "read 3 files (src/a.py, src/b.py, src/c.py)" in answer["reason"]
    assert stop_hook()["decision"] == "block"  # setup again keeps --remind
    assert stop_hook(EXPLOMEMO_REMIND="off") is None
    assert stop_hook("--no-remind") is None


@pytest.mark.usefixtures("remind_on")
def test_stop_blocks_once_when_files_were_read_and_nothing_recorded(
    tmp_path: Path, db_path: Path
) -> None:
    top = _top(tmp_path)
    files = [f"{top}/src/{n}.py" for n in ("a", "b", "c")]
    path = transcript(tmp_path / "t.jsonl", files, record=False)
    answer, err = hook("stop", stop_payload(path, top), db_path)
    assert answer["decision"] == "block" and err == ""
    assert "read 3 files (src/a.py, src/b.py, src/c.py)" in answer["reason"]
    assert "memory_exploration_record" in answer["reason"]
    # The agent answers the block: Claude Code says so, and the hook lets it finish.
    assert hook("stop", stop_payload(path, top, active=True), db_path) == (None, "")


def test_run_hook_passes_remind_to_the_stop_hook(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--remind`` in process (``EXPLOMEMO_REMIND`` unset): the Stop hook blocks with it
    and not without. The in-process twin of
    ``test_the_stop_hook_setup_writes_reminds_only_when_set_up_with_remind``; kills
    ``run_hook`` 39 and 40 (``remind`` not passed on, or passed as None), and 2 (no
    reminder unless asked: ``remind`` defaults to off)."""
    monkeypatch.delenv("EXPLOMEMO_REMIND", raising=False)
    top = _top(tmp_path)
    path = transcript(tmp_path / "t.jsonl", [f"{top}/src/{n}.py" for n in "abc"], record=False)

    def stop_hook(**remind: bool) -> bytes:
        out, err = io.BytesIO(), io.BytesIO()
        payload = json.dumps(stop_payload(path, top)).encode()
        code = run_hook(
            "stop", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out,
            stderr=err, **remind,
        )  # fmt: skip
        assert (code, err.getvalue()) == (0, b"")
        return out.getvalue()

    assert stop_hook() == b""
    assert stop_hook(remind=False) == b""
    assert json.loads(stop_hook(remind=True))["decision"] == "block"


@pytest.mark.usefixtures("remind_on")
def test_stop_is_silent_when_a_memo_was_recorded(tmp_path: Path, db_path: Path) -> None:
    top = _top(tmp_path)
    files = [f"{top}/src/{n}.py" for n in ("a", "b", "c", "d")]
    path = transcript(tmp_path / "t.jsonl", files, record=True)
    assert hook("stop", stop_payload(path, top), db_path) == (None, "")


@pytest.mark.usefixtures("remind_on")
def test_stop_counts_only_this_turns_successful_reads(tmp_path: Path, db_path: Path) -> None:
    top = _top(tmp_path)
    files = [f"{top}/a.py", f"{top}/b.py", f"{top}/c.py"]
    path = transcript(tmp_path / "t.jsonl", files, record=False, error_on=f"{top}/c.py")
    assert hook("stop", stop_payload(path, top), db_path) == (None, "")


@pytest.mark.usefixtures("remind_on")
def test_stop_counts_only_files_inside_the_root(tmp_path: Path, db_path: Path) -> None:
    """Files ``record`` would refuse (outside root, also through ``..`` or a link) do not
    count: reading three of them and one project file asks for nothing."""
    top = _top(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (Path(top) / "vendor").symlink_to(tmp_path / "elsewhere")
    outside = ["/etc/hosts", f"{top}/../other/x.py", f"{top}/vendor/lib.py", "/etc/passwd"]
    path = transcript(tmp_path / "t.jsonl", [*outside, f"{top}/src/a.py"], record=False)
    assert hook("stop", stop_payload(path, top), db_path) == (None, "")
    # Two more project files make three inside: only those are counted and named.
    path = transcript(
        tmp_path / "t.jsonl", [*outside, f"{top}/src/a.py", f"{top}/b.py", f"{top}/c.py"], False
    )
    answer, err = hook("stop", stop_payload(path, top), db_path)
    assert answer["decision"] == "block" and err == ""
    assert "read 3 files (src/a.py, b.py, c.py) and recorded" in answer["reason"]
    assert "/etc" not in answer["reason"] and "lib.py" not in answer["reason"]


@pytest.mark.usefixtures("remind_on")
def test_stop_skips_a_transcript_line_nested_too_deep_to_parse(
    tmp_path: Path, db_path: Path
) -> None:
    top = _top(tmp_path)
    files = [f"{top}/src/{n}.py" for n in ("a", "b", "c")]
    path = transcript(tmp_path / "t.jsonl", files, record=False)
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(len(lines) - 1, "[" * 100_000 + "]" * 100_000 + "\n")
    path.write_text("".join(lines))
    answer, err = hook("stop", stop_payload(path, top), db_path)
    assert answer["decision"] == "block" and err == ""
    assert "read 3 files (src/a.py, src/b.py, src/c.py)" in answer["reason"]


# Never failing the client ---------------------------------------------------------


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop"])
@pytest.mark.parametrize(
    ("stdin", "fragment"),
    [
        (b"{not json", "stdin is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"cwd": 5, "prompt": 5, "transcript_path": 5}', "not a str"),
    ],
)
def test_malformed_input_is_one_line_and_nothing_added(
    db_path: Path, event: str, stdin: bytes, fragment: str
) -> None:
    answer, err = hook(event, stdin, db_path)
    assert answer is None
    assert err.count("\n") == 1 and err.startswith(f"explomemo hook {event}: ")
    assert fragment in err


def test_the_error_line_escapes_control_characters(tmp_path: Path) -> None:
    db = tmp_path / "no\x1b]52;c;SGVsbG8=\x07" / "x.db"
    db.parent.mkdir()
    db.write_bytes(b"not a database, " * 512)
    answer, err = hook("session-start", {"cwd": str(tmp_path)}, db)
    assert answer is None and err.count("\n") == 1
    assert "no\\x1b]52;c;SGVsbG8=\\x07" in err and "\x1b" not in err and "\x07" not in err


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_missing_database_is_silent_and_is_not_created(tmp_path: Path, event: str) -> None:
    """Nothing recorded yet is no error: the hooks that only read say nothing at all."""
    db = tmp_path / "none" / "x.db"
    answer, err = hook(event, {"cwd": str(tmp_path), "prompt": "where is auth"}, db)
    assert (answer, err) == (None, "")
    assert not db.parent.exists()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_locked_database_is_one_line_without_waiting(
    project: Repo, db_path: Path, event: str
) -> None:
    holder = sqlite3.connect(db_path, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("DELETE FROM file_stats")
        payload = {"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}
        answer, err = hook(event, payload, db_path)
    finally:
        holder.close()
    assert answer is None and "locked" in err and err.count("\n") == 1


@pytest.mark.timeout(20)
@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_write_lock_is_waited_for_at_most_the_hooks_busy_timeout(
    project: Repo, db_path: Path, event: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writing (a shared WAL lock, not an exclusive one): the hook still
    reads, reaches the stat-cache write, and no statement of it waits longer than 50 ms."""
    monkeypatch.setattr(validity, "RACY_NS", -1)  # the stat cache is written at once
    statements: list[str] = []
    timeouts: list[float] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        timeouts.append(kwargs.get("timeout", 5.0))
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    holder = real_connect(db_path, isolation_level=None)
    try:
        holder.execute("DELETE FROM file_stats")
        holder.execute("BEGIN IMMEDIATE")
        monkeypatch.setattr(sqlite3, "connect", connect)
        payload = {"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}
        answer, err = hook(event, payload, db_path)
    finally:
        monkeypatch.setattr(sqlite3, "connect", real_connect)
        holder.close()
    assert answer is not None and err == ""
    assert "BEGIN IMMEDIATE" in statements  # the stat-cache write was tried
    waits = [int(s.split("=")[1]) for s in statements if s.startswith("PRAGMA busy_timeout")]
    assert waits and max(waits) <= BUSY_TIMEOUT_MS
    assert max(timeouts) <= BUSY_TIMEOUT_MS / 1000


def test_the_command_exits_0_even_on_a_bad_command_line(db_path: Path) -> None:
    for args in (["hook", "prompt", "--bogus"], ["hook", "nosuchevent"]):
        done = subprocess.run(
            [sys.executable, "-m", "explomemo", "--db", str(db_path), *args],
            input=b"{}",
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0 and done.stdout == b""
        assert done.stderr.count(b"\n") == 1, done.stderr


def test_the_command_answers_over_real_stdio(project: Repo, db_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "hook", "prompt"],
        input=json.dumps({"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""
    assert "tokens.verify()" in context(json.loads(done.stdout), "UserPromptSubmit")


def test_a_session_in_a_subfolder_sees_the_memos_fresh(
    project: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks check memos against $CLAUDE_PROJECT_DIR, as the server does, not the session's
    cwd, which follows its shell into subfolders."""
    src = str(project.path / "src")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project.path))
    answer, err = hook("session-start", {"cwd": src, "source": "startup"}, db_path)
    assert err == ""
    assert "3 fresh memos of project" in context(answer, "SessionStart")
    payload = {"cwd": src, "prompt": "where are JWT tokens validated?"}
    text = context(hook("prompt", payload, db_path)[0], "UserPromptSubmit")
    assert (
        "[memo 2, fresh, 3 files unchanged, recorded here]\n| Where are JWT tokens validated?"
        in text
    )
    assert "missing" not in text


def test_without_a_usable_project_dir_the_cwd_is_the_root(
    project: Repo, db_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The hooks check memos against $CLAUDE_PROJECT_DIR, as the server does, not the session's
    cwd, which follows its shell into subfolders."""
    src = str(project.path / "src")
    # Unset: the cwd, where every recorded path is missing.
    # (every memo is stale there, and the index lists fresh memos only: nothing)
    assert hook("session-start", {"cwd": src}, db_path) == (None, "")
    # Relative, or not an existing folder: the cwd, here the project's top.
    for given in ("shop", str(tmp_path / "gone"), str(project.path / "src" / "auth.py")):
        monkeypatch.setenv("CLAUDE_PROJECT_DIR", given)
        text = context(
            hook("session-start", {"cwd": str(project.path)}, db_path)[0], "SessionStart"
        )
        assert "3 fresh memos of project" in text, given
        assert hook("session-start", {"cwd": src}, db_path) == (None, ""), given


@pytest.mark.usefixtures("remind_on")
def test_stop_names_the_files_read_relative_to_the_project_dir(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks check memos against $CLAUDE_PROJECT_DIR, as the server does, not the session's
    cwd, which follows its shell into subfolders."""
    top = tmp_path / "top"
    (top / "src").mkdir(parents=True)
    reads = [str(top / "src" / f"{name}.py") for name in ("a", "b", "c")]
    path = transcript(tmp_path / "t.jsonl", reads, record=False)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(top))
    answer, _ = hook("stop", stop_payload(path, str(top / "src")), db_path)
    assert "read 3 files (src/a.py, src/b.py, src/c.py)" in answer["reason"]


def test_the_command_reads_the_variable_claude_code_sets(project: Repo, db_path: Path) -> None:
    # As Claude Code runs it: its own process, the variable in its environment.
    """The hooks check memos against $CLAUDE_PROJECT_DIR, as the server does, not the session's
    cwd, which follows its shell into subfolders."""
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "hook", "session-start"],
        input=json.dumps({"cwd": str(project.path / "src"), "source": "startup"}),
        capture_output=True,
        text=True,
        cwd=project.path / "src",
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(project.path)},
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    assert "3 fresh memos of project" in context(json.loads(done.stdout), "SessionStart")


# A standard output that cannot be written -----------------------------------


def test_a_hook_whose_output_cannot_be_written_exits_0(one_memo: tuple[Path, Path]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    payload = json.dumps({"cwd": str(export.parent), "source": "startup"})
    args = ["--db", str(db), "hook", "session-start", "--project", "p"]
    with open("/dev/full", "w") as full:
        run = _to(full, args, export.parent, stdin=payload)
    assert run.code == 0 and len(run.err.splitlines()) == 1, run.err
    assert "explomemo hook session-start:" in run.err and "standard output" in run.err
    assert "Traceback" not in run.err


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_database_being_created_is_as_silent_as_none(tmp_path: Path, event: str) -> None:
    """A hook that opens the file a starting server is creating (no schema committed
    yet) finds nothing recorded there: no error, no advice to upgrade it."""
    db = tmp_path / "x.db"
    sqlite3.connect(db).close()  # the file exists, no table yet
    answer, err = hook(event, {"cwd": str(tmp_path), "prompt": "where is auth"}, db)
    assert (answer, err) == (None, "")
    assert db.stat().st_size == 0  # a reader created and migrated nothing


@pytest.mark.parametrize(
    ("origin", "said"),
    [("transcript", "captured here from a turn"), ("subagent", "captured here from a delegated")],
)
def test_prompt_brings_a_captured_turn_only_to_a_prompt_asking_it_again(
    project: Repo, db_path: Path, origin: str, said: str
) -> None:
    """A delegated run's memo too: on replayed real sessions the prompt hook brought three
    to tasks and follow-ups, none of them answered."""
    question = (
        "why does the token refresher log 'refresh window closed before expiry' when the"
        " signing key rotates during a request?"
    )
    conclusion = "The refresher compares the old key id."
    save_captured_turn(db_path, project.path, "src/tokens.py", question, conclusion, "shop")
    with open_cache(db_path) as cache, cache.store.write() as conn:
        conn.execute("UPDATE memos SET origin = ? WHERE question = ?", (origin, question))
    again = (
        "we saw the token refresher log 'refresh window closed before expiry' again as the"
        " signing key rotates during a request, why?"
    )
    # Its words, in a task that asks more: the memo would come if an agent had recorded it.
    elsewhere = (
        "the token refresher logs 'refresh window closed before expiry' when the signing key"
        " rotates during a request: make the refresher fetch the new key id, retry once,"
        " update the handler tests and the changelog, then open a pull request"
    )
    answer, err = hook("prompt", {"cwd": str(project.path), "prompt": again}, db_path)
    assert err == ""
    text = context(answer, "UserPromptSubmit")
    assert said in text and "The refresher compares the old key id." in text
    answer, err = hook("prompt", {"cwd": str(project.path), "prompt": elsewhere}, db_path)
    assert answer is None or "old key id" not in context(answer, "UserPromptSubmit")


def test_prompt_shows_a_stale_memos_diff_whole_or_leaves_the_memo_out(
    project: Repo, db_path: Path
) -> None:
    """A second reader's finding: with three fresh and two stale memos sharing the bytes, the
    last stale memo's diff was cut mid-way."""
    with open_cache(db_path) as cache:
        for n, rel in enumerate(["src/auth.py"] * 3 + ["src/tokens.py"] * 2):
            cache.record(
                question=f"Where are JWT tokens validated, case {n}?",
                conclusion="tokens.verify() " + "checks the signature. " * 60,
                files=[rel],
                root=str(project.path),
            )
    line = "# rotated keys " + "x" * 500
    project.write("src/tokens.py", line + "\n")
    payload = {"cwd": str(project.path), "prompt": "where are JWT tokens validated?"}
    answer, err = hook("prompt", payload, db_path)
    assert err == ""
    text = context(answer, "UserPromptSubmit")
    assert text.count("fresh, 1 file unchanged") == 3
    for block in text.split("what changed since it was recorded]\n")[1:]:
        assert f"| +{line}" in block
