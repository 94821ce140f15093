"""End to end: delegations answered from memos in the real Claude Code CLI (the pinned release),
driven by the scripted model (which answers the subagents' own requests by the steps of the
prompt each was delegated), in a project set up by explomemo.

A first session delegates an exploration; its SubagentStop hook leaves a memo of origin
``subagent``. Later sessions delegate again, and the PreToolUse hook on ``Agent|Task``
(``explomemo hook delegate``) answers: a reworded delegation runs no subagent and the main
agent's next request holds the memo (the hook denies the call with the memo as its reason,
which Claude Code gives back as the call's result); after a file changed, the subagent's
prompt holds the memo and that file's diff; a delegation asking for part of the memo and
more runs with the memo as a head start; an unrelated one, one holding ``[no memo]``, one
with ``EXPLOMEMO_DELEGATION=off`` and the same prompt delegated again in the turn run
untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scripted_model import Answer, Read, ScriptedModel, Step
from test_claude_code_scripted import FILES, Project, Run, _damaged_database, model
from test_claude_code_subagent import (
    DELEGATED,
    QUESTION,
    REPORT,
    agent,
    explores,
    subagent_problems,
)

from explomemo.clients.hooks.delegate import ANSWERED, MARKER

pytestmark = pytest.mark.slow

__all__ = ["model"]  # the scripted model, shared with the other end-to-end tests

#: The exploration of DELEGATED, asked again in other words.
REWORDED = "Explore src/ and report where JWT tokens are verified: which function and which file."
#: Part of what the memo answers, and more.
MORE = (
    "Explore src/ and report where a JWT token is verified: the function and the file."
    " Also report how the signing key is set and what a bad signature returns."
)
#: Nothing the memo answers.
UNRELATED = "Explore src/ and report how retries back off: the function and the file."
BACKOFF = "src/retry.py backoff() waits 0.5 * 2**attempt seconds."
SUMMARY = "Done."
#: What Claude Code puts before a denying PreToolUse hook's reason in the call's result.
DENIED = "PreToolUse:Agent hook error: "


def session(
    project: Project,
    steps: Sequence[Step],
    delegated: dict[str, Sequence[Step]],
    env: dict[str, str] | None = None,
) -> Run:
    run = project.ask(QUESTION, steps, delegated=delegated, env=env, clean=False)
    assert subagent_problems(project, run) == []
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert run.hooks(event), f"no {event} hook ran"
    return run


def given(model: ScriptedModel, prompt: str, since: int) -> list[str]:
    """The prompt each subagent run of ``prompt`` was given since the model's request
    ``since`` (the text block of its requests that holds it), each once."""
    found: list[str] = []
    for seen in model.requests[since:]:
        if seen.prompt != prompt:
            continue
        for message in seen.body["messages"]:
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks or []:
                text = block.get("text", "") if block.get("type") == "text" else ""
                if text.split(f"\n\n{MARKER}", 1)[0].strip() == prompt and text not in found:
                    found.append(text)
    return found


def explored(project: Project) -> dict[str, Any]:
    """The memo of a first session's delegated exploration."""
    steps = [agent(DELEGATED, background=False), Answer(REPORT)]
    session(project, steps, {DELEGATED: explores(project)})
    (memo,) = project.memos()
    assert (memo["origin"], memo["status"], memo["question"]) == ("subagent", "fresh", DELEGATED)
    return memo


@pytest.fixture
def project(tmp_path: Path, claude: Path, model: ScriptedModel) -> Project:
    """A project whose hooks and server have the model (the delegate hook matches with it)."""
    made = Project(tmp_path, claude, model)
    made.env["EXPLOMEMO_EMBEDDINGS"] = "on"
    return made


def results(model: ScriptedModel, since: int) -> list[dict[str, Any]]:
    """The tool results the main agent's requests for :data:`QUESTION` carried since the
    model's request ``since``, each once (by call)."""
    found: dict[str, dict[str, Any]] = {}
    for seen in model.requests[since:]:
        if seen.prompt != QUESTION:
            continue
        for message in seen.body["messages"]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    found[block["tool_use_id"]] = block
    return list(found.values())


