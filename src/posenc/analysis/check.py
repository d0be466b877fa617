"""``check``: measure every criterion of :data:`~posenc.analysis.criteria.CRITERIA` for one setting, in one
report.

The encodings of positions 0 .. 2L - 1 (posenc's, or the usual code's with ``compute="dtype"``) are built
once, block by block on all cores, and never held whole: each block is hashed (by its first columns; rows that
share them are then hashed whole) and what the criteria read of every row is kept (max |value|, norm,
distance to the next row). Each criterion is then measured in table order; rows it reads again are
computed again, block by block. The report's notes say what was measured on every row and what on a
sample (:func:`~posenc.analysis.report.sampling_notes`): the dot products always, and above 2**27 values the
recomputations of ``deterministic``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from .. import layouts, validation
from ..core import encode, frequencies, table
from ..core.isolated import isolated
from ..core.options import frequency_options, takes_options
from ..core.parallel import run_blocks, threads
from ..defaults import ODD, SCALE
from ._work import ELEMENTS, MAX_WORK, Rows, RowStats, check_memory, fresh, row_stats
from .criteria import CRITERIA, DOT_BYTES, HELD_BYTES, Evidence, pair_length
from .encodings import builder, check_compute
from .hashes import key_hashes, refine_hashes
from .report import Report, sampling_notes

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords


class Progress(Protocol):
    """``progress(fraction, what)``: called with a fraction from 0 to 1 and what is being done.

    The type of :func:`check`'s ``progress``: any function of those two arguments.

    >>> seen = []
    >>> report = check(256, 32, progress=lambda fraction, what: seen.append((fraction, what)))
    >>> seen[0][0], seen[-1], [fraction for fraction, _ in seen] == sorted(fraction for fraction, _ in seen)
    (0.0, (1.0, 'done'), True)
    """

    def __call__(self, fraction: float, what: str, /) -> None: ...


@takes_options
@isolated
def check(
    length: int = 2048,
    d_model: int = 512,
    *,
    dtype: npt.DTypeLike = "float32",
    compute: str = "exact",
    progress: Progress | None = None,
    **options: Unpack[OptionKeywords],
) -> Report:
    """Measure the criteria of a good positional encoding for positions 0 .. length - 1 in ``dtype``.

    The criteria are the rows of :data:`~posenc.analysis.criteria.CRITERIA` (unique, consistent across
    lengths, generalises to longer sequences, bounded, deterministic, plus shift invariance), each with its
    figure:

    * ``unique``: no two positions share an encoding (bit for bit, ±0 equal). Figure: the smallest distance
      between two positions' encodings (:func:`~posenc.analysis.margin.uniqueness_margin`; 0 when two
      coincide).
    * ``consistent``: distances do not depend on the sequence length: table(L) is bit-identical to the
      first L rows of table(2L), both computed (where table(2L) passes 256 MiB, the longest L that fits, as
      the report says). Figure: the number of values that differ.
    * ``generalises``: positions L .. 2L - 1, never seen at this length, behave like the checked ones: bounded
      by 1, distinct from each other and from positions 0 .. L - 1, and their dot products follow the closed
      form within the tolerance of ``shift_invariant``. Figure: the dot-product deviation there.
    * ``bounded``: max |PE| ≤ 1. Figure: max |PE| over positions 0 .. L - 1.
    * ``deterministic``: recomputing (again, in two halves, 64 rows by ``encode``) gives the same bits.
      Figure: the number of values that differ. Above 2**27 values (and 262,144 positions), "again" and
      "in two halves" are sampled: 16 windows of 4096 rows
      (:func:`~posenc.analysis.properties.recomputed_windows`).
    * ``shift_invariant``: PE(p) · PE(p + k) = Σ_i cos(k ω_i) for up to 4096 distinct sampled pairs
      0 ≤ p < p + k < L (fixed seed; offsets 1..16 always included). Figure: the largest deviation.
      Tolerance: the proven bound n (2u + u²) for values with relative error ≤ u (u = 2⁻²⁴ in float32, 2⁻⁸
      in bfloat16), plus float64 summation.

    Options mean what they mean in :func:`posenc.table`; the report's options name ``scale`` and ``odd``
    only when they differ from the defaults. An odd d_model under odd="literal"/"drop" holds a lone sine
    (a lone cosine under layout="cos_sin"), whose products depend on p: such a table fails
    ``shift_invariant``.
    ``compute="dtype"`` judges the usual code evaluated in ``dtype`` instead
    (:func:`~posenc.analysis.encodings.naive_table`). ``progress(fraction, what)`` is called as the work
    advances. The report's ``notes`` say what was measured on every row and what on a sample, and how many.

    >>> report = check(256, 64, dtype="bfloat16")
    >>> report.passed, [c.name for c in report.criteria]
    (True, ['unique', 'consistent', 'generalises', 'bounded', 'deterministic', 'shift_invariant'])
    """
    length = validation.integer("length", length, minimum=1)
    if 2 * length - 1 >= validation.MAX_POSITION:
        raise ValueError(
            f"length must be <= 2**30 (the check also encodes positions up to 2 * length); got {length}"
        )
    dt = validation.dtype(dtype)
    _check_size(length, validation.d_model(d_model), dt)  # before d_model's constants (~0.5 s at 2**20)
    compute = check_compute(compute)
    # validates d_model, base, shift, scale and odd before any work
    frequencies(d_model, **frequency_options(options))
    setting = {**options, "layout": layouts.check_layout(options["layout"]), "dtype": dt}
    d_model = int(d_model)
    if progress is not None and not callable(progress):
        raise TypeError(
            f"progress must be a function progress(fraction, what), or None; got {type(progress).__name__}"
        )
    say = progress or (lambda fraction, what: None)
    say(0.0, f"encoding and hashing positions 0..{2 * length - 1}, block by block")
    build = builder(d_model, start=0, compute=compute, **setting)
    rows, hashes, whole = _encode_and_hash(build, length, d_model, setting, compute)
    whole_build = _whole_tables(build, d_model, setting, compute)
    evidence = Evidence(length, d_model, setting, compute, cast(np.ndarray, rows), hashes, whole_build)
    criteria = []
    for index, definition in enumerate(CRITERIA):
        say(0.4 + 0.6 * index / len(CRITERIA), definition.title)
        criteria.append(definition.judge(evidence))
    say(1.0, "done")
    kept = len(rows.stored) == length
    notes = sampling_notes(
        length, d_model, whole, block=_block_rows(d_model), kept=kept, pair=pair_length(length, d_model, dt)
    )
    return Report(_checked(length, d_model, setting, compute), tuple(criteria), notes)


#: Bytes of working memory per position checked: a hash (16 bytes) and max |value| (8) for each of the 2L
#: positions encoded, a norm and a distance (8 each) for each of the first L, and the search for repeated
#: hashes over the 2L (its sort: ~120 bytes a position, measured by tracemalloc at L = 2**21).
ROW_BYTES = 2 * (16 + 8) + 8 + 8 + 128


def working_memory(length: int, d_model: int, dtype: np.dtype) -> int:
    """The bytes a check holds at most: :data:`ROW_BYTES` a position, positions 0 .. L - 1 kept
    (:data:`KEEP_BYTES` at most), float64 copies of rows, the consistent criterion's two tables
    (:func:`~posenc.analysis.criteria.pair_length`) and the dot-product deviation's rows."""
    itemsize = np.dtype(dtype).itemsize
    kept = length * d_model * itemsize
    pair = 3 * pair_length(length, d_model, dtype) * d_model * itemsize
    # float64 copies of rows (a block's statistics and hashes, the closest pair's rows, a recomputation): up
    # to four at once, of every row or of each thread's block (tracemalloc measured 3.2 at L = 4, d = 2**20)
    copies = 4 * 8 * min(2 * length * d_model, max(2, threads()) * ELEMENTS)
    return (
        length * ROW_BYTES + (kept if kept <= KEEP_BYTES else 0) + pair + copies + 2 * DOT_BYTES + HELD_BYTES
    )


