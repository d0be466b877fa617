"""The Triton kernel of torch.ops.posenc.exact on CUDA (posenc.torch.kernels.encode_kernel): the core's bits
through the very kernel a GPU runs — random elements over widths, bases, shifts, scales, layouts and odd
widths, integer positions up to 2**31 - 1, real positions in every float dtype (timesteps, tiny and subnormal
ones, -0.0), offsets added exactly, every output dtype, the stored near-midpoint cases, the in-kernel settling
(and its negative control), NaN rows for invalid positions, and the operator sending its calls there.

Without a GPU the kernel runs in Triton's interpreter on CPU tensors. The interpreter must be chosen before
triton is imported, so one subprocess (this file run as a script, with TRITON_INTERPRET=1) runs every case
and saves the outputs; the tests compare them with the NumPy core (and with the portable algorithm,
posenc.portable, for float64 and the NaN rows).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc import portable
from tests.support.interpreted import results_fixture
from tests.support.module_cases import UINT, near_midpoint_cases, portable_request

pytest.importorskip("triton")

UINT_FLOAT = {2: np.float16, 4: np.float32, 8: np.float64}  # NaN bits of any format read as NaN here

#: blocks of 32 x 32 (the cases' default: 16 K elements, its frequencies a power of 2 to 128, as few
#: programs as Triton's interpreter can run): the settling cases show it runs in every block
SMALL = {"block_rows": 32, "block_freqs": 32}
#: name -> (d_model, options, positions kind, count, output dtype, launch options)
CASES = {
    "int-512-float32": (512, {}, "int", 160, "float32", {}),
    "int-1024-bfloat16-cos_sin-base5e5": (
        1024,
        {"base": 500000.0, "layout": "cos_sin"},
        "int",
        64,
        "bfloat16",
        {},
    ),
    "int-9-float16-drop-cos_sin": (9, {"odd": "drop", "layout": "cos_sin"}, "int", 1024, "float16", {}),
    "int-33-bfloat16-literal-sin_cos": (
        33,
        {"odd": "literal", "layout": "sin_cos"},
        "int",
        512,
        "bfloat16",
        {},
    ),
    "int-17-float32-zero-column": (17, {"shift": 1}, "int", 512, "float32", {}),
    "timesteps-320-float32-shift1-sin_cos": (
        320,
        {"shift": 1, "layout": "sin_cos"},
        "timesteps",
        256,
        "float32",
        {},
    ),
    "timesteps-320-float16-cos_sin": (
        320,
        {"shift": 1, "layout": "cos_sin"},
        "timesteps",
        128,
        "float16",
        {},
    ),
    "float32-66-scale1000": (
        66,
        {"shift": 1, "layout": "sin_cos", "scale": 1000.0},
        "float32",
        768,
        "float32",
        {},
    ),
    "float64-33-literal-base100": (33, {"odd": "literal", "base": 100.0}, "float64", 768, "bfloat16", {}),
    "float32-64-base1e9-scale0.001": (64, {"base": 1e9, "scale": 0.001}, "float32", 768, "float32", {}),
    "tiny-float32-256": (256, {}, "tiny", 64, "float32", {}),
    "tiny-float64-64-bfloat16": (64, {}, "tiny64", 128, "bfloat16", {}),
    "bfloat16-positions-128": (128, {}, "bfloat16", 256, "float16", {}),
    "float16-positions-128": (128, {"shift": 1}, "float16", 256, "bfloat16", {}),
    # the uncertain roundings: 2 first limbs make most of them so, the settling evaluation decides them
    "settled-int-64-bfloat16": (64, {}, "int", 128, "bfloat16", {"first_limbs": 2, **SMALL}),
    "settled-timesteps-64-float32": (
        64,
        {"shift": 1},
        "timesteps",
        128,
        "float32",
        {"first_limbs": 3, **SMALL},
    ),
    # the negative control: settling with 2 limbs as well cannot give the core's bits
    "unsettled-int-64-float32": (64, {}, "int", 128, "float32", {"first_limbs": 2, "settle_limbs": 2}),
}
#: float64 output: correctly rounded (the portable algorithm's bits; the core is within 1 ulp of them)
FLOAT64_CASES = {
    "float64-out-int-128": (128, {}, "int", 96, "float64", {}),
    "float64-out-reals-48": (48, {"scale": 3.0, "layout": "sin_cos"}, "float64", 96, "float64", {}),
}


def _positions(kind: str, count: int, rng: np.random.Generator) -> torch.Tensor:
    if kind == "int":
        edges = np.array([0, 1, -1, 2**31 - 1, -(2**31 - 1), 2**24 + 1, 65_520])
        return torch.tensor(np.concatenate([edges, rng.integers(-(2**31) + 1, 2**31, count - len(edges))]))
    if kind == "timesteps":
        return torch.tensor((rng.random(count) * 1000).astype(np.float32))
    if kind == "float32":
        return torch.tensor(rng.uniform(-(2**31) + 256, 2**31 - 256, count).astype(np.float32))
    if kind == "float64":
        values = [rng.uniform(-(2**31) + 1, 2**31 - 1, count // 2), rng.uniform(-50, 50, count // 2)]
        return torch.tensor(np.concatenate(values))
    if kind == "tiny":  # subnormal float32 up to 1, both signs, and the signed zeros
        values = 2.0 ** rng.uniform(-149, 0, count - 2) * rng.choice([-1.0, 1.0], count - 2)
        return torch.tensor(np.concatenate([values, [0.0, -0.0]]).astype(np.float32))
    if kind == "tiny64":  # float64 down to 5e-324
        values = 2.0 ** rng.uniform(-1074, 0, count - 2) * rng.choice([-1.0, 1.0], count - 2)
        return torch.tensor(np.concatenate([values, [5e-324, -0.0]]))
    values = torch.tensor(rng.uniform(-70000, 70000, count))  # float16/bfloat16 positions (inf included)
    return values.to(getattr(torch, kind))


#: YaRN (attention scaling 0.1 ln 4 + 1) on real and integer positions, by output dtype
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
ROTARY_POSITIONS = {
    "float32": lambda: torch.tensor(np.random.default_rng(5).uniform(0, 8192, 96).astype(np.float32)),
    "bfloat16": lambda: torch.tensor(np.random.default_rng(6).integers(0, 2**31, 96)),
}


def _rotary_params():
    from posenc import rope

    return rope.config(head_dim=64, base=10000.0, scaling=YARN, max_position_embeddings=8192)


def _rotary_request(fmt: str) -> portable.Request:
    from posenc.torch import operator

    return operator.request(operator.params_json(_rotary_params()), -1, fmt)[0]


#: float64 positions and (3, 1) offsets: NaN, inf, and sums inside and just outside |p| < 2**31
REALS = [0.5, -2.5, float("nan"), float("inf"), 3.0, -0.0, 2.0**31 - 1.5, 7.25]
OFFSETS = [[3], [-5], [2**31 - 2]]


def _case_positions(name: str) -> torch.Tensor:
    d_model, _, kind, count, _, _ = {**CASES, **FLOAT64_CASES}[name]
    return _positions(kind, count, np.random.default_rng(d_model + count + len(name)))


def _bits(values: torch.Tensor | np.ndarray, fmt: str) -> np.ndarray:
    """The bit patterns of ``fmt`` values (a tensor or a NumPy array) as unsigned integers."""
    if isinstance(values, torch.Tensor):
        values = values.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[values.element_size()]).numpy()
    return np.asarray(values).view(UINT[fmt])


def _core(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(bits, finite): the core's encodings of the case's finite positions (float16 ones may be ±inf, which
    the core refuses and the kernel gives NaN rows for), and which positions those are."""
    d_model, options, _, _, fmt, _ = CASES[name]
    positions = _case_positions(name)
    host = (positions.to(torch.float64) if positions.is_floating_point() else positions).numpy()
    finite = np.isfinite(host)
    return _bits(posenc.encode(host[finite], d_model, dtype=fmt, **options), fmt), finite


