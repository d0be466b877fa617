"""The array namespace the device algorithm (and the adapters' checks of module inputs) is written over:
the few operations whose spelling differs between NumPy, torch and jax.numpy, and which one an array has."""

from __future__ import annotations

from typing import Any

import numpy as np


class Backend:
    """The few operations whose spelling differs between NumPy, torch and jax.numpy."""

    def __init__(self, xp: Any, name: str):
        self.xp, self.name = xp, name
        self.int32 = xp.int32
        self.float32 = xp.float32

    def asarray(self, value: np.ndarray, like: Any) -> Any:
        """A host constant as an array where ``like`` lives."""
        if self.name == "torch":
            return self.xp.as_tensor(value, device=like.device)
        return self.xp.asarray(value)

    def cast(self, value: Any, dtype: Any) -> Any:
        return value.to(dtype) if self.name == "torch" else value.astype(dtype)

    def clip(self, value: Any, low: Any = None, high: Any = None) -> Any:
        if self.name == "torch":
            return self.xp.clamp(value, min=low, max=high)
        return self.xp.clip(value, low, high)

    def where(self, condition: Any, a: Any, b: Any) -> Any:
        return self.xp.where(condition, a, b)

    def loop(self, count: int, body: Any, state: Any) -> Any:
        """``state = body(i, state)`` for i in 0 .. count - 1: a Python loop, or under JAX on the CPU one
        ``fori_loop`` (its body compiles once: a program that unrolled every limb loop took ~4x longer to
        compile); on JAX accelerators unrolled (their while loops read the predicate on the host)."""
        if self.name == "jax":
            import jax

            unroll = jax.default_backend() != "cpu"
            return jax.lax.fori_loop(0, count, body, state, unroll=unroll or None)
        for i in range(count):
            state = body(i, state)
        return state

    def index_last(self, value: Any, index: Any) -> Any:
        """``value[..., index]`` for an int or (under JAX) a traced index."""
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_index_in_dim(value, index, axis=value.ndim - 1, keepdims=False)
        return value[..., index]

    def index_first(self, value: Any, index: Any) -> Any:
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_index_in_dim(value, index, axis=0, keepdims=False)
        return value[index]

    def set_last(self, value: Any, index: Any, item: Any) -> Any:
        """``value`` with ``value[..., index] = item`` (a new array)."""
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_update_slice_in_dim(value, item[..., None], index, axis=value.ndim - 1)
        return self.concat([value[..., :index], item[..., None], value[..., index + 1 :]], -1)

    def shift_last(self, value: Any, count: Any) -> Any:
        """``value`` moved ``count`` places up the last axis, zeros in front, the top dropped."""
        if self.name == "jax":
            columns = self.xp.arange(value.shape[-1])
            return self.xp.where(columns >= count, self.xp.roll(value, count, axis=-1), 0)
        if count == 0:
            return value
        return self.pad_last(value[..., : value.shape[-1] - count], count, 0)

    def swap01(self, value: Any) -> Any:
        return value.transpose(0, 1) if self.name == "torch" else self.xp.swapaxes(value, 0, 1)

    def is_integer(self, dtype: Any) -> bool:
        if self.name == "torch":
            return not (dtype.is_floating_point or dtype.is_complex or dtype == self.xp.bool)
        return bool(self.xp.issubdtype(dtype, self.xp.integer))

    def stack(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.stack(arrays, axis)

    def pad_last(self, value: Any, left: int, right: int) -> Any:
        """Zeros before and after the last axis."""
        if self.name == "torch":
            return self.xp.nn.functional.pad(value, (left, right))
        return self.xp.pad(value, [(0, 0)] * (value.ndim - 1) + [(left, right)])

    def min_last(self, value: Any) -> Any:
        return self.xp.amin(value, -1) if self.name == "torch" else self.xp.min(value, -1)

    def sum_last(self, value: Any) -> Any:
        return self.xp.sum(value, -1, dtype=value.dtype)

    def any_last(self, value: Any) -> Any:
        return self.xp.any(value, -1)

    def concat(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.cat(arrays, axis) if self.name == "torch" else self.xp.concatenate(arrays, axis)

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        """Indices of the true entries of a 1-D array, padded with ``fill`` (or cut) to ``size``."""
        if self.name == "torch":
            return self.xp.nonzero_static(flags, size=size, fill_value=fill)[:, 0]
        if self.name == "jax":
            return self.xp.nonzero(flags, size=size, fill_value=fill)[0]
        found = np.flatnonzero(flags)[:size]
        return np.concatenate([found, np.full(size - len(found), fill, dtype=found.dtype)])

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        """``flat`` with ``flat[index] = values``; indices equal to ``len(flat)`` are dropped."""
        if self.name == "jax":
            return flat.at[index].set(values, mode="drop")
        padded = self.concat([flat, flat[:1]], 0)
        if self.name == "torch":
            return padded.index_put((index,), values)[:-1]
        padded[index] = values
        return padded[:-1]


def backend_of(array: Any) -> Backend:
    """The :class:`Backend` of an array (NumPy, torch or JAX)."""
    module = type(array).__module__
    if module.startswith("torch"):
        import torch

        return Backend(torch, "torch")
    if module.startswith(("jax", "jaxlib")):
        import jax.numpy as jnp

        return Backend(jnp, "jax")
    return Backend(np, "numpy")


def is_floating(ops: Backend, dtype: Any) -> bool:
    """Whether ``dtype`` (of the backend's arrays) is a floating-point dtype (bfloat16 included)."""
    if ops.name == "torch":
        return bool(dtype.is_floating_point)
    if ops.name == "jax":
        return bool(ops.xp.issubdtype(dtype, ops.xp.floating))
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"
