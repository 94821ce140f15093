"""Plain-text tables (``explomemo list``, ``explomemo stale``), exactly as Rich draws them.

The tables are Rich tables without a box: a header row, columns separated by
two spaces, long cells folded onto more lines so the table fits its width.
Importing Rich's table and console costs about four times ``python -c pass``,
four fifths of the five a short command may take in all, so text whose every
character is one cell wide on a terminal (what the commands show nearly
always: escaped memo text, paths, ids, times) is laid out here by the same
rules Rich follows (``Table._calculate_column_widths``, ``Text.wrap`` with
``overflow="fold"``); anything else (wide or combining characters) is drawn
by Rich itself. ``tests/test_tables.py`` checks that both give the same text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Characters Rich counts as one cell each without looking them up (``rich.cells``:
#: Latin, Greek, Cyrillic, box drawing, Braille), and the new line that separates a
#: cell's lines.
_ONE_CELL = re.compile("[\n\x20-\x7e\xa0-\xac\xae-\u02ff\u0370-\u0482\u2500-\u25fc\u2800-\u28ff]*")
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING_SPACE = re.compile(r"\s+$")


def draw(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    """A table of plain-text cells (never read as markup), at most ``width`` cells wide,
    as a Rich ``Table(box=None, pad_edge=False, show_edge=False)`` with every column's
    ``overflow="fold"`` prints it on a console of that width without colour."""
    drawn = plain(headers, rows, width)
    return drawn if drawn is not None else _rich(headers, rows, width)


def plain(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str | None:
    """The table :func:`draw` gives, laid out here; None when Rich must draw it (a
    character that is not one cell wide, or a column too narrow for its padding)."""
    columns = [[header, *(row[index] for row in rows)] for index, header in enumerate(headers)]
    if not all(_ONE_CELL.fullmatch(cell) for column in columns for cell in column):
        return None
    pads = [_padding(index, len(columns)) for index in range(len(columns))]
    widths = [
        _measure(column, pad, width)[1] or 1 for column, pad in zip(columns, pads, strict=True)
    ]
    if sum(widths) > width:
        widths = _collapse(widths, width)
        if sum(widths) > width:
            widths = _reduce(sum(widths) - width, [1] * len(widths), widths, widths)
        widths = [
            _measure(column, pad, column_width)[1]
            for column, pad, column_width in zip(columns, pads, widths, strict=True)
        ]
    if any(
        column_width - left - right < 1
        for column_width, (left, right) in zip(widths, pads, strict=True)
    ):
        return None
    lines: list[str] = []
    for number in range(len(rows) + 1):
        cells = [
            [" " * left + line + " " * right for line in _fold(column[number], w - left - right)]
            for column, w, (left, right) in zip(columns, widths, pads, strict=True)
        ]
        height = max(len(cell) for cell in cells)
        for cell, w in zip(cells, widths, strict=True):
            blank = [" " * w] * (height - len(cell))
            # The header row is aligned to the bottom, the other rows to the top.
            cell[:] = blank + cell if number == 0 else cell + blank
        lines += ["".join(cell[line] for cell in cells) for line in range(height)]
    return "\n".join(lines)


def _padding(index: int, count: int) -> tuple[int, int]:
    """(left, right) padding of a column's cells: one space, none at the table's edges."""
    return (0 if index == 0 else 1), (0 if index == count - 1 else 1)


def _measure(column: Sequence[str], pad: tuple[int, int], most: int) -> tuple[int, int]:
    """(minimum, maximum) width of a column, padding included, within ``most`` cells
    (``Table._measure_column`` over ``Padding`` over ``Text``)."""
    if most < 1:
        return 0, 0
    extra = sum(pad)
    minimums: list[int] = []
    maximums: list[int] = []
    for cell in column:
        if most - extra < 1:
            low = high = most
        else:
            lines = cell.splitlines()
            longest = max(map(len, lines)) if lines else 0
            words = cell.split()
            low, high = _got(max(map(len, words)) if words else longest, longest, most)
            low, high = min(low + extra, most), min(high + extra, most)
        low, high = _got(low, high, most)
        minimums.append(low)
        maximums.append(high)
    low = max(minimums) if minimums else 1
    high = max(maximums) if maximums else most
    return min(low, most), min(high, most)


def _got(low: int, high: int, most: int) -> tuple[int, int]:
    """A measurement as ``Measurement.get`` hands it on: normalized, within ``most``."""
    low, high = _normalized(low, high)
    low, high = min(low, most), min(high, most)
    if high < 1:
        return 0, 0
    return _normalized(low, high)


def _normalized(low: int, high: int) -> tuple[int, int]:
    low = min(max(0, low), high)
    return max(0, low), max(0, low, high)


def _collapse(widths: list[int], most: int) -> list[int]:
    """Narrow the widest columns, step by step, until the table fits (``_collapse_widths``)."""
    total = sum(widths)
    excess = total - most
    while total and excess > 0:
        widest = max(widths)
        second = max(w if w != widest else 0 for w in widths)
        ratios = [1 if w == widest else 0 for w in widths]
        if not any(ratios) or not widest - second:
            break
        widths = _reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        total = sum(widths)
        excess = total - most
    return widths


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """Take ``total`` off ``values`` in proportion to ``ratios`` (Rich's ``ratio_reduce``)."""
    ratios = [ratio if top else 0 for ratio, top in zip(ratios, maximums, strict=True)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    remaining = total
    reduced: list[int] = []
    for ratio, top, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            taken = min(top, round(ratio * remaining / total_ratio))
            reduced.append(value - taken)
            remaining -= taken
            total_ratio -= ratio
        else:
            reduced.append(value)
    return reduced


def _fold(text: str, width: int) -> list[str]:
    """A cell's lines at ``width``: words wrapped, longer ones folded, each padded to width."""
    found: list[str] = []
    for line in text.split("\n"):
        offsets = _breaks(line, width)
        for start, end in zip([0, *offsets], [*offsets, len(line)], strict=True):
            piece = line[start:end]
            if len(piece) > width:
                space = _TRAILING_SPACE.search(piece)
                if space is not None:
                    piece = piece[: len(piece) - min(len(space.group()), len(piece) - width)]
            found.append(piece[:width].ljust(width))
    return found


def _breaks(text: str, width: int) -> list[int]:
    """Where a line is broken to fit ``width`` (Rich's ``divide_line`` with fold)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            folded = [word[index : index + width] for index in range(0, len(word), width)]
            for number, piece in enumerate(folded):
                if start:
                    breaks.append(start)
                if number == len(folded) - 1:
                    offset = len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def _rich(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=False,
        color_system=None,
        highlight=False,
        soft_wrap=False,
    )
    console.print(table)
    return buffer.getvalue().rstrip("\n")
