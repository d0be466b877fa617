"""Tables on CUDA by angle addition (posenc.torch.kernels.table_kernel): the core's bits through the very
kernels a GPU runs — over 2 M elements of tables over widths, bases, shifts, scales, layouts, odd widths,
starts that cross 0 and reach 2**31 - 1, in float32, float16 and bfloat16; the stored near-midpoint cases
through the certification (the 16-bit ones must be caught by the midpoint test); the settling kernel deciding
uncertain values (a wide band makes them so) and its negative control; the operator sending CUDA tables there.

Without a GPU the kernels run in Triton's interpreter on CPU tensors, in one subprocess (this file run as a
script with TRITON_INTERPRET=1) that saves the outputs; the tests compare them with the NumPy core.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from tests.support.interpreted import results_fixture
from tests.support.module_cases import UINT, near_midpoint_cases, portable_request

pytest.importorskip("triton")

#: Triton's interpreter takes about as long for an exact block of any size: big ones keep the cases quick
EXACT = {"exact_block": (64, 1024)}
#: A combining block of whole tables for the large cases: the interpreter runs a grid's programs one after
#: another, each paying every operation's dispatch (a GPU's block: 512 programs for 4096 x 256); the cases
#: that keep the GPU's block show the fast path does the work (few blocks flag an uncertain value)
WHOLE = {"block_rows": 1024}
#: name -> (length, d_model, start, output dtype, options, launch options)
CASES = {
    "4096x256-bfloat16": (4096, 256, 1, "bfloat16", {}, WHOLE),
    "1000x1024-float32-cos_sin-base5e5-from0": (
        1000, 1024, 0, "float32", {"base": 500000.0, "layout": "cos_sin"}, WHOLE
    ),
    "1100x1000-float16-sin_cos": (1100, 1000, 77, "float16", {"layout": "sin_cos"}, WHOLE),
    "700x66-float16-shift1-across0": (700, 66, -350, "float16", {"shift": 1}, {}),
    "257x33-float32-literal-top": (
        257, 33, 2**31 - 257, "float32", {"odd": "literal", "layout": "sin_cos"}, {}
    ),
    "300x17-bfloat16-zero-column-scale1000": (300, 17, -(2**31) + 1, "bfloat16", {"scale": 1000.0}, {}),
    "500x64-float32-base1e9-scale0.001": (500, 64, 12345, "float32", {"base": 1e9, "scale": 0.001}, {}),
    "333x9-bfloat16-drop-cos_sin-small-blocks": (
        333, 9, 5000, "bfloat16", {"odd": "drop", "layout": "cos_sin"}, {"block_rows": 4, "block_freqs": 2}
    ),
    # bands of 2**-12 (bfloat16: 2**-7) make most values uncertain: the settling kernel decides them
    "settled-200x32-float32": (200, 32, 3, "float32", {}, {"band_floor": 2.0**-12, "block_rows": 64}),
    "settled-150x20-bfloat16": (150, 20, -70, "bfloat16", {"layout": "sin_cos"}, {"band_floor": 2.0**-7}),
    # the negative control: the same band, no settling, cannot give the core's bits
    "unsettled-200x32-float32": (200, 32, 3, "float32", {}, {"band_floor": 2.0**-12, "settle": False}),
}  # fmt: skip


def _bits(values: torch.Tensor | np.ndarray, fmt: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.view({2: torch.int16, 4: torch.int32}[values.element_size()]).numpy()
    return np.asarray(values).view(UINT[fmt])


def _core(name: str) -> np.ndarray:
    length, d_model, start, fmt, options, _ = CASES[name]
    return _bits(posenc.table(length, d_model, start=start, dtype=fmt, **options), fmt)


def _near_midpoint_groups() -> dict[str, tuple[dict, np.ndarray, np.ndarray]]:
    """The stored near-midpoint cases at integer positions, grouped by options and dtype."""
    groups: dict[str, list[dict]] = {}
    for case in near_midpoint_cases():
        if not isinstance(case["position"], dict):
            key = json.dumps([case[k] for k in ("d_model", "base", "shift", "scale", "layout", "dtype")])
            groups.setdefault(key, []).append(case)
    return {
        key: (
            {k: cases[0][k] for k in ("d_model", "base", "shift", "scale", "layout", "dtype")},
            np.array([c["position"] for c in cases]),
            np.array([c["bits"] for c in cases]),
        )
        for key, cases in groups.items()
    }


# --- the subprocess: every case through the interpreted kernels --------------------------------------------


def _run_cases(out: Path) -> None:
    from posenc import layouts
    from posenc.torch.kernels import common, encode_launch, table_launch

    cpu = torch.device("cpu")
    results = {}
    for name, (length, d_model, start, fmt, options, launch_options) in CASES.items():
        request = portable_request(d_model, fmt, **options)
        got, uncertain = table_launch.launch(length, start, request, cpu, **EXACT, **launch_options)
        results[f"{name}/bits"], results[f"{name}/uncertain"] = _bits(got, fmt), uncertain.numpy()
    # the certification alone at the near-midpoint cases: anchors = the exact float64 rows of the
    # positions, one row per program, every first row position 0 (sin 0, cos 1): the combined value is the
    # anchor's own, rounded and certified as in any table
    kernels = common.kernel_module("table_kernel")
    for i, (options, positions, _) in enumerate(_near_midpoint_groups().values()):
        options = dict(options)
        fmt = options.pop("dtype")
        request = portable_request(options.pop("d_model"), fmt, **options)
        wide = table_launch.anchor_request(request)
        # position 0's row (every program's first) and the positions' rows, in one launch
        rows = torch.tensor([0, *positions])
        both = encode_launch.launch(rows, None, wide, block_rows=16, block_freqs=512)[0]
        first, anchors = both[:1].contiguous(), both[1:].contiguous()
        out_ = torch.empty((len(positions), request.d_model), dtype=getattr(torch, fmt))
        uncertain = torch.zeros(len(positions), dtype=torch.int32)
        sin_offset, cos_offset, stride = layouts.placement(request.layout, request.count)
        block_f = common.next_power_of_2(request.count)
        kernels.table_kernel[(len(positions), 1)](
            anchors, first, common.constants_on(request, cpu)[4],
            out_.view(torch.int16) if fmt == "bfloat16" else out_, uncertain,
            len(positions), 1, int(np.abs(positions).max()), request.count, request.sin_columns,
            request.cos_columns, sin_offset, cos_offset, stride, request.sin_columns + request.cos_columns,
            request.d_model, 0.0,
            OUT_KIND=encode_launch.OUT_KINDS[fmt], BLOCK_R=1, BLOCK_F=block_f, SUB_R=1,
        )  # fmt: skip
        results[f"midpoints/{i}/bits"], results[f"midpoints/{i}/uncertain"] = (
            _bits(out_, fmt),
            uncertain.numpy(),
        )
    # the operator sends tables on its kernel devices to the launcher: here the CPU stands in for CUDA
    common.KERNEL_DEVICES.append("cpu")
    import posenc.torch  # noqa: F401  (registers the operator)

    calls = []
    launch = table_launch.launch
    table_launch.launch = lambda *a, **kw: calls.append(1) or launch(*a, **{**EXACT, **kw})
    # a small table (at most SMALL_TABLE values) takes the encode kernel over its positions: no launch here
    got = torch.ops.posenc.table(3, 7, cpu, 48, 10000.0, 0.0, 1.0, "interleaved", "zero", "bfloat16")
    results["operator/small"], results["operator/small calls"] = _bits(got, "bfloat16"), np.array(len(calls))
    table_launch.SMALL_TABLE = 0  # the tables below are small too: angle addition for them
    calls.clear()
    got = torch.ops.posenc.table(100, 7, cpu, 48, 10000.0, 0.0, 1.0, "interleaved", "zero", "bfloat16")
    results["operator/bits"], results["operator/calls"] = _bits(got, "bfloat16"), np.array(len(calls))
    got = torch.ops.posenc.table(10, 7, cpu, 48, 10000.0, 0.0, 1.0, "interleaved", "zero", "float64")
    results["operator/float64"], results["operator/float64 calls"] = got.numpy(), np.array(len(calls))
    # positions past 2**31 - 1 (a module's offset): the exact kernel over them, whose rows there are NaN
    got = torch.ops.posenc.table(4, 2**31 - 2, cpu, 8, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32")
    results["operator/beyond"], results["operator/beyond calls"] = got.numpy(), np.array(len(calls))
    np.savez(out, **results)


kernel_results = results_fixture(__file__, "table_kernel")


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith(("settled", "unsettled"))])
def test_tables_equal_the_core_bit_for_bit(kernel_results, name):
    np.testing.assert_array_equal(kernel_results[f"{name}/bits"], _core(name))
    uncertain = kernel_results[f"{name}/uncertain"]
    if CASES[name][5] is WHOLE:  # one program a table: its one flag says nothing of the fast path
        return
    # the fast path does the work: few blocks hold an uncertain value (position 0's zero sines always do)
    assert (uncertain > 0).mean() <= 0.05 or (uncertain > 0).sum() <= 2


def test_the_cases_cover_formats_layouts_odd_rules_and_two_million_elements():
    assert {fmt for _, _, _, fmt, _, _ in CASES.values()} == {"float32", "float16", "bfloat16"}
    assert {o.get("layout", "interleaved") for *_, o, _ in CASES.values()} == {
        "interleaved",
        "sin_cos",
        "cos_sin",
    }
    assert {o.get("odd") for *_, o, _ in CASES.values()} >= {"drop", "literal", None}
    assert any(d % 2 and o.get("odd") is None for _, d, _, _, o, _ in CASES.values())  # odd="zero"'s column
    assert sum(length * d for length, d, *_ in CASES.values()) >= 2_000_000


def test_position_0_is_settled_not_guessed(kernel_results):
    """sin 0 = 0 combines to exactly 0, whose band holds the midpoint 0 of ±0: its blocks are settled."""
    assert kernel_results["1000x1024-float32-cos_sin-base5e5-from0/uncertain"][0] > 0


@pytest.mark.parametrize("name", ["settled-200x32-float32", "settled-150x20-bfloat16"])
def test_the_settling_kernel_decides_uncertain_values(kernel_results, name):
    assert (kernel_results[f"{name}/uncertain"] != 0).all()  # the wide band: every sub-block flagged
    np.testing.assert_array_equal(kernel_results[f"{name}/bits"], _core(name))


def test_without_settling_the_bits_differ(kernel_results):
    """The negative control: the uncertain values' fast roundings stay, and many are wrong."""
    assert kernel_results["unsettled-200x32-float32/uncertain"].sum() > 0
    differ = kernel_results["unsettled-200x32-float32/bits"] != _core("unsettled-200x32-float32")
    assert differ.sum() >= 100


