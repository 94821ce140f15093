"""Text made safe to show: memo text never drives a terminal or a CI runner.

Memo text comes from agents (which the content of a repository can steer) and
from imported files, so it may hold escape sequences (an OSC 52 clipboard
write, a window title, clear-screen), carriage returns that redraw a line,
bidirectional overrides that make a path read differently from what it is,
and lines that a GitHub Actions runner takes for workflow commands (``::``
at the start of a line, ``##[`` anywhere in it). People's formats go through
:func:`one_line` or :func:`block` and then :func:`no_workflow_commands`;
JSON keeps every value exact, with the same characters written as ``\\u``
escapes (:func:`json_text`).
"""

from __future__ import annotations

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


_ONE_LINE = {code: _shown(code) for code in UNSAFE}
_BLOCK = {code: shown for code, shown in _ONE_LINE.items() if code not in (0x09, 0x0A)}
# json.dumps already escapes C0; the rest is written as \u escapes, the same value.
_JSON = {code: f"\\u{code:04x}" for code in UNSAFE if code >= 0x7F}


def one_line(text: str) -> str:
    """``text`` on one line: every unsafe character (new lines too) as an escape like ``\\x1b``."""
    return text.translate(_ONE_LINE)


def block(text: str) -> str:
    """Like :func:`one_line`, but new lines and tabs stay (a conclusion's paragraphs)."""
    return text.translate(_BLOCK)


def json_text(text: str) -> str:
    """JSON text (from ``json.dumps``) with DEL, C1, separators and bidi controls escaped.

    JSON puts these characters only inside strings, where an escape means the
    same character: the value read back is exactly the same.
    """
    return text.translate(_JSON)


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
