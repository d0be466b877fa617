"""N-D encodings (images, video) built from the exact 1-D core: one block of columns per axis.

For a grid of ``shape`` (e.g. ``(H, W)``), the token at index ``(i_0, i_1, ...)`` gets, for each axis ``a``
in ``order``, the 1-D encoding of that axis' position ``positions[a][i_a]`` in a block of ``widths`` columns.
Libraries differ in the block order (MAE encodes the *w* axis first), in the per-axis widths (diffusers 3-D
gives time a quarter), in grouping (timm can put all sines before all cosines) and in how positions are
scaled (diffusers' ``base_size`` / ``interpolation_scale``): each is an explicit option here, and the
functions below reproduce the named libraries.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from . import core, layouts, validation
from .defaults import BASE, ODD, SCALE, SHIFT
from .errors import PosencError, PosencValueError

#: The most cells (tokens) of a grid: as many as the positions of one table (2**31); images and videos in
#: use have at most millions. Checked before any allocation, with the axes at most :data:`MAX_AXES`.
MAX_CELLS = validation.MAX_POSITION
MAX_AXES = 32

__all__ = [
    "detr_2d",
    "detr_grid",
    "detr_positions",
    "diffusers_2d",
    "diffusers_3d",
    "dinov3_coordinates",
    "dinov3_frequencies",
    "dinov3_rope",
    "grid",
    "mae_2d",
    "positional_encodings_nd",
    "timm_2d",
    "timm_rope",
    "timm_rope_coordinates",
]


def grid(
    shape: Sequence[int],
    d_model: int,
    *,
    order: Sequence[int] | None = None,
    widths: Sequence[int] | None = None,
    group: str = "axis",
    positions: Sequence[npt.ArrayLike] | None = None,
    base: float = BASE,
    shift: float = SHIFT,
    scale: float = SCALE,
    layout: str = "sin_cos",
    odd: str = ODD,
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
    ordered = isinstance(shape, list | tuple) or (isinstance(shape, np.ndarray) and shape.ndim == 1)
    if not ordered:  # a set or a dict has no order of axes
        raise TypeError(
            "shape must be a sequence of axis sizes, a list or tuple such as (H, W); got "
            f"{validation.shorten(shape)}"
        )
    validation.at_most("the number of axes of shape", len(shape), MAX_AXES, "an image has 2, a video 3")
    shape = tuple(validation.integer("shape", s, minimum=1) for s in shape)
    if not shape:
        raise ValueError("shape must have at least one axis, e.g. (H, W); got ()")
    d_model = validation.d_model(d_model)
    ndim = len(shape)
    if order is None:
        order = tuple(range(ndim))
    else:
        order = tuple(validation.integer("order", o, minimum=0) for o in _sequence("order", order, "(1, 0)"))
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"order must be a permutation of the axes 0..{ndim - 1}; got {order}")
    if widths is None:
        if d_model % (2 * ndim):
            raise ValueError(
                f"d_model={d_model} does not split into {ndim} even blocks (one per axis of {shape}); "
                f"use a multiple of {2 * ndim} or pass widths="
            )
        widths = (d_model // ndim,) * ndim
    widths = tuple(validation.integer("widths", w, minimum=2) for w in _sequence("widths", widths, "(4, 4)"))
    if len(widths) != ndim or sum(widths) != d_model or any(w % 2 for w in widths):
        raise ValueError(f"widths must be {ndim} even numbers adding up to d_model={d_model}; got {widths}")
    if group not in ("axis", "function"):
        raise ValueError(f"group must be 'axis' or 'function'; got {group!r}")
    layout = layouts.check_layout(layout)  # group="function" puts sines first whatever the layout: checked
    block_layout = "sin_cos" if group == "function" else layout
    for width in set(widths):  # every block's options (base, shift, scale), before any allocation
        core.frequencies(width, base=base, shift=shift, scale=scale, odd=odd)
    out_dtype = np.dtype(np.float32) if dtype is None else validation.dtype(dtype)
    _cells("shape", shape)
    if positions is None and max(shape) > validation.MAX_POSITION:
        raise ValueError(
            f"shape must have axes of at most 2**31 = {validation.MAX_POSITION} cells (the positions "
            f"0 .. size - 1 must be < 2**31); got shape {shape}"
        )
    validation.fits_in_memory((*shape, d_model), out_dtype)
    axis_positions = _axis_positions(shape, positions)
    result = np.empty((*shape, d_model), dtype=out_dtype)
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
    positions = _sequence("positions", positions, "[arange(H), arange(W)]")
    if len(positions) != len(shape):
        raise ValueError(f"positions must hold one array per axis ({len(shape)}); got {len(positions)}")
    result = []
    for axis, (size, p) in enumerate(zip(shape, positions, strict=True)):
        try:
            array = np.asarray(p)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"positions[{axis}] must be a 1-D array of {size} positions; got {p!r}"
            ) from error
        if array.shape != (size,):
            raise ValueError(f"positions[{axis}] must have shape ({size},); got {array.shape}")
        try:
            validation.positions(array)  # kind, finiteness and range: before the output is allocated
        except (TypeError, ValueError) as error:
            raise type(error)(f"positions[{axis}]: {error}") from None
        result.append(array)
    return result


def _cells(name: str, sizes: tuple[int, ...]) -> None:
    """Refuse sizes (from the argument ``name``) of more than :data:`MAX_CELLS` cells in all."""
    cells = math.prod(sizes)
    if cells > MAX_CELLS:
        shown = " × ".join(map(str, sizes))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        count = f"{cells:.3g}" if cells < 10**300 else f"about 10**{len(str(cells)) - 1}"
        raise ValueError(
            f"{name}: a grid of shape {shown} = {count} cells is too large; a grid must have at most 2**31 = "
            f"{MAX_CELLS} cells (images and videos in use have millions)"
        )


def _sequence(name: str, value: Any, example: str) -> Sequence[Any]:
    """``value`` as a tuple (or an array), if it is a list, tuple or 1-D array; else a TypeError naming it."""
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return value
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a list or tuple, e.g. {example}; got {value!r}")
    return tuple(value)


def _size_pair(name: str, value: Any) -> tuple[int, int]:
    """A side (an int: a square) or two sides, each an integer >= 1."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_):
        side = validation.integer(name, value, minimum=1)
        return side, side
    if not isinstance(value, list | tuple):
        raise TypeError(
            f"{name} must be an integer or a pair of integers, e.g. 16 or (16, 24); got {value!r}"
        )
    if len(value) != 2:
        raise ValueError(f"{name} must be an integer or a pair of integers, e.g. (16, 24); got {value!r}")
    first, second = (validation.integer(name, v, minimum=1) for v in value)
    return first, second


