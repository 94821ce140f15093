"""The input rules of docs/reference.md: lengths, counts, ranges, and "the same question"."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Literal

from explomemo.errors import InputError

#: Where a memo came from: ``agent`` (the record tool, ``explomemo record``),
#: ``transcript`` (captured by the Claude Code Stop hook from a turn) or ``subagent``
#: (captured at SubagentStop from a delegated run that edited nothing).
Origin = Literal["agent", "transcript", "subagent"]
AGENT: Origin = "agent"
TRANSCRIPT: Origin = "transcript"
SUBAGENT: Origin = "subagent"
ORIGINS: tuple[Origin, ...] = (AGENT, TRANSCRIPT, SUBAGENT)
#: The values that turn a switch of the environment on or off (EXPLOMEMO_SNAPSHOTS, …),
#: after trimming and case-folding; any other value is refused.
ON_VALUES = frozenset({"on", "1", "true", "yes"})
OFF_VALUES = frozenset({"off", "0", "false", "no"})

MAX_QUESTION = 2_000
MAX_CONCLUSION = 20_000
MAX_PROJECT = 200
#: A delegated run's agent type (Explore, Plan, a custom agent's name).
MAX_AGENT_TYPE = 200
MAX_QUERY = 2_000
MAX_FILES = 64
MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_LIMIT = 20
DEFAULT_LIMIT = 5


def check_text(name: str, value: str, maximum: int) -> str:
    """Refuse a string that is empty, too long, holds NUL bytes or is not valid UTF-8."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string of 1 to {maximum:,} characters")
    if not value.strip():
        raise InputError(f"{name} is empty: pass 1 to {maximum:,} characters")
    if len(value) > maximum:
        raise InputError(
            f"{name} is {len(value):,} characters long, over the limit of {maximum:,}: shorten it"
        )
    if "\x00" in value:
        raise InputError(f"{name} contains a NUL byte: remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"{name} is not valid Unicode text (it holds a lone surrogate): send UTF-8 text"
        ) from None
    return value


#: A UTF-16 half (U+D800 to U+DFFF) standing alone in a Python string: UTF-8 cannot carry it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def cleaned(value: str) -> str:
    """``value`` as :func:`check_text` takes it, for text no one typed for explomemo (a
    captured prompt or answer, a stored text being exported): NUL bytes dropped, each lone
    surrogate (half an emoji, cut by a writer counting UTF-16 units) replaced by U+FFFD, as
    a decoder does for bytes it cannot read. Length and emptiness are the caller's."""
    return _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", ""))


def question_key(question: str) -> str:
    """The normalised question: "the same question" is the same key.

    Unicode NFKC, case-folded (and NFKC again, as Unicode's NFKC_Casefold
    does: folding can undo a normal form), white space trimmed and collapsed.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", question).casefold())
    return " ".join(folded.split())


def check_limit(limit: int) -> int:
    """Refuse a recall limit outside 1..20."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit {limit!r} is out of range: pass a whole number from 1 to 20")
    return limit


def check_files(files: list[str]) -> list[str]:
    """Refuse an empty list; drops exact duplicates (the 64-file limit is counted on
    normalised paths, by the caller)."""
    if not isinstance(files, list) or not files:
        raise InputError("files is empty: pass 1 to 64 paths of the files you read")
    return list(dict.fromkeys(files))


#: The switches of the environment, each with its value when unset.
SWITCHES: dict[str, bool] = {
    "EXPLOMEMO_EMBEDDINGS": True,
    "EXPLOMEMO_SNAPSHOTS": True,
    "EXPLOMEMO_CAPTURE": True,
    "EXPLOMEMO_DELEGATION": True,
    "EXPLOMEMO_REMIND": False,
}


def check_switches(env: Mapping[str, str]) -> None:
    """Refuse the first switch of :data:`SWITCHES` set to a value that is not on or off,
    whether or not the command at hand reads it: a typo is said at once."""
    for name, default in SWITCHES.items():
        switched_on(env, name, default)


def switched_on(env: Mapping[str, str], name: str, default: bool = True) -> bool:
    """The switch ``name`` of the environment: ``default`` when unset or empty.

    ``on``/``off`` (also 1/0, true/false, yes/no, any case, spaces around ignored);
    any other value is refused, never read as one or the other: a misspelt
    ``EXPLOMEMO_CAPTURE=disabled`` must not leave capture on without a word.
    """
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in ON_VALUES:
        return True
    if value in OFF_VALUES:
        return False
    raise InputError(
        f"{name}={env[name]!r} is not a switch value: set it to on or off"
        " (also 1/0, true/false, yes/no), or unset it"
    )


def replaces(new: str, old: str) -> bool:
    """Whether a memo of origin ``new`` replaces one of origin ``old`` of the same question.

    An agent's memo replaces any; a captured one (``transcript``, ``subagent``) replaces
    only a captured one: what an agent chose to record is never overwritten by captured
    text.
    """
    return new == AGENT or old != AGENT


_MADE_HERE: dict[str, str] = {
    AGENT: "recorded here",
    TRANSCRIPT: "captured here from a turn",
    SUBAGENT: "captured here from a delegated run",
}


def provenance(origin: str, imported: bool) -> str:
    """Where a memo came from, in a few words: what the hooks and the text output say."""
    if imported:
        return "imported: the claim of a committed export, not recorded here"
    return _MADE_HERE.get(origin, origin)


def check_origin(origin: str) -> Origin:
    """Refuse an origin that is not one of :data:`ORIGINS`."""
    for known in ORIGINS:
        if origin == known:
            return known
    raise InputError(f"origin {origin!r} is not one of {', '.join(ORIGINS)}: pass one of those")
