"""Conformance with the real libraries whose variants posenc claims, run through their own code paths.

Agreement is asserted within the reference's own error: float32 references are off by ~|angle| · 2**-24, so
the tolerance grows with the largest angle; float64 references (diffusers' grids, DistilBERT's NumPy table)
must agree to ~1e-12. Position-id logic must agree exactly.
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


# --- transformers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [16, 17, 1024])
def test_m2m100_fairseq_table_and_positions(d_model):
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    table = M2M100SinusoidalPositionalEmbedding.get_embedding(300, d_model, padding_idx=1).numpy()
    ours = presets.get("fairseq", padding_idx=1).table(300, d_model, dtype="float64")
    np.testing.assert_allclose(ours, table, rtol=0, atol=_float32_tolerance(300))
    assert not ours[1].any()  # the padding row
    module = M2M100SinusoidalPositionalEmbedding(64, d_model, padding_idx=1)
    ids = torch.tensor([[5, 6, 7, 1, 1], [1, 1, 8, 9, 10]])
    theirs = module(ids)
    positions = posenc.positions.make_positions(ids.numpy(), 1)
    np.testing.assert_array_equal(positions, pt.make_positions(ids, 1).numpy())
    np.testing.assert_allclose(
        presets.get("fairseq", padding_idx=1).encode(positions, d_model, dtype="float64"),
        theirs.numpy(),
        atol=_float32_tolerance(64),
    )


def test_whisper_sinusoids():
    from transformers.models.whisper.modeling_whisper import sinusoids

    theirs = sinusoids(1500, 384).numpy()
    ours = presets.get("whisper").table(1500, 384, dtype="float64")
    np.testing.assert_allclose(ours, theirs, atol=_float32_tolerance(1500))
    with pytest.raises(ValueError, match="even widths"):
        presets.get("whisper").table(10, 385)


@pytest.mark.parametrize("dim", [64, 65])
def test_distilbert_create_sinusoidal_embeddings(dim):
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings

    out = torch.empty(512, dim)
    _create_sinusoidal_embeddings(512, dim, out)  # float64 NumPy, then float32: rounding only
    ours = presets.get("distilbert").table(512, dim)
    assert np.max(np.abs(ours.astype(np.float64) - out.numpy())) <= 2.0**-24


@pytest.mark.parametrize("dim", [512, 31])
def test_marian_sinusoidal_embedding(dim):
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    theirs = MarianSinusoidalPositionalEmbedding(512, dim).create_weight().numpy()
    assert np.max(np.abs(presets.get("marian").table(512, dim).astype(np.float64) - theirs)) <= 2.0**-24


# --- diffusers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("dim", [320, 33])
def test_diffusers_timestep_embedding(flip, shift, dim):
    from diffusers.models.embeddings import Timesteps, get_timestep_embedding

    t = torch.tensor([0.0, 1.0, 2.5, 500.0, 999.0])
    theirs = get_timestep_embedding(
        t, dim, flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=3.0
    ).numpy()
    preset = presets.get("diffusers-timestep", flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=3.0)
    np.testing.assert_allclose(
        preset.encode(t.numpy(), dim, dtype="float64"), theirs, atol=_float32_tolerance(3000)
    )
    module = pt.Timesteps(dim, flip, shift, scale=3.0)
    np.testing.assert_allclose(
        module(t).numpy(), Timesteps(dim, flip, shift, scale=3.0)(t).numpy(), atol=_float32_tolerance(3000)
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
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    theirs = get_2d_sincos_pos_embed(64, **kwargs).numpy()  # float64 throughout
    ours = grids.diffusers_2d(64, dtype="float64", **kwargs)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_diffusers_3d_grid():
    from diffusers.models.embeddings import get_3d_sincos_pos_embed

    theirs = get_3d_sincos_pos_embed(
        64, (5, 3), 4, spatial_interpolation_scale=1.3, temporal_interpolation_scale=0.7
    ).numpy()
    ours = grids.diffusers_3d(
        64, (5, 3), 4, spatial_interpolation_scale=1.3, temporal_interpolation_scale=0.7, dtype="float64"
    )
    assert ours.shape == theirs.shape == (4, 15, 64)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_mae_grid_is_diffusers_grid_with_base_size_equal_to_the_grid():
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    theirs = get_2d_sincos_pos_embed(768, 14, cls_token=True, extra_tokens=1, base_size=14).numpy()
    np.testing.assert_allclose(grids.mae_2d(768, 14, cls_token=True, dtype="float64"), theirs, atol=1e-12)


# --- positional-encodings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shape", "channels"),
    [("1D", (50,), 7), ("1D", (20,), 16), ("2D", (5, 6), 10), ("2D", (4, 4), 12), ("3D", (3, 4, 5), 13)],
)
def test_positional_encodings_package(name, shape, channels):
    from positional_encodings import torch_encodings

    module = getattr(torch_encodings, f"PositionalEncoding{name}")(channels).double()
    theirs = module(torch.zeros(1, *shape, channels, dtype=torch.float64))[0].numpy()
    ours = grids.positional_encodings_nd(shape, channels, dtype="float64")
    np.testing.assert_allclose(ours, theirs, atol=_float32_tolerance(max(shape)))
    if name == "1D":
        np.testing.assert_allclose(
            presets.get("positional-encodings").table(shape[0], channels, dtype="float64"), theirs, atol=1e-6
        )


# --- keras-hub on the torch backend -----------------------------------------------------------------


def test_keras_hub_sine_position_encoding():
    """keras-hub installs without TensorFlow (--no-deps) and runs on the torch backend, in its own process."""
    code = textwrap.dedent(
        """
        import os, sys
        os.environ["KERAS_BACKEND"] = "torch"
        import numpy as np
        from keras_hub.layers import SinePositionEncoding
        from posenc import presets
        worst = 0.0
        for width, wavelength in ((16, 10000.0), (17, 10000.0), (64, 500.0)):
            layer = SinePositionEncoding(max_wavelength=wavelength)
            out = layer(np.zeros((1, 200, width), dtype="float32"))
            out = np.asarray(out.detach().cpu().numpy())[0]
            ours = presets.get("keras-hub", max_wavelength=wavelength).table(200, width, dtype="float64")
            worst = max(worst, float(np.max(np.abs(out - ours))))
        print(worst)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.strip().splitlines()[-1]) <= _float32_tolerance(200)
