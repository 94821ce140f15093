"""The tables laid out without Rich are the tables Rich draws."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explomemo.cli.tables import _rich, draw, plain

#: Words, runs of spaces, line breaks, long unbroken names: what folds and wraps.
_PIECES = st.sampled_from(["a", "bc", "def", "ghijklmnop", " ", "  ", "\n", "-", "/", "."])


_CELL = st.lists(_PIECES, max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda columns: st.tuples(
            st.lists(_CELL, min_size=columns, max_size=columns),
            st.lists(st.lists(_CELL, min_size=columns, max_size=columns), max_size=4),
        )
    ),
    # Tables take the terminal's width: narrow panes to wide screens.
    st.integers(1, 300),
)
def test_plain_tables_are_what_rich_draws(
    table: tuple[list[str], list[list[str]]], width: int
) -> None:
    headers, rows = table
    drawn = plain(headers, rows, width)
    if drawn is not None:
        assert drawn == _rich(headers, rows, width)


def test_a_readable_table_is_laid_out_here() -> None:
    headers = ["id", "project", "question"]
    rows = [["12", "alpha", "How is the retry policy decided? " * 6], ["3", "beta", "Where?"]]
    drawn = plain(headers, rows, 60)
    assert drawn is not None and drawn == _rich(headers, rows, 60)
    assert drawn.splitlines()[0].split() == headers
    assert max(len(line) for line in drawn.splitlines()) <= 60


def test_wide_and_combining_characters_are_left_to_rich() -> None:
    headers = ["id", "question"]
    rows = [["1", "どこで認証を設定する"], ["2", "cafe\u0301 au lait"]]
    assert plain(headers, rows, 20) is None
    assert draw(headers, rows, 20) == _rich(headers, rows, 20)
    assert "認証" in draw(headers, rows, 20)
