"""Labelled grids and the text, csv and json formats that print them, a block of rows at a time.

A grid is a 2-D array with a label for each row and column: a whole array (:class:`Grid`, the demo's small
tables) or ``posenc.table`` computed block by block as it is printed (:class:`TableGrid`, ``posenc table``
at any length, memory flat). The writers ask a grid for its blocks and never hold more than one.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

import posenc

from .. import defaults
from ..decimals import shortest
from ..layouts import column_names

TEXT_DIGITS = 4  # decimals printed by the text format unless --digits says otherwise
_CHUNK_VALUES = 1 << 14  # values formatted at a time (as Python floats): text, csv and json stream
_TABLE_BLOCK_BYTES = 4 << 20  # ... from blocks of the table this large (posenc.table has a cost per call)


@dataclass(frozen=True)
class Grid:
    """A 2-D array with a label for each row and column: what the writers and the demo print."""

    corner: str  # the heading of the row-label column
    rows: Sequence[object]  # row labels (positions as a range, or any printable values)
    columns: Sequence[str]
    values: np.ndarray  # shape (len(rows), len(columns)), any real dtype

    def blocks(self) -> Iterator[tuple[Sequence[object], np.ndarray]]:
        """The grid in blocks of rows: (row labels, their values)."""
        step = _block_rows(len(self.columns))
        for lo in range(0, len(self.rows), step):
            yield self.rows[lo : lo + step], self.values[lo : lo + step]


@dataclass(frozen=True)
class TableGrid:
    """``posenc.table(len(rows), d_model, dtype=dtype, **options)`` as a grid whose blocks are computed
    when they are asked for, into one reused buffer: no format holds the whole table."""

    corner: str
    rows: range  # the positions
    columns: Sequence[str]
    d_model: int
    dtype: np.dtype
    options: dict[str, Any]  # posenc.table's options, start included

    def blocks(self) -> Iterator[tuple[Sequence[object], np.ndarray]]:
        """The table in blocks of rows: (positions, their rows); each block is overwritten by the next.

        Computed _TABLE_BLOCK_BYTES at a time (rows are bit-identical to the full table's, by
        posenc.table's contract), handed out _CHUNK_VALUES at a time."""
        computed = max(1, min(len(self.rows), _TABLE_BLOCK_BYTES // (self.d_model * self.dtype.itemsize)))
        handed = min(computed, _block_rows(self.d_model))
        buffer = np.empty((computed, self.d_model), self.dtype)
        for lo in range(0, len(self.rows), computed):
            positions = self.rows[lo : lo + computed]
            block = buffer[: len(positions)]
            options = {**self.options, "start": positions.start}
            posenc.table(len(positions), self.d_model, dtype=self.dtype.name, out=block, **options)
            for first in range(0, len(positions), handed):
                yield positions[first : first + handed], block[first : first + handed]


def _block_rows(width: int) -> int:
    """Rows per block for rows ``width`` values wide: _CHUNK_VALUES values, and at least one row."""
    return max(1, _CHUNK_VALUES // max(1, width))


def table_grid(length: int, d_model: int, **options: Any) -> Grid:
    """``posenc.table(length, d_model, **options)`` with its positions and column labels."""
    values = posenc.table(length, d_model, **options)
    start = options.get("start", 0)
    labels = column_names(d_model, options.get("layout", defaults.LAYOUT), options.get("odd", defaults.ODD))
    return Grid("pos", range(start, start + length), labels, values)


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, without the sign of a value that rounds to zero.

    >>> fixed(-0.00001, 4), fixed(0.84147096, 4)
    ('0.0000', '0.8415')
    """
    text = f"{value:.{digits}f}"
    return text[1:] if text[0] == "-" and not text.strip("-0.") else text


def _row_blocks(grid: Grid | TableGrid) -> Iterator[tuple[Sequence[object], list[list[float]]]]:
    """The grid in blocks of rows: (row labels, the rows as float64 Python floats)."""
    for labels, block in grid.blocks():
        yield labels, np.asarray(block, dtype=np.float64).tolist()


# --- text -----------------------------------------------------------------------------------------


def text_lines(grid: Grid | TableGrid, digits: int, min_width: int = 0) -> Iterator[str]:
    """The grid as aligned text: a header line, then one line per row.

    Values are right-aligned, in columns at least ``min_width`` wide; row labels are right-aligned
    when they are positions (a range), left-aligned otherwise (words). The column widths come from a
    first pass over the blocks, the lines from a second: memory holds a block, not the grid.
    """
    align = str.rjust if isinstance(grid.rows, range) else str.ljust
    ends = (grid.rows[0], grid.rows[-1]) if isinstance(grid.rows, range) and grid.rows else grid.rows
    label_width = max([len(grid.corner), *(len(str(label)) for label in ends)])
    largest = np.zeros(len(grid.columns))
    signs = np.zeros(len(grid.columns), dtype=bool)
    for _, block in grid.blocks():
        values = np.asarray(block, dtype=np.float64)
        largest = np.maximum(largest, np.abs(values).max(axis=0, initial=0.0))
        signs |= (values < 0).any(axis=0)
    widths = [
        max(min_width, len(name), len(fixed(top, digits)) + int(sign))
        for name, top, sign in zip(grid.columns, largest.tolist(), signs.tolist(), strict=True)
    ]
    cells = [name.rjust(width) for name, width in zip(grid.columns, widths, strict=True)]
    yield "  ".join([align(grid.corner, label_width), *cells])
    for labels, rows in _row_blocks(grid):
        for label, row in zip(labels, rows, strict=True):
            cells = [fixed(v, digits).rjust(width) for v, width in zip(row, widths, strict=True)]
            yield "  ".join([align(str(label), label_width), *cells])


def write_text(stream: IO[str], grid: Grid | TableGrid, digits: int) -> None:
    """The text format: :func:`text_lines`, each ended by a newline."""
    for line in text_lines(grid, digits):
        stream.write(line + "\n")


# --- csv and json ---------------------------------------------------------------------------------


def _value_formatter(digits: int | None) -> Callable[[float], str]:
    """Every digit (``repr``, which reads back exactly) or ``digits`` decimals."""
    return repr if digits is None else lambda value: fixed(value, digits)


def write_csv(stream: IO[str], grid: Grid | TableGrid, digits: int | None) -> None:
    """A header row (the corner, then the column names), then one row per grid row, its label first."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([grid.corner, *grid.columns])
    text = _value_formatter(digits)
    for labels, block in grid.blocks():
        line = shortest(block) if digits is None else None
        if line is None:
            rows = np.asarray(block, dtype=np.float64).tolist()
            writer.writerows([label, *map(text, row)] for label, row in zip(labels, rows, strict=True))
        else:
            stream.write("".join(f"{_csv_field(label)},{line(i)}\n" for i, label in enumerate(labels)))


def _csv_field(label: object) -> str:
    """A row label as csv.writer writes it (quoted when it holds a comma, a quote or a line break)."""
    text = str(label)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def write_json(stream: IO[str], grid: Grid | TableGrid, meta: dict[str, Any], digits: int | None) -> None:
    """``{**meta, "positions": [...], "columns": [...], "values": [[...], ...]}`` and a newline, as
    ``json.dumps(..., ensure_ascii=False)`` writes it, written a block of rows at a time. Values are float64
    Python floats (every digit: a float32 value reads back exactly), or rounded to ``digits`` decimals.

    JSON has no NaN or Infinity: a non-finite value is refused with a ValueError that names it, its row and
    its column, before the first byte is written when the values are at hand (:class:`Grid`, ``meta``);
    a :class:`TableGrid` computes its blocks as they are written, so each is checked before it is written
    (sines and cosines are finite: this does not happen, and ``--output`` keeps no partial file).

    >>> import io
    >>> grid = Grid("pos", range(2), ["x"], np.array([[0.5], [np.inf]]))
    >>> write_json(io.StringIO(), grid, {}, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --format json cannot write inf (row pos 1, column 'x'): JSON has no NaN or Infinity; ...
    """

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    for name, value in meta.items():
        if isinstance(value, float | np.floating):
            _refuse_non_finite(float(value), repr(name))
    head = "{" + "".join(f"{dumps(name)}: {dumps(value)}, " for name, value in meta.items())
    if isinstance(grid, Grid):  # all the values are at hand: refused before anything is written
        for labels, block in grid.blocks():
            _check_finite(grid, labels, block)
    stream.write(head)
    stream.write('"positions": [')
    step = _block_rows(1)
    for lo in range(0, len(grid.rows), step):
        stream.write((", " if lo else "") + dumps(list(grid.rows[lo : lo + step]))[1:-1])
    stream.write(f'], "columns": {dumps(list(grid.columns))}, "values": [')
    separator = ""
    for labels, block in grid.blocks():
        if isinstance(grid, TableGrid):
            _check_finite(grid, labels, block)
        line = shortest(block, ", ") if digits is None else None
        if line is not None:
            stream.write(separator + ", ".join(f"[{line(i)}]" for i in range(len(block))))
            separator = ", "
            continue
        for row in np.asarray(block, dtype=np.float64).tolist():  # row by row: json's encoder holds a
            # piece per value of what it encodes
            stream.write(separator + dumps(row if digits is None else [float(fixed(v, digits)) for v in row]))
            separator = ", "
    stream.write("]}\n")


def _check_finite(grid: Grid | TableGrid, labels: Sequence[object], block: np.ndarray) -> None:
    """A ValueError naming the first NaN or infinity of ``block`` (rows ``labels`` of ``grid``), if any."""
    values = np.asarray(block)
    if values.dtype.kind != "f" or values.size == 0:
        return
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~np.isfinite(values.astype(np.float64))
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        where = f"row {grid.corner} {labels[row]}, column {grid.columns[column]!r}"
        _refuse_non_finite(float(values[row, column]), where)


def _refuse_non_finite(value: float, where: str) -> None:
    """A ValueError if ``value`` is a NaN or an infinity (JSON has neither); ``where`` names it."""
    if not math.isfinite(value):
        raise ValueError(
            f"--format json cannot write {value!r} ({where}): JSON has no NaN or Infinity; "
            "--format csv or npy can hold it"
        )
