"""Rows compared by their bits: bitwise equality, and 128-bit row hashes for finding repeated rows.

Two encodings are the same when their values have the same bits, +0 and -0 counted as equal (they are the
same number). Hashing each row and sorting the hashes finds every repeated row in O(L log L) time and O(L)
memory, never the O(L²) of comparing all pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._work import RowBits, Rows

# 128-bit row hashes: each 64-bit word of a row is scrambled (the splitmix64 finaliser of Steele, Lea and
# Flood 2014, a bijection), then the words are combined with two sets of random odd multipliers.
_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, size=(2, 4096), dtype=np.uint64) * np.uint64(
    2
) + np.uint64(1)


def bits(values: Any) -> Any:
    """The bits of each value as unsigned integers of the same width (for bitwise comparison); for
    :class:`~posenc.analysis._work.Rows` (rows not held), a :class:`~posenc.analysis._work.RowBits` that
    compares block by block."""
    if isinstance(values, Rows):
        return RowBits(values)
    return np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}")


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` have the same shape, dtype and bits."""
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(bits(a), bits(b)))


def normalised(rows: np.ndarray) -> np.ndarray:
    """A copy of ``rows`` with every -0.0 made +0.0."""
    rows = np.array(rows, copy=True)
    rows[rows == 0] = 0
    return rows


def row_hashes(rows: np.ndarray) -> np.ndarray:
    """Two 64-bit hashes of the bits of each row, shape ``(len(rows), 2)``; +0 and -0 hash alike."""
    raw = np.ascontiguousarray(normalised(rows)).view(np.uint8).reshape(len(rows), -1)
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


def earliest_equal(hashes: np.ndarray) -> tuple[np.ndarray, int]:
    """For each row (by its hashes ``(L, 2)``), the index of the first row with the same hashes, shape
    ``(L,)``; and the number of distinct hashes.

    One stable sort of the first hash word (a second key only where two first words tie), not a sort of
    16-byte strings: a few hundred ms for millions of rows.

    >>> earliest_equal(np.array([[5, 1], [3, 2], [5, 1], [5, 2]], np.uint64))[0].tolist()
    [0, 1, 0, 3]
    """
    hashes = np.asarray(hashes, dtype=np.uint64).reshape(-1, 2)
    count = len(hashes)
    if not count:
        return np.zeros(0, np.int64), 0
    first, second = hashes[:, 0], hashes[:, 1]
    order = np.argsort(first, kind="stable")
    s0, s1 = first[order], second[order]
    tie = s0[1:] == s0[:-1]
    if np.any(tie & (s1[1:] != s1[:-1])):  # two rows share the first word only: sort by both words
        order = np.lexsort((second, first))
        s0, s1 = first[order], second[order]
    new = np.empty(count, bool)
    new[0] = True
    new[1:] = (s0[1:] != s0[:-1]) | (s1[1:] != s1[:-1])
    group = np.cumsum(new) - 1
    leaders = order[new]  # stable order: each group's first index is its earliest row
    earliest = np.empty(count, np.int64)
    earliest[order] = leaders[group]
    return earliest, len(leaders)


#: Bytes of each row that :func:`key_hashes` reads: its first columns.
KEY_BYTES = 32


def key_columns(d_model: int, itemsize: int) -> int:
    """How many leading columns :func:`key_hashes` reads: :data:`KEY_BYTES` worth, at most d_model."""
    return max(1, min(int(d_model), KEY_BYTES // int(itemsize)))


def key_hashes(rows: np.ndarray) -> np.ndarray:
    """128-bit hashes of the first :func:`key_columns` columns of each row, shape ``(len(rows), 2)``.

    Equal rows have equal keys, so rows whose keys differ are distinct: only the few rows that share a key
    need their full hash (:func:`refine_hashes`). Row hashes built this way find exactly the repeats that
    :func:`row_hashes` finds, reading a few columns of most rows instead of all of them.
    """
    rows = np.asarray(rows)
    return row_hashes(rows[:, : key_columns(rows.shape[1], rows.dtype.itemsize)])


#: Marks a full-row hash, so that it never equals a key hash by construction of the words.
_FULL = np.uint64(0x9E3779B97F4A7C15)


def refine_hashes(hashes: np.ndarray, fetch: Callable[[np.ndarray], np.ndarray]) -> int:
    """Make key hashes ``(L, 2)`` (:func:`key_hashes`) row hashes, in place: every row that shares its key
    with another gets the hash of its whole row; ``fetch(indices)`` returns those rows. Returns how many
    rows were hashed whole. Equal rows still hash alike (same key, so both hashed whole); distinct rows
    differ in their key or in their whole-row hash."""
    earliest, _ = earliest_equal(hashes)
    counts = np.bincount(earliest, minlength=len(earliest))
    shared = np.flatnonzero(counts[earliest] > 1)
    for lo in range(0, len(shared), 1 << 15):
        index = shared[lo : lo + (1 << 15)]
        full = row_hashes(fetch(index))
        full[:, 0] ^= _FULL
        hashes[index] = full
    return len(shared)


def repeated_rows(rows: np.ndarray) -> np.ndarray:
    """For each row, whether an earlier row holds the same values (by 128-bit hash of the bits): ``(L,)``.

    >>> repeated_rows(np.array([[1.0, 0.0], [2.0, 0.0], [1.0, -0.0]])).tolist()
    [False, False, True]
    """
    earliest, _ = earliest_equal(row_hashes(rows))
    return earliest != np.arange(len(rows))


def _scramble(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, applied to each 64-bit word: a bijection that mixes every bit."""
    x = x ^ (x >> np.uint64(30))
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x
