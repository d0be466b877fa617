"""posenc.torch: the functional API, the module, and the ways users run it."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
import torch._dynamo.testing
from torch import nn

import posenc
import posenc.torch as pt
from tests.support import reference as ref
from tests.support.module_cases import BAD_MODULE_OPTIONS
from tests.support.tutorial import SeqFirstTutorialPositionalEncoding, TutorialPositionalEncoding


def _bits(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().contiguous().view(torch.int16 if tensor.element_size() == 2 else torch.int32)


# --- functional API ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
def test_float32_is_bit_identical_to_the_core(layout):
    positions = torch.tensor([[0, 7, 2**30], [5, 6, 1_000_000]])
    got = pt.encode(positions, 66, layout=layout, shift=1)
    want = posenc.encode(positions.numpy(), 66, layout=layout, shift=1)
    assert got.dtype == torch.float32 and got.shape == (2, 3, 66)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(
        pt.table(9, 66, start=4, layout=layout, shift=1).numpy(),
        posenc.table(9, 66, start=4, layout=layout, shift=1),
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_correctly_rounded_up_to_a_million(dtype):
    name = str(dtype).removeprefix("torch.")
    rng = np.random.default_rng(1)
    positions = torch.as_tensor(np.concatenate([rng.integers(0, 1_000_000, 40), [999_999]]))
    got = pt.encode(positions, 64, dtype=dtype)
    assert got.dtype == dtype
    for row, i in zip(rng.integers(0, len(positions), 150), rng.integers(0, 32, 150), strict=True):
        sin, cos = ref.sincos(int(positions[row]), int(i), 64)
        assert float(got[row, 2 * i]) == ref.round_to(sin, name)
        assert float(got[row, 2 * i + 1]) == ref.round_to(cos, name)
    core = posenc.encode(positions.numpy(), 64, dtype=name)
    assert np.array_equal(_bits(got).numpy(), core.view(np.int16))


def test_float_positions_and_device_argument():
    t = torch.tensor([0.5, 999.25], dtype=torch.float64)
    np.testing.assert_array_equal(pt.encode(t, 8, device="cpu").numpy(), posenc.encode(t.numpy(), 8))
    assert pt.encode([1, 2], 8).shape == (2, 8)  # array-likes welcome


# --- the module -------------------------------------------------------------------------------------


def test_module_adds_the_exact_table():
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    x = torch.randn(3, 10, 16)
    np.testing.assert_array_equal(
        (module(x) - x).numpy(), (x + torch.from_numpy(posenc.table(10, 16)) - x).numpy()
    )


def test_inplace_adds_into_x():
    module = pt.SinusoidalPositionalEncoding(16, batch_first=False)
    x = torch.randn(10, 3, 16)
    expected = module(x)
    result = module(x, inplace=True)
    assert result is x
    assert torch.equal(x, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_outputs_outside_autograd_are_the_same_sum(dtype):
    """Large CPU results go into a NumPy-allocated buffer (huge pages): the same values, dtype and shape
    as ``x + pe``, an ordinary tensor that outlives the call; with autograd the usual ``x + pe``."""
    module = pt.SinusoidalPositionalEncoding(256, batch_first=True).eval()
    x = torch.randn(4, 2048, 256).to(dtype)  # 8 or 4 MiB: above the threshold
    assert x.numel() * x.element_size() >= pt.modules._LARGE_OUTPUT_BYTES
    pe = pt.table(2048, 256, dtype=dtype)
    with torch.no_grad():
        y = module(x)
        assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
        assert torch.equal(y, x + pe)
        z = module(x)
    assert y.data_ptr() != z.data_ptr() and torch.equal(y, z)  # each call has its own output
    leaf = x.clone().requires_grad_()
    out = module(leaf)
    out.sum().backward()
    assert torch.equal(leaf.grad, torch.ones_like(leaf)) and torch.equal(out.detach(), x + pe)
    seq_first = pt.SinusoidalPositionalEncoding(256, batch_first=False).eval()
    with torch.no_grad():  # a non-contiguous x keeps the usual path and its strides
        xt = x.transpose(0, 1)
        assert torch.equal(seq_first(xt), xt + pe[:, None])


def test_no_length_cliff_and_max_len_is_a_hint():
    module = pt.SinusoidalPositionalEncoding(8, max_len=4, batch_first=True)
    x = torch.zeros(1, 5000, 8)
    np.testing.assert_array_equal(module(x)[0].numpy(), posenc.table(5000, 8))


def test_beyond_the_cache_limit_only_the_sequence_is_computed(monkeypatch):
    monkeypatch.setattr(pt.functions, "CACHE_LIMIT_BYTES", 1024)  # every table is "too large" for the cache
    pt.clear_cache()
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    out = module(torch.zeros(1, 300, 16), offset=2**30)
    np.testing.assert_array_equal(out[0].numpy(), posenc.table(300, 16, start=2**30))
    assert not pt.functions._CACHE  # nothing was cached, no table from position 0 was built


def test_seq_first_equals_batch_first():
    x = torch.randn(2, 7, 12)
    batch_first = pt.SinusoidalPositionalEncoding(12, batch_first=True)(x)
    seq_first = pt.SinusoidalPositionalEncoding(12)(x.transpose(0, 1))  # the default: (seq, batch, d)
    torch.testing.assert_close(seq_first.transpose(0, 1), batch_first, rtol=0, atol=0)


def test_the_readme_migration_line_gives_the_tutorials_values_on_the_tutorials_input():
    """The PyTorch guide's `SinusoidalPositionalEncoding(d_model, dropout=0.1)` in place of the tutorial's
    `PositionalEncoding(d_model, dropout=0.1)`, on the tutorial's (seq, batch, d) input (35, 20, 64): the same
    values up to the tutorial's float32 error (which grows with the position), along the right axis."""
    torch.manual_seed(0)
    x = torch.randn(35, 20, 64)
    tutorial = SeqFirstTutorialPositionalEncoding(64, dropout=0.1).eval()
    ours = pt.SinusoidalPositionalEncoding(64, dropout=0.1).eval()
    assert torch.allclose(ours(x), tutorial(x), rtol=0, atol=1e-5)
    assert torch.equal(ours.encoding_for(x), pt.table(35, 64)[:, None])  # the exact rows, along dim 0
    assert ours.pe.shape == tutorial.pe.shape == (5000, 1, 64)
    assert torch.allclose(ours.pe, tutorial.pe, rtol=0, atol=1e-3)
    ours.load_state_dict(tutorial.state_dict(), strict=True)  # a tutorial checkpoint loads


