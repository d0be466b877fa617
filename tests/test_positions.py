"""Position ids from masks, packed sequences and fairseq-style ids: NumPy and torch, the same rules.

Every rule is checked against an independent reference (a plain Python loop over the tokens, or fairseq's and
Hugging Face's own code copied literally), for both implementations; the two are also compared on random
inputs, compiled with ``torch.compile(fullgraph=True)`` and exported with ``torch.export``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import positions

try:
    import torch

    from posenc.torch import positions as _torch_positions
except ImportError:  # the NumPy tests still run
    torch = None
    _torch_positions = None

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
TORCH = Impl("torch", _torch_positions)
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


# --- from_attention_mask ---------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ["bool", "int64", "int32", "uint8"])
def test_mask_example(impl, dtype):
    mask = impl.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]], dtype)
    check(impl, impl.module.from_attention_mask(mask), [[0, 0, 0, 1, 2], [0, 1, 2, 0, 0]])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("mask", "expected"),
    [
        ([0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 2]),  # left padding
        ([1, 1, 1, 1, 0, 0], [0, 1, 2, 3, 0, 0]),  # right padding
        ([1, 1, 0, 0, 1, 1], [0, 1, 0, 0, 2, 3]),  # padding in the middle
        ([0, 1, 0, 1, 0, 1], [0, 0, 0, 1, 0, 2]),  # alternating
        ([1, 1, 1], [0, 1, 2]),  # no padding
        ([0, 0, 0], [0, 0, 0]),  # padding only
        ([1], [0]),
        ([], []),
    ],
)
def test_mask_padding_anywhere(impl, mask, expected):
    check(impl, impl.module.from_attention_mask(impl.array(mask, "int64")), expected)
    check(impl, impl.module.from_attention_mask(impl.array(mask, "bool")), expected)


@pytest.mark.parametrize("impl", IMPLS)
def test_mask_start_and_pad_position(impl):
    mask = impl.array([[0, 1, 1, 0, 1], [1, 0, 0, 1, 1]], "bool")
    check(impl, impl.module.from_attention_mask(mask, start=2), [[0, 2, 3, 0, 4], [2, 0, 0, 3, 4]])
    check(
        impl, impl.module.from_attention_mask(mask, pad_position=-1), [[-1, 0, 1, -1, 2], [0, -1, -1, 1, 2]]
    )
    # fairseq's numbering (padding_idx = 1) written as a mask rule: start at 2, padding at 1.
    check(
        impl,
        impl.module.from_attention_mask(mask, start=2, pad_position=1),
        [[1, 2, 3, 1, 4], [2, 1, 1, 3, 4]],
    )
    check(impl, impl.module.from_attention_mask(mask, start=-3), [[0, -3, -2, 0, -1], [-3, 0, 0, -2, -1]])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7), (2, 1, 3, 5), (4, 0), (0, 4)])
def test_mask_batch_axes(impl, shape):
    mask = np.random.default_rng(sum(shape)).integers(0, 2, size=shape)
    got = impl.module.from_attention_mask(impl.array(mask), start=1, pad_position=-5)
    check(impl, got, reference_mask(mask, start=1, pad_position=-5))


def test_mask_3d_worked_example():
    mask = np.array([[[1, 1, 0], [0, 1, 1]], [[0, 0, 1], [1, 0, 1]]])
    expected = [[[0, 1, 0], [0, 0, 1]], [[0, 0, 0], [0, 0, 1]]]
    np.testing.assert_array_equal(positions.from_attention_mask(mask), expected)
    np.testing.assert_array_equal(reference_mask(mask), expected)


@pytest.mark.parametrize("impl", IMPLS)
def test_mask_does_not_modify_its_input(impl):
    mask = impl.array([[1, 0, 1]], "int64")
    impl.module.from_attention_mask(mask, start=3)
    check(impl, mask, [[1, 0, 1]])


# --- from_cu_seqlens -------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_cu_seqlens_example(impl, dtype):
    got = impl.module.from_cu_seqlens(impl.array([0, 3, 5, 9], dtype))
    check(impl, got, [0, 1, 2, 0, 1, 0, 1, 2, 3])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("cu", "expected"),
    [
        ([0, 0, 2, 2, 2, 5], [0, 1, 0, 1, 2]),  # empty documents first and in the middle
        ([0, 3, 3], [0, 1, 2]),  # empty document last
        ([0, 1, 2, 3], [0, 0, 0]),  # one token each
        ([0, 4], [0, 1, 2, 3]),  # a single document
        ([0, 0, 0], []),  # only empty documents
        ([0], []),  # no documents
    ],
)
def test_cu_seqlens_empty_documents(impl, cu, expected):
    check(impl, impl.module.from_cu_seqlens(impl.array(cu, "int32")), expected)
    check(impl, impl.module.from_cu_seqlens(impl.array(cu, "int64"), total=cu[-1]), expected)


@pytest.mark.parametrize("impl", IMPLS)
def test_cu_seqlens_start(impl):
    cu = impl.array([0, 2, 2, 5], "int32")
    check(impl, impl.module.from_cu_seqlens(cu, start=1), [1, 2, 1, 2, 3])
    check(impl, impl.module.from_cu_seqlens(cu, start=-2), [-2, -1, -2, -1, 0])


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 9), max_size=12), start=st.integers(-3, 3))
def test_cu_seqlens_match_a_loop_over_documents(lengths, start):
    cu = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)
    expected = reference_packed(lengths, start)
    check(NUMPY, positions.from_cu_seqlens(cu, start=start), expected)
    if torch is not None:
        check(TORCH, _torch_positions.from_cu_seqlens(torch.from_numpy(cu), start=start), expected)


def test_cu_seqlens_numpy_has_no_loop_over_documents():
    """A million documents of length 1 take one vectorised pass (a Python loop would take seconds)."""
    cu = np.arange(1_000_001, dtype=np.int32)
    np.testing.assert_array_equal(positions.from_cu_seqlens(cu), np.zeros(1_000_000))


# --- make_positions --------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_make_positions_example(impl):
    ids = impl.array([[5, 6, 7, 1, 1], [1, 1, 8, 9, 4]], "int64")
    check(impl, impl.module.make_positions(ids, 1), [[2, 3, 4, 1, 1], [1, 1, 2, 3, 4]])
    check(
        impl, impl.module.make_positions(ids, 1, past_key_values_length=3), [[5, 6, 7, 1, 1], [1, 1, 5, 6, 7]]
    )
    check(impl, impl.module.make_positions(ids, padding_idx=0), [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]])


@pytest.mark.parametrize("impl", IMPLS)
def test_make_positions_batch_axes(impl):
    ids = np.array([[[1, 4, 1], [4, 4, 4]], [[1, 1, 1], [9, 1, 9]]])
    expected = [[[1, 2, 1], [2, 3, 4]], [[1, 1, 1], [2, 1, 3]]]
    check(impl, impl.module.make_positions(impl.array(ids, "int32"), 1), expected)
    check(impl, impl.module.make_positions(impl.array([3, 1, 3], "int64"), 1), [2, 1, 3])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "uint32", "int32"])
def test_make_positions_compares_true_values_in_every_dtype(impl, dtype):
    """A padding_idx outside the dtype's range matches no token (uint8 255 is not -1)."""
    ids = impl.array([[0, 127, 1, 3]], dtype)
    check(impl, impl.module.make_positions(ids, 1), [[2, 3, 1, 4]])
    check(impl, impl.module.make_positions(ids, -1), [[0, 1, 2, 3]])
    check(impl, impl.module.make_positions(ids, 70000), [[70001, 70002, 70003, 70004]])
    if dtype.startswith("u"):
        check(impl, impl.module.make_positions(impl.array([[255, 2]], dtype), -1), [[0, 1]])


