"""The rotary apply, :func:`apply_rotary` (``posenc.torch.apply_rotary``): by given cos/sin, or by the exact
rotary angles of position ids: on CUDA, A·sin(p θ_i) and A·cos(p θ_i) of the distinct positions as float32
rows (angle addition, :func:`posenc.torch.kernels.table_launch.encode`), then one Triton kernel rotates q and
k by them (:mod:`posenc.torch.kernels.fused_kernel`), a pass over q and k at close to a copy's cost.

Its results are the bits of the unfused path: ``cos, sin = posenc.torch.rotary.cos_sin(position_ids,
params, dtype=torch.float32, layout=layout)`` then ``posenc.rope.apply_rotary(q, k, cos, sin,
layout=layout)`` — which is what it runs wherever the kernel does not (CPU and ``meta`` tensors, no triton,
inside ``torch.compile``, q or k that require grad (the kernel has no backward), float64 q/k, multimodal
sections, position ids that are not integers of shape (B, L)). Two differences, both beyond any natural
input: the kernels settle every uncertain rounding (the unfused path on a device settles up to
:data:`~posenc.portable.settle.SETTLE_CAPACITY` per call), and NaN results (invalid positions, NaN/inf in q
or k) carry the kernel's NaN bit pattern.

The rotation kernel is compiled once per machine and specialization (dtypes, layout, tile; Triton caches it
on disk).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .. import portable, rope
from ..errors import PosencTypeError
from ..rope.arrays import apply_rotary as rotate_arrays
from ..rope.arrays import arrange, check_layout, check_request
from . import operator, rotary
from .kernels import first_launch, table_launch
from .kernels.common import KERNEL_DEVICES, kernel_module, launcher, next_power_of_2, on_device
from .tensors import _position_tensor, _tracing

__all__ = ["apply_rotary", "by_positions", "launch"]

#: q/k dtypes the kernel takes, by the code of their bit patterns (fused_kernel._load_float).
_KINDS = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def apply_rotary(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
    *,
    position_ids: torch.Tensor | None = None,
    params: rope.RopeParameters | None = None,
    layout: str = "half",
    unsqueeze_dim: int = 1,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k rotated by a rotary embedding: ``x · cos + turn(x) · sin`` in float32 at least, then rounded
    to x's dtype (Hugging Face's ``apply_rotary_pos_emb``; :func:`posenc.rope.apply_rotary` for every
    framework), (q_rot, k_rot) in q's and k's dtypes. The float32 products and sum round before the last
    rounding: not correctly rounded in every case.

    Give the angles one of two ways:

    * ``cos, sin`` (``(..., L, rotary_dim)``, broadcast against q and k by ``unsqueeze_dim``, as Hugging
      Face's): rotated by them. Eager calls in the half layout over the whole head, without autograd, take a
      faster road to the same bits, a NaN's sign aside (:func:`posenc.torch.rotary.rotate`).
    * ``position_ids=`` and ``params=`` (a :class:`posenc.rope.RopeParameters`): rotated by the exact rotary
      angles of those positions, the bits of ``cos, sin = posenc.torch.rotary.cos_sin(position_ids, params,
      dtype=torch.float32, layout=layout, seq_len=seq_len)`` then the rotation above. On CUDA tensors (with
      triton) the cos/sin of the distinct positions by angle addition, then one kernel rotates q and k
      (one pass over them); everywhere else, and for what the kernel does not take, the unfused path.
      q and k are then (B, heads, L, head_dim) with ``unsqueeze_dim=1`` or (B, L, heads, head_dim) with
      ``unsqueeze_dim=2`` (k may have fewer heads); ``position_ids`` is (B, L) or (1, L).

    Given both ways, the call is refused (TypeError): cos/sin that are not those positions' angles would
    rotate by the one way on one device and the other way on another.

    Features past the rotary width pass unchanged.

    >>> q = torch.ones(1, 1, 2, 4)
    >>> params = rope.config(head_dim=4, base=100.0)
    >>> q_rot, _ = apply_rotary(q, q, position_ids=torch.tensor([[0, 1]]), params=params)
    >>> q_rot[0, 0]
    tensor([[ 1.0000,  1.0000,  1.0000,  1.0000],
            [-0.3012,  0.8952,  1.3818,  1.0948]])
    >>> b = torch.tensor([[[[1.0, 0.0]]]], dtype=torch.bfloat16)
    >>> apply_rotary(b, b, torch.tensor([[[0.0, 0.0]]]), torch.tensor([[[1.0, 1.0]]]))[0]  # by cos, sin
    tensor([[[[0., 1.]]]], dtype=torch.bfloat16)
    """
    if (position_ids is None) != (params is None):
        missing = "params" if params is None else "position_ids"
        raise PosencTypeError(
            f"apply_rotary takes position_ids and params together (the exact angles of those positions); "
            f"{missing} is missing",
            parameter=missing,
        )
    if position_ids is None:
        if cos is None or sin is None:
            raise PosencTypeError(
                "apply_rotary needs the angles: cos and sin, or position_ids= and params=", parameter="cos"
            )
        return rotary.rotate(q, k, cos, sin, layout=layout, unsqueeze_dim=unsqueeze_dim)
    if cos is not None or sin is not None:
        raise PosencTypeError(
            "apply_rotary takes the angles one way: cos and sin, or position_ids= and params= (their exact "
            "angles); got both: drop cos and sin, or position_ids and params",
            parameter="cos" if cos is not None else "sin",
        )
    return by_positions(q, k, position_ids, params, layout, unsqueeze_dim, seq_len)


