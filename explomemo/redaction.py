"""Secrets: found in text and in files, and redacted with a visible mark.

What a hook captures (a user's prompt, an agent's answer) may hold a token, a key or a
password the user pasted or the agent read out of a file; a captured memo is listed,
recalled and exported into a file meant to be committed. :func:`redact` puts a mark such as
``[redacted: github token]`` in place of each secret it finds; :func:`secrets_in` says which
kinds a text holds; :func:`secret_file` says whether a file's content is one to keep no
snapshot of (``.env``, private keys, or a content that holds a secret).

The detector is a narrow set of patterns of known formats (GitHub, Anthropic, OpenAI,
AWS, Slack, Stripe, Google, GitLab, npm, PyPI, Hugging Face, SendGrid, Twilio tokens,
private key blocks, JWTs) and of secrets given a name (``password = …``, a password in a
connection URL, a bearer token), not a scanner of high-entropy strings: a memo holds
commit ids, SHA-256 digests, UUIDs and hashes all the time, and none of them may lose a
character. detect-secrets, the well-kept scanner these patterns follow, takes about 0.2 s
to import: more than a hook may spend on every turn (``benchmarks/redaction/``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import NamedTuple

#: What takes a secret's place: the kind of secret, never a character of it.
MARK = "[redacted: {kind}]"


class _Kind(NamedTuple):
    """One kind of secret.

    Its pattern starts with a literal (Python's ``re`` then skips to each place that
    literal occurs: a pattern opening on ``\\b`` or a class tries every position, 50 times
    slower); group ``s`` is the secret, else the whole match. It is compiled when a text
    first holds one of its hints (``re`` keeps it): compiling all of them would cost each
    hook that captures 10 ms.
    """

    name: str
    pattern: str
    #: Texts one of which a text must hold for the pattern to be tried at all.
    hints: tuple[str, ...]
    #: The match must not follow a letter, digit or ``_`` (``\\b``, checked outside the
    #: pattern).
    bounded: bool = True
    #: Pattern and hints are lowercase and run on the text with ASCII letters lowered.
    folded: bool = False
    #: A test the secret must pass.
    check: Callable[[str], bool] | None = None


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


#: A value that stands for a secret rather than being one: ``${DB_PASSWORD}``, ``{password}``,
#: ``<token>``, ``%(password)s``, ``***``, ``xxxx``, ``...``, an environment variable's name.
_PLACEHOLDER = re.compile(
    r"[$%{<*]|x+$|\.\.\.|…|[A-Z][A-Z0-9_]*$"
    r"|(?i:none|null|nil|true|false|password|passwd|pass|pwd|secret|token|changeme)$"
)
#: Characters a typed password holds that a name in code (``os.environ``, ``cfg.token``) does not.
_PASSWORD_SYMBOLS = frozenset("0123456789!@#$%^&*+/=~?|")
#: A dotted name in code (``settings.secret_key``): a reference, not a value.
_DOTTED_NAME = re.compile(r"[A-Za-z_][\w.]*[A-Za-z_]")


def _quoted_secret(value: str) -> bool:
    return len(value) >= 4 and not _PLACEHOLDER.match(value)


def _url_password(value: str) -> bool:
    return not _PLACEHOLDER.match(value)


def _bare_secret(value: str) -> bool:
    return (
        len(value) >= 6
        and not _PLACEHOLDER.match(value)
        and not _PASSWORD_SYMBOLS.isdisjoint(value)
        and _DOTTED_NAME.fullmatch(value) is None
    )


def _named_secret(value: str) -> bool:
    quoted = value[:1] in "\"'" and value[:1] == value[-1:]
    return _quoted_secret(value[1:-1]) if quoted else _bare_secret(value)


#: Names whose value is a secret, as the last word of a longer name
#: (``DB_PASSWORD``, ``githubToken``, ``client_secret``, ``SECRET_KEY``).
_SECRET_NAMES = (
    r"password|passwd|passphrase|pwd|secret|secret_?key|api_?key|apikey|access_?key"
    r"|private_?key|client_?secret|auth_?token|access_?token|refresh_?token|token"
)
#: The hints of a named secret (in the lowercased text).
_NAME_HINTS = ("pass", "pwd", "secret", "key", "token")

_KINDS: tuple[_Kind, ...] = (
    # Multi-line: first, so a key's lines are one mark, not a mark per token inside them.
    _Kind(
        "private key",
        (
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?s:.*?)-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            # No END (a cut text): its header lines and lines of key characters (of 16 or
            # more, or ending in base64's padding), not the prose after them.
            r"|(?:\r?\n(?:(?:Proc-Type|DEK-Info|Comment):[^\n]*"
            r"|[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2}|(?=\r?\n)))*)"
        ),
        ("PRIVATE KEY",),
        bounded=False,
    ),
    _Kind(
        "github token",
        r"g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{40,251})\b",
        ("gh", "github_pat_"),
    ),
    _Kind("anthropic key", r"sk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    _Kind(
        "openai key",
        r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        ("sk-",),
        check=_has_digit,
    ),
    _Kind(
        "aws access key id",
        r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}\b",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _Kind(
        "aws secret key",
        (
            r"secret_?(?:access_?)?key[\"']?\s*(?::=|=>|[:=])"
            r"\s*[\"']?(?P<s>[a-z0-9/+]{40})(?![a-z0-9/+])"
        ),
        ("secret",),
        bounded=False,
        folded=True,
    ),
    _Kind("slack token", r"xox[abcdeoprs]-[A-Za-z0-9-]{10,}", ("xox",)),
    _Kind(
        "slack webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/-]{20,}",
        ("hooks.slack.com",),
    ),
    _Kind("stripe key", r"sk_(?:live|test)_[A-Za-z0-9]{16,}", ("sk_",)),
    _Kind("stripe key", r"rk_(?:live|test)_[A-Za-z0-9]{16,}", ("rk_",)),
    _Kind("google api key", r"AIza[0-9A-Za-z_-]{35}", ("AIza",)),
    _Kind("gitlab token", r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}", ("gl",)),
    _Kind("npm token", r"npm_[A-Za-z0-9]{36}\b", ("npm_",)),
    _Kind("pypi token", r"pypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",)),
    _Kind("hugging face token", r"hf_[A-Za-z0-9]{34,}\b", ("hf_",), check=_has_digit),
    _Kind("sendgrid key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ("SG.",)),
    _Kind("twilio key", r"SK[0-9a-f]{32}\b", ("SK",)),
    _Kind(
        "json web token",
        r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ("eyJ",),
    ),
    _Kind(
        "password in a url",
        r"://[^\s:/@]*:(?P<s>[^\s@/]+)@",
        ("://",),
        bounded=False,
        check=_url_password,
    ),
    _Kind(
        "bearer token",
        r"bearer\s+(?P<s>[a-z0-9._~+/-]{20,}=*)",
        ("bearer",),
        folded=True,
        check=_has_digit,
    ),
    _Kind(
        "basic auth",
        r"authorization[\"']?\s*[:=]\s*[\"']?basic\s+(?P<s>[a-z0-9+/]{8,}={0,2})",
        ("authorization",),
        bounded=False,
        folded=True,
    ),
    # Last: a value the patterns above know is marked as what it is.
    _Kind(
        "password",
        (
            rf"(?:{_SECRET_NAMES})[\"'`]?\s*(?::=|=>|[:=])\s*"
            r"(?P<s>\"[^\"\s]+\"|'[^'\s]+'"
            # Unquoted: up to white space or punctuation, a sentence's last dot left out;
            # never a call or an index (``os.getcwd()``, ``env["X"]``).
            r"|[^\s\"'`,;()\[\]{}<>]+?(?=[.:]?(?:[\s\"'`,;)\]}>]|$)))"
        ),
        _NAME_HINTS,
        bounded=False,
        folded=True,
        check=_named_secret,
    ),
)
#: ASCII letters lowered, nothing else.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _folded(text: str) -> str:
    """``text`` lowercased, each character in its place (``str.lower`` never drops a
    character, and only a few, such as U+0130, become two: then ASCII letters alone)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


