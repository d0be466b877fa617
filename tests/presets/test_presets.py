"""Presets and N-D grids: their formulas, options and errors (the real libraries are in test_conformance)."""

from __future__ import annotations

import math
import pydoc

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from posenc import grids, presets


def test_every_preset_builds_a_table_and_names_its_source():
    for name in presets.names():
        preset = presets.get(name)
        assert preset.source, name
        width = 8
        table = preset.table(5, width, dtype="float64")
        assert table.shape == (5, width)
        np.testing.assert_array_equal(table, posenc.table(5, width, dtype="float64", **preset.options))


# What each preset's own documentation must name: the defining library (or paper) and its function.
_PROVENANCE = {
    "paper": ("Vaswani", "Attention Is All You Need"),
    "pytorch-tutorial": ("PyTorch", "PositionalEncoding"),
    "keras-hub": ("keras-hub", "SinePositionEncoding"),
    "distilbert": ("transformers", "create_sinusoidal_embeddings"),
    "tensor2tensor": ("tensor2tensor", "get_timing_signal_1d"),
    "fairseq": ("fairseq", "SinusoidalPositionalEmbedding"),
    "marian": ("transformers", "MarianSinusoidalPositionalEmbedding"),
    "whisper": ("Whisper", "sinusoids"),
    "diffusers-timestep": ("diffusers", "get_timestep_embedding"),
    "positional-encodings": ("positional-encodings", "PositionalEncoding1D"),
}
# Words the Layout / Odd d_model lines must use for the preset's actual settings.
_LAYOUT_WORDS = {"interleaved": "interleaved", "sin_cos": "sin_cos", "cos_sin": "cos_sin"}
_ODD_WORDS = {"zero": "zero column", "literal": "every column", "drop": "dropped", "error": "refused"}


def _line(doc: str, label: str) -> str:
    return next(line for line in doc.splitlines() if line.startswith(label))


def test_every_preset_documents_its_own_formula_and_provenance():
    assert set(_PROVENANCE) == set(presets.names()), "document the new preset here and in its factory"
    docs = set()
    for name in presets.names():
        preset = presets.get(name)
        doc = preset.__doc__
        assert doc and doc != presets.Preset.__doc__, name
        assert doc == preset.doc and doc == presets.get(name).doc, name
        for needle in ("ω_i =", "Layout:", "Odd d_model:", "Positions", "Source:", *_PROVENANCE[name]):
            assert needle in doc, (name, needle)
        if name != "marian":  # Marian's odd rule is spelled out as ceil(d/2) sines, then floor(d/2) cosines
            assert _ODD_WORDS[preset.odd] in doc[doc.index("Odd d_model:") :], name
        assert _LAYOUT_WORDS[preset.layout] in _line(doc, "Layout:"), name
        if name == "diffusers-timestep":  # the shift is a parameter there
            exponent = "/ (n - downscale_freq_shift)"
        else:
            exponent = "-2i / " if preset.shift == 0 else "/ (n - 1)"
        assert exponent in doc, (name, exponent)
        assert doc.splitlines()[0] in pydoc.render_doc(preset, renderer=pydoc.plaintext), name
        docs.add(doc)
    assert len(docs) == len(presets.names())  # each preset its own text, aliases included
    assert presets.Preset.__doc__.startswith("One library's variant")  # the class keeps its own docstring
    flipped = presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0)
    assert "cos_sin" in _line(flipped.__doc__, "Layout:")
    assert presets.get("fairseq", padding_idx=1).__doc__ == presets.get("fairseq").__doc__
    assert presets.Preset("hand-made").__doc__ == presets.Preset.__doc__


def test_fairseq_padding_row_and_first_position():
    preset = presets.get("fairseq", padding_idx=1)
    table = preset.table(6, 8, dtype="float64")
    assert not table[1].any() and table[2].any()
    assert preset.first_position == 2 and presets.get("fairseq").first_position == 0
    ids = posenc.positions.make_positions(np.array([[7, 8, 1]]), 1)  # [[2, 3, 1]]
    encoded = preset.encode(ids, 8, dtype="float64")
    np.testing.assert_array_equal(encoded[0, :2], table[[2, 3]])
    assert not encoded[0, 2].any()


