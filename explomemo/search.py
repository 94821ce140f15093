"""Search by meaning and by words, fused, with a relevance cut-off.

Vectors of a project's memos are kept in one contiguous int8 matrix in
memory, built once from the store and rebuilt only when the database changed.
Word overlap is SQLite FTS5 (BM25, Porter stemming) over question,
conclusion and file paths; the query keeps only its content words, so "how is
X wired?" does not match every memo through "how" and "is".

Scores are in [0, 1]. With a model, a memo's score is its cosine similarity
plus a small weight of its word score, less a penalty when the query's words
are unknown to every memo; without a model, the word score alone. A memo
below the cut-off is not returned, so an unrelated query gets nothing.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from explomemo.store import Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Fused score a memo needs when a model is present. It, WORDS_WEIGHT and
#: UNKNOWN_PENALTY were chosen together on the tuning queries of
#: benchmarks/recall_quality (best recall@1 with 8 of 10 unrelated queries
#: answered with nothing) and then checked once on its held-out queries.
FUSED_CUTOFF = 0.27
#: Weight of the word score in the fused score.
WORDS_WEIGHT = 0.20
#: Taken off the fused score, times the share of the query's content words
#: that no memo in the database contains: a query naming only things the
#: memos never mention ("how are SQLAlchemy sessions scoped?") must be closer
#: in meaning to be returned.
UNKNOWN_PENALTY = 0.10
#: Word score a memo needs when words decide alone (no model).
WORDS_CUTOFF = 0.22
#: Share of IDF-weighted coverage in the word score (the rest is BM25).
COVERAGE_WEIGHT = 0.85
#: Content words of a query that count.
MAX_QUERY_WORDS = 16
#: A word in more than this share of all memos (and more than COMMON_FLOOR) picks no candidates.
COMMON_SHARE = 0.05
COMMON_FLOOR = 50
#: How much of a memo's text is read for word coverage.
MAX_TEXT_CHARS = 8_000
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
class WordScores:
    """Word scores of the memos sharing a content word with a query, and what the query lacks."""

    scores: dict[int, float]
    #: Share of the query's content words found in no memo at all (0 when it has none).
    unknown: float = 0.0


@dataclass
class Candidate:
    """A memo that passed the cut-off, with how it matched."""

    id: int
    score: float
    matched_by: Literal["embedding", "words", "both"]


class VectorIndex:
    """The vectors of one project's memos for one model: ids and one contiguous int8 matrix.

    Each row is kept as int8 with a scale of its own (its largest component
    maps to 127): a quarter of the memory of float32, 37 MB instead of
    147 MB at 100,000 memos of 384 dimensions. A product converts the rows
    back to float32 a block at a time; its cosines are within about 0.002
    of float32's. Rows live in buffers with spare capacity, so a memo this
    process records is added in place instead of rebuilding the matrix.
    """

    def __init__(
        self,
        ids: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        count: int,
        version: int,
        lacking: int,
        model_id: str,
    ) -> None:
        self._ids = ids
        self._codes = codes
        self._scales = scales
        self._count = count
        self.version = version
        #: Memos of the project without a vector of this model.
        self.lacking = lacking
        self.model_id = model_id

    def top(self, query: npt.NDArray[np.float32], n: int) -> list[tuple[int, float]]:
        """The ``n`` most similar memos as (id, cosine)."""
        import numpy as np

        count = self._count
        if count == 0:
            return []
        sims = np.empty(count, dtype=np.float32)
        # Scratch of this call (calls run on several threads at once).
        block = np.empty((min(count, SCAN_ROWS), self._codes.shape[1]), dtype=np.float32)
        for start in range(0, count, SCAN_ROWS):
            end = min(start + SCAN_ROWS, count)
            rows = block[: end - start]
            rows[...] = self._codes[start:end]
            np.matmul(rows, query, out=sims[start:end])
        sims *= self._scales[:count]
        n = min(n, count)
        best = np.argpartition(-sims, n - 1)[:n]
        best = best[np.argsort(-sims[best])]
        return [(int(self._ids[i]), float(sims[i])) for i in best]

    def upsert(self, memo_id: int, vector: bytes) -> None:
        """Put one memo's vector in place (replacing its row, or adding one)."""
        import numpy as np

        row = np.frombuffer(vector, dtype=np.float32)[None, :]
        ids = self._ids[: self._count]
        at = int(np.searchsorted(ids, memo_id))
        if at < self._count and ids[at] == memo_id:
            _quantize(row, self._codes[at : at + 1], self._scales[at : at + 1])
            return
        if at != self._count:
            raise ValueError("memo ids arrive in increasing order")
        if self._count == len(self._ids):
            capacity = max(16, self._count + self._count // 2)
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_codes = np.empty((capacity, self._codes.shape[1]), dtype=np.int8)
            grown_scales = np.empty(capacity, dtype=np.float32)
            grown_ids[: self._count] = ids
            grown_codes[: self._count] = self._codes[: self._count]
            grown_scales[: self._count] = self._scales[: self._count]
            self._ids, self._codes, self._scales = grown_ids, grown_codes, grown_scales
        at = self._count
        self._ids[at] = memo_id
        _quantize(row, self._codes[at : at + 1], self._scales[at : at + 1])
        self._count += 1


#: Rows converted at a time, to quantize or to multiply (1.5 MB of float32 at 384 dimensions).
SCAN_ROWS = 1024


def _quantize(
    rows: npt.NDArray[np.float32], codes: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]
) -> None:
    """Write ``rows`` into ``codes`` as int8, each with the scale that maps its peak to 127.

    A row of zeros, one with a NaN or an infinity, or one whose largest
    component is subnormal is stored as zeros: it scores 0 against every query.
    """
    import numpy as np

    peak = np.abs(rows).max(axis=1)
    # A scale below float32's smallest normal number loses the precision
    # that keeps codes within +-127.
    usable = np.isfinite(peak) & (peak >= 127 * np.finfo(np.float32).tiny)
    scale = np.where(usable, peak / 127, 1).astype(np.float32)
    with np.errstate(invalid="ignore"):
        quantized = np.where(usable[:, None], np.rint(rows / scale[:, None]), 0)
    np.clip(quantized, -127, 127, out=quantized)
    codes[...] = quantized
    scales[...] = scale


