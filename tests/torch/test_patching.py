"""``posenc.torch.patch`` / ``unpatch`` on whole models built from configs with random weights (no downloads):
every positional component found and made exact, the model's outputs within its own float32 error, greedy
decoding with a KV cache unchanged, the state dict unchanged, unpatch restoring the originals."""

from __future__ import annotations

import copy
import io
import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

import posenc
import posenc.rope as rope
import posenc.torch as pt
from posenc.torch import patching
from tests.support.timm_sincos import pos_embed_sincos
from tests.support.tutorial import TutorialPositionalEncoding

transformers = pytest.importorskip("transformers")

SMALL = dict(
    vocab_size=101,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
SEQ2SEQ = dict(
    vocab_size=101,
    d_model=64,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)
T = transformers
#: name: (build the model, the rope type of its rotary module or None, the paths of its sinusoidal tables)
DECODERS = {
    "llama3.1": (
        lambda: T.LlamaForCausalLM(
            T.LlamaConfig(
                **SMALL,
                max_position_embeddings=4096,
                rope_theta=500000.0,
                rope_scaling={
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 512,
                    "rope_type": "llama3",
                },
            )
        ),
        "llama3",
    ),
    "mistral": (
        lambda: T.MistralForCausalLM(T.MistralConfig(**SMALL, max_position_embeddings=4096)),
        "default",
    ),
    "qwen2 (yarn)": (
        lambda: T.Qwen2ForCausalLM(
            T.Qwen2Config(
                **SMALL,
                max_position_embeddings=4096,
                rope_scaling={"factor": 4.0, "original_max_position_embeddings": 1024, "type": "yarn"},
            )
        ),
        "yarn",
    ),
    "phi-3 (longrope)": (
        lambda: T.Phi3ForCausalLM(
            T.Phi3Config(
                **SMALL,
                pad_token_id=0,
                bos_token_id=1,
                eos_token_id=1,
                max_position_embeddings=4096,
                original_max_position_embeddings=1024,
                rope_scaling={
                    "type": "longrope",
                    "short_factor": [1.0 + 0.1 * i for i in range(8)],
                    "long_factor": [1.0 + 0.5 * i for i in range(8)],
                },
            )
        ),
        "longrope",
    ),
    "gemma 3 (per layer)": (
        lambda: T.Gemma3ForCausalLM(
            T.Gemma3TextConfig(
                **SMALL,
                head_dim=16,
                max_position_embeddings=4096,
                sliding_window=64,
                layer_types=["sliding_attention", "full_attention"],
            )
        ),
        "default",
    ),
    "gpt-neox (partial rotary)": (
        lambda: T.GPTNeoXForCausalLM(
            T.GPTNeoXConfig(
                vocab_size=101,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                rotary_pct=0.25,
                max_position_embeddings=2048,
            )
        ),
        "default",
    ),
    "deepseek-v3 (yarn, interleaved)": (
        lambda: T.DeepseekV3ForCausalLM(
            T.DeepseekV3Config(
                vocab_size=101,
                hidden_size=64,
                intermediate_size=128,
                moe_intermediate_size=32,
                num_hidden_layers=1,
                num_attention_heads=4,
                num_key_value_heads=4,
                q_lora_rank=None,
                kv_lora_rank=16,
                qk_rope_head_dim=16,
                qk_nope_head_dim=16,
                v_head_dim=16,
                n_routed_experts=4,
                num_experts_per_tok=2,
                n_group=1,
                topk_group=1,
                first_k_dense_replace=1,
                max_position_embeddings=4096,
                rope_interleave=True,
                rope_scaling={
                    "type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 1024,
                    "mscale": 1.0,
                    "mscale_all_dim": 0.707,
                    "beta_fast": 32,
                    "beta_slow": 1,
                },
            )
        ),
        "yarn",
    ),
    "qwen2-vl (m-rope)": (
        lambda: T.Qwen2VLForConditionalGeneration(
            T.Qwen2VLConfig(
                text_config=dict(
                    **SMALL,
                    max_position_embeddings=4096,
                    rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                ),
                vision_config=dict(depth=1, embed_dim=32, num_heads=2, hidden_size=64),
            )
        ),
        "default",
    ),
}
#: name: (build, the sinusoidal tables' paths and the preset each holds, the model's input)
SINUSOIDAL = {
    "m2m100": (
        lambda: T.M2M100ForConditionalGeneration(T.M2M100Config(**SEQ2SEQ, max_position_embeddings=1024)),
        {
            "model.encoder.embed_positions.weights": "fairseq",
            "model.decoder.embed_positions.weights": "fairseq",
        },
    ),
    "speech2text": (
        lambda: T.Speech2TextForConditionalGeneration(
            T.Speech2TextConfig(
                **SEQ2SEQ,
                max_source_positions=256,
                max_target_positions=256,
                input_feat_per_channel=16,
                conv_channels=32,
            )
        ),
        {
            "model.encoder.embed_positions.weights": "fairseq",
            "model.decoder.embed_positions.weights": "fairseq",
        },
    ),
    "xglm": (
        lambda: T.XGLMForCausalLM(
            T.XGLMConfig(
                vocab_size=101, d_model=64, num_layers=1, attention_heads=4, ffn_dim=64, pad_token_id=1
            )
        ),
        {"model.embed_positions.weights": "fairseq"},
    ),
    "whisper": (
        lambda: T.WhisperForConditionalGeneration(
            T.WhisperConfig(**SEQ2SEQ, num_mel_bins=16, max_source_positions=64, max_target_positions=64)
        ),
        {"model.encoder.embed_positions.weight": "whisper"},
    ),
}


def _ids(n: int = 40, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, 101, (2, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_is_made_exact_and_keeps_its_outputs(name: str) -> None:
    make, rope_type = DECODERS[name]
    torch.manual_seed(0)
    model = make().eval()
    reference = copy.deepcopy(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    report = pt.patch(model)
    text = [c for c in report.replaced if c.variant != "rope-axial"]
    assert [c.kind for c in text] == ["rotary"] and not report.skipped, report.as_text()
    if name.startswith("qwen2-vl"):  # its vision tower's rotary ("axial") is made exact too
        (vision,) = [c for c in report.replaced if c.variant == "rope-axial"]
        assert vision.path == "model.visual.rotary_pos_emb" and vision.difference <= vision.tolerance
        assert isinstance(model.get_submodule(vision.path), pt.axial.AxialRope)
    found = text[0]
    assert found.variant == f"rope-{rope_type}" and found.difference <= found.tolerance
    exact = model.get_submodule(found.path)
    assert isinstance(exact, pt.RotaryEmbedding)
    # every positional value is posenc's: the module's cos/sin are the exact ones of its config
    ids = torch.arange(3000)[None]
    params = exact.params or exact.layer_params[next(iter(exact.layer_params))]
    grid = ids.expand(3, -1, -1) if params.mrope_section else ids  # M-RoPE: one id per axis, text: all equal
    want = rope.cos_sin(grid.numpy(), params, dtype="float32")
    got = (
        exact(torch.zeros(1), ids)
        if exact.params
        else exact(torch.zeros(1), ids, next(iter(exact.layer_params)))
    )
    assert np.array_equal(got[0].numpy(), want[0]) and np.array_equal(got[1].numpy(), want[1])
    # the model's outputs: within its own float32 error of the unpatched model's
    tokens = _ids()
    with torch.no_grad():
        before, after = reference(tokens).logits, model(tokens).logits
    torch.testing.assert_close(after, before, atol=1e-4, rtol=0)
    # greedy decoding with a KV cache: the same 16 tokens
    settings = dict(max_new_tokens=16, do_sample=False, use_cache=True, pad_token_id=0)
    assert torch.equal(
        model.generate(tokens[:1, :8], **settings), reference.generate(tokens[:1, :8], **settings)
    )
    # the state dict keeps its keys and values; unpatch restores the module itself
    assert set(model.state_dict()) == set(state)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    original = found.path
    assert pt.unpatch(model) == len(report.replaced)
    assert not isinstance(model.get_submodule(original), pt.RotaryEmbedding)
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, before)


@pytest.mark.parametrize("name", DECODERS)
def test_fused_gives_every_attention_module_the_exact_apply(name: str) -> None:
    make, _ = DECODERS[name]
    torch.manual_seed(0)
    model = make().eval()
    unfused = copy.deepcopy(model)
    pt.patch(unfused, fused=False)
    report = pt.patch(model, fused=True)
    apply = report.components[-1]
    assert apply.kind == "rotary-apply" and apply.path.rsplit(".", 1)[-1] in ("self_attn", "attention")
    tokens = _ids()
    settings = dict(max_new_tokens=16, do_sample=False, use_cache=True, pad_token_id=0)
    if name.startswith("deepseek"):  # its attention rotates by apply_rotary_pos_emb_interleave: left to it
        assert not apply.replaced and "apply_rotary_pos_emb_interleave" in apply.reason
        assert not any("forward" in m.__dict__ for m in model.modules())
        return
    assert apply.replaced and apply.difference == 0, report.as_text()
    fused = [m for m in model.modules() if "forward" in m.__dict__]
    assert len(fused) == 2 and all(isinstance(m.forward, patching._ExactApplyForward) for m in fused)
    # float32: posenc's apply is their arithmetic on the same exact cos/sin, so the same logits and tokens
    with torch.no_grad():
        logits = model(tokens).logits
        assert torch.equal(logits, unfused(tokens).logits)
    assert torch.equal(
        model.generate(tokens[:1, :8], **settings), unfused.generate(tokens[:1, :8], **settings)
    )
    # the library's function is untouched; the model copies and pickles whole; state dict as before
    library = sys.modules[type(fused[0]).__module__]
    assert library.apply_rotary_pos_emb is not patching._exact_apply_rotary_pos_emb
    buffer = io.BytesIO()
    torch.save(model, buffer)
    for twin in (copy.deepcopy(model), torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)):
        assert all(m.forward.module is m for m in twin.modules() if "forward" in m.__dict__)
        with torch.no_grad():
            assert torch.equal(twin(tokens).logits, logits)
    assert set(model.state_dict()) == set(unfused.state_dict())
    patched = 3 if name.startswith("qwen2-vl") else 2  # its vision tower's axial rotary too
    assert pt.unpatch(model) == patched and not any("forward" in m.__dict__ for m in model.modules())


def test_fused_in_bfloat16_rotates_once_from_float32_and_can_be_undone() -> None:
    make, _ = DECODERS["llama3.1"]
    torch.manual_seed(0)
    model = make().eval()
    reference = copy.deepcopy(model)
    model.to(torch.bfloat16)
    assert pt.patch(model).components[-1].kind == "rotary"  # fused=None: off the GPU, the model's own apply
    report = pt.patch(model, fused=True)
    assert report.components[-1].replaced and len(report.components) == 2
    assert len(pt.patch(model, fused=True).components) == 2  # idempotent
    rotary, attention = model.model.rotary_emb, model.model.layers[0].self_attn
    ids = torch.arange(300)[None]
    cos, sin = rotary(torch.zeros(1, dtype=torch.bfloat16), ids)
    assert cos.dtype == sin.dtype == torch.float32  # the apply rounds once, from these
    q = torch.randn(1, 4, 300, 16, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    k = q[:, :2] * 3
    apply = attention.forward.function.__globals__["apply_rotary_pos_emb"]
    got = apply(q, k, cos, sin)
    want = pt.apply_rotary(q, k, *pt.rotary.cos_sin(ids, rotary.params, dtype=torch.float32))
    theirs = sys.modules[type(attention).__module__].apply_rotary_pos_emb(
        q, k, cos.bfloat16(), sin.bfloat16()
    )
    for a, b, c in zip(got, want, theirs, strict=True):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
        assert not torch.equal(a, c)  # bfloat16 cos/sin and three roundings: other values
    tokens = _ids()
    with torch.no_grad():
        torch.testing.assert_close(model(tokens).logits.float(), reference(tokens).logits, atol=0.05, rtol=0)
    assert pt.patch(model, fused=False).components[-1].kind == "rotary"  # fused off again
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert rotary(torch.zeros(1, dtype=torch.bfloat16), ids)[0].dtype == torch.bfloat16
    with pytest.raises(TypeError, match="fused must be True, False or None"):
        pt.patch(model, fused="yes")


@pytest.mark.parametrize("name", SINUSOIDAL)
def test_sinusoidal_tables_are_overwritten_with_the_exact_rows(name: str) -> None:
    make, tables = SINUSOIDAL[name]
    torch.manual_seed(0)
    model = make().eval()
    originals = {
        path: model.get_parameter(path) if path.endswith("weight") else model.get_buffer(path)
        for path in tables
    }
    saved = {path: t.detach().clone() for path, t in originals.items()}
    report = pt.patch(model)
    assert {c.path for c in report.replaced} == set(tables), report.as_text()
    for path, preset in tables.items():
        tensor = originals[path]
        rows, width = tensor.shape
        padding = 1 if preset == "fairseq" else None
        want = posenc.presets.get(preset, **({"padding_idx": padding} if padding is not None else {}))
        assert np.array_equal(tensor.detach().numpy(), want.table(rows, width, dtype="float32")), path
        assert tensor is (model.get_parameter(path) if path.endswith("weight") else model.get_buffer(path))
        assert 0 < float((saved[path] - tensor).abs().max()) < 1e-7 * rows  # its float32 formula's error
    again = pt.patch(model)  # idempotent: the tables are exact now
    assert all(c.reason == "already exact" and c.replaced for c in again.components if c.path in tables)
    assert pt.unpatch(model) == len(tables)
    assert all(torch.equal(originals[p].detach(), saved[p]) for p in tables)


def test_learned_tables_and_unknown_modules_are_left_alone_with_the_reason() -> None:
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=101, n_embd=64, n_layer=1, n_head=4, n_positions=128))
    report = pt.patch(model)
    assert not report.replaced and [c.path for c in report.skipped] == ["transformer.wpe.weight"]
    learned = report.skipped[0]
    assert learned.variant == "learned" and learned.reason.startswith("learned weights: "), learned.reason
    assert "not judged" in learned.reason and "left alone" in report.as_text()
    assert not posenc.audit(model).passed and posenc.audit(model).summary().startswith("NOT JUDGED")
    computed = nn.Sequential(nn.Module())  # the same values in a buffer (EVA's rotary grid): not "learned"
    computed[0].register_buffer("pos_embed", model.transformer.wpe.weight.detach().clone())
    (unknown,) = pt.patch(computed).skipped
    assert unknown.variant == "unknown" and unknown.reason.startswith("not a formula posenc knows (a buffer")
    (judged,) = posenc.audit(computed, samples=32).components
    assert not judged.judged and judged.note.startswith("not a formula posenc knows")

    class Custom(nn.Module):  # an inv_freq but no config to prove it from
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("inv_freq", torch.ones(4))

    report = pt.patch(nn.Sequential(Custom()))
    (left,) = report.skipped
    assert left.reason.startswith("no config to build it from") and left.path == "0"
    assert "its forward(input) with an inv_freq is neither" in left.reason

    class Angles(nn.Module):  # Stable Audio 3's and SAME's: forward(seq_len, device) -> the angles [θ, θ]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("inv_freq", 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8))

        def forward(self, seq_len: int, device: torch.device) -> torch.Tensor:
            angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), self.inv_freq)
            return torch.cat((angles, angles), dim=-1)

    model = nn.Sequential(Angles())
    (left,) = pt.patch(model).skipped
    assert left.reason.startswith("its forward(seq_len, device) returns the angles p·θ_i (one tensor)")
    assert "posenc's rotary gives exact cos and sin, not angles" in left.reason
    assert "returns the angles p·θ_i" in " ".join(posenc.audit(model).as_text().split())  # its fix says why
    (left,) = pt.patch(nn.Sequential(Angles()).to("meta")).skipped  # no values to show it: the generic reason
    assert left.reason.startswith("no config to build it from")

    class CachedAngles(Angles):  # CLVP's: forward(hidden_states) -> (1, n, 2F) angles, cached per length
        def __init__(self) -> None:
            super().__init__()
            self.cached_length, self.cached = None, None

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            if hidden_states.shape[1] != self.cached_length:
                self.cached_length = hidden_states.shape[1]
                self.cached = super().forward(hidden_states.shape[1], hidden_states.device)[None]
            return self.cached

    model = nn.Sequential(CachedAngles())
    (left,) = pt.patch(model).skipped
    assert left.reason.startswith("its forward(hidden_states) returns the angles p·θ_i (one tensor)")
    assert model[0].cached_length is None and model[0].cached is None  # the probe left its cache as it was


