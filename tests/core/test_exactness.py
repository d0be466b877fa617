"""The exactness claim, checked against mpmath: float32/float16/bfloat16 outputs are correctly rounded,
float64 outputs are within 1 ulp, for integer and real positions |p| < 2**31, odd and even widths up to
65536, bases in (1, 1e9], shifts 0, 1 and fractional, every layout, through ``encode`` and ``table``."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc import core
from tests.support import reference as ref

LAYOUTS = ("interleaved", "sin_cos", "cos_sin")
LOW_PRECISION = ("float32", "float16", "bfloat16")


def _random_config(rng: np.random.Generator) -> dict:
    d_model = int(rng.choice([2, 3, 4, 5, 16, 63, 64, 512, 1023, 4096]))
    if rng.random() < 0.03:
        d_model = int(rng.choice([32768, 65535, 65536]))
    base = float(rng.choice([10000.0, 100.0, 1e9, 1.5, float(np.exp(rng.uniform(0.01, np.log(1e9))))]))
    odd = str(rng.choice(["zero", "literal", "drop"])) if d_model % 2 else "zero"
    n = d_model // 2
    shift = float(rng.choice([0.0, 1.0, 0.5, -2.0])) if n > 1 else 0.0
    scale = float(rng.choice([1.0, 1.0, 1.0, 1e-3, 3.7, 1000.0]))
    return {
        "d_model": d_model,
        "base": base,
        "shift": shift,
        "scale": scale,
        "odd": odd,
        "layout": str(rng.choice(LAYOUTS)),
    }


def _random_positions(rng: np.random.Generator, count: int) -> np.ndarray:
    limit = 2**31
    kind = rng.integers(0, 4)
    if kind == 0:  # integers anywhere in range
        return rng.integers(-limit + 1, limit, size=count).astype(np.float64)
    if kind == 1:  # reals anywhere in range
        return rng.uniform(-limit, limit, size=count) * rng.random(count)
    if kind == 2:  # small integers (the common case)
        return rng.integers(-5000, 100000, size=count).astype(np.float64)
    return rng.uniform(-10, 10, size=count)  # small reals (diffusion timesteps)


def _check(values: np.ndarray, positions: np.ndarray, config: dict, dtype: str, picks) -> int:
    """Compare sampled entries of ``values`` (rows = positions) with mpmath; return how many."""
    checked = 0
    c = config
    for row, i in picks:
        exact = ref.sincos(
            positions[row], i, c["d_model"], c["base"], c["shift"], c.get("scale", 1.0), c.get("odd", "zero")
        )
        columns = ref.column(i, c["d_model"], c["layout"], c.get("odd", "zero"))
        for col, value in zip(columns, exact, strict=True):
            if col is None:
                continue
            got = float(values[row, col])
            if dtype == "float64":
                assert ref.ulp_distance(got, value) <= 1.0, (positions[row], i, config, got, value)
            else:
                want = ref.round_to(value, dtype)
                assert got == want, (positions[row], i, config, dtype, got, want, value)
            checked += 1
    return checked


def test_encode_is_correctly_rounded_against_mpmath():
    rng = np.random.default_rng(20261122)
    checked = 0
    while checked < 100_000:
        config = _random_config(rng)
        dtype = "float32" if rng.random() < 0.7 else str(rng.choice(["float64", *LOW_PRECISION]))
        positions = _random_positions(rng, 40)
        values = posenc.encode(positions, dtype=dtype, **config)
        assert values.shape == (40, config["d_model"])
        n = ref.frequency_count(config["d_model"], config["odd"])
        picks = [(row, int(i)) for row in range(40) for i in rng.integers(0, n, size=min(n, 12))]
        checked += _check(values, positions, config, dtype, picks)
        if config["d_model"] % 2 and config["odd"] == "zero":
            assert not values[:, -1].any()  # odd widths end in a zero column


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_table_is_correctly_rounded_against_mpmath(dtype):
    rng = np.random.default_rng(7)
    for _ in range(12):
        config = _random_config(rng)
        length = int(rng.integers(1, 700))
        start = int(rng.choice([0, -length // 2, int(rng.integers(-(2**31) + 1, 2**31 - length))]))
        values = posenc.table(length, start=start, dtype=dtype, **config)
        positions = start + np.arange(length, dtype=np.float64)
        n = ref.frequency_count(config["d_model"], config["odd"])
        picks = [
            (int(r), int(i))
            for r, i in zip(rng.integers(0, length, 300), rng.integers(0, n, 300), strict=True)
        ]
        picks += [(0, 0), (length - 1, n - 1)]
        _check(values, positions, config, dtype, picks)


def test_slow_exact_path_rounds_correctly(monkeypatch):
    """Widen the certification band so that every value goes through the arbitrary-precision path."""
    monkeypatch.setattr(core.Spec, "direct_band", lambda self, v: np.abs(v) * 2.0**-8)
    rng = np.random.default_rng(3)
    config = {
        "d_model": 13,
        "base": 10000.0,
        "shift": 1.0,
        "scale": 7.5,
        "layout": "sin_cos",
        "odd": "literal",
    }
    positions = np.concatenate([rng.integers(-(2**31) + 1, 2**31, 6), rng.uniform(-1e6, 1e6, 6)])
    for dtype in LOW_PRECISION:
        values = posenc.encode(positions, dtype=dtype, **config)
        picks = [(row, i) for row in range(len(positions)) for i in range(7)]
        _check(values, positions, config, dtype, picks)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_tiny_angles_are_rounded_from_their_small_angle_sine_not_in_arbitrary_precision(monkeypatch, dtype):
    """A tiny scale makes every sine smaller than the fast path's absolute band (2**-92): sin x = x - x³/6
    on the double-double angle settles them (a 600 × 130 table at scale 1e-30 sent 39 000 values to the
    arbitrary-precision path, 11 s), correctly rounded, signed zeros and subnormal results included."""
    calls = []
    exact = core.Spec.exact
    monkeypatch.setattr(core.Spec, "exact", lambda self, p, i: calls.append(1) or exact(self, p, i))
    for scale in (1e-40, 1e-30, 3e-25):
        config = {"d_model": 67, "base": 10000.0, "shift": 0.0, "scale": scale, "layout": "sin_cos"}
        config["odd"] = "literal"
        values = posenc.table(300, start=-150, dtype=dtype, **config)
        picks = [(row, i) for row in (0, 1, 149, 150, 151, 298, 299) for i in (0, 1, 5, 17, 33)]
        assert _check(values, -150 + np.arange(300.0), config, dtype, picks) == 63  # 33: a sine only
    assert not calls


def test_float32_error_does_not_grow_with_position():
    """The tutorial's float32 code loses accuracy linearly with position; posenc does not."""
    positions = np.array([4096.0, 131072.0, 2.0**24, 2.0**31 - 1])
    exact = posenc.encode(positions, 64, dtype="float64")
    ours = posenc.encode(positions, 64).astype(np.float64)
    assert np.max(np.abs(ours - exact)) <= 2.0**-24  # half a float32 ulp of 1, at every position
    naive = ref.tutorial_table(2**24 + 1, 64, rows=[4096, 131072, 2**24]).astype(np.float64)
    assert np.max(np.abs(naive[-1] - exact[2])) > 0.1  # the inexact code is O(1) off at 2**24