@needs_torch
@pytest.mark.parametrize("padding_idx", [1, 0, 2, -1])
@pytest.mark.parametrize("past_key_values_length", [0, 1, 7])
def test_make_positions_is_fairseq_and_hugging_face(padding_idx, past_key_values_length):
    generator = torch.Generator().manual_seed(padding_idx + 10 * past_key_values_length)
    ids = torch.randint(-1, 4, (5, 11), generator=generator)
    ids[0] = padding_idx  # a row of padding only
    ids[1, :4] = padding_idx  # left padding
    ids[2, -3:] = padding_idx  # right padding
    hf = hf_create_position_ids_from_input_ids(ids, padding_idx, past_key_values_length)
    torch.testing.assert_close(
        _torch_positions.make_positions(ids, padding_idx, past_key_values_length=past_key_values_length),
        hf,
        rtol=0,
        atol=0,
    )
    got = positions.make_positions(ids.numpy(), padding_idx, past_key_values_length=past_key_values_length)
    np.testing.assert_array_equal(got, hf.numpy())
    if past_key_values_length == 0:
        np.testing.assert_array_equal(hf.numpy(), fairseq_make_positions(ids, padding_idx).numpy())


# --- NumPy and torch agree -------------------------------------------------------------------------


@needs_torch
@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    seed=st.integers(0, 2**32 - 1),
    start=st.integers(-4, 4),
    pad=st.integers(-4, 4),
)
def test_numpy_and_torch_agree(shape, seed, start, pad):
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < rng.random()
    expected = positions.from_attention_mask(mask, start=start, pad_position=pad)
    np.testing.assert_array_equal(expected, reference_mask(mask, start, pad))
    got = _torch_positions.from_attention_mask(torch.from_numpy(mask), start=start, pad_position=pad)
    np.testing.assert_array_equal(got.numpy(), expected)

    ids = rng.integers(0, 3, size=shape)
    expected = positions.make_positions(ids, start, past_key_values_length=abs(pad))
    got = _torch_positions.make_positions(torch.from_numpy(ids), start, past_key_values_length=abs(pad))
    np.testing.assert_array_equal(got.numpy(), expected)

    cu = np.concatenate([[0], np.cumsum(rng.integers(0, 5, size=shape[0]))])
    expected = positions.from_cu_seqlens(cu, start=start)
    np.testing.assert_array_equal(
        _torch_positions.from_cu_seqlens(torch.from_numpy(cu), start=start), expected
    )


