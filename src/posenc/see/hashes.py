"""Rows compared by their bits: bitwise equality, and 128-bit row hashes for finding repeated rows.

Two encodings are the same when their values have the same bits, +0 and -0 counted as equal (they are the
same number). Hashing each row and sorting the hashes finds every repeated row in O(L log L) time and O(L)
memory, never the O(L²) of comparing all pairs.
"""

from __future__ import annotations

import numpy as np

# 128-bit row hashes: each 64-bit word of a row is scrambled (the splitmix64 finaliser of Steele, Lea and
# Flood 2014, a bijection), then the words are combined with two sets of random odd multipliers.
_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, size=(2, 4096), dtype=np.uint64) * np.uint64(
    2
) + np.uint64(1)


def bits(values: np.ndarray) -> np.ndarray:
    """The bits of each value as unsigned integers of the same width (for bitwise comparison)."""
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
    ``(L,)``; and the number of distinct hashes."""
    keys = np.ascontiguousarray(hashes).view(np.dtype((np.void, 16))).ravel()
    _, first_index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first_index[inverse.ravel()], len(first_index)


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
