"""The capture rule (clients/hooks/capture.py) as a pure function: which prompts ask about the code
and stand alone, which turns qualify, and how a long text is cut. The labelled turns of
benchmarks/capture/ measure it; these cases pin its parts."""

from __future__ import annotations

import pytest

from explomemo.clients.hooks.capture import (
    MAX_PROMPT,
    TurnFacts,
    asks,
    cut,
    should_capture,
    stands_alone,
    typed,
)

READ_ONLY = TurnFacts(reads=2, edits=False, recorded=False, answered_from_fresh_memo=False)


@pytest.mark.parametrize(
    "prompt",
    [
        "where is the session token refreshed?",
        "How does the importer pick the newer memo",
        "Explain how the snapshot writer stores blob ids",
        "walk me through what happens on a locked database",
        "find where the server registers its tools",
        "can you tell me what the default limit is and where it's defined",
        "I'll do it. Q: does the migration keep the ids?",
        "what does this do?\n```python\nstore.write()\n```",
        "why do we re-export these?\n@src/config.go:18-23",
        "Comment le cache décide-t-il qu'un mémo est périmé ?",
        "キャッシュはどこで無効化されますか\uff1f",
        "give me an overview of the store layer",
        "two commits got one checkpoint id, can you check how it can happen? it shouldn't be",
        "where is the simpler CalculateAttribution used?",
        "<ide_selection>The user selected lines 1 to 9 of a.py</ide_selection>\nwhat does"
        " the selected loop return?",
        "can you check how the loader resolves paths?",
        "Would you explain how the cache decides a memo is stale?",
        "I'd like to understand how the retry limit is applied",
        "<command-message>explain</command-message>\n<command-name>/explain</command-name>\n"
        "<command-args>how does the parser handle a BOM?</command-args>",
    ],
)
def test_questions_about_the_code_are_captured(prompt: str) -> None:
    assert should_capture(prompt, READ_ONLY), (asks(prompt), stands_alone(prompt))


@pytest.mark.parametrize(
    "prompt",
    [
        "fix the parser",
        "can you add a --json flag to stats?",
        "please run the tests",
        "review my last commit",
        "Plan how to add a cache",
        "should we make this a constant?",
        "what's the best way to split this module?",
        "did we fix the lock timeout?",
        "have a look at ticket 108, we will work on that here",
        "can you take a look at https://github.com/o/r/issues/70",
        "What's the clearest way to support this? https://github.com/o/r/issues/7572",
        "How can we support another shell with the least setup?",
        "can you check if it's worth tracking the id logic in the docs?",
        "Is it easier to condense when a session ends or when it starts?",
        "I think the id matters less in the list. Also what description are we using?",
        "can we sweep for any remaining usages that don't use the new type?",
        "is there any reason we don't parse the summary?",
        "what do you think of the placement of the items in level 2?",
        "thoughts on the game that we built here?",
        "Are you able to identify areas where the graphics could be improved?",
        "Would moving the server next to the database speed up the queries?",
        "Why do I not see any activity on this page?",
        "why can I not connect to the server at localhost?",
        "1. How do we log these delays? 2. Where should the timer go?",
        "You are an analyst who evaluates code changes. What changed in this diff?",
        "Can you check the readme.md is all the tools are documented?",
        "can you check if the docs are current?",
        "The process did not work. Can we test using the other CLI instead?",
        "the api returns one tool only, I suspect its gmail. when do we return the content?",
        "<ide_opened_file>The user opened notes.md</ide_opened_file>\n"
        "can you also add the other host's information?",
        "Where is the retry limit set\nCan we make it 5",
        "<command-message>debugging</command-message>\n<command-name>/debugging</command-name>\n"
        "<command-args>why are the stop hooks slow?</command-args>",
        "181",
        "Traceback (most recent call last):\n  File 'x.py', line 3\nValueError",
    ],
)
def test_tasks_reviews_and_advice_are_not_questions_about_the_code(prompt: str) -> None:
    assert not asks(prompt)
    assert not should_capture(prompt, READ_ONLY)


@pytest.mark.parametrize(
    "prompt",
    ["why?", "and the other one?", "what about in the CLI?", "ok, but where is it set?",
     "how does this work with retries?", "yes, that one", "it was supposed to, yeah?",
     "that is the part we changed, right?", "can we also check the comments for fixes?",
     "Seems we lost the disclaimer at the bottom of the replies?", "Not sure if they fixed it?"],
)  # fmt: skip
def test_follow_ups_do_not_stand_alone(prompt: str) -> None:
    assert not stands_alone(prompt)
    assert not should_capture(prompt, READ_ONLY)


def test_a_long_prompt_carries_its_own_context() -> None:
    prompt = (
        "when two manual commits follow each other they get the same checkpoint id in the"
        " status output, can you check how this can happen?"
    )
    assert stands_alone(prompt) and should_capture(prompt, READ_ONLY)


@pytest.mark.parametrize(
    "facts",
    [
        READ_ONLY._replace(reads=0),
        READ_ONLY._replace(edits=True),
        READ_ONLY._replace(recorded=True),
        READ_ONLY._replace(answered_from_fresh_memo=True),
    ],
)
def test_a_turn_must_have_read_changed_nothing_and_found_no_memo(facts: TurnFacts) -> None:
    assert not should_capture("where is the session token refreshed?", facts)


@pytest.mark.parametrize("mark", ["<private>", "<PRIVATE>", "x <private>y</private>"])
def test_a_private_prompt_is_never_captured(mark: str) -> None:
    assert not should_capture(f"where is the session token refreshed? {mark}", READ_ONLY)


def test_a_cut_text_fits_and_says_so() -> None:
    text = "word " * 1000
    found = cut(text, 2_000)
    assert len(found) == 2_000
    assert found == text.strip()[:1_947] + "\n[… cut by explomemo: 1,947 of 4,999 characters kept]"
    assert cut("  short  ", 2_000) == "short"


@pytest.mark.parametrize(
    "prompt",
    [
        "<b>Where</b> is the parser defined and who calls it?",
        "<config><db>x</db></config>\nwhy does the loader ignore the db key?",
        "<abc>pasted</ab> where is it?",
    ],
)
def test_only_an_ides_or_an_apps_blocks_are_taken_off_what_the_user_typed(prompt: str) -> None:
    """A tag a person typed or pasted (HTML, XML) stays in the question."""
    assert typed(prompt) == prompt
    assert typed("<system-reminder>x</system-reminder>\n" + prompt) == prompt


def test_a_prompt_longer_than_a_question_is_not_read() -> None:
    pasted = "where is the retry limit set? " + "log line\n" * (MAX_PROMPT // 9)
    assert len(pasted) > MAX_PROMPT and asks(pasted) and stands_alone(pasted)
    assert not should_capture(pasted, READ_ONLY)