# --- bad inputs ------------------------------------------------------------------------------------

BAD_MASKS = [
    (
        "float64",
        [[1.0, 0.0]],
        TypeError,
        r"attention_mask must be bool or 0/1 integers .* got dtype (torch\.)?float64",
    ),
    ("float32", [1.0, 1.0], TypeError, r"got dtype (torch\.)?float32; pass attention_mask != 0"),
    (
        "int64",
        [[1, 1, 0, 2]],
        ValueError,
        re.escape("only 0 and 1 (1 = real token, 0 = padding); got 2 at index (0, 3)"),
    ),
    ("int64", [[1, -1]], ValueError, re.escape("got -1 at index (0, 1)")),
    (
        "int64",
        1,
        ValueError,
        re.escape("attention_mask must have at least one axis, shape (..., seq); got shape ()"),
    ),
    ("bool", True, ValueError, re.escape("got shape ()")),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("dtype", "mask", "error", "match"), BAD_MASKS)
def test_bad_masks(impl, dtype, mask, error, match):
    with pytest.raises(error, match=match):
        impl.module.from_attention_mask(impl.array(mask, dtype))


BAD_CU_SEQLENS = [
    (
        "int64",
        [[0, 2], [0, 3]],
        ValueError,
        re.escape("cu_seqlens must be 1-D, [0, l0, l0 + l1, ..., total]; got shape (2, 2)"),
    ),
    ("int64", 0, ValueError, re.escape("cu_seqlens must be 1-D") + ".* got shape \\(\\)"),
    (
        "int32",
        [1, 3, 5],
        ValueError,
        re.escape("cu_seqlens must start at 0") + ".* got cu_seqlens\\[0\\] = 1; prepend 0",
    ),
    ("int32", [], ValueError, "cu_seqlens must start at 0.* got an empty"),
    (
        "int32",
        [0, 3, 2, 5],
        ValueError,
        re.escape("non-decreasing") + ".* got cu_seqlens\\[1\\] = 3 > cu_seqlens\\[2\\] = 2",
    ),
    (
        "float32",
        [0.0, 3.0],
        TypeError,
        r"cu_seqlens must be an integer (array|tensor); got dtype (torch\.)?float32",
    ),
    (
        "bool",
        [False, True],
        TypeError,
        r"cu_seqlens must be an integer (array|tensor); got dtype (torch\.)?bool",
    ),
    (
        "int64",
        [0, 2**31],
        ValueError,
        re.escape("cu_seqlens[-1], the number of packed tokens, must be < 2**31"),
    ),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("dtype", "cu", "error", "match"), BAD_CU_SEQLENS)
