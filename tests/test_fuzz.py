"""A property-based fuzz suite for bad input and edge cases: random and adversarial values thrown at every
public function, module and subcommand, each asserting "right value or clear error" (tests/fuzz_cases.py).

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
deterministic. The reported bad-input cases (and those the fuzzer found) are explicit regression tests at
the end.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import resource
import subprocess
import sys
import textwrap
import warnings
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import mpmath
import numpy as np
import pytest
import reference as ref
import torch
from fuzz_cases import (
    BFLOAT16,
    DTYPE_NAMES,
    LAYOUTS,
    MAX_POSITION,
    ODD_RULES,
    assert_element,
    dtype_name,
    exact_positions,
    expected_value,
    may_underflow,
    option_problems,
    right_value_or_clear_error,
    same_bits,
    spot_check,
    time_limit,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tutorial import tutorial_table

import posenc
import posenc.jax as pj
import posenc.torch as pt
from posenc import analysis, grids, porting, positions, presets, sharding
from posenc.cli import main

ROOT = Path(__file__).resolve().parent.parent
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


# --- the core: frequencies, encode, table ------------------------------------------------------------------


@fuzz(120)
@given(data=st.data())
def test_core_frequencies(data):
    d_model = data.draw(d_models(small=False))
    options = data.draw(core_options(d_model))
    options.pop("layout", None)
    bad = option_problems(d_model, **options)
    ro = None if bad else reference_options(options)
    risky = ro is not None and may_underflow(int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"])

    def check(omegas):
        count = len(omegas)
        assert omegas.dtype == np.float64 and omegas.shape == (count,)
        assert count == int(d_model) // 2 + (
            1 if int(d_model) % 2 and ro["odd"] in ("literal", "drop") else 0
        )
        for i in {0, count // 2, count - 1}:
            with mpmath.workdps(60):
                want = ref.round_to(
                    ref.omega(i, int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"]), "float64"
                )
            assert omegas[i] == want, f"ω_{i} = {omegas[i]!r}, want {want!r}"

    right_value_or_clear_error(
        lambda: posenc.frequencies(d_model, **options),
        valid=None if risky else not bad,
        names=bad or ["frequency", "underflow"],
        check=check,
    )


@fuzz(250)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_core_encode(data, rng):
    d_model = data.draw(d_models())
    options = data.draw(core_options(d_model))
    dtype = data.draw(st.sampled_from([None, *GOOD_DTYPES, *BAD_DTYPES]))
    p = data.draw(numpy_positions())
    bad = option_problems(d_model, **options, dtype="float32" if dtype is None else dtype)
    good_positions = positions_valid(p)
    names = [*bad, *shown_values(d_model=d_model, **options)]
    if good_positions is not True:
        names += ["positions", *SIZE_WORDS]
    ro = None if bad else reference_options(options)
    risky = ro is not None and may_underflow(int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"])
    if risky:
        names += ["frequency", "underflow"]
    valid = False if bad or good_positions is False else (None if risky or good_positions is None else True)

    def check(result):
        shape = np.shape(p)
        check_core_result(
            result, shape, int(d_model), options, output_name(dtype), exact_positions(np.asarray(p)), rng
        )

    right_value_or_clear_error(
        lambda: posenc.encode(p, d_model, **options, dtype=dtype), valid=valid, names=names, check=check
    )


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


def shown_values(**values: object) -> list[str]:
    """The values as a message may show them (an error may show the value instead of naming it); short
    ones are left out, they would match anything."""
    return [text for value in values.values() for text in {str(value), repr(value)} if len(text) >= 4]


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


@fuzz(200)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_core_table(data, rng):
    d_model = data.draw(d_models())
    options = data.draw(core_options(d_model))
    length = data.draw(st.sampled_from(LENGTHS))
    start = data.draw(st.one_of(st.sampled_from(STARTS), st.integers(-(2**31 - 1), 2**31 - 40)))
    dtype = data.draw(st.sampled_from([None, *GOOD_DTYPES, *BAD_DTYPES[:4]]))
    bad = option_problems(d_model, **options, dtype="float32" if dtype is None else dtype)
    bad += table_problems(length, start)
    ro = None if bad else reference_options(options)
    shown = shown_values(d_model=d_model, length=length, start=start, **options)
    risky = ro is not None and may_underflow(int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"])

    def check(result):
        name = output_name(dtype)
        rows = np.arange(int(start), int(start) + int(length), dtype=np.int64)
        if not len(rows):  # (a table of no rows checks its options only as far as it needs them)
            assert result.shape == (0, int(d_model)) and result.dtype.name == name
            return
        want = posenc.encode(rows, d_model, **options, dtype=name)
        assert same_bits(result, want), (
            "table rows differ (bits, signed zeros included) from encode of their positions"
        )
        check_core_result(
            result, (int(length),), int(d_model), options, name, exact_positions(rows), rng, samples=3
        )

    right_value_or_clear_error(
        lambda: posenc.table(length, d_model, start=start, **options, dtype=dtype),
        valid=False if bad else (None if risky else True),
        names=[*bad, *shown] if bad else ["frequency", "underflow"],
        check=check,
    )


OUT_DTYPES = [
    np.float64,
    np.float32,
    np.float16,
    BFLOAT16,
    np.int32,
    np.int8,
    np.uint8,
    np.bool_,
    np.complex64,
    object,
]


@fuzz(120)
@given(
    out_dtype=st.sampled_from(OUT_DTYPES),
    shape_ok=st.sampled_from([True, True, True, False]),
    layout=st.sampled_from(
        ["contiguous", "contiguous", "contiguous", "strided", "readonly", "list", "fortran"]
    ),
    dtype=st.sampled_from([None, None, None, "float32", "float64", "bfloat16", "int32"]),
    which=st.sampled_from(["table", "encode"]),
    length=st.integers(0, 4),
    d_model=st.integers(2, 9),
)
def test_core_out(out_dtype, shape_ok, layout, dtype, which, length, d_model):
    shape = (length, d_model) if shape_ok else (length + 1, d_model)
    if layout == "strided":
        out = np.full((shape[0], 2 * d_model), 7, dtype=out_dtype)[:, ::2]
    elif layout == "fortran":
        out = np.full(shape[::-1], 7, dtype=out_dtype).T
    else:
        out = np.full(shape, 7, dtype=out_dtype)
    if layout == "readonly":
        out.flags.writeable = False
    if layout == "list":
        out = out.tolist()
    name = np.dtype(out_dtype).name
    want_name = name if dtype is None else dtype
    good = layout == "contiguous" and shape_ok and name in DTYPE_NAMES and want_name == name
    if (
        layout in ("strided", "fortran")
        and shape[0] <= 1
        and shape_ok
        and name in DTYPE_NAMES
        and want_name == name
    ):
        good = None  # a view of 0 or 1 rows may count as contiguous
    positions_ = np.arange(3, 3 + length)

    def call():
        if which == "table":
            return posenc.table(length, d_model, start=3, out=out, dtype=dtype)
        return posenc.encode(positions_, d_model, out=out, dtype=dtype)

    def check(result):
        assert result is out, "the result must be out itself"
        assert same_bits(result, posenc.encode(positions_, d_model, dtype=name))

    right_value_or_clear_error(call, valid=good, names=["out", "dtype"], check=check)


# --- posenc.torch -------------------------------------------------------------------------------------

TORCH_INTS = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]
TORCH_FLOATS = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]
TORCH_OTHER = [torch.bool, torch.complex64, torch.complex128]
TORCH_OUT = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}
TORCH_DTYPES = [*TORCH_OUT, "float32", "bfloat16", "float16", "float64"]
TORCH_BAD_DTYPES = [torch.int32, "int8", torch.complex64, "f4", None, torch.float8_e5m2]


def numpy_of(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as a NumPy array holding the same values exactly (float64 for real dtypes NumPy lacks)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    if tensor.is_floating_point():
        return (
            tensor.to(torch.float64).numpy()
            if tensor.dtype not in (torch.float16, torch.float32, torch.float64)
            else tensor.numpy()
        )
    if tensor.dtype in (torch.uint16, torch.uint32, torch.uint64):
        return np.array([int(v) for v in tensor.reshape(-1).tolist()], dtype=np.uint64).reshape(
            tuple(tensor.shape)
        )
    return tensor.numpy()


@st.composite
def torch_positions(draw, shapes=SHAPES) -> tuple[torch.Tensor, np.ndarray]:
    """(a CPU position tensor of any dtype, the same values as a NumPy array)."""
    dtype = draw(
        st.sampled_from(
            TORCH_INTS + TORCH_FLOATS + TORCH_FLOATS[:4] + [torch.int64, torch.int32] + TORCH_OTHER
        )
    )
    shape = draw(st.sampled_from(shapes))
    size = math.prod(shape)
    if dtype in TORCH_OTHER:
        tensor = torch.zeros(shape, dtype=dtype)
    elif not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        values = draw(
            st.lists(st.one_of(st.sampled_from(INTS), st.integers(-300, 300)), min_size=size, max_size=size)
        )
        values = [min(max(v, int(info.min)), int(info.max)) for v in values]
        wide = np.uint64 if dtype in (torch.uint32, torch.uint64) else np.int64
        tensor = (
            torch.from_numpy(np.array(values, dtype=wide).reshape(shape)).to(dtype)
            if dtype != torch.uint64
            else torch.from_numpy(np.array(values, dtype=np.uint64).reshape(shape))
        )
    else:
        values = _values_for(draw, np.dtype(np.float64), size).reshape(shape)
        tensor = torch.from_numpy(values).to(dtype)
    return tensor, numpy_of(tensor) if dtype not in TORCH_OTHER else None


def torch_values(tensor: torch.Tensor) -> np.ndarray:
    """A float result tensor as NumPy, bit for bit (bfloat16 as ml_dtypes')."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.contiguous().view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()


def core_or_none(p: np.ndarray, d_model: int, options: dict, name: str) -> np.ndarray | None:
    """posenc.encode of positions held exactly in float64 (None if they are not: then mpmath decides)."""
    exact = exact_positions(p)
    flat = exact.reshape(-1).tolist()
    if all(isinstance(v, float) or (v.denominator == 1) or float(v) == v for v in flat):
        wide = np.array([float(v) for v in flat], dtype=np.float64).reshape(exact.shape)
        return posenc.encode(wide, d_model, **options, dtype=name)
    return None


def _is_the_core_encoding(got, values, d_model, options, name, rng):
    """An adapter's result (as NumPy): the core's bits for the same positions, and right against mpmath."""
    want = core_or_none(values, int(d_model), options, name)
    if want is not None:
        assert same_bits(got, want), f"differs from posenc.encode of the same positions: {got} vs {want}"
    spot_check(
        got,
        exact_positions(values),
        int(d_model),
        options=reference_options(options),
        fmt=name,
        rng=rng,
        samples=2,
    )


@fuzz(160)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_torch_encode(data, rng):
    d_model = data.draw(st.one_of(st.integers(2, 12), st.sampled_from([1, 2**20 + 1, 4.0, None])))
    options = data.draw(core_options(d_model))
    dtype = data.draw(st.sampled_from(TORCH_DTYPES + TORCH_BAD_DTYPES))
    device = data.draw(st.sampled_from(["cpu", "cpu", "meta"]))
    kind = data.draw(st.integers(0, 9))
    if kind < 8:
        tensor, values = data.draw(torch_positions())
        tensor = tensor.to(device)
        given_ = tensor
    else:  # not a tensor: a list, a NumPy array, a Python number, None, a string
        given_ = data.draw(
            st.sampled_from(
                [[1, 2, 3], np.array([3, -4]), 5, 2.5, -0.0, None, "7", [[1], [2, 3]], 2**31, NAN]
            )
        )
        device = "cpu"
        tensor = None
        try:
            values = np.asarray(given_)
        except ValueError:
            values = None
    bad = option_problems(
        d_model, **options, dtype=dtype if isinstance(dtype, str) or dtype in TORCH_OUT else "bad"
    )
    if (
        (tensor is not None and tensor.dtype in TORCH_OTHER)
        or values is None
        or (values.dtype.kind not in "iuf" and values.dtype != BFLOAT16)
    ):
        good_positions = False
    elif device == "meta":
        good_positions = True  # values on a device are not read: invalid ones give NaN rows there
    else:
        good_positions = _finite_in_range(values.astype(np.float64))
    ro = None if bad else reference_options(options)
    risky = ro is not None and may_underflow(int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"])
    name = TORCH_OUT.get(dtype, dtype)

    def check(result):
        assert isinstance(result, torch.Tensor) and result.device.type == device
        assert result.dtype == getattr(torch, name), (result.dtype, name)
        assert tuple(result.shape) == (*np.shape(values), int(d_model))
        if device == "meta":
            return
        _is_the_core_encoding(torch_values(result), values, d_model, options, name, rng)

    right_value_or_clear_error(
        lambda: pt.encode(given_, d_model, **options, dtype=dtype),
        valid=False if bad or not good_positions else (None if risky else True),
        names=(bad or [])
        + ([] if good_positions else ["positions", "tensor"])
        + (["frequency", "underflow"] if risky else []),
        check=check,
    )


@fuzz(80)
@given(
    d_model=st.one_of(st.integers(2, 10), st.sampled_from([0, 2**20 + 1, 2.0])),
    length=st.sampled_from(LENGTHS),
    start=st.one_of(st.sampled_from(STARTS), st.integers(-(2**31 - 1), 2**31 - 40)),
    dtype=st.sampled_from(TORCH_DTYPES + TORCH_BAD_DTYPES),
    device=st.sampled_from(["cpu", "meta", "cpu"]),
)
def test_torch_table(d_model, length, start, dtype, device):
    bad = option_problems(d_model, dtype=dtype if isinstance(dtype, str) or dtype in TORCH_OUT else "bad")
    bad += table_problems(length, start)
    name = TORCH_OUT.get(dtype, dtype)

    def check(result):
        assert result.device.type == device and result.dtype == getattr(torch, name)
        assert tuple(result.shape) == (int(length), int(d_model))
        if device == "cpu":
            want = posenc.table(int(length), int(d_model), start=int(start), dtype=name)
            assert same_bits(torch_values(result), want)

    right_value_or_clear_error(
        lambda: pt.table(length, d_model, start=start, dtype=dtype, device=device),
        valid=not bad,
        names=bad,
        check=check,
    )


# The module: x of any shape and dtype, position ids and offsets of any dtype, on the CPU and on meta.

X_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
OFFSETS = [0, 1, 5, 2**31 - 1, 2**31, 2**33, -1, True, 1.5, np.int64(3), np.uint8(2), None, "1"]
OFFSET_NAMES = ["offset", "positions", "position", "2**31"]


def module_expectation(x_shape, d_model, batch_first, p, offset, *, read_values=True):
    """(names of the problems, exact positions + offset shaped like the encoding before orienting), by the
    documented rules: x is (..., seq, d_model) with batch_first, else (seq, batch, d_model); positions
    (seq,) or batch shape + (seq,), integer or real; offset an int >= 0 or an integer array of shape () or
    (batch,). ``read_values=False`` (a device): values are not checked, invalid ones give NaN rows."""
    if batch_first:
        ok_x = len(x_shape) >= 2 and x_shape[-1] == d_model
        batch_shape, seq = (tuple(x_shape[:-2]), x_shape[-2]) if ok_x else ((), 0)
    else:
        ok_x = len(x_shape) == 3 and x_shape[-1] == d_model
        batch_shape, seq = ((x_shape[1],), x_shape[0]) if ok_x else ((), 0)
    if not ok_x:
        return ["x must", "shape"], None
    if p is None:
        ids = exact_positions(np.arange(seq))
    else:
        if p.dtype.kind not in "iuf" and p.dtype != BFLOAT16:
            return ["positions"], None
        if p.shape not in ((seq,), (*batch_shape, seq)):
            return ["positions", "shape"], None
        if not np.isfinite(p.astype(np.float64)).all():
            return (["positions"] if read_values else None), None
        ids = exact_positions(p)
        if read_values and not _finite_in_range(p.astype(np.float64)):
            return ["positions"], None
    if isinstance(offset, np.ndarray):
        if offset.dtype.kind not in "iu":
            return ["offset"], None
        if len(batch_shape) == 1 and offset.shape == batch_shape:
            off = exact_positions(offset)[:, None]
        elif offset.shape == ():
            off = exact_positions(offset)
        else:
            return ["offset", "shape"], None
        if read_values and np.any(offset.astype(np.float64) < 0):
            return ["offset"], None
    else:
        if isinstance(offset, bool | np.bool_) or not isinstance(offset, int | np.integer) or offset < 0:
            return ["offset"], None
        off = Fraction(int(offset))
    total = ids + off
    if (
        not read_values
        and not isinstance(offset, np.ndarray)
        and seq
        and int(offset) + seq - 1 >= MAX_POSITION
    ):
        return None, None  # on a device: a clear error, or rows of NaN (README: invalid positions)
    if read_values and any(abs(v) >= MAX_POSITION for v in total.reshape(-1).tolist()):
        return OFFSET_NAMES, None
    return [], total


def oriented(pe: np.ndarray, batch_first: bool) -> np.ndarray:
    if batch_first:
        return pe
    return pe[:, None] if pe.ndim == 2 else np.swapaxes(pe, 0, 1)


def module_reference(total, d_model: int, options: dict, name: str):
    """posenc.encode of the exact positions, when they are float64 numbers (else None)."""
    flat = total.reshape(-1).tolist()
    if all(isinstance(v, float) or float(v) == v for v in flat):
        wide = np.array([float(v) for v in flat], dtype=np.float64).reshape(total.shape)
        return posenc.encode(wide, d_model, **options, dtype=name)
    return None


def unoriented(pe: np.ndarray, batch_first: bool, shape: tuple) -> np.ndarray:
    """The module's encoding (arranged against x) back in the shape of its positions."""
    if batch_first:
        return np.broadcast_to(pe, (*shape, pe.shape[-1]))
    return pe[:, 0] if len(shape) == 1 else np.swapaxes(pe, 0, 1)


MODULE_OPTIONS = [{}, {"shift": 1, "layout": "sin_cos"}, {"base": 100.0, "scale": 0.5, "odd": "literal"}]
X_SHAPES = [(3, 2), (2, 3), (1, 1), (0, 2), (2, 0), (4,), (2, 3, 4), (), "wrong width", "no width"]


def x_shape_for(choice, d_model: int) -> tuple:
    if choice == "wrong width":
        return (3, 2, d_model + 1)
    if choice == "no width":
        return ()
    return (*choice, d_model)


@fuzz(150)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_torch_module(data, rng):
    d_model = data.draw(st.integers(2, 9))
    batch_first = data.draw(st.sampled_from([None, True, False]))  # None: the default (False)
    bf = bool(batch_first)
    options = data.draw(st.sampled_from(MODULE_OPTIONS if d_model >= 4 else MODULE_OPTIONS[::2]))
    device = data.draw(st.sampled_from(["cpu", "cpu", "meta"]))
    x_dtype = data.draw(st.sampled_from([*X_DTYPES, torch.int64, torch.complex64]))
    x_shape = x_shape_for(data.draw(st.sampled_from(X_SHAPES)), d_model)
    x = torch.randn(x_shape, generator=torch.Generator().manual_seed(1)).to(x_dtype).to(device)
    seq = (x_shape[-2] if bf else x_shape[0]) if len(x_shape) >= 2 else 1
    batch_shape = tuple(x_shape[:-2]) if bf else x_shape[1:2]
    p_kind = data.draw(st.sampled_from(["none", "none", "seq", "batch", "wrong", "list"]))
    p_arg = p_np = None
    if p_kind != "none":
        shape = {"seq": (seq,), "batch": (*batch_shape, seq), "wrong": (seq + 1,), "list": (seq,)}[p_kind]
        p_tensor, p_np = data.draw(torch_positions(shapes=[shape]))
        if p_np is None:
            p_np = np.zeros(shape, dtype=np.complex64 if p_tensor.is_complex() else np.bool_)
        p_arg = p_tensor.to(device)
        if p_kind == "list" and p_tensor.dtype == torch.int64:
            p_arg = p_tensor.tolist()
    if data.draw(st.booleans()):
        offset = o_np = data.draw(st.sampled_from(OFFSETS))
    else:
        o_dtype = data.draw(
            st.sampled_from(
                [
                    torch.int64,
                    torch.int32,
                    torch.int8,
                    torch.uint8,
                    torch.int16,
                    torch.uint16,
                    torch.float32,
                    torch.bool,
                ]
            )
        )
        o_shape = data.draw(st.sampled_from([(), batch_shape[:1] or (1,), (3, 3)]))
        o_values = data.draw(
            st.lists(
                st.sampled_from([0, 1, 7, 127, 2**31 - 5, -1, 2**31]),
                min_size=math.prod(o_shape),
                max_size=math.prod(o_shape),
            )
        )
        if o_dtype == torch.bool:
            o_np = np.array(o_values, dtype=np.int64).reshape(o_shape).astype(bool)
        elif o_dtype.is_floating_point:
            o_np = np.array(o_values, dtype=np.float32).reshape(o_shape)
        else:
            info = torch.iinfo(o_dtype)
            o_np = np.array(
                [min(max(v, int(info.min)), int(info.max)) for v in o_values], dtype=np.int64
            ).reshape(o_shape)
        offset = torch.from_numpy(o_np).to(o_dtype).to(device)
    module = pt.SinusoidalPositionalEncoding(
        d_model, **options, **({} if batch_first is None else {"batch_first": batch_first})
    )
    if x_dtype not in X_DTYPES:
        bad, total = ["x must", "dtype"], None
    else:
        bad, total = module_expectation(x_shape, d_model, bf, p_np, o_np, read_values=device == "cpu")
    name = TORCH_OUT.get(x_dtype)
    names = (
        OFFSET_NAMES if bad is None else bad + (["positions", "offset"] if bad and bad[0] != "x must" else [])
    )

    def check(y):
        assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.device == x.device
        assert tuple(y.shape) == tuple(x.shape), (y.shape, x.shape)
        if device == "meta":
            return
        want = module_reference(total, d_model, options, name)
        if want is None:  # exact positions beyond float64: checked against mpmath
            pe = torch_values(module.encoding_for(x, p_arg, offset=offset))
            got = unoriented(pe, bf, total.shape)
            spot_check(got, total, d_model, options=reference_options(options), fmt=name, rng=rng, samples=3)
            return
        pe = oriented(want, bf)
        pe = (
            torch.from_numpy(pe.view(np.int16)).view(torch.bfloat16)
            if name == "bfloat16"
            else torch.from_numpy(pe)
        )
        assert same_bits(torch_values(y), torch_values(x + pe)), (
            "differs from x + posenc.encode(positions + offset)"
        )

    right_value_or_clear_error(
        lambda: module(x, p_arg, offset=offset),
        valid=None if bad is None else not bad,
        names=names,
        check=check,
    )


@fuzz(60)
@given(
    num_embeddings=st.sampled_from([10, 10, 1, 0, -1, 2.0, True]),
    d_model=st.sampled_from([4, 4, 6, 3, 0, 2**20 + 1]),
    padding_idx=st.sampled_from([None, None, 0, 1, 9, 10, -1, -10, -11, 2**31, True, 1.5, "1", np.int64(1)]),
    embed_scale=st.sampled_from([None, None, 1.0, 0.5, 0, -1.0, NAN, INF, True, "2", 10**400]),
    from_padding=st.sampled_from([False, False, True]),
    seed=st.integers(0, 3),
)
def test_torch_token_and_position_embedding(
    num_embeddings, d_model, padding_idx, embed_scale, from_padding, seed
):
    bad = []
    n_ok = isinstance(num_embeddings, int) and not isinstance(num_embeddings, bool)
    if not n_ok or num_embeddings < 1:
        bad.append("num_embeddings")
    if option_problems(d_model):
        bad.append("d_model")
    if padding_idx is not None:
        if (
            not isinstance(padding_idx, int | np.integer)
            or isinstance(padding_idx, bool)
            or (n_ok and not -num_embeddings <= padding_idx < num_embeddings)
        ):
            bad.append("padding_idx")
    elif from_padding:
        bad.append("padding_idx")
    if embed_scale is not None and (option_problems(4, scale=embed_scale) or embed_scale > 2**20):
        bad.append("embed_scale")
    valid = not bad if ("num_embeddings" not in bad or num_embeddings >= 1) else None
    if n_ok and num_embeddings == 0 and bad == ["num_embeddings"]:
        valid = None  # nn.Embedding(0, d) is a (useless) valid module in PyTorch

    def build():
        torch.manual_seed(0)
        return pt.TokenAndPositionEmbedding(
            num_embeddings,
            d_model,
            padding_idx=padding_idx,
            embed_scale=embed_scale,
            positions_from_padding=from_padding,
        )

    module = right_value_or_clear_error(build, valid=valid, names=bad or ["num_embeddings"])
    if isinstance(module, Exception) or bad:
        return
    ids = torch.randint(0, num_embeddings, (2, 5), generator=torch.Generator().manual_seed(seed))
    if padding_idx is not None:
        ids[0, :2] = padding_idx % num_embeddings
    scale = math.sqrt(d_model) if embed_scale is None else float(embed_scale)
    if from_padding:
        ids_np = ids.numpy()
        pos = positions.make_positions(ids_np, padding_idx % num_embeddings)
    else:
        pos = np.broadcast_to(np.arange(5), (2, 5))
    want = module.embedding(ids) * scale + torch.from_numpy(posenc.encode(pos, d_model))

    def check(y):
        assert same_bits(y.detach().numpy(), want.detach().numpy()), (
            "Embedding(ids) * scale + PE(positions) differs"
        )

    right_value_or_clear_error(lambda: module(ids), valid=True, check=check)
    right_value_or_clear_error(
        lambda: module(ids[0]), valid=False, names=["ids"]
    )  # (seq,) is not (batch, seq)


@fuzz(60)
@given(
    num_channels=st.sampled_from([4, 5, 8, 320, 1, 0, 2.0, 2**20 + 1]),
    flip=st.booleans(),
    downscale=st.sampled_from([0, 1, 0.5, -1, 3, NAN, "1"]),
    scale=st.sampled_from([1, 2.5, 0, -1, INF]),
    max_period=st.sampled_from([10000, 100, 1, 0.5, NAN, 1e300]),
    timesteps=torch_positions(shapes=[(3,), (0,), (), (2, 2)]),
    device=st.sampled_from(["cpu", "cpu", "meta"]),
)
def test_torch_timesteps(num_channels, flip, downscale, scale, max_period, timesteps, device):
    tensor, values = timesteps
    options = {
        "base": max_period,
        "shift": downscale,
        "scale": scale,
        "layout": "cos_sin" if flip else "sin_cos",
    }
    d_ok = not option_problems(num_channels)
    if (
        d_ok
        and num_channels // 2 == 1
        and not isinstance(downscale, str)
        and downscale == downscale
        and downscale >= 1
    ):
        options["shift"] = 0  # one frequency: ω_0 = scale whatever the denominator (tensor2tensor's rule)
    bad = option_problems(num_channels, **options)
    built = right_value_or_clear_error(
        lambda: pt.Timesteps(num_channels, flip, downscale, scale=scale, max_period=max_period),
        valid=not bad,
        names=[*bad, "num_channels", "max_period", "downscale_freq_shift", "flip"],
    )
    if isinstance(built, Exception):
        return
    good = (
        tensor.dim() == 1
        and values is not None
        and (device == "meta" or _finite_in_range(values.astype(np.float64)))
    )

    def check(result):
        assert result.dtype == torch.float32 and tuple(result.shape) == (len(tensor), num_channels)
        if device == "cpu":
            want = posenc.encode(values.astype(np.float64), num_channels, **options, dtype="float32")
            assert same_bits(result.numpy(), want), "Timesteps differs from posenc.encode of the timesteps"

    right_value_or_clear_error(
        lambda: built(tensor.to(device)), valid=good, names=["timesteps", "positions"], check=check
    )


@fuzz(40)
@given(
    pe_shape=st.sampled_from(
        [(1, 20, 8), (20, 1, 8), (1, 20, 6), (20, 8), (), (1, 0, 8), (2, 20, 8), (1, 1, 1, 8)]
    ),
    change=st.sampled_from(
        ["none", "none", "scale 1.01", "nan", "inf", "one element", "tutorial", "float64", "int"]
    ),
    batch_first=st.booleans(),
)
def test_torch_load_state_dict(pe_shape, change, batch_first):
    module = pt.SinusoidalPositionalEncoding(8, batch_first=batch_first)
    rows = math.prod(pe_shape[:-1]) if len(pe_shape) >= 2 else 0
    exact = torch.from_numpy(posenc.table(max(rows, 1), pe_shape[-1] if pe_shape else 8))[:rows]
    if change == "tutorial":
        exact = tutorial_table(rows, pe_shape[-1]) if pe_shape else exact
    pe = exact.reshape(pe_shape) if pe_shape else torch.tensor(1.0)
    if change == "scale 1.01":
        pe = pe * 1.01
    elif change in ("nan", "inf") and pe.numel():
        pe = pe.clone().reshape(-1)
        pe[-1] = float(change)
        pe = pe.reshape(pe_shape)
    elif change == "one element" and pe.numel() > 20:
        pe = pe.clone().reshape(-1)
        pe[-3] += 0.01
        pe = pe.reshape(pe_shape)
    elif change == "float64":
        pe = pe.double()
    elif change == "int":
        pe = pe.to(torch.int32)
    good_shape = len(pe_shape) == 3 and 1 in pe_shape[:2] and pe_shape[-1] == 8
    changed = (change in ("scale 1.01", "nan", "inf") and rows) or (
        change == "one element" and pe.numel() > 20
    )
    changed |= change == "int" and rows > 1  # truncated to integers: no encoding
    valid = good_shape and not changed
    if rows == 0 and good_shape:
        valid = None  # an empty table: nothing to compare, taken or refused
    if change == "scale 1.01" and rows <= 1:
        valid = None  # row 0 alone, (0, 1, 0, 1, ...) * 1.01: taken or refused

    def check(result):
        assert not module.state_dict(), "the checked pe must be dropped, not kept in the module's state"
        y = module(torch.zeros(3, 1, 8) if not batch_first else torch.zeros(1, 3, 8))
        assert same_bits(y.reshape(3, 8).numpy(), posenc.table(3, 8)), "the module's encoding changed"

    right_value_or_clear_error(
        lambda: module.load_state_dict({"pe": pe}), valid=valid, names=["pe"], check=check
    )


def _as_array(value):
    """``value`` as NumPy reads it (an empty list as int64), or None where NumPy refuses it (ragged, ...)."""
    with contextlib.suppress(ValueError, TypeError):
        array = np.asarray(value)
        return array.astype(np.int64) if array.size == 0 and not isinstance(value, np.ndarray) else array
    return None


def _the_same_on_torch(call, got, bad):
    """The torch twin of a positions helper: the NumPy helper's value (``got``) or the same clear error."""
    right_value_or_clear_error(
        call,
        valid=not bad,
        names=bad,
        check=lambda result: (
            None if isinstance(got, Exception) else np.testing.assert_array_equal(result.numpy(), got)
        ),
    )


@fuzz(80)
@given(
    mask=st.one_of(
        st.builds(
            lambda values, dtype, shape: (
                np.array(
                    values[: math.prod(shape)] + [1] * (math.prod(shape) - len(values[: math.prod(shape)])),
                    dtype=np.int64,
                )
                .reshape(shape)
                .astype(dtype)
            ),
            st.lists(st.sampled_from([0, 1, 1, 2, -1, 255]), max_size=12),
            st.sampled_from([np.bool_, np.int64, np.int8, np.uint8, np.float32, np.int32]),
            st.sampled_from([(5,), (2, 5), (0,), (2, 0), (), (1, 2, 3)]),
        ),
        st.sampled_from([[], [[]], [1, 0, 1], [True, False], None, "1", [[1, 0], [1]]]),
    ),
    start=st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -(2**31), True, 1.0, None]),
    pad_position=st.sampled_from([0, -1, 7, 2**31, True, 1.5]),
)
def test_positions_from_attention_mask(mask, start, pad_position):
    array = _as_array(mask)
    bad = []
    if array is None or array.dtype.kind not in "biu" or array.ndim == 0 or not np.isin(array, [0, 1]).all():
        bad.append("attention_mask")
    for name, value in (("start", start), ("pad_position", pad_position)):
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) < value < 2**31:
            bad.append(name)
    want = None
    if not bad:
        m = array.astype(bool)
        want = np.where(m, np.cumsum(m, axis=-1) - 1 + start, pad_position)

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.from_attention_mask(mask, start=start, pad_position=pad_position),
        valid=not bad,
        names=bad,
        check=check,
    )
    if array is not None and array.dtype.kind in "biu" and array.dtype != np.uint16:
        _the_same_on_torch(
            lambda: pt.from_attention_mask(
                torch.from_numpy(array.copy()), start=start, pad_position=pad_position
            ),
            got,
            bad,
        )


