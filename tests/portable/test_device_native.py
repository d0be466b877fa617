"""The portable algorithm (posenc.portable): the core's bits through the very code the devices run, and no
host round trip — under torch.compile/export, on meta tensors, and inside jax.jit with x64 on and off.

CI has no GPU; these run the algorithm on the CPU through NumPy, torch and jax.numpy (the same Python code
every device runs), compare it with the NumPy core bit for bit, and prove the no-sync property the way a
CPU can: meta tensors (any host read of a value fails there), fullgraph compiles, exported programs and
lowered JAX programs without callbacks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch._dynamo.testing

import posenc
import posenc.torch as pt
from posenc import core, portable
from tests.support.module_cases import UINT, near_midpoint_cases, portable_request

NUMPY = portable.backend_of(np.zeros(1))


def _bits(values: np.ndarray, fmt: str) -> np.ndarray:
    return np.asarray(values).view(UINT[fmt])


# --- bits: >= 1 M random elements against the core ----------------------------------------------------

RANDOM_CASES = [
    # (d_model, options, positions kind, count, formats)
    (512, {}, "int", 800, ("float32", "bfloat16")),
    (320, {"shift": 1, "layout": "sin_cos"}, "timesteps", 600, ("float32", "float16")),
    (1024, {"base": 500000.0, "layout": "cos_sin"}, "int", 300, ("bfloat16",)),
    (66, {"shift": 1, "layout": "sin_cos", "scale": 1000.0}, "float32", 900, ("float32", "float16")),
    (33, {"odd": "literal", "base": 100.0}, "float64", 900, ("float32", "bfloat16")),
    (64, {"base": 1e9, "scale": 0.001}, "float32", 900, ("float32",)),
    (9, {"odd": "drop", "layout": "cos_sin"}, "int", 3000, ("float32", "float16")),
    (256, {"base": 10000.0}, "tiny", 500, ("float32", "float16", "bfloat16")),
]


def _positions(kind: str, count: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "int":
        edges = np.array([0, 1, -1, 2**31 - 1, -(2**31 - 1), 2**24 + 1, 65_520])
        return np.concatenate([edges, rng.integers(-(2**31) + 1, 2**31, count - len(edges))])
    if kind == "timesteps":
        return (rng.random(count) * 1000).astype(np.float32)
    if kind == "float32":
        return rng.uniform(-(2**31) + 256, 2**31 - 256, count).astype(np.float32)
    if kind == "float64":
        return np.concatenate(
            [rng.uniform(-(2**31) + 1, 2**31 - 1, count // 2), rng.uniform(0, 50, count // 2)]
        )
    # tiny real positions: subnormal float32 up to 1, both signs
    return (2.0 ** rng.uniform(-149, 0, count) * rng.choice([-1.0, 1.0], count)).astype(np.float32)


@pytest.mark.parametrize(("d_model", "options", "kind", "count", "formats"), RANDOM_CASES)
def test_random_elements_equal_the_core_bit_for_bit(d_model, options, kind, count, formats):
    """Widths, bases, shifts, scales, layouts, odd widths; integer and real positions up to 2**31 (the
    cases add up to more than a million elements)."""
    rng = np.random.default_rng(d_model + count)
    positions = _positions(kind, count, rng)
    for fmt in formats:
        got = portable.encode(NUMPY, positions, portable_request(d_model, fmt, **options))
        want = posenc.encode(positions, d_model, dtype=fmt, **options)
        np.testing.assert_array_equal(_bits(got, fmt), _bits(want, fmt))


def test_the_random_cases_hold_more_than_a_million_elements():
    total = sum(count * d_model * len(formats) for d_model, _, _, count, formats in RANDOM_CASES)
    assert total >= 1_000_000


def test_float64_output_is_within_one_ulp_of_the_core():
    """Also for tiny and subnormal results (real positions down to 5e-324), where the core is within 1 ulp
    of the exact value too (tests/core/test_exactness.py); both carry the sign of a -0.0 position."""
    tiny = [1e-310, -5e-324, 3e-308, -1e-300, 1e-200, 1e-60, -0.0, 2.5e-16]
    positions = np.concatenate(
        [np.arange(-20, 300), np.random.default_rng(1).uniform(0, 2**30, 200), tiny, np.pi / np.array([1, 2])]
    )
    got = portable.encode(NUMPY, positions, portable_request(128, "float64"))
    want = posenc.encode(positions, 128, dtype="float64")
    assert np.abs(got.view(np.int64) - want.view(np.int64)).max() <= 1


@pytest.mark.parametrize("case", near_midpoint_cases(), ids=lambda c: f"{c['dtype']}-{c['d_model']}")
def test_values_nearest_a_rounding_midpoint_equal_the_core(case):
    """Values within 1e-18 .. 1e-11 (relative) of a rounding midpoint, harvested from the core
    (scripts/harvest_near_midpoints.py): the settling step must round each one right."""
    position = case["position"]
    position = np.array([float.fromhex(position["hex"]) if isinstance(position, dict) else position])
    options = {k: case[k] for k in ("base", "shift", "scale", "layout")}
    got = portable.encode(NUMPY, position, portable_request(case["d_model"], case["dtype"], **options))
    assert _bits(got[0], case["dtype"]).tolist() == case["bits"]


def test_the_settling_step_runs_on_a_static_size_compaction(monkeypatch):
    """With a huge error bound every first rounding is uncertain: the settling evaluation (more limbs) gives
    the core's bits for up to SETTLE_CAPACITY values; the rest keep the first rounding."""
    monkeypatch.setattr(portable.rounding, "DELTA_UNITS", 2**40)
    positions = np.arange(-5, 15)
    want = posenc.encode(positions, 32, dtype="bfloat16")
    got = portable.encode(NUMPY, positions, portable_request(32, "bfloat16"))
    assert np.array_equal(_bits(got, "bfloat16"), _bits(want, "bfloat16"))  # 640 values > capacity 512...
    monkeypatch.setattr(portable.settle, "SETTLE_CAPACITY", 8)
    few = portable.encode(NUMPY, positions, portable_request(32, "bfloat16"))
    assert np.array_equal(_bits(few, "bfloat16").reshape(-1)[:4], _bits(want, "bfloat16").reshape(-1)[:4])


