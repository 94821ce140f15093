"""Search by meaning and by words, fused, with a relevance cut-off.

Vectors of a project's memos are kept in one contiguous float32 matrix in
memory, built once from the store and rebuilt only when the database changed.
Word overlap is SQLite FTS5 (BM25, Porter stemming) over question,
conclusion and file paths; the query keeps only its content words, so "how is
X wired?" does not match every memo through "how" and "is".

Scores are in [0, 1]. With a model, a memo's score is its cosine similarity
plus a small weight of its word score; without one, the word score alone. A
memo below the cut-off is not returned, so an unrelated query gets nothing.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from explomemo.store import Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Fused score (cosine + weighted word score) a memo needs when a model is present.
#: Chosen on benchmarks/recall_quality: MiniLM gives unrelated programming
#: questions a best cosine of 0.14-0.39, and a paraphrase's memo 0.30 or more
#: nine times in ten.
FUSED_CUTOFF = 0.31
#: Weight of the word score in the fused score.
WORDS_WEIGHT = 0.10
#: Word score a memo needs when words decide alone (no model).
WORDS_CUTOFF = 0.22
#: Share of IDF-weighted coverage in the word score (the rest is BM25).
COVERAGE_WEIGHT = 0.85
#: Content words of a query that count.
MAX_QUERY_WORDS = 16
#: Word score from which words count as having matched (for ``matched_by``).
WORDS_MATCH = 0.15
#: BM25 at which the word score is 1 - 1/e.
BM25_SCALE = 8.0
#: How many candidates each side hands to the fusion.
CANDIDATES = 60

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could did didn do does doesn doing don
    down during each else ever every few for from further get gets got had has have having he
    her here hers him his how i if in into is isn it its itself just let lets like may me
    might more most must my no nor not now of off on once only or other ought our ours out
    over own same shall she should so some such than that the their theirs them then there
    these they this those through to too under until up upon us very was wasn we were what
    whats when where which while who whom whose why will with within without would you your
    yours thing things stuff way ways happen happens happening work works done make makes
    code file files find tell show explain
    """.split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def content_words(text: str) -> list[str]:
    """The query's words that carry meaning: lower-cased, no stop words, no duplicates."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1]
    return list(dict.fromkeys(words))


@dataclass
class Candidate:
    """A memo that passed the cut-off, with how it matched."""

    id: int
    score: float
    matched_by: Literal["embedding", "words", "both"]


class VectorIndex:
    """The vectors of one project's memos for one model: ids and a contiguous matrix."""

    def __init__(
        self,
        ids: npt.NDArray[np.int64],
        matrix: npt.NDArray[np.float32],
        version: int,
        lacking: int,
    ) -> None:
        self.ids = ids
        self.matrix = matrix
        self.version = version
        #: Memos of the project without a vector of this model.
        self.lacking = lacking

    def top(self, query: npt.NDArray[np.float32], n: int) -> list[tuple[int, float]]:
        """The ``n`` most similar memos as (id, cosine)."""
        import numpy as np

        if len(self.ids) == 0:
            return []
        sims = self.matrix @ query
        n = min(n, len(sims))
        best = np.argpartition(-sims, n - 1)[:n]
        best = best[np.argsort(-sims[best])]
        return [(int(self.ids[i]), float(sims[i])) for i in best]


def build_vector_index(
    conn: sqlite3.Connection, project: str, model_id: str, dim: int, version: int
) -> VectorIndex:
    """Read a project's vectors of ``model_id`` into one preallocated matrix, row by row."""
    import numpy as np

    total, count = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE embedding_model = ?) FROM memos WHERE project = ?",
        (model_id, project),
    ).fetchone()
    ids = np.empty(count, dtype=np.int64)
    matrix = np.empty((count, dim), dtype=np.float32)
    filled = 0
    for memo_id, blob in conn.execute(
        "SELECT id, embedding FROM memos WHERE project = ? AND embedding_model = ? ORDER BY id",
        (project, model_id),
    ):
        if filled == count or blob is None or len(blob) != dim * 4:
            continue
        ids[filled] = memo_id
        matrix[filled] = np.frombuffer(blob, dtype=np.float32)
        filled += 1
    return VectorIndex(ids[:filled], matrix[:filled], version, total - filled)


def word_scores(
    store: Store, conn: sqlite3.Connection, project: str, query: str
) -> dict[int, float]:
    """Word scores in [0, 1] of the project's memos that share a content word with ``query``.

    The score is mostly IDF-weighted coverage (the share of the query's
    informativeness that the memo contains), which means the same in a
    project of 5 memos as of 50,000; BM25 breaks ties between memos that
    cover the same words.
    """
    words = content_words(query)[:MAX_QUERY_WORDS]
    if not words:
        return {}
    ranks = dict(store.word_matches(conn, project, _any_of(words), CANDIDATES))
    if not ranks:
        return {}
    total_docs = store.indexed_count(conn)
    coverage = dict.fromkeys(ranks, 0.0)
    weight_sum = 0.0
    for word in words:
        frequency, containing = store.word_frequency(conn, _any_of([word]), list(ranks))
        idf = math.log(1.0 + (total_docs - frequency + 0.5) / (frequency + 0.5))
        weight_sum += idf
        for memo_id in containing:
            coverage[memo_id] += idf
    return {
        memo_id: COVERAGE_WEIGHT * coverage[memo_id] / weight_sum
        + (1 - COVERAGE_WEIGHT) * (1.0 - math.exp(-max(0.0, -rank) / BM25_SCALE))
        for memo_id, rank in ranks.items()
    }


def _any_of(words: list[str]) -> str:
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def fuse(vector_hits: list[tuple[int, float]] | None, words: dict[int, float]) -> list[Candidate]:
    """Blend both sides into candidates above the cut-off, best first.

    ``vector_hits`` is None when no model is available: words decide alone.
    With a model, ``matched_by`` says which signal carried the memo over the
    cut-off: its embedding alone, words (the embedding alone fell short), or
    both (the embedding sufficed and words matched too).
    """
    found: list[Candidate] = []
    if vector_hits is None:
        for memo_id, score in words.items():
            if score >= WORDS_CUTOFF:
                found.append(Candidate(memo_id, round(score, 4), "words"))
    else:
        cosines = dict(vector_hits)
        # A memo found by words only is not among the nearest vectors: its
        # cosine is at most the lowest one there.
        floor = min(cosines.values(), default=0.0)
        for memo_id in cosines.keys() | words.keys():
            cosine = cosines.get(memo_id, floor)
            word = words.get(memo_id, 0.0)
            score = min(1.0, max(0.0, cosine + WORDS_WEIGHT * word))
            if score < FUSED_CUTOFF:
                continue
            matched: Literal["embedding", "words", "both"]
            if cosine < FUSED_CUTOFF:
                matched = "words"
            elif word >= WORDS_MATCH:
                matched = "both"
            else:
                matched = "embedding"
            found.append(Candidate(memo_id, round(score, 4), matched))
    found.sort(key=lambda c: (-c.score, c.id))
    return found