def _check_size(length: int, d_model: int, dtype: np.dtype) -> None:
    """Refuse, before any allocation, a check of more than :data:`~posenc.analysis._work.MAX_WORK` values
    (2 · length · d_model: positions 0 .. 2L - 1 are encoded) or more working memory
    (:func:`working_memory`) than is available."""
    work = 2 * length * d_model
    if work > MAX_WORK:
        raise ValueError(
            f"length={length} with d_model={d_model} asks for 2 · length · d_model = {work:.3g} values, "
            f"more than the 2**36 = {MAX_WORK:.3g} (about ten minutes of work) that one check computes; "
            "lower length"
        )
    check_memory(
        f"length={length} with d_model={d_model}", working_memory(length, d_model, dtype), "lower length"
    )


#: Positions 0 .. L - 1 are kept in memory (not computed again when read) when they take at most this.
KEEP_BYTES = 1 << 30
#: Rows per slice of a block whose statistics are computed at once (float64 temporaries of ~1 MB).
STATS_ROWS = 256


def _whole_tables(
    build: Callable[[int, int], np.ndarray], d_model: int, setting: dict[str, Any], compute: str
) -> Callable[[int, int], np.ndarray]:
    """``build``, but a large table of posenc's is written into an output mapped at once
    (:func:`~posenc.analysis._work.fresh`): the same call of :func:`posenc.table`, the same values."""
    if compute != "exact":
        return build

    def whole(lo: int, hi: int) -> np.ndarray:
        out = fresh((hi - lo, d_model), setting["dtype"])
        return table(hi - lo, d_model, start=lo, out=out, **setting)

    return whole


