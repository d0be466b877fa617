"""How far rounding to a dtype can move a value, a row, a dot product: the bounds the criteria judge by.

posenc's float32, float16 and bfloat16 values are the exact values correctly rounded, its float64 values
within 1 ulp: each value v is off by at most u |v| (u the dtype's unit roundoff, :data:`RELATIVE`), or by half
the smallest subnormal (:data:`UNDERFLOW`) where it underflows. Sums of such values add float64 rounding
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, §3.1).
"""

from __future__ import annotations

import math

import numpy as np

from .. import validation

#: Relative error bound u of one value of each dtype (float64 outputs are within 1 ulp, the others correctly
#: rounded).
RELATIVE = {"float64": 2.0**-52, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
#: Half the smallest subnormal of each dtype: the absolute error bound for values that underflow.
UNDERFLOW = {"float64": 2.0**-1075, "float32": 2.0**-150, "float16": 2.0**-25, "bfloat16": 2.0**-134}


def row_error_bound(dtype: np.dtype, d_model: int, odd: str) -> float:
    """A bound on |rounded row - exact row| for posenc's encodings in ``dtype``: u · |row| + the underflow
    bound over d_model values, where |row|² ≤ the number of frequencies (each pair adds sin² + cos² = 1;
    an odd width's lone sine under odd="literal"/"drop" adds at most 1).

    >>> print(f"{row_error_bound(np.dtype('float32'), 512, 'zero'):.3g}")  # 2**-24 · √256, and a margin
    9.55e-07
    """
    count, _ = validation.plan(d_model, odd)
    name = dtype.name
    return (RELATIVE[name] * math.sqrt(count) + UNDERFLOW[name] * math.sqrt(d_model)) * 1.001


def dot_product_tolerance(d_model: int, dtype: np.dtype) -> float:
    """How far PE(p) · PE(p + k), measured in float64 from values rounded to ``dtype``, may be from the exact
    Σ_i cos(k ω_i): n (2u + u²) for n = d_model // 2 pairs of values with relative error ≤ u, plus the float64
    summation of d_model products.

    >>> print(f"{dot_product_tolerance(512, np.dtype('float32')):.3g}")
    3.05e-05
    """
    n = d_model // 2
    u = RELATIVE[dtype.name]
    return n * (2 * u + u**2) + 4 * d_model * max(1, n) * 2.0**-53
