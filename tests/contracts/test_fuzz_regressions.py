"""The fuzz suite (tests/support/fuzzing.py): bad inputs that once failed (a crash, a wrong value or an
unclear
error), each kept as a numbered, explicit regression test, then the cases the fuzzer found."""

from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
import posenc.jax as pj
import posenc.torch as pt
from posenc import grids, presets
from tests.support import reference as ref
from tests.support.fuzz_cases import (
    BFLOAT16,
    DTYPE_NAMES,
    assert_element,
    exact_positions,
    expected_value,
    right_value_or_clear_error,
    same_bits,
)
from tests.support.fuzz_torch import (
    TORCH_INTS,
    torch_values,
)
from tests.support.fuzzing import (
    INF,
    NAN,
    assert_clean_failure,
    fuzz,
    reference_options,
    run_cli,
)
from tests.support.tutorial import tutorial_table

# --- regressions: bad inputs that once failed, numbered, then what the fuzzer found -------------------


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


# 12. smaller cases: None positions and the lowest int64, bad tutorial checkpoints, a bad padding_idx,
# --digits out of range, a compiled call with a Python int position, numba's workqueue threads
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
