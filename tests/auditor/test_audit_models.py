"""``posenc.audit(model)`` on a whole model: each positional component found and audited, a verdict per
component, the fix (``posenc.torch.patch(model)``) while one fails, and every one passing once patched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import posenc
import posenc.torch as pt
from posenc.auditor import ModelAudit
from tests.rope.test_rope_parameters import CONFIGS
from tests.support.tutorial import TutorialPositionalEncoding
from tests.torch.test_patching import DECODERS, SEQ2SEQ, SINUSOIDAL

S = 256


@pytest.mark.parametrize(("name", "paths"), [("llama3.1", 1), ("gemma 3 (per layer)", 2), ("m2m100", 2)])
def test_a_model_is_audited_component_by_component_then_passes_once_patched(name: str, paths: int) -> None:
    make = DECODERS[name][0] if name in DECODERS else SINUSOIDAL[name][0]
    torch.manual_seed(0)
    model = make().eval()
    before = posenc.audit(model, samples=S)
    assert isinstance(before, ModelAudit) and len(before.components) == paths
    assert not before.passed and before.fix == "posenc.torch.patch(model)"
    for c in before.components:
        assert c.report is not None and not c.report.passed
        assert "angles formed in float32" in [f.text.split(":")[0] for f in c.report.findings]
        assert c.verdict().startswith(f"{c.path}") and ": FAIL max error" in c.verdict()
    if name.startswith("gemma"):
        assert {c.layer_type for c in before.components} == {"sliding_attention", "full_attention"}
    text = before.as_text()
    assert text.startswith(f"posenc audit: {type(model).__name__} — {paths} positional component(s)")
    assert text.rstrip().endswith("fix: posenc.torch.patch(model)")
    pt.patch(model)
    after = posenc.audit(model, samples=S)
    assert after.passed and not after.fix and all(c.report.max_abs == 0 for c in after.components)
    assert json.loads(json.dumps(after.as_dict()))["passed"] is True


def test_a_module_that_is_one_component_keeps_its_own_report(tmp_path: Path) -> None:
    report = posenc.audit(TutorialPositionalEncoding(64), samples=S)  # its table is its own: not a model
    assert not isinstance(report, ModelAudit) and report.kind == "module"
    model = torch.nn.Sequential(TutorialPositionalEncoding(64))
    audited = posenc.audit(model, samples=S)
    assert isinstance(audited, ModelAudit) and [c.path for c in audited.components] == ["0.pe"]
    page = audited.to_html(tmp_path / "m.html").read_text()
    assert page.count("<svg") == 2 and "posenc.torch.patch(model)" in page
    with pytest.raises(ValueError, match="positions applies to one positional component, not a whole model"):
        posenc.audit(model, positions=100)


def test_a_model_directory_is_audited_from_its_config_without_its_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import transformers

    from posenc.auditor.models import from_directory
    from posenc.cli import main

    big = transformers.LlamaConfig(  # Llama 3.1 70B's shape: 70 billion parameters, none allocated
        vocab_size=128256,
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=CONFIGS["llama31_8b"]["rope_scaling"],
    )
    big.save_pretrained(tmp_path / "llama70b")
    model = from_directory(tmp_path / "llama70b")
    assert sum(p.numel() for p in model.parameters()) > 6.5e10 and all(p.is_meta for p in model.parameters())
    assert not model.rotary_emb.inv_freq.is_meta
    assert main(["audit", str(tmp_path / "llama70b"), "--samples", "256"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"posenc audit: {tmp_path / 'llama70b'} — 1 positional component(s)")
    assert "rotary_emb [rotary]: FAIL" in out and "fix: posenc.torch.patch(model)" in out
    # a table that is a weight (Whisper's encoder) is read from the folder's safetensors
    torch.manual_seed(0)
    whisper = SINUSOIDAL["whisper"][0]()
    whisper.save_pretrained(tmp_path / "whisper")
    audited = posenc.audit(str(tmp_path / "whisper"), samples=S)
    # built as the class the folder was saved from (its architectures: WhisperForConditionalGeneration)
    encoder = next(c for c in audited.components if c.path == "model.encoder.embed_positions.weight")
    assert encoder.report is not None and encoder.report.variant.name.startswith("tensor2tensor")
    # without its weights: what building it in Python gives — the encoder's sinusoid computed by its own
    # init (its encoder's, above the table), the decoder's learned table drawn (not judged), the caller's
    # random generator as it was
    (tmp_path / "whisper" / "model.safetensors").unlink()
    state = torch.random.get_rng_state()
    without = {c.path: c for c in posenc.audit(str(tmp_path / "whisper"), samples=S).components}
    assert torch.equal(state, torch.random.get_rng_state())
    built = {c.path: c for c in posenc.audit(SINUSOIDAL["whisper"][0](), samples=S).components}
    table = "model.encoder.embed_positions.weight"
    assert without[table].report.variant.name.startswith("tensor2tensor")
    assert without[table].verdict() == built[table].verdict()
    assert not without["model.decoder.embed_positions.weight"].judged
    assert without["model.decoder.embed_positions.weight"].note.startswith("learned weights")


def test_a_folders_positional_buffers_are_those_transformers_computes(tmp_path: Path) -> None:
    # built on meta, then computed by the model's own _init_weights: the same bits as an eager build
    import transformers
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    from posenc.auditor.models import from_directory

    llama = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=512,
        rope_theta=500000.0,
        rope_scaling=CONFIGS["llama31_8b"]["rope_scaling"],
    )
    llama.save_pretrained(tmp_path / "llama")
    built = from_directory(tmp_path / "llama")
    assert all(p.is_meta for p in built.parameters())
    assert torch.equal(built.rotary_emb.inv_freq, LlamaRotaryEmbedding(llama).inv_freq)
    m2m = transformers.M2M100Config(
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=128,
        max_position_embeddings=64,
        dtype="bfloat16",  # transformers builds it under that default dtype: its table is held in bfloat16
    )
    m2m.save_pretrained(tmp_path / "m2m")
    table = from_directory(tmp_path / "m2m").encoder.embed_positions.weights
    expected = M2M100SinusoidalPositionalEmbedding.get_embedding(64 + 2, 32, m2m.pad_token_id)
    assert table.dtype == torch.bfloat16 and torch.equal(table, expected.to(torch.bfloat16))
    assert torch.get_default_dtype() == torch.float32


def test_a_positional_parameter_is_read_from_the_folder_or_not_audited(tmp_path: Path) -> None:
    """FastSpeech2-Conformer makes ``pos_bias_u`` with ``torch.Tensor(...)``, outside the meta device: its
    values from the folder are the file's, and without the file its model's own initialisation's, as a
    build in Python gives them (never uninitialized memory's values): learned weights, not judged."""
    import transformers as T

    from posenc.auditor.models import from_directory

    config = T.FastSpeech2ConformerConfig(
        hidden_size=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_num_attention_heads=2,
        decoder_num_attention_heads=2,
        encoder_linear_units=16,
        decoder_linear_units=16,
        vocab_size=32,
    )
    torch.manual_seed(0)
    model = T.FastSpeech2ConformerModel(config)
    model.save_pretrained(tmp_path / "tts")
    stored = model.encoder.conformer_layers[0].self_attn.pos_bias_u
    read = from_directory(tmp_path / "tts").encoder.conformer_layers[0].self_attn.pos_bias_u
    assert torch.equal(read, stored)
    for file in (tmp_path / "tts").glob("*.safetensors"):
        file.unlink()
    initialised = from_directory(tmp_path / "tts").encoder.conformer_layers[0].self_attn.pos_bias_u
    assert not initialised.is_meta and bool(torch.isfinite(initialised).all())
    judged = {c.path: c for c in posenc.audit(tmp_path / "tts", samples=S).components}
    bias = judged["encoder.conformer_layers.0.self_attn.pos_bias_u"]
    assert not bias.judged and bias.note.startswith("learned weights"), bias.note


def _judgments(audit: ModelAudit) -> dict[str, bool | None]:
    return {f"{c.path}/{c.layer_type}": c.passed if c.judged else None for c in audit.components}


def test_a_folder_of_a_class_automodel_does_not_map_or_of_a_pad_id_its_embedding_holds(
    tmp_path: Path,
) -> None:
    """Emu3's text model (its model_type maps to no AutoModel class: the one its ``architectures`` names,
    transformers' own, is built), Voxtral Realtime's (AutoModel maps it to a class transformers does not
    export: its family's modeling module holds it), Marian's MT model (its tables, which its folder does not
    hold, computed by its own init), TrOCR's sinusoid (a plain attribute only its ``__init__`` computes:
    by its class's ``get_embedding``) and MusicGen's decoder (pad id = vocab_size: it embeds
    vocab_size + 1 ids): each folder gives the in-process judgments."""
    import transformers as T

    from tests.support import zoo

    emu3 = T.Emu3TextConfig(
        vocab_size=64,
        pad_token_id=0,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    musicgen = T.MusicgenDecoderConfig(
        vocab_size=64,
        pad_token_id=64,
        hidden_size=16,
        ffn_dim=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_codebooks=2,
        max_position_embeddings=64,
    )
    voxtral = zoo.build("voxtral_realtime_text")[0]
    assert not hasattr(T, type(voxtral).__name__)
    models = (
        ("emu3", T.Emu3ForCausalLM(emu3)),
        ("voxtral", voxtral),
        ("marian", T.MarianMTModel(zoo.build("marian")[1])),  # its save_pretrained leaves its tables out
        ("musicgen", T.MusicgenForCausalLM(musicgen)),
        ("trocr", zoo.build("trocr[use_learned_position_embeddings=False]")[0]),
    )
    for name, model in models:
        model.save_pretrained(tmp_path / name)
        read, built = posenc.audit(tmp_path / name, samples=32), posenc.audit(model, samples=32)
        # the folder's model may be its family's base model (Marian's): paths without the "model." prefix
        mine, theirs = (
            {k.removeprefix("model."): v for k, v in _judgments(a).items()} for a in (read, built)
        )
        assert mine == theirs and read.components, name


def test_a_folder_whose_model_reads_a_linspace_back_as_it_builds_is_audited(tmp_path: Path) -> None:
    """MaskFormer's Swin backbone reads its drop-path rates back from a ``torch.linspace`` (``.item()``) as
    it builds: that small linspace is computed on the cpu (every other tensor still on meta), so its folder
    gives the in-process judgments instead of "could not build"."""
    from posenc.auditor.models import MAX_CPU_LINSPACE, _OnMeta

    with _OnMeta.of(torch)(torch.bfloat16):
        rates = torch.linspace(0, 0.3, 4)
        large, weights = torch.linspace(0, 1, MAX_CPU_LINSPACE + 1), torch.zeros(4)
    assert [round(r.item(), 2) for r in rates] == [0.0, 0.1, 0.2, 0.3] and rates.dtype == torch.bfloat16
    assert large.is_meta and weights.is_meta

    from tests.support import zoo

    model = zoo.build("maskformer")[0]
    model.save_pretrained(tmp_path)
    read, built = posenc.audit(tmp_path, samples=32), posenc.audit(model, samples=32)
    assert _judgments(read) == _judgments(built) and read.components


def test_a_folder_is_built_as_the_class_it_was_saved_from(tmp_path: Path) -> None:
    """A ``SpeechT5ForSpeechToText`` folder holds a speech encoder pre-net and a text decoder pre-net, each
    with its positions, which AutoModel's ``SpeechT5Model`` does not build: the folder is built as the class
    its ``architectures`` names (transformers' own), so it gives the in-process judgments, paths included."""
    from tests.support import zoo

    model = zoo.build("speecht5")[0]
    assert type(model).__name__ == "SpeechT5ForSpeechToText"
    model.save_pretrained(tmp_path)
    read, built = posenc.audit(tmp_path, samples=32), posenc.audit(model, samples=32)
    assert _judgments(read) == _judgments(built)
    assert any(c.path.startswith("speecht5.encoder.prenet.") for c in read.components)


# --- honest judgments: learned tables are not judged; passed speaks of the judged components -------------

T = pytest.importorskip("transformers")


def test_a_learned_table_is_not_judged_and_never_called_a_broken_sinusoid() -> None:
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=101, n_embd=64, n_layer=1, n_head=4, n_positions=128))
    audit = posenc.audit(model, samples=S)
    (component,) = audit.components
    assert component.path == "transformer.wpe.weight" and not component.judged and component.report is None
    assert component.note.startswith("learned weights: ") and "not judged" in component.verdict()
    assert not audit.passed and audit.fix == "" and audit.summary().startswith("NOT JUDGED: none of its 1")
    assert audit.as_dict()["judged"] == 0 and audit.as_dict()["not_judged"] == 1
    assert "off by" not in audit.as_text() and "FAIL" not in audit.as_text()


