"""The SubagentStop hook, run as a real process on subagent transcripts written as Claude Code
2.1.332 writes them (every entry ``isSidechain``, the delegated prompt first, Read results as
numbered lines with no ``toolUseResult``): a delegated run that read files and changed none
becomes one memo of origin ``subagent``, hashed as the subagent read; nothing otherwise."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Repo, invoke_cli
from test_capture import Turn, memos, show, stop, write_transcript

from explomemo.clients.hooks.delegate import MARKER
from explomemo.clients.hooks.run import run_hook
from explomemo.clients.hooks.subagent_stop import read_only

SESSION = "2899346a-2bb4-4822-8afd-04c55d8d8890"
PROMPT_ID = "59d5cfb5-8c88-4bd8-af8c-5b25b76e6dea"
DELEGATED = "Explore src/ and report where a token is verified: the function and the file."
REPORT = "verify() in src/auth.py checks the token against SIGNING_KEY from src/tokens.py."
USER_PROMPT = "Find where tokens are verified, with an agent."


class Run:
    """A subagent's transcript, written as Claude Code writes it."""

    def __init__(self, prompt: str = DELEGATED, agent: str = "a8f2bed9c9728cf3c") -> None:
        self.agent = agent
        self.calls = 0
        self.entries: list[dict[str, Any]] = [
            self._entry("user", {"role": "user", "content": prompt}, parentUuid=None)
        ]

    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "parentUuid": "p",
            "isSidechain": True,
            "promptId": PROMPT_ID,
            "agentId": self.agent,
            "type": kind,
            "message": message,
            **extra,
        }

    def _assistant(self, content: list[dict[str, Any]], usage: dict[str, int]) -> None:
        message = {"id": f"msg_{self.calls}", "role": "assistant", "content": content}
        self.entries.append(self._entry("assistant", {**message, "usage": usage}))

    def call(self, name: str, arguments: dict[str, Any], result: str, error: bool = False) -> None:
        self.calls += 1
        ident = f"toolu_{self.calls}"
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 100}
        usage |= {"cache_read_input_tokens": 5000, "output_tokens": 20}
        self._assistant(
            [{"type": "tool_use", "id": ident, "name": name, "input": arguments}], usage
        )
        block: dict[str, Any] = {"tool_use_id": ident, "type": "tool_result", "content": result}
        if error:
            block["is_error"] = True
        self.entries.append(self._entry("user", {"role": "user", "content": [block]}))

    def read(self, path: Path, offset: int | None = None, limit: int | None = None) -> None:
        """A Read call of ``path`` as it is now: its lines numbered, as the model gets them."""
        lines = path.read_text().split("\n")
        start = offset or 1
        chosen = lines[start - 1 : None if limit is None else start - 1 + limit]
        arguments: dict[str, Any] = {"file_path": str(path)}
        arguments |= {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
        numbered = "\n".join(f"{start + n}\t{line}" for n, line in enumerate(chosen))
        self.call("Read", arguments, numbered)

    def say(self, text: str) -> None:
        self.calls += 1
        usage = {"input_tokens": 2, "cache_creation_input_tokens": 50}
        usage |= {"cache_read_input_tokens": 5100, "output_tokens": 40}
        self._assistant([{"type": "text", "text": text}], usage)

    def write(self, folder: Path) -> Path:
        path = folder / SESSION / "subagents" / f"agent-{self.agent}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        blob = {"type": "api-request-blob", "message": {"role": "user", "content": "noise"}}
        lines = [json.dumps(self.entries[0]), json.dumps(blob)]
        lines += [json.dumps(e) for e in self.entries[1:]]
        path.write_text("\n".join(lines) + "\n")
        return path


#: What each Run above costs: per response input, cache writes and output (cache reads not).
CALL_TOKENS = 3 + 100 + 20
ANSWER_TOKENS = 2 + 50 + 40


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "shop")
    repo.write("src/auth.py", "def verify(token):\n    return tokens.check(token)\n")
    repo.write("src/tokens.py", "".join(f"# line {n}\n" for n in range(1, 31)))
    repo.write("src/long.py", "x = '" + "y" * 120_000 + "'\nz = 1\n")
    repo.commit("code")
    return repo


def main_transcript(folder: Path, prompt: str = USER_PROMPT) -> Path:
    """The main session's transcript: the user's turn that delegated the run."""
    turn = Turn(prompt, prompt_id=PROMPT_ID)
    turn.call("Agent", {"description": "find", "prompt": DELEGATED, "subagent_type": "Explore"})
    return write_transcript(folder / f"{SESSION}.jsonl", turn)