def test_offsets_are_added_exactly_and_invalid_positions_give_nan_rows():
    request = portable_request(16, "float32")
    # a float32 position plus a large offset: the sum is not a float32 (nor always a float64)
    got = portable.encode(NUMPY, np.array([0.25, -0.5], np.float32), request, np.int64(2**30 + 3))
    want = posenc.encode(np.array([2**30 + 3.25, 2**30 + 2.5]), 16)
    np.testing.assert_array_equal(got, want)
    bad = np.array([np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31), 5.0], np.float32)
    rows = portable.encode(NUMPY, bad, request)
    assert np.isnan(rows[:5]).all() and not np.isnan(rows[5]).any()
    overflow = portable.encode(NUMPY, np.array([2**31 - 2, 7]), request, np.int64(5))
    assert np.isnan(overflow[0]).all()
    np.testing.assert_array_equal(overflow[1], posenc.encode(12, 16))


def test_options_outside_the_device_domain_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"posenc\.encode"):
        portable_request(8, "float32", scale=1e-30)
    with pytest.raises(ValueError, match=r"posenc\.encode"):
        portable_request(8, "float32", scale=5000.0)


# --- torch: no host round trip ------------------------------------------------------------------------


def test_the_algorithm_runs_on_meta_tensors_so_it_reads_no_value():
    """A meta tensor has no values: any host read (item, nonzero, cpu) would fail here."""
    positions = torch.arange(10, device="meta")
    offset = torch.tensor([3], device="meta")
    out = portable.encode(portable.backend_of(positions), positions, portable_request(64, "bfloat16"), offset)
    assert out.shape == (10, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    module = pt.SinusoidalPositionalEncoding(64, batch_first=True)
    x = torch.zeros(2, 5, 64, device="meta")
    assert module(x, offset=torch.tensor([1, 2], device="meta")).device.type == "meta"
    assert pt.encode(torch.rand(4, device="meta"), 32).shape == (4, 32)


def _no_core(monkeypatch):
    """Make any call of the NumPy core fail: what runs then is the portable algorithm (the operators' CPU
    kernels run it too, as every other device does, rather than the C core)."""
    from posenc.torch import operator

    def refuse(*args, **kwargs):
        raise AssertionError("the NumPy core was called (a host read)")

    monkeypatch.setattr(core, "encode", refuse)
    monkeypatch.setattr(core, "table", refuse)
    monkeypatch.setattr(operator, "CPU_CORE", False)


def test_compiled_decode_step_with_per_batch_offsets_reads_nothing_on_the_host(monkeypatch):
    torch._dynamo.reset()
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True)
    x = torch.zeros(3, 1, 32)
    offsets = [torch.tensor([0, 7, 4000]), torch.tensor([5, 2**20, 9])]
    expected = [posenc.encode(o.numpy()[:, None], 32) for o in offsets]
    _no_core(monkeypatch)
    counter = torch._dynamo.testing.CompileCounter()
    step = torch.compile(lambda x, o: module(x, offset=o), fullgraph=True, dynamic=True, backend=counter)
    for o, want in zip(offsets, expected, strict=True):
        np.testing.assert_array_equal(step(x, o).numpy(), want)
    assert counter.frame_count == 1