@fuzz(80)
@given(
    cu=st.one_of(
        st.lists(st.integers(0, 6), min_size=0, max_size=5).map(
            lambda steps: [0, *np.cumsum(steps).tolist()]
        ),
        st.sampled_from(
            [
                [],
                [1, 3],
                [0, 3, 2],
                [0, 2**31],
                [[0, 1]],
                [0.0, 2.0],
                None,
                [0, -1],
                np.array([0, 3], np.uint8),
                np.array([0, 3], np.int8),
                [True, True],
            ]
        ),
    ),
    start=st.sampled_from([0, 1, -5, 2**31 - 1, 2**31, True, 1.0]),
    total=st.sampled_from([None, None, "auto", 0, -1, 2**31, True, 3.0]),
)
def test_positions_from_cu_seqlens(cu, start, total):
    if total == "auto":
        total = cu[-1] if isinstance(cu, list) and cu and isinstance(cu[-1], int) else 0
    array = _as_array(cu)
    bad = []
    if (
        array is None
        or array.dtype.kind not in "iu"
        or array.ndim != 1
        or not array.size
        or array[0] != 0
        or (np.diff(array.astype(np.int64)) < 0).any()
        or array[-1] >= 2**31
    ):
        bad.append("cu_seqlens")
    if not isinstance(start, int) or isinstance(start, bool) or not -(2**31) < start < 2**31:
        bad.append("start")
    if total is not None and (
        not isinstance(total, int) or isinstance(total, bool) or (not bad and total != array[-1])
    ):
        bad.append("total")
    want = None
    if not bad:
        want = np.concatenate(
            [np.arange(b - a) + start for a, b in zip(array[:-1].tolist(), array[1:].tolist(), strict=True)]
            + [np.zeros(0, np.int64)]
        )

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.from_cu_seqlens(cu, start=start, total=total), valid=not bad, names=bad, check=check
    )
    if array is not None and array.dtype.kind in "iu":
        _the_same_on_torch(
            lambda: pt.from_cu_seqlens(torch.from_numpy(array.copy()), start=start, total=total), got, bad
        )


