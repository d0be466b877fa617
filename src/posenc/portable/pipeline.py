"""One request, from positions to rows, the steps in order: split the positions (:mod:`.split`), evaluate
and round (:mod:`.rounding`), settle the uncertain values (:mod:`.settle`), lay the columns out as the core
does, and NaN rows for invalid positions."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import layouts
from .backend import Backend
from .host import SETTLE_EXTRA, Request
from .rounding import _values
from .settle import _settle
from .split import split_positions


def encode(ops: Backend, positions: Any, request: Request, offset: Any = None) -> Any:
    """The encodings of ``positions (+ offset)``: shape ``positions.shape + (d_model,)``, dtype ``fmt``.

    Bit-identical to :func:`posenc.encode` for float32/float16/bfloat16 (float64: within 1 ulp);
    rows of NaN for invalid positions.
    """
    xp = ops.xp
    split = split_positions(ops, positions, offset)
    shape = tuple(split.valid.shape)
    flat = [None if a is None else a.reshape(-1) for a in split]
    negative, whole, fraction, fraction_negative, valid = flat
    count = request.count
    host = request.constants
    shared = request.shared
    freq = {
        "reduce": ops.asarray(host.reduce, whole),
        "rate": ops.asarray(host.rate, whole),
        "scaled_rate": ops.asarray(host.scaled_rate, whole),
        "steps": ops.asarray(host.steps, whole),
        "rate_float": ops.asarray(host.rate_float, whole),
        "two_pi": ops.asarray(shared["two_pi"], whole),
        "factorials": ops.asarray(shared["factorials"], whole),
        "table": {
            name: ops.asarray(shared[name], whole)
            for name in ("sin_neg", "sin_digits", "cos_neg", "cos_digits")
        },
        "amplitude": None if request.amplitude is None else ops.asarray(request.amplitude, whole),
    }
    float_dtype = xp.float64 if request.fmt == "float64" else ops.float32
    first = request.limbs + SETTLE_EXTRA if request.fmt == "float64" else request.limbs

    def column(a: Any) -> Any:
        return None if a is None else a[:, None]

    sin, cos, certain = _values(
        ops,
        column(negative),
        column(whole),
        column(fraction),
        column(fraction_negative),
        freq,
        first,
        request.fmt,
        float_dtype,
    )
    zero = whole == 0 if fraction is None else (whole == 0) & (fraction == 0)
    certain = certain | column(zero) | (freq["rate_float"] == 0)  # a zero angle is exact
    total = int(whole.shape[0]) * count
    if request.fmt != "float64" and total:
        sin, cos = _settle(ops, flat, freq, (sin, cos, certain), request, float_dtype)
    out = _layout(ops, sin, cos, request)
    nan = float("nan")
    out = ops.where(column(valid), out, nan)
    out = out.reshape((*shape, request.d_model))
    return ops.cast(out, ops.dtype(request.fmt))


def _layout(ops: Backend, sin: Any, cos: Any, request: Request) -> Any:
    """(rows, count) sines and cosines placed into (rows, d_model) columns, as the core places them.

    The columns come from :func:`posenc.layouts.pair_columns` (the one owner of the layout mapping): the
    output is one gather of [sines | cosines] by an index computed on the host from the shapes alone, so
    the step reads no value and traces under ``jax.jit`` and ``torch.compile``. Columns past the sines
    and cosines (odd="zero") are +0.
    """
    sin = sin[:, : request.sin_columns]
    cos = cos[:, : request.cos_columns]
    sin_at, cos_at = layouts.pair_columns(request.layout, request.count)
    width = request.sin_columns + request.cos_columns
    source = np.empty(width, dtype=np.int64)  # output column j is column source[j] of [sin | cos]
    source[sin_at[: request.sin_columns]] = np.arange(request.sin_columns)
    source[cos_at[: request.cos_columns]] = request.sin_columns + np.arange(request.cos_columns)
    out = ops.concat([sin, cos], 1)
    if not np.array_equal(source, np.arange(width)):  # "sin_cos" is [sin | cos] already: no gather
        out = out[:, ops.asarray(source, out)]
    zeros = [ops.xp.abs(sin[:, :1]) * 0.0] * (request.d_model - width)  # odd="zero": +0 columns
    return ops.concat([out, *zeros], 1) if zeros else out
