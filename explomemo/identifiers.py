"""Code identifiers in free text: which tokens are names from code, and the words inside them.

A memo's question and conclusion name functions, classes, constants, modules
and files (``_send_handling_redirects``, ``HTTPStatusError``,
``httpx._urlparse``, ``__enter__``, ``_client.py``). Word search splits those
into pieces and loses what makes them precise: the whole name. This module
finds them, so the word search can match a name exactly and know how many
memos hold it.

A token counts as an identifier when its shape says code: an underscore
(``max_retries``, ``__init__``, ``_private``), a hump inside a word
(``FooError``, ``getX``, ``HTTPError``), dots between names (``os.path.join``,
``Client.send``; not ``e.g.``), a file name (``_urlparse.py``), a path
(``httpx/_client.py``), or a name right before ``(`` (``send()``). Plain words
("client", "URL", "Response") are words, not identifiers. Identifiers are
compared case-folded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a token (a name, a dotted name or a path) is made of.
_TOKEN_CHARS = r"[\w./\-]"
#: A hump: a capital after a lower-case letter or a digit, or an acronym before a word.
_HUMP_SHAPE = r"[a-z\d][A-Z]|[A-Z]{2}[a-z]"
#: A whole token that may hold an identifier: one with a dot, a slash, an underscore or a
#: hump, or one right before "(". A token of plain words can hold none, and most tokens
#: of prose are plain words: the regex skips them, where a loop over every token costs a
#: record (and an import of thousands) most of its time. The lookbehind makes a match start
#: only where a token does, so a long token costs its length once, not its square.
_CANDIDATE = re.compile(
    rf"(?<!{_TOKEN_CHARS})(?:{_TOKEN_CHARS}*(?:[./_]|{_HUMP_SHAPE}){_TOKEN_CHARS}*"
    rf"|{_TOKEN_CHARS}+(?=\())"
)
#: A whole token with a hump in it (see :func:`name_parts`).
_HUMPED = re.compile(rf"(?<!{_TOKEN_CHARS}){_TOKEN_CHARS}*(?:{_HUMP_SHAPE}){_TOKEN_CHARS}*")
_NAME = re.compile(r"[^\W\d]\w*")
#: Names joined by single dots (``a.b``, ``os.path.join``).
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)+")
_HUMP = re.compile(_HUMP_SHAPE)
#: An acronym's plural ("URLs", "APIs"): prose, though it has a hump.
_PLURAL_ACRONYM = re.compile(r"[A-Z]{2,}s")
_HUMPS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: A file extension: letters and digits, one to five, starting with a letter.
_EXTENSION = re.compile(r"[^\W\d_][^\W_]{0,4}")
#: What may come before a file name's extension.
_STEM = re.compile(r"[\w\-.]*\w")
#: What separates the words inside a token.
_SEPARATORS = re.compile(r"[./\-_]+")
#: Longest dotted name whose sub-names are all kept (``a.b.c.d`` keeps ``b.c`` too).
_MAX_DOTTED_PARTS = 6


def identifiers(text: str) -> set[str]:
    """Every identifier in ``text``, case-folded, with the names it contains.

    A dotted name brings each run of two or more of its parts
    (``httpx.client.send``, ``httpx.client``, ``client.send``) and each part
    shaped like an identifier by itself; a path brings itself, its file name
    and the file name without extension when that is shaped like one.
    """
    found: set[str] = set()
    for match in _CANDIDATE.finditer(text):
        token = match.group().strip(".-/")
        if not token:
            continue
        called = text.startswith("(", match.end())
        if "/" in token:
            _add_path(token, found)
        else:
            _add_segment(token, called, found)
    return found


def name_parts(text: str) -> list[str]:
    """The words inside the humped identifiers of ``text`` ("FooError" gives "foo", "error").

    Word search already sees the pieces of ``max_retries`` and ``a.b``
    (underscores and dots separate words); the pieces of a humped name it
    would see only as one word. Each part once, in order of appearance.
    """
    parts: dict[str, None] = {}
    for match in _HUMPED.finditer(text):
        for piece in _SEPARATORS.split(match.group()):
            if _has_hump(piece) and not _PLURAL_ACRONYM.fullmatch(piece):
                for part in _HUMPS.findall(piece):
                    parts.setdefault(part.lower(), None)
    return list(parts)


def memo_identifiers(question: str, conclusion: str, paths: Iterable[str]) -> set[str]:
    """The identifiers a memo holds: in its question, its conclusion and its file paths."""
    found = identifiers(question) | identifiers(conclusion)
    for path in paths:
        _add_path(path, found)
    return found


def _add_path(token: str, found: set[str]) -> None:
    segments = [s for s in token.split("/") if s]
    for segment in segments:
        if "." in segment or _shaped(segment):
            break
    else:
        # "and/or", "client/server": words with a slash.
        return
    if len(segments) > 1:
        found.add("/".join(segments).casefold())
    for segment in segments:
        _add_segment(segment, False, found)


def _add_segment(token: str, called: bool, found: set[str]) -> None:
    if "." in token:
        parts = token.split(".")
        if _DOTTED.fullmatch(token):
            # Not "e.g" or "i.e": some part is longer than a letter.
            if len(token) > 2 * len(parts) - 1:
                _add_dotted(parts, found)
        elif _is_file_name(token):
            found.add(token.casefold())
        return
    if _shaped(token) if not called else _NAME.fullmatch(token):
        found.add(token.casefold())


def _add_dotted(parts: list[str], found: set[str]) -> None:
    parts = parts[:_MAX_DOTTED_PARTS]
    for start in range(len(parts)):
        for end in range(start + 2, len(parts) + 1):
            found.add(".".join(parts[start:end]).casefold())
    found.update(p.casefold() for p in parts if _shaped(p))


def _shaped(name: str) -> bool:
    """True for a single name that only code would write: an underscore or a hump."""
    # Cheapest test first (a record checks every word and path segment): a
    # name with an underscore is code unless it is only underscores; one
    # without needs a hump that is not an acronym's plural.
    if "_" in name:
        return name.strip("_") != "" and _NAME.fullmatch(name) is not None
    return (
        _has_hump(name)
        and _NAME.fullmatch(name) is not None
        and _PLURAL_ACRONYM.fullmatch(name) is None
    )


def _has_hump(name: str) -> bool:
    """True when ``name`` has a hump (a capital after a lower-case letter or digit, or
    an acronym before a word)."""
    # A hump needs a capital: text without one (most words) skips the regex,
    # which tries both of its branches at every character.
    return not name.islower() and _HUMP.search(name) is not None


def _is_file_name(segment: str) -> bool:
    """A name with an extension that is not a plain dotted name (``my-tool.py``, ``2to3.py``)."""
    stem, dot, extension = segment.rpartition(".")
    return bool(dot and _STEM.fullmatch(stem) and _EXTENSION.fullmatch(extension))
