"""posenc.audit on every kind of target, its HTML report, posenc.testing and ``posenc audit``."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc.auditor import audit
from posenc.cli import main
from posenc.testing import assert_exact, posenc_exact  # noqa: F401  (the fixture, used below)

D = 32
SAMPLES = 64


class Tutorial(torch.nn.Module):
    """The PyTorch tutorial's PositionalEncoding (its published formula; dropout left out)."""

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[: x.size(0)]


def test_a_torch_module_fed_zeros_has_a_length_cliff() -> None:
    report = audit(Tutorial(D), samples=SAMPLES)
    assert report.kind == "module" and "fed zeros of shape (L, 1, d)" in report.note
    cliff = next(f for f in report.findings if f.kind == "cliff")
    assert cliff.data["position"] == 5000 and "raises RuntimeError" in cliff.text


def test_a_posenc_module_fed_zeros_is_exact() -> None:
    from posenc.torch import SinusoidalPositionalEncoding

    report = audit(SinusoidalPositionalEncoding(D), positions=20000, samples=SAMPLES)
    assert report.kind == "module" and report.passed and report.findings == [], report.as_text()


def test_a_module_buffer_tensor_and_numpy_table() -> None:
    class Holder(torch.nn.Module):  # no forward that adds: its buffer is audited
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("pe", torch.from_numpy(posenc.table(3000, D)))

    for target in (Holder(), torch.from_numpy(posenc.table(3000, D)), posenc.table(3000, D)):
        report = audit(target, samples=SAMPLES)
        assert report.kind == "table" and report.span == (0, 3000) and report.passed, report.as_text()


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_callables_of_each_framework(framework: str) -> None:
    if framework == "numpy":
        function = lambda p: posenc.encode(p, D)  # noqa: E731
    elif framework == "torch":
        function = lambda p: torch.from_numpy(posenc.encode(p.numpy(), D)) + 0 * p[:, None]  # noqa: E731
    else:
        import jax.numpy as jnp

        function = lambda p: jnp.asarray(posenc.encode(np.asarray(p), D))  # noqa: E731
    report = audit(function, samples=SAMPLES)
    assert report.kind == "callable" and report.passed, report.as_text()


def test_a_function_of_positions_and_d_model() -> None:
    def two(positions: np.ndarray, d_model: int) -> np.ndarray:
        return posenc.encode(positions, d_model, dtype="bfloat16")

    assert audit(two, d_model=48, samples=SAMPLES).dtype == "bfloat16"
    with pytest.raises(ValueError, match="needs its width; give d_model="):
        audit(two)


