"""The fuzz suite (tests/support/fuzzing.py), the adapters' functions: ``posenc.torch.encode``/``table`` and
``posenc.jax.encode``/``table`` (concrete positions, eager and under jit as constants; traced ones are in
the regressions), each bit for bit against the core."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
import posenc.jax as pj
import posenc.torch as pt
from tests.support.fuzz_cases import (
    BFLOAT16,
    exact_positions,
    may_underflow,
    option_problems,
    right_value_or_clear_error,
    same_bits,
    spot_check,
)
from tests.support.fuzz_torch import (
    TORCH_OTHER,
    TORCH_OUT,
    torch_positions,
    torch_values,
)
from tests.support.fuzzing import (
    LENGTHS,
    NAN,
    SIZE_WORDS,
    STARTS,
    X64,
    _finite_in_range,
    core_options,
    fuzz,
    jax_positions,
    reference_options,
    table_problems,
)

TORCH_DTYPES = [*TORCH_OUT, "float32", "bfloat16", "float16", "float64"]
TORCH_BAD_DTYPES = [torch.int32, "int8", torch.complex64, "f4", None, torch.float8_e5m2]


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


JAX_OUT = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16, "float64": jnp.float64}


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
