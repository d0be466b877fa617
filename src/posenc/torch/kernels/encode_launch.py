"""The launcher of :mod:`posenc.torch.kernels.encode_kernel`: ``torch.ops.posenc.exact`` on CUDA in one
kernel, no host read (the positions' values stay on the device; only shapes and dtypes decide the launch).

Its results are :func:`posenc.portable.encode`'s bits (the portable algorithm the other devices run), with one
difference beyond any natural input: the kernel settles every uncertain rounding, where the portable algorithm
settles up to :data:`~posenc.portable.settle.SETTLE_CAPACITY` per call. The kernel is compiled once per
machine and specialization (output dtype, positions' kind, offset or not, limbs): Triton caches it on disk.
"""

from __future__ import annotations

import math

import torch

from ... import portable
from ...portable import rounding
from ...portable.host import FORMATS, SETTLE_EXTRA
from . import first_launch
from .common import (
    KERNEL_DEVICES,
    columns,
    constants_on,
    kernel_module,
    launcher,
    next_power_of_2,
    on_device,
    per_request,
    series_terms,
)

#: Output dtypes by the code the kernels store them with (encode_kernel._store_values, and the table kernels,
#: whose settling kernel stores through it).
OUT_KINDS = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3}
#: Elements of one program's (positions x frequencies) block.
_BLOCK = 128


def runs_here(positions: torch.Tensor) -> bool:
    """Whether the kernel computes an encode on ``positions``' device (CUDA with triton)."""
    return positions.device.type in KERNEL_DEVICES and kernel_module("encode_kernel") is not None


