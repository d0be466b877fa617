"""JAX adapter: the core's ``encode``/``table`` for JAX arrays, and a Flax (NNX) module.

The mathematics stays in :mod:`posenc.core` (NumPy, exact); this package owns arrays, jit, the cache and the
module. Values are computed on the host in high precision and rounded once to the requested dtype, so
float32 results are bit-identical to the NumPy core and float16/bfloat16 results are correctly rounded —
with ``jax_enable_x64`` off (JAX's default: no float64 on the device, int32 positions) as well as on.
Nothing is ever computed in the device's float32 or bfloat16.

Where the work runs:

* **Concrete positions** (NumPy arrays, lists, ordinary ``jax.Array`` values, also ones closed over inside
  ``jax.jit``): computed on the host at once; under ``jit`` the result is a constant of the program.
* **Traced positions** (arguments of a jitted function: position ids, a decoding step ``offset``): computed
  when the program runs, so one compiled program serves every position and ``vmap`` works as for any
  elementwise op. Where JAX has one device and it is the CPU, by the same core through one host callback
  (:func:`~posenc.jax.functions.program_rows`: compiled in milliseconds, at the core's speed); on an
  accelerator, with several devices (sharding: each device encodes its shard), or inside
  :func:`self_contained` (for ``jax.export``), by the portable algorithm (:mod:`posenc.portable`: int32
  arithmetic, no float64 even with x64 off) inside the program, with no callback or host transfer. The
  same bits either way in float32 and 16 bits (float64 output, x64 on: each within 1 ulp of the exact
  value either way, not always the same bits); invalid traced positions (NaN, inf, |p| >= 2**31, an
  offset that overflows) give rows of NaN.
* **The module, positions ``None`` and an ``int`` offset**: rows of a cached table — a slice of a device
  array when eager; under ``jit`` a constant of ``(seq, d_model)`` (up to :data:`CONSTANT_LIMIT_BYTES`, then
  computed as traced positions are), which XLA slices per device when the sequence axis is sharded.

Differentiable with respect to real positions (``jax.grad``/``jax.jvp`` of :func:`encode`: the exact
derivative, cos and −sin rows times the frequencies; the rotary's cos/sin refuse one); gradients with
respect to ``x`` flow through the module as usual.

One concept per module:

- :mod:`~posenc.jax.functions`: :func:`encode` and :func:`table` for JAX arrays, concrete or traced, and
  where traced positions are computed (:func:`self_contained`);
- :mod:`~posenc.jax.modules`: the Flax (NNX) ``SinusoidalPositionalEncoding`` and ``RotaryEmbedding``, an
  ordinary module loaded when one of them is first asked for (it imports Flax);
- :mod:`~posenc.jax.rotary`: exact rotary embeddings: ``cos_sin`` and :func:`apply_rotary`;
- :mod:`~posenc.jax.cache`: the tables cached for the module, on the host and on the devices.

>>> import jax.numpy as jnp
>>> encode(jnp.array([0, 1]), 4)
Array([[0.        , 1.        , 0.        , 1.        ],
       [0.84147096, 0.5403023 , 0.00999983, 0.99995   ]], dtype=float32)
"""

from __future__ import annotations

from typing import Any

try:
    import jax  # noqa: F401  (JAX: imports are absolute, so never this package)
    import jax.numpy as jnp  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without jax
    raise ImportError("posenc.jax needs JAX: pip install 'posenc[jax]'") from error

from ..rope.arrays import apply_rotary  # one function for every framework
from .cache import CACHE_LIMIT_BYTES as CACHE_LIMIT_BYTES  # public, not in __all__
from .cache import CONSTANT_LIMIT_BYTES as CONSTANT_LIMIT_BYTES
from .cache import clear_cache
from .functions import encode, self_contained, table

# The Flax modules are loaded on first use (posenc.jax.modules imports flax): see __getattr__ below.
__all__ = [
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "apply_rotary",
    "clear_cache",
    "encode",
    "self_contained",
    "table",
]
_MODULES = ("SinusoidalPositionalEncoding", "RotaryEmbedding")


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        try:
            import flax.nnx  # noqa: F401
        except ImportError as error:
            raise ImportError(
                f"posenc.jax.{name} is a Flax (NNX) module and needs Flax: pip install 'posenc[flax]'"
            ) from error
        from . import modules

        return getattr(modules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})
