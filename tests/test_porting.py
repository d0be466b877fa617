"""Porting tools: convert_layout, identify (on posenc's tables and on the real libraries'), load_table."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest
import torch

import posenc
from posenc import grids, presets
from posenc.porting import convert_layout, identify, load_table


@pytest.mark.parametrize(("source", "target"), list(permutations(["interleaved", "sin_cos", "cos_sin"], 2)))
@pytest.mark.parametrize("d_model", [8, 9])
def test_convert_layout_maps_one_layout_onto_another(source, target, d_model):
    table = posenc.table(5, d_model, layout=source, shift=1)
    np.testing.assert_array_equal(
        convert_layout(table, source, target), posenc.table(5, d_model, layout=target, shift=1)
    )


def test_convert_layout_errors():
    with pytest.raises(ValueError, match="layout must be one of"):
        convert_layout(np.zeros((2, 4)), "interleaved", "concat")
    with pytest.raises(ValueError, match=r"shape \(\.\.\., d_model\) with d_model >= 2; got shape \(\)"):
        convert_layout(1.0, "interleaved", "sin_cos")


@pytest.mark.parametrize(
    ("table", "name"),
    [
        (lambda: presets.get("paper").table(200, 64), "paper"),
        (lambda: presets.get("fairseq", padding_idx=1).table(130, 32), "fairseq(padding_idx=1)"),
        (lambda: presets.get("fairseq").table(130, 33), "fairseq"),
        (lambda: presets.get("marian").table(100, 31), "marian"),
        (lambda: presets.get("whisper").table(300, 64), "whisper"),
        (
            lambda: presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0).table(
                1000, 64
            ),
            "diffusers-timestep(flip_sin_to_cos=True, downscale_freq_shift=0)",
        ),
        (lambda: presets.get("positional-encodings").table(50, 13), "positional-encodings"),
        (lambda: grids.mae_2d(64, 8, cls_token=True), "mae-2d"),
        (lambda: grids.timm_2d((6, 6), 32, interleave_sin_cos=True), "timm-2d"),
    ],
)
def test_identify_names_posenc_presets(table, name):
    best = identify(table())[0]
    assert best.matches
    assert name in (best.name or "").split(" = "), best.describe()


def test_identify_finds_start_base_and_says_when_nothing_matches():
    best = identify(posenc.table(300, 64, start=40, base=500.0))[0]
    assert best.matches and best.start == 40 and best.options["base"] == 500.0 and best.name is None
    random = identify(np.random.default_rng(0).random((100, 64)))
    assert not random[0].matches and "does NOT match; nearest" in random[0].describe()
    assert len(random) == 3


def test_identify_tables_from_the_real_libraries():
    from diffusers.models.embeddings import get_2d_sincos_pos_embed, get_timestep_embedding
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.whisper.modeling_whisper import sinusoids

    cases = {
        "fairseq(padding_idx=1)": M2M100SinusoidalPositionalEmbedding.get_embedding(1026, 256, padding_idx=1),
        "whisper": sinusoids(1500, 384),
        "diffusers-timestep(flip_sin_to_cos=True, downscale_freq_shift=0)": get_timestep_embedding(
            torch.arange(1000), 320, flip_sin_to_cos=True, downscale_freq_shift=0
        ),
        "mae-2d": get_2d_sincos_pos_embed(96, 14, cls_token=True, extra_tokens=1, base_size=14),
        "diffusers-2d": get_2d_sincos_pos_embed(96, 32, base_size=16),
    }
    for name, table in cases.items():
        best = identify(table.numpy())[0]
        assert best.matches and name in (best.name or "").split(" = "), (name, best.describe())
    position = torch.arange(4096).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, 512, 2).float() * (-math.log(10000.0) / 512))
    tutorial = torch.zeros(4096, 512)
    tutorial[:, 0::2], tutorial[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    best = identify(tutorial[None].numpy())[0]  # (1, max_len, d_model), as the tutorial stores it
    assert best.matches and "pytorch-tutorial" in best.name and best.max_error > 1e-5  # float32 noise


def test_identify_errors():
    with pytest.raises(ValueError, match=r"rows >= 2, d_model >= 2"):
        identify(np.zeros(5))
    with pytest.raises(ValueError, match="NaN or inf"):
        identify(np.full((3, 4), np.nan))


def test_load_table_from_npy_pt_and_safetensors(tmp_path):
    table = presets.get("whisper").table(20, 16)
    np.save(tmp_path / "pe.npy", table)
    np.testing.assert_array_equal(load_table(tmp_path / "pe.npy"), table)
    state = {"encoder": {"embed_positions.weight": torch.from_numpy(table), "layer.weight": torch.ones(3, 3)}}
    torch.save(state, tmp_path / "model.pt")
    np.testing.assert_array_equal(load_table(tmp_path / "model.pt"), table)
    np.testing.assert_array_equal(
        load_table(tmp_path / "model.pt", key="encoder.layer.weight"), np.ones((3, 3))
    )
    from safetensors.numpy import save_file

    save_file({"pos_embed": table[None], "other": np.ones((2, 2), np.float32)}, tmp_path / "m.safetensors")
    assert load_table(tmp_path / "m.safetensors").shape == (1, 20, 16)
    with pytest.raises(ValueError, match=r"has no tensor .nope.; it has: encoder\.embed_positions\.weight"):
        load_table(tmp_path / "model.pt", key="nope")
    torch.save({"a": torch.ones(4, 4), "b": torch.ones(5, 5)}, tmp_path / "two.pt")
    with pytest.raises(ValueError, match=r"2 candidate tables \(a, b\); name one with --key"):
        load_table(tmp_path / "two.pt")
    with pytest.raises(ValueError, match=r"unknown file type '\.txt'"):
        (tmp_path / "t.txt").write_text("x")
        load_table(tmp_path / "t.txt")
    with pytest.raises(ValueError, match="no such file"):
        load_table(tmp_path / "missing.npy")
