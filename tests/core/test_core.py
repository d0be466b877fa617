"""The core API: the worked examples of the published tutorials, layouts, properties, out=, bad input."""

from __future__ import annotations

import math
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import layouts, validation

# --- the tutorials' worked numbers --------------------------------------------------------------------


def test_worked_table_d4_base_10000():
    """d_model = 4, base 10000, positions 0..4, as printed (4 significant decimals)."""
    printed = [
        [0, 1, 0, 1],
        [0.8415, 0.5403, 0.00999983, 0.99995],
        [0.9093, -0.4161, 0.0199987, 0.99980],
        [0.1411, -0.9899, 0.0299955, 0.99955],
        [-0.7568, -0.6536, 0.0399893, 0.99920],
    ]
    got = posenc.table(5, 4, dtype="float64")
    np.testing.assert_allclose(got, printed, atol=1.1e-4)
    np.testing.assert_array_equal(posenc.frequencies(4), [1.0, 0.01])  # denominators 1 and 100


def test_machine_learning_mastery_base_100_table():
    """Machine Learning Mastery's "A Gentle Introduction to Positional Encoding in Transformer Models":
    getPositionEncoding(seq_len=4, d=4, n=100), printed with 8 decimals."""
    printed = [
        [0.0, 1.0, 0.0, 1.0],
        [0.84147098, 0.54030231, 0.09983342, 0.99500417],
        [0.90929743, -0.41614684, 0.19866933, 0.98006658],
        [0.14112001, -0.9899925, 0.29552021, 0.95533649],
    ]
    np.testing.assert_allclose(posenc.table(4, 4, base=100, dtype="float64"), printed, atol=5e-9)


def test_worked_table_to_3_decimals():
    printed = [[0.0, 1.0, 0.0, 1.0], [0.841, 0.540, 0.010, 1.000], [0.909, -0.416, 0.020, 1.000]]
    np.testing.assert_allclose(posenc.table(3, 4), printed, atol=5e-4)


def test_dot_products_at_d_model_512_are_shift_invariant():
    pe = posenc.table(82, 512, dtype="float64")
    d12, d80_81 = pe[1] @ pe[2], pe[80] @ pe[81]
    d1_80, d2_81 = pe[1] @ pe[80], pe[2] @ pe[81]
    assert d12 == pytest.approx(249.1021, abs=5e-5)
    assert d1_80 == pytest.approx(117.5290, abs=5e-5)
    assert d12 == pytest.approx(d80_81, abs=1e-11)
    assert d1_80 == pytest.approx(d2_81, abs=1e-11)
    omegas = posenc.frequencies(512)
    assert d12 == pytest.approx(np.cos(omegas).sum(), abs=1e-11)  # Σ cos(k ω_i), k = 1
    assert d1_80 == pytest.approx(np.cos(79 * omegas).sum(), abs=1e-11)


# --- layouts and widths -----------------------------------------------------------------------------


