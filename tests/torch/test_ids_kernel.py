"""Position ids on CUDA by angle addition (posenc.torch.kernels.table_kernel.ids_kernel): the core's bits
through the very kernels a GPU runs — integer ids anywhere in |p| < 2**31 (0, negative, both int32 ends,
random), every output dtype, layouts and odd widths, offsets added exactly (and sums past 2**31 - 1 as the
encode kernel's NaN rows), the settling kernel deciding uncertain values (a wide band makes them so) and its
negative control, the levels built once per request, and encode() sending integer ids there.

Without a GPU the kernels run in Triton's interpreter on CPU tensors, in one subprocess (this file run as a
script with TRITON_INTERPRET=1) that saves the outputs; the tests compare them with the NumPy core and the
portable algorithm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc import portable
from tests.support.interpreted import results_fixture
from tests.support.module_cases import UINT, portable_request

pytest.importorskip("triton")

#: Triton's interpreter takes about as long for a block of any size: the settling kernel's exact block, and
#: the levels' (built first, one program each: the encode kernel's own bits are test_encode_kernel's)
EXACT = {"exact_block": (128, 64)}
LEVELS_BLOCK = (1024, 64)


def _ids() -> np.ndarray:
    """Ids over the whole valid range: 0, ±1, both int32 ends, each level's edges, and random ones."""
    edges = [0, 1, -1, 255, 256, 65535, 65536, 2**24 - 1, 2**24, 2**31 - 1, -(2**31) + 1, 123456789]
    rng = np.random.default_rng(48)
    return np.concatenate([edges, rng.integers(-(2**31) + 1, 2**31, 100), rng.integers(0, 8192, 60)])


#: name -> (d_model, output dtype, options, launch options)
CASES = {
    "64-float32": (64, "float32", {}, {}),
    "48-bfloat16-base5e5-sin_cos": (48, "bfloat16", {"base": 500000.0, "layout": "sin_cos"}, {}),
    "33-float16-literal-cos_sin": (33, "float16", {"odd": "literal", "layout": "cos_sin"}, {}),
    "17-float32-shift1-zero-column": (17, "float32", {"shift": 1}, {"block_rows": 16, "block_freqs": 4}),
    # bands of 2**-12 (bfloat16: 2**-7) make most values uncertain: the settling kernel decides them
    "settled-64-float32": (64, "float32", {}, {"band_floor": 2.0**-12}),
    "settled-48-bfloat16": (48, "bfloat16", {"base": 500000.0, "layout": "sin_cos"}, {"band_floor": 2.0**-7}),
    # blocks of 32 rows settled 8 rows at a time by 2 programs a block (the grid capped at 12 programs): each
    # program takes every other sub-block
    "settled-shared-64-float32": (
        64,
        "float32",
        {},
        {"band_floor": 2.0**-12, "exact_block": (8, 32), "settle_programs": 12},
    ),
    # the negative control: the same band, no settling, cannot give the core's bits
    "unsettled-64-float32": (64, "float32", {}, {"band_floor": 2.0**-12, "settle": False}),
    # a narrower band: a few values uncertain, so only some sub-blocks flagged and settled (SPARSE); without
    # settling, every wrong value lies in a flagged sub-block
    "sparse-64-float32": (64, "float32", {}, {"band_floor": 2.0**-36, "exact_block": (8, 32)}),
    "sparse-unsettled-64-float32": (
        64,
        "float32",
        {},
        {"band_floor": 2.0**-36, "exact_block": (8, 32), "settle": False},
    ),
}
#: the sparse cases' blocks: 32 rows of 32 frequencies a combining program, sub-blocks of 8 rows
SPARSE = {"block_rows": 32, "block_freqs": 32, "sub_rows": 8}
#: offsets added to ids (2, 1) x (1, 3): sums across 0 and past both int32 ends (NaN rows)
OFFSET_IDS = [[5], [2**31 - 10]]
OFFSETS = [[0, 10, -(2**31) + 20]]
#: ids and offsets (2, 1) x (1, 3) of any int64 value: sums that wrap around int64 (to -2 and to 2) are NaN
#: rows, as every sum past 2**31 is; (2**63 - 1) + (1 - 2**63) = 0 does not wrap: position 0
WRAP_IDS = [[2**63 - 1], [1 - 2**63]]
WRAP_OFFSETS = [[2**63 - 1, -3, 1 - 2**63]]


