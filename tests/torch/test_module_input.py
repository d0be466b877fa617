"""The framework-neutral checks of module inputs (posenc.adapters), shared by posenc.torch and
posenc.jax: the same shapes, messages and exact offsets whichever framework calls them."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc import adapters, portable

NUMPY = portable.backend_named("numpy")


def _call(positions, offset, seq=5, batch=(2,)):
    return adapters.positions_and_offset(
        NUMPY, seq, batch, positions, offset, host=True, arange=lambda: np.arange(seq)
    )


def test_shapes_of_x_and_orientation():
    assert adapters.batch_and_seq((2, 5, 8), 8, True) == ((2,), 5)
    assert adapters.batch_and_seq((5, 8), 8, True) == ((), 5)
    assert adapters.batch_and_seq((5, 2, 8), 8, False) == ((2,), 5)
    with pytest.raises(ValueError, match=r"\(seq, batch, d_model\) with d_model=8; got shape \(5, 8\)"):
        adapters.batch_and_seq((5, 8), 8, False)
    pe = np.zeros((2, 5, 8))
    assert adapters.orient(NUMPY, pe, False).shape == (5, 2, 8)
    assert adapters.orient(NUMPY, pe[0], False).shape == (5, 1, 8)


def test_offsets_are_handed_on_never_added_in_the_positions_dtype():
    positions = np.array([0.5, 1.5, 2.5, 3.5, 4.5], np.float32)
    ids, offset = _call(positions, 2**30)
    assert ids is positions and offset == 2**30  # float32 + 2**30 would round: the encoder adds it exactly
    ids, offset = _call(None, np.array([3, 4]))
    # one rank: (1, seq) against (batch, 1), as JAX's jax_numpy_rank_promotion="raise" requires
    assert ids.tolist() == [list(range(5))] and offset.shape == (2, 1)
    assert _call(None, 0)[1] is None


@pytest.mark.parametrize(
    ("positions", "offset", "error", "message"),
    [
        (np.zeros(5, bool), 0, TypeError, "not booleans"),
        (np.zeros(5, complex), 0, TypeError, "complex"),
        (np.arange(4), 0, ValueError, r"positions must have shape \(5,\) or \(2, 5\)"),
        (None, -1, ValueError, "offset must be >= 0; got -1"),
        (None, np.array([1, -2]), ValueError, "offset must be >= 0"),
        (None, 1.5, TypeError, "offset must be an int"),
        (None, True, TypeError, "offset must be an int"),
        (
            None,
            np.array([1.0, 2.0]),
            TypeError,
            "offset must be an int or an integer array; got dtype float64",
        ),
        (None, np.array([1, 2, 3]), ValueError, r"shape \(\) or x's batch shape \(2,\) .*; got shape \(3,\)"),
    ],
)
def test_bad_positions_and_offsets(positions, offset, error, message):
    with pytest.raises(error, match=message):
        _call(positions, offset)


def test_both_frameworks_add_a_large_offset_to_real_positions_exactly():
    import jax.numpy as jnp
    import torch

    import posenc.jax as pj
    import posenc.torch as pt

    positions = np.array([0.25, -0.5, 3.75], np.float32)  # + 2**30 + 3: not a float32, not a float64 sum
    want = posenc.encode(np.array([2**30 + 3.25, 2**30 + 2.5, 2**30 + 6.75]), 16)
    got_torch = pt.SinusoidalPositionalEncoding(16, batch_first=True).encoding_for(
        torch.zeros(3, 16), torch.from_numpy(positions), offset=2**30 + 3
    )
    np.testing.assert_array_equal(got_torch.numpy(), want)
    got_jax = pj.SinusoidalPositionalEncoding(16).encoding_for(
        jnp.zeros((3, 16)), positions, offset=2**30 + 3
    )
    np.testing.assert_array_equal(np.asarray(got_jax), want)


def test_narrow_float_positions_become_float32_exactly():
    import ml_dtypes

    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        narrow = np.array([1.5, -3.0, 96.0], dtype=getattr(ml_dtypes, name))
        wide = adapters.exact_float32(narrow)
        assert wide.dtype == np.float32
        np.testing.assert_array_equal(wide, [1.5, -3.0, 96.0])
    for array in (np.arange(3), np.zeros(2, np.float16), np.zeros(2)):
        assert adapters.exact_float32(array) is array