def test_compiled_positions_and_timesteps_are_exact_for_every_length(monkeypatch):
    torch._dynamo.reset()
    timesteps = pt.Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0)
    lengths = (3, 8, 21)
    inputs = [torch.rand(n) * 1000 for n in lengths]
    expected = [
        posenc.presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0).encode(
            t.numpy().astype(np.float64), 320
        )
        for t in inputs
    ]
    ids = [torch.randint(0, 2**31 - 1, (2, n)) for n in lengths]
    expected_ids = [posenc.encode(i.numpy(), 16, dtype="bfloat16") for i in ids]
    _no_core(monkeypatch)
    counter = torch._dynamo.testing.CompileCounter()
    compiled_t = torch.compile(timesteps, fullgraph=True, dynamic=True, backend=counter)
    for t, want in zip(inputs, expected, strict=True):
        np.testing.assert_array_equal(compiled_t(t).numpy(), want)
    compiled_e = torch.compile(
        lambda p: pt.encode(p, 16, dtype=torch.bfloat16), fullgraph=True, dynamic=True, backend=counter
    )
    for p, want in zip(ids, expected_ids, strict=True):
        assert np.array_equal(compiled_e(p).view(torch.int16).numpy(), want.view(np.int16))
    assert counter.frame_count == 2  # one graph each, whatever the length


def test_exported_module_takes_positions_and_a_dynamic_length(monkeypatch):
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)

    class WithPositions(torch.nn.Module):
        def forward(self, x, positions):
            return module(x, positions)

    x, positions = torch.zeros(2, 7, 16), torch.arange(7).repeat(2, 1) * 1000
    seq = torch.export.Dim("seq", min=3, max=4096)
    program = torch.export.export(WithPositions(), (x, positions), dynamic_shapes=({1: seq}, {1: seq}))
    assert "posenc.exact" in str(program.graph)
    longer, ids = torch.zeros(2, 30, 16), torch.randint(0, 2**31 - 1, (2, 30))
    want = posenc.encode(ids.numpy(), 16)
    _no_core(monkeypatch)
    np.testing.assert_array_equal(program.module()(longer, ids).numpy(), want)


def test_a_module_without_positions_adds_the_table_operators_rows(monkeypatch):
    """Given no positions (an int offset), a compiled or exported module takes its rows from the table
    operator's kernel (on CUDA: angle addition; here the portable algorithm over the positions; traced on
    the CPU the graph holds torch.ops.posenc.add_table, whose kernel calls it with the core off), one graph
    for every length, the core's bits, no host read; rows past 2**31 - 1 are NaN."""
    torch._dynamo.reset()
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)

    class WithOffset(torch.nn.Module):
        def forward(self, x):
            return module(x, offset=2**31 - 40)

    seq = torch.export.Dim("seq", min=3, max=4096)
    program = torch.export.export(WithOffset(), (torch.zeros(2, 7, 16),), dynamic_shapes=({1: seq},))
    assert "posenc.add_table" in str(program.graph) and "posenc.exact" not in str(program.graph)
    want = posenc.table(30, 16, start=2**31 - 40)
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(lambda x: module(x, offset=5), fullgraph=True, dynamic=True, backend=counter)
    expected = [posenc.table(length, 16, start=5) for length in (4, 9, 33)]
    _no_core(monkeypatch)
    np.testing.assert_array_equal(program.module()(torch.zeros(2, 30, 16))[1].numpy(), want)
    beyond = program.module()(torch.zeros(2, 45, 16))[0]
    assert torch.isnan(beyond[40:]).all() and not torch.isnan(beyond[:40]).any()
    for want in expected:
        np.testing.assert_array_equal(compiled(torch.zeros(1, len(want), 16))[0].numpy(), want)
    assert counter.frame_count == 1


def test_invalid_positions_under_compile_give_nan_rows():
    torch._dynamo.reset()
    compiled = torch.compile(lambda p: pt.encode(p, 8), fullgraph=True, backend="eager")
    rows = compiled(torch.tensor([1.0, float("nan"), 2.0**31, -3.5]))
    assert torch.isnan(rows[1:3]).all() and not torch.isnan(rows[[0, 3]]).any()
    np.testing.assert_array_equal(rows[[0, 3]].numpy(), posenc.encode([1.0, -3.5], 8))


# --- jax: no callback, no float64 with x64 off -----------------------------------------------------------


def test_jitted_jax_program_has_no_callback_and_no_float64_with_x64_off():
    import jax
    import jax.numpy as jnp

    import posenc.jax as pj

    assert not jax.config.jax_enable_x64

    def step(offset, ids):
        return pj.encode(ids, 64, dtype=jnp.bfloat16), pj.table(3, 64, start=offset)

    offset, ids = jnp.int32(2**31 - 2), jnp.array([[0, 5, 2**31 - 1], [-7, 3, 99]], jnp.int32)
    with pj.self_contained():  # the device algorithm (a CPU-only JAX otherwise calls the C core)
        text = jax.jit(step).lower(offset, ids).as_text()
        assert "callback" not in text and "f64" not in text
        encoded, rows = jax.jit(step)(offset, ids)
    want = posenc.encode(np.asarray(ids), 64, dtype="bfloat16")
    assert np.array_equal(np.asarray(encoded).view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(np.asarray(rows[:2]), posenc.encode([2**31 - 2, 2**31 - 1], 64))
    assert np.isnan(np.asarray(rows[2])).all()  # 2**31: a row of NaN, not a wrapped int32