def test_bad_cu_seqlens(impl, dtype, cu, error, match):
    with pytest.raises(error, match=match):
        impl.module.from_cu_seqlens(impl.array(cu, dtype))


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_total(impl):
    cu = impl.array([0, 3, 5], "int32")
    with pytest.raises(ValueError, match=re.escape("total=4 does not match cu_seqlens[-1] = 5")):
        impl.module.from_cu_seqlens(cu, total=4)
    with pytest.raises(ValueError, match=re.escape("total must satisfy 0 <= total < 2**31")):
        impl.module.from_cu_seqlens(cu, total=-1)
    with pytest.raises(
        TypeError, match=re.escape("total must be an integer; got 5.0 of type float (pass 5 instead)")
    ):
        impl.module.from_cu_seqlens(cu, total=5.0)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("dtype", "ids", "error", "match"),
    [
        (
            "float32",
            [[1.0, 2.0]],
            TypeError,
            r"ids must be an integer (array|tensor); got dtype (torch\.)?float32",
        ),
        (
            "bool",
            [[True, False]],
            TypeError,
            r"ids must be an integer (array|tensor); got dtype (torch\.)?bool",
        ),
        (
            "int64",
            3,
            ValueError,
            re.escape("ids must have at least one axis, shape (..., seq); got a scalar"),
        ),
    ],
)
def test_bad_ids(impl, dtype, ids, error, match):
    with pytest.raises(error, match=match):
        impl.module.make_positions(impl.array(ids, dtype), 1)


BAD_INTEGERS = [
    (1.0, TypeError, "must be an integer; got 1.0 of type float \\(pass 1 instead\\)"),
    (1.5, TypeError, "must be an integer; got 1.5 of type float$"),
    (True, TypeError, "must be an integer; got True of type bool"),
    (np.bool_(False), TypeError, "must be an integer; got .*False.* of type bool"),
    ("1", TypeError, "must be an integer; got '1' of type str"),
    (None, TypeError, "must be an integer; got None of type NoneType"),
    (2**31, ValueError, re.escape("< 2**31 = 2147483648 (the range posenc encodes exactly); got 2147483648")),
    (-(2**31), ValueError, re.escape("must satisfy -2147483647 <= ")),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("value", "error", "match"), BAD_INTEGERS)
def test_bad_integer_options(impl, value, error, match):
    mask = impl.array([[1, 0]], "int64")
    with pytest.raises(error, match="start " + match):
        impl.module.from_attention_mask(mask, start=value)
    with pytest.raises(error, match="pad_position " + match):
        impl.module.from_attention_mask(mask, pad_position=value)
    with pytest.raises(error, match="start " + match):
        impl.module.from_cu_seqlens(impl.array([0, 2], "int64"), start=value)
    with pytest.raises(error, match="padding_idx " + match):
        impl.module.make_positions(mask, value)
    if value != -(2**31):
        with pytest.raises(error, match="past_key_values_length " + match):
            impl.module.make_positions(mask, 1, past_key_values_length=value)


@pytest.mark.parametrize("impl", IMPLS)
def test_negative_past_key_values_length(impl):
    with pytest.raises(
        ValueError, match=re.escape("past_key_values_length must satisfy 0 <= past_key_values_length")
    ):
        impl.module.make_positions(impl.array([[2, 1]], "int64"), 1, past_key_values_length=-1)


