"""Every result is the caller's own: changing it in place never changes what the next call returns.

Each public function that returns an array or a tensor (NumPy, torch, JAX; encodings, tables, rotary
cos/sin, presets, grids, positions, sharding, analysis, modules) is called, every array in its result is
changed in place (or, where a read-only array is the design, the change must raise), and the same call must
then return the values of the first call. A result that is a view of a cache fails here: the caches would
carry the change to every later call of the process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from tests.support.public_calls import CALLS, arrays_of, snapshot


def _mutate(array: Any) -> bool:
    """Change every element in place; False when the array refuses (read-only by design)."""
    if isinstance(array, torch.Tensor):
        with torch.no_grad():
            if array.dtype == torch.bool:
                array.logical_not_()
            else:
                array.add_(7)
        return True
    if not array.flags.writeable:
        with pytest.raises(ValueError, match="read-only"):
            array += 7
        return False
    if array.dtype == np.bool_:
        np.logical_not(array, out=array)
    else:
        array[...] = array + np.asarray(7).astype(array.dtype)
    return True


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_result_is_the_callers_own(name):
    call = CALLS[name]
    first = call()
    arrays = arrays_of(first)
    assert arrays, f"{name} returned no array: {type(first)}"
    before = [snapshot(a) for a in arrays]
    changed = [_mutate(a) for a in arrays]
    if any(changed):
        assert any(not np.array_equal(snapshot(a), b) for a, b in zip(arrays, before, strict=True))
    again = [snapshot(a) for a in arrays_of(call())]
    for got, want in zip(again, before, strict=True):
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: an in-place change reached the next call")


def test_the_module_after_a_changed_encode_is_unchanged():
    """The case of the report: ``e = encode(3, 8); e += 100`` must not reach the module's output."""
    module = pt.SinusoidalPositionalEncoding(8)
    want = module(torch.zeros(5, 1, 8)).clone()
    for dtype in (torch.float32, torch.bfloat16):
        e = pt.encode(3, 8, dtype=dtype)
        e += 100
    np.testing.assert_array_equal(module(torch.zeros(5, 1, 8)).numpy(), want.numpy())
    np.testing.assert_array_equal(pt.encode(torch.arange(5), 8).numpy(), posenc.table(5, 8))


def test_jax_results_are_immutable_and_their_host_copies_read_only():
    import jax.numpy as jnp

    import posenc.jax as pj

    first = pj.encode(jnp.asarray(3), 8)
    host = np.asarray(first)
    with pytest.raises(ValueError, match="read-only"):
        host += 7
    changed = first.at[0].set(100.0)  # JAX's only "in place" is a new array
    assert float(changed[0]) == 100.0
    np.testing.assert_array_equal(np.asarray(pj.encode(jnp.asarray(3), 8)), posenc.encode(3, 8))
    table = pj.table(4, 8)
    _ = table.at[:].add(7)
    np.testing.assert_array_equal(np.asarray(pj.table(4, 8)), posenc.table(4, 8))
