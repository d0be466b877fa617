"""posenc.torch.RotaryEmbedding beyond the plain drop-in: ``seq_len`` for the length-dependent types (no host
read: compiled with fullgraph, on meta tensors) and RoPE parameters per layer type (Gemma 3, as transformers
5 saves them), against Hugging Face's own modules and the NumPy core."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc.rope as rope
import posenc.torch as ptorch
from tests.rope.test_rope_parameters import CONFIGS, longrope_config
from tests.support.module_cases import logits_before_and_after

#: A Gemma 3 style config: RoPE parameters per layer type, as transformers 5 saves them.
GEMMA3 = {
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "num_attention_heads": 2,
    "head_dim": 32,
    "num_hidden_layers": 2,
    "max_position_embeddings": 8192,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
}


# --- seq_len: no host read ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["phi3_mini_128k", "dynamic"])
def test_forward_with_seq_len_compiles_with_fullgraph_and_runs_on_meta(name, monkeypatch):
    module = ptorch.RotaryEmbedding(CONFIGS[name])
    ids = torch.arange(6000)[None] + 100  # past original_max_position_embeddings (4096): long factors
    x = torch.zeros(1, 1, 4)
    for seq_len in (6100, 4096):  # long, then short factors (dynamic: scaled, then not)
        want_cos, want_sin = rope.cos_sin(ids.numpy(), module.params, seq_len=seq_len)
        compiled = torch.compile(lambda x, ids, n=seq_len: module(x, ids, seq_len=n), fullgraph=True)
        cos, sin = compiled(x, ids)
        np.testing.assert_array_equal(cos.numpy(), want_cos)
        np.testing.assert_array_equal(sin.numpy(), want_sin)
        eager_cos, _ = module(x, ids, seq_len=seq_len)
        np.testing.assert_array_equal(eager_cos.numpy(), want_cos)
    default_cos, _ = module(x, ids)  # default seq_len: max(position_ids) + 1 = 6100, read on the host
    np.testing.assert_array_equal(default_cos.numpy(), rope.cos_sin(ids.numpy(), module.params)[0])
    meta_cos, meta_sin = module(x.to("meta"), ids.to("meta"), seq_len=6100)
    assert meta_cos.device.type == meta_sin.device.type == "meta"
    assert tuple(meta_cos.shape) == (1, 6000, module.params.rotary_dim) and meta_cos.dtype == torch.float32
    if name == "dynamic":  # its frequencies change with the length: read on the host, or given
        with pytest.raises(ValueError, match=r"pass seq_len="):
            module(x.to("meta"), ids.to("meta"))
        return
    # longrope without seq_len on a device: both sets computed, one picked there (no host read): fullgraph,
    # meta; the CPU made to run the devices' path (its own kernel reads the length: the test below)
    from posenc.torch import operator

    monkeypatch.setattr(operator, "CPU_CORE", False)
    compiled = torch.compile(lambda x, ids: module(x, ids), fullgraph=True)
    for positions in (ids[:, 3990:4000], ids[:, 10:20]):  # max + 1 = 4100 > 4096: long factors; 120: short
        want_cos, want_sin = rope.cos_sin(positions.numpy(), module.params, seq_len=int(positions.max()) + 1)
        cos, sin = compiled(x, positions)
        np.testing.assert_array_equal(cos.numpy(), want_cos)
        np.testing.assert_array_equal(sin.numpy(), want_sin)
    meta_cos, _ = module(x.to("meta"), ids.to("meta"))
    assert meta_cos.device.type == "meta" and tuple(meta_cos.shape) == (1, 6000, module.params.rotary_dim)


@pytest.mark.parametrize("name", ["phi3_mini_128k", "dynamic"])
def test_compiled_on_the_cpu_without_seq_len_the_length_is_read_when_the_program_runs(name, monkeypatch):
    """On the CPU a compiled or exported program's rotary operator reads max(positions) + 1 when it runs, as
    an eager call does (a host read costs nothing there): one set of rows (LongRoPE computed both and picked
    one: twice the work), and dynamic NTK compiles with fullgraph (it raised on the data-dependent length);
    an invalid position leaves the length undefined: every row NaN, where an eager call raises."""
    from posenc.torch import operator

    module = ptorch.RotaryEmbedding(CONFIGS[name])
    compiled = torch.compile(lambda x, ids: module(x, ids), fullgraph=True, dynamic=True)
    x = torch.zeros(1, 1, 4)
    for ids in (torch.arange(3000)[None], torch.arange(6000)[None] + 100, torch.tensor([[5000], [7]])):
        cos, sin = compiled(x, ids)  # short factors (not scaled), long (scaled), a decode step past them
        want_cos, want_sin = rope.cos_sin(ids.numpy(), module.params, seq_len=int(ids.max()) + 1)
        np.testing.assert_array_equal(cos.numpy(), want_cos)
        np.testing.assert_array_equal(sin.numpy(), want_sin)
    exported = torch.export.export(module, (x, torch.tensor([[5000]])))
    rotary = [n for n in exported.graph.nodes if n.op == "call_function" and "posenc" in str(n.target)]
    assert [n.target for n in rotary] == [torch.ops.posenc.rotary.default] and rotary[0].args[2] == -1
    assert all(torch.isnan(t).all() for t in compiled(x, torch.tensor([[3, 2**31]])))
    with pytest.raises(ValueError):
        module(x, torch.tensor([[3, 2**31]]))
    # the program run where the operator's device body runs (moved to a device): the same length, taken there
    monkeypatch.setattr(operator, "CPU_CORE", False)
    for ids in (torch.tensor([[5000]]), torch.tensor([[7]])):
        cos, sin = exported.module()(x, ids)
        want_cos, want_sin = rope.cos_sin(ids.numpy(), module.params)
        np.testing.assert_array_equal(cos.numpy(), want_cos)
        np.testing.assert_array_equal(sin.numpy(), want_sin)


def test_seq_len_is_ignored_by_the_types_that_do_not_depend_on_it():
    module = ptorch.RotaryEmbedding(CONFIGS["llama31_8b"])
    ids = torch.arange(50)[None] + 9000
    x = torch.zeros(1, 1, 4)
    np.testing.assert_array_equal(module(x, ids, seq_len=3)[0].numpy(), module(x, ids)[0].numpy())


# --- RoPE parameters per layer type (Gemma 3) -------------------------------------------------------------


def test_per_layer_type_parameters_are_read_with_layer_type():
    assert rope.layer_types(GEMMA3) == ("full_attention", "sliding_attention")
    assert rope.layer_types(CONFIGS["llama2"]) == ()
    full = ptorch.RotaryEmbedding(GEMMA3, layer_type="full_attention")
    sliding = ptorch.RotaryEmbedding(GEMMA3, layer_type="sliding_attention")
    assert (full.params.rope_type, full.params.factor, full.params.base) == ("linear", 8.0, 1000000.0)
    assert (sliding.params.rope_type, sliding.params.base) == ("default", 10000.0)
    both = ptorch.RotaryEmbedding(GEMMA3)
    assert both.params is None and set(both.layer_params) == {"full_attention", "sliding_attention"}
    ids, x = torch.arange(40)[None], torch.zeros(1, 1, 4)
    for module, layer in ((full, "full_attention"), (sliding, "sliding_attention")):
        want = rope.cos_sin(ids.numpy(), rope.config(GEMMA3, layer_type=layer))
        for got in (module(x, ids), module(x, ids, layer), both(x, ids, layer)):
            np.testing.assert_array_equal(got[0].numpy(), want[0])
            np.testing.assert_array_equal(got[1].numpy(), want[1])
        torch.testing.assert_close(getattr(both, f"{layer}_inv_freq"), module.inv_freq, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"every layer type .*'full_attention'.*layer_type=None"):
        both(x, ids)
    with pytest.raises(
        ValueError, match=r"layer_type='sliding_attention' was passed .*layer_type='full_attention'"
    ):
        full(x, ids, "sliding_attention")
    with pytest.raises(ValueError, match=r"RotaryEmbedding\(cfg, layer_type=...\).*--layer-type"):
        rope.config(GEMMA3)
    with pytest.raises(ValueError, match=r"layer_type='full_attention' was given but .* not nested"):
        ptorch.RotaryEmbedding(CONFIGS["llama2"], layer_type="full_attention")


def test_per_layer_type_module_is_a_drop_in_for_gemma3():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3 import modeling_gemma3

    fields = {k: v for k, v in GEMMA3.items() if k != "model_type"}
    config = transformers.Gemma3TextConfig(
        vocab_size=97, intermediate_size=64, num_key_value_heads=1, **fields
    )
    theirs = modeling_gemma3.Gemma3RotaryEmbedding(config)
    ours = ptorch.RotaryEmbedding(config)
    ids, x = torch.arange(3000)[None].repeat(2, 1), torch.zeros(2, 8, 4)
    for layer in ("full_attention", "sliding_attention"):
        their_cos, their_sin = theirs(x, ids, layer)
        our_cos, our_sin = ours(x, ids, layer)
        assert our_cos.shape == their_cos.shape and our_cos.dtype == their_cos.dtype
        torch.testing.assert_close(our_cos, their_cos, atol=3e-4, rtol=0)  # their float32 angles
        torch.testing.assert_close(our_sin, their_sin, atol=3e-4, rtol=0)
        torch.testing.assert_close(
            getattr(ours, f"{layer}_inv_freq"), getattr(theirs, f"{layer}_inv_freq"), rtol=1e-6, atol=0
        )
        assert getattr(ours, f"{layer}_attention_scaling") == getattr(theirs, f"{layer}_attention_scaling")
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(config).eval()
    tokens = torch.randint(0, 97, (1, 300))
    before, after = logits_before_and_after(model, tokens, ptorch.RotaryEmbedding)
    torch.testing.assert_close(after, before, atol=2e-4, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_the_eager_apply_gives_the_general_functions_bits(dtype, monkeypatch):
    """posenc.torch.apply_rotary's faster eager road (half layout, whole head, no autograd) returns exactly
    what the function of every framework returns; the other cases take that function itself."""
    from posenc.rope.arrays import apply_rotary as general
    from posenc.torch import rotary

    fast, taken = rotary._rotate_half, []
    monkeypatch.setattr(rotary, "_rotate_half", lambda *a: taken.append(1) or fast(*a))

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 33, 64, generator=g).to(dtype)
    k = torch.randn(2, 2, 33, 64, generator=g).to(dtype)  # fewer key heads: broadcast from cos (2, 1, 33, 64)
    cos, sin = (torch.randn(2, 33, 64, generator=g).to(dtype) for _ in range(2))
    cases = [
        ((q, k, cos, sin), {}),
        ((q.transpose(1, 2), k.transpose(1, 2), cos, sin), {"unsqueeze_dim": 2}),  # (B, L, H, D)
        ((q, k, cos[:1], sin[:1]), {}),  # one row of cos for every batch row
        ((q, k, cos[..., :32], sin[..., :32]), {}),  # partial rotary: the general function
        ((q, k, cos, sin), {"layout": "interleaved"}),
    ]
    for args, keywords in cases:
        got, want = ptorch.apply_rotary(*args, **keywords), general(*args, **keywords)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype == dtype and torch.equal(a, b), keywords
    assert len(taken) == 6  # the first three cases, q and k each, took the faster road
    leaf = q.clone().requires_grad_()
    rotated, _ = ptorch.apply_rotary(leaf, k, cos, sin)  # with autograd: the general function, differentiable
    rotated.sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == q.shape


def test_an_integer_x_is_refused_naming_x():
    """x of int64: refused naming x (the error named a dtype the caller never passed); a complex form reads
    no dtype of x."""
    module = ptorch.RotaryEmbedding(rope.config(head_dim=4, base=100.0))
    with pytest.raises(
        TypeError, match=r"^x must be a tensor of dtype torch\.float64.*got torch\.int64"
    ) as raised:
        module(torch.zeros(1, dtype=torch.long), torch.arange(2)[None])
    assert raised.value.parameter == "x"
    complex_form = ptorch.RotaryEmbedding(rope.config(head_dim=4, base=100.0), form="complex")
    assert complex_form(torch.zeros(1, dtype=torch.long), torch.arange(2)[None]).dtype == torch.complex64


def test_the_eager_apply_and_the_general_function_differ_at_most_in_a_nans_sign():
    """What rotate's docstring says: the faster road's x1·c1 − x2·s1 keeps a NaN's sign where the general
    x1·c1 + (−x2)·s1 flips it; every number, and where the NaNs are, the same."""
    from posenc.rope.arrays import apply_rotary as general
    from posenc.torch import rotary

    assert "its sign may differ from the general function's" in rotary.rotate.__doc__
    q = torch.tensor([[[[1.0, float("nan"), 2.0, -3.0]]]])
    cos, sin = torch.tensor([[[0.5, 0.5, 0.25, 0.25]]]), torch.tensor([[[0.5, 0.5, 0.75, 0.75]]])
    fast, slow = ptorch.apply_rotary(q, q, cos, sin)[0], general(q, q, cos, sin)[0]
    sign = torch.tensor(-(2**31), dtype=torch.int32)
    assert torch.equal(_bits(fast) & ~sign, _bits(slow) & ~sign)
    assert torch.equal(torch.isnan(fast), torch.isnan(slow))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_float64_cos_sin_are_not_rounded_before_the_products(dtype):
    """q of float32 or bfloat16, cos/sin of float64: computed in float64 and rounded once to q's dtype, on
    both roads and in NumPy (they were rounded to float32 first: a second rounding)."""
    from posenc.rope.arrays import apply_rotary as general

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 33, 64, generator=g).to(dtype)
    cos, sin = (torch.randn(2, 33, 64, generator=g, dtype=torch.float64) for _ in range(2))
    wide, c, s = q.double(), cos[:, None], sin[:, None]
    want = {
        "half": (wide * c + torch.cat([-wide[..., 32:], wide[..., :32]], -1) * s).to(dtype),
        "interleaved": (wide * c + torch.stack([-wide[..., 1::2], wide[..., ::2]], -1).flatten(-2) * s).to(
            dtype
        ),
    }
    for layout, expected in want.items():
        fast, slow = (
            ptorch.apply_rotary(q, q, cos, sin, layout=layout),
            general(q, q, cos, sin, layout=layout),
        )
        for got in (*fast, *slow):
            assert got.dtype == dtype and torch.equal(got, expected), layout
    if dtype == torch.float32:
        numpy, _ = general(q.numpy(), q.numpy(), cos.numpy(), sin.numpy())
        assert numpy.dtype == np.float32 and np.array_equal(numpy, want["half"].numpy())


@pytest.mark.parametrize("name", ["llama2", "llama31_8b", "qwen2_yarn", "gpt_neox", "dynamic"])
def test_eager_cpu_rows_come_from_a_cached_table_with_the_cores_bits(name):
    """Integer ids >= 0 on the CPU are gathered from tables cached per parameters, dtype and layout (not
    where the rows depend on the length: dynamic, longrope); the rows are the core's, the caller's own."""
    from posenc.torch import functions

    config = CONFIGS[name]
    params = rope.config(config)
    module = ptorch.RotaryEmbedding(config)
    ptorch.clear_cache()
    for dtype in (torch.float32, torch.bfloat16):
        for ids in (torch.full((8, 1), 2050), torch.arange(300)[None], torch.tensor([[5, 2**30 + 7]])):
            cos, sin = module(torch.zeros(1, dtype=dtype), ids)
            name_ = str(dtype).removeprefix("torch.")
            want = rope.cos_sin(ids.numpy(), params, dtype="float32" if name_ == "float32" else "bfloat16")
            assert np.array_equal(cos.float().numpy(), want[0].astype(np.float32))
            assert np.array_equal(sin.float().numpy(), want[1].astype(np.float32))
            cos.fill_(7.0)  # the caller's own: the next call does not see it
            again, _ = module(torch.zeros(1, dtype=dtype), ids)
            assert np.array_equal(again.float().numpy(), want[0].astype(np.float32))
    cached = [key for key in functions._CACHE if key[0] == "rotary"]
    assert len(cached) == (0 if params.rope_type == "dynamic" else 2)  # one table pair per dtype
    assert all(functions._CACHE[key][0].shape[0] < 2**20 for key in cached)  # 2**30 + 7 was not cached
    ptorch.clear_cache()
    assert not [key for key in functions._CACHE if key[0] == "rotary"]


# --- the C rotation of the eager road ---------------------------------------------------------------------


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's bits as integers (NaN == NaN, -0 != 0)."""
    return t.contiguous().view({torch.float32: torch.int32}.get(t.dtype, torch.int16))