def text_of(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def test_a_reworded_delegation_runs_no_subagent_and_the_next_request_holds_the_memo(
    project: Project, model: ScriptedModel
) -> None:
    memo = explored(project)
    steps = [agent(REWORDED, background=False), Answer(SUMMARY)]
    since = len(model.requests)
    run = session(project, steps, {REWORDED: [Answer("ran anyway")]})
    assert model.scripted(REWORDED) == []  # no subagent request
    assert run.hooks("SubagentStop") == []
    (answer,) = [r for r in results(model, since) if r.get("is_error")]
    text = text_of(answer)
    assert text.startswith(f"{DENIED}{ANSWERED} {memo['id']} of project 'shop'")
    assert f"| {DELEGATED}" in text and f"| {REPORT}" in text
    assert "fresh: its 2 files unchanged since " + memo["recorded_at"] in text
    assert "[no memo]" in text
    assert [m["id"] for m in project.memos()] == [memo["id"]]  # nothing captured
    # stats counts the delegation answered, with the tokens of the run that made the memo.
    (counted,) = json.loads(project.explomemo("stats", "--project", "shop", "--json"))["projects"]
    (delegation,) = [s for s in counted["surfaces"] if s["surface"] == "delegation"]
    assert memo["cost_tokens"] > 0
    assert (delegation["served"], delegation["fresh"]) == (1, 1)
    assert delegation["tokens_spared"] == memo["cost_tokens"] == counted["tokens_spared"]


def test_the_same_prompt_delegated_again_in_the_turn_runs_untouched(
    project: Project, model: ScriptedModel
) -> None:
    """The first call is answered from the memo; the second, made after its result is in
    the transcript, runs as delegated (no deny loop)."""
    explored(project)
    again = [
        agent(REWORDED, background=False),
        agent(REWORDED, background=False),
        Answer(SUMMARY),
    ]
    since = len(model.requests)
    run = session(project, again, {REWORDED: [Answer("ran anyway")]})
    assert [r.get("is_error", False) for r in results(model, since)] == [True, False]
    assert given(model, REWORDED, since) == [REWORDED]
    assert len(run.hooks("PreToolUse")) == 2
    # Explored anyway: the answer from the memo spared no run.
    (counted,) = json.loads(project.explomemo("stats", "--project", "shop", "--json"))["projects"]
    (delegation,) = [s for s in counted["surfaces"] if s["surface"] == "delegation"]
    assert (delegation["served"], delegation["tokens_spared"]) == (0, 0)


def test_after_a_file_changed_the_subagent_checks_the_memo_with_its_diff(
    project: Project, model: ScriptedModel
) -> None:
    """The run's memo replaces the handed one (captured from a delegated run), keeping its
    id, with the delegated prompt as question."""
    memo = explored(project)
    tokens = project.root / "src/tokens.py"
    tokens.write_text(FILES["src/tokens.py"].replace('b"change-me"', 'b"rotated"'))
    corrected = REPORT + " The key is now rotated."
    checking: list[Step] = [Read(project.path("src/tokens.py")), Answer(corrected)]
    since = len(model.requests)
    session(project, [agent(REWORDED, background=False), Answer(SUMMARY)], {REWORDED: checking})
    (prompt,) = given(model, REWORDED, since)
    before, block = prompt.split(f"\n\n{MARKER}\n")
    assert before == REWORDED
    assert block.startswith(f"[check memo {memo['id']}]")
    assert f"| {REPORT}" in block
    assert '| -SIGNING_KEY = b"change-me"' in block and '| +SIGNING_KEY = b"rotated"' in block
    assert "Unchanged since: src/auth.py" in block
    (after,) = project.memos()
    assert (after["id"], after["question"], after["conclusion"]) == (
        memo["id"],
        REWORDED,
        corrected,
    )
    assert after["status"] == "fresh"


def test_a_delegation_asking_for_part_of_a_memo_and_more_gets_it_as_a_head_start(
    project: Project, model: ScriptedModel
) -> None:
    memo = explored(project)
    more = "SIGNING_KEY in src/tokens.py is a constant; a bad signature returns False."
    building: list[Step] = [Read(project.path("src/tokens.py")), Answer(more)]
    since = len(model.requests)
    session(project, [agent(MORE, background=False), Answer(SUMMARY)], {MORE: building})
    (prompt,) = given(model, MORE, since)
    before, block = prompt.split(f"\n\n{MARKER}\n")
    assert before == MORE
    assert block.startswith("[head start]")
    assert f"[memo {memo['id']}, fresh: its 2 files unchanged since" in block
    assert f"| {REPORT}" in block
    assert len(block.encode()) <= 6_000
    found = {m["question"]: m for m in project.memos()}
    assert set(found) == {DELEGATED, MORE}  # the handed memo stays; the run's is new
    assert found[MORE]["conclusion"] == more


@pytest.mark.parametrize(
    ("prompt", "env"),
    [
        (UNRELATED, {}),
        (REWORDED + " [No Memo]", {}),
        (REWORDED, {"EXPLOMEMO_DELEGATION": "off"}),
    ],
    ids=["unrelated", "no-memo", "switched-off"],
)
def test_a_delegation_runs_untouched(
    project: Project, model: ScriptedModel, prompt: str, env: dict[str, str]
) -> None:
    explored(project)
    retrying: list[Step] = [Read(project.path("src/retry.py")), Answer(BACKOFF)]
    since = len(model.requests)
    run = session(
        project, [agent(prompt, background=False), Answer(SUMMARY)], {prompt: retrying}, env
    )
    assert given(model, prompt, since) == [prompt]
    assert not any(r.get("is_error") for r in results(model, since))
    (hook,) = run.hooks("PreToolUse")
    assert hook["stdout"] == ""


def test_a_setup_with_no_delegation_lets_the_run_through(
    project: Project, model: ScriptedModel
) -> None:
    explored(project)
    project.explomemo("setup", "claude-code", "--no-delegation")
    retrying: list[Step] = [Read(project.path("src/retry.py")), Answer(BACKOFF)]
    since = len(model.requests)
    run = session(
        project, [agent(REWORDED, background=False), Answer(SUMMARY)], {REWORDED: retrying}
    )
    assert given(model, REWORDED, since) == [REWORDED]
    (hook,) = run.hooks("PreToolUse")  # it ran, and let the run through
    assert hook["stdout"] == ""
    settings = json.loads((project.root / ".claude" / "settings.local.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    assert group["hooks"][0]["command"].endswith(" --no-delegation")


def test_the_check_catches_a_delegate_hook_made_to_fail(project: Project) -> None:
    """The check :func:`session` makes is shown to catch the delegate hook failing (a
    damaged database: exit 0, nothing added, one line on stderr): the run goes on."""
    explored(project)
    _damaged_database(project)
    retrying: list[Step] = [Read(project.path("src/retry.py")), Answer(BACKOFF)]
    steps = [agent(REWORDED, background=False), Answer(SUMMARY)]
    since = len(project.model.requests)
    run = project.ask(QUESTION, steps, delegated={REWORDED: retrying}, clean=False)
    found = subagent_problems(project, run)
    assert any(p.startswith("PreToolUse stderr: explomemo hook delegate: ") for p in found), found
    assert given(project.model, REWORDED, since) == [REWORDED]
