"""What the analysis tests (tests/analysis/test_analysis*.py) share: an independent mpmath reference of the
dot
product, and brute-force searches."""

from __future__ import annotations

import mpmath
import numpy as np

EPS = 2.0**-52


def mp_dot(
    k: int, d_model: int, base: float = 10000.0, shift: float = 0, *, scale: float = 1.0, odd: str = "zero"
) -> float:
    """Σ_i cos(k ω_i) over the d_model // 2 full pairs in 40-digit arithmetic, ω_i = scale · base ** (-i / h),
    h = n - shift (odd="zero"), d_model / 2 - shift ("literal") or (d_model + 1) / 2 - shift ("drop"): an
    independent reference."""
    with mpmath.workdps(40):
        n = d_model // 2
        half = {
            "zero": mpmath.mpf(n),
            "literal": mpmath.mpf(d_model) / 2,
            "drop": mpmath.mpf(d_model + 1) / 2,
        }
        denominator = half[odd] - mpmath.mpf(shift)
        total = mpmath.fsum(
            mpmath.cos(k * mpmath.mpf(scale) * mpmath.power(mpmath.mpf(base), -mpmath.mpf(i) / denominator))
            for i in range(n)
        )
        return float(total)


# --- uniqueness -----------------------------------------------------------------------------------


def brute_force_margin(rows: np.ndarray) -> float:
    x = rows.astype(np.float64)
    squared = np.sum(x * x, axis=1)
    d2 = squared[:, None] + squared[None, :] - 2 * x @ x.T
    d2[np.diag_indices_from(d2)] = np.inf
    return float(np.sqrt(max(0.0, d2.min())))


def brute_force_first_repeat(rows: np.ndarray) -> tuple[int, int] | None:
    seen: dict[bytes, int] = {}
    for p, row in enumerate(rows):
        key = (row.astype(np.float64) + 0.0).tobytes()
        if key in seen:
            return p, seen[key]
        seen[key] = p
    return None
