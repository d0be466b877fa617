"""The usual code against posenc far out: at positions 8k, 32k, 100k and 1M, in float32, float16 and
bfloat16, how far each one's values are from the exact ones, and how many distinct rows it keeps.

Three codes are compared on a window of positions around each (:data:`WINDOW` of them, centred):

* ``"dtype"``: the usual code computed in the dtype (:func:`posenc.analysis.naive_table`: positions,
  frequencies, angles and sin/cos each rounded to it, as ``torch.arange(n, dtype=...)`` and a model cast with
  ``.to(dtype)`` do);
* ``"float32"``: the usual code in float32, then cast to the dtype (a float32 table held by a model that
  runs in bfloat16);
* ``"posenc"``: posenc's values, each the exact real rounded once to the dtype.

For float32 the first two are the same code. Each cell gives the largest |value − exact| over the finite
values (the exact values in float64, correctly rounded), the rows holding a NaN (float16 positions from
65520 on are infinite; 65505 .. 65519 round to 65504), and the distinct rows among the finite ones.

>>> result = compare(64, positions=(100_000,), dtypes=("bfloat16",), window=100)
>>> cells = result.rows[0].cells
>>> cells["dtype"].distinct, cells["posenc"].distinct
(1, 100)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import decimals, validation
from ..core import table
from ..core.options import takes_options
from ..errors import PosencValueError
from .encodings import naive_table

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

__all__ = ["CODES", "DTYPES", "POSITIONS", "WINDOW", "Cell", "Comparison", "Row", "compare"]

#: The positions compared (the centre of each window).
POSITIONS = (8192, 32768, 100_000, 1_000_000)
#: The dtypes compared.
DTYPES = ("float32", "float16", "bfloat16")
#: Positions per window.
WINDOW = 1000
#: The codes compared, with their headings.
CODES = {"dtype": "computed in the dtype", "float32": "float32, then cast", "posenc": "posenc"}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One code on one window: the largest |value − exact| over its finite values (NaN where none is), the
    rows holding a NaN, and the distinct rows among the finite ones."""

    max_error: float
    nan_rows: int
    distinct: int

    def as_text(self) -> str:
        error = "—" if np.isnan(self.max_error) else f"{self.max_error:.3g}"
        nan = f", {self.nan_rows:,} NaN" if self.nan_rows else ""
        return f"{error} ({self.distinct:,} distinct{nan})"


@dataclasses.dataclass(frozen=True)
class Row:
    """One dtype at one window of positions ``lo`` .. ``hi`` − 1 (around ``position``): a :class:`Cell` per
    code of :data:`CODES`."""

    dtype: str
    position: int
    lo: int
    hi: int
    cells: dict[str, Cell]


@dataclasses.dataclass(frozen=True)
class Comparison:
    """:func:`compare`'s result: the setting (``d_model``, the core ``options``, ``window``) and its rows."""

    d_model: int
    options: dict[str, Any]
    window: int
    rows: list[Row]

    def heading(self) -> str:
        named = ", ".join(
            f"{k} {decimals.number(v) if isinstance(v, float) else v}" for k, v in self.options.items()
        )
        return (
            f"the usual code against posenc: d_model {self.d_model}, {named}; {self.window:,} positions "
            "around each; largest |value − exact|, and the distinct rows of the window"
        )

    def as_text(self) -> str:
        """A plain-text table, one line per dtype and window."""
        head = ["dtype", "positions", *CODES.values()]
        lines = [
            [r.dtype, f"{r.lo:,} – {r.hi - 1:,}", *(r.cells[c].as_text() for c in CODES)] for r in self.rows
        ]
        widths = [max(len(line[i]) for line in [head, *lines]) for i in range(len(head))]
        out = [self.heading(), ""]
        for line in [head, *lines]:
            out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        return "\n".join(out)

    def as_markdown(self) -> str:
        """The same table in Markdown (docs/far.md)."""
        out = [f"| dtype | positions | {' | '.join(CODES.values())} |", "|---|---|---|---|---|"]
        for r in self.rows:
            cells = " | ".join(r.cells[c].as_text() for c in CODES)
            out.append(f"| {r.dtype} | {r.lo:,} – {r.hi - 1:,} | {cells} |")
        return "\n".join(out)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the setting, and per row each code's figures (a NaN error as null)."""

        def cell(c: Cell) -> dict[str, Any]:
            error = None if np.isnan(c.max_error) else c.max_error
            return {"max_error": error, "nan_rows": c.nan_rows, "distinct": c.distinct}

        rows = [
            {"dtype": r.dtype, "position": r.position, "lo": r.lo, "hi": r.hi}
            | {"codes": {k: cell(r.cells[k]) for k in CODES}}
            for r in self.rows
        ]
        return {"d_model": self.d_model, "options": self.options, "window": self.window, "rows": rows}


