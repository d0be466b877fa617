"""Bounds before work: every size a user can pass is refused, when too large, at once (ValueError naming the
parameter and the limit; on the command line one error line and exit 2); rotary parameters that would
overflow a frequency, a scaling or a length are refused naming the field, and no rotary table holds inf."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

from posenc import analysis, grids, rope
from posenc.analysis import margin, plot, rope_figures
from posenc.cli import main
from posenc.rope import kinds

#: The one timing bound of these tests: a refusal comes at once (generous: the work refused takes minutes).
AT_ONCE = 1.0


def refused(call, *words):
    """Run ``call``: it must raise ValueError within :data:`AT_ONCE` s, its message holding ``words``."""
    began = time.perf_counter()
    with pytest.raises(ValueError) as caught:
        call()
    elapsed = time.perf_counter() - began
    message = str(caught.value)
    assert elapsed < AT_ONCE, f"refused after {elapsed:.2f} s: {message}"
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def yarn(**fields):
    return {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, **fields}


def longrope(**fields):
    return {
        "rope_type": "longrope",
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
        "short_factor": [1.0] * 4,
        "long_factor": [2.0] * 4,
        **fields,
    }


def llama3(**fields):
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    return {**scaling, "original_max_position_embeddings": 8192, **fields}


DYNAMIC = rope.config(
    head_dim=8, max_position_embeddings=4096, scaling={"rope_type": "dynamic", "factor": 2.0}
)

# --- sizes -------------------------------------------------------------------------------------------------

SIZES = {
    "rope head_dim 2**22": (lambda: rope.config(head_dim=2**22), "head_dim", "2**16"),
    "rope head_dim 2**40": (lambda: rope.config(head_dim=2**40), "head_dim", "2**16"),
    "rope head_dim 10**400": (lambda: rope.config(head_dim=10**400), "head_dim", "2**16", "401 digits"),
    "rope head_dim from hidden_size": (
        lambda: rope.config({"hidden_size": 2**40, "num_attention_heads": 1}),
        "head_dim",
        "2**16",
    ),
    "rope head_dim of the record": (
        lambda: rope.RopeParameters("default", head_dim=2**30, rotary_dim=2**30, base=1e4),
        "head_dim",
        "2**16",
    ),
    "rope rotary_dim of the record": (
        lambda: rope.RopeParameters("default", head_dim=8, rotary_dim=2**40, base=1e4),
        "rotary_dim=1099511627776",
        "expected 8",
    ),
    "rope max_position_embeddings": (
        lambda: rope.config(head_dim=8, max_position_embeddings=2**40),
        "max_position_embeddings",
        "2**31",
    ),
    "rope original_max_position_embeddings": (
        lambda: rope.config(head_dim=8, scaling=yarn(original_max_position_embeddings=2**40)),
        "original_max_position_embeddings",
        "2**31",
    ),
    "rope seq_len of inv_freq": (lambda: rope.inv_freq(DYNAMIC, seq_len=2**40), "seq_len", "2**31"),
    "rope seq_len of cos_sin": (lambda: rope.cos_sin([0, 1], DYNAMIC, seq_len=10**30), "seq_len", "2**31"),
    "rope mrope_section entries": (
        lambda: rope.config(head_dim=8, scaling={"mrope_section": [0] * 10**6}),
        "mrope_section",
        "at most 3",
    ),
    "rope longrope factor list": (
        lambda: rope.config(head_dim=8, scaling=longrope(short_factor=[1.0] * 10**6)),
        "short_factor",
        "rotary_dim // 2 = 4",
    ),
    "check length": (lambda: analysis.check(2**31, 8), "length", "2**30"),
    "check work": (lambda: analysis.check(2**30, 512), "length=1073741824", "2**36"),
    "check d_model": (lambda: analysis.check(2048, 2**21), "d_model", "2**20"),
    "collisions": (lambda: analysis.collisions(2**31 - 1, 2**20), "length", "2**36"),
    "collisions huge length": (lambda: analysis.collisions(10**400, 8), "length", "2**31"),
    "collision_horizon limit": (
        lambda: analysis.collision_horizon(2**20, limit=2**31 - 1),
        "limit",
        "2**36",
    ),
    "max_magnitude": (lambda: analysis.max_magnitude(10**12, 8), "length", "2**31"),
    "uniqueness_margin": (lambda: analysis.uniqueness_margin(2**31 - 1, 2**20), "length", "2**36"),
    "length_consistent": (lambda: analysis.length_consistent(2**31 - 1, 2**20), "length", "2**36"),
    "recomputes_identically": (lambda: analysis.recomputes_identically(2**31 - 1, 2**20), "length", "2**36"),
    "shift_error length": (lambda: analysis.shift_error(3, 2**31 - 1, 2**13), "length", "2**36"),
    "distance_lower_bounds count": (lambda: margin.distance_lower_bounds(2**40, 8), "count", "2**31"),
    "grid cells": (lambda: grids.grid((2**31, 2**31), 8), "shape", "2**31", "cells"),
    "grid huge axis": (lambda: grids.grid((10**400, 2), 8), "shape", "2**31", "about 10**400"),
    "grid axes": (lambda: grids.grid((1,) * 40, 80), "axes of shape", "2**5 = 32"),
    "mae_2d grid_size": (lambda: grids.mae_2d(8, 2**40), "grid_size", "2**31"),
    "diffusers_2d grid_size": (lambda: grids.diffusers_2d(8, 2**40), "grid_size", "2**31"),
    "diffusers_2d extra_tokens": (
        lambda: grids.diffusers_2d(8, 2, extra_tokens=10**40, cls_token=True),
        "extra_tokens",
        "2**31",
    ),
    "diffusers_3d sizes": (lambda: grids.diffusers_3d(16, 2**20, 2**30), "temporal_size", "2**31"),
    "timm_2d feat_shape": (lambda: grids.timm_2d((2**31, 2**31), 8), "shape", "2**31"),
    "dinov3_rope feat_shape": (lambda: grids.dinov3_rope((2**31, 2**31), 8), "shape", "2**31"),
    "positional_encodings_nd shape": (
        lambda: grids.positional_encodings_nd((2**31, 2**31, 2**31), 16),
        "shape",
        "2**31",
    ),
    "heatmap length": (lambda: plot.heatmap(length=2**31 - 1), "length", "2**26"),
    "heatmap d_model": (lambda: plot.heatmap(d_model=2**20), "d_model=1048576", "2**26"),
    "heatmap huge length": (lambda: plot.heatmap(length=10**400), "length", "2**31"),
    "dot_product_heatmap": (lambda: plot.dot_product_heatmap(length=5000, d_model=8), "length", "2**12"),
    "waves": (lambda: plot.waves(length=2**31 - 1), "length", "2**26"),
    "waves pairs": (lambda: plot.waves(d_model=512, pairs=range(200)), "pairs", "at most 64"),
    "similarity": (lambda: plot.similarity(length=10**6), "length", "2**26"),
    "similarity references": (lambda: plot.similarity(references=range(10**9)), "references", "at most 64"),
    "sinusoids positions": (lambda: plot.sinusoids(positions=range(10**9)), "positions", "at most 64"),
    "collisions figure": (lambda: plot.collisions(length=2**31 - 1), "length", "2**26"),
    "rope_error length": (lambda: rope_figures.rope_error_positions(10**12), "length", "2**31"),
    "rope_error bands": (lambda: rope_figures.rope_error_positions(1000, bands=10**6), "bands", "2**16"),
    "rope_error samples": (
        lambda: rope_figures.rope_error_positions(1000, bands=1000, per_band=10**6),
        "bands × per_band",
        "2**16",
    ),
    "rope_error_values positions": (
        lambda: rope_figures.rope_error_values(np.arange(1, 2**17)),
        "number of positions",
        "2**16",
    ),
}


@pytest.mark.parametrize("case", list(SIZES))
def test_an_oversized_request_is_refused_at_once_naming_the_parameter_and_the_limit(case):
    call, *words = SIZES[case]
    refused(call, *words)


def test_a_wide_head_within_the_bound_is_computed():
    params = rope.config(head_dim=2**10, base=1e6)
    theta = rope.inv_freq(params)
    assert theta.shape == (2**9,) and theta[0] == 1.0 and 0 < theta[-1] < 1e-5


# --- parameters that overflow --------------------------------------------------------------------------

OVERFLOWS = {
    "yarn attention_factor 1e300": (yarn(attention_factor=1e300), "attention_factor", "1e+300", "2**10"),
    "yarn factor 1e308": (yarn(factor=1e308), "factor", "1e+308", "2**20"),
    "yarn beta_fast huge": (yarn(beta_fast=1e308), "beta_fast", "1e+308"),
    "yarn beta_slow huge": (yarn(beta_slow=1e300), "beta_slow", "1e+300"),
    "yarn mscale huge": (yarn(mscale=1e308, mscale_all_dim=1.0), "mscale", "1e+308"),
    "llama3 low_freq_factor huge": (llama3(low_freq_factor=1e308), "low_freq_factor", "1e+308"),
    "llama3 high_freq_factor huge": (llama3(high_freq_factor=1e308), "high_freq_factor", "1e+308"),
    "longrope short_factor inf": (longrope(short_factor=[float("inf")] * 4), "short_factor[0]", "inf"),
    "longrope short_factor 1e308": (longrope(short_factor=[1e308] * 4), "short_factor", "1e+308"),
    "longrope long_factor 1e-308": (longrope(long_factor=[1e-308] * 4), "long_factor", "1e-308", "2**-20"),
    "dynamic factor 1e308": ({"rope_type": "dynamic", "factor": 1e308}, "factor", "1e+308"),
    "linear factor 1e-308": ({"rope_type": "linear", "factor": 1e-308}, "factor", "1e-308"),
    "linear factor 1e308": ({"rope_type": "linear", "factor": 1e308}, "factor", "2**20"),
    "proportional factor 1e-308": ({"rope_type": "proportional", "factor": 1e-308}, "factor", "2**-20"),
    "rope_theta inf": ({"rope_theta": float("inf")}, "rope_theta", "inf"),
    "rope_theta 1e308": ({"rope_theta": 1e308}, "rope_theta", "1e+308", "2**64"),
}


@pytest.mark.parametrize("case", list(OVERFLOWS))
def test_a_field_that_overflows_is_refused_naming_the_field_and_value(case):
    scaling, *words = OVERFLOWS[case]
    refused(lambda: rope.config(head_dim=8, max_position_embeddings=4096, scaling=scaling), *words)


@pytest.mark.parametrize("value", [0, -0.5, 1.5, float("nan"), 1e308])
def test_partial_rotary_factor_out_of_range_names_partial_rotary_factor(value):
    message = refused(lambda: rope.config({"head_dim": 64, "partial_rotary_factor": value}))
    assert message.startswith("partial_rotary_factor must") and "rotary_dim" not in message


@pytest.mark.parametrize(
    "mscale, mscale_all_dim, words",
    [
        (2.0**20, 1.0, ["mscale, mscale_all_dim and factor", "2**10"]),  # a scaling of ~1.3e5
        (1.0, -1.0, ["mscale_all_dim=-1.0", "<= 0"]),  # a division by 0.1·(-1)·ln(2**20) + 1 < 0
    ],
)
def test_a_yarn_attention_scaling_out_of_range_is_refused_naming_its_fields(mscale, mscale_all_dim, words):
    params = rope.config(
        head_dim=8, scaling=yarn(factor=2.0**20, mscale=mscale, mscale_all_dim=mscale_all_dim)
    )
    refused(lambda: rope.attention_scaling(params), *words)
    refused(lambda: rope.cos_sin([0, 1], params), *words)


def test_the_last_guard_refuses_a_frequency_out_of_range(monkeypatch):
    """Were a bound of the parameters missing, the frequencies themselves are checked: never inf or 0."""
    kind = kinds.TYPES["proportional"]
    monkeypatch.setitem(kinds.TYPES, "proportional", dataclasses.replace(kind, min_factor=1e-300))
    params = rope.config(head_dim=8, scaling={"rope_type": "proportional", "factor": 1e-30})
    refused(lambda: rope.cos_sin([0, 1], params), "θ_0 = 1e+30", "2**24", "rope_theta")


EXTREMES = {
    "dynamic at the longest length": (
        {"rope_type": "dynamic", "factor": 2.0**20},
        {"max_position_embeddings": 1, "rope_theta": 2.0**64},
    ),
    "proportional smallest factor": ({"rope_type": "proportional", "factor": 2.0**-20}, {}),
    "yarn largest factor and attention": (yarn(factor=2.0**20, attention_factor=2.0**10), {}),
    "longrope extreme factors": (
        longrope(short_factor=[2.0**-20] * 4, long_factor=[2.0**20] * 4, factor=2.0**20),
        {},
    ),
    "llama3 extreme factors": (
        llama3(low_freq_factor=2.0**-20, high_freq_factor=2.0**20, factor=2.0**20),
        {},
    ),
}


@pytest.mark.parametrize("case", list(EXTREMES))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_extreme_parameters_allowed_give_finite_tables(case, dtype):
    scaling, top = EXTREMES[case]
    params = rope.config({"head_dim": 8, "max_position_embeddings": 4096, **top, "rope_scaling": scaling})
    positions = np.array([0, 1, 2**31 - 1, -(2**31) + 1])
    for seq_len in (None, 2**31):
        cos, sin = rope.cos_sin(positions, params, dtype=dtype, seq_len=seq_len)
        assert np.isfinite(cos).all() and np.isfinite(sin).all()
        assert np.abs(cos).max() <= rope.attention_scaling(params) * 1.01


# --- the command line ----------------------------------------------------------------------------------


def cli_refuses(argv, capsys, *words):
    """``posenc ARGV`` exits 2 within :data:`AT_ONCE` seconds with one error line holding ``words``."""
    began = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - began
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("posenc: error:"), err
    assert elapsed < AT_ONCE, f"refused after {elapsed:.2f} s: {err}"
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"


ROPE_CONFIGS = {
    "head_dim 2**22": ({"head_dim": 2**22}, ["head_dim", "2**16", "4194304"]),
    "yarn attention_factor 1e300": (
        {"head_dim": 8, "rope_scaling": yarn(attention_factor=1e300)},
        ["attention_factor", "1e+300"],
    ),
    "yarn factor 1e308": ({"head_dim": 8, "rope_scaling": yarn(factor=1e308)}, ["factor", "1e+308"]),
    "partial_rotary_factor 0": ({"head_dim": 8, "partial_rotary_factor": 0}, ["partial_rotary_factor", "0"]),
    "max_position_embeddings 2**40": (
        {"head_dim": 8, "max_position_embeddings": 2**40},
        ["max_position_embeddings", "2**31"],
    ),
}


@pytest.mark.parametrize("case", list(ROPE_CONFIGS))
def test_posenc_rope_refuses_a_config_out_of_bounds_in_one_line(case, tmp_path, capsys):
    config, words = ROPE_CONFIGS[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    for extra in ([], ["--format", "json"]):
        cli_refuses(["rope", str(path), *extra], capsys, *words)
    assert capsys.readouterr().out == ""


def test_posenc_rope_refuses_a_huge_sequence_length_in_one_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "head_dim": 8,
                "max_position_embeddings": 64,
                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
            }
        )
    )
    cli_refuses(["rope", str(path), "--seq-len", str(10**15)], capsys, "--seq-len", "2**31")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["table", "3000000000", "2"], ["length", "2**31"]),
        (["table", "100", "2000000"], ["d_model", "2**20"]),
        (["check", "--length", "1073741824"], ["length", "2**36"]),
        (["check", "--length", "4096", "--d-model", "2097152"], ["d_model", "2**20"]),
        (["plot", "heatmap", "--length", "2147483647", "-o", "{tmp}/x.png"], ["length", "2**26"]),
        (["plot", "heatmap", "--d-model", "1048576", "-o", "{tmp}/x.png"], ["d_model", "2**26"]),
        (
            ["plot", "dot-product", "--length", "5000", "--d-model", "8", "-o", "{tmp}/x.png"],
            ["length", "2**12"],
        ),
        (["plot", "similarity", "--length", "1000000", "-o", "{tmp}/x.png"], ["length", "2**26"]),
        (["plot", "rope-error", "--length", "99999999999", "-o", "{tmp}/x.png"], ["length", "2**31"]),
    ],
    ids=[
        "table length",
        "table d_model",
        "check length",
        "check d_model",
        "plot heatmap length",
        "plot heatmap d_model",
        "plot dot-product length",
        "plot similarity length",
        "plot rope-error length",
    ],
)
def test_the_commands_refuse_huge_sizes_in_one_line(argv, words, tmp_path, capsys):
    cli_refuses([arg.format(tmp=tmp_path) for arg in argv], capsys, *words)
    assert not (tmp_path / "x.png").exists()


def test_posenc_check_of_a_sane_size_still_passes(capsys):
    assert main(["check", "--length", "64", "--d-model", "16"]) == 0
    assert "unique" in capsys.readouterr().out
