"""Porting tools: convert_layout, identify (on posenc's tables and on the real libraries'), load_table."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest
import torch

import posenc
from posenc import grids, presets
from posenc.porting import convert_layout, identify, load_named_table, load_table, verdict


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
        (lambda: grids.timm_2d((14, 14), 64, interleave_sin_cos=True, cls_token=True), "timm-2d"),  # MoCo v3
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


def _keras_hub_table() -> np.ndarray:
    """keras-hub ``SinePositionEncoding`` run in this process on Keras' torch backend (skip otherwise)."""
    import sys

    if "keras" in sys.modules and sys.modules["keras"].backend.backend() != "torch":
        pytest.skip("keras is already imported on another backend; keras-hub runs on torch only here")
    try:
        from keras_hub.layers import SinePositionEncoding
    except ImportError as error:
        pytest.skip(f"keras-hub does not import on the torch backend in this process: {error}")
    return SinePositionEncoding()(np.zeros((1, 300, 64), dtype="float32")).detach().numpy()


def _pe(name: str, shape: tuple[int, ...], channels: int) -> np.ndarray:
    from positional_encodings import torch_encodings

    module = getattr(torch_encodings, f"PositionalEncoding{name}")(channels)
    return module(torch.zeros(1, *shape, channels))[0].numpy()  # float32, as the package computes it


def _transformers(name: str):
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
    from transformers.models.whisper.modeling_whisper import sinusoids

    if name == "distilbert":
        out = torch.empty(512, 65)
        _create_sinusoidal_embeddings(512, 65, out)
        return out
    return {
        "m2m100": lambda: M2M100SinusoidalPositionalEmbedding.get_embedding(1026, 256, padding_idx=1),
        "whisper": lambda: sinusoids(1500, 384),
        "marian": lambda: MarianSinusoidalPositionalEmbedding(512, 31).create_weight(),
    }[name]()


def _timestep(flip: bool, shift: int):
    from diffusers.models.embeddings import get_timestep_embedding

    return get_timestep_embedding(torch.arange(1000), 320, flip_sin_to_cos=flip, downscale_freq_shift=shift)


def _grid_2d(*args, **kwargs):
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    return get_2d_sincos_pos_embed(*args, **kwargs).float()  # float64 in diffusers; stored as float32


def _grid_3d(*args, **kwargs):
    from diffusers.models.embeddings import get_3d_sincos_pos_embed

    return get_3d_sincos_pos_embed(*args, **kwargs).float()


_TIMESTEP = "diffusers-timestep(flip_sin_to_cos={}, downscale_freq_shift={})"
_ROUNDING = 2.0**-24  # float64 code stored as float32: rounding only


def _float32(max_position: int) -> float:
    """What float32 code can be off by at positions up to ``max_position`` (as in test_conformance)."""
    return 1e-6 + 8 * max_position * 2.0**-24


def _case(case_id, build, name, options, *, atol, also=None):
    return pytest.param(build, name, options, atol, also, id=case_id)


def _grid_2d_case(case_id, embed_dim, grid_size, *, base_size, name="diffusers-2d"):
    """diffusers' 2-D grid at interpolation scale 1, named with the options it was built with."""
    options = {"grid_size": grid_size, "base_size": base_size, "interpolation_scale": 1.0}
    return _case(
        case_id, lambda: _grid_2d(embed_dim, grid_size, base_size=base_size), name, options, atol=_ROUNDING
    )


