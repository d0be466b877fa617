"""Tables by angle addition: z(start + aB + b) = z(start + aB) z(b), certified per element.

A table of ``length`` rows in float32, float16 or bfloat16 is built from B = isqrt(length) exact rows of
positions 0 .. B - 1 and about as many exact *anchor* rows start + a·B, each computed on the exact path
(< 1 ulp of float64); every other row is one complex multiplication away, with a proven error bound per
column (:func:`addition_plan`). Each value is rounded once and certified against that bound; the few whose
interval holds a rounding midpoint are settled by :meth:`Spec.certain <posenc.core.Spec.certain>`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import compiled, parallel
from .options import Options
from .spec import Spec

# Unsure values a compiled pass lists beyond a row's worth (more: its flagged rows are redone in NumPy).
UNSURE_ROOM = 4096
# The output formats of the compiled angle addition (``_kernels.combine``), and their codes there.
COMBINE_FORMATS = {"float32": 0, "bfloat16": 1, "float16": 2}
# The page slots (compiled.staggered_empty) of a plan's arrays, each sine's cosine in the next: the kernel
# reads the six side by side, and the output's rows start at slot 0 (large NumPy arrays: byte 16 of a page).
SLOTS = {"first": 1, "anchor": 3, "band": 5}


def first_rows(options: Options, block: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact rows of positions 0 .. block - 1 (float64 sin, cos: ``(block, n)``), which every table of
    ``block``-row blocks combines with, whatever its start."""
    return progression_rows(options, 0, 1, block, SLOTS["first"])