def test_a_component_whose_report_judges_nothing_is_not_judged_and_never_failed(tmp_path: Path) -> None:
    """A table of base √2·10⁴: its base read from the rows pins no last bit (its report NOT JUDGED). Its
    model line said FAIL and the model failed; now it is not judged, in the text, the dict and the page,
    and the model passes on its judged component (the exact one beside it)."""

    class Holder(torch.nn.Module):
        def __init__(self, base: float) -> None:
            super().__init__()
            self.register_buffer("pe", torch.from_numpy(posenc.table(1024, 64, base=base)))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.odd, self.plain = Holder(2**0.5 * 1e4), Holder(1e4)

    audit = posenc.audit(Model(), samples=S)
    odd, plain = audit.components
    assert odd.report is not None and odd.report.verdict() == "NOT JUDGED" and not odd.judged
    assert odd.verdict().startswith("odd.pe [table]: NOT JUDGED max error") and "FAIL" not in odd.verdict()
    assert plain.judged and plain.passed
    assert audit.passed and audit.summary() == "PASS: 1 of 1 judged component(s) exact; 1 not judged"
    assert audit.fix == "" and "FAIL" not in audit.as_text()
    assert audit.as_dict()["not_judged"] == 1 and audit.as_dict()["components"][0]["judged"] is False
    page = audit.to_html(tmp_path / "audit.html").read_text()
    assert '<h2>odd.pe: <span class="fail">NOT JUDGED</span></h2>' in page and ">FAIL<" not in page


