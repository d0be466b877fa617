"""The array namespace the portable algorithm (and the adapters' checks of module inputs) is written over:
one small class per framework holding the few operations whose spelling differs between NumPy, torch and
jax.numpy.

:class:`Backend` holds the spelling NumPy and jax.numpy share; :class:`NumpyBackend`, :class:`TorchBackend`
and :class:`JaxBackend` each hold their own operations where it differs. Get one with :func:`backend_named`
(by framework name) or :func:`backend_of` (the framework an array belongs to); torch and JAX are imported
only when their backend is first asked for, so the NumPy core never loads a framework.

>>> import numpy as np
>>> ops = backend_of(np.zeros(3))
>>> ops.name, ops is backend_named("numpy")
('numpy', True)
>>> ops.shift_last(np.array([1, 2, 3]), 1)
array([0, 1, 2])
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Backend:
    """The operations of one array namespace ``xp``, in the spelling NumPy and jax.numpy share; a subclass
    per framework overrides what its namespace spells differently."""

    #: The framework: "numpy", "torch" or "jax".
    name: str = ""

    def __init__(self, xp: Any):
        self.xp = xp
        self.int32 = xp.int32
        self.float32 = xp.float32

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def asarray(self, value: np.ndarray, like: Any) -> Any:
        """A host constant as an array where ``like`` lives."""
        return self.xp.asarray(value)

    def cast(self, value: Any, dtype: Any) -> Any:
        return value.astype(dtype)

    def clip(self, value: Any, low: Any = None, high: Any = None) -> Any:
        return self.xp.clip(value, low, high)

    def where(self, condition: Any, a: Any, b: Any) -> Any:
        return self.xp.where(condition, a, b)

    def loop(self, count: int, body: Any, state: Any) -> Any:
        """``state = body(i, state)`` for i in 0 .. count - 1."""
        for i in range(count):
            state = body(i, state)
        return state

    def index_last(self, value: Any, index: Any) -> Any:
        """``value[..., index]``."""
        return value[..., index]

    def index_first(self, value: Any, index: Any) -> Any:
        return value[index]

    def set_last(self, value: Any, index: Any, item: Any) -> Any:
        """``value`` with ``value[..., index] = item`` (a new array)."""
        return self.concat([value[..., :index], item[..., None], value[..., index + 1 :]], -1)

    def shift_last(self, value: Any, count: Any) -> Any:
        """``value`` moved ``count`` places up the last axis, zeros in front, the top dropped."""
        if count == 0:
            return value
        return self.pad_last(value[..., : value.shape[-1] - count], count, 0)

    def swap01(self, value: Any) -> Any:
        return self.xp.swapaxes(value, 0, 1)

    def is_integer(self, dtype: Any) -> bool:
        return bool(self.xp.issubdtype(dtype, self.xp.integer))

    def is_floating(self, dtype: Any) -> bool:
        """Whether ``dtype`` (of this backend's arrays) is a floating-point dtype (bfloat16 included)."""
        return bool(self.xp.issubdtype(dtype, self.xp.floating))

    def dtype(self, fmt: str) -> Any:
        """The dtype of an output format ("float32", "bfloat16", ...)."""
        return getattr(self.xp, fmt)

    def wide_int(self, values: Any) -> Any:
        """Integers as the widest integer dtype at hand (int64)."""
        return self.cast(values, self.xp.int64)

    def beyond_wide(self, values: Any) -> Any:
        """Where integer ``values`` are past what :meth:`wide_int` holds — an unsigned type as wide as it,
        whose cast would wrap a value into a valid position — or None when none can be."""
        return None

    def stack(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.stack(arrays, axis)

    def pad_last(self, value: Any, left: int, right: int) -> Any:
        """Zeros before and after the last axis."""
        return self.xp.pad(value, [(0, 0)] * (value.ndim - 1) + [(left, right)])

    def min_last(self, value: Any) -> Any:
        return self.xp.min(value, -1)

    def sum_last(self, value: Any) -> Any:
        return self.xp.sum(value, -1, dtype=value.dtype)

    def any_last(self, value: Any) -> Any:
        return self.xp.any(value, -1)

    def concat(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.concatenate(arrays, axis)

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        """Indices of the true entries of a 1-D array, padded with ``fill`` (or cut) to ``size``."""
        raise NotImplementedError

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        """``flat`` with ``flat[index] = values``; indices equal to ``len(flat)`` are dropped."""
        raise NotImplementedError


class NumpyBackend(Backend):
    """NumPy: the host's arrays."""

    name = "numpy"

    def __init__(self) -> None:
        super().__init__(np)

    def is_floating(self, dtype: Any) -> bool:
        return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"

    def beyond_wide(self, values: Any) -> Any:
        if np.dtype(values.dtype).kind == "u" and np.dtype(values.dtype).itemsize >= 8:
            return values > np.iinfo(np.int64).max
        return None

    def dtype(self, fmt: str) -> Any:
        from .. import validation

        return validation.dtype(fmt)  # bfloat16 is ml_dtypes', not a NumPy attribute

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        found = np.flatnonzero(flags)[:size]
        return np.concatenate([found, np.full(size - len(found), fill, dtype=found.dtype)])

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        padded = self.concat([flat, flat[:1]], 0)
        padded[index] = values
        return padded[:-1]


class TorchBackend(Backend):
    """torch, on any device, eager, compiled or exported (torch is imported when this is made)."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        super().__init__(torch)

    def asarray(self, value: np.ndarray, like: Any) -> Any:
        return self.xp.as_tensor(value, device=like.device)

    def cast(self, value: Any, dtype: Any) -> Any:
        return value.to(dtype)

    def clip(self, value: Any, low: Any = None, high: Any = None) -> Any:
        return self.xp.clamp(value, min=low, max=high)

    def swap01(self, value: Any) -> Any:
        return value.transpose(0, 1)

    def is_integer(self, dtype: Any) -> bool:
        return not (dtype.is_floating_point or dtype.is_complex or dtype == self.xp.bool)

    def is_floating(self, dtype: Any) -> bool:
        return bool(dtype.is_floating_point)

    def pad_last(self, value: Any, left: int, right: int) -> Any:
        return self.xp.nn.functional.pad(value, (left, right))

    def min_last(self, value: Any) -> Any:
        return self.xp.amin(value, -1)

    def concat(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.cat(arrays, axis)

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        return self.xp.nonzero_static(flags, size=size, fill_value=fill)[:, 0]

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        padded = self.concat([flat, flat[:1]], 0)
        return padded.index_put((index,), values)[:-1]


class JaxBackend(Backend):
    """jax.numpy, under ``jit`` or not, with x64 on or off (JAX is imported when this is made): indices may
    be traced, so indexing and loops go through ``jax.lax``."""

    name = "jax"

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        super().__init__(jnp)
        self._lax = jax.lax
        self._jax = jax

    def loop(self, count: int, body: Any, state: Any) -> Any:
        """One ``fori_loop`` on the CPU (its body compiles once: a program that unrolled every limb loop
        took ~4x longer to compile); unrolled on accelerators (their while loops read the predicate on the
        host)."""
        unroll = self._jax.default_backend() != "cpu"
        return self._lax.fori_loop(0, count, body, state, unroll=unroll or None)

    def index_last(self, value: Any, index: Any) -> Any:
        return self._lax.dynamic_index_in_dim(value, index, axis=value.ndim - 1, keepdims=False)

    def index_first(self, value: Any, index: Any) -> Any:
        return self._lax.dynamic_index_in_dim(value, index, axis=0, keepdims=False)

    def set_last(self, value: Any, index: Any, item: Any) -> Any:
        return self._lax.dynamic_update_slice_in_dim(value, item[..., None], index, axis=value.ndim - 1)

    def shift_last(self, value: Any, count: Any) -> Any:
        columns = self.xp.arange(value.shape[-1])
        return self.xp.where(columns >= count, self.xp.roll(value, count, axis=-1), 0)

    def wide_int(self, values: Any) -> Any:
        """int64 with x64 on, int32 without."""
        return values.astype(self._wide())

    def beyond_wide(self, values: Any) -> Any:
        wide = np.dtype(self._wide())
        if (
            self.xp.issubdtype(values.dtype, self.xp.unsignedinteger)
            and values.dtype.itemsize >= wide.itemsize
        ):
            return values > np.iinfo(wide).max  # uint32 2**32 - 2 is no position -2
        return None

    def _wide(self) -> Any:
        return self.xp.int64 if self._jax.config.jax_enable_x64 else self.xp.int32

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        return self.xp.nonzero(flags, size=size, fill_value=fill)[0]

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        return flat.at[index].set(values, mode="drop")


_BACKENDS: dict[str, type[Backend]] = {"numpy": NumpyBackend, "torch": TorchBackend, "jax": JaxBackend}


#: The one instance of each backend, made on first use (a plain dict: torch.compile traces a lookup in it).
_INSTANCES: dict[str, Backend] = {}


def backend_named(name: str) -> Backend:
    """The :class:`Backend` of a framework: "numpy", "torch" or "jax" (one instance each)."""
    if name not in _INSTANCES:
        if name not in _BACKENDS:
            raise ValueError(f"no backend {name!r}; one of {sorted(_BACKENDS)}")
        return _INSTANCES.setdefault(name, _BACKENDS[name]())  # two threads at once: still one instance
    return _INSTANCES[name]


def backend_of(array: Any) -> Backend:
    """The :class:`Backend` of an array's framework (NumPy, torch or JAX)."""
    module = type(array).__module__
    if module.startswith("torch"):
        return backend_named("torch")
    if module.startswith(("jax", "jaxlib")):
        return backend_named("jax")
    return backend_named("numpy")
