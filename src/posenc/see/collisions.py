"""Which positions share an encoding in a dtype: :func:`collisions` and :func:`collision_horizon`.

Rounded to a low-precision dtype, two distinct positions can get the same encoding. With the usual code
(angles computed in the dtype, :func:`~posenc.see.encodings.naive_table`) this happens early: in bfloat16,
positions above 256 round together, so position 257 repeats 256. posenc's encodings, rounded once, stay
apart much longer. The rows are compared by 128-bit hashes of their bits (:mod:`posenc.see.hashes`), and the
first repeat found is verified by recomputing both rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.options import takes_options
from ._work import chunks, span
from .encodings import builder, check_compute
from .hashes import earliest_equal, normalised, row_hashes, same_bits

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
def collisions(
    length: int, d_model: int, *, start: int = 0, compute: str = "exact", **options: Unpack[TableOptions]
) -> Collisions:
    """Which of positions start .. start + length - 1 share their encoding in ``dtype`` with another.

    The rows are hashed chunk by chunk (128-bit hashes of their bits, +0 and -0 counted as equal) and the
    hashes sorted, so memory and time grow like ``length`` (never ``length²``). The first repeat reported is
    verified by recomputing both rows. ``compute="exact"`` judges posenc's encodings; ``"dtype"`` judges the
    usual code evaluated in ``dtype`` (:func:`~posenc.see.encodings.naive_table`).

    >>> collisions(1000, 512, dtype="bfloat16").unique  # posenc: every position keeps its own encoding
    True
    >>> c = collisions(1000, 512, dtype="bfloat16", compute="dtype")  # angles computed in bfloat16
    >>> c.first, c.earlier
    (257, 256)
    """
    compute = check_compute(compute)
    length, start = span("length", length, start, d_model, options, rows_bytes=HASH_BYTES)
    build = builder(d_model, start=start, compute=compute, **options)
    hashes = np.zeros((length, 2), np.uint64)
    for lo, hi in chunks(length, d_model):
        hashes[lo:hi] = row_hashes(build(lo, hi))
    return first_repeat(hashes, build, start, limit=length)


@takes_options(dtype="bfloat16", before="compute")
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
