"""End to end: delegated runs in the real Claude Code CLI (the pinned release), driven by the
scripted model (which answers the subagents' own requests by the steps of the prompt each was
delegated), in a project set up by explomemo: the SubagentStop hook leaves one memo of origin
``subagent`` for a run that read files and changed none, and nothing otherwise.

Claude Code 2.1.332 runs an ``Agent`` call in the background unless told otherwise
(``run_in_background`` false): ``claude -p`` still waits for it, and its SubagentStop hook runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scripted_model import Answer, Calls, OnDisk, Read, ScriptedModel, Step, Tool
from test_claude_code_scripted import FILES, FINE, Project, Run, _damaged_database, model, sha256

pytestmark = pytest.mark.slow

__all__ = ["model"]  # the scripted model, shared with the other end-to-end tests

QUESTION = "Where are JWT tokens verified? Use an Explore agent."
DELEGATED = "Explore src/ and report where a JWT token is verified: the function and the file."
REPORT = "src/auth.py middleware() calls tokens.verify(), which checks the HS256 signature."
EDIT = "Fix the parser in src/parser.py so that it strips spaces, then report."


def agent(prompt: str, kind: str = "Explore", background: bool | None = None) -> Tool:
    """An Agent call delegating ``prompt``."""
    given: dict[str, Any] = {"description": prompt[:30], "prompt": prompt, "subagent_type": kind}
    if background is not None:
        given["run_in_background"] = background
    return Tool("Agent", given)


def explores(project: Project) -> list[Step]:
    """The Explore run: tokens.py by offset and limit, auth.py whole, a read-only Bash."""
    return [
        Read(project.path("src/tokens.py"), offset=7, limit=5),
        Read(project.path("src/auth.py")),
        Tool("Bash", {"command": "grep -rn verify src 2>/dev/null | head -20"}),
        Answer(REPORT),
    ]


def subagent_problems(project: Project, run: Run) -> list[str]:
    """Every sign of a hook gone wrong: :meth:`Run.problems` (the main transcript's
    attachments and the hooks' events: exit codes, stderr) and the hook attachments of the
    subagents' transcripts. The delegate hook's denial is no hook-error attachment: Claude
    Code 2.1.332 writes it down only as the call's result."""
    found = run.problems()
    home = Path(project.env["HOME"], ".claude", "projects")
    for path in home.glob(f"*/{run.session_id}/subagents/*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            attachment = entry.get("attachment") if entry.get("type") == "attachment" else None
            kind = attachment.get("type", "") if isinstance(attachment, dict) else ""
            if kind.startswith("hook") and kind not in FINE:
                found.append(f"{path.name}: {attachment}")
    return found


def delegate(
    project: Project,
    steps: Sequence[Step],
    delegated: dict[str, Sequence[Step]],
    env: dict[str, str] | None = None,
    turns: int = 1,
) -> Run:
    run = project.ask(QUESTION, steps, delegated=delegated, env=env, turns=turns)
    assert subagent_problems(project, run) == []
    assert len(run.hooks("SubagentStop")) == len(delegated)
    return run


@pytest.fixture
def project(tmp_path: Path, claude: Path, model: ScriptedModel) -> Project:
    return Project(tmp_path, claude, model)


def test_a_delegated_exploration_leaves_one_fresh_subagent_memo_on_exactly_its_reads(
    project: Project,
) -> None:
    """In the background (the default): the subagent's memo, and no turn memo for the
    question turn that delegated, though it read a file itself."""
    steps = [Read(project.path("src/retry.py")), agent(DELEGATED), Answer(REPORT)]
    delegate(project, steps, {DELEGATED: explores(project)}, turns=2)
    (memo,) = project.memos()
    assert (memo["origin"], memo["agent_type"], memo["status"]) == ("subagent", "Explore", "fresh")
    assert (memo["question"], memo["conclusion"]) == (DELEGATED, REPORT)
    assert sorted((f["path"], f["sha256"], f["state"]) for f in memo["files"]) == [
        (rel, sha256(project, rel), "unchanged") for rel in ("src/auth.py", "src/tokens.py")
    ]
    assert memo["cost_tokens"] > 0


def test_a_line_read_that_changes_before_the_run_ends_makes_the_memo_born_stale(
    project: Project,
) -> None:
    """tokens.py read by offset and limit gains a line after those it returned (its memo
    rests on the file as it is); auth.py, read whole, has a line changed (born stale)."""
    tokens, auth = project.root / "src/tokens.py", project.root / "src/auth.py"
    changing: list[Step] = [
        Read(project.path("src/tokens.py"), offset=7, limit=5),
        OnDisk(lambda: tokens.write_text(FILES["src/tokens.py"] + "# never read\n")),
        Read(project.path("src/auth.py")),
        OnDisk(lambda: auth.write_text(FILES["src/auth.py"].replace("request", "req"))),
        Answer(REPORT),
    ]
    steps = [agent(DELEGATED, background=False), Answer(REPORT)]
    delegate(project, steps, {DELEGATED: changing})
    (memo,) = project.memos()
    assert memo["status"] == "stale"
    assert {f["path"]: f["state"] for f in memo["files"]} == {
        "src/auth.py": "changed",
        "src/tokens.py": "unchanged",
    }


def test_a_file_with_a_very_long_line_leaves_a_fresh_memo_on_it(
    project: Project, model: ScriptedModel
) -> None:
    """A line of 30,000 characters: Claude Code 2.1.332's Read returns it whole (it has no
    long-line cut, so the issue's case of a line cut by the Read does not arise with the
    pinned client), and the run's memo rests on the file, fresh."""
    long = "KEY = '" + "k" * 30000 + "'\n"
    (project.root / "src/keys.py").write_text(long + "def key():\n    return KEY\n")
    reading: list[Step] = [Read(project.path("src/keys.py")), Answer(REPORT)]
    since = len(model.requests)
    delegate(project, [agent(DELEGATED, background=False), Answer(REPORT)], {DELEGATED: reading})
    returned = [
        str(block.get("content"))
        for seen in model.requests[since:]
        for message in seen.body["messages"]
        for block in (message.get("content") if isinstance(message.get("content"), list) else [])
        if block.get("type") == "tool_result" and "def key():" in str(block.get("content"))
    ]
    assert returned and all("k" * 30000 in text for text in returned)
    (memo,) = project.memos()
    assert memo["status"] == "fresh"
    assert [(f["path"], f["sha256"]) for f in memo["files"]] == [
        ("src/keys.py", sha256(project, "src/keys.py"))
    ]


def test_two_subagents_at_once_each_leave_their_memo(project: Project) -> None:
    """Two Agent calls in one message, run side by side (in the foreground, so that the
    session has one turn: in the background each run's end may start a turn of its own):
    both runs end, and each leaves its memo on its own reads."""
    other = "Explore src/ and report how retries back off: the function and the file."
    backoff = "src/retry.py backoff() waits 0.5 * 2**attempt seconds."
    retrying: list[Step] = [Read(project.path("src/retry.py")), Answer(backoff)]
    both = (agent(DELEGATED, background=False), agent(other, background=False))
    steps = [Calls(both), Answer(REPORT)]
    run = project.ask(QUESTION, steps, delegated={DELEGATED: explores(project), other: retrying})
    assert subagent_problems(project, run) == []
    assert len(run.hooks("SubagentStop")) == 2
    found = {m["question"]: m for m in project.memos()}
    assert {q: (m["conclusion"], m["origin"], m["status"]) for q, m in found.items()} == {
        DELEGATED: (REPORT, "subagent", "fresh"),
        other: (backoff, "subagent", "fresh"),
    }
    assert [f["path"] for f in found[other]["files"]] == ["src/retry.py"]


def test_a_run_that_only_searched_leaves_no_memo(project: Project) -> None:
    """Searches only, beside an exploring run that leaves its memo (the Explore agent of
    2.1.332 has no Grep or Glob tool: it searches with grep and find through Bash): a memo
    resting on search results could not see a file added later."""
    search = "Search src/ for every use of RETRIES and report the files."
    searching: list[Step] = [
        Tool("Bash", {"command": "grep -rn RETRIES src"}),
        Tool("Bash", {"command": "find src -name '*.py'"}),
        Answer("RETRIES is used in src/retry.py only."),
    ]
    both = (agent(DELEGATED, background=False), agent(search, background=False))
    delegate(
        project, [Calls(both), Answer(REPORT)], {DELEGATED: explores(project), search: searching}
    )
    assert [m["question"] for m in project.memos()] == [DELEGATED]


def test_a_subagent_that_edited_a_file_leaves_no_memo(project: Project) -> None:
    """A general-purpose run that read and edited a file, beside an exploring run that
    leaves its memo."""
    fixed = "def parse(text):\n    return [field.strip() for field in text.split(',')]\n"
    editing: list[Step] = [
        Read(project.path("src/parser.py")),
        Tool(
            "Edit",
            {
                "file_path": project.path("src/parser.py"),
                "old_string": FILES["src/parser.py"],
                "new_string": fixed,
            },
        ),
        Answer("Fixed."),
    ]
    both = (agent(EDIT, "general-purpose", background=False), agent(DELEGATED, background=False))
    delegate(
        project, [Calls(both), Answer("Fixed.")], {EDIT: editing, DELEGATED: explores(project)}
    )
    assert (project.root / "src/parser.py").read_text() == fixed  # the edit was made
    assert [m["question"] for m in project.memos()] == [DELEGATED]


def test_capture_switched_off_leaves_no_memo(project: Project) -> None:
    steps = [agent(DELEGATED, background=False), Answer(REPORT)]
    delegate(project, steps, {DELEGATED: explores(project)}, env={"EXPLOMEMO_CAPTURE": "off"})
    assert project.memos() == []
    delegate(project, steps, {DELEGATED: explores(project)})  # switched on: the control
    assert [m["question"] for m in project.memos()] == [DELEGATED]


def test_the_check_catches_a_subagent_stop_hook_made_to_fail(project: Project) -> None:
    """The check :func:`delegate` makes is shown to catch the SubagentStop hook failing
    (a damaged database: exit 0, nothing added, one line on stderr)."""
    _damaged_database(project)
    steps = [agent(DELEGATED, background=False), Answer(REPORT)]
    run = project.ask(QUESTION, steps, delegated={DELEGATED: explores(project)}, clean=False)
    problems = subagent_problems(project, run)
    assert any(p.startswith("SubagentStop stderr: ") for p in problems), problems