def test_the_tutorial_model_and_a_cast_model() -> None:
    class TransformerModel(nn.Module):  # the PyTorch tutorial's model: embedding, pos_encoder, encoder
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(101, 64)
            self.pos_encoder = TutorialPositionalEncoding(64, max_len=5000)
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
            self.transformer_encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.linear = nn.Linear(64, 101)

        def forward(self, src: torch.Tensor) -> torch.Tensor:
            return self.linear(self.transformer_encoder(self.pos_encoder(self.embedding(src) * 8.0)))

    torch.manual_seed(0)
    model = TransformerModel().eval()
    reference = copy.deepcopy(model)
    report = pt.patch(model)
    assert [c.path for c in report.replaced] == ["pos_encoder.pe"]
    assert torch.equal(model.pos_encoder.pe[0], pt.table(5000, 64))
    tokens = _ids(100)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), reference(tokens), atol=1e-4, rtol=0)
    buffer = io.BytesIO()  # saves and loads into an unpatched model: the same keys
    torch.save(model.state_dict(), buffer)
    reference.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))
    # after model.to(bfloat16): the table is proven within bfloat16's rounding and made exact in bfloat16
    cast = TransformerModel().to(torch.bfloat16)
    report = pt.patch(cast)
    assert report.replaced and cast.pos_encoder.pe.dtype == torch.bfloat16
    assert torch.equal(cast.pos_encoder.pe[0], pt.table(5000, 64, dtype=torch.bfloat16))