def test_numpy_integer_options_and_array_likes():
    mask = [[True, False, True]]
    assert positions.from_attention_mask(mask, start=np.int32(2)).tolist() == [[2, 0, 3]]
    assert positions.make_positions((4, 1, 4), np.int64(1)).tolist() == [2, 1, 3]
    assert positions.from_cu_seqlens((0, 2), total=np.uint8(2)).tolist() == [0, 1]
    assert positions.from_attention_mask([]).shape == (0,)


@needs_torch
@pytest.mark.parametrize("function", ["from_attention_mask", "from_cu_seqlens", "make_positions"])
def test_torch_functions_need_tensors(function):
    args = (1,) if function == "make_positions" else ()
    with pytest.raises(
        TypeError, match=re.escape("must be a torch.Tensor; got list; wrap it with torch.as_tensor")
    ):
        getattr(_torch_positions, function)([0, 1, 1], *args)


# --- torch: device, meta tensors, torch.compile, torch.export --------------------------------------


@needs_torch
def test_torch_value_checks_are_skipped_on_meta_tensors():
    """Meta tensors have no values to check; the shape and dtype still come out right."""
    mask = torch.empty(2, 5, dtype=torch.int64, device="meta")
    got = _torch_positions.from_attention_mask(mask, start=1)
    assert got.device.type == "meta" and got.dtype == torch.int64 and got.shape == (2, 5)
    got = _torch_positions.from_cu_seqlens(torch.empty(4, dtype=torch.int32, device="meta"), total=9)
    assert got.device.type == "meta" and got.dtype == torch.int64 and got.shape == (9,)
    got = _torch_positions.make_positions(mask, 1)
    assert got.device.type == "meta" and got.shape == (2, 5)


def _all_three(mask, cu, ids, packed, start):
    """One graph for all three functions, so the test pays for one compilation."""
    return (
        _torch_positions.from_attention_mask(mask, start=start, pad_position=-1),
        _torch_positions.from_cu_seqlens(cu, start=start, total=packed.shape[-1]),
        _torch_positions.from_cu_seqlens(cu),  # data-dependent length: an unbacked size
        _torch_positions.make_positions(ids, start, past_key_values_length=2),
    )


def _inputs(batch, seq, lengths, start):
    generator = torch.Generator().manual_seed(batch * 100 + seq)
    mask = torch.rand(batch, seq, generator=generator) < 0.7
    ids = torch.randint(start - 1, start + 2, (batch, seq), generator=generator)
    cu = torch.tensor([0, *np.cumsum(lengths).tolist()], dtype=torch.int32)
    return mask.int(), cu, ids, torch.zeros(1, sum(lengths)), start


@needs_torch
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's
def test_torch_compile_fullgraph_matches_eager():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_all_three, fullgraph=True, dynamic=True, backend=counter)
    for batch, seq, lengths, start in [(2, 6, [3, 0, 2], 3), (3, 9, [4, 4, 1, 7], 5), (4, 3, [0, 6], 8)]:
        args = _inputs(batch, seq, lengths, start)
        for got, expected in zip(compiled(*args), _all_three(*args), strict=True):
            assert got.dtype == torch.int64
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert counter.frame_count == 1  # one graph: no recompilation across shapes and starts


@needs_torch
def test_torch_export_matches_eager():
    class Positions(torch.nn.Module):
        def forward(self, mask, cu, ids, packed, start):
            return _all_three(mask, cu, ids, packed, start)

    exported = torch.export.export(Positions(), _inputs(2, 6, [3, 0, 2], 1))
    args = _inputs(2, 6, [1, 1, 3], 1)  # the same shapes (export specialises them), other values
    for got, expected in zip(exported.module()(*args), _all_three(*args), strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: positions.from_attention_mask([[1, 0], [1]]), "attention_mask"),
        (lambda: positions.make_positions([[1, 2], [3]], 1), "ids"),
        (lambda: positions.from_cu_seqlens([[0, 1], [2]]), "cu_seqlens"),
    ],
)
def test_ragged_lists_name_the_argument(call, name):
    with pytest.raises(TypeError, match=rf"^{name} must be a rectangular array"):
        call()
