"""Named variants: the one place that knows which library and model computes which sinusoidal encoding.

Every 1-D variant in common use is the core formula with five knobs (GUIDE §1)::

    ω_i = scale · base ** (-i / (n - shift)),   n = d_model // 2
    PE(p) = sin(p ω_i) and cos(p ω_i), placed by ``layout``; an odd d_model follows ``odd``

plus, for fairseq-style tables, a padding position whose row is zero and from which tokens are counted.
A :class:`Preset` holds those settings with their provenance; ``preset.options`` feeds any posenc function::

    posenc.encode(positions, 512, **presets.get("fairseq").options)
    posenc.torch.SinusoidalPositionalEncoding(512, **presets.get("whisper").options)

>>> p = get("fairseq", padding_idx=1)
>>> p.options
{'base': 10000.0, 'shift': 1.0, 'scale': 1.0, 'layout': 'sin_cos', 'odd': 'zero'}
>>> p.first_position
2
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _validate, core

__all__ = ["Preset", "get", "names"]


@dataclasses.dataclass(frozen=True)
class Preset:
    """One library's variant of the sinusoidal encoding.

    Attributes:
        name: the preset's name in :func:`get`.
        base, shift, scale, layout, odd: the core options (see :func:`posenc.encode`).
        padding_idx: fairseq's padding position: its row of the stored table is zero, and tokens are numbered
            from ``padding_idx + 1`` (:func:`posenc.positions.make_positions`). None elsewhere.
        source: where the variant is defined, and who uses it.
    """

    name: str
    base: float = 10000.0
    shift: float = 0.0
    scale: float = 1.0
    layout: str = "interleaved"
    odd: str = "zero"
    padding_idx: int | None = None
    source: str = ""

    @property
    def options(self) -> dict[str, Any]:
        """The core options: ``posenc.encode(positions, d_model, **preset.options)``."""
        return {
            "base": self.base,
            "shift": self.shift,
            "scale": self.scale,
            "layout": self.layout,
            "odd": self.odd,
        }

    @property
    def first_position(self) -> int:
        """The position of the first token: ``padding_idx + 1`` for fairseq tables, else 0."""
        return 0 if self.padding_idx is None else self.padding_idx + 1

    def encode(
        self, positions: npt.ArrayLike, d_model: int, *, dtype: npt.DTypeLike | None = None
    ) -> np.ndarray:
        """The encodings of ``positions`` (position ids); the padding position encodes to zeros."""
        values = core.encode(positions, d_model, dtype=dtype, **self._options_for(d_model))
        if self.padding_idx is not None:
            values[np.asarray(positions) == self.padding_idx] = 0
        return values

    def table(
        self, length: int, d_model: int, *, start: int = 0, dtype: npt.DTypeLike | None = None
    ) -> np.ndarray:
        """Rows for position ids ``start .. start + length - 1``, as the library stores its table.

        >>> get("fairseq", padding_idx=1).table(4, 4, dtype="float64")[:, 0]  # row 1 is the padding row
        array([0.        , 0.        , 0.90929743, 0.14112001])
        """
        values = core.table(length, d_model, start=start, dtype=dtype, **self._options_for(d_model))
        if self.padding_idx is not None and start <= self.padding_idx < start + length:
            values[self.padding_idx - start] = 0
        return values

    def _options_for(self, d_model: int) -> dict[str, Any]:
        options = self.options
        if d_model // 2 == 1 and self.shift >= 1:
            # One frequency: ω_0 = scale whatever the denominator (tensor2tensor's max(n - 1, 1) rule).
            options["shift"] = 0.0
        return options


def _paper(base: float = 10000.0) -> Preset:
    return Preset(
        "paper",
        base=base,
        odd="literal",
        source=(
            "Vaswani et al. 2017, PE(pos, 2i) = sin(pos / base^(2i/d)): the PyTorch tutorial's "
            "PositionalEncoding, the Annotated Transformer, keras-hub SinePositionEncoding (max_wavelength), "
            "DistilBERT/XLM create_sinusoidal_embeddings. Odd widths: the formula at every column "
            "(keras-hub, "
            "DistilBERT); the tutorial itself fails on them."
        ),
    )


def _tensor2tensor(min_timescale: float = 1.0, max_timescale: float = 1.0e4) -> Preset:
    return Preset(
        "tensor2tensor",
        base=_validate.real("max_timescale", max_timescale) / _validate.real("min_timescale", min_timescale),
        shift=1.0,
        scale=min_timescale,
        layout="sin_cos",
        source=(
            "tensor2tensor get_timing_signal_1d: inv_timescales = "
            "min_timescale * exp(-k log(max/min) / (n-1)), "
            "[sin | cos], odd widths padded with a zero column (min_timescale multiplies, as in its code)."
        ),
    )


def _fairseq(padding_idx: int | None = None) -> Preset:
    if padding_idx is not None:
        padding_idx = _validate.integer("padding_idx", padding_idx, minimum=0)
    return Preset(
        "fairseq",
        shift=1.0,
        layout="sin_cos",
        padding_idx=padding_idx,
        source=(
            "fairseq SinusoidalPositionalEmbedding.get_embedding (tensor2tensor frequencies, [sin | cos], "
            "odd widths zero-padded); the padding_idx row is zero and tokens count from padding_idx + 1. "
            "The same "
            "in Hugging Face M2M100, NLLB, Speech2Text, XGLM and FSMT."
        ),
    )


def _marian() -> Preset:
    return Preset(
        "marian",
        layout="sin_cos",
        odd="literal",
        source=(
            "Hugging Face MarianSinusoidalPositionalEmbedding: the paper's frequencies (exponent 2i/d), "
            "[sin | cos] not interleaved; an odd width has one more sine than cosine."
        ),
    )


def _whisper(max_timescale: float = 10000.0) -> Preset:
    return Preset(
        "whisper",
        base=max_timescale,
        shift=1.0,
        layout="sin_cos",
        odd="error",
        source="OpenAI Whisper / Hugging Face sinusoids(length, channels, max_timescale): even widths only.",
    )


def _diffusers_timestep(
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000.0,
) -> Preset:
    if not isinstance(flip_sin_to_cos, bool):
        raise TypeError(f"flip_sin_to_cos must be True or False; got {flip_sin_to_cos!r}")
    return Preset(
        "diffusers-timestep",
        base=max_period,
        shift=downscale_freq_shift,
        scale=scale,
        layout="cos_sin" if flip_sin_to_cos else "sin_cos",
        source=(
            "diffusers get_timestep_embedding / Timesteps (DDPM): ω_i = max_period^(-i/(half - "
            "downscale_freq_shift)), angle scaled by `scale`, [sin | cos] or [cos | sin] with "
            "flip_sin_to_cos, "
            "odd widths zero-padded; real-valued timesteps."
        ),
    )


def _positional_encodings() -> Preset:
    return Preset(
        "positional-encodings",
        odd="drop",
        source=(
            "the positional-encodings package, PositionalEncoding1D: interleaved, the paper's "
            "frequencies for "
            "the width rounded up to even, the extra column dropped."
        ),
    )


_FACTORIES: dict[str, Callable[..., Preset]] = {
    "paper": _paper,
    "pytorch-tutorial": _paper,
    "keras-hub": lambda max_wavelength=10000.0: dataclasses.replace(_paper(max_wavelength), name="keras-hub"),
    "distilbert": lambda: dataclasses.replace(_paper(), name="distilbert"),
    "tensor2tensor": _tensor2tensor,
    "fairseq": _fairseq,
    "marian": _marian,
    "whisper": _whisper,
    "diffusers-timestep": _diffusers_timestep,
    "positional-encodings": _positional_encodings,
}


def names() -> list[str]:
    """The preset names :func:`get` knows."""
    return list(_FACTORIES)


def get(name: str, **parameters: Any) -> Preset:
    """The preset ``name``, with the defining library's own parameters (e.g. ``padding_idx`` for fairseq).

    >>> get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0).layout
    'cos_sin'
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(names())}")
    try:
        preset = _FACTORIES[name](**parameters)
    except TypeError as error:
        raise TypeError(f"preset {name!r}: {error}") from None
    _validate.base(preset.base)
    _validate.scale(preset.scale)
    return preset