def by_positions(
    q: torch.Tensor,
    k: torch.Tensor,
    position_ids: torch.Tensor,
    params: rope.RopeParameters,
    layout: str,
    unsqueeze_dim: int,
    seq_len: int | None,
    known: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`apply_rotary` by position ids; ``known``: the float32 cos/sin of exactly those positions
    (``rotary.cos_sin(position_ids, params, dtype=torch.float32, layout=layout, seq_len=seq_len)``) that
    the caller holds already (a patched model's rotary embedding made them), which the unfused path uses
    instead of computing them again."""
    check_layout(layout)
    positions = _position_tensor(position_ids)
    check_request(params, layout, tuple(positions.shape))
    axis = _fusable(q, k, positions, params, unsqueeze_dim, seq_len)
    fused = axis is not None and q.device.type in KERNEL_DEVICES and kernel_module("fused_kernel") is not None
    if fused and _trusted(q, k, params, layout, axis, seq_len):
        return launch(q, k, positions, params, layout=layout, unsqueeze_dim=axis, seq_len=seq_len)
    if known is None:
        known = rotary.cos_sin(positions, params, dtype=torch.float32, layout=layout, seq_len=seq_len)
    return rotary.rotate(q, k, *known, layout=layout, unsqueeze_dim=unsqueeze_dim)


def _fusable(
    q: Any,
    k: Any,
    positions: torch.Tensor,
    params: rope.RopeParameters,
    unsqueeze_dim: int,
    seq_len: int | None = None,
) -> Any:
    """The heads axis (1 or 2) when the kernel computes this call, else None (the unfused path then
    computes it, or raises its error)."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)) or _tracing():
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return None  # the kernel has no backward: autograd takes the unfused path
    if params.mrope_section or positions.is_floating_point() or positions.dim() != 2:
        return None
    if seq_len is None and params.kind.switch is not None:
        return None  # the unfused path picks its frequencies on the device, with no host read
    if q.dim() != 4 or k.dim() != 4 or q.dtype not in _KINDS or k.dtype not in _KINDS:
        return None
    if not q.device == k.device == positions.device:
        return None
    axis = unsqueeze_dim + 4 if unsqueeze_dim < 0 else unsqueeze_dim  # cos (B, L, R) gets 4 dims
    if axis not in (1, 2):
        return None
    seq = 3 - axis  # (B, H, L, D): L on axis 2; (B, L, H, D): L on axis 1
    batch, length = positions.shape
    width = 2 * (params.rotary_dim // 2)
    for x in (q, k):
        if x.shape[seq] != length or batch not in (1, x.shape[0]) or width > x.shape[-1]:
            return None
    if q.shape[0] != k.shape[0] or q.numel() == 0 or k.numel() == 0:
        return None
    heads = math.ceil(q.shape[axis] / BLOCK_H) + math.ceil(k.shape[axis] / BLOCK_H)
    if q.shape[0] > _GRID_YZ or heads > _GRID_YZ:
        return None
    if not _tiles_fit([x.transpose(1, 2) if axis == 2 else x for x in (q, k)], axis, BLOCK_L, BLOCK_H):
        return None
    return axis


def _request(positions: torch.Tensor, params: rope.RopeParameters, seq_len: int | None) -> Any:
    """The cos/sin request of a call (float32, as the unfused path's cos_sin)."""
    if seq_len is None and params.kind.grows_with_length:
        seq_len = int(positions.max()) + 1  # a host read, as cos_sin (and Hugging Face) take it
    length = -1 if seq_len is None or not params.kind.depends_on_length else int(seq_len)
    return operator.request(operator.params_json(params), length, "float32")[0]


#: The probe's position ids (one row): valid for every rope type.
PROBE_IDS = (0, 1, 2, 3, 7, 31, 100, 1000, 4095, 65537, 1000003, 2**20 + 1, 131071, 5, 17, 8191)


def specialization(
    q: torch.Tensor, k: torch.Tensor, params: rope.RopeParameters, layout: str, axis: int, seq_len: int | None
) -> dict:
    """What the kernel is compiled for on this call (its compile-time constants, in words); the heads and
    head sizes decide its tiles."""
    return {
        "q": str(q.dtype).removeprefix("torch."),
        "k": str(k.dtype).removeprefix("torch."),
        "layout": layout,
        "heads_axis": axis,
        "heads": (q.shape[axis], k.shape[axis]),
        "head_dim": (q.shape[-1], k.shape[-1]),
        "rotary_dim": params.rotary_dim,
        "rope_type": params.rope_type,
        "seq_len": seq_len is not None,
    }


def _trusted(
    q: torch.Tensor, k: torch.Tensor, params: rope.RopeParameters, layout: str, axis: int, seq_len: int | None
) -> bool:
    """Whether the kernel passed (or passes now) its first-launch probe for this call's specialization."""
    where = q.device
    length = len(PROBE_IDS)

    def probe_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        def block(x: torch.Tensor) -> torch.Tensor:
            shape = [1, x.shape[1], x.shape[2], x.shape[3]]
            shape[3 - axis] = length  # the sequence axis
            count = math.prod(shape)
            values = torch.arange(count, dtype=torch.float64).mul(0.7311).sin() * 3
            return values.reshape(shape).to(x.dtype).to(where)

        return block(q), block(k), torch.tensor([PROBE_IDS], device=where)

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        q_p, k_p, ids = probe_inputs()
        return launch(q_p, k_p, ids, params, layout=layout, unsqueeze_dim=axis, seq_len=seq_len)

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        q_p, k_p, ids = probe_inputs()
        request = _request(ids, params, seq_len)
        backend = operator.TORCH
        sections, interleaved = params.mrope_section, params.mrope_interleaved
        rows = portable.encode(backend, ids, request)
        cos, sin = arrange(backend, rows, request.count, sections, interleaved, layout)
        return rotate_arrays(q_p, k_p, cos, sin, layout=layout, unsqueeze_dim=axis)

    spec = specialization(q, k, params, layout, axis, seq_len)
    return first_launch.trusted("fused rotary", where, spec, run, reference)


#: Positions and heads a program of the rotation kernel takes, and its warps (benchmarks/fused_sweep.py).
BLOCK_L, BLOCK_H, WARPS = 16, 4, 4
#: Tile offsets are 32-bit (fused_kernel): the largest a launch may need.
_LARGEST_OFFSET = 2**31 - 1
#: CUDA's largest grid along its second and third axes.
_GRID_YZ = 65535

_ROWS_REQUESTS: dict[int, tuple[Any, Any]] = {}


def rows_request(request: Any) -> Any:
    """The request of the float32 [sin | cos] rows the rotation kernel reads (every frequency; its
    amplitude, if any, applied): the same object for the same request (bounded cache), so that its levels
    and constants go to the device once."""
    cached = _ROWS_REQUESTS.get(id(request))
    if cached is not None and cached[0] is request:
        return cached[1]
    count = request.count
    rows = request._replace(layout="sin_cos", d_model=2 * count, sin_columns=count, cos_columns=count)
    if len(_ROWS_REQUESTS) > 64:
        _ROWS_REQUESTS.clear()
    _ROWS_REQUESTS[id(request)] = (request, rows)
    return rows


def _tiles_fit(views: list[torch.Tensor], axis: int, block_l: int, block_h: int) -> bool:
    """Whether every tile of these (B, H, L, D) views, and of their outputs (dense: q's own strides, else
    contiguous in q's layout, heads on ``axis``), lies within 32-bit offsets of its base."""
    for x in views:
        _, heads, length, dim = x.shape
        dense = (length * dim, dim, 1) if axis == 1 else (dim, heads * dim, 1)
        sh, sl, sd = (max(a, b) for a, b in zip(x.stride()[1:], dense, strict=True))
        if (block_h - 1) * sh + (block_l - 1) * sl + (dim - 1) * sd > _LARGEST_OFFSET:
            return False
    return True


def launch(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    params: rope.RopeParameters,
    layout: str,
    unsqueeze_dim: int,
    seq_len: int | None,
    *,
    block_rows: int | None = None,
    block_heads: int | None = None,
    num_warps: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the kernels: (q_rot, k_rot); ``unsqueeze_dim`` is the heads axis (1 or 2).

    Two steps: the float32 [sin | cos] rows of the distinct positions (one row per position of a batch row,
    or of the one row the batch shares: ``table_launch.encode``, by angle addition from exact rows, certified
    and settled, or the exact kernel where the rows carry an amplitude), then the rotation kernel over q and
    k. The caller has checked the call (:func:`_fusable`). ``block_rows``, ``block_heads`` and
    ``num_warps`` override :data:`BLOCK_L`, :data:`BLOCK_H` and :data:`WARPS` (tests, benchmarks).
    """
    kernels = kernel_module("fused_kernel")
    request = _request(positions, params, seq_len)
    count = request.count
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    # (B, H, L, D) views of (B, L, H, D) tensors
    q_view, k_view, q_out_view, k_out_view = (
        (x.transpose(1, 2) if unsqueeze_dim == 2 else x) for x in (q, k, q_out, k_out)
    )
    batch, heads_q, seq, _ = q_view.shape
    heads_k = k_view.shape[1]
    shared = positions.shape[0] == 1 or positions.stride(0) == 0  # every batch row has the same positions
    ids = positions[:1] if shared else positions.expand(batch, seq)
    cs = table_launch.encode(ids.reshape(-1), rows_request(request))  # ((1 or B)·L, 2·count) float32
    block_l, block_h = block_rows or BLOCK_L, block_heads or BLOCK_H
    grid = (math.ceil(seq / block_l), math.ceil(heads_q / block_h) + math.ceil(heads_k / block_h), batch)
    width = 2 * count
    rest_q, rest_k = q_view.shape[-1] - width, k_view.shape[-1] - width
    guard = on_device(q.device)
    with guard:  # triton launches on the current device
        launcher(kernels.rotate_kernel)[grid](
            q_view.view(_BITS[q.dtype]),
            k_view.view(_BITS[k.dtype]),
            q_out_view.view(_BITS[q.dtype]),
            k_out_view.view(_BITS[k.dtype]),
            cs,
            seq,
            heads_q,
            heads_k,
            rest_q,
            rest_k,
            count,
            *q_view.stride(),
            *k_view.stride(),
            *q_out_view.stride(),
            *k_out_view.stride(),
            0 if shared else seq * width,
            width,
            INTERLEAVED=layout == "interleaved",
            Q_KIND=_KINDS[q.dtype],
            K_KIND=_KINDS[k.dtype],
            BLOCK_L=block_l,
            BLOCK_F=next_power_of_2(count),
            BLOCK_H=block_h,
            BLOCK_P=next_power_of_2(max(rest_q, rest_k, 1)),
            num_warps=num_warps or WARPS,
            num_stages=1,
            enable_fp_fusion=False,  # x·cos - y·sin rounds each product, as the unfused path does
        )
    return q_out, k_out
