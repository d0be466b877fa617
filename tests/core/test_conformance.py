"""Conformance with the real libraries whose variants posenc claims, run through their own code paths.

Each reference runs in float64 wherever its own code allows, and is then held to float64 accuracy
(:func:`_float64_tolerance`, ~1e-12 at angle 1000): Whisper's ``sinusoids`` (under a float64 default dtype),
keras-hub's ``SinePositionEncoding(dtype="float64")``, diffusers' 2-D/3-D grids. DistilBERT/XLM and Marian
compute in float64 NumPy but round to float32 inside the function (``torch.FloatTensor``): they are held to
"float64 rounded once", i.e. within half a float32 ulp of the exact value (:func:`_assert_rounded_once`).
Where the library forces float32 arithmetic (M2M100/fairseq ``.float()``, diffusers' timestep embedding,
positional-encodings' float32 inverse frequencies), agreement is asserted within that float32 error, which
grows with the angle: ~|angle| · 2**-24 (:func:`_float32_tolerance`). Every comparison is elementwise.
Position-id logic must agree exactly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from posenc import grids, presets


def _float32_tolerance(max_angle: float) -> float:
    """What float32 code computing angles up to ``max_angle`` can be off by (with a safety factor)."""
    return 8 * max_angle * 2.0**-24 + 1e-6


def _float64_tolerance(max_angle: float) -> float:
    """What float64 code computing angles up to ``max_angle`` can be off by (with a safety factor)."""
    return 8 * max_angle * 2.0**-53 + 1e-15


def _assert_rounded_once(theirs: np.ndarray, exact: np.ndarray, max_angle: float) -> None:
    """``theirs`` (float32) is float64 arithmetic rounded once: within half a float32 ulp of ``exact``.

    ``exact`` is posenc's float64 table; the slack is the float64 reference's own error. (Today the
    tables are bit-identical to posenc's correctly rounded float32 ones, but a float64 sin within an ulp of
    a float32 rounding midpoint may legitimately round the other way on another platform.)
    """
    assert theirs.dtype == np.float32 and theirs.shape == exact.shape
    half_ulp = np.spacing(np.abs(theirs)).astype(np.float64) / 2
    excess = np.abs(theirs.astype(np.float64) - exact) - half_ulp
    assert np.max(excess) <= _float64_tolerance(max_angle), np.unravel_index(np.argmax(excess), excess.shape)


@pytest.fixture
def float64_default_dtype():
    """torch's default dtype set to float64 for the test, restored afterwards whatever happens."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


# --- transformers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [16, 17, 1024])
def test_m2m100_fairseq_table_and_positions(d_model):
    # Float32 only: get_embedding computes in float32 (``arange(...).float()``) whatever the default dtype,
    # which only decides the dtype the float32 values are cast to.
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    table = M2M100SinusoidalPositionalEmbedding.get_embedding(300, d_model, padding_idx=1).numpy()
    ours = presets.get("fairseq", padding_idx=1).table(300, d_model, dtype="float64")
    np.testing.assert_allclose(ours, table, rtol=0, atol=_float32_tolerance(300))
    assert not ours[1].any()  # the padding row
    module = M2M100SinusoidalPositionalEmbedding(64, d_model, padding_idx=1)
    ids = torch.tensor([[5, 6, 7, 1, 1], [1, 1, 8, 9, 10]])
    for past in (0, 3):
        theirs = module(ids, past_key_values_length=past)
        positions = posenc.positions.make_positions(ids.numpy(), 1, past_key_values_length=past)
        np.testing.assert_array_equal(
            positions, pt.make_positions(ids, 1, past_key_values_length=past).numpy()
        )
        np.testing.assert_allclose(
            presets.get("fairseq", padding_idx=1).encode(positions, d_model, dtype="float64"),
            theirs.numpy(),
            rtol=0,
            atol=_float32_tolerance(64),
        )


