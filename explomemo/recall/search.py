"""Search by meaning and by words, fused and ranked, with a relevance cut-off.

Vectors of a project's memos are kept in one contiguous int8 matrix in
memory, built once from the store and rebuilt only when the database changed.
Word overlap is SQLite FTS5 (BM25, Porter stemming) over question,
conclusion and file paths; the query keeps only its content words, so "how is
X wired?" does not match every memo through "how" and "is".

Scores are in [0, 1]. With a model, a memo's score is its cosine similarity
plus a small weight of its word score, less a penalty when the query's words
are unknown to every memo; without a model, the word score alone. A memo
below the cut-off is not returned; with a model, neither is any memo when the
best one does not stand out from the project's memos (a question of the
project's domain that no memo answers). The cut-off favours having the right
memo among the matches: the agent that asked judges them by their questions.
The one ranking is :func:`ranked`: pinned memos first, then by score, a stale
memo scoring a little less.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from explomemo.identifiers import identifiers
from explomemo.recall.words import STOP_WORDS, stem
from explomemo.store.database import Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Fused score a memo needs when a model is present. It, UNKNOWN_PENALTY and
#: SPREAD_Z were chosen together in the seventh round on the tuning sets of
#: benchmarks/recall_quality (tune.py), for an agent that judges the matches by
#: their questions: the best recall@3 with recall@1 no lower on any tuning set and
#: the mean answer to an unrelated question within 1 KB (the fourth round's 0.22,
#: 0.40 and 2.1 answered as many near-domain unrelated questions with nothing as
#: they could). WORDS_WEIGHT and QUESTION_DISCOUNT are the third round's.
FUSED_CUTOFF = 0.12
#: Weight of the word score in the fused score.
WORDS_WEIGHT = 0.25
#: At similar relevance a fresh memo ranks above a stale one: this much score.
STALE_PENALTY = 0.05
#: A memo's vector score is the better of its two cosines, the question's
#: less this much: a query asked like the memo's question is found by it,
#: while a short question vector, closer to every short query, does not
#: lift unrelated queries over the cut-off.
QUESTION_DISCOUNT = 0.05
#: Taken off the fused score, times the square (UNKNOWN_EXPONENT) of the share of the query's
#: content words that no memo in the database contains: a query naming only
#: things the memos never mention ("how are SQLAlchemy sessions scoped?")
#: must be much closer in meaning to be returned, while one odd word in an
#: otherwise familiar question costs little (a share of 1/5 costs 0.024).
UNKNOWN_PENALTY = 0.60
#: The power of that share (the third round took it as it is: 1).
UNKNOWN_EXPONENT = 2
#: A query is answered (pinned memos aside) only when its best memo stands
#: out from the project's memos: its score (vector score + words +
#: identifiers) at least this many standard deviations above their mean. A
#: question from the project's domain that no memo answers scores alike on
#: many memos through the domain's words; one a memo answers stands out.
SPREAD_Z = 1.9
#: Projects with fewer memos skip the SPREAD_Z test: a few scores give no
#: spread to speak of (it was measured on projects of 30 and 40 memos only).
SPREAD_MIN_MEMOS = 20
#: Word score a memo needs when words decide alone (no model): the best
#: recall@1 of the tuning queries with 7 of 10 unrelated ones answered with
#: nothing (8 would cost a fifth of recall@1).
WORDS_CUTOFF = 0.27
#: Share of IDF-weighted coverage in the word score (the rest is BM25).
COVERAGE_WEIGHT = 0.85
#: Content words of a query that count.
MAX_QUERY_WORDS = 16
#: Identifiers of a query that count.
MAX_QUERY_IDENTIFIERS = 16
#: Weight of a memo's identifier score (see WordScores.identifiers) in its
#: score. An identifier held by one or two memos of the project adds more than
#: the word score can (WORDS_WEIGHT): naming it is the most precise thing a
#: query can say.
IDENTIFIER_WEIGHT = 0.5
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
#: A recall's first match comes whole only when it clearly answers the query: its score
#: at least the threshold of how it matched (CLEAR_BOTH, CLEAR_WORDS, CLEAR_EMBEDDING), and
#: at least CLEAR_MARGIN above the best of the other matches. Chosen in
#: benchmarks/recall_quality/clear.py on the tuning sets: whole answers the right memo at
#: least 9 times in 10 with and without a model, on the queries that name no identifier
#: too; then the most right memos whole.
CLEAR_BOTH = 0.475
CLEAR_WORDS = 0.80
#: By meaning alone the right first matches there scored 0.45 at most, wrong ones up to
#: 0.66: none is clear.
CLEAR_EMBEDDING = 0.70
CLEAR_MARGIN = 0.09
#: Past its first TAIL_RANK matches, an answer keeps a match only when it scores within
#: TAIL_MARGIN of the first: a flat tail of weak matches (what a question no memo answers
#: gets) is left out, a cluster of close ones kept. Chosen in
#: benchmarks/recall_quality/clear.py (``tail``) on the tuning sets: the widest margin
#: whose answer to an unrelated question weighs at most 600 B at the default limit, with
#: and without a model; recall@3 cannot change.
TAIL_RANK = 3
TAIL_MARGIN = 0.12

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The query's words that carry meaning: lower-cased, no stop words, no duplicates."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1]
    return list(dict.fromkeys(words))


@dataclass
class WordScores:
    """Word scores of the memos sharing a content word with a query, and what the query lacks."""

    scores: dict[int, float]
    #: Share of the query's content words found in no memo at all (0 when it has none).
    unknown: float = 0.0
    #: Memos holding an identifier the query names: the rarity of the rarest one
    #: (1 when it is the only memo of the project holding it, 1/2 for one of two, ...).
    identifiers: dict[int, float] = field(default_factory=dict)
    #: Memos that alone in their project hold an identifier the query names.
    pinned: frozenset[int] = frozenset()


@dataclass
class Candidate:
    """A memo that passed the cut-off (or is pinned), with how it matched."""

    id: int
    score: float
    matched_by: Literal["embedding", "words", "both"]
    #: The only memo of its project holding an identifier the query names:
    #: returned whatever its score, before every memo that is not pinned.
    pinned: bool = False


@dataclass(frozen=True, kw_only=True)
class VectorHits:
    """The memos nearest a query, and what the spread test needs of all the project's memos."""

    #: (memo id, :func:`vector_score`), best first.
    hits: list[tuple[int, float]]
    #: How many memos the index holds, the sum of their vector scores and of their squares.
    count: int = 0
    total: float = 0.0
    squares: float = 0.0