def _assert_core_bits(got: np.ndarray, name: str) -> None:
    want, finite = _core(name)
    np.testing.assert_array_equal(got[finite], want)
    assert np.isnan(got[~finite].view(UINT_FLOAT[got.dtype.itemsize])).all()


def _near_midpoint_groups() -> dict[str, tuple[dict, np.ndarray, np.ndarray]]:
    """The stored near-midpoint cases grouped by options, dtype and kind of position: one launch each."""
    data = near_midpoint_cases()
    groups: dict[str, list[dict]] = {}
    for case in data:
        real = isinstance(case["position"], dict)
        key = json.dumps([case[k] for k in ("d_model", "base", "shift", "scale", "layout", "dtype")] + [real])
        groups.setdefault(key, []).append(case)
    out = {}
    for key, cases in groups.items():
        real = json.loads(key)[-1]
        positions = [float.fromhex(c["position"]["hex"]) if real else c["position"] for c in cases]
        options = {k: cases[0][k] for k in ("d_model", "base", "shift", "scale", "layout", "dtype")}
        out[key] = (options, np.array(positions), np.array([c["bits"] for c in cases]))
    return out


# --- the subprocess: every case through the interpreted kernel ---------------------------------------------


def _run_cases(out: Path) -> None:
    from posenc.torch.kernels import common, encode_launch

    results = {}
    for name, (d_model, options, _, _, fmt, launch_options) in {**CASES, **FLOAT64_CASES}.items():
        freqs = min(1 << (portable_request(d_model, fmt, **options).count - 1).bit_length(), 128)
        blocks = {"block_rows": (1 << 14) // freqs, "block_freqs": freqs, **launch_options}
        got, uncertain = encode_launch.launch(
            _case_positions(name), None, portable_request(d_model, fmt, **options), **blocks
        )
        results[f"{name}/bits"], results[f"{name}/uncertain"] = _bits(got, fmt), uncertain.numpy()
    for i, (options, positions, _) in enumerate(_near_midpoint_groups().values()):
        fmt = options.pop("dtype")
        request = portable_request(options.pop("d_model"), fmt, **options)
        rows = 1 << (len(positions) - 1).bit_length()
        got, _ = encode_launch.launch(
            torch.tensor(positions), None, request, block_rows=rows, block_freqs=512
        )
        results[f"midpoints/{i}"] = _bits(got, fmt)
    # offsets added exactly, and invalid positions (NaN, inf, |p + offset| >= 2**31): rows of NaN
    reals = torch.tensor(REALS, dtype=torch.float64)
    offsets = torch.tensor(OFFSETS)  # (3, 1): broadcast to (3, 8)
    got, _ = encode_launch.launch(
        reals, offsets, portable_request(16, "float32"), block_rows=8, block_freqs=8
    )
    results["offsets/reals"] = got.numpy()
    ids = torch.tensor([[0, 7, 2**31 - 1, -(2**31) + 1]])
    got, _ = encode_launch.launch(ids, offsets, portable_request(16, "bfloat16"), block_rows=8, block_freqs=8)
    results["offsets/ids"] = got.float().numpy()
    # rotary cos/sin (posenc::rotary on CUDA): YaRN's attention scaling A != 1, real and integer positions
    for fmt, positions in ROTARY_POSITIONS.items():
        got, _ = encode_launch.launch(positions(), None, _rotary_request(fmt), block_rows=64, block_freqs=32)
        results[f"rotary/{fmt}"] = _bits(got, fmt)
    # the operator sends CUDA calls to the kernel: here the CPU stands in for CUDA
    common.KERNEL_DEVICES.append("cpu")
    calls = []
    launch = encode_launch.launch
    encode_launch.launch = lambda *a, **kw: calls.append(1) or launch(*a, **kw)
    import posenc.torch  # noqa: F401  (registers the operator)
    from posenc.torch import operator

    operator.CPU_CORE = False  # the CPU's own kernel (the C core) stands aside for the device's

    timesteps = _case_positions("timesteps-320-float32-shift1-sin_cos")[:16]
    got = torch.ops.posenc.exact(timesteps, None, 320, 10000.0, 1.0, 1.0, "sin_cos", "zero", "float32")
    results["operator/bits"], results["operator/calls"] = _bits(got, "float32"), np.array(len(calls))
    np.savez(out, **results)


kernel_results = results_fixture(__file__, "encode_kernel")


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith(("settled", "unsettled"))])
def test_kernel_equals_the_core_bit_for_bit(kernel_results, name):
    _assert_core_bits(kernel_results[f"{name}/bits"], name)
    if "tiny" not in name:  # natural inputs: every first rounding is certain, the settling branch never runs
        assert kernel_results[f"{name}/uncertain"].sum() == 0


