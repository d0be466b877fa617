"""What a sinusoidal encoding guarantees, measured: dot products, relative shifts, wavelengths, bounds, bits.

NumPy only. Every encoding comes from :func:`posenc.table` / :func:`posenc.encode` (exact, then rounded
once); measurements are made in float64. With n = d_model // 2 (sin, cos) pairs and
ω_i = scale · base ** (-i / (n - shift)) (Vaswani et al. 2017 §3.5):

* **Dot products** depend only on the offset k: the dot-product matrix is Toeplitz.

      PE(p) · PE(p + k) = Σ_i cos(k ω_i)                         (:func:`closed_form_dot_product`)
      |PE(p) - PE(p + k)| = (Σ_i 4 sin²(k ω_i / 2)) ** 0.5       (:func:`closed_form_distance`)

* **Relative shifts are linear**: PE(p + k) = M_k · PE(p), where M_k rotates each (sin, cos) pair by k ω_i
  (:func:`shift_matrix`, :func:`shift_error`), the property Vaswani et al. give for choosing sinusoids.
* **Bounded, consistent, deterministic**: every value within [-1, 1] (:func:`max_magnitude`), a position's
  encoding independent of the sequence length (:func:`length_consistent`) and of how it is computed
  (:func:`recomputes_identically`).

An odd d_model follows ``odd`` as in :func:`posenc.encode`. Under ``"zero"`` (the default) its last column is
zero and nothing above changes. Under ``"literal"`` and ``"drop"`` its last column is a sine without its
cosine: it adds sin(p ω_n) sin((p + k) ω_n), which depends on p, to each dot product, so the closed forms
below are then the sums over the n full pairs, the dot products are no longer Toeplitz, and no shift matrix
exists. Options are keyword-only and mean what they mean in :func:`posenc.encode`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import validation
from ..core import encode, highprec, table
from ..core.isolated import isolated
from ..core.options import Options, takes_options
from ..errors import PosencError
from ..layouts import check_layout, pair_columns
from ._work import as_matrix, chunks, span
from .hashes import bits, same_bits

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords, TableOptions

# --- dot products and the Toeplitz structure -----------------------------------------------------------


@isolated
def dot_products(encodings: npt.ArrayLike) -> np.ndarray:
    """The matrix of dot products D[i, j] = PE_i · PE_j of the rows of ``encodings``, in float64.

    ``encodings`` has shape ``(L, d_model)`` (any real dtype); the result has shape ``(L, L)``. For an exact
    table, D[i, j] = Σ_k cos((i - j) ω_k): constant along each diagonal (a Toeplitz matrix).

    >>> import posenc
    >>> d = dot_products(posenc.table(82, 512, dtype="float64"))
    >>> print(f"{d[1, 2]:.4f} {d[80, 81]:.4f} {d[1, 80]:.4f} {d[2, 81]:.4f}")
    249.1021 249.1021 117.5290 117.5290
    """
    rows = as_matrix("encodings", encodings, result=True)
    return rows @ rows.T


@isolated
def cosine_similarity(encodings: npt.ArrayLike) -> np.ndarray:
    """The cosine similarities S[i, j] = PE_i · PE_j / (|PE_i| |PE_j|) of the rows, shape ``(L, L)``.

    Every exact encoding has norm √n (each pair contributes sin² + cos² = 1), so S = D / n there.

    >>> import posenc
    >>> s = cosine_similarity(posenc.table(3, 4, dtype="float64"))
    >>> print(f"{s[0, 0]:.4f} {s[0, 1]:.4f}")  # (cos 1 + cos 0.01) / 2
    1.0000 0.7701
    """
    rows = as_matrix("encodings", encodings, result=True)
    zero = ~np.any(rows != 0, axis=1)  # a NaN row is not refused: its similarities are NaN
    if np.any(zero):
        raise ValueError(
            f"encodings row {int(np.argmax(zero))} is all zeros: its cosine similarity is undefined; "
            "drop that row"
        )
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    if not np.all((norms > 1e-150) & (norms < 1e150)):  # squares that over- or underflow: rows scaled first
        peak = np.max(np.abs(rows), axis=1, keepdims=True)
        rows = rows / np.where(np.isfinite(peak), peak, 1.0)
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return (rows @ rows.T) / np.outer(norms, norms)


@isolated
def toeplitz_deviation(matrix: npt.ArrayLike) -> float:
    """The largest spread (max - min) along any diagonal of a square matrix: 0 for a Toeplitz matrix.

    NaN when the matrix holds a NaN (NaN in, NaN out: never a clean figure); an inf on a diagonal with other
    values gives inf or NaN likewise.

    >>> toeplitz_deviation([[1.0, 2.0], [3.0, 1.0]])
    0.0
    >>> toeplitz_deviation([[1.0, 2.0], [3.0, 1.5]])
    0.5
    """
    m = as_matrix("matrix", matrix)
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


@takes_options(layout=False)
@isolated
def closed_form_dot_product(
    offsets: npt.ArrayLike, d_model: int, **options: Unpack[OptionKeywords]
) -> np.ndarray:
    """Σ_i cos(k ω_i) for each offset k: the dot product PE(p) · PE(p + k) of exact encodings, any p.

    Shape of ``offsets``; float64. Each cos(k ω_i) is posenc's exact value (within 1 ulp), at any offset. The
    sum runs over the d_model // 2 full pairs (see the module docstring for an odd d_model).

    >>> print(f"{closed_form_dot_product(1, 512):.5f} {closed_form_dot_product(79, 512):.5f}")
    249.10210 117.52900
    """
    return _pairs(_offsets(offsets), d_model, options)[1].sum(axis=-1)


@takes_options(layout=False)
@isolated
def closed_form_distance(
    offsets: npt.ArrayLike, d_model: int, **options: Unpack[OptionKeywords]
) -> np.ndarray:
    """|PE(p) - PE(p + k)| = (Σ_i 4 sin²(k ω_i / 2)) ** 0.5 for each offset k, any p; float64.

    Computed from sin(k ω_i / 2), so it stays accurate for tiny offsets (no 1 - cos cancellation). The sum
    runs over the d_model // 2 full pairs: for an odd d_model under odd="literal"/"drop" it is a lower bound
    (the last column, a lone sine, adds its own non-negative term).

    >>> print(f"{closed_form_distance(1, 512):.4f}")  # the smallest distance between two positions
    3.7143
    """
    half = _offsets(offsets) / 2  # checked first: a message shows the caller's offsets, not their halves
    return 2.0 * np.sqrt(np.square(_pairs(half, d_model, options)[0]).sum(axis=-1))


def split_pairs(sin_cos: np.ndarray, d_model: int, odd: str) -> tuple[np.ndarray, np.ndarray]:
    """The sines and the cosines of the d_model // 2 full pairs in encodings of layout ``"sin_cos"``: two
    views, each of shape ``sin_cos.shape[:-1] + (d_model // 2,)``.

    With ``count`` frequencies (d_model // 2, or one more for an odd d_model under odd="literal"/"drop", whose
    last sine has no cosine), the sines fill columns 0 .. count - 1 and the cosines follow from column
    ``count``.
    """
    pairs = d_model // 2
    count, _ = validation.plan(d_model, odd)
    return sin_cos[..., :pairs], sin_cos[..., count : count + pairs]


def _offsets(offsets: npt.ArrayLike) -> np.ndarray:
    """The offsets k of the closed forms as exact float64, checked as positions are (|k| < 2**31); a
    refusal names ``offsets``."""
    try:
        return validation.positions(offsets)
    except PosencError as error:
        if error.parameter != "positions":
            raise
        raise type(error)(error.worded({"positions": "offsets"}), parameter="offsets") from None


def _pairs(offsets: npt.ArrayLike, d_model: int, options: Any) -> tuple[np.ndarray, np.ndarray]:
    """sin(k ω_i) and cos(k ω_i) of the d_model // 2 full pairs for each offset k (float64, exact within
    1 ulp), each of shape ``offsets.shape + (d_model // 2,)``; ``options`` without ``layout``."""
    d_model = validation.d_model(d_model)
    pe = encode(offsets, d_model, **options, layout="sin_cos", dtype="float64")
    return split_pairs(pe, d_model, options["odd"])


# --- relative shifts -----------------------------------------------------------------------------------


@takes_options
@isolated
def shift_matrix(k: float, d_model: int, **options: Unpack[OptionKeywords]) -> np.ndarray:
    """The linear map M_k with PE(p + k) = M_k · PE(p) for every p: shape ``(d_model, d_model)``, float64.

    Each (sin, cos) pair is rotated by the angle k ω_i:

        [sin (p+k)ω]   [ cos kω   sin kω ] [sin pω]
        [cos (p+k)ω] = [-sin kω   cos kω ] [cos pω]

    placed at the pair's columns for ``layout``; an odd width's zero column maps to itself. M_k is
    orthogonal, M_a M_b = M_(a+b), and it does not depend on p: a relative shift is one fixed matrix. An odd
    width under odd="literal"/"drop" has no such matrix (its last sine lacks the cosine that rotating it
    needs): a ValueError says so.

    >>> import posenc
    >>> m = shift_matrix(3, 4)
    >>> pe = posenc.table(10, 4, dtype="float64")
    >>> bool(abs(m @ pe[2] - pe[5]).max() < 1e-15)
    True
    """
    k = validation.real("k", k, usual="pass one offset, e.g. 1")
    if not abs(k) < validation.MAX_POSITION:
        raise ValueError(f"k must satisfy |k| < 2**31 = {validation.MAX_POSITION}; got {k!r}")
    d_model = validation.d_model(d_model)
    layout = check_layout(options.pop("layout"))
    odd = options["odd"]
    validation.fits_in_memory((d_model, d_model), np.dtype(np.float64))
    sin, cos = _pairs(k, d_model, options)
    if validation.plan(d_model, odd)[0] > d_model // 2:
        raise ValueError(
            f"d_model={d_model} is odd and odd={odd!r} makes its last column a sine without its cosine: no "
            "matrix maps PE(p) to PE(p + k) for every p; use odd='zero' or an even d_model"
        )
    s, c = pair_columns(layout, d_model // 2)
    m = np.zeros((d_model, d_model))
    m[s, s] = cos
    m[s, c] = sin
    m[c, s] = -sin
    m[c, c] = cos
    if d_model % 2:
        m[-1, -1] = 1.0
    return m


@takes_options
@isolated
def shift_error(
    k: int, length: int, d_model: int, *, start: int = 0, **options: Unpack[OptionKeywords]
) -> float:
    """max over p in start .. start + length - 1 of |M_k · PE(p) - PE(p + k)| (float64 tables).

    Rounding only: about 1e-16 (each output value is a two-term sum of products of values within 1 ulp).

    >>> shift_error(5, 64, 512) < 1e-15
    True
    """
    k = validation.integer("k", k, minimum=-(validation.MAX_POSITION - 1))
    length, start = span("length", length, start, d_model, options)  # before M_k is built
    lowest, highest = start + min(k, 0), start + length - 1 + max(k, 0)
    if lowest <= -validation.MAX_POSITION or highest >= validation.MAX_POSITION:
        raise ValueError(
            f"k={k} shifts positions {start} .. {start + length - 1} to {start + k} .. "
            f"{start + length - 1 + k}, past the encodable |p| < 2**31; lower k, start or length"
        )
    m = shift_matrix(k, d_model, **options)
    here = table(length, d_model, start=start, **options, dtype="float64")
    there = table(length, d_model, start=start + k, **options, dtype="float64")
    return float(np.abs(here @ m.T - there).max(initial=0.0))


# --- wavelengths ---------------------------------------------------------------------------------------


@takes_options(layout=False)
@isolated
def wavelengths(d_model: int, **options: Unpack[OptionKeywords]) -> np.ndarray:
    """The wavelength 2π / ω_i of each frequency, in positions: shape ``(d_model // 2,)`` (one more for an odd
    d_model under odd="literal"/"drop"), float64, each the exact real 2π · base**(i / (n - shift)) / scale
    rounded once (:func:`posenc.core.highprec.wavelengths`), not 2π / ω_i in float64.

    >>> wavelengths(4, base=100.0)  # ω = 1 and 0.1
    array([ 6.28318531, 62.83185307])
    """
    checked = Options.check(d_model, layout="interleaved", **options)
    count, twice_half = validation.plan(checked.d_model, checked.odd)
    return highprec.wavelengths(count, checked.base, twice_half, checked.shift, checked.scale)


@takes_options(layout=False)
@isolated
def wrap_length(d_model: int, **options: Unpack[OptionKeywords]) -> float:
    """How many positions the slowest pair takes to turn once, 2π / ω_(n-1): past it, every pair has wrapped.

    Positions stay distinct beyond it (the pairs' periods are incommensurate), but no single pair orders them.

    >>> round(wrap_length(512))  # 2π · 10000**(255/256)
    60611
    """
    return float(wavelengths(d_model, **options)[-1])


# --- bounded, consistent, deterministic ----------------------------------------------------------------


@takes_options(dtype="float32")
@isolated
def max_magnitude(length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]) -> float:
    """max |PE(p, j)| over positions start .. start + length - 1 in ``dtype``: ≤ 1, the encoding is bounded.

    >>> max_magnitude(1000, 64, dtype="bfloat16")
    1.0
    """
    length, start = span("length", length, start, d_model, options)
    worst = 0.0
    for lo, hi in chunks(length, d_model):
        rows = table(hi - lo, d_model, start=start + lo, **options)
        worst = max(worst, float(np.abs(rows.astype(np.float64)).max(initial=0.0)))
    return worst


@takes_options(dtype="float32")
@isolated
def length_consistent(length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]) -> bool:
    """Whether ``table(length)`` equals the first ``length`` rows of ``table(2 * length)``, bit for bit.

    Then the encoding of a position, and every distance between two positions, is the same whatever the
    sequence length.

    >>> length_consistent(100, 64, dtype="bfloat16")
    True
    """
    length, start = span("length", length, start, d_model, options)
    short = table(length, d_model, start=start, **options)
    return same_bits(short, table(2 * length, d_model, start=start, **options)[:length])