def test_patching_before_and_after_a_cast_and_on_meta() -> None:
    make, _ = DECODERS["mistral"]
    model = make().to(torch.bfloat16)  # the rotary's inv_freq is now bfloat16: proven at that precision
    report = pt.patch(model)
    assert report.replaced and report.replaced[0].difference > 1e-3
    assert report.replaced[0].difference <= report.replaced[0].tolerance
    with torch.device("meta"):
        meta = make()
    report = pt.patch(meta)
    assert (
        report.replaced and "meta" in report.replaced[0].reason and math.isnan(report.replaced[0].difference)
    )
    assert isinstance(meta.model.rotary_emb, pt.RotaryEmbedding)
    assert meta.model.rotary_emb.inv_freq.device.type == "meta"
    patched = make()
    pt.patch(patched)
    patched.to(torch.bfloat16)  # a cast after the patch keeps posenc's module
    with torch.no_grad():
        cos, _ = patched.model.rotary_emb(torch.zeros(1, dtype=torch.bfloat16), torch.arange(70000)[None])
    assert cos.dtype == torch.bfloat16
    assert np.array_equal(
        cos.float().numpy(),
        rope.cos_sin(np.arange(70000)[None], patched.model.rotary_emb.params, dtype="bfloat16")[0].astype(
            np.float32
        ),
    )


