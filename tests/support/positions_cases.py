"""What the tests of posenc.positions (tests/positions/test_positions*.py) share: the NumPy and torch
implementations
side by side, and independent references that number one token at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from posenc import positions

try:
    import torch

    from posenc.torch import positions as torch_positions
except ImportError:  # the NumPy tests still run (torch and torch_positions are None)
    torch = None
    torch_positions = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch: pip install 'posenc[torch]'")


@dataclass(frozen=True)
class Impl:
    """One implementation: its module, how to build its input and how to read its output back."""

    name: str
    module: Any

    def array(self, values: Any, dtype: str | None = None) -> Any:
        array = np.asarray(values, dtype=dtype)
        return array if self.name == "numpy" else torch.from_numpy(array)

    def result(self, got: Any) -> np.ndarray:
        """The output as a NumPy array, after checking it is int64 (and a tensor on the CPU for torch)."""
        if self.name == "numpy":
            assert isinstance(got, np.ndarray) and got.dtype == np.int64
            return got
        assert isinstance(got, torch.Tensor) and got.dtype == torch.int64 and got.device.type == "cpu"
        return got.numpy()


NUMPY = Impl("numpy", positions)
TORCH = Impl("torch", torch_positions)
IMPLS = [
    pytest.param(NUMPY, id="numpy"),
    pytest.param(TORCH, id="torch", marks=needs_torch),
]


def check(impl: Impl, got: Any, expected: Any) -> None:
    result = impl.result(got)
    expected = np.asarray(expected, dtype=np.int64)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


# --- independent references: one token at a time ---------------------------------------------------


def reference_mask(mask: np.ndarray, start: int = 0, pad_position: int = 0) -> np.ndarray:
    out = np.empty(mask.shape, dtype=np.int64)
    for index in np.ndindex(mask.shape[:-1]):
        k = start
        for j, real in enumerate(mask[index]):
            if real:
                out[(*index, j)] = k
                k += 1
            else:
                out[(*index, j)] = pad_position
    return out


def reference_packed(lengths: list[int], start: int = 0) -> list[int]:
    return [start + k for length in lengths for k in range(length)]


def fairseq_make_positions(tensor, padding_idx: int):
    """fairseq/utils.py ``make_positions``, verbatim (onnx_trace branch aside)."""
    mask = tensor.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def hf_create_position_ids_from_input_ids(input_ids, padding_idx, past_key_values_length=0):
    """transformers, modeling_m2m_100 / modeling_xglm / modeling_speech_to_text, verbatim."""
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
    return incremental_indices.long() + padding_idx