def stop_input(
    db: Path,
    shop: Repo,
    run: Run,
    prompt: str = USER_PROMPT,
    report: str | None = REPORT,
    agent_type: str = "Explore",
) -> dict[str, Any]:
    """What Claude Code gives the SubagentStop hook at the end of ``run`` (its transcript
    and the main session's written beside the database)."""
    folder = db.parent / "projects"
    folder.mkdir(parents=True, exist_ok=True)
    payload: dict[str, Any] = {
        "session_id": SESSION,
        "transcript_path": str(main_transcript(folder, prompt)),
        "cwd": str(shop.path),
        "prompt_id": PROMPT_ID,
        "hook_event_name": "SubagentStop",
        "stop_hook_active": False,
        "agent_id": run.agent,
        "agent_type": agent_type,
        "agent_transcript_path": str(run.write(folder)),
    }
    if report is not None:
        payload["last_assistant_message"] = report
    return payload


def subagent_stop(
    db: Path,
    shop: Repo,
    run: Run,
    *extra: str,
    env: dict[str, str] | None = None,
    prompt: str = USER_PROMPT,
    report: str | None = REPORT,
    agent_type: str = "Explore",
) -> str:
    """Run ``explomemo hook subagent-stop`` as a child process, as Claude Code does, on a
    run's transcript; the hook's stderr (its stdout must be empty: it adds nothing)."""
    payload = stop_input(db, shop, run, prompt=prompt, report=report, agent_type=agent_type)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")}
    environment.pop("CLAUDE_PROJECT_DIR", None)
    environment.update(env or {}, EXPLOMEMO_EMBEDDINGS="off")
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db), "hook", "subagent-stop", *extra],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "", (done.stdout, done.stderr)
    return done.stderr


def exploring(shop: Repo, prompt: str = DELEGATED, agent: str = "a1") -> Run:
    """A run that reads auth.py whole and lines 3-7 of tokens.py, then reports."""
    run = Run(prompt, agent)
    run.read(shop.path / "src/auth.py")
    run.read(shop.path / "src/tokens.py", offset=3, limit=5)
    return run


def test_a_run_that_read_files_leaves_one_fresh_subagent_memo_on_exactly_them(
    shop: Repo, db_path: Path
) -> None:
    run = exploring(shop)
    run.call("Bash", {"command": "grep -rn verify src 2>/dev/null | head -20"}, "src/auth.py:1")
    run.call("Grep", {"pattern": "SIGNING_KEY"}, "src/tokens.py")
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    (listed,) = memos(db_path)
    assert (listed["origin"], listed["agent_type"]) == ("subagent", "Explore")
    assert listed["cost_tokens"] == 4 * CALL_TOKENS + ANSWER_TOKENS
    memo = show(db_path, listed["id"], shop.path)
    assert (memo["question"], memo["conclusion"], memo["status"]) == (DELEGATED, REPORT, "fresh")
    assert [f["path"] for f in memo["files"]] == ["src/auth.py", "src/tokens.py"]
    assert memo["cost_tokens"] == listed["cost_tokens"]
    text = invoke_cli(["--db", str(db_path), "show", str(listed["id"]), "--root", str(shop.path)])
    assert "(captured here from a delegated run)" in text.out
    assert f"run: Explore, {listed['cost_tokens']:,} tokens" in text.out.splitlines()


def test_a_line_the_run_read_that_changed_since_makes_that_file_stale(
    shop: Repo, db_path: Path
) -> None:
    run = exploring(shop)
    run.say(REPORT)
    text = (shop.path / "src/tokens.py").read_text()
    (shop.path / "src/tokens.py").write_text(text.replace("# line 5\n", "# line five\n"))
    assert subagent_stop(db_path, shop, run) == ""
    (listed,) = memos(db_path)
    memo = show(db_path, listed["id"], shop.path)
    states = {f["path"]: f["state"] for f in memo["files"]}
    assert states == {"src/auth.py": "unchanged", "src/tokens.py": "changed"}


def test_a_change_outside_the_lines_read_leaves_the_memo_fresh(shop: Repo, db_path: Path) -> None:
    run = exploring(shop)
    run.say(REPORT)
    text = (shop.path / "src/tokens.py").read_text()
    (shop.path / "src/tokens.py").write_text(text.replace("# line 20\n", "# line twenty\n"))
    assert subagent_stop(db_path, shop, run) == ""
    (listed,) = memos(db_path)
    assert show(db_path, listed["id"], shop.path)["status"] == "fresh"