class Found(NamedTuple):
    """One secret in a text: where it is and what kind."""

    start: int
    end: int
    kind: str


def find(text: str) -> list[Found]:
    """The secrets in ``text``, in order, none overlapping (an earlier kind of the list
    wins where two overlap)."""
    folded: str | None = None
    found: list[Found] = []
    for kind in _KINDS:
        searched = text
        if kind.folded:
            searched = folded = _folded(text) if folded is None else folded
        if not any(hint in searched for hint in kind.hints):
            continue
        pattern = re.compile(kind.pattern)
        group = "s" if "s" in pattern.groupindex else 0
        for match in pattern.finditer(searched):
            start, end = match.span(group)
            if kind.bounded and start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
                continue
            if kind.check is not None and not kind.check(text[start:end]):
                continue
            if start < end and not any(f.start < end and start < f.end for f in found):
                found.append(Found(start, end, kind.name))
    return sorted(found)


class Redacted(NamedTuple):
    """A text with its secrets marked, and the kind of each secret marked, in order."""

    text: str
    kinds: list[str]


def redact(text: str) -> Redacted:
    """``text`` with each secret replaced by ``[redacted: KIND]``; redacting it again
    changes nothing."""
    found = find(text)
    if not found:
        return Redacted(text, [])
    parts: list[str] = []
    at = 0
    for secret in found:
        parts += [text[at : secret.start], MARK.format(kind=secret.kind)]
        at = secret.end
    parts.append(text[at:])
    return Redacted("".join(parts), [secret.kind for secret in found])


def secrets_in(text: str) -> list[str]:
    """The kinds of the secrets ``text`` holds (each once, in order of first place)."""
    return list(dict.fromkeys(secret.kind for secret in find(text)))


#: Files whose content is a secret by what they are: environment files and private keys.
_SECRET_FILE_NAMES = frozenset(
    {".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".netrc", ".pgpass"}
)
_SECRET_FILE_SUFFIXES = (".pem", ".key", ".p12", ".pfx")


def secret_file(path: str, content: bytes | None = None) -> bool:
    """Whether the file at ``path`` (relative, ``/`` separators) is one that holds secrets:
    ``.env`` or ``.env.*``, an SSH private key (``id_rsa``, ``id_ed25519``…), ``*.pem``,
    ``*.key``, ``*.p12``, ``*.pfx``, ``.netrc``, ``.pgpass``, or a ``content`` in which
    :func:`find` finds a secret."""
    name = posixpath.basename(path).lower()
    if name in _SECRET_FILE_NAMES or name.startswith(".env."):
        return True
    if name.endswith(_SECRET_FILE_SUFFIXES):
        return True
    return content is not None and holds_secret(content)


def holds_secret(content: bytes) -> bool:
    """Whether :func:`find` finds a secret in a file's ``content`` (read as UTF-8)."""
    return bool(find(content.decode("utf-8", "replace")))