def _bits(values: torch.Tensor | np.ndarray, fmt: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.view({2: torch.int16, 4: torch.int32}[values.element_size()]).numpy()
    return np.asarray(values).view(UINT[fmt])


def _run_cases(out: Path) -> None:
    from posenc.torch.kernels import common, table_launch

    results = {}
    ids = torch.tensor(_ids())
    requests, distinct = {}, {}  # cases of one request share it, and its levels (built once per request)
    for name, (d_model, fmt, options, launch_options) in CASES.items():
        key = (d_model, fmt, *sorted(options.items()))
        request = requests[name] = distinct.setdefault(key, portable_request(d_model, fmt, **options))
        table_launch.levels(request, ids.device, LEVELS_BLOCK)
        launch_options = {**EXACT, **launch_options}
        cap = table_launch.SETTLE_PROGRAMS
        table_launch.SETTLE_PROGRAMS = launch_options.pop("settle_programs", cap)
        try:
            got, uncertain = table_launch.ids_launch(ids, None, request, **launch_options)
        finally:
            table_launch.SETTLE_PROGRAMS = cap
        results[f"{name}/bits"], results[f"{name}/uncertain"] = _bits(got, fmt), uncertain.numpy()
    request = portable_request(16, "bfloat16")
    table_launch.levels(request, torch.device("cpu"), LEVELS_BLOCK)
    got, _ = table_launch.ids_launch(torch.tensor(OFFSET_IDS), torch.tensor(OFFSETS), request, **EXACT)
    results["offsets/bits"] = _bits(got, "bfloat16")
    got, _ = table_launch.ids_launch(torch.tensor(WRAP_IDS), torch.tensor(WRAP_OFFSETS), request, **EXACT)
    results["wrapped offsets/bits"] = _bits(got, "bfloat16")
    results["levels built"] = np.array(len(table_launch._LEVELS))
    # table_launch.encode sends integer ids on a kernel device to angle addition, real positions to the exact
    # kernel: here the CPU stands in for CUDA
    common.KERNEL_DEVICES.append("cpu")
    calls = []
    real = table_launch.ids_launch
    table_launch.ids_launch = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    request = requests["64-float32"]  # its levels are built: encode uses them
    got = table_launch.encode(ids[:40].reshape(4, 10), request)
    results["encode/ints"], results["encode/int calls"] = _bits(got, "float32"), np.array(len(calls))
    calls.clear()
    got = table_launch.encode(torch.tensor([0.5, 7.0, 1000.25]), request)
    results["encode/reals"], results["encode/real calls"] = _bits(got, "float32"), np.array(len(calls))
    results["levels after encode"] = np.array(len(table_launch._LEVELS))
    np.savez(out, **results)


kernel_results = results_fixture(__file__, "ids_kernel")


# --- the tests ---------------------------------------------------------------------------------------------


def _core(d_model: int, fmt: str, options: dict, positions: np.ndarray) -> np.ndarray:
    return _bits(posenc.encode(positions, d_model, dtype=fmt, **options), fmt)


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith(("settled", "unsettled", "sparse"))])
def test_ids_equal_the_core_bit_for_bit(kernel_results, name):
    d_model, fmt, options, _ = CASES[name]
    np.testing.assert_array_equal(kernel_results[f"{name}/bits"], _core(d_model, fmt, options, _ids()))


def test_position_0_and_natural_ids_need_no_settling(kernel_results):
    # sin 0 = +0 is decided in the kernel, not left uncertain; a random id is uncertain a few times in 10**6
    assert kernel_results["64-float32/uncertain"].sum() == 0
    assert kernel_results["48-bfloat16-base5e5-sin_cos/uncertain"].sum() == 0


@pytest.mark.parametrize("name", ["settled-64-float32", "settled-48-bfloat16", "settled-shared-64-float32"])
def test_the_settling_kernel_decides_uncertain_values(kernel_results, name):
    d_model, fmt, options, _ = CASES[name]
    assert (kernel_results[f"{name}/uncertain"] != 0).all()  # the wide band: every sub-block flagged
    np.testing.assert_array_equal(kernel_results[f"{name}/bits"], _core(d_model, fmt, options, _ids()))