@fuzz(80)
@given(
    ids=st.one_of(
        st.builds(
            lambda values, dtype, shape: np.resize(np.array(values or [1], dtype=np.int64), shape).astype(
                dtype
            ),
            st.lists(st.sampled_from([0, 1, 2, 5, 127, 2**31]), max_size=10),
            st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.float32, np.bool_]),
            st.sampled_from([(5,), (2, 5), (0,), (), (2, 0)]),
        ),
        st.sampled_from([[], [[1, 2], [3]], "12", None]),
    ),
    padding_idx=st.sampled_from([1, 0, -1, 2**31 - 1, 2**31, True, 1.0, None]),
    past=st.sampled_from([0, 3, -1, 2**31, True]),
)
def test_positions_make_positions(ids, padding_idx, past):
    array = _as_array(ids)
    bad = []
    if array is None or array.dtype.kind not in "iu" or array.ndim == 0:
        bad.append("ids")
    if (
        not isinstance(padding_idx, int)
        or isinstance(padding_idx, bool)
        or not -(2**31) < padding_idx < 2**31
    ):
        bad.append("padding_idx")
    if not isinstance(past, int) or isinstance(past, bool) or not 0 <= past < 2**31:
        bad.append("past_key_values_length")
    want = None
    if not bad:
        mask = array != padding_idx
        want = (np.cumsum(mask, axis=-1) + past) * mask + padding_idx

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.make_positions(ids, padding_idx, past_key_values_length=past),
        valid=not bad,
        names=bad,
        check=check,
    )
    if array is not None and array.dtype.kind in "iu":
        _the_same_on_torch(
            lambda: pt.make_positions(
                torch.from_numpy(array.copy()), padding_idx, past_key_values_length=past
            ),
            got,
            bad,
        )


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
JAX_OUT = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16, "float64": jnp.float64}


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


@fuzz(120)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_jax_encode(data, rng):
    d_model = data.draw(st.one_of(st.integers(2, 12), st.sampled_from([1, 2**20 + 1, 4.0])))
    options = data.draw(core_options(d_model))
    name = data.draw(st.sampled_from([*JAX_OUT, "int8", "f4"]))
    p, values, ok = data.draw(jax_positions())
    bad = option_problems(d_model, **options, dtype=name)
    if name == "float64" and not X64:
        bad += ["float64", "x64"]
    ro = None if bad else reference_options(options)
    risky = ro is not None and may_underflow(int(d_model), ro["base"], ro["shift"], ro["scale"], ro["odd"])

    def check(result):
        assert isinstance(result, jax.Array) and result.dtype == JAX_OUT[name]
        assert result.shape == (*np.shape(values), int(d_model))
        _is_the_core_encoding(np.asarray(result), values, d_model, options, name, rng)

    right_value_or_clear_error(
        lambda: pj.encode(p, d_model, **options, dtype=JAX_OUT.get(name, name)),
        valid=False if bad or ok is False else (None if risky or ok is None else True),
        names=bad
        + ([] if ok else ["positions", *SIZE_WORDS])
        + (["frequency", "underflow"] if risky else []),
        check=check,
    )


