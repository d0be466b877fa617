"""How far each named variant's own float32 code is from the exact values: the tolerance a port's test needs.

A library that computes its table in float32 (float32 frequencies and angles, float32 sin/cos) is off by
about |angle| · 2**-24, so its error grows with the position. A port that reproduces the exact values (as
posenc does) therefore differs from the library's own table by that much, and a test comparing the two needs
a tolerance at least this large. The figures are the largest absolute difference between the library's
published float32 formula, re-implemented in NumPy float32 as the library computes it, and posenc's exact
float64 values, over positions 0 .. L - 1 at d_model 512, for L = 1k, 8k and 131k positions
(:data:`LENGTHS`). DistilBERT/XLM and Marian compute in float64 and round once to float32: half a float32
ulp at 1 (2**-25 ≈ 2.98e-8) at any length. ``tests/presets/test_presets.py`` recomputes the 1k and 8k figures.

The figures hold for a preset's default parameters (diffusers: scale 1 and base 10000, either
``downscale_freq_shift``; keras-hub, whisper, tensor2tensor: base 10000); other parameters have none
(:func:`float32_deviation` gives None): the error scales with the largest angle, scale · position.

>>> from posenc import presets
>>> presets.get("fairseq", padding_idx=1).float32_deviation
(0.000116, 0.00095, 0.015)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .defaults import BASE, SCALE

if TYPE_CHECKING:
    from .presets import Preset

__all__ = ["DEVIATIONS", "D_MODEL", "LENGTHS", "attach", "describe", "float32_deviation"]

#: The table lengths (positions 0 .. L - 1) and the width the figures are measured at.
LENGTHS = (1024, 8192, 131072)
D_MODEL = 512

_HALVES = (0.000116, 0.00095, 0.015)  # float64 log increment / (n - 1), float32 exp, float32 angles
_PAPER = (9.40e-05, 0.000783, 0.0129)  # exp(float32) frequencies of the exponent 2i / d, float32 angles
_ROUNDED_ONCE = (2.98e-08, 2.98e-08, 2.98e-08)  # float64 NumPy, rounded once to float32

#: The largest |library's float32 table - exact| at 1k / 8k / 131k positions (d_model 512), per variant,
#: with the library code it was measured on.
DEVIATIONS: dict[str, tuple[tuple[float, float, float], str]] = {
    "paper": (_PAPER, "the PyTorch tutorial's / Annotated Transformer's float32 code"),
    "pytorch-tutorial": (_PAPER, "PositionalEncoding: float32 exp frequencies, float32 angles"),
    "keras-hub": ((7.73e-05, 0.000647, 0.0107), "SinePositionEncoding in float32 (float32 power)"),
    "distilbert": (_ROUNDED_ONCE, "create_sinusoidal_embeddings: float64, rounded once to float32"),
    "tensor2tensor": (_HALVES, "get_timing_signal_1d in float32"),
    "fairseq": (_HALVES, "get_embedding in float32 (also transformers' M2M100 and its copies)"),
    "marian": (_ROUNDED_ONCE, "create_weight: float64, rounded once to float32"),
    "whisper": (_HALVES, "sinusoids in float32"),
    "diffusers-timestep": (_HALVES, "get_timestep_embedding (float32), downscale_freq_shift=1"),
    "diffusers-timestep(downscale_freq_shift=0)": (
        _PAPER,
        "get_timestep_embedding (float32), downscale_freq_shift=0",
    ),
    "positional-encodings": ((0.000144, 0.00114, 0.0183), "PositionalEncoding1D: float32 inv_freq, einsum"),
}


def _key(preset: Preset) -> str | None:
    """The :data:`DEVIATIONS` entry of ``preset``, or None when its parameters are not the measured ones."""
    if preset.name not in DEVIATIONS or preset.base != BASE or preset.scale != SCALE:
        return None
    if preset.name == "diffusers-timestep" and preset.shift in (0, 1):
        return preset.name if preset.shift == 1 else "diffusers-timestep(downscale_freq_shift=0)"
    return None if preset.name == "diffusers-timestep" else preset.name


def float32_deviation(preset: Preset) -> tuple[float, float, float] | None:
    """The largest error of ``preset``'s library's own float32 table at 1k / 8k / 131k positions.

    None for parameters other than the measured ones.

    >>> from posenc import presets
    >>> float32_deviation(presets.get("whisper")), float32_deviation(presets.get("whisper", max_timescale=8))
    ((0.000116, 0.00095, 0.015), None)
    """
    key = _key(preset)
    return None if key is None else DEVIATIONS[key][0]


def describe(preset: Preset) -> str:
    """One sentence: the float32 deviation of ``preset``'s library, and which code it was measured on.

    >>> from posenc import presets
    >>> print(describe(presets.get("distilbert")))
    Float32 deviation (the library's own float32 table vs the exact values, d_model 512): max abs error
    2.98e-08 / 2.98e-08 / 2.98e-08 at 1k / 8k / 131k positions (create_sinusoidal_embeddings: float64,
    rounded once to float32); a port's test against that library's table needs at least this tolerance.
    """
    key = _key(preset)
    if key is None:
        return (
            f"Float32 deviation: not measured for these parameters (figures are for base {BASE:g}, scale "
            f"{SCALE:g}); float32 code is off by about |largest angle| · 2**-24."
        )
    (k1, k8, k131), how = DEVIATIONS[key]
    return (
        f"Float32 deviation (the library's own float32 table vs the exact values, d_model {D_MODEL}): "
        f"max abs error {k1:.3g} / {k8:.3g} / {k131:.3g} at 1k / 8k / 131k positions ({how}); a port's "
        "test against that library's table needs at least this tolerance."
    )


def attach(preset: Preset) -> Preset:
    """``preset`` with its :attr:`~posenc.presets.Preset.float32_deviation` and a paragraph in its doc.

    :func:`posenc.presets.get` attaches them to every preset; a hand-made Preset has neither until attached.

    >>> from posenc import presets
    >>> bare = presets.Preset("whisper", shift=1.0, layout="sin_cos", doc="Whisper's sinusoids.")
    >>> bare.float32_deviation, attach(bare).float32_deviation
    (None, (0.000116, 0.00095, 0.015))
    >>> print(attach(bare).doc[:66])
    Whisper's sinusoids.
    <BLANKLINE>
    Float32 deviation (the library's own float32
    """
    doc = f"{preset.doc}\n\n{describe(preset)}" if preset.doc else preset.doc
    return dataclasses.replace(preset, doc=doc, float32_deviation=float32_deviation(preset))
