"""What the fuzz suite's files (the test_fuzz_*.py files under tests/) share: its settings, the adversarial
values and the
strategies that draw them, and the helpers that judge a result.

The suite is property-based: random and adversarial values thrown at every public function, module and
subcommand, each asserting "right value or clear error" (tests/support/fuzz_cases.py).

* dtypes: every integer and float width (bfloat16, float8 and longdouble included), bool, complex, object,
  strings, dates; shapes: scalar, empty, zero-size, huge (zero-stride views); devices: cpu and meta;
  values: ±0, subnormals, NaN/inf, 2³¹ ± 1, 2⁶³, huge bases, extreme shifts and scales.
* Right value: the core against the mpmath reference (float32/16/bfloat16 correctly rounded, float64
  within 1 ulp, IEEE signed zeros); the adapters bit for bit against ``posenc.encode`` of the same
  positions, converted exactly; helpers against their documented formulas.
* Clear error: ValueError or TypeError whose message names the offending parameter (or shows its value);
  the command: exit status 2, one line on stderr, no traceback. Every call runs under a time limit, and
  huge sizes must be refused before anything is allocated.

Hypothesis runs derandomized (the same examples on every run, no example database), so CI is
deterministic. The reported bad-input cases (and those the fuzzer found) are explicit regression tests
(tests/contracts/test_fuzz_regressions.py, tests/contracts/test_fuzz_found.py).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import warnings
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from posenc.cli import main
from tests.support.fuzz_cases import (
    BFLOAT16,
    LAYOUTS,
    MAX_POSITION,
    ODD_RULES,
    dtype_name,
    spot_check,
    time_limit,
)

ROOT = Path(__file__).resolve().parents[2]
X64 = bool(jax.config.jax_enable_x64)


#: FUZZ_EXPLORE=1 (or a number: examples x that) shrinks failures and reports every distinct one; by default
#: the first failing example is reported as generated (shrinking many failures takes minutes).
EXPLORE = float(os.environ.get("FUZZ_EXPLORE", "0") or 0)


def fuzz(examples: int) -> settings:
    """Deterministic hypothesis settings: the same ``examples`` examples on every run."""
    return settings(
        max_examples=int(examples * max(1.0, EXPLORE)),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=list(Phase) if EXPLORE else [Phase.explicit, Phase.reuse, Phase.generate],
        report_multiple_bugs=bool(EXPLORE),
    )


# --- adversarial values --------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
REALS = [
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 5e-324, -5e-324, 1e-310, -1e-310, 2.2250738585072014e-308, 1e-300,
    0.1, 45.553093477052, 65504.0, 65520.0, 2.0**24, 2.0**24 + 2, 2.0**31 - 1, -(2.0**31 - 1),
    2.0**31 - 0.5, 2.0**31, -(2.0**31), 2.0**31 + 2, 1e300, NAN, INF, -INF,
]  # fmt: skip
INTS = [
    0, 1, -1, 127, -128, 255, 2**15, 2**16 - 1, 2**24 + 1, 2**31 - 1, -(2**31 - 1), 2**31, -(2**31),
    2**31 + 1, 2**32, 2**63 - 1, -(2**63), 2**64 - 1,
]  # fmt: skip
NP_INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
NP_FLOATS = [np.float16, np.float32, np.float64, np.longdouble]
SHAPES = [(), (0,), (1,), (3,), (2, 0), (0, 3), (2, 3), (1, 2, 2)]

BAD_D_MODELS = [
    0, 1, -1, -(2**31), True, False, 4.0, 4.5, "4", None, NAN, 1j, 2**20 + 1, 2**24, 2**31 - 1, 2**31,
    2**63, 10**30, np.float64(8.0),
]  # fmt: skip
BASES = [
    10000.0, 100.0, 2, 1.5, 1 + 2**-52, 1e9, 1e300, 1.7976931348623157e308, np.float32(100), np.float16(10),
    np.int64(10), 10**400, -(10**400), 1, 1.0, 0.5, 0, -1, NAN, INF, -INF, True, "100", None, 1j,
    Fraction(3, 2), Fraction(1, 3), Decimal("100"), 2**53 + 1,
]  # fmt: skip
SCALES = [
    1.0,
    0.001,
    2**20,
    2**20 + 1,
    1e-300,
    5e-324,
    0,
    -1,
    NAN,
    INF,
    2**-30,
    1600,
    np.float64(3),
    True,
    10**400,
]
BAD_LAYOUTS = ["", "INTERLEAVED", None, 1, "sin-cos", b"sin_cos"]
BAD_ODDS = ["", None, "Zero", 0, "even"]
GOOD_DTYPES = [
    "float64", "float32", "float16", "bfloat16", np.float32, np.float64, np.dtype("float16"),
    ml_dtypes.bfloat16,
    torch.bfloat16, torch.float64, torch.float32, torch.float16,
]  # fmt: skip
BAD_DTYPES = [
    "f4",
    "float",
    "int8",
    "bf16",
    "None",
    np.int32,
    torch.int32,
    complex,
    np.complex64,
    torch.bool,
    0,
]

# Words a refusal of an over-large request may use (it shows the size instead of a parameter name).
SIZE_WORDS = ["output", "memory", "GiB", "shape", "length", "d_model", "positions"]


@st.composite
def d_models(draw, *, small: bool = True) -> object:
    """A model width: mostly small valid ones, sometimes an adversarial one."""
    kind = draw(st.integers(0, 9))
    if kind < 6:
        return draw(st.integers(2, 24 if small else 600))
    if kind < 8:
        return draw(st.sampled_from([2, 3, 5, 64, 511, np.int8(6), np.uint64(8)]))
    return draw(st.sampled_from(BAD_D_MODELS))


@st.composite
def core_options(draw, d_model: object) -> dict:
    """base, shift, scale, layout, odd: mostly valid, each sometimes adversarial (shift near its limit)."""
    options = {}
    if draw(st.booleans()):
        options["base"] = draw(st.one_of(st.floats(1.0001, 1e9), st.sampled_from(BASES)))
    if draw(st.booleans()):
        n = d_model // 2 if isinstance(d_model, int) and not isinstance(d_model, bool) else 2
        near = [n - 1, n - 0.5, n - 1e-9, n - 2.0**-40, n, n + 1, 0.5, -2, -1e308, 1e-320]
        options["shift"] = draw(
            st.one_of(
                st.sampled_from([0, 1]),
                st.floats(-4, 4),
                st.sampled_from(near),
                st.sampled_from([NAN, INF, "1", None, 10**400, Fraction(1, 2)]),
            )
        )
    if draw(st.booleans()):
        options["scale"] = draw(st.one_of(st.floats(1e-3, 1e3), st.sampled_from(SCALES)))
    if draw(st.booleans()):
        options["layout"] = draw(st.sampled_from([*LAYOUTS, *LAYOUTS, *BAD_LAYOUTS]))
    if draw(st.booleans()):
        options["odd"] = draw(st.sampled_from([*ODD_RULES, *ODD_RULES, *BAD_ODDS]))
    return options


def reference_options(options: dict) -> dict:
    """The options as the reference takes them (floats, defaults filled in)."""
    return {
        "base": float(options.get("base", 10000.0)),
        "shift": float(options.get("shift", 0)),
        "scale": float(options.get("scale", 1.0)),
        "layout": options.get("layout", "interleaved"),
        "odd": options.get("odd", "zero"),
    }


def _values_for(draw, dtype: np.dtype, size: int) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = draw(
            st.lists(st.one_of(st.sampled_from(INTS), st.integers(-300, 300)), min_size=size, max_size=size)
        )
        return np.array([min(max(v, int(info.min)), int(info.max)) for v in values], dtype=dtype)
    values = draw(
        st.lists(
            st.one_of(st.sampled_from(REALS), st.floats(-(2.0**31), 2.0**31), st.floats(-8, 8)),
            min_size=size,
            max_size=size,
        )
    )
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.array(values, dtype=np.float64).astype(dtype)
    if dtype == np.longdouble and size and draw(st.booleans()):
        array[0] += np.longdouble(2.0**-60) * (1 + abs(array[0]))  # not a float64: must be refused
    return array


@st.composite
def numpy_positions(draw) -> object:
    """Positions of any kind posenc.encode may be handed."""
    kind = draw(st.integers(0, 11))
    shape = draw(st.sampled_from(SHAPES))
    size = math.prod(shape)
    if kind < 6:
        dtype = np.dtype(draw(st.sampled_from(NP_INTS + NP_FLOATS)))
        return _values_for(draw, dtype, size).reshape(shape)
    if kind == 6:
        dtype = draw(st.sampled_from([BFLOAT16, np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.int4)]))
        return _values_for(draw, np.dtype(np.float64), size).reshape(shape).astype(dtype)
    if kind == 7:  # Python scalars
        return draw(st.sampled_from([*REALS, *INTS, True, None, "3", 1j, Fraction(1, 3), Decimal(2)]))
    if kind == 8:  # object arrays and nested lists (ragged ones included)
        return draw(
            st.sampled_from(
                [
                    np.array([1, 2**40, -3], dtype=object),
                    np.array([np.int64(3)], dtype=object),
                    np.array([1.5, None], dtype=object),
                    [[1, 2], [3]],
                    [[1, 2], [3, 4]],
                    [1, 2.5, -0.0],
                    [],
                    [[]],
                    [True, False],
                ]
            )
        )
    if kind == 9:  # bool, complex, strings, dates
        dtype = draw(
            st.sampled_from([np.bool_, np.complex64, np.complex128, np.dtype("U3"), np.dtype("M8[D]")])
        )
        return np.zeros(shape, dtype=dtype)
    if kind == 10:  # huge, but zero-stride: no memory behind it
        return np.broadcast_to(
            np.asarray(draw(st.sampled_from([0, 7, 0.5])), draw(st.sampled_from(NP_INTS + NP_FLOATS))),
            draw(st.sampled_from([(2**40,), (2**20, 2**20)])),
        )
    return draw(st.lists(st.sampled_from(INTS + REALS), min_size=0, max_size=4))


def positions_valid(value: object) -> bool | None:
    """True / False when the positions are valid / not by the documented rules; None: posenc may take or
    refuse them (bfloat16, float8 and int4 NumPy arrays: ml_dtypes, not NumPy's own dtypes)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        return False
    if array.size > 2**24:  # the huge zero-stride views: valid values, an output beyond any memory
        return False
    if array.dtype.name in ("bfloat16", "float8_e5m2", "int4"):
        return None if _finite_in_range(array.astype(np.float64)) else False
    kind = array.dtype.kind
    if kind == "O":
        items = array.ravel().tolist()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return None if all(isinstance(v, numbers_real) for v in items) else False
        return all(abs(v) < MAX_POSITION for v in items)
    if kind in "iu":
        return all(abs(int(v)) < MAX_POSITION for v in array.ravel().tolist())
    if kind == "f":
        wide = array.astype(np.float64)
        if array.dtype.itemsize > 8 and not np.array_equal(wide, array):
            return False
        return _finite_in_range(wide)
    return False


numbers_real = (int, float, Fraction)


def _finite_in_range(array: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(array)) and np.all(np.abs(array) < MAX_POSITION))


