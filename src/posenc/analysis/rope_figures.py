"""Figures of rotary position embeddings (RoPE, :mod:`posenc.rope`): each drawing function returns a Figure.

* :func:`rope_wavelengths`: the wavelength 2π/θ_i of every rotary frequency, one line per scaling type
  (default, linear, dynamic NTK, YaRN, Llama 3), so that what each type stretches, and what it leaves alone,
  shows;
* :func:`rope_error`: the largest error of a cos/sin value against the exact one, against the position, for
  the usual code (float32 angles), a bfloat16 cache, a bfloat16 ``inv_freq`` and posenc (rounded once).

The data behind each figure comes from a small pure function that returns NumPy arrays
(:func:`rope_wavelength_lines`, :func:`rope_error_positions`, :func:`rope_error_values`,
:func:`rope_error_curves`); the figures only draw it. Every frequency is :func:`posenc.rope.inv_freq` (exact,
correctly rounded) and every exact value :func:`posenc.rope.cos_sin` in float64. matplotlib is imported on the
first figure drawn (:func:`~posenc.analysis.figures.new_figure`), never pyplot.

>>> lines = rope_wavelength_lines(head_dim=16, base=10000.0, factor=4.0, original_max_position_embeddings=256)
>>> list(lines), lines["linear"].shape
(['default', 'linear', 'dynamic', 'yarn', 'llama3'], (8,))
"""

from __future__ import annotations