def _shape_pair(name: str, value: Any) -> tuple[int, int]:
    """Two axis sizes, each an integer >= 1."""
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a pair of axis sizes, e.g. (14, 14); got {value!r}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a pair of axis sizes (H, W), e.g. (14, 14); got {value!r}")
    first, second = (validation.integer(name, v, minimum=1) for v in value)
    return first, second


def _width(name: str, value: Any, multiple: int) -> int:
    """A model width: an integer, a positive multiple of ``multiple``, at most ``MAX_D_MODEL``."""
    width = validation.integer(name, value, minimum=multiple)
    if width % multiple or width > validation.MAX_D_MODEL:
        raise ValueError(
            f"{name} must be a multiple of {multiple} from {multiple} to 2**20 = {validation.MAX_D_MODEL}; "
            f"got {width}"
        )
    return width


def _positive(name: str, value: Any, usual: str) -> np.float32:
    """A scale the libraries apply in float32: a real number > 0 that stays finite and non-zero there."""
    result = validation.real(name, value, usual=usual)
    with np.errstate(over="ignore"):
        single = np.float32(result)
    if not (result > 0 and 0 < single < np.inf):
        raise ValueError(
            f"{name} must be a positive number (finite and non-zero in float32); got {value!r}; {usual}"
        )
    return single


# --- the libraries' grids ---------------------------------------------------------------------------


def _with_extra_rows(values: np.ndarray, rows: int) -> np.ndarray:
    if not rows:
        return values
    return np.concatenate([np.zeros((rows, values.shape[-1]), values.dtype), values])


@contextlib.contextmanager
def _base_named(name: str) -> Iterator[None]:
    """The core's errors about ``base`` in the caller's word for it (``temperature``)."""
    try:
        yield
    except PosencError as error:
        if error.parameter != "base":
            raise
        raise type(error)(error.worded({"base": name}), parameter=name) from None


