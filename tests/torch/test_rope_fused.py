"""posenc.torch.apply_rotary and its Triton kernel (posenc.torch.kernels.fused_kernel): the kernel's q
and k equal the unfused path's bit for bit — ``cos_sin(position_ids, params, dtype=float32)`` then
``apply_rotary`` — for Llama 3.1 and YaRN parameters, partial rotary, both layouts, float32, bfloat16 and
float16, positions from 0 to 2**31 - 1, tiles of heads and positions that overrun q and k, batch rows that
share their positions or not. (The cos/sin rows it reads are the encode kernels', settled there: their own
tests, test_ids_kernel and test_encode_kernel, cover the settling.)

Without a GPU the kernel runs in Triton's interpreter on CPU tensors. The interpreter must be chosen before
triton is imported, so one subprocess (this file run as a script, with TRITON_INTERPRET=1) runs every case
and saves the outputs; the tests compare them with the unfused path computed here.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc.rope as rope
import posenc.torch as pt
from posenc.torch import fused_rotary, rotary
from posenc.torch.kernels import common
from tests.support.interpreted import results_fixture

pytest.importorskip("triton")

LLAMA31 = rope.config(
    head_dim=64,
    base=500000.0,
    scaling={
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    max_position_embeddings=131072,
)
YARN = rope.config(
    head_dim=64,
    base=10000.0,
    scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    max_position_embeddings=8192,
)
PARTIAL = rope.config(head_dim=64, base=10000.0, partial_rotary_factor=0.5)  # rotary_dim 32 of 64
#: LongRoPE (Phi-3 style): short factors up to a length of 4096, long ones past it
LONGROPE = rope.config(
    head_dim=64,
    base=10000.0,
    scaling={
        "rope_type": "longrope",
        "short_factor": [1.0 + i / 64 for i in range(32)],
        "long_factor": [1.0 + i / 4 for i in range(32)],
        "original_max_position_embeddings": 4096,
    },
    max_position_embeddings=131072,
)
PARAMS = {"llama31": LLAMA31, "yarn": YARN, "partial": PARTIAL}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
L = 16


def _positions(seed: int) -> torch.Tensor:
    """(1, 16) ids: 0, small ones, the Llama 3.1 context edges, the largest valid 2**31 - 1, random ones."""
    rng = np.random.default_rng(seed)
    fixed = [0, 1, 2, 4095, 8192, 131071, 2**31 - 1, 2**31 - 2, 2**30 + 1, 123456789]
    return torch.tensor([fixed + rng.integers(0, 2**31, L - len(fixed)).tolist()])


#: name -> (params, layout, q dtype, k dtype, unsqueeze_dim, kernel options). q is (1, 2, 16, 64) and k
#: (1, 1, 16, 64) (heads on axis 2 with unsqueeze_dim=2), from a fixed seed.
CASES = {
    "llama31-half-float32": ("llama31", "half", "float32", "float32", 1, {}),
    "llama31-interleaved-bfloat16": ("llama31", "interleaved", "bfloat16", "bfloat16", 1, {}),
    "yarn-half-bfloat16-heads-axis-2": ("yarn", "half", "bfloat16", "bfloat16", 2, {}),
    "yarn-interleaved-float32": ("yarn", "interleaved", "float32", "float32", 1, {}),
    "partial-half-float16-bfloat16": ("partial", "half", "float16", "bfloat16", 1, {}),
    "partial-interleaved-bfloat16": ("partial", "interleaved", "bfloat16", "float32", 2, {}),
    # q (3, 3, 16, 64) and k (3, 2, 16, 64): tiles of 2 heads (q's last one half empty) and of 8 positions;
    # positions shared by the batch rows ((1, 16) ids: one set of cos/sin rows), and (3, 16) ids
    "batched-shared-llama31-half-bfloat16": (
        "llama31",
        "half",
        "bfloat16",
        "bfloat16",
        1,
        {"block_heads": 2},
    ),
    "batched-shared-yarn-interleaved-float32-heads-axis-2": (
        "yarn",
        "interleaved",
        "float32",
        "float16",
        2,
        {"block_heads": 2},
    ),
    "batched-distinct-partial-half-float16": ("partial", "half", "float16", "float16", 1, {"block_heads": 2}),
}


def _inputs(name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _, _, q_dtype, k_dtype, axis, _ = CASES[name]
    generator = torch.Generator().manual_seed(sorted(CASES).index(name))
    batch, heads_q, heads_k = (3, 3, 2) if name.startswith("batched") else (1, 2, 1)
    q = torch.randn(batch, heads_q, L, 64, generator=generator) * 3
    k = torch.randn(batch, heads_k, L, 64, generator=generator) * 3
    if axis == 2:  # (B, L, H, D)
        q, k = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
    ids = _positions(len(name))
    if name.startswith("batched-distinct"):
        ids = torch.cat([ids, _positions(len(name) + 1), _positions(len(name) + 2)])
    return q.to(DTYPES[q_dtype]), k.to(DTYPES[k_dtype]), ids


def _unfused(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    key, layout, _, _, axis, _ = CASES[name]
    q, k, ids = _inputs(name)
    cos, sin = rotary.cos_sin(ids, PARAMS[key], dtype=torch.float32, layout=layout)
    return pt.apply_rotary(q, k, cos, sin, layout=layout, unsqueeze_dim=axis)


def _longrope_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (1, 2, 16, 64) and k (1, 1, 16, 64) bfloat16, and ids reaching past LONGROPE's switch (4096)."""
    generator = torch.Generator().manual_seed(7)
    q = (torch.randn(1, 2, L, 64, generator=generator) * 3).to(torch.bfloat16)
    k = (torch.randn(1, 1, L, 64, generator=generator) * 3).to(torch.bfloat16)
    return q, k, torch.arange(L)[None] * 500  # max + 1 = 7501 > 4096: the long factors


