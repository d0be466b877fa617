"""The public functions of the core: :func:`frequencies`, :func:`encode` and :func:`table`.

Each checks its arguments (:class:`~posenc.core.Options`, the positions, the output array), builds the
request's :class:`~posenc.core.Spec` and runs it: ``encode`` on the exact path (compiled or NumPy),
``table`` on the exact path in float64 and by angle addition (:mod:`posenc.core.addition`) otherwise.
The formula, the layouts and how exactness is reached are described in the docstring of :mod:`posenc.core`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs ~15 ms at import: annotations only
    import numpy.typing as npt
    from typing_extensions import Unpack

    from .options import OptionKeywords

from .. import validation
from . import addition, compiled, parallel
from .isolated import isolated
from .options import Options, takes_options
from .spec import Spec, output, output_dtype


@takes_options(layout=False)
@isolated
def frequencies(d_model: int, **options: Unpack[OptionKeywords]) -> np.ndarray:
    """The angular frequencies ω_i = scale · base ** (-i / (n - shift)), i = 0 .. n-1, n = d_model // 2.

    Each value is the float64 nearest to the exact real ω_i (computed in ~200-bit fixed point), so it can
    differ in the last bit from ``base ** (-i / (n - shift))`` evaluated in floating point. For an odd
    d_model, ``odd`` may call for one more frequency and another denominator (see :func:`encode`).

    >>> frequencies(4, base=100.0)
    array([1. , 0.1])
    >>> float(frequencies(8, shift=1)[-1])  # tensor2tensor: the lowest frequency is exactly 1 / base
    0.0001
    """
    return Options.check(d_model, layout="interleaved", **options).constants()[0].copy()


@takes_options
@isolated
def encode(
    positions: npt.ArrayLike,
    d_model: int,
    *,
    dtype: npt.DTypeLike | None = None,
    out: np.ndarray | None = None,
    **options: Unpack[OptionKeywords],
) -> np.ndarray:
    """The sinusoidal encoding of each position: shape ``positions.shape + (d_model,)``.

    PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i) with ω_i = base ** (-i / (d_model // 2 - shift)), laid
    out as ``layout`` says (see the module docstring). Positions are integers or reals of any shape and sign,
    |p| < 2**31. ``dtype`` is float32 (default), float64, float16 or bfloat16 (needs ``ml_dtypes``); with
    ``out=`` the result is written there and ``dtype`` defaults to ``out.dtype``.

    float32/float16/bfloat16 results are the exact values correctly rounded; float64 within 1 ulp.

    ``scale`` multiplies every frequency (tensor2tensor's ``min_timescale``, diffusers' ``scale``). ``odd`` is
    the rule for an odd d_model: ``"zero"`` (d_model // 2 pairs, then a zero column: fairseq, tensor2tensor,
    diffusers), ``"literal"`` (the formula at every column with exponent 2i / d_model, so the last column is
    a sine: keras-hub, DistilBERT/XLM, Marian), ``"drop"`` (computed for d_model + 1, last column dropped:
    positional-encodings) or ``"error"`` (Whisper).

    >>> encode([0, 1, 2], 4)
    array([[ 0.        ,  1.        ,  0.        ,  1.        ],
           [ 0.84147096,  0.5403023 ,  0.00999983,  0.99995   ],
           [ 0.9092974 , -0.41614684,  0.01999867,  0.9998    ]], dtype=float32)
    """
    checked = Options.check(d_model, **options)
    raw = validation.position_array(positions)
    dt = output_dtype(dtype, out)
    # the output's size (or out's shape) is checked before the positions are converted: a zero-stride
    # array of 2**40 positions costs nothing until it is copied
    result = output((*raw.shape, checked.d_model), dt, out)
    p = validation.positions(raw)
    encode_rows(Spec(checked, dt), p.reshape(-1), result.reshape(-1, checked.d_model))
    return result


def encode_rows(spec: Spec, flat_p: np.ndarray, rows: np.ndarray) -> None:
    """Write the encodings of the 1-D positions ``flat_p`` into ``rows`` (``(len(flat_p), d_model)``), exact
    per element: the compiled kernel for float32 (amplitude 1), else NumPy (float64 with an amplitude A != 1:
    :meth:`Spec.emit_scaled`); in blocks on the thread pool."""
    step = max(1, parallel.BLOCK // max(1, spec.n))
    unit = spec.dtype == np.float32 and spec.amplitude == 1.0
    kernel = compiled.kernel("encode_float32") if unit else None
    if kernel is not None and flat_p.size:
        positions = np.ascontiguousarray(flat_p, dtype=np.float64)
        unsure = np.empty(len(positions), dtype=np.int64)
        plan = spec.kernel_plan()

        def run_compiled(lo: int, hi: int) -> None:
            if kernel(positions, spec.limbs, spec.absolute_error, rows, unsure, plan, lo, hi):
                spec.settle_direct(rows, positions, lo + np.flatnonzero(unsure[lo:hi]))

        parallel.run_blocks(
            run_compiled, len(positions), step, elements=compiled.exact_cost(flat_p.size * spec.n)
        )
        return

    scaled = spec.dtype == np.float64 and spec.amplitude != 1.0

    def work(lo: int, hi: int) -> None:
        if scaled:  # A · sin in float64: from double-doubles, rounded once (NumPy)
            spec.emit_scaled(rows[lo:hi], flat_p[lo:hi])
            return
        sin, cos = compiled.direct_rows(flat_p[lo:hi], spec.limbs, threads=False)
        spec.emit(rows[lo:hi], flat_p[lo:hi], sin, cos, spec.direct_band(sin), spec.direct_band(cos))

    cost = flat_p.size * spec.n * compiled.EXACT_COST if scaled else compiled.exact_cost(flat_p.size * spec.n)
    parallel.run_blocks(work, len(flat_p), step, elements=cost)


@takes_options
@isolated
def table(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    dtype: npt.DTypeLike | None = None,
    out: np.ndarray | None = None,
    **options: Unpack[OptionKeywords],
) -> np.ndarray:
    """The encodings of positions ``start .. start + length - 1``: shape ``(length, d_model)``.

    Row k equals ``encode(start + k, d_model, ...)`` bit for bit, whatever the length or the chunking.
    Options are those of :func:`encode`.

    >>> table(3, 4, base=100.0, start=1, dtype="float64")[:, 2]  # sin(p / 100**(2/4)) for p = 1, 2, 3
    array([0.09983342, 0.19866933, 0.29552021])
    """
    length = validation.integer("length", length, minimum=0)
    checked = Options.check(d_model, **options)
    start = validation.table_start(start, length)
    dt = output_dtype(dtype, out)
    result = output((length, checked.d_model), dt, out)
    spec = Spec(checked, dt)  # refuses options outside the domain even for an empty table, as encode does
    if length == 0:
        return result
    fresh = out is None
    if dt == np.float64:
        addition.pre_touch(result, fresh)
        p = np.arange(start, start + length, dtype=np.float64)
        step = max(1, parallel.BLOCK // spec.n)

        def work(lo: int, hi: int) -> None:
            sin, cos = compiled.direct_rows(p[lo:hi], spec.limbs, threads=False)
            spec.emit(result[lo:hi], p[lo:hi], sin, cos, None, None)

        parallel.run_blocks(work, length, step, elements=compiled.exact_cost(length * spec.n))
    else:
        addition.angle_addition(result, start, length, spec, fresh)
    return result
