"""The launcher of :mod:`posenc.torch.kernels.table_kernel`: a table of positions ``start ..`` on CUDA by
angle addition, certified per element — the core's bits at a few float64 operations per value, where the exact
per-element kernel costs thousands. No host read: the length, start and options (Python values) decide the
launches, and every launch is on the device, so CUDA graphs capture it.

Four launches: the exact float64 rows of positions 0 .. B - 1 and start + a·B (the encode kernel, B =
isqrt(length), ~2·sqrt(length) rows), the combining kernel, and the settling kernel, which recomputes
exactly the few blocks holding an uncertain value. For float32, float16 and bfloat16 without an amplitude
(the other requests take the encode kernel over the positions).
"""

from __future__ import annotations

import contextlib
import math

import torch

from ... import layouts, portable
from ...portable import rounding
from ...portable.host import FORMATS, SETTLE_EXTRA
from . import encode_launch, first_launch
from .common import KERNEL_DEVICES, constants_on, kernel_module, next_power_of_2, series_terms

#: Tables of at most this many values take the encode kernel over their positions (one launch, and the
#: exact kernel's cost is small there), not the four launches of angle addition: a decode step's one row
#: (int offset) took 518 us eager against 16 us for a slice of a table, and its CUDA graph replayed in 48 us
#: against 15 us for the encode kernel's (H200, benchmarks/device_native.py).
SMALL_TABLE = 1 << 16
#: The formats the table kernels build (their codes: encode_launch.OUT_KINDS, shared with the encode kernel).
TABLE_FORMATS = ("float32", "float16", "bfloat16")
#: Elements of one combining program's block, and of one block of the exact algorithm (the anchor rows, a
#: step of the settling program).
_BLOCK = 1024
_EXACT_BLOCK = 128


def runs_here(where: torch.device, request: portable.Request) -> bool:
    """Whether the kernels build this request's tables on ``where`` (CUDA with triton; a 32- or 16-bit
    format with no amplitude)."""
    return (
        where.type in KERNEL_DEVICES
        and request.fmt in TABLE_FORMATS
        and request.amplitude is None
        and kernel_module("table_kernel") is not None
    )


_ANCHOR_REQUESTS: dict[int, tuple[portable.Request, portable.Request]] = {}


def anchor_request(request: portable.Request) -> portable.Request:
    """The request of the exact float64 rows the table combines: [sin | cos], every frequency. The same
    object for the same request (bounded cache), so its constants go to the device once
    (:func:`~posenc.torch.kernels.common.constants_on` keeps them per request)."""
    cached = _ANCHOR_REQUESTS.get(id(request))
    if cached is not None and cached[0] is request:
        return cached[1]
    count = request.count
    wide = request._replace(
        fmt="float64", layout="sin_cos", d_model=2 * count, sin_columns=count, cos_columns=count
    )
    if len(_ANCHOR_REQUESTS) > 64:
        _ANCHOR_REQUESTS.clear()
    _ANCHOR_REQUESTS[id(request)] = (request, wide)
    return wide


