"""Which positions share an encoding in a dtype: :func:`collisions` and :func:`collision_horizon`.

Rounded to a low-precision dtype, two distinct positions can get the same encoding. With the usual code
(angles computed in the dtype, :func:`~posenc.analysis.encodings.naive_table`) this happens early: in
bfloat16, positions above 256 round together, so position 257 repeats 256. posenc's encodings, rounded once,
stay apart much longer. The rows are compared by 128-bit hashes of their bits (:mod:`posenc.analysis.hashes`):
first of their first columns, then, for the rows whose first columns match another's, of the whole row; the
first repeat found is verified by recomputing both rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation
from ..core import frequencies
from ..core.isolated import isolated
from ..core.options import frequency_options, takes_options
from ..layouts import check_layout, pair_columns
from ._work import Rows, chunks, span
from .encodings import _rounded, builder, check_compute
from .hashes import earliest_equal, key_columns, key_hashes, normalised, refine_hashes, same_bits

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import TableOptions

#: Working memory per position of collisions (two 64-bit hashes, and the sort's keys, order and inverse).
HASH_BYTES = 80


@dataclass(frozen=True)
class Collisions:
    """Which positions share an encoding: the result of :func:`collisions`.

    ``first`` is the first position whose encoding equals that of an ``earlier`` position (both ``None``
    when all encodings differ); ``distinct`` counts the different encodings among ``length`` positions.

    >>> collisions(2048, 64, dtype="bfloat16", compute="dtype")  # the usual code: 257 repeats 256
    Collisions(first=257, earlier=256, distinct=641, length=2048, start=0)
    >>> collisions(2048, 64, dtype="bfloat16").unique  # posenc's, rounded once
    True
    """

    first: int | None
    earlier: int | None
    distinct: int
    length: int
    start: int = 0

    @property
    def unique(self) -> bool:
        """True when no two positions share an encoding."""
        return self.first is None


@takes_options(dtype="float32", before="compute")
@isolated
def collisions(
    length: int, d_model: int, *, start: int = 0, compute: str = "exact", **options: Unpack[TableOptions]
) -> Collisions:
    """Which of positions start .. start + length - 1 share their encoding in ``dtype`` with another.

    The rows are hashed chunk by chunk (128-bit hashes of their bits, +0 and -0 counted as equal) and the
    hashes sorted, so memory and time grow like ``length`` (never ``length²``). The first repeat reported is
    verified by recomputing both rows. ``compute="exact"`` judges posenc's encodings; ``"dtype"`` judges the
    usual code evaluated in ``dtype`` (:func:`~posenc.analysis.encodings.naive_table`).

    >>> collisions(1000, 512, dtype="bfloat16").unique  # posenc: every position keeps its own encoding
    True
    >>> c = collisions(1000, 512, dtype="bfloat16", compute="dtype")  # angles computed in bfloat16
    >>> c.first, c.earlier
    (257, 256)
    """
    compute = check_compute(compute)
    length, start = span("length", length, start, d_model, options, rows_bytes=HASH_BYTES)
    build = builder(d_model, start=start, compute=compute, **options)
    keys = _key_builder(build, length, d_model, start, compute, options)
    hashes = np.zeros((length, 2), np.uint64)
    width = key_columns(d_model, np.dtype(options["dtype"]).itemsize) if keys is not build else d_model
    for lo, hi in chunks(length, width):
        hashes[lo:hi] = key_hashes(keys(lo, hi))
    refine_hashes(hashes, Rows(build, length, d_model, validation.dtype(options["dtype"])).gather)
    return first_repeat(hashes, build, start, limit=length)


def _key_builder(
    build: Callable[[int, int], np.ndarray],
    length: int,
    d_model: int,
    start: int,
    compute: str,
    options: dict[str, Any],
) -> Callable[[int, int], np.ndarray]:
    """``keys(lo, hi)``: at least the first :func:`~posenc.analysis.hashes.key_columns` columns of
    ``build(lo, hi)``, bit for bit. For the usual code (``compute="dtype"``) just those columns are computed,
    as :func:`~posenc.analysis.encodings.naive_table` computes them (positions, frequencies, angles and
    sin/cos each rounded to the dtype), checked against ``build`` on the first and last rows; posenc's rows
    (and any setting where that check fails) are built whole."""
    if compute != "dtype" or not length:
        return build
    dt = validation.dtype(options["dtype"])
    width = key_columns(d_model, dt.itemsize)
    if width >= d_model:
        return build
    omegas = _rounded(frequencies(d_model, **frequency_options(options)), dt)
    sin_columns, cos_columns = pair_columns(check_layout(options["layout"]), len(omegas))
    plan = []
    for column in range(width):
        if column in sin_columns:
            plan.append((int(np.flatnonzero(sin_columns == column)[0]), np.sin))
        elif column in cos_columns:
            plan.append((int(np.flatnonzero(cos_columns == column)[0]), np.cos))
        else:
            plan.append((-1, np.sin))  # an odd width's zero column
    which = np.array([i for i, _ in plan])
    chosen = omegas[np.maximum(which, 0)]

    def keys(lo: int, hi: int) -> np.ndarray:
        out = np.zeros((hi - lo, width), dt)
        with np.errstate(over="ignore", invalid="ignore"):  # as naive_table: float16 overflow gives NaN
            p = _rounded(np.arange(start + lo, start + hi, dtype=np.float64), dt)
            angle = _rounded(p[:, None] * chosen, dt)
            for column, (i, function) in enumerate(plan):
                if i >= 0:
                    out[:, column] = function(angle[:, column]).astype(dt)
        return out

    ends = [(0, min(length, 64)), (max(0, length - 64), length)]
    if all(same_bits(keys(lo, hi), np.ascontiguousarray(build(lo, hi)[:, :width])) for lo, hi in ends):
        return keys
    return build


@takes_options(dtype="bfloat16", before="compute")
@isolated
def collision_horizon(
    d_model: int, *, limit: int = 1 << 20, compute: str = "exact", **options: Unpack[TableOptions]
) -> int | None:
    """The first position p ≥ 0 whose encoding in ``dtype`` equals that of an earlier position, searching
    positions 0 .. limit - 1; ``None`` when there is none there.

    >>> collision_horizon(512, dtype="bfloat16", compute="dtype", limit=4096)  # 257 rounds to 256
    257
    >>> collision_horizon(2, dtype="bfloat16", limit=4096)  # one pair: 711 - 1 = 710 ≈ 113 turns of 2π
    711
    """
    limit, _ = span("limit", limit, 0, d_model, options, rows_bytes=HASH_BYTES)
    return collisions(limit, d_model, compute=compute, **options).first


def first_repeat(
    hashes: np.ndarray, build: Callable[[int, int], np.ndarray], start: int, *, limit: int, after: int = 0
) -> Collisions:
    """Collisions among rows 0 .. limit - 1 of a table from position ``start``, by their hashes ``(L, 2)``;
    ``first`` is the first repeat at an index >= ``after``. ``build(lo, hi)`` recomputes rows lo .. hi - 1,
    to verify a repeat bit for bit (a 128-bit hash collision is astronomically unlikely, but not impossible).
    """
    hashes = hashes[:limit]
    if not len(hashes):
        return Collisions(None, None, 0, 0, start)
    earliest, distinct = earliest_equal(hashes)
    repeats = np.flatnonzero(earliest != np.arange(len(hashes)))
    repeats = repeats[repeats >= after]
    for index in repeats[:64].tolist():
        earlier = int(earliest[index])
        if same_bits(normalised(build(index, index + 1)), normalised(build(earlier, earlier + 1))):
            return Collisions(start + index, start + earlier, distinct, len(hashes), start)
    return Collisions(None, None, distinct, len(hashes), start)