def test_a_normalized_sinusoid_is_called_a_scaled_sinusoid_not_learned_weights() -> None:
    """PatchTST's "sincos" table (its default) is the paper's sinusoid minus its mean, over ten times its
    deviation, held as a parameter without gradient: a sinusoid posenc does not make, not judged — and
    not learned weights, which GPT-2's table (the control) still is."""
    torch.manual_seed(0)
    model = T.PatchTSTModel(T.PatchTSTConfig(d_model=64, num_hidden_layers=1, context_length=64))
    (component,) = posenc.audit(model, samples=S).components
    assert component.path == "encoder.positional_encoder.position_enc" and not component.judged
    assert (
        component.note.startswith("a sinusoid scaled and shifted (paper × 0.1")
        and "learned" not in component.note
    )
    (patched,) = pt.patch(model).components
    assert patched.variant == "unknown" and not patched.replaced and patched.reason == component.note
    gpt2 = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=101, n_embd=64, n_layer=1, n_head=4, n_positions=128))
    (learned,) = posenc.audit(gpt2, samples=S).components
    assert learned.note.startswith("learned weights: ")


def test_a_table_of_zeros_is_called_zeros_not_learned_weights() -> None:
    """ViT-MAE built from its config keeps a zero table (transformers skips its sin-cos fill): no sinusoid
    and no learned table either; audit and patch say so."""
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=101, n_embd=64, n_layer=1, n_head=4, n_positions=128))
    with torch.no_grad():
        model.transformer.wpe.weight.zero_()
    (component,) = posenc.audit(model, samples=S).components
    assert not component.judged and component.note.startswith("all zeros: it holds no positional values")
    (patched,) = pt.patch(model).components
    assert patched.variant == "zeros" and not patched.replaced and patched.reason.startswith("all zeros")