def test_a_line_longer_than_any_read_limit_is_checked_whole(shop: Repo, db_path: Path) -> None:
    run = Run()
    run.read(shop.path / "src/long.py")
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    (listed,) = memos(db_path)
    assert show(db_path, listed["id"], shop.path)["status"] == "fresh"


def edits(run: Run, shop: Repo) -> None:
    run.call("Edit", {"file_path": str(shop.path / "src/auth.py")}, "ok")


def writes_by_bash(run: Run, shop: Repo) -> None:
    run.call("Bash", {"command": "echo x > notes.txt"}, "")


def runs_a_script(run: Run, shop: Repo) -> None:
    run.call("Bash", {"command": "python3 fix.py"}, "")


def tries_a_write_that_fails(run: Run, shop: Repo) -> None:
    run.call("Write", {"file_path": str(shop.path / "a")}, "denied", error=True)


def records_a_memo(run: Run, shop: Repo) -> None:
    run.call("mcp__explomemo__memory_exploration_record", {"question": "q"}, "{}")


@pytest.mark.parametrize(
    "step", [edits, writes_by_bash, runs_a_script, tries_a_write_that_fails, records_a_memo]
)
def test_a_run_that_changed_or_may_have_changed_a_file_or_recorded_leaves_no_memo(
    shop: Repo, db_path: Path, step: Any
) -> None:
    run = exploring(shop)
    step(run, shop)
    run.say(REPORT)
    kept = exploring(shop, "Explore src/ and report how the tokens file is laid out.", "a2")
    kept.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    assert subagent_stop(db_path, shop, kept) == ""  # beside it, one that is captured
    assert [m["question"] for m in memos(db_path)] == [kept.entries[0]["message"]["content"]]


def test_a_run_that_only_searched_leaves_no_memo(shop: Repo, db_path: Path) -> None:
    run = Run()
    run.call("Grep", {"pattern": "verify"}, "src/auth.py")
    run.call("Glob", {"pattern": "src/*.py"}, "src/auth.py\nsrc/tokens.py")
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    assert not db_path.exists() or memos(db_path) == []


def test_a_failed_read_or_one_outside_the_root_is_no_read(shop: Repo, db_path: Path) -> None:
    outside = shop.path.parent / "notes.txt"
    outside.write_text("a note\n")
    run = Run()
    run.read(outside)
    run.call("Read", {"file_path": str(shop.path / "src/auth.py")}, "no such file", error=True)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    assert not db_path.exists() or memos(db_path) == []


@pytest.mark.parametrize(
    ("delegated", "prompt"),
    [
        (DELEGATED + " <private>", USER_PROMPT),
        (DELEGATED, USER_PROMPT + " <PRIVATE/>"),
    ],
    ids=["in-the-delegated-prompt", "in-the-users-prompt"],
)
def test_private_in_either_prompt_leaves_no_memo(
    shop: Repo, db_path: Path, delegated: str, prompt: str
) -> None:
    run = exploring(shop, delegated)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run, prompt=prompt) == ""
    assert not db_path.exists() or memos(db_path) == []


@pytest.mark.parametrize(
    ("extra", "env"),
    [((), {"EXPLOMEMO_CAPTURE": "off"}), (("--no-capture",), {})],
    ids=["environment", "flag"],
)
def test_capture_switched_off_leaves_no_memo(
    shop: Repo, db_path: Path, extra: tuple[str, ...], env: dict[str, str]
) -> None:
    run = exploring(shop)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run, *extra, env=env) == ""
    assert not db_path.exists()


def test_run_hook_passes_no_capture_to_the_subagent_stop_hook(
    shop: Repo, db_path: Path, hook_env: None
) -> None:
    """``--no-capture`` in process: the in-process twin of the flag case above (run in a
    child process, where mutmut does not see it); kills ``run_hook`` 32 and 33 (the option
    not passed on for ``subagent-stop``)."""
    run = exploring(shop)
    run.say(REPORT)
    payload = json.dumps(stop_input(db_path, shop, run)).encode()

    def hook(capture: bool) -> None:
        out, err = io.BytesIO(), io.BytesIO()
        code = run_hook(
            "subagent-stop", db=db_path, project=None, stdin=io.BytesIO(payload), stdout=out,
            stderr=err, capture=capture,
        )  # fmt: skip
        assert (code, out.getvalue(), err.getvalue()) == (0, b"", b"")

    hook(capture=False)
    assert not db_path.exists()
    hook(capture=True)
    assert [m["origin"] for m in memos(db_path)] == ["subagent"]


