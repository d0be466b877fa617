"""A time embedding of periods (π0's action-time embedding, transformers' ``PI0TimestepEmbeddings``, as
openpi writes it): what posenc reads of it, how it is proven, and its exact equivalent :class:`PeriodTime`.

The formula: for times t (reals, π0's flow-matching time in [0, 1]) and n = width / 2 frequencies

    ω_k = 2π / (min_period · (max_period / min_period)^(k / (n − 1))),   k = 0 .. n − 1,

the output is ``[sin(t ω_0) .. sin(t ω_{n−1}) | cos(t ω_0) .. cos(t ω_{n−1})]`` in float32. Written from the
longest period, j = n − 1 − k, ω = (π/2) · (4 / max_period) · (max_period / min_period)^(j / (n − 1)): LTX's
frequencies (:func:`posenc.torch.ltx.law`, theta = max_period / min_period) at x = t · 4 / max_period. posenc
evaluates them so (:func:`posenc.torch.ltx.exact_sin_cos`: the quarter turns, t ω a whole number of π/2,
exactly; every other value correctly rounded), which needs x exact — max_period a power of two — and theta
exact — max_period / min_period a whole number (π0's 4.0 and 0.004: 1000). Others are not read.

The proof (:func:`prove_period_time`): its own values at :data:`PROBE_TIMES` against posenc's, shapes
included, each within what float32 code errs at that time and frequency.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core import highprec
from ..errors import PosencTypeError
from .computed import Refusal, forward_names, probed, within_rounding
from .ltx import exact_sin_cos
from .tensors import _no_derivative

__all__ = ["PROBE_TIMES", "PeriodTime", "prove_period_time", "read_period_time"]

#: The forward signature read.
FORWARD = ("time",)
#: The times a module of the form is proven and audited at: 0 .. 1 in steps of 1/512 (its range), then
#: 1 .. 64 (beyond it, where float32 code's error grows with t).
PROBE_TIMES = np.concatenate([np.arange(513) / 512, np.arange(2, 65, dtype=np.float64)])


class PeriodTime(nn.Module):
    """posenc's exact values in place of a time embedding of periods (module docstring), called as the
    original is: ``(time)`` ``(B,)`` reals -> ``(B, width)`` float32 (float64 for float64 times, as the
    original's product promotes them; within 1 ulp), ``[sin | cos]``, on ``time``'s device. No derivative
    in the times: times that require a gradient are refused. ``min_period`` and ``max_period`` as written
    in the config (max_period a power of two, max_period / min_period a whole number).

    >>> PeriodTime(4, 0.004, 4.0)(torch.tensor([0.0, 0.5]))
    tensor([[0.0000, 0.0000, 1.0000, 1.0000],
            [0.0000, 0.7071, 1.0000, 0.7071]])
    """

    def __init__(self, width: int, min_period: float, max_period: float) -> None:
        super().__init__()
        why = unsupported(width, min_period, max_period)
        if why is not None:
            raise ValueError(why)
        self.width, self.min_period, self.max_period = int(width), float(min_period), float(max_period)
        self.theta = float(ratio(min_period, max_period))

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        count = self.width // 2
        _no_derivative(time, "time", "posenc's π0 time embedding")
        if time.dtype == torch.bool or time.is_complex():
            raise PosencTypeError(
                f"time must be a tensor of real numbers; got a {str(time.dtype).removeprefix('torch.')} "
                f"tensor of shape {tuple(time.shape)}: pass the times as real numbers, e.g. time.float()",
                parameter="time",
            )
        x = time.detach().to("cpu", torch.float64).reshape(-1).numpy() * (4.0 / self.max_period)  # exact
        if not np.isfinite(x).all() or np.abs(x).max(initial=0.0) >= 2**31:
            raise ValueError(
                f"time: each t · 4 / max_period must be finite and below 2**31 in magnitude; got "
                f"{time.reshape(-1)[:3].tolist()}: give finite times"
            )
        # float32, as the original's float32 frequencies make it; float64 times make its product float64
        dtype = "float64" if time.dtype == torch.float64 else "float32"
        sin, cos = exact_sin_cos(x, self.theta, count, dtype)  # columns from the longest period: reversed
        values = np.concatenate([sin[:, ::-1], cos[:, ::-1]], axis=1)
        return torch.from_numpy(np.ascontiguousarray(values)).reshape(*time.shape, self.width).to(time.device)

    def extra_repr(self) -> str:
        return f"width={self.width}, min_period={self.min_period:g}, max_period={self.max_period:g}"


def ratio(min_period: float, max_period: float) -> decimal.Decimal:
    """max_period / min_period of the numbers as written (their shortest decimal forms), exactly."""
    # not decimal.Context(prec=60): that copies the rounding and traps of decimal.DefaultContext
    context = highprec.context(60)
    return context.divide(decimal.Decimal(repr(float(max_period))), decimal.Decimal(repr(float(min_period))))


def unsupported(width: Any, min_period: Any, max_period: Any) -> str | None:
    """Why posenc has no exact equivalent of these (module docstring), or None."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (min_period, max_period))
    if not isinstance(width, int) or isinstance(width, bool) or width < 4 or width % 2:
        return f"width: {width!r}; a time embedding of periods has an even width of at least 4"
    if not numbers or not 0 < min_period < max_period or not math.isfinite(max_period):
        return f"periods {min_period!r} .. {max_period!r}: they must be numbers 0 < min_period < max_period"
    if math.frexp(float(max_period))[0] != 0.5:
        return f"max_period {max_period:g} is not a power of two: t · 4 / max_period would be rounded"
    theta = ratio(min_period, max_period)
    if theta != theta.to_integral_value() or theta >= 2**53:
        return f"max_period / min_period is {theta:g}, not a whole number: its frequencies are not LTX's law"
    return None


def read_period_time(module: nn.Module) -> PeriodTime | None:
    """posenc's equivalent of ``module`` where its forward is ``(time)``, its ``config`` names
    ``min_period`` and ``max_period`` posenc has an exact equivalent of (module docstring) and it holds one
    vector of n frequencies (a buffer ``*freq*``): width 2n; else None. Whether it computes what they say
    is :func:`prove_period_time`'s to tell."""
    if isinstance(module, PeriodTime):  # posenc's own, patched in
        return module
    if forward_names(module) != FORWARD:
        return None
    config = getattr(module, "config", None)
    periods = getattr(config, "min_period", None), getattr(config, "max_period", None)
    held = [b for n, b in module.named_buffers(recurse=False) if "freq" in n and b.dim() == 1]
    if len(held) != 1 or unsupported(2 * held[0].numel(), *periods) is not None:
        return None
    return PeriodTime(2 * held[0].numel(), *periods)


def frequencies(exact: PeriodTime) -> np.ndarray:
    """ω_k (float64 nearest), k = 0 .. n − 1: 2π / (min_period · theta^(k / (n − 1)))."""
    count = exact.width // 2
    k = np.arange(count, dtype=np.float64)
    return 2 * np.pi / (exact.min_period * exact.theta ** (k / (count - 1)))


def prove_period_time(module: nn.Module, exact: PeriodTime) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_period_time`)
    at :data:`PROBE_TIMES`; else why not."""
    times = torch.from_numpy(PROBE_TIMES.astype(np.float32))
    mine = probed(lambda: module(times))
    if isinstance(mine, Refusal):
        return mine
    if not isinstance(mine, torch.Tensor):
        return f"its forward returns {type(mine).__name__}, not a tensor"
    ours = exact(times)
    if mine.shape != ours.shape:
        return f"its values have shape {tuple(mine.shape)}, not {tuple(ours.shape)}"
    checked = within_rounding(mine, ours, times.double().numpy(), frequencies(exact), "half")
    if isinstance(checked, float):
        named = f"periods {exact.min_period:g} .. {exact.max_period:g}, width {exact.width}, [sin | cos]"
        return f"not the time embedding its config names ({named}) within float32 rounding ({checked:.3g})"
    return checked
