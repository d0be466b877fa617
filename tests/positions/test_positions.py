"""Position ids from masks, packed sequences and fairseq-style ids: NumPy and torch, the same rules.

Every rule is checked against an independent reference (a plain Python loop over the tokens, or fairseq's and
Hugging Face's own code copied literally, tests/support/positions_cases.py), for both implementations; the
two are
also compared on random inputs. Bad input, ``torch.compile(fullgraph=True)`` and ``torch.export``:
tests/positions/test_positions_input.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import positions
from tests.support.positions_cases import (
    IMPLS,
    NUMPY,
    TORCH,
    check,
    fairseq_make_positions,
    hf_create_position_ids_from_input_ids,
    needs_torch,
    reference_mask,
    reference_packed,
    torch,
    torch_positions,
)

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
        check(TORCH, torch_positions.from_cu_seqlens(torch.from_numpy(cu), start=start), expected)


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
        torch_positions.make_positions(ids, padding_idx, past_key_values_length=past_key_values_length),
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
    got = torch_positions.from_attention_mask(torch.from_numpy(mask), start=start, pad_position=pad)
    np.testing.assert_array_equal(got.numpy(), expected)

    ids = rng.integers(0, 3, size=shape)
    expected = positions.make_positions(ids, start, past_key_values_length=abs(pad))
    got = torch_positions.make_positions(torch.from_numpy(ids), start, past_key_values_length=abs(pad))
    np.testing.assert_array_equal(got.numpy(), expected)

    cu = np.concatenate([[0], np.cumsum(rng.integers(0, 5, size=shape[0]))])
    expected = positions.from_cu_seqlens(cu, start=start)
    np.testing.assert_array_equal(
        torch_positions.from_cu_seqlens(torch.from_numpy(cu), start=start), expected
    )
