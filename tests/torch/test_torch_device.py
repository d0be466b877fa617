"""posenc.torch on a device: the same bits as the NumPy core wherever the tensors live.

CI runs this file on the CPU; on a GPU machine run ``pytest tests/torch/test_torch_device.py --device cuda``
(``scripts/gpu_checks.sh`` runs it beside the benchmarks; docs/accelerators.md says how far it got on each
GPU run). Every result is compared with the NumPy core bit for bit, so a device that computed anything in
its own low precision would fail here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch._dynamo.testing

import posenc
import posenc.torch as pt
from tests.support.module_cases import core_options

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _core(values: np.ndarray | list, d_model: int, dtype: torch.dtype, **options) -> torch.Tensor:
    """The NumPy core's encoding as a CPU tensor with the same bits (bfloat16 travels as uint16)."""
    return pt.tensors._to_tensor(posenc.encode(values, d_model, dtype=_name(dtype), **options))


def _same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu().view(torch.uint8), want.cpu().view(torch.uint8))


def _as_promised(got: torch.Tensor, want: torch.Tensor) -> None:
    """The core's bits in float32, float16 and bfloat16; in float64 within 1 ulp of the core, whose float64 is
    within 1 ulp of the exact value (the CUDA kernel's float64 is the exact value correctly rounded, so it
    may differ from the core's in the last place: seen on an H200 on 21 of 524288 values)."""
    if want.dtype != torch.float64 or torch.device(got.device).type == "cpu":
        return _same_bits(got, want)
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.cpu().numpy(), want.cpu().numpy()
    assert (np.abs(g - w) <= np.spacing(np.abs(w))).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_encode_and_table_on_the_device_equal_the_core(device, dtype):
    positions = torch.tensor([[0, 7, 2**30], [5, 6, 1_000_000]], device=device)
    got = pt.encode(positions, 66, shift=1, layout="sin_cos", dtype=dtype)
    assert got.device.type == torch.device(device).type
    _as_promised(got, _core(positions.cpu().numpy(), 66, dtype, shift=1, layout="sin_cos"))
    rows = pt.table(9, 66, start=4, dtype=dtype, device=device)
    assert rows.device.type == torch.device(device).type
    _as_promised(rows, _core(np.arange(4, 13), 66, dtype))


def test_real_positions_on_the_device(device):
    t = torch.tensor([0.5, 999.25, 2.0**30 + 0.75], dtype=torch.float64, device=device)
    _same_bits(pt.encode(t, 10, dtype=torch.bfloat16), _core(t.cpu().numpy(), 10, torch.bfloat16))
    timesteps = pt.Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0)(t)
    assert timesteps.device.type == torch.device(device).type
    _same_bits(timesteps, _core(t.cpu().numpy(), 320, torch.float32, shift=0, layout="cos_sin"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_module_in_any_dtype_adds_the_exact_encoding(device, dtype):
    module = pt.SinusoidalPositionalEncoding(64, batch_first=True).to(
        device=device, dtype=dtype
    )  # .to() cannot degrade it
    x = torch.zeros(2, 300, 64, device=device, dtype=dtype)
    _as_promised(module(x, offset=100_000)[0], _core(np.arange(100_000, 100_300), 64, dtype))


def test_positions_offsets_and_decoding_on_the_device(device):
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True)
    x = torch.randn(2, 9, 32, device=device)
    pe = _core(np.arange(9), 32, torch.float32).to(device)
    full = module(x)
    _same_bits(full, x + pe)
    steps = torch.cat([module(x[:, t : t + 1], offset=t) for t in range(9)], dim=1)
    _same_bits(steps, full)
    per_row = module(x[:, :1], offset=torch.tensor([4, 1_000_000], device=device))
    _same_bits(per_row[1, 0], x[1, 0] + _core([1_000_000], 32, torch.float32)[0].to(device))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9], device=device)
    positions = pt.from_attention_mask(mask)
    assert positions.device.type == torch.device(device).type
    _same_bits(module(x, positions)[0, 2:], x[0, 2:] + pe[:7])  # left padding: real tokens count from 0
    packed = pt.from_cu_seqlens(torch.tensor([0, 4, 9], dtype=torch.int32, device=device))
    _same_bits(packed.cpu(), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 4]))
    _same_bits(module(x, packed)[:, 4:], x[:, 4:] + pe[:5])
    _same_bits(module(x, torch.linspace(0, 8, 9, dtype=torch.float64, device=device)), full)
    _same_bits(module(x, list(range(9))), full)  # plain position ids go where x is


