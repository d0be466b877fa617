"""What the launchers of posenc's Triton kernels share: the kernels' modules (None without triton), the
portable algorithm's host constants as tensors on the kernel's device, and the compile-time counts."""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
from collections.abc import Callable
from typing import Any

import torch

from ... import layouts, portable

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


def columns(request: portable.Request) -> tuple[int, ...]:
    """Where the kernels store a request's values, in the order they take it: the sine and cosine columns
    kept, their first column and stride (:func:`posenc.layouts.placement`), the width they fill and
    d_model (past the width: +0)."""
    sin_offset, cos_offset, stride = layouts.placement(request.layout, request.count)
    width = request.sin_columns + request.cos_columns
    return request.sin_columns, request.cos_columns, sin_offset, cos_offset, stride, width, request.d_model


def per_request(cache: dict, key: tuple, request: Any, build: Callable[[], Any], limit: int = 64) -> Any:
    """``build()``, once per ``key`` (which holds ``id(request)``) while ``request`` lives: the cache keeps
    the request beside the value, so an id reused by a later object misses; past ``limit`` entries it starts
    over. How the launchers keep what a request needs on a device (a decode step cannot pay for it each
    call)."""
    found = cache.get(key)
    if found is not None and found[0] is request:
        return found[1]
    value = build()
    if len(cache) >= limit:
        cache.clear()
    cache[key] = (request, value)
    return value


_CONSTANTS: dict[tuple, tuple[Any, tuple[torch.Tensor, ...]]] = {}


def constants_on(request: portable.Request, where: torch.device) -> tuple[torch.Tensor, ...]:
    """The request's host constants as tensors on ``where``, in the order the kernels take them
    (:func:`posenc.torch.kernels.algorithm._evaluate`): reduce, rate, scaled rate, steps, rate as float32,
    2π, 1/k!, the sine/cosine table (signs, digits), A. Cached per request and device (bounded)."""

    def build() -> tuple[torch.Tensor, ...]:
        host, shared = request.constants, request.shared

        def tensor(array: Any, dtype: torch.dtype = torch.int32) -> torch.Tensor:
            return torch.as_tensor(array).to(dtype).contiguous().to(where)

        amplitude = request.amplitude if request.amplitude is not None else shared["two_pi"] * 0
        return (
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

    return per_request(_CONSTANTS, (id(request), where), request, build)


# --- the launch -------------------------------------------------------------------------------------------


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def arguments_key(args: tuple) -> tuple:
    """What Triton may specialize a kernel on for each argument, and more: a tensor's dtype and 16-byte
    alignment; an integer's width (32 or 64 bits, unsigned), divisibility by 16 and being 1; a float's
    and a bool's type. Two calls with equal keys run the same compiled kernel. (One loop, no call per
    argument: it runs at every launch.)"""
    key = []
    append = key.append
    for value in args:
        kind = value.__class__
        if kind is bool:
            append((bool, value))
        elif kind is torch.Tensor or isinstance(value, torch.Tensor):
            append((value.dtype, not value.data_ptr() & 15))
        elif kind is int or isinstance(value, int):
            # comparisons, not `in range(...)`: that tests an int subclass (an IntEnum) by iterating the range
            width = 32 if _INT32_MIN <= value <= _INT32_MAX else 64 if _I64_MIN <= value <= _I64_MAX else 65
            append((width, not value & 15, value == 1))
        else:
            append(kind)
    return tuple(key)


def on_device(where: torch.device) -> Any:
    """A context in which Triton launches on ``where`` (it launches on the current CUDA device): the device
    guard where ``where`` is another CUDA device than the current one, else nothing to do (the guard costs
    a few microseconds, a decode step's budget)."""
    if where.type != "cuda" or where.index is None or where.index == torch.cuda.current_device():
        return _NOTHING
    return torch.cuda.device(where)


_NOTHING = contextlib.nullcontext()


class Launcher:
    """``kernel[grid](*args, **constants)`` of a Triton kernel, with Triton's per-call host work done once per
    specialization: the first call of each (its arguments' :func:`arguments_key`, the constants, the device)
    goes through Triton (which compiles, or finds, the kernel it returns); later ones call that compiled
    kernel's own launcher directly, with the same arguments Triton passes it (scripts/compile_kernels.py
    --launch-args checks this with Triton's own binder). Triton's binding of a kernel's arguments, its cache
    key and its launch bookkeeping cost half a launch: 31.6 us by ``kernel[grid]`` against 15.8 us directly
    for a 36-argument kernel on an H200's host (benchmarks/launch_costs.py, 2026-11-28). Where a launch hook
    is set (a profiler), in Triton's interpreter, where CUDA is not initialized (compiles for a GPU not
    there), or for a kernel whose compiled form has no launcher, every call goes through Triton."""

    #: Specializations kept per kernel (each holds a compiled kernel Triton holds too).
    LIMIT = 256

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.names = tuple(getattr(kernel, "arg_names", ()))
        self.compiled: dict[tuple, tuple[Any, tuple]] = {}

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        return lambda *args, **options: self.launch(grid, args, options)

    def launch(self, grid: tuple[int, ...], args: tuple, options: dict[str, Any]) -> Any:
        if not _DIRECT or not self.names or not torch.cuda.is_initialized() or _hooked():
            return self.kernel[grid](*args, **options)
        device = torch.cuda.current_device()
        key = (arguments_key(args), tuple(options.items()), device)
        found = self.compiled.get(key)
        if found is None:
            compiled = self.kernel[grid](*args, **options)
            if hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"):
                if len(self.compiled) >= self.LIMIT:
                    self.compiled.clear()
                constants = tuple(options[name] for name in self.names[len(args) :])
                self.compiled[key] = (compiled, constants)
            return compiled
        compiled, constants = found
        x, y, z = (*grid, 1, 1)[:3]
        stream = _raw_stream(device)
        compiled.run(
            x, y, z, stream, compiled.function, compiled.packed_metadata, None, None, None, *args, *constants
        )
        return compiled


def _raw_stream(device: int) -> int:
    """The current CUDA stream of ``device`` as the driver's handle (``current_stream().cuda_stream``,
    without building a Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


#: Direct launches on a GPU; Triton's interpreter launches through Triton.
_DIRECT = os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


def _hooked() -> bool:
    """Whether Triton has a launch hook set (a profiler's): it must see every launch. True where triton has
    no ``knobs`` (the direct launch is then left alone)."""
    runtime = _knobs_runtime()
    return runtime is None or _set(runtime.launch_enter_hook) or _set(runtime.launch_exit_hook)


def _set(hook: Any) -> bool:
    """Whether a launch hook is set: a function, or a chain of them (Triton >= 3.5's ``HookChain``, always
    present: set when it holds a call)."""
    return hook is not None and bool(getattr(hook, "calls", True))


@functools.cache
def _knobs_runtime() -> Any:
    try:
        from triton import knobs
    except ImportError:
        return None
    return knobs.runtime


@functools.cache
def launcher(kernel: Any) -> Launcher:
    """The :class:`Launcher` of a Triton kernel (one per kernel)."""
    return Launcher(kernel)
