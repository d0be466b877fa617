"""Frequencies given as exact reals (posenc.core.explicit): the same bits as the geometric core for its
own frequencies, and A · sin / A · cos correctly rounded against mpmath for any frequencies and amplitude."""

from __future__ import annotations

import decimal

import mpmath
import numpy as np
import pytest

import posenc
from posenc.core import explicit, highprec

ml_dtypes = pytest.importorskip("ml_dtypes")


def geometric(n: int, base: float) -> explicit.ExactFrequencies:
    """ω_i = base**(-i/n) as an exact law (the core's own frequencies for d_model = 2n)."""

    def exact(digits: int) -> tuple[decimal.Decimal, ...]:
        with decimal.localcontext(highprec.context(digits + 5)):
            log = decimal.Decimal(base).ln()
            return tuple((-i * log / n).exp() for i in range(n))

    return explicit.ExactFrequencies(("geometric", n, base), exact)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_geometric_law_gives_the_cores_bits(dtype):
    rng = np.random.default_rng(5)
    positions = np.concatenate([np.arange(300), rng.integers(-(2**31) + 1, 2**31, 700)])
    sin, cos = explicit.sin_cos(positions, geometric(32, 10000.0), dtype)
    expected = posenc.encode(positions, 64, layout="sin_cos", dtype=dtype)
    np.testing.assert_array_equal(sin.view(np.uint8), expected[:, :32].view(np.uint8))
    np.testing.assert_array_equal(cos.view(np.uint8), expected[:, 32:].view(np.uint8))


def irregular(amplitude: str | None) -> explicit.ExactFrequencies:
    """Frequencies with no pattern (1/(i + √2), and 1/k below them) and an irrational amplitude."""

    def exact(digits: int) -> tuple[decimal.Decimal, ...]:
        with decimal.localcontext(highprec.context(digits + 5)):
            root = decimal.Decimal(2).sqrt()
            return tuple(1 / (i + root) for i in range(12)) + tuple(decimal.Decimal(1) / k for k in (7, 300))

    def scale(digits: int) -> decimal.Decimal:
        with decimal.localcontext(highprec.context(digits + 5)):
            return decimal.Decimal(amplitude).sqrt()

    return explicit.ExactFrequencies(("irregular", amplitude), exact, None if amplitude is None else scale)


def nearest(value: mpmath.mpf, dtype) -> float:
    """The value of ``dtype`` nearest the real ``value``: the best of the float64's rounding and its two
    neighbours in ``dtype``, measured in mpmath (no double rounding)."""
    guess = np.array([float(value)]).astype(dtype)
    candidates = [guess, np.nextafter(guess, np.array([np.inf], dtype)), np.nextafter(guess, -guess)]
    candidates = [float(c[0]) for c in candidates if np.isfinite(c[0])]
    return min(candidates, key=lambda c: abs(mpmath.mpf(c) - value))


def reference(p: float, omegas: list, amplitude: str | None, dtype) -> np.ndarray:
    """A · sin and A · cos in mpmath at 80 digits, each rounded once to ``dtype``."""
    with mpmath.workdps(80):
        factor = mpmath.sqrt(mpmath.mpf(amplitude)) if amplitude else mpmath.mpf(1)
        values = [factor * f(mpmath.mpf(p) * w) for f in (mpmath.sin, mpmath.cos) for w in omegas]
        return np.array([nearest(v, dtype) for v in values])


@pytest.mark.parametrize("amplitude", [None, "1.1", "0.6"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_arbitrary_frequencies_and_amplitude_are_correctly_rounded(amplitude, dtype):
    with mpmath.workdps(80):
        omegas = [1 / (i + mpmath.sqrt(2)) for i in range(12)] + [mpmath.mpf(1) / k for k in (7, 300)]
    rng = np.random.default_rng(11)
    positions = np.concatenate([[0, 1, 2, -3], rng.integers(-(2**31) + 1, 2**31, 60), rng.random(20) * 5000])
    sin, cos = explicit.sin_cos(positions, irregular(amplitude), dtype)
    got = np.concatenate([sin, cos], -1).astype(np.float64)
    want_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    for row, p in zip(got, positions, strict=True):
        want = reference(float(p), omegas, amplitude, want_dtype)
        np.testing.assert_array_equal(row, want, err_msg=f"position {p}")


def test_the_law_is_checked_once_and_the_amplitude_is_its_float64():
    law = irregular("1.1")
    spec = explicit.ExplicitSpec(law, np.dtype(np.float32))
    assert spec.amplitude == float(decimal.Decimal("1.1").sqrt())
    assert 0 < spec.amplitude_error < 2.0**-52
    assert law == irregular("1.1") and hash(law) == hash(irregular("1.1")) and law != irregular("0.6")
    sin, cos = explicit.sin_cos(np.zeros((2, 3)), law)
    assert sin.shape == cos.shape == (2, 3, 14)
    assert (sin == 0).all() and (cos == np.float32(spec.amplitude)).all()


@pytest.mark.parametrize("amplitude", [None, "1.1", "0.6"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_portable_algorithm_gives_the_same_bits_for_a_law(amplitude, dtype):
    from posenc import portable

    law = irregular(amplitude)
    rng = np.random.default_rng(3)
    positions = np.concatenate([[0, 1, -1], rng.integers(-(2**31) + 1, 2**31, 3000)])
    reals = rng.random(1000) * 2.0**20 - 2.0**19
    for p in (positions, reals):
        sin, cos = explicit.sin_cos(p, law, dtype)
        request = portable.request_for_law(law, dtype)
        got = portable.encode(portable.backend_of(p), p, request)
        want = np.concatenate([sin, cos], -1)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_the_device_refuses_an_amplitude_beyond_its_error_bound():
    from posenc import portable

    with pytest.raises(ValueError, match="amplitude"):
        portable.request_for_law(irregular("5"), "float32")
