"""What one request needs: :class:`Spec` (options and output dtype), and the checks of the output array.

A :class:`Spec` knows the frequency constants, where the columns go, how to round to its dtype and how
certain each rounding is: :meth:`Spec.emit` rounds a block of float64 sines and cosines into output rows,
certifying every value against its error band, and settles the uncertain ones (:meth:`Spec.certain`) on
the exact path and, rarely, in arbitrary precision (:meth:`Spec.exact`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import validation
from . import arithmetic, compiled, highprec, rounding
from .options import CACHED_OPTIONS, Options
from .options import column_plan as _column_plan


class Spec:
    """Everything one request needs: its options, the frequency constants and where columns go."""

    #: Every value is A · sin or A · cos; A other than 1 comes with explicit frequencies
    #: (:class:`posenc.core.explicit.ExplicitSpec`): ``amplitude`` is A's float64, ``amplitude_error`` a bound
    #: of its error, and ``amplitude_lo`` the float64 nearest A - amplitude (A as a double-double).
    amplitude = 1.0
    amplitude_error = 0.0
    amplitude_lo = 0.0

    def __init__(self, options: Options, dtype: np.dtype):
        self.options, self.dtype = options, dtype
        (self.omegas, self.limbs, self.n, self.round, self.format, self.absolute_error, self.float64_tiny) = (
            _spec_constants(options, dtype)
        )

    def columns(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The sine and cosine column views of a block of output rows (an extra frequency's last column,
        under odd="literal"/"drop", falls off the end: the views may hold n and n - 1 columns)."""
        n, d_model = self.n, self.options.d_model
        if d_model > 2 * n:
            rows[:, 2 * n :] = 0  # odd="zero": the zero column
        sin_offset, cos_offset, stride = self.column_plan()[:3]
        return rows[:, sin_offset::stride][:, :n], rows[:, cos_offset::stride][:, :n]

    def direct_band(self, values: np.ndarray) -> np.ndarray:
        """Error bound of :func:`~posenc.core.arithmetic.direct`: < 1 ulp of float64 relative plus the turn
        error, with margin."""
        return np.abs(values) * 2.0**-50 + self.absolute_error

    def emit(
        self,
        rows: np.ndarray,
        p: np.ndarray,
        sin: np.ndarray,
        cos: np.ndarray,
        sin_band: np.ndarray | None,
        cos_band: np.ndarray | None,
        *,
        scaled: bool = False,
    ) -> None:
        """Round sin/cos (float64, shape ``(len(p), n)``) into ``rows``, certifying each rounding.

        ``scaled``: the values are A · sin and A · cos already (float64 output: :meth:`emit_scaled`, the
        only way to A · sin within 1 ulp; multiplying a float64 sin by A here would round twice)."""
        sin_out, cos_out = self.columns(rows)
        # a result can round to ±0 only in float16 (near a zero of sin or cos) or at tiny angles
        magnitude = np.abs(p)
        zeros = self.format == "float16" or bool(
            ((magnitude > 0) & (magnitude * self.omegas.min() < 2.0**-100)).any()
        )
        tiny_below = self.float64_tiny * (self.amplitude if scaled else 1.0)  # of the unscaled |sin|, |cos|
        for values, band, dst, which in ((sin, sin_band, sin_out, 0), (cos, cos_band, cos_out, 1)):
            values = values[:, : dst.shape[1]]
            if self.amplitude != 1.0 and not scaled:
                values, band = self.amplify(values, None if band is None else band[..., : dst.shape[1]])
            if self.dtype == np.float64:  # within 1 ulp, except the tiny values settle_tiny redoes
                dst[...] = values
                tiny = np.abs(values) < tiny_below
                if tiny.any():
                    r, i = np.nonzero(tiny)
                    dst[r, i] = self.settle_tiny(p[r], i, which)
                continue
            if band is None:
                dst[...] = values
                continue
            band = band[..., : dst.shape[1]]
            rounded, unsure = rounding.round_certified(values, band, self.round, signed_zeros=zeros)
            dst[...] = rounded
            if unsure.any():
                r, i = np.nonzero(unsure)
                dst[r, i] = self.certain(p[r], i, which)
        negative_zero = (p == 0) & np.signbit(p)
        if negative_zero.any():  # sin(-0.0) = -0.0 (IEEE), whatever path computed the row
            sin_out[negative_zero] = -0.0

    def certain(self, p: np.ndarray, i: np.ndarray, which: int) -> np.ndarray:
        """Settle uncertain values: the correctly rounded sin (which=0) or cos (which=1) of p * ω_i, for a
        few (p, i) pairs."""
        values = compiled.direct_pairs(p, self.limbs[:, i])[which]
        band = self.direct_band(values)
        if which == 0:  # small angles: sin x within 1 ulp (the absolute band would cover tiny sines whole)
            small = self._small_angles(p, i)
            if small.any():
                values[small] = self._small_sines(p[small], i[small], 1.0, 0.0)
                band[small] = np.abs(values[small]) * 2.0**-50
        if self.amplitude != 1.0:
            values, band = self.amplify(values, band)
        rounded, unsure = rounding.round_certified(values, band, self.round)
        if self.amplitude == 1.0:
            origin = (p == 0) | (self.omegas[i] == 0)  # a zero angle is exact: sin 0 = 0, cos 0 = 1
            rounded[origin] = which
            unsure &= ~origin
        for k in np.flatnonzero(unsure):
            rounded[k] = self.exact(float(p[k]), int(i[k]))[which]
        return rounded

    def emit_scaled(self, rows: np.ndarray, p: np.ndarray) -> None:
        """float64 ``rows`` of the 1-D positions ``p`` with an amplitude A != 1, each value within 1 ulp of
        the exact A · sin (A · cos): sin and cos as double-doubles within 0.3 · 2**-53 relative
        (:func:`~posenc.core.arithmetic.direct_double_double`), times A as a double-double, rounded once
        (:func:`~posenc.core.arithmetic.scaled`): < 0.5 ulp + 0.3 ulp. A float64 sin (< 1 ulp) times A's
        float64 would round twice and reach 1.6 ulp. Values near a zero of sin or cos go to
        :meth:`settle_tiny`, as in :meth:`emit`."""
        sin_hi, sin_lo, cos_hi, cos_lo = arithmetic.direct_double_double(p[:, None], self.limbs)
        sin = arithmetic.scaled(sin_hi, sin_lo, self.amplitude, self.amplitude_lo)
        cos = arithmetic.scaled(cos_hi, cos_lo, self.amplitude, self.amplitude_lo)
        self.emit(rows, p, sin, cos, None, None, scaled=True)

    def amplify(self, values: np.ndarray, band: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """A · values and its error band: A's float64 times the band, plus A's own error and the product's
        rounding (< 2**-52 relative)."""
        scaled = values * self.amplitude
        if band is None:
            return scaled, None
        error = np.abs(values) * self.amplitude_error + np.abs(scaled) * 2.0**-52
        return scaled, band * self.amplitude + error

    def settle_tiny(self, p: np.ndarray, i: np.ndarray, which: int) -> np.ndarray:
        """float64 sin (which=0) or cos (which=1) of p ω_i for values below ``float64_tiny``, where the
        fast path's absolute error could exceed 1 ulp: small angles (also subnormal results) by
        sin x = x - x³/6 with x = p ω_i in double-double from the scaled position, within 1 ulp (correctly
        rounded unless the result is subnormal); values near a zero of sin or cos in arbitrary precision."""
        result = np.empty(len(p))
        small = np.abs(p * self.omegas[i]) < 2.0**-20  # then x³/6 < 2**-40 x and x**5/120 is negligible
        if small.any():
            result[small] = self._small_sines(p[small], i[small], self.amplitude, self.amplitude_lo)
        for k in np.flatnonzero(~small):
            result[k] = self.exact(float(p[k]), int(i[k]))[which]
        return result

    def _small_angles(self, p: np.ndarray, i: np.ndarray) -> np.ndarray:
        """Where p ω_i is small enough for :meth:`_small_sines` (|x| < 2**-20) and large enough that its
        double-double holds 100 bits (|x| > 2**-900: its low part is a normal float64)."""
        x = np.abs(p * self.omegas[i])
        return (x < 2.0**-20) & (x > 2.0**-900)

    def _small_sines(self, p: np.ndarray, i: np.ndarray, amplitude: float, amplitude_lo: float) -> np.ndarray:
        """A · sin(p ω_i) for |p ω_i| < 2**-20 as sin x = x - x³/6 (x**5/120 < 2**-100 x: negligible), with
        x = p ω_i a double-double from the scaled position, rounded once: within 1 ulp, correctly rounded
        unless the result is subnormal; sin(±0) = ±0."""
        mantissa, exponent = np.frexp(p)  # p = mantissa · 2**exponent: no underflow below
        omega_hi, omega_lo = self.omega_double_double()
        x, x_lo = arithmetic.two_prod(mantissa, omega_hi[i])
        x_lo += mantissa * omega_lo[i]
        angle = np.ldexp(x, exponent)
        # A · sine rounded once (A = 1: x + (x_lo - x³/6)), then scaled by 2**exponent
        sine = arithmetic.scaled(x, x_lo - x * (angle * angle / 6.0), amplitude, amplitude_lo)
        return np.copysign(np.ldexp(sine, exponent), p)

    def omega_double_double(self) -> tuple[np.ndarray, np.ndarray]:
        """ω_i = 2π c_i as double-doubles (hi, lo), relative error < 2**-100, from the limbs of c_i."""
        l0, l1, l2, l3, l4 = self.limbs
        c_hi, c_lo = arithmetic.two_sum(l0 + l1, (l2 + l3) + l4)  # l0 + l1: 52 bits, exact
        hi, lo = arithmetic.two_prod(c_hi, arithmetic.TWO_PI_HI)
        lo += c_hi * arithmetic.TWO_PI_LO + c_lo * arithmetic.TWO_PI_HI
        return arithmetic.two_sum(hi, lo)

    def exact(self, p: float, i: int) -> tuple[float, float]:
        """sin and cos of p ω_i correctly rounded to the output dtype, in arbitrary precision (slow)."""
        o = self.options
        twice_half = validation.plan(o.d_model, o.odd)[1]
        return highprec.sincos_exact(p, i, o.base, twice_half, o.shift, o.scale, self.format)

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
            sin, cos = arithmetic.direct(p[flagged, None], self.limbs)
            block = rows[flagged]
            self.emit(block, p[flagged], sin, cos, self.direct_band(sin), self.direct_band(cos))
            rows[flagged] = block


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def _spec_constants(options: Options, dtype: np.dtype) -> tuple[Any, ...]:
    """What :class:`Spec` derives from its options and dtype, once per (options, dtype)."""
    omegas, limbs = options.constants()
    # turns() is accurate to 2**-98 for turn rates below 1/2π, and proportionally less above.
    absolute_error = 2.0**-92 * max(1.0, options.scale)
    # float64 values at least this large are within 1 ulp: the absolute error is < 2**-56 of them
    float64_tiny = 2.0**56 * absolute_error
    name = np.dtype(dtype).name
    return omegas, limbs, len(omegas), rounding.rounder(np.dtype(dtype)), name, absolute_error, float64_tiny


def output_dtype(dtype: Any, out: np.ndarray | None) -> np.dtype:
    """The output dtype of a request: ``dtype``, else ``out``'s, else float32."""
    if dtype is None and isinstance(out, np.ndarray):
        if out.dtype.name not in validation.DTYPES:
            raise TypeError(
                f"out must be a float64, float32, float16 or bfloat16 array; got dtype {out.dtype.name}; "
                "allocate it with np.empty(shape, 'float32')"
            )
        return out.dtype
    return np.dtype(np.float32) if dtype is None else validation.dtype(dtype)


def output(shape: tuple[int, ...], dtype: np.dtype, out: np.ndarray | None) -> np.ndarray:
    """A fresh output array, or ``out`` once checked (shape, dtype, C-contiguous and writeable)."""
    if out is None:
        validation.fits_in_memory(shape, dtype)
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array; got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(
            f"out must have shape {shape} and dtype {dtype.name}; got shape {out.shape} and dtype "
            f"{out.dtype.name}; allocate it with np.empty({shape}, {dtype.name!r})"
        )
    if not out.flags.writeable:
        raise ValueError(
            f"out must be a writeable array; got a read-only one; allocate it with np.empty({shape}, "
            f"{dtype.name!r}) (a copy, out.copy(), is writeable)"
        )
    if not out.flags.c_contiguous:
        raise ValueError(
            "out must be a C-contiguous array (the rows are written in place); got a strided one; allocate "
            f"it with np.empty({shape}, {dtype.name!r}) and copy it where you need it"
        )
    return out