def _flag(name: str, value: Any) -> bool:
    """A yes/no option: True or False only (``"no"`` is truthy: it would say yes)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def mae_2d(
    embed_dim: int, grid_size: int, *, cls_token: bool = False, dtype: npt.DTypeLike = "float32"
) -> np.ndarray:
    """MAE's ``get_2d_sincos_pos_embed`` (facebookresearch/mae, util/pos_embed.py): ``(grid², embed_dim)``.

    Tokens run row-major over (h, w); columns 0 .. D/2 encode **w** (MAE's code calls them emb_h: its
    meshgrid puts w first), columns D/2 .. D encode h, each [sin | cos] with ω_i = 10000^(-i/(D/4)).
    ``cls_token`` prepends one zero row. The result has ``dtype`` (float32 by default).

    >>> pe = mae_2d(8, 2, cls_token=True)  # row 0: the class token; then (h, w) = (0, 0), (0, 1), ...
    >>> pe.shape, pe[2]  # h = 0, w = 1: w in columns 0-3
    ((5, 8), array([0.84147096, 0.00999983, 0.5403023 , 0.99995   , 0.        ,
                    0.        , 1.        , 1.        ], dtype=float32))
    """
    embed_dim = _width("embed_dim", embed_dim, 4)
    cls_token = _flag("cls_token", cls_token)
    size = validation.integer("grid_size", grid_size, minimum=1)
    out_dtype = validation.dtype(dtype)
    _cells("grid_size", (size, size))
    validation.fits_in_memory((size * size + (1 if cls_token else 0), embed_dim), out_dtype)
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
    ``extra_tokens`` zero rows are prepended when ``cls_token`` is set (diffusers' rule). The result has
    ``dtype`` (float32 by default).

    >>> pe = diffusers_2d(8, (2, 3), base_size=2)  # w positions: arange(3) / (3 / 2) = 0, 0.667, 1.333
    >>> pe.shape, pe[1].round(4)  # h = 0, w = 0.667
    ((6, 8), array([0.6184, 0.0067, 0.7859, 1.    , 0.    , 0.    , 1.    , 1.    ], dtype=float32))
    """
    embed_dim = _width("embed_dim", embed_dim, 4)
    cls_token = _flag("cls_token", cls_token)
    h, w = _size_pair("grid_size", grid_size)
    extra = validation.integer("extra_tokens", extra_tokens, minimum=0)
    base = validation.real("base_size", base_size, usual="pass the side the model was trained at, e.g. 16")
    if not base > 0:
        raise ValueError(
            f"base_size must be > 0 (the side the model was trained at, e.g. 16); got {base_size!r}"
        )
    scale = _positive("interpolation_scale", interpolation_scale, "pass e.g. 1.0 (no interpolation)")
    out_dtype = validation.dtype(dtype)
    _cells("grid_size", (h, w))
    validation.at_most("extra_tokens", extra, MAX_CELLS, "rows of zeros before the grid's")
    validation.fits_in_memory((h * w + extra, embed_dim), out_dtype)
    names = "grid_size, base_size and interpolation_scale"
    pos_h = _scaled_arange(h, [h / base, scale], names)
    pos_w = _scaled_arange(w, [w / base, scale], names)
    values = grid((h, w), embed_dim, order=(1, 0), positions=(pos_h, pos_w), dtype=dtype).reshape(h * w, -1)
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
    The result has ``dtype`` (float32 by default).

    >>> pe = diffusers_3d(16, (3, 2), 2)  # width 3, height 2, 2 frames
    >>> pe.shape, pe[1, 2, [0, 4, 10]].round(4)  # t = 1, (h, w) = (0, 2): sin t, sin w, sin h
    ((2, 6, 16), array([0.8415, 0.9093, 0.    ], dtype=float32))
    """
    embed_dim = _width("embed_dim", embed_dim, 16)
    w, h = _size_pair("spatial_size", spatial_size)
    t = validation.integer("temporal_size", temporal_size, minimum=1)
    spatial = _positive("spatial_interpolation_scale", spatial_interpolation_scale, "pass e.g. 1.0")
    temporal = _positive("temporal_interpolation_scale", temporal_interpolation_scale, "pass e.g. 1.0")
    out_dtype = validation.dtype(dtype)
    _cells("temporal_size and spatial_size", (t, h, w))
    validation.fits_in_memory((t, h * w, embed_dim), out_dtype)
    positions = (
        _scaled_arange(t, [temporal], "temporal_size and temporal_interpolation_scale"),
        _scaled_arange(h, [spatial], "spatial_size and spatial_interpolation_scale"),
        _scaled_arange(w, [spatial], "spatial_size and spatial_interpolation_scale"),
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
    cls_token: bool = False,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """timm ``build_sincos2d_pos_embed``: ``(H·W, dim)``, both of timm's orders.

    Default: [sin h | sin w | cos h | cos w]; ``interleave_sin_cos``: [sin h | cos h | sin w | cos w];
    ``reverse_coord`` swaps h and w (and the token order with them, as timm does). Each quarter has
    ω_i = temperature^(-i / (dim/4)). ``cls_token``: one zero row before the grid's, ``(1 + H·W, dim)``
    (MoCo v3's ``build_2d_sincos_position_embedding`` of its grid_size (H, W) is
    ``timm_2d((H, W), dim, interleave_sin_cos=True, reverse_coord=True, cls_token=True)``: its rows run over
    w first; a square grid is the same either way).
    The result has ``dtype`` (float32 by default).

    >>> pe = timm_2d((2, 3), 8)
    >>> pe.shape, pe[5].round(4)  # (h, w) = (1, 2): sin h, sin w, cos h, cos w
    ((6, 8), array([ 0.8415,  0.01  ,  0.9093,  0.02  ,  0.5403,  1.    , -0.4161,  0.9998],
                   dtype=float32))
    """
    dim = _width("dim", dim, 4)
    cls_token, reverse_coord = _flag("cls_token", cls_token), _flag("reverse_coord", reverse_coord)
    interleave_sin_cos = _flag("interleave_sin_cos", interleave_sin_cos)
    height, width = _shape_pair("feat_shape", feat_shape)
    shape = (width, height) if reverse_coord else (height, width)
    group = "axis" if interleave_sin_cos else "function"
    with _base_named("temperature"):
        values = grid(shape, dim, base=temperature, group=group, dtype=dtype)
    return _with_extra_rows(values.reshape(math.prod(shape), dim), 1 if cls_token else 0)


class DetrOptions(NamedTuple):
    """The options of DETR's ``PositionEmbeddingSine``, checked (:func:`detr_options`): the constants as
    float32, as DETR's code applies them."""

    features: int
    temperatures: tuple[float, float]  # (height, width)
    normalize: bool
    scale: np.float32
    offset: np.float32
    eps: np.float32