def test_layouts_place_the_same_values():
    inter = posenc.encode([3, 7.5, -2], 10, layout="interleaved")
    sin_cos = posenc.encode([3, 7.5, -2], 10, layout="sin_cos")
    cos_sin = posenc.encode([3, 7.5, -2], 10, layout="cos_sin")
    np.testing.assert_array_equal(inter[:, 0::2], sin_cos[:, :5])
    np.testing.assert_array_equal(inter[:, 1::2], sin_cos[:, 5:])
    np.testing.assert_array_equal(cos_sin, np.concatenate([sin_cos[:, 5:], sin_cos[:, :5]], axis=1))
    omegas = posenc.frequencies(10)
    np.testing.assert_allclose(sin_cos[1, :5], np.sin(7.5 * omegas), atol=1e-7)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: layouts.pair_columns("sin_cos", 2.7), TypeError, "n must be an integer >= 0; got 2.7"),
        (lambda: layouts.pair_columns("interleaved", True), TypeError, "n must be an integer >= 0; got True"),
        (lambda: layouts.pair_columns("sin_cos", -3), ValueError, "n must be an integer >= 0; got -3"),
        (lambda: layouts.placement("cos_sin", 2.7), TypeError, "n must be an integer >= 0; got 2.7"),
        (lambda: layouts.pair_columns("bogus", 2), ValueError, "layout must be one of .*got 'bogus'"),
        (lambda: layouts.function_columns(True, "sin_cos"), TypeError, "d_model must be an integer >= 2"),
        (lambda: layouts.function_columns(5, "sin_cos", "bogus"), ValueError, "odd must be one of .*'bogus'"),
        (
            lambda: layouts.column_names(4.0, "sin_cos"),
            TypeError,
            r"got 4\.0 of type float \(pass 4 instead\)",
        ),
        (
            lambda: layouts.column_names(True, "sin_cos"),
            TypeError,
            "d_model must be an integer >= 2; got True",
        ),
        (lambda: layouts.column_names(-4, "sin_cos"), ValueError, "d_model must be an integer >= 2; got -4"),
        (lambda: layouts.column_names(3, "interleaved", "bogus"), ValueError, "odd must be one of"),
        (lambda: layouts.swaps_pairs(np.array([1, 0]), "bogus"), ValueError, "layout must be one of"),
        (
            lambda: layouts.swaps_pairs(np.array([1.0, 0.0]), "sin_cos"),
            TypeError,
            "order must be a 1-d array",
        ),
    ],
)
def test_the_layout_mapping_refuses_what_the_core_refuses(call, error, message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert isinstance(caught.value, posenc.PosencError)  # structured: the parameter named apart
    assert str(caught.value).startswith(f"{caught.value.parameter} must")


def test_the_layout_mapping_takes_numpy_integers_and_swaps_only_a_permutations_pairs():
    assert layouts.placement("cos_sin", np.int64(4)) == (4, 0, 1)
    assert [c.tolist() for c in layouts.pair_columns("sin_cos", np.int32(2))] == [[0, 1], [2, 3]]
    assert layouts.column_names(np.int64(3), "interleaved")[2] == "2 zero"
    assert layouts.swaps_pairs(np.array([1, 0, 3, 2, 4]), "interleaved")  # the odd last column stays
    for order in ([1, 0, 3, 2, 0], [1, 0, 3, 2, 5], [2, 3, 0, 1, 1]):  # not a column order
        assert not layouts.swaps_pairs(np.array(order), "interleaved" if order[0] == 1 else "sin_cos")
    assert posenc.defaults.LAYOUT in layouts.LAYOUTS and posenc.defaults.ODD in layouts.ODD_RULES
    assert not hasattr(validation, "ODD_RULES") and not hasattr(validation, "layout")  # one owner


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
def test_odd_width_is_the_even_width_plus_a_zero_column(layout):
    odd = posenc.table(6, 9, layout=layout, shift=1)
    even = posenc.table(6, 8, layout=layout, shift=1)
    assert odd.shape == (6, 9)
    np.testing.assert_array_equal(odd[:, :8], even)
    np.testing.assert_array_equal(odd[:, 8], 0.0)


def test_stored_pi_digits_match_machins_formula_and_mpmath():
    import mpmath

    from posenc.core import highprec

    for digits in (5, 17, 85, 300, 490):
        assert highprec.pi(digits) == highprec.machin_pi(digits)
    with mpmath.workdps(500):
        assert str(highprec.pi(490)) == mpmath.nstr(mpmath.pi, 490)
    assert highprec.pi(600) == highprec.machin_pi(600)  # beyond the stored digits


def test_frequencies_are_the_nearest_float64_to_the_exact_values():
    import mpmath

    omegas = posenc.frequencies(2 * 300 + 1, base=1e9, shift=1.5, scale=3.5)
    with mpmath.workdps(60):
        for i in (0, 1, 150, 299):
            exact = mpmath.mpf(3.5) * mpmath.power(mpmath.mpf(10) ** 9, -mpmath.mpf(i) / (300 - 1.5))
            assert omegas[i] == float(exact)


def test_shift_one_is_tensor2tensor_frequencies():
    omegas = posenc.frequencies(512, shift=1)
    np.testing.assert_allclose(omegas, 10000.0 ** (-np.arange(256) / 255), rtol=1e-15)
    assert omegas[-1] == 1e-4
    paper = posenc.table(1024, 512, dtype="float64")
    t2t = posenc.table(1024, 512, shift=1, dtype="float64")
    assert 1.3 < np.abs(paper - t2t).max() < 1.4  # paper vs tensor2tensor frequencies: up to 1.34 apart


def test_shapes_follow_positions():
    assert posenc.encode(5, 6).shape == (6,)
    assert posenc.encode(np.zeros((2, 3, 4), dtype=np.int32), 6).shape == (2, 3, 4, 6)
    assert posenc.encode([], 6).shape == (0, 6)
    assert posenc.table(0, 6).shape == (0, 6)


def test_dtypes():
    for name in ("float64", "float32", "float16", "bfloat16"):
        assert posenc.table(3, 4, dtype=name).dtype.name == name
    assert posenc.table(3, 4, dtype=np.float16).dtype == np.float16


def test_integer_and_float_positions_agree():
    ints = np.array([0, 1, 5, 2**30, -(2**31) + 1], dtype=np.int64)
    expected = posenc.encode(ints.astype(np.float64), 16)
    for kind in (np.int64, np.int32, np.uint32):
        chosen = ints[ints >= 0] if kind is np.uint32 else ints
        chosen = chosen[np.abs(chosen) < 2**31 - 1] if kind is np.int32 else chosen
        got = posenc.encode(chosen.astype(kind), 16)
        np.testing.assert_array_equal(got, posenc.encode(chosen.astype(np.float64), 16))
    np.testing.assert_array_equal(posenc.encode(ints.tolist(), 16), expected)


def test_bfloat16_and_float16_round_once_not_twice():
    """float64 -> float32 -> bfloat16 would round 1 + 2**-8 + 2**-40 down (a tie); once rounds up."""
    from posenc import core

    value = np.array([1 + 2**-8 + 2**-40, 1 + 2**-11 + 2**-40])
    assert float(core.rounding.rounder(validation.dtype("bfloat16"))(value[:1])[0]) == 1 + 2**-7
    assert float(core.rounding.rounder(np.dtype(np.float16))(value[1:])[0]) == 1 + 2**-10


# --- properties -------------------------------------------------------------------------------------

options = st.fixed_dictionaries(
    {
        "d_model": st.integers(2, 40),
        "base": st.sampled_from([10000.0, 100.0, 2.0, 1e9]),
        "shift": st.sampled_from([0, 1]),
        "layout": st.sampled_from(["interleaved", "sin_cos", "cos_sin"]),
    }
).filter(lambda o: o["d_model"] // 2 > o["shift"])


@settings(max_examples=60, deadline=None)
@given(
    options=options,
    start=st.integers(-(2**31) + 1, 2**31 - 400),
    length=st.integers(1, 300),
    split=st.integers(0, 300),
    dtype=st.sampled_from(["float32", "float16", "bfloat16", "float64"]),
)
def test_table_rows_equal_encode_and_do_not_depend_on_chunking(options, start, length, split, dtype):
    whole = posenc.table(length, start=start, dtype=dtype, **options)
    rows = posenc.encode(start + np.arange(length), dtype=dtype, **options)
    assert whole.tobytes() == rows.tobytes()
    split = min(split, length)
    head = posenc.table(split, start=start, dtype=dtype, **options)
    tail = posenc.table(length - split, start=start + split, dtype=dtype, **options)
    assert np.concatenate([head, tail]).tobytes() == whole.tobytes()
    assert posenc.table(length, start=start, dtype=dtype, **options).tobytes() == whole.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    options=options,
    positions=st.lists(st.floats(-(2.0**31) + 1, 2.0**31 - 1, allow_nan=False), min_size=1, max_size=20),
)
def test_bounded_and_unit_pairs(options, positions):
    pe = posenc.encode(positions, dtype="float64", **options)
    assert np.all(np.abs(pe) <= 1.0)
    n = options["d_model"] // 2
    sin_cos = posenc.encode(positions, dtype="float64", **{**options, "layout": "sin_cos"})
    np.testing.assert_allclose(sin_cos[:, :n] ** 2 + sin_cos[:, n : 2 * n] ** 2, 1.0, atol=4e-16)


@settings(max_examples=40, deadline=None)
@given(
    d_model=st.integers(2, 600).filter(lambda d: d % 2 == 0),
    i=st.integers(-(2**30), 2**30),
    j=st.integers(-(2**30), 2**30),
    k=st.integers(-(2**29), 2**29),
)
def test_dot_products_depend_only_on_the_offset(d_model, i, j, k):
    pe = posenc.encode([i, j, i + k, j + k], d_model, dtype="float64")
    assert pe[0] @ pe[1] == pytest.approx(pe[2] @ pe[3], abs=1e-12 * d_model)
    closed = np.cos((i - j) * posenc.frequencies(d_model).astype(np.longdouble)).sum()
    if abs(i - j) < 2**20:  # long double keeps the closed form accurate there
        assert pe[0] @ pe[1] == pytest.approx(float(closed), abs=1e-11 * d_model)


def test_negative_positions_mirror_positive_ones():
    plus = posenc.encode(np.arange(1, 50), 32, layout="sin_cos")
    minus = posenc.encode(-np.arange(1, 50), 32, layout="sin_cos")
    np.testing.assert_array_equal(minus[:, :16], -plus[:, :16])
    np.testing.assert_array_equal(minus[:, 16:], plus[:, 16:])


# --- out= and memory --------------------------------------------------------------------------------


def test_out_is_filled_and_returned():
    out = np.full((7, 6), np.nan, dtype=np.float32)
    result = posenc.table(7, 6, start=3, out=out)
    assert result is out
    np.testing.assert_array_equal(out, posenc.table(7, 6, start=3))
    out64 = np.empty((2, 3, 6))
    assert posenc.encode(np.ones((2, 3)), 6, out=out64).dtype == np.float64  # dtype follows out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_out_allocates_no_full_size_temporary(dtype):
    """Writing a 32-128 MiB table into ``out=`` must allocate far less than the table (NumPy reports its
    allocations to tracemalloc): the work goes block by block."""
    import tracemalloc

    length, d_model = 4096, 4096
    out = np.empty((length, d_model), dtype=validation.dtype(dtype))
    posenc.table(64, d_model, dtype=dtype)  # warm: the compiled kernels load outside the measurement
    tracemalloc.start()
    try:
        posenc.table(length, d_model, dtype=dtype, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < out.nbytes / 3, f"peak {peak / 2**20:.1f} MiB for a {out.nbytes / 2**20:.0f} MiB table"
    last = np.arange(length - 3, length)
    np.testing.assert_array_equal(out[-3:], posenc.encode(last, d_model, dtype=dtype))


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.empty((7, 5), np.float32), "shape"),
        (np.empty((7, 6), np.float64), "dtype float32"),
        (np.empty((6, 7), np.float32).T, "C-contiguous"),
        ([[0.0] * 6] * 7, "NumPy array"),
    ],
)
def test_bad_out(out, message):
    with pytest.raises((ValueError, TypeError), match=message):
        posenc.table(7, 6, out=out, dtype="float32")


