"""What a sinusoidal encoding guarantees, measured: dot products, shifts, uniqueness and the criteria report.

NumPy only. Every encoding comes from :func:`posenc.table` / :func:`posenc.encode` (exact, then rounded
once); analysis is done in float64 unless a dtype is being studied. With n = d_model // 2 pairs and
ω_i = base ** (-i / (n - shift)):

* **Dot products** depend only on the offset k (the Toeplitz structure of the second source document):

      PE(p) · PE(p + k) = Σ_i cos(k ω_i)                         (:func:`closed_form_dot_product`)
      |PE(p) - PE(p + k)| = (Σ_i 4 sin²(k ω_i / 2)) ** 0.5       (:func:`closed_form_distance`)

* **Relative shifts are linear**: PE(p + k) = M_k · PE(p), where M_k rotates each (sin, cos) pair by k ω_i
  (:func:`shift_matrix`, :func:`shift_error`).
* **Uniqueness** in a dtype: the smallest distance between the encodings of two distinct positions
  (:func:`uniqueness_margin`, exact over all pairs) and the first position whose rounded encoding repeats an
  earlier one (:func:`collisions`, :func:`collision_horizon`).
* **The criteria** of the third source document — unique, consistent across lengths, generalises to longer
  sequences, bounded, deterministic — plus shift invariance, each measured with pass/fail (:func:`check`).

Odd widths follow posenc's default rule (``odd="zero"``: n pairs, then a zero column). Options are
keyword-only; ``base``, ``shift`` and ``layout`` mean what they mean in :func:`posenc.encode`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _validate
from .core import encode, frequencies, table

__all__ = [
    "Collisions",
    "Criterion",
    "Margin",
    "Report",
    "check",
    "closed_form_distance",
    "closed_form_dot_product",
    "collision_horizon",
    "collisions",
    "cosine_similarity",
    "dot_products",
    "length_consistent",
    "max_magnitude",
    "naive_table",
    "recomputes_identically",
    "shift_error",
    "shift_matrix",
    "toeplitz_deviation",
    "uniqueness_margin",
    "wavelengths",
    "wrap_length",
]

#: How posenc.check builds the encodings it judges: ``"exact"`` = posenc (computed in high precision, rounded
#: once to the dtype); ``"dtype"`` = the usual code, with positions, frequencies, angles and sin/cos each
#: evaluated in the dtype (see :func:`naive_table`).
COMPUTE = ("exact", "dtype")

Progress = Callable[[float, str], None]

# Relative error bound of one value of each dtype (float64 outputs are within 1 ulp, the others correctly
# rounded), and half the smallest subnormal: the absolute bound for values that underflow.
_RELATIVE = {"float64": 2.0**-52, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
_UNDERFLOW = {"float64": 2.0**-1075, "float32": 2.0**-150, "float16": 2.0**-25, "bfloat16": 2.0**-134}
_ELEMENTS = 1 << 22  # values per working chunk: chunks stay at tens of MB whatever the table size


# --- dot products and the Toeplitz structure -----------------------------------------------------------


def dot_products(encodings: npt.ArrayLike) -> np.ndarray:
    """The matrix of dot products D[i, j] = PE_i · PE_j of the rows of ``encodings``, in float64.

    ``encodings`` has shape ``(L, d_model)`` (any real dtype); the result has shape ``(L, L)``. For an exact
    table, D[i, j] = Σ_k cos((i - j) ω_k): constant along each diagonal (a Toeplitz matrix).

    >>> import posenc
    >>> d = dot_products(posenc.table(82, 512, dtype="float64"))
    >>> print(f"{d[1, 2]:.4f} {d[80, 81]:.4f} {d[1, 80]:.4f} {d[2, 81]:.4f}")
    249.1021 249.1021 117.5290 117.5290
    """
    rows = _matrix("encodings", encodings, result=True)
    return rows @ rows.T


def cosine_similarity(encodings: npt.ArrayLike) -> np.ndarray:
    """The cosine similarities S[i, j] = PE_i · PE_j / (|PE_i| |PE_j|) of the rows, shape ``(L, L)``.

    Every exact encoding has norm √n (each pair contributes sin² + cos² = 1), so S = D / n there.

    >>> import posenc
    >>> s = cosine_similarity(posenc.table(3, 4, dtype="float64"))
    >>> print(f"{s[0, 0]:.4f} {s[0, 1]:.4f}")  # (cos 1 + cos 0.01) / 2
    1.0000 0.7701
    """
    rows = _matrix("encodings", encodings, result=True)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    if np.any(norms == 0):  # a NaN row is not refused: its similarities are NaN
        raise ValueError(
            f"encodings row {int(np.argmax(norms == 0))} is all zeros: its cosine similarity is undefined; "
            "drop that row"
        )
    return (rows @ rows.T) / np.outer(norms, norms)


def toeplitz_deviation(matrix: npt.ArrayLike) -> float:
    """The largest spread (max - min) along any diagonal of a square matrix: 0 for a Toeplitz matrix.

    NaN when the matrix holds a NaN (NaN in, NaN out: never a clean figure); an inf on a diagonal with other
    values gives inf or NaN likewise.

    >>> toeplitz_deviation([[1.0, 2.0], [3.0, 1.0]])
    0.0
    >>> toeplitz_deviation([[1.0, 2.0], [3.0, 1.5]])
    0.5
    """
    m = _matrix("matrix", matrix)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must be square; got shape {m.shape}")
    size = m.shape[0]
    worst = 0.0
    for k in range(-(size - 1), size):
        diagonal = np.diagonal(m, k)
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, reported as such
            spread = float(diagonal.max() - diagonal.min())
        if spread != spread:  # NaN: Python's max() would drop it
            return math.nan
        worst = max(worst, spread)
    return worst


def closed_form_dot_product(
    offsets: npt.ArrayLike, d_model: int, *, base: float = 10000.0, shift: float = 0
) -> np.ndarray:
    """Σ_i cos(k ω_i) for each offset k: the dot product PE(p) · PE(p + k) of exact encodings, any p.

    Shape of ``offsets``; float64. Each cos(k ω_i) is posenc's exact value (within 1 ulp), at any offset.

    >>> print(f"{closed_form_dot_product(1, 512):.5f} {closed_form_dot_product(79, 512):.5f}")
    249.10210 117.52900
    """
    n = _validate.d_model(d_model) // 2
    pe = encode(offsets, d_model, base=base, shift=shift, layout="sin_cos", dtype="float64")
    return pe[..., n : 2 * n].sum(axis=-1)


def closed_form_distance(
    offsets: npt.ArrayLike, d_model: int, *, base: float = 10000.0, shift: float = 0
) -> np.ndarray:
    """|PE(p) - PE(p + k)| = (Σ_i 4 sin²(k ω_i / 2)) ** 0.5 for each offset k, any p; float64.

    Computed from sin(k ω_i / 2), so it stays accurate for tiny offsets (no 1 - cos cancellation).

    >>> print(f"{closed_form_distance(1, 512):.4f}")  # the smallest distance between two positions
    3.7143
    """
    n = _validate.d_model(d_model) // 2
    half = np.asarray(offsets)
    if half.dtype.kind in "iuf":
        half = half.astype(np.float64) / 2
    pe = encode(half, d_model, base=base, shift=shift, layout="sin_cos", dtype="float64")
    return 2.0 * np.sqrt(np.square(pe[..., :n]).sum(axis=-1))


# --- relative shifts -----------------------------------------------------------------------------------


def shift_matrix(
    k: float, d_model: int, *, base: float = 10000.0, shift: float = 0, layout: str = "interleaved"
) -> np.ndarray:
    """The linear map M_k with PE(p + k) = M_k · PE(p) for every p: shape ``(d_model, d_model)``, float64.

    Each (sin, cos) pair is rotated by the angle k ω_i:

        [sin (p+k)ω]   [ cos kω   sin kω ] [sin pω]
        [cos (p+k)ω] = [-sin kω   cos kω ] [cos pω]

    placed at the pair's columns for ``layout``; an odd width's zero column maps to itself. M_k is
    orthogonal, M_a M_b = M_(a+b), and it does not depend on p: a relative shift is one fixed matrix.

    >>> import posenc
    >>> m = shift_matrix(3, 4)
    >>> pe = posenc.table(10, 4, dtype="float64")
    >>> bool(abs(m @ pe[2] - pe[5]).max() < 1e-15)
    True
    """
    k = _validate.real("k", k, usual="pass one offset, e.g. 1")
    if not abs(k) < _validate.MAX_POSITION:
        raise ValueError(f"k must satisfy |k| < 2**31 = {_validate.MAX_POSITION}; got {k!r}")
    d_model = _validate.d_model(d_model)
    layout = _validate.layout(layout)
    _validate.fits_in_memory((d_model, d_model), np.dtype(np.float64))
    rotation = encode(k, d_model, base=base, shift=shift, layout="sin_cos", dtype="float64")
    n = d_model // 2
    sin, cos = rotation[:n], rotation[n : 2 * n]
    s, c = _pair_columns(d_model, layout)
    m = np.zeros((d_model, d_model))
    m[s, s] = cos
    m[s, c] = sin
    m[c, s] = -sin
    m[c, c] = cos
    if d_model % 2:
        m[-1, -1] = 1.0
    return m


def shift_error(
    k: int,
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
) -> float:
    """max over p in start .. start + length - 1 of |M_k · PE(p) - PE(p + k)| (float64 tables).

    Rounding only: about 1e-16 (each output value is a two-term sum of products of values within 1 ulp).

    >>> shift_error(5, 64, 512) < 1e-15
    True
    """
    k = _validate.integer("k", k, minimum=-(_validate.MAX_POSITION - 1))
    options = {"base": base, "shift": shift, "layout": layout, "dtype": "float64"}
    m = shift_matrix(k, d_model, base=base, shift=shift, layout=layout)
    here = table(length, d_model, start=start, **options)
    there = table(length, d_model, start=start + k, **options)
    return float(np.abs(here @ m.T - there).max(initial=0.0))


# --- wavelengths ---------------------------------------------------------------------------------------


def wavelengths(d_model: int, *, base: float = 10000.0, shift: float = 0) -> np.ndarray:
    """The wavelength 2π / ω_i of each pair, in positions: shape ``(d_model // 2,)``, float64.

    >>> wavelengths(4, base=100.0)  # ω = 1 and 0.1
    array([ 6.28318531, 62.83185307])
    """
    return 2.0 * math.pi / frequencies(d_model, base=base, shift=shift)


def wrap_length(d_model: int, *, base: float = 10000.0, shift: float = 0) -> float:
    """How many positions the slowest pair takes to turn once, 2π / ω_(n-1): past it, every pair has wrapped.

    Positions stay distinct beyond it (the pairs' periods are incommensurate), but no single pair orders them.

    >>> round(wrap_length(512))  # 2π · 10000**(255/256)
    60611
    """
    return float(wavelengths(d_model, base=base, shift=shift)[-1])


# --- encodings in a dtype ------------------------------------------------------------------------------


def naive_table(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
) -> np.ndarray:
    """The table as the usual code computes it *in* ``dtype``: shape ``(length, d_model)`` of ``dtype``.

    Positions, frequencies, the angle p ω_i and sin/cos are each rounded to ``dtype`` (as
    ``torch.arange(n, dtype=...)`` and a model cast with ``.to(dtype)`` do); sin/cos are evaluated in float64
    on the rounded angle and rounded again. For comparison with :func:`posenc.table`, which rounds once: in
    bfloat16 the positions themselves collide above 256 (bfloat16 holds integers exactly only up to 256).

    >>> naive_table(2, 2, start=256, dtype="bfloat16")[:, 0].tolist()  # sin 256 and sin 257 (exact: -0.574)
    [-1.0, -1.0]
    """
    length = _validate.integer("length", length, minimum=0)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    dt = _validate.dtype(dtype)
    layout = _validate.layout(layout)
    omegas = _rounded(frequencies(d_model, base=base, shift=shift), dt)
    d_model = int(d_model)
    _validate.fits_in_memory((length, d_model), dt)
    result = np.zeros((length, d_model), dt)
    s, c = _pair_columns(d_model, layout)
    step = max(1, _ELEMENTS // max(1, d_model))
    # float16 positions >= 65520 overflow to inf and give NaN: that is the usual code's behaviour, reported
    # by the checks, not a warning to print
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, length, step):
            hi = min(length, lo + step)
            p = _rounded(np.arange(start + lo, start + hi, dtype=np.float64), dt)
            angle = _rounded(p[:, None] * omegas, dt)
            result[lo:hi, s] = np.sin(angle).astype(dt)
            result[lo:hi, c] = np.cos(angle).astype(dt)
    return result


def max_magnitude(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
) -> float:
    """max |PE(p, j)| over positions start .. start + length - 1 in ``dtype``: ≤ 1, the encoding is bounded.

    >>> max_magnitude(1000, 64, dtype="bfloat16")
    1.0
    """
    options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
    length, start = _span("length", length, start, d_model, options)
    worst = 0.0
    for lo, hi in _chunks(length, d_model):
        rows = table(hi - lo, d_model, start=start + lo, **options)
        worst = max(worst, float(np.abs(rows.astype(np.float64)).max(initial=0.0)))
    return worst


def length_consistent(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
) -> bool:
    """Whether ``table(length)`` equals the first ``length`` rows of ``table(2 * length)``, bit for bit.

    Then the encoding of a position, and every distance between two positions, is the same whatever the
    sequence length.

    >>> length_consistent(100, 64, dtype="bfloat16")
    True
    """
    options = {"start": start, "base": base, "shift": shift, "layout": layout, "dtype": dtype}
    return _same_bits(table(length, d_model, **options), table(2 * length, d_model, **options)[:length])


def recomputes_identically(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
) -> bool:
    """Whether recomputing gives the same bits: the table again, in two halves, and 64 rows by ``encode``.

    >>> recomputes_identically(100, 64)
    True
    """
    options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
    first = table(length, d_model, start=start, **options)
    return _differing_values(first, start, d_model, options) == 0


# --- uniqueness ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collisions:
    """Which positions share an encoding: the result of :func:`collisions`.

    ``first`` is the first position whose encoding equals that of an ``earlier`` position (both ``None``
    when all encodings differ); ``distinct`` counts the different encodings among ``length`` positions.
    """

    first: int | None
    earlier: int | None
    distinct: int
    length: int
    start: int = 0

    @property
    def unique(self) -> bool:
        """True when no two positions share an encoding."""
        return self.first is None


@dataclass(frozen=True)
class Margin:
    """The smallest distance between the encodings of two distinct positions: :func:`uniqueness_margin`.

    ``distance`` is min |PE(a) - PE(b)| over a ≠ b in the range (``inf`` for fewer than two positions),
    attained at positions ``a`` < ``b``. ``complete`` is False when the search stopped at its cap on offsets
    (then ``distance`` is an upper bound).
    """

    distance: float
    a: int | None
    b: int | None
    complete: bool = True


def collisions(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
    compute: str = "exact",
) -> Collisions:
    """Which of positions start .. start + length - 1 share their encoding in ``dtype`` with another.

    The rows are hashed chunk by chunk (128-bit hashes of their bits, +0 and -0 counted as equal) and the
    hashes sorted, so memory and time grow like ``length`` (never ``length²``). The first repeat reported is
    verified by recomputing both rows. ``compute="exact"`` judges posenc's encodings; ``"dtype"`` judges the
    usual code evaluated in ``dtype`` (:func:`naive_table`).

    >>> collisions(1000, 512, dtype="bfloat16").unique  # posenc: every position keeps its own encoding
    True
    >>> c = collisions(1000, 512, dtype="bfloat16", compute="dtype")  # angles computed in bfloat16
    >>> c.first, c.earlier
    (257, 256)
    """
    options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
    compute = _compute(compute)
    length, start = _span("length", length, start, d_model, options, rows_bytes=_HASH_BYTES)
    build = _builder(d_model, start=start, **options, compute=compute)
    hashes = np.zeros((length, 2), np.uint64)
    for lo, hi in _chunks(length, d_model):
        hashes[lo:hi] = _row_hashes(build(lo, hi))
    return _collisions_from_hashes(hashes, build, start, limit=length)


def collision_horizon(
    d_model: int,
    *,
    limit: int = 1 << 20,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "bfloat16",
    compute: str = "exact",
) -> int | None:
    """The first position p ≥ 0 whose encoding in ``dtype`` equals that of an earlier position, searching
    positions 0 .. limit - 1; ``None`` when there is none there.

    >>> collision_horizon(512, dtype="bfloat16", compute="dtype", limit=4096)  # 257 rounds to 256
    257
    >>> collision_horizon(2, dtype="bfloat16", limit=4096)  # one pair: 711 - 1 = 710 ≈ 113 turns of 2π
    711
    """
    options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
    limit, _ = _span("limit", limit, 0, d_model, options, rows_bytes=_HASH_BYTES)
    found = collisions(
        limit, d_model, base=base, shift=shift, layout=layout, dtype=dtype, compute=compute
    ).first
    return found


def uniqueness_margin(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float64",
) -> Margin:
    """The smallest distance |PE(a) - PE(b)| over all distinct positions a, b in the range, in ``dtype``.

    Exact over all pairs without an O(length²) search: the exact distance depends on the offset k = b - a
    only (:func:`closed_form_distance`), and rounding moves each encoding by at most ε = u √n (u the dtype's
    relative rounding error), so only offsets whose exact distance is within 2ε of the best distance found
    so far can hold the minimum. Those offsets are measured on the rounded table itself, smallest first.

    >>> m = uniqueness_margin(2048, 512, dtype="float32")
    >>> print(f"{m.distance:.4f}, offset {m.b - m.a}")  # neighbours: every offset-1 pair is this far apart
    3.7143, offset 1
    """
    rows = table(length, d_model, start=start, base=base, shift=shift, layout=layout, dtype=dtype)
    return _margin(rows, start, base, shift, _epsilon(rows.dtype, rows.shape[1]))


# --- the criteria report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Criterion:
    """One measured criterion of :func:`check`: its ``figure`` (a number), ``passed``, and a sentence."""

    name: str
    title: str
    passed: bool
    figure: float | None
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    """The result of :func:`check`: the options checked and one :class:`Criterion` per criterion."""

    options: dict[str, Any]
    criteria: tuple[Criterion, ...]

    @property
    def passed(self) -> bool:
        """True when every criterion passes."""
        return all(c.passed for c in self.criteria)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary: ``{"options", "passed", "criteria": [{name, title, passed, ...}]}``."""
        return {
            "options": dict(self.options),
            "passed": self.passed,
            "criteria": [
                {
                    "name": c.name,
                    "title": c.title,
                    "passed": c.passed,
                    "figure": c.figure,
                    "detail": c.detail,
                    **c.data,
                }
                for c in self.criteria
            ],
        }


def check(
    length: int = 2048,
    d_model: int = 512,
    *,
    base: float = 10000.0,
    shift: float = 0,
    layout: str = "interleaved",
    dtype: npt.DTypeLike = "float32",
    compute: str = "exact",
    progress: Progress | None = None,
) -> Report:
    """Measure the criteria of a good positional encoding for positions 0 .. length - 1 in ``dtype``.

    The criteria (the third source document's list, plus shift invariance), each with its figure:

    * ``unique``: no two positions share an encoding (bit for bit, ±0 equal). Figure: the smallest distance
      between two positions' encodings (:func:`uniqueness_margin`; 0 when two coincide).
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

    ``compute="dtype"`` judges the usual code evaluated in ``dtype`` instead (:func:`naive_table`).
    ``progress(fraction, what)`` is called as the work advances.

    >>> report = check(256, 64, dtype="bfloat16")
    >>> report.passed, [c.name for c in report.criteria]
    (True, ['unique', 'consistent', 'generalises', 'bounded', 'deterministic', 'shift_invariant'])
    """
    length = _validate.integer("length", length, minimum=1)
    if 2 * length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"length must be <= 2**30 (the check also encodes positions up to 2 * length); got {length}"
        )
    compute = _compute(compute)
    dt = _validate.dtype(dtype)
    frequencies(d_model, base=base, shift=shift)  # validates d_model, base and shift before any work
    layout = _validate.layout(layout)
    d_model = int(d_model)
    name = _dtype_name(dt)
    options = {
        "d_model": d_model,
        "length": length,
        "base": base,
        "shift": shift,
        "layout": layout,
        "dtype": name,
        "compute": compute,
    }
    say = progress or (lambda fraction, what: None)
    return _Check(length, d_model, base, shift, layout, dt, compute, say).run(options)


class _Check:
    """The work of :func:`check`, step by step; each step returns its criterion."""

    def __init__(
        self,
        length: int,
        d_model: int,
        base: float,
        shift: float,
        layout: str,
        dtype: np.dtype,
        compute: str,
        say: Progress,
    ):
        self.length, self.d_model, self.base, self.shift, self.layout = length, d_model, base, shift, layout
        self.dtype, self.compute, self.say = dtype, compute, say
        self.name = _dtype_name(dtype)
        self.n = d_model // 2
        self.options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
        self.build = _builder(d_model, start=0, **self.options, compute=compute)
        self.tolerance = (
            self.n * (2 * _RELATIVE[self.name] + _RELATIVE[self.name] ** 2)
            + 4 * d_model * max(1, self.n) * 2.0**-53
        )

    def run(self, options: dict[str, Any]) -> Report:
        length = self.length
        self.say(0.0, f"encoding positions 0..{2 * length - 1}")
        self.long = self.build(0, 2 * length)  # positions 0 .. 2L - 1
        self.say(0.3, f"comparing table({length}) with table({2 * length})")
        consistent = self._consistent()
        self.say(0.45, "recomputing")
        deterministic = self._deterministic()
        self.say(0.65, "looking for positions that share an encoding")
        self.hashes = np.concatenate(
            [_row_hashes(self.long[lo:hi]) for lo, hi in _chunks(2 * length, self.d_model)]
        )
        unique = self._unique()
        self.say(0.9, "dot products")
        criteria = (
            unique,
            consistent,
            self._generalises(),
            self._bounded(),
            deterministic,
            self._shift_invariant(),
        )
        self.say(1.0, "done")
        return Report(options, criteria)

    # -- the criteria

    def _unique(self) -> Criterion:
        length, name = self.length, self.name
        found = _collisions_from_hashes(self.hashes[:length], self.build, 0, limit=length)
        data: dict[str, Any] = {
            "first_collision": found.first,
            "equals": found.earlier,
            "distinct": found.distinct,
        }
        if found.first is not None:
            detail = (
                f"position {found.first} has the same {name} encoding as position {found.earlier}; "
                f"{found.distinct:,} distinct encodings for {length:,} positions"
            )
            return Criterion("unique", _TITLES["unique"], False, 0.0, detail, data)
        rows = self.long[:length]
        eps = _epsilon(self.dtype, self.d_model) if self.compute == "exact" else self._naive_epsilon(rows)
        margin = _margin(rows, 0, self.base, self.shift, eps)
        data.update(margin_positions=[margin.a, margin.b])
        if length < 2:
            detail = "a single position: nothing to tell apart"
            return Criterion("unique", _TITLES["unique"], True, None, detail, data)
        bound = "" if margin.complete else "at most "
        detail = (
            f"all {length:,} encodings differ; the closest two, positions {margin.a} and {margin.b}, "
            f"are {bound}{margin.distance:.4g} apart (every encoding has norm √{self.n} = "
            f"{math.sqrt(self.n):.4g})"
        )
        wrap = wrap_length(self.d_model, base=self.base, shift=self.shift)
        if length > wrap:
            detail += f"; past position {wrap:,.0f} every pair has wrapped, the pairs together still differ"
        if self.compute == "exact" and name != "float64":
            usual = collisions(length, self.d_model, **self.options, compute="dtype")
            data["usual_code_first_collision"] = usual.first
            if usual.first is not None:
                detail += (
                    f". (The usual code, computing the angles in {name}, gives position {usual.first} the "
                    f"encoding of position {usual.earlier}: see --compute dtype)"
                )
        return Criterion("unique", _TITLES["unique"], True, margin.distance, detail, data)

    def _consistent(self) -> Criterion:
        length = self.length
        short = self.build(0, length)
        differ = int(np.count_nonzero(_bits(short) != _bits(self.long[:length])))
        detail = f"table({length}) and the first {length} rows of table({2 * length}) " + (
            "are identical bit for bit: every distance is the same at any length"
            if not differ
            else f"differ in {differ:,} values"
        )
        return Criterion("consistent", _TITLES["consistent"], differ == 0, float(differ), detail, {})

    def _deterministic(self) -> Criterion:
        length = self.length
        reference = self.long[:length]
        if self.compute == "exact":
            differ = _differing_values(reference, 0, self.d_model, self.options)
        else:
            differ = int(np.count_nonzero(_bits(self.build(0, length)) != _bits(reference)))
        how = "again, in two halves and row by row" if self.compute == "exact" else "again"
        same = "identical bit for bit" if not differ else f"different in {differ:,} places"
        detail = f"recomputed ({how}), the values are {same}"
        return Criterion("deterministic", _TITLES["deterministic"], differ == 0, float(differ), detail, {})

    def _bounded(self) -> Criterion:
        rows = self.long[: self.length]
        top = _max_abs(rows)
        norms = _row_norms(rows)
        detail = (
            f"max |PE| = {top:.6g} ≤ 1; row norms from {norms.min():.6g} to {norms.max():.6g} (exactly "
            f"√{self.n} = {math.sqrt(self.n):.6g} before rounding)"
        )
        return Criterion(
            "bounded", _TITLES["bounded"], top <= 1.0, top, detail, {"max_norm": float(norms.max())}
        )

    def _shift_invariant(self) -> Criterion:
        deviation, pairs = self._dot_deviation(0, self.length)
        passed = deviation <= self.tolerance
        detail = (
            f"PE(p)·PE(p+k) differs from Σ cos(k ω_i) by at most {deviation:.3g} over {pairs:,} sampled "
            f"pairs in 0..{self.length - 1} (tolerance {self.tolerance:.3g}, the bound for {self.name} "
            "rounding)"
        )
        data = {"tolerance": self.tolerance, "pairs": pairs}
        return Criterion("shift_invariant", _TITLES["shift_invariant"], passed, deviation, detail, data)

    def _generalises(self) -> Criterion:
        length = self.length
        beyond = self.long[length:]
        top = _max_abs(beyond)
        found = _collisions_from_hashes(self.hashes, self.build, 0, limit=2 * length, after=length)
        deviation, pairs = self._dot_deviation(length, 2 * length)
        passed = top <= 1.0 and found.first is None and deviation <= self.tolerance
        where = f"positions {length}..{2 * length - 1}"
        problems = []
        if top > 1.0:
            problems.append(f"max |PE| = {top:.6g} > 1")
        if found.first is not None:
            problems.append(f"position {found.first} has the encoding of position {found.earlier}")
        if deviation > self.tolerance:
            problems.append(
                f"dot products off the closed form by {deviation:.3g} (tolerance {self.tolerance:.3g})"
            )
        if passed:
            detail = (
                f"{where}, beyond this length: bounded by 1, distinct from each other and from "
                f"0..{length - 1}, dot products within {deviation:.3g} of Σ cos(k ω_i) ({pairs:,} pairs)"
            )
        else:
            detail = f"{where}, beyond this length: " + "; ".join(problems)
        data = {"first_collision": found.first, "equals": found.earlier, "max_abs": top}
        return Criterion("generalises", _TITLES["generalises"], passed, deviation, detail, data)

    # -- helpers

    def _dot_deviation(self, lo: int, hi: int) -> tuple[float, int]:
        """max |PE(p)·PE(p+k) - Σ cos(k ω)| over sampled lo <= p < p + k < hi, and the number of pairs."""
        span = hi - lo
        if span < 2:
            return 0.0, 0
        rng = np.random.default_rng(20240601 + lo)
        offsets = np.unique(np.concatenate([np.arange(1, min(16, span - 1) + 1), rng.integers(1, span, 48)]))
        p = np.concatenate([lo + rng.integers(0, span - k, 64) for k in offsets])
        k = np.repeat(offsets, 64)
        a = self.long[p].astype(np.float64)
        b = self.long[p + k].astype(np.float64)
        measured = np.einsum("ij,ij->i", a, b)
        expected = closed_form_dot_product(offsets, self.d_model, base=self.base, shift=self.shift)
        return float(np.abs(measured - np.repeat(expected, 64)).max()), len(p)

    def _naive_epsilon(self, rows: np.ndarray) -> float:
        """The largest distance of a row of the usual code from the exact encoding (for the margin search)."""
        worst = 0.0
        for lo, hi in _chunks(len(rows), self.d_model):
            exact = table(hi - lo, self.d_model, start=lo, **{**self.options, "dtype": "float64"})
            worst = max(worst, float(_row_norms(rows[lo:hi].astype(np.float64) - exact).max(initial=0.0)))
        return worst * (1 + 1e-9) + 1e-15


_TITLES = {
    "unique": "unique encoding for each position",
    "consistent": "consistent distance across sequence lengths",
    "generalises": "generalises to longer sequences",
    "bounded": "bounded values",
    "deterministic": "deterministic",
    "shift_invariant": "shift invariance: dot products depend on the offset only",
}


# --- internals -----------------------------------------------------------------------------------------


def _matrix(name: str, value: Any, *, result: bool = False) -> np.ndarray:
    """``value`` as a 2-D float64 array, or a ValueError/TypeError that names it. The memory for the float64
    copy (and with ``result``, for the (rows, rows) float64 result) is checked before anything is computed."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a 2-D array of real numbers; got {type(value).__name__}") from error
    if array.dtype.kind not in "iuf" and array.dtype.name != "bfloat16":
        raise TypeError(f"{name} must be a 2-D array of real numbers; got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D, shape (positions, d_model); got shape {array.shape}; "
            "reshape it with .reshape(-1, d_model)"
        )
    rows, columns = array.shape
    needed = rows * columns * 8 + (rows * rows * 8 if result else 0)
    result_text = f" and the ({rows}, {rows}) result" if result else ""
    _check_memory(
        f"{name} of shape {array.shape} (as float64{result_text})", needed, "pass fewer rows, or a slice"
    )
    return np.asarray(array, dtype=np.float64)


def _pair_columns(d_model: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The sin and cos column of each pair i = 0 .. d_model // 2 - 1, for ``layout``."""
    n = d_model // 2
    i = np.arange(n)
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    if layout == "sin_cos":
        return i, n + i
    return n + i, i


def _dtype_name(dt: np.dtype) -> str:
    return "bfloat16" if dt.name == "bfloat16" else dt.name


def _compute(value: Any) -> str:
    if not isinstance(value, str) or value not in COMPUTE:
        raise ValueError(
            f"compute must be one of {', '.join(map(repr, COMPUTE))}; got {value!r} ('exact': posenc's "
            "values rounded once; 'dtype': the usual code evaluated in the dtype)"
        )
    return value


def _rounded(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``values`` rounded to ``dt``, back in float64."""
    return values.astype(dt).astype(np.float64)


#: The most values (positions x d_model) one call of max_magnitude / collisions / collision_horizon computes:
#: about ten minutes at ~10**8 values per second. Beyond it a call is refused up front, not left to hang.
_MAX_WORK = 1 << 36
#: Working memory per position of collisions (two 64-bit hashes, and the sort's keys, order and inverse).
_HASH_BYTES = 80


def _span(
    name: str, length: Any, start: Any, d_model: Any, options: dict[str, Any], *, rows_bytes: int = 0
) -> tuple[int, int]:
    """Check positions start .. start + ``length`` - 1 up front, before any loop or allocation: ``length``
    (called ``name``) an integer >= 0, every option valid, the last position < 2**31, at most
    :data:`_MAX_WORK` values and ``rows_bytes`` per position of working memory. Returns (length, start)."""
    length = _validate.integer(name, length, minimum=0)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    table(0, d_model, start=start, **options)  # validates d_model and every option
    if length and start + length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"{name} must keep the last position start + {name} - 1 = {start + length - 1} below 2**31 = "
            f"{_validate.MAX_POSITION}; got {name}={length}, start={start}; lower {name} or start"
        )
    work = length * int(d_model)
    if work > _MAX_WORK:
        raise ValueError(
            f"{name}={length} with d_model={int(d_model)} asks for {work:.3g} values, more than the "
            f"2**36 = {_MAX_WORK:.3g} (about ten minutes of work) that one call computes; lower {name}"
        )
    if rows_bytes:
        _check_memory(f"{name}={length}", length * rows_bytes, f"lower {name}")
    return length, start


def _check_memory(what: str, needed: int, fix: str) -> None:
    """A ValueError saying ``what`` (the argument, named) when ``needed`` bytes of working memory are more
    than is available, and ``fix``."""
    if needed < 64 << 20:
        return
    available = _validate.available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"{what} needs {needed / 2**30:.1f} GiB of working memory but only "
            f"{available / 2**30:.1f} GiB of memory is available; {fix}"
        )


def _chunks(length: int, d_model: int) -> list[tuple[int, int]]:
    step = max(1, _ELEMENTS // max(1, int(d_model)))
    return [(lo, min(length, lo + step)) for lo in range(0, length, step)]


def _builder(
    d_model: int, *, start: int, base: float, shift: float, layout: str, dtype: Any, compute: str
) -> Callable[[int, int], np.ndarray]:
    """``build(lo, hi)``: the encodings of positions start + lo .. start + hi - 1 (exact or usual code)."""
    compute = _compute(compute)
    make = table if compute == "exact" else naive_table
    options = {"base": base, "shift": shift, "layout": layout, "dtype": dtype}
    make(0, d_model, start=start, **options)  # validates every option now

    def build(lo: int, hi: int) -> np.ndarray:
        return make(hi - lo, d_model, start=start + lo, **options)

    return build


def _bits(values: np.ndarray) -> np.ndarray:
    """The bits of each value as unsigned integers (for bitwise comparison)."""
    return np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}")


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(_bits(a), _bits(b)))


def _differing_values(reference: np.ndarray, start: int, d_model: int, options: dict[str, Any]) -> int:
    """How many values differ when ``reference`` (a table from ``start``) is computed again three ways."""
    length = len(reference)
    differ = int(np.count_nonzero(_bits(table(length, d_model, start=start, **options)) != _bits(reference)))
    half = length // 2
    halves = np.concatenate(
        [
            table(half, d_model, start=start, **options),
            table(length - half, d_model, start=start + half, **options),
        ]
    )
    differ += int(np.count_nonzero(_bits(halves) != _bits(reference)))
    if length:
        sample = np.unique(np.linspace(0, length - 1, 64).astype(np.int64))
        rows = encode(start + sample, d_model, **options)
        differ += int(np.count_nonzero(_bits(rows) != _bits(reference[sample])))
    return differ


def _max_abs(rows: np.ndarray) -> float:
    worst = 0.0
    for lo, hi in _chunks(len(rows), rows.shape[1] if rows.ndim == 2 else 1):
        worst = max(worst, float(np.abs(rows[lo:hi].astype(np.float64)).max(initial=0.0)))
    return worst


def _row_norms(rows: np.ndarray) -> np.ndarray:
    out = np.empty(len(rows))
    for lo, hi in _chunks(len(rows), rows.shape[1]):
        block = rows[lo:hi].astype(np.float64)
        out[lo:hi] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out


# 128-bit row hashes: each 64-bit word of a row is scrambled (the splitmix64 finaliser, a bijection), then
# the words are combined with two sets of random odd multipliers.
_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, size=(2, 4096), dtype=np.uint64) * np.uint64(
    2
) + np.uint64(1)


def _scramble(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """Two 64-bit hashes of the bits of each row, shape ``(len(rows), 2)``; +0 and -0 hash alike."""
    rows = np.array(rows, copy=True)
    rows[rows == 0] = 0  # -0.0 -> +0.0
    raw = np.ascontiguousarray(rows).view(np.uint8).reshape(len(rows), -1)
    pad = -raw.shape[1] % 8
    if pad:
        raw = np.concatenate([raw, np.zeros((len(rows), pad), np.uint8)], axis=1)
    words = _scramble(raw.view(np.uint64))
    out = np.empty((len(rows), 2), np.uint64)
    width = words.shape[1]
    for h in range(2):
        total = np.zeros(len(rows), np.uint64)
        for lo in range(0, width, 4096):  # rows wider than 4096 words reuse the multipliers, shifted
            hi = min(width, lo + 4096)
            multipliers = np.roll(_MULTIPLIERS[h], lo // 4096)[: hi - lo]
            total += (words[:, lo:hi] * multipliers).sum(axis=1, dtype=np.uint64)
        out[:, h] = _scramble(total)
    return out


def _collisions_from_hashes(
    hashes: np.ndarray, build: Callable[[int, int], np.ndarray], start: int, *, limit: int, after: int = 0
) -> Collisions:
    """Collisions among rows 0 .. limit - 1 (by hash); ``first`` is the first repeat at an index >= after."""
    hashes = hashes[:limit]
    if not len(hashes):
        return Collisions(None, None, 0, 0, start)
    keys = np.ascontiguousarray(hashes).view(np.dtype((np.void, 16))).ravel()
    _, first_index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    earliest = first_index[inverse.ravel()]
    repeats = np.flatnonzero(earliest != np.arange(len(hashes)))
    repeats = repeats[repeats >= after]
    for index in repeats[:64].tolist():  # verify: a 128-bit hash collision is astronomically unlikely
        earlier = int(earliest[index])
        if _same_bits(_normalised(build(index, index + 1)), _normalised(build(earlier, earlier + 1))):
            return Collisions(start + index, start + earlier, len(first_index), len(hashes), start)
    return Collisions(None, None, len(first_index), len(hashes), start)


def _normalised(rows: np.ndarray) -> np.ndarray:
    rows = np.array(rows, copy=True)
    rows[rows == 0] = 0
    return rows


def _epsilon(dt: np.dtype, d_model: int) -> float:
    """A bound on |rounded row - exact row| for posenc's encodings in ``dt`` (rows have norm ≤ √n)."""
    name = _dtype_name(dt)
    return (_RELATIVE[name] * math.sqrt(d_model // 2) + _UNDERFLOW[name] * math.sqrt(d_model)) * 1.001


def _distance_lower_bounds(count: int, d_model: int, base: float, shift: float) -> np.ndarray:
    """Lower bounds of the exact distances |PE(p) - PE(p + k)|, k = 1 .. count (from float32 cosines)."""
    n = d_model // 2
    out = np.empty(count)
    slack = 2 * n * 2.0**-24 * 1.01 + 1e-9
    for lo, hi in _chunks(count, d_model):
        pe = table(hi - lo, d_model, start=lo + 1, base=base, shift=shift, layout="sin_cos", dtype="float32")
        cos_sum = pe[:, n : 2 * n].astype(np.float64).sum(axis=1)
        out[lo:hi] = np.sqrt(np.maximum(0.0, 2.0 * (n - cos_sum) - slack))
    return out


_MARGIN_WORK = 1 << 31  # the most values (offsets x rows x d_model) the margin search reads


def _margin(rows: np.ndarray, start: int, base: float, shift: float, eps: float) -> Margin:
    """The smallest distance between two rows of ``rows`` (positions start, start + 1, ...): see
    :func:`uniqueness_margin`."""
    length, d_model = rows.shape
    if length < 2:
        return Margin(math.inf, None, None)
    lower = _distance_lower_bounds(length - 1, d_model, base, shift)
    order = np.argsort(lower, kind="stable")
    best, where = math.inf, (None, None)
    most = max(16, _MARGIN_WORK // (length * d_model))
    for count, index in enumerate(order.tolist()):
        if best == 0.0 or lower[index] - 2 * eps > best:
            return Margin(best, *where)
        if count == most:
            return Margin(best, *where, complete=False)
        k = index + 1
        distance, p = _closest_at_offset(rows, k)
        if distance < best:
            best, where = distance, (start + p, start + p + k)
    return Margin(best, *where)


def _closest_at_offset(rows: np.ndarray, k: int) -> tuple[float, int]:
    """min over p of |rows[p + k] - rows[p]| and its p (float64 arithmetic, in chunks)."""
    best, where = math.inf, 0
    for lo, hi in _chunks(len(rows) - k, rows.shape[1]):
        diff = rows[lo + k : hi + k].astype(np.float64) - rows[lo:hi].astype(np.float64)
        squared = np.einsum("ij,ij->i", diff, diff)
        i = int(np.argmin(squared))
        if squared[i] < best:
            best, where = float(squared[i]), lo + i
    return math.sqrt(best), where
