"""Which memos answer a prompt: the prompt hook's high-precision word match.

A prompt is not a question. "Fix the failing test in the parser" shares a
word with the parser memo without asking what it answers, and a memo put
before the agent for nothing costs its attention. So a memo must pass on
both sides:

* ``prompt coverage``: the share of the prompt's content words (weighted by
  their rarity across the database, IDF) found in the memo's question,
  file paths or conclusion;
* ``question coverage``: the share of the memo question's content words found
  in the prompt.

Its score is the smaller of the two. A code identifier of the prompt
(``raise_for_status``, ``StreamConsumed``, ``_urlparse.py``; found as recall
finds them, :mod:`explomemo.identifiers`) that at most two memos of the
project hold is strong evidence on its own: a memo holding it scores its
prompt coverage.
Only memos scoring :data:`CUTOFF` or more are returned. Task words (fix, add,
test, rename…) are not content: they say what to do, not what it is about.

The constants were chosen on the tuning prompts of
``benchmarks/hook_prompts`` (precision first) and checked on its held-out
ones; the figures are in that folder's README. This module imports no
dataclasses, no numpy and no model: the hook runs before every prompt.
"""

from __future__ import annotations

import math
import re
import sqlite3

from explomemo.identifiers import identifiers
from explomemo.recall import words
from explomemo.store.database import MemoRow, Store

#: Score a memo needs to be put before the agent.
CUTOFF = 0.45
#: An identifier found in more memos than this is not distinctive.
IDENTIFIER_MEMOS = 2
#: Content words of a prompt that count (a long prompt's first ones).
MAX_WORDS = 24
#: The start of a prompt that is matched: its first MAX_WORDS content words are nearly
#: always there, and a prompt of megabytes (a pasted log) is not stemmed whole.
MATCH_CHARS = 20_000
#: Memos that BM25 hands over as candidates.
CANDIDATES = 60

#: Identifiers of a prompt that count.
MAX_NAMES = 16

#: Not content in a prompt: stop words, and what a request asks to do.
STOP_WORDS = words.STOP_WORDS | words.TASK_WORDS

_WORD = re.compile(r"[^\W_]+")


def content_stems(text: str) -> dict[str, str]:
    """``text``'s content words by stem (the first word of each stem), in order."""
    found: dict[str, str] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and len(word) > 1:
            found.setdefault(words.stem(word), word)
    return found


#: A captured turn comes unasked only when the prompt asks nearly its question again: each
#: holds at least this share of the other's content words (chosen on the dev sessions of
#: benchmarks/replay, where the one captured turn that answered a later prompt was asked
#: again so: 0.77 and 0.83).
ASKS_AGAIN = 0.75
#: ... and each has at least this many content words (a short prompt says too little).
ASKS_AGAIN_WORDS = 4


def asks_again(prompt: str, question: str) -> bool:
    """Whether ``prompt`` asks nearly ``question`` again (see :data:`ASKS_AGAIN`)."""
    asked, again = set(content_stems(question)), set(content_stems(prompt[:MATCH_CHARS]))
    if min(len(asked), len(again)) < ASKS_AGAIN_WORDS:
        return False
    shared = len(asked & again)
    return shared >= ASKS_AGAIN * len(asked) and shared >= ASKS_AGAIN * len(again)


def all_stems(text: str) -> set[str]:
    """The stems of every word of ``text``."""
    return {words.stem(w) for w in _WORD.findall(text.lower())}


class _Rarity:
    """Inverse document frequencies of words over the whole database, from FTS5."""

    def __init__(self, store: Store, conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn
        self._total = store.indexed_count(conn)
        self._counts: dict[str, int] = {}

    def count(self, word: str) -> int:
        """How many memos hold ``word``."""
        found = self._counts.get(word)
        if found is None:
            found = self._counts[word] = self._store.word_frequency(self._conn, _phrase(word))
        return found

    def of(self, word: str) -> float:
        """The IDF of ``word``."""
        count = self.count(word)
        return math.log(1.0 + (self._total - count + 0.5) / (count + 0.5))


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _coverage(weights: dict[str, float], present: set[str]) -> float:
    total = sum(weights.values())
    return sum(w for word, w in weights.items() if word in present) / total if total else 0.0


def answering(
    store: Store, conn: sqlite3.Connection, project: str, prompt: str
) -> list[tuple[MemoRow, float]]:
    """The project's memos that answer ``prompt`` (its first MATCH_CHARS characters, cut
    at a word), best first, each with its score."""
    if len(prompt) > MATCH_CHARS:
        cut = prompt[:MATCH_CHARS]
        prompt = cut if prompt[MATCH_CHARS].isspace() else re.sub(r"\S*$", "", cut)
    content = dict(list(content_stems(prompt).items())[:MAX_WORDS])
    rarity = _Rarity(store, conn)
    known = [word for word in content.values() if rarity.count(word)]
    if not known:
        return []
    weights = {s: rarity.of(word) for s, word in content.items()}
    ranked = store.word_matches(conn, project, " OR ".join(map(_phrase, known)), CANDIDATES)
    named = _naming_rarely(store, conn, project, prompt)
    ids = [memo_id for memo_id, _ in ranked] + sorted(named.difference(i for i, _ in ranked))
    memos = {m.id: m for m in store.memos(conn, ids=ids)}
    paths = store.files_of(conn, ids)
    prompt_stems = all_stems(prompt)
    found: list[tuple[MemoRow, float]] = []
    for memo_id in ids:
        memo = memos.get(memo_id)
        if memo is None:
            continue
        text = f"{memo.question}\n{' '.join(f.path for f in paths[memo_id])}\n{memo.conclusion}"
        prompt_side = _coverage(weights, all_stems(text))
        if prompt_side < CUTOFF:
            continue  # the score is at most the prompt coverage
        question = {s: rarity.of(word) for s, word in content_stems(memo.question).items()}
        score = min(prompt_side, _coverage(question, prompt_stems))
        if score < CUTOFF and memo_id in named:
            score = prompt_side
        if score >= CUTOFF:
            found.append((memo, score))
    found.sort(key=lambda pair: (-pair[1], pair[0].id))
    return found


def _naming_rarely(store: Store, conn: sqlite3.Connection, project: str, prompt: str) -> set[int]:
    """The memos of ``project`` holding an identifier the prompt names that at most
    :data:`IDENTIFIER_MEMOS` of its memos hold (the identifiers recall matches)."""
    names = sorted(identifiers(prompt))[:MAX_NAMES]
    if not names:
        return set()
    holders = store.identifier_holders(conn, project, names, IDENTIFIER_MEMOS)
    return {i for ids in holders.values() if len(ids) <= IDENTIFIER_MEMOS for i in ids}