def test_variants_label_every_preset_and_the_library_parameters_in_use():
    """The named variants identify reports, in the order it joins equal ones by " = "."""
    timestep = "diffusers-timestep(flip_sin_to_cos={}, downscale_freq_shift={})"
    plain = [name for name in presets.names() if name not in ("fairseq", "diffusers-timestep")]
    labels = [*plain, "fairseq", *(timestep.format(f, s) for f in (False, True) for s in (1, 0))]
    found = presets.variants()
    assert [label for label, _ in found] == labels
    sd = dict(found)[timestep.format(True, 0)]
    assert sd == presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0)
    assert all(preset == presets.get(label) for label, preset in found if label in presets.names())
    ((label, preset),) = presets.variants(padding_idx=3)
    assert label == "fairseq(padding_idx=3)" and preset == presets.get("fairseq", padding_idx=3)


def test_tensor2tensor_timescales_and_its_min_timescale_multiplier():
    preset = presets.get("tensor2tensor", min_timescale=2.0, max_timescale=1.0e4)
    omegas = posenc.frequencies(16, **{k: v for k, v in preset.options.items() if k != "layout"})
    np.testing.assert_allclose(omegas, 2.0 * 5000.0 ** (-np.arange(8) / 7), rtol=1e-15)
    one_pair = presets.get("tensor2tensor").table(3, 2, dtype="float64")  # n = 1: max(n - 1, 1) in t2t
    np.testing.assert_allclose(one_pair[:, 0], np.sin([0.0, 1.0, 2.0]), atol=1e-16)


def test_odd_width_rules_of_the_presets():
    assert not presets.get("fairseq").table(4, 9)[:, -1].any()  # zero column
    literal = presets.get("paper").table(4, 9, dtype="float64")  # sine of ω_4 = 10000^(-8/9)
    np.testing.assert_allclose(literal[:, 8], np.sin(np.arange(4) * 10000.0 ** (-8 / 9)), atol=1e-16)
    marian = presets.get("marian").table(4, 9, dtype="float64")  # 5 sines, then 4 cosines
    np.testing.assert_array_equal(marian[:, :5], literal[:, 0::2])
    np.testing.assert_array_equal(marian[:, 5:], literal[:, 1::2])
    dropped = presets.get("positional-encodings").table(4, 9, dtype="float64")
    np.testing.assert_array_equal(dropped, posenc.table(4, 10, dtype="float64")[:, :9])


def test_preset_errors():
    with pytest.raises(ValueError, match="unknown preset 'bert'; choose one of paper"):
        presets.get("bert")
    with pytest.raises(TypeError, match="preset 'whisper'"):
        presets.get("whisper", padding_idx=1)
    with pytest.raises(ValueError, match="padding_idx must be an integer >= 0; got -1"):
        presets.get("fairseq", padding_idx=-1)
    with pytest.raises(TypeError, match="flip_sin_to_cos must be True or False"):
        presets.get("diffusers-timestep", flip_sin_to_cos="yes")


def test_presets_drive_the_grids():
    values = grids.grid((2, 3), 16, **presets.get("fairseq").options)
    np.testing.assert_array_equal(values[1, 2, 8:], presets.get("fairseq").encode(2, 8))


def test_presets_drive_the_torch_module():
    module = pt.SinusoidalPositionalEncoding(16, **presets.get("whisper").options, batch_first=True)
    out = module(torch.zeros(1, 5, 16))[0]
    np.testing.assert_array_equal(out.numpy(), presets.get("whisper").table(5, 16))


# --- grids ------------------------------------------------------------------------------------------


def test_grid_blocks_follow_the_order():
    values = grids.grid((3, 4), 8, order=(1, 0), dtype="float64")
    assert values.shape == (3, 4, 8)
    np.testing.assert_array_equal(values[2, 3, :4], posenc.encode(3, 4, layout="sin_cos", dtype="float64"))
    np.testing.assert_array_equal(values[2, 3, 4:], posenc.encode(2, 4, layout="sin_cos", dtype="float64"))


def test_grid_function_grouping_is_timm_default_order():
    values = grids.grid((2, 3), 8, group="function", dtype="float64")
    h, w = (
        posenc.encode(1, 4, layout="sin_cos", dtype="float64"),
        posenc.encode(2, 4, layout="sin_cos", dtype="float64"),
    )
    np.testing.assert_array_equal(values[1, 2], np.concatenate([h[:2], w[:2], h[2:], w[2:]]))


def _timm_literal(feat_shape, dim, temperature, reverse_coord, interleave):
    """timm's build_sincos2d_pos_embed formula, transcribed in float64 NumPy."""
    pos_dim = dim // 4
    bands = 1.0 / temperature ** (np.arange(pos_dim) / pos_dim)
    shape = feat_shape[::-1] if reverse_coord else feat_shape
    coords = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")).reshape(2, -1).T
    angles = coords[:, :, None] * bands[None, None, :]
    stacked = np.stack([np.sin(angles), np.cos(angles)], axis=2 if interleave else 1)
    return stacked.reshape(len(coords), -1)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("interleave", [False, True])
