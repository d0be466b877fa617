"""The exact core: frequencies, exact angle reduction, ``encode`` and ``table``. NumPy only, pure functions.

The encoding of a position p is built from n = d_model // 2 frequencies

    ω_i = base ** (-i / (n - shift)),   i = 0 .. n-1

and places sin(p ω_i) and cos(p ω_i) in the d_model columns according to ``layout``:

* ``"interleaved"``: [sin ω_0, cos ω_0, sin ω_1, cos ω_1, ...]   (the paper, PE(p, 2i) / PE(p, 2i+1))
* ``"sin_cos"``:     [sin ω_0 .. sin ω_{n-1} | cos ω_0 .. cos ω_{n-1}]   (tensor2tensor, fairseq, Whisper)
* ``"cos_sin"``:     [cos ... | sin ...]   (diffusers with ``flip_sin_to_cos``)

Odd d_model: every layout ends in one zero column after the n pairs (the rule of fairseq, tensor2tensor
and diffusers); the width is never changed.

How exactness is reached (float32, float16 and bfloat16 outputs are *correctly rounded*):

1. The turn rate c_i = ω_i / 2π is known to ~200 bits and held as five 26-bit float64 limbs; the position
   is split in two 26-bit halves, so each partial product is exact, and the fractional turn frac(p c_i) is
   accumulated as a double-double with error below 2**-98 (no π-reduction error, at any position).
2. The turn is reduced to a quarter turn, multiplied by 2π in double-double and fed to sin/cos kernels
   that are accurate to < 1 ulp of float64.
3. Tables combine a few such exact rows by angle addition, z(a + b) = z(a) z(b), with a proven error bound.
4. Every value is rounded *once* to the output dtype. A value whose error bound straddles a rounding
   midpoint is recomputed on the next more precise path, ending in arbitrary precision; so the rounding is
   certain, not just likely. float64 outputs are within 1 ulp.

The path of a request, one module per step:

* :mod:`~posenc.core.api`: ``encode``, ``table`` and ``frequencies`` check their arguments and
* :mod:`~posenc.core.options` turns them into :class:`Options` (validated once per plain values, cached),
  which own the frequency constants (ω_i and the limbs of c_i, from :mod:`~posenc.core.highprec`) and
  the column plan (from :func:`posenc.layouts.placement`);
* :mod:`~posenc.core.spec` adds the output dtype: a :class:`Spec` holds everything one request needs,
  and rounds, certifies and settles its values;
* the values come from the exact evaluation of :mod:`~posenc.core.arithmetic` (error-free float64
  arithmetic: steps 1 and 2), or for tables in float32, float16 and bfloat16 from the angle addition of
  :mod:`~posenc.core.addition` (step 3); on the compiled path (:mod:`~posenc.core.compiled`, the C
  extension ``posenc.core._kernels``) the same operations run in C, bit for bit;
* :mod:`~posenc.core.rounding` rounds each value once and flags those whose error band holds a rounding
  midpoint; :meth:`Spec.certain` settles them on the exact path, and the rare rest in arbitrary precision
  (step 4);
* large requests run in blocks on a thread pool (:mod:`~posenc.core.parallel`).

Frequencies that are not this geometric formula (the rotary family's scaled frequencies, times an attention
factor) go the same way through :mod:`~posenc.core.explicit`: exact reals in, the same limbs, one rounding.

The adapters (:mod:`posenc.torch`, :mod:`posenc.jax`, the portable algorithm of :mod:`posenc.portable`) use
the named internal interface :class:`Options` and :class:`Spec`, and :mod:`posenc.core.highprec`.
"""

from __future__ import annotations

from .api import encode, frequencies, table
from .compiled import path as compiled_path
from .options import Options as Options  # the internal interface (not in __all__)
from .spec import Spec as Spec

__all__ = ["compiled_path", "encode", "frequencies", "table"]