def _bits(x: torch.Tensor) -> np.ndarray:
    return x.contiguous().view(torch.int16 if x.element_size() == 2 else torch.int32).numpy()


# --- the subprocess: every case through the interpreted kernel ---------------------------------------------


def _run_cases(out: Path) -> None:
    from posenc.torch.kernels import table_launch

    results = {}
    rows = []
    encode = table_launch.encode

    def counted(positions, *args, **kwargs):
        rows.append(positions.numel())
        return encode(positions, *args, **kwargs)

    table_launch.encode = counted
    for name, (key, layout, _, _, axis, options) in CASES.items():
        q, k, ids = _inputs(name)
        rows.clear()
        q_rot, k_rot = fused_rotary.launch(
            q, k, ids, PARAMS[key], layout, axis, None, block_rows=8, **options
        )
        results[f"{name}/q"], results[f"{name}/k"] = _bits(q_rot), _bits(k_rot)
        results[f"{name}/rows"] = np.array(rows)
    # the public entry point, sent to the kernel on the CPU
    common.KERNEL_DEVICES.append("cpu")
    calls = []
    launch = fused_rotary.launch
    fused_rotary.launch = lambda *a, **kw: calls.append(1) or launch(*a, **kw)
    q, k, ids = _inputs("yarn-half-bfloat16-heads-axis-2")
    q_rot, k_rot = pt.apply_rotary(q, k, position_ids=ids, params=YARN, unsqueeze_dim=2)
    results["public/q"], results["public/k"] = _bits(q_rot), _bits(k_rot)
    results["public/calls"] = np.array(len(calls))
    # LongRoPE: without seq_len the kernel is left out (the unfused path picks the set on the device, no host
    # read); with seq_len the kernel computes that set
    for name, seq_len in (("longrope-picked", None), ("longrope-given", 9000)):
        before = len(calls)
        q, k, ids = _longrope_inputs()
        q_rot, k_rot = pt.apply_rotary(q, k, position_ids=ids, params=LONGROPE, seq_len=seq_len)
        results[f"{name}/q"], results[f"{name}/k"] = _bits(q_rot), _bits(k_rot)
        results[f"{name}/calls"] = np.array(len(calls) - before)
    # invalid positions (|p| >= 2**31) give NaN on the rotated features, as the portable algorithm does
    q, k, _ = _inputs("partial-half-float16-bfloat16")
    ids = torch.tensor([[2**31, -(2**31), 2**31 - 1, -(2**31) + 1] * 4])
    q_rot, k_rot = fused_rotary.launch(q, k, ids, PARTIAL, "half", 1, None, block_rows=8)
    results["invalid/q"], results["invalid/k"] = q_rot.float().numpy(), k_rot.float().numpy()
    # a model patched with fused=True: its attention modules' rotary apply goes to the kernel
    calls.clear()
    model = _tiny_llama(torch.bfloat16)
    pt.patch(model, fused=True)  # its proof: the model's forward on probe tokens, the first launches
    calls.clear()
    with torch.no_grad():
        results["patched/logits"] = _bits(model(_tiny_tokens()).logits)
    results["patched/calls"] = np.array(len(calls))
    np.savez(out, **results)