def _special_values(dtype: torch.dtype) -> torch.Tensor:
    """±0, ±inf, NaNs (quiet and signalling, several payloads, both signs), subnormals, the largest finite
    value, and numbers whose products with the others are exact float32 ties of bfloat16 and float16
    (1 + 2**-8, 1 + 3·2**-8, 1 + 2**-11, ...), in ``dtype``."""
    info = torch.finfo(dtype)
    fraction = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[dtype]
    width = info.bits
    sign = 1 << (width - 1)
    inf, quiet = (sign - 1) & ~((1 << fraction) - 1), 1 << (fraction - 1)
    bits = [inf | quiet, sign | inf | quiet | 1, inf | 3, inf | 0x15]  # NaNs
    bits += [1, sign | 1, (1 << fraction) - 1]  # subnormals: the smallest of either sign, the largest
    signed = torch.tensor(bits, dtype=torch.int64)
    signed = signed - (signed >= sign).long() * (1 << width)  # the same bits as a signed integer
    special = signed.to(torch.int32 if width == 32 else torch.int16).view(dtype)
    numbers = [0.0, -0.0, float("inf"), float("-inf"), info.tiny, -info.tiny, info.max, -1.0, 0.5, 3.0]
    numbers += [1.0, 1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-11, 1 + 3 * 2**-11, 2**-20]
    return torch.cat([torch.tensor(numbers, dtype=torch.float64).to(dtype), special])


