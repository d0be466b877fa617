"""The portable algorithm: the exact per-element algorithm that runs where the positions are, for NumPy,
torch and JAX alike.

It is written once over an array namespace (a :class:`Backend`, one small class per framework:
:class:`NumpyBackend`, :class:`TorchBackend`, :class:`JaxBackend`; :func:`backend_of` gives an array's,
:func:`backend_named` a framework's): NumPy on the host, torch (any device, eager, compiled or exported) and
jax.numpy (under ``jit``, with x64 on or off). The adapters :mod:`posenc.torch` and :mod:`posenc.jax` run it
wherever the host core (:mod:`posenc.core`) cannot: on a device, inside a compiled program, for traced
positions; on CUDA, :mod:`posenc.torch.kernels` runs the same steps as Triton kernels, bit for bit.

It needs no float64 and no host: every step is elementwise integer arithmetic on int32 arrays, plus a few
float operations that are exact (scaling by powers of two, ``floor``, summing at most 24 significant bits),
so compilers that fuse or contract floating-point operations cannot change a bit, and the results are the
core's (:mod:`posenc.core`) on every backend.

A value is held in *fixed point*: an int32 array whose last axis holds ``m + 1`` limbs,
``L[0] + L[1] 2**-12 + ... + L[m] 2**-12m`` (``L[0]`` the integer part, the others 12-bit digits), so a
product of two limbs needs 24 bits and a column of products fits in an int32. The loops over limbs go
through :meth:`Backend.loop` (a ``fori_loop`` under JAX on the CPU, which keeps programs small to compile).
For a position ``p`` and a frequency ``ω_i``, with ``c = ω_i / 2π`` (turns per position):

1. **Reduction.** ``p = σ (I + f)`` with ``I`` an integer < 2**31 (the offset is added here, exactly) and
   ``|f| < 1``. ``frac(I c)`` is a sum of 11-bit pieces of ``I`` times the host's digits of
   ``frac(2**11j c)``: exact to ``2**-12(m+1)``. ``f c`` is a fixed-point product. Their sum mod 1 is the turn
   ``r``. Tiny turns (``I = 0`` and ``|f| c < 2**-12``) are carried scaled by ``2**e`` (``e`` a multiple of
   12), so that they keep their relative precision down to the smallest floats.
2. **Evaluation.** ``k = round(256 r)``, ``s = r - k/256`` (|s| <= 1/512), ``x = 2π s``; sin x and cos x by
   their Taylor series; then ``sin 2πr = S_k cos x + C_k sin x`` and ``cos 2πr = C_k cos x - S_k sin x`` with
   the host's digits of ``S_k, C_k = sin, cos(2πk/256)``.
3. **Certified rounding.** The fixed-point result is within ``Δ`` units of ``2**-12m`` of the exact value;
   it is rounded to the output format (exact integer bit operations, ties to even) and the rounding is
   *certain* when no rounding midpoint lies within ``Δ``. With ``m = 5`` (60 bits; more for very low
   frequencies, :func:`limbs_for`) about one value in 2**30 is not; those (up to
   :data:`~posenc.portable.settle.SETTLE_CAPACITY` per call) are recomputed with 60 more bits on a
   fixed-capacity compaction of their indices (``nonzero`` with a static size): on the device, no host.
   Beyond the capacity they keep the first rounding.

Invalid positions (NaN, ±inf, |p| >= 2**31, or an offset that takes a position there) give rows of NaN:
a device cannot raise without a sync, and a NaN row is never mistaken for an encoding.

Domain (checked on the host from the options, :func:`check_options`): ``ω_0 = scale < 1600`` and the
lowest frequency >= 2**-45, which covers every model we know of; :func:`posenc.encode` has none of these
limits.

Where each part lives:

- :mod:`~posenc.portable.backend`: :class:`Backend` and its subclasses, the few operations spelled
  differently per framework;
- :mod:`~posenc.portable.host`: what the host computes once per set of options (constant digits, the domain
  check, the :class:`Request`);
- :mod:`~posenc.portable.fixed_point`: the limb format and its arithmetic;
- :mod:`~posenc.portable.split`: step 1's split of the positions (the offset added exactly);
- :mod:`~posenc.portable.positions`: position ids from masks, packed sequences and token ids, the rules
  :mod:`posenc.positions` and :mod:`posenc.torch.positions` share (called with a backend);
- :mod:`~posenc.portable.evaluate`: steps 1 and 2, the turn and its sine and cosine in fixed point;
- :mod:`~posenc.portable.rounding`: step 3's certified rounding;
- :mod:`~posenc.portable.settle`: the recomputation of the uncertain values;
- :mod:`~posenc.portable.pipeline`: :func:`encode`, the steps in order and the columns laid out.
"""

from __future__ import annotations

from . import positions
from .backend import Backend, JaxBackend, NumpyBackend, TorchBackend, backend_named, backend_of
from .host import Constants, Request, check_options, constants, limbs_for, request_for, request_for_law
from .pipeline import encode
from .rounding import round_fixed
from .split import Positions, split_positions

__all__ = [
    "Backend",
    "Constants",
    "JaxBackend",
    "NumpyBackend",
    "Positions",
    "Request",
    "TorchBackend",
    "backend_named",
    "backend_of",
    "check_options",
    "constants",
    "encode",
    "limbs_for",
    "positions",
    "request_for",
    "request_for_law",
    "round_fixed",
    "split_positions",
]