def _tiny_llama(dtype: torch.dtype) -> torch.nn.Module:
    """The two-layer Llama 3.1 of the patching tests (4 query heads, 2 key heads of 16), in ``dtype``."""
    from tests.torch.test_patching import DECODERS

    torch.manual_seed(0)
    return DECODERS["llama3.1"][0]().to(dtype).eval()


def _tiny_tokens() -> torch.Tensor:
    return torch.randint(3, 101, (2, 12), generator=torch.Generator().manual_seed(0))


kernel_results = results_fixture(__file__, "fused")


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith(("settled", "unsettled"))])
def test_kernel_equals_the_unfused_path_bit_for_bit(kernel_results, name):
    q_want, k_want = _unfused(name)
    np.testing.assert_array_equal(kernel_results[f"{name}/q"], _bits(q_want))
    np.testing.assert_array_equal(kernel_results[f"{name}/k"], _bits(k_want))


def test_rows_sharing_positions_get_one_set_of_cos_sin(kernel_results):
    """(1, 16) ids for 3 batch rows: the cos/sin of 16 positions, read by every row; (3, 16): 48."""
    assert kernel_results["batched-shared-llama31-half-bfloat16/rows"].tolist() == [16]
    assert kernel_results["batched-distinct-partial-half-float16/rows"].tolist() == [48]


def test_the_launch_shape_for_the_benchmark_and_tiles_past_32_bit_offsets():
    """16 positions and 4 heads a program (fused_sweep.py); a tensor whose tile would pass 32-bit offsets
    takes the unfused path."""
    assert (fused_rotary.BLOCK_L, fused_rotary.BLOCK_H) == (16, 4)
    q = torch.zeros(1, 2, 4, 64)
    ids = torch.arange(4)[None]
    assert fused_rotary._fusable(q, q, ids, LLAMA31, 1) == 1
    wide = torch.zeros(1).expand(1, 2, 4, 64)  # stride 0: fits
    assert fused_rotary._tiles_fit([wide], 1, 16, 4)
    # heads 2**30 elements apart (what _tiles_fit reads of a tensor: its shape and strides)
    huge = types.SimpleNamespace(shape=(1, 2, 4, 64), stride=lambda: (2**33, 2**30, 64, 1))
    assert not fused_rotary._tiles_fit([huge], 1, 16, 4)


def test_apply_rotary_by_position_ids_runs_the_kernel_where_it_may(kernel_results):
    name = "yarn-half-bfloat16-heads-axis-2"
    assert kernel_results["public/calls"] == 2  # the first-launch probe (first_launch.py), then the call
    q_want, k_want = _unfused(name)
    np.testing.assert_array_equal(kernel_results["public/q"], _bits(q_want))
    np.testing.assert_array_equal(kernel_results["public/k"], _bits(k_want))


def test_longrope_fused_or_not_gives_the_set_of_its_length(kernel_results):
    """LongRoPE through the fused entry point: without seq_len the kernel is not launched (it would read
    max(positions) on the host), and the unfused path's device pick gives the long factors' bits, as NumPy
    at max + 1; with seq_len the kernel computes that length's set, the unfused path's bits."""
    q, k, ids = _longrope_inputs()
    assert kernel_results["longrope-picked/calls"] == 0
    for name, seq_len in (("longrope-picked", int(ids.max()) + 1), ("longrope-given", 9000)):
        cos, sin = rotary.cos_sin(ids, LONGROPE, dtype=torch.float32, seq_len=seq_len)
        q_want, k_want = pt.apply_rotary(q, k, cos, sin)
        np.testing.assert_array_equal(kernel_results[f"{name}/q"], _bits(q_want))
        np.testing.assert_array_equal(kernel_results[f"{name}/k"], _bits(k_want))
    assert kernel_results["longrope-given/calls"] >= 1  # the kernel (after its first-launch probe)
    numpy_cos = rope.cos_sin(ids.numpy(), LONGROPE)[0]  # seq_len from the positions: the long set
    np.testing.assert_array_equal(rotary.cos_sin(ids, LONGROPE, dtype=torch.float32)[0].numpy(), numpy_cos)