import decimal
import inspect
import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation
from ..core import highprec
from ..core.isolated import isolated
from ..decimals import number
from ..rope import RopeParameters, config, cos_sin, inv_freq
from ..rope.frequencies import exact_inv_freq
from .figures import matplotlib_defaults, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The scaling types of :func:`rope_wavelengths`, in the order drawn ("longrope" needs a model's own per-
#: frequency factor lists, which no set of parameters here could stand for: it is left out).
SCALINGS = ("default", "linear", "dynamic", "yarn", "llama3")

#: The head width of :func:`rope_error` (Llama's).
ERROR_HEAD_DIM = 128
#: The most positions :func:`rope_error` samples (bands × per_band; 800 by default): each costs an exact
#: cos/sin row, and a figure shows a few hundred points.
MAX_SAMPLES = 1 << 16

#: The contenders of :func:`rope_error`, in the order drawn.
CONTENDERS = ("float32 angles", "bfloat16 cache", "bfloat16 inv_freq", "posenc float32")

#: Each line's colour: the unscaled line black, the others in matplotlib's colour cycle ("C0", "C1", ...),
#: the same colour for a name in every figure.
_COLOURS = {"default": "black"} | {name: f"C{k}" for k, name in enumerate((*SCALINGS[1:], *CONTENDERS))}


def _keywords_of(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a function declared with ``**keywords`` the keyword parameters of the function ``name`` of this
    module (its signature, for ``help()`` and ``posenc plot``, which passes only what a kind takes)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        source = inspect.signature(globals()[name])
        returns = inspect.signature(function).return_annotation
        function.__signature__ = source.replace(return_annotation=returns)  # type: ignore[attr-defined]
        return function

    return decorate


def _with_defaults(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """The keywords ``given`` to a function with the signature of ``name``, the missing ones at their
    defaults (TypeError for a keyword it does not take)."""
    bound = inspect.signature(globals()[name]).bind(**given)
    bound.apply_defaults()
    return bound.arguments


# --- wavelength per frequency, for each scaling type ------------------------------------------------------


@isolated
def rope_scalings(
    *,
    head_dim: int = 128,
    base: float = 500000.0,
    factor: float = 8.0,
    original_max_position_embeddings: int = 8192,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> dict[str, tuple[RopeParameters, int | None]]:
    """The parameters of each of :data:`SCALINGS` built from the same numbers (``posenc.rope.config`` keyword
    form), with the ``seq_len`` its frequencies are taken at: None, except "dynamic" (NTK), taken at
    factor × original_max_position_embeddings (its max_position_embeddings is the original context).

    >>> params, seq_len = rope_scalings()["dynamic"]
    >>> params.rope_type, params.max_position_embeddings, seq_len
    ('dynamic', 8192, 65536)
    """
    original = validation.integer(
        "original_max_position_embeddings", original_max_position_embeddings, minimum=1
    )
    common = {"factor": factor, "original_max_position_embeddings": original}
    scalings = {
        "default": {},
        "linear": {"rope_type": "linear", "factor": factor},
        "dynamic": {"rope_type": "dynamic", "factor": factor},
        "yarn": {"rope_type": "yarn", **common, "beta_fast": beta_fast, "beta_slow": beta_slow},
        "llama3": {
            "rope_type": "llama3",
            **common,
            "low_freq_factor": low_freq_factor,
            "high_freq_factor": high_freq_factor,
        },
    }
    out: dict[str, tuple[RopeParameters, int | None]] = {}
    for name, scaling in scalings.items():
        params = config(head_dim=head_dim, base=base, scaling=scaling, max_position_embeddings=original)
        out[name] = (params, _extended(params) if params.kind.grows_with_length else None)
    return out


@_keywords_of("rope_scalings")
@isolated
def rope_wavelength_lines(**scaling: Any) -> dict[str, np.ndarray]:
    """The wavelength 2π/θ_i, in positions, of each rotary frequency θ_i (:func:`posenc.rope.inv_freq`'s
    exact θ_i; 2π/θ_i rounded once to float64) for each of :data:`SCALINGS` (:func:`rope_scalings` says how
    each is built): name -> float64 array of shape ``(rotary_dim // 2,)``, frequency index i = 0 ..
    rotary_dim/2 - 1.

    >>> lines = rope_wavelength_lines()
    >>> [round(float(lines[name][0] / lines["default"][0]), 6) for name in lines]  # i = 0, the fastest
    [1.0, 8.0, 1.0, 1.0, 1.0]
    >>> [round(float(lines[name][-1] / lines["default"][-1]), 1) for name in lines]  # the slowest
    [1.0, 8.0, 57.0, 8.0, 8.0]
    """
    scalings = rope_scalings(**scaling)
    return {name: rope_wavelengths_of(params, seq_len) for name, (params, seq_len) in scalings.items()}


def rope_wavelengths_of(params: RopeParameters, seq_len: int | None = None) -> np.ndarray:
    """The wavelengths 2π/θ_i of the rotary frequencies of ``params`` at ``seq_len`` (as
    :func:`posenc.rope.inv_freq` takes them): the exact θ_i (:func:`posenc.rope.frequencies.exact_inv_freq`),
    each 2π/θ_i rounded once to float64 (2π / inv_freq in float64 rounds three times: ~1 in 3 is off by an
    ulp); a zero θ_i gives inf.

    >>> rope_wavelengths_of(config(head_dim=4, base=100.0))  # 2π, 2π · 10
    array([ 6.28318531, 62.83185307])
    """

    def at(digits: int) -> list[decimal.Decimal]:
        theta = exact_inv_freq(params, seq_len, digits + 2)  # relative error < 10**-(digits + 2)
        work = highprec.context(digits + 10)
        two_pi = work.multiply(2, highprec.pi(digits + 10))
        return [work.divide(two_pi, t) if t else decimal.Decimal(0) for t in theta]

    theta = inv_freq(params, seq_len=seq_len)
    out = np.array(highprec.rounded_reals(at))
    out[theta == 0] = np.inf
    return out


@_keywords_of("rope_scalings")
@isolated
@matplotlib_defaults
def rope_wavelengths(**scaling: Any) -> Figure:
    """The wavelength 2π/θ_i of each rotary frequency against its index i, one line per scaling type
    (:func:`rope_wavelength_lines`). 8 × 7 in, two panels sharing the x axis (i = 0 .. rotary_dim/2 - 1).

    Top: the wavelengths in positions (log scale), with the trained context (original_max_position_embeddings)
    and the extended one (factor × original) as horizontal lines. Bottom: each type's wavelength over the
    unscaled one, i.e. how much it stretches each frequency: linear stretches all by factor; Llama 3 keeps the
    short wavelengths (under original / high_freq_factor), stretches the long ones (over original /
    low_freq_factor) by factor and blends between; YaRN does the same with a ramp over the frequencies that
    turn between beta_fast and beta_slow times in the trained context; dynamic NTK raises the base, which
    stretches each frequency by more than the last, the slowest by s = factor·L/M − (factor − 1) (57 for
    factor 8 at L = 8M), far more than factor.

    >>> figure = rope_wavelengths(head_dim=64)
    >>> [round(x) for x in figure.get_size_inches()], len(figure.axes[0].get_lines())
    ([8, 7], 7)
    """
    lines = rope_wavelength_lines(**scaling)
    scalings = rope_scalings(**scaling)
    params = scalings["default"][0]
    llama3 = scalings["llama3"][0]  # the type that keeps every parameter drawn in the title
    yarn = scalings["yarn"][0]
    original, factor = int(llama3.original_max_position_embeddings), llama3.factor
    extended = _extended(scalings["dynamic"][0])
    labels = {
        "default": "default (unscaled)",
        "linear": f"linear (position interpolation): every θ / {number(factor)}",
        "dynamic": f"dynamic NTK at seq_len {extended:,}: base {number(params.base)} → "
        f"{_ntk_base(scalings):.3g}",
        "yarn": f"YaRN (beta_fast {number(yarn.beta_fast)}, beta_slow {number(yarn.beta_slow)})",
        "llama3": f"Llama 3 (low_freq_factor {number(llama3.low_freq_factor)}, "
        f"high_freq_factor {number(llama3.high_freq_factor)})",
    }
    styles = {"default": "-", "linear": "-", "dynamic": "-.", "yarn": "--", "llama3": ":"}
    widths = {"default": 2.2, "linear": 1.4, "dynamic": 1.6, "yarn": 1.8, "llama3": 2.4}
    figure = new_figure(8, 7)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    index = np.arange(params.n_frequencies)
    for name, wavelength in lines.items():
        style = {"color": _COLOURS[name], "linestyle": styles[name], "linewidth": widths[name]}
        top.plot(index, wavelength, label=labels[name], **style)
        bottom.plot(index, wavelength / lines["default"], **style)
    for level, text in (
        (original, f"trained context {original:,}"),
        (extended, f"factor × trained = {extended:,}"),
    ):
        top.axhline(level, color="grey", linewidth=0.9, linestyle=(0, (6, 3)))
        top.text(0.5, level * 1.15, text, color="dimgrey", fontsize=8, va="bottom")
    top.set_yscale("log")
    top.set_ylabel("wavelength 2π/θ_i (positions)")
    top.legend(fontsize=8, loc="upper left")
    top.grid(alpha=0.3, which="major")
    top.set_title(
        f"RoPE wavelength per frequency for each scaling type\nhead_dim {params.head_dim}, rotary_dim "
        f"{params.rotary_dim}, base {number(params.base)}, factor {number(factor)}, "
        f"trained context {original:,}",
        fontsize=11,
    )
    bottom.set_yscale("log")
    stretch = max(float(np.max(wavelength / lines["default"])) for wavelength in lines.values())
    ticks = 2.0 ** np.arange(0, math.ceil(math.log2(stretch)) + 1)
    bottom.set_yticks(ticks, [f"{t:g}" for t in ticks])
    bottom.set_yticks([], minor=True)
    bottom.axhline(float(factor), color="grey", linewidth=0.8, linestyle=(0, (6, 3)))
    bottom.set_ylabel("stretch: wavelength / unscaled")
    bottom.set_xlabel("frequency index i (pair of the rotation; θ_i falls as i grows)")
    bottom.grid(alpha=0.3, which="both")
    bottom.set_xlim(-0.5, params.n_frequencies - 0.5)
    return figure


def _extended(params: RopeParameters) -> int:
    """The extended context: factor × original_max_position_embeddings (as an int, at least 1)."""
    original = params.original_max_position_embeddings or params.max_position_embeddings or 1
    return max(1, round(float(params.factor or 1.0) * original))


def _ntk_base(scalings: dict[str, tuple[RopeParameters, int | None]]) -> float:
    """The grown base of dynamic NTK, b' = b·s^(d/(d-2)), s = factor·L/M − (factor − 1), for the title."""
    params, seq_len = scalings["dynamic"]
    limit = params.max_position_embeddings or 1
    length = max(seq_len or limit, limit)
    factor = float(params.factor or 1.0)
    s = factor * length / limit - (factor - 1)
    d = params.rotary_dim
    return params.base * s ** (d / (d - 2))


# --- error of the cos/sin values against the position ----------------------------------------------------


@isolated
def rope_error_positions(length: int = 131072, *, bands: int = 200, per_band: int = 4) -> np.ndarray:
    """The positions sampled for :func:`rope_error`: ``bands`` log-spaced bands over 1 .. length - 1, up to
    ``per_band`` evenly spaced positions in each (fewer where a band is narrower): a sorted int64 array of
    unique positions, the first 1 and the last length - 1.

    >>> rope_error_positions(1000, bands=4, per_band=2).tolist()
    [1, 3, 6, 19, 32, 105, 178, 588, 999]
    """
    edges = _band_edges(length, bands)
    per_band = validation.integer("per_band", per_band, minimum=1)
    validation.at_most("bands × per_band", (len(edges) - 1) * per_band, MAX_SAMPLES, "positions sampled")
    chosen = [
        np.linspace(lo, hi, per_band + 1)[1:] if hi > lo else [lo] for lo, hi in itertools.pairwise(edges)
    ]
    positions = np.rint(np.concatenate([[1.0], *chosen])).astype(np.int64)
    return np.unique(np.clip(positions, 1, int(length) - 1))


@isolated
def rope_error_values(
    positions: np.ndarray, *, head_dim: int = 128, base: float = 500000.0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The unscaled rotary (cos, sin) at ``positions`` (P,) for head_dim and base, each as float64 arrays of
    shape (P, rotary_dim // 2) (one column per frequency θ_i; the layouts only repeat them). The positions
    are integers (whole floats too): a fraction, a boolean or a NaN is refused, never truncated.

    * ``"exact"``: :func:`posenc.rope.cos_sin` in float64 (within 1 ulp of the exact reals);
    * ``"float32 angles"``: the usual code, as Hugging Face's rotary embedding computes it: inv_freq =
      1 / base ** (arange(0, d, 2) / d) in float32, angle = float32(position) × inv_freq in float32, then
      cos and sin in float32;
    * ``"bfloat16 cache"``: those float32 values stored in bfloat16;
    * ``"bfloat16 inv_freq"``: the same float32 computation from an inv_freq rounded to bfloat16 (what
      ``model.to(torch.bfloat16)`` does to the buffer), the values kept in float32 (a bfloat16 model also
      rounds them to bfloat16, which adds the cache's error, ≤ 2**-9);
    * ``"posenc float32"``: :func:`posenc.rope.cos_sin` in float32: the exact values rounded once.

    NumPy's float32 cos and sin stand for torch's (both are within a few ulp of correct rounding); bfloat16
    is ``ml_dtypes.bfloat16``.

    >>> values = rope_error_values(np.array([1, 1000]), head_dim=8)
    >>> exact_cos, _ = values["exact"]
    >>> exact_cos.shape, float(np.abs(values["posenc float32"][0] - exact_cos).max()) <= 2.0**-25
    ((2, 4), True)
    """
    params = config(head_dim=head_dim, base=base)
    positions = _integer_positions(positions)
    n, d = params.n_frequencies, params.rotary_dim
    bfloat16 = validation.dtype("bfloat16")

    def first_half(pair: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        cos, sin = pair
        return cos[:, :n].astype(np.float64), sin[:, :n].astype(np.float64)

    exponents = np.arange(0, d, 2).astype(np.float32) / np.float32(d)
    hf_inv_freq = np.float32(1.0) / (np.float32(params.base) ** exponents)  # transformers' init, in float32
    with np.errstate(over="ignore"):  # a base above float32's range is inf there, as in float32 code
        usual = _float32_cos_sin(positions, hf_inv_freq)
        low_inv_freq = _float32_cos_sin(positions, hf_inv_freq.astype(bfloat16).astype(np.float32))
    cache = tuple(v.astype(bfloat16).astype(np.float64) for v in usual)
    return {
        "exact": first_half(cos_sin(positions, params, dtype="float64")),
        "float32 angles": first_half(usual),
        "bfloat16 cache": (cache[0], cache[1]),
        "bfloat16 inv_freq": first_half(low_inv_freq),
        "posenc float32": first_half(cos_sin(positions, params, dtype="float32")),
    }


def _integer_positions(positions: Any) -> np.ndarray:
    """``positions`` as int64: a non-empty 1-d array of integers (whole floats too), each |p| < 2**31; a
    boolean, a fraction (2.7 was truncated to 2) or a NaN is refused, naming the value."""
    array = validation.position_array(positions)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"positions must be a non-empty 1-d array of positions; got shape {array.shape}")
    validation.at_most("the number of positions", array.size, MAX_SAMPLES, "one exact cos/sin row each")
    exact = validation.positions(array)  # refuses booleans, NaN, inf and |p| >= 2**31; float64, exact
    fractional = np.flatnonzero(exact != np.floor(exact))
    if fractional.size:
        i = int(fractional[0])
        raise ValueError(
            f"positions must be whole numbers (each one row of integer positions); got {float(exact[i])!r} "
            f"at index {i}; round them yourself (np.rint(positions).astype(np.int64))"
        )
    return exact.astype(np.int64)


@isolated
def rope_error_curves(
    *, base: float = 500000.0, length: int = 131072, bands: int = 200
) -> dict[str, np.ndarray]:
    """The data of :func:`rope_error`: ``"position"``, the last sampled position of each band (B,), and for
    each of :data:`CONTENDERS` the largest |error| of any cos or sin value at the band's sampled positions
    (:func:`rope_error_positions`, :func:`rope_error_values`), shape (B,), float64; head_dim
    :data:`ERROR_HEAD_DIM` (the error is the largest over the frequencies, and θ_0 = 1 whatever the width).

    >>> curves = rope_error_curves(length=131072)
    >>> bool(curves["posenc float32"].max() <= 2.0**-24 < 1e-3 < curves["float32 angles"][-1])
    True
    """
    positions = rope_error_positions(length, bands=bands)
    values = rope_error_values(positions, head_dim=ERROR_HEAD_DIM, base=base)
    exact_cos, exact_sin = values["exact"]
    edges = _band_edges(length, bands)
    band = np.searchsorted(edges[1:-1], positions, side="left")  # band b holds (edges[b], edges[b + 1]]
    starts = np.flatnonzero(np.r_[True, band[1:] != band[:-1]])  # each band's first sampled position
    ends = np.r_[starts[1:], positions.size] - 1
    curves = {"position": positions[ends].astype(np.float64)}
    for name in CONTENDERS:
        cos, sin = values[name]
        error = np.maximum(np.abs(cos - exact_cos).max(axis=1), np.abs(sin - exact_sin).max(axis=1))
        curves[name] = np.maximum.reduceat(error, starts)
    return curves


@_keywords_of("rope_error_curves")
@isolated
@matplotlib_defaults
def rope_error(**options: Any) -> Figure:
    """The largest |error| of a rotary cos/sin value against the exact one, against the position
    1 .. length - 1 (log-log; each point the largest over a band of positions, :func:`rope_error_curves`),
    for the unscaled RoPE of base (head_dim :data:`ERROR_HEAD_DIM`). 8 × 5 in.

    Float32 angles (the usual code) lose accuracy as the angle p·θ_i grows, up to ~1e-2 near 131072 for
    θ_0 = 1; a bfloat16 cache starts at bfloat16's rounding (~2**-9) and keeps it; an inv_freq in bfloat16
    is off by ~2**-9 of every angle, so its values are wrong (error ~1, the most a cos can be off by is 2)
    past a few hundred positions; posenc's float32 values are the exact ones rounded once, at most 2**-25
    everywhere. Dotted lines mark 2**-25 and 2**-9, half an ulp of float32 and of bfloat16 in [1/2, 1): the
    most rounding to them moves a cos/sin (the unit roundoffs are 2**-24 and 2**-8, relative).

    >>> figure = rope_error(length=4096, bands=20)
    >>> [round(x) for x in figure.get_size_inches()], len(figure.axes[0].get_lines())
    ([8, 5], 6)
    """
    curves = rope_error_curves(**options)
    every = _with_defaults("rope_error_curves", options)
    labels = {
        "float32 angles": "float32 angles (usual code: position × inv_freq, cos, sin in float32)",
        "bfloat16 cache": "bfloat16 cache (those float32 values stored in bfloat16)",
        "bfloat16 inv_freq": "float32 angles from a bfloat16 inv_freq (model.to(bfloat16))",
        "posenc float32": "posenc float32 (exact, rounded once)",
    }
    figure = new_figure(8, 5)
    ax = figure.add_subplot()
    x = curves["position"]
    for name in CONTENDERS:
        error = np.where(curves[name] > 0, curves[name], np.nan)  # an exact band has no point on a log axis
        width = 2.0 if name == "posenc float32" else 1.5
        ax.plot(x, error, color=_COLOURS[name], linewidth=width, label=labels[name])
    for level, text, above in (
        (2.0**-25, "2⁻²⁵ (half an ulp of float32 in [½, 1): its largest rounding of a cos/sin)", False),
        (2.0**-9, "2⁻⁹ (half an ulp of bfloat16 in [½, 1))", False),
    ):
        ax.axhline(level, color="grey", linewidth=0.8, linestyle=":")
        ax.text(
            0.3,
            level * (1.3 if above else 1 / 1.3),
            text,
            color="dimgrey",
            fontsize=8,
            va="bottom" if above else "top",
            transform=ax.get_yaxis_transform(),  # x in axes fraction, y in data
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-9, 1e4)  # room above the largest error (2) for the legend
    ax.set_xlabel("position p")
    ax.set_ylabel("largest |error| of a cos or sin value")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    ax.set_title(
        "RoPE cos/sin against the exact values: float32 angles, bfloat16, posenc\n"
        f"head_dim {ERROR_HEAD_DIM}, base {number(float(every['base']))}, unscaled, "
        f"positions 1–{int(every['length']) - 1:,}",
        fontsize=11,
    )
    return figure


def _float32_cos_sin(positions: np.ndarray, inv_freq32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of float32(position) × inv_freq, every step in float32: (P, n) each."""
    angles = positions.astype(np.float32)[:, None] * inv_freq32[None, :]
    return np.cos(angles), np.sin(angles)


def _band_edges(length: int, bands: int) -> np.ndarray:
    """``bands + 1`` log-spaced edges from 1 to length - 1 (float64)."""
    length = validation.integer("length", length, minimum=2)
    validation.at_most("length", length, validation.MAX_POSITION, "positions 1 .. length - 1 are below 2**31")
    bands = validation.integer("bands", bands, minimum=1)
    validation.at_most("bands", bands, MAX_SAMPLES, "positions sampled")
    return np.geomspace(1, length - 1, bands + 1) if length > 2 else np.ones(bands + 1)