def _flagged(flags: np.ndarray, rows: int, count: int) -> np.ndarray:
    """(rows, 2 * count) of the sparse cases (interleaved): whether each value's sub-block is flagged."""
    block_r, block_f, sub_r = SPARSE["block_rows"], SPARSE["block_freqs"], SPARSE["sub_rows"]
    row, freq = np.arange(rows)[:, None], (np.arange(2 * count) // 2)[None, :]
    columns = -(-count // block_f)
    return (flags[row // block_r * columns + freq // block_f] >> (row % block_r // sub_r)) & 1 == 1


def test_only_flagged_sub_blocks_are_settled_and_every_wrong_value_is_flagged(kernel_results):
    flags = kernel_results["sparse-64-float32/uncertain"]
    np.testing.assert_array_equal(flags, kernel_results["sparse-unsettled-64-float32/uncertain"])
    flagged = _flagged(flags, len(_ids()), 32)
    assert 0.1 < flagged.mean() < 0.9  # some sub-blocks flagged, some not
    want = _core(64, "float32", {}, _ids())
    wrong = kernel_results["sparse-unsettled-64-float32/bits"] != want
    assert wrong.sum() >= 2 and flagged[wrong].all()  # the fast values the band left wrong: all flagged
    np.testing.assert_array_equal(kernel_results["sparse-64-float32/bits"], want)


def test_without_settling_the_bits_differ(kernel_results):
    want = _core(64, "float32", {}, _ids())
    assert (kernel_results["unsettled-64-float32/bits"] != want).sum() >= 100


def test_offsets_are_added_exactly_and_sums_past_int32_are_nan_rows(kernel_results):
    positions, offsets = torch.tensor(OFFSET_IDS), torch.tensor(OFFSETS)
    request = portable_request(16, "bfloat16")
    want = _bits(portable.encode(portable.backend_of(positions), positions, request, offsets), "bfloat16")
    got = kernel_results["offsets/bits"].view(np.uint16).reshape(2, 3, 16)
    nan = (got & 0x7FFF) > 0x7F80
    np.testing.assert_array_equal(nan, (want & 0x7FFF) > 0x7F80)  # NaN rows alike (their payloads may differ)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert nan[1, 1].all()  # 2**31 - 10 + 10 = 2**31: past the int32 end
    assert not nan[[0, 0, 0, 1, 1], [0, 1, 2, 0, 2]].any()  # 5 - 2**31 + 20 and 2**31 - 10 - 2**31 + 20 valid


def test_sums_that_wrap_around_int64_are_nan_rows_not_the_wrapped_position(kernel_results):
    got = kernel_results["wrapped offsets/bits"].view(np.uint16).reshape(2, 3, 16)
    nan = ((got & 0x7FFF) > 0x7F80).all(axis=-1)
    np.testing.assert_array_equal(nan, [[True, True, False], [False, True, True]])
    zero = _bits(posenc.encode([0], 16, dtype="bfloat16"), "bfloat16")[0]
    np.testing.assert_array_equal(got[[0, 1], [2, 0]], [zero, zero])


def test_levels_are_built_once_per_request(kernel_results):
    requests = {(d, fmt, *sorted(options.items())) for d, fmt, options, _ in CASES.values()}
    assert int(kernel_results["levels built"]) == len(requests) + 1  # a request each, and the offsets'
    assert int(kernel_results["levels after encode"]) == len(requests) + 1  # encode's request had its levels


def test_encode_sends_integer_ids_to_angle_addition_and_reals_to_the_exact_kernel(kernel_results):
    assert int(kernel_results["encode/int calls"]) == 2  # the first-launch probe, then the call
    np.testing.assert_array_equal(
        kernel_results["encode/ints"], _core(64, "float32", {}, _ids()[:40]).reshape(4, 10, 64)
    )
    assert int(kernel_results["encode/real calls"]) == 0
    np.testing.assert_array_equal(
        kernel_results["encode/reals"], _core(64, "float32", {}, np.array([0.5, 7.0, 1000.25]))
    )


if __name__ == "__main__":  # the subprocess: every case through the interpreted kernels
    _run_cases(Path(sys.argv[1]))