def test_the_cases_cover_every_position_dtype_layout_and_odd_rule():
    kinds = {kind for _, _, kind, _, _, _ in CASES.values()}
    assert {"int", "timesteps", "float32", "float64", "tiny", "tiny64", "bfloat16", "float16"} <= kinds
    layouts = {options.get("layout", "interleaved") for _, options, *_ in CASES.values()}
    assert layouts == {"interleaved", "sin_cos", "cos_sin"}
    assert {options.get("odd") for _, options, *_ in CASES.values()} >= {"drop", "literal"}
    assert {fmt for *_, fmt, _ in CASES.values()} == {"float32", "float16", "bfloat16"}
    total = sum(count * d_model for d_model, _, _, count, _, _ in CASES.values())
    assert total >= 250_000


@pytest.mark.parametrize("name", list(FLOAT64_CASES))
def test_float64_output_is_the_portable_algorithms_correct_rounding(kernel_results, name):
    d_model, options, _, _, fmt, _ = FLOAT64_CASES[name]
    positions = _case_positions(name)
    want = portable.encode(
        portable.backend_of(positions), positions, portable_request(d_model, fmt, **options)
    )
    np.testing.assert_array_equal(kernel_results[f"{name}/bits"], _bits(want, fmt))


def test_values_nearest_a_rounding_midpoint_equal_the_stored_bits(kernel_results):
    for i, (_, _, bits) in enumerate(_near_midpoint_groups().values()):
        got = kernel_results[f"midpoints/{i}"]
        np.testing.assert_array_equal(got, bits.astype(got.dtype))