def launch(
    length: int,
    start: int,
    request: portable.Request,
    where: torch.device,
    *,
    block_rows: int | None = None,
    block_freqs: int | None = None,
    exact_block: tuple[int, int] | None = None,
    band_floor: float = 0.0,
    settle: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(table, uncertain): the ``(length, d_model)`` table of positions ``start ..`` on ``where`` in the
    request's format, and the count of uncertain values each combining program left to the settling one.

    ``block_rows``/``block_freqs`` are a combining program's block, ``exact_block`` the (rows, frequencies)
    of an exact one (tests: Triton's interpreter takes about as long for a block of any size); ``band_floor``
    widens the error bands to at least that, and ``settle=False`` skips the settling launch (tests: wide
    bands make values uncertain; without settling their fast values stay)."""
    kernels = kernel_module("table_kernel")
    count, fmt = request.count, request.fmt
    out = torch.empty((length, request.d_model), dtype=getattr(torch, fmt), device=where)
    block = max(1, math.isqrt(length))
    block_f = block_freqs or min(next_power_of_2(count), 128)
    block_r = block_rows or max(1, _BLOCK // block_f)
    grid = (math.ceil(length / block_r), math.ceil(count / block_f))
    uncertain = torch.empty(grid[0] * grid[1], dtype=torch.int32, device=where)  # every program writes
    if not out.numel():
        return out, uncertain
    wide = anchor_request(request)
    exact_f = min(next_power_of_2(count), 64)
    exact_r, exact_f = exact_block or (max(1, _EXACT_BLOCK // exact_f), exact_f)
    exact = {"block_rows": exact_r, "block_freqs": exact_f}
    first = encode_launch.launch(torch.arange(block, device=where), None, wide, **exact)[0]
    anchors = torch.arange(start, start + length, block, device=where)
    anchors = encode_launch.launch(anchors, None, wide, **exact)[0]
    written = out.view(torch.int16) if fmt == "bfloat16" else out
    sin_offset, cos_offset, stride = layouts.placement(request.layout, count)
    columns = (request.sin_columns, request.cos_columns, sin_offset, cos_offset, stride)
    constants = constants_on(request, where)
    guard = torch.cuda.device(where) if where.type == "cuda" else contextlib.nullcontext()
    with guard:  # triton launches on the current device
        kernels.table_kernel[grid](
            anchors,
            first,
            constants[4],  # the turn rates as float32: the error bands
            written,
            uncertain,
            length,
            block,
            max(abs(start), abs(start + length - 1)),
            count,
            *columns,
            request.sin_columns + request.cos_columns,
            request.d_model,
            band_floor,
            OUT_KIND=encode_launch.OUT_KINDS[fmt],
            BLOCK_R=block_r,
            BLOCK_F=block_f,
            num_warps=8,  # 4 values a thread
            enable_fp_fusion=False,  # the band bounds separately rounded products and sums
        )
        if settle:
            precision, emin = FORMATS[fmt]
            limbs = request.limbs + SETTLE_EXTRA
            kernels.settle_kernel[grid](
                written,
                uncertain,
                *constants,
                start,
                length,
                count,
                *columns,
                request.d_model,
                M=request.limbs,
                TERMS=series_terms(request.limbs),
                M_SETTLE=limbs,
                TERMS_SETTLE=series_terms(limbs),
                DELTA=rounding.DELTA_UNITS,
                PRECISION=precision,
                EMIN=emin,
                OUT_KIND=encode_launch.OUT_KINDS[fmt],
                BLOCK_R=block_r,
                BLOCK_F=block_f,
                SUB_R=min(block_r, max(1, exact_r * exact_f // block_f)),
                num_warps=4,
                num_stages=1,
                enable_fp_fusion=False,
            )
    return out, uncertain


def table(length: int, start: int, request: portable.Request, where: torch.device) -> torch.Tensor:
    """The table of positions ``start ..`` on ``where``: by angle addition where :func:`runs_here`, the
    table holds more than :data:`SMALL_TABLE` values and every position is valid (|p| < 2**31), else the
    encode kernel (or the portable algorithm) over the positions (the same bits; invalid positions give rows
    of NaN)."""
    valid = start > -(2**31) and start + length <= 2**31
    large = length * request.d_model > SMALL_TABLE
    if large and runs_here(where, request) and valid and _trusted(where, request):
        return launch(length, start, request, where)[0]
    positions = torch.arange(start, start + length, device=where, dtype=torch.int64)
    return encode_launch.encode(positions, request)


#: The probe's table: positions PROBE_START .. PROBE_START + PROBE_LENGTH - 1 (several anchors and blocks).
PROBE_START, PROBE_LENGTH = 99990, 64


def specialization(request: portable.Request) -> dict:
    """What the table kernels are compiled for on this call (their compile-time constants, in words)."""
    return {
        "dtype": request.fmt,
        "limbs": request.limbs,
        "block_freqs": min(next_power_of_2(request.count), 128),
        "exact_block_freqs": min(next_power_of_2(request.count), 64),
    }


def _trusted(where: torch.device, request: portable.Request) -> bool:
    def reference() -> torch.Tensor:
        positions = torch.arange(PROBE_START, PROBE_START + PROBE_LENGTH, device=where)
        return portable.encode(portable.backend_of(positions), positions, request)

    return first_launch.trusted(
        "table",
        where,
        specialization(request),
        lambda: launch(PROBE_LENGTH, PROBE_START, request, where)[0],
        reference,
    )
