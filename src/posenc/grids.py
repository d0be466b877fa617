"""N-D encodings (images, video) built from the exact 1-D core: one block of columns per axis.

For a grid of ``shape`` (e.g. ``(H, W)``), the token at index ``(i_0, i_1, ...)`` gets, for each axis ``a``
in ``order``, the 1-D encoding of that axis' position ``positions[a][i_a]`` in a block of ``widths`` columns.
Libraries differ in the block order (MAE encodes the *w* axis first), in the per-axis widths (diffusers 3-D
gives time a quarter), in grouping (timm can put all sines before all cosines) and in how positions are
scaled (diffusers' ``base_size`` / ``interpolation_scale``): each is an explicit option here, and the
functions below reproduce the named libraries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _validate, core

__all__ = [
    "diffusers_2d",
    "diffusers_3d",
    "grid",
    "mae_2d",
    "positional_encodings_nd",
    "timm_2d",
]


def grid(
    shape: Sequence[int],
    d_model: int,
    *,
    order: Sequence[int] | None = None,
    widths: Sequence[int] | None = None,
    group: str = "axis",
    positions: Sequence[npt.ArrayLike] | None = None,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "sin_cos",
    odd: str = "zero",
    dtype: npt.DTypeLike | None = None,
) -> np.ndarray:
    """The encoding of every cell of a grid: shape ``(*shape, d_model)``.

    Args:
        shape: the grid size per axis, e.g. ``(H, W)`` or ``(T, H, W)``.
        order: the axes in block order (default ``0, 1, ...``; MAE and diffusers use ``(1, 0)``: w first).
        widths: the columns of each block, in block order (default: d_model split evenly; each even).
        group: ``"axis"``: each block is the axis' full 1-D encoding in ``layout``; ``"function"``: all
            the sine halves (block order), then all the cosine halves (timm without ``interleave_sin_cos``).
        positions: one 1-D array of positions per axis (default ``arange(shape[a])``), for scaled grids.
        base, shift, scale, layout, odd, dtype: as in :func:`posenc.encode`, for every block (so a preset's
            ``options`` apply; blocks are even, so ``odd`` never matters).

    >>> grid((2, 3), 8, order=(1, 0))[1, 2]  # w = 2 in columns 0-3, h = 1 in columns 4-7
    array([ 0.9092974 ,  0.01999867, -0.41614684,  0.9998    ,  0.84147096,
            0.00999983,  0.5403023 ,  0.99995   ], dtype=float32)
    """
    if isinstance(shape, int | np.integer) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape must be a sequence of axis sizes, e.g. (H, W); got {shape!r}")
    shape = tuple(_validate.integer("shape", s, minimum=1) for s in shape)
    if not shape:
        raise ValueError("shape must have at least one axis, e.g. (H, W); got ()")
    d_model = _validate.d_model(d_model)
    ndim = len(shape)
    order = tuple(range(ndim)) if order is None else tuple(order)
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"order must be a permutation of the axes 0..{ndim - 1}; got {order}")
    if widths is None:
        if d_model % (2 * ndim):
            raise ValueError(
                f"d_model={d_model} does not split into {ndim} even blocks (one per axis of {shape}); "
                f"use a multiple of {2 * ndim} or pass widths="
            )
        widths = (d_model // ndim,) * ndim
    widths = tuple(_validate.integer("widths", w, minimum=2) for w in widths)
    if len(widths) != ndim or sum(widths) != d_model or any(w % 2 for w in widths):
        raise ValueError(f"widths must be {ndim} even numbers adding up to d_model={d_model}; got {widths}")
    if group not in ("axis", "function"):
        raise ValueError(f"group must be 'axis' or 'function'; got {group!r}")
    axis_positions = _axis_positions(shape, positions)
    out_dtype = np.dtype(np.float32) if dtype is None else _validate.dtype(dtype)
    _validate.fits_in_memory((*shape, d_model), out_dtype)
    result = np.empty((*shape, d_model), dtype=out_dtype)
    block_layout = "sin_cos" if group == "function" else layout
    starts = np.cumsum((0, *widths))
    halves = np.cumsum((0, *(w // 2 for w in widths)))
    for k, axis in enumerate(order):
        values = core.encode(
            axis_positions[axis],
            widths[k],
            base=base,
            shift=shift,
            scale=scale,
            layout=block_layout,
            dtype=out_dtype,
        )
        view = [np.newaxis] * ndim
        view[axis] = slice(None)
        values = values[(*view, slice(None))]
        if group == "axis":
            result[..., starts[k] : starts[k + 1]] = values
        else:
            half = widths[k] // 2
            result[..., halves[k] : halves[k + 1]] = values[..., :half]
            result[..., d_model // 2 + halves[k] : d_model // 2 + halves[k + 1]] = values[..., half:]
    return result


def _axis_positions(shape: tuple[int, ...], positions: Sequence[npt.ArrayLike] | None) -> list[np.ndarray]:
    if positions is None:
        return [np.arange(s) for s in shape]
    if len(positions) != len(shape):
        raise ValueError(f"positions must hold one array per axis ({len(shape)}); got {len(positions)}")
    result = []
    for axis, (size, p) in enumerate(zip(shape, positions, strict=True)):
        array = np.asarray(p)
        if array.shape != (size,):
            raise ValueError(f"positions[{axis}] must have shape ({size},); got {array.shape}")
        result.append(array)
    return result


# --- the libraries' grids ---------------------------------------------------------------------------


def _with_extra_rows(values: np.ndarray, rows: int) -> np.ndarray:
    if not rows:
        return values
    return np.concatenate([np.zeros((rows, values.shape[-1]), values.dtype), values])


def mae_2d(
    embed_dim: int, grid_size: int, *, cls_token: bool = False, dtype: npt.DTypeLike = "float32"
) -> np.ndarray:
    """MAE's ``get_2d_sincos_pos_embed`` (facebookresearch/mae, util/pos_embed.py): ``(grid², embed_dim)``.

    Tokens run row-major over (h, w); columns 0 .. D/2 encode **w** (MAE's code calls them emb_h: its
    meshgrid puts w first), columns D/2 .. D encode h, each [sin | cos] with ω_i = 10000^(-i/(D/4)).
    ``cls_token`` prepends one zero row.
    """
    size = _validate.integer("grid_size", grid_size, minimum=1)
    values = grid((size, size), embed_dim, order=(1, 0), dtype=dtype).reshape(size * size, -1)
    return _with_extra_rows(values, 1 if cls_token else 0)


def diffusers_2d(
    embed_dim: int,
    grid_size: int | tuple[int, int],
    *,
    cls_token: bool = False,
    extra_tokens: int = 0,
    interpolation_scale: float = 1.0,
    base_size: int = 16,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """diffusers ``get_2d_sincos_pos_embed`` (DiT, PixArt, SD3 patch embeddings): ``(H·W, embed_dim)``.

    Positions are computed as diffusers does, in float32: ``arange(H) / (H / base_size) /
    interpolation_scale`` (likewise w), then encoded exactly; w in the first half, h in the second.
    ``extra_tokens`` zero rows are prepended when ``cls_token`` is set (diffusers' rule).
    """
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else grid_size
    pos_h = _scaled_arange(h, [np.float32(h / base_size), np.float32(interpolation_scale)])
    pos_w = _scaled_arange(w, [np.float32(w / base_size), np.float32(interpolation_scale)])
    values = grid((h, w), embed_dim, order=(1, 0), positions=(pos_h, pos_w), dtype=dtype).reshape(h * w, -1)
    extra = _validate.integer("extra_tokens", extra_tokens, minimum=0)
    return _with_extra_rows(values, extra if cls_token else 0)


def diffusers_3d(
    embed_dim: int,
    spatial_size: int | tuple[int, int],
    temporal_size: int,
    *,
    spatial_interpolation_scale: float = 1.0,
    temporal_interpolation_scale: float = 1.0,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """diffusers ``get_3d_sincos_pos_embed`` (CogVideoX): ``(T, H·W, embed_dim)``.

    ``spatial_size`` is (width, height) as diffusers reads it. Columns: time (embed_dim / 4), then w and h
    (3·embed_dim / 8 each), each [sin | cos]; positions ``arange(n) / interpolation_scale`` in float32.
    """
    if embed_dim % 16:
        raise ValueError(f"embed_dim must be a multiple of 16 for a 3-D grid; got {embed_dim}")
    w, h = (spatial_size, spatial_size) if isinstance(spatial_size, int) else spatial_size
    t = _validate.integer("temporal_size", temporal_size, minimum=1)
    positions = (
        _scaled_arange(t, [np.float32(temporal_interpolation_scale)]),
        _scaled_arange(h, [np.float32(spatial_interpolation_scale)]),
        _scaled_arange(w, [np.float32(spatial_interpolation_scale)]),
    )
    widths = (embed_dim // 4, 3 * embed_dim // 8, 3 * embed_dim // 8)
    values = grid((t, h, w), embed_dim, order=(0, 2, 1), widths=widths, positions=positions, dtype=dtype)
    return values.reshape(t, h * w, embed_dim)


def timm_2d(
    feat_shape: tuple[int, int],
    dim: int,
    *,
    temperature: float = 10000.0,
    reverse_coord: bool = False,
    interleave_sin_cos: bool = False,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """timm ``build_sincos2d_pos_embed``: ``(H·W, dim)``, both of timm's orders.

    Default: [sin h | sin w | cos h | cos w]; ``interleave_sin_cos``: [sin h | cos h | sin w | cos w];
    ``reverse_coord`` swaps h and w (and the token order with them, as timm does). Each quarter has
    ω_i = temperature^(-i / (dim/4)).
    """
    if dim % 4:
        raise ValueError(f"dim must be a multiple of 4 for timm's 2-D embedding; got {dim}")
    shape = tuple(feat_shape)[::-1] if reverse_coord else tuple(feat_shape)
    group = "axis" if interleave_sin_cos else "function"
    values = grid(shape, dim, base=temperature, group=group, dtype=dtype)
    return values.reshape(math.prod(shape), dim)


def positional_encodings_nd(
    shape: Sequence[int], channels: int, *, dtype: npt.DTypeLike = "float32"
) -> np.ndarray:
    """positional-encodings' PositionalEncoding1D/2D/3D, without the batch axis: ``(*shape, channels)``.

    Each axis gets ceil(channels / (2·ndim))·2 interleaved columns (made even), axes in order, and the
    total is cut to ``channels``.
    """
    shape = tuple(shape)
    ndim = len(shape)
    if ndim not in (1, 2, 3):
        raise ValueError(f"shape must have 1, 2 or 3 axes; got {shape}")
    channels = _validate.integer("channels", channels, minimum=1)
    per_axis = math.ceil(channels / (2 * ndim)) * 2
    values = grid(shape, per_axis * ndim, layout="interleaved", dtype=dtype)
    return np.ascontiguousarray(values[..., :channels])


def _scaled_arange(size: int, divisors: list[Any]) -> np.ndarray:
    """``arange(size)`` divided by each divisor in turn, in float32, as the libraries compute positions."""
    positions = np.arange(size, dtype=np.float32)
    for divisor in divisors:
        positions = positions / divisor
    return positions