def test_patch_is_idempotent_and_touches_no_other_model() -> None:
    make, _ = DECODERS["llama3.1"]
    model, other = make(), make()
    first = pt.patch(model)
    second = pt.patch(model)
    assert second.replaced[0].reason == "already posenc's (patched)"
    assert model.model.rotary_emb is model.get_submodule(first.replaced[0].path)
    assert not isinstance(other.model.rotary_emb, pt.RotaryEmbedding)  # nothing leaked
    assert pt.unpatch(model) == 1 and type(model.model.rotary_emb) is type(other.model.rotary_emb)
    assert pt.unpatch(model) == 0
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        pt.patch("llama")


def test_tables_already_exact_are_left_as_they_are() -> None:
    marian = T.MarianMTModel(T.MarianConfig(**SEQ2SEQ, max_position_embeddings=512))
    distilbert = T.DistilBertModel(
        T.DistilBertConfig(
            vocab_size=101, dim=64, n_layers=1, n_heads=4, hidden_dim=128, sinusoidal_pos_embds=True
        )
    )
    xlm = T.XLMModel(
        T.XLMConfig(vocab_size=101, emb_dim=64, n_layers=1, n_heads=4, sinusoidal_embeddings=True)
    )
    for model, count in ((marian, 2), (distilbert, 1), (xlm, 1)):
        report = pt.patch(model)  # their float64 NumPy tables, rounded once, are posenc's already
        assert len(report.components) == count and not report.replaced
        assert all(c.reason == "already exact" and c.difference == 0 for c in report.components)
        assert pt.unpatch(model) == 0


def test_diffusers_timesteps_and_a_dit_grid() -> None:
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    ).eval()
    reference = copy.deepcopy(unet)
    report = pt.patch(unet)
    assert [(c.path, c.kind) for c in report.replaced] == [("time_proj", "timesteps")]
    assert isinstance(unet.time_proj, pt.Timesteps)
    t = torch.tensor([0.0, 17.0, 999.0])
    assert torch.equal(unet.time_proj(t), pt.Timesteps(32, True, 0.0)(t))
    sample = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(unet(sample, t).sample, reference(sample, t).sample, atol=1e-4, rtol=0)
    dit = diffusers.DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, num_layers=1, sample_size=8, patch_size=2
    )
    report = pt.patch(dit)
    grid = next(c for c in report.components if c.kind == "table")
    assert grid.path == "pos_embed.pos_embed" and grid.variant == "mae-2d" and grid.reason == "already exact"
    assert [c.kind for c in report.replaced] == ["timesteps"]
    assert pt.unpatch(unet) == 1 and type(unet.time_proj).__module__.startswith("diffusers")


def test_a_timesteps_that_scales_its_timesteps_is_proven_at_the_fractions_it_is_fed() -> None:
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    model = nn.Sequential()
    model.add_module("time_proj", embeddings.Timesteps(256, True, 0, scale=1000))  # Qwen-Image's
    before = posenc.audit(model, samples=64)
    (judged,) = before.components  # against its own options (scale 1000), at t = 0 .. 999: inexact there
    assert judged.judged and not judged.passed and judged.report.variant.options["scale"] == 1000
    (replaced,) = pt.patch(model).replaced
    assert "t / 1000" in replaced.reason and replaced.difference <= replaced.tolerance < 1e-3
    t = torch.tensor([0.0, 0.25, 1.0])
    assert torch.equal(model.time_proj(t), pt.Timesteps(256, True, 0.0, scale=1000)(t))
    assert posenc.audit(model, samples=64).passed


def test_a_cogvideox_joint_table_gets_an_exact_3d_grid_after_its_text_places() -> None:
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    patch_embed = embeddings.CogVideoXPatchEmbed(
        patch_size=2,
        in_channels=4,
        embed_dim=64,
        text_embed_dim=32,
        sample_width=16,
        sample_height=16,
        sample_frames=9,
        temporal_compression_ratio=4,
        max_text_seq_length=8,
        use_positional_embeddings=True,
    )
    theirs = patch_embed.pos_embedding.clone()  # (1, 8 text places (zeros) + 3 frames x 8 x 8 patches, 64)
    assert theirs.dtype == torch.float64  # diffusers' float64 formula: not always correctly rounded
    report = pt.patch(patch_embed)
    (table,) = report.replaced
    assert table.variant == "diffusers-3d" and "first 8 rows" in table.reason, report.as_text()
    got = patch_embed.pos_embedding[0]
    assert torch.equal(got[:8], torch.zeros(8, 64))
    want = posenc.grids.diffusers_3d(64, 8, 3, spatial_interpolation_scale=1.875, dtype="float64")
    assert np.array_equal(got[8:].numpy(), want.reshape(-1, 64))
    assert 0 < float((theirs[0, 8:] - got[8:]).abs().max()) < 1e-15
    assert pt.unpatch(patch_embed) == 1 and torch.equal(patch_embed.pos_embedding, theirs)


@pytest.mark.parametrize(
    "shape, dim, options",
    [
        ((14, 14), 768, {}),  # a ViT-B/16 at 224
        ((8, 12), 64, {"interleave_sin_cos": True}),
        ((8, 12), 64, {"reverse_coord": True}),
    ],
)
def test_a_timm_sincos_grid_is_found_and_made_exact(shape, dim, options) -> None:
    timm = pos_embed_sincos()  # timm's own code (tests/support/timm_sincos.py)
    theirs = timm.build_sincos2d_pos_embed(list(shape), dim=dim, **options)

    class ViT(nn.Module):  # a fixed grid as a buffer, as a sin-cos ViT holds it: (1, tokens, dim)
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("pos_embed", theirs[None].clone())

    model = ViT()
    report = pt.patch(model)
    (grid,) = report.replaced
    assert grid.path == "pos_embed" and grid.variant == "timm-2d", report.as_text()
    want = posenc.grids.timm_2d(shape, dim, **options)
    assert np.array_equal(model.pos_embed[0].numpy(), want)
    assert 0 < grid.difference == float((theirs.double() - torch.from_numpy(want).double()).abs().max())
    assert pt.unpatch(model) == 1 and torch.equal(model.pos_embed[0], theirs)


@pytest.mark.parametrize("name", DECODERS)
def test_every_patched_decoder_compiles_without_a_graph_break(name: str) -> None:
    make, _ = DECODERS[name]
    torch.manual_seed(0)
    model = make().eval()  # unpatched, each of them compiles without a graph break too (transformers 5.23)
    pt.patch(model, fused=True)  # the rotary and its apply (DeepSeek-V3: the rotary; its MLA keeps its apply)
    tokens = _ids()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with torch.no_grad():  # dynamo's graphs run as eager ops: the eager logits, bit for bit
        assert torch.equal(torch.compile(model, backend="eager")(tokens).logits, model(tokens).logits)
    assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])