@pytest.mark.parametrize(
    ("build", "name", "options", "atol", "also"),
    [
        _case(
            "m2m100",
            lambda: _transformers("m2m100"),
            "fairseq(padding_idx=1)",
            {"shift": 1.0, "layout": "sin_cos"},
            atol=_float32(1026),
        ),
        _case("whisper", lambda: _transformers("whisper"), "whisper", {"shift": 1}, atol=_float32(1500)),
        _case(
            "distilbert",
            lambda: _transformers("distilbert"),
            "distilbert",
            {"odd": "literal"},
            atol=_ROUNDING,
        ),
        _case("marian", lambda: _transformers("marian"), "marian", {"layout": "sin_cos"}, atol=_ROUNDING),
        _case("keras-hub", _keras_hub_table, "keras-hub", {"layout": "interleaved"}, atol=_float32(300)),
        _case(
            "pe-1d",
            lambda: _pe("1D", (100,), 13),
            "positional-encodings",
            {"odd": "drop"},
            atol=_float32(100),
        ),
        _case(
            "pe-2d",
            lambda: _pe("2D", (5, 6), 10),
            "positional-encodings-2d",
            {"shape": (5, 6)},
            atol=_float32(6),
        ),
        _case(
            "pe-2d-rows",
            lambda: _pe("2D", (12, 20), 64).reshape(-1, 64),
            "positional-encodings-2d",
            {"shape": (12, 20)},
            atol=_float32(20),
        ),
        _case(
            "pe-3d",
            lambda: _pe("3D", (3, 4, 5), 13),
            "positional-encodings-3d",
            {"shape": (3, 4, 5)},
            atol=_float32(5),
        ),
        _case(
            "pe-3d-rows",
            lambda: _pe("3D", (4, 6, 8), 48).reshape(-1, 48),
            "positional-encodings-3d",
            {"shape": (4, 6, 8)},
            atol=_float32(8),
        ),
        *[
            _case(
                f"timestep-flip{int(flip)}-shift{shift}",
                lambda f=flip, s=shift: _timestep(f, s),
                _TIMESTEP.format(flip, shift),
                {"shift": shift, "layout": "cos_sin" if flip else "sin_cos"},
                atol=_float32(1000),
            )
            for flip in (False, True)
            for shift in (0, 1)
        ],
        _case(
            "diffusers-2d-default",
            lambda: _grid_2d(96, 32),
            "diffusers-2d",
            {"grid_size": 32, "base_size": 16, "interpolation_scale": 1.0},
            atol=_ROUNDING,
            also={"base_size": 32, "interpolation_scale": 2.0},
        ),
        _grid_2d_case("diffusers-2d-dit", 96, 14, base_size=14, name="mae-2d = diffusers-2d"),
        _grid_2d_case("diffusers-2d-6x10", 64, (6, 10), base_size=7),
        _grid_2d_case("diffusers-2d-sd3", 64, 192, base_size=64),
        _case(
            "diffusers-2d-pixart-1024",
            lambda: _grid_2d(128, 64, base_size=64, interpolation_scale=2),
            "diffusers-2d",
            {"grid_size": 64, "base_size": 32, "interpolation_scale": 1.0},  # the same positions
            atol=_ROUNDING,
            also={"base_size": 64, "interpolation_scale": 2.0},
        ),
        _case(
            "diffusers-2d-extra-tokens",
            lambda: _grid_2d(
                64, (6, 10), cls_token=True, extra_tokens=2, interpolation_scale=1.5, base_size=7
            ),
            "diffusers-2d",
            {"grid_size": (6, 10), "base_size": 7, "interpolation_scale": 1.5, "extra_tokens": 2},
            atol=_ROUNDING,
        ),
        _case(
            "diffusers-2d-mae-cls",
            lambda: _grid_2d(768, 14, cls_token=True, extra_tokens=1, base_size=14),
            "mae-2d = diffusers-2d",
            {"grid_size": 14, "cls_token": True, "extra_tokens": 1},
            atol=_ROUNDING,
        ),
        _case(
            "diffusers-3d",
            lambda: _grid_3d(
                64, (5, 3), 4, spatial_interpolation_scale=1.3, temporal_interpolation_scale=0.7
            ),
            "diffusers-3d",
            {
                "spatial_size": (5, 3),
                "temporal_size": 4,
                "spatial_interpolation_scale": 1.3,
                "temporal_interpolation_scale": 0.7,
            },
            atol=_ROUNDING,
        ),
        _case(
            "diffusers-3d-rows",
            lambda: _grid_3d(96, (12, 8), 6, spatial_interpolation_scale=1.875).reshape(-1, 96),
            "diffusers-3d",
            {"spatial_size": (12, 8), "temporal_size": 6, "spatial_interpolation_scale": 1.875},
            atol=_ROUNDING,
        ),
    ],
)
def test_identify_names_tables_built_by_the_real_libraries(build, name, options, atol, also, monkeypatch):
    """Each library's own code builds the table; identify names it, with its options, to float32 rounding.

    keras-hub runs in this process on Keras' torch backend (it is skipped, saying why, where it cannot).
    """
    monkeypatch.setenv("KERAS_BACKEND", "torch")  # read once, when keras is first imported
    found = identify(np.asarray(build()))
    best = found[0]
    assert best.matches and best.max_error <= atol, best.describe()
    assert set(name.split(" = ")) <= set((best.name or "").split(" = ")), best.describe()  # equal names too
    assert {k: best.options.get(k) for k in options} == options, best.describe()
    if also is not None:  # the same table from an equal parametrisation is listed too
        assert any(m.matches and {k: m.options.get(k) for k in also} == also for m in found), found


