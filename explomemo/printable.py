"""Text made safe to show: memo text never drives a terminal or a CI runner.

Memo text comes from agents (which the content of a repository can steer) and
from imported files, so it may hold escape sequences (an OSC 52 clipboard
write, a window title, clear-screen), carriage returns that redraw a line,
bidirectional overrides that make a path read differently from what it is,
and lines that a GitHub Actions runner takes for workflow commands (``::``
at the start of a line, ``##[`` anywhere in it). People's formats go through
:func:`one_line` or :func:`block` and then :func:`no_workflow_commands`;
JSON keeps every value exact, with the same characters written as ``\\u``
escapes (:func:`json_text`). Zero-width characters, which hide text from a reader
(a word split so that no filter sees it), are shown escaped too, except a joiner
that a script or an emoji needs. What a hook hands the agent goes through
:func:`inert`: there, memo text must not pass for the client's own framing either.
"""

from __future__ import annotations

import re

#: Never shown raw: C0 controls, DEL, C1 controls (ESC, CSI, OSC, NEL...), the
#: line and paragraph separators, and the bidirectional embedding, override
#: and isolate controls (the marks LRM, RLM and ALM stay: right-to-left text
#: needs them).
UNSAFE = (
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _shown(code: int) -> str:
    if code in _NAMED:
        return _NAMED[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: Zero-width characters: the space, word joiner, byte-order mark and Mongolian vowel
#: separator are always shown escaped; the non-joiner and joiner (:data:`JOINERS`) only
#: where no script or emoji needs them.
ZERO_WIDTH = (0x200B, 0x2060, 0xFEFF, 0x180E)
JOINERS = (0x200C, 0x200D)
# A joiner stays between two characters past the Latin, Greek and Cyrillic blocks (U+0530
# on): Persian, Indic scripts and emoji sequences use it there. Between letters of those
# alphabets it only hides a word from whoever searches for it.
_NEEDED_JOINER = r"(?<=[^\x00-\u052f])[\u200c\u200d](?=[^\x00-\u052f])"
_HIDDEN = re.compile(rf"(?P<needed>{_NEEDED_JOINER})|[\u200b\u2060\ufeff\u180e\u200c\u200d]")

_ONE_LINE = {code: _shown(code) for code in UNSAFE}
_BLOCK = {code: shown for code, shown in _ONE_LINE.items() if code not in (0x09, 0x0A)}
# json.dumps already escapes C0; the rest is written as \u escapes, the same value.
_JSON = {code: f"\\u{code:04x}" for code in (*UNSAFE, *ZERO_WIDTH, *JOINERS) if code >= 0x7F}


def _zero_width(text: str) -> str:
    if not _HIDDEN.search(text):
        return text
    return _HIDDEN.sub(lambda m: m[0] if m["needed"] else _shown(ord(m[0])), text)


def one_line(text: str) -> str:
    """``text`` on one line: every unsafe character (new lines too) as an escape like
    ``\\x1b``, and zero-width characters as ``\\u200b`` (see :data:`ZERO_WIDTH`)."""
    return _zero_width(text.translate(_ONE_LINE))


def block(text: str) -> str:
    """Like :func:`one_line`, but new lines and tabs stay (a conclusion's paragraphs)."""
    return _zero_width(text.translate(_BLOCK))


def json_text(text: str) -> str:
    """JSON text (from ``json.dumps``) with DEL, C1, separators, bidi controls and
    zero-width characters escaped.

    JSON puts these characters only inside strings, where an escape means the
    same character: the value read back is exactly the same.
    """
    return text.translate(_JSON)


#: ``<`` where it could open or close a tag (``<system-reminder>``, ``</x>``, ``<!--``):
#: a client frames what a hook adds in tags, and memo text must not end that frame.
_TAG_OPENING = re.compile(r"<(?=\s*/?\s*[A-Za-z!?])")


def inert(text: str) -> str:
    """Memo text as a hook hands it to an agent: as :func:`block`, and no ``<`` that could
    open or close a tag (it becomes ``&lt;``). Every line of it is also quoted by the
    hook (see :mod:`explomemo.clients.hooks.memos`), so no line can pass for the hook's own."""
    return _TAG_OPENING.sub("&lt;", block(text))


def no_workflow_commands(text: str) -> str:
    """Output in which no line is a GitHub Actions workflow command.

    The runner reads a line as a command when, after leading white space, it
    starts with ``::``, and (the older syntax) when ``##[`` appears anywhere
    in it. Such a line gets a backslash before its ``::``, and ``##[`` becomes
    ``##\\[`` (both still read as what they were; a Markdown renderer shows
    neither backslash).
    """
    lines = text.split("\n")
    for number, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            line = line[: len(line) - len(stripped)] + "\\" + stripped
        lines[number] = line.replace("##[", "##\\[")
    return "\n".join(lines)


def message(text: str) -> str:
    """One line for stderr (an error, a warning): escaped, and never a workflow command."""
    return no_workflow_commands(one_line(text))
