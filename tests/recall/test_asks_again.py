"""When a captured turn may come unasked: the prompt asks its question nearly again
(explomemo.recall.prompts.asks_again), measured both ways on content words."""

from __future__ import annotations

import pytest

from explomemo.recall.prompts import asks_again

ASKED = (
    "can you help me understand again how this happens: The shadow branch already has"
    " checkpoints from a different session. Starting a new session would orphan the work."
)


@pytest.mark.parametrize(
    "prompt",
    [
        # The one captured turn that answered a later prompt on the replay, reworded so.
        "a coworker ended up in the state of 'The shadow branch already has checkpoints from"
        " a different session. Starting a new session would orphan the work.'",
        ASKED.upper(),
    ],
)
def test_a_prompt_that_asks_the_question_again_does(prompt: str) -> None:
    assert asks_again(prompt, ASKED)


@pytest.mark.parametrize(
    "prompt",
    [
        # Same area, another question.
        "why does starting a new session create a shadow branch at all?",
        # The question with as much again added: a longer ask, not the same one.
        ASKED + " Also list every command that writes checkpoints and how the CLI resumes.",
        # Too short to tell.
        "shadow branch checkpoints?",
    ],
)
def test_a_prompt_that_asks_something_else_does_not(prompt: str) -> None:
    assert not asks_again(prompt, ASKED)


def test_a_question_of_few_content_words_is_never_asked_again() -> None:
    assert not asks_again("where are JWT tokens validated?", "Where are JWT tokens validated?")
