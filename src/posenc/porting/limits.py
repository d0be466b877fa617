"""How far a stored table may be from a variant's exact values and still be that variant: identify's limits.

A limit that decides "equal" comes from the original's own error at the compared positions, and never
reaches the range of the values (|value| ≤ 1). For a candidate whose largest angle over the compared
positions is A = max |p·ω_i| (its *reach*), stored in a type of unit roundoff u:

    limit = min(FLOOR + ANGLE_FACTOR · A · 2⁻²⁴ + u, CAP)

* ``ANGLE_FACTOR · A · 2⁻²⁴``: float32 code forms the angle p·ω in float32 and is off by about |p·ω|·2⁻²⁴
  (the rounding of ω, which float32 ``exp``/``pow`` make a few ulps, and of the product). The libraries' own
  float32 tables measure 1.0 to 1.25 times that at every length (:data:`posenc.presets.DEVIATIONS`: 0.00956
  at 131k positions for diffusers' timesteps, 1.22 × 131071 · 2⁻²⁴); :data:`ANGLE_FACTOR` = 16
  leaves a margin of more than 12 over the worst of them (and of more than 8 over the same code run with
  NumPy's float32 ``exp``, which is not correctly rounded: up to 1.9 times).
* ``u``: the storage type rounds each value once more, by half an ulp (u/2 for |value| in [0.5, 1]); one
  u covers a float32 value rounded again to bfloat16 or float16 (a double rounding).
* :data:`FLOOR` = 1e-5: float32 sin/cos and float32 frequencies at the first positions (a few float32
  ulps, and the odd ``exp(-log(base)·k/d)`` against ``base**(-k/d)``).
* :data:`CAP` = 2⁻⁴ = 0.0625, the most any default limit allows. Each sine/cosine pair of a row holds a value
  of magnitude ≥ 1/√2, so a table without signal (all zeros) is ≥ 0.707 from every variant, 11 times the
  cap, and uniform noise is ~1 from it; one storage rounding to bfloat16 (2⁻⁸) fits 16 times. Float32 code
  stays within the cap up to angles of about 2⁻⁴ / (2.4 · 2⁻²⁴) ≈ 437,000 radians (positions, at ω_0 = 1):
  beyond that its angles are off by more than 1/16 rad (3.6°), float32 noise is no longer the variant, and
  only a table computed in higher precision (off by its storage rounding alone) still matches there.

>>> table_limit(0.0, 2.0**-24) < 2e-5, round(table_limit(4095.0, 2.0**-24), 6)  # float32, 4096 positions
(True, 0.003915)
>>> table_limit(16_000_000.0, 2.0**-24) == CAP  # float32 angles at 16M positions: O(1) noise, not a match
True
"""

from __future__ import annotations

import math

__all__ = ["ANGLE_FACTOR", "CAP", "F32", "FLOOR", "capped", "table_limit"]

#: float32's unit roundoff: the relative error of one float32 rounding.
F32 = 2.0**-24
#: float32 code's angle error allowed, in units of |p·ω|·2⁻²⁴ (the libraries' own: 1.0 to 1.25).
ANGLE_FACTOR = 16
#: What the first positions' float32 sin/cos and frequencies may be off by.
FLOOR = 1e-5
#: The largest default limit: far below the range of the values (see the module's docstring).
CAP = 2.0**-4


def table_limit(reach: float, unit: float) -> float:
    """The default limit of a candidate whose largest |p·ω| at the compared positions is ``reach``, for a
    table stored in a type of unit roundoff ``unit`` (see the module's docstring)."""
    noise = FLOOR + ANGLE_FACTOR * abs(reach) * F32 + unit
    return capped(noise if math.isfinite(noise) else CAP)


def capped(limit: float) -> float:
    """``limit``, never above :data:`CAP`."""
    return min(limit, CAP)