def test_secrets_in_the_report_are_redacted_and_a_long_prompt_is_cut(
    shop: Repo, db_path: Path
) -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    long_prompt = DELEGATED + " " + "and more " * 400
    run = exploring(shop, long_prompt)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run, report=f"{REPORT} The key is {key}.") == ""
    (listed,) = memos(db_path)
    memo = show(db_path, listed["id"], shop.path)
    assert key not in memo["conclusion"] and REPORT in memo["conclusion"]
    assert len(memo["question"]) <= 2000 and "cut by explomemo" in memo["question"]


def test_runs_ending_while_the_database_is_locked_all_wait_and_are_stored(
    shop: Repo, db_path: Path, tmp_path: Path
) -> None:
    first = exploring(shop, DELEGATED, "a1")
    first.say(REPORT)
    second = exploring(shop, "Explore src/ and report how the tokens file is laid out.", "a2")
    second.say("tokens.py holds thirty comment lines.")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert invoke_cli(["--db", str(db_path), "import", str(empty)]).code == 0
    lock = sqlite3.connect(db_path)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        said = [subagent_stop(db_path, shop, run) for run in (first, second)]
    finally:
        lock.rollback()
        lock.close()
    assert all("the memo waits in" in line for line in said), said
    assert invoke_cli(["--db", str(db_path), "import", str(empty)]).code == 0  # a writer
    found = {m["question"]: m for m in memos(db_path)}
    assert set(found) == {DELEGATED, "Explore src/ and report how the tokens file is laid out."}
    assert {m["origin"] for m in found.values()} == {"subagent"}


def test_the_newer_run_of_a_question_replaces_the_older_and_an_agents_memo_stays(
    shop: Repo, db_path: Path
) -> None:
    older = exploring(shop)
    older.say(REPORT)
    assert subagent_stop(db_path, shop, older) == ""
    newer = exploring(shop)
    newer.say("A newer report.")
    assert subagent_stop(db_path, shop, newer, report="A newer report.") == ""
    (listed,) = memos(db_path)
    assert show(db_path, listed["id"], shop.path)["conclusion"] == "A newer report."
    recorded = invoke_cli(
        [
            *("--db", str(db_path), "record", "--project", "shop", "--root", str(shop.path)),
            *("--question", DELEGATED, "--conclusion", "The agent's own."),
            str(shop.path / "src/auth.py"),
        ]
    )
    assert recorded.code == 0, recorded.err
    assert subagent_stop(db_path, shop, exploring(shop)) == ""
    (listed,) = memos(db_path)
    assert (listed["origin"], show(db_path, listed["id"], shop.path)["conclusion"]) == (
        "agent",
        "The agent's own.",
    )


def test_a_turn_that_delegated_is_no_turn_memo(shop: Repo, db_path: Path, tmp_path: Path) -> None:
    """The Stop hook: a question turn that read a file and delegated leaves no memo (what it
    explored is the subagent's memo); the same turn without the delegation leaves one."""
    for delegated in (True, False):
        turn = Turn("where are tokens verified?")
        turn.read(shop.path / "src/auth.py")
        if delegated:
            turn.call("Agent", {"prompt": DELEGATED, "subagent_type": "Explore"})
        turn.say(REPORT)
        transcript = write_transcript(tmp_path / f"main-{delegated}.jsonl", turn)
        stop(db_path, transcript, shop.path, last=REPORT, prompt_id=turn.prompt_id)
        assert db_path.exists() != delegated


def test_export_and_import_keep_the_agent_type_and_the_cost(
    shop: Repo, db_path: Path, tmp_path: Path
) -> None:
    run = exploring(shop)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    listed = invoke_cli(["--db", str(db_path), "list", "--origin", "subagent", "--json"])
    assert [m["origin"] for m in json.loads(listed.out)] == ["subagent"]
    exported = invoke_cli(["--db", str(db_path), "export", "--origin", "subagent"])
    (line,) = exported.out.splitlines()
    data = json.loads(line)
    assert (data["origin"], data["agent_type"]) == ("subagent", "Explore")
    assert data["cost_tokens"] == 2 * CALL_TOKENS + ANSWER_TOKENS
    export = tmp_path / "memos.jsonl"
    export.write_text(exported.out)
    other = tmp_path / "other.db"
    imported = invoke_cli(["--db", str(other), "import", str(export)])
    assert imported.code == 0, imported.err
    (memo,) = memos(other)
    assert (memo["origin"], memo["agent_type"], memo["cost_tokens"]) == (
        "subagent",
        "Explore",
        data["cost_tokens"],
    )


