"""Steps 1 and 2: the turn ``r = frac(p c)`` of each position and frequency (exact reduction) and
sin 2πr, cos 2πr by a table of 256 angles and Taylor series, all in fixed point with a proven error bound."""

from __future__ import annotations

import math
from typing import Any

from .backend import Backend
from .fixed_point import (
    LIMB_BITS,
    _fraction_digits,
    _lazy,
    _magnitude,
    _mul,
    _normalize,
    _shift_down,
    _signed_sum,
)
from .host import _PIECE_BITS, _PIECES


def _evaluate(
    ops: Backend, whole: Any, fraction: Any, fraction_negative: Any, freq: dict[str, Any], m: int
) -> tuple[tuple[Any, Any], tuple[Any, Any], Any]:
    """sin and cos of 2π (whole + fraction) c in fixed point: ((neg, |sin| 2**e), (neg, |cos|), e).

    Error analysis (units of 2**-12m): the reduction is exact to < 1 unit (truncated digits of frac(2**11j c)
    times 11-bit pieces, plus the fraction's product); x = 2π|s| adds < 8; sin x, cos x < 4 more (each
    product < 1.02 unit, |x| < 0.0123, the series' tails < 2**-12m-8); the table products and the sum < 4.
    Tiny turns are computed scaled by 2**e and the same bounds hold in the scaled units.
    """
    xp = ops.xp
    reduce = freq["reduce"]  # (pieces, ..., digits)
    columns = None
    for j in range(_PIECES):
        piece = (whole >> (_PIECE_BITS * j)) & ((1 << _PIECE_BITS) - 1)
        part = piece[..., None] * reduce[j][..., : m + 2]
        columns = part if columns is None else columns + part
    turn = _lazy(ops, columns)[..., : m + 1]
    zero = whole * 0
    tiny = None
    e = zero
    if fraction is not None:
        # tiny turns: whole = 0 and |f| c < 2**-12, scaled by 2**e = 2**12(s + u)
        tiny = (whole == 0) & (fraction * freq["rate_float"] < 2.0**-13)
        _, exponent = xp.frexp(fraction)
        s = ops.where(tiny & (exponent < 0), (-exponent) // LIMB_BITS, 0)
        # float64 fractions reach 2**-1074 (s <= 89), narrower ones 2**-149 (s <= 12)
        wide = fraction.dtype == xp.float64
        s = ops.clip(s, 0, 127 if wide else 15)
        scaled = fraction
        for bit in (1, 2, 4, 8, 16, 32, 64) if wide else (1, 2, 4, 8):
            scaled = ops.where((s & bit) != 0, scaled * float(2.0 ** (LIMB_BITS * bit)), scaled)
        u = ops.where(tiny, freq["steps"], 0)
        e = (s + u) * LIMB_BITS
        digits = _fraction_digits(ops, scaled, m)
        rate = ops.where(tiny[..., None], freq["scaled_rate"], freq["rate"])
        product = _mul(ops, digits, rate, m)
        turn = turn + ops.where(fraction_negative[..., None], -product, product)
    turn = _normalize(ops, turn)
    keep = zero != 0 if tiny is None else tiny
    turn = ops.concat([ops.where(keep, turn[..., 0], 0)[..., None], turn[..., 1:]], -1)  # mod 1
    # k = round(256 r), s = r - k/256
    k = (turn[..., 1] + 8) >> 4
    if tiny is not None:
        k = ops.where(tiny, 0, k)
    zk = k * 0
    step = ops.stack([zk, 16 * k] + [zk] * (m - 1), -1)
    s_negative, s_magnitude = _magnitude(ops, turn - step)
    x = _mul(ops, s_magnitude, freq["two_pi"], m)
    z = _mul(ops, x, x, m)
    if tiny is not None:
        z = _shift_down(ops, z, 2 * (e // LIMB_BITS), m)
    sin_x, cos_x = _series(ops, x, z, m, freq["factorials"])
    index = k & 255
    table = freq["table"]
    sk, ck = table["sin_digits"][index], table["cos_digits"][index]
    sk_neg, ck_neg = table["sin_neg"][index], table["cos_neg"][index]
    sin = _signed_sum(
        ops, [(sk_neg, _mul(ops, sk, cos_x, m)), (ck_neg != s_negative, _mul(ops, ck, sin_x, m))]
    )
    cos = _signed_sum(
        ops, [(ck_neg, _mul(ops, ck, cos_x, m)), (sk_neg == s_negative, _mul(ops, sk, sin_x, m))]
    )
    return sin, cos, e


def _series(ops: Backend, x: Any, z: Any, m: int, factorials: Any) -> tuple[Any, Any]:
    """sin x = x (1 - z (1/3! - z (1/5! - ...))) and cos x = 1 - z (1/2! - z (1/4! - ...)), z = x²
    (z may be scaled down with x scaled up, for tiny turns); terms to x**(2K+1) with the tail < 2**-12m-8."""
    terms = 1
    while -6.35 * (2 * terms + 2) - math.log2(math.factorial(2 * terms + 2)) > -(LIMB_BITS * m + 8):
        terms += 1
    zero = z * 0
    start = (factorials[2 * terms + 1][: m + 1] + zero, factorials[2 * terms][: m + 1] + zero)

    def step(j: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        p, q = state
        k = terms - 1 - j
        p = _lazy(ops, ops.index_first(factorials, 2 * k + 1)[: m + 1] - _mul(ops, z, p, m))
        q = _lazy(ops, ops.index_first(factorials, 2 * k)[: m + 1] - _mul(ops, z, q, m))
        return p, q

    p, q = ops.loop(terms, step, start)
    return _mul(ops, x, p, m), q
