"""The exact core: frequencies, exact angle reduction, ``encode`` and ``table``. NumPy only, pure functions.

The encoding of a position p is built from n = d_model // 2 frequencies

    ω_i = base ** (-i / (n - shift)),   i = 0 .. n-1

and places sin(p ω_i) and cos(p ω_i) in the d_model columns according to ``layout``:

* ``"interleaved"``: [sin ω_0, cos ω_0, sin ω_1, cos ω_1, ...]   (the paper, PE(p, 2i) / PE(p, 2i+1))
* ``"sin_cos"``:     [sin ω_0 .. sin ω_{n-1} | cos ω_0 .. cos ω_{n-1}]   (tensor2tensor, fairseq, Whisper)
* ``"cos_sin"``:     [cos ... | sin ...]   (diffusers with ``flip_sin_to_cos``)

Odd d_model: every layout ends in one zero column after the n pairs (the rule of fairseq, tensor2tensor
and diffusers); the width is never changed.

How exactness is reached (float32, float16 and bfloat16 outputs are *correctly rounded*):

1. The turn rate c_i = ω_i / 2π is known to ~200 bits and held as five 26-bit float64 limbs; the position
   is split in two 26-bit halves, so each partial product is exact, and the fractional turn frac(p c_i) is
   accumulated as a double-double with error below 2**-98 (no π-reduction error, at any position).
2. The turn is reduced to a quarter turn, multiplied by 2π in double-double and fed to sin/cos kernels
   that are accurate to < 1 ulp of float64.
3. Tables combine a few such exact rows by angle addition, z(a + b) = z(a) z(b), with a proven error bound.
4. Every value is rounded *once* to the output dtype. A value whose error bound straddles a rounding
   midpoint is recomputed on the next more precise path, ending in arbitrary precision; so the rounding is
   certain, not just likely. float64 outputs are within 1 ulp.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs ~15 ms at import: annotations only
    import numpy.typing as npt

from . import _highprec, _validate

__all__ = ["encode", "frequencies", "table"]

_TWO_PI_HI = 6.283185307179586
_TWO_PI_LO = 2.4492935982947064e-16
_SPLITTER = 134217729.0  # 2**27 + 1, Dekker's split into two 26-bit halves

# Taylor coefficients (-1)**k / (2k+1)! and (-1)**k / (2k)!; |x| <= π/4 needs terms to x**17 and x**18.
_SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9)]
_COS = [(-1) ** k / math.factorial(2 * k) for k in range(2, 10)]

# Elements per working block: temporaries stay in cache.
_BLOCK = 1 << 16
# Below this many sin/cos pairs a thread pool costs more than it saves.
_PARALLEL_ELEMENTS = 1 << 19
# An element of the exact path costs about this many elements of angle addition (NumPy; compiled).
_EXACT_COST = 64
_COMPILED_EXACT_COST = 16
# Unsure values a compiled pass lists beyond a row's worth (more: its flagged rows are redone in NumPy).
_UNSURE_ROOM = 4096
# Per-options constants kept (frequencies, limbs, column plans): a bounded LRU cache.
_CACHED_OPTIONS = 256


def frequencies(
    d_model: int, *, base: float = 10000.0, shift: float = 0, scale: float = 1.0, odd: str = "zero"
) -> np.ndarray:
    """The angular frequencies ω_i = scale · base ** (-i / (n - shift)), i = 0 .. n-1, n = d_model // 2.

    Each value is the float64 nearest to the exact real ω_i (computed in ~200-bit fixed point), so it can
    differ in the last bit from ``base ** (-i / (n - shift))`` evaluated in floating point. For an odd
    d_model, ``odd`` may call for one more frequency and another denominator (see :func:`encode`).

    >>> frequencies(4, base=100.0)
    array([1. , 0.1])
    >>> float(frequencies(8, shift=1)[-1])  # tensor2tensor: the lowest frequency is exactly 1 / base
    0.0001
    """
    return _Options.check(d_model, base, shift, scale, "interleaved", odd).constants()[0].copy()


def encode(
    positions: npt.ArrayLike,
    d_model: int,
    *,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: npt.DTypeLike | None = None,
    out: np.ndarray | None = None,
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
    options = _Options.check(d_model, base, shift, scale, layout, odd)
    raw = _validate.position_array(positions)
    dt = _output_dtype(dtype, out)
    # the output's size (or out's shape) is checked before the positions are converted: a zero-stride
    # array of 2**40 positions costs nothing until it is copied
    result = _output((*raw.shape, options.d_model), dt, out)
    p = _validate.positions(raw)
    flat_p = p.reshape(-1)
    rows = result.reshape(-1, options.d_model)
    spec = _Spec(options, dt)
    step = max(1, _BLOCK // max(1, spec.n))
    kernel = _compiled_kernel("encode_float32") if dt == np.float32 else None
    if kernel is not None and flat_p.size:
        positions = np.ascontiguousarray(flat_p, dtype=np.float64)
        unsure = np.empty(len(positions), dtype=np.int64)
        plan = spec.kernel_plan()

        def compiled(lo: int, hi: int) -> None:
            if kernel(positions, spec.limbs, spec.absolute_error, rows, unsure, plan, lo, hi):
                spec.settle_direct(rows, positions, lo + np.flatnonzero(unsure[lo:hi]))

        _run_blocks(compiled, len(positions), step, elements=_exact_cost(flat_p.size * spec.n))
        return result

    def work(lo: int, hi: int) -> None:
        sin, cos = _direct_rows(flat_p[lo:hi], spec.limbs, threads=False)
        spec.emit(rows[lo:hi], flat_p[lo:hi], sin, cos, spec.direct_band(sin), spec.direct_band(cos))

    _run_blocks(work, len(flat_p), step, elements=_exact_cost(flat_p.size * spec.n))
    return result


def table(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: npt.DTypeLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The encodings of positions ``start .. start + length - 1``: shape ``(length, d_model)``.

    Row k equals ``encode(start + k, d_model, ...)`` bit for bit, whatever the length or the chunking.
    Options are those of :func:`encode`.

    >>> table(3, 4, base=100.0, start=1, dtype="float64")[:, 2]  # sin(p / 100**(2/4)) for p = 1, 2, 3
    array([0.09983342, 0.19866933, 0.29552021])
    """
    length = _validate.integer("length", length, minimum=0)
    options = _Options.check(d_model, base, shift, scale, layout, odd)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    if length and start + length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"the last position start + length - 1 = {start + length - 1} must be < 2**31 = "
            f"{_validate.MAX_POSITION}; lower start or length"
        )
    dt = _output_dtype(dtype, out)
    result = _output((length, options.d_model), dt, out)
    spec = _Spec(options, dt)  # refuses options outside the domain even for an empty table, as encode does
    if length == 0:
        return result
    fresh = out is None
    if dt == np.float64:
        _pre_touch(result, fresh)
        p = np.arange(start, start + length, dtype=np.float64)
        step = max(1, _BLOCK // spec.n)

        def work(lo: int, hi: int) -> None:
            sin, cos = _direct_rows(p[lo:hi], spec.limbs, threads=False)
            spec.emit(result[lo:hi], p[lo:hi], sin, cos, None, None)

        _run_blocks(work, length, step, elements=_exact_cost(length * spec.n))
    else:
        _angle_addition(result, start, length, spec, fresh)
    return result


# --- the pieces ------------------------------------------------------------------------------------


class _Options(NamedTuple):
    """The validated options of a request."""

    d_model: int
    base: float
    shift: float
    scale: float
    layout: str
    odd: str

    @classmethod
    def check(cls, d_model: Any, base: Any, shift: Any, scale: Any, layout: Any, odd: Any) -> _Options:
        """The validated options; arguments of plain types (int, float, str) are validated once per values
        and types (a bounded cache: True == 1 and 1 == 1.0, so the types are part of the key)."""
        values = (d_model, base, shift, scale, layout, odd)
        types = tuple(map(type, values))
        if all(t in _PLAIN for t in types):
            return _checked(values, types)
        return cls._check(*values)

    @classmethod
    def _check(cls, d_model: Any, base: Any, shift: Any, scale: Any, layout: Any, odd: Any) -> _Options:
        d_model = _validate.d_model(d_model)
        odd = _validate.odd(odd)
        _validate.plan(d_model, odd)  # refuses an odd width under odd="error"
        return cls(
            d_model,
            _validate.base(base),
            _validate.shift(shift, d_model, odd),
            _validate.scale(scale),
            _validate.layout(layout),
            odd,
        )

    def constants(self) -> tuple[np.ndarray, np.ndarray]:
        """The frequencies ω_i (float64) and the limbs of ω_i / 2π, ``(5, n)`` C-contiguous: read-only
        arrays, computed once per options (:func:`_constants`)."""
        return _constants(self)


_PLAIN = frozenset({int, float, str})


@functools.lru_cache(maxsize=_CACHED_OPTIONS)
def _checked(values: tuple[Any, ...], types: tuple[type, ...]) -> _Options:
    """:meth:`_Options.check` of plain values (a refusal raises and is not cached)."""
    return _Options._check(*values)


@functools.lru_cache(maxsize=_CACHED_OPTIONS)
def _constants(options: _Options) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`_Options.constants`: the ~200-bit computation (~0.3 ms at d_model 512) runs once per options.
    A bounded LRU cache keyed on every option (the whole validated tuple; lru_cache is thread-safe), of
    immutable values: the arrays are read-only."""
    count, twice_half = _validate.plan(options.d_model, options.odd)
    omegas, limbs = _highprec.frequency_constants(
        count, options.base, twice_half, options.shift, options.scale
    )
    omegas, limbs = np.ascontiguousarray(omegas), np.ascontiguousarray(limbs)
    omegas.flags.writeable = limbs.flags.writeable = False
    return omegas, limbs


def _first_rows(options: _Options, block: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact rows of positions 0 .. block - 1 (float64 sin, cos: ``(block, n)``), which every table of
    ``block``-row blocks combines with, whatever its start: cached (read-only) up to 4 MiB a pair."""
    if block * len(_constants(options)[0]) * 16 <= 4 << 20:
        return _cached_first_rows(options, block)
    return _direct_rows(np.arange(block, dtype=np.float64), _constants(options)[1])


def _anchor_rows(options: _Options, start: int, block: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact rows of positions start + a·block, a = 0 .. count - 1: part of a table's plan, cached
    (read-only) up to 4 MiB a pair, so a repeated table call computes no exact row."""
    if count * len(_constants(options)[0]) * 16 <= 4 << 20:
        return _cached_anchor_rows(options, start, block, count)
    return _direct_rows(start + block * np.arange(count, dtype=np.float64), _constants(options)[1])


@functools.lru_cache(maxsize=32)
def _cached_anchor_rows(
    options: _Options, start: int, block: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    sin, cos = _direct_rows(start + block * np.arange(count, dtype=np.float64), _constants(options)[1])
    sin.flags.writeable = cos.flags.writeable = False
    return sin, cos


@functools.lru_cache(maxsize=32)
def _cached_first_rows(options: _Options, block: int) -> tuple[np.ndarray, np.ndarray]:
    sin, cos = _direct_rows(np.arange(block, dtype=np.float64), _constants(options)[1])
    sin.flags.writeable = cos.flags.writeable = False
    return sin, cos


@functools.lru_cache(maxsize=_CACHED_OPTIONS)
def _column_plan(options: _Options, n: int) -> tuple[int, int, int, int, int, int, int]:
    """(n, d_model, sin offset, cos offset, stride, sin count, cos count) of :meth:`_Spec.column_plan`."""
    d, layout = options.d_model, options.layout
    if layout == "interleaved":  # rows[:, 0::2][:, :n] and rows[:, 1::2][:, :n]
        return n, d, 0, 1, 2, min(n, (d + 1) // 2), min(n, d // 2)
    first, second = min(n, d), max(0, min(2 * n, d) - n)  # rows[:, :n] and rows[:, n : 2n]
    if layout == "sin_cos":
        return n, d, 0, n, 1, first, second
    return n, d, n, 0, 1, second, first


class _Spec:
    """Everything one request needs: its options, the frequency constants and where columns go."""

    def __init__(self, options: _Options, dtype: np.dtype):
        self.options, self.dtype = options, dtype
        (self.omegas, self.limbs, self.n, self.round, self.format, self.absolute_error, self.float64_tiny) = (
            _spec_constants(options, dtype)
        )

    def columns(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The sine and cosine column views of a block of output rows (an extra frequency's last column,
        under odd="literal"/"drop", falls off the end: the views may hold n and n - 1 columns)."""
        n, d_model, layout = self.n, self.options.d_model, self.options.layout
        if d_model > 2 * n:
            rows[:, 2 * n :] = 0  # odd="zero": the zero column
        if layout == "interleaved":
            return rows[:, 0::2][:, :n], rows[:, 1::2][:, :n]
        if layout == "sin_cos":
            return rows[:, :n], rows[:, n : 2 * n]
        return rows[:, n : 2 * n], rows[:, :n]

    def direct_band(self, values: np.ndarray) -> np.ndarray:
        """Error bound of :func:`_direct`: < 1 ulp of float64 relative plus the turn error, with margin."""
        return np.abs(values) * 2.0**-50 + self.absolute_error

    def emit(
        self,
        rows: np.ndarray,
        p: np.ndarray,
        sin: np.ndarray,
        cos: np.ndarray,
        sin_band: np.ndarray | None,
        cos_band: np.ndarray | None,
    ) -> None:
        """Round sin/cos (float64, shape ``(len(p), n)``) into ``rows``, certifying each rounding."""
        sin_out, cos_out = self.columns(rows)
        # a result can round to ±0 only in float16 (near a zero of sin or cos) or at tiny angles
        magnitude = np.abs(p)
        zeros = self.format == "float16" or bool(
            ((magnitude > 0) & (magnitude * self.omegas.min() < 2.0**-100)).any()
        )
        for values, band, dst, which in ((sin, sin_band, sin_out, 0), (cos, cos_band, cos_out, 1)):
            values = values[:, : dst.shape[1]]
            if self.dtype == np.float64:  # within 1 ulp, except the tiny values _float64_tiny redoes
                dst[...] = values
                tiny = np.abs(values) < self.float64_tiny
                if tiny.any():
                    r, i = np.nonzero(tiny)
                    dst[r, i] = self._float64_tiny(p[r], i, which)
                continue
            if band is None:
                dst[...] = values
                continue
            band = band[..., : dst.shape[1]]
            rounded, unsure = _round_certified(values, band, self.round, signed_zeros=zeros)
            dst[...] = rounded
            if unsure.any():
                r, i = np.nonzero(unsure)
                dst[r, i] = self._certain(p[r], i, which)
        negative_zero = (p == 0) & np.signbit(p)
        if negative_zero.any():  # sin(-0.0) = -0.0 (IEEE), whatever path computed the row
            sin_out[negative_zero] = -0.0

    def _certain(self, p: np.ndarray, i: np.ndarray, which: int) -> np.ndarray:
        """Correctly rounded sin (which=0) or cos (which=1) of p * ω_i, for a few (p, i) pairs."""
        values = _direct(p, self.limbs[:, i])[which]
        rounded, unsure = _round_certified(values, self.direct_band(values), self.round)
        origin = p == 0  # position 0 is exact: sin 0 = 0, cos 0 = 1
        rounded[origin] = which
        unsure &= ~origin
        for k in np.flatnonzero(unsure):
            rounded[k] = self.exact(float(p[k]), int(i[k]))[which]
        return rounded

    def _float64_tiny(self, p: np.ndarray, i: np.ndarray, which: int) -> np.ndarray:
        """float64 sin (which=0) or cos (which=1) of p ω_i for values below ``float64_tiny``, where the
        fast path's absolute error could exceed 1 ulp: small angles (also subnormal results) by
        sin x = x - x³/6 with x = p ω_i in double-double from the scaled position, within 1 ulp (correctly
        rounded unless the result is subnormal); values near a zero of sin or cos in arbitrary precision."""
        result = np.empty(len(p))
        small = np.abs(p * self.omegas[i]) < 2.0**-20  # then x³/6 < 2**-40 x and x**5/120 is negligible
        if small.any():
            mantissa, exponent = np.frexp(p[small])  # p = mantissa · 2**exponent: no underflow below
            omega_hi, omega_lo = self.omega_double_double()
            x, x_lo = _two_prod(mantissa, omega_hi[i[small]])
            x_lo += mantissa * omega_lo[i[small]]
            angle = np.ldexp(x, exponent)
            sine = x + (x_lo - x * (angle * angle / 6.0))
            result[small] = np.copysign(np.ldexp(sine, exponent), p[small])  # sin(±0) = ±0
        for k in np.flatnonzero(~small):
            result[k] = self.exact(float(p[k]), int(i[k]))[which]
        return result

    def omega_double_double(self) -> tuple[np.ndarray, np.ndarray]:
        """ω_i = 2π c_i as double-doubles (hi, lo), relative error < 2**-100, from the limbs of c_i."""
        l0, l1, l2, l3, l4 = self.limbs
        c_hi, c_lo = _two_sum(l0 + l1, (l2 + l3) + l4)  # l0 + l1: 52 bits, exact
        hi, lo = _two_prod(c_hi, _TWO_PI_HI)
        lo += c_hi * _TWO_PI_LO + c_lo * _TWO_PI_HI
        return _two_sum(hi, lo)

    def exact(self, p: float, i: int) -> tuple[float, float]:
        """sin and cos of p ω_i correctly rounded to the output dtype, in arbitrary precision (slow)."""
        o = self.options
        twice_half = _validate.plan(o.d_model, o.odd)[1]
        return _highprec.sincos_exact(p, i, o.base, twice_half, o.shift, o.scale, self.format)

    def column_plan(self) -> tuple[int, int, int, int, int]:
        """(sin offset, cos offset, stride, sin count, cos count): the sine of frequency i lies in column
        ``sin offset + stride · i`` when i < sin count, likewise the cosine (see :meth:`columns`)."""
        return _column_plan(self.options, self.n)[2:]

    def kernel_plan(self) -> tuple[int, int, int, int, int, int, int]:
        """(n, d_model, *:meth:`column_plan`): the columns as the compiled kernels take them (columns from
        2n on are zero)."""
        return _column_plan(self.options, self.n)

    def settle_direct(self, rows: np.ndarray, p: np.ndarray, flagged: np.ndarray) -> None:
        """Recompute the ``flagged`` rows of an exact-path output on the NumPy path (the compiled kernel
        found a value there whose band straddles a rounding midpoint)."""
        if len(flagged):
            sin, cos = _direct(p[flagged, None], self.limbs)
            block = rows[flagged]
            self.emit(block, p[flagged], sin, cos, self.direct_band(sin), self.direct_band(cos))
            rows[flagged] = block


@functools.lru_cache(maxsize=_CACHED_OPTIONS)
def _spec_constants(options: _Options, dtype: np.dtype) -> tuple[Any, ...]:
    """What :class:`_Spec` derives from its options and dtype, once per (options, dtype)."""
    omegas, limbs = options.constants()
    # _turns is accurate to 2**-98 for turn rates below 1/2π, and proportionally less above.
    absolute_error = 2.0**-92 * max(1.0, options.scale)
    # float64 values at least this large are within 1 ulp: the absolute error is < 2**-56 of them
    float64_tiny = 2.0**56 * absolute_error
    name = np.dtype(dtype).name
    return omegas, limbs, len(omegas), _rounder(np.dtype(dtype)), name, absolute_error, float64_tiny


def _output_dtype(dtype: Any, out: np.ndarray | None) -> np.dtype:
    if dtype is None and isinstance(out, np.ndarray):
        if out.dtype.name not in _validate.DTYPES:
            raise TypeError(
                f"out must be a float64, float32, float16 or bfloat16 array; got dtype {out.dtype.name}; "
                "allocate it with np.empty(shape, 'float32')"
            )
        return out.dtype
    return np.dtype(np.float32) if dtype is None else _validate.dtype(dtype)


def _output(shape: tuple[int, ...], dtype: np.dtype, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        _validate.fits_in_memory(shape, dtype)
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array; got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(
            f"out must have shape {shape} and dtype {dtype.name}; got shape {out.shape} and dtype "
            f"{out.dtype.name}; allocate it with np.empty({shape}, {dtype.name!r})"
        )
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous array; pass np.ascontiguousarray(out)")
    return out


def _run_blocks(work: Callable[[int, int], None], total: int, step: int, *, elements: int) -> None:
    """Call ``work(lo, hi)`` over ``range(0, total, step)``, on all cores when the work (``elements``, in
    angle-addition elements) is large enough to pay for a thread pool."""
    bounds = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    threads = min(len(bounds), _threads()) if elements >= _PARALLEL_ELEMENTS else 1
    if threads <= 1:
        for lo, hi in bounds:
            work(lo, hi)
        return
    if getattr(_IN_POOL, "worker", False):  # called from one of the pool's own threads: no nested waits
        for lo, hi in bounds:
            work(lo, hi)
        return
    pool = _pool(threads)
    for future in [pool.submit(work, lo, hi) for lo, hi in bounds]:
        future.result()


def _pool(threads: int) -> Any:
    """The process's thread pool of ``threads`` workers, started on first use and kept: starting threads
    costs ~1 ms each per call here. A forked child (whose copy of the pool has no threads) starts its own."""
    key = (os.getpid(), threads)
    pool = _POOLS.get(key)
    if pool is None:
        with _POOL_LOCK:
            pool = _POOLS.get(key)
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor  # on first use: ~15 ms of import time

                def mark_worker() -> None:
                    _IN_POOL.worker = True

                pool = ThreadPoolExecutor(threads, thread_name_prefix="posenc", initializer=mark_worker)
                _POOLS.clear()  # a pool of another size or of the parent process: the old one is dropped
                _POOLS[key] = pool
    return pool


_POOLS: dict[tuple[int, int], Any] = {}
_POOL_LOCK = threading.Lock()
_IN_POOL = threading.local()


def _threads() -> int:
    """The threads a large call runs on: ``POSENC_NUM_THREADS`` when set, else the cores this process may
    run on."""
    setting = os.environ.get("POSENC_NUM_THREADS", "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise ValueError(
                f"POSENC_NUM_THREADS must be a whole number >= 1; got {setting!r}; unset it to use every core"
            )
        return int(setting)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.lru_cache(maxsize=8)
def _rounder(dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """Round float64 values to ``dtype``, to nearest with ties to even, in one step (no double rounding)."""
    if dtype.name in ("float64", "float32", "float16"):
        # NumPy converts float64 to float32 and float16 directly from the float64 bits.
        return lambda values: values.astype(dtype)
    precision, emin = _highprec.FORMATS["bfloat16"]

    def to_bfloat16(values: np.ndarray) -> np.ndarray:
        exponent = np.maximum(np.frexp(values)[1], emin + 1) - precision
        return np.ldexp(np.rint(np.ldexp(values, -exponent)), exponent).astype(dtype)

    return to_bfloat16


def _round_certified(
    values: np.ndarray,
    band: np.ndarray,
    round_: Callable[[np.ndarray], np.ndarray],
    *,
    signed_zeros: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Round ``values``; flag those whose interval ``values ± band`` holds a rounding midpoint. A value that
    rounds to zero keeps its sign (IEEE: a negative value gives -0.0); ``signed_zeros=False`` skips that
    pass where no value can round to zero."""
    high = round_(values + band)
    low = round_(values - band)
    if not signed_zeros:
        return high, high != low
    bits = high.view(np.uint16 if high.itemsize == 2 else np.uint32 if high.itemsize == 4 else np.uint64)
    zero = (bits << np.uint8(1)) == 0  # ±0 (on the bits: faster than comparing bfloat16 values)
    if zero.any():  # rare: give those the sign of their value
        high[zero] = np.copysign(0.0, values[zero])
    return high, high != low


def _direct(p: np.ndarray, limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of p ω (float64, < 1 ulp) for p broadcast against each limb row ``limbs[k]``."""
    hi, lo = _turns(p, limbs)
    return _sincos_turns(hi, lo)


def _turns(p: np.ndarray, limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """frac(p c) as a double-double (hi, lo), |hi| <= 1/2, error < 2**-98, for |p| < 2**31.

    c = l0 + l1 + l2 + l3 + l4 (26-bit limbs, c < 2**-2) and p = ph + pl (26-bit halves, |pl| <= 2**5), so
    every product below is exact; only the three that can exceed 1/2 need their integer part removed.
    """
    l0, l1, l2, l3, l4 = limbs
    scaled = p * _SPLITTER
    ph = scaled - (scaled - p)
    pl = p - ph
    a = ph * l0
    a -= np.rint(a)
    b = ph * l1
    b -= np.rint(b)
    c = pl * l0
    c -= np.rint(c)
    s, e1 = _two_sum(a, b)
    s -= np.rint(s)
    s, e2 = _two_sum(s, c)
    s -= np.rint(s)
    u, e3 = _two_sum(ph * l2, pl * l1)  # each < 2**-23
    rest = (ph * l3 + pl * l2) + (ph * l4 + pl * l3) + pl * l4 + (e1 + e2 + e3)  # each < 2**-48
    hi, e4 = _two_sum(s, u)
    whole = np.rint(hi)
    hi -= whole
    return _two_sum(hi, e4 + rest)


def _sincos_turns(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of 2π (hi + lo), |hi| <= 1/2, accurate to < 1 ulp of float64."""
    quarter = np.rint(4.0 * hi)
    r, rl = _two_sum(hi - 0.25 * quarter, lo)  # the subtraction is exact (Sterbenz)
    x, xl = _two_prod(r, _TWO_PI_HI)
    xl += r * _TWO_PI_LO + rl * _TWO_PI_HI
    x, xl = _two_sum(x, xl)
    sin, cos = _kernel(x, xl)
    q = np.mod(quarter, 4.0)  # 0, 1, 2, 3: the angle is q π/2 + x
    odd = (q == 1.0) | (q == 3.0)
    s = np.where(odd, cos, sin)
    c = np.where(odd, sin, cos)
    np.negative(s, out=s, where=q >= 2.0)
    np.negative(c, out=c, where=(q == 1.0) | (q == 2.0))
    return s, c


def _kernel(x: np.ndarray, xl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of x + xl for |x| <= π/4 (+ tiny), |xl| <= ulp(x): Taylor polynomials, < 1 ulp."""
    z = x * x
    ps = _horner(z, _SIN)
    sin = x + (xl * (1.0 - 0.5 * z) + x * ps)
    zh, zl = _two_prod(x, x)
    half = 0.5 * zh
    w = 1.0 - half
    pc = zh * _horner(zh, _COS[1:], first=_COS[0]) * zh
    cos = w + ((((1.0 - w) - half) - 0.5 * zl) + (pc - x * xl))
    return sin, cos


def _horner(z: np.ndarray, coefficients: list[float], first: float | None = None) -> np.ndarray:
    """With first=None: z (a1 + z (a2 + ...)); else first + z (a1 + z (a2 + ...))."""
    acc = np.full_like(z, coefficients[-1])
    for a in reversed(coefficients[:-1]):
        acc *= z
        acc += a
    if first is None:
        return acc * z
    acc *= z
    acc += first
    return acc


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a: np.ndarray, b: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e = a b exactly, p = fl(a b) (Dekker, no FMA needed)."""
    p = a * b
    ta = a * _SPLITTER
    ah = ta - (ta - a)
    al = a - ah
    tb = b * _SPLITTER
    bh = tb - (tb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _pre_touch(result: np.ndarray, fresh: bool) -> None:
    """Fault a fresh output's pages in one sequential pass, so that the writers that follow fault none:
    page faults taken by several threads at once cost more than this pass and vary from run to run (the
    compiled kernel writing into a fresh (8192, 4096) table took 19 to 207 ms; after this pass, 30 to 38).
    One byte per 4 KiB page is enough to fault it in (the kernel zeroes it): cheaper than a full fill."""
    if fresh and result.size:
        flat = result.reshape(-1).view(np.uint8)
        flat[::4096] = 0
        flat[-1] = 0  # the last page, when the array does not start on a page boundary


class _AdditionPlan(NamedTuple):
    """The exact rows and error bands that angle addition builds a table from (:func:`_addition_plan`)."""

    block: int
    sin_a: np.ndarray  # (count, n): rows start + a·block
    cos_a: np.ndarray
    sin_b: np.ndarray  # (block, n): rows 0 .. block - 1
    cos_b: np.ndarray
    sin_band: np.ndarray  # (n,): error bound of each combined sine column
    cos_band: np.ndarray


def _addition_plan(start: int, length: int, spec: _Spec) -> _AdditionPlan:
    """Exact rows for z(start + aB + b) = z(start + aB) z(b), B = isqrt(length), and the per-column bands.

    With s, c the exact-path rows (< 1 ulp each), S = sA cB + cA sB has error < 2**-50.4 (|sA cB| + |cA sB|)
    and |cA sB| <= min(1, (B-1) ω); likewise for C. The band per column bounds that, with margin. A value
    whose interval ± band holds a rounding midpoint must be settled by :meth:`_Spec._certain`.
    """
    omegas = spec.omegas
    block = max(1, math.isqrt(length))
    count = -(-length // block)
    sin_b, cos_b = _first_rows(spec.options, block)
    sin_a, cos_a = _anchor_rows(spec.options, start, block, count)
    small = 2.0 * np.minimum(1.0, (block - 1) * omegas)
    largest = max(abs(start), abs(start + length - 1))
    sin_band = 2.0**-48 * (np.minimum(1.0, largest * omegas) + small) + 4 * spec.absolute_error
    cos_band = 2.0**-48 * (1.0 + small) + 4 * spec.absolute_error
    return _AdditionPlan(block, sin_a, cos_a, sin_b, cos_b, sin_band, cos_band)


def _angle_addition(result: np.ndarray, start: int, length: int, spec: _Spec, fresh: bool) -> None:
    """Fill a low-precision table from :func:`_addition_plan`, certified per element."""
    n = spec.n
    block, sin_a, cos_a, sin_b, cos_b, sin_band, cos_band = _addition_plan(start, length, spec)
    count = len(sin_a)
    kernel = _compiled_kernel() if spec.dtype == np.float32 else None
    if kernel is not None:
        _angle_addition_compiled(
            kernel, result, start, (sin_a, cos_a, sin_b, cos_b), sin_band, cos_band, spec
        )
        return
    _pre_touch(result, fresh)
    step = max(1, _BLOCK // n)  # rows per tile
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

    _run_blocks(work, len(tiles), max(1, len(tiles) // (8 * _threads())), elements=length * n)


def _exact_cost(elements: int) -> int:
    """The cost of ``elements`` exact-path elements in angle-addition elements (for the thread pool)."""
    return elements * (_COMPILED_EXACT_COST if _compiled_module() is not None else _EXACT_COST)


def compiled_path() -> str:
    """Which path computes posenc's results here: ``"C"`` (the ``posenc._kernels`` extension, built at
    install; the default) or ``"NumPy"`` (no C compiler was found at install). Both give the same bits.

    >>> compiled_path() in ("C", "NumPy")
    True
    """
    return "NumPy" if _compiled_module() is None else "C"


def _compiled_kernel(name: str = "combine_float32") -> Callable[..., Any] | None:
    """A kernel of :mod:`posenc._kernels` (``combine_float32``, ``encode_float32`` or ``direct``), or None
    where the extension was not built. The kernels release the GIL and work on a row range, so several
    threads (the pool of :func:`_run_blocks`, or the caller's) run them at once."""
    module = _compiled_module()
    return None if module is None else getattr(module, name)


def _compiled_module() -> Any:
    """:mod:`posenc._kernels`, or None where it was not built: imported once (a failed import is not
    retried, and threads that arrive together wait for the one import)."""
    if not _COMPILED:
        with _IMPORT_LOCK:
            if not _COMPILED:
                try:
                    from . import _kernels
                except ImportError:
                    _kernels = None
                _COMPILED.append(_kernels)
    return _COMPILED[0]


_COMPILED: list[Any] = []
_IMPORT_LOCK = threading.Lock()


def _angle_addition_compiled(
    kernel: Callable[..., Any],
    result: np.ndarray,
    start: int,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    sin_band: np.ndarray,
    cos_band: np.ndarray,
    spec: _Spec,
) -> None:
    """:func:`_angle_addition` in one compiled pass over row ranges on the thread pool. The kernel lists the
    values it is unsure of (their interval ± band holds a rounding midpoint: a few in a million, and the
    zero sines of position 0), and just those are settled by :meth:`_Spec._certain` (the exact path, and
    the rare rest in arbitrary precision); a row range with more than its room for the list has its flagged
    rows recomputed on the NumPy path instead. A fresh output is not pre-touched (:func:`_pre_touch`): each
    thread faults in the pages of its own rows, and measured side by side the extra pass did not pay."""
    sin_a, cos_a, sin_b, cos_b = rows
    block, length, n = len(sin_b), len(result), spec.n
    plan = spec.kernel_plan()
    unsure = np.empty(length, dtype=np.int64)
    listed: list[np.ndarray] = []
    flagged: list[np.ndarray] = []
    room = n + _UNSURE_ROOM  # position 0's zero sines, and more than the usual few

    def work(lo: int, hi: int) -> None:
        where = np.empty(room, dtype=np.int64)
        found = kernel(
            sin_a, cos_a, sin_b, cos_b, sin_band, cos_band, block, result, unsure, where, plan, lo, hi
        )
        if found <= room:
            listed.append(where[:found])
        else:
            flagged.append(lo + np.flatnonzero(unsure[lo:hi]))

    threads = _threads() if length * n >= _PARALLEL_ELEMENTS else 1
    step = max(-(-length // (4 * threads)), _BLOCK // max(1, n)) if threads > 1 else length
    _run_blocks(work, length, step, elements=length * n)
    if listed:
        r, rest = np.divmod(np.concatenate(listed), 2 * n)
        frequency, which = np.divmod(rest, 2)
        sin_offset, cos_offset, stride = spec.column_plan()[:3]
        for w, offset in ((0, sin_offset), (1, cos_offset)):
            pick = which == w
            if pick.any():
                p = (start + r[pick]).astype(np.float64)
                result[r[pick], offset + stride * frequency[pick]] = spec._certain(p, frequency[pick], w)
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


def _direct_rows(p: np.ndarray, limbs: np.ndarray, *, threads: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_direct` for a 1-D array of positions against all frequencies: ``(len(p), n)`` each.

    With the compiled kernels, C that performs the very same operations (bit-identical results, checked by
    the tests); otherwise NumPy, tile by tile. On all cores when large, unless ``threads`` is False (for
    callers that already run in a thread pool).
    """
    n = limbs.shape[1]
    sin = np.empty((len(p), n))
    cos = np.empty_like(sin)
    kernel = _compiled_kernel("direct")
    if kernel is not None:
        positions = np.ascontiguousarray(p, dtype=np.float64)
        limbs = np.ascontiguousarray(limbs)

        def compiled(lo: int, hi: int) -> None:
            kernel(positions, limbs, sin, cos, n, lo, hi)

        step = max(1, _BLOCK // max(1, n))
        _run_blocks(compiled, len(p), step, elements=_exact_cost(sin.size) if threads else 0)
        return sin, cos

    def work(lo: int, hi: int) -> None:
        sin[lo:hi], cos[lo:hi] = _direct(p[lo:hi, None], limbs)

    step = max(1, _BLOCK // max(1, n))
    _run_blocks(work, len(p), step, elements=_exact_cost(sin.size) if threads else 0)
    return sin, cos
