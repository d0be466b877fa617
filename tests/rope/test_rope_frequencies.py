"""posenc.rope frequencies: conformance with Hugging Face transformers, and exactness against mpmath.

* conformance: transformers computes θ_i in float32, so posenc's correctly rounded float64 values must
  agree to float32 accuracy: |Δθ_i| <= 2e-7 · max_j θ_j (relative to the largest frequency) and
  |Δθ_i| <= 8 float32 ulps of θ_i (2**-21 relative: the float32 rounding of the exponent 2i/d costs up to
  ln(base)·2**-24, which with the pow, the reciprocal and the scaling makes ~5 ulps at worst in these
  configs); the attention scaling (a float64 scalar in transformers) to 1e-6 relative.
* exactness: an independent mpmath evaluation of each formula at 60 digits; inv_freq must equal its
  nearest float64 bit for bit, and exact_inv_freq must agree with it to the digits asked.
"""

from __future__ import annotations

import copy
import dataclasses
import decimal
from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import posenc.rope as rope
from posenc.rope.frequencies import _certain, exact_attention_scaling, exact_inv_freq
from posenc.rope.kinds import Ambiguous, _floor
from tests.rope.test_rope_parameters import CONFIGS

ULP32 = 2.0**-24

# seq_len values to try per config: None (model construction), within and beyond the trained lengths
SEQ_LENS = {
    "llama2": [None],
    "llama31_8b": [None, 200000],
    "qwen2_yarn": [None],
    "deepseek_v3": [None],
    "phi3_mini_128k": [None, 4096, 4097, 100000],
    "gpt_neox": [None],
    "linear": [None],
    "dynamic": [None, 4096, 5000, 65536],
    "qwen2_vl": [None],
}
# the transformers config class of each, and the rotary class whose compute_default_rope_parameters
# transformers uses for rope_type "default"
CLASSES = {
    "llama2": ("LlamaConfig", "llama.modeling_llama.LlamaRotaryEmbedding"),
    "llama31_8b": ("LlamaConfig", None),
    "qwen2_yarn": ("Qwen2Config", None),
    "deepseek_v3": ("DeepseekV3Config", None),
    "phi3_mini_128k": ("Phi3Config", None),
    "gpt_neox": ("GPTNeoXConfig", "gpt_neox.modeling_gpt_neox.GPTNeoXRotaryEmbedding"),
    "linear": ("LlamaConfig", None),
    "dynamic": ("LlamaConfig", None),
    "qwen2_vl": ("Qwen2VLConfig", "qwen2_vl.modeling_qwen2_vl.Qwen2VLRotaryEmbedding"),
    "proportional": ("LlamaConfig", None),
}
# Gemma 4's "proportional" global layers, in a Llama config (the type is generic in transformers)
PROPORTIONAL = {
    "hidden_size": 2048,
    "num_attention_heads": 8,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "proportional",
        "rope_theta": 1e6,
        "partial_rotary_factor": 0.25,
        "factor": 2.0,
    },
}
CONFORMANCE = {**CONFIGS, "proportional": PROPORTIONAL}


@pytest.fixture(scope="module")
def hf():
    """transformers and its RoPE functions, imported once (slow: it loads torch)."""
    import importlib

    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def default_fn(path):
        module, name = path.rsplit(".", 1)
        return getattr(importlib.import_module(f"transformers.models.{module}"), name)

    return transformers, ROPE_INIT_FUNCTIONS, default_fn


