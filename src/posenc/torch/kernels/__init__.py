"""posenc's Triton kernels for CUDA and their launchers: the portable algorithm (:mod:`posenc.portable`)
written again in Triton, bit for bit, and run as one kernel where the tensors are.

- :mod:`~posenc.torch.kernels.fixed_point` and :mod:`~posenc.torch.kernels.algorithm`: the portable
  algorithm's fixed-point arithmetic and steps over Triton blocks, each helper the twin of the
  :mod:`posenc.portable` function of the same name;
- :mod:`~posenc.torch.kernels.encode_kernel` (launched by :mod:`~posenc.torch.kernels.encode_launch`):
  ``torch.ops.posenc.exact``, the exact encodings of a block of positions;
- :mod:`~posenc.torch.kernels.table_kernel` (launched by :mod:`~posenc.torch.kernels.table_launch`):
  ``torch.ops.posenc.table``, a table by angle addition, certified per element, and integer position ids
  the same way (``ids_kernel``);
- :mod:`~posenc.torch.kernels.fused_kernel` (launched by :mod:`posenc.torch.fused_rotary`): the exact
  rotary apply's rotation, by the cos/sin rows of its positions;
- :mod:`~posenc.torch.kernels.common`: what the launchers share (the kernels' modules, the host
  constants as tensors, the compile-time counts, the :class:`~posenc.torch.kernels.common.Launcher`).

The launchers import no triton: a module of kernels (``*_kernel``, ``algorithm``, ``fixed_point``) is
imported by :func:`~posenc.torch.kernels.common.kernel_module` when a kernel is first launched, and only
where triton is installed (at least :data:`~posenc.torch.kernels.common.MIN_TRITON`); elsewhere the
launchers run the portable algorithm, with the same bits.
"""
