"""The first-launch guard of posenc's Triton kernels: a new Triton, compiler or driver could miscompile a
kernel and give wrong values without an error. The first time a specialization of a kernel is launched on a
device in a process, its launcher runs it once on a small probe block and compares the bits with the portable
algorithm (:mod:`posenc.portable`) on the same device:

- equal: the kernel computes that specialization from then on (each later call costs a dictionary look-up);
- different, or the launch raised: one :class:`KernelMismatchWarning` naming the kernel, the specialization
  and the first differing value, and the portable algorithm computes that specialization from then on (the
  bits the kernel should have given; slower: many small kernels instead of one).

:func:`kernel_status` lists every probe and its outcome. The probe costs one launch on a small block, the
portable algorithm on that block and one host sync, once per specialization and process (measured by
``scripts/kernel_guard.py``). The sync is made with sync-debug mode off. No probe runs while a CUDA graph is
being captured (a sync there is an error): a specialization first met inside a capture runs the portable
algorithm for that call, which the graph captures, and is probed at its next call outside a capture.

A specialization is what the launcher compiles the kernel for: the output dtype, the positions' kind, an
offset or not, the arithmetic's limbs, the block sizes (``specialization`` in each launcher); the probe runs
it on the request at hand.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

__all__ = ["KernelMismatchWarning", "kernel_status", "trusted"]


class KernelMismatchWarning(RuntimeWarning):
    """A posenc Triton kernel gave other bits than the portable algorithm on its first-launch probe (or its
    launch failed); the portable algorithm computes that specialization from then on."""


@dataclass(frozen=True)
class Probe:
    """One first-launch probe: the kernel, the device, the specialization, the outcome and its cost."""

    kernel: str
    device: str
    specialization: dict[str, Any]
    #: "verified" (the kernel runs) or "mismatch" (the portable algorithm runs instead)
    status: str
    #: for a mismatch, the first differing value (or the launch's error)
    detail: str
    #: the probe's wall time (the kernel's first launch, which may compile it, included)
    seconds: float


_PROBES: dict[tuple[str, str, tuple], Probe] = {}
#: Reentrant: a probe may launch kernels with probes of their own (the fused rotary apply reads the rows of
#: the angle-addition and encode kernels).
_LOCK = threading.RLock()

#: The outcome that lets the kernel run.
VERIFIED = "verified"


def kernel_status() -> list[dict[str, Any]]:
    """Every first-launch probe of this process: a list of dicts (kernel, device, specialization, status
    ``"verified"`` or ``"mismatch"``, detail, seconds), in the order they ran; the caller's own copy.

    >>> import posenc.torch as pt
    >>> isinstance(pt.kernel_status(), list)
    True
    """
    with _LOCK:
        return [asdict(probe) for probe in _PROBES.values()]


def trusted(
    kernel: str,
    where: torch.device,
    specialization: dict[str, Any],
    run: Callable[[], Any],
    reference: Callable[[], Any],
) -> bool:
    """Whether ``kernel`` may compute ``specialization`` on ``where``: probed once per process (``run()``,
    the kernel on the probe block, against ``reference()``, the portable algorithm on it; tensors or tuples
    of tensors), then remembered. False inside a CUDA graph capture while not yet probed."""
    key = (kernel, str(where), tuple(sorted(specialization.items())))
    found = _PROBES.get(key)
    if found is None:
        if where.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return False
        with _LOCK:
            found = _PROBES.get(key)
            if found is None:
                found = _probe(kernel, where, specialization, run, reference)
                _PROBES[key] = found
        if found.status != VERIFIED:
            shown = ", ".join(f"{k}={v}" for k, v in specialization.items())
            warnings.warn(
                f"posenc's {kernel} kernel on {where} ({shown}) failed its first-launch check: "
                f"{found.detail}; posenc computes this specialization with the portable algorithm from now "
                "on (the exact bits, slower). Please report it with posenc.torch.kernel_status(), the triton "
                "and driver versions.",
                KernelMismatchWarning,
                stacklevel=4,
            )
    return found.status == VERIFIED


def _probe(
    kernel: str,
    where: torch.device,
    specialization: dict[str, Any],
    run: Callable[[], Any],
    reference: Callable[[], Any],
) -> Probe:
    began = time.perf_counter()
    mode = torch.cuda.get_sync_debug_mode() if where.type == "cuda" else None
    if mode:
        torch.cuda.set_sync_debug_mode(0)
    try:
        try:
            got = run()
        except Exception as error:  # a launch or compile failure: the portable algorithm takes over
            detail = f"the launch raised {type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
        else:
            detail = _first_difference(got, reference())
        if where.type == "cuda":
            torch.cuda.synchronize(where)
    finally:
        if mode:
            torch.cuda.set_sync_debug_mode(mode)
    status = VERIFIED if detail is None else "mismatch"
    seconds = time.perf_counter() - began
    return Probe(kernel, str(where), dict(specialization), status, detail or "", seconds)


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _first_difference(got: Any, want: Any) -> str | None:
    """None where ``got`` and ``want`` (tensors, or sequences of them) have the same dtypes, shapes and
    bits; else the first difference, in words."""
    got_all = list(got) if isinstance(got, Sequence) else [got]
    want_all = list(want) if isinstance(want, Sequence) else [want]
    for part, (a, b) in enumerate(zip(got_all, want_all, strict=True)):
        if a.dtype != b.dtype or a.shape != b.shape:
            theirs = f"the portable algorithm's {_name(b.dtype)} {tuple(b.shape)}"
            return f"output {part} is {_name(a.dtype)} {tuple(a.shape)}, {theirs}"
        bits = _BITS[a.element_size()]
        differ = (a.reshape(-1).view(bits) != b.reshape(-1).view(bits)).nonzero()
        if differ.numel():
            index = int(differ[0, 0])
            value, expected = a.reshape(-1)[index].item(), b.reshape(-1)[index].item()
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(index), a.shape))
            return (
                f"{int(differ.shape[0])} of {a.numel()} values differ; the first, output {part} "
                f"at {list(where)}, "
                f"is {value!r} where the portable algorithm gives {expected!r}"
            )
    return None


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def forget() -> None:
    """Forget every probe (tests: probe again in this process)."""
    with _LOCK:
        _PROBES.clear()