def output_name(dtype: object, out: object = None) -> str:
    if dtype is None:
        return out.dtype.name if isinstance(out, np.ndarray) else "float32"
    return dtype_name(dtype)


def check_core_result(result, shape, d_model, options, name, exact, rng, samples=4) -> None:
    assert isinstance(result, np.ndarray), type(result)
    assert result.shape == (*shape, d_model), (result.shape, shape, d_model)
    assert result.dtype.name == name, (result.dtype, name)
    wide = result.astype(np.float64)
    assert np.all(np.isfinite(wide)) and np.all(np.abs(wide) <= 1.0), "values beyond [-1, 1] or not finite"
    spot_check(result, exact, d_model, options=reference_options(options), fmt=name, rng=rng, samples=samples)


LENGTHS = [0, 1, 2, 5, 33, -1, True, 2.0, None, "3", 2**40, 10**30, np.int64(3)]
STARTS = [
    0,
    1,
    -1,
    7,
    -(2**31 - 1),
    -(2**31),
    2**31 - 1,
    2**31 - 5,
    2**31,
    -(2**63),
    True,
    1.0,
    np.int32(7),
    None,
    2**100,
]


def table_problems(length: object, start: object) -> list[str]:
    bad = []
    ok_length = isinstance(length, int | np.integer) and not isinstance(length, bool) and length >= 0
    ok_start = isinstance(start, int | np.integer) and not isinstance(start, bool) and start >= -(2**31 - 1)
    if not ok_length:
        bad.append("length")
    if not ok_start:
        bad.append("start")
    if ok_length and ok_start and length and int(start) + int(length) - 1 >= MAX_POSITION:
        bad += ["length", "start", "position"]
    return bad