def launch(
    positions: torch.Tensor,
    offset: torch.Tensor | None,
    request: portable.Request,
    *,
    block_rows: int | None = None,
    block_freqs: int | None = None,
    first_limbs: int | None = None,
    settle_limbs: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(encodings, uncertain): the encodings of ``positions`` (+ ``offset``, broadcast against them, added
    exactly), shape ``(*shape, d_model)`` in the request's dtype, and the count of values each program
    settled.

    ``block_rows``/``block_freqs`` are the program's block; ``first_limbs`` and ``settle_limbs`` override the
    limbs of the two evaluations (tests: few first limbs make most roundings uncertain).
    """
    kernels = kernel_module("encode_kernel")
    shape = tuple(positions.shape)
    if offset is not None:
        offset = offset.to(positions.device)
        positions, offset = torch.broadcast_tensors(positions, offset)
        shape = tuple(positions.shape)
        offset = offset.to(torch.int64).reshape(-1).contiguous()
    if positions.is_floating_point():
        wide = positions.dtype == torch.float64
        positions = positions if wide else positions.to(torch.float32)  # float16/bfloat16: exact
    else:
        wide = False
        positions = positions.to(torch.int64)
    positions = positions.reshape(-1).contiguous()
    fmt = request.fmt
    out = torch.empty(
        (positions.shape[0], request.d_model), dtype=getattr(torch, fmt), device=positions.device
    )
    limbs = (first_limbs, settle_limbs)
    (block_r, block_f), numbers, options = _plan(request, block_rows, block_freqs, limbs)
    grid = (math.ceil(positions.shape[0] / block_r), math.ceil(request.count / block_f))
    uncertain = torch.empty(grid[0] * grid[1], dtype=torch.int32, device=positions.device)  # one per program
    if not out.numel():
        return out.reshape(*shape, request.d_model), uncertain
    where = positions.device
    with on_device(where):  # triton launches on the current device
        launcher(kernels.encode_kernel)[grid](
            positions,
            positions if offset is None else offset,
            out.view(torch.int16) if fmt == "bfloat16" else out,
            *constants_on(request, where),
            uncertain,
            positions.shape[0],
            *numbers,
            **options,
            HAS_FRACTION=positions.is_floating_point(),
            WIDE=wide,
            HAS_OFFSET=offset is not None,
            num_warps=4,
            num_stages=1,  # no software pipelining: the loops are the kernel's one-iteration memory loops
            enable_fp_fusion=False,  # every float operation is exact or alone; keep it so on every compiler
        )
    return out.reshape(*shape, request.d_model), uncertain


_PLANS: dict[tuple, tuple] = {}


def _plan(
    request: portable.Request, block_rows: int | None, block_freqs: int | None, limbs: tuple
) -> tuple[tuple[int, int], tuple[int, ...], dict]:
    """((rows, frequencies) of a program, the request's numbers, the compile-time constants that depend on
    the request alone) of a launch, worked out once per request (bounded: a decode step's budget)."""

    def build() -> tuple[tuple[int, int], tuple[int, ...], dict]:
        count, fmt = request.count, request.fmt
        block_f = block_freqs or min(next_power_of_2(count), 64)
        block_r = block_rows or max(1, _BLOCK // block_f)
        wide_out = fmt == "float64"
        first_limbs, settle_limbs = limbs
        first = request.limbs + (SETTLE_EXTRA if wide_out else 0) if first_limbs is None else first_limbs
        settle = request.limbs + SETTLE_EXTRA if settle_limbs is None else settle_limbs
        precision, emin = FORMATS[fmt]
        options = {
            "M": first,
            "TERMS": series_terms(first),
            "M_SETTLE": settle,
            "TERMS_SETTLE": series_terms(settle),
            "SETTLE": not wide_out,
            "DELTA": rounding.DELTA_UNITS,
            "PRECISION": precision,
            "EMIN": emin,
            "OUT_KIND": OUT_KINDS[fmt],
            "HAS_AMPLITUDE": request.amplitude is not None,
            "BLOCK_R": block_r,
            "BLOCK_F": block_f,
        }
        return (block_r, block_f), (count, *columns(request)), options

    return per_request(_PLANS, (id(request), block_rows, block_freqs, limbs), request, build)


def encode(
    positions: torch.Tensor, request: portable.Request, offset: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`posenc.portable.encode` of torch tensors where they are: on CUDA (with triton) one launch of the
    exact kernel once its first-launch probe passed (:mod:`~posenc.torch.kernels.first_launch`), elsewhere
    (CPU, ``meta``, MPS, ...) the portable algorithm; the same bits either way. (Integer ids take angle
    addition first: :func:`posenc.torch.kernels.table_launch.encode`.)"""
    if runs_here(positions) and _trusted(positions, offset, request):
        return launch(positions, offset, request)[0]
    return portable.encode(portable.backend_of(positions), positions, request, offset)


def specialization(positions: torch.Tensor, offset: torch.Tensor | None, request: portable.Request) -> dict:
    """What the kernel is compiled for on this call (its compile-time constants, in words)."""
    kind = "int"
    if positions.is_floating_point():
        kind = "float64" if positions.dtype == torch.float64 else "float32"
    return {
        "dtype": request.fmt,
        "positions": kind,
        "offset": offset is not None,
        "limbs": request.limbs,
        "amplitude": request.amplitude is not None,
        "block_freqs": min(next_power_of_2(request.count), 64),
    }


#: The probe's positions: small and large, negative, near the int32 ends (integers); fractions, tiny and
#: large values (floats); all valid (|p| < 2**31), so that no row is NaN.
PROBE_INTS = (0, 1, 2, 3, 7, 31, 100, 1000, 4095, 65537, 1000003, 2**24 + 1, 2**30 + 5, 2**31 - 1, -1, -77777)
PROBE_FLOATS = (0.0, 0.5, 1.0, 2.5, 999.75, 1e-30, -3.25, 12345.678, 2.0**24, 0.1, 500.125, 1e6 + 0.5)
#: The probe's offsets (with positions 0 .. 15): the sums stay valid.
PROBE_OFFSETS = (0, 3000, 2**30, -5, 1, 123456, -(2**30), 7, 65535, 2**29 + 3, 0, 11, 4096, -1, 999999, 2)


def probe_positions(
    kind: str, with_offset: bool, where: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The probe block of a specialization: (positions, offset) of its kind on ``where``."""
    if with_offset:
        small = torch.arange(len(PROBE_OFFSETS))
        positions = small if kind == "int" else small * 0.75
        offset = torch.tensor(PROBE_OFFSETS, device=where)
    else:
        positions, offset = torch.tensor(PROBE_INTS if kind == "int" else PROBE_FLOATS), None
    dtype = {"int": torch.int64, "float32": torch.float32, "float64": torch.float64}[kind]
    return positions.to(dtype).to(where), offset


def _trusted(positions: torch.Tensor, offset: torch.Tensor | None, request: portable.Request) -> bool:
    spec = specialization(positions, offset, request)
    where = positions.device

    def inputs() -> tuple[torch.Tensor, torch.Tensor | None]:
        return probe_positions(spec["positions"], spec["offset"], where)

    return first_launch.trusted(
        "encode",
        where,
        spec,
        lambda: launch(*inputs(), request)[0],
        lambda: portable.encode(portable.backend_of(positions), inputs()[0], request, inputs()[1]),
    )