def test_compiled_on_the_device_equals_eager_without_recompiling(device):
    torch._dynamo.reset()
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True).to(device)
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(module, fullgraph=True, dynamic=True, backend=counter)
    for length in (5, 17, 40):
        x = torch.randn(2, length, 32, device=device)
        _same_bits(compiled(x, offset=3), module(x, offset=3))
    assert counter.frame_count == 1


def test_training_dropout_on_the_device(device):
    module = pt.SinusoidalPositionalEncoding(64, dropout=0.25, batch_first=True).to(device).train()
    x = torch.zeros(4, 512, 64, device=device)
    y = module(x)
    kept = y != 0
    pe = _core(np.arange(512), 64, torch.float32).to(device).expand_as(y)
    torch.testing.assert_close(y[kept], pe[kept] / 0.75, rtol=2e-7, atol=0)  # kept: scaled by 1 / (1 - p)
    dropped = 1 - kept.sum().item() / (pe != 0).sum().item()
    assert abs(dropped - 0.25) < 0.02


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    ("length", "d_model", "start", "options"),
    [
        (1000, 64, 0, {}),
        (777, 66, -500, {"shift": 1, "layout": "sin_cos"}),
        (300, 33, 2**30, {"layout": "cos_sin"}),
        (50, 8, 5, {"scale": 1e-9}),  # values that underflow float16, subnormal at least
        (3000, 512, 123_456_789, {}),
        (200, 9, 3, {"odd": "literal"}),
        (200, 9, 3, {"odd": "drop", "base": 1e9}),
    ],
)
def test_portable_algorithm_tables_equal_the_core(device, dtype, length, d_model, start, options):
    """The table that every non-CPU device builds itself (the portable algorithm, posenc.portable, as the
    operator torch.ops.posenc.exact) — run here on ``--device`` directly, so the CPU covers it in CI."""
    o = core_options(d_model, **options)
    positions = torch.arange(start, start + length, device=device)
    got = torch.ops.posenc.exact(positions, None, *o, _name(dtype))
    assert got.device.type == torch.device(device).type
    _same_bits(
        got, pt.tensors._to_tensor(posenc.table(length, d_model, start=start, dtype=_name(dtype), **options))
    )


def test_portable_algorithm_settles_values_near_a_midpoint(device, monkeypatch):
    """A huge error bound makes every first rounding uncertain: the settling evaluation (more limbs, on a
    static-size compaction) must give each value, and the table stay exact."""
    import posenc.portable

    monkeypatch.setattr(posenc.portable.rounding, "DELTA_UNITS", 2**40)
    monkeypatch.setattr(posenc.portable.settle, "SETTLE_CAPACITY", 64 * 30 * 2)
    positions = torch.arange(-7, 23, device=device)
    got = pt.encode(positions.float(), 64, layout="sin_cos", dtype=torch.bfloat16)
    _same_bits(got, _core(np.arange(-7, 23), 64, torch.bfloat16, layout="sin_cos"))


def test_non_cpu_tables_and_modules_use_the_portable_algorithm(device, monkeypatch):
    """Off the CPU (and under compile), tables, modules and encode run the portable algorithm (on CUDA with
    triton: its Triton kernels, whose first-launch probes call it once per specialization); eager CPU calls
    the core. Either way the core's bits."""
    import posenc.portable
    from posenc.torch.kernels import encode_launch, first_launch

    calls = []
    encode = posenc.portable.encode
    monkeypatch.setattr(posenc.portable, "encode", lambda *a, **k: calls.append(1) or encode(*a, **k))
    pt.clear_cache()
    kernels = encode_launch.runs_here(torch.empty(0, device=device))
    probes = len(first_launch.kernel_status())
    _same_bits(pt.table(100, 16, start=9, device=device), _core(np.arange(9, 109), 16, torch.float32))
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True).to(device)
    x = torch.zeros(1, 20, 16, device=device, dtype=torch.bfloat16)
    _same_bits(module(x)[0], _core(np.arange(20), 16, torch.bfloat16))
    far = torch.tensor([2**30, 2**30 + 2, 2**30 + 1], device=device)
    _same_bits(pt.encode(far, 16), _core(far.cpu().numpy(), 16, torch.float32))
    if kernels:  # the portable algorithm ran only as the reference of the probes made here
        assert len(calls) == len(first_launch.kernel_status()) - probes
    else:
        assert len(calls) == (0 if torch.device(device).type == "cpu" else 3)