def _rotation_cases(dtype: torch.dtype) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(name, x, cos, sin) after the fast road's unsqueeze: both layouts of the heads, a transposed view of a
    Linear output, cos shared by the batch, values of many exponents and special values."""
    g = torch.Generator().manual_seed(7)
    B, H, L, D = 3, 4, 21, 16

    def wide(*shape: int) -> torch.Tensor:  # numbers of many exponents, overflowing float16 too
        scale = torch.exp2(torch.randint(-60, 60, shape, generator=g).float())
        return torch.randn(*shape, generator=g) * scale

    def special(values: torch.Tensor, *shape: int) -> torch.Tensor:
        return values[torch.randint(0, len(values), shape, generator=g)]

    x, x_special = wide(B, H, L, D).to(dtype), special(_special_values(dtype), B, H, L, D)
    cos, sin = wide(B, L, D), wide(B, L, D)
    values = _special_values(torch.float32)
    cos_special, sin_special = special(values, B, L, D), special(values, B, L, D)
    linear = wide(B, L, H * D).to(dtype)
    return [
        ("heads second", x, cos.unsqueeze(1), sin.unsqueeze(1)),
        ("heads third", x.transpose(1, 2).contiguous(), cos.unsqueeze(2), sin.unsqueeze(2)),
        ("transposed view", linear.view(B, L, H, D).transpose(1, 2), cos.unsqueeze(1), sin.unsqueeze(1)),
        ("cos shared by the batch", x, cos[:1].unsqueeze(1), sin[:1].unsqueeze(1)),
        ("bfloat16 cos, float64 sin", x, cos.bfloat16().unsqueeze(1), sin.double().unsqueeze(1)),
        ("special values", x_special, cos_special.unsqueeze(1), sin_special.unsqueeze(1)),
        ("special x, wide cos", x_special, cos.unsqueeze(1), sin.unsqueeze(1)),
        ("special, heads third", x_special.transpose(1, 2), cos_special.unsqueeze(2), sin.unsqueeze(2)),
    ]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_c_rotation_gives_the_torch_roads_bits(dtype):
    """posenc.torch.apply_rotary's eager road in C (posenc.core._kernels.rotate_half) returns the bits of the
    torch code it replaces for every value (NaNs, infinities, subnormals, ties) and layout, in parts too."""
    from posenc.core import compiled
    from posenc.torch import rotary

    rotate = getattr(compiled.module(), "rotate_half", None)
    assert rotate is not None  # `make test` builds posenc.core._kernels (tests/core/test_compiled.py too)
    rules = rotary._probe_rules(dtype, 8)  # None: no rule gives the torch road's bits on the probe rows
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):  # torch's vector loops: x86's rules
        assert rules is not None
    for name, x, cos, sin in _rotation_cases(dtype):
        want = rotary._rotate_half_torch(x, cos, sin)
        got = rotary._rotate_half_compiled(x, cos, sin)
        if torch.float64 in (cos.dtype, sin.dtype):  # computed in float64, C's float32 too narrow: torch's
            assert got is None, name
            continue
        if rules is None:  # torch's loops pick NaNs some other way here: the torch road runs
            assert got is None
            continue
        assert got is not None, name
        assert got.dtype == dtype and got.shape == x.shape and got.stride() == want.stride(), name
        assert torch.equal(_bits(got), _bits(want)), name
        kind, view = rotary._KINDS[dtype]
        arrays = (x.view(view).numpy(), cos.float().numpy(), sin.float().numpy())
        for parts in (2, 3, 7):  # the thread pool's parts, here one after another: each row once
            out = torch.full_like(x, 5.0)
            assert all(rotate(*arrays, out.view(view).numpy(), kind, rules, i, parts) for i in range(parts))
            assert torch.equal(_bits(out), _bits(want)), (name, parts)
    cases = _rotation_cases(dtype)
    q, k, cos, sin = cases[0][1], *cases[5][1:]  # through the public function: wide q, special k
    got_q, got_k = ptorch.apply_rotary(q, k, cos.squeeze(1), sin.squeeze(1))
    assert torch.equal(_bits(got_q), _bits(rotary._rotate_half_torch(q, cos, sin)))
    assert torch.equal(_bits(got_k), _bits(rotary._rotate_half_torch(k, cos, sin)))


def test_the_rotation_falls_back_to_torch_without_the_extension_or_in_flush_denormal_mode(monkeypatch):
    """Without the C extension (or with subnormals flushed on this thread, as torch.set_flush_denormal(True)
    makes torch's own loops do), _rotate_half runs the torch code: the same bits."""
    from posenc.core import compiled
    from posenc.torch import rotary

    cases = _rotation_cases(torch.bfloat16) + _rotation_cases(torch.float32)
    want = [rotary._rotate_half_torch(x, cos, sin) for _, x, cos, sin in cases]
    if torch.set_flush_denormal(True):  # where the CPU can flush subnormals
        try:
            assert all(rotary._rotate_half_compiled(x, cos, sin) is None for _, x, cos, sin in cases)
        finally:
            torch.set_flush_denormal(False)
    monkeypatch.setattr(compiled, "module", lambda: None)
    for (name, x, cos, sin), expected in zip(cases, want, strict=True):
        assert rotary._rotate_half_compiled(x, cos, sin) is None
        assert torch.equal(_bits(rotary._rotate_half(x, cos, sin)), _bits(expected)), name


# --- forms: complex freqs_cis and half-width cos/sin, as models write them ---------------------------------


@pytest.mark.parametrize("name", ["deepseek_v3", "llama31_8b", "gpt_neox"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64])
def test_the_complex_and_half_width_forms_are_the_exact_values_of_each_frequency(name, dtype):
    """form="complex": A·cos θ + i·A·sin θ, each part correctly rounded to float32 (float64 for float64 x)
    whatever x's dtype, one column per frequency (Llama 4, DeepSeek-V2); form="half_width": (cos, sin) of
    one column per frequency in x's dtype (GPT-OSS). Against the NumPy core (yarn's A ≠ 1 included)."""
    params = rope.config(CONFIGS[name])
    ids = torch.tensor([[0, 1, 7, 4095, 70000], [3, 2, 1, 0, 123456]])
    x = torch.zeros(1, 1, dtype=dtype)
    count = params.rotary_dim // 2
    freqs_cis = ptorch.RotaryEmbedding(params, form="complex")(x, ids)
    assert freqs_cis.dtype == (torch.complex128 if dtype == torch.float64 else torch.complex64)
    assert tuple(freqs_cis.shape) == (2, 5, count)
    part = "float64" if dtype == torch.float64 else "float32"
    want_cos, want_sin = rope.cos_sin(ids.numpy(), params, dtype=part)
    np.testing.assert_array_equal(freqs_cis.real.numpy(), want_cos[..., :count])
    np.testing.assert_array_equal(freqs_cis.imag.numpy(), want_sin[..., :count])
    cos, sin = ptorch.RotaryEmbedding(params, form="half_width")(x, ids)
    full_cos, full_sin = ptorch.RotaryEmbedding(params)(x, ids)
    assert cos.dtype == sin.dtype == dtype and tuple(cos.shape) == (2, 5, count) and cos.is_contiguous()
    assert torch.equal(cos, full_cos[..., :count]) and torch.equal(sin, full_sin[..., :count])
    assert torch.equal(full_cos[..., :count], full_cos[..., count:])  # the half layout repeats them


def test_a_form_is_checked_and_takes_no_layout():
    params = rope.config(CONFIGS["llama2"])
    with pytest.raises(ValueError, match=r"form must be one of 'full', 'half_width', 'complex'; got 'polar'"):
        ptorch.RotaryEmbedding(params, form="polar")
    with pytest.raises(ValueError, match=r"layout='interleaved' applies to form='full' alone"):
        ptorch.RotaryEmbedding(params, form="complex", layout="interleaved")
    assert "form='complex'" in repr(ptorch.RotaryEmbedding(params, form="complex"))


def test_the_complex_form_matches_transformers_llama4_within_its_float32_error():
    """transformers' Llama 4 text rotary (``torch.polar`` of float32 angles) and posenc's complex form:
    the same shape and dtype, within float32 code's error at these positions."""
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding

    config = Llama4TextConfig(hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=1)
    theirs = Llama4TextRotaryEmbedding(config)
    ours = ptorch.RotaryEmbedding(config, form="complex")
    ids = torch.arange(0, 4096, 37)[None]
    a, b = theirs(torch.zeros(1), ids), ours(torch.zeros(1), ids)
    assert a.shape == b.shape and a.dtype == b.dtype == torch.complex64
    assert float((a - b).abs().max()) < 4096 * 2.0**-22


@pytest.mark.parametrize(
    ("dtype", "top", "switch"),
    [
        (torch.int16, 32767, 4096),
        (torch.int32, 2**31 - 1, 16),
        (torch.float16, 4096, 4096),
        (torch.bfloat16, 256, 256),
        (torch.int32, 2**24 + 3, 2**24 + 4),  # float32 rounds 2**24 + 3 up to the switch
        (torch.float32, 2**24 + 2, 2**24 + 3),
    ],
)
def test_longrope_picks_its_set_by_the_exact_max_plus_one_whatever_the_positions_type(
    dtype, top, switch, monkeypatch
):
    """Where both sets are computed and one picked on the device, max(positions) + 1 > switch was formed in
    the positions' own type: 32767 + 1 wrapped in int16 and 4096 + 1 rounded to 4096 in float16, picking
    the short factors past the switch, silently. Now compared as max >= switch in int64 or float64, the
    set an eager call reads: the same bits."""
    from posenc.torch import operator

    monkeypatch.setattr(operator, "CPU_CORE", False)  # the CPU made to run the devices' path
    torch._dynamo.reset()  # each case compiles the module's forward again: not toward dynamo's limit
    module = ptorch.RotaryEmbedding(longrope_config(switch))
    positions, x = torch.tensor([[0, top]], dtype=dtype), torch.zeros(1, 2, 8)
    want = module(x, positions)
    got = torch.compile(module, fullgraph=True)(x, positions)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch.equal(want[0], module(x, positions, seq_len=int(top) + 1)[0])
