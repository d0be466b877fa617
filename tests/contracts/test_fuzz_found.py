"""The fuzz suite (tests/support/fuzzing.py): what the fuzzer found, the bad-input rule applied to every
entry point,
as explicit regression tests."""

from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
import torch

import posenc
import posenc.jax as pj
import posenc.torch as pt
from posenc import analysis, grids, porting, sharding
from tests.support.fuzz_cases import (
    right_value_or_clear_error,
    same_bits,
)
from tests.support.fuzz_torch import torch_values
from tests.support.fuzzing import (
    NAN,
    SIZE_WORDS,
)

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