def test_the_tutorials_own_positional_line_works():
    """The tutorial's `PositionalEncoding(d_model, dropout)` and `(d_model, dropout, max_len)`, word for word:
    dropout and max_len by position, in its order; everything else keyword-only; a bad positional value
    gets the message that names its parameter."""
    import inspect

    torch.manual_seed(0)
    x = torch.randn(35, 20, 64)
    tutorial = SeqFirstTutorialPositionalEncoding(64, 0.1, 100).eval()
    for ours in (pt.SinusoidalPositionalEncoding(64, 0.1), pt.SinusoidalPositionalEncoding(64, 0.1, 100)):
        assert ours.dropout.p == 0.1 and not ours.batch_first
        assert torch.allclose(ours.eval()(x), tutorial(x), rtol=0, atol=1e-5)
    ours = pt.SinusoidalPositionalEncoding(64, 0.1, 100)
    assert ours.max_len == 100 and ours.pe.shape == tutorial.pe.shape == (100, 1, 64)
    ours.load_state_dict(tutorial.state_dict(), strict=True)
    parameters = inspect.signature(pt.SinusoidalPositionalEncoding).parameters
    by_position = [p.name for p in parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert by_position == ["d_model", "dropout", "max_len"]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(parameters.values())[3:])
    with pytest.raises(TypeError, match=r"dropout must be a real number; got 'x'"):
        pt.SinusoidalPositionalEncoding(64, "x")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\); got 5000; .* pass max_len=5000"):
        pt.SinusoidalPositionalEncoding(64, 5000)  # the length where the tutorial puts dropout
    with pytest.raises(TypeError, match=r"max_len must be an integer >= 1; got 5000.0 .*pass 5000 instead"):
        pt.SinusoidalPositionalEncoding(64, 0.1, 5000.0)
    with pytest.raises(ValueError, match=r"max_len must be an integer >= 1; got 0"):
        pt.SinusoidalPositionalEncoding(64, 0.1, 0)
    with pytest.raises(
        TypeError,
        match=r"takes 3 arguments by position \(d_model, dropout, max_len\); got 4 \(the extra: True\); "
        r"pass the others by keyword: .*batch_first",
    ):
        pt.SinusoidalPositionalEncoding(64, 0.1, 100, True)


def test_offset_decoding_equals_the_full_pass():
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True)
    x = torch.randn(2, 9, 32)
    full = module(x)
    steps = [module(x[:, t : t + 1], offset=t) for t in range(9)]
    assert torch.equal(torch.cat(steps, dim=1), full)
    assert torch.equal(module(x[:, 4:5], offset=np.int64(4)), full[:, 4:5])  # any integer type
    per_row = module(x[:, 4:5], offset=torch.tensor([4, 2]))
    assert torch.equal(per_row[0], full[0, 4:5])
    assert torch.equal(per_row[1], x[1, 4:5] + torch.from_numpy(posenc.encode([2], 32)))


def test_an_offset_of_every_batch_axis():
    """x (2, 3, seq, d): an offset of shape x.shape[:-2], one per sequence, with or without positions (it
    was refused, the message asking for the shape it got)."""
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    x = torch.randn(2, 3, 4, 8)
    offset = torch.arange(6).reshape(2, 3)
    want = x + torch.from_numpy(posenc.encode(np.arange(4) + np.arange(6).reshape(2, 3, 1), 8))
    assert torch.equal(module(x, offset=offset), want)
    assert torch.equal(module(x, torch.arange(4), offset=offset), want)