@fuzz(60)
@given(
    d_model=st.one_of(st.integers(2, 10), st.sampled_from([0, 2**20 + 1])),
    length=st.sampled_from(LENGTHS),
    start=st.one_of(
        st.sampled_from([*STARTS, 2**33, np.int64(2**33)]), st.integers(-(2**31 - 1), 2**31 - 40)
    ),
    name=st.sampled_from(["float32", "bfloat16", "float16", "float64"]),
)
def test_jax_table(d_model, length, start, name):
    bad = option_problems(d_model) + table_problems(length, start)
    if name == "float64" and not X64:
        bad += ["float64", "x64"]

    def check(result):
        want = posenc.table(int(length), int(d_model), start=int(start), dtype=name)
        assert same_bits(np.asarray(result), want)

    right_value_or_clear_error(
        lambda: pj.table(length, d_model, start=start, dtype=JAX_OUT[name]),
        valid=not bad,
        names=bad,
        check=check,
    )


@fuzz(100)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_jax_module(data, rng):
    d_model = data.draw(st.integers(2, 9))
    batch_first = data.draw(st.sampled_from([None, True, False]))  # None: the JAX module's default (True)
    bf = batch_first is not False
    options = data.draw(st.sampled_from(MODULE_OPTIONS if d_model >= 4 else MODULE_OPTIONS[::2]))
    x_dtype = data.draw(st.sampled_from([jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32]))
    x_shape = x_shape_for(data.draw(st.sampled_from(X_SHAPES)), d_model)
    x = jnp.asarray(np.random.default_rng(1).standard_normal(x_shape), dtype=x_dtype)
    seq = (x_shape[-2] if bf else x_shape[0]) if len(x_shape) >= 2 else 1
    batch_shape = tuple(x_shape[:-2]) if bf else x_shape[1:2]
    p_kind = data.draw(st.sampled_from(["none", "none", "seq", "batch", "wrong"]))
    p = p_np = None
    if p_kind != "none":
        shape = {"seq": (seq,), "batch": (*batch_shape, seq), "wrong": (seq + 1,)}[p_kind]
        p, p_np, _ = data.draw(jax_positions(shapes=[shape]))
        if p_np is None or p_np.dtype.kind == "O":  # not an array of numbers: refused as positions
            p_np = np.zeros((), np.bool_)
    if data.draw(st.booleans()):
        offset = o_np = data.draw(st.sampled_from(OFFSETS))
    else:
        o_dtype = data.draw(st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.float32, np.bool_]))
        o_shape = data.draw(st.sampled_from([(), batch_shape[:1] or (1,), (3, 3)]))
        o_values = data.draw(
            st.lists(
                st.sampled_from([0, 1, 7, 127, 2**31 - 5, -1, 2**31]),
                min_size=math.prod(o_shape),
                max_size=math.prod(o_shape),
            )
        )
        o_np = np.array(o_values, dtype=np.int64).reshape(o_shape)
        if o_dtype not in (np.float32, np.bool_):
            info = np.iinfo(o_dtype)
            o_np = np.clip(o_np, info.min, info.max)
        o_np = o_np.astype(o_dtype)
        offset = o_np if data.draw(st.booleans()) or o_dtype == np.int64 else jnp.asarray(o_np)
        o_np = np.asarray(offset)
    module = pj.SinusoidalPositionalEncoding(
        d_model, **options, **({} if batch_first is None else {"batch_first": batch_first})
    )
    if x_dtype == jnp.int32:
        bad, total = ["x must", "dtype"], None
    else:
        bad, total = module_expectation(x_shape, d_model, bf, p_np, o_np)
    if p_np is not None and p_np.dtype == BFLOAT16 and not isinstance(p, jax.Array) and not bad:
        bad = None  # NumPy (ml_dtypes) bfloat16 positions: taken or refused, like the core
    name = np.dtype(x_dtype).name

    def check(y):
        assert isinstance(y, jax.Array) and y.dtype == x.dtype and y.shape == x.shape
        want = module_reference(total, d_model, options, name)
        if want is None:
            got = unoriented(np.asarray(module.encoding_for(x, p, offset=offset)), bf, total.shape)
            spot_check(got, total, d_model, options=reference_options(options), fmt=name, rng=rng, samples=3)
            return
        assert same_bits(np.asarray(y), np.asarray(x + jnp.asarray(oriented(want, bf)))), (
            "differs from x + posenc.encode"
        )

    right_value_or_clear_error(
        lambda: module(x, p, offset=offset),
        valid=None if bad is None else not bad,
        names=["positions", "offset", "x must", "shape", "2**31"]
        if bad is None
        else bad + (["positions", "offset"] if bad and bad[0] != "x must" else []),
        check=check,
    )


# --- grids ---------------------------------------------------------------------------------------------

GRID_SHAPES = [
    (2, 3),
    (4,),
    (2, 2, 2),
    (1, 5),
    (),
    (0, 4),
    (-1, 2),
    (2**40, 2**40),
    (2**40,),
    4,
    None,
    "ab",
    (2.0, 3),
    (True, 2),
]


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= minimum