#: How many float64 windows a comparison holds at once, at most (the exact one, the codes' values, the usual
#: code's temporaries, a cell's copies): 8.2 measured at d_model 32768.
_WINDOWS_HELD = 10


def _check_memory(window: int, d_model: int) -> None:
    """Raise ValueError, before any work, when memory cannot hold what comparing a window takes."""
    needed = _WINDOWS_HELD * window * d_model * 8
    available = validation.available_memory() if needed >= 64 << 20 else None
    if available is not None and needed > available:
        raise PosencValueError(
            f"comparing {window:,} positions of d_model {d_model:,} needs about {needed / 2**30:.3g} GiB "
            f"({_WINDOWS_HELD} float64 copies of the window) but only {available / 2**30:.3g} GiB of memory "
            "is available; ask for a smaller window or d_model",
            parameter="window",
        )


def _cell(values: np.ndarray, exact: np.ndarray) -> Cell:
    wide = values.astype(np.float64)
    finite = np.isfinite(wide).all(axis=1)
    nan_rows = int((~finite).sum())
    kept = wide[finite]
    error = float(np.abs(kept - exact[finite]).max()) if len(kept) else float("nan")
    return Cell(error, nan_rows, _distinct_rows(kept))


def _distinct_rows(rows: np.ndarray) -> int:
    """How many distinct rows ``rows`` (finite float64, 2-D) holds: each row's bytes as one item (-0.0 made
    +0.0, equal as values), sorted by ``np.unique`` (``np.unique(axis=0)`` builds a record type of one field
    per column: minutes at a million columns)."""
    if len(rows) == 0:
        return 0
    whole = np.ascontiguousarray(rows + 0.0)  # -0.0 + 0.0 is +0.0
    return len(np.unique(whole.view(np.dtype((np.void, whole.shape[1] * whole.itemsize))).ravel()))


@takes_options()
def compare(
    d_model: int = 512,
    *,
    positions: tuple[int, ...] = POSITIONS,
    dtypes: tuple[str, ...] = DTYPES,
    window: int = WINDOW,
    **options: Unpack[OptionKeywords],
) -> Comparison:
    """The three codes of the module docstring on a window of ``window`` positions around each of
    ``positions``, in each of ``dtypes``; ``options``: the core options (base, shift, scale, layout, odd)."""
    d_model = validation.d_model(d_model)
    window = validation.integer("window", window, minimum=1, maximum=100_000)
    positions = tuple(validation.integer("positions", p, minimum=0) for p in positions)
    for centre in positions:  # each window lo .. lo + window - 1 below 2**31, said in these terms
        last = max(0, centre - window // 2) + window - 1
        if last >= validation.MAX_POSITION:
            raise PosencValueError(
                f"the window of {window:,} positions around {centre:,} ends at {last:,}, past the largest "
                f"position 2**31 - 1 = {validation.MAX_POSITION - 1:,}; lower positions or window",
                parameter="positions",
            )
    for name in dtypes:
        validation.dtype(name)
    _check_memory(window, d_model)
    rows = []
    for name in dtypes:
        dt = validation.dtype(name)
        for centre in positions:
            lo = max(0, centre - window // 2)
            exact = table(window, d_model, start=lo, dtype="float64", **options)
            single = naive_table(window, d_model, start=lo, dtype="float32", **options)
            codes = {
                "dtype": naive_table(window, d_model, start=lo, dtype=name, **options),
                "float32": single.astype(dt),
                "posenc": table(window, d_model, start=lo, dtype=name, **options),
            }
            cells = {key: _cell(values, exact) for key, values in codes.items()}
            rows.append(Row(name, centre, lo, lo + window, cells))
    shown = {k: v for k, v in options.items() if k in ("base", "shift", "scale", "layout")}
    return Comparison(d_model, shown, window, rows)