def test_position_ids_for_left_padding_and_packing():
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    positions = pt.from_attention_mask(mask)
    x = torch.zeros(2, 5, 16)
    out = module(x, positions)
    assert torch.equal(out[0, 2:], out[1, :3])  # the left-padded sequence starts at position 0
    packed = pt.from_cu_seqlens(torch.tensor([0, 3, 5]))
    out = module(torch.zeros(1, 5, 16), packed[None])
    assert torch.equal(out[0, 3:5], out[0, 0:2])
    floats = module(torch.zeros(1, 2, 16), torch.tensor([0.5, 1.5]))
    np.testing.assert_array_equal(floats[0].numpy(), posenc.encode([0.5, 1.5], 16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_module_to_low_precision_stays_exact_at_100k(dtype):
    module = pt.SinusoidalPositionalEncoding(64, batch_first=True).to(dtype)
    x = torch.zeros(1, 3, 64, dtype=dtype)
    out = module(x, offset=100_000)
    name = str(dtype).removeprefix("torch.")
    want = posenc.table(3, 64, start=100_000, dtype=name)
    assert out.dtype == dtype
    if name == "float64":
        np.testing.assert_array_equal(out[0].numpy(), want)
    else:
        assert np.array_equal(_bits(out[0]).numpy(), want.view(np.int16))
    exact = posenc.table(3, 64, start=100_000, dtype="float64")
    tolerance = {"bfloat16": 2**-9, "float16": 2**-12, "float64": 1e-15}[name]
    assert np.max(np.abs(out[0].double().numpy() - exact)) <= tolerance


def test_training_dropout_keeps_1_minus_p_scaled_and_is_seeded():
    module = pt.SinusoidalPositionalEncoding(64, dropout=0.25, batch_first=True)
    x = torch.randn(4, 256, 64, requires_grad=True)
    torch.manual_seed(7)
    out = module(x)
    clean = module.eval()(x).detach()
    module.train()
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.01
    torch.testing.assert_close(out[kept], clean[kept] / 0.75)
    out.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    torch.manual_seed(7)
    assert torch.equal(module(x), out)
    assert torch.equal(module.eval()(x), clean)  # eval: no dropout


def test_gradients_reach_x_and_the_embedding_not_a_table():
    module = pt.TokenAndPositionEmbedding(50, 16, padding_idx=1)
    ids = torch.tensor([[5, 6, 7, 1], [8, 9, 1, 1]])
    module(ids).sum().backward()
    assert module.embedding.weight.grad is not None and module.embedding.weight.grad.abs().sum() > 0
    assert [name for name, _ in module.named_parameters()] == ["embedding.weight"]
    x = torch.randn(2, 4, 16, requires_grad=True)
    pt.SinusoidalPositionalEncoding(16, batch_first=True)(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def test_token_embedding_scales_and_numbers_positions_like_fairseq():
    module = pt.TokenAndPositionEmbedding(20, 8, padding_idx=1, positions_from_padding=True)
    ids = torch.tensor([[1, 1, 4, 5], [4, 5, 1, 1]])  # left and right padding
    out = module(ids)
    emb = module.embedding(ids) * math.sqrt(8)
    pe = out - emb
    # fairseq: pads keep position padding_idx, whose table row is zero: no encoding at a padding token
    want_left = posenc.encode([1, 1, 2, 3], 8) * np.array([[0], [0], [1], [1]], np.float32)
    np.testing.assert_allclose(pe[0].detach().numpy(), want_left, atol=1e-6)
    want_right = posenc.encode([2, 3, 1, 1], 8) * np.array([[1], [1], [0], [0]], np.float32)
    np.testing.assert_allclose(pe[1].detach().numpy(), want_right, atol=1e-6)
    assert not out[ids == 1].any()  # the padding embedding row is zero too: M2M100's input there is 0
    assert module.embed_scale == math.sqrt(8)
    assert pt.TokenAndPositionEmbedding(20, 8, embed_scale=1.0).embed_scale == 1.0
    shifted = pt.TokenAndPositionEmbedding(20, 8, scale=0.5)  # scale: the encoding's frequency multiplier
    assert shifted.encoding.scale == 0.5 and shifted.embed_scale == math.sqrt(8)
    with pytest.raises(ValueError, match=r"embed_scale must be > 0 .* got -1"):
        pt.TokenAndPositionEmbedding(20, 8, embed_scale=-1)


def test_token_and_position_embedding_is_float32_whatever_the_default_dtype():
    """The docstring's float32 unless cast: its embedding was built in torch's default dtype (float64 under
    torch.set_default_dtype(torch.float64)); a cast still chooses."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        module = pt.TokenAndPositionEmbedding(10, 4)
    finally:
        torch.set_default_dtype(previous)
    assert module.embedding.weight.dtype == torch.float32
    assert module(torch.tensor([[1, 2]])).dtype == torch.float32
    assert module.to(torch.float64)(torch.tensor([[1, 2]])).dtype == torch.float64


def test_state_dict_holds_no_table_and_tutorial_checkpoints_load():
    module = pt.SinusoidalPositionalEncoding(32, dropout=0.1, batch_first=True)
    assert module.state_dict() == {}
    tutorial = TutorialPositionalEncoding(32, max_len=300)
    module.load_state_dict(tutorial.state_dict(), strict=True)
    wrapper = nn.Sequential(nn.Linear(32, 32), module)
    wrapper.load_state_dict(nn.Sequential(nn.Linear(32, 32), tutorial).state_dict(), strict=True)
    other = pt.SinusoidalPositionalEncoding(32, shift=1, batch_first=True)
    with pytest.raises(ValueError, match="other options"):
        other.load_state_dict(tutorial.state_dict())
    # the official tutorial (seq-first) stores pe as (max_len, 1, d_model)
    seq_first = {"pe": tutorial.pe.transpose(0, 1).clone()}
    assert seq_first["pe"].shape == (300, 1, 32)
    module.load_state_dict(seq_first, strict=True)


def test_tutorial_style_pe_attribute():
    module = pt.SinusoidalPositionalEncoding(512, max_len=8, batch_first=True)
    pe = module.pe.squeeze(0)[:8]
    assert module.pe.shape == (1, 8, 512)
    dots = pe @ pe.T
    assert float(dots[1, 2]) == pytest.approx(249.1021, abs=1e-3)
    assert pt.SinusoidalPositionalEncoding(4, batch_first=True).pe.shape == (1, 5000, 4)
    assert pt.SinusoidalPositionalEncoding(4).pe.shape == (5000, 1, 4)  # the tutorial's own buffer


def test_meta_device_construction_then_materialisation():
    with torch.device("meta"):
        module = pt.SinusoidalPositionalEncoding(24, dropout=0.0, batch_first=True)
    module = module.to_empty(device="cpu")
    x = torch.randn(2, 6, 24)
    assert torch.equal(module(x), pt.SinusoidalPositionalEncoding(24, batch_first=True)(x))


def test_two_threads_with_different_lengths():
    pt.clear_cache()
    module = pt.SinusoidalPositionalEncoding(64, batch_first=True)
    results, errors = {}, []

    def run(length):
        try:
            for _ in range(5):
                results[length] = module(torch.zeros(1, length, 64))[0]
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in (3000, 9000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for length, value in results.items():
        np.testing.assert_array_equal(value.numpy(), posenc.table(length, 64))


def test_extra_repr_shows_the_options():
    text = repr(pt.SinusoidalPositionalEncoding(16, shift=1, layout="sin_cos", dropout=0.1, max_len=64))
    assert "d_model=16" in text and "shift=1" in text and "layout='sin_cos'" in text and "max_len=64" in text
    assert "p=0.1" in text
    default = repr(pt.SinusoidalPositionalEncoding(16))
    assert "batch_first=False, max_len=None (.pe: 5000 rows)" in default  # what .pe holds, said


# --- compile and export -----------------------------------------------------------------------------


def test_compiled_fullgraph_dynamic_equals_eager_without_recompiling():
    torch._dynamo.reset()
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True)
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(module, fullgraph=True, dynamic=True, backend=counter)
    for length in (5, 17, 40):
        x = torch.randn(2, length, 32)
        assert torch.equal(compiled(x), module(x))
    assert counter.frame_count == 1


def test_compiled_with_inductor_equals_eager():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    module = pt.SinusoidalPositionalEncoding(32, batch_first=True)
    compiled = torch.compile(module, fullgraph=True, dynamic=True)
    for length in (6, 11, 29):
        x = torch.randn(2, length, 32)
        assert torch.equal(compiled(x), module(x))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1  # one graph, no recompilation


def test_torch_export_runs():
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    x = torch.randn(2, 7, 16)
    seq = torch.export.Dim("seq", min=2, max=4096)
    program = torch.export.export(module, (x,), dynamic_shapes=({1: seq},))
    longer = torch.randn(2, 30, 16)
    assert torch.equal(program.module()(longer), module(longer))


def _export_with_dynamic_seq(module, args, kwargs, dynamic_shapes, make_inputs):
    """Export with a dynamic sequence length (2..4096) beside a fixed batch of 4; the program keeps the
    whole range (no guard such as seq != 4 ties the length to the batch) and equals eager, bit for bit, at
    a length equal to the batch and at others."""
    program = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
    ranges = [(int(r.lower), int(r.upper)) for r in program.range_constraints.values()]
    assert (2, 4096) in ranges, ranges  # the sequence length's range, whole
    for length in (4, 5, 3):  # 4: the batch size
        inputs, keywords = make_inputs(length)
        got, want = program.module()(*inputs, **keywords), module(*inputs, **keywords)
        for g, w in zip(*((got, want) if isinstance(got, tuple) else ((got,), (want,))), strict=True):
            assert torch.equal(g, w), length


#: (batch_first, positions of shape (batch, seq), an offset of shape (batch,)): the module's forward
#: variants, x of shape (4, seq, 16) (or (seq, 4, 16) when not batch_first)
_EXPORT_CASES = [(True, False, False), (True, True, False), (True, True, True), (False, True, True)]


@pytest.mark.parametrize(("batch_first", "batch_positions", "with_offset"), _EXPORT_CASES)
def test_torch_export_dynamic_seq_beside_a_fixed_batch_equal_to_it(batch_first, batch_positions, with_offset):
    module = pt.SinusoidalPositionalEncoding(16, batch_first=batch_first).eval()
    seq = torch.export.Dim("seq", min=2, max=4096)

    def make_inputs(length):
        x = torch.randn((4, length, 16) if batch_first else (length, 4, 16))
        args = (x, torch.arange(length).repeat(4, 1)) if batch_positions else (x,)
        return args, ({"offset": torch.tensor([0, 3, 1, 7])} if with_offset else {})

    args, kwargs = make_inputs(7)
    shapes = {"x": {1: seq} if batch_first else {0: seq}}
    if batch_positions:
        shapes["positions"] = {1: seq}
    if with_offset:
        shapes["offset"] = None
    _export_with_dynamic_seq(module, args, kwargs, shapes, make_inputs)


def test_torch_export_token_embedding_dynamic_seq_beside_a_fixed_batch_equal_to_it():
    module = pt.TokenAndPositionEmbedding(20, 16, padding_idx=1, positions_from_padding=True).eval()
    seq = torch.export.Dim("seq", min=2, max=4096)

    def make_inputs(length):
        return (torch.randint(0, 20, (4, length)),), {}

    _export_with_dynamic_seq(module, *make_inputs(7), ({1: seq},), make_inputs)


@pytest.mark.parametrize("dynamic_batch", [False, True])
def test_torch_export_rotary_dynamic_seq_beside_a_batch_of_4(dynamic_batch):
    config = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096}
    module = pt.RotaryEmbedding(config)
    seq = torch.export.Dim("seq", min=2, max=4096)
    batch = {0: torch.export.Dim("batch", min=1, max=64)} if dynamic_batch else {}

    def make_inputs(length):
        return (torch.randn(4, length, 64), torch.arange(length).repeat(4, 1)), {}

    shapes = ({**batch, 1: seq}, {**batch, 1: seq})
    _export_with_dynamic_seq(module, *make_inputs(7), shapes, make_inputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_onnx_export_runs_in_onnxruntime_and_matches_eager(tmp_path, dtype):
    import onnxruntime  # installed by make test

    module = pt.SinusoidalPositionalEncoding(16, max_len=128, layout="sin_cos", batch_first=True)
    module = module.eval().to(dtype)
    x = torch.randn(2, 7, 16, dtype=dtype)
    program = torch.onnx.export(
        module, (x,), dynamo=True, dynamic_shapes=({1: torch.export.Dim("seq", max=128)},)
    )
    program.save(tmp_path / "posenc.onnx")
    session = onnxruntime.InferenceSession(tmp_path / "posenc.onnx")
    for length in (7, 50, 128):
        x = torch.randn(2, length, 16, dtype=dtype)
        (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        np.testing.assert_array_equal(got, module(x).numpy())


def test_onnx_export_needs_max_len():
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    with pytest.raises(ValueError, match="ONNX export needs max_len"):
        module._onnx_table(torch.float32, torch.device("cpu"), torch.arange(3))
    with pytest.raises(Exception, match="posenc"):  # the exporter reports the operator it could not place
        torch.onnx.export(module, (torch.randn(1, 3, 16),), dynamo=True)


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m(torch.zeros(2, 5, 15)), ValueError, r"d_model=16; got shape \(2, 5, 15\)"),
        (lambda m: m(torch.zeros(16)), ValueError, r"got shape \(16,\)"),
        (
            lambda m: m(torch.zeros(2, 5, 16), torch.arange(4)),
            ValueError,
            r"positions must have shape \(5,\)",
        ),
        (lambda m: m(torch.zeros(2, 5, 16), torch.ones(5, dtype=torch.bool)), TypeError, "not booleans"),
        (lambda m: m(torch.zeros(2, 5, 16), torch.ones(5, dtype=torch.complex64)), TypeError, "complex64"),
        (lambda m: m(torch.zeros(2, 5, 16), offset=-1), ValueError, r"offset must be >= 0; got -1"),
        (
            lambda m: m(torch.zeros(2, 5, 16), offset=torch.tensor([0, -3])),
            ValueError,
            r"offset must be >= 0",
        ),
        (
            lambda m: m(torch.zeros(2, 5, 16), offset=torch.tensor([1])),
            ValueError,
            r"an integer array of shape \(\) or x's batch shape \(2,\).*got shape \(1,\)",
        ),
        (
            lambda m: m(torch.zeros(2, 3, 5, 16), offset=torch.tensor([0, 1])),
            ValueError,
            r"shape \(\) or x's batch shape \(2, 3\) \(one per sequence\); got shape \(2,\)",
        ),
        (
            lambda m: m(torch.zeros(5, 16), offset=torch.tensor([1])),
            ValueError,
            r"integer array of shape \(\); got shape \(1,\)",
        ),
        (lambda m: m(torch.zeros(2, 5, 16), offset=1.5), TypeError, "offset must be an int"),
        (lambda m: m(torch.zeros(2, 5, 16), offset=2**31 - 3), ValueError, r"offset \+ seq - 1 = 2147483649"),
        (
            lambda m: m(torch.zeros(2, 5, 16), torch.arange(5, device="meta")),
            ValueError,
            r"positions are on meta but x is on cpu; pass positions.to\('cpu'\)",
        ),
        (lambda m: m(torch.zeros(2, 5, 16, dtype=torch.int32)), TypeError, "float64, float32"),
        (lambda m: m(torch.zeros(2, 5, 16), torch.tensor([0, 1, 2, 3, 2.0**31])), ValueError, r"2\*\*31"),
    ],
)
def test_bad_forward_inputs(call, error, message):
    with pytest.raises(error, match=message):
        call(pt.SinusoidalPositionalEncoding(16, batch_first=True))


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_MODULE_OPTIONS)
def test_bad_module_options(kwargs, error, message):
    with pytest.raises(error, match=message):
        pt.SinusoidalPositionalEncoding(**kwargs)


def test_timesteps_errors_name_diffusers_parameters():
    """Timesteps' errors name what its caller passed (num_channels, downscale_freq_shift, timesteps), not the
    core's d_model, shift and positions."""
    cases = [
        (lambda: pt.Timesteps(1, True, 0), ValueError, r"^num_channels must be an integer >= 2; got 1$"),
        (lambda: pt.Timesteps(4, True, 2), ValueError, r"^downscale_freq_shift=2 with num_channels=4 gives"),
        (
            lambda: pt.Timesteps(4, True, 0)(torch.tensor([float("nan")])),
            ValueError,
            r"^timesteps must be finite",
        ),
        (
            lambda: pt.Timesteps(4, True, 0)(torch.tensor([True])),
            TypeError,
            r"^timesteps must be integers or real",
        ),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message) as raised:
            call()
        assert raised.value.parameter in ("num_channels", "downscale_freq_shift", "timesteps")


def test_bad_functional_dtype():
    with pytest.raises(ValueError, match=r"dtype must be one of torch\.float64"):
        pt.encode(torch.arange(3), 8, dtype=torch.int32)


# --- positions and offsets of every dtype, taken exactly (found by the fuzz suite) ----------------------


@pytest.mark.parametrize(
    "dtype", [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2]
)
def test_narrow_and_unsigned_positions_convert_exactly(dtype):
    values = [0, 1, 2, 4, 96]
    got = pt.encode(torch.tensor(values).to(dtype), 8)
    np.testing.assert_array_equal(got.numpy(), posenc.encode(values, 8))
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    if not dtype.is_floating_point:  # an unsigned offset tensor is an offset
        got = module.encoding_for(torch.zeros(1, 3, 8), offset=torch.tensor([5]).to(dtype))
        np.testing.assert_array_equal(got[0].numpy(), posenc.encode([5, 6, 7], 8))


def test_uint64_positions_beyond_int64_are_refused_with_their_value():
    with pytest.raises(ValueError, match=r"positions.*18446744073709551615 \(uint64\)"):
        pt.encode(torch.tensor([2**64 - 1], dtype=torch.uint64), 8)
    with pytest.raises(ValueError, match=r"positions must satisfy \|p\| < 2\*\*31.*2147483648"):
        pt.encode(torch.tensor([2**31], dtype=torch.uint32), 8)


def test_python_floats_are_float64_not_float32():
    for position in (16777217.0, 0.1, [2.0**30 + 0.5]):
        got = pt.encode(position, 8, dtype=torch.float64)
        np.testing.assert_array_equal(got.numpy(), posenc.encode(position, 8, dtype="float64"))
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    got = module.encoding_for(torch.zeros(2, 8, dtype=torch.float64), [0.1, 16777217.0])
    np.testing.assert_array_equal(got.numpy(), posenc.encode([0.1, 16777217.0], 8, dtype="float64"))


def test_ragged_position_lists_name_the_positions():
    with pytest.raises(ValueError, match="positions must be a number or a rectangular"):
        pt.encode([[1, 2], [3]], 4)


def test_eager_cpu_offset_beyond_2_31_raises_for_real_and_integer_positions():
    module = pt.SinusoidalPositionalEncoding(2, batch_first=True)
    x = torch.zeros(1, 1, 2)
    for positions in (torch.tensor([0.0], dtype=torch.float16), torch.tensor([0])):
        with pytest.raises(ValueError, match=r"position 0(\.0)? \+ offset 2147483648 at index \(0,\)"):
            module(x, positions, offset=torch.tensor(2**31))
    # decided exactly, not in float64: 2**31 - 2**-30 is a valid position, 2**31 is not
    near = torch.tensor([1 - 2.0**-30], dtype=torch.float64)
    assert not torch.isnan(module(x.double(), near, offset=torch.tensor(2**31 - 1))).any()
    with pytest.raises(ValueError, match="offset"):
        module(x.double(), near, offset=torch.tensor(2**31))
    with pytest.raises(ValueError, match=r"offset=1180591620717411303424"):  # beyond int64: still clear
        module(x, torch.tensor([0]), offset=2**70)
    # negative positions plus an offset past 2**31 are fine when the sum is in range
    got = module(x.double(), torch.tensor([-5.5], dtype=torch.float64), offset=torch.tensor(7))
    np.testing.assert_array_equal(got[0].numpy(), posenc.encode([1.5], 2, dtype="float64"))


def test_eager_kernel_calls_skip_the_dispatcher_only_in_plain_eager_mode():
    """operator.direct: plain eager calls on a kernel device launch the kernel themselves (no dispatcher);
    under a dispatch mode (FakeTensorMode: a non-strict export) or a functorch transform they go through
    the operator, whose fake kernel answers."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from posenc.torch import operator
    from posenc.torch.kernels import common

    common.KERNEL_DEVICES.append("cpu")  # the CPU stands in for CUDA (no kernel runs: fake tensors)
    try:
        assert operator._plain_eager() and operator.direct(torch.zeros(2))
        options = (8, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32")
        with FakeTensorMode():
            assert not operator._plain_eager() and not operator.direct(torch.zeros(2))
            table = operator.table(10, 0, torch.device("cpu"), options)
            rows = operator.exact(torch.arange(3), None, options)
        assert type(table).__name__ == type(rows).__name__ == "FakeTensor"
        assert table.shape == (10, 8) and rows.shape == (3, 8)
        assert not operator.direct(torch.nn.Parameter(torch.zeros(2)))  # a subclass: the operator
    finally:
        common.KERNEL_DEVICES.remove("cpu")


def test_compiled_on_the_cpu_the_operators_run_the_c_core_with_the_eager_bits(monkeypatch):
    """benchmarks/compiled.py: a compiled or exported call on the CPU runs the C core (the operators' CPU
    kernels), not the portable algorithm traced into the graph; an invalid position gives NaN rows there."""
    from posenc.torch import functions, rotary

    calls = {"encode": 0, "rotary": 0}
    encode, host = functions._encode_on_cpu, rotary._host_rows

    def counted_encode(*args, **kwargs):
        calls["encode"] += 1
        return encode(*args, **kwargs)

    def counted_rows(*args, **kwargs):
        calls["rotary"] += 1
        return host(*args, **kwargs)

    monkeypatch.setattr(functions, "_encode_on_cpu", counted_encode)
    monkeypatch.setattr(rotary, "_host_rows", counted_rows)
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True)
    x, ids = torch.zeros(2, 5, 16), torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    compiled = torch.compile(module, fullgraph=True)
    assert torch.equal(compiled(x, ids), module(x, ids)) and calls["encode"] >= 2
    rope = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    cos, sin = torch.compile(rope, fullgraph=True)(torch.zeros(1, 3, 8), torch.arange(3)[None])
    want = rope(torch.zeros(1, 3, 8), torch.arange(3)[None])
    assert torch.equal(cos, want[0]) and torch.equal(sin, want[1]) and calls["rotary"] >= 2
    exact = torch.ops.posenc.exact(
        torch.tensor([1.0, float("nan")]), None, 4, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32"
    )
    assert torch.isnan(exact[1]).all() and torch.equal(exact[0], pt.encode(torch.tensor([1.0]), 4)[0])


def test_the_cpu_kernel_gives_nan_rows_for_ids_plus_offsets_that_wrap_around_int64():
    # what a compiled or exported program runs on the CPU: 2**63 - 1 + 2**63 - 1 wraps to -2 in int64 and
    # (1 - 2**63) + (1 - 2**63) to 2, which were rows -2 and 2; (2**63 - 1) + (1 - 2**63) = 0 does not wrap
    ids, offsets = torch.tensor([[2**63 - 1], [1 - 2**63]]), torch.tensor([[2**63 - 1, 1 - 2**63]])
    rows = torch.ops.posenc.exact(ids, offsets, 4, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32")
    assert torch.isnan(rows).all(-1).tolist() == [[True, False], [False, True]]
    zero = pt.encode(torch.tensor([0]), 4)[0]
    assert torch.equal(rows[0, 1], zero) and torch.equal(rows[1, 0], zero)


def test_compiled_or_exported_on_the_cpu_a_table_is_the_cores_rows_and_never_a_view_of_its_cache(monkeypatch):
    """The module with its default positions and ``posenc.torch.table`` compiled (``fullgraph``: no graph
    break, which calling the core from a traced ``table`` was) or exported with a dynamic length. The module
    is one ``torch.ops.posenc.add_table`` node, whose CPU kernel adds the core's cached rows straight from
    the cache, as an eager call does (was: the table operator's copy of them, then the addition: +0.05-0.1
    ms of a 0.2 ms call), into a fresh tensor; ``table`` is ``torch.ops.posenc.table``, whose CPU kernel
    gives the core's rows (was: the portable algorithm, ~1300x the eager call), a copy the program may
    overwrite without touching the cache; beyond the cache the core's rows of that range; an invalid start
    gives NaN rows (the portable algorithm), where an eager call raises."""
    from posenc.torch import functions, operator

    rows_on_cpu, added, portable = [], [], []
    cpu_table, cpu_add, launch = operator.CPU_TABLE, operator.CPU_ADD_TABLE, operator.table_launch.table
    monkeypatch.setattr(operator, "CPU_TABLE", lambda *a: rows_on_cpu.append(a[:2]) or cpu_table(*a))
    monkeypatch.setattr(operator, "CPU_ADD_TABLE", lambda *a: added.append(a[0].shape) or cpu_add(*a))
    monkeypatch.setattr(operator.table_launch, "table", lambda *a: portable.append(a[:2]) or launch(*a))
    for batch_first, shape in ((True, (2, 5, 16)), (False, (5, 2, 16))):
        module = pt.SinusoidalPositionalEncoding(16, batch_first=batch_first).eval()
        seq = torch.export.Dim("seq", min=2, max=4096)
        dims = ({1: seq},) if batch_first else ({0: seq},)
        exported = torch.export.export(module, (torch.zeros(shape),), dynamic_shapes=dims)
        ops = [n.target for n in exported.graph.nodes if n.op == "call_function"]
        assert ops == [torch.ops.posenc.add_table.default]
        torch._dynamo.reset()
        compiled = torch.compile(module, fullgraph=True)
        for length in (5, 300):
            x = torch.randn(2, length, 16) if batch_first else torch.randn(length, 2, 16)
            for offset in (0, 7):
                want = module(x, offset=offset)
                assert torch.equal(compiled(x, offset=offset), want)
            got = exported.module()(x)
            assert torch.equal(got, module(x)) and got.is_contiguous()
            assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        x = torch.randn(30, 2, 16).transpose(0, 1) if batch_first else torch.randn(2, 5, 16).transpose(0, 1)
        assert torch.equal(compiled(x), module(x))  # a strided x: the sum contiguous, as the fake says
    assert len(added) >= 8 and not rows_on_cpu and not portable
    table = torch.compile(lambda n: pt.table(n, 16), fullgraph=True)
    assert torch.equal(table(300), pt.table(300, 16)) and rows_on_cpu[-1] == (300, 0)

    pt.clear_cache()

    def zeroed(length: int, start: int) -> torch.Tensor:  # a program that writes into the table it got
        return pt.table(length, 16, start=start).mul_(0.0)

    table = torch.compile(zeroed, fullgraph=True)
    assert not table(8, 3).any() and torch.equal(pt.table(8, 16, start=3), functions.table(8, 16, start=3))
    module = pt.SinusoidalPositionalEncoding(16, batch_first=True).eval()
    assert torch.equal(pt.table(8, 16, start=3), module(torch.zeros(1, 11, 16))[0, 3:])  # the cache unharmed
    far = torch.compile(lambda: pt.table(4, 16, start=2**30), fullgraph=True)()
    assert torch.equal(far, pt.table(4, 16, start=2**30)) and not portable
    options = (16, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32")
    nan = torch.ops.posenc.table(4, 2**31 - 2, torch.device("cpu"), *options)  # as a program calls it
    assert torch.isnan(nan[2:]).all() and torch.equal(nan[:2], pt.table(2, 16, start=2**31 - 2))
    assert portable  # an invalid position: the portable algorithm's NaN rows, where an eager call raises
    empty = torch.compile(lambda: pt.table(0, 16, dtype=torch.bfloat16), fullgraph=True)()  # it raised
    assert empty.shape == (0, 16) and empty.dtype == torch.bfloat16


def test_a_compiled_decode_step_gathers_cached_rows_without_reading_the_positions(monkeypatch):
    """The rotary operator's CPU kernel: positions inside the cached table are two gathers, with no read of
    the positions; past it, negative, int32 or invalid they take the checked road; the eager bits always."""
    from posenc.torch import rotary

    rope = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    compiled = torch.compile(rope, fullgraph=True, dynamic=True)
    x = torch.zeros(1, 1, 8)
    reads = []
    check = rotary._check_positions_on_host
    monkeypatch.setattr(rotary, "_check_positions_on_host", lambda t: reads.append(t) or check(t))
    pt.clear_cache()
    # (positions, gathered with no read): built, cached, past the table (it grows), inside it again,
    # negative, beyond what a table holds, another shape, int32
    steps = [([[3]], False), ([[3]], True), ([[4000]], False), ([[4001]], True), ([[-7]], False)]
    steps += [([[2**31 - 1]], False), ([[5], [9]], True), (torch.tensor([[6]], dtype=torch.int32), True)]
    for ids, gathered in steps:
        ids = torch.as_tensor(ids)
        before = len(reads)
        got = compiled(x, ids)
        assert (len(reads) == before) == gathered, ids
        want = rope(x, ids)
        assert all(torch.equal(a, b) and a.is_contiguous() for a, b in zip(got, want, strict=True)), ids
    nan = compiled(x, torch.tensor([[2**31]]))
    assert all(torch.isnan(t).all() for t in nan)  # where an eager call raises


def test_the_operators_carry_the_gradient_an_eager_call_gives_and_keep_their_schemas():
    """An operator a traced program holds carries whatever gradient its inputs ask for when the program
    runs, not what they asked for when it was traced: an exported program trained afterwards gave no
    gradient to the q and k it rotated, to the x the module added to, or to real timesteps (their outputs
    required none: silently, where other parameters did). Now each gives an eager call's gradient, the
    same bits; where nothing asks for one, the operator runs below autograd. The rotary operator refuses
    real positions requiring one, as an eager call does; the table operator takes no tensor. Their schemas
    are the ones an exported program names."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoding = pt.SinusoidalPositionalEncoding(8, batch_first=True)
            self.timesteps = pt.Timesteps(8, True, 0)

        def forward(self, x, q, k, cos, sin, t):
            q, k = pt.apply_rotary(q, k, cos, sin)
            return self.encoding(x), q, k, self.timesteps(t)

    rope = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    generator = torch.Generator().manual_seed(0)
    x, q, k = (torch.randn(shape, generator=generator) for shape in ((2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)))
    cos, sin = rope(q, torch.arange(5)[None])
    inputs = (x, q, k, cos, sin, torch.tensor([0.5, 3.0, 700.25]))
    model = Model().eval()
    program = torch.export.export(model, inputs)
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert {"posenc.add_table.default", "posenc.rotate_half.default", "posenc.exact.default"} <= ops
    grads = []
    for run in (program.module(), model):
        leaves = [t.clone().requires_grad_(t is not cos and t is not sin) for t in inputs]
        outputs = run(*leaves)
        sum(o.square().sum() for o in outputs).backward()
        grads.append(([o.detach() for o in outputs], [t.grad for t in leaves]))
    (got, got_grads), (want, want_grads) = grads
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert all(a is b is None or torch.equal(a, b) for a, b in zip(got_grads, want_grads, strict=True))
    assert want_grads[0] is not None and want_grads[-1].abs().sum() > 0
    with torch.no_grad():  # nothing asks: below autograd, nothing recorded
        assert all(o.grad_fn is None for o in program.module()(*(t.requires_grad_(False) for t in inputs)))
    rotary = torch.export.export(rope, (q, torch.arange(5.0)[None]))
    with pytest.raises(TypeError, match="positions"):  # refused, as an eager call refuses them
        rotary.module()(q, torch.arange(5.0, requires_grad=True)[None])
    positions = torch.arange(4.0)
    options = (8, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32")
    out = torch.ops.posenc.table(4, 0, torch.device("cpu"), *options)
    assert not out.requires_grad and torch.equal(out, pt.encode(positions, 8))
    names = ("rotary", "table", "add_table")
    schemas = {name: str(getattr(torch.ops.posenc, name).default._schema) for name in names}
    assert schemas == {
        "rotary": "posenc::rotary(Tensor positions, str params, SymInt seq_len, str dtype_name, str layout) "
        "-> (Tensor, Tensor)",
        "table": "posenc::table(SymInt length, SymInt start, Device where, SymInt d_model, float base, "
        "float shift, float scale, str layout, str odd, str dtype_name) -> Tensor",
        "add_table": "posenc::add_table(Tensor x, SymInt start, bool batch_first, SymInt d_model, "
        "float base, float shift, float scale, str layout, str odd, str dtype_name) -> Tensor",
    }


def test_an_exported_rotary_apply_on_the_cpu_is_one_node_calling_the_c_pass():
    class Apply(torch.nn.Module):
        def forward(self, q, k, cos, sin):
            return pt.apply_rotary(q, k, cos, sin)

    rope = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    q, k = torch.randn(1, 2, 5, 8).to(torch.bfloat16), torch.randn(1, 2, 5, 8).to(torch.bfloat16)
    cos, sin = rope(q, torch.arange(5)[None])
    with torch.no_grad():
        program = torch.export.export(Apply(), (q, k, cos, sin))
        assert "posenc.rotate_half" in str(program.graph)
        got, want = program.module()(q, k, cos, sin), Apply()(q, k, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    # with gradients to carry when traced (training), the formula is traced, as the operator's own
    # autograd kernel would run it
    q.requires_grad_(True)
    assert "posenc.rotate_half" not in str(torch.export.export(Apply(), (q, k, cos, sin)).graph)


def test_a_compiled_call_refuses_an_output_memory_cannot_hold_before_any_work(monkeypatch):
    """Compiled on the CPU, the operators bound the output's size as an eager call does: the size refusal
    was taken for an invalid position, and the portable algorithm then started on several times the output
    (a process killed for memory, 120 GB asked)."""
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: 100 << 20)
    with pytest.raises(ValueError, match=r"needs 0\.25 GiB but only 0\.0977 GiB"):
        torch.compile(lambda: pt.table(2**16, 1024), fullgraph=True, backend="eager")()
    positions = torch.arange(2**16)
    with pytest.raises(ValueError, match=r"needs 0\.25 GiB"):
        torch.compile(lambda p: pt.encode(p, 1024), fullgraph=True, backend="eager")(positions)


def test_the_cache_keeps_no_table_for_a_far_id_and_stays_within_its_total(monkeypatch):
    """One id of 2**19 built and kept a table of 2**20 rows (256 MiB) for 256 bytes of result, and the
    tables of every option set were kept without a total: a sparse id is computed alone, and past
    ``CACHE_TOTAL_BYTES`` the oldest tables go (results unchanged: each is the caller's own copy)."""
    from posenc.torch import functions

    pt.clear_cache()
    far = pt.encode(torch.tensor([2**19]), 64)
    assert not functions._CACHE and torch.equal(far, torch.from_numpy(posenc.encode([2**19], 64)))
    monkeypatch.setattr(functions, "CACHE_TOTAL_BYTES", 3 * 4096 * 64 * 4)  # three tables of 4096 rows
    for base in (100.0, 200.0, 300.0, 400.0, 500.0):
        got = pt.encode(torch.arange(4000), 64, base=base)
        assert torch.equal(got, torch.from_numpy(posenc.table(4000, 64, base=base)))
    held = [entry.numel() * entry.element_size() for entry in functions._CACHE.values()]
    assert len(held) == 3 and sum(held) <= functions.CACHE_TOTAL_BYTES
    pt.clear_cache()


def test_on_meta_nothing_is_computed(monkeypatch):
    """A meta table or encoding is its shape alone: the portable algorithm's constants were built for it
    (a width of 2**20 took 20 s)."""
    from posenc.torch import operator

    def refuse(*args):
        raise AssertionError("the portable algorithm's constants were built for a meta tensor")

    monkeypatch.setattr(operator, "_request", refuse)
    table = pt.table(3, 2**20, device="meta")
    rows = pt.encode(torch.zeros(2, 5, dtype=torch.long, device="meta"), 2**20)
    assert table.shape == (3, 2**20) and rows.shape == (2, 5, 2**20) and rows.device.type == "meta"


def test_sparse_nested_and_non_tensor_inputs_get_posencs_errors_or_are_taken_as_the_jax_module_takes_them():
    """A sparse or nested tensor of positions raised torch's internal errors (aminmax on SparseCPU,
    "NestedTensorImpl doesn't support sizes"); a NumPy offset array (the JAX module takes one) and a list
    of rotary position ids raised AttributeErrors."""
    dense = torch.tensor([[0, 3, 5]])
    for bad, said in ((dense.to_sparse(), "sparse_coo"), (torch.nested.nested_tensor([dense[0]]), "nested")):
        with pytest.raises(TypeError, match=f"positions must be a dense tensor; got a {said} tensor"):
            pt.encode(bad, 8)
    module = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    x = torch.zeros(2, 3, 8)
    assert torch.equal(module(x, offset=np.array([1, 2])), module(x, offset=torch.tensor([1, 2])))
    from posenc import rope

    rotary = pt.RotaryEmbedding(rope.config(head_dim=8, base=10000.0))
    for got, want in zip(rotary(x, [[0, 1, 2]]), rotary(x, torch.tensor([[0, 1, 2]])), strict=True):
        assert torch.equal(got, want)


def test_a_negative_tensor_offset_gives_rows_of_nan_where_it_is_not_read():
    """Eager on the CPU a negative tensor offset is refused; compiled or exported it gave the rows of the
    positions below zero (finite, plausible, silently): now rows of NaN for that sequence, as for any
    invalid position a traced program cannot raise on; the other sequences keep their exact rows."""
    module = pt.SinusoidalPositionalEncoding(4, batch_first=True)
    x, offset = torch.zeros(2, 3, 4), torch.tensor([-1, 2])
    with pytest.raises(ValueError, match="offset must be >= 0"):
        module(x, offset=offset)
    compiled = torch.compile(lambda x, o, p=None: module(x, p, offset=o), fullgraph=True, dynamic=True)
    exported = torch.export.export(module, (x,), {"offset": torch.tensor([1, 2])}).module()
    for got in (
        compiled(x, offset),
        exported(x, offset=offset),
        compiled(x, offset, torch.tensor([0.5, 1, 2])),
    ):
        assert torch.isnan(got[0]).all() and not torch.isnan(got[1]).any()
    assert torch.equal(exported(x, offset=offset)[1], module(x, offset=torch.tensor([1, 2]))[1])