@pytest.mark.parametrize("past", [0, 3])
def test_xglm_positions_are_fairseq_positions_without_padding(past):
    # Float32 only, as M2M100 (the same get_embedding). transformers' XGLM numbers positions with
    # arange(past, past + seq) + 2 (it no longer skips padding), which is fairseq's make_positions with
    # padding_idx = 1 on an unpadded sequence.
    from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

    module = XGLMSinusoidalPositionalEmbedding(64, 24, padding_idx=1)
    position_ids = torch.arange(past, past + 6).unsqueeze(0)
    theirs = module(position_ids, past_key_values_length=past).numpy()
    ids = np.array([[5, 6, 7, 8, 9, 10]])
    positions = posenc.positions.make_positions(ids, 1, past_key_values_length=past)
    np.testing.assert_array_equal(positions, position_ids.numpy() + module.offset)
    np.testing.assert_allclose(
        presets.get("fairseq", padding_idx=1).encode(positions, 24, dtype="float64"),
        theirs,
        rtol=0,
        atol=_float32_tolerance(64),
    )


@pytest.mark.parametrize(("length", "channels", "max_timescale"), [(1500, 384, 10000.0), (448, 64, 1000.0)])
def test_whisper_sinusoids_in_float64(float64_default_dtype, length, channels, max_timescale):
    # sinusoids builds its frequencies and angles in the default dtype: under float64 the whole computation
    # is float64, so it must agree with posenc's float64 table to float64 accuracy.
    from transformers.models.whisper.modeling_whisper import sinusoids

    theirs = sinusoids(length, channels, max_timescale)
    assert theirs.dtype == torch.float64
    ours = presets.get("whisper", max_timescale=max_timescale).table(length, channels, dtype="float64")
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=_float64_tolerance(length))


def test_whisper_sinusoids_in_float32():
    # The default float32 run (what a checkpoint stores), within float32 error; and odd widths are refused.
    from transformers.models.whisper.modeling_whisper import sinusoids

    theirs = sinusoids(1500, 384)
    assert theirs.dtype == torch.float32
    ours = presets.get("whisper").table(1500, 384, dtype="float64")
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=_float32_tolerance(1500))
    with pytest.raises(ValueError, match="even widths"):
        presets.get("whisper").table(10, 385)


@pytest.mark.parametrize("dim", [64, 65, 768])
def test_distilbert_create_sinusoidal_embeddings(dim):
    # float64 NumPy inside, then torch.FloatTensor: float32 even into a float64 ``out`` (no float64 path),
    # so: float64 rounded once.
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings

    out = torch.empty(512, dim)
    _create_sinusoidal_embeddings(512, dim, out)
    _assert_rounded_once(out.numpy(), presets.get("distilbert").table(512, dim, dtype="float64"), 512)


@pytest.mark.parametrize("dim", [512, 31])
def test_marian_sinusoidal_embedding(dim):
    # As DistilBERT: float64 NumPy, rounded to float32 by torch.FloatTensor inside create_weight, whatever
    # the weight's dtype.
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    theirs = MarianSinusoidalPositionalEmbedding(512, dim).create_weight().numpy()
    _assert_rounded_once(theirs, presets.get("marian").table(512, dim, dtype="float64"), 512)


# --- position ids: fairseq's make_positions as transformers implements it ----------------------------

_POSITION_ID_CASES = {
    "right padding": [[5, 6, 7, 1, 1], [8, 9, 10, 11, 12]],
    "left padding": [[1, 1, 5, 6, 7], [1, 8, 9, 10, 11]],
    "inner padding and an all-padding row": [[1, 5, 1, 6, 1], [1, 1, 1, 1, 1]],
}