def detr_options(
    num_position_features: int | None = None,
    *,
    temperature: float | tuple[float, float] = 10000.0,
    normalize: bool = False,
    scale: float | None = None,
    offset: float = 0.0,
    eps: float = 1e-6,
) -> DetrOptions:
    """Check the options of :func:`detr_2d` (``num_position_features`` None: the positions only)."""
    features = 0
    if num_position_features is not None:
        features = validation.integer("num_position_features", num_position_features, minimum=2)
        if features % 2 or features > validation.MAX_D_MODEL:
            raise ValueError(
                f"num_position_features must be even, from 2 to 2**20 (DETR: d_model // 2); got {features}"
            )
    if isinstance(temperature, list | tuple):
        if len(temperature) != 2:
            raise ValueError(f"temperature must be a number or a pair (height, width); got {temperature!r}")
        temperatures = (temperature[0], temperature[1])
    else:
        temperatures = (temperature, temperature)
    for value in temperatures:
        with _base_named("temperature"):
            core.frequencies(max(features, 2), base=value)  # the base's checks: a real number > 1
    if not isinstance(normalize, bool | np.bool_):
        raise TypeError(f"normalize must be True or False; got {normalize!r}")
    if scale is not None and not normalize:
        raise ValueError(
            f"scale={scale!r} applies only with normalize=True (DETR's rule); pass normalize=True"
        )
    factor = 2 * math.pi if scale is None else validation.real("scale", scale, usual="DETR's default is 2π")
    shift = validation.real("offset", offset, usual="0 (DETR) or 0.5 (Deformable DETR)")
    if not abs(shift) < 2.0**64:  # applied in float32, as DETR does: larger ones overflow it
        raise ValueError(
            f"offset must lie in (-2**64, 2**64) (0 for DETR, 0.5 for Deformable DETR); got {offset!r}"
        )
    epsilon = validation.real("eps", eps, usual="DETR's is 1e-6")
    for name, value, usual in (("scale", factor, "DETR's default is 2π"), ("eps", epsilon, "DETR's is 1e-6")):
        if not 0 < value < 2.0**64:  # 0 would put every position at 0; a huge one overflows float32
            raise ValueError(f"{name} must be > 0 and < 2**64 ({usual}); got {value!r}")
    return DetrOptions(
        features,
        (float(temperatures[0]), float(temperatures[1])),
        bool(normalize),
        np.float32(factor),
        np.float32(shift),
        np.float32(epsilon),
    )


def detr_positions(
    mask: npt.ArrayLike,
    *,
    normalize: bool = False,
    scale: float | None = None,
    offset: float = 0.0,
    eps: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """The positions DETR's ``PositionEmbeddingSine`` gives each pixel of ``mask`` ``(B, H, W)``: (y, x), each
    ``(B, H, W)`` float32, formed as DETR's code forms them, in float32.

    y is the running count of ``mask`` down the height (x: along the width); with ``normalize``, each is
    ``(count - offset) / (its last count + eps) * scale`` (``scale`` default 2π; Deformable DETR and its
    descendants subtract ``offset`` = 0.5). A mask of ones gives y = 1 .. H in every column.

    >>> y, x = detr_positions(np.ones((1, 2, 3)), normalize=True)
    >>> x[0, 0], y[0, :, 0]  # 2π · (1, 2, 3) / (3 + 1e-6), and 2π · (1, 2) / (2 + 1e-6)
    (array([2.0943944, 4.188789 , 6.2831836], dtype=float32), array([3.1415913, 6.2831826], dtype=float32))
    """
    options = detr_options(normalize=normalize, scale=scale, offset=offset, eps=eps)
    array = _mask(mask)
    validation.fits_in_memory(
        array.shape, np.dtype(np.float32), copies=_DETR_POSITION_COPIES, advice=_SMALLER
    )
    return _detr_positions(_mask_values(array), options)


#: What to do about a DETR mask too large for memory.
_SMALLER = "pass fewer or smaller images per call"

#: The float32 arrays of the mask's shape that forming DETR's positions holds at once (y, x and two between,
#: with ``normalize``; measured).
_DETR_POSITION_COPIES = 4


def _detr_positions(array: np.ndarray, options: DetrOptions) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):  # a tiny eps or a large offset or scale: checked below
        y = np.cumsum(array, axis=1, dtype=np.float32)
        x = np.cumsum(array, axis=2, dtype=np.float32)
        if options.normalize:
            y = (y - options.offset) / (y[:, -1:, :] + options.eps) * options.scale
            x = (x - options.offset) / (x[:, :, -1:] + options.eps) * options.scale
    for name, positions in (("y", y), ("x", x)):
        with np.errstate(invalid="ignore"):  # NaN compares False: refused below
            inside = np.abs(positions) < validation.MAX_POSITION
        if positions.size and not np.all(inside):
            worst = positions[~inside].flat[0]
            if options.normalize:
                raise ValueError(
                    f"with normalize=True the {name} positions (count - offset) / (last count + eps) * scale "
                    f"reach {worst}, not finite or beyond |p| < 2**31, for offset={float(options.offset)!r}, "
                    f"eps={float(options.eps)!r} and scale={float(options.scale)!r}; pass an offset and a "
                    "scale nearer DETR's (0 and 2π), or a larger eps (a row or column of padding alone "
                    "divides by eps)"
                )
            raise ValueError(
                f"mask of shape {array.shape} gives {name} positions up to {worst}, the count of its pixels "
                "along an axis, beyond |p| < 2**31; pass a smaller mask"
            )
    return y, x