def test_timm_orders(reverse, interleave):
    ours = grids.timm_2d(
        (3, 5), 16, temperature=100.0, reverse_coord=reverse, interleave_sin_cos=interleave, dtype="float64"
    )
    np.testing.assert_allclose(ours, _timm_literal((3, 5), 16, 100.0, reverse, interleave), atol=1e-15)


def test_mae_cls_token_and_column_halves():
    values = grids.mae_2d(16, 4, cls_token=True, dtype="float64")
    assert values.shape == (17, 16) and not values[0].any()
    token = 1 + 2 * 4 + 3  # h = 2, w = 3
    np.testing.assert_array_equal(values[token, :8], posenc.encode(3, 8, layout="sin_cos", dtype="float64"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: grids.grid((3, 4), 10), r"d_model=10 does not split into 2 even blocks"),
        (lambda: grids.grid((3, 4), 8, order=(0, 0)), r"order must be a permutation of the axes 0\.\.1"),
        (
            lambda: grids.grid((3, 4), 8, widths=(2, 4)),
            r"widths must be 2 even numbers adding up to d_model=8",
        ),
        (lambda: grids.grid((3, 4), 8, group="rows"), r"group must be 'axis' or 'function'"),
        (lambda: grids.grid((3, 4), 8, positions=[np.arange(3)]), r"one array per axis \(2\)"),
        (
            lambda: grids.grid((3, 4), 8, positions=[np.arange(3), np.arange(5)]),
            r"positions\[1\] must have shape \(4,\)",
        ),
        (lambda: grids.grid((0, 4), 8), r"shape must be an integer >= 1; got 0"),
        (lambda: grids.diffusers_3d(24, 4, 2), r"embed_dim must be a multiple of 16"),
        (lambda: grids.timm_2d((2, 2), 10), r"dim must be a multiple of 4"),
        (lambda: grids.positional_encodings_nd((2, 2, 2, 2), 8), r"1, 2 or 3 axes"),
    ],
)
def test_grid_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- float32 deviations: each library's own float32 code against the exact values ---------------------

_F32 = np.float32


def _halves(angles: np.ndarray) -> np.ndarray:
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def _interleaved(angles: np.ndarray) -> np.ndarray:
    out = np.empty((angles.shape[0], 2 * angles.shape[1]), _F32)
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return out


def _exp32(x) -> np.ndarray:
    """float32 exp(x) correctly rounded, as torch's CPU exp gives it (the libraries run on torch): NumPy's own
    float32 exp is not correctly rounded, which moved the tutorial's figure at 8k from 4.7e-4 to 7.8e-4."""
    return np.exp(np.asarray(x, dtype=np.float64)).astype(_F32)


def _tutorial(pos: np.ndarray, d: int) -> np.ndarray:
    """PyTorch tutorial / Annotated Transformer: exp(float32 arange · float32(-log(10000) / d)), float32
    angles, interleaved."""
    return _interleaved(pos[:, None] * _exp32(np.arange(0, d, 2, dtype=_F32) * _F32(-math.log(10000.0) / d)))


def _power32(x, y) -> np.ndarray:
    """float32 x ** y correctly rounded, as torch's CPU pow gives it (the libraries run on torch): NumPy's own
    float32 power differs by an ulp between versions and processors, which moves these figures by ~2x."""
    return np.power(np.float64(x), np.asarray(y, dtype=np.float64)).astype(_F32)