def test_near_midpoint_values_are_rounded_right_or_caught(kernel_results):
    """The stored cases lie within ~1e-11 of a rounding midpoint of their format (relative): a certain row
    equals the stored bits, and most rows are certain, so the fast rounding itself is what is tested."""
    certain = total = 0
    for i, (_, _, bits) in enumerate(_near_midpoint_groups().values()):
        got, uncertain = kernel_results[f"midpoints/{i}/bits"], kernel_results[f"midpoints/{i}/uncertain"]
        np.testing.assert_array_equal(got[uncertain == 0], bits[uncertain == 0].astype(got.dtype))
        certain, total = certain + (uncertain == 0).sum(), total + len(uncertain)
    assert certain >= 0.5 * total


def test_the_near_midpoint_cases_catch_double_rounding():
    """The control of the test above: rounding the exact values to float32 first, then to 16 bits, gives
    wrong bits for some stored case (the kernel rounds through float32 rounded to odd instead)."""
    wrong = 0
    for options, positions, bits in _near_midpoint_groups().values():
        options = dict(options)
        fmt = options.pop("dtype")
        if fmt == "float32":
            continue
        exact = posenc.encode(positions, options.pop("d_model"), dtype="float64", **options)
        twice = torch.tensor(exact.astype(np.float32)).to(getattr(torch, fmt))  # torch rounds to nearest
        wrong += (_bits(twice, fmt) != bits.astype(UINT[fmt])).sum()
    assert wrong >= 1


