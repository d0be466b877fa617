"""Named variants: the one place that knows which library and model computes which sinusoidal encoding.

Every 1-D variant in common use is the core formula with five knobs (:func:`posenc.encode`)::

    ω_i = scale · base ** (-i / (n - shift)),   n = d_model // 2
    PE(p) = sin(p ω_i) and cos(p ω_i), placed by ``layout``; an odd d_model follows ``odd``

plus, for fairseq-style tables, a padding position whose row is zero and from which tokens are counted.
A :class:`Preset` holds those settings with their provenance; ``preset.options`` feeds any posenc function::

    posenc.encode(positions, 512, **presets.get("fairseq").options)
    posenc.torch.SinusoidalPositionalEncoding(512, **presets.get("whisper").options)

``help(preset)``, ``preset.__doc__`` and ``preset.doc`` give a preset's own formula (ω_i, layout, odd-width
rule, position offset) and provenance (library, function, models), taken from its factory's docstring.

>>> p = get("fairseq", padding_idx=1)
>>> p.options
{'base': 10000.0, 'shift': 1.0, 'scale': 1.0, 'layout': 'sin_cos', 'odd': 'zero'}
>>> p.first_position
2
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from . import core, validation
from .defaults import BASE, LAYOUT, ODD, OPTIONS, SCALE
from .errors import PosencError, PosencValueError

__all__ = [
    "DEVIATIONS",
    "DEVIATION_D_MODEL",
    "DEVIATION_LENGTHS",
    "Preset",
    "describe_deviation",
    "float32_deviation",
    "get",
    "names",
    "variants",
]


@dataclasses.dataclass(frozen=True)
class Preset:
    """One library's variant of the sinusoidal encoding.

    Attributes:
        name: the preset's name in :func:`get`.
        base, shift, scale, layout, odd: the core options (see :func:`posenc.encode`).
        padding_idx: fairseq's padding position: its row of the stored table is zero, and tokens are numbered
            from ``padding_idx + 1`` (:func:`posenc.positions.make_positions`). None elsewhere.
        source: where the variant is defined, and who uses it (one line).
        doc: the preset's full documentation (formula and provenance); it is also the instance's ``__doc__``,
            so ``help(preset)`` shows it. :func:`get` fills it in; empty for a hand-made Preset.
        float32_deviation: the largest error of the library's own float32 table at 1k / 8k / 131k positions
            (:func:`float32_deviation`): the tolerance a port's test needs. None where not measured.

    >>> Preset("mine", base=100.0).encode([1], 4, dtype="float64").round(4).tolist()  # ω = 1, 0.1
    [[0.8415, 0.5403, 0.0998, 0.995]]
    """

    name: str
    base: float = BASE
    shift: float = 0.0
    scale: float = SCALE
    layout: str = LAYOUT
    odd: str = ODD
    padding_idx: int | None = None
    source: str = ""
    doc: str = dataclasses.field(default="", repr=False, compare=False)
    float32_deviation: tuple[float, float, float] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.doc:
            # The instance's own __doc__ shadows the class docstring: help(preset) shows its formula.
            object.__setattr__(self, "__doc__", self.doc)

    @property
    def options(self) -> dict[str, Any]:
        """The core options: ``posenc.encode(positions, d_model, **preset.options)``."""
        return {name: getattr(self, name) for name in OPTIONS}

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


def _paper(base: float = BASE) -> Preset:
    """The paper's encoding: interleaved sine and cosine, exponent 2i / d_model.

    Formula (n = d_model // 2 pairs; for an odd d_model, one more frequency, i = 0 .. (d_model - 1) // 2)::

        ω_i = base ** (-2i / d_model)                        (base = 10000 in the paper)
        PE[p, 2i] = sin(p · ω_i)     PE[p, 2i + 1] = cos(p · ω_i)

    Layout: interleaved [sin ω_0, cos ω_0, sin ω_1, cos ω_1, ...].
    Odd d_model: the formula at every column (exponent 2i / d_model with the odd d_model), so the last
    column is sin(p · ω_(d_model // 2)), as keras-hub and DistilBERT/XLM compute it.
    Positions: 0, 1, 2, ... (no offset); real positions are allowed.
    Source: Vaswani et al. 2017, "Attention Is All You Need" §3.5, PE(pos, 2i) = sin(pos / 10000^(2i/d)).
    Implemented identically by the PyTorch tutorial (preset ``"pytorch-tutorial"``), the Annotated
    Transformer, keras-hub ``SinePositionEncoding`` (``"keras-hub"``) and transformers' DistilBERT/XLM
    ``create_sinusoidal_embeddings`` (``"distilbert"``).

    >>> get("paper").table(2, 4, dtype="float64")[1]  # sin 1, cos 1, sin 0.01, cos 0.01
    array([0.84147098, 0.54030231, 0.00999983, 0.99995   ])
    """
    return Preset(
        "paper",
        base=base,
        odd="literal",
        source=(
            "Vaswani et al. 2017 §3.5: PE(pos, 2i) = sin(pos / base^(2i/d)), interleaved; = PyTorch "
            "tutorial, Annotated Transformer, keras-hub SinePositionEncoding, DistilBERT/XLM "
            "create_sinusoidal_embeddings."
        ),
    )


def _pytorch_tutorial(base: float = 10000.0) -> Preset:
    """The PyTorch tutorial's ``PositionalEncoding`` module (= the paper and the Annotated Transformer).

    Formula (n = d_model // 2)::

        div_term = exp(arange(0, d_model, 2) · (-log(10000) / d_model))   i.e.  ω_i = base ** (-2i / d_model)
        pe[:, 0::2] = sin(position · div_term)     pe[:, 1::2] = cos(position · div_term)

    Layout: interleaved [sin ω_0, cos ω_0, sin ω_1, cos ω_1, ...]; the module adds ``pe[:seq_len]`` to x.
    Odd d_model: the tutorial's code fails (``pe[:, 1::2]`` has one column fewer than ``div_term``); posenc
    computes the formula at every column, as the ``"paper"`` preset.
    Positions: 0, 1, 2, ... (no offset).
    Source: PyTorch tutorials, "Language Modeling with nn.Transformer and torchtext" (``PositionalEncoding``,
    computed in float32: off by ~|angle| · 2**-24); the Annotated Transformer (Harvard NLP) has the same code.
    Same options as ``"paper"``; only the name and this documentation differ.

    >>> get("pytorch-tutorial").options == get("paper").options
    True
    """
    return dataclasses.replace(_paper(base), name="pytorch-tutorial")


def _keras_hub(max_wavelength: float = 10000.0) -> Preset:
    """keras-hub ``SinePositionEncoding(max_wavelength)``: the paper's encoding with a configurable base.

    Formula (column j = 0 .. d_model - 1)::

        timescale_j = (1 / max_wavelength) ** (2 · (j // 2) / d_model)
                    i.e.  ω_i = max_wavelength ** (-2i / d_model)
        PE[p, j] = sin(p · timescale_j) for even j,   cos(p · timescale_j) for odd j

    Layout: interleaved [sin ω_0, cos ω_0, sin ω_1, ...] (sin_mask / cos_mask on even / odd columns).
    Odd d_model: the formula at every column, so the last column is a sine of ω_(d_model // 2).
    Positions: ``arange(seq_length) + start_index`` (use ``table(..., start=start_index)``), or the layer's
    ``positions`` argument.
    Source: keras-hub (``keras_hub.layers.SinePositionEncoding``,
    ``keras_hub/src/layers/modeling/sine_position_encoding.py``), computed in the layer's compute dtype.

    >>> keras = get("keras-hub", max_wavelength=100.0)
    >>> keras.table(2, 5, dtype="float64")[1].round(4).tolist()  # odd: the last column is a sine
    [0.8415, 0.5403, 0.1578, 0.9875, 0.0251]
    """
    return dataclasses.replace(_paper(max_wavelength), name="keras-hub")


def _distilbert() -> Preset:
    """transformers' ``create_sinusoidal_embeddings`` (DistilBERT, XLM, FlauBERT): the paper's encoding.

    Formula (column j = 0 .. dim - 1, computed in float64 NumPy and rounded once to float32)::

        position_enc[pos, j] = pos / 10000 ** (2 · (j // 2) / dim)   i.e.  ω_i = 10000 ** (-2i / dim)
        out[:, 0::2] = sin(position_enc[:, 0::2])     out[:, 1::2] = cos(position_enc[:, 1::2])

    Layout: interleaved [sin ω_0, cos ω_0, sin ω_1, ...].
    Odd d_model: the formula at every column; the last column is a sine of ω_(dim // 2).
    Positions: 0 .. n_pos - 1 (no offset).
    Source: transformers ``models/distilbert/modeling_distilbert.py`` ``create_sinusoidal_embeddings`` (used
    when ``DistilBertConfig(sinusoidal_pos_embds=True)``) and the same function in ``models/xlm`` and
    ``models/flaubert`` (``sinusoidal_embeddings=True``); originally from XLM (facebookresearch/XLM).

    >>> get("distilbert").options == get("paper").options
    True
    """
    return dataclasses.replace(_paper(), name="distilbert")


def _tensor2tensor(min_timescale: float = 1.0, max_timescale: float = 1.0e4) -> Preset:
    """tensor2tensor's ``get_timing_signal_1d``: [sin | cos], exponent i / (n - 1) between two timescales.

    Formula (n = d_model // 2 timescales)::

        ω_i = min_timescale · exp(-i · log(max_timescale / min_timescale) / max(n - 1, 1))
            = min_timescale · (max_timescale / min_timescale) ** (-i / (n - 1))    (base = max/min, shift 1)
        PE[p] = [sin(p ω_0) .. sin(p ω_(n-1)) | cos(p ω_0) .. cos(p ω_(n-1))]

    ``min_timescale`` multiplies the frequencies, exactly as tensor2tensor's code does (``inv_timescales =
    min_timescale * exp(...)``), although a timescale would divide; the default 1.0 makes no difference.
    Layout: sin_cos (all sines, then all cosines).
    Odd d_model: a zero column at the end (``tf.pad(signal, [[0, 0], [0, channels % 2]])``).
    d_model = 2 or 3 (n = 1): ``max(n - 1, 1)`` gives ω_0 = min_timescale.
    Positions: ``arange(length) + start_index`` (use ``table(..., start=start_index)``).
    Source: tensor2tensor ``tensor2tensor/layers/common_attention.py`` ``get_timing_signal_1d`` /
    ``add_timing_signal_1d`` (the tensor2tensor Transformer); fairseq and its Hugging Face copies use the
    same frequencies (preset ``"fairseq"``), Whisper too (``"whisper"``).

    >>> get("tensor2tensor").table(2, 5, dtype="float64")[1].round(4).tolist()  # ω = 1, 1e-4; zero column
    [0.8415, 0.0001, 0.5403, 1.0, 0.0]
    """
    low = validation.real("min_timescale", min_timescale)
    if low <= 0:
        raise PosencValueError(
            f"min_timescale must be > 0 (it multiplies the frequencies; tensor2tensor's default is 1.0); got "
            f"{low}",
            parameter="min_timescale",
        )
    return Preset(
        "tensor2tensor",
        base=validation.real("max_timescale", max_timescale) / low,
        shift=1.0,
        scale=min_timescale,
        layout="sin_cos",
        source=(
            "tensor2tensor get_timing_signal_1d: inv_timescales = min_timescale * exp(-k log(max/min) / "
            "(n-1)), [sin | cos], odd widths padded with a zero column (min_timescale multiplies, as in its "
            "code)."
        ),
    )


def _fairseq(padding_idx: int | None = None) -> Preset:
    """fairseq's ``SinusoidalPositionalEmbedding`` (= Hugging Face M2M100, NLLB, Speech2Text, XGLM, FSMT).

    Formula (n = d_model // 2, ``half_dim``)::

        ω_i = exp(-i · log(10000) / (n - 1)) = 10000 ** (-i / (n - 1))            (base 10000, shift = 1)
        table[p] = [sin(p ω_0) .. sin(p ω_(n-1)) | cos(p ω_0) .. cos(p ω_(n-1))],   table[padding_idx] = 0

    Layout: sin_cos (all sines, then all cosines).
    Odd d_model: a zero column at the end.  d_model = 2 or 3 (n = 1): fairseq and transformers divide by
    zero; posenc uses ω_0 = 1 (tensor2tensor's ``max(n - 1, 1)``).
    Positions (the padding offset): the table is indexed by position ids from ``utils.make_positions`` /
    ``create_position_ids_from_input_ids``: padding tokens get ``padding_idx`` (a zero row), the k-th real
    token (k = 1, 2, ...) gets ``padding_idx + past_key_values_length + k``
    (:func:`posenc.positions.make_positions`); with ``padding_idx = 1`` the first token sits at position 2.
    ``first_position`` gives ``padding_idx + 1``.
    Source: fairseq ``fairseq/modules/sinusoidal_positional_embedding.py``
    (``SinusoidalPositionalEmbedding.get_embedding``) and ``fairseq/utils.py`` (``make_positions``); copied in
    transformers as ``M2M100SinusoidalPositionalEmbedding`` (M2M100, NLLB, NLLB-MoE), Speech2Text, XGLM, FSMT,
    TrOCR, SpeechT5, SeamlessM4T and Kosmos-2 (MusicGen's copy puts the cosines first: not this preset).

    >>> get("fairseq", padding_idx=1).table(4, 4, dtype="float64").round(4).tolist()  # row 1: padding
    [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.9093, 0.0002, -0.4161, 1.0], [0.1411, 0.0003, -0.99, 1.0]]
    """
    if padding_idx is not None:
        padding_idx = validation.integer("padding_idx", padding_idx, minimum=0)
    return Preset(
        "fairseq",
        shift=1.0,
        layout="sin_cos",
        padding_idx=padding_idx,
        source=(
            "fairseq SinusoidalPositionalEmbedding.get_embedding (tensor2tensor frequencies, [sin | cos], "
            "odd widths zero-padded); the padding_idx row is zero and tokens count from padding_idx + 1. "
            "The same in Hugging Face M2M100, NLLB, Speech2Text, XGLM and FSMT."
        ),
    )


def _marian() -> Preset:
    """transformers' ``MarianSinusoidalPositionalEmbedding``: the paper's frequencies, [sin | cos] halves.

    Formula (column j = 0 .. dim - 1, computed in float64 NumPy and rounded once to float32)::

        position_enc[pos, j] = pos / 10000 ** (2 · (j // 2) / dim)   i.e.  ω_i = 10000 ** (-2i / dim)
        out[:, :sentinel] = sin(position_enc[:, 0::2])    out[:, sentinel:] = cos(position_enc[:, 1::2])
        sentinel = ceil(dim / 2)

    Layout: sin_cos (all sines, then all cosines), not interleaved, with the paper's exponent 2i / dim.
    Odd d_model: ceil(d/2) sines then floor(d/2) cosines, the last at ω_(d // 2) = 10000^(-2 (d // 2) / d).
    Positions: ``past_key_values_length + arange(seq_len)`` (no padding offset).
    Source: transformers ``models/marian/modeling_marian.py``,
    ``MarianSinusoidalPositionalEmbedding.create_weight`` ("Identical to the XLM
    create_sinusoidal_embeddings except features are not interleaved"), used by MarianMT (Helsinki-NLP
    opus-mt); the same class is copied in Pegasus, RoFormer, Informer, Autoformer and TimeSeriesTransformer.

    >>> get("marian").table(2, 5, dtype="float64")[1].round(4).tolist()  # 3 sines, then 2 cosines
    [0.8415, 0.0251, 0.0006, 0.5403, 0.9997]
    """
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
    """Whisper's ``sinusoids(length, channels, max_timescale)``: tensor2tensor frequencies, [sin | cos].

    Formula (n = channels // 2)::

        ω_i = exp(-i · log(max_timescale) / (n - 1)) = max_timescale ** (-i / (n - 1))   (shift = 1)
        PE[p] = [sin(p ω_0) .. sin(p ω_(n-1)) | cos(p ω_0) .. cos(p ω_(n-1))]

    Layout: sin_cos (all sines, then all cosines).
    Odd d_model: refused (ValueError), as Whisper refuses it (an assert in OpenAI's code, a ValueError in
    transformers).  d_model = 2: Whisper divides by zero; posenc uses ω_0 = 1.
    Positions: 0 .. length - 1 (no offset).
    Source: ``sinusoids`` (OpenAI ``whisper/model.py``, transformers ``models/whisper/modeling_whisper.py``):
    the Whisper audio encoder's fixed position table (1500 positions; the decoder's is learned).

    >>> get("whisper").table(2, 4, dtype="float64")[1].round(4).tolist()  # ω = 1, 1e-4
    [0.8415, 0.0001, 0.5403, 1.0]
    """
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
    """diffusers' ``get_timestep_embedding`` / ``Timesteps`` (DDPM timestep embedding), real-valued timesteps.

    Formula (n = embedding_dim // 2, ``half_dim``)::

        ω_i = scale · exp(-log(max_period) · i / (n - downscale_freq_shift))
            = scale · max_period ** (-i / (n - downscale_freq_shift))
        (base = max_period, shift = downscale_freq_shift)
        emb[t] = [sin(t ω_0) .. sin(t ω_(n-1)) | cos(t ω_0) .. cos(t ω_(n-1))]

    Layout: sin_cos, or cos_sin with ``flip_sin_to_cos=True`` (the halves swapped).
    Odd d_model: a zero column at the end (``F.pad(emb, (0, 1, 0, 0))``).
    Positions: the timesteps themselves, any real values (``encode(t, d_model)``); ``scale`` multiplies the
    angle (here: every frequency).
    Source: diffusers ``diffusers/models/embeddings.py`` ``get_timestep_embedding`` and the ``Timesteps``
    module; the defaults (shift 1, [sin | cos]) are DDPM's; Stable Diffusion's ``UNet2DConditionModel``
    uses ``flip_sin_to_cos=True, freq_shift=0``.

    >>> stable_diffusion = get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0)
    >>> stable_diffusion.encode([500.0], 4, dtype="float64")  # [cos 500, cos 5 | sin 500, sin 5]
    array([[-0.88384927,  0.28366219, -0.46777181, -0.95892427]])
    """
    if not isinstance(flip_sin_to_cos, bool):
        raise TypeError(f"flip_sin_to_cos must be True or False; got {flip_sin_to_cos!r}")
    validation.real("downscale_freq_shift", downscale_freq_shift)  # kept as given: 0 stays 0 in paste lines
    return Preset(
        "diffusers-timestep",
        base=max_period,
        shift=downscale_freq_shift,
        scale=scale,
        layout="cos_sin" if flip_sin_to_cos else "sin_cos",
        source=(
            "diffusers get_timestep_embedding / Timesteps (DDPM): ω_i = max_period^(-i/(half - "
            "downscale_freq_shift)), angle scaled by `scale`, [sin | cos] or [cos | sin] with "
            "flip_sin_to_cos, odd widths zero-padded; real-valued timesteps."
        ),
    )


def _positional_encodings() -> Preset:
    """The ``positional-encodings`` package's ``PositionalEncoding1D``: interleaved, width rounded up to even.

    Formula (c = d_model rounded up to even, n = c // 2)::

        inv_freq_i = 1 / 10000 ** (2i / c)   i.e.  ω_i = 10000 ** (-2i / c)
        PE[p, 2i] = sin(p ω_i)     PE[p, 2i + 1] = cos(p ω_i)      (``get_emb``: sin and cos intertwined)

    Layout: interleaved [sin ω_0, cos ω_0, sin ω_1, ...].
    Odd d_model: computed for c = d_model + 1 (so the exponent is 2i / (d_model + 1), unlike ``"paper"``),
    and the last (cosine) column dropped.
    Positions: 0, 1, 2, ... along the axis (no offset).
    Source: the ``positional-encodings`` package (PyPI; tatp22/multidim-positional-encoding),
    ``positional_encodings.torch_encodings.PositionalEncoding1D`` (its inverse frequencies are computed in
    float32); its 2-D/3-D modules are :func:`posenc.grids.positional_encodings_nd`.

    >>> get("positional-encodings").table(2, 3, dtype="float64")[1].round(4).tolist()  # ω = 1, 10000^(-2/4)
    [0.8415, 0.5403, 0.01]
    """
    return Preset(
        "positional-encodings",
        odd="drop",
        source=(
            "the positional-encodings package, PositionalEncoding1D: interleaved, the paper's frequencies "
            "for the width rounded up to even, the extra column dropped."
        ),
    )


_FACTORIES: dict[str, Callable[..., Preset]] = {
    "paper": _paper,
    "pytorch-tutorial": _pytorch_tutorial,
    "keras-hub": _keras_hub,
    "distilbert": _distilbert,
    "tensor2tensor": _tensor2tensor,
    "fairseq": _fairseq,
    "marian": _marian,
    "whisper": _whisper,
    "diffusers-timestep": _diffusers_timestep,
    "positional-encodings": _positional_encodings,
}


def names() -> list[str]:
    """The preset names :func:`get` knows.

    >>> names()[:4]
    ['paper', 'pytorch-tutorial', 'keras-hub', 'distilbert']
    """
    return list(_FACTORIES)


def get(name: str, **parameters: Any) -> Preset:
    """The preset ``name``, with the defining library's own parameters (e.g. ``padding_idx`` for fairseq).

    The preset's ``__doc__`` and ``doc``: its formula, layout, odd-width rule, position offset and provenance.

    >>> get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0).layout
    'cos_sin'
    >>> get("whisper").__doc__.splitlines()[0]
    "Whisper's ``sinusoids(length, channels, max_timescale)``: tensor2tensor frequencies, [sin | cos]."
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(names())}")
    factory = _FACTORIES[name]
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(parameters) - set(accepted))
    if unknown:
        valid = ", ".join(f"{p.name}={p.default!r}" for p in accepted.values()) or "none"
        raise TypeError(
            f"preset {name!r} takes no parameter {', '.join(map(repr, unknown))}; its parameters "
            f"(with their defaults) are: {valid}"
        )
    try:
        preset = factory(**parameters)
        validation.base(preset.base)
        validation.scale(preset.scale)
        return _with_deviation(dataclasses.replace(preset, doc=inspect.cleandoc(factory.__doc__ or "")))
    except PosencError as error:  # in the library's own words: max_period, not base
        library = _LIBRARY_NAMES.get(name, {})
        parameter = library.get(error.parameter or "", error.parameter)
        raise type(error)(f"preset {name!r}: {error.worded(library)}", parameter=parameter) from None
    except TypeError as error:
        raise TypeError(f"preset {name!r}: {error}") from None


#: What each preset's library calls the core options it sets (:func:`get` words its errors so).
_LIBRARY_NAMES = {
    "keras-hub": {"base": "max_wavelength"},
    "tensor2tensor": {"base": "max_timescale / min_timescale", "scale": "min_timescale"},
    "whisper": {"base": "max_timescale"},
    "diffusers-timestep": {"base": "max_period", "shift": "downscale_freq_shift"},
}


#: Library parameters that select another table, with the values models use, the default first: DDPM's
#: (flip_sin_to_cos=False, downscale_freq_shift=1), Stable Diffusion's (True, 0) and the two mixed.
_VARIANT_PARAMETERS = {
    "diffusers-timestep": {"flip_sin_to_cos": (False, True), "downscale_freq_shift": (1, 0)}
}


def variants(padding_idx: int | None = None) -> list[tuple[str, Preset]]:
    """The named variants, each with the label that tells it apart (the names :func:`posenc.identify` gives).

    Without ``padding_idx``: every preset at its defaults, those that take a ``padding_idx`` after the
    others; then each combination of the values in use of a preset's library parameters. With
    ``padding_idx`` (a stored table's zero row): the presets that take one, with it.

    >>> [label for label, _ in variants(padding_idx=1)], variants()[-1][0]
    (['fairseq(padding_idx=1)'], 'diffusers-timestep(flip_sin_to_cos=True, downscale_freq_shift=0)')
    """
    padded = [name for name in names() if "padding_idx" in inspect.signature(_FACTORIES[name]).parameters]
    if padding_idx is not None:
        return [(f"{name}(padding_idx={padding_idx})", get(name, padding_idx=padding_idx)) for name in padded]
    found = [(name, get(name)) for name in names() if name not in padded and name not in _VARIANT_PARAMETERS]
    found += [(name, get(name)) for name in padded]
    for name, choices in _VARIANT_PARAMETERS.items():
        for values in itertools.product(*choices.values()):
            parameters = dict(zip(choices, values, strict=True))
            label = ", ".join(f"{key}={value}" for key, value in parameters.items())
            found.append((f"{name}({label})", get(name, **parameters)))
    return found


# --- float32 deviations ---------------------------------------------------------------------------------
# How far each named variant's own float32 code is from the exact values: the tolerance a port's test needs.
#
# A library that computes its table in float32 (float32 frequencies and angles, float32 sin/cos) is off by
# about |angle| · 2**-24, so its error grows with the position. A port that reproduces the exact values (as
# posenc does) differs from the library's own table by that much, and a test comparing the two needs a
# tolerance at least this large. The figures are the largest absolute difference between the library's
# float32 formula (each float32 operation correctly rounded, as torch's CPU kernels give them) and posenc's
# exact float64 values, over positions 0 .. L - 1 at d_model 512, for L = 1k, 8k and 131k positions
# (DEVIATION_LENGTHS). DistilBERT/XLM and Marian compute in float64 and round once to float32: half a float32
# ulp at 1 (2**-25 ≈ 2.98e-8) at any length. ``tests/presets/test_presets.py`` recomputes the 1k and 8k
# figures. They hold for a preset's default parameters (diffusers: scale 1 and base 10000, either
# ``downscale_freq_shift``; keras-hub, whisper, tensor2tensor: base 10000); other parameters have none
# (:func:`float32_deviation` gives None): the error scales with the largest angle, scale · position.

#: The table lengths (positions 0 .. L - 1) and the width the figures are measured at.
DEVIATION_LENGTHS = (1024, 8192, 131072)
DEVIATION_D_MODEL = 512

# measured with correctly rounded float32 exp/pow, as torch's CPU kernels give them (NumPy's float32 exp is
# not correctly rounded: it made the tutorial's 7.8e-4 at 8k of torch's 4.7e-4), each rounded up to three
# digits (a tolerance: torch's own code measures 5.96223e-05 / 0.000467737 / 0.00777498 for the tutorial)
_HALVES = (5.99e-05, 0.000491, 0.00798)  # float64 log increment / (n - 1), float32 exp, float32 angles
_PAPER = (5.97e-05, 0.000468, 0.00778)  # exp(float32) frequencies of the exponent 2i / d, float32 angles
_ROUNDED_ONCE = (2.99e-08, 2.99e-08, 2.99e-08)  # float64 NumPy, rounded once to float32: under 2**-25

#: The largest |library's float32 table - exact| at 1k / 8k / 131k positions (d_model 512), per variant,
#: with the library code it was measured on.
DEVIATIONS: dict[str, tuple[tuple[float, float, float], str]] = {
    "paper": (_PAPER, "the PyTorch tutorial's / Annotated Transformer's float32 code"),
    "pytorch-tutorial": (_PAPER, "PositionalEncoding: float32 exp frequencies, float32 angles"),
    "keras-hub": (_PAPER, "SinePositionEncoding in float32 (float32 power)"),
    "distilbert": (_ROUNDED_ONCE, "create_sinusoidal_embeddings: float64, rounded once to float32"),
    "tensor2tensor": (_HALVES, "get_timing_signal_1d in float32"),
    "fairseq": (_HALVES, "get_embedding in float32 (also transformers' M2M100 and its copies)"),
    "marian": (_ROUNDED_ONCE, "create_weight: float64, rounded once to float32"),
    "whisper": (_HALVES, "sinusoids in float32"),
    "diffusers-timestep": (
        (6.73e-05, 0.000594, 0.00956),
        "get_timestep_embedding (float32), downscale_freq_shift=1",
    ),
    "diffusers-timestep(downscale_freq_shift=0)": (
        _PAPER,
        "get_timestep_embedding (float32), downscale_freq_shift=0",
    ),
    "positional-encodings": ((6.69e-05, 0.000564, 0.00945), "PositionalEncoding1D: float32 inv_freq, einsum"),
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
    >>> presets.float32_deviation(presets.get("whisper")), presets.float32_deviation(
    ...     presets.get("whisper", max_timescale=8)
    ... )
    ((5.99e-05, 0.000491, 0.00798), None)
    """
    key = _key(preset)
    return None if key is None else DEVIATIONS[key][0]


def describe_deviation(preset: Preset) -> str:
    """One sentence: the float32 deviation of ``preset``'s library, and which code it was measured on.

    >>> from posenc import presets
    >>> print(presets.describe_deviation(presets.get("distilbert")))
    Float32 deviation (the library's own float32 table vs the exact values, d_model 512): max abs error up
    to 2.99e-08 / 2.99e-08 / 2.99e-08 (rounded up) at 1k / 8k / 131k positions
    (create_sinusoidal_embeddings: float64, rounded once to float32); a port's test against that library's
    table needs at least this tolerance.
    """
    key = _key(preset)
    if key is None:
        return (
            f"Float32 deviation: not measured for these parameters (figures are for base {BASE:g}, scale "
            f"{SCALE:g}); float32 code is off by about |largest angle| · 2**-24."
        )
    (k1, k8, k131), how = DEVIATIONS[key]
    return (
        "Float32 deviation (the library's own float32 table vs the exact values, d_model "
        f"{DEVIATION_D_MODEL}): "
        f"max abs error up to {k1:.3g} / {k8:.3g} / {k131:.3g} (rounded up) at 1k / 8k / 131k positions "
        f"({how}); a port's test against that library's table needs at least this tolerance."
    )


def _with_deviation(preset: Preset) -> Preset:
    """``preset`` with its :attr:`~posenc.presets.Preset.float32_deviation` and a paragraph in its doc.

    :func:`get` attaches them to every preset; a hand-made Preset has neither.

    >>> from posenc import presets
    >>> bare = presets.Preset("whisper", shift=1.0, layout="sin_cos", doc="Whisper's sinusoids.")
    >>> bare.float32_deviation, presets._with_deviation(bare).float32_deviation
    (None, (5.99e-05, 0.000491, 0.00798))
    >>> print(presets._with_deviation(bare).doc[:66])
    Whisper's sinusoids.
    <BLANKLINE>
    Float32 deviation (the library's own float32
    """
    doc = f"{preset.doc}\n\n{describe_deviation(preset)}" if preset.doc else preset.doc
    return dataclasses.replace(preset, doc=doc, float32_deviation=float32_deviation(preset))
