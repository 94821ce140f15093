"""The delegate hook's match (explomemo.recall.delegations): the pure features and cut-offs, and
the match over a real database, words first, the model loaded only when a memo comes near."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from helpers import open_cache

from explomemo.recall import delegations
from explomemo.recall.delegations import Features, classify, could_match, features, match
from explomemo.store.database import Store

QUESTION = "Explore src/ and report where a JWT token is verified: the function and the file."
REPORT = "src/auth.py middleware() calls tokens.verify(), which checks the HS256 signature."
REWORDED = "Explore src/ and report where JWT tokens are verified: which function and which file."
MORE = QUESTION + " Also report how the signing key is set and what a bad signature returns."
UNRELATED = "Explore the billing code and report how refunds are retried after a failure."

WHOLE = Features(
    similarity=delegations.WHOLE_SIMILARITY,
    similarity_mean=delegations.WHOLE_SIMILARITY_MEAN,
    question_words=delegations.WHOLE_QUESTION_WORDS,
    prompt_words=delegations.WHOLE_PROMPT_WORDS,
    report_words=delegations.WHOLE_REPORT_WORDS,
)


def test_classify_follows_the_cut_offs() -> None:
    assert classify(WHOLE) == "whole"
    assert classify(WHOLE._replace(prompt_words=delegations.WHOLE_PROMPT_WORDS - 0.01)) == "part"
    assert classify(WHOLE._replace(similarity=delegations.WHOLE_SIMILARITY - 0.01)) == "part"
    below = delegations.WHOLE_SIMILARITY_MEAN - 0.01
    assert classify(WHOLE._replace(similarity_mean=below)) == "part"
    assert classify(WHOLE._replace(report_words=delegations.WHOLE_REPORT_WORDS - 0.01)) == "part"
    part = WHOLE._replace(
        similarity=delegations.PART_SIMILARITY,
        similarity_mean=0.0,
        question_words=delegations.PART_QUESTION_WORDS,
        prompt_words=delegations.PART_PROMPT_WORDS,
        report_words=delegations.PART_REPORT_WORDS,
    )
    assert classify(part) == "part"
    assert classify(part._replace(prompt_words=delegations.PART_PROMPT_WORDS - 0.01)) is None
    assert classify(part._replace(report_words=delegations.PART_REPORT_WORDS - 0.01)) is None
    assert classify(part._replace(similarity=delegations.PART_SIMILARITY - 0.01)) is None
    assert classify(WHOLE._replace(similarity=None)) is None  # not embedded: never a match


def test_could_match_is_classify_with_a_perfect_similarity() -> None:
    words_only = WHOLE._replace(similarity=None, similarity_mean=None)
    assert could_match(words_only)
    assert not could_match(words_only._replace(prompt_words=0.05))


def test_features_by_words() -> None:
    same = features(REWORDED, QUESTION, REPORT)
    assert (same.similarity, same.similarity_mean) == (None, None)
    assert same.question_words == same.prompt_words == 1.0
    more = features(MORE, QUESTION, REPORT)
    assert more.question_words == 1.0 and more.prompt_words < 0.6
    assert 0.3 <= more.report_words < 1.0  # "signature" is the report's, "signing" not
    other = features(UNRELATED, QUESTION, REPORT)
    assert other.question_words < 0.5 and other.report_words < 0.3


def _unit(*values: float) -> npt.NDArray[np.float32]:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_features_take_the_best_chunk_and_the_mean() -> None:
    chunks = [_unit(1, 0), _unit(0, 1)]
    found = features(REWORDED, QUESTION, REPORT, chunks, _unit(1, 0))
    assert found.similarity == pytest.approx(1.0) and found.similarity_mean == pytest.approx(0.5)


def test_a_long_prompt_is_embedded_as_its_first_chunks() -> None:
    words = [f"w{n}" for n in range(1_000)]
    chunks = delegations.prompt_chunks(" ".join(words))
    assert len(chunks) == delegations.MAX_CHUNKS
    assert chunks[1].split() == words[delegations.CHUNK_WORDS : 2 * delegations.CHUNK_WORDS]
    assert delegations.prompt_chunks("short") == ["short"]


class Constant:
    """An embedder giving every text the same vector (so every memo is similar), counting
    loads and the texts it embedded."""

    model_id = "constant"

    def __init__(self) -> None:
        self.loads = 0
        self.embedded: list[str] = []

    def load(self) -> Constant:
        self.loads += 1
        return self

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded += texts
        return np.tile(_unit(1, 0, 0), (len(texts), 1))


@pytest.fixture
def store(db_path: Path, tmp_path: Path) -> Store:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src/auth.py").write_text("def middleware(request): ...\n")
    with open_cache(db_path) as cache:
        for question, origin in [(QUESTION, "agent"), (UNRELATED, "agent")]:
            cache.record(
                question=question,
                conclusion=REPORT if question == QUESTION else "src/auth.py retries refunds.",
                files=["src/auth.py"],
                project="shop",
                root=str(root),
            )
            assert origin == "agent"
    return Store.open_existing(db_path, 50)


def _match(store: Store, prompt: str, model: Constant) -> delegations.DelegationMatch:
    with store.read() as conn:
        return match(store, conn, "shop", prompt, embedder=model.load)


def test_no_memo_near_by_words_loads_no_model(store: Store) -> None:
    model = Constant()
    found = _match(store, "Explore the parser and report how escapes are decoded.", model)
    assert found == delegations.NO_MATCH and model.loads == 0


def test_a_memo_near_by_words_is_embedded_and_matched(store: Store) -> None:
    model = Constant()
    found = _match(store, REWORDED, model)
    assert found.whole is not None and found.whole.question == QUESTION
    assert model.loads == 1
    # The prompt's chunk, then the question of each memo near (none has a stored vector).
    assert model.embedded[0] == REWORDED and any(QUESTION in t for t in model.embedded[1:])
    long = Constant()
    assert _match(store, " ".join([REWORDED] * 20), long).whole is not None
    assert long.embedded[: delegations.MAX_CHUNKS] == delegations.prompt_chunks(
        " ".join([REWORDED] * 20)
    )
    assert _match(store, MORE, Constant()).whole is None
    assert [m.question for m in _match(store, MORE, Constant()).parts] == [QUESTION]


def test_stored_question_vectors_of_the_model_are_used(store: Store) -> None:
    """A stored vector orthogonal to the prompt's: not similar, no match; nothing embedded
    but the prompt."""
    with store.write() as conn:
        for memo in store.memos(conn, project="shop"):
            away = _unit(0, 1, 0).tobytes()
            store.set_embedding(conn, memo.id, away, away, "constant", "hash")
    model = Constant()
    assert _match(store, REWORDED, model) == delegations.DelegationMatch(
        None, [], _match(store, REWORDED, Constant()).scored
    )
    assert model.embedded == [REWORDED]


def test_only_a_memo_recorded_here_by_an_agent_or_a_delegated_run_answers_whole(
    store: Store,
) -> None:
    """A turn's capture (origin transcript) or an imported memo is at most a head start."""
    with store.write() as conn:
        conn.execute("UPDATE memos SET origin = 'transcript'")
    found = _match(store, REWORDED, Constant())
    assert found.whole is None and [m.question for m in found.parts] == [QUESTION]
    with store.write() as conn:
        conn.execute("UPDATE memos SET origin = 'subagent'")
    assert _match(store, REWORDED, Constant()).whole is not None
    with store.write() as conn:
        conn.execute("UPDATE memos SET imported = 1")
    assert _match(store, REWORDED, Constant()).whole is None


def test_memos_left_out_by_keep_are_not_matched(store: Store) -> None:
    with store.read() as conn:
        found = match(store, conn, "shop", REWORDED, keep=lambda memos: [], embedder=Constant)
    assert found == delegations.NO_MATCH


def test_a_stored_vector_of_another_length_is_embedded_again(store: Store) -> None:
    with store.write() as conn:
        for memo in store.memos(conn, project="shop"):
            store.set_embedding(conn, memo.id, b"\x00" * 5, b"\x00" * 5, "constant", "hash")
    model = Constant()
    assert _match(store, REWORDED, model).whole is not None
    assert any(QUESTION in text for text in model.embedded[1:])