def _block_rows(d_model: int) -> int:
    """Rows per block of the pass over positions 0 .. 2L - 1."""
    return max(1, ELEMENTS // max(1, d_model))


def _encode_and_hash(
    build: Callable[[int, int], np.ndarray], length: int, d_model: int, setting: dict[str, Any], compute: str
) -> tuple[Rows, np.ndarray, int]:
    """One pass over positions 0 .. 2L - 1 in blocks (on all cores): each row's key hash, max |value|, and
    for positions 0 .. L - 1 its norm and its distance to the next row. Positions 0 .. L - 1 are kept when
    they take at most :data:`KEEP_BYTES`; other rows a criterion reads are computed again, block by block
    (:class:`~posenc.analysis._work.Rows`). Rows that share a key are then hashed whole
    (:func:`~posenc.analysis.hashes.refine_hashes`). Returns the rows, their hashes ``(2L, 2)`` and how many
    rows were hashed whole."""
    total = 2 * length
    dt = setting["dtype"]
    hashes = np.empty((total, 2), np.uint64)
    top = np.empty(total)
    norms = np.empty(length)
    step = np.empty(max(0, length - 1))
    size = _block_rows(d_model)
    blocks = [(lo, min(lo + size, length)) for lo in range(0, length, size)]
    blocks += [(lo, min(lo + size, total)) for lo in range(length, total, size)]
    local = threading.local()
    keep = length * d_model * dt.itemsize <= KEEP_BYTES
    stored = fresh((length, d_model), dt) if keep else None

    def fill(lo: int, hi: int, out: np.ndarray) -> np.ndarray:
        """Rows lo .. hi - 1 into ``out`` (reused: on some machines fresh pages cost more than the rows)."""
        if compute != "exact":
            out[...] = build(lo, hi)
            return out
        return table(hi - lo, d_model, start=lo, out=out, **setting)

    def work(first: int, last: int) -> None:
        buffer = getattr(local, "buffer", None)
        if buffer is None:
            buffer = local.buffer = np.empty((size, d_model), dt)
        for lo, hi in blocks[first:last]:
            block = fill(lo, hi, stored[lo:hi] if stored is not None and hi <= length else buffer[: hi - lo])
            if hi <= length:
                nexts = None if hi == length else build(hi, hi + 1)[0]
                for a in range(lo, hi, STATS_ROWS):
                    b = min(hi, a + STATS_ROWS)
                    after = block[b - lo] if b < hi else nexts
                    top[a:b], norms[a:b], steps = row_stats(block[a - lo : b - lo], after)
                    step[a : min(b, length - 1)] = steps
            else:
                for a in range(lo, hi, STATS_ROWS):
                    part = block[a - lo : min(hi, a + STATS_ROWS) - lo]
                    wide = part if part.dtype.itemsize >= 4 else part.astype(np.float32)
                    high, low = wide.max(axis=1), wide.min(axis=1)
                    top[a : a + len(part)] = np.maximum(high, -low).astype(np.float64)
            hashes[lo:hi] = key_hashes(block)

    run_blocks(isolated(work), len(blocks), 1, elements=total * d_model)  # a pool's thread: its own state
    fetch = None
    if compute == "exact":
        options = {k: v for k, v in setting.items() if k != "dtype"}

        def fetch(positions: np.ndarray) -> np.ndarray:
            return encode(positions, d_model, dtype=dt, **options)

    stats = RowStats(top, norms, step)
    rows = Rows(build, total, d_model, dt, stored=stored, stats=stats, fetch=fetch, fill=fill)
    whole = refine_hashes(hashes, rows.gather)
    return rows, hashes, whole


def _checked(length: int, d_model: int, options: dict[str, Any], compute: str) -> dict[str, Any]:
    """The report's options: the setting checked, dtype by name. ``scale`` and ``odd`` appear only when they
    differ from the defaults, so that a default report reads as it always has."""
    checked: dict[str, Any] = {"d_model": d_model, "length": length, "base": options["base"]}
    checked["shift"] = options["shift"]
    if options["scale"] != SCALE:
        checked["scale"] = options["scale"]
    checked["layout"] = options["layout"]
    if options["odd"] != ODD:
        checked["odd"] = options["odd"]
    checked.update(dtype=options["dtype"].name, compute=compute)
    return checked