@takes_options(dtype="float32")
@isolated
def recomputes_identically(
    length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]
) -> bool:
    """Whether recomputing gives the same bits: the table again, in two halves, and 64 rows by ``encode``.

    >>> recomputes_identically(100, 64)
    True
    """
    length, start = span("length", length, start, d_model, options)
    first = table(length, d_model, start=start, **options)
    return differing_values(first, start, d_model, options) == 0


#: Above this many values (length × d_model), :func:`differing_values` recomputes sampled windows of the
#: table (:data:`WINDOWS` of :data:`WINDOW_ROWS` rows) instead of the whole table twice.
RECOMPUTE_WHOLE = 1 << 27
#: Windows recomputed above :data:`RECOMPUTE_WHOLE`, and the rows in each.
WINDOWS, WINDOW_ROWS = 16, 4096


def recomputed_windows(length: int, d_model: int) -> list[tuple[int, int]] | None:
    """The row ranges :func:`differing_values` recomputes for a table of ``length`` rows: None when it
    recomputes the whole table (at most :data:`RECOMPUTE_WHOLE` values, or fewer than 2 · WINDOWS ·
    WINDOW_ROWS rows), else :data:`WINDOWS` windows of
    :data:`WINDOW_ROWS` rows evenly spread, the first starting at row 0 and the last ending at the last row,
    one straddling the middle (where the two halves meet)."""
    if length * int(d_model) <= RECOMPUTE_WHOLE or length < 2 * WINDOWS * WINDOW_ROWS:
        return None
    starts = np.linspace(0, length - WINDOW_ROWS, WINDOWS - 1).astype(np.int64).tolist()
    starts.append(length // 2 - WINDOW_ROWS // 2)
    return sorted((s, s + WINDOW_ROWS) for s in set(starts))


def differing_values(reference: Any, start: int, d_model: int, options: dict[str, Any]) -> int:
    """How many values differ when ``reference`` (the table of ``options`` from ``start``; an array or
    :class:`~posenc.analysis._work.Rows`) is computed again three ways: whole, in two halves, and 64 rows
    (evenly spread) by :func:`posenc.encode`. Above :data:`RECOMPUTE_WHOLE` values, the whole table and the
    halves are recomputed in :func:`recomputed_windows` only (each window once as a table of its own, once as
    the rows of a table that starts earlier), and the 64 rows by ``encode``."""
    length = len(reference)
    windows = recomputed_windows(length, d_model)
    differ = 0
    if windows is None:
        held = np.asarray(reference)
        differ += int(np.count_nonzero(bits(table(length, d_model, start=start, **options)) != bits(held)))
        half = length // 2
        first = table(half, d_model, start=start, **options)
        differ += int(np.count_nonzero(bits(first) != bits(held[:half])))
        del first
        second = table(length - half, d_model, start=start + half, **options)
        differ += int(np.count_nonzero(bits(second) != bits(held[half:])))
        del second
    else:
        dt = np.dtype(reference.dtype)
        buffer = np.empty((WINDOW_ROWS + 1000, int(d_model)), dt)  # reused: fresh pages cost more
        for lo, hi in windows:
            held = np.asarray(reference[lo:hi])
            again = table(hi - lo, d_model, start=start + lo, out=buffer[: hi - lo], **options)
            differ += int(np.count_nonzero(bits(again) != bits(held)))
            skew = min(lo, 1000)  # the same rows inside a longer table that starts earlier
            longer = table(
                hi - lo + skew, d_model, start=start + lo - skew, out=buffer[: hi - lo + skew], **options
            )
            differ += int(np.count_nonzero(bits(longer[skew:]) != bits(held)))
    if length:
        sample = np.unique(np.linspace(0, length - 1, 64).astype(np.int64))
        rows = encode(start + sample, d_model, **options)
        differ += int(np.count_nonzero(bits(rows) != bits(np.asarray(reference[sample]))))
    return differ
