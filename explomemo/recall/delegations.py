"""Which memos answer a delegated prompt: the delegate hook's match.

A main agent delegates an exploration with a prompt written for a fresh agent (it stands
alone), often long and opening with the same boilerplate as the last one. A memo may:

* answer it **whole** ("whole"): the run need not happen; only a memo recorded here by an
  agent or captured here from a delegated run (origin ``agent`` or ``subagent``, not
  imported) may stand in for a run;
* cover **part** of it ("part"): it is handed to the subagent as a head start; any memo
  may (the hook says where each came from).

The score is a pure function of the texts and vectors (:func:`features`, then
:func:`classify`), so labelled pairs (``benchmarks/delegation/``) measure exactly what the
hook runs; the cut-offs are the module's constants (``WHOLE_*``, ``PART_*``), chosen on the
dev half of those pairs.

:func:`match` runs words first: the project's memos that share content words with the
prompt (FTS5) are scored by words alone, and only when one of them could pass with a
perfect similarity is the model loaded (:mod:`explomemo.recall.shipped_model`, without
fastembed) and the prompt embedded. A prompt that no memo comes near costs no model and
no numpy. The shipped model reads the opening of a text only: a long prompt is embedded
as several chunks of :data:`CHUNK_WORDS` words, and the best chunk counts.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Literal, NamedTuple

from explomemo.identifiers import identifiers
from explomemo.inputs import AGENT, SUBAGENT
from explomemo.recall import words
from explomemo.store.database import MemoRow, Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from explomemo.recall.embeddings import Embedder

    Vector = npt.NDArray[np.float32]

Kind = Literal["whole", "part"]

# The cut-offs, chosen on the dev half of benchmarks/delegation/'s labelled pairs (the
# rule of its README: "answers whole" with precision 1.0 there and the most recall, then
# the strictest; "covers part or all" with precision 0.9 or more and the most recall).
# "whole" must pass every WHOLE_* and "part" every PART_*.

#: Cosine of the prompt's best chunk and the memo's question (with its file names).
WHOLE_SIMILARITY = 0.70
#: Mean cosine of the prompt's chunks and the memo's question vector: a prompt that asks
#: for more than the memo has chunks nothing of it matches.
WHOLE_SIMILARITY_MEAN = 0.70
#: Share of the memo question's content words found in the prompt.
WHOLE_QUESTION_WORDS = 0.0
#: Share of the prompt's content words found in the memo's question.
WHOLE_PROMPT_WORDS = 0.70
#: Share of the prompt's distinctive words (identifiers, long words) found in the report.
WHOLE_REPORT_WORDS = 0.60
PART_SIMILARITY = 0.52
PART_QUESTION_WORDS = 0.0
PART_PROMPT_WORDS = 0.10
PART_REPORT_WORDS = 0.30

#: Words a chunk of a long prompt holds (about 110 of the model's word pieces: the
#: shipped model was trained on 128).
CHUNK_WORDS = 80
#: Chunks of a prompt embedded at most (its opening; a longer prompt is a pasted text).
MAX_CHUNKS = 3
#: The start of a prompt that is matched.
MATCH_CHARS = 20_000
#: Content words of the prompt asked of FTS5 for candidates.
QUERY_WORDS = 48
#: Memos that the word search hands over.
CANDIDATES = 30
#: Memos handed to a run as a head start, at most.
MAX_PARTS = 2
#: A word this long or longer is distinctive (besides identifiers).
DISTINCTIVE_LETTERS = 6

#: What delegated prompts say whatever they are about ("Explore … and report …, be
#: thorough").
DELEGATION_WORDS = frozenset(
    """
    explore explores exploring investigate search report reports describe summary summarize
    summarise analyze analyse thorough thoroughly quick medium codebase repository repo
    understand look give list return returns include
    """.split()
)
#: Not content in a delegated prompt: stop words, what a request asks to do, and what
#: delegated prompts all say.
STOP_WORDS = words.STOP_WORDS | words.TASK_WORDS | DELEGATION_WORDS
_WORD = re.compile(r"[^\W_]+")


class Features(NamedTuple):
    """What the match of one prompt and one memo is decided on (each from 0 to 1)."""

    #: The best cosine of a prompt chunk and the memo's question vector; None: not embedded.
    similarity: float | None
    #: The mean cosine of the prompt's chunks; None: not embedded.
    similarity_mean: float | None
    #: Share of the memo question's content words found in the prompt.
    question_words: float
    #: Share of the prompt's content words found in the memo's question.
    prompt_words: float
    #: Share of the prompt's distinctive words found in the memo's report.
    report_words: float


class DelegationMatch(NamedTuple):
    """What :func:`match` found: the memo that answers the prompt whole, if any, else those
    that cover part of it (at most :data:`MAX_PARTS`), with each scored memo's features."""

    whole: MemoRow | None
    parts: list[MemoRow]
    scored: dict[int, Features]