def test_a_model_patched_with_fused_rotates_in_the_kernel_to_the_same_bits(kernel_results):
    # two layers: q and k (4 and 2 heads) are one specialization, launched per layer (its first-launch
    # probe ran in the patch's own proof, the model's forward on probe tokens)
    assert kernel_results["patched/calls"] == 2
    model = _tiny_llama(torch.bfloat16)
    pt.patch(model, fused=True)  # here, on the CPU: posenc's unfused apply
    with torch.no_grad():
        want = model(_tiny_tokens()).logits
    np.testing.assert_array_equal(kernel_results["patched/logits"], _bits(want))


def test_invalid_positions_give_nan_on_the_rotated_features_only(kernel_results):
    q, _, _ = _inputs("partial-half-float16-bfloat16")
    got = kernel_results["invalid/q"]  # (1, 2, 16, 64); rows 0, 1 of every 4 are invalid
    invalid = np.array([True, True, False, False] * 4)
    assert np.isnan(got[:, :, invalid, :32]).all()
    assert not np.isnan(got[:, :, ~invalid]).any()
    np.testing.assert_array_equal(got[..., 32:], q[..., 32:].float().numpy())  # copied as they are
    assert np.isnan(kernel_results["invalid/k"][:, :, invalid, :32]).all()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("axis", [1, 2, -2])
def test_off_cuda_apply_rotary_by_position_ids_is_the_unfused_path(layout, axis):
    q = torch.randn(2, 3, 5, 64, dtype=torch.bfloat16)  # (B, H, L, D)
    k = torch.randn(2, 1, 5, 64, dtype=torch.bfloat16)
    if axis != 1:  # (B, L, H, D)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    ids = torch.arange(5)[None].expand(2, -1) * 1000
    got = pt.apply_rotary(q, k, position_ids=ids, params=LLAMA31, layout=layout, unsqueeze_dim=axis)
    cos, sin = rotary.cos_sin(ids, LLAMA31, dtype=torch.float32, layout=layout)
    want = pt.apply_rotary(q, k, cos, sin, layout=layout, unsqueeze_dim=axis)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16 and torch.equal(g.view(torch.int16), w.view(torch.int16))


def test_the_kernel_takes_only_what_it_computes():
    """_fusable routes the other calls (multimodal sections, float positions, float64, other ranks or
    unsqueeze dims, mismatched lengths, a rotary width past head_dim) to the unfused path."""
    q = torch.zeros(1, 2, 4, 64)
    ids = torch.arange(4)[None]
    assert fused_rotary._fusable(q, q, ids, LLAMA31, 1) == 1
    assert fused_rotary._fusable(q.transpose(1, 2), q.transpose(1, 2), ids, LLAMA31, -2) == 2
    qwen = rope.config(head_dim=64, scaling={"rope_type": "default", "mrope_section": [8, 12, 12]})
    refused = [
        (q, q, ids.expand(3, 1, 4), qwen, 1),
        (q, q, ids.float(), LLAMA31, 1),
        (q.double(), q, ids, LLAMA31, 1),
        (q[0], q[0], ids, LLAMA31, 1),
        (q, q, ids, LLAMA31, 0),
        (q, q, torch.arange(5)[None], LLAMA31, 1),
        (q[..., :16], q[..., :16], ids, LLAMA31, 1),
    ]
    for args in refused:
        assert fused_rotary._fusable(*args) is None


def test_series_terms_match_the_portable_algorithm():
    """The kernel's Taylor-term counts are evaluate._series' (the host counts them for the kernel)."""
    from posenc.portable import NumpyBackend, evaluate

    class Counting(NumpyBackend):
        def loop(self, count, body, state):
            self.counts.append(count)
            return super().loop(count, body, state)

    for m in range(2, 16):
        ops = Counting()
        ops.counts = []
        z = np.zeros((1, m + 1), np.int32)
        evaluate._series(ops, z, z, m, np.zeros((24, 17), np.int32))
        assert common.series_terms(m) == ops.counts[0], m  # the first loop is the series' own


if __name__ == "__main__":  # the subprocess of kernel_results (TRITON_INTERPRET=1)
    _run_cases(Path(sys.argv[1]))
