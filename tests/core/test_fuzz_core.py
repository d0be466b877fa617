"""The fuzz suite (tests/support/fuzzing.py), the core: ``frequencies``, ``encode``, ``table`` and
``out=``."""

from __future__ import annotations

import mpmath
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc
from tests.support import reference as ref
from tests.support.fuzz_cases import (
    BFLOAT16,
    DTYPE_NAMES,
    exact_positions,
    may_underflow,
    option_problems,
    right_value_or_clear_error,
    same_bits,
)
from tests.support.fuzzing import (
    BAD_DTYPES,
    GOOD_DTYPES,
    LENGTHS,
    SIZE_WORDS,
    STARTS,
    check_core_result,
    core_options,
    d_models,
    fuzz,
    numpy_positions,
    output_name,
    positions_valid,
    reference_options,
    table_problems,
)

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


def shown_values(**values: object) -> list[str]:
    """The values as a message may show them (an error may show the value instead of naming it); short
    ones are left out, they would match anything."""
    return [text for value in values.values() for text in {str(value), repr(value)} if len(text) >= 4]


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
