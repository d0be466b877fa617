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

import math

import torch

from ... import layouts, portable
from ...portable import rounding
from ...portable.host import FORMATS, SETTLE_EXTRA
from . import encode_launch, first_launch
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

#: Tables of at most this many values are the encodings of their positions (:func:`encode`: angle addition
#: from the kept levels, two launches), not the four launches of a table's own angle addition: a decode
#: step's one row (int offset) took 518 us eager that way against 16 us for a slice of a table (H200,
#: 2026-11-27, benchmarks/device_native.py).
SMALL_TABLE = 1 << 16
#: The formats the table kernels build (their codes: encode_launch.OUT_KINDS, shared with the encode kernel).
TABLE_FORMATS = ("float32", "float16", "bfloat16")
#: Elements of one combining program's block.
_BLOCK = 1024
#: Elements of one block of the exact algorithm where the caller names none (the anchor rows, the levels, a
#: step of the settling program): a GPU's register budget. Triton's CPU interpreter takes about as long for
#: a block of any size, so its runs (tests/support/interpreted.py, the dry runs) raise it.
EXACT_BLOCK = 128
#: The most settling programs a launch takes: past it, a block's sub-blocks are shared by fewer programs
#: (one a block at most). Most programs read flags of 0 and stop, but each still takes its turn: on an H200
#: (2026-11-28) a program per sub-block made table(131072, 1024) 1.42 ms against 0.82 (524288 programs) and
#: (8, 2048) ids 201 us against 160 (65536), while the fused rotary's rows (2048) lost their 0.3 ms tail.
#: On 2026-11-29 (benchmarks/ids_sweep.py, (8, 2048) ids) the settling launch added 24 us with 16384
#: programs and 12-14 us with 8192, where one exact evaluation (its floor once anything is uncertain)
#: takes ~18 us (the fused rows' 2048 programs: 20 us). Programs settle only the sub-blocks their flags
#: name, so sharing a block pays only where several of its sub-blocks are uncertain.
SETTLE_PROGRAMS = 1 << 13


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
    count = request.count

    def build() -> portable.Request:
        return request._replace(
            fmt="float64", layout="sin_cos", d_model=2 * count, sin_columns=count, cos_columns=count
        )

    return per_request(_ANCHOR_REQUESTS, (id(request),), request, build)


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
    """(table, flags): the ``(length, d_model)`` table of positions ``start ..`` on ``where`` in the
    request's format, and each combining program's flags: which of its sub-blocks (:func:`sub_rows`) held
    an uncertain value, left to the settling launch (0: none).

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
    exact_r, exact_f = exact_block or (max(1, EXACT_BLOCK // exact_f), exact_f)
    exact = {"block_rows": exact_r, "block_freqs": exact_f}
    first = encode_launch.launch(torch.arange(block, device=where), None, wide, **exact)[0]
    anchors = torch.arange(start, start + length, block, device=where)
    anchors = encode_launch.launch(anchors, None, wide, **exact)[0]
    written = out.view(torch.int16) if fmt == "bfloat16" else out
    sin_offset, cos_offset, stride = layouts.placement(request.layout, count)
    columns = (request.sin_columns, request.cos_columns, sin_offset, cos_offset, stride)
    constants = constants_on(request, where)
    guard = on_device(where)
    with guard:  # triton launches on the current device
        launcher(kernels.table_kernel)[grid](
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
            SUB_R=sub_rows((block_r, block_f), exact),
            num_warps=8,  # 4 values a thread
            enable_fp_fusion=False,  # the band bounds separately rounded products and sums
        )
        if settle:
            _settle(
                kernels,
                grid,
                written,
                uncertain,
                None,
                start,
                length,
                request,
                (block_r, block_f),
                exact,
            )
    return out, uncertain


def _settle(
    kernels, grid, written, uncertain, ids, start, rows, request, block, exact
) -> None:  # fmt: skip
    """The settling launch after a combining one: the sub-blocks flagged as holding an uncertain value,
    recomputed exactly (positions ``start + row``, or the ids where given: :func:`_ids_arguments`'s)."""
    has_offset = ids is not None and ids[1] is not ids[0]
    subs, numbers, options = _settle_plan(request, block, exact, ids is not None, has_offset)
    # programs sharing a block's sub-blocks: all of them, unless the grid would pass SETTLE_PROGRAMS (most
    # programs read a count of 0 and stop, but a 255-register program still takes its turn on an SM)
    split = max(1, min(subs, SETTLE_PROGRAMS // (grid[0] * grid[1])))
    launcher(kernels.settle_kernel)[(grid[0] * split, grid[1])](
        written,
        uncertain,
        *(ids or (written, written, 1, 0, 0, 0, 0)),
        *constants_on(request, written.device),
        start,
        rows,
        *numbers,
        **options,
        SPLIT=split,
        num_warps=4,
        num_stages=1,
        enable_fp_fusion=False,
    )


_SETTLE_PLANS: dict[tuple, tuple] = {}


def _settle_plan(
    request: portable.Request, block: tuple[int, int], exact: dict, has_ids: bool, has_offset: bool
) -> tuple[int, tuple[int, ...], dict]:
    """(sub-blocks a block, the request's numbers, the compile-time constants) of a settling launch: what
    depends on the request and the blocks only, worked out once (bounded cache; a decode step's budget)."""

    def build() -> tuple[int, tuple[int, ...], dict]:
        fmt = request.fmt
        precision, emin = FORMATS[fmt]
        limbs = request.limbs + SETTLE_EXTRA
        block_r, block_f = block
        sub_r = sub_rows(block, exact)
        sin_offset, cos_offset, stride = layouts.placement(request.layout, request.count)
        numbers = (
            request.count,
            request.sin_columns,
            request.cos_columns,
            sin_offset,
            cos_offset,
            stride,
            request.d_model,
        )
        options = {
            "M": request.limbs,
            "TERMS": series_terms(request.limbs),
            "M_SETTLE": limbs,
            "TERMS_SETTLE": series_terms(limbs),
            "DELTA": rounding.DELTA_UNITS,
            "PRECISION": precision,
            "EMIN": emin,
            "OUT_KIND": encode_launch.OUT_KINDS[fmt],
            "BLOCK_R": block_r,
            "BLOCK_F": block_f,
            "SUB_R": sub_r,
            "HAS_IDS": has_ids,
            "HAS_OFFSET": has_offset,
        }
        return -(-block_r // sub_r), numbers, options

    key = (id(request), block, exact["block_rows"], exact["block_freqs"], has_ids, has_offset)
    return per_request(_SETTLE_PLANS, key, request, build)


def sub_rows(block: tuple[int, int], exact: dict) -> int:
    """Rows of a settling step (the combining programs flag their blocks' uncertain values by sub-blocks of
    this many rows, :func:`table_kernel._flags`): an exact block's elements over the combining block's
    frequencies."""
    block_r, block_f = block
    return min(block_r, max(1, exact["block_rows"] * exact["block_freqs"] // block_f))


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
    return encode(positions, request)


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


# --- position ids by angle addition ---------------------------------------------------------------------

#: The rows of the levels of position ids: 256 per level (table_kernel.LEVELS of table_kernel.LEVEL_BITS).
LEVEL_ROWS = 4 * 256
#: Bytes of levels kept on the devices at once (the least recently built go first); a request whose levels
#: alone would take over a quarter of it takes the encode kernel.
LEVELS_BYTES = 256 << 20
_LEVELS: dict[tuple[int, str], tuple[portable.Request, torch.Tensor]] = {}


def levels(
    request: portable.Request, where: torch.device, exact_block: tuple[int, int] | None = None
) -> torch.Tensor | None:
    """The exact float64 [sin | cos] rows of positions k·256**j (k < 256, j < 4) for ``request`` on
    ``where``: (LEVEL_ROWS, 2·count), built by the encode kernel the first time (one host sync, so that
    every stream sees them; none inside a CUDA graph capture: None there) and kept (bounded, per request
    and device). None where they would be too large."""
    key = (id(request), str(where))
    cached = _LEVELS.get(key)
    if cached is not None and cached[0] is request:
        return cached[1]
    size = LEVEL_ROWS * 2 * request.count * 8
    capturing = where.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if size > LEVELS_BYTES // 4 or capturing:
        return None
    parts = torch.arange(256, dtype=torch.int64)
    positions = (parts[None, :] * (256 ** torch.arange(4, dtype=torch.int64))[:, None]).reshape(-1)
    exact_f = min(next_power_of_2(request.count), 64)
    exact_r, exact_f = exact_block or (max(1, EXACT_BLOCK // exact_f), exact_f)
    rows = encode_launch.launch(
        positions.to(where), None, anchor_request(request), block_rows=exact_r, block_freqs=exact_f
    )[0]
    if where.type == "cuda":
        mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode(0)
        try:
            torch.cuda.synchronize(where)
        finally:
            torch.cuda.set_sync_debug_mode(mode)
    while _LEVELS and sum(t.numel() * 8 for _, t in _LEVELS.values()) + size > LEVELS_BYTES:
        del _LEVELS[next(iter(_LEVELS))]
    _LEVELS[key] = (request, rows)
    return rows


def ids_launch(
    positions: torch.Tensor,
    offset: torch.Tensor | None,
    request: portable.Request,
    *,
    block_rows: int | None = None,
    block_freqs: int | None = None,
    exact_block: tuple[int, int] | None = None,
    band_floor: float = 0.0,
    settle: bool = True,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(encodings, flags) of integer ``positions`` (+ integer ``offset``, broadcast against them) by
    angle addition from the levels (:func:`levels`; None where they are not available), certified per
    element and settled on the device; the arguments as :func:`launch`'s."""
    where = positions.device
    rows_of = levels(request, where, exact_block)
    if rows_of is None:
        return None
    kernels = kernel_module("table_kernel")
    shape, ids = _ids_arguments(positions, offset)
    (block_r, block_f), exact, numbers, options = _ids_plan(request, block_rows, block_freqs, exact_block)
    rows = math.prod(shape)
    out = torch.empty((rows, request.d_model), dtype=getattr(torch, request.fmt), device=where)
    grid = (math.ceil(rows / block_r), math.ceil(request.count / block_f))
    uncertain = torch.empty(grid[0] * grid[1], dtype=torch.int32, device=where)
    if not out.numel():
        return out.reshape(*shape, request.d_model), uncertain
    written = out.view(torch.int16) if request.fmt == "bfloat16" else out
    with on_device(where):  # triton launches on the current device
        launcher(kernels.ids_kernel)[grid](
            ids[0],
            ids[1],
            rows_of,
            constants_on(request, where)[4],  # the turn rates as float32: the error bands
            written,
            uncertain,
            rows,
            *ids[2:],
            *numbers,
            band_floor,
            **options,
            HAS_OFFSET=offset is not None,
            num_warps=8,
            enable_fp_fusion=False,  # the band bounds separately rounded products and sums
        )
        if settle:
            _settle(kernels, grid, written, uncertain, ids, 0, rows, request, (block_r, block_f), exact)
    return out.reshape(*shape, request.d_model), uncertain


_IDS_PLANS: dict[tuple, tuple] = {}


def _ids_plan(
    request: portable.Request,
    block_rows: int | None,
    block_freqs: int | None,
    exact_block: tuple[int, int] | None,
) -> tuple[tuple[int, int], dict, tuple[int, ...], dict]:
    """((rows, frequencies) of a combining program, the exact block, the request's numbers, the compile-time
    constants) of an ids launch: what depends on the request and the blocks only, worked out once (bounded
    cache; a decode step's budget)."""

    def build() -> tuple[tuple[int, int], dict, tuple[int, ...], dict]:
        count = request.count
        block_f = block_freqs or min(next_power_of_2(count), 128)
        block_r = block_rows or max(1, _BLOCK // block_f)
        exact_f = min(next_power_of_2(count), 64)
        exact_r, exact_f = exact_block or (max(1, EXACT_BLOCK // exact_f), exact_f)
        exact = {"block_rows": exact_r, "block_freqs": exact_f}
        options = {
            "OUT_KIND": encode_launch.OUT_KINDS[request.fmt],
            "BLOCK_R": block_r,
            "BLOCK_F": block_f,
            "SUB_R": sub_rows((block_r, block_f), exact),
        }
        return (block_r, block_f), exact, (count, *columns(request)), options

    return per_request(_IDS_PLANS, (id(request), block_rows, block_freqs, exact_block), request, build)


def _ids_arguments(positions: torch.Tensor, offset: torch.Tensor | None) -> tuple[tuple[int, ...], tuple]:
    """(shape, (positions, offsets, inner, positions' strides (2), offsets' strides (2))): the ids broadcast
    against the offsets as (outer, inner) views (stride 0 where broadcast), read so by the kernels; copied
    only where a shape of three or more axes does not flatten to two. The offsets are the positions
    themselves where there are none."""
    shape = tuple(positions.shape) if offset is None else _broadcast(positions.shape, offset.shape)
    views = []
    for x in (positions, offset if offset is not None else positions):
        x = x if x.shape == shape else x.expand(shape)
        if len(shape) == 0:
            x = x.reshape(1, 1)
        elif len(shape) == 1:
            x = x[None]
        elif len(shape) > 2:
            flat = x.view(-1, shape[-1]) if x.is_contiguous() else x.reshape(-1, shape[-1]).contiguous()
            x = flat
        views.append(x)
    (p, o), inner = views, (shape[-1] if shape else 1)
    o = p if offset is None else o
    return shape, (p, o, max(inner, 1), *p.stride(), *o.stride())


def _broadcast(a: torch.Size, b: torch.Size) -> tuple[int, ...]:
    """``torch.broadcast_shapes(a, b)`` of two shapes of plain ints (the callers checked that they
    broadcast): a few comparisons where torch's general one costs ~10 us, a decode step's budget."""
    if a == b:
        return tuple(a)
    a, b = (1,) * (len(b) - len(a)) + tuple(a), (1,) * (len(a) - len(b)) + tuple(b)
    shape = tuple(y if x == 1 else x for x, y in zip(a, b, strict=True))
    if any(x not in (1, n) for x, n in zip(a + b, shape + shape, strict=True)):
        raise ValueError(f"positions of shape {tuple(a)} and offset of shape {tuple(b)} do not broadcast")
    return shape


def ids_run_here(positions: torch.Tensor, offset: torch.Tensor | None, request: portable.Request) -> bool:
    """Whether integer position ids (+ offset) take angle addition here: :func:`runs_here`, integer
    positions and offset, and levels of a size :func:`levels` keeps."""
    return (
        not positions.is_floating_point()
        and (offset is None or not offset.is_floating_point())
        and runs_here(positions.device, request)
        and LEVEL_ROWS * 2 * request.count * 8 <= LEVELS_BYTES // 4
    )


def encode(
    positions: torch.Tensor, request: portable.Request, offset: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`posenc.portable.encode` of torch tensors where they are, the fastest way the device has: on
    CUDA (with triton) integer ids by angle addition (:func:`ids`), other positions by the exact kernel;
    elsewhere the portable algorithm (:func:`~posenc.torch.kernels.encode_launch.encode`); the same bits
    every way."""
    if ids_run_here(positions, offset, request):
        found = ids(positions, request, offset)
        if found is not None:
            return found
    return encode_launch.encode(positions, request, offset)


def ids(
    positions: torch.Tensor, request: portable.Request, offset: torch.Tensor | None = None
) -> torch.Tensor | None:
    """The encodings of integer ``positions`` (+ ``offset``) by angle addition once its first-launch probe
    passed, or None (the caller takes the encode kernel): levels not available (a CUDA graph capture before
    the first call), or the probe failed."""
    if not _ids_trusted(positions.device, request, offset is not None):
        return None
    found = ids_launch(positions, offset, request)
    return None if found is None else found[0]


def _ids_trusted(where: torch.device, request: portable.Request, with_offset: bool) -> bool:
    spec = {**specialization(request), "ids": True, "offset": with_offset}

    def inputs() -> tuple[torch.Tensor, torch.Tensor | None]:
        return encode_launch.probe_positions("int", with_offset, where)

    def run() -> torch.Tensor:
        found = ids_launch(*inputs(), request)
        if found is None:
            raise RuntimeError("no levels")
        return found[0]

    def reference() -> torch.Tensor:
        positions, offset = inputs()
        return portable.encode(portable.backend_of(positions), positions, request, offset)

    return first_launch.trusted("ids", where, spec, run, reference)
