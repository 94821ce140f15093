"""Code identifiers in free text (identifiers.py): which tokens are names, and their parts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explomemo import identifiers as ids
from explomemo.identifiers import identifiers, memo_identifiers, name_parts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what emits FooDependencyWarning?", {"foodependencywarning"}),
        ("get_x_from_headers and MAX_RETRIES", {"get_x_from_headers", "max_retries"}),
        ("__init__, __exit__ and _private", {"__init__", "__exit__", "_private"}),
        ("HTTPStatusError, getX, iOS", {"httpstatuserror", "getx", "ios"}),
        (
            "call httpx.Client.send() now.",
            {"httpx.client.send", "httpx.client", "client.send"},
        ),
        ("see _urlparse.py.", {"_urlparse.py", "_urlparse"}),
        ("in httpx/_client.py", {"httpx/_client.py", "_client.py", "_client"}),
        ("my-tool.py", {"my-tool.py"}),
        ("then send() it", {"send"}),
        # Prose: words, abbreviations, versions, slashes between words.
        ("The Client sends a URL, e.g. this; i.e. that.", set()),
        ("version 0.28.1 and/or client/server", set()),
        ("URLs, APIs and IDs", set()),
    ],
)
def test_what_counts_as_an_identifier(text: str, expected: set[str]) -> None:
    assert identifiers(text) == expected


def test_name_parts_and_memo_identifiers() -> None:
    assert name_parts("FooError, HTTPStatusError and max_retries") == [
        "foo",
        "error",
        "http",
        "status",
    ]
    assert memo_identifiers("How?", "Raises FooError.", ["pkg/_io.py"]) == {
        "fooerror",
        "pkg/_io.py",
        "_io.py",
        "_io",
    }


# The regexes that pick the tokens worth reading, against a loop over every token ----------

#: Every token of the text, as the regexes' definition has it.
_EVERY_TOKEN = re.compile(r"[\w./\-]+")


def _every_token_identifiers(text: str) -> set[str]:
    """identifiers(), reading every token: what skipping the plain ones must not change."""
    found: set[str] = set()
    for match in _EVERY_TOKEN.finditer(text):
        token = match.group().strip(".-/")
        if not token:
            continue
        if "/" in token:
            ids._add_path(token, found)
        else:
            ids._add_segment(token, text.startswith("(", match.end()), found)
    return found


def _every_token_name_parts(text: str) -> list[str]:
    parts: dict[str, None] = {}
    for match in _EVERY_TOKEN.finditer(text):
        for piece in ids._SEPARATORS.split(match.group()):
            if ids._has_hump(piece) and not ids._PLURAL_ACRONYM.fullmatch(piece):
                for part in ids._HUMPS.findall(piece):
                    parts.setdefault(part.lower(), None)
    return list(parts)


#: Text made of what decides a token's shape: cases, digits, separators, brackets, spaces,
#: and a letter that is not ASCII.
_SHAPES = st.text(alphabet="aZbY09_./-( )\n,éÉ", max_size=80)


@settings(max_examples=600, deadline=None)
@given(_SHAPES)
def test_skipping_plain_tokens_changes_nothing(text: str) -> None:
    assert identifiers(text) == _every_token_identifiers(text)
    assert name_parts(text) == _every_token_name_parts(text)
