"""What the torch files of the fuzz suite (tests/support/fuzzing.py) share: torch's position dtypes, tensors
of
adversarial positions, and the values of a result tensor as NumPy reads them."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import strategies as st

from tests.support.fuzz_cases import BFLOAT16
from tests.support.fuzzing import (
    INTS,
    SHAPES,
    _values_for,
)

# --- posenc.torch -------------------------------------------------------------------------------------

TORCH_INTS = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]
TORCH_FLOATS = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]
TORCH_OTHER = [torch.bool, torch.complex64, torch.complex128]
TORCH_OUT = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}


def numpy_of(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as a NumPy array holding the same values exactly (float64 for real dtypes NumPy lacks)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    if tensor.is_floating_point():
        return (
            tensor.to(torch.float64).numpy()
            if tensor.dtype not in (torch.float16, torch.float32, torch.float64)
            else tensor.numpy()
        )
    if tensor.dtype in (torch.uint16, torch.uint32, torch.uint64):
        return np.array([int(v) for v in tensor.reshape(-1).tolist()], dtype=np.uint64).reshape(
            tuple(tensor.shape)
        )
    return tensor.numpy()


@st.composite
def torch_positions(draw, shapes=SHAPES) -> tuple[torch.Tensor, np.ndarray]:
    """(a CPU position tensor of any dtype, the same values as a NumPy array)."""
    dtype = draw(
        st.sampled_from(
            TORCH_INTS + TORCH_FLOATS + TORCH_FLOATS[:4] + [torch.int64, torch.int32] + TORCH_OTHER
        )
    )
    shape = draw(st.sampled_from(shapes))
    size = math.prod(shape)
    if dtype in TORCH_OTHER:
        tensor = torch.zeros(shape, dtype=dtype)
    elif not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        values = draw(
            st.lists(st.one_of(st.sampled_from(INTS), st.integers(-300, 300)), min_size=size, max_size=size)
        )
        values = [min(max(v, int(info.min)), int(info.max)) for v in values]
        wide = np.uint64 if dtype in (torch.uint32, torch.uint64) else np.int64
        tensor = (
            torch.from_numpy(np.array(values, dtype=wide).reshape(shape)).to(dtype)
            if dtype != torch.uint64
            else torch.from_numpy(np.array(values, dtype=np.uint64).reshape(shape))
        )
    else:
        values = _values_for(draw, np.dtype(np.float64), size).reshape(shape)
        tensor = torch.from_numpy(values).to(dtype)
    return tensor, numpy_of(tensor) if dtype not in TORCH_OTHER else None


def torch_values(tensor: torch.Tensor) -> np.ndarray:
    """A float result tensor as NumPy, bit for bit (bfloat16 as ml_dtypes')."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.contiguous().view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()