@pytest.mark.parametrize("fused", [False, True])
def test_a_patched_model_compiles_and_exports_with_a_dynamic_length(fused: bool) -> None:
    torch.manual_seed(0)
    model = DECODERS["llama3.1"][0]().eval()
    pt.patch(model, fused=fused)
    tokens = _ids(40)
    with torch.no_grad():
        eager = model(tokens).logits
        torch._dynamo.reset()
        compiled = torch.compile(model)(tokens).logits
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=0)
    seq = torch.export.Dim("seq", min=2, max=1024)
    program = torch.export.export(
        model, (tokens,), {"use_cache": False}, dynamic_shapes=({1: seq}, None), strict=False
    )
    assert [(int(r.lower), int(r.upper)) for r in program.range_constraints.values()] == [(2, 1024)]
    for length in (2, 5, 300):  # 2: the batch size
        ids = _ids(length, seed=length)
        with torch.no_grad():
            got, want = program.module()(ids, use_cache=False), model(ids).logits
        assert torch.equal(got.logits if hasattr(got, "logits") else got[0], want), length


@pytest.mark.parametrize("name", ["m2m100", "xglm"])
def test_a_patched_text_model_keeps_its_outputs_and_its_greedy_tokens(name: str) -> None:
    make, _ = SINUSOIDAL[name]
    torch.manual_seed(0)
    model = make().eval()
    reference = copy.deepcopy(model)
    pt.patch(model)
    tokens = _ids(24)
    inputs = {"input_ids": tokens}
    if name == "m2m100":  # an encoder-decoder: the decoder reads the first tokens
        inputs["decoder_input_ids"] = tokens[:, :6]
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, reference(**inputs).logits, atol=1e-4, rtol=0)
    settings = dict(max_new_tokens=16, do_sample=False, use_cache=True, pad_token_id=1)
    assert torch.equal(
        model.generate(tokens[:1, :8], **settings), reference.generate(tokens[:1, :8], **settings)
    )


def test_what_persists_a_saved_patched_model_is_loaded_unpatched_its_patched_rows_kept(tmp_path) -> None:
    """docs/models.md, "What persists": a patch is a runtime change; ``save_pretrained`` writes the state
    dict (unchanged by a rotary's patch, exact rows where a table's weight was patched in place) and
    ``from_pretrained`` builds the library's own modules again, so the patch is applied after each load."""
    make, _ = DECODERS["llama3.1"]
    torch.manual_seed(0)
    model = make().eval()
    pt.patch(model)
    model.save_pretrained(tmp_path / "llama")
    loaded = type(model).from_pretrained(tmp_path / "llama").eval()
    assert not isinstance(loaded.model.rotary_emb, pt.RotaryEmbedding)
    assert pt.patch(loaded).replaced and isinstance(loaded.model.rotary_emb, pt.RotaryEmbedding)
    # a table patched in place is a weight: the checkpoint holds posenc's rows
    torch.manual_seed(0)
    whisper = SINUSOIDAL["whisper"][0]()
    (_rows,) = [c for c in pt.patch(whisper).replaced if c.path == "model.encoder.embed_positions.weight"]
    whisper.save_pretrained(tmp_path / "whisper")
    again = type(whisper).from_pretrained(tmp_path / "whisper")
    table = again.model.encoder.embed_positions.weight
    assert torch.equal(table, whisper.model.encoder.embed_positions.weight)
    assert posenc.audit(table.detach(), samples=64).passed


def test_unpatch_gives_a_module_back_in_the_mode_the_model_set_meanwhile() -> None:
    make, _ = DECODERS["llama3.1"]
    model = make().eval()
    pt.patch(model)
    model.train()  # the replacement follows; the original, held apart, is given the same mode back
    assert pt.unpatch(model) == 1
    assert model.model.rotary_emb.training and all(m.training for m in model.modules())


@pytest.mark.parametrize("model_type", ["speech_to_text", "canary"])
def test_a_speech_model_counting_its_features_otherwise_is_proven_on_its_own_forward(model_type: str) -> None:
    """Speech2Text counts its features per channel (``input_feat_per_channel`` × ``input_channels``) and
    Canary names its bins in its encoder's config: posenc's probe gives each 64 frames of them, frames
    first, so each swap is proven on the model's own forward (was: "forward not run")."""
    from posenc.torch.probe import inputs_of
    from tests.support import zoo

    model = zoo.build(model_type)[0]
    inputs = inputs_of(model)
    assert not isinstance(inputs, str), inputs
    assert inputs["input_features"].shape[:2] == (1, 64)
    report = pt.patch(model)
    assert report.replaced and all(
        "the model's forward: outputs as before" in c.reason for c in report.replaced
    )
    pt.unpatch(model)


def test_timesfms_patch_is_proven_on_its_own_forecast() -> None:
    """TimesFM's main input is a series (``past_values``, with ``past_values_padding`` and ``freq``):
    posenc's probe gives it four patches of one, so its positional embedding's swap is proven on the
    model's own forward (was: "forward not run")."""
    from posenc.torch.probe import inputs_of
    from tests.support import zoo

    model = zoo.build("timesfm[use_positional_embedding=True]")[0]
    inputs = inputs_of(model)
    assert not isinstance(inputs, str), inputs
    assert inputs["past_values"].shape == inputs["past_values_padding"].shape == (1, 4 * 32)
    (replaced,) = pt.patch(model).replaced
    assert replaced.path == "position_emb" and "the model's forward: outputs as before" in replaced.reason
    assert pt.unpatch(model) == 1