def anchor_rows(options: Options, start: int, block: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact rows of positions start + a·block, a = 0 .. count - 1: part of a table's plan."""
    return progression_rows(options, start, block, count, SLOTS["anchor"])


def progression_rows(
    options: Options, start: int, step: int, count: int, slot: int
) -> tuple[np.ndarray, np.ndarray]:
    """The exact rows of positions start + step·k, k = 0 .. count - 1, in page slot ``slot`` (and the next;
    :func:`~posenc.core.compiled.staggered_empty`): cached (read-only) up to 4 MiB a pair, so a repeated
    table call computes no exact row."""
    if count * len(options.constants()[0]) * 16 <= 4 << 20:
        return _cached_progression_rows(options, start, step, count, slot)
    positions = start + step * np.arange(count, dtype=np.float64)
    return compiled.direct_rows(positions, options.constants()[1], slot=slot)


@functools.lru_cache(maxsize=64)
def _cached_progression_rows(
    options: Options, start: int, step: int, count: int, slot: int
) -> tuple[np.ndarray, np.ndarray]:
    positions = start + step * np.arange(count, dtype=np.float64)
    sin, cos = compiled.direct_rows(positions, options.constants()[1], slot=slot)
    sin.flags.writeable = cos.flags.writeable = False
    return sin, cos


def pre_touch(result: np.ndarray, fresh: bool) -> None:
    """Fault a fresh output's pages in one sequential pass, so that the writers that follow fault none:
    page faults taken by several threads at once cost more than this pass and vary from run to run (the
    compiled kernel writing into a fresh (8192, 4096) table took 19 to 207 ms; after this pass, 30 to 38).
    One byte per 4 KiB page is enough to fault it in (the kernel zeroes it): cheaper than a full fill."""
    if fresh and result.size:
        flat = result.reshape(-1).view(np.uint8)
        flat[::4096] = 0
        flat[-1] = 0  # the last page, when the array does not start on a page boundary


class AdditionPlan(NamedTuple):
    """The exact rows and error bands that angle addition builds a table from (:func:`addition_plan`)."""

    block: int
    sin_a: np.ndarray  # (count, n): rows start + a·block
    cos_a: np.ndarray
    sin_b: np.ndarray  # (block, n): rows 0 .. block - 1
    cos_b: np.ndarray
    sin_band: np.ndarray  # (n,): error bound of each combined sine column
    cos_band: np.ndarray


def addition_plan(start: int, length: int, spec: Spec) -> AdditionPlan:
    """Exact rows for z(start + aB + b) = z(start + aB) z(b), B = isqrt(length), and the per-column bands.

    With s, c the exact-path rows (< 1 ulp each), S = sA cB + cA sB has error < 2**-50.4 (|sA cB| + |cA sB|)
    and |cA sB| <= min(1, (B-1) ω); likewise for C. The band per column bounds that, with margin. A value
    whose interval ± band holds a rounding midpoint must be settled by :meth:`Spec.certain`.
    """
    block = max(1, math.isqrt(length))
    count = -(-length // block)
    sin_b, cos_b = first_rows(spec.options, block)
    sin_a, cos_a = anchor_rows(spec.options, start, block, count)
    largest = max(abs(start), abs(start + length - 1))
    sin_band, cos_band = _bands(spec.options, spec.absolute_error, block, largest)
    return AdditionPlan(block, sin_a, cos_a, sin_b, cos_b, sin_band, cos_band)


@functools.lru_cache(maxsize=64)
def _bands(
    options: Options, absolute_error: float, block: int, largest: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`addition_plan`'s bands for ``block``-row blocks and positions up to ``largest`` in magnitude,
    each in a page slot of its own: cached, read-only."""
    omegas = options.constants()[0]
    small = 2.0 * np.minimum(1.0, (block - 1) * omegas)
    sin_band = compiled.staggered_empty(omegas.shape, SLOTS["band"])
    sin_band[...] = 2.0**-48 * (np.minimum(1.0, largest * omegas) + small) + 4 * absolute_error
    cos_band = compiled.staggered_empty(omegas.shape, SLOTS["band"] + 1)
    cos_band[...] = 2.0**-48 * (1.0 + small) + 4 * absolute_error
    sin_band.flags.writeable = cos_band.flags.writeable = False
    return sin_band, cos_band


def angle_addition(result: np.ndarray, start: int, length: int, spec: Spec, fresh: bool) -> None:
    """Fill a low-precision table from :func:`addition_plan`, certified per element: in one compiled pass
    for float32, bfloat16 and float16 (:func:`angle_addition_compiled`), else on the NumPy path."""
    n = spec.n
    block, sin_a, cos_a, sin_b, cos_b, sin_band, cos_band = addition_plan(start, length, spec)
    count = len(sin_a)
    kernel = compiled.kernel() if spec.format in COMBINE_FORMATS else None
    if kernel is not None:
        angle_addition_compiled(kernel, result, start, (sin_a, cos_a, sin_b, cos_b), sin_band, cos_band, spec)
        return
    pre_touch(result, fresh)
    step = max(1, parallel.BLOCK // n)  # rows per tile
    tiles = [
        (a, b, min(b + step, block, length - a * block))
        for a in range(count)
        for b in range(0, min(block, length - a * block), step)
    ]

    def work(lo: int, hi: int) -> None:
        for a, b0, b1 in tiles[lo:hi]:
            sa, ca = sin_a[a], cos_a[a]
            sb, cb = sin_b[b0:b1], cos_b[b0:b1]
            sin = sa * cb
            sin += ca * sb
            cos = ca * cb
            cos -= sa * sb
            first = a * block + b0
            p = first + start + np.arange(b1 - b0, dtype=np.float64)
            spec.emit(result[first : first + b1 - b0], p, sin, cos, sin_band, cos_band)

    parallel.run_blocks(work, len(tiles), max(1, len(tiles) // (8 * parallel.threads())), elements=length * n)


def angle_addition_compiled(
    kernel: Callable[..., Any],
    result: np.ndarray,
    start: int,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    sin_band: np.ndarray,
    cos_band: np.ndarray,
    spec: Spec,
) -> None:
    """:func:`angle_addition` in one compiled pass over row ranges on the thread pool, each value rounded
    once from float64 to the output format (the 16-bit ones on the float64 bits). The kernel lists the
    values it is unsure of (their interval ± band holds a rounding midpoint: a few in a million, and the
    zero sines of position 0), and just those are settled by :meth:`Spec.certain` (the exact path, and
    the rare rest in arbitrary precision); a row range with more than its room for the list has its flagged
    rows recomputed on the NumPy path instead. A fresh output is not pre-touched (:func:`pre_touch`): each
    thread faults in the pages of its own rows, and measured side by side the extra pass did not pay."""
    sin_a, cos_a, sin_b, cos_b = rows
    block, length, n = len(sin_b), len(result), spec.n
    plan = spec.kernel_plan()
    unsure = np.empty(length, dtype=np.int64)
    listed: list[np.ndarray] = []
    flagged: list[np.ndarray] = []
    room = n + UNSURE_ROOM  # position 0's zero sines, and more than the usual few

    format_ = COMBINE_FORMATS[spec.format]
    written = result if format_ == 0 else result.view(np.uint16)  # 16-bit formats: the kernel writes bits

    def work(lo: int, hi: int) -> None:
        where = np.empty(room, dtype=np.int64)
        found = kernel(*rows, sin_band, cos_band, block, written, unsure, where, plan, lo, hi, format_)
        if found <= room:
            listed.append(where[:found])
        else:
            flagged.append(lo + np.flatnonzero(unsure[lo:hi]))

    threads = parallel.threads() if length * n >= parallel.PARALLEL_ELEMENTS else 1
    step = max(-(-length // (4 * threads)), parallel.BLOCK // max(1, n)) if threads > 1 else length
    parallel.run_blocks(work, length, step, elements=length * n)
    if listed:
        _settle_listed(result, start, listed[0] if len(listed) == 1 else np.concatenate(listed), spec)
    if flagged:
        r = np.concatenate(flagged)
        a, b = r // block, r % block
        sin = sin_a[a] * cos_b[b]
        sin += cos_a[a] * sin_b[b]
        cos = cos_a[a] * cos_b[b]
        cos -= sin_a[a] * sin_b[b]
        settled = result[r]
        spec.emit(settled, (start + r).astype(np.float64), sin, cos, sin_band, cos_band)
        result[r] = settled


def _settle_listed(result: np.ndarray, start: int, listed: np.ndarray, spec: Spec) -> None:
    """Settle the values a compiled pass listed (flat indices ``2n · row + 2i + which``, ``which`` 0 for a
    sine, 1 for a cosine) by :meth:`Spec.certain`. Position 0's row, whose zero sines are always listed, is
    written whole, exactly (sin 0 = 0 and cos 0 = 1: the values its certified ones hold already), and only
    the handful of others are looked at one by one: a NumPy operation on the list costs ~1-2 µs, a
    noticeable part of a small table."""
    width = 2 * spec.n
    sin_offset, cos_offset, stride = spec.column_plan()[:3]
    if 0 <= -start < len(result):  # position 0 is in the table
        sin_row, cos_row = spec.columns(result[-start : 1 - start])
        sin_row[...], cos_row[...] = 0, 1  # amplitude 1: angle_addition is the plain formula's
        first = -start * width
        listed = listed[(listed < first) | (listed >= first + width)]
    if not len(listed):
        return
    r, rest = np.divmod(listed, width)
    frequency, which = np.divmod(rest, 2)
    column = stride * frequency + np.where(which == 0, sin_offset, cos_offset)
    p = (start + r).astype(np.float64)
    sines = which == 0
    for w, pick in ((0, sines), (1, ~sines)):
        if pick.all():  # all of one kind (the usual few): no selection
            result[r, column] = spec.certain(p, frequency, w)
            return
        if pick.any():
            result[r[pick], column[pick]] = spec.certain(p[pick], frequency[pick], w)