def _transformers_position_ids():
    """transformers' position-id functions (fairseq's ``utils.make_positions`` with a past length)."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.nllb_moe.modeling_nllb_moe import NllbMoeSinusoidalPositionalEmbedding
    from transformers.models.speech_to_text.modeling_speech_to_text import (
        Speech2TextSinusoidalPositionalEmbedding,
    )
    from transformers.models.trocr.modeling_trocr import TrOCRSinusoidalPositionalEmbedding

    return {
        "m2m100": M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids,
        "nllb-moe": NllbMoeSinusoidalPositionalEmbedding.create_position_ids_from_input_ids,
        "speech2text": Speech2TextSinusoidalPositionalEmbedding(8, 8, 1).create_position_ids_from_input_ids,
        "trocr": TrOCRSinusoidalPositionalEmbedding(8, 8, 1).create_position_ids_from_input_ids,
    }


@pytest.mark.parametrize("padding_idx", [1, 0])
@pytest.mark.parametrize("past", [0, 3])
@pytest.mark.parametrize("case", list(_POSITION_ID_CASES))
def test_make_positions_equals_transformers(case, past, padding_idx):
    from transformers.models.fsmt.modeling_fsmt import SinusoidalPositionalEmbedding as FSMTEmbedding

    ids = np.array(_POSITION_ID_CASES[case])
    ids[ids == 1] = padding_idx
    ours = posenc.positions.make_positions(ids, padding_idx, past_key_values_length=past)
    ours_torch = pt.make_positions(torch.from_numpy(ids), padding_idx, past_key_values_length=past)
    assert ours.dtype == np.int64 and ours_torch.dtype == torch.int64
    np.testing.assert_array_equal(ours_torch.numpy(), ours)
    for name, create_position_ids in _transformers_position_ids().items():
        theirs = create_position_ids(torch.from_numpy(ids), padding_idx, past)
        assert theirs.dtype == torch.int64, name
        np.testing.assert_array_equal(ours, theirs.numpy(), err_msg=name)
    if past == 0:  # FSMT's make_positions has no past length
        np.testing.assert_array_equal(
            ours, FSMTEmbedding.make_positions(torch.from_numpy(ids), padding_idx).numpy()
        )


# --- diffusers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("dim", [320, 33])
def test_diffusers_timestep_embedding(flip, shift, dim):
    # Float32 only: get_timestep_embedding builds its exponent with dtype=torch.float32 and casts the
    # timesteps with .float(), whatever the input dtype or the default dtype.
    from diffusers.models.embeddings import Timesteps, get_timestep_embedding

    t = torch.tensor([0.0, 1.0, 2.5, 500.0, 999.0])
    theirs = get_timestep_embedding(
        t, dim, flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=3.0
    ).numpy()
    preset = presets.get("diffusers-timestep", flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=3.0)
    np.testing.assert_allclose(
        preset.encode(t.numpy(), dim, dtype="float64"), theirs, rtol=0, atol=_float32_tolerance(3000)
    )
    module = pt.Timesteps(dim, flip, shift, scale=3.0)
    np.testing.assert_allclose(
        module(t).numpy(),
        Timesteps(dim, flip, shift, scale=3.0)(t).numpy(),
        rtol=0,
        atol=_float32_tolerance(3000),
    )
    np.testing.assert_array_equal(module(t).numpy(), preset.encode(t.numpy(), dim))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"grid_size": 14},
        {
            "grid_size": (6, 10),
            "cls_token": True,
            "extra_tokens": 2,
            "interpolation_scale": 1.5,
            "base_size": 7,
        },
        {"grid_size": 32, "base_size": 16},
    ],
)
def test_diffusers_2d_grid(kwargs):
    # Positions are float32 in diffusers (posenc's grid reproduces them); frequencies, angles and sin/cos
    # are float64 (get_1d_sincos_pos_embed_from_grid's default dtype on CPU): float64 accuracy.
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    theirs = get_2d_sincos_pos_embed(64, **kwargs)
    assert theirs.dtype == torch.float64
    ours = grids.diffusers_2d(64, dtype="float64", **kwargs)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-12)


def test_diffusers_3d_grid():
    # As the 2-D grid: float32 positions (reproduced), float64 frequencies and sin/cos.
    from diffusers.models.embeddings import get_3d_sincos_pos_embed

    theirs = get_3d_sincos_pos_embed(
        64, (5, 3), 4, spatial_interpolation_scale=1.3, temporal_interpolation_scale=0.7
    )
    assert theirs.dtype == torch.float64
    ours = grids.diffusers_3d(
        64, (5, 3), 4, spatial_interpolation_scale=1.3, temporal_interpolation_scale=0.7, dtype="float64"
    )
    assert ours.shape == theirs.shape == (4, 15, 64)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-12)


def test_mae_grid_is_diffusers_grid_with_base_size_equal_to_the_grid():
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    theirs = get_2d_sincos_pos_embed(768, 14, cls_token=True, extra_tokens=1, base_size=14).numpy()
    np.testing.assert_allclose(
        grids.mae_2d(768, 14, cls_token=True, dtype="float64"), theirs, rtol=0, atol=1e-12
    )


# --- positional-encodings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shape", "channels"),
    [("1D", (50,), 7), ("1D", (20,), 16), ("2D", (5, 6), 10), ("2D", (4, 4), 12), ("3D", (3, 4, 5), 13)],
)
def test_positional_encodings_package(name, shape, channels):
    # Run in float64 (.double() and a float64 input: float64 angles and sin/cos), but inv_freq is computed
    # in float32 (``torch.arange(...).float()``) in __init__, before any cast: the frequencies carry float32
    # rounding, so the agreement is float32's.
    from positional_encodings import torch_encodings

    module = getattr(torch_encodings, f"PositionalEncoding{name}")(channels).double()
    theirs = module(torch.zeros(1, *shape, channels, dtype=torch.float64))[0].numpy()
    ours = grids.positional_encodings_nd(shape, channels, dtype="float64")
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=_float32_tolerance(max(shape)))
    if name == "1D":
        np.testing.assert_allclose(
            presets.get("positional-encodings").table(shape[0], channels, dtype="float64"),
            theirs,
            rtol=0,
            atol=_float32_tolerance(shape[0]),
        )


# --- keras-hub on the torch backend -----------------------------------------------------------------


def test_keras_hub_sine_position_encoding():
    """keras-hub installs without TensorFlow (--no-deps) and runs on the torch backend, in its own process.

    The layer computes in its compute dtype: with ``dtype="float64"`` everything is float64 and must agree to
    float64 accuracy; the default float32 layer within float32 error.
    """
    code = textwrap.dedent(
        """
        import os, sys
        os.environ["KERAS_BACKEND"] = "torch"
        import numpy as np
        from keras_hub.layers import SinePositionEncoding
        from posenc import presets
        worst = {"float32": 0.0, "float64": 0.0}
        cases = ((16, 10000.0, 0), (17, 10000.0, 0), (64, 500.0, 0), (24, 10000.0, 5))
        for width, wavelength, start in cases:
            ours = presets.get("keras-hub", max_wavelength=wavelength).table(
                200, width, start=start, dtype="float64"
            )
            for dtype in worst:
                layer = SinePositionEncoding(max_wavelength=wavelength, dtype=dtype)
                out = layer(np.zeros((1, 200, width), dtype=dtype), start_index=start)
                out = np.asarray(out.detach().cpu().numpy())[0]
                assert out.dtype == np.dtype(dtype), (dtype, out.dtype)
                worst[dtype] = max(worst[dtype], float(np.max(np.abs(out.astype(np.float64) - ours))))
        # its float32 deviation at d_model 512, positions 0 .. 1023 (posenc.presets.DEVIATIONS)
        out = SinePositionEncoding()(np.zeros((1, 1024, 512), dtype="float32"))
        exact = presets.get("keras-hub").table(1024, 512, dtype="float64")
        deviation = float(np.max(np.abs(np.asarray(out.detach().cpu().numpy())[0] - exact)))
        print(worst["float32"], worst["float64"], deviation)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    worst32, worst64, deviation = map(float, result.stdout.strip().splitlines()[-1].split())
    assert worst64 <= _float64_tolerance(205)
    assert worst32 <= _float32_tolerance(205)
    assert deviation == pytest.approx(presets.DEVIATIONS["keras-hub"][0][0], rel=0.1)


def test_positional_encodings_float32_deviation_is_the_stated_one():
    """PositionalEncoding1D's own float32 table at d_model 512, positions 0 .. 1023, is off from the exact
    values by the figure posenc.presets states (the tolerance a port's test needs)."""
    from positional_encodings.torch_encodings import PositionalEncoding1D

    theirs = PositionalEncoding1D(512)(torch.zeros(1, 1024, 512))[0].numpy()
    exact = presets.get("positional-encodings").table(1024, 512, dtype="float64")
    deviation = float(np.max(np.abs(theirs - exact)))
    assert deviation == pytest.approx(presets.DEVIATIONS["positional-encodings"][0][0], rel=0.1)