#: model type -> what its probe inputs must be: (name, shape) pairs
PROBE_SHAPES = {
    "rt_detr": {"pixel_values": (1, 3, 64, 64)},  # the zoo's 16 queries: 84 anchors at 64 pixels
    # its classes and task prompt beside its image (the size its Swin's config names)
    "omdet-turbo": {
        "pixel_values": (1, 3, 640, 640),
        "classes_input_ids": (2, 8),
        "classes_attention_mask": (2, 8),
        "tasks_input_ids": (1, 8),
        "tasks_attention_mask": (1, 8),
        "classes_structure": (1,),
    },
    "grounding-dino": {"pixel_values": (1, 3, 64, 64), "input_ids": (1, 8)},  # a prompt beside its image
    "mimi": {"input_values": (1, 1, 16000)},  # a codec's audio channels
    "videomae": {"pixel_values": (1, 16, 3, 224, 224)},  # a clip of its num_frames
    "musicgen": {"input_ids": (4, 16)},  # a row of ids per codebook
    "kyutai_speech_to_text": {"input_ids": (1, 16, 33)},  # each step a text token and 32 codebooks' tokens
    # a vision tower in Qwen2-VL's convention: 4 x 4 patches of 3 channels x 2 frames x 14 x 14 pixels
    "qwen2_5_vl_vision": {"hidden_states": (16, 1176), "grid_thw": (1, 3)},
    "video_llama_3_vision": {"pixel_values": (16, 768), "grid_thw": (1, 3), "merge_sizes": (1,)},
    "muse_glimmer_vision": {"pixel_values": (16, 1176), "grid_thw": (1, 3)},  # its patch_temporal 2
    "kimi_k25_vision": {"pixel_values": (16, 3, 14, 14), "grid_thw": (1, 3)},  # MoonViT: patches as images
    # Gemma 4's: (2 x pooling kernel 3)² patches of 3 x 16 x 16 values, and their (x, y)
    "gemma4_vision": {"pixel_values": (1, 36, 768), "pixel_position_ids": (1, 36, 2)},
    # a series of its context (4) and largest lag (7), and the 4 values to predict, no time features
    "time_series_transformer": {
        "past_values": (1, 11),
        "past_time_features": (1, 11, 0),
        "past_observed_mask": (1, 11),
        "future_values": (1, 4),
        "future_time_features": (1, 4, 0),
    },
    # its decoder would start label_length (10) back, more than the context (4) holds: the encoder alone
    "autoformer": {"past_values": (1, 11), "past_time_features": (1, 11, 0), "past_observed_mask": (1, 11)},
    "wav2vec2-bert[position_embeddings_type=rotary]": {"input_features": (1, 64, 160)},  # projected frames
    "gemma3n_audio": {"audio_mel": (1, 64, 128), "audio_mel_mask": (1, 64)},
    # Qwen3-ASR's encoder: bins first, one whole chunk of 2 x n_window (50) frames, all of them speech
    "qwen3_asr_encoder": {"input_features": (1, 128, 100), "input_features_mask": (1, 100)},
    # Fun-ASR's encoder: its 80 bins stacked 7 frames deep (a low frame rate), frames first
    "fun_asr_nano_encoder": {"input_features": (1, 64, 560), "input_features_mask": (1, 64)},
    "mimi_decoder": {"latents": (1, 128, 8)},  # a codec decoder's latent frames
    "nemotron3_5_transcribe_audio": {"input_features": (1, 64, 128)},  # its asr_config names the bins
    # its forward requires a caption beside its clip: both drawn; two frames for its frame backbone
    "pe_video": {"input_ids": (1, 16), "pixel_values_videos": (1, 2, 3, 64, 64)},
    "pe_video_encoder": {"pixel_values_videos": (1, 2, 3, 64, 64)},  # its own config over a frame backbone
    "pe_audio_encoder": {"input_values": (1, 1, 16000)},  # one channel into its DAC
    "nemotron3_5_transcribe_word_timestamp": {"inputs_embeds": (1, 16, 160)},  # embeddings: its main input
    # a drafting model: its noise and its context, each as vectors of its width
    "muse_glimmer_assistant": {"noise_embeds": (1, 16, 256), "context_hidden_states": (1, 16, 256)},
    # Inkling 2's tower: 2 x 2 merged tokens of (20 x 2)² pixels, channels last, its grid in merged tokens
    "inkling2_vision": {"pixel_values": (4, 40, 40, 3), "image_grid_thw": (1, 3)},
    # Kosmos-2: its image's 64 latent embeddings take the places its mask marks, after <s> and <image>
    "kosmos-2": {
        "pixel_values": (1, 3, 224, 224),
        "input_ids": (1, 74),
        "image_embeds_position_mask": (1, 74),
    },
    # IDEFICS: one image beside the ids, every token attending to it
    "idefics": {
        "input_ids": (1, 16),
        "pixel_values": (1, 1, 3, 224, 224),
        "image_attention_mask": (1, 16, 1),
    },
    "dia": {"input_ids": (1, 16), "decoder_input_ids": (1, 8, 9)},  # its decoder: a code per channel a step
    # π0: a state, its action chunk's noise and a denoising step, after one camera's 256 image tokens
    "pi0": {
        "state": (1, 32),
        "noise": (1, 50, 32),
        "timestep": (1,),
        "input_ids": (1, 264),
        "pixel_values": (1, 1, 3, 224, 224),
        "pixel_attention_mask": (1, 1),
    },
    "glmasr_encoder": {"input_features": (1, 128, 64)},  # a convolution stem over its bins: bins first
    "voxtral_realtime_encoder": {"input_features": (1, 128, 64)},
    "gemma4_audio": {"input_features": (1, 64, 128)},  # its bins read from its subsampling channels
    # PE Audio-Video: its forward refuses a modality alone; a second of one channel and two frames
    "pe_audio_video_encoder": {"input_values": (1, 1, 16000), "pixel_values_videos": (1, 2, 3, 64, 64)},
    # XCodec2: a second of one channel, and its w2v-BERT's features of that second (50 frames of 160)
    "xcodec2": {"input_values": (1, 1, 16000), "input_features": (1, 50, 160)},
    # audio added to its tokens: 16 tokens × its 4-frame groups × its stem's stride 2, bins first
    "voxtral_realtime": {"input_ids": (1, 16), "input_features": (1, 128, 128)},
    "voxtral_realtime_text": {"input_ids": (1, 16), "t_cond": (1, 1, 256)},  # its parent's time condition
    "bros": {"input_ids": (1, 16), "bbox": (1, 16, 8)},  # each token's box: four corners' (x, y)
}