@pytest.mark.parametrize(
    "command",
    [
        "ls -la src",
        "find . -name '*.py' 2>/dev/null | head -50",
        "grep -rn verify src && wc -l src/auth.py",
        "git log --oneline -5; git show HEAD --stat",
        "sed -n '1,40p' src/auth.py",
        "cd src && cat auth.py | sort | uniq",
        "sed -n 5p src/auth.py",
        "grep -rn verify src 2>/dev/null | uniq -c",
        # A separator inside quotes is part of a word (the replay of real runs found 24
        # runs refused for an alternation in a grep pattern).
        'grep -n "verify\\|check" src/auth.py',
        "grep -rn 'verify|check' src | head -5",
        "grep -n 'a;b' src/auth.py",
        "ls\ncat src/auth.py",
        "grep x ';' rm -rf src",
        'grep -rn "verify$" src',
        "sed -n '$p' src/auth.py",
        "grep -n 'a#b' src/auth.py && echo done#",
    ],
)
def test_read_only_commands(command: str) -> None:
    assert read_only(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo x > out.txt",
        "cat a >> b",
        "find . -name '*.pyc' -delete",
        "find . -exec rm {} +",
        "sed -i 's/a/b/' src/auth.py",
        "sed -n '1,5w copy' src/auth.py",
        "sort -o out.txt in.txt",
        "git checkout -- src",
        "git commit -am x",
        'python3 -c \'open("a", "w")\'',
        "npm install",
        "ls $(rm -rf build)",
        "ls `touch x`",
        "grep x src | tee out.txt",
        "ls | xargs rm",
        # Found by the second review: each read as read-only before.
        "sed -n 'w /tmp/out' src/auth.py",
        "sed -n '1e touch x' src/auth.py",
        "sed -n 's/a/b/e' src/auth.py",
        "git grep -Otouch verify",
        "rg --pre ./run.sh verify",
        "sort --compress-program=./x src/auth.py",
        "file -C -m magic",
        "echo hi >/dev/nullx",
        "uniq src/auth.py out.txt",
        # Quotes split as a shell splits them: none hides a command.
        "grep 'x' src|rm -rf src",
        "cat 'a\nb'\nrm x",
        "grep 'unclosed src",
        # Found by the second review of the quote-aware reader (bash ran each one's write).
        "cat a.txt#; touch PWNED",
        "git log -1 --format=%H#%s && git stash",
        "find keep '' ls -delete",
        "find keep ';' ls -delete",
        "find . '|' ls -exec touch PWNED \\;",
        "ls $'\\'' ; touch PWNED ; echo \\'",
        "cat <<ls\nls '\nls\ntouch PWNED\ncat <<ls\n'\nls",
        "echo hi >&1x",
        "sort -uo OUT src/auth.py",
        "sed -n 1p -e 'w OUT' src/auth.py",
        "find keep -{delete,print}",
        "find keep -${X:-delete}",
        "# just a comment\ntouch x",
    ],
)
def test_commands_that_may_write(command: str) -> None:
    assert not read_only(command)


# A run the delegate hook handed memos to ---------------------------------------------------

HANDED = (
    f"\n\n{MARKER}\n[head start] Earlier explorations cover part of this task.\n"
    "[memo 1, fresh: its 2 files unchanged since 2026-01-01T00:00:00Z, recorded here]\n"
    "Question:\n| Where is the token checked?\nReport:\n| verify() in src/auth.py."
)


def test_a_handed_runs_question_is_the_delegated_prompt_without_our_block(
    shop: Repo, db_path: Path
) -> None:
    """Cut at the last marker (the delegated prompt may quote one), ``[no memo]`` taken out."""
    quoting = f"{DELEGATED} It once said:\n{MARKER}\nthis [No Memo]"
    run = exploring(shop, prompt=quoting + HANDED)
    run.say(REPORT)
    assert subagent_stop(db_path, shop, run) == ""
    (listed,) = memos(db_path)
    assert show(db_path, listed["id"], shop.path)["question"] == (
        f"{DELEGATED} It once said:\n{MARKER}\nthis"
    )