def test_output_too_large_fails_before_allocating():
    with pytest.raises(ValueError, match=r"needs 256 GiB"):
        posenc.table(2**27, 512)
    with pytest.raises(ValueError, match=r"GiB"):
        posenc.encode(np.zeros(2**20), 2**17)


V2 = "sys/fs/cgroup/job/memory."
V1 = "sys/fs/cgroup/memory/memory."


@pytest.mark.parametrize(
    ("cgroup", "files", "headroom"),
    [
        ("0::/job\n", {V2 + "max": "1000\n", V2 + "current": "400"}, 600),
        ("0::/\n", {"sys/fs/cgroup/memory.max": "max\n", "sys/fs/cgroup/memory.current": "400"}, None),
        # v1, seen from inside a container: its own cgroup at the mount's root
        ("4:memory:/host/view\n", {V1 + "limit_in_bytes": "2048", V1 + "usage_in_bytes": "48"}, 2000),
        ("4:memory:/\n", {V1 + "limit_in_bytes": str(2**63 - 4096), V1 + "usage_in_bytes": "1"}, None),
    ],
)
def test_a_container_memory_limit_counts(tmp_path, cgroup, files, headroom):
    """A cgroup limit below the machine's memory must be what the out-of-memory check compares with."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert validation._cgroup_headroom(str(tmp_path)) == headroom


def test_output_beyond_a_container_limit_fails_before_allocating(monkeypatch):
    monkeypatch.setattr(validation, "_cgroup_headroom", lambda: 2**20)  # 1 MiB left in this container
    with pytest.raises(ValueError, match=r"needs 0\.125 GiB but only 0\.000977 GiB .* with start= and out=$"):
        posenc.table(32768, 1024)  # 128 MiB (the library names its parameters, never the command's options)
    assert posenc.table(8, 64).shape == (8, 64)


# --- bad input --------------------------------------------------------------------------------------

BAD = [
    ({"d_model": 0}, ValueError, r"d_model must be an integer >= 2; got 0"),
    ({"d_model": 1}, ValueError, r"d_model must be an integer >= 2; got 1"),
    ({"d_model": -4}, ValueError, r"d_model.*got -4"),
    ({"d_model": 4.0}, TypeError, r"d_model must be an integer.*got 4\.0.*pass 4 instead"),
    ({"d_model": True}, TypeError, r"d_model must be an integer.*True"),
    ({"d_model": "4"}, TypeError, r"d_model must be an integer.*'4'"),
    ({"base": 1.0}, ValueError, r"base must be > 1.*got 1\.0"),
    ({"base": 0.5}, ValueError, r"base must be > 1"),
    ({"base": -3}, ValueError, r"base must be > 1"),
    ({"base": math.nan}, ValueError, r"base must be finite; got nan; pass a number > 1, e\.g\. 10000"),
    ({"base": math.inf}, ValueError, r"base must be finite; got inf; pass a number > 1"),
    ({"base": "10000"}, TypeError, r"base must be a real number"),
    ({"base": True}, TypeError, r"base must be a real number"),
    (
        {"d_model": 2, "shift": 1},
        ValueError,
        r"shift=1 with d_model=2 gives n - shift = 1 - 1 <= 0",
    ),
    ({"d_model": 3, "shift": 1}, ValueError, r"shift=1 with d_model=3"),
    ({"shift": math.nan}, ValueError, r"shift must be finite"),
    # within scale's domain (0, 2**20], yet its lowest frequency is below 2**-900 (a normal float64, but past
    # what posenc computes: not "underflows"): said of the scale, not the base
    (
        {"scale": 1e-300},
        ValueError,
        r"= 2\*\*-1007 is below 2\*\*-900, the smallest posenc computes \(scale=1e-300, "
        r".*use a larger scale$",
    ),
    (
        {"layout": "concat"},
        ValueError,
        r"layout must be one of 'interleaved', 'sin_cos', 'cos_sin'",
    ),
    ({"dtype": "int32"}, ValueError, r"dtype must be one of 'float64'.*'bfloat16'; got 'int32'"),
    ({"dtype": np.int8}, ValueError, r"dtype must be one of"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD)
def test_bad_options_in_encode_and_table(kwargs, error, message):
    args = {"d_model": 8, **kwargs}
    with pytest.raises(error, match=message):
        posenc.encode([1, 2], **args)
    with pytest.raises(error, match=message):
        posenc.table(3, **args)
    if "layout" not in kwargs and "dtype" not in kwargs:
        with pytest.raises(error, match=message):
            posenc.frequencies(**args)


@pytest.mark.parametrize(
    ("positions", "error", "message"),
    [
        ([1.0, math.nan], ValueError, r"positions must be finite; got nan at index \(1,\)"),
        ([math.inf], ValueError, r"positions must be finite; got inf"),
        ([2**31], ValueError, r"\|p\| < 2\*\*31 = 2147483648.*got 2147483648"),
        (np.array([-(2.0**31)]), ValueError, r"\|p\| < 2\*\*31"),
        ([10**30], ValueError, r"\|p\| < 2\*\*31"),
        (np.array([2**40], dtype=np.uint64), ValueError, r"\|p\| < 2\*\*31"),
        ([True, False], TypeError, r"not booleans"),
        ([1, True], TypeError, r"not booleans; got a list holding True or False"),  # NumPy made it [1, 1]
        ([[0, 1], (2.5, np.False_)], TypeError, r"not booleans"),
        (
            np.ma.masked_array([1, 2], mask=[0, 1]),
            TypeError,
            r"masked array.*compressed\(\)",
        ),  # 2 was encoded
        ([1 + 2j], TypeError, r"positions must be integers or real numbers; got dtype complex128"),
        (["1"], TypeError, r"positions must be integers or real numbers"),
        ([None], TypeError, r"positions must be integers or real numbers"),
    ],
)
def test_bad_positions(positions, error, message):
    with pytest.raises(error, match=message):
        posenc.encode(positions, 8)


def test_a_masked_array_with_nothing_masked_is_its_values():
    unmasked = np.ma.masked_array([1, 2], mask=[0, 0])
    np.testing.assert_array_equal(posenc.encode(unmasked, 8), posenc.encode([1, 2], 8))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"length": -1}, ValueError, r"length must be an integer >= 0; got -1"),
        ({"length": 2.5}, TypeError, r"length must be an integer"),
        ({"length": 3.0}, TypeError, r"length must be an integer.*pass 3 instead"),
        ({"length": 3, "start": 1.5}, TypeError, r"start must be an integer"),
        ({"length": 3, "start": 2**31 - 2}, ValueError, r"start \+ length - 1 = 2147483648"),
        ({"length": 3, "start": -(2**31)}, ValueError, r"start must be an integer >= -2147483647"),
    ],
)
def test_bad_table_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        posenc.table(d_model=8, **kwargs)


def test_import_posenc_loads_nothing_and_its_functions_load_numpy_only():
    loaded = "sorted(m for m in ('numpy', 'torch', 'jax', 'matplotlib', 'ml_dtypes') if m in sys.modules)"
    code = f"import sys, posenc; print({loaded}); posenc.table(2, 4); print({loaded})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["[]", "['numpy']"]


def test_the_lazy_names_are_the_core_functions():
    code = (
        "import posenc; from posenc import encode; "
        "print(posenc.table is posenc.core.table, encode is posenc.core.encode)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "True True"
    assert {"encode", "table", "frequencies"} <= set(dir(posenc))
    code = "import posenc as p; print(p.defaults.BASE, p.layouts.__name__, p.porting.__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["10000.0", "posenc.layouts", "posenc.porting"]


def test_public_surface():
    functions = "audit convert_layout encode frequencies grid identify table"
    modules = "analysis auditor grids positions presets rope sharding testing"
    assert set(posenc.__all__) == {"PosencError", "__version__", *functions.split(), *modules.split()}
    assert posenc.PosencError is posenc.errors.PosencError
    assert posenc.rope.cos_sin is posenc.rope.tables.cos_sin
    assert callable(posenc.audit) and posenc.auditor.AuditReport is posenc.auditor.report.AuditReport
    # posenc.audit is a plain function over a plain package: no module swaps its class
    assert posenc.audit is posenc.auditor.audit and type(posenc.auditor) is types.ModuleType
    code = (
        "import posenc; f = posenc.audit; import posenc.auditor; "
        "print(f is posenc.audit is posenc.auditor.audit, type(posenc.auditor).__name__)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "module"]
    assert posenc.__version__ == "0.1.0"
