"""The fuzz suite (tests/support/fuzzing.py), :mod:`posenc.positions`: ``from_attention_mask``,
``from_cu_seqlens``
and ``make_positions``, NumPy and torch alike."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc.torch as pt
from posenc import positions
from tests.support.fuzz_cases import right_value_or_clear_error
from tests.support.fuzzing import fuzz


def _as_array(value):
    """``value`` as NumPy reads it (an empty list as int64), or None where NumPy refuses it (ragged, ...)."""
    with contextlib.suppress(ValueError, TypeError):
        array = np.asarray(value)
        return array.astype(np.int64) if array.size == 0 and not isinstance(value, np.ndarray) else array
    return None


def _the_same_on_torch(call, got, bad):
    """The torch twin of a positions helper: the NumPy helper's value (``got``) or the same clear error."""
    right_value_or_clear_error(
        call,
        valid=not bad,
        names=bad,
        check=lambda result: (
            None if isinstance(got, Exception) else np.testing.assert_array_equal(result.numpy(), got)
        ),
    )


@fuzz(80)
@given(
    mask=st.one_of(
        st.builds(
            lambda values, dtype, shape: (
                np.array(
                    values[: math.prod(shape)] + [1] * (math.prod(shape) - len(values[: math.prod(shape)])),
                    dtype=np.int64,
                )
                .reshape(shape)
                .astype(dtype)
            ),
            st.lists(st.sampled_from([0, 1, 1, 2, -1, 255]), max_size=12),
            st.sampled_from([np.bool_, np.int64, np.int8, np.uint8, np.float32, np.int32]),
            st.sampled_from([(5,), (2, 5), (0,), (2, 0), (), (1, 2, 3)]),
        ),
        st.sampled_from([[], [[]], [1, 0, 1], [True, False], None, "1", [[1, 0], [1]]]),
    ),
    start=st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -(2**31), True, 1.0, None]),
    pad_position=st.sampled_from([0, -1, 7, 2**31, True, 1.5]),
)
def test_positions_from_attention_mask(mask, start, pad_position):
    array = _as_array(mask)
    bad = []
    if array is None or array.dtype.kind not in "biu" or array.ndim == 0 or not np.isin(array, [0, 1]).all():
        bad.append("attention_mask")
    for name, value in (("start", start), ("pad_position", pad_position)):
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) < value < 2**31:
            bad.append(name)
    if not bad and array.size and start + int(array.astype(bool).sum(-1).max()) - 1 >= 2**31:
        bad.append("start")  # the last position produced must be < 2**31 too
    want = None
    if not bad:
        m = array.astype(bool)
        want = np.where(m, np.cumsum(m, axis=-1) - 1 + start, pad_position)

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.from_attention_mask(mask, start=start, pad_position=pad_position),
        valid=not bad,
        names=bad,
        check=check,
    )
    if array is not None and array.dtype.kind in "biu" and array.dtype != np.uint16:
        _the_same_on_torch(
            lambda: pt.from_attention_mask(
                torch.from_numpy(array.copy()), start=start, pad_position=pad_position
            ),
            got,
            bad,
        )


@fuzz(80)
@given(
    cu=st.one_of(
        st.lists(st.integers(0, 6), min_size=0, max_size=5).map(
            lambda steps: [0, *np.cumsum(steps).tolist()]
        ),
        st.sampled_from(
            [
                [],
                [1, 3],
                [0, 3, 2],
                [0, 2**31],
                [[0, 1]],
                [0.0, 2.0],
                None,
                [0, -1],
                np.array([0, 3], np.uint8),
                np.array([0, 3], np.int8),
                [True, True],
            ]
        ),
    ),
    start=st.sampled_from([0, 1, -5, 2**31 - 1, 2**31, True, 1.0]),
    total=st.sampled_from([None, None, "auto", 0, -1, 2**31, True, 3.0]),
)
def test_positions_from_cu_seqlens(cu, start, total):
    if total == "auto":
        total = cu[-1] if isinstance(cu, list) and cu and isinstance(cu[-1], int) else 0
    array = _as_array(cu)
    bad = []
    if (
        array is None
        or array.dtype.kind not in "iu"
        or array.ndim != 1
        or not array.size
        or array[0] != 0
        or (np.diff(array.astype(np.int64)) < 0).any()
        or array[-1] >= 2**31
    ):
        bad.append("cu_seqlens")
    if not isinstance(start, int) or isinstance(start, bool) or not -(2**31) < start < 2**31:
        bad.append("start")
    if total is not None and (
        not isinstance(total, int) or isinstance(total, bool) or (not bad and total != array[-1])
    ):
        bad.append("total")
    if not bad and array.size > 1 and start + int(np.diff(array.astype(np.int64)).max()) - 1 >= 2**31:
        bad.append("start")  # the last position produced must be < 2**31 too
    want = None
    if not bad:
        want = np.concatenate(
            [np.arange(b - a) + start for a, b in zip(array[:-1].tolist(), array[1:].tolist(), strict=True)]
            + [np.zeros(0, np.int64)]
        )

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.from_cu_seqlens(cu, start=start, total=total), valid=not bad, names=bad, check=check
    )
    if array is not None and array.dtype.kind in "iu":
        _the_same_on_torch(
            lambda: pt.from_cu_seqlens(torch.from_numpy(array.copy()), start=start, total=total), got, bad
        )


@fuzz(80)
@given(
    ids=st.one_of(
        st.builds(
            lambda values, dtype, shape: np.resize(np.array(values or [1], dtype=np.int64), shape).astype(
                dtype
            ),
            st.lists(st.sampled_from([0, 1, 2, 5, 127, 2**31]), max_size=10),
            st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.float32, np.bool_]),
            st.sampled_from([(5,), (2, 5), (0,), (), (2, 0)]),
        ),
        st.sampled_from([[], [[1, 2], [3]], "12", None]),
    ),
    padding_idx=st.sampled_from([1, 0, -1, 2**31 - 1, 2**31, True, 1.0, None]),
    past=st.sampled_from([0, 3, -1, 2**31, True]),
)
def test_positions_make_positions(ids, padding_idx, past):
    array = _as_array(ids)
    bad = []
    if array is None or array.dtype.kind not in "iu" or array.ndim == 0:
        bad.append("ids")
    if (
        not isinstance(padding_idx, int)
        or isinstance(padding_idx, bool)
        or not -(2**31) < padding_idx < 2**31
    ):
        bad.append("padding_idx")
    if not isinstance(past, int) or isinstance(past, bool) or not 0 <= past < 2**31:
        bad.append("past_key_values_length")
    if not bad and array.size and padding_idx + past + int((array != padding_idx).sum(-1).max()) >= 2**31:
        bad.append("padding_idx")  # the last position produced must be < 2**31 too
    want = None
    if not bad:
        mask = array != padding_idx
        want = (np.cumsum(mask, axis=-1) + past) * mask + padding_idx

    def check(result):
        assert result.dtype == np.int64 and np.array_equal(result, want), (result, want)

    got = right_value_or_clear_error(
        lambda: positions.make_positions(ids, padding_idx, past_key_values_length=past),
        valid=not bad,
        names=bad,
        check=check,
    )
    if array is not None and array.dtype.kind in "iu":
        _the_same_on_torch(
            lambda: pt.make_positions(
                torch.from_numpy(array.copy()), padding_idx, past_key_values_length=past
            ),
            got,
            bad,
        )