@pytest.mark.parametrize("name", sorted(CONFORMANCE))
def test_conformance_with_transformers(hf, name: str) -> None:
    transformers, init_functions, default_fn = hf
    class_name, default_class = CLASSES[name]
    hf_config = getattr(transformers, class_name)(**copy.deepcopy(CONFORMANCE[name]))
    p = rope.config(CONFORMANCE[name])
    assert rope.config(hf_config) == p  # the object reads the same as the dict
    text_config = getattr(hf_config, "text_config", None) or hf_config
    for seq_len in SEQ_LENS.get(name, [None]):
        if p.rope_type == "default":
            theirs, their_scaling = default_fn(default_class).compute_default_rope_parameters(text_config)
        else:
            theirs, their_scaling = init_functions[p.rope_type](text_config, None, seq_len=seq_len)
        theirs = theirs.double().numpy()
        ours = rope.inv_freq(p, seq_len=seq_len)
        assert ours.dtype == np.float64 and ours.shape == (p.rotary_dim // 2,) == theirs.shape
        error = np.abs(ours - theirs)
        assert error.max() <= 2e-7 * ours.max(), (seq_len, error.max())
        assert np.all(error <= 8 * ULP32 * ours), (seq_len, (error / ours).max() / ULP32)
        assert rope.attention_scaling(p, seq_len=seq_len) == pytest.approx(their_scaling, rel=1e-6, abs=0)


# --- an independent reference in mpmath ----------------------------------------------------------------


def mp_frequencies(p: rope.RopeParameters, seq_len: int | None) -> list[mpmath.mpf]:
    """θ_i of each type, written from the published formulas (RoFormer, bloc97's NTK, YaRN, LongRoPE,
    Llama 3.1), at the current mpmath precision."""
    mpf, d, b = mpmath.mpf, p.rotary_dim, mpmath.mpf(p.base)
    if p.rope_type == "proportional":
        k = int(p.partial_rotary_factor * p.head_dim // 2)
        out = [b ** (-mpf(2 * i) / p.head_dim) / mpf(p.factor) for i in range(k)]
        return out + [mpf(0)] * (p.head_dim // 2 - k)
    if p.rope_type == "dynamic":
        m = p.max_position_embeddings
        length = max(seq_len or m, m)
        s = mpf(p.factor) * length / m - (mpf(p.factor) - 1)
        b = b * s ** (mpf(d) / (d - 2))
    theta = [b ** (-mpf(2 * i) / d) for i in range(d // 2)]
    if p.rope_type == "linear":
        return [t / mpf(p.factor) for t in theta]
    if p.rope_type == "longrope":
        lam = p.long_factor if seq_len and seq_len > p.original_max_position_embeddings else p.short_factor
        return [t / mpf(x) for t, x in zip(theta, lam, strict=True)]
    if p.rope_type == "llama3":
        m0, f = mpf(p.original_max_position_embeddings), mpf(p.factor)
        lo, hi = mpf(p.low_freq_factor), mpf(p.high_freq_factor)
        out = []
        for t in theta:
            wave = 2 * mpmath.pi / t
            if wave < m0 / hi:
                out.append(t)
            elif wave > m0 / lo:
                out.append(t / f)
            else:
                w = (m0 / wave - lo) / (hi - lo)
                out.append(w * t + (1 - w) * t / f)
        return out
    if p.rope_type == "yarn":
        lo, hi = yarn_range(p)
        if lo == hi:
            hi += mpf("0.001")
        out = []
        for i, t in enumerate(theta):
            r = min(max((i - lo) / (hi - lo), 0), 1)
            out.append(t / mpf(p.factor) * r + t * (1 - r))
        return out
    return theta


def yarn_range(p: rope.RopeParameters, truncate: bool | None = None) -> tuple[mpmath.mpf, mpmath.mpf]:
    def dim(rotations: float) -> mpmath.mpf:
        wavelength_turns = p.original_max_position_embeddings / (2 * mpmath.pi * mpmath.mpf(rotations))
        return p.rotary_dim * mpmath.log(wavelength_turns) / (2 * mpmath.log(mpmath.mpf(p.base)))

    lo, hi = dim(p.beta_fast), dim(p.beta_slow)
    if p.truncate if truncate is None else truncate:
        lo, hi = mpmath.floor(lo), mpmath.ceil(hi)
    return max(lo, 0), min(hi, p.rotary_dim - 1)


def mp_scaling(p: rope.RopeParameters) -> mpmath.mpf:
    mpf = mpmath.mpf
    if p.rope_type not in ("yarn", "longrope"):
        return mpf(1)
    if p.attention_factor is not None:
        return mpf(p.attention_factor)
    if p.rope_type == "yarn":
        f = mpf(p.factor)

        def g(mu):
            return 1 + mpf("0.1") * mu * mpmath.log(f) if f > 1 else mpf(1)

        if p.mscale and p.mscale_all_dim:
            return g(mpf(p.mscale)) / g(mpf(p.mscale_all_dim))
        return g(1)
    m0 = mpf(p.original_max_position_embeddings)
    f = mpf(p.factor) if p.factor is not None else mpf(p.max_position_embeddings) / m0
    return mpmath.sqrt(1 + mpmath.log(f) / mpmath.log(m0)) if f > 1 else mpf(1)


def nearest_float(x: mpmath.mpf) -> float:
    """The float64 nearest x (ties to even), through an exact Fraction: mpf.__float__ need not round to
    nearest."""
    man, exp = x.man_exp
    return float(Fraction(int(man)) * Fraction(2) ** int(exp)) if x != 0 else 0.0


def relative_error(value: Decimal, exact: mpmath.mpf) -> mpmath.mpf:
    return abs(mpmath.mpf(str(value)) - exact) / abs(exact) if exact != 0 else abs(mpmath.mpf(str(value)))


# extra configs that reach the branches the realistic ones do not
EXTRA = {
    "yarn_untruncated": rope.config(
        head_dim=128,
        base=1e6,
        max_position_embeddings=131072,
        scaling={
            "rope_type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "truncate": False,
        },
    ),
    "yarn_attention_factor": rope.config(
        head_dim=64,
        scaling={
            "rope_type": "yarn",
            "factor": 8,
            "original_max_position_embeddings": 2048,
            "attention_factor": 0.8,
        },
    ),
    "longrope_factor": dataclasses.replace(rope.config(CONFIGS["phi3_mini_128k"]), factor=16.0),
    "proportional": rope.config(
        head_dim=256,
        base=1e6,
        partial_rotary_factor=0.25,
        scaling={"rope_type": "proportional", "factor": 2.0},
    ),
}
ALL = {**{name: rope.config(cfg) for name, cfg in CONFIGS.items()}, **EXTRA}
CASES = [(name, s) for name in sorted(ALL) for s in SEQ_LENS.get(name, [None])]


@pytest.mark.parametrize(("name", "seq_len"), CASES)
def test_correctly_rounded_against_mpmath(name: str, seq_len: int | None) -> None:
    p = ALL[name]
    with mpmath.workdps(60):
        reference = mp_frequencies(p, seq_len)
        scaling = mp_scaling(p)
        ours = rope.inv_freq(p, seq_len=seq_len)
        assert ours.tolist() == [nearest_float(x) for x in reference]
        assert rope.attention_scaling(p, seq_len=seq_len) == nearest_float(scaling)
        exact = exact_inv_freq(p, seq_len, 50)
        assert len(exact) == p.rotary_dim // 2
        assert (
            max(relative_error(v, x) for v, x in zip(exact, reference, strict=True)) < mpmath.mpf(10) ** -50
        )
        assert relative_error(exact_attention_scaling(p, seq_len, 50), scaling) < mpmath.mpf(10) ** -50


@pytest.mark.parametrize("name", ["deepseek_v3", "llama31_8b", "yarn_untruncated", "phi3_mini_128k"])
def test_exact_values_to_120_digits(name: str) -> None:
    p = ALL[name]
    with mpmath.workdps(140):
        reference = mp_frequencies(p, None)
        exact = exact_inv_freq(p, None, 120)
        assert (
            max(relative_error(v, x) for v, x in zip(exact, reference, strict=True)) < mpmath.mpf(10) ** -120
        )
        scaling = exact_attention_scaling(p, None, 120)
        assert relative_error(scaling, mp_scaling(p)) < mpmath.mpf(10) ** -120


def test_no_realistic_config_sits_on_a_boundary() -> None:
    """The piecewise choices are made on exact reals; a float computation agrees with them unless a value
    lies within its rounding error of a boundary. None of the realistic configs comes within 1e-6."""
    with mpmath.workdps(40):
        for name in ("qwen2_yarn", "deepseek_v3", "yarn_untruncated"):
            lo, hi = yarn_range(ALL[name], truncate=False)  # the values truncation floors and ceils
            for c in (lo, hi):
                assert abs(c - mpmath.nint(c)) > 1e-6, (name, c)
        p = ALL["llama31_8b"]
        m0 = p.original_max_position_embeddings
        for i in range(p.rotary_dim // 2):
            wave = 2 * mpmath.pi * mpmath.mpf(p.base) ** (mpmath.mpf(2 * i) / p.rotary_dim)
            for edge in (m0 / p.low_freq_factor, m0 / p.high_freq_factor):
                assert abs(wave / edge - 1) > 1e-6, (i, wave)


def test_seq_len_semantics() -> None:
    dynamic = ALL["dynamic"]
    plain = rope.inv_freq(rope.config(CONFIGS["llama2"]))
    np.testing.assert_array_equal(rope.inv_freq(dynamic), plain)  # None: the unscaled base, as at init
    np.testing.assert_array_equal(rope.inv_freq(dynamic, seq_len=4096), plain)
    grown = rope.inv_freq(dynamic, seq_len=8192)
    assert grown[0] == 1.0 and np.all(grown[1:] < plain[1:])  # the base grew: every other θ_i shrank
    phi = ALL["phi3_mini_128k"]
    short, long_ = rope.inv_freq(phi), rope.inv_freq(phi, seq_len=4097)
    np.testing.assert_array_equal(short, rope.inv_freq(phi, seq_len=4096))
    assert short[1] == nearest_float(mpmath.mpf(10000) ** (-mpmath.mpf(2) / 96) / phi.short_factor[1])
    assert np.all(long_[1:] < short[1:])


def test_exactly_representable_values_are_exact() -> None:
    linear = ALL["linear"]
    assert rope.inv_freq(linear)[0] == 0.25 and exact_inv_freq(linear, None, 30)[0] == Decimal("0.25")
    proportional = rope.inv_freq(ALL["proportional"])
    assert proportional.shape == (128,) and proportional[0] == 0.5
    assert np.all(proportional[:32] > 0) and np.all(proportional[32:] == 0)
    assert rope.attention_scaling(ALL["llama31_8b"]) == 1.0
    assert rope.attention_scaling(ALL["yarn_attention_factor"]) == 0.8


def test_attention_scaling_formulas() -> None:
    qwen = rope.attention_scaling(ALL["qwen2_yarn"])
    assert qwen == nearest_float(1 + mpmath.mpf("0.1") * mpmath.log(4))  # 0.1 ln(factor) + 1
    phi = rope.attention_scaling(ALL["phi3_mini_128k"])  # factor = 131072 / 4096 = 32
    assert phi == nearest_float(mpmath.sqrt(1 + mpmath.log(32) / mpmath.log(4096)))
    published_deepseek = dataclasses.replace(ALL["deepseek_v3"], mscale_all_dim=1.0)
    assert rope.attention_scaling(published_deepseek) == 1.0  # mscale == mscale_all_dim cancels


def test_exact_values_are_cached() -> None:
    p = ALL["qwen2_yarn"]
    first = exact_inv_freq(p, None, 77)
    assert exact_inv_freq(p, 123456, 77) is first  # seq_len does not change yarn: one cache entry
    assert exact_inv_freq(dataclasses.replace(p), None, 77) is first  # equal parameters hit the cache
    assert exact_inv_freq(p, None, 78) is not first
    assert all(len(v.as_tuple().digits) <= 79 for v in first)  # digits + 2 significant digits


def test_certainty_test_near_a_midpoint() -> None:
    with decimal.localcontext() as exact:
        exact.prec = 100
        midpoint = Decimal(1) + Decimal(2.0**-53)  # halfway between 1 and the next float64
        above = midpoint + Decimal(10) ** -30
    assert not _certain(midpoint, 1.0, 40)
    assert float(above) == 1 + 2.0**-52
    assert not _certain(above, float(above), 20)  # within 1e-20 of `above` lies the midpoint
    assert _certain(above, float(above), 40)


def test_floor_refuses_to_guess_near_an_integer() -> None:
    with decimal.localcontext(decimal.Context(prec=30)):
        assert _floor(Decimal("2.99")) == 2 and _floor(Decimal("-0.5")) == -1
        with pytest.raises(Ambiguous):  # 3 - 1e-25: within the error of a 30-digit computation
            _floor(Decimal(3) - Decimal(10) ** -25)


def test_bad_arguments() -> None:
    p = ALL["llama2"]
    with pytest.raises(TypeError, match=r"params must be a RopeParameters .*got dict"):
        rope.inv_freq(CONFIGS["llama2"])
    with pytest.raises(ValueError, match=r"seq_len must be an integer >= 1; got 0"):
        rope.inv_freq(p, seq_len=0)
    # the rules and wording of posenc.validation.integer, as every other integer argument
    with pytest.raises(
        TypeError, match=r"seq_len must be an integer >= 1; got 4096.0 .*\(pass 4096 instead\)"
    ):
        rope.attention_scaling(p, seq_len=4096.0)
    with pytest.raises(TypeError, match=r"seq_len must be an integer >= 1; got True"):
        exact_inv_freq(p, True, 30)
    with pytest.raises(ValueError, match=r"digits must be an integer >= 1; got 0"):
        exact_inv_freq(p, None, 0)
    with pytest.raises(TypeError, match=r"digits must be an integer >= 1; got 30.0"):
        exact_attention_scaling(p, None, 30.0)
