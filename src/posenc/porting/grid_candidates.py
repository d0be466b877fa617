"""The grid candidates identify compares a table with: the N-D encodings of :mod:`posenc.grids`.

A grid table's rows run over the cells row-major, one block of columns per axis. Each block is constant
while its axis stands still, so where a block first changes gives the sizes of the axes inside it: the
shape is read from the table, not searched for. The scale of the positions (diffusers' base_size and
interpolation_scale) is fitted from the angles of one block and snapped to round numbers; every
candidate is then recomputed and compared in full by identify.

The families: MAE / diffusers ``get_2d_sincos_pos_embed``, diffusers ``get_3d_sincos_pos_embed``
(CogVideoX), timm ``build_sincos2d_pos_embed`` and the positional-encodings package's 2-D/3-D modules.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import grids
from .candidates import CHUNK, Candidate
from .fitting import position_step, simple_fraction, unchanged_rows

__all__ = ["grid_candidates"]

#: diffusers' default base_size (the side the model was trained at), as posenc.grids.diffusers_2d has it.
_DEFAULT_BASE_SIZE = inspect.signature(grids.diffusers_2d).parameters["base_size"].default


def grid_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[Candidate]:
    """The named grids whose structure the table has (``shape``: the table's own leading axes)."""
    d_model = stored.shape[1]
    if d_model % 4 == 0:
        yield from _diffusers_2d_candidates(stored)
        yield from _timm_candidates(stored)
    if d_model % 16 == 0:
        yield from _diffusers_3d_candidates(stored, shape)
    yield from _positional_encodings_candidates(stored, shape)


def _grid(
    stored: np.ndarray,
    name: str,
    options: dict[str, Any],
    make: Callable[[], np.ndarray],
    origin: tuple[int, np.ndarray],
    reach: float,
) -> Candidate:
    """A grid candidate: ``make()`` builds the whole grid in float64, once, and each row's error is kept.

    ``origin`` is (row, values): the family's cell at position 0 and the row of the table that holds it.
    A table whose row differs from it by more than 0.5 somewhere (a 0 where a 1 belongs) is of another
    family, and nothing is built. ``reach``: the grid's largest position along any axis (every family's
    fastest frequency is 1, 10000^0), the largest angle of its table.
    """
    row_errors: list[np.ndarray | None] = []

    def error(rows: int, rough: bool = False) -> float | None:
        del rough  # the grid is built once, exactly
        if not row_errors:
            row, values = origin
            same = row < len(stored) and float(np.max(np.abs(stored[row] - values))) <= 0.5
            row_errors.append(_row_errors(stored, make) if same else None)
        return None if row_errors[0] is None else float(np.max(row_errors[0][:rows]))

    return Candidate(name, options, 0, None, error, reach)


def _row_errors(stored: np.ndarray, make: Callable[[], np.ndarray]) -> np.ndarray | None:
    """Each row's largest difference between the grid ``make()`` builds and the stored table."""
    try:
        values = make()
    except (ValueError, TypeError):
        return None
    if values.size != stored.size:
        return None
    values = values.reshape(stored.shape)
    return np.concatenate(
        [
            np.max(np.abs(values[i : i + CHUNK] - stored[i : i + CHUNK]), axis=1)
            for i in range(0, len(stored), CHUNK)
        ]
    )


def _interpolation_scale(step: float | None) -> float:
    """diffusers' ``interpolation_scale`` from a fitted step ``1 / interpolation_scale`` (1 when unknown)."""
    if step is None:
        return 1.0
    return simple_fraction(1 / step) or 1 / step


def _diffusers_sizes(ratio: float, side: int | None) -> list[tuple[int, float]]:
    """The (base_size, interpolation_scale) pairs with ``base_size / interpolation_scale = ratio``.

    The table fixes only the ratio (the position step is ratio / side), so equal tables get more than one
    name. Tried, plainest first: an integer base_size with scale 1 (DiT, SD3); base_size = the (square)
    grid's side with a simple scale (PatchEmbed's rule: PixArt at 1024 has 64 and 2); when the ratio is
    not an integer, base_size 16 (the default), then the smallest integer base_size with a simple scale;
    else base_size 16 with the fitted scale.
    """
    sizes = []
    whole = abs(ratio - round(ratio)) <= 1e-5 * ratio and round(ratio) >= 1
    if whole:
        sizes.append((round(ratio), 1.0))
    for base_size in (side,) if whole else (side, _DEFAULT_BASE_SIZE):
        if base_size is not None and (scale := simple_fraction(base_size / ratio)) is not None:
            sizes.append((base_size, scale))
    if not sizes:
        for base_size in range(1, 1025):
            if (scale := simple_fraction(base_size / ratio)) is not None:
                sizes.append((base_size, scale))
                break
        else:
            sizes.append((_DEFAULT_BASE_SIZE, _DEFAULT_BASE_SIZE / ratio))
    return list(dict.fromkeys(sizes))


def _diffusers_2d_candidates(stored: np.ndarray) -> Iterator[Candidate]:
    """diffusers ``get_2d_sincos_pos_embed`` (= MAE when base_size is the side): any H×W, fitted scale.

    Rows: ``extra_tokens`` zero rows, then the cells row-major over (h, w); columns [w block | h block].
    W is where the h block first changes; the position steps base_size / (H or W · interpolation_scale)
    are fitted from each block's angles, so base_size / interpolation_scale = step_w · W = step_h · H.
    Square tables without that structure still get the plain MAE/DiT and base_size-16 candidates.
    """
    rows, d_model = stored.shape
    half = d_model // 2
    extra = int(np.argmax(stored.any(axis=1)))  # the leading zero rows (cls / extra tokens)
    origin = grids.diffusers_2d(d_model, 1, dtype="float64")[0]
    yielded = set()

    def candidate(shape: tuple[int, int], base_size: int, scale: float, zeros: int) -> Iterator[Candidate]:
        h, w = shape
        options: dict[str, Any] = {
            "grid_size": h if h == w else (h, w),
            "base_size": base_size,
            "interpolation_scale": scale,
        }
        if zeros:
            options.update(cls_token=True, extra_tokens=zeros)
        key = tuple(options.items())
        if key in yielded:
            return
        yielded.add(key)
        mae = h == w == base_size and scale == 1 and zeros <= 1  # MAE: base_size is the side, one cls row
        yield _grid(
            stored,
            "mae-2d = diffusers-2d" if mae else "diffusers-2d",
            options,
            lambda: grids.diffusers_2d(d_model, dtype="float64", **options),
            (zeros, origin),
            base_size / scale,  # positions arange(n) / (n / base_size) / interpolation_scale
        )

    body = stored[extra:]
    cells = len(body)
    if cells >= 2:
        w = min(unchanged_rows(body, slice(half, None)), cells)
        if cells % w == 0 and 2 <= w < cells:
            h = cells // w
            step_w = position_step(body[:w, :half])
            step_h = position_step(body[::w, half:])
            ratios = [s * n for s, n in ((step_w, w), (step_h, h)) if s is not None]
            if ratios and max(ratios) - min(ratios) <= 1e-4 * max(ratios):
                for base_size, scale in _diffusers_sizes(ratios[0], h if h == w else None):
                    yield from candidate((h, w), base_size, scale, extra)
    for zeros in () if yielded else (0, 1):  # tables without the structure: the nearest square grids
        side = math.isqrt(rows - zeros)
        if side * side == rows - zeros and side >= 2:
            for base_size in dict.fromkeys((side, _DEFAULT_BASE_SIZE)):
                yield from candidate((side, side), base_size, 1.0, zeros)


def _diffusers_3d_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[Candidate]:
    """diffusers ``get_3d_sincos_pos_embed`` (CogVideoX), ``(T, H·W, D)`` or flattened to rows.

    Columns [t (D/4) | w (3D/8) | h (3D/8)], rows over (t, h, w): W is where the h block first changes,
    H·W where the t block does (or the table's own second axis). The interpolation scales are
    1 / the fitted position steps.
    """
    rows, d_model = stored.shape
    t_end, w_end = d_model // 4, d_model // 4 + 3 * d_model // 8
    plane = min(unchanged_rows(stored, slice(t_end)), rows)
    if len(shape) == 2 and shape[0] * shape[1] == rows:
        plane = shape[1]
    w = min(unchanged_rows(stored, slice(w_end, None)), plane)
    if rows % plane or plane % w or plane < 2:
        return
    t, h = rows // plane, plane // w
    spatial = position_step(stored[:w, t_end:w_end]) or position_step(stored[:plane:w, w_end:])
    options = {
        "spatial_size": w if w == h else (w, h),
        "temporal_size": t,
        "spatial_interpolation_scale": _interpolation_scale(spatial),
        "temporal_interpolation_scale": _interpolation_scale(position_step(stored[::plane, :t_end])),
    }
    origin = grids.diffusers_3d(d_model, 1, 1, dtype="float64")[0, 0]
    yield _grid(
        stored,
        "diffusers-3d",
        options,
        lambda: grids.diffusers_3d(d_model, dtype="float64", **options),
        (0, origin),
        max(  # positions arange(n) / interpolation_scale
            t / options["temporal_interpolation_scale"], max(w, h) / options["spatial_interpolation_scale"]
        ),
    )


def _timm_candidates(stored: np.ndarray) -> Iterator[Candidate]:
    """timm ``build_sincos2d_pos_embed``, both column orders: the outer axis' columns set the inner size.

    ``reverse_coord=True`` with feat_shape (a, b) builds the same table as (b, a) without it; identify
    reports the latter.
    """
    rows, d_model = stored.shape
    quarter = d_model // 4
    outer_columns = {
        False: np.r_[0:quarter, 2 * quarter : 3 * quarter],  # [sin h | sin w | cos h | cos w]
        True: np.arange(2 * quarter),  # interleave_sin_cos: [sin h | cos h | sin w | cos w]
    }
    cls = int(rows > 2 and not stored[0].any())  # a class token's zero row first (MoCo v3)
    body = stored[cls:]
    cells = len(body)
    for interleave, columns in outer_columns.items():
        shapes = []
        inner = unchanged_rows(body, columns)
        if cells % inner == 0 and 2 <= inner < cells:
            shapes.append((cells // inner, inner))
        side = math.isqrt(cells)
        if side * side == cells and side >= 2:
            shapes.append((side, side))
        origin = grids.timm_2d((1, 1), d_model, interleave_sin_cos=interleave, dtype="float64")[0]
        for feat_shape in dict.fromkeys(shapes):
            options = {"feat_shape": feat_shape, "interleave_sin_cos": interleave}
            if cls:
                options["cls_token"] = True
            yield _grid(
                stored,
                "timm-2d",
                options,
                lambda o=options: grids.timm_2d(dim=d_model, dtype="float64", **o),
                (cls, origin),
                max(feat_shape),
            )


def _positional_encodings_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[Candidate]:
    """positional-encodings ``PositionalEncoding2D`` / ``3D``, ``(X, Y[, Z], C)`` or flattened to rows.

    Columns: one block of ceil(C / 2k)·2 interleaved columns per axis (k axes), x first, cut to C; rows
    over (x, y[, z]). The sizes come from where each block first changes, or from the table's own shape.
    """
    rows, channels = stored.shape
    for ndim in (2, 3):
        per_axis = math.ceil(channels / (2 * ndim)) * 2
        origin = grids.positional_encodings_nd((1,) * ndim, channels, dtype="float64").reshape(channels)
        shapes = []
        if len(shape) == ndim and math.prod(shape) == rows:
            shapes.append(tuple(shape))
        inner = [rows]  # rows per step of each axis, outermost first
        for axis in range(ndim - 1):
            start = axis * per_axis
            if start >= channels:
                break
            inner.append(
                min(unchanged_rows(stored, slice(start, min(start + per_axis, channels))), inner[-1])
            )
        else:
            found = (*(a // b for a, b in itertools.pairwise(inner)), inner[-1])
            if all(a % b == 0 for a, b in itertools.pairwise(inner)) and min(found) >= 2:
                shapes.append(found)
        for found in dict.fromkeys(shapes):
            options = {"shape": found}
            yield _grid(
                stored,
                f"positional-encodings-{ndim}d",
                options,
                lambda s=found: grids.positional_encodings_nd(s, channels, dtype="float64"),
                (0, origin),
                max(found),
            )