def detr_2d(
    mask: npt.ArrayLike,
    num_position_features: int,
    *,
    temperature: float | tuple[float, float] = 10000.0,
    normalize: bool = False,
    scale: float | None = None,
    offset: float = 0.0,
    eps: float = 1e-6,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """DETR's ``PositionEmbeddingSine`` (DETR, Conditional/Deformable/DAB-DETR, Table Transformer,
    Mask(2)Former, OneFormer, Grounding DINO, SAM 2/3): ``(B, H, W, 2·F)`` for ``mask`` ``(B, H, W)``,
    F = ``num_position_features``.

    Columns 0 .. F−1 encode the pixel's y position, F .. 2F−1 its x position (:func:`detr_positions`: as
    DETR forms them, in float32), each as interleaved pairs PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i)
    with ω_i = temperature^(−2i/F) (``temperature``: one, or (height, width) as DAB-DETR has); every value is
    the exact one rounded once to ``dtype`` (float64: within 1 ulp, as the core's). The models' tensors are
    channels first (B, 2F, H, W): ``.transpose(0, 3, 1, 2)`` (:class:`posenc.torch.DetrSinePositionEmbedding`
    gives them so).

    >>> pe = detr_2d(np.ones((1, 2, 3)), 4)  # y = 1, 2 down; x = 1, 2, 3 across
    >>> pe.shape, pe[0, 1, 2].round(4)  # y = 2: sin 2, cos 2, sin .02, cos .02; then x = 3
    ((1, 2, 3, 8), array([ 0.9093, -0.4161,  0.02  ,  0.9998,  0.1411, -0.99  ,  0.03  ,  0.9996],
          dtype=float32))
    """
    options = detr_options(
        num_position_features,
        temperature=temperature,
        normalize=normalize,
        scale=scale,
        offset=offset,
        eps=eps,
    )
    out_dtype = validation.dtype(dtype)
    array = _mask(mask)
    features = options.features
    positions_bytes = _DETR_POSITION_COPIES * 4 * math.prod(array.shape)
    validation.fits_in_memory((*array.shape, 2 * features), out_dtype, extra=positions_bytes, advice=_SMALLER)
    positions = _detr_positions(_mask_values(array), options)
    result = np.empty((*array.shape, 2 * features), dtype=out_dtype)
    for k, (p, base) in enumerate(zip(positions, options.temperatures, strict=True)):
        block = result[..., k * features : (k + 1) * features]
        block[...] = core.encode(p, features, base=base, layout="interleaved", dtype=out_dtype)
    return result


def detr_grid(
    shape: tuple[int, int],
    d_model: int,
    *,
    temperature: float | tuple[float, float] = 10000.0,
    normalize: bool = False,
    scale: float | None = None,
    offset: float = 0.0,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """:func:`detr_2d` of one unpadded image of ``shape`` (H, W), as a table: ``(H·W, d_model)``, row h·W + w
    for the pixel (h, w), d_model = 2F (what an audit of a DETR sine measures, row by row).

    >>> detr_grid((2, 3), 8)[5].round(4)  # (h, w) = (1, 2): y = 2, x = 3
    array([ 0.9093, -0.4161,  0.02  ,  0.9998,  0.1411, -0.99  ,  0.03  ,  0.9996], dtype=float32)
    """
    height, width = _shape_pair("shape", shape)
    d_model = _width("d_model", d_model, 4)
    options = {"temperature": temperature, "normalize": normalize, "scale": scale, "offset": offset}
    values = detr_2d(np.ones((1, height, width), dtype=np.int64), d_model // 2, **options, dtype=dtype)
    return values.reshape(height * width, d_model)


#: How DINOv3 divides a grid's centred coordinates: each axis by its own size, or both by the smaller or
#: the larger.
DINOV3_NORMALIZE = ("separate", "min", "max")


def dinov3_coordinates(
    feat_shape: tuple[int, int], *, normalize_coords: str = "separate", grid_offset: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """DINOv3's coordinates of a grid (H, W), one float64 array per axis: c = 2·(k + ½ + grid_offset)/n − 1
    (the centres of the cells mapped to [−1, 1]; n the axis' own size, or the smaller or larger of the two
    with ``normalize_coords`` "min" or "max"), each operation in float64.

    >>> dinov3_coordinates((2, 4))
    (array([-0.5,  0.5]), array([-0.75, -0.25,  0.25,  0.75]))
    """
    height, width = _shape_pair("feat_shape", feat_shape)
    _cells("feat_shape", (height, width))
    if normalize_coords not in DINOV3_NORMALIZE:
        raise ValueError(f"normalize_coords must be one of {DINOV3_NORMALIZE}; got {normalize_coords!r}")
    offset = validation.real("grid_offset", grid_offset)
    sizes = (height, width)
    denominators = {"separate": sizes, "min": (min(sizes),) * 2, "max": (max(sizes),) * 2}[normalize_coords]
    for size, n in zip(sizes, denominators, strict=True):
        # the same float64 operations as below, at the two ends (each is monotonic in k): both finite, so is
        # every coordinate, whatever NumPy's error state
        if not all(math.isfinite((k + 0.5 + offset) / float(n) * 2.0 - 1.0) for k in (0, size - 1)):
            raise ValueError(
                f"grid_offset={grid_offset!r} gives coordinates 2·(k + ½ + grid_offset)/n − 1 beyond float64 "
                "(they overflow to ±inf); pass a grid_offset of moderate size (DINOv3's is 0)"
            )
    axes = tuple(
        (np.arange(size, dtype=np.float64) + 0.5 + offset) / float(n) * 2.0 - 1.0
        for size, n in zip(sizes, denominators, strict=True)
    )
    return axes[0], axes[1]


def dinov3_frequencies(
    dim: int,
    *,
    temperature: float | None = 100.0,
    min_period: float | None = None,
    max_period: float | None = None,
) -> dict[str, float]:
    """The core options (``base``, ``shift``, ``scale``, for a block of ``dim // 2`` columns) of DINOv3's
    periods: P_i = temperature^(4i/dim), ω_i = 2π / P_i = 2π · temperature^(−i/(dim/4)); or, given
    ``min_period`` and ``max_period``, P_i = min · (max/min)^(i/(n − 1)) with n = dim/4:
    ω_i = (2π/min) · (max/min)^(−i/(n − 1)). 2π, 2π/min and max/min are float64 constants.

    >>> dinov3_frequencies(64)
    {'base': 100.0, 'shift': 0.0, 'scale': 6.283185307179586}
    """
    dim = _width("dim", dim, 4)
    if min_period is None and max_period is None:
        base = validation.real("temperature", temperature, usual="DINOv3: 100")
        if base <= 1:  # periods temperature^(4i/dim) that do not grow: no base the core takes
            raise ValueError(f"temperature must be > 1 (DINOv3: 100); got {temperature!r}")
        options = {"base": float(base), "shift": 0.0, "scale": 2.0 * math.pi}
        return _within_range(dim, options, "temperature", temperature)
    if min_period is None or max_period is None:
        raise ValueError(
            f"min_period and max_period go together (or neither: the temperature's periods); got "
            f"min_period={min_period!r}, max_period={max_period!r}"
        )
    low = validation.real("min_period", min_period)
    high = validation.real("max_period", max_period)
    if not 0 < low < high or dim < 8:
        raise ValueError(
            f"min_period and max_period must satisfy 0 < min_period < max_period, with dim >= 8 (two "
            f"periods or more); got {min_period!r}, {max_period!r}, dim={dim}"
        )
    if not (math.isfinite(high / low) and math.isfinite(2.0 * math.pi / low)):
        raise ValueError(
            f"max_period / min_period and 2π / min_period must be finite; got min_period={min_period!r}, "
            f"max_period={max_period!r}"
        )
    if not 2.0 * math.pi / low <= 2**20:  # the core's angle multiplier: at most 2**20
        raise ValueError(
            f"min_period must be >= 2π / 2**20 = {2.0 * math.pi / 2**20:.6g} (2π / min_period multiplies "
            f"every angle, at most 2**20); got min_period={min_period!r}"
        )
    return _within_range(
        dim, {"base": high / low, "shift": 1.0, "scale": 2.0 * math.pi / low}, "max_period", high
    )


def _within_range(dim: int, options: dict[str, float], name: str, value: Any) -> dict[str, float]:
    """``options`` where the core computes their lowest frequency, else a ValueError in DINOv3's words,
    naming ``name`` = ``value`` (``temperature``, or ``max_period``: 2π / max_period is that frequency)."""
    try:
        core.frequencies(dim // 2, **options)
    except PosencValueError as error:
        raise PosencValueError(
            f"{name}={value!r} with dim={dim} makes the lowest frequency, 2π / (the longest period), smaller "
            f"than 2**-900, the smallest posenc computes; use a smaller {name}",
            parameter=name,
        ) from error
    return options


def dinov3_rope(
    feat_shape: tuple[int, int],
    dim: int,
    *,
    temperature: float | None = 100.0,
    min_period: float | None = None,
    max_period: float | None = None,
    normalize_coords: str = "separate",
    grid_offset: float = 0.0,
    grid_indexing: str = "ij",
    rotate_half: bool = True,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """timm's DINOv3 rotary (``RotaryEmbeddingDinoV3.get_embed``, after facebookresearch/dinov3's
    ``RopePositionEmbedding``): ``(H·W, 2·dim)`` = [sin | cos], rows h·W + w.

    Each cell's angles are its coordinates (:func:`dinov3_coordinates`) times the dim/4 frequencies of
    :func:`dinov3_frequencies`: the first axis' dim/4 angles, then the second's (``grid_indexing`` "ij": h
    then w; "xy": w then h); ``rotate_half`` repeats the dim/2 sines as [s | s] (the halves layout), else
    pair by pair (s_0, s_0, s_1, s_1, ...), and the cosines alike. Each value is the exact one rounded once
    to ``dtype`` (float64: within 1 ulp).

    >>> pe = dinov3_rope((1, 4), 8)  # coordinates (0, -0.75), (0, -0.25), (0, 0.25), (0, 0.75)
    >>> pe.shape, pe[3, :4].round(4)  # sin of 0 · ω_i, then of 0.75 · ω_i (ω_0 = 2π, ω_1 = 2π/10)
    ((4, 16), array([ 0.   ,  0.   , -1.   ,  0.454], dtype=float32))
    """
    rotate_half = _flag("rotate_half", rotate_half)
    height, width = _shape_pair("feat_shape", feat_shape)
    options = dinov3_frequencies(dim, temperature=temperature, min_period=min_period, max_period=max_period)
    _cells("feat_shape", (height, width))
    coordinates = dinov3_coordinates(
        (height, width), normalize_coords=normalize_coords, grid_offset=grid_offset
    )
    _encodable(coordinates, "feat_shape, normalize_coords and grid_offset")
    return _axial_rope(coordinates, dim, options, grid_indexing, rotate_half, dtype)


def _encodable(coordinates: tuple[np.ndarray, np.ndarray], names: str) -> None:
    """Refuse coordinates (finite, from the arguments ``names``) beyond the encodable |p| < 2**31, naming
    those arguments rather than the positions they make."""
    worst = max(float(np.abs(axis).max()) for axis in coordinates)
    if worst >= validation.MAX_POSITION:
        raise ValueError(
            f"{names} give coordinates up to |c| = {worst!r}, beyond the encodable |p| < 2**31; use a "
            "grid_offset of moderate size (0 by default)"
        )


def _axial_rope(
    coordinates: tuple[np.ndarray, np.ndarray],
    dim: int,
    options: dict[str, float],
    grid_indexing: str,
    rotate_half: bool,
    dtype: npt.DTypeLike,
) -> np.ndarray:
    """timm's axial rotary embedding ``(H·W, 2·dim)`` = [sin | cos] of a grid whose axes hold
    ``coordinates`` (h's, w's), at the dim/4 frequencies the core ``options`` give a block of dim/2
    columns: the first axis' angles, then the second's (``grid_indexing`` "ij": h first; "xy": w first),
    each value repeated as the layout repeats it (``rotate_half``: [s | s], else pair by pair)."""
    if grid_indexing not in ("ij", "xy"):
        raise ValueError(f"grid_indexing must be 'ij' or 'xy'; got {grid_indexing!r}")
    out_dtype = validation.dtype(dtype)
    height, width = len(coordinates[0]), len(coordinates[1])
    validation.fits_in_memory((height * width, 2 * dim), out_dtype)
    order = (0, 1) if grid_indexing == "ij" else (1, 0)
    values = grid(
        (height, width),
        dim,
        order=order,
        group="function",
        positions=list(coordinates),
        dtype=out_dtype,
        **options,
    ).reshape(height * width, dim)
    sines, cosines = values[:, : dim // 2], values[:, dim // 2 :]
    if rotate_half:
        return np.concatenate([sines, sines, cosines, cosines], axis=-1)
    return np.concatenate([np.repeat(sines, 2, axis=-1), np.repeat(cosines, 2, axis=-1)], axis=-1)


def timm_rope_coordinates(
    feat_shape: tuple[int, int],
    *,
    grid_offset: float = 0.0,
    ref_feat_shape: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The coordinates of timm's axial rotary on an index grid (``RotaryEmbeddingCat`` with
    ``in_pixels=False``: EVA-02's, Perception Encoder's), one array per axis, as timm's code forms them in
    float32: k + grid_offset, and with a ``ref_feat_shape`` (the grid it was trained at) (k + grid_offset) / n
    · r, n the axis' size and r its reference size, each operation rounded to float32 (returned as float64).

    >>> timm_rope_coordinates((2, 3), ref_feat_shape=(4, 4))
    (array([0., 2.]), array([0.        , 1.33333337, 2.66666675]))
    """
    height, width = _shape_pair("feat_shape", feat_shape)
    _cells("feat_shape", (height, width))
    offset = validation.real("grid_offset", grid_offset)
    if not abs(offset) < 2.0**64:  # computed in float32, as timm does: larger ones overflow it
        raise ValueError(f"grid_offset must lie in (-2**64, 2**64) (timm's default is 0.0); got {offset!r}")
    offset = np.float32(offset)
    references = None if ref_feat_shape is None else _shape_pair("ref_feat_shape", ref_feat_shape)
    axes = []
    for axis, size in enumerate((height, width)):
        values = np.arange(size, dtype=np.float32) + offset
        if references is not None:
            values = values / np.float32(size) * np.float32(references[axis])
        axes.append(values.astype(np.float64))
    return axes[0], axes[1]


def timm_rope(
    feat_shape: tuple[int, int],
    dim: int,
    *,
    temperature: float = 10000.0,
    grid_offset: float = 0.0,
    ref_feat_shape: tuple[int, int] | None = None,
    grid_indexing: str = "ij",
    rotate_half: bool = False,
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """timm's axial rotary on an index grid (``RotaryEmbeddingCat(in_pixels=False).get_embed``: EVA-02's,
    Perception Encoder's): ``(H·W, 2·dim)`` = [sin | cos], rows h·W + w.

    Each cell's angles are its coordinates (:func:`timm_rope_coordinates`) times the dim/4 frequencies
    ω_i = temperature^(−i/(dim/4)): the first axis' dim/4 angles, then the second's (``grid_indexing`` "ij":
    h then w; "xy": w then h); ``rotate_half`` repeats the dim/2 sines as [s | s], else pair by pair
    (s_0, s_0, s_1, s_1, ...), and the cosines alike. Each value is the exact one rounded once to ``dtype``
    (float64: within 1 ulp).

    >>> pe = timm_rope((1, 3), 8)  # coordinates (0, 0), (0, 1), (0, 2); ω_0 = 1, ω_1 = 1/100
    >>> pe.shape, pe[2, :8].round(4)  # sin of 0 · ω_i (pairs), then of 2 · ω_i
    ((3, 16), array([0.    , 0.    , 0.    , 0.    , 0.9093, 0.9093, 0.02  , 0.02  ], dtype=float32))
    """
    dim = _width("dim", dim, 4)
    rotate_half = _flag("rotate_half", rotate_half)
    base = validation.real("temperature", temperature, usual="EVA-02: 10000")
    if base <= 1:  # frequencies temperature^(-i/n) that do not fall: no base the core takes
        raise ValueError(f"temperature must be > 1 (EVA-02: 10000); got {temperature!r}")
    coordinates = timm_rope_coordinates(feat_shape, grid_offset=grid_offset, ref_feat_shape=ref_feat_shape)
    _encodable(coordinates, "feat_shape, grid_offset and ref_feat_shape")
    options = {"base": float(base), "shift": 0.0, "scale": 1.0}
    return _axial_rope(coordinates, dim, options, grid_indexing, rotate_half, dtype)


def _mask(mask: npt.ArrayLike) -> np.ndarray:
    """A DETR pixel mask: a real array of shape (B, H, W) with at most :data:`MAX_CELLS` cells (its values:
    :func:`_mask_values`, once the work is known to fit in memory)."""
    try:
        array = np.asarray(mask)
    except (TypeError, ValueError) as error:
        raise TypeError(f"mask must be an array (B, H, W) of 0s and 1s; got {type(mask).__name__}") from error
    if array.dtype.kind not in "biuf":
        raise TypeError(f"mask must be an array (B, H, W) of 0s and 1s; got dtype {array.dtype}")
    if array.ndim != 3:
        raise ValueError(
            f"mask must have shape (B, H, W), e.g. np.ones((1, 32, 32)); got shape {array.shape}"
        )
    _cells("mask", array.shape)
    return array


def _mask_values(array: np.ndarray) -> np.ndarray:
    """``array``, a mask from :func:`_mask`, if it holds 0s and 1s only: the rule of
    :class:`posenc.torch.DetrSinePositionEmbedding` and of :func:`posenc.positions.from_attention_mask`."""
    if array.dtype.kind == "b":
        return array
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError("mask must be finite: 1 where a pixel is real, 0 where it is padding")
    bad = (array != 0) & (array != 1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise PosencValueError(
            f"mask must hold only 0s and 1s (1 = a real pixel, 0 = padding); got {array[where].item()} at "
            f"index {where}; pass mask != 0 if every non-zero entry is a real pixel",
            parameter="mask",
        )
    return array


def positional_encodings_nd(
    shape: Sequence[int], channels: int, *, dtype: npt.DTypeLike = "float32"
) -> np.ndarray:
    """positional-encodings' PositionalEncoding1D/2D/3D, without the batch axis: ``(*shape, channels)``.

    Each axis gets ceil(channels / (2·ndim))·2 interleaved columns (made even), axes in order, and the
    total is cut to ``channels``. The result has ``dtype`` (float32 by default).

    >>> pe = positional_encodings_nd((2, 3), 6)  # 4 columns per axis, cut to 6
    >>> pe.shape, pe[1, 2].round(4)  # x = 1: sin, cos, sin, cos; y = 2: sin, cos
    ((2, 3, 6), array([ 0.8415,  0.5403,  0.01  ,  1.    ,  0.9093, -0.4161], dtype=float32))
    """
    shape = tuple(_sequence("shape", shape, "(H, W)"))
    ndim = len(shape)
    if ndim not in (1, 2, 3):
        raise ValueError(f"shape must have 1, 2 or 3 axes; got {shape}")
    channels = validation.integer("channels", channels, minimum=1)
    # every axis' columns are computed before the cut: ceil(channels / (2·ndim))·2·ndim <= 2**20 of them
    widest = validation.MAX_D_MODEL // (2 * ndim) * (2 * ndim)  # 2**20 for 1 or 2 axes, 2**20 - 4 for 3
    if channels > widest:
        why = (
            ""
            if widest == validation.MAX_D_MODEL
            else (
                f" for a shape of {ndim} axes (its {ndim} blocks of ceil(channels / {2 * ndim})·2 columns, "
                f"computed before the cut, must total at most 2**20 = {validation.MAX_D_MODEL})"
            )
        )
        raise ValueError(f"channels must be <= {validation.power_text(widest)}{why}; got {channels}")
    per_axis = math.ceil(channels / (2 * ndim)) * 2
    values = grid(shape, per_axis * ndim, layout="interleaved", dtype=dtype)
    return np.ascontiguousarray(values[..., :channels])


def _scaled_arange(size: int, divisors: list[Any], names: str) -> np.ndarray:
    """``arange(size)`` divided by each divisor (rounded to float32) in turn, in float32, as the libraries
    compute positions. The positions must stay finite and below 2**31: else a ValueError naming ``names``,
    the arguments that make them."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        singles = [np.float32(divisor) for divisor in divisors]
        if not all(0 < single < np.inf for single in singles):
            raise ValueError(
                f"{names} give the divisors {', '.join(map(str, singles))} of arange(size) in float32, not "
                "all finite and positive; use values nearer 1"
            )
        positions = np.arange(size, dtype=np.float32)
        for divisor in singles:
            positions = positions / divisor
    last = positions[-1] if size else np.float32(0)
    if not np.isfinite(last) or abs(float(last)) >= validation.MAX_POSITION:
        raise ValueError(
            f"{names} give positions up to {float(last)!r}, beyond the encodable |p| < 2**31; "
            "use a larger scale or a smaller size"
        )
    return positions
