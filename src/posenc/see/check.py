"""``check``: measure every criterion of :data:`~posenc.see.criteria.CRITERIA` for one setting, in one report.

The encodings of positions 0 .. 2L - 1 are built once (posenc's, or the usual code's with
``compute="dtype"``) and hashed; each criterion is then measured on them in table order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import _validate
from ..core import frequencies
from ..core.options import frequency_options, takes_options
from ..defaults import ODD, SCALE
from ._work import chunks
from .criteria import CRITERIA, Evidence
from .encodings import builder, check_compute
from .hashes import row_hashes
from .report import Report

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

#: ``progress(fraction, what)``: called with a fraction from 0 to 1 and what is being done.
Progress = Callable[[float, str], None]


@takes_options
def check(
    length: int = 2048,
    d_model: int = 512,
    *,
    dtype: npt.DTypeLike = "float32",
    compute: str = "exact",
    progress: Progress | None = None,
    **options: Unpack[OptionKeywords],
) -> Report:
    """Measure the criteria of a good positional encoding for positions 0 .. length - 1 in ``dtype``.

    The criteria are the rows of :data:`~posenc.see.criteria.CRITERIA` (unique, consistent across lengths,
    generalises to longer sequences, bounded, deterministic, plus shift invariance), each with its figure:

    * ``unique``: no two positions share an encoding (bit for bit, ±0 equal). Figure: the smallest distance
      between two positions' encodings (:func:`~posenc.see.margin.uniqueness_margin`; 0 when two coincide).
    * ``consistent``: distances do not depend on the sequence length: table(L) is bit-identical to the
      first L rows of table(2L). Figure: the number of values that differ.
    * ``generalises``: positions L .. 2L - 1, never seen at this length, behave like the checked ones: bounded
      by 1, distinct from each other and from positions 0 .. L - 1, and their dot products follow the closed
      form within the tolerance of ``shift_invariant``. Figure: the dot-product deviation there.
    * ``bounded``: max |PE| ≤ 1. Figure: max |PE| over positions 0 .. L - 1.
    * ``deterministic``: recomputing (again, in two halves, 64 rows by ``encode``) gives the same bits.
      Figure: the number of values that differ.
    * ``shift_invariant``: PE(p) · PE(p + k) = Σ_i cos(k ω_i) for 4096 sampled pairs 0 ≤ p < p + k < L
      (fixed seed; offsets 1..16 always included). Figure: the largest deviation. Tolerance: the proven
      bound n (2u + u²) for values with relative error ≤ u (u = 2⁻²⁴ in float32, 2⁻⁸ in bfloat16), plus
      float64 summation.

    Options mean what they mean in :func:`posenc.table`; the report's options name ``scale`` and ``odd``
    only when they differ from the defaults. An odd d_model under odd="literal"/"drop" ends in a sine
    without its cosine, whose products depend on p: such a table fails ``shift_invariant``.
    ``compute="dtype"`` judges the usual code evaluated in ``dtype`` instead
    (:func:`~posenc.see.encodings.naive_table`). ``progress(fraction, what)`` is called as the work advances.

    >>> report = check(256, 64, dtype="bfloat16")
    >>> report.passed, [c.name for c in report.criteria]
    (True, ['unique', 'consistent', 'generalises', 'bounded', 'deterministic', 'shift_invariant'])
    """
    length = _validate.integer("length", length, minimum=1)
    if 2 * length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"length must be <= 2**30 (the check also encodes positions up to 2 * length); got {length}"
        )
    compute = check_compute(compute)
    dt = _validate.dtype(dtype)
    # validates d_model, base, shift, scale and odd before any work
    frequencies(d_model, **frequency_options(options))
    setting = {**options, "layout": _validate.layout(options["layout"]), "dtype": dt}
    d_model = int(d_model)
    say = progress or (lambda fraction, what: None)
    say(0.0, f"encoding positions 0..{2 * length - 1}")
    build = builder(d_model, start=0, compute=compute, **setting)
    rows = build(0, 2 * length)
    say(0.3, "hashing the encodings, to find positions that share one")
    hashes = np.concatenate([row_hashes(rows[lo:hi]) for lo, hi in chunks(2 * length, d_model)])
    evidence = Evidence(length, d_model, setting, compute, rows, hashes, build)
    criteria = []
    for index, definition in enumerate(CRITERIA):
        say(0.4 + 0.6 * index / len(CRITERIA), definition.title)
        criteria.append(definition.judge(evidence))
    say(1.0, "done")
    return Report(_checked(length, d_model, setting, compute), tuple(criteria))


def _checked(length: int, d_model: int, options: dict[str, Any], compute: str) -> dict[str, Any]:
    """The report's options: the setting checked, dtype by name. ``scale`` and ``odd`` appear only when they
    differ from the defaults, so that a default report reads as it always has."""
    checked: dict[str, Any] = {"d_model": d_model, "length": length, "base": options["base"]}
    checked["shift"] = options["shift"]
    if options["scale"] != SCALE:
        checked["scale"] = options["scale"]
    checked["layout"] = options["layout"]
    if options["odd"] != ODD:
        checked["odd"] = options["odd"]
    checked.update(dtype=options["dtype"].name, compute=compute)
    return checked