NO_MATCH = DelegationMatch(None, [], {})


def classify(f: Features) -> Kind | None:
    """ "whole", "part" or None for a memo of these features, by the module's cut-offs; a
    memo not embedded (no similarity) is None."""
    if f.similarity is None:
        return None
    if (
        f.similarity >= WHOLE_SIMILARITY
        and (f.similarity_mean or 0.0) >= WHOLE_SIMILARITY_MEAN
        and f.question_words >= WHOLE_QUESTION_WORDS
        and f.prompt_words >= WHOLE_PROMPT_WORDS
        and f.report_words >= WHOLE_REPORT_WORDS
    ):
        return "whole"
    if (
        f.similarity >= PART_SIMILARITY
        and f.question_words >= PART_QUESTION_WORDS
        and f.prompt_words >= PART_PROMPT_WORDS
        and f.report_words >= PART_REPORT_WORDS
    ):
        return "part"
    return None


def could_match(f: Features) -> bool:
    """Whether a memo scored by words alone would match with a perfect similarity: the
    model is loaded only for such a memo."""
    return classify(f._replace(similarity=1.0, similarity_mean=1.0)) is not None


def features(
    prompt: str,
    question: str,
    conclusion: str,
    prompt_vectors: Sequence[Vector] | None = None,
    question_vector: Vector | None = None,
) -> Features:
    """The features of a delegated ``prompt`` against a memo's ``question`` and
    ``conclusion`` (its report); ``prompt_vectors`` are the unit vectors of the prompt's
    chunks (:func:`prompt_chunks`) and ``question_vector`` the memo's question vector
    (:func:`~explomemo.recall.vectors.question_text`), both of one model, or None."""
    content, every, distinctive = _prompt_words(prompt[:MATCH_CHARS])
    asked = set(_content_stems(question))
    report = _all_stems(conclusion) | _all_stems(question)
    report_names = identifiers(conclusion) | identifiers(question)
    found = sum(1 for word in distinctive if word in report_names or words.stem(word) in report)
    by_words = Features(
        similarity=None,
        similarity_mean=None,
        question_words=_share(asked, every),
        prompt_words=_share(set(content), asked),
        report_words=found / len(distinctive) if distinctive else 0.0,
    )
    return embedded(by_words, prompt_vectors, question_vector)


def embedded(
    by_words: Features,
    prompt_vectors: Sequence[Vector] | None,
    question_vector: Vector | None,
) -> Features:
    """``by_words`` (a memo's features by words alone) with the similarities of the
    prompt's chunk vectors to the memo's question vector, when both are given."""
    if not prompt_vectors or question_vector is None:
        return by_words
    cosines = [float(vector @ question_vector) for vector in prompt_vectors]
    return by_words._replace(similarity=max(cosines), similarity_mean=sum(cosines) / len(cosines))


def prompt_chunks(prompt: str) -> list[str]:
    """The texts a prompt is embedded as: its first :data:`MAX_CHUNKS` runs of
    :data:`CHUNK_WORDS` words."""
    split = prompt[:MATCH_CHARS].split()
    return [
        " ".join(split[start : start + CHUNK_WORDS])
        for start in range(0, min(len(split), CHUNK_WORDS * MAX_CHUNKS), CHUNK_WORDS)
    ] or [prompt.strip()]


def _share(wanted: AbstractSet[str], present: AbstractSet[str]) -> float:
    return len(wanted & present) / len(wanted) if wanted else 0.0


def _content_stems(text: str) -> dict[str, str]:
    """``text``'s content words by stem (the first word of each stem), in order."""
    found: dict[str, str] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and len(word) > 1:
            found.setdefault(words.stem(word), word)
    return found


def _all_stems(text: str) -> set[str]:
    return {words.stem(w) for w in _WORD.findall(text.lower())}


