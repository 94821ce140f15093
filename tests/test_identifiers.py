"""Code identifiers in free text (identifiers.py): which tokens are names, and their parts."""

from __future__ import annotations

import pytest

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