def test_passed_speaks_of_the_judged_components_and_says_how_many_were_not() -> None:
    torch.manual_seed(0)
    model = T.WhisperModel(  # the encoder's table is a sinusoid; the decoder's is learned
        T.WhisperConfig(**SEQ2SEQ, num_mel_bins=8, max_source_positions=64, max_target_positions=32)
    ).eval()
    paths = {c.path: c for c in posenc.audit(model, samples=S).components}
    assert not paths["decoder.embed_positions.weight"].judged
    assert paths["encoder.embed_positions.weight"].judged
    pt.patch(model)
    after = posenc.audit(model, samples=S)
    assert after.passed and after.fix == ""
    assert after.summary() == "PASS: 1 of 1 judged component(s) exact; 1 not judged"


def test_a_model_without_a_positional_component_says_so() -> None:
    model = T.MambaModel(T.MambaConfig(vocab_size=101, hidden_size=32, num_hidden_layers=1, state_size=4))
    audit = posenc.audit(model, samples=S)
    assert isinstance(audit, ModelAudit) and audit.components == [] and not audit.passed
    assert audit.summary().startswith("NOT JUDGED: no positional component found")


def test_a_rotary_that_emits_interleaved_pairs_by_design_is_judged_in_that_layout() -> None:
    torch.manual_seed(0)
    config = T.CohereConfig(  # Cohere's rotary: cos/sin repeat-interleaved, rotated in pairs
        vocab_size=101,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = T.CohereForCausalLM(config).eval()
    (component,) = posenc.audit(model, samples=S).components
    report = component.report
    assert report.variant.layout == "interleaved" and "interleaved pairs" in report.variant.how
    assert [f.text.split(":")[0] for f in report.findings] == ["angles formed in float32"]  # no layout defect
    assert report.max_abs < 1e-3 and not component.declined
    tokens = torch.randint(3, 101, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(tokens).logits
    (patched,) = pt.patch(model).components
    assert patched.replaced and patched.variant == "rope-default (interleaved)"
    assert model.model.rotary_emb.layout == "interleaved" and posenc.audit(model, samples=S).passed
    with torch.no_grad():
        torch.testing.assert_close(model(tokens).logits, before, atol=1e-4, rtol=0)


def test_detrs_sine_computed_in_forward_is_judged_and_made_exact() -> None:
    resnet = T.ResNetConfig(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )
    config = T.DetrConfig(
        backbone_config=resnet,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_queries=4,
    )
    model = T.DetrModel(config).eval()
    paths = {c.path: c for c in posenc.audit(model, samples=S).components}
    sine = paths["position_embedding"]  # DETR's PositionEmbeddingSine: computed in its forward
    assert sine.kind == "computed" and sine.judged and not sine.passed and not sine.declined
    assert [f.kind for f in sine.report.findings] == ["float32"] and sine.report.max_abs < 1e-6
    assert not paths["query_position_embeddings.weight"].judged  # learned
    (replaced,) = [c for c in pt.patch(model).components if c.kind == "computed"]
    assert (
        replaced.replaced and replaced.path == "position_embedding" and "outputs as before" in replaced.reason
    )
    assert posenc.audit(model, samples=S).passed


class _RelativeSinusoid(torch.nn.Module):
    """Relative positions between two lengths, as XLNet's method has them: a form posenc does not read."""

    def forward(self, qlen: int, klen: int) -> torch.Tensor:
        positions = torch.arange(klen, -qlen, -1.0)[:, None]
        return torch.cat([torch.sin(positions / 100), torch.cos(positions / 100)], -1)


def test_sinusoids_computed_in_forward_that_posenc_does_not_read_are_said_not_judged() -> None:
    model = torch.nn.Sequential()
    model.add_module("relative", _RelativeSinusoid())
    (sine,) = posenc.audit(model, samples=S).components
    assert (
        sine.kind == "computed" and not sine.judged and "computes its sinusoids in its forward" in sine.note
    )
    (left,) = pt.patch(model).components
    assert not left.replaced and "no reader" in left.reason


def test_a_model_is_judged_in_the_dtype_its_rotary_runs_in() -> None:
    model = _tiny_llama()
    (plain,) = posenc.audit(model, samples=S).components
    (halved,) = posenc.audit(model, samples=S, dtype="bfloat16").components
    assert (plain.report.dtype, halved.report.dtype) == ("float32", "bfloat16")
    assert halved.report.max_abs > plain.report.max_abs  # HF's float32 values, then cast: judged as cast


def test_a_finding_on_library_code_gives_the_fix_a_library_user_applies() -> None:
    (rotary,) = posenc.audit(_tiny_llama(), samples=S).components
    fixes = [f.fix for f in rotary.report.findings]
    assert fixes and all(
        f.startswith("posenc.torch.patch(model): posenc's exact module in place of") for f in fixes
    )
    assert "transformers' (its code is not yours to edit)" in fixes[0] and "div_term" not in " ".join(fixes)
    # the user's own module keeps the formula fix: their code is theirs to change
    (own,) = posenc.audit(torch.nn.Sequential(TutorialPositionalEncoding(64)), samples=S).components
    assert any("float64" in f.fix for f in own.report.findings), [f.fix for f in own.report.findings]


def test_a_models_html_has_one_title_its_style_and_its_code_as_code(tmp_path: Path) -> None:
    text = posenc.audit(_tiny_llama(), samples=S).to_html(tmp_path / "m.html").read_text()
    assert text.count("<h1>") == 1 and text.count("<style>") == 1 and "<h2>rotary_emb: " in text
    assert '<span class="fail">FAIL</span>: 0 of 1 judged component(s) exact' in text
    assert "<code>posenc.torch.patch(model)</code>" in text
    findings = text[text.index("<h3>Findings</h3>") : text.index("<h3>Error against position</h3>")]
    assert "`" not in findings


def _tiny_llama(causal: bool = False, **options: object) -> torch.nn.Module:
    """A one-layer Llama of head width 16 (its rotary: Hugging Face's float32 cos/sin), with ``options`` of
    its config; ``causal``: the LM (LlamaForCausalLM) in eval mode."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        vocab_size=100,
        **options,
    )
    return transformers.LlamaForCausalLM(config).eval() if causal else transformers.LlamaModel(config)


def test_a_library_finding_patch_declines_promises_no_patch() -> None:
    model = _tiny_llama()
    model.rotary_emb.attention_scaling = 1.001  # not its config's: patch declines it, the audit judges it
    (component,) = posenc.audit(model, samples=S).components
    assert component.declined and not component.passed
    fixes = [f.fix for f in component.report.findings if f.fix]
    assert fixes and all(
        f.startswith("none from posenc: posenc.torch.patch(model) declines it") for f in fixes
    )


def test_a_per_layer_rotary_answers_for_the_same_layer_types_before_and_after_a_patch() -> None:
    """Gemma 3 builds only the layer types its layers use (two sliding layers: one type); the patched
    module holds every type of the config, and the audit still answers for the original's."""
    import transformers

    config = transformers.Gemma3TextConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=100,
        sliding_window=8,
    )
    model = transformers.Gemma3ForCausalLM(config)
    before = [(c.path, c.layer_type) for c in posenc.audit(model, samples=S).components]
    pt.patch(model)
    after = posenc.audit(model, samples=S)
    assert (
        before
        == [(c.path, c.layer_type) for c in after.components]
        == [("model.rotary_emb", "sliding_attention")]
    )
    assert after.passed


def test_a_positional_parameter_of_no_tables_shape_is_learned_weights_in_audit_and_patch() -> None:
    """PP-DocLayout-V2's ``pos_proj`` (a 1×1 convolution): a trained parameter whose rows are no table of
    positions is learned weights, not judged, on both sides — not "not an encoding table"."""
    model = torch.nn.Sequential()
    model.add_module("pos_proj", torch.nn.Conv2d(64, 128, 1))
    (judged,) = posenc.audit(model, samples=S).components
    assert not judged.judged and judged.note.startswith("learned weights, no table of positions")
    (left,) = pt.patch(model).components
    assert left.variant == "learned" and not left.replaced and left.reason == judged.note
    # a table of NaN is no learned weights: its patch says what it is (the audit judges it: a finding)
    broken = torch.nn.Sequential()
    broken.add_module("pos_embed", torch.nn.Embedding(8, 4))
    torch.nn.init.constant_(broken.pos_embed.weight, float("nan"))
    (left,) = pt.patch(broken).components
    assert left.variant != "learned" and left.reason.startswith("not an encoding table"), left.reason


TABLE = "model.encoder.embed_positions.weight"


def _whisper_folder(folder: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """A Whisper saved as transformers saves it, its encoder's table (a weight) made exact; its weights."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    model = SINUSOIDAL["whisper"][0]()
    model.save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    pt.patch(model)
    weights[TABLE] = model.get_parameter(TABLE).detach().clone()
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder, weights


def test_a_folders_table_is_read_where_transformers_reads_it_and_nowhere_else(tmp_path: Path) -> None:
    """Only the files transformers loads (model.safetensors, else the shards its index names) and only the
    keys it loads a parameter from (its path, with or without the model's prefix): a table in another file,
    or under a key that merely ends like it, is no evidence (was: the last such one read won, a PASS for a
    model whose loaded table is noisy)."""
    from safetensors.torch import save_file

    folder, weights = _whisper_folder(tmp_path / "whisper")
    exact = weights[TABLE].clone()
    noisy = exact + 3e-3 * torch.randn(exact.shape, generator=torch.Generator().manual_seed(1))

    def verdict() -> bool | None:
        components = {c.path: c for c in posenc.audit(folder, samples=S).components}
        return components[TABLE].passed if components[TABLE].judged else None

    assert verdict() is True
    save_file({**weights, TABLE: noisy, f"zz.{TABLE}": exact}, folder / "model.safetensors")
    save_file({TABLE: exact}, folder / "zz_unused.safetensors")
    assert verdict() is False  # the noisy table transformers loads
    # sharded: the index names each key's file; the table is read from the one it names
    (folder / "model.safetensors").unlink()
    rest = {k: v for k, v in weights.items() if k != TABLE}
    save_file(rest, folder / "model-00001-of-00002.safetensors")
    save_file({TABLE: noisy}, folder / "model-00002-of-00002.safetensors")
    shard_of = {
        **dict.fromkeys(rest, "model-00001-of-00002.safetensors"),
        TABLE: "model-00002-of-00002.safetensors",
    }
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": shard_of}))
    assert verdict() is False
    save_file({**rest, TABLE: exact}, folder / "model-00001-of-00002.safetensors")  # not where the index says
    assert verdict() is False
    index.write_text(json.dumps({"weight_map": {TABLE: "../../etc/passwd"}}))
    with pytest.raises(ValueError, match=r"model\.safetensors\.index\.json is not a safetensors index"):
        posenc.audit(folder, samples=S)


def test_a_folder_whose_weights_posenc_does_not_open_has_its_tables_not_judged(tmp_path: Path) -> None:
    """Weights in pytorch_model.bin (a pickle posenc never loads) are what transformers loads: its tables are
    not judged, and the note says why — never the values building the model computes (was: PASS for a
    noisy table, FAIL for an exact one); the same table in model.safetensors is judged."""
    folder, weights = _whisper_folder(tmp_path / "whisper")
    weights[TABLE] += 3e-3
    (folder / "model.safetensors").unlink()
    torch.save(weights, folder / "pytorch_model.bin")
    components = {c.path: c for c in posenc.audit(folder, samples=S).components}
    assert not components[TABLE].judged
    assert components[TABLE].note.startswith(
        "its weights are in pytorch_model.bin, which posenc does not open"
    )


def test_a_folder_refuses_what_it_would_not_check_or_could_not_bound(tmp_path: Path) -> None:
    """configuration_files (transformers would build from another file than the one posenc checked), the
    size fields of DistilBERT's and of vision towers' configs, and samples past their bound."""
    from tests.cli.test_audit_hostile import LLAMA

    folder = tmp_path / "llama"
    folder.mkdir()
    cases = {
        "configuration_files": {**LLAMA, "configuration_files": ["config.4.0.0.json"]},
        "n_layers must be <= 2\\*\\*12": {**LLAMA, "n_layers": 30000},
        "depths\\[3\\] must be <= 2\\*\\*12": {**LLAMA, "depths": [1, 1, 1, 2**26]},
        "dim must be <= 2\\*\\*18": {**LLAMA, "dim": 2**30},
    }
    for said, config in cases.items():
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(ValueError, match=said):
            posenc.audit(folder, samples=S)
    with pytest.raises(ValueError, match="samples must be <= 2\\*\\*14"):
        posenc.audit(posenc.table(64, 8), samples=2**14 + 1)


@pytest.mark.parametrize("length", [64, 2048])
def test_a_dynamic_rotary_is_judged_from_the_state_it_was_given_at_every_call(length: int) -> None:
    """Hugging Face's "dynamic" keeps the longest length it was called with: the audit's own probes (far
    positions) grew it, and the positions 0 .. max_position_embeddings - 1 measured next were computed with
    those grown frequencies, so even posenc's exact module was "not what posenc reads it as … an unknown
    formula" below 256 positions. Every call now starts from the module's state as given."""
    model = _tiny_llama(
        True, max_position_embeddings=length, rope_scaling={"rope_type": "dynamic", "factor": 2.0}
    )
    before = posenc.audit(model)
    assert before.components[0].report is not None, before.as_text()  # judged, not "an unknown formula"
    assert before.components[0].report.max_abs < 1e-4
    pt.patch(model)
    assert posenc.audit(model).passed


def test_a_bfloat16_models_rotary_of_float32_code_is_said_so_not_unexplained(tmp_path: Path) -> None:
    """A bfloat16 Llama 3.1 folder: its rotary forms angles, cos and sin in float32 (its inv_freq float32)
    and casts to bfloat16. Under 4 units of bfloat16 that error was "unexplained … not angles formed in low
    precision"; it is confirmed value by value as float32 code rounded once, and a rotary one value off of
    it is not."""
    import transformers

    from posenc.auditor.models import from_directory

    config = transformers.LlamaConfig(
        vocab_size=101,
        hidden_size=128,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=1,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=CONFIGS["llama31_8b"]["rope_scaling"],
        dtype="bfloat16",
    )
    config.save_pretrained(tmp_path / "llama")
    assert json.loads((tmp_path / "llama" / "config.json").read_text())["dtype"] == "bfloat16"
    model = from_directory(tmp_path / "llama")
    (component,) = posenc.audit(model, samples=256, dtype="bfloat16").components  # as `posenc audit DIR`
    kinds = [f.text for f in component.report.findings]
    assert kinds == ["angles formed in float32, then rounded to bfloat16"], component.report.as_text()

    rotary = model.rotary_emb
    plain = rotary.forward

    def one_off(x, position_ids):  # float32 code, but one column 4 units of bfloat16 off from 1000 on
        cos, sin = plain(x, position_ids)
        hit = position_ids[0] >= 1000
        cos[:, hit, 5] = (cos[:, hit, 5].float() - 4 * 2.0**-8).to(cos.dtype)
        return cos, sin

    rotary.forward = one_off
    audited = posenc.audit(rotary, positions=131072, samples=256, dtype="bfloat16")
    assert "angles formed in float32" not in audited.as_text()


def test_a_head_dim_of_zero_a_config_derives_is_read_and_a_negative_one_refused() -> None:
    """GLM-5 Next's text config holds head_dim 0 (transformers sets it to qk_rope_head_dim): posenc audit DIR
    refused the folder transformers itself wrote, telling its user to "correct it in config.json"."""
    from posenc.auditor import models

    node = {"head_dim": 0, "hidden_size": 64}
    models._check_fields(Path("DIR"), "text_config", node, False)
    assert node["head_dim"] == 0
    with pytest.raises(ValueError, match=r"text_config\.head_dim must be an integer >= 0; got -1"):
        models._check_fields(Path("DIR"), "text_config", {"head_dim": -1}, False)