def test_checkpoint_files(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    table = posenc.presets.get("fairseq", padding_idx=1).table(2000, D)
    np.save(tmp_path / "pe.npy", table)
    torch.save({"embed_positions.weights": torch.from_numpy(table), "x": torch.zeros(3)}, tmp_path / "m.pt")
    save_file({"a": table, "b": table.copy()}, str(tmp_path / "m.safetensors"))
    for path, key in (("pe.npy", None), ("m.pt", None), ("m.safetensors", "b")):
        report = audit(tmp_path / path, key=key, samples=SAMPLES)
        assert report.kind == "file" and report.passed, report.as_text()
        assert report.variant.padding_idx == 1 and report.variant.name.startswith("fairseq")
    with pytest.raises(ValueError, match="name one with key="):
        audit(tmp_path / "m.safetensors")


def _llama_config():
    import transformers

    return transformers.LlamaConfig(
        hidden_size=256,
        num_attention_heads=2,
        head_dim=128,
        rope_theta=500000.0,
        max_position_embeddings=8192,
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hugging_face_llama_rotary(dtype: str) -> None:
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    report = audit(LlamaRotaryEmbedding(_llama_config()), dtype=dtype, samples=SAMPLES)
    assert report.kind == "rotary" and report.dtype == dtype and report.width == 256
    assert report.variant.name == "rope-default" and report.variant.how == "read from the module's config"
    assert report.variant.options == {"head_dim": 128, "base": 500000.0}
    assert not report.passed and report.max_error(1 << 20) > 0.01
    if dtype == "float32":
        assert next(f for f in report.findings if f.kind == "angles").data["grid"] == "float32"
    assert report.measurement.first_repeat == (1 << 26, (1 << 26) - 1)  # float32 positions round together


def test_hugging_face_config_and_posenc_rotary() -> None:
    report = audit(_llama_config(), samples=SAMPLES)
    assert report.kind == "rotary" and "LlamaRotaryEmbedding" in report.target and not report.passed
    params = posenc.rope.config(head_dim=64, base=10000.0)
    exact = audit(lambda p: posenc.rope.cos_sin(p, params), preset={"head_dim": 64}, samples=SAMPLES)
    assert exact.kind == "rotary" and exact.passed, exact.as_text()
    found = audit(lambda p: posenc.rope.cos_sin(p, params), samples=SAMPLES)
    assert found.variant.name == "rope-default" and "identify_rope" in found.variant.how and found.passed


def test_an_inv_freq_vector_costs_its_rounding() -> None:
    theta = posenc.rope.inv_freq(posenc.rope.config(head_dim=64, base=10000.0)).astype(np.float32)
    report = audit(theta, samples=SAMPLES)
    assert report.kind == "rotary" and "identify_rope" in report.variant.how
    assert 0 < report.max_error(1024) < 1e-4 < 0.1 < report.max_error()
    assert next(f for f in report.findings if f.kind == "frequencies").text == "frequencies cast to float32"


def test_bad_input_names_the_parameter() -> None:
    table = posenc.table(100, D)
    cases = [
        (dict(positions="0:200"), "ask for at most '0:100'"),
        (dict(positions="a:b"), "positions must be"),
        (dict(tol="2x"), "tol='2x' is not a tolerance"),
        (dict(dtype="int8"), "dtype must be one of"),
        (dict(d_model=16), "d_model is 16 but the target has 32 columns"),
        (dict(preset={"bass": 1}), "unknown keys"),
        (dict(samples=3), "samples"),
    ]
    for hints, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            audit(table, **hints)
    with pytest.raises(TypeError, match="target must be"):
        audit(42)


def test_html_is_one_self_contained_file(tmp_path: Path) -> None:
    path = audit(posenc.table(3000, D) * 1.001, samples=SAMPLES).to_html(tmp_path / "r.html")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2 and "<circle" in text
    assert not re.search(r"(src|href)\s*=|https?://|<script|<link|@import", text)
    assert "FAIL" in text and "distinct rows" in text and list(tmp_path.iterdir()) == [path]


def test_html_lists_the_findings_with_their_fixes_and_no_text_covers_data(tmp_path: Path) -> None:
    from posenc.auditor.html import PLOT
    from tests.support.tutorial import TutorialPositionalEncoding

    report = audit(TutorialPositionalEncoding(D), samples=SAMPLES)  # a cliff (raising bands) and angles
    text = report.to_html(tmp_path / "r.html").read_text()
    findings = text[text.index("<h2>Findings</h2>") : text.index("<h2>Error against position</h2>")]
    assert len(report.findings) == 2 and findings.count("<li>") == 2
    from posenc.auditor.html import _inline

    for f in report.findings:
        assert html.escape(f.text) in findings and f"fix: {_inline(f.fix)}" in findings
        assert "`" not in _inline(f.fix) and ("<code>" in _inline(f.fix)) == ("`" in f.fix)
    x0, y0, x1, y1 = PLOT
    for svg in re.findall(r"<svg.*?</svg>", text, re.S):
        texts = re.findall(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)">', svg)
        assert len(texts) > 5
        for x, y, anchor in texts:  # above, below, or (anchored at its end) left of the plot area
            x, y = float(x), float(y)
            assert y <= y0 - 8 or y >= y1 + 10 or (anchor == "end" and x <= x0), (x, y, anchor, svg[:80])
        for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg):
            assert x0 - 2 <= float(cx) <= x1 + 2 and y0 - 2 <= float(cy) <= y1 + 2
        for x, y, w, h in re.findall(
            r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg
        ):
            assert (
                x0 <= float(x)
                and float(x) + float(w) <= x1
                and y0 <= float(y)
                and float(y) + float(h) <= y1 + 0.1
            )


def test_assert_exact_and_the_fixture(posenc_exact) -> None:  # noqa: F811
    assert posenc_exact is assert_exact
    assert posenc_exact(posenc.table(2000, D), samples=SAMPLES).passed
    with pytest.raises(
        AssertionError, match=r"not exact \(correctly rounded asked\).*angles formed in float32"
    ):
        assert_exact(Tutorial(D).pe, samples=SAMPLES)
    assert assert_exact(Tutorial(D).pe, tol=1e-3, samples=SAMPLES).max_abs < 1e-3


USER_FILE = """
import math, numpy as np, torch, posenc

def exact(positions):
    return posenc.encode(positions, 32)

def float32(positions):
    p = np.asarray(positions, np.float32)[:, None]
    w = np.exp(np.arange(16, dtype=np.float32) * np.float32(-math.log(10000.0) / 16))
    out = np.zeros((len(p), 32), np.float32)
    out[:, 0::2], out[:, 1::2] = np.sin(p * w), np.cos(p * w)
    return out

class Module(torch.nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.register_buffer("pe", torch.from_numpy(posenc.table(4000, d_model))[:, None])

    def forward(self, x):
        return x + self.pe[: x.size(0)]
"""


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = tmp_path / "user.py"
    user.write_text(USER_FILE)
    np.save(tmp_path / "pe.npy", posenc.table(1000, D))
    s = ["--samples", "64"]
    assert main(["audit", f"{user}:exact", *s]) == 0
    assert "PASS: max error 0" in capsys.readouterr().out
    assert main(["audit", f"{user}:float32", *s, "--html", str(tmp_path / "a.html")]) == 1
    assert (
        "angles formed in float32" in capsys.readouterr().out and (tmp_path / "a.html").stat().st_size > 5000
    )
    assert main(["audit", f"{user}:float32", *s, "--tol", "1e-2", "--positions", "0:100000"]) == 0
    assert main(["audit", f"{user}:Module", "--d-model", "32", *s]) == 1
    assert "length cliff at 4000" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "pe.npy"), "--json", *s]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    assert main(["audit", f"{user}:exact", "--preset", "tensor2tensor", *s]) == 1
    assert "wrong shift" in capsys.readouterr().out
    bad = [
        ([f"{user}:nope"], "defines no 'nope'"),
        ([f"{user}:Module"], "give its width: --d-model"),
        ([f"{user}:exact", "--tol", "2x"], "--tol"),
        ([f"{user}:exact", "--positions", "x"], "positions"),
        ([str(tmp_path / "missing.npy")], "no such file"),
        ([f"{tmp_path / 'other.py'}:f"], "no such file"),
    ]
    for args, message in bad:
        capsys.readouterr()
        assert main(["audit", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("posenc: error:") and message in err and err.count("\n") == 1, err


def _old_rotary_cache(dim: int, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """inv_freq and the (1, 1, L, dim) cos/sin caches as Hugging Face Llama (transformers < 4.38) and
    GPT-NeoX built them: float32 frequencies, positions and angles."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(length, dtype=inv_freq.dtype)
    emb = torch.cat([torch.einsum("i,j->ij", t, inv_freq)] * 2, dim=-1)
    return inv_freq, emb.cos()[None, None], emb.sin()[None, None]


class OldLlamaRotary(torch.nn.Module):
    """transformers 4.30's LlamaRotaryEmbedding (published code): ``forward(x, seq_len)``."""

    def __init__(self, dim: int, max_position_embeddings: int = 2048, keep_inv_freq: bool = True) -> None:
        super().__init__()
        inv_freq, cos, sin = _old_rotary_cache(dim, max_position_embeddings)
        if keep_inv_freq:
            self.register_buffer("inv_freq", inv_freq)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        self.dim = dim

    def forward(self, x: torch.Tensor, seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if seq_len > self.cos_cached.shape[-2]:
            _, cos, sin = _old_rotary_cache(self.dim, seq_len)
            self.register_buffer("cos_cached", cos, persistent=False)
            self.register_buffer("sin_cached", sin, persistent=False)
        return self.cos_cached[:, :, :seq_len].to(x.dtype), self.sin_cached[:, :, :seq_len].to(x.dtype)


def test_a_module_holding_only_cos_sin_caches_is_read_as_a_rotary_table() -> None:
    module = OldLlamaRotary(64, 3000, keep_inv_freq=False)
    report = audit(module, samples=SAMPLES)
    assert report.kind == "rotary" and report.span == (0, 3000) and report.width == 128
    assert "cos_cached / sin_cached buffers (3,000 rows)" in report.note
    assert report.variant.name == "rope-default"
    assert report.variant.options == {"head_dim": 64, "base": 10000.0}
    assert 1e-5 < report.max_error() < 1e-3  # float32 angles p·θ_i, below position 3000
    cos, sin = module.cos_cached[0, 0, [0, 2999]].double().numpy(), module.sin_cached[0, 0, [0, 2999]].numpy()
    np.testing.assert_array_equal(report.measurement.values[[0, -1]], np.concatenate([cos, sin], axis=1))
    params = posenc.rope.config(head_dim=64, base=10000.0)
    exact = [torch.from_numpy(a)[None, None] for a in posenc.rope.cos_sin(np.arange(3000), params)]
    holder = torch.nn.Module()
    holder.register_buffer("_cos_cached", exact[0])
    holder.register_buffer("_sin_cached", exact[1])
    assert audit(holder, samples=SAMPLES).passed


def test_an_older_rotary_module_is_called_with_seq_len() -> None:
    report = audit(OldLlamaRotary(64), positions=100_000, samples=SAMPLES)
    assert report.kind == "rotary" and "seq_len=L" in report.note and report.width == 128
    assert "from its inv_freq" in report.variant.how and report.variant.options["base"] == 10000.0
    _, cos, sin = _old_rotary_cache(64, 100_000)  # what its forward computes when asked for 100,000 rows
    m = report.measurement
    rows = torch.cat([cos, sin], dim=-1)[0, 0, m.positions].double().numpy()
    np.testing.assert_array_equal(m.values, rows)
    assert next(f for f in report.findings if f.kind == "angles").data["grid"] == "float32"


def test_an_older_rotary_module_whose_forward_fails_falls_back_to_its_buffers() -> None:
    class Broken(OldLlamaRotary):
        def forward(self, x: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            raise RuntimeError("cannot reshape array of size 0")  # what the audit once met

    report = audit(Broken(64, 3000), samples=SAMPLES)
    assert report.kind == "rotary" and report.span == (0, 3000)
    assert "cos_cached / sin_cached" in report.note and "could not be called" in report.note
    assert "cannot reshape array of size 0" in report.note and 1e-5 < report.max_error() < 1e-3
    only = Broken(64, 3000)
    del only.cos_cached, only.sin_cached
    report = audit(only, samples=SAMPLES)
    assert report.target == "rotary module Broken (its inv_freq only)" and "pass a function" in report.note
    assert "identify_rope from its inv_freq" in report.variant.how
    assert 0 < report.max_error(1024) < 1e-4 < 0.1 < report.max_error()  # its frequencies' rounding, ∝ p


def test_a_module_cast_to_bfloat16_is_fed_and_judged_in_bfloat16() -> None:
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    report = audit(Tutorial(D).to(torch.bfloat16), positions=5000, samples=SAMPLES)
    assert report.kind == "module" and report.dtype == "bfloat16" and "(L, 1, d)" in report.note
    assert 0 < report.max_abs <= 2**-8  # the float32 table rounded to bfloat16: ≤ 1 ulp of bf16 at 1
    assert audit(Tutorial(D), positions=5000, samples=SAMPLES).dtype == "float32"
    rotary = audit(LlamaRotaryEmbedding(_llama_config()).to(torch.bfloat16), samples=SAMPLES)
    assert rotary.dtype == "bfloat16" and "x: bfloat16" in rotary.note
    given = audit(Tutorial(D).to(torch.bfloat16), dtype="float32", positions=5000, samples=SAMPLES)
    assert given.dtype == "float32"
