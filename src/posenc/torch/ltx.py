"""LTX-Video's rotary of fractional coordinates (diffusers' ``LTXVideoRotaryPosEmbed``, LTX-2's
``LTX2AudioVideoRotaryPosEmbed`` and Sana-WM's copy of it): what posenc reads of it, how it is proven, and
its exact equivalents :class:`LtxRope` and :class:`Ltx2Rope`.

The formula (Lightricks' LTX-Video, as diffusers writes it). A token has a coordinate c_a on each of its A
axes (frames, height, width; or time alone), taken as a fraction g_a = c_a / base_a of the axis' base size;
with n = dim // 2A frequencies

    ω_k = (π/2) · theta^(k / (n − 1)),  k = 0 .. n − 1   (n = 1: ω_0 = π/2)

its angles are x_a · ω_k with x_a = 2 g_a − 1, ordered frequency-major (ω_0 on every axis, then ω_1, ...).
``dim mod 2A`` leading channels are padding (cos 1, sin 0). Layouts: "interleaved" (each angle's value
twice side by side: ``(B, S, dim)``) and LTX-2's "split" (``dim / 2`` values padded at the front, then
``(B, heads, S, dim / 2heads)``).

The coordinates, as each form forms them:

* :class:`LtxRope` (``forward(hidden_states, num_frames, height, width, rope_interpolation_scale,
  video_coords)``): the patches' indices (f, h, w) of a ``num_frames × height × width`` grid, each times
  ``rope_interpolation_scale[a] · patch_a / base_a`` where a scale is given (else the index itself, g = f);
  or ``video_coords`` ``(B, 3, S)`` over the bases;
* :class:`Ltx2Rope` (``forward(coords, device)``): ``coords`` ``(B, A, S)``, or patch bounds ``(B, A, S, 2)``
  whose midpoints are taken, over the bases (``base_num_frames``, ``base_height``, ``base_width``; audio:
  ``base_num_frames``).

posenc forms every coordinate in float64 from the values given (a scale or coordinate is taken as the float
it is; g_a and x_a are rounded to float64, ~1e-16 relative, which moves a value only where the exact one is
~1e-13 or closer to a float32 midpoint: an angle that is a whole number of half turns) and computes each cos
and sin of that x_a · ω_k exactly, rounded once to float32; the originals form them
in float32 (LTX-2's frequencies in float64, then cast), which errs by up to ω·|x|·2⁻²⁰ in the angle — at
LTX-Video's unscaled integer coordinates, where ω reaches (π/2)·theta, that is whole radians.

The proof (:func:`prove_ltx`): the module's own (cos, sin) of probe coordinates against posenc's, shapes
and padding included, each value within what float32 code errs there (:func:`allowance`).
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core, validation
from ..core import explicit, highprec
from ..errors import PosencValueError
from . import proofs
from .computed import Refusal, forward_names, probed, within_rounding
from .functions import _encode_tensor
from .tensors import _no_derivative

__all__ = [
    "Ltx2Rope",
    "LtxRope",
    "LtxVaeRope",
    "allowance",
    "axis_rows",
    "exact_sin_cos",
    "prove_ltx",
    "prove_ltx_vae",
    "read_ltx",
    "read_ltx_vae",
]

#: LTX-Video's forward (``LTXVideoRotaryPosEmbed``).
LTX_FORWARD = ("hidden_states", "num_frames", "height", "width", "rope_interpolation_scale", "video_coords")
#: LTX-2's forward (``LTX2AudioVideoRotaryPosEmbed`` and its copies).
LTX2_FORWARD = ("coords", "device")
#: The layouts of LTX-2's ``rope_type``.
LAYOUTS = ("interleaved", "split")
#: The pipelines' interpolation scale of a 25 fps video (8 / 25, 32, 32), a probe of the scaled form.
PIPELINE_SCALE = (8 / 25, 32.0, 32.0)


@functools.lru_cache(maxsize=64)
def law(theta: float, count: int, columns: tuple[int, ...] | None = None) -> explicit.ExactFrequencies:
    """The exact frequencies ω_k = (π/2) · theta^(k / (count − 1)) (count 1: π/2), of the ``columns`` k
    given (None: every k)."""
    columns = tuple(range(count)) if columns is None else columns

    def exact(digits: int) -> tuple[decimal.Decimal, ...]:
        context = highprec.context(digits + 10)
        half_pi = context.divide(highprec.pi(digits + 10), 2)
        if count == 1:
            return (context.plus(half_pi),)
        log = context.ln(decimal.Decimal(theta))
        return tuple(
            context.multiply(half_pi, context.exp(context.divide(context.multiply(log, k), count - 1)))
            for k in columns
        )

    return explicit.ExactFrequencies(("ltx", float(theta), int(count), columns), exact)


def frequencies(theta: float, count: int) -> np.ndarray:
    """ω_k (float64 nearest) of :func:`law`."""
    return law(float(theta), int(count)).constants()[0]


@functools.lru_cache(maxsize=64)
def quarter_turns(theta: float, count: int) -> dict[int, Fraction]:
    """The k whose theta^(k / (count − 1)) is a rational r_k (numerator and denominator below 2²¹: k = 0
    always; 10000's k/(count − 1) of ¼, ½, ¾, 1), and r_k: at a position x where r_k · x is an integer q,
    the angle is q quarter turns and its cos and sin are exactly 0 or ±1 — which the certified evaluation,
    made for transcendental values, would spend its whole precision on."""
    turns = {0: Fraction(1)}
    if count == 1:
        return turns
    value = Fraction(theta)
    for k in range(1, count):
        power = Fraction(k, count - 1)  # theta^(num/den) is rational iff both parts are den-th powers
        roots = [round(part ** (1 / power.denominator)) for part in (value.numerator, value.denominator)]
        if [root**power.denominator for root in roots] != [value.numerator, value.denominator]:
            continue
        r = Fraction(roots[0], roots[1]) ** power.numerator
        if r.numerator < 2**21 and r.denominator < 2**21:
            turns[k] = r
    return turns


def _integral(x: np.ndarray, r: Fraction) -> np.ndarray:
    """Whether r · x is an integer, exactly, for float64 ``x``: for an integer r, where x = m · 2^(e − 53)
    (m an integer) and the powers of two of r and m make up for 53 − e; else by exact fractions."""
    if r.denominator != 1:
        return np.array([(Fraction(float(v)) * r).denominator == 1 for v in x], dtype=bool)
    fraction, exponent = np.frexp(x)
    m = np.abs(fraction * 2.0**53).astype(np.int64)
    low = m & -m
    zeros = np.log2(np.where(m == 0, 1, low)).astype(np.int64)
    twos = (r.numerator & -r.numerator).bit_length() - 1
    return (m == 0) | (exponent - 53 + zeros + twos >= 0)


def _quarters(x: np.ndarray, r: Fraction) -> np.ndarray:
    """(r · x) mod 4 for ``x`` where r · x is an integer (:func:`_integral`)."""
    if r.denominator == 1:
        return np.mod(x * r.numerator, 4).astype(np.int64)  # exact: an integer below 2**53
    return np.array([int(Fraction(float(v)) * r) % 4 for v in x], dtype=np.int64)


def exact_sin_cos(
    x: np.ndarray, theta: float, count: int, dtype: str = "float32"
) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos ``(len(x), count)`` in ``dtype`` (float32; float64: within 1 ulp) of x · ω_k for 1-D
    float64 ``x``: quarter turns (:func:`quarter_turns`) exactly, every other value by the certified
    evaluation of :func:`posenc.core.explicit.sin_cos`."""
    sin = np.empty((len(x), count), dtype)
    cos = np.empty((len(x), count), dtype)
    turns = quarter_turns(float(theta), int(count))
    others = tuple(k for k in range(count) if k not in turns)
    if others:
        sin[:, others], cos[:, others] = explicit.sin_cos(x, law(float(theta), int(count), others), dtype)
    for k, r in turns.items():
        whole = _integral(x, r)
        if not whole.all():
            s, c = explicit.sin_cos(x[~whole], law(float(theta), int(count), (k,)), dtype)
            sin[~whole, k], cos[~whole, k] = s[:, 0], c[:, 0]
        quarter = _quarters(x[whole], r)
        sin[whole, k] = np.array([0, 1, 0, -1], dtype)[quarter]
        cos[whole, k] = np.array([1, 0, -1, 0], dtype)[quarter]
    return sin, cos


def fraction_cos_sin(fractions: torch.Tensor, theta: float, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) of the angles (2 g_a − 1) · ω_k of ``fractions`` g ``(..., A)`` (float64), each
    ``(..., count · A)`` float32 on the CPU, frequency-major: column k·A + a holds ω_k on axis a. Each
    distinct x is evaluated once (a grid's tokens share a few)."""
    x = 2.0 * fractions.detach().to("cpu", torch.float64).numpy() - 1.0
    if not np.isfinite(x).all() or np.abs(x).max(initial=0.0) >= 2**31:
        raise ValueError(
            "coordinates: each 2·c/base − 1 must be finite and below 2**31 in magnitude; got "
            f"{x[~np.isfinite(x) | (np.abs(x) >= 2**31)][:3].tolist()}: give finite coordinates"
        )
    distinct, inverse = np.unique(x.reshape(-1), return_inverse=True)
    sin, cos = exact_sin_cos(distinct, theta, count)
    shape = (*x.shape[:-1], count * x.shape[-1])  # (..., A, count) -> (..., count, A), flattened
    return tuple(  # type: ignore[return-value]
        torch.from_numpy(
            np.ascontiguousarray(np.swapaxes(v[inverse].reshape(*x.shape, count), -1, -2))
        ).reshape(shape)
        for v in (cos, sin)
    )


def allowance(fractions: torch.Tensor, theta: float, count: int) -> torch.Tensor:
    """What float32 code errs at each value of :func:`fraction_cos_sin` (same shape, float64): its fraction
    g formed by a division and 2g − 1 by a product and a sum (each rounded: 4·(|g| + 1) units), ω_k formed
    by a power in float32 ((ln theta + 4)·|x| units), the angle by a product, and cos and sin rounded
    (4 units): ω·(|x|·(ln theta + 8) + 4·(|g| + 1))·2⁻²⁴ + 4·2⁻²⁴."""
    g = fractions.detach().to("cpu", torch.float64)
    x = (2 * g - 1).abs()[..., None]  # (..., A, 1)
    omega = torch.tensor(frequencies(theta, count))
    units = omega * (x * (math.log(theta) + 8) + 4 * (g.abs()[..., None] + 1)) + 4
    return (units * proofs.UNIT).transpose(-1, -2).reshape(*g.shape[:-1], count * g.shape[-1])


def _number(value: Any, name: str) -> float:
    """A scale given as a number or a one-element tensor, as a float."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(
        f"{name}: {value!r} is not a number; give one scale per axis (a float or a one-element tensor)"
    )


def _interleaved(values: torch.Tensor, dim: int, axes: int, pad: float) -> torch.Tensor:
    """Each value twice side by side, ``dim mod 2·axes`` channels of ``pad`` in front: ``(B, S, dim)``."""
    doubled = values.repeat_interleave(2, dim=-1)
    front = dim % (2 * axes)
    if not front:
        return doubled
    return torch.cat([torch.full((*doubled.shape[:-1], front), pad, dtype=doubled.dtype), doubled], dim=-1)


def _split(values: torch.Tensor, dim: int, heads: int, pad: float) -> torch.Tensor:
    """``dim // 2`` values, ``pad`` in front, as ``(B, heads, S, dim / 2heads)``."""
    front = dim // 2 - values.shape[-1]
    if front:
        values = torch.cat([torch.full((*values.shape[:-1], front), pad, dtype=values.dtype), values], dim=-1)
    batch, length = values.shape[:2]
    return values.reshape(batch, length, heads, -1).transpose(1, 2)


class LtxRope(nn.Module):
    """posenc's exact values in place of LTX-Video's rotary (module docstring), called as it is:
    ``(hidden_states, num_frames, height, width, rope_interpolation_scale=None, video_coords=None)`` ->
    ``(cos, sin)``, each ``(B, S, dim)`` float32 on the device of ``hidden_states`` (B its batch size),
    the S = num_frames·height·width patches row-major (or the S of ``video_coords`` ``(B, 3, S)``).

    >>> cos, sin = LtxRope(6, 10000.0, (20, 2048, 2048), 1, 1)(torch.zeros(1), 1, 1, 2)
    >>> sin  # the patches (0, 0, 0) and (0, 0, 1): x = −1 on every axis but the last of the second
    tensor([[[-1., -1., -1., -1., -1., -1.],
             [-1., -1., -1., -1.,  1.,  1.]]])
    """

    def __init__(
        self, dim: int, theta: float, bases: tuple[float, ...], patch_size: int, patch_size_t: int
    ) -> None:
        super().__init__()
        self.dim, self.theta = validation.integer("dim", dim, minimum=1), float(theta)
        self.bases = tuple(float(b) for b in bases)
        self.patch_size = validation.integer("patch_size", patch_size, minimum=1)
        self.patch_size_t = validation.integer("patch_size_t", patch_size_t, minimum=1)
        if self.dim < 6 or len(self.bases) != 3:
            raise ValueError(f"dim: {dim}; LTX-Video's rotary takes at least 6 channels (3 axes × cos, sin)")

    def fractions(
        self,
        batch: int,
        num_frames: int | None = None,
        height: int | None = None,
        width: int | None = None,
        rope_interpolation_scale: Any = None,
        video_coords: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The fractions g ``(B, S, 3)`` (float64) of its tokens, as the module docstring forms them."""
        if video_coords is not None:
            _no_derivative(video_coords, "video_coords", "posenc's LTX rotary")
            coords = video_coords.detach().to("cpu", torch.float64)
            return torch.stack([coords[:, a] / self.bases[a] for a in range(3)], dim=-1)
        sizes = [num_frames, height, width]
        for name, size in zip(("num_frames", "height", "width"), sizes, strict=True):
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(f"{name}: {size!r}; give the grid's size in patches (an int >= 0)")
        grid = torch.meshgrid(*(torch.arange(s, dtype=torch.float64) for s in sizes), indexing="ij")
        grid = torch.stack([g.reshape(-1) for g in grid], dim=-1)
        if rope_interpolation_scale is not None:
            patches = (self.patch_size_t, self.patch_size, self.patch_size)
            scales = [
                _number(s, f"rope_interpolation_scale[{a}]") for a, s in enumerate(rope_interpolation_scale)
            ]
            if len(scales) != 3:
                raise ValueError(f"rope_interpolation_scale: {len(scales)} scales; give one per axis (3)")
            factors = [s * p / b for s, p, b in zip(scales, patches, self.bases, strict=True)]
            factor = torch.tensor(factors, dtype=torch.float64)  # not the default float32: 0.016000001
            grid = grid * factor
        return grid[None].expand(batch, -1, -1)

    def forward(
        self,
        hidden_states: torch.Tensor,
        num_frames: int | None = None,
        height: int | None = None,
        width: int | None = None,
        rope_interpolation_scale: Any = None,
        video_coords: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.fractions(
            hidden_states.size(0), num_frames, height, width, rope_interpolation_scale, video_coords
        )
        cos, sin = fraction_cos_sin(g, self.theta, self.dim // 6)
        device = hidden_states.device
        return (
            _interleaved(cos, self.dim, 3, 1.0).to(device),
            _interleaved(sin, self.dim, 3, 0.0).to(device),
        )

    def describe(self) -> str:
        """One line: what was read."""
        return f"LTX-Video's rotary of fractional coordinates (dim {self.dim}, theta {self.theta:g})"

    def extra_repr(self) -> str:
        return f"dim={self.dim}, theta={self.theta:g}, bases={self.bases}"


class Ltx2Rope(nn.Module):
    """posenc's exact values in place of LTX-2's rotary (module docstring), called as it is:
    ``(coords, device=None)`` with ``coords`` ``(B, A, S)`` or patch bounds ``(B, A, S, 2)`` (A <= the number
    of bases) -> ``(cos, sin)`` float32 on ``device`` (else the coordinates'): ``(B, S, dim)`` in the
    "interleaved" layout, ``(B, heads, S, dim / 2heads)`` in the "split" one.

    >>> cos, sin = Ltx2Rope(4, 10000.0, (20,), "interleaved", 1)(torch.tensor([[[0.0, 20.0]]]))
    >>> cos  # x = −1 and 1: cos(∓π/2) and cos(∓5000π), exactly (float32 code: -4.3711e-08 and 1)
    tensor([[[0., 0., 1., 1.],
             [0., 0., 1., 1.]]])
    """

    def __init__(self, dim: int, theta: float, bases: tuple[float, ...], layout: str, heads: int) -> None:
        super().__init__()
        self.dim, self.theta = validation.integer("dim", dim, minimum=2), float(theta)
        self.bases = tuple(float(b) for b in bases)
        self.layout, self.heads = str(layout), validation.integer("heads", heads, minimum=1)
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout: {layout!r}; LTX-2's rotary lays out as one of {', '.join(LAYOUTS)}")

    def fractions(self, coords: torch.Tensor) -> torch.Tensor:
        """The fractions g ``(B, S, A)`` (float64) of ``coords`` (their midpoints where they are bounds)."""
        _no_derivative(coords, "coords", "posenc's LTX-2 rotary")
        host = coords.detach().to("cpu", torch.float64)
        if host.dim() == 4:
            host = host.mean(dim=-1)
        if host.dim() != 3 or host.shape[1] > len(self.bases):
            want = f"(batch, axes <= {len(self.bases)}, tokens[, 2])"
            raise ValueError(f"coords: shape {tuple(coords.shape)}; expected {want}")
        return torch.stack([host[:, a] / self.bases[a] for a in range(host.shape[1])], dim=-1)

    def lay_out(self, values: torch.Tensor, axes: int, pad: float) -> torch.Tensor:
        """``values`` ``(B, S, n·A)`` in its layout, padded with ``pad``."""
        if self.layout == "interleaved":
            return _interleaved(values, self.dim, axes, pad)
        return _split(values, self.dim, self.heads, pad)

    def forward(
        self, coords: torch.Tensor, device: str | torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(coords, torch.Tensor) and coords.device.type == "meta":  # its shapes alone
            return self._shapes_on_meta(coords, device)
        g = self.fractions(coords)
        axes = g.shape[-1]
        cos, sin = fraction_cos_sin(g, self.theta, self.dim // (2 * axes))
        device = device or coords.device
        return self.lay_out(cos, axes, 1.0).to(device), self.lay_out(sin, axes, 0.0).to(device)

    def _shapes_on_meta(
        self, coords: torch.Tensor, device: str | torch.device | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) of meta ``coords``: their shapes, nothing computed (one token of one batch computed on
        the CPU for the layout's shape; the batch and token axes then set to coords'), on meta: meta
        coordinates hold no values, so a real ``device`` is refused rather than given uninitialised memory."""
        if torch.device(device or coords.device).type != "meta":
            raise PosencValueError(
                f"coords: shape {tuple(coords.shape)} on the meta device (shapes, no values), yet the "
                f"(cos, sin) are asked on {device!r}; pass coords holding values on a real device, or leave "
                "device unset (or 'meta') for the shapes alone",
                parameter="coords",
            )
        one = torch.zeros(1, coords.shape[1], 1, *coords.shape[3:])
        tokens_axis = 1 if self.layout == "interleaved" else 2
        shaped = []
        for values in self.forward(one, "cpu"):
            shape = list(values.shape)
            shape[0], shape[tokens_axis] = coords.shape[0], coords.shape[2]
            shaped.append(torch.empty(shape, dtype=values.dtype, device="meta"))
        return shaped[0], shaped[1]

    def describe(self) -> str:
        """One line: what was read."""
        axes = len(self.bases)
        return (
            f"LTX-2's rotary of fractional coordinates on {axes} ax{'is' if axes == 1 else 'es'} (dim "
            f"{self.dim}, theta {self.theta:g}, {self.layout})"
        )

    def extra_repr(self) -> str:
        return f"dim={self.dim}, theta={self.theta:g}, bases={self.bases}, layout={self.layout!r}"


def _positive(module: nn.Module, *names: str) -> list[float] | None:
    values = [getattr(module, name, None) for name in names]
    if all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values):
        return [float(v) for v in values]
    return None


def read_ltx(module: nn.Module) -> LtxRope | Ltx2Rope | None:
    """posenc's exact equivalent of ``module`` where it has LTX-Video's or LTX-2's form (its forward's
    names, ``dim``, ``theta`` and its bases; LTX-2's ``modality``, ``rope_type`` and
    ``num_attention_heads``), built from its attributes; else None. Whether it computes what they say is
    :func:`prove_ltx`'s to tell."""
    if isinstance(module, LtxRope | Ltx2Rope):  # posenc's own, patched in
        return module
    names = forward_names(module)
    dim = getattr(module, "dim", None)
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    if names == LTX_FORWARD:
        read = _positive(module, "theta", "base_num_frames", "base_height", "base_width")
        patches = _positive(module, "patch_size", "patch_size_t")
        if read is None or patches is None or dim < 6 or read[0] <= 1:
            return None
        return LtxRope(dim, read[0], tuple(read[1:]), int(patches[0]), int(patches[1]))
    if names != LTX2_FORWARD:
        return None
    modality, layout = getattr(module, "modality", None), getattr(module, "rope_type", None)
    heads = getattr(module, "num_attention_heads", None)
    bases = {"video": ("base_num_frames", "base_height", "base_width"), "audio": ("base_num_frames",)}
    read = _positive(module, "theta", *bases.get(modality, ("?",)))
    if read is None or read[0] <= 1 or layout not in LAYOUTS or not isinstance(heads, int) or heads < 1:
        return None
    return Ltx2Rope(dim, read[0], tuple(read[1:]), layout, heads)


def _probes(exact: LtxRope | Ltx2Rope) -> list[tuple[tuple[Any, ...], dict[str, Any], torch.Tensor]]:
    """(args, keywords, fractions ``(B, S, A)``) of the probes: LTX-Video's grid unscaled, at the pipelines'
    scale and of given coordinates; LTX-2's patch bounds and coordinates on all its axes, and on the first
    alone (its cross-attention's)."""
    if isinstance(exact, LtxRope):
        states = torch.zeros(2, 1)
        grids = [((states, 2, 3, 4), {}), ((states, 3, 4, 5), {"rope_interpolation_scale": PIPELINE_SCALE})]
        coords = torch.tensor([[0.0, 1.0, 7.0, 19.0], [0.5, 64.0, 1000.0, 2047.0], [3.0, 31.0, 96.0, 2047.0]])
        grids.append(((states,), {"video_coords": torch.stack([coords, coords.flip(-1)])}))
        probes = []
        for args, keywords in grids:
            given = dict(zip(LTX_FORWARD[1:], args[1:], strict=False)) | keywords
            probes.append((args, keywords, exact.fractions(2, **given)))
        return probes
    axes = len(exact.bases)
    starts = torch.tensor([0.0, 1.0, 8.0, 24.0, 96.0, 505.0])[None, None].expand(2, axes, -1).clone()
    starts[1] *= 2
    bounds = torch.stack([starts, starts + 8], dim=-1)
    probes = []
    for coords in (bounds, starts, starts[:, :1], bounds[:, :1]):
        probes.append(((coords,), {}, exact.fractions(coords)))
    return probes


def _allowed_layout(exact: LtxRope | Ltx2Rope, fractions: torch.Tensor) -> torch.Tensor:
    """:func:`allowance` in ``exact``'s output layout (0 at the padding)."""
    axes = fractions.shape[-1]
    count = exact.dim // (2 * axes)
    allowed = allowance(fractions, exact.theta, count)
    if isinstance(exact, LtxRope):
        return _interleaved(allowed, exact.dim, 3, 0.0)
    return exact.lay_out(allowed, axes, 0.0)


def compare(
    exact: LtxRope | Ltx2Rope, pair: Any, ours: tuple[torch.Tensor, torch.Tensor], fractions: torch.Tensor
) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``pair`` (a module's output) against ``ours`` at
    ``fractions``, each value within :func:`allowance` (values whose allowance passes
    :data:`posenc.torch.proofs.CAP` not compared); else what it is not."""
    if not (
        isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(t, torch.Tensor) for t in pair)
    ):
        return f"its forward returns {type(pair).__name__}, not (cos, sin)"
    allowed = _allowed_layout(exact, fractions)
    worst, largest = 0.0, 0.0
    for name, mine, want in zip(("cos", "sin"), pair, ours, strict=True):
        if tuple(mine.shape) != tuple(want.shape):
            return f"its {name} has shape {tuple(mine.shape)}, not {tuple(want.shape)}"
        difference = (mine.detach().to("cpu", torch.float64) - want.to(torch.float64)).abs()
        compared = allowed <= proofs.CAP
        beyond = (difference > allowed) & compared
        if bool(beyond.any()):
            index = tuple(int(i) for i in torch.nonzero(beyond)[0])
            named = f"theta {exact.theta:g}, dim {exact.dim}"
            return (
                f"not the rotary its attributes name ({named}): its {name} at {index} differs by "
                f"{float(difference[index]):.3g}, where float32 code errs at most {float(allowed[index]):.3g}"
            )
        worst = max(worst, float(torch.where(compared, difference, 0.0).max()))
        largest = max(largest, float(torch.where(compared, allowed, 0.0).max()))
    return worst, largest


def prove_ltx(module: nn.Module, exact: LtxRope | Ltx2Rope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_ltx`) on the
    probes, shapes and padding included; else why not ("its forward ...": a form posenc does not read; "not
    the rotary ...": values other than its attributes name)."""
    worst, largest = 0.0, 0.0
    for args, keywords, fractions in _probes(exact):
        mine = probed(lambda: module(*args, **keywords))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        checked = compare(exact, mine, exact(*args, **keywords), fractions)
        if isinstance(checked, str):
            return checked
        worst, largest = max(worst, checked[0]), max(largest, checked[1])
    return worst, largest


def axis_rows(
    module: nn.Module, exact: LtxRope | Ltx2Rope, count: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) ``(count, columns)`` of the coordinates 0 .. ``count`` − 1 on its first axis
    (0 on the others; LTX-Video's unscaled grid of ``count`` frames), the batch (and LTX-2's heads) flattened
    away, and their fractions ``(count, A)``."""
    if isinstance(exact, LtxRope):
        args: tuple[Any, ...] = (torch.zeros(1), count, 1, 1)
        fractions = exact.fractions(1, count, 1, 1)[0]
    else:
        coords = torch.zeros(1, len(exact.bases), count)
        coords[0, 0] = torch.arange(count, dtype=torch.float32)
        args, fractions = (coords,), exact.fractions(coords)[0]
    with torch.no_grad():
        cos, sin = module(*args)
    return _rows(exact, cos, count), _rows(exact, sin, count), fractions


def _rows(exact: LtxRope | Ltx2Rope, values: torch.Tensor, count: int) -> torch.Tensor:
    """A batch of one's values ``(count, columns)``, LTX-2's heads of the "split" layout side by side."""
    if getattr(exact, "layout", "interleaved") == "split":
        values = values[0].transpose(0, 1)
    return values.reshape(count, -1)


def axis_allowance(exact: LtxRope | Ltx2Rope, fractions: torch.Tensor) -> torch.Tensor:
    """:func:`allowance` of :func:`axis_rows`' (cos, sin) at their ``fractions`` ``(count, A)``, as one
    ``(count, 2 · columns)`` (cos's, then sin's; 0 at the padding)."""
    allowed = _rows(exact, _allowed_layout(exact, fractions[None]), fractions.shape[0])
    return torch.cat([allowed, allowed], dim=-1)


# --- LTX-2's diffusion decoder: a rotary applied in its forward --------------------------------------------

#: The forward of LTX-2's decoder rotary (``LTX2VideoVaeRotaryPosEmbed3D``): ``hidden_states`` ``(B, T, H,
#: W, heads, head_dim)`` rotated in place of its values.
VAE_FORWARD = ("hidden_states",)
#: Its probe grid (T, H, W).
VAE_PROBE = (5, 6, 7)


class LtxVaeRope(nn.Module):
    """posenc's exact values in place of LTX-2's decoder rotary, called as it is: ``hidden_states`` ``(B, T,
    H, W, heads, head_dim)`` -> the same shape and dtype, the head split into chunks of ``split`` (frames,
    rows, columns), each chunk's pairs (x, y) rotated by its axis' 0-based position p as (x·cos − y·sin,
    x·sin + y·cos) in float32, cos and sin of p·ω_i, ω_i = base^(−2i/w), exact (rounded once to float32).

    >>> rope = LtxVaeRope((2, 2, 2), 10000.0)
    >>> x = torch.zeros(1, 1, 1, 2, 1, 6); x[..., 4] = 1.0  # the column axis' pair (1, 0), columns 0 and 1
    >>> rope(x)[0, 0, 0, :, 0, 4:]  # (cos p, sin p)
    tensor([[1.0000, 0.0000],
            [0.5403, 0.8415]])
    """

    def __init__(self, split: tuple[int, int, int], base: float) -> None:
        super().__init__()
        self.split, self.base = tuple(int(w) for w in split), float(base)
        self._checked = [core.Options.check(w, self.base, 0.0, 1.0, "sin_cos", "zero") for w in self.split]

    def cos_sin(self, axis: int, count: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) ``(count, w / 2)`` float32 of axis ``axis`` at the positions 0 .. count − 1."""
        width = self.split[axis]
        values = _encode_tensor(torch.arange(count, device=device), (*self._checked[axis], "float32"))
        return values[:, width // 2 :], values[:, : width // 2]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if hidden_states.dim() != 6 or hidden_states.shape[-1] != sum(self.split):
            want = f"(B, T, H, W, heads, {sum(self.split)})"
            raise ValueError(f"hidden_states: shape {tuple(hidden_states.shape)}; expected {want}")
        parts, start = [], 0
        for axis, width in enumerate(self.split):
            chunk = hidden_states[..., start : start + width]
            pairs = chunk.reshape(*chunk.shape[:-1], width // 2, 2)
            x, y = pairs[..., 0].float(), pairs[..., 1].float()
            cos, sin = self.cos_sin(axis, hidden_states.shape[1 + axis], hidden_states.device)
            shape = [1, 1, 1, 1, 1, width // 2]
            shape[1 + axis] = cos.shape[0]
            cos, sin = cos.reshape(shape), sin.reshape(shape)
            rotated = torch.stack([x * cos - y * sin, x * sin + y * cos], dim=-1)
            parts.append(rotated.reshape(chunk.shape).to(hidden_states.dtype))
            start += width
        return torch.cat(parts, dim=-1)

    def describe(self) -> str:
        """One line: what was read."""
        return f"LTX-2's decoder rotary (chunks {list(self.split)} of the head, base {self.base:g})"

    def extra_repr(self) -> str:
        return f"split={self.split}, base={self.base:g}"


def read_ltx_vae(module: nn.Module) -> LtxVaeRope | None:
    """posenc's equivalent of ``module`` where it has LTX-2's decoder rotary's form (forward
    ``(hidden_states)``, ``rope_dim_split`` of three even widths, ``base`` > 1); else None. Whether it
    computes what they say is :func:`prove_ltx_vae`'s to tell."""
    if isinstance(module, LtxVaeRope):  # posenc's own, patched in
        return module
    split, base = getattr(module, "rope_dim_split", None), getattr(module, "base", None)
    if forward_names(module) != VAE_FORWARD or not isinstance(split, tuple | list) or len(split) != 3:
        return None
    if not all(isinstance(w, int) and not isinstance(w, bool) and w >= 2 and w % 2 == 0 for w in split):
        return None
    if not isinstance(base, int | float) or isinstance(base, bool) or base <= 1:
        return None
    return LtxVaeRope(tuple(split), float(base))


def vae_cos_sin(
    module: nn.Module, exact: LtxVaeRope, axis: int, count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s cos and sin ``(count, w / 2)`` of axis ``axis`` at 0 .. count − 1, read as its rotation
    of the pairs (1, 0) (the others at position 0); and its rotation of (0, 1), which must be (−sin, cos)."""
    shape = [1, 1, 1, 1, 1, sum(exact.split)]
    shape[1 + axis] = count
    start = sum(exact.split[:axis])
    columns = slice(start, start + exact.split[axis])
    read = []
    for first in (1.0, 0.0):
        x = torch.zeros(shape)
        x[..., columns] = torch.tensor([first, 1.0 - first]).repeat(exact.split[axis] // 2)
        with torch.no_grad():
            out = module(x)[..., columns].reshape(count, -1, 2)
        read.append(out)
    (cos, sin), (minus_sin, cos_again) = (
        (read[0][..., 0], read[0][..., 1]),
        (read[1][..., 0], read[1][..., 1]),
    )
    if not (torch.equal(minus_sin, -sin) and torch.equal(cos_again, cos)):
        raise ValueError("its rotation of the pairs is no [[cos, −sin], [sin, cos]]")
    return cos, sin


def prove_ltx_vae(module: nn.Module, exact: LtxVaeRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_ltx_vae`): its
    rotation of unit pairs along each axis of a probe grid (cos and sin within what float32 code errs at
    each position and frequency), and of random values (within the rotation of those errors and float32's
    rounding of it); else why not."""
    worst, largest = 0.0, 0.0
    for axis, count in enumerate(VAE_PROBE):
        mine = probed(lambda: vae_cos_sin(module, exact, axis, count))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):  # its own code refuses the probe, or rotates otherwise
            return mine
        ours = exact.cos_sin(axis, count, "cpu")
        frequencies = core.frequencies(exact.split[axis], base=exact.base)
        positions = np.concatenate([np.arange(count)] * 2).astype(np.float64)
        checked = within_rounding(torch.cat(mine), torch.cat(ours), positions, frequencies, "half")
        if isinstance(checked, float):
            named = f"chunks {list(exact.split)}, base {exact.base:g}"
            return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
        worst, largest = max(worst, checked[0]), max(largest, checked[1])
    x = torch.randn(2, *VAE_PROBE, 2, sum(exact.split), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        mine, ours = module(x), exact(x)
    if mine.shape != ours.shape or mine.dtype != ours.dtype:
        return f"its output has shape {tuple(mine.shape)} {mine.dtype}, not {tuple(ours.shape)} {ours.dtype}"
    bound, apart = float(2 * x.abs().max() * (largest + 2 * proofs.UNIT)), float((mine - ours).abs().max())
    if apart > bound:
        return (
            f"not the rotation its attributes name: its output differs by {apart:.3g} (at most {bound:.3g})"
        )
    return worst, largest