@pytest.mark.parametrize("name", ["settled-int-64-bfloat16", "settled-timesteps-64-float32"])
def test_the_in_kernel_settling_decides_uncertain_roundings(kernel_results, name):
    uncertain = kernel_results[f"{name}/uncertain"]
    assert uncertain.size >= 4 and (uncertain > 0).all() and uncertain.sum() >= 50  # in every block
    _assert_core_bits(kernel_results[f"{name}/bits"], name)


def test_without_enough_settling_limbs_the_bits_differ(kernel_results):
    """The negative control of the settling test: its cases would fail without the settling evaluation."""
    assert kernel_results["unsettled-int-64-float32/uncertain"].sum() > 0
    assert (kernel_results["unsettled-int-64-float32/bits"] != _core("unsettled-int-64-float32")[0]).any()


def test_offsets_are_added_exactly_and_invalid_positions_give_nan_rows(kernel_results):
    """(8,) positions + (3, 1) offsets: NaN, inf and the sums outside |p| < 2**31 are rows of NaN; every other
    row is the core's encoding of the exact sum (0.5 + 2**31 - 2 stays inside, 3.0 + 2**31 - 2 does not)."""
    reals, offsets = np.array(REALS), np.array(OFFSETS)
    got = kernel_results["offsets/reals"]
    invalid = [[0, 0, 1, 1, 0, 0, 1, 0], [0, 0, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 0, 1, 1]]
    np.testing.assert_array_equal(np.isnan(got).all(-1), np.array(invalid, bool))
    assert not np.isnan(got[~np.array(invalid, bool)]).any()
    sums = (reals + offsets)[~np.array(invalid, bool)]  # exact in float64
    np.testing.assert_array_equal(
        got[~np.array(invalid, bool)].view(np.uint32), posenc.encode(sums, 16).view(np.uint32)
    )
    torch_reals = torch.tensor(reals)
    want = portable.encode(
        portable.backend_of(torch_reals), torch_reals, portable_request(16, "float32"), torch.tensor(offsets)
    )
    np.testing.assert_array_equal(got.view(np.uint32), want.numpy().view(np.uint32))  # NaN bits too
    ids = kernel_results["offsets/ids"]  # [0, 7, 2**31 - 1, -2**31 + 1] + offsets, bfloat16 as float32
    invalid = np.array([[0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 1, 0]], bool)
    np.testing.assert_array_equal(np.isnan(ids).all(-1), invalid)
    sums = (np.array([0, 7, 2**31 - 1, -(2**31) + 1]) + offsets)[~invalid]
    want = posenc.encode(sums, 16, dtype="bfloat16").astype(np.float32)
    np.testing.assert_array_equal(ids[~invalid].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fmt", list(ROTARY_POSITIONS))
def test_rotary_cos_sin_with_an_attention_scaling_equal_the_core(kernel_results, fmt):
    """The rows are [A sin θ | A cos θ] (the rotary request's layout), each correctly rounded once: the
    core's posenc.rope.cos_sin, column for column."""
    from posenc import rope

    positions = ROTARY_POSITIONS[fmt]()
    host = positions.double().numpy() if positions.is_floating_point() else positions.numpy()
    cos, sin = rope.cos_sin(host, _rotary_params(), dtype=fmt)  # "half": [θ0..θn-1, θ0..θn-1]
    n = cos.shape[-1] // 2
    got = kernel_results[f"rotary/{fmt}"]
    np.testing.assert_array_equal(got[:, :n], _bits(sin[:, :n], fmt))
    np.testing.assert_array_equal(got[:, n:], _bits(cos[:, :n], fmt))


def test_the_operator_runs_the_kernel_on_its_devices(kernel_results):
    assert kernel_results["operator/calls"] == 2  # the first-launch probe (first_launch.py), then the call
    name = "timesteps-320-float32-shift1-sin_cos"
    np.testing.assert_array_equal(kernel_results["operator/bits"], _core(name)[0][:16])


if __name__ == "__main__":  # the subprocess of kernel_results (TRITON_INTERPRET=1)
    _run_cases(Path(sys.argv[1]))