@fuzz(120)
@given(
    shape=st.sampled_from(GRID_SHAPES),
    d_model=st.sampled_from([8, 8, 12, 16, 6, 7, 0, 2**20 + 1]),
    order=st.sampled_from([None, None, (1, 0), (0, 0), (2,), (0, 1, 2), (2, 0, 1), 1, (0, "1")]),
    widths=st.sampled_from([None, None, (4, 4), (2, 6), (3, 5), (8,), (4, 4, 4), (4.0, 4), 8, (0, 8)]),
    group=st.sampled_from(["axis", "axis", "function", "x", None]),
    with_positions=st.sampled_from([False, False, "good", "nan", "short", "int", "2**31"]),
    layout=st.sampled_from(["sin_cos", "interleaved", "cos_sin", "bad"]),
    dtype=st.sampled_from([None, "float64", "bfloat16", "int8"]),
)
def test_grid(shape, d_model, order, widths, group, with_positions, layout, dtype):
    bad = []
    sizes = None
    if isinstance(shape, tuple) and shape and all(_is_int(s, 1) for s in shape):
        sizes = shape
    else:
        bad.append("shape")
    ndim = len(sizes) if sizes else 0
    if option_problems(d_model, layout=layout if layout != "bad" else None, dtype=dtype or "float32"):
        bad += option_problems(d_model, layout=layout if layout != "bad" else None, dtype=dtype or "float32")
    if (
        sizes
        and order is not None
        and not (
            isinstance(order, tuple)
            and sorted(map(str, order)) == [str(i) for i in range(ndim)]
            and all(isinstance(o, int) for o in order)
        )
    ):
        bad.append("order")
    if sizes and not option_problems(d_model):
        if widths is None:
            if d_model % (2 * ndim):
                bad.append("d_model")
        elif not (
            isinstance(widths, tuple)
            and len(widths) == ndim
            and all(_is_int(w, 2) and w % 2 == 0 for w in widths)
            and sum(widths) == d_model
        ):
            bad.append("widths")
    if group not in ("axis", "function"):
        bad.append("group")
    axis_positions = None
    if with_positions and sizes and max(sizes) < 2**20:
        axis_positions = [np.arange(s, dtype=np.float64) * 0.5 for s in sizes]
        if with_positions == "nan":
            axis_positions[0][0] = NAN
        elif with_positions == "2**31":
            axis_positions[-1][-1] = 2.0**31
        elif with_positions == "short":
            axis_positions[0] = axis_positions[0][1:]
        elif with_positions == "int":
            axis_positions = 5
        if with_positions != "good":
            bad.append("positions")
    if sizes and not bad and math.prod(sizes) * d_model > 2**24:
        bad += SIZE_WORDS
    order_ = tuple(range(ndim)) if order is None else order
    options = {} if layout == "bad" else {"layout": layout}

    def check(result):
        assert result.shape == (*sizes, d_model) and result.dtype.name == (dtype or "float32")
        ws = widths or (d_model // ndim,) * ndim
        pos = axis_positions or [np.arange(s) for s in sizes]
        start = 0
        for k, axis in enumerate(order_):
            block = posenc.encode(
                pos[axis],
                ws[k],
                layout="sin_cos" if group == "function" else layout,
                dtype=dtype or "float32",
            )
            index = [0] * ndim
            index[axis] = slice(None)
            got = result[tuple(index)]
            if group == "axis":
                assert same_bits(np.ascontiguousarray(got[:, start : start + ws[k]]), block), (
                    f"block {k} (axis {axis})"
                )
            else:
                h, half = start // 2, ws[k] // 2
                assert same_bits(
                    np.ascontiguousarray(got[:, h : h + half]), np.ascontiguousarray(block[:, :half])
                )
                assert same_bits(
                    np.ascontiguousarray(got[:, d_model // 2 + h : d_model // 2 + h + half]),
                    np.ascontiguousarray(block[:, half:]),
                )
            start += ws[k]

    right_value_or_clear_error(
        lambda: grids.grid(
            shape,
            d_model,
            order=order,
            widths=widths,
            group=group,
            positions=axis_positions,
            dtype=dtype,
            **options,
        ),
        valid=not bad,
        names=bad,
        check=check,
    )


def _grid_value_check(rows: int | None = None):
    def check(result):
        assert isinstance(result, np.ndarray) and result.size and np.isfinite(result.astype(np.float64)).all()
        assert np.abs(result.astype(np.float64)).max() <= 1.0

    return check


LIBRARY_GRIDS = {
    "mae_2d": (
        lambda a: grids.mae_2d(a["embed_dim"], a["size"], cls_token=a["flag"]),
        ["embed_dim", "grid_size", "d_model", "shape"],
    ),
    "diffusers_2d": (
        lambda a: grids.diffusers_2d(
            a["embed_dim"],
            a["size"],
            cls_token=a["flag"],
            extra_tokens=a["extra"],
            interpolation_scale=a["scale"],
            base_size=a["base_size"],
        ),
        ["embed_dim", "grid_size", "interpolation_scale", "base_size", "extra_tokens", "d_model", "shape"],
    ),
    "diffusers_3d": (
        lambda a: grids.diffusers_3d(
            a["embed_dim"],
            a["size"],
            a["temporal"],
            spatial_interpolation_scale=a["scale"],
            temporal_interpolation_scale=a["scale2"],
        ),
        ["embed_dim", "spatial_size", "temporal_size", "interpolation_scale", "d_model", "shape"],
    ),
    "timm_2d": (
        lambda a: grids.timm_2d(
            a["size2"],
            a["embed_dim"],
            temperature=a["base_size"] if a["base_size"] != 16 else 10000.0,
            reverse_coord=a["flag"],
            interleave_sin_cos=a["flag2"],
        ),
        ["feat_shape", "dim", "temperature", "base", "d_model", "shape"],
    ),
    "positional_encodings_nd": (
        lambda a: grids.positional_encodings_nd(a["size2"], a["embed_dim"]),
        ["shape", "channels", "d_model"],
    ),
}


@pytest.mark.parametrize("name", list(LIBRARY_GRIDS))
@fuzz(40)
@given(
    embed_dim=st.sampled_from([16, 16, 32, 8, 12, 6, 0, -16, "16", 16.0, 2**20 + 16]),
    size=st.sampled_from([2, 2, 3, (2, 3), 1, 0, -1, 2.0, None, (2,), (2, 0), 2**40]),
    size2=st.sampled_from([(2, 3), (2, 2), (4,), (2, 2, 2), (), (0, 2), 4, None, (2**40, 2)]),
    temporal=st.sampled_from([2, 1, 0, -1, 2.5, None]),
    scale=st.sampled_from([1.0, 1.0, 0.5, 2, 0, -1, NAN, INF, "1"]),
    scale2=st.sampled_from([1.0, 1.0, 0.5, 0, NAN]),
    base_size=st.sampled_from([16, 16, 8, 1, 0, -16, 1.5, 10**400, None]),
    extra=st.sampled_from([0, 1, 2, -1, 1.5]),
    flag=st.booleans(),
    flag2=st.booleans(),
)
def test_library_grids(name, **arguments):
    call, names = LIBRARY_GRIDS[name]
    right_value_or_clear_error(lambda: call(arguments), names=names, check=_grid_value_check())


# --- sharding -------------------------------------------------------------------------------------------

LENGTHS_SHARD = [
    0,
    8,
    12,
    16,
    7,
    -1,
    True,
    8.0,
    None,
    2**40,
    2**31 + 8,
]  # 2**31 itself is valid but needs 16 GiB
WORLD = [1, 2, 4, 3, 0, -1, True, 2.0, 10**12]


@fuzz(120)
@given(
    length=st.sampled_from(LENGTHS_SHARD),
    world_size=st.sampled_from(WORLD),
    rank=st.sampled_from([0, 1, 3, -1, 4, True, 1.0, None]),
    scheme=st.sampled_from(["contiguous", "zigzag", "ring", None]),
    start=st.sampled_from([0, 5, -3, 2**31 - 4, 2**31, True]),
)
def test_sharding(length, world_size, rank, scheme, start):
    bad = []
    if not _is_int(length, 0) or length > 2**31:  # sequences are encoded: positions < 2**31
        bad.append("length")
    if not _is_int(world_size, 1) or world_size > 2**31:
        bad.append("world_size")
    if scheme not in ("contiguous", "zigzag"):
        bad.append("scheme")
    if not bad:
        parts = world_size * (1 if scheme == "contiguous" else 2)
        if length % parts:
            bad += ["length", "world_size"]
    bad_rank = bad + ([] if _is_int(rank, 0) and not bad and rank < world_size else ["rank"])

    def permutation_check(order):
        assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(length))

    order = right_value_or_clear_error(
        lambda: sharding.permutation(length, world_size=world_size, scheme=scheme),
        valid=not bad,
        names=bad,
        check=permutation_check,
    )

    def indices_check(indices):
        assert np.array_equal(
            indices, order[rank * (length // world_size) : (rank + 1) * (length // world_size)]
        )

    indices = right_value_or_clear_error(
        lambda: sharding.shard_indices(length, world_size=world_size, rank=rank, scheme=scheme),
        valid=not bad_rank,
        names=bad_rank,
        check=indices_check,
    )
    bad_start = bad_rank + (
        []
        if _is_int(start, -(2**31 - 1)) and (bad_rank or not length or start + length - 1 < 2**31)
        else ["start"]
    )
    right_value_or_clear_error(
        lambda: sharding.shard_positions(
            length, world_size=world_size, rank=rank, scheme=scheme, start=start
        ),
        valid=not bad_start,
        names=bad_start,
        check=lambda ids: np.testing.assert_array_equal(ids, indices + start),
    )
    if not bad_rank and length <= 64:
        x = np.arange(3 * length).reshape(3, length)
        shards = [
            sharding.shard(x, axis=1, world_size=world_size, rank=r, scheme=scheme) for r in range(world_size)
        ]
        right_value_or_clear_error(
            lambda: sharding.unshard(shards, axis=-1, scheme=scheme),
            valid=True,
            check=lambda y: np.testing.assert_array_equal(y, x),
        )


@fuzz(60)
@given(
    shards=st.sampled_from(
        [
            [np.zeros((2, 4))] * 2,
            [np.zeros(4), np.zeros(3)],
            [],
            np.zeros((2, 4)),
            "ab",
            [1, 2],
            None,
            [[1, 2], [3, 4]],
            ([0, 1], [2, 3]),
        ]
    ),
    axis=st.sampled_from([0, 1, -1, 2, -3, True, 0.0, None]),
    scheme=st.sampled_from(["contiguous", "zigzag", "x"]),
)
def test_unshard(shards, axis, scheme):
    right_value_or_clear_error(
        lambda: sharding.unshard(shards, axis=axis, scheme=scheme),
        names=["shards", "axis", "scheme", "shape", "length"],
        check=lambda y: None,
    )


# --- presets, porting, analysis ------------------------------------------------------------------------

PRESET_PARAMETERS = {
    "padding_idx": [1, 0, -1, 2**31, True, 1.5, None],
    "padding": [1],
    "base": [100.0, 1, NAN, 10**400, "1"],
    "max_wavelength": [10000.0, 0.5],
    "min_timescale": [1.0, 0, -1, INF],
    "max_timescale": [1e4, 1.0, 0.5, 10**400],
    "flip_sin_to_cos": [True, False, "yes"],
    "downscale_freq_shift": [0, 1, 1e9, NAN],
    "scale": [1, 0, 2**21],
    "max_period": [10000, 1],
    "bogus": [1],
}


@fuzz(150)
@given(
    name=st.sampled_from([*presets.names(), "nope", "", None, "Fairseq"]),
    parameters=st.dictionaries(st.sampled_from(list(PRESET_PARAMETERS)), st.integers(0, 6), max_size=2),
    d_model=st.sampled_from([8, 9, 2, 3, 64]),
    start=st.sampled_from([0, 1, 3, -2]),
)
def test_presets(name, parameters, d_model, start):
    kwargs = {key: PRESET_PARAMETERS[key][i % len(PRESET_PARAMETERS[key])] for key, i in parameters.items()}
    factory = getattr(presets, "_FACTORIES", {}).get(name)
    import inspect

    accepted = set(inspect.signature(factory).parameters) if factory else set()
    unknown = [key for key in kwargs if key not in accepted]
    names = ["preset", "name", *kwargs, *unknown]
    preset = right_value_or_clear_error(lambda: presets.get(name, **kwargs), names=names)
    if unknown and factory and isinstance(preset, TypeError):
        message = str(preset)
        assert not any(f"_{n.replace('-', '_')}" in message for n in presets.names()), (
            f"a private name in {message!r}"
        )
        assert all(a in message for a in accepted), (
            f"the valid arguments {sorted(accepted)} are not all named: {message!r}"
        )
    if isinstance(preset, Exception):
        return

    def check(values):
        options = preset.options
        if d_model // 2 == 1 and options["shift"] >= 1:
            options["shift"] = 0.0
        want = posenc.table(5, d_model, start=start, **options, dtype="float64")
        if preset.padding_idx is not None and start <= preset.padding_idx < start + 5:
            want[preset.padding_idx - start] = 0
        assert same_bits(values, want), "preset.table differs from posenc.table with preset.options"

    right_value_or_clear_error(
        lambda: preset.table(5, d_model, start=start, dtype="float64"),
        names=["d_model", "odd", "shift", "base", "frequency", "underflow", "scale"],
        check=check,
    )


@fuzz(80)
@given(
    table=st.sampled_from(
        [
            "good",
            "sin_cos",
            "empty rows",
            "1 column",
            "1-D",
            "3-D",
            "nan",
            "inf",
            "int",
            "object",
            "complex",
            "bool",
            "huge values",
            "zeros",
            "random",
            "bfloat16",
            "float16 long",
            "list",
            "scalar",
        ]
    ),
    tolerance=st.sampled_from([None, None, 1e-3, 0, -1, NAN, INF, "1"]),
    candidates=st.sampled_from([3, 1, 0, -1, 2.0, 10**6]),
)
def test_identify(table, tolerance, candidates):
    rng = np.random.default_rng(0)
    stored = {
        "good": posenc.table(20, 8),
        "sin_cos": posenc.table(20, 8, shift=1, layout="sin_cos"),
        "empty rows": np.zeros((0, 8), np.float32),
        "1 column": np.zeros((5, 1), np.float32),
        "1-D": np.zeros(8, np.float32),
        "3-D": posenc.table(20, 8)[None],
        "nan": np.full((4, 8), NAN),
        "inf": np.where(np.eye(4, 8) > 0, INF, 0.0),
        "int": posenc.table(20, 8).astype(np.int32),
        "object": np.array([[1, None]], dtype=object),
        "complex": posenc.table(4, 8).astype(np.complex64),
        "bool": np.ones((4, 8), bool),
        "huge values": np.full((4, 8), 1e300),
        "zeros": np.zeros((10, 8)),
        "random": rng.standard_normal((30, 16)),
        "bfloat16": posenc.table(20, 8, dtype="bfloat16"),
        "float16 long": posenc.table(3000, 4, dtype="float16"),
        "list": posenc.table(3, 4).tolist(),
        "scalar": 1.0,
    }[table]

    def check(matches):
        assert isinstance(matches, list) and all(isinstance(m, porting.Match) for m in matches)
        if table in ("good", "sin_cos") and tolerance is None and candidates == 3:
            assert matches and matches[0].matches, matches

    right_value_or_clear_error(
        lambda: porting.identify(stored, tolerance=tolerance, candidates=candidates),
        names=["table", "tolerance", "candidates", "shape", "dtype"],
        check=check,
    )


@fuzz(60)
@given(
    shape=st.sampled_from([(4, 8), (4, 7), (0, 8), (8,), (2, 3, 8), (), (4, 0)]),
    source=st.sampled_from([*LAYOUTS, "x", None]),
    target=st.sampled_from([*LAYOUTS, "x", None]),
    dtype=st.sampled_from([np.float32, np.float16, np.int32, object, np.complex64]),
)
def test_convert_layout(shape, source, target, dtype):
    values = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    bad = [n for n, v in (("source", source), ("target", target)) if v not in LAYOUTS]

    def check(result):
        assert result.shape == values.shape
        back = porting.convert_layout(result, target, source)
        assert np.array_equal(back, values), "convert_layout is not inverted by the reverse conversion"

    right_value_or_clear_error(
        lambda: porting.convert_layout(values, source, target),
        names=[*bad, "table", "layout", "shape", "dtype", "d_model"],
        check=check,
    )


ANALYSIS_LENGTHS = [0, 1, 3, 17, -1, True, 2.0, None, 2**40]
ANALYSIS_CALLS = {
    "max_magnitude": lambda a: analysis.max_magnitude(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "length_consistent": lambda a: analysis.length_consistent(
        a["length"], a["d_model"], start=a["start"], dtype=a["dtype"]
    ),
    "recomputes_identically": lambda a: analysis.recomputes_identically(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "collisions": lambda a: analysis.collisions(
        a["length"], a["d_model"], start=a["start"], dtype=a["dtype"], compute=a["compute"]
    ),
    "collision_horizon": lambda a: analysis.collision_horizon(
        a["d_model"], limit=a["length"], dtype=a["dtype"], compute=a["compute"]
    ),
    "uniqueness_margin": lambda a: analysis.uniqueness_margin(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "naive_table": lambda a: analysis.naive_table(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "shift_error": lambda a: analysis.shift_error(
        a["k"], a["length"], a["d_model"], start=a["start"], base=a["base"]
    ),
    "shift_matrix": lambda a: analysis.shift_matrix(a["k"], a["d_model"], base=a["base"], layout=a["layout"]),
    "closed_form_dot_product": lambda a: analysis.closed_form_dot_product(
        a["k"], a["d_model"], base=a["base"]
    ),
    "closed_form_distance": lambda a: analysis.closed_form_distance(a["k"], a["d_model"], base=a["base"]),
    "wavelengths": lambda a: analysis.wavelengths(a["d_model"], base=a["base"]),
    "wrap_length": lambda a: analysis.wrap_length(a["d_model"], base=a["base"]),
    "check": lambda a: analysis.check(
        a["length"], a["d_model"], base=a["base"], dtype=a["dtype"], compute=a["compute"]
    ),
}
ANALYSIS_NAMES = [
    "length",
    "d_model",
    "start",
    "base",
    "dtype",
    "compute",
    "limit",
    "k",
    "offsets",
    "positions",
    "layout",
    "shift",
    "output",
    "memory",
    "GiB",
    "2**31",
]


def _analysis_value(result):
    if isinstance(result, float):
        assert not math.isnan(result)
    elif isinstance(result, np.ndarray):
        assert np.isfinite(result.astype(np.float64)).all()


@pytest.mark.parametrize("name", list(ANALYSIS_CALLS))
@fuzz(25)
@given(
    length=st.sampled_from(ANALYSIS_LENGTHS),
    d_model=st.sampled_from([8, 8, 4, 5, 2, 0, 1.0, 2**20 + 1]),
    start=st.sampled_from([0, 5, -7, 2**31 - 3, 2**31, True]),
    base=st.sampled_from([10000.0, 100.0, 1, NAN, 10**400]),
    dtype=st.sampled_from(["float32", "bfloat16", "float16", "float64", "int8"]),
    compute=st.sampled_from(["exact", "dtype", "fast"]),
    k=st.sampled_from([1, 0, -3, 2**31, NAN, 0.5, [1, 2], "1", True]),
    layout=st.sampled_from([*LAYOUTS, "x"]),
)
def test_analysis(name, **arguments):
    right_value_or_clear_error(
        lambda: ANALYSIS_CALLS[name](arguments), names=ANALYSIS_NAMES, check=_analysis_value, seconds=10
    )


MATRICES = {
    "good": posenc.table(6, 8, dtype="float64"),
    "empty": np.zeros((0, 4)),
    "nan": np.full((3, 4), NAN),
    "zero row": np.zeros((2, 4)),
    "1-D": np.ones(4),
    "3-D": np.ones((2, 2, 2)),
    "complex": np.ones((2, 2), np.complex64),
    "object": np.array([[1, None]], dtype=object),
    "ragged": [[1.0, 2.0], [3.0]],
    "bfloat16": posenc.table(6, 8, dtype="bfloat16"),
    "non-square": np.ones((2, 3)),
    "huge": np.broadcast_to(0.5, (2**20, 2**20)),
    "str": "abc",
}


@pytest.mark.parametrize(
    "function", [analysis.dot_products, analysis.cosine_similarity, analysis.toeplitz_deviation]
)
@pytest.mark.parametrize("matrix", list(MATRICES))
def test_analysis_matrices(function, matrix):
    value = MATRICES[matrix]
    name = "matrix" if function is analysis.toeplitz_deviation else "encodings"

    def check(result):
        if matrix == "nan":  # NaN in, NaN out (or a clear error): never a clean figure
            assert np.isnan(result).all(), f"NaN input gave {result!r}"
            return
        _analysis_value(result)

    valid = (
        True
        if matrix in ("good", "empty", "bfloat16") and function is not analysis.toeplitz_deviation
        else None
    )
    right_value_or_clear_error(
        lambda: function(value), valid=valid, names=[name, "memory", "GiB", "output"], check=check, seconds=10
    )


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


NUMBERS = [
    "0",
    "1",
    "2",
    "-1",
    "2.0",
    "0.5",
    "nan",
    "-inf",
    "1e309",
    "99999999999",
    "2147483648",
    "-0",
    "0x10",
    "",
    "abc",
    "1e4",
    "100",
    "1_000",
    "-2147483647",
]


@st.composite
def table_argv(draw) -> list[str]:
    length = draw(
        st.sampled_from(["0", "1", "3", "5", "17", "-1", "2.0", "x", "2147483648", "1099511627776"])
    )
    d_model = draw(
        st.sampled_from(["4", "5", "8", "2", "64", "0", "1", "1048577", "2147483648", "-4", "4.0", "x"])
    )
    argv = ["table", length, d_model]
    for option in draw(
        st.lists(
            st.sampled_from(
                [
                    "--base",
                    "--shift",
                    "--scale",
                    "--layout",
                    "--odd",
                    "--start",
                    "--dtype",
                    "--digits",
                    "--format",
                    "--preset",
                ]
            ),
            max_size=3,
            unique=True,
        )
    ):
        value = {
            "--layout": st.sampled_from([*LAYOUTS, "x", ""]),
            "--odd": st.sampled_from([*ODD_RULES, "x"]),
            "--dtype": st.sampled_from([*DTYPE_NAMES, "int8", "f4"]),
            "--format": st.sampled_from(["text", "csv", "json", "npy", "xml"]),
            "--preset": st.sampled_from([*presets.names(), "nope"]),
            "--digits": st.sampled_from(["0", "3", "17", "-1", "99999999999", "x", "400"]),
        }.get(option, st.sampled_from(NUMBERS))
        argv += [option, draw(value)]
    return argv


@fuzz(150)
@given(argv=table_argv())
def test_cli_table(argv, tmp_path_factory):
    if "npy" in argv and argv[1] != "0":  # (length 0 without --output: the error that asks for it)
        argv = [*argv, "--output", str(tmp_path_factory.mktemp("npy") / "pe.npy")]
    code, out, err = run_cli(argv)
    if code == 0:
        assert not err.strip(), err
        options = dict(zip(argv[3::2], argv[4::2], strict=True))
        fmt = options.get("--format", "text")
        if fmt in ("csv", "json") and "--digits" not in options:
            length, d_model = int(argv[1]), int(argv[2])
            table_options = {
                k[2:]: (
                    int(v)
                    if v.lstrip("-").isdigit()
                    else float(v)
                    if k in ("--base", "--shift", "--scale")
                    else v
                )
                for k, v in options.items()
                if k in ("--base", "--shift", "--scale", "--layout", "--odd", "--start", "--dtype")
            }
            if "--preset" in options:
                table_options = {**presets.get(options["--preset"]).options, **table_options}
            want = posenc.table(length, d_model, **table_options).astype(np.float64)
            if fmt == "json":
                got = np.array(json.loads(out)["values"], dtype=np.float64).reshape(length, d_model)
            else:
                got = np.array(
                    [[float(v) for v in line.split(",")[1:]] for line in out.splitlines()[1:]],
                    dtype=np.float64,
                ).reshape(length, d_model)
            assert np.array_equal(got, want), "the command's values differ from posenc.table"
        return
    options = [a.lstrip("-").replace("-", "_") for a in argv if a.startswith("--")]
    assert_clean_failure(
        argv, code, err, [*argv[1:], *options, "length", "d_model", "LENGTH", "D_MODEL", "output"]
    )


@st.composite
def check_argv(draw) -> list[str]:
    argv = ["check"]
    for option in draw(
        st.lists(
            st.sampled_from(
                ["--d-model", "--length", "--base", "--shift", "--layout", "--dtype", "--compute", "--json"]
            ),
            max_size=3,
            unique=True,
        )
    ):
        if option == "--json":
            argv.append(option)
            continue
        value = {
            "--d-model": st.sampled_from(["4", "8", "3", "2", "0", "x", "2147483648"]),
            "--length": st.sampled_from(["1", "2", "17", "64", "0", "-1", "1073741825", "2147483648", "1e3"]),
            "--layout": st.sampled_from([*LAYOUTS, "x"]),
            "--dtype": st.sampled_from([*DTYPE_NAMES, "int8"]),
            "--compute": st.sampled_from(["exact", "dtype", "fast"]),
        }.get(option, st.sampled_from(NUMBERS))
        argv += [option, draw(value)]
    if "--length" not in argv:
        argv += ["--length", "16"]
    if "--d-model" not in argv:
        argv += ["--d-model", "8"]
    return argv


@fuzz(60)
@given(argv=check_argv())
def test_cli_check(argv):
    code, out, err = run_cli(argv)
    if code in (0, 1):
        assert out.strip() and "Traceback" not in err
        if "--json" in argv:
            report = json.loads(out)
            assert isinstance(report, dict)
        return
    options = [a.lstrip("-").replace("-", "_") for a in argv if a.startswith("--")]
    assert_clean_failure(argv, code, err, [*argv[1:], *options, "length", "d_model", "d-model"])


@pytest.fixture(scope="module")
def stored_files(tmp_path_factory) -> dict[str, Path]:
    """Tables on disk: good ones, and corrupt .npy, .pt and .safetensors files of many kinds."""
    from safetensors.numpy import save_file

    folder = tmp_path_factory.mktemp("stored")
    files = {}
    good = posenc.table(32, 8)

    def put(name, data: bytes | None = None, array=None):
        path = folder / name
        if array is not None:
            np.save(path, array)
        elif data is not None:
            path.write_bytes(data)
        files[name] = path

    put("good.npy", array=good)
    torch.save({"encoder.embed_positions.weight": torch.from_numpy(good)}, folder / "good.pt")
    files["good.pt"] = folder / "good.pt"
    save_file({"pos": good}, str(folder / "good.safetensors"))
    files["good.safetensors"] = folder / "good.safetensors"
    raw = (folder / "good.npy").read_bytes()
    for suffix, whole in (
        ("npy", raw),
        ("pt", files["good.pt"].read_bytes()),
        ("safetensors", files["good.safetensors"].read_bytes()),
    ):
        put(f"empty.{suffix}", b"")
        put(f"garbage.{suffix}", b"garbage \x00\xff" * 3)
        put(f"truncated.{suffix}", whole[: len(whole) // 2])
        put(f"header-only.{suffix}", whole[:40])
        put(f"flipped.{suffix}", whole[:20] + bytes(b ^ 0x5A for b in whole[20:60]) + whole[60:])
    put("object.npy", array=np.array([[1, None]], dtype=object))
    put("complex.npy", array=good.astype(np.complex64))
    put("1d.npy", array=good[0])
    put("3d.npy", array=good[None, None])
    put("nan.npy", array=np.full((8, 8), NAN))
    put("int.npy", array=good.astype(np.int8))
    put("empty-table.npy", array=np.zeros((0, 8), np.float32))
    torch.save([1, 2, 3], folder / "list.pt")
    files["list.pt"] = folder / "list.pt"
    torch.save({"a": torch.zeros(3, 4), "b_pos": torch.zeros(2, 3, 4, dtype=torch.int64)}, folder / "odd.pt")
    files["odd.pt"] = folder / "odd.pt"
    (folder / "folder.npy").mkdir()
    files["folder.npy"] = folder / "folder.npy"
    files["missing.npy"] = folder / "missing.npy"
    put("table.txt", b"1 2 3")
    return files


STORED = [
    *(f"{kind}.{suffix}" for kind in ("good", "empty", "garbage", "truncated", "header-only", "flipped")
      for suffix in ("npy", "pt", "safetensors")),
    "object.npy", "complex.npy", "1d.npy", "3d.npy", "nan.npy", "int.npy", "empty-table.npy", "list.pt",
    "odd.pt", "folder.npy", "missing.npy", "table.txt",
]  # fmt: skip


@pytest.mark.parametrize("key", [None, "pos", "nope"])
@pytest.mark.parametrize("name", STORED)
def test_cli_identify_any_file(stored_files, name, key):
    path = stored_files[name]
    argv = ["identify", str(path), *(["--key", key] if key else [])]
    code, out, err = run_cli(argv)
    if code in (0, 1):
        assert out.startswith(str(path)) or out.startswith("{"), out
        if name.startswith("good") and key is None:
            assert code == 0, out
        return
    assert_clean_failure(argv, code, err, [path.name, "file", "table", "shape", *([key] if key else [])])


# --- regressions: the reported bad-input cases (numbered as reported), then what the fuzzer found ------


def run_python(
    code: str, *, env: dict | None = None, memory: int | None = None, seconds: float = 120, argv=()
) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh process (address space capped at ``memory`` bytes), with this checkout's
    posenc first on the path."""

    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    path = os.pathsep.join([str(Path(posenc.__file__).parent.parent), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        capture_output=True,
        text=True,
        timeout=seconds,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
        preexec_fn=limit,
    )


def run_module(
    argv: list[str], *, warnings_as_errors: bool = False, seconds: float = 300
) -> subprocess.CompletedProcess:
    """``python -m posenc ARGV`` in a fresh process, with this checkout's posenc first on the path."""
    path = os.pathsep.join([str(Path(posenc.__file__).parent.parent), os.environ.get("PYTHONPATH", "")])
    flags = ["-W", "error"] if warnings_as_errors else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "posenc", *argv],
        capture_output=True,
        text=True,
        timeout=seconds,
        env={**os.environ, "PYTHONPATH": path},
    )


def torch_encodes_like_the_core(tensor: torch.Tensor, values, d_model: int = 8, **options) -> None:
    got = right_value_or_clear_error(lambda: pt.encode(tensor, d_model, **options), valid=True)
    want = posenc.encode(np.asarray(values), d_model, **options)
    assert same_bits(torch_values(got), want), f"{tensor.dtype} positions {values} encode differently"


# 1. torch position tensors of any integer dtype are positions (uint8 is no mask; int16/uint16 no IndexError)
@pytest.mark.parametrize("dtype", TORCH_INTS)
def test_regression_1_torch_integer_positions_of_every_width(dtype):
    values = [0, 3, 100, 127]
    torch_encodes_like_the_core(torch.tensor(values).to(dtype), values)


# 2. module offsets are added exactly, not in the positions' own dtype
@pytest.mark.parametrize(
    ("dtype", "position", "offset"),
    [
        ("float16", 2048.0, 1),
        ("float32", 2.0**24, 1),
        ("int8", 127, 1),
        ("bfloat16", 256.0, 1),
        ("int16", 32767, 5),
    ],
)
def test_regression_2_module_offsets_are_added_exactly(dtype, position, offset):
    want = posenc.encode([position + offset], 8)
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    got = module.encoding_for(
        torch.zeros(1, 1, 8), torch.tensor([position]).to(getattr(torch, dtype)), offset=offset
    )
    assert same_bits(torch_values(got).reshape(1, 8), want), (
        "torch: the offset was added in the positions' dtype"
    )
    jmodule = pj.SinusoidalPositionalEncoding(8)
    p = jnp.asarray(np.array([position]).astype(BFLOAT16 if dtype == "bfloat16" else dtype))
    got = jmodule.encoding_for(jnp.zeros((1, 1, 8)), p, offset=offset)
    assert same_bits(np.asarray(got).reshape(1, 8), want), "jax: the offset was added in the positions' dtype"


# 3. the lowest frequency near 2**-816 .. 2**-900: computed, no OverflowError
def test_regression_3_tiny_lowest_frequencies_are_computed():
    omegas = right_value_or_clear_error(lambda: posenc.frequencies(512, shift=252), valid=True)
    with mpmath.workdps(60):
        assert omegas[-1] == ref.round_to(ref.omega(255, 512, 10000.0, 252.0), "float64")
    row = right_value_or_clear_error(lambda: posenc.table(1, 4, base=1e300, shift=0.8), valid=True)
    assert same_bits(row, np.array([[0.0, 1.0, 0.0, 1.0]], np.float32))


# 4. d_model is bounded: refused at once, before any loop or allocation (a fresh process with 2 GiB)
@pytest.mark.parametrize(
    "call", ["posenc.encode(0, 20_000_000)", "posenc.frequencies(2**31 - 1)", "posenc.table(1, 2**40)"]
)
def test_regression_4_a_huge_d_model_is_refused_at_once(call):
    code = f"""
        import posenc
        try:
            {call}
        except ValueError as error:
            print("ValueError", error)
        """
    try:
        result = run_python(code, memory=2 << 30, seconds=20)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{call} runs for more than 20 s") from None
    assert result.returncode == 0 and result.stdout.startswith("ValueError") and "d_model" in result.stdout, (
        f"{call}: exit {result.returncode}, {result.stdout[-300:]} {result.stderr[-500:]}"
    )


# 5. `posenc identify` on a corrupt file: one line, exit status 2, the file named, no traceback
@pytest.mark.parametrize("suffix", [".pt", ".safetensors", ".npy"])
@pytest.mark.parametrize(
    "content",
    [b"garbage", b"", b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (8, 8), }"],
)
def test_regression_5_identify_a_corrupt_file(tmp_path, suffix, content):
    path = tmp_path / f"corrupt{suffix}"
    path.write_bytes(content)
    result = run_module(["identify", str(path)])
    assert_clean_failure(["identify", str(path)], result.returncode, result.stderr, [path.name, "file"])


# 6. `posenc table ... --format json` streams: its peak memory stays far below the table as Python objects
def test_regression_6_json_output_streams():
    code = """
        import os, sys
        from posenc.cli import main

        def status(key):
            with open("/proc/self/status") as handle:
                return next(int(line.split()[1]) * 1024 for line in handle if line.startswith(key))

        argv = ["table", "40000", "64", "--format"]
        sys.stdout = open(os.devnull, "w")
        main([*argv, "npy", "--output", os.devnull])  # imports, kernels and the table's memory, once
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets the peak (VmHWM) to the current resident size
        before = status("VmRSS:")
        code = main([*argv, "json"])
        sys.stdout = sys.__stdout__
        print(code, status("VmHWM:") - before)
        """
    result = run_python(code, seconds=300)
    status, growth = result.stdout.split()
    assert status == "0", result.stderr
    materialised = 40000 * 64 * 32  # a Python float and its list slot per value
    assert int(growth) < materialised / 2, (
        f"posenc table 40000 64 --format json grows the resident memory by {int(growth) / 2**20:.0f} MiB; "
        f"the values as Python objects take {materialised / 2**20:.0f} MiB: not streamed"
    )


# 7. float64 within 1 ulp where sin/cos are tiny: near their zeros, and at subnormal positions
@pytest.mark.parametrize(
    ("position", "d_model", "options", "column"),
    [
        (45.553093477052, 4, {"base": 100.0}, 0),  # sin ≈ -6.2e-19: 191 ulp off
        (
            7.6452569637786e-311,
            512,
            {"base": 1.5, "shift": 0.5, "layout": "sin_cos"},
            74,
        ),  # subnormal: 8.3 ulp
        (2101147687, 512, {"base": 1e9, "shift": 0.5, "scale": 2.0**20, "layout": "sin_cos"}, 11),  # 992 ulp
        (1e-310, 4, {}, 0),
        (-1e-310, 4, {}, 2),
    ],
)
def test_regression_7_float64_is_within_1_ulp_of_tiny_values(position, d_model, options, column):
    got = right_value_or_clear_error(
        lambda: posenc.encode(np.float64(position), d_model, **options, dtype="float64"), valid=True
    )
    exact, negative = expected_value(Fraction(position), column, d_model, **reference_options(options))
    assert_element(got[column], exact, negative, "float64", f"encode({position!r}) column {column}")


def convergent_positions(omega, limit: int = 2**31) -> list[int]:
    """Integers p < limit with p·ω closest to a multiple of π/2: the denominators of the continued fraction
    of 2ω/π (where sin or cos of p·ω is tiny)."""
    with mpmath.workdps(80):
        x = 2 * omega / mpmath.pi
        found, h = [], (0, 1)
        q = (1, 0)
        for _ in range(60):
            a = int(mpmath.floor(x))
            h, q = (h[1], a * h[1] + h[0]), (q[1], a * q[1] + q[0])
            if q[1] >= limit:
                break
            found.append(q[1])
            if x == a:
                break
            x = 1 / (x - a)
    return found


@fuzz(40)
@given(
    d_model=st.sampled_from([4, 8, 64, 512]),
    base=st.sampled_from([10000.0, 100.0, 1e9, 2.0, 1.5]),
    shift=st.sampled_from([0, 1, 0.5]),
    scale=st.sampled_from([1.0, 1.0, 3.0, 0.001, 1000.0]),
    i=st.integers(0, 255),
    kind=st.sampled_from(["integer", "real", "tiny"]),
    k=st.integers(1, 2**30),
    r=st.floats(0.01, 1.0),
)
def test_core_float64_near_zeros(d_model, base, shift, scale, i, kind, k, r):
    i %= d_model // 2
    omega = ref.omega(i, d_model, base, shift, scale)
    if kind == "integer":
        candidates = convergent_positions(omega)[-2:] or [1]
        p = np.array(candidates, dtype=np.int64)
    elif kind == "real":  # the float64 nearest to a multiple of π/2ω, below 2**31
        with mpmath.workdps(40):
            largest = max(1, int(2**31 * 2 * omega / mpmath.pi) - 1)
            p = np.array([float((1 + k % largest) * mpmath.pi / 2 / omega)])
    else:
        p = np.array([1e-310 * r, -3e-320 * r, 2.2e-308 * r])
    options = {"base": base, "shift": shift, "scale": scale, "layout": "sin_cos"}
    got = right_value_or_clear_error(
        lambda: posenc.encode(p, d_model, **options, dtype="float64"), valid=True
    )
    n = d_model // 2
    for row, position in zip(got, exact_positions(p).tolist(), strict=True):
        for column in (i, n + i):
            exact, negative = expected_value(position, column, d_model, **reference_options(options))
            assert_element(
                row[column],
                exact,
                negative,
                "float64",
                f"encode({float(position)!r}, {d_model}, {options}) column {column}",
            )


# 8. JAX: invalid traced positions give rows of NaN (documented); a traced program never raises
#    JaxRuntimeError; with x64 off an offset beyond int32 is a clear error, not OverflowError
def test_regression_8_jax_invalid_traced_positions_give_nan_rows():
    p = jnp.array([NAN, 1.0, 2.0**31, -INF, 5.0], jnp.float32)
    got = right_value_or_clear_error(lambda: np.asarray(jax.jit(lambda q: pj.encode(q, 4))(p)), valid=True)
    assert np.isnan(got[[0, 2, 3]]).all(), "invalid traced positions must give rows of NaN"
    assert same_bits(got[[1, 4]], posenc.encode([1.0, 5.0], 4)), (
        "valid traced positions must give the core's bits"
    )
    right_value_or_clear_error(
        lambda: pj.encode(np.asarray(p), 4), valid=False, names=["positions"]
    )  # concrete: raises


def test_regression_8_jax_offset_beyond_int32_is_a_clear_error():
    module = pj.SinusoidalPositionalEncoding(4)
    x = jnp.zeros((1, 2, 4))

    def traced():
        return np.asarray(jax.jit(lambda x, p: module(x, p, offset=2**33))(x, jnp.array([0, 1])))

    result = right_value_or_clear_error(traced, names=["offset", "2**31", "positions"])
    if not isinstance(result, Exception):
        assert np.isnan(result).all(), "an offset beyond 2**31 must give NaN rows (or a clear error)"
    right_value_or_clear_error(lambda: module(x, offset=2**33), valid=False, names=["offset"])
    right_value_or_clear_error(lambda: pj.table(2, 4, start=2**33), valid=False, names=["start"])


# 9. torch meta tensors: positions and tensor offsets give a meta result of the right shape
def test_regression_9_meta_tensors():
    got = right_value_or_clear_error(lambda: pt.encode(torch.arange(5, device="meta"), 8), valid=True)
    assert got.device.type == "meta" and tuple(got.shape) == (5, 8) and got.dtype == torch.float32
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    x = torch.zeros(2, 3, 8, device="meta")
    for positions_, offset in [
        (None, torch.tensor([1, 2], device="meta")),
        (torch.arange(3, device="meta"), 4),
        (torch.zeros(2, 3, device="meta"), torch.tensor(1, device="meta")),
    ]:
        y = right_value_or_clear_error(lambda p=positions_, o=offset: module(x, p, offset=o), valid=True)
        assert y.device.type == "meta" and tuple(y.shape) == (2, 3, 8)
    t = right_value_or_clear_error(lambda: pt.table(4, 6, device="meta", dtype=torch.bfloat16), valid=True)
    assert t.device.type == "meta" and tuple(t.shape) == (4, 6) and t.dtype == torch.bfloat16


# 10. grid helpers on empty and zero-size input: clear errors
@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: grids.grid((), 8), ["shape"]),
        (lambda: grids.grid((0, 4), 8), ["shape"]),
        (lambda: grids.grid((2,), 4, positions=[[]]), ["positions"]),
        (lambda: grids.mae_2d(8, 0), ["grid_size"]),
        (lambda: grids.diffusers_2d(8, (0, 4)), ["grid_size", "shape"]),
        (lambda: grids.diffusers_3d(16, 0, 1), ["spatial_size", "shape"]),
        (lambda: grids.diffusers_3d(16, 4, 0), ["temporal_size"]),
        (lambda: grids.timm_2d((0, 4), 8), ["feat_shape", "shape"]),
        (lambda: grids.positional_encodings_nd((), 8), ["shape"]),
        (lambda: grids.positional_encodings_nd((0,), 8), ["shape"]),
    ],
)
def test_regression_10_empty_grids(call, names):
    right_value_or_clear_error(call, valid=False, names=names)


# 11. signed zeros: sin(-0.0) = -0.0 everywhere; table and encode agree on the sign of zero
def test_regression_11_sin_of_minus_zero_is_minus_zero():
    for name in DTYPE_NAMES:
        row = posenc.encode(-0.0, 4, dtype=name)
        assert math.copysign(1, float(row[0])) < 0 and math.copysign(1, float(row[2])) < 0, (
            f"core {name}: {row}"
        )
    row = pt.encode(torch.tensor([-0.0]), 4)[0]
    assert math.copysign(1, float(row[0])) < 0, f"torch: {row}"
    row = np.asarray(pj.encode(jnp.array([-0.0]), 4))[0]
    assert math.copysign(1, float(row[0])) < 0, f"jax: {row}"


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_regression_11_table_and_encode_agree_on_signed_zeros(name):
    options = {"base": 1e9, "layout": "sin_cos"}
    tab = posenc.table(8, 64, start=-4, **options, dtype=name)
    enc = posenc.encode(np.arange(-4, 4), 64, **options, dtype=name)
    assert same_bits(tab, enc), "table and encode differ (signed zeros compared by their bits)"
    lowest = tab[:4, 31].astype(np.float64)  # sin of a negative position at the lowest frequency: negative
    assert (np.signbit(lowest)).all(), (
        f"negative values (rounded to zero or not) must keep their sign: {lowest}"
    )


# 12. the rest of the seeds' list
def test_regression_12_none_positions_and_the_lowest_int64():
    right_value_or_clear_error(lambda: pt.encode(None, 8), valid=False, names=["positions"])
    error = right_value_or_clear_error(
        lambda: pt.encode(torch.tensor([-(2**63)]), 8), valid=False, names=["positions"]
    )
    assert "start" not in str(error), f"the position is reported as a bad start: {error}"


@pytest.mark.parametrize("pe", [torch.tensor(1.0), torch.full((1, 10, 8), NAN), "scaled"])
def test_regression_12_and_15_bad_tutorial_checkpoints_are_refused(pe):
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    if isinstance(pe, str):
        pe = torch.from_numpy(posenc.table(5000, 8))[None] * 1.01
    right_value_or_clear_error(lambda: module.load_state_dict({"pe": pe}), valid=False, names=["pe"])


@pytest.mark.parametrize("padding_idx", [10, -11, 2**31])
def test_regression_12_a_bad_padding_idx_is_a_clear_error(padding_idx):
    right_value_or_clear_error(
        lambda: pt.TokenAndPositionEmbedding(10, 8, padding_idx=padding_idx),
        valid=False,
        names=["padding_idx"],
    )


@pytest.mark.parametrize("digits", ["99999999999", "-1", "1e3"])
def test_regression_12_digits_out_of_range(digits):
    argv = ["table", "5", "4", "--digits", digits]
    code, _, err = run_cli(argv)
    assert_clean_failure(argv, code, err, ["--digits", "digits"])


def test_regression_12_compile_with_a_python_int_position():
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: pt.encode(t, 8), fullgraph=True, dynamic=True, backend="eager")
    got = right_value_or_clear_error(lambda: compiled(5), valid=True)
    assert same_bits(torch_values(got), posenc.encode(5, 8))


def test_regression_12_numba_workqueue_threads():
    code = """
        import numpy as np, posenc
        from concurrent.futures import ThreadPoolExecutor
        want = posenc.table(2048, 256)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: posenc.table(2048, 256), range(16)))
        print(all(np.array_equal(r, want) for r in results))
        """
    result = run_python(
        code, env={"NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "8"}, seconds=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "True", (
        f"exit {result.returncode}: {result.stderr[-600:]}"
    )


# 13. the module's default orientation is PyTorch's (seq, batch, d_model): it equals the tutorial's module
def test_regression_13_default_module_equals_the_pytorch_tutorial():
    torch.manual_seed(0)
    x = torch.randn(35, 20, 64)  # the tutorial's (seq, batch, d_model)
    tutorial_pe = tutorial_table(5000, 64)
    tutorial = x + tutorial_pe[:35, None]
    ours = right_value_or_clear_error(lambda: pt.SinusoidalPositionalEncoding(64)(x), valid=True)
    exact = torch.from_numpy(posenc.table(35, 64, dtype="float64"))
    tutorial_error = float((tutorial_pe[:35].double() - exact).abs().max())
    allowed = tutorial_error + float(torch.finfo(torch.float32).eps) * float(tutorial.abs().max())
    assert float((ours - tutorial).abs().max()) <= allowed, (
        "the default module does not encode along the tutorial's axis"
    )
    want = x + torch.from_numpy(posenc.table(35, 64))[:, None]  # position s for every batch column
    assert torch.equal(ours, want), "every batch column must get the encoding of its position along axis 0"


# 14. an integer out= array is refused, not filled with truncated values
def test_regression_14_integer_out_is_refused():
    out = np.full((5, 8), 7, np.int32)
    right_value_or_clear_error(lambda: posenc.table(5, 8, out=out), valid=False, names=["out"])
    assert (out == 7).all(), "the refused out= array was written"


# 15. a 4-D x is refused by the (seq, batch, d_model) default; the repr says how many rows .pe has
def test_regression_15_module_shapes_and_repr():
    module = pt.SinusoidalPositionalEncoding(8)
    right_value_or_clear_error(
        lambda: module(torch.zeros(2, 3, 4, 8)), valid=False, names=["x must", "shape"]
    )
    assert str(module.pe.shape[-2] if module.pe.shape[-2] != 1 else module.pe.shape[0]) in repr(module), (
        f"repr {repr(module)!r} does not say that .pe has {max(module.pe.shape[:2])} rows"
    )


# 16. dtype spellings everywhere, and a preset's unknown argument names the valid ones
def test_regression_16_dtype_spellings_and_preset_arguments():
    want = posenc.encode([1, 2], 4, dtype="bfloat16")
    got = right_value_or_clear_error(lambda: posenc.encode([1, 2], 4, dtype=torch.bfloat16), valid=True)
    assert same_bits(got, want)
    got = right_value_or_clear_error(lambda: pt.table(2, 4, start=1, dtype="bfloat16"), valid=True)
    assert same_bits(torch_values(got), want)
    error = right_value_or_clear_error(
        lambda: presets.get("fairseq", padding=1), valid=False, names=["padding_idx"]
    )
    assert "_fairseq" not in str(error), f"a private function name in {error}"


# 17. `posenc check` in float16 past 65520 leaks no NumPy warnings (run with warnings as errors)
def test_regression_17_check_float16_prints_no_warnings():
    result = run_module(
        ["check", "--dtype", "float16", "--length", "70000", "--d-model", "8"], warnings_as_errors=True
    )
    assert result.returncode in (0, 1), result.stderr[-800:]
    assert "Warning" not in result.stderr and "Traceback" not in result.stderr, result.stderr[-800:]


# Found by this suite (the bad-input rule applied to every entry point).


@pytest.mark.parametrize("option", ["base", "shift", "scale"])
def test_found_a_huge_python_int_option_is_a_clear_error(option):
    right_value_or_clear_error(
        lambda: posenc.encode([1], 8, **{option: 10**400}), valid=False, names=[option]
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: posenc.encode(np.broadcast_to(0.5, (2**40,)), 4),
        lambda: posenc.encode(np.broadcast_to(np.int64(3), (2**20, 2**20)), 4),
        lambda: pt.encode(torch.zeros(1).expand(2**40), 4),
    ],
)
def test_found_huge_zero_stride_positions_are_refused_before_allocating(call):
    right_value_or_clear_error(call, valid=False, names=SIZE_WORDS)


@pytest.mark.parametrize("position", [16777217.0, 0.1, [2.0**30 + 0.5]])
def test_found_torch_python_float_positions_are_not_rounded_to_float32(position):
    got = right_value_or_clear_error(lambda: pt.encode(position, 8, dtype=torch.float64), valid=True)
    assert same_bits(torch_values(got), posenc.encode(position, 8, dtype="float64")), (
        "positions rounded to float32"
    )


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64]
)
def test_found_torch_positions_of_narrow_and_unsigned_dtypes(dtype):
    tensor = torch.tensor([0, 1, 2, 4]).to(dtype)
    result = right_value_or_clear_error(lambda: pt.encode(tensor, 8), names=["positions", "dtype"])
    if not isinstance(result, Exception):
        assert same_bits(torch_values(result), posenc.encode([0, 1, 2, 4], 8))
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    right_value_or_clear_error(
        lambda: module(torch.zeros(1, 4, 8), offset=torch.tensor([1]).to(dtype)), names=["offset", "dtype"]
    )


def test_found_jax_bfloat16_positions_are_positions():
    got = right_value_or_clear_error(lambda: pj.encode(jnp.array([1.5, 300.0], jnp.bfloat16), 8), valid=True)
    assert same_bits(np.asarray(got), posenc.encode([1.5, 300.0], 8))


def test_found_jax_module_bool_offset_names_the_offset():
    module = pj.SinusoidalPositionalEncoding(4)
    right_value_or_clear_error(
        lambda: module(jnp.zeros((1, 2, 4)), offset=True), valid=False, names=["offset"]
    )


def test_found_torch_cpu_offset_beyond_2_31_raises_for_real_positions():
    module = pt.SinusoidalPositionalEncoding(2, batch_first=True)
    positions_ = torch.tensor([0.0], dtype=torch.float16)
    right_value_or_clear_error(
        lambda: module(torch.zeros(1, 1, 2), positions_, offset=torch.tensor(2**31)),
        valid=False,
        names=["offset", "positions", "2**31"],
    )


def test_found_torch_module_real_positions_with_an_offset():
    module = pt.SinusoidalPositionalEncoding(4, batch_first=True)
    for offset in (5, torch.tensor(5)):
        y = right_value_or_clear_error(
            lambda o=offset: module(torch.zeros(1, 2, 4), torch.tensor([0.5, 1.5]), offset=o), valid=True
        )
        assert same_bits(torch_values(y)[0], posenc.encode([5.5, 6.5], 4))


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: sharding.permutation(0, world_size=10**12), ["world_size"]),
        (lambda: sharding.shard_indices(2**40, world_size=1, rank=0), ["length"]),
        (lambda: sharding.shard_positions(2**40, world_size=2, rank=0), ["length"]),
    ],
)
def test_found_sharding_huge_sizes_are_refused(call, names):
    right_value_or_clear_error(call, valid=False, names=names, seconds=10)


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: grids.diffusers_2d(8, 2, base_size=0), ["base_size"]),
        (lambda: grids.diffusers_2d(8, 2, interpolation_scale=0), ["interpolation_scale"]),
        (lambda: grids.diffusers_3d(16, 2, 2, spatial_interpolation_scale=0), ["interpolation_scale"]),
        (lambda: grids.diffusers_2d(8, 2.0), ["grid_size"]),
        (lambda: grids.diffusers_2d(8, (2,)), ["grid_size"]),
        (lambda: grids.diffusers_3d("16", 2, 2), ["embed_dim"]),
        (lambda: grids.timm_2d(4, 8), ["feat_shape"]),
        (lambda: grids.positional_encodings_nd(4, 8), ["shape"]),
        (lambda: grids.grid((2, 2), 8, order=(0, "1")), ["order"]),
        (lambda: grids.grid((2,), 4, positions=5), ["positions"]),
        (lambda: grids.grid((2**40, 2), 8), SIZE_WORDS),
        (lambda: grids.mae_2d(8, 2**40), SIZE_WORDS),
    ],
)
def test_found_grid_arguments(call, names):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        right_value_or_clear_error(call, valid=False, names=names, seconds=10)


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: analysis.collisions(2**40, 8), ["length"]),
        (lambda: analysis.max_magnitude(2**40, 8), ["length"]),
        (lambda: analysis.collision_horizon(8, limit=2**40), ["limit"]),
        (lambda: analysis.max_magnitude(-1, 8), ["length"]),
        (lambda: analysis.shift_matrix(1, 2**20), SIZE_WORDS),
        (lambda: analysis.shift_matrix([1, 2], 8), ["k"]),
        (lambda: analysis.dot_products(np.broadcast_to(0.5, (2**20, 4))), SIZE_WORDS),
    ],
)
def test_found_analysis_arguments(call, names):
    right_value_or_clear_error(call, valid=False, names=names, seconds=10)


