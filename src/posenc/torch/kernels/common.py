"""What the launchers of posenc's Triton kernels share: the kernels' modules (None without triton), the
portable algorithm's host constants as tensors on the kernel's device, and the compile-time counts."""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any

import torch

from ... import portable

#: Devices the kernels run on (tests add "cpu" in a process that runs Triton's interpreter).
KERNEL_DEVICES = ["cuda"]


#: The oldest triton the kernels are built with in CI (tests/torch/test_kernel_compile.py: torch 2.10 and
#: 2.11 ship 3.6). With an older one the launchers leave the kernels alone and CUDA tensors take the portable
#: algorithm (the same bits, thousands of small kernels instead of one).
MIN_TRITON = (3, 6)


def triton_supported(version: str) -> bool:
    """Whether triton ``version`` (e.g. "3.6.0", "3.9.0+git1a2b") is at least :data:`MIN_TRITON`."""
    numbers = [int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:2]]
    return tuple(numbers) >= MIN_TRITON


@functools.cache
def kernel_module(name: str) -> Any:
    """``posenc.torch.kernels.<name>`` (a module of Triton kernels), imported now, or None where triton is
    not installed or older than :data:`MIN_TRITON`."""
    try:
        import triton
    except ImportError:
        return None
    if not triton_supported(getattr(triton, "__version__", "0")):
        return None
    return importlib.import_module(f"{__package__}.{name}")


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@functools.cache
def series_terms(m: int) -> int:
    """evaluate._series' count of Taylor terms for ``m`` limbs (the tail below 2**-12m-8)."""
    terms = 1
    while -6.35 * (2 * terms + 2) - math.log2(math.factorial(2 * terms + 2)) > -(12 * m + 8):
        terms += 1
    return terms


_CONSTANTS: dict[tuple[int, str], tuple[Any, tuple[torch.Tensor, ...]]] = {}


def constants_on(request: portable.Request, where: torch.device) -> tuple[torch.Tensor, ...]:
    """The request's host constants as tensors on ``where``, in the order the kernels take them
    (:func:`posenc.torch.kernels.algorithm._evaluate`): reduce, rate, scaled rate, steps, rate as float32,
    2π, 1/k!, the sine/cosine table (signs, digits), A. Cached per request and device (bounded)."""
    key = (id(request), str(where))
    cached = _CONSTANTS.get(key)
    if cached is not None and cached[0] is request:
        return cached[1]
    host, shared = request.constants, request.shared

    def tensor(array: Any, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        return torch.as_tensor(array).to(dtype).contiguous().to(where)

    amplitude = request.amplitude if request.amplitude is not None else shared["two_pi"] * 0
    tensors = (
        tensor(host.reduce),
        tensor(host.rate),
        tensor(host.scaled_rate),
        tensor(host.steps),
        tensor(host.rate_float, torch.float32),
        tensor(shared["two_pi"]),
        tensor(shared["factorials"]),
        tensor(shared["sin_neg"]),
        tensor(shared["sin_digits"]),
        tensor(shared["cos_neg"]),
        tensor(shared["cos_digits"]),
        tensor(amplitude),
    )
    if len(_CONSTANTS) > 64:
        _CONSTANTS.clear()
    _CONSTANTS[key] = (request, tensors)
    return tensors