@functools.lru_cache(maxsize=4)
def _prompt_words(prompt: str) -> tuple[dict[str, str], frozenset[str], frozenset[str]]:
    """A prompt's content words by stem, the stems of all its words, and its distinctive
    words (identifiers, and content words of :data:`DISTINCTIVE_LETTERS` letters or more):
    computed once for the many memos a prompt is scored against."""
    content = _content_stems(prompt)
    names = {name for name in identifiers(prompt) if name not in STOP_WORDS}
    long_words = {w for w in content.values() if len(w) >= DISTINCTIVE_LETTERS}
    return content, frozenset(_all_stems(prompt)), frozenset(names | long_words)


def stands_in(memo: MemoRow) -> bool:
    """Whether ``memo`` may answer a delegation whole: recorded here by an agent or
    captured here from a delegated run, not imported."""
    return memo.origin in (AGENT, SUBAGENT) and not memo.imported


def match(
    store: Store,
    conn: sqlite3.Connection,
    project: str,
    prompt: str,
    *,
    keep: Callable[[list[MemoRow]], list[MemoRow]] = list,
    embedder: Callable[[], Embedder | None] | None = None,
) -> DelegationMatch:
    """The memos of ``project`` that answer a delegated ``prompt`` whole or in part.

    ``keep`` leaves out memos that do not belong (another repository's); ``embedder``
    loads the model, called only when a memo comes near by words (default:
    :func:`shipped_embedder`). The memos' stored question vectors are used when they are
    the model's; a memo without one has its question embedded here."""
    text = prompt[:MATCH_CHARS]
    content = list(_prompt_words(text)[0].values())[:QUERY_WORDS]
    if not content:
        return NO_MATCH
    query = " OR ".join('"' + word.replace('"', '""') + '"' for word in content)
    ranked = store.word_matches(conn, project, query, CANDIDATES)
    memos = keep(store.memos(conn, ids=[memo_id for memo_id, _ in ranked]))
    by_words = {memo.id: features(text, memo.question, memo.conclusion) for memo in memos}
    near = [memo for memo in memos if could_match(by_words[memo.id])]
    if not near:
        return NO_MATCH
    model = (embedder or shipped_embedder)()
    if model is None:
        return NO_MATCH
    chunks = list(model.embed(prompt_chunks(text)))
    vectors = _question_vectors(store, conn, model, near, len(chunks[0]))
    scored = {memo.id: embedded(by_words[memo.id], chunks, vectors[memo.id]) for memo in near}
    kinds = {memo.id: classify(scored[memo.id]) for memo in near}
    best = sorted(near, key=lambda m: (-(scored[m.id].similarity or 0.0), m.id))
    whole = next((m for m in best if kinds[m.id] == "whole" and stands_in(m)), None)
    if whole is not None:
        return DelegationMatch(whole, [], scored)
    parts = [m for m in best if kinds[m.id] is not None][:MAX_PARTS]
    return DelegationMatch(None, parts, scored)


def shipped_embedder() -> Embedder | None:
    """The shipped model, run without fastembed; None when ``EXPLOMEMO_EMBEDDINGS`` is off.

    The shipped model whatever ``EXPLOMEMO_MODEL`` names: a hook must not download or
    import fastembed (memos' stored vectors of another model are then not used)."""
    from explomemo.recall.embeddings import embeddings_enabled, load_embedder

    if not embeddings_enabled():
        return None
    return load_embedder({})  # no model named: the shipped one


def _question_vectors(
    store: Store, conn: sqlite3.Connection, model: Embedder, memos: Sequence[MemoRow], dim: int
) -> dict[int, Vector]:
    """The question vector of each memo: stored, when of ``model`` (and ``dim`` long);
    else embedded now."""
    import numpy as np

    from explomemo.recall.vectors import question_text

    ids = [memo.id for memo in memos]
    marks = ",".join("?" * len(ids))
    found: dict[int, Vector] = {}
    for memo_id, blob in conn.execute(
        f"SELECT id, question_embedding FROM memos WHERE id IN ({marks})"
        " AND embedding_model = ? AND question_embedding IS NOT NULL",
        (*ids, model.model_id),
    ):
        if isinstance(blob, bytes) and len(blob) == 4 * dim:  # else embedded again below
            found[int(memo_id)] = np.frombuffer(blob, dtype=np.float32)
    lacking = [memo for memo in memos if memo.id not in found]
    if lacking:
        files = store.files_of(conn, [memo.id for memo in lacking])
        texts = [question_text(m.question, [f.path for f in files[m.id]]) for m in lacking]
        for memo, vector in zip(lacking, model.embed(texts), strict=True):
            found[memo.id] = vector
    return found