def test_a_tower_that_names_no_main_input_of_its_own_gets_the_image_its_forward_requires() -> None:
    """Granite Docling's vision tower keeps PreTrainedModel's main input, ``input_ids``, which its forward
    does not take; it requires ``pixel_values`` alone, so it gets a probe image (was: "no vocab_size")."""
    import transformers

    from posenc.torch.probe import inputs_of

    class Tower(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig

        def __init__(self, config):
            super().__init__(config)
            self.proj = nn.Linear(3, 4)

        def forward(self, pixel_values, **kwargs):
            return self.proj(pixel_values.mean((2, 3)))

    tower = Tower(transformers.PretrainedConfig(num_channels=3, image_size=32))
    assert tower.main_input_name == "input_ids"
    inputs = inputs_of(tower)
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {"pixel_values": (1, 3, 32, 32)}
    assert tower(**inputs).shape == (1, 4)


def test_a_neck_of_fixed_feature_sizes_gets_an_image_of_its_backbones_size() -> None:
    """SAM 2's vision config names no image size, and its neck reshapes to fixed ``backbone_feature_sizes``
    (256 × 256 for 1024 pixels): the probe image is its backbone's size, not a detector's 64 pixels (was:
    "forward not run: shape '[1, -1, 256, 256]' is invalid")."""
    import transformers

    from posenc.torch.probe import inputs_of

    class Neck(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig
        main_input_name = "pixel_values"

        def __init__(self, config):
            super().__init__(config)
            self.proj = nn.Linear(3, 4)

        def forward(self, pixel_values, **kwargs):
            return self.proj(pixel_values.mean((2, 3)))

    backbone = transformers.PretrainedConfig(num_channels=3, image_size=[96, 96])
    vision = transformers.PretrainedConfig(backbone_config=backbone, backbone_feature_sizes=[[24, 24]])
    inputs = inputs_of(Neck(transformers.PretrainedConfig(vision_config=vision)))
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {"pixel_values": (1, 3, 96, 96)}
    del vision.backbone_feature_sizes  # a detector's: any size, 64 pixels
    inputs = inputs_of(Neck(transformers.PretrainedConfig(vision_config=vision)))
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {"pixel_values": (1, 3, 64, 64)}


def test_a_model_without_a_forward_of_its_own_is_said_so() -> None:
    """A model that defines no forward and holds no part that has one: the probe says so, rather than "its
    forward raised TypeError on the probe inputs" (one with parts: the test below)."""
    import transformers

    from posenc.torch.probe import inputs_of, probe_of

    class Wrapper(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig

        def __init__(self, config):
            super().__init__(config)
            self.proj = nn.Linear(3, 4)

    model = Wrapper(transformers.PretrainedConfig(vocab_size=10))
    said = "Wrapper defines no forward of its own to run, and has no parts that do"
    assert inputs_of(model) == probe_of(model) == said


def test_a_model_of_two_main_inputs_gets_its_image_and_its_task() -> None:
    """OneFormer's main input is a list (``["pixel_values", "task_inputs"]``) and its forward requires both:
    the image, then its ``task_seq_len`` task token ids below its text encoder's vocabulary (was: "no probe
    inputs")."""
    import transformers

    from posenc.torch.probe import inputs_of

    class Segmenter(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig
        main_input_name = ("pixel_values", "task_inputs")  # a list in OneFormer

        def __init__(self, config):
            super().__init__(config)
            self.proj = nn.Linear(3, 4)

        def forward(self, pixel_values, task_inputs, **kwargs):
            return self.proj(pixel_values.mean((2, 3))) + task_inputs.float().mean()

    config = transformers.PretrainedConfig(
        num_channels=3, image_size=32, task_seq_len=7, text_encoder_vocab_size=50
    )
    inputs = inputs_of(Segmenter(config))
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {
        "pixel_values": (1, 3, 32, 32),
        "task_inputs": (1, 7),
    }
    assert inputs["task_inputs"].dtype == torch.int64 and int(inputs["task_inputs"].max()) < 50


def test_a_replaced_module_lends_the_methods_its_model_calls_besides_forward_and_the_report_names_them():
    """SAM 3's sine position embedding has ``encode_boxes`` beside its forward, called by its decoder: the
    patch replaced the sine, then the model's forward raised AttributeError. A patched module now lends
    the original's other methods (their code the original's, named in the report), and the forward runs."""
    from posenc.torch import computed

    class Sine(nn.Module):  # DETR's sine, computed in forward, and a method of its own
        def __init__(self):
            super().__init__()
            self.embedding_dim, self.temperature, self.normalize, self.scale = 8, 10000, False, 2 * math.pi

        def forward(self, pixel_values, pixel_mask):
            y_embed = pixel_mask.cumsum(1, dtype=torch.float32)
            x_embed = pixel_mask.cumsum(2, dtype=torch.float32)
            dim_t = torch.arange(self.embedding_dim, dtype=torch.int64).float()
            dim_t = self.temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.embedding_dim)
            pos_x = x_embed[:, :, :, None] / dim_t
            pos_y = y_embed[:, :, :, None] / dim_t
            pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
            pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
            return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)

        def encode_boxes(self, boxes):
            return (boxes[..., None] * self.scale / self.temperature).sin().flatten(-2)

        def set_temperature(self, temperature):  # a change posenc's module would not follow
            self.temperature = temperature

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.position_embedding = Sine()

        def forward(self, pixel_values):
            mask = torch.ones(pixel_values.shape[0], *pixel_values.shape[-2:])
            return self.position_embedding(pixel_values, mask), self.position_embedding.encode_boxes(mask)

    assert not isinstance(computed.read_detr_sine(Sine()), str)
    model, pixels = Model(), torch.rand(1, 3, 4, 5)
    before = model(pixels)
    report = pt.patch(model)
    (component,) = report.replaced
    assert "its encode_boxes, set_temperature (not its forward) still its own code" in component.reason
    assert type(model.position_embedding).__name__ == "_PatchedDetrSine"
    after = model(pixels)
    assert torch.equal(after[1], before[1])  # the original's method, on the original
    assert (after[0] - before[0]).abs().max() < 1e-6
    with pytest.raises(RuntimeError, match=r"Sine.set_temperature changed the module .*torch.unpatch"):
        model.position_embedding.set_temperature(100)  # loud, not a sine that no longer follows its module
    assert pt.unpatch(model) == 1 and type(model.position_embedding) is Sine


def test_a_model_with_no_forward_of_its_own_is_proven_on_the_forwards_of_its_parts() -> None:
    """Qwen2.5-Omni's kind: it generates through its parts (thinker, talker, token2wav), each a Hugging Face
    model with its own forward; every swap is proven on each part's forward, all or nothing, the report
    naming the parts (was: "forward not run: ... defines no forward of its own"); a part without probe
    inputs leaves the whole unrun, said with the part's name."""
    from posenc.torch.probe import agree, inputs_of, probe_of

    class Parts(T.PreTrainedModel):
        config_class = T.LlamaConfig

        def __init__(self, config: T.LlamaConfig) -> None:
            super().__init__(config)
            self.thinker = T.LlamaForCausalLM(config)
            self.talker = T.LlamaModel(config)

    torch.manual_seed(0)
    model = Parts(T.LlamaConfig(**SMALL)).eval()
    inputs = inputs_of(model)
    assert set(inputs) == {"thinker", "talker"}
    assert inputs["thinker"]["input_ids"].shape == (1, 16)
    outputs = probe_of(model)()
    assert outputs["thinker"].shape == (1, 16, 101) and outputs["talker"].shape == (1, 16, 64)
    report = pt.patch(model)
    assert len(report.replaced) == 2
    assert all("the forwards of its thinker, talker: outputs as before" in c.reason for c in report.replaced)
    moved = {**outputs, "talker": outputs["talker"] + 1}
    assert agree(outputs, moved).startswith("its talker's forward: the outputs moved by")
    assert pt.unpatch(model) == 2
    model.talker.main_input_name = "audio_codes"  # no probe inputs for one part: the whole is not run
    assert "no forward of its own, and its talker: its main input is 'audio_codes'" in inputs_of(model)


def test_a_forward_whose_outputs_are_never_finite_proves_nothing_and_says_so() -> None:
    """A model whose probe outputs are NaN everywhere (a broken head, random weights gone wrong): outputs
    with nothing finite to compare are no evidence — the report says "forward not compared", never
    "outputs as before" (was: compared on no value, they agreed); NaN in the same places elsewhere is left
    out of the comparison, but not finite anywhere is a difference."""
    from posenc.torch.probe import agree, blind

    torch.manual_seed(0)
    model = T.LlamaForCausalLM(T.LlamaConfig(**SMALL)).eval()
    with torch.no_grad():
        model.lm_head.weight.fill_(float("nan"))
    (replaced,) = pt.patch(model).replaced
    assert replaced.reason.endswith(
        "; forward not compared: its outputs on the probe inputs are not finite anywhere before any swap"
    )
    nan = torch.full((2, 3), float("nan"))
    assert agree(nan, nan) == "the outputs are not finite anywhere: nothing to compare"
    assert blind({"thinker": torch.ones(2), "talker": nan}).startswith("its talker's outputs")
    half = torch.tensor([float("nan"), 1.0])
    assert agree(half, half) is None and agree(half, torch.tensor([1.0, 1.0])) is not None


def test_qwen3_omni_is_proven_on_its_thinker_talker_and_speech_decoder() -> None:
    """Qwen3-Omni's parts each get their own inputs: its thinker token ids, its talker embeddings (it takes
    no ids), its code2wav a row of codes per quantizer; each of its rotaries and its audio tower's table is
    replaced and proven on those forwards."""
    from posenc.torch.probe import inputs_of
    from tests.support import zoo

    model = zoo.build("qwen3_omni_moe")[0]
    inputs = inputs_of(model)
    shapes = {
        part: {k: tuple(v.shape) for k, v in drawn.items() if torch.is_tensor(v)}
        for part, drawn in inputs.items()
    }
    config = model.config
    width = config.talker_config.text_config.hidden_size
    books = config.code2wav_config.num_quantizers
    assert shapes == {
        "thinker": {"input_ids": (1, 16)},
        "talker": {"inputs_embeds": (1, 16, width)},
        "code2wav": {"codes": (1, books, 8)},
    }
    report = pt.patch(model)
    assert len(report.replaced) == 6
    said = "the forwards of its thinker, talker, code2wav: outputs as before"
    assert all(said in c.reason for c in report.replaced), [c.reason[-400:] for c in report.replaced]
    assert pt.unpatch(model) == 6


def test_the_output_compared_is_the_first_tensor_or_the_first_tensor_of_the_first_tuple() -> None:
    """A ControlNet returns its blocks' residuals as tuples (no tensor at the top): the first block's is
    compared (was: "its forward returned ... without a tensor", so its forward was never run); a top-level
    tensor still comes first, and an output holding no tensor is refused."""
    from posenc.torch.probe import main_output

    first, later = torch.ones(2), torch.zeros(3)
    assert main_output((None, (first, later))).equal(first)
    assert main_output((None, (first,), later)).equal(later)
    with pytest.raises(TypeError, match="without a tensor to compare"):
        main_output((None, ()))


def test_a_detector_that_selects_its_queries_among_anchors_gets_an_image_holding_enough() -> None:
    """RT-DETR's kind: anchors of feature maps at strides 8, 16 and 32; 64 pixels hold 84 of them."""
    from types import SimpleNamespace

    from posenc.torch.probe import _detector_side

    assert _detector_side(SimpleNamespace(num_queries=16)) == 64
    assert _detector_side(SimpleNamespace(num_queries=300)) == 128  # 336 anchors at 128 pixels, 189 at 96
    assert _detector_side(SimpleNamespace(num_queries=900)) == 224
    assert _detector_side(SimpleNamespace()) == 64


@pytest.mark.parametrize("model_type", PROBE_SHAPES)
def test_models_of_every_input_kind_get_probe_inputs_their_forward_takes(model_type: str) -> None:
    """A detector that selects its queries among its feature maps' anchors gets an image holding enough of
    them, one prompted by text a prompt, a codec its audio channels, a video model a clip of its frames,
    MusicGen's decoder a row of ids per codebook, a vision tower flattened patches and their grid, a
    forecaster a series, a speech encoder its mel or projected frames and a codec decoder latents:
    each swap is proven on the model's own forward (was: "forward not run" or "no probe inputs")."""
    from posenc.torch.probe import inputs_of, probe_of
    from tests.support import zoo

    model = zoo.build(model_type)[0]
    inputs = inputs_of(model)
    assert not isinstance(inputs, str), inputs
    tensors = {name: tuple(v.shape) for name, v in inputs.items() if isinstance(v, torch.Tensor)}
    assert tensors == PROBE_SHAPES[model_type]
    assert probe_of(model)().isfinite().all()  # its forward runs on them
    report = pt.patch(model)  # VideoMAE's and the forecasters' tables are already exact: nothing to swap
    assert report.replaced or {c.reason for c in report.components} == {"already exact"}
    assert all("the model's forward: outputs as before" in c.reason for c in report.replaced)
    assert pt.unpatch(model) == len(report.replaced)


def test_a_model_whose_class_was_defined_where_there_is_no_file_is_patched_and_audited():
    # python -c, a REPL, a notebook cell: inspect finds no source file for a class of __main__ and raises
    # OSError (patch and audit raised it: "source code not available")
    import subprocess

    code = """
import torch, posenc, posenc.torch as pt
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
class Wrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary_emb = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4))
m = Wrapper()
print(len(pt.patch(m).replaced), posenc.audit(m, samples=64).passed)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["1", "True"], done.stderr[-2000:]
