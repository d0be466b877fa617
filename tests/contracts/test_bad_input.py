"""Regression cases of bad input and edge cases: each gets the right value or a clear error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from tests.support.module_cases import core_options


def test_lowest_frequencies_near_the_float64_limit_are_computed_not_overflowed():
    """frequencies down to ~2**-900 used to raise OverflowError while converting a huge fixed-point int."""
    omegas = posenc.frequencies(512, shift=252)
    assert omegas[0] == 1.0 and 0 < omegas[-1] < 2.0**-800
    row = posenc.table(1, 4, base=1e300, shift=0.8, dtype="float64")[0]
    np.testing.assert_array_equal(row, [0.0, 1.0, 0.0, 1.0])  # position 0


def test_an_integer_out_array_is_refused_not_filled_with_truncated_values():
    with pytest.raises(
        TypeError, match=r"out must be a float64, float32, float16 or bfloat16 array; got dtype int32"
    ):
        posenc.table(5, 8, out=np.full((5, 8), 7, np.int32))


@pytest.mark.parametrize("spelling", [torch.bfloat16, "bfloat16"])
def test_dtype_spellings_are_accepted_everywhere(spelling):
    want = posenc.encode([1, 2], 4, dtype="bfloat16").view(np.uint16)
    assert np.array_equal(posenc.encode([1, 2], 4, dtype=spelling).view(np.uint16), want)
    got = pt.encode(torch.tensor([1, 2]), 4, dtype=spelling)
    assert got.dtype == torch.bfloat16 and np.array_equal(got.view(torch.int16).numpy(), want.view(np.int16))
    assert pt.table(2, 4, start=1, dtype=spelling).dtype == torch.bfloat16


def test_uint8_positions_are_positions_not_a_mask():
    ids = torch.tensor([0, 3, 200], dtype=torch.uint8)
    np.testing.assert_array_equal(pt.encode(ids, 8).numpy(), posenc.encode([0, 3, 200], 8))


def test_none_positions_and_the_lowest_int64_are_clear_errors():
    with pytest.raises(TypeError, match="positions must be a tensor"):
        pt.encode(None, 8)
    with pytest.raises(ValueError, match=r"positions must satisfy \|p\| < 2\*\*31"):
        pt.encode(torch.tensor([-(2**63)]), 8)


def test_the_shape_message_says_what_the_module_accepts():
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    assert module(torch.zeros(2, 3, 4, 8)).shape == (2, 3, 4, 8)  # (..., seq, d_model): accepted, as said
    with pytest.raises(ValueError, match=r"\(\.\.\., seq, d_model\)"):
        module(torch.zeros(8))


@pytest.mark.parametrize(
    ("shape", "error", "message"),
    [
        ((), ValueError, r"at least one axis"),
        (4, TypeError, r"sequence of axis sizes"),
        ((0, 4), ValueError, r"shape must be an integer >= 1; got 0"),
    ],
)
def test_empty_and_zero_size_grids_are_clear_errors(shape, error, message):
    with pytest.raises(error, match=message):
        posenc.grid(shape, 8)


@pytest.mark.parametrize(
    ("pe", "message"),
    [
        (torch.tensor(1.0), r"must have shape \(1, max_len, d_model\)"),
        (torch.full((1, 10, 8), float("nan")), "NaN or inf"),
        (None, "differs from this module's encoding at row"),  # the tutorial's table scaled by 1.01
    ],
)
def test_checkpoints_whose_pe_is_not_this_encoding_are_refused(pe, message):
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    if pe is None:
        pe = module.pe[:, :5000] * 1.01
    with pytest.raises(ValueError, match=message):
        module.load_state_dict({"pe": pe})


def test_check_in_float16_past_65520_prints_no_numpy_warnings():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "posenc", "check", "--dtype", "float16", "--length", "70000"],
        capture_output=True,
        text=True,
    )
    assert "RuntimeWarning" not in result.stderr and result.stdout


@pytest.mark.parametrize(
    "call", [lambda: posenc.encode(0, 20_000_000), lambda: posenc.frequencies(2**31 - 1)]
)
def test_a_huge_d_model_is_refused_at_once(call):
    with pytest.raises(ValueError, match=r"d_model must be <= 2\*\*20 = 1048576"):
        call()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"padding_idx": 20}, ValueError, r"padding_idx must be a token id in \[-20, 20\).*got 20"),
        ({"padding_idx": -21}, ValueError, "padding_idx must be an integer >= -20; got -21"),
        ({"padding_idx": 1.0}, TypeError, "padding_idx must be an integer"),
        ({"batch_first": False}, TypeError, "ids of shape \\(batch, seq\\): drop batch_first"),
    ],
)
def test_bad_token_embedding_arguments_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        pt.TokenAndPositionEmbedding(20, 8, **kwargs)
    assert (
        pt.TokenAndPositionEmbedding(20, 8, padding_idx=-1).embedding.padding_idx == 19
    )  # nn.Embedding's rule


def test_position_minus_zero_gives_minus_zero_sines_on_every_path():
    """The rule (IEEE: sin(-0) = -0): position -0.0 gives sin columns of -0.0 and cos columns of 1, in every
    dtype, through the core, the portable algorithm, torch and JAX; position +0.0 and integer 0 give +0.0."""
    import jax
    import jax.numpy as jnp

    import posenc.jax as pj
    from posenc import portable

    numpy_backend = portable.backend_of(np.zeros(1))
    positions = [-0.0, 0.0, 0.0]
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        request = portable.request_for(core_options(6, layout="sin_cos"), dtype)
        jitted = jax.jit(lambda t, d=dtype: pj.encode(t, 6, layout="sin_cos", dtype=d))
        rows = [
            posenc.encode([-0.0, 0.0, 0], 6, layout="sin_cos", dtype=dtype),
            portable.encode(numpy_backend, np.array(positions), request),
            pt.encode(torch.tensor(positions), 6, layout="sin_cos", dtype=dtype).double().numpy(),
        ]
        if dtype != "float64":  # JAX without x64
            rows.append(jitted(jnp.array(positions)))
        for got in rows:
            got = np.asarray(got, np.float64)
            assert np.signbit(got[0, :3]).all() and (got[0, 3:] == 1).all(), (dtype, got)
            assert not np.signbit(got[1:]).any(), (dtype, got)
    assert posenc.table(1, 4)[0].tobytes() == posenc.encode([0.0], 4)[0].tobytes()


def test_an_unknown_preset_argument_lists_the_valid_ones_not_a_private_function():
    from posenc import presets

    with pytest.raises(TypeError, match=r"'fairseq' takes no parameter 'padding'.*padding_idx=None") as error:
        presets.get("fairseq", padding=1)
    assert "_fairseq" not in str(error.value)


def test_narrow_ml_dtypes_positions_are_converted_exactly_in_the_core():
    """NumPy arrays of bfloat16, float8, float4 and int4 (ml_dtypes' own kind, not "f") were refused by the
    core ("got dtype bfloat16") where torch and JAX convert them; every value is a float32 (an int64)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float4_e2m1fn"):
        positions = np.array([0.5, 1.5, 3, -6], getattr(ml_dtypes, name))
        np.testing.assert_array_equal(
            posenc.encode(positions, 8), posenc.encode([0.5, 1.5, 3.0, -6.0], 8), err_msg=name
        )
    np.testing.assert_array_equal(
        posenc.encode(np.array([1, -7], ml_dtypes.int4), 8), posenc.encode([1, -7], 8)
    )


def test_position_and_rotary_checks_are_posenc_errors_naming_the_argument():
    """The position and rotary checks raise PosencErrors whose parameter names the argument (these raised
    plain ValueError/TypeError), and boolean positions show the value received."""
    import posenc.rope as rope
    from posenc.errors import PosencError

    yarn = {"rope_type": "yarn", "factor": 1e6, "original_max_position_embeddings": 1024}
    params = rope.config(
        {
            "hidden_size": 64,
            "num_attention_heads": 1,
            "max_position_embeddings": 4096,
            "rope_scaling": {**yarn, "mscale": 1e4, "mscale_all_dim": 1e-6},
        }
    )
    cases = [
        (lambda: rope.cos_sin(np.arange(3)[None], params), "params"),
        (lambda: pt.encode(torch.tensor([True]), 8), "positions"),
        (
            lambda: pt.SinusoidalPositionalEncoding(8)(torch.zeros(2, 1, 8), torch.tensor([2.0**31, 0.0])),
            "positions",
        ),
        (lambda: pt.encode(torch.tensor([1.0 + 0j]), 8), "positions"),
    ]
    for call, parameter in cases:
        with pytest.raises(PosencError) as caught:
            call()
        assert caught.value.parameter == parameter, caught.value
    with pytest.raises(PosencError, match=r"not booleans; got array\(\[ True, False\]\)"):
        posenc.encode(np.array([True, False]), 8)
    with pytest.raises(PosencError, match=r"not booleans; got a bool tensor of shape \(1,\)"):
        pt.encode(torch.tensor([True]), 8)


def test_a_read_only_or_strided_out_is_refused_with_a_fix_that_works():
    """np.ascontiguousarray(out) was the advice: a read-only array stays read-only, and a strided one's
    copy would receive the rows instead of the caller's array."""
    read_only = np.empty((5, 8), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match=r"out must be a writeable array; got a read-only one; allocate it"):
        posenc.table(5, 8, out=read_only)
    with pytest.raises(ValueError, match=r"out must be a C-contiguous array .* got a strided one"):
        posenc.table(5, 8, out=np.empty((8, 5), np.float32).T)