def test_rows_past_the_valid_positions_are_nan_not_combined(kernel_results):
    assert kernel_results["operator/beyond calls"] == 2  # the probe and call before it; none for this one
    got = kernel_results["operator/beyond"]
    np.testing.assert_array_equal(got[:2], posenc.table(2, 8, start=2**31 - 2))
    assert np.isnan(got[2:]).all()


def test_a_request_has_one_anchor_request_so_its_constants_go_to_the_device_once():
    from posenc.torch.kernels import table_launch

    request = portable_request(64, "bfloat16", layout="cos_sin")
    wide = table_launch.anchor_request(request)
    assert table_launch.anchor_request(request) is wide
    assert (wide.fmt, wide.layout, wide.d_model, wide.sin_columns, wide.cos_columns) == (
        "float64",
        "sin_cos",
        64,
        32,
        32,
    )
    assert table_launch.anchor_request(portable_request(64, "bfloat16")) is not wide


def test_a_small_table_takes_the_encode_kernel_over_its_positions(kernel_results):
    assert kernel_results["operator/small calls"] == 0
    want = posenc.table(3, 48, start=7, dtype="bfloat16")
    np.testing.assert_array_equal(kernel_results["operator/small"], _bits(want, "bfloat16"))


def test_the_operator_builds_kernel_device_tables_by_angle_addition(kernel_results):
    assert kernel_results["operator/calls"] == 2  # the first-launch probe (first_launch.py), then the call
    want = posenc.table(100, 48, start=7, dtype="bfloat16")
    np.testing.assert_array_equal(kernel_results["operator/bits"], _bits(want, "bfloat16"))
    # float64 tables take the exact kernel over the positions (the core states float64 within 1 ulp)
    assert kernel_results["operator/float64 calls"] == 2
    np.testing.assert_allclose(
        kernel_results["operator/float64"],
        posenc.table(10, 48, start=7, dtype="float64"),
        rtol=0,
        atol=2.0**-52,
    )


if __name__ == "__main__":  # the subprocess of kernel_results (TRITON_INTERPRET=1)
    _run_cases(Path(sys.argv[1]))