def _keras_hub(pos: np.ndarray, d: int) -> np.ndarray:
    """keras-hub SinePositionEncoding in float32: power(float32(1e-4), 2 (j // 2) / d), sin/cos masks."""
    timescales = _power32(_F32(1 / 10000.0), (2 * (np.arange(d) // 2)).astype(_F32) / _F32(d))
    angles = pos[:, None] * timescales
    cos_mask = (np.arange(d) % 2).astype(_F32)
    return np.sin(angles) * (1 - cos_mask) + np.cos(angles) * cos_mask


def _rounded_once(name: str):
    """DistilBERT/XLM and Marian: float64 NumPy, rounded once to float32 (torch.FloatTensor)."""
    return lambda pos, d: presets.get(name).encode(pos.astype(np.float64), d, dtype="float64").astype(_F32)


def _tensor2tensor(pos: np.ndarray, d: int) -> np.ndarray:
    """get_timing_signal_1d: float32(log(max/min)) / float32(n - 1), float32 exp, [sin | cos]."""
    n = d // 2
    increment = _F32(math.log(10000.0)) / max(_F32(n) - _F32(1), _F32(1))
    return _halves(pos[:, None] * _exp32(np.arange(n, dtype=_F32) * -increment))


def _fairseq(pos: np.ndarray, d: int) -> np.ndarray:
    """fairseq get_embedding and Whisper sinusoids: float64 log(10000) / (n - 1) cast to float32, float32 exp
    and angles, [sin | cos]."""
    n = d // 2
    return _halves(pos[:, None] * _exp32(np.arange(n, dtype=_F32) * _F32(-math.log(10000.0) / (n - 1))))


def _diffusers(shift: int):
    """get_timestep_embedding: float32(-log(max_period)) · arange / float32(n - shift), float32 exp."""

    def build(pos: np.ndarray, d: int) -> np.ndarray:
        n = d // 2
        exponent = _F32(-math.log(10000.0)) * np.arange(n, dtype=_F32) / _F32(n - shift)
        return _halves(pos[:, None] * _exp32(exponent))

    return build


def _positional_encodings(pos: np.ndarray, d: int) -> np.ndarray:
    """PositionalEncoding1D: inv_freq = 1 / 10000 ** (float32 arange(0, d, 2) / d), float32 einsum."""
    inv_freq = _F32(1.0) / _power32(_F32(10000.0), np.arange(0, d, 2, dtype=_F32) / _F32(d))
    return _interleaved(pos[:, None] * inv_freq)


_FLOAT32_CODE = {
    "paper": _tutorial,
    "pytorch-tutorial": _tutorial,
    "keras-hub": _keras_hub,
    "distilbert": _rounded_once("distilbert"),
    "tensor2tensor": _tensor2tensor,
    "fairseq": _fairseq,
    "marian": _rounded_once("marian"),
    "whisper": _fairseq,
    "diffusers-timestep": _diffusers(1),
    "diffusers-timestep(downscale_freq_shift=0)": _diffusers(0),
    "positional-encodings": _positional_encodings,
}


def _measured(label: str, length: int) -> float:
    """The largest |library's float32 table - posenc's exact float64 one| over positions 0 .. length - 1."""
    name, _, rest = label.partition("(")
    preset = presets.get(name, downscale_freq_shift=0) if rest else presets.get(name)
    worst = 0.0
    for first in range(0, length, 4096):
        pos = np.arange(first, min(length, first + 4096), dtype=_F32)
        theirs = _FLOAT32_CODE[label](pos, presets.DEVIATION_D_MODEL).astype(np.float64)
        exact = preset.encode(pos.astype(np.float64), presets.DEVIATION_D_MODEL, dtype="float64")
        worst = max(worst, float(np.max(np.abs(theirs - exact))))
    return worst


def test_float32_deviations_are_the_libraries_own_float32_errors():
    """The registry's 1k / 8k figures, recomputed from each library's float32 formula (131k takes ~20 s: not
    here). exp and pow are correctly rounded, as torch's; NumPy's float32 sin/cos may differ from torch's by
    an ulp, so the figures hold to 10 %."""
    assert set(_FLOAT32_CODE) == set(presets.DEVIATIONS)
    for label, (figures, _) in presets.DEVIATIONS.items():
        for length, stated in zip(presets.DEVIATION_LENGTHS[:2], figures[:2], strict=True):
            measured = _measured(label, length)
            assert measured == pytest.approx(stated, rel=0.1), (label, length, measured)
            assert measured <= stated, (label, length, measured)  # each figure rounded up
        assert figures[0] <= figures[1] <= figures[2], label  # the error grows with the position
    assert _measured("distilbert", 1024) <= 2.0**-25  # rounded once: half an ulp at 1


def test_every_variant_states_its_float32_deviation_in_its_doc():
    for label, preset in presets.variants():
        figures = preset.float32_deviation
        assert figures is not None and len(figures) == 3, label
        said = f"up to {figures[0]:.3g} / {figures[1]:.3g} / {figures[2]:.3g} (rounded up) at 1k / 8k / 131k"
        assert said in " ".join(preset.__doc__.split()), label
    assert presets.get("fairseq", padding_idx=1).float32_deviation == (5.99e-05, 0.000491, 0.00798)
    assert presets.get("distilbert").float32_deviation == (2.99e-08,) * 3  # 2**-25 = 2.98023e-08, up
    shifted = presets.get("diffusers-timestep", downscale_freq_shift=0).float32_deviation
    assert shifted == presets.get("paper").float32_deviation == (5.97e-05, 0.000468, 0.00778)
    scaled = presets.get("diffusers-timestep", scale=1000.0)
    assert scaled.float32_deviation is None and "not measured for these parameters" in scaled.__doc__
    assert presets.get("whisper", max_timescale=1000.0).float32_deviation is None