def build_vector_index(
    conn: sqlite3.Connection, project: str, model_id: str, dim: int, version: int
) -> VectorIndex:
    """Read a project's vectors of ``model_id`` into one preallocated int8 matrix.

    The float32 rows pass through a block of :data:`SCAN_ROWS`, so the
    float32 matrix never exists whole.
    """
    import numpy as np

    total, count = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE embedding_model = ?) FROM memos WHERE project = ?",
        (model_id, project),
    ).fetchone()
    # Spare rows, so the memos this process records next are added in place
    # instead of copying the whole matrix.
    capacity = count + max(64, count // 32)
    ids = np.empty(capacity, dtype=np.int64)
    codes = np.empty((capacity, dim), dtype=np.int8)
    scales = np.empty(capacity, dtype=np.float32)
    block = np.empty((SCAN_ROWS, dim), dtype=np.float32)
    filled = pending = 0
    for memo_id, blob in conn.execute(
        "SELECT id, embedding FROM memos WHERE project = ? AND embedding_model = ? ORDER BY id",
        (project, model_id),
    ):
        if filled + pending == count or blob is None or len(blob) != dim * 4:
            continue
        ids[filled + pending] = memo_id
        block[pending] = np.frombuffer(blob, dtype=np.float32)
        pending += 1
        if pending == SCAN_ROWS:
            _quantize(block, codes[filled : filled + pending], scales[filled : filled + pending])
            filled, pending = filled + pending, 0
    end = filled + pending
    _quantize(block[:pending], codes[filled:end], scales[filled:end])
    return VectorIndex(ids, codes, scales, end, version, total - end, model_id)


class WordSearch:
    """Word-overlap scores from FTS5, with document frequencies kept between queries.

    A word's document frequency is counted once (and again only after the
    number of memos moved by a tenth). Words found in more than
    ``COMMON_SHARE`` of all memos do not pick candidates: BM25 over them
    would rank most of the database. They still count in coverage.
    """

    def __init__(self) -> None:
        self._frequencies: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def scores(
        self,
        store: Store,
        conn: sqlite3.Connection,
        project: str,
        query: str,
        also: Iterable[int] = (),
    ) -> WordScores:
        """Word scores in [0, 1] of the memos that share a content word with ``query``.

        ``also`` adds candidates found another way (by vector). The score is
        mostly IDF-weighted coverage (the share of the query's informativeness
        that the memo contains), which means the same in a project of 5 memos
        as of 50,000; BM25 breaks ties between memos that cover the same words.
        """
        words = content_words(query)[:MAX_QUERY_WORDS]
        if not words:
            return WordScores({})
        total, frequencies = self._frequencies_of(store, conn, words)
        unknown = sum(1 for w in words if not frequencies[w]) / len(words)
        common = max(COMMON_FLOOR, COMMON_SHARE * total)
        rare = [w for w in words if frequencies[w] <= common]
        ranks: dict[int, float] = {}
        if rare:
            ranks = dict(store.word_matches(conn, project, _any_of(rare), CANDIDATES))
        candidates = set(ranks) | set(also)
        if not candidates:
            return WordScores({}, unknown)
        idf = {
            w: math.log(1.0 + (total - frequencies[w] + 0.5) / (frequencies[w] + 0.5))
            for w in words
        }
        weight_sum = sum(idf.values())
        # A word is in a memo when some word of the memo starts with its stem.
        # One pattern for all stems scans each text once; longest first, so a
        # stem that is a prefix of another is still seen through the longer one.
        stems = {w: _stem(w) for w in words}
        alternatives = sorted(set(stems.values()), key=lambda stem: (-len(stem), stem))
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, alternatives)) + ")")
        scores: dict[int, float] = {}
        for memo_id, text in store.memo_texts(conn, sorted(candidates)):
            found = set(pattern.findall(text[:MAX_TEXT_CHARS].lower()))
            covered = sum(
                weight
                for w, weight in idf.items()
                if any(seen.startswith(stems[w]) for seen in found)
            )
            if not covered:
                continue
            rank = ranks.get(memo_id, 0.0)
            scores[memo_id] = COVERAGE_WEIGHT * covered / weight_sum + (1 - COVERAGE_WEIGHT) * (
                1.0 - math.exp(-max(0.0, -rank) / BM25_SCALE)
            )
        return WordScores(scores, unknown)

    def _frequencies_of(
        self, store: Store, conn: sqlite3.Connection, words: list[str]
    ) -> tuple[int, dict[str, int]]:
        total = store.indexed_count(conn)
        with self._lock:
            if abs(total - self._total) > self._total / 10:
                self._frequencies.clear()
                self._total = total
            known = {w: self._frequencies[w] for w in words if w in self._frequencies}
        for word in words:
            if word not in known:
                known[word] = store.word_frequency(conn, _any_of([word]))
        with self._lock:
            # A word no memo holds is counted again next time: the next
            # record may be the first to hold it (it costs one index lookup).
            self._frequencies.update((w, n) for w, n in known.items() if n)
        return total, known