def test_identify_the_pytorch_tutorial_table_despite_its_float32_noise():
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
    two = {
        "a": torch.from_numpy(posenc.table(4, 4)),
        "b": torch.from_numpy(presets.get("marian").table(5, 5)),
    }
    torch.save(two, tmp_path / "two.pt")
    with pytest.raises(ValueError, match=r"2 candidate tables \(a, b\); name one with key="):
        load_table(tmp_path / "two.pt")
    with pytest.raises(ValueError, match=r"unknown file type '\.txt'"):
        (tmp_path / "t.txt").write_text("x")
        load_table(tmp_path / "t.txt")
    with pytest.raises(ValueError, match="no such file"):
        load_table(tmp_path / "missing.npy")


def _m2m100_like_state_dict(d_model: int = 16, vocab: int = 40) -> dict[str, torch.Tensor]:
    """Weights named as M2M100 saves them, and no positional table (M2M100 recomputes its own)."""
    generator = torch.Generator().manual_seed(0)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    state = {"model.shared.weight": weight(vocab, d_model), "lm_head.weight": weight(vocab, d_model)}
    for part in ("encoder", "decoder"):
        state[f"model.{part}.embed_tokens.weight"] = state["model.shared.weight"]
        for projection in ("k_proj", "v_proj", "q_proj", "out_proj"):
            state[f"model.{part}.layers.0.self_attn.{projection}.weight"] = weight(d_model, d_model)
            state[f"model.{part}.layers.0.self_attn.{projection}.bias"] = torch.zeros(d_model)
        state[f"model.{part}.layer_norm.weight"] = torch.ones(d_model)
    return state