def test_frequencies_are_the_nearest_float64():
    for d_model, base, shift in [
        (512, 10000.0, 0),
        (512, 10000.0, 1),
        (7, 1e9, 0.5),
        (65536, 10000.0, 0),
    ]:
        got = posenc.frequencies(d_model, base=base, shift=shift)
        n = d_model // 2
        assert got.shape == (n,) and got.dtype == np.float64
        for i in {0, 1, n // 2, n - 1}:
            assert got[i] == float(ref.omega(i, d_model, base, shift)), (d_model, i)
    got = posenc.frequencies(7, base=100.0, scale=0.25, odd="literal")
    assert len(got) == 4 and got[3] == float(ref.omega(3, 7, 100.0, 0, 0.25, "literal"))


def test_float64_is_within_one_ulp_near_zeros_of_sin_and_cos_and_for_subnormal_results():
    """Values near a zero of sin or cos (the position nearest to (k + h/2)π / ω_i) and tiny or subnormal
    results (tiny real positions, tiny frequencies) are where an absolute error shows: the main path's
    2**-92 would be 9.7 ulp of sin(56.815 ω_55) = 3.6e-18 and 8 ulp of sin(3e-308); they are redone."""
    checked, worst = 0, 0.0
    for i in (0, 55, 75, 125, 235):
        w = ref.omega(i, 512, 10000.0, 0.0)
        for k in (1, 2, 7, 12345):
            for h in (0, 1):
                p = float((k + h / 2) * ref.mpmath.pi / w)
                exact = ref.sincos(p, i, 512)[h]
                got = float(posenc.encode([p, -p], 512, dtype="float64")[0, 2 * i + h])
                worst = max(worst, ref.ulp_distance(got, exact))
                checked += 1
    for p in (1e-310, 5e-320, 3e-308, 2.2250738585072014e-308, -1e-300, 1e-200, 4.9e-324):
        values = posenc.encode([p], 16, dtype="float64")[0]
        for i in range(8):
            exact = ref.sincos(p, i, 16)[0]
            worst = max(worst, ref.ulp_distance(float(values[2 * i]), exact))
            assert np.signbit(values[2 * i]) == (p < 0)  # sin keeps the position's sign, down to ±0
            checked += 1
    tiny_frequencies = posenc.encode([3.0, 1e5], 8, base=1e300, dtype="float64")  # ω_3 = 1e-225
    for row, p in enumerate((3.0, 1e5)):
        for i in range(4):
            worst = max(
                worst, ref.ulp_distance(float(tiny_frequencies[row, 2 * i]), ref.sincos(p, i, 8, 1e300)[0])
            )
    assert checked == 96 and worst <= 1.0, worst
    assert np.signbit(posenc.encode([-0.0], 4, dtype="float64")[0, ::2]).all()  # sin(-0) = -0