def _stem(word: str) -> str:
    # A crude stemmer for containment, close enough to FTS5's Porter stemming
    # on the endings that matter: "retries"/"retry", "wired"/"wire".
    for suffix in ("ing", "ies", "ied", "ed", "es", "s", "y", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _any_of(words: list[str]) -> str:
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def fuse(vector_hits: list[tuple[int, float]] | None, words: WordScores) -> list[Candidate]:
    """Blend both sides into candidates above the cut-off, best first.

    ``vector_hits`` is None when no model is available: words decide alone.
    With a model, ``matched_by`` says which signal carried the memo over the
    cut-off: its embedding alone, words (the embedding alone fell short), or
    both (the embedding sufficed and words matched too).
    """
    found: list[Candidate] = []
    if vector_hits is None:
        for memo_id, score in words.scores.items():
            if score >= WORDS_CUTOFF:
                found.append(Candidate(memo_id, round(score, 4), "words"))
    else:
        cosines = dict(vector_hits)
        # A memo found by words only is not among the nearest vectors: its
        # cosine is at most the lowest one there.
        floor = min(cosines.values(), default=0.0)
        penalty = UNKNOWN_PENALTY * words.unknown
        for memo_id in cosines.keys() | words.scores.keys():
            cosine = cosines.get(memo_id, floor) - penalty
            word = words.scores.get(memo_id, 0.0)
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