def test_a_state_dict_without_a_positional_table_says_so(tmp_path, capsys):
    """M2M100's weights hold no table (its sinusoidal table is recomputed): not "N candidate tables
    (lm_head.weight, ...)", but no positional table, what was looked for, and what to do instead."""
    from safetensors.torch import save_file

    from posenc.cli import main

    state = _m2m100_like_state_dict()
    torch.save(state, tmp_path / "m2m100_model.pt")
    save_file({k: v.clone() for k, v in state.items()}, tmp_path / "m2m100.safetensors")
    for name in ("m2m100_model.pt", "m2m100.safetensors"):
        with pytest.raises(ValueError) as caught:
            load_table(tmp_path / name)
        message = str(caught.value)
        assert message.startswith(f"{tmp_path / name} holds no positional table: none of its 12 floating 2-D")
        assert "candidate tables" not in message
        for looked_for in (
            "'pos', 'pe', 'sinus', 'timing'",
            "sines and cosines",
            "d_model / 2",
            "RoPE",
            "inv_freq",
        ):
            assert looked_for in message, looked_for
        assert "M2M100" in message and "posenc audit MODEL_DIR" in message and message.endswith("with key=")
    assert main(["identify", str(tmp_path / "m2m100_model.pt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posenc: error: ") and err.count("\n") == 1
    assert (
        "holds no positional table" in err and "posenc audit MODEL_DIR" in err and "name it with --key" in err
    )
    # with a genuine table beside the weights, it is a candidate as before, and named by its key it is read
    table = presets.get("fairseq", padding_idx=1).table(66, 16)
    torch.save({**state, "table": torch.from_numpy(table)}, tmp_path / "with_table.pt")
    with pytest.raises(
        ValueError, match=r"holds 13 candidate tables \(lm_head.weight, .*\); name one with key="
    ):
        load_table(tmp_path / "with_table.pt")
    np.testing.assert_array_equal(load_table(tmp_path / "with_table.pt", key="table"), table)
    # weights of no model: the criteria, without the hint about models
    torch.save({"a": torch.ones(4, 4), "b": torch.ones(5, 5)}, tmp_path / "ones.pt")
    with pytest.raises(ValueError, match=r"holds no positional table: none of its 2 .* \(a, b\)") as caught:
        load_table(tmp_path / "ones.pt")
    assert "M2M100" not in str(caught.value)


def test_a_real_m2m100_state_dict_holds_no_positional_table(tmp_path):
    """A tiny M2M100 from its config (no download): its state dict, as saved, has no table."""
    transformers = pytest.importorskip("transformers")
    config = transformers.M2M100Config(
        vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
    )  # fmt: skip
    torch.save(transformers.M2M100ForConditionalGeneration(config).state_dict(), tmp_path / "m2m100_model.pt")
    with pytest.raises(ValueError, match=r"holds no positional table: none of its 20 floating 2-D tensors"):
        load_table(tmp_path / "m2m100_model.pt")


# --- verdict: one answer ------------------------------------------------------------------------------


def _torch_tutorial_table(rows: int = 1024, d_model: int = 512) -> np.ndarray:
    """The PyTorch tutorial's float32 table, as its own code computes it."""
    position = torch.arange(rows).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    table = torch.zeros(rows, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    return table.numpy()


def test_verdict_on_the_tutorials_float32_table():
    """The paper's formula, named once; DistilBERT ruled out by the float32 noise its rounded-once table
    cannot have; no fitted generic base, no trailing non-match; an even width shows no odd rule."""
    table = _torch_tutorial_table()
    answer = verdict(identify(table, candidates=8), 512, table.dtype, 1024)
    assert answer.label == "paper" and answer.best.name and answer.best.matches
    assert answer.also == ("pytorch-tutorial", "keras-hub", "positional-encodings")
    assert len(answer.ruled_out) == 1 and answer.ruled_out[0].startswith("distilbert: ")
    assert answer.odd is None and answer.best.options == presets.get("paper").options
    assert answer.float32_deviation == (5.97e-05, 0.000468, 0.00778)
    assert 1e-5 < answer.best.max_error <= answer.float32_deviation[0]  # the library's own float32 noise
    text = "\n".join(answer.lines())
    assert text.count("matches") == 1 and "generic" not in text and "NOT" not in text
    assert "odd: any rule (even width)" in text
    assert answer.paste == (
        'posenc.presets.get("paper").table(1024, 512)',
        'posenc.torch.SinusoidalPositionalEncoding(512, **posenc.presets.get("paper").options)',
        'posenc.jax.SinusoidalPositionalEncoding(512, **posenc.presets.get("paper").options)',
    )


def test_verdict_paste_lines_rebuild_the_table():
    """The pasted lines run, and give the stored table (fairseq with its padding row; a grid; a generic base
    only when no named variant matches)."""
    import posenc.torch  # the pasted lines name it

    stored = presets.get("fairseq", padding_idx=1).table(1026, 1024)
    answer = verdict(identify(stored, candidates=8), 1024, stored.dtype, 1026)
    assert answer.label == "fairseq(padding_idx=1)" and answer.also == () and answer.ruled_out == ()
    assert answer.float32_deviation == (5.99e-05, 0.000491, 0.00798)
    np.testing.assert_array_equal(eval(answer.paste[0]), stored)
    module = eval(answer.paste[1])
    assert (module.base, module.shift, module.layout) == (10000.0, 1.0, "sin_cos")
    pe = module(torch.zeros(1026, 1, 1024))[:, 0].numpy()
    np.testing.assert_array_equal(np.delete(pe, 1, axis=0), np.delete(stored, 1, axis=0))
    embedding = eval(answer.paste[3], {"posenc": posenc, "vocab_size": 20})  # M2M100's input
    ids = torch.tensor([[0, 4, 5, 2, 1, 1]])  # right-padded with 1: positions 2, 3, 4, 5, then zeros
    with torch.no_grad():
        embedding.embedding.weight.zero_()  # the output is then the encoding alone
        added = embedding(ids)[0].numpy()
    np.testing.assert_array_equal(added, stored[[2, 3, 4, 5, 1, 1]])
    grid = grids.diffusers_2d(64, (6, 10), base_size=7, interpolation_scale=1.5)
    answer = verdict(identify(grid), 64, grid.dtype, 60)
    assert answer.paste[0].startswith("posenc.grids.diffusers_2d(64, grid_size=(6, 10), base_size=7")
    np.testing.assert_array_equal(eval(answer.paste[0]), grid)
    generic = posenc.table(300, 64, start=40, base=500.0)
    answer = verdict(identify(generic), 64, generic.dtype, 300)
    assert answer.label is None and answer.float32_deviation is None
    np.testing.assert_array_equal(eval(answer.paste[0]), generic)


@pytest.mark.parametrize(
    ("flip", "shift", "d_model"), [(True, 0, 320), (False, 1, 64), (True, 1, 33), (False, 0, 32)]
)
def test_a_diffusers_timestep_table_gets_the_timesteps_paste_line(flip, shift, d_model, tmp_path, capsys):
    """A table of diffusers' timestep embedding (posenc's preset, or diffusers' own float32 code) gets the
    line of ``posenc.torch.Timesteps``, the drop-in that maps timesteps to embeddings, with the identified
    arguments; evaluated, it rebuilds the table: bit for bit from the preset, and to the error identify
    measured from diffusers' float32 code (plus the rounding of the exact values to float32)."""
    import posenc.torch  # the pasted lines name it
    from posenc.cli import main

    label = f"diffusers-timestep(flip_sin_to_cos={flip}, downscale_freq_shift={shift})"
    line = (
        f"posenc.torch.Timesteps({d_model}, flip_sin_to_cos={flip}, downscale_freq_shift={shift}, scale=1.0, "
        "max_period=10000.0)"
    )
    timesteps = torch.arange(1000)
    exact = presets.get("diffusers-timestep", flip_sin_to_cos=flip, downscale_freq_shift=shift)
    stored = exact.table(1000, d_model)
    answer = verdict(identify(stored), d_model, stored.dtype, 1000)
    assert label in (answer.label, *answer.also) and line in answer.paste
    assert answer.paste.index(line) == 2  # after the SinusoidalPositionalEncoding line, before the JAX one
    module = eval(line)
    assert isinstance(module, posenc.torch.Timesteps)
    np.testing.assert_array_equal(module(timesteps).numpy(), stored)
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    theirs = embeddings.get_timestep_embedding(
        timesteps, d_model, flip_sin_to_cos=flip, downscale_freq_shift=shift
    ).numpy()
    answer = verdict(identify(theirs), d_model, theirs.dtype, 1000)
    assert line in answer.paste
    rounding = 2.0**-24  # the module's float32 values are the exact ones rounded once
    assert np.abs(eval(line)(timesteps).numpy() - theirs).max() <= answer.best.max_error + rounding
    np.save(tmp_path / "t.npy", theirs)
    assert main(["identify", str(tmp_path / "t.npy")]) == 0
    assert f"          {line}\n" in capsys.readouterr().out


def test_a_table_of_no_diffusers_variant_gets_no_timesteps_line():
    for stored in (posenc.table(100, 16), presets.get("fairseq", padding_idx=1).table(40, 16)):
        answer = verdict(identify(stored), 16, stored.dtype, len(stored))
        assert not any("Timesteps" in line for line in answer.paste), answer.paste


def test_verdict_odd_width_reports_the_rule_and_equal_presets():
    marian = verdict(identify(presets.get("marian").table(100, 31)), 31, "float32", 100)
    assert (marian.label, marian.odd) == ("marian", "literal")
    whisper = verdict(identify(presets.get("whisper").table(300, 64)), 64, "float32", 300)
    assert whisper.label == "tensor2tensor" and set(whisper.also) == {
        "whisper",
        "fairseq",
        "diffusers-timestep(flip_sin_to_cos=False, downscale_freq_shift=1)",
    }
    noise = np.random.default_rng(0).random((20, 8))
    nothing = verdict(identify(noise, candidates=8), 8, noise.dtype, 20)
    assert nothing.best is None and len(nothing.nearest) == 3 and not any(m.matches for m in nothing.nearest)
    assert nothing.lines()[0].startswith("1. does NOT match; nearest candidate")


def test_load_named_table_names_the_key_it_read(tmp_path):
    table = presets.get("whisper").table(20, 16)
    torch.save({"encoder": {"embed_positions.weight": torch.from_numpy(table)}}, tmp_path / "m.pt")
    key, loaded = load_named_table(tmp_path / "m.pt")
    assert key == "encoder.embed_positions.weight"
    np.testing.assert_array_equal(loaded, table)
    np.save(tmp_path / "pe.npy", table)
    assert load_named_table(tmp_path / "pe.npy")[0] == ""


def test_a_bfloat16_table_is_named_bfloat16_by_identify_and_judged_in_it_by_audit(tmp_path, capsys):
    import torch

    import posenc
    from posenc.cli import main
    from posenc.porting import load_stored_table

    exact = torch.from_numpy(posenc.table(512, 64, dtype="float32")).to(torch.bfloat16)
    torch.save({"pe": exact[:, None, :]}, tmp_path / "pe.pt")
    key, values, stored = load_stored_table(tmp_path / "pe.pt")
    assert (key, values.dtype, stored) == ("pe", np.float32, "bfloat16")
    assert torch.equal(torch.from_numpy(values).to(torch.bfloat16), exact[:, None, :])  # read exactly
    assert main(["identify", str(tmp_path / "pe.pt")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("'pe': bfloat16 table of shape (512, 1, 64) (read exactly as float32)"), first
    report = posenc.audit(str(tmp_path / "pe.pt"), samples=64)
    assert report.dtype == "bfloat16" and report.passed  # posenc's bfloat16 rows: exact in bfloat16


def test_a_file_holding_a_view_of_more_values_than_its_bytes_is_refused_before_it_is_read(tmp_path):
    # a 6 KB .pt of one row expanded to 65536 rows is read as 268 MB (the CLI, posenc audit FILE): refused
    torch.save({"pe": torch.randn(1, 1024).expand(65536, 1024)}, tmp_path / "expanded.pt")
    with pytest.raises(
        ValueError, match=r"268,435,456 bytes, more than the [0-9,]+ taken here .*expanded row"
    ):
        load_table(tmp_path / "expanded.pt")
    with pytest.raises(ValueError, match="expanded row"):
        posenc.audit(str(tmp_path / "expanded.pt"))
    torch.save({"pe": torch.from_numpy(posenc.table(64, 32))}, tmp_path / "whole.pt")  # saved whole: read
    assert load_table(tmp_path / "whole.pt").shape == (64, 32)


def test_a_moco_v3_grid_with_its_class_token_row_is_a_timm_grid_not_a_padded_1d_table():
    # MoCo v3's build_2d_sincos_position_embedding: a zero row, then timm's interleaved 2-D grid; it was
    # read as fairseq's padding row of a 1-D table ("unexplained error" in audit)
    table = grids.timm_2d((14, 14), 64, interleave_sin_cos=True, cls_token=True)
    assert table.shape == (197, 64) and not table[0].any()
    np.testing.assert_array_equal(table[1:], grids.timm_2d((14, 14), 64, interleave_sin_cos=True))
    best = identify(table)[0]
    assert best.matches and best.name == "timm-2d" and best.options["cls_token"] is True
    assert posenc.audit(table, samples=256).passed


@pytest.mark.parametrize(
    ("base", "grid", "layout"), [(10200.0, "bfloat16", "interleaved"), (9800.0, "float16", "sin_cos")]
)
def test_a_table_whose_frequencies_were_cast_to_16_bits_is_read_with_its_own_base(base, grid, layout):
    # frequencies of base 10200 rounded to bfloat16 (a buffer after .to(bfloat16)), angles and sin/cos
    # float64, the rows float32: it matches nothing, and it is as far from base 10^4 as from its own (the
    # rounding dominates), so it was measured against "paper"; with frequencies rounded to bfloat16 the
    # fit's base reproduces it, the paper's does not
    d = 128
    omega = torch.tensor(base ** (-np.arange(0, d, 2) / d), dtype=torch.float64).to(getattr(torch, grid))
    angles = np.arange(512, dtype=np.float64)[:, None] * omega.double().numpy()
    table = np.empty((512, d))
    sines, cosines = (
        (slice(0, d, 2), slice(1, d, 2)) if layout == "interleaved" else (slice(0, d // 2), slice(d // 2, d))
    )
    table[:, sines], table[:, cosines] = np.sin(angles), np.cos(angles)
    best = identify(table.astype(np.float32))[0]
    assert not best.matches and best.cast in (grid, f"float32>{grid}"), best.describe()
    assert (best.options["base"], best.options["shift"], best.options["layout"]) == (base, 0.0, layout)
    assert best.describe().endswith(
        f"matches with its frequencies cast to {best.cast.replace('>', ', then ')}"
    )
    # neither the exact table (it matches) nor the cast one halved (its frequencies lie on the grid, but no
    # variant's cast frequencies make its values) is called cast
    assert identify(posenc.table(512, d, base=base, layout=layout))[0].cast is None
    assert identify(table.astype(np.float32) * 0.5)[0].cast is None


def test_a_whisper_table_of_an_unround_base_is_read_with_its_shift_or_the_closer_fit_is_said():
    """Whisper's own float32 sinusoids of max_timescale 12345.6 (shift 1). Base B, shift 1 and base
    B^(n/(n-1)), shift 0 make nearly the same frequencies: at width 128 base 14337, shift 0 (five digits)
    was named though it fits 2.6 times worse than 12345.6, shift 1 (a port built from its line drifts off
    Whisper's by 8e-3 at 65536 positions); a fit closer by a quarter that is nearly as plain now ranks
    first. At width 64 the plainer 16730, shift 0 is still named, and the verdict says the shift-1 fit twice
    as close is also consistent, with its error."""
    from transformers.models.whisper.modeling_whisper import sinusoids

    wide = sinusoids(1000, 128, 12345.6).numpy()
    best = identify(wide)[0]
    assert (best.options["base"], best.options["shift"]) == (12345.6, 1.0)
    narrow = sinusoids(1000, 64, 12345.6).numpy()
    answer = verdict(identify(narrow), 64, narrow.dtype, rows=1000)
    assert answer.best.options["shift"] == 0.0
    (also,) = [text for text in answer.also if "shift=1.0" in text]
    closer = float(also.rsplit("max error ", 1)[1].rstrip(")"))
    assert closer < answer.best.max_error / 1.5