def test_found_toeplitz_deviation_of_nan_is_not_zero():
    result = right_value_or_clear_error(
        lambda: analysis.toeplitz_deviation([[NAN, 0.0], [0.0, NAN]]), names=["matrix"]
    )
    if not isinstance(result, Exception):
        assert math.isnan(result), f"a matrix of NaN has Toeplitz deviation {result}"


@pytest.mark.parametrize("positions_", [[[1, 2], [3]], [[0.5], [1.0, 2.0]]])
def test_found_ragged_positions_name_the_positions(positions_):
    right_value_or_clear_error(lambda: posenc.encode(positions_, 4), valid=False, names=["positions"])
    right_value_or_clear_error(lambda: pt.encode(positions_, 4), valid=False, names=["positions"])


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: analysis.collisions(0, 8), None),  # no positions: no collision, or a clear error
        (lambda: analysis.collision_horizon(8, limit=0), None),
        (lambda: analysis.max_magnitude(2.0, 8), ["length"]),
        (lambda: pt.TokenAndPositionEmbedding(10, 4, padding_idx=1.5), ["padding_idx"]),
        (lambda: pt.TokenAndPositionEmbedding(10, 4, padding_idx=True), ["padding_idx"]),
        (lambda: pt.TokenAndPositionEmbedding(-1, 4), ["num_embeddings"]),
        (lambda: porting.identify(posenc.table(20, 8), candidates=2.0), ["candidates"]),
        (lambda: porting.identify(posenc.table(20, 8), tolerance="1"), ["tolerance"]),
        (lambda: grids.diffusers_2d(8, 2, interpolation_scale=NAN), ["interpolation_scale"]),
    ],
)
def test_found_more_arguments(call, names):
    """Found by the fuzzer: each is a clear error (names given), or (None) a value or a clear error."""
    right_value_or_clear_error(
        call, valid=None if names is None else False, names=names or ["length", "limit"]
    )
