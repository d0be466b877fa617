"""PyTorch adapter: the core's ``encode``/``table`` for tensors, and the drop-in modules.

The mathematics stays in :mod:`posenc.core` and :mod:`posenc.portable`; this package owns tensors, devices,
the CPU cache and the ``nn.Module`` classes. Every result is the exact value rounded once to the requested
dtype: float32 bit-identical to the NumPy core, float16/bfloat16 correctly rounded, float64 within 1 ulp.

Where it is computed: eager calls on CPU tensors use the NumPy core (integer positions from a table cached
per options and dtype, outside any module state). Everything else — tensors on any other device (CUDA, MPS,
``meta``) and every call inside ``torch.compile``/``torch.export`` — goes through one operator,
``torch.ops.posenc.exact``, whose kernel is the portable algorithm on the tensors' own device: no host
transfer, no sync (CUDA-graph safe), no float64 needed, graphs neither break nor recompile per length, and
invalid positions there give rows of NaN (a device cannot raise without a sync).

One concept per module:

- :mod:`~posenc.torch.functions`: :func:`encode` and :func:`table` on tensors, and where each is computed
  (the cached tables of eager CPU calls, :func:`clear_cache`);
- :mod:`~posenc.torch.modules`: :class:`SinusoidalPositionalEncoding`, :class:`TokenAndPositionEmbedding`,
  :class:`Timesteps` and :class:`DetrSinePositionEmbedding`;
- :mod:`~posenc.torch.rotary`: exact rotary embeddings, :class:`RotaryEmbedding` (a drop-in for Hugging
  Face's rotary modules), with the operator ``torch.ops.posenc.rotary``;
- :mod:`~posenc.torch.fused_rotary`: :func:`apply_rotary`, the rotation by cos/sin, or by the exact
  angles of position ids (on CUDA their cos/sin by angle addition, then one Triton rotation kernel,
  :mod:`~posenc.torch.kernels.fused_kernel`);
- :mod:`~posenc.torch.patching`: :func:`patch` and :func:`unpatch`, a whole model's positions made exact in
  one call (rotary modules, sinusoidal tables, diffusers' ``Timesteps``), with a :class:`PatchReport`;
  what it proves is :mod:`~posenc.torch.proofs` (pure functions over the values it reads), and where a
  model family's attention calls its rotary apply is one row of :mod:`~posenc.torch.families`;
- :mod:`~posenc.torch.positions`: position ids from attention masks, packed sequences and padding;
- :mod:`~posenc.torch.operator`: the operator ``torch.ops.posenc.exact`` (registered once, on import);
- :mod:`~posenc.torch.tensors`: dtypes, positions and offsets as tensors the encoders take, exactly;
- :mod:`~posenc.torch.kernels`: the Triton kernels for CUDA and their launchers (triton is imported only
  when a kernel is first launched);
- :mod:`~posenc.torch.sharding`: context parallelism with ``torch.distributed`` (imported on its own).
"""

from __future__ import annotations

try:
    import torch  # noqa: F401  (PyTorch: imports are absolute, so never this package)
except ImportError as error:  # pragma: no cover - exercised only without torch
    raise ImportError("posenc.torch needs PyTorch: pip install 'posenc[torch]'") from error

from .functions import CACHE_LIMIT_BYTES as CACHE_LIMIT_BYTES  # public, not in __all__
from .functions import clear_cache, encode, table
from .fused_rotary import apply_rotary
from .kernels.first_launch import KernelMismatchWarning, kernel_status
from .modules import (
    DetrSinePositionEmbedding,
    SinusoidalPositionalEncoding,
    Timesteps,
    TokenAndPositionEmbedding,
)
from .patching import PatchReport, patch, unpatch
from .positions import from_attention_mask, from_cu_seqlens, make_positions
from .rotary import RotaryEmbedding

__all__ = [
    "DetrSinePositionEmbedding",
    "KernelMismatchWarning",
    "PatchReport",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "Timesteps",
    "TokenAndPositionEmbedding",
    "apply_rotary",
    "clear_cache",
    "encode",
    "from_attention_mask",
    "from_cu_seqlens",
    "kernel_status",
    "make_positions",
    "patch",
    "table",
    "unpatch",
]