def _checking(shop: Repo, memo_id: int, prompt: str, agent: str) -> Run:
    block = f"\n\n{MARKER}\n[check memo {memo_id}] An earlier run answered this task."
    run = exploring(shop, prompt=prompt + block, agent=agent)
    run.say(REPORT + " Still so.")
    return run


REWORDED = "Explore src/ and report which function verifies a token, and in which file."


def test_a_run_asked_to_check_a_stale_subagent_memo_replaces_it_keeping_its_id(
    shop: Repo, db_path: Path
) -> None:
    first = exploring(shop)
    first.say(REPORT)
    assert subagent_stop(db_path, shop, first) == ""
    (before,) = memos(db_path)
    checking = _checking(shop, before["id"], REWORDED, "a2")
    assert subagent_stop(db_path, shop, checking, report=REPORT + " Still so.") == ""
    (after,) = memos(db_path)
    memo = show(db_path, after["id"], shop.path)
    assert (after["id"], memo["question"], memo["conclusion"]) == (
        before["id"],
        REWORDED,
        REPORT + " Still so.",
    )


def test_a_run_asked_to_check_an_agents_memo_leaves_a_memo_of_its_own(
    shop: Repo, db_path: Path
) -> None:
    """An agent's memo is never replaced by captured text: the run's memo is a new one."""
    where = ["--db", str(db_path), "record", "--project", "shop", "--root", str(shop.path)]
    done = invoke_cli([*where, "--question", DELEGATED, "--conclusion", REPORT, "src/auth.py"])
    assert done.code == 0, done.err
    (agents,) = memos(db_path)
    assert subagent_stop(db_path, shop, _checking(shop, agents["id"], REWORDED, "a2")) == ""
    found = {m["id"]: m["origin"] for m in memos(db_path)}
    assert found[agents["id"]] == "agent" and sorted(found.values()) == ["agent", "subagent"]


def test_a_checked_memo_keeps_the_files_its_run_did_not_read_again(
    shop: Repo, db_path: Path
) -> None:
    """A second reader's finding: a run told "the other files are unchanged" reads only the
    changed one, and the memo it left rested on that file alone, so a later change to the
    others could not make it stale."""
    first = exploring(shop)
    first.say(REPORT)
    assert subagent_stop(db_path, shop, first) == ""
    (before,) = memos(db_path)
    block = (
        f"\n\n{MARKER}\n[check memo {before['id']}] An earlier run answered this task.\n"
        f"[memo {before['id']}, stale: tokens.py changed, recorded here, recorded 2026-01-01]"
    )
    checking = Run(REWORDED + block, "a2")
    checking.read(shop.path / "src/tokens.py")
    checking.say(REPORT + " Still so.")
    assert subagent_stop(db_path, shop, checking) == ""
    (after,) = memos(db_path)
    memo = show(db_path, after["id"], shop.path)
    assert after["id"] == before["id"]
    assert [(f["path"], f["state"]) for f in memo["files"]] == [
        ("src/auth.py", "unchanged"),
        ("src/tokens.py", "unchanged"),
    ]
    shop.write("src/auth.py", "changed\n")
    assert show(db_path, after["id"], shop.path)["status"] == "stale"


def test_a_head_starts_memo_rests_also_on_the_handed_memos_files(shop: Repo, db_path: Path) -> None:
    first = exploring(shop)
    first.say(REPORT)
    assert subagent_stop(db_path, shop, first) == ""
    (handed,) = memos(db_path)
    block = (
        f"\n\n{MARKER}\n[head start] Earlier explorations cover part of this task.\n"
        f"[memo {handed['id']}, fresh: its 2 files unchanged since 2026-01-01, recorded here]"
        "\nQuestion:\n| q\nReport:\n| r"
    )
    building = Run("Explore src/ and report how a token is signed." + block, "a3")
    building.read(shop.path / "src/auth.py")
    building.say("Signed in src/auth.py.")
    assert subagent_stop(db_path, shop, building) == ""
    new = [m for m in memos(db_path) if m["id"] != handed["id"]]
    assert len(new) == 1
    paths = [f["path"] for f in show(db_path, new[0]["id"], shop.path)["files"]]
    assert paths == ["src/auth.py", "src/tokens.py"]
