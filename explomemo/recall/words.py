"""Which words carry meaning, and their stems: shared by recall's word search and the prompt hook.

Both match a query (or a prompt) against memos by their content words: stop
words ("how", "is", "the", and words every question about code has: "code",
"file", "work") say nothing about which memo is meant. A prompt also says what
to do ("fix", "add", "test", "rename"): :data:`TASK_WORDS` are not content for
the prompt hook (:mod:`explomemo.recall.prompts`). :func:`stem` is a crude stemmer,
close enough to FTS5's Porter stemming on the endings that matter to see
"retries" and "retry", "wired" and "wire", as one word. The module imports
nothing: the prompt hook runs before every prompt.
"""

from __future__ import annotations

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

#: Words of a request, not of its subject: what the prompt hook leaves out too.
TASK_WORDS = frozenset(
    """
    please want need needs help use using try see
    fix fixes fixed fixing failing fail fails add adds adding write run update rename refactor
    delete remove format review translate bump change test tests testing
    """.split()
)

_SUFFIXES = ("ing", "ies", "ied", "ed", "es", "s", "y", "e")


def stem(word: str) -> str:
    """A crude stem of a lower-case word: "redirects" and "redirect" give one stem."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word
