"""posenc.positions on bad input (one clear error naming the argument), and torch's meta tensors,
torch.compile and torch.export."""

from __future__ import annotations

import re

import numpy as np
import pytest

from posenc import positions, validation
from tests.support.positions_cases import (
    IMPLS,
    check,
    needs_torch,
    torch,
    torch_positions,
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


@pytest.mark.parametrize("impl", IMPLS)
def test_the_last_position_produced_must_be_below_2_31(impl):
    """start, padding_idx and past_key_values_length are each < 2**31, but the positions they start must be
    too: 2**31 - 1 + 1 was returned as 2147483648 (which no encoding takes)."""
    last = re.escape("must be < 2**31 = 2147483648")
    with pytest.raises(
        ValueError, match=r"start \+ k - 1 = 2147483648, .* " + last + ".* at most 2147483646"
    ):
        impl.module.from_attention_mask(impl.array([[1, 1, 0]], "int64"), start=2**31 - 1)
    with pytest.raises(ValueError, match=r"start \+ l - 1 = 2147483648, .* l = 3 tokens, " + last):
        impl.module.from_cu_seqlens(impl.array([0, 1, 4], "int64"), start=2**31 - 2)
    with pytest.raises(ValueError, match=r"= 2147483646 \+ 0 \+ 2 = 2147483648, .* lower padding_idx"):
        impl.module.make_positions(impl.array([[5, 5, 2**31 - 2]], "int64"), 2**31 - 2)
    with pytest.raises(ValueError, match=r"= 10 \+ 2147483637 \+ 1 = 2147483648, .* past_key_values_length"):
        impl.module.make_positions(impl.array([[5, 10]], "int64"), 10, past_key_values_length=2**31 - 11)
    # the last position itself, 2**31 - 1, is fine; padding does not count, nor does an all-padding row
    check(
        impl,
        impl.module.from_attention_mask(impl.array([[0, 1, 1]], "int64"), start=2**31 - 2),
        [[0, 2**31 - 2, 2**31 - 1]],
    )
    check(impl, impl.module.from_attention_mask(impl.array([[0, 0]], "int64"), start=2**31 - 1), [[0, 0]])
    check(impl, impl.module.from_cu_seqlens(impl.array([0, 1, 1], "int64"), start=2**31 - 1), [2**31 - 1])
    check(
        impl,
        impl.module.make_positions(impl.array([[2**31 - 2, 5]], "int64"), 2**31 - 2),
        [[2**31 - 2, 2**31 - 1]],
    )


def test_positions_too_large_for_memory_are_refused_before_any_work(monkeypatch):
    """Broadcast inputs of 2**24 tokens take no memory, but their positions (and the work making them,
    ~27 bytes a token) do: refused at once, not by a MemoryError (or a swap storm) after gigabytes."""
    monkeypatch.setattr(validation, "available_memory", lambda: 100 << 20)
    tokens = 2**24
    needed = re.escape(
        f"shape ({tokens},) and dtype int64 needs 0.422 GiB (3 arrays of its size at work) but only "
    )
    with pytest.raises(ValueError, match=needed + "0.0977 GiB .* split the batch"):
        positions.from_attention_mask(np.broadcast_to(True, (tokens,)))
    with pytest.raises(ValueError, match=needed + "0.0977 GiB .* split the batch"):
        positions.from_attention_mask(np.broadcast_to(np.int8(1), (tokens,)))
    with pytest.raises(ValueError, match=needed + "0.0977 GiB .* split the batch"):
        positions.make_positions(np.broadcast_to(np.int64(5), (tokens,)), 1)
    with pytest.raises(
        ValueError, match=re.escape("needs 0.5 GiB (4 arrays of its size at work)") + ".* pack fewer"
    ):
        positions.from_cu_seqlens([0, tokens])
    assert positions.from_cu_seqlens([0, 2**20]).shape == (2**20,)  # 32 MiB of work: not checked


def test_uint64_cu_seqlens_are_compared_as_the_numbers_they_are():
    """uint64 values >= 2**63 wrapped to negative int64 ones: [0, 2**63 + 1] was called decreasing."""
    cu = np.array([0, 2**63 + 1], np.uint64)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "< 2**31 = 2147483648 (FlashAttention keeps cu_seqlens in int32); got cu_seqlens[1] = "
        )
        + "9223372036854775809",
    ):
        positions.from_cu_seqlens(cu)
    assert positions.from_cu_seqlens(np.array([0, 2, 3], np.uint64)).tolist() == [0, 1, 0]


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
        getattr(torch_positions, function)([0, 1, 1], *args)


# --- torch: device, meta tensors, torch.compile, torch.export --------------------------------------


@needs_torch
def test_torch_value_checks_are_skipped_on_meta_tensors():
    """Meta tensors have no values to check; the shape and dtype still come out right."""
    mask = torch.empty(2, 5, dtype=torch.int64, device="meta")
    got = torch_positions.from_attention_mask(mask, start=1)
    assert got.device.type == "meta" and got.dtype == torch.int64 and got.shape == (2, 5)
    got = torch_positions.from_cu_seqlens(torch.empty(4, dtype=torch.int32, device="meta"), total=9)
    assert got.device.type == "meta" and got.dtype == torch.int64 and got.shape == (9,)
    got = torch_positions.make_positions(mask, 1)
    assert got.device.type == "meta" and got.shape == (2, 5)


def _all_three(mask, cu, ids, packed, start):
    """One graph for all three functions, so the test pays for one compilation."""
    return (
        torch_positions.from_attention_mask(mask, start=start, pad_position=-1),
        torch_positions.from_cu_seqlens(cu, start=start, total=packed.shape[-1]),
        torch_positions.from_cu_seqlens(cu),  # data-dependent length: an unbacked size
        torch_positions.make_positions(ids, start, past_key_values_length=2),
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
