"""Sines and cosines at frequencies given as exact reals, times an exact amplitude: the rotary family's
scaled frequencies (linear, NTK, YaRN, LongRoPE, Llama 3) and attention scaling.

The geometric frequencies of :func:`posenc.encode` are one formula; rotary embeddings scale them per
dimension (Peng et al. 2023, YaRN; Ding et al. 2024, LongRoPE; Meta's Llama 3.1) and multiply every value by
an attention factor A. An :class:`ExactFrequencies` names such a law by a hashable key and computes its
ω_i (and A) in :mod:`decimal` to any precision asked; from there the core's machinery is the same: turn
rates to ~200 bits in float64 limbs, exact evaluation, one rounding of A · sin(p ω_i) and A · cos(p ω_i),
certified, the rare uncertain value settled in arbitrary precision.

>>> import decimal
>>> halves = ExactFrequencies(("halves", 2), lambda digits: (decimal.Decimal(1), decimal.Decimal("0.5")))
>>> sin, cos = sin_cos([0, 1], halves)
>>> sin
array([[0.        , 0.        ],
       [0.84147096, 0.47942555]], dtype=float32)
"""

from __future__ import annotations

import decimal
import functools
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

from .. import defaults, validation
from . import highprec
from .api import encode_rows
from .isolated import isolated
from .options import CACHED_OPTIONS, Options
from .spec import Spec


class ExactFrequencies:
    """Frequencies ω_i >= 0 and an amplitude A > 0 given as exact reals.

    ``exact(digits)`` returns every ω_i to ``digits`` significant decimal digits; ``amplitude(digits)`` A
    likewise (None: A = 1). ``key`` identifies the law: two objects with equal keys must give equal values
    (it keys the caches of the constants).
    """

    __slots__ = ("amplitude", "exact", "key")

    def __init__(
        self,
        key: Hashable,
        exact: Callable[[int], Sequence[decimal.Decimal]],
        amplitude: Callable[[int], decimal.Decimal] | None = None,
    ):
        self.key, self.exact, self.amplitude = key, exact, amplitude

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactFrequencies) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def constants(self) -> tuple[np.ndarray, np.ndarray]:
        """The frequencies (float64, nearest) and the limbs of ω_i / 2π, as :meth:`Options.constants`."""
        return _constants(self)

    def turn_rates(self) -> tuple[int, list[int]]:
        """``(bits, turns)``: c_i = ω_i / 2π as integers ``turns[i] ≈ c_i · 2**bits`` (for the device)."""
        bits, _, turns = _fixed(self)
        return bits, turns


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def _fixed(law: ExactFrequencies) -> tuple[int, list[int], list[int]]:
    return highprec.fixed_frequencies_of(law.exact)


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def _constants(law: ExactFrequencies) -> tuple[np.ndarray, np.ndarray]:
    omegas, limbs = highprec.constants_of(*_fixed(law))
    omegas, limbs = np.ascontiguousarray(omegas), np.ascontiguousarray(limbs)
    omegas.flags.writeable = limbs.flags.writeable = False
    return omegas, limbs


class ExplicitSpec(Spec):
    """A :class:`Spec` whose frequencies and amplitude come from an :class:`ExactFrequencies`; its columns
    are [sin ω_0 .. sin ω_{n-1} | cos ω_0 .. cos ω_{n-1}]."""

    def __init__(self, law: ExactFrequencies, dtype: np.dtype):
        omegas, limbs = law.constants()
        n = len(omegas)
        # The column plan and the rounding of 2n columns [sin | cos]. Base, shift and scale are the defaults
        # only as placeholders: the law's frequencies replace the geometric ones below. The layout is
        # "sin_cos", not the default, because a law's columns are [sin ω_0 .. | cos ω_0 ..] by definition.
        options = Options(2 * n, defaults.BASE, defaults.SHIFT, defaults.SCALE, "sin_cos", defaults.ODD)
        super().__init__(options, dtype)
        self.law = law
        self.omegas, self.limbs, self.n = omegas, limbs, n
        # turns() is accurate to 2**-98 for turn rates below 1/2π, and proportionally less above
        self.absolute_error = 2.0**-92 * max(1.0, float(omegas.max()) if n else 1.0)
        self.float64_tiny = 2.0**56 * self.absolute_error
        if law.amplitude is not None:
            self.amplitude, self.amplitude_error, self.amplitude_lo = _amplitude(law)

    def exact(self, p: float, i: int) -> tuple[float, float]:
        """A · sin and A · cos of p ω_i correctly rounded to the output dtype, in arbitrary precision."""
        law = self.law

        def omega() -> decimal.Decimal:
            return law.exact(decimal.getcontext().prec)[i]

        def amplitude() -> decimal.Decimal:
            return law.amplitude(decimal.getcontext().prec)

        return highprec.sincos_exact_of(p, omega, self.format, None if law.amplitude is None else amplitude)


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def _amplitude(law: ExactFrequencies) -> tuple[float, float, float]:
    """A's float64 (nearest), a bound of its error, and the float64 nearest A - nearest (so that A is the
    double-double nearest + low to ~2**-106 relative)."""
    value = law.amplitude(40)
    nearest = float(value)
    low = float(highprec.context(80).subtract(value, decimal.Decimal(nearest)))  # exact: no global context
    return nearest, abs(low) + 2.0**-60 * abs(nearest), low


@isolated
def sin_cos(
    positions: npt.ArrayLike, law: ExactFrequencies, dtype: npt.DTypeLike = "float32"
) -> tuple[np.ndarray, np.ndarray]:
    """A · sin(p ω_i) and A · cos(p ω_i), each of shape ``positions.shape + (n,)``, correctly rounded to
    ``dtype`` (float32, float16, bfloat16; float64 within 1 ulp) for integer and real |p| < 2**31."""
    dt = validation.dtype(dtype)
    raw = validation.position_array(positions)
    spec = ExplicitSpec(law, dt)
    n = spec.n
    validation.fits_in_memory((*raw.shape, 2 * n), dt)
    p = validation.positions(raw)
    rows = np.empty((p.size, 2 * n), dt)
    encode_rows(spec, p.reshape(-1), rows)
    rows = rows.reshape((*raw.shape, 2 * n))
    return rows[..., :n], rows[..., n:]