# --- posenc.jax (concrete positions: eager and under jit as constants; traced ones in the regressions) ---

JAX_DTYPES = [
    jnp.int8,
    jnp.int16,
    jnp.int32,
    jnp.uint8,
    jnp.uint16,
    jnp.uint32,
    jnp.float16,
    jnp.bfloat16,
    jnp.float32,
]


@st.composite
def jax_positions(draw, shapes=SHAPES) -> tuple[object, np.ndarray | None, bool | None]:
    """(positions for posenc.jax, their values in NumPy, whether they are valid (None: either))."""
    kind = draw(st.integers(0, 3))
    shape = draw(st.sampled_from(shapes))
    if kind <= 1:  # a jax.Array of any dtype JAX has with x64 off
        dtype = np.dtype(draw(st.sampled_from(JAX_DTYPES)))
        values = _values_for(
            draw, dtype if dtype.kind in "iu" else np.dtype(np.float64), math.prod(shape)
        ).reshape(shape)
        with np.errstate(over="ignore", invalid="ignore"):
            values = values.astype(dtype)
        array = jnp.asarray(values)
        return array, np.asarray(array), _finite_in_range(np.asarray(array).astype(np.float64))
    if kind == 2:  # NumPy: int64/uint64/float64 stay exact
        p = draw(numpy_positions())
        ok = positions_valid(p)
        values = None if ok is False else np.asarray(p)
        return p, values, ok
    dtype = draw(st.sampled_from([jnp.bool_, jnp.complex64]))
    return jnp.zeros(shape, dtype), None, False


# --- the command -----------------------------------------------------------------------------------------


def run_cli(argv: list[str], seconds: float = 30) -> tuple[int, str, str]:
    """``main(argv)`` in this process with warnings as errors: (exit status, stdout, stderr). No exception may
    escape, no call may hang."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            time_limit(seconds),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("error")
            code = main(argv)
    except BaseException as error:
        raise AssertionError(f"posenc {' '.join(argv)} raised {type(error).__name__}: {error}") from error
    return code, out.getvalue(), err.getvalue()


def assert_clean_failure(argv: list[str], code: int, err: str, names: list[str]) -> None:
    """Exit status 2, exactly one line on stderr, no traceback, and it names something the user typed."""
    lines = err.splitlines()
    assert code == 2, f"posenc {' '.join(argv)}: exit status {code}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("posenc: error:"), (
        f"posenc {' '.join(argv)}: stderr {err!r}"
    )
    assert "Traceback" not in err
    assert any(n and n.lower() in err.lower() for n in names), (
        f"posenc {' '.join(argv)}: {err.strip()!r} names none of {names}"
    )
