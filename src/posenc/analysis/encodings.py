"""The encodings being judged: posenc's (exact, rounded once) or the usual code's (evaluated in the dtype).

The usual code (the PyTorch tutorial, tensor2tensor, fairseq, diffusers) computes positions, frequencies,
the angle p · ω_i and sin/cos in the model's dtype, rounding at every step; posenc computes each value in high
precision and rounds it once. :func:`naive_table` reproduces the first, :func:`posenc.table` is the second,
and ``compute=`` (one of :data:`COMPUTE`) picks which one a measurement judges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation
from ..core import frequencies, table
from ..core.isolated import isolated
from ..core.options import frequency_options, takes_options
from ..layouts import check_layout, pair_columns
from ._work import ELEMENTS

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import TableOptions

#: How the encodings judged are built: ``"exact"`` = posenc (computed in high precision, rounded once to the
#: dtype); ``"dtype"`` = the usual code, with positions, frequencies, angles and sin/cos each evaluated in the
#: dtype (see :func:`naive_table`).
COMPUTE = ("exact", "dtype")


@takes_options(dtype="float32")
@isolated
def naive_table(length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]) -> np.ndarray:
    """The table as the usual code computes it *in* ``dtype``: shape ``(length, d_model)`` of ``dtype``.

    Positions, frequencies ω_i (``scale`` included), the angle p ω_i and sin/cos are each rounded to ``dtype``
    (as ``torch.arange(n, dtype=...)`` and a model cast with ``.to(dtype)`` do); sin/cos are evaluated in
    float64 on the rounded angle and rounded again. For comparison with :func:`posenc.table`, which rounds
    once: in bfloat16 the positions themselves collide above 256 (bfloat16 holds integers exactly only up to
    256). An odd d_model follows ``odd`` as :func:`posenc.encode` does: a zero last column (``"zero"``), or
    computed one column wider and its last column dropped (``"literal"``, ``"drop"``).

    >>> naive_table(2, 2, start=256, dtype="bfloat16")[:, 0].tolist()  # sin 256 and sin 257 (exact: -0.574)
    [-1.0, -1.0]
    """
    length = validation.integer("length", length, minimum=0)
    start = validation.integer("start", start, minimum=-(validation.MAX_POSITION - 1))
    dt = validation.dtype(options["dtype"])
    layout = check_layout(options["layout"])
    omegas = _rounded(frequencies(d_model, **frequency_options(options)), dt)
    d_model = int(d_model)
    count = len(omegas)
    width = max(d_model, 2 * count)  # one column wider under odd="literal"/"drop": the last one is dropped
    validation.fits_in_memory((length, width), dt)
    result = np.zeros((length, width), dt)
    s, c = pair_columns(layout, count)
    step = max(1, ELEMENTS // max(1, d_model))
    # float16 positions >= 65520 overflow to inf and give NaN: that is the usual code's behaviour, reported
    # by the checks, not a warning to print
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, length, step):
            hi = min(length, lo + step)
            p = _rounded(np.arange(start + lo, start + hi, dtype=np.float64), dt)
            angle = _rounded(p[:, None] * omegas, dt)
            result[lo:hi, s] = np.sin(angle).astype(dt)
            result[lo:hi, c] = np.cos(angle).astype(dt)
    return result if width == d_model else np.ascontiguousarray(result[:, :d_model])


def check_compute(value: Any) -> str:
    """``value`` if it is one of :data:`COMPUTE`, else a ValueError that says what each means."""
    if not isinstance(value, str) or value not in COMPUTE:
        raise ValueError(
            f"compute must be one of {', '.join(map(repr, COMPUTE))}; got {value!r} ('exact': posenc's "
            "values rounded once; 'dtype': the usual code evaluated in the dtype)"
        )
    return value


def builder(d_model: int, *, start: int, compute: str, **options: Any) -> Callable[[int, int], np.ndarray]:
    """``build(lo, hi)``: the encodings of positions start + lo .. start + hi - 1, shape
    ``(hi - lo, d_model)``, from :func:`posenc.table` (``compute="exact"``) or :func:`naive_table`
    (``"dtype"``). ``options`` are those of :func:`posenc.table` (base, shift, scale, layout, odd, dtype);
    all are validated now."""
    make = table if check_compute(compute) == "exact" else naive_table
    make(0, d_model, start=start, **options)  # validates every option now

    def build(lo: int, hi: int) -> np.ndarray:
        return make(hi - lo, d_model, start=start + lo, **options)

    return build


def _rounded(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``values`` rounded to ``dt``, back in float64."""
    return values.astype(dt).astype(np.float64)