class VectorIndex:
    """The vectors of one project's memos for one model: ids and one contiguous int8 array.

    Each memo has two vectors: of the whole memo (question, file names,
    conclusion) and of its question with its file names. A memo's similarity
    to a query is :func:`vector_score` of its two cosines.

    Each vector is kept as int8 with a scale of its own (its largest
    component maps to 127): a quarter of the memory of float32, 73 MB
    instead of 293 MB for 100,000 memos of two 384-dimension vectors. A
    product converts the rows back to float32 a block at a time; its cosines
    are within about 0.002 of float32's. Rows live in buffers with spare
    capacity, so a memo this process records is added in place instead of
    rebuilding the array.
    """

    def __init__(
        self,
        ids: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        count: int,
        version: int,
        pending: set[int],
        model_id: str,
    ) -> None:
        #: ``codes`` is (capacity, 2, dim): row ``i`` holds memo ``ids[i]``'s
        #: whole-memo vector then its question vector; ``scales`` is (capacity, 2).
        self._ids = ids
        self._codes = codes
        self._scales = scales
        self._count = count
        self._rows = {int(memo_id): row for row, memo_id in enumerate(ids[:count].tolist())}
        #: The database's memo version this index is complete for; another
        #: process's write moves the database past it until the index is rebuilt.
        self.version = version
        #: Ids of the project's memos without both vectors of this model (searched by words).
        self.pending = pending
        self.model_id = model_id
        #: The highest memo id the index has read, with vectors or without: a memo another
        #: process recorded since has a higher one (see :func:`read_newer`).
        self.newest = max([*ids[:count].tolist(), *pending], default=0)

    @classmethod
    def empty(cls, dim: int, version: int, model_id: str) -> VectorIndex:
        """An index without memos (of ``dim``-dimension vectors)."""
        import numpy as np

        return cls(
            np.empty(0, dtype=np.int64),
            np.empty((0, 2, dim), dtype=np.int8),
            np.empty((0, 2), dtype=np.float32),
            0,
            version,
            set(),
            model_id,
        )

    @property
    def lacking(self) -> int:
        """How many of the project's memos have no vectors here."""
        return len(self.pending)

    @property
    def count(self) -> int:
        """How many memos the index holds vectors of."""
        return self._count

    @property
    def dim(self) -> int:
        """The dimension of its vectors."""
        return int(self._codes.shape[2])

    def without_vectors(self, ids: Iterable[int]) -> set[int]:
        """Those of ``ids`` the index has no vectors of."""
        return {memo_id for memo_id in ids if memo_id not in self._rows}

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """(count, 2): each memo's cosine to ``query`` by its whole-memo and its question vector."""
        import numpy as np

        count = self._count
        sims = np.empty((count, 2), dtype=np.float32)
        if count == 0:
            return sims
        # Both vectors of a memo are rows of one 2-D product (a 3-D matmul
        # runs one small product per memo: 1.6x slower at 100,000 memos).
        vectors = self._codes[:count].reshape(2 * count, -1)
        flat = sims.reshape(-1)
        # Scratch of this call (calls run on several threads at once).
        block = np.empty((min(2 * count, 2 * SCAN_ROWS), vectors.shape[1]), dtype=np.float32)
        for start in range(0, 2 * count, 2 * SCAN_ROWS):
            end = min(start + 2 * SCAN_ROWS, 2 * count)
            rows = block[: end - start]
            rows[...] = vectors[start:end]
            np.matmul(rows, query, out=flat[start:end])
        sims *= self._scales[:count]
        return sims

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        """The memo ids, in the order of :meth:`cosines`' rows (as they were added)."""
        return self._ids[: self._count]

    def top(self, query: npt.NDArray[np.float32], n: int) -> VectorHits:
        """The ``n`` memos most similar to ``query`` as (id, :func:`vector_score`), with the
        sum of every memo's vector score and of their squares."""
        import numpy as np

        count = self._count
        if count == 0:
            return VectorHits(hits=[])
        sims = self.cosines(query)
        scores = vector_score(sims[:, 0], sims[:, 1])
        n = min(n, count)
        best = np.argpartition(-scores, n - 1)[:n]
        best = best[np.argsort(-scores[best])]
        wide = scores.astype(np.float64)
        return VectorHits(
            hits=[(int(self._ids[i]), float(scores[i])) for i in best],
            count=count,
            total=float(wide.sum()),
            squares=float(np.dot(wide, wide)),
        )

    def upsert(self, memo_id: int, whole: bytes, question: bytes) -> None:
        """Put one memo's two vectors in place (replacing its row, or adding one)."""
        import numpy as np

        rows = np.stack(
            [np.frombuffer(whole, dtype=np.float32), np.frombuffer(question, dtype=np.float32)]
        )
        if rows.shape[1] != self._codes.shape[2]:
            raise ValueError("a vector of another dimension than the index's")
        self.pending.discard(memo_id)
        self.newest = max(self.newest, memo_id)
        at = self._rows.get(memo_id)
        if at is not None:
            _quantize(rows, self._codes[at], self._scales[at])
            return
        if self._count == len(self._ids):
            capacity = max(16, self._count + self._count // 2)
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_codes = np.empty((capacity, *self._codes.shape[1:]), dtype=np.int8)
            grown_scales = np.empty((capacity, 2), dtype=np.float32)
            grown_ids[: self._count] = self._ids[: self._count]
            grown_codes[: self._count] = self._codes[: self._count]
            grown_scales[: self._count] = self._scales[: self._count]
            self._ids, self._codes, self._scales = grown_ids, grown_codes, grown_scales
        at = self._count
        self._ids[at] = memo_id
        _quantize(rows, self._codes[at], self._scales[at])
        self._rows[memo_id] = at
        self._count += 1


def vector_score(
    whole: npt.NDArray[np.float32], question: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """A memo's similarity to a query from the cosines of its two vectors (whole memo, question)."""
    import numpy as np

    scores: npt.NDArray[np.float32] = np.maximum(whole, question - QUESTION_DISCOUNT)
    return scores


#: Memos converted at a time, to quantize or to multiply: 768 KB of float32 at
#: 2 x 384 dimensions, which stays in the core's cache (at 100,000 memos the
#: product takes 19 ms in blocks of 256, 36 ms in blocks of 1,024).
SCAN_ROWS = 256


def _quantize(
    rows: npt.NDArray[np.float32], codes: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]
) -> None:
    """Write ``rows`` (vectors along the last axis) into ``codes`` as int8, each vector
    with the scale that maps its peak to 127.

    A vector of zeros, one with a NaN or an infinity, or one whose largest
    component is subnormal is stored as zeros: it scores 0 against every query.
    """
    import numpy as np

    peak = np.abs(rows).max(axis=-1)
    # A scale below float32's smallest normal number loses the precision
    # that keeps codes within +-127.
    usable = np.isfinite(peak) & (peak >= 127 * np.finfo(np.float32).tiny)
    scale = np.where(usable, peak / 127, 1).astype(np.float32)
    with np.errstate(invalid="ignore"):
        quantized = np.where(usable[..., None], np.rint(rows / scale[..., None]), 0)
    np.clip(quantized, -127, 127, out=quantized)
    codes[...] = quantized
    scales[...] = scale


def build_vector_index(
    conn: sqlite3.Connection, project: str, model_id: str, dim: int, version: int
) -> VectorIndex:
    """Read a project's vectors of ``model_id`` into one preallocated int8 array.

    The float32 rows pass through a block of :data:`SCAN_ROWS`, so the
    float32 vectors never exist whole.
    """
    import numpy as np

    (count,) = conn.execute(
        "SELECT count(*) FROM memos WHERE project = ? AND embedding_model = ?"
        " AND embedding IS NOT NULL AND question_embedding IS NOT NULL",
        (project, model_id),
    ).fetchone()
    # Spare rows, so the memos this process records next are added in place
    # instead of copying the whole array.
    capacity = count + max(64, count // 32)
    ids = np.empty(capacity, dtype=np.int64)
    codes = np.empty((capacity, 2, dim), dtype=np.int8)
    scales = np.empty((capacity, 2), dtype=np.float32)
    block = np.empty((SCAN_ROWS, 2, dim), dtype=np.float32)
    filled = pending = 0
    size = dim * 4
    lacking: set[int] = set()
    # Another model's vectors are not read: only whether this model's are there.
    for memo_id, whole, question in conn.execute(
        "SELECT id, CASE WHEN embedding_model = ?1 THEN embedding END,"
        " CASE WHEN embedding_model = ?1 THEN question_embedding END"
        " FROM memos WHERE project = ?2 ORDER BY id",
        (model_id, project),
    ):
        if (
            filled + pending == count
            or whole is None
            or question is None
            or len(whole) != size
            or len(question) != size
        ):
            lacking.add(memo_id)
            continue
        ids[filled + pending] = memo_id
        block[pending, 0] = np.frombuffer(whole, dtype=np.float32)
        block[pending, 1] = np.frombuffer(question, dtype=np.float32)
        pending += 1
        if pending == SCAN_ROWS:
            _quantize(block, codes[filled : filled + pending], scales[filled : filled + pending])
            filled, pending = filled + pending, 0
    end = filled + pending
    _quantize(block[:pending], codes[filled:end], scales[filled:end])
    return VectorIndex(ids, codes, scales, end, version, lacking, model_id)


def read_newer(
    conn: sqlite3.Connection, project: str, model_id: str, after: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """The project's memos of ids above ``after`` (recorded since an index read them), each
    with its two vectors of ``model_id`` (None when it lacks them)."""
    return [
        (int(memo_id), whole, question)
        for memo_id, whole, question in conn.execute(
            "SELECT id, CASE WHEN embedding_model = ?1 THEN embedding END,"
            " CASE WHEN embedding_model = ?1 THEN question_embedding END"
            " FROM memos WHERE id > ?3 AND +project = ?2 ORDER BY id",
            (model_id, project, after),
        )
    ]


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
        #: The number of memos at one memo version.
        self._counted: dict[int, int] = {}
        self._lock = threading.Lock()
        self._identifiers_indexed = False

    def index_identifiers(self, store: Store) -> None:
        """Index the identifiers of memos written before they were indexed (schema 3), or
        recorded by a process stopped before its writer stored them.

        Once none is left this process never looks again: a record's identifiers
        are stored by its writer's thread right after it, and a search finds the
        memos still pending by their texts (:meth:`Store.identifier_holders`).
        Written as a cache is: when another writer holds the database (or it is
        read-only) the search goes on without waiting, and the next one tries again.
        """
        if self._identifiers_indexed:
            return
        with store.errors(), store.read() as conn:
            pending = store.identifiers_pending(conn)
        while pending:
            indexed = store.write_cache(store.index_identifiers)
            if indexed is None:
                return
            pending = indexed > 0
        self._identifiers_indexed = True

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
        names, pinned = _identifier_scores(store, conn, project, query)
        words = query_words(query)[:MAX_QUERY_WORDS]
        if not words:
            return WordScores({}, identifiers=names, pinned=pinned)
        total, frequencies = self._frequencies_of(store, conn, words)
        unknown = sum(1 for w in words if not frequencies[w]) / len(words)
        common = max(COMMON_FLOOR, COMMON_SHARE * total)
        rare = [w for w in words if frequencies[w] <= common]
        ranks: dict[int, float] = {}
        if rare:
            ranks = dict(store.word_matches(conn, project, _any_of(rare), CANDIDATES))
        candidates = set(ranks) | set(also) | set(names)
        if not candidates:
            return WordScores({}, unknown, names, pinned)
        idf = {
            w: math.log(1.0 + (total - frequencies[w] + 0.5) / (frequencies[w] + 0.5))
            for w in words
        }
        weight_sum = sum(idf.values())
        stems = StemMatcher(words)
        scores: dict[int, float] = {}
        for memo_id, text in store.memo_texts(conn, sorted(candidates)):
            seen = stems.words_in(text[:MAX_TEXT_CHARS].lower())
            covered = sum(weight for w, weight in idf.items() if w in seen)
            if not covered:
                continue
            rank = ranks.get(memo_id, 0.0)
            scores[memo_id] = COVERAGE_WEIGHT * covered / weight_sum + (1 - COVERAGE_WEIGHT) * (
                1.0 - math.exp(-max(0.0, -rank) / BM25_SCALE)
            )
        return WordScores(scores, unknown, names, pinned)

    def _frequencies_of(
        self, store: Store, conn: sqlite3.Connection, words: list[str]
    ) -> tuple[int, dict[str, int]]:
        version = store.memo_version()
        with self._lock:
            total = self._counted.get(version)
        if total is None:
            # Counting 100,000 memos takes 4 ms: once per version of the memos.
            total = store.indexed_count(conn)
            with self._lock:
                self._counted = {version: total}
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


class StemMatcher:
    """Which of a query's words a text holds: a word is in a text when some word of the
    text, or part of a name ("retries" in max_retries), starts with the word's stem."""

    def __init__(self, words: Iterable[str]) -> None:
        stems = {w: stem(w) for w in words}
        # Longest first, so a stem that is a prefix of another is still seen
        # through the longer one.
        alternatives = sorted(set(stems.values()), key=lambda s: (-len(s), s))
        self._pattern = re.compile("|".join(map(re.escape, alternatives)))
        #: What each stem the pattern finds covers: the words whose stem it starts
        #: with (computed once, not for every text).
        self._covers = {
            a: frozenset(w for w in stems if a.startswith(stems[w])) for a in alternatives
        }

    def words_in(self, text: str) -> set[str]:
        """The words ``text`` (lower-cased) holds."""
        seen: set[str] = set()
        if not self._covers:
            return seen
        for found in self._pattern.finditer(text):
            start = found.start()
            # A match inside a word does not count. Testing the character before it
            # here, not with a look-behind in the pattern, lets the regex engine skip
            # ahead to the stems' first letters: 2.5x faster over a recall's texts.
            # Stems are letters and digits, so a match never runs past a word's end
            # and never hides one that starts the next word.
            if start == 0 or not text[start - 1].isalnum():
                seen |= self._covers[found.group()]
        return seen


def _identifier_scores(
    store: Store, conn: sqlite3.Connection, project: str, query: str
) -> tuple[dict[int, float], frozenset[int]]:
    """The memos holding an identifier the query names, each with the rarity of the rarest
    one it holds (1 / how many memos of the project hold it), and the memos that alone
    hold one."""
    names = sorted(identifiers(query))[:MAX_QUERY_IDENTIFIERS]
    if not names:
        return {}, frozenset()
    scores: dict[int, float] = {}
    pinned: set[int] = set()
    for holders in store.identifier_holders(conn, project, names, CANDIDATES).values():
        if not holders or len(holders) > CANDIDATES:
            continue
        if len(holders) == 1:
            pinned.add(holders[0])
        rarity = 1.0 / len(holders)
        for memo_id in holders:
            scores[memo_id] = max(scores.get(memo_id, 0.0), rarity)
    return scores, frozenset(pinned)


def _any_of(words: list[str]) -> str:
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def fuse(
    vector_hits: VectorHits | None, words: WordScores, unindexed: Container[int] = ()
) -> list[Candidate]:
    """Blend both sides into candidates above the cut-off, pinned ones first, then best first.

    ``vector_hits`` is None when no model is available: words decide alone, as
    they do for the memos in ``unindexed`` (those without vectors yet).
    With a model, ``matched_by`` says which signal carried the memo over the
    cut-off: its embedding alone, words (the embedding alone fell short), or
    both (the embedding sufficed and words or identifiers matched too). A
    memo that alone holds an identifier the query names is returned whatever
    its score (see :attr:`Candidate.pinned`); with a model, the others only
    when the best of them stands out from the project's memos (see
    :data:`SPREAD_Z`).
    """
    found: list[Candidate] = []
    names = words.identifiers
    by_words = words.scores.keys() | names.keys()
    if vector_hits is not None:
        by_words = {memo_id for memo_id in by_words if memo_id in unindexed}
    for memo_id in by_words:
        score = min(
            1.0, words.scores.get(memo_id, 0.0) + IDENTIFIER_WEIGHT * names.get(memo_id, 0.0)
        )
        pinned = memo_id in words.pinned
        if score >= WORDS_CUTOFF or pinned:
            found.append(Candidate(memo_id, round(score, 4), "words", pinned))
    if vector_hits is not None:
        cosines = dict(vector_hits.hits)
        # A memo found by words only is not among the nearest vectors: its
        # cosine is at most the lowest one there.
        floor = min(cosines.values(), default=0.0)
        penalty = UNKNOWN_PENALTY * words.unknown**UNKNOWN_EXPONENT
        raw: dict[int, tuple[float, float]] = {}
        for memo_id in (cosines.keys() | words.scores.keys() | names.keys()) - by_words:
            bonus = WORDS_WEIGHT * words.scores.get(memo_id, 0.0)
            raw[memo_id] = (
                cosines.get(memo_id, floor),
                bonus + IDENTIFIER_WEIGHT * names.get(memo_id, 0.0),
            )
        stands_out = _stands_out(vector_hits, raw.values())
        for memo_id, (vector, bonus) in raw.items():
            cosine = vector - penalty
            score = min(1.0, max(0.0, cosine + bonus))
            pinned = memo_id in words.pinned
            if not pinned and (score < FUSED_CUTOFF or not stands_out):
                continue
            matched: Literal["embedding", "words", "both"]
            if cosine < FUSED_CUTOFF:
                matched = "words"
            elif words.scores.get(memo_id, 0.0) >= WORDS_MATCH or memo_id in names:
                matched = "both"
            else:
                matched = "embedding"
            found.append(Candidate(memo_id, round(score, 4), matched, pinned))
    return ranked(found)


def clearly_answers(
    score: float, matched_by: Literal["embedding", "words", "both"], next_score: float | None
) -> bool:
    """Whether a recall's first match, of ``score``, clearly answers its query (and comes
    whole): ``next_score`` is the best score of the other matches above the cut-off (None:
    none)."""
    # Scores have four decimals: so has the margin (0.7 - 0.61 is 0.0899999... in floats).
    margin = round(score - (next_score if next_score is not None else 0.0), 4)
    return score >= clear_score(matched_by) and margin >= CLEAR_MARGIN


def in_tail(rank: int, score: float, first: float) -> bool:
    """Whether the match at ``rank`` (0 the first), of ``score``, stays in an answer whose
    first match scored ``first`` (see :data:`TAIL_MARGIN`)."""
    # Four decimals, as for the clear margin.
    return rank < TAIL_RANK or round(first - score, 4) <= TAIL_MARGIN


def clear_score(matched_by: Literal["embedding", "words", "both"]) -> float:
    """The score a first match found so needs to clearly answer (see :func:`clearly_answers`)."""
    if matched_by == "both":
        return CLEAR_BOTH
    return CLEAR_WORDS if matched_by == "words" else CLEAR_EMBEDDING


def ranked(candidates: Iterable[Candidate], stale: Container[int] = ()) -> list[Candidate]:
    """``candidates`` in the order recall returns them: pinned ones first, then best
    first, a memo whose id is in ``stale`` scoring STALE_PENALTY less, then by id.

    :func:`fuse` orders its candidates so before their files are checked.
    """
    return sorted(candidates, key=lambda c: rank_key(c, stale))


def rank_key(candidate: Candidate, stale: Container[int] = ()) -> tuple[bool, float, int]:
    """Where ``candidate`` stands in :func:`ranked`'s order: the smaller, the earlier."""
    penalty = STALE_PENALTY if candidate.id in stale else 0.0
    return (not candidate.pinned, -(candidate.score - penalty), candidate.id)


def _stands_out(vector_hits: VectorHits, raw: Iterable[tuple[float, float]]) -> bool:
    """Whether the best (vector score + bonus) of ``raw`` is SPREAD_Z standard deviations
    above the mean over all the project's memos (always, in a project of fewer than
    SPREAD_MIN_MEMOS memos).

    ``raw`` holds (vector score, words and identifier bonus) of every memo
    with a bonus; every other memo of the project scores its vector score,
    counted in ``vector_hits`` (a memo found by words only, beyond the
    nearest vectors, counts with the lowest of their scores, as in
    :func:`fuse`). The penalty for unknown words is the same for every memo,
    so it changes nothing here.
    """
    count = vector_hits.count
    if count < SPREAD_MIN_MEMOS:
        return True
    total, squares, best = vector_hits.total, vector_hits.squares, -math.inf
    for vector, bonus in raw:
        total += bonus
        squares += 2 * vector * bonus + bonus * bonus
        best = max(best, vector + bonus)
    mean = total / count
    spread = math.sqrt(max(0.0, squares / count - mean * mean))
    return spread > 0 and best - mean >= SPREAD_Z * spread
