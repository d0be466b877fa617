"""The proofs of ``posenc.torch.patch`` are honest and ``patch``/``unpatch`` are all or nothing, on models
built from configs with random weights (no downloads):

* a rotary module whose frequencies or attention scaling are not its config's is never replaced, in any
  dtype and at any context length; every allowance stays below ``proofs.CAP`` of the amplitude;
* a learned table near a sinusoid is never overwritten, while the libraries' own float32 tables are;
* an attention module whose ``forward`` posenc cannot see (set on the instance, or wrapped by a decorator)
  keeps it, and ``unpatch`` leaves it; an apply rebound in its modeling module (a mock, a wrapper) is seen
  by the next patch, which declines it; each patch rebuilds the forward from the module's globals as they
  are then;
* ``unpatch`` after ``.to(bfloat16)``, or after ``to_empty`` and loading weights, gives back the model a
  never-patched one is, bit for bit; what the user changed since the patch stays;
* a patch that fails halfway leaves the model as it was;
* the model's own forward is the last proof: a swap after which it raises or gives other outputs is undone,
  and every component declined with what the forward said.
"""

from __future__ import annotations

import copy
import functools
import math
import sys
from unittest import mock

import pytest
import torch
from torch import nn

import posenc.torch as pt
from posenc import rope
from posenc.torch import patching, proofs
from tests.support.tutorial import TutorialPositionalEncoding, tutorial_table

transformers = pytest.importorskip("transformers")
T = transformers

from tests.torch.test_patching import DECODERS, SINUSOIDAL, SMALL  # noqa: E402  (needs transformers)


def _llama(max_positions: int = 4096, seed: int = 0, **options) -> nn.Module:
    torch.manual_seed(seed)
    return T.LlamaForCausalLM(T.LlamaConfig(**SMALL, max_position_embeddings=max_positions, **options)).eval()


def _ids(n: int = 40, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, 101, (2, n), generator=torch.Generator().manual_seed(seed))


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_state(model: nn.Module, state: dict[str, torch.Tensor]) -> bool:
    now = model.state_dict()
    return set(now) == set(state) and all(
        now[k].dtype == v.dtype and torch.equal(now[k], v) for k, v in state.items()
    )


def _modules(model: nn.Module) -> list[tuple[str, int]]:
    return [(path, id(module)) for path, module in model.named_modules(remove_duplicate=False)]


# --- 1. rotary: frequencies and scaling must be the config's; allowances below the cap ----------------------

FAULTS = {
    "inv_freq zeroed": lambda r: r.inv_freq.zero_(),
    "inv_freq / 8": lambda r: r.inv_freq.div_(8),
    "attention_scaling 2": lambda r: setattr(r, "attention_scaling", 2.0),
}


def test_a_rotary_holding_its_configs_frequencies_in_another_order_is_said_so() -> None:
    """ERNIE 4.5 VL interleaves its sections' frequencies on purpose: the same set as its config's, in
    another order, not "a max relative difference of 73" from it."""
    model = _llama()
    rotary = model.model.rotary_emb
    with torch.no_grad():
        rotary.inv_freq.copy_(rotary.inv_freq.flip(0))
    (component,) = pt.patch(model).components
    assert not component.replaced
    assert component.reason == (
        "its frequencies are the RoPE posenc reads from its config (theta 10000, 8 frequencies) in another "
        "order (inv_freq): a layout of its own, which posenc does not build"
    )


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(
    "dtype, positions",
    [
        (torch.bfloat16, 4096),
        (torch.bfloat16, 32768),
        (torch.float16, 4096),
        (torch.float16, 32768),
        (torch.float32, 4096),
        (torch.float32, 1 << 23),  # float32 angles at 8M positions: their own error is O(1)
    ],
)
def test_a_rotary_module_that_is_not_its_configs_is_left_alone(fault, dtype, positions) -> None:
    model = _llama(positions).to(dtype)
    rotary = model.model.rotary_emb
    FAULTS[fault](rotary)
    state = _state(model)
    report = pt.patch(model)
    (component,) = report.components
    assert not component.replaced and model.model.rotary_emb is rotary, report.as_text()
    if fault == "attention_scaling 2":
        assert component.reason == "its attention_scaling 2 differs from its config's 1"
    else:
        relative = 1 if fault == "inv_freq zeroed" else 0.875
        assert component.reason.startswith(
            "its frequencies are not the RoPE posenc reads from its config (theta 10000, 8 frequencies): max "
            f"relative difference {relative:g} (inv_freq"
        ), component.reason
        assert component.reason.endswith(
            "the module departs from that reading, or its code reads the config otherwise"
        )
    assert math.isnan(component.tolerance) or component.tolerance <= proofs.CAP
    assert _same_state(model, state) and pt.unpatch(model) == 0


@pytest.mark.parametrize(
    "dtype, positions",
    [(torch.bfloat16, 4096), (torch.bfloat16, 32768), (torch.float16, 32768), (torch.float32, 1 << 20)],
)
def test_a_rotary_module_of_its_config_is_proven_within_a_capped_allowance(dtype, positions) -> None:
    model = _llama(positions).to(dtype)
    reference = copy.deepcopy(model)
    (component,) = pt.patch(model).components
    assert component.replaced and component.difference <= component.tolerance <= proofs.CAP
    # its frequencies are rounded to `dtype`: values where that rounding (p·Δθ) could pass the cap are not
    # compared, and the report says how many were
    assert "where that error is below 0.0625 of the amplitude" in component.reason, component.reason
    tokens = _ids()
    with torch.no_grad():  # posenc's cos/sin are nearer the truth than the bfloat16 frequencies' own
        assert model(tokens).logits.shape == reference(tokens).logits.shape


def test_float32_allowances_at_4096_and_32768_positions_are_float32s_angle_error() -> None:
    for positions, most in ((4096, 4096 * 6 * 2.0**-24 + 8 * 2.0**-24), (32768, 32768 * 6 * 2.0**-24)):
        (component,) = pt.patch(_llama(positions)).components
        # every value below max_position_embeddings compared (past it: the low frequencies)
        assert component.replaced and f"below position {positions} (" not in component.reason
        assert f"past position {positions - 1} too, to 1048575" in component.reason
        assert component.difference <= component.tolerance <= most + 1e-9, (positions, component)


class _Clamped(T.models.llama.modeling_llama.LlamaRotaryEmbedding):
    """Positions past the length it was trained to run as its last (a function no position below shows)."""

    def forward(self, x, position_ids):
        angles = position_ids.clamp(max=self.config.max_position_embeddings - 1)[..., None].float()
        angles = angles * self.inv_freq.float()
        both = torch.cat((angles, angles), -1)
        return both.cos().to(x.dtype), both.sin().to(x.dtype)


def test_a_rotary_that_computes_another_function_past_its_length_is_declined() -> None:
    """Below max_position_embeddings a clamped rotary, or a "default" module whose config was changed to
    "dynamic" after it was built, equals its config's values; past it, it does not: compared there too, it is
    left alone (was: "replaced", logits off by ~10 past the length)."""
    clamped = _llama(256)
    clamped.model.rotary_emb = _Clamped(clamped.config)
    edited = _llama(256)
    edited.config.rope_parameters = {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}
    for model in (clamped, edited):
        state = _state(model)
        (component,) = pt.patch(model).components
        assert not component.replaced, component.reason
        assert "not this config's RoPE within its own rounding error" in component.reason
        assert int(component.reason.split(" at position ")[1].split(",")[0]) >= 256, component.reason
        assert _same_state(model, state) and pt.unpatch(model) == 0


def test_a_dynamic_rotary_patched_keeps_the_frequencies_of_its_longest_call_as_hugging_faces_does() -> None:
    """Hugging Face's "dynamic" holds the frequencies of its longest call for every later one at or past its
    original length, until a shorter call resets them; patched, the model does the same, from the state
    the module had (a module that has grown — its max_seq_len_cached a tensor — included)."""
    original = _llama(64, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    with torch.no_grad():
        original(_ids(150, seed=1))  # grown: holds the frequencies of 150 positions
    assert isinstance(original.model.rotary_emb.max_seq_len_cached, torch.Tensor)
    patched = copy.deepcopy(original)
    (component,) = pt.patch(patched).components
    assert component.replaced, component.reason
    for step, n in enumerate((100, 20, 100, 180, 64, 120, 63, 100)):
        tokens = _ids(n, seed=step + 2)
        with torch.no_grad():
            got, want = patched(tokens).logits, original(tokens).logits
        assert float((got - want).abs().max()) < 1e-4, (step, n)
        assert patched.model.rotary_emb.held[None][0] == int(original.model.rotary_emb.max_seq_len_cached)


def test_values_a_16_bit_frequency_buffer_leaves_uncompared_are_said_to_change() -> None:
    """Cast to bfloat16, the module's inv_freq is rounded: far positions stray from the exact values by
    more than the cap, are not compared, and the report says by how much the patch changes them."""
    model = _llama(4096).to(torch.bfloat16)
    reference = model.model.rotary_emb
    (component,) = pt.patch(model).components
    assert component.replaced
    said = component.reason.split("posenc's exact values differ from its by up to ")[1]
    below = float(said.split(" below position 4096")[0])
    positions = torch.arange(4096)[None]
    with torch.no_grad():
        mine = reference(torch.zeros(1, 1), positions)[0].float()
        ours = model.model.rotary_emb(torch.zeros(1, 1), positions)[0].float()
    assert 0.1 < below <= float((mine - ours).abs().max()) + 1e-6


@pytest.mark.parametrize("name", DECODERS)
def test_every_decoders_allowance_is_below_the_cap_of_its_amplitude(name: str) -> None:
    make, _ = DECODERS[name]
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        model = make().to(dtype)
        rotary = next(
            c
            for c in pt.patch(model).components
            if c.kind == "rotary" and c.replaced and "axial" not in c.variant
        )
        exact = model.get_submodule(rotary.path)
        params = exact.params or next(iter(exact.layer_params.values()))
        amplitude = abs(rope.attention_scaling(params))
        assert rotary.difference <= rotary.tolerance <= proofs.CAP * amplitude, (dtype, rotary)


def test_a_rotary_forward_that_is_not_its_frequencies_is_left_alone() -> None:
    model = _llama()
    rotary = model.model.rotary_emb
    own = rotary.forward
    rotary.forward = lambda x, position_ids: own(x, position_ids + 1)  # right θ and scaling, one place off
    (component,) = pt.patch(model).components
    assert not component.replaced and model.model.rotary_emb is rotary
    assert component.reason.startswith("its values are not this config's RoPE within its own rounding error")
    assert " at position " in component.reason and component.difference > 0.1 > component.tolerance


def test_probing_a_longrope_module_changes_nothing_in_it() -> None:
    make, _ = DECODERS["phi-3 (longrope)"]
    torch.manual_seed(0)
    model = make()
    rotary = model.model.rotary_emb
    before = {k: (b, b.clone()) for k, b in rotary.named_buffers()}
    attributes = dict(vars(rotary))
    assert pt.patch(model).components[0].replaced  # probed past original_max_position_embeddings: long set
    assert pt.unpatch(model) == 1 and model.model.rotary_emb is rotary
    assert {k: b for k, b in rotary.named_buffers()} == {k: b for k, (b, _) in before.items()}
    assert all(torch.equal(b, saved) for b, saved in before.values())  # HF's update wrote into inv_freq
    assert set(vars(rotary)) == set(attributes) and "long_inv_freq" not in vars(rotary)


# --- 2. tables: each value within what its own code errs --------------------------------------------------


class _Holder(nn.Module):
    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("pe", table)


@pytest.mark.parametrize("sigma", [1e-3, 1e-5])
def test_a_learned_table_near_a_sinusoid_is_not_overwritten(sigma: float) -> None:
    exact_ish = tutorial_table(8192, 64)
    noise = torch.randn(exact_ish.shape, generator=torch.Generator().manual_seed(0)) * sigma
    model = _Holder(exact_ish + noise)
    before = model.pe.clone()
    (component,) = pt.patch(model).components
    assert not component.replaced and torch.equal(model.pe, before)
    assert "a perturbed table, or a formula posenc does not know?" in component.reason, (
        component.reason
    )  # a buffer
    assert component.difference > component.tolerance and pt.unpatch(model) == 0


@pytest.mark.parametrize("rows, width", [(8192, 64), (65536, 64), (8192, 512)])
def test_the_tutorials_float32_tables_are_still_made_exact(rows: int, width: int) -> None:
    model = _Holder(tutorial_table(rows, width))
    (component,) = pt.patch(model).components
    assert component.replaced and torch.equal(model.pe, pt.table(rows, width))
    assert 0 < component.difference <= component.tolerance <= proofs.CAP
    # the part of the allowance that grows with p·ω is what float32 code errs there: 4·p·ω·(1 + |ln ω|)·2⁻²⁴
    assert component.tolerance <= 2.0**-24 * (4 + 4 * (rows - 1))


def test_a_bfloat16_table_is_proven_within_its_storage_rounding() -> None:
    model = _Holder(tutorial_table(8192, 64).bfloat16())
    (component,) = pt.patch(model).components
    assert component.replaced and component.difference <= 2.0**-8 <= component.tolerance <= proofs.CAP
    assert torch.equal(model.pe, pt.table(8192, 64, dtype=torch.bfloat16))


# --- 3. a forward posenc cannot see is left as it is -------------------------------------------------------


def test_an_attention_forward_set_on_the_instance_is_kept_by_patch_and_unpatch() -> None:
    model, reference = _llama(), _llama()
    calls = []
    for m in (model, reference):
        attention = m.model.layers[0].self_attn
        own = attention.forward

        def theirs(*args, own=own, **kwargs):
            calls.append(1)
            return own(*args, **kwargs)

        attention.forward = theirs
    mine = model.model.layers[0].self_attn.forward
    report = pt.patch(model, fused=True)
    apply = report.components[-1]
    assert apply.kind == "rotary-apply" and not apply.replaced
    assert apply.reason.startswith("model.layers.0.self_attn: its forward is set on the instance (")
    assert model.model.layers[0].self_attn.forward is mine
    assert not any(
        isinstance(m.__dict__.get("forward"), patching._ExactApplyForward) for m in model.modules()
    )
    assert model.model.rotary_emb.fused is False  # cos/sin in x's dtype, for the model's own apply
    assert pt.unpatch(model) == 1 and model.model.layers[0].self_attn.forward is mine
    tokens = _ids()
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, reference(tokens).logits)
    assert calls


def test_a_wrapped_class_forward_is_refused() -> None:
    model = _llama()
    attention = model.model.layers[1].self_attn
    cls = type(attention)

    @functools.wraps(cls.forward)
    def forward(self, *args, **kwargs):
        return cls.forward(self, *args, **kwargs)

    attention.__class__ = type(f"Decorated{cls.__name__}", (cls,), {"forward": forward})
    apply = pt.patch(model, fused=True).components[-1]
    assert not apply.replaced and apply.path == "model.layers.1.self_attn"
    assert "its class's forward is wrapped by a decorator (" in apply.reason, apply.reason
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_unpatch_leaves_a_forward_the_user_set_after_the_patch() -> None:
    model = _llama()
    assert pt.patch(model, fused=True).components[-1].replaced
    attention = model.model.layers[1].self_attn

    def theirs(*args, **kwargs):
        return type(attention).forward(attention, *args, **kwargs)

    attention.forward = theirs
    assert pt.unpatch(model) == 2
    assert attention.forward is theirs and "forward" not in model.model.layers[0].self_attn.__dict__


def test_a_new_patch_sees_the_modeling_modules_apply_as_it_is_now_and_declines_a_rebinding() -> None:
    model = _llama()
    library = sys.modules[type(model.model.layers[0].self_attn).__module__]
    own = library.apply_rotary_pos_emb
    assert pt.patch(model, fused=True).components[-1].replaced  # before any rebinding: proven, replaced
    calls = []

    def traced(q, k, cos, sin, unsqueeze_dim=1):  # the user's rebinding: it counts, then rotates as before
        calls.append(1)
        return own(q, k, cos, sin, unsqueeze_dim)

    tokens = _ids()
    with mock.patch.object(library, "apply_rotary_pos_emb", traced):
        apply = pt.patch(model, fused=True).components[-1]  # a new patch: sees `traced`, and declines
        assert not apply.replaced and apply.path == "model.layers.*.self_attn"
        assert apply.reason.startswith(
            "model.layers.0.self_attn's apply_rotary_pos_emb is tests.torch.test_patch_proofs."
            "test_a_new_patch_sees_the_modeling_modules_apply_as_it_is_now_and_declines_a_rebinding.<locals>."
            "traced, not its library's own (rebound since import"
        ), apply.reason
        assert (
            not any("forward" in m.__dict__ for m in model.modules())
            and model.model.rotary_emb.fused is False
        )
        with torch.no_grad():
            model(tokens)
        assert len(calls) == 2  # the model runs the user's apply, in both layers
        wrapped = functools.wraps(own)(lambda *args, **kwargs: own(*args, **kwargs))
        with mock.patch.object(library, "apply_rotary_pos_emb", wrapped):  # a wrapper with the same name
            apply = pt.patch(model, fused=True).components[-1]
        assert not apply.replaced and ", a wrapper (__wrapped__), not its library's own" in apply.reason
    calls.clear()
    apply = pt.patch(model, fused=True).components[-1]  # the library's own again: proven, replaced
    assert apply.replaced and "the family table's row 'llama'" in apply.reason
    with torch.no_grad():
        model(tokens)
    assert not calls
    with mock.patch.object(library, "apply_rotary_pos_emb", traced):  # a copy made while it is rebound
        with pytest.warns(UserWarning, match="this copy of a patched model runs posenc's apply"):
            twin = copy.deepcopy(model)
        with torch.no_grad():
            assert torch.equal(twin(tokens).logits, model(tokens).logits)
    assert not calls  # as the patch proved, not silently: the warning names the rebinding
    assert pt.unpatch(model) == 2


def test_each_patch_rebuilds_the_forward_from_the_modules_globals_as_they_are() -> None:
    first, second = _llama(), _llama()
    library = sys.modules[type(first.model.layers[0].self_attn).__module__]
    pt.patch(first, fused=True)  # built before the rebinding below
    for model in (first, second):
        model.config._attn_implementation = "eager"  # the forward calls its module's eager_attention_forward
    seen = []
    eager = library.eager_attention_forward

    def counting(*args, **kwargs):
        seen.append(1)
        return eager(*args, **kwargs)

    tokens = _ids()
    with mock.patch.object(library, "eager_attention_forward", counting):
        pt.patch(second, fused=True)  # built now: it sees `counting`
        seen.clear()  # the patch's own proof ran the model's forward
        with torch.no_grad():
            assert torch.equal(first(tokens).logits, second(tokens).logits)
    assert len(seen) == 2  # the second model's two layers; the first model's forward was built before
    forwards = [m.model.layers[0].self_attn.__dict__["forward"] for m in (first, second)]
    assert forwards[0].function is not forwards[1].function
    assert all(f.function.__globals__ is not library.__dict__ for f in forwards)  # the library's untouched
    assert library.eager_attention_forward is eager
    own = [v for v in vars(patching).values() if getattr(v, "__module__", None) == patching.__name__]
    assert not any(hasattr(v, "cache_info") for v in own)  # no process-wide cache of patching's own
    pt.unpatch(second)  # the instance's forward goes, and with it what it was built from
    assert "forward" not in second.model.layers[0].self_attn.__dict__
    seen.clear()
    with torch.no_grad():
        second(tokens)
    assert not seen


# --- 4. unpatch gives back what a never-patched model holds ------------------------------------------------


@pytest.mark.parametrize("fused", [False, True])
def test_unpatch_after_a_cast_to_bfloat16_is_the_never_patched_model(fused: bool) -> None:
    model = _llama()
    never = copy.deepcopy(model)
    pt.patch(model, fused=fused)
    model.to(torch.bfloat16)
    never.to(torch.bfloat16)
    assert pt.unpatch(model) == (2 if fused else 1)
    rotary, theirs = model.model.rotary_emb, never.model.rotary_emb
    assert type(rotary) is type(theirs)
    for name in ("inv_freq", "original_inv_freq"):
        mine, want = getattr(rotary, name), getattr(theirs, name)
        assert mine.dtype == want.dtype == torch.bfloat16 and torch.equal(mine, want)
    tokens = _ids()
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, never(tokens).logits)
    assert _same_state(model, _state(never))


def test_unpatch_after_building_on_meta_to_empty_and_loading_is_the_never_patched_model() -> None:
    weights = _state(_llama())
    with torch.device("meta"):
        model, never = _llama(), _llama()
    report = pt.patch(model)
    assert report.replaced and "on meta" in report.replaced[0].reason
    for m in (model, never):
        m.to_empty(device="cpu")
        m.load_state_dict(weights, strict=True)
    assert set(model.state_dict()) == set(never.state_dict())
    assert pt.unpatch(model) == 1
    rotary = model.model.rotary_emb
    assert type(rotary) is type(never.model.rotary_emb)
    assert all(b.device.type == "cpu" for b in rotary.buffers())  # not meta: the forward runs
    for m in (model, never):  # the non-persistent inv_freq, as transformers initialises it after loading
        m._init_weights(m.model.rotary_emb)
    tokens = _ids()
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, never(tokens).logits)
    assert _same_state(model, _state(never))


def test_unpatch_after_a_cast_gives_a_table_the_never_patched_values() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos = TutorialPositionalEncoding(64, max_len=2048)

    model = Model()
    never = copy.deepcopy(model)
    assert pt.patch(model).replaced
    model.to(torch.bfloat16)
    never.to(torch.bfloat16)
    assert pt.unpatch(model) == 1 and torch.equal(model.pos.pe, never.pos.pe)


def test_unpatch_leaves_what_the_user_changed_since_the_patch() -> None:
    make, _ = SINUSOIDAL["xglm"]
    torch.manual_seed(0)
    model = make()
    pt.patch(model)
    table = model.model.embed_positions.weights
    with torch.no_grad():
        table.add_(1.0)  # the user's own values (trained, or a checkpoint's)
    changed = table.clone()
    assert pt.unpatch(model) == 0 and torch.equal(model.model.embed_positions.weights, changed)
    llama = _llama()
    pt.patch(llama)
    mine = nn.Identity()
    llama.model.rotary_emb = mine  # the user's own module in its place
    assert pt.unpatch(llama) == 0 and llama.model.rotary_emb is mine


def test_the_original_follows_the_replacement_but_stays_out_of_its_state() -> None:
    model = _llama()
    keys = set(model.state_dict())
    pt.patch(model)
    original = model.model.rotary_emb.__dict__[patching._ORIGINAL]
    assert set(model.state_dict()) == keys
    assert all(m is not original for m in model.modules())
    model.to(torch.float16)
    assert original.inv_freq.dtype == torch.float16
    twin = copy.deepcopy(model)
    assert pt.unpatch(twin) == 1 and twin.model.rotary_emb.inv_freq.dtype == torch.float16


# --- 5. all or nothing ------------------------------------------------------------------------------------


def test_a_proof_that_raises_leaves_the_model_as_it_was() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = _llama()  # its rotary: proven first
            self.extra = _Holder(  # then a table that cannot be read: a sparse tensor
                torch.sparse_coo_tensor(
                    torch.tensor([[0, 1], [2, 3]]), torch.tensor([1.0, 2.0]), (64, 16), check_invariants=True
                )
            )

    model = Model()
    modules, state = _modules(model), _state(model.lm)
    with pytest.raises(RuntimeError, match="sparse"):
        pt.patch(model)
    assert _modules(model) == modules and _same_state(model.lm, state)
    assert patching._ORIGINALS not in model.__dict__ and pt.unpatch(model) == 0


def test_a_swap_that_raises_undoes_those_done_before(monkeypatch: pytest.MonkeyPatch) -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos = TutorialPositionalEncoding(64, max_len=512)  # overwritten first
            self.lm = _llama()  # then its rotary swapped: fails
            self.other = _llama(seed=1)

    model = Model()
    modules, state = _modules(model), _state(model)
    calls = []
    set_module = patching._set

    def failing(model, path, module):
        calls.append(path)
        if len(calls) == 2:  # the second rotary's swap
            raise RuntimeError("injected")
        set_module(model, path, module)

    monkeypatch.setattr(patching, "_set", failing)
    with pytest.raises(RuntimeError, match="injected"):
        pt.patch(model, fused=True)
    assert calls[:2] == ["lm.model.rotary_emb", "other.model.rotary_emb"]
    assert _modules(model) == modules and _same_state(model, state)
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert patching._ORIGINALS not in model.__dict__
    monkeypatch.undo()
    report = pt.patch(model, fused=True)  # and it patches whole afterwards
    assert [c.kind for c in report.replaced] == ["table", "rotary", "rotary", "rotary-apply"]


# --- 6. the model's own forward is the last proof ----------------------------------------------------------


def test_a_swap_the_models_forward_cannot_run_is_undone_and_declined() -> None:
    model = _llama()
    rotary = model.model.rotary_emb
    rotary._window = 8  # a private attribute the model's own code reads (public plain ones are borrowed)
    model.model.register_forward_pre_hook(lambda module, args: module.rotary_emb._window and None)
    state, tokens = _state(model), _ids()
    with torch.no_grad():
        before = model(tokens).logits
    report = pt.patch(model)
    (component,) = report.components
    assert not component.replaced and model.model.rotary_emb is rotary and _same_state(model, state)
    assert component.reason.startswith(
        "the model's own forward on probe inputs after the swaps: its forward "
    )
    assert "AttributeError" in component.reason and "(every swap undone)" in component.reason
    assert "_posenc_originals" not in vars(model)
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, before)


def test_a_swap_that_moves_the_outputs_is_undone_and_declined(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _llama()
    exact_forward = patching._PatchedRotary.forward

    def turned(self, x, position_ids, *rest):  # sin for cos inside the model only (given its hidden states)
        cos, sin = exact_forward(self, x, position_ids, *rest)
        return (sin, cos) if x.dim() == 3 else (cos, sin)

    monkeypatch.setattr(patching._PatchedRotary, "forward", turned)
    state = _state(model)
    (component,) = pt.patch(model, fused=False).components
    assert not component.replaced and _same_state(model, state)
    assert "the outputs moved by" in component.reason and not isinstance(
        model.model.rotary_emb, pt.RotaryEmbedding
    )


def test_a_proven_swap_says_the_models_forward_agreed() -> None:
    (component,) = pt.patch(_llama()).components
    assert component.replaced and component.reason.endswith("; the model's forward: outputs as before")


def test_an_m_rope_layout_is_the_one_its_module_runs() -> None:
    def qwen2_vl(heads: int = 4, **rope: object) -> nn.Module:
        torch.manual_seed(0)
        text = dict(**SMALL, max_position_embeddings=4096, rope_scaling={"type": "mrope", **rope})
        text.update(hidden_size=128, num_attention_heads=1, num_key_value_heads=1) if heads == 1 else None
        vision = dict(depth=1, embed_dim=32, num_heads=2, hidden_size=64)
        return T.Qwen2VLForConditionalGeneration(T.Qwen2VLConfig(text_config=text, vision_config=vision))

    # at text positions (three equal ids) every layout is plain RoPE: three different ids tell them apart;
    # a config that says interleaved where its module runs blocks: Qwen2-VL's code takes blocks whatever the
    # flag says, and so does posenc's reading of its config (it read the flag, and the patch then read the
    # blocks from the module's values, saying the config disagreed)
    model = qwen2_vl(mrope_section=[2, 3, 3], mrope_interleaved=True)
    assert rope.config(model.config).mrope_interleaved is False
    ids = torch.tensor([[0, 5, 9, 300]]).expand(3, 1, -1) * torch.tensor([1, 2, 3])[:, None, None]
    x = torch.zeros(1, dtype=torch.float32)
    before = model.model.language_model.rotary_emb(x, ids)
    claimed = pt.patch(model)
    (text,) = [c for c in claimed.components if c.path == "model.language_model.rotary_emb"]
    assert text.replaced and "its config says" not in text.reason, text.reason
    after = model.model.language_model.rotary_emb(x, ids)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before, after, strict=True))
    assert [c.replaced for c in pt.patch(qwen2_vl(mrope_section=[2, 3, 3])).components] == [True, True]
    # a module that splits by its family's default section while its config names none: built with it
    # where it fits its head (proven on three different ids, as any), said otherwise
    (_, left) = pt.patch(qwen2_vl()).components
    said = "mrope_section [16, 24, 24] (its config names none) covers 64 frequencies and it holds 8"
    assert not left.replaced and said in left.reason and "a rotated width of 128" in left.reason
    # where the default fits the head, reading the config takes it as the model's code does
    one_head = qwen2_vl(heads=1)
    assert rope.config(one_head.config).mrope_section == (16, 24, 24)
    (_, made) = pt.patch(one_head).components
    assert made.replaced, made.reason


def test_an_m_rope_of_a_section_per_layer_type_is_declined_before_any_forward() -> None:
    """Cohere Compass's text rotary splits each layer type's frequencies by its own section over (3, B, L)
    ids: posenc's per-layer rotaries take sections from a config, so it is left alone, saying so, where
    text ids alone would have shown equal values."""
    from tests.support import zoo

    model = zoo.build("cohere_compass_text")[0]
    state = _state(model)
    (left,) = pt.patch(model).components
    assert not left.replaced and "its mrope_section is one per layer type" in left.reason, left.reason
    assert _same_state(model, state) and not isinstance(model.model.rotary_emb, pt.RotaryEmbedding)


def test_a_rotary_whose_own_forward_raises_on_the_probe_is_left_alone_saying_so(monkeypatch) -> None:
    """HunYuan-VL's at a config without its mrope_section: the signature is (x, position_ids), its own
    code raises: the reason names that, not another form."""
    model = _llama()
    rotary = type(model.model.rotary_emb)

    def broken(self, x, position_ids):
        raise TypeError("object of type 'NoneType' has no len()")

    monkeypatch.setattr(rotary, "forward", broken)
    state = _state(model)
    (left,) = pt.patch(model).components
    said = (
        "its own forward(x, position_ids) raises TypeError on position ids 0 .. 3 (its code, at this "
        "config): object of type"
    )
    assert not left.replaced and left.reason.startswith(said), left.reason
    assert _same_state(model, state) and type(model.model.rotary_emb) is rotary


def test_a_width_of_each_layer_types_own_is_read_from_its_frequencies_audited_and_made_exact() -> None:
    """dots3's text rotary: per layer type, a head of 256 rotated a quarter (its config's MLA fields gave
    posenc 16, the factor applied to qk_rope_head_dim 64 again; now 64, as transformers takes it): each
    type's width read from its own inv_freq agrees, its values proven, audited before and after, the model's
    outputs as before."""
    import posenc
    from tests.support import zoo

    model = zoo.build("dots3_note_text")[0]
    ids = torch.arange(12)[None]
    with torch.no_grad():
        before = model(input_ids=ids).logits
    judged = [c for c in posenc.audit(model, samples=64).components if c.kind == "rotary"]
    assert {c.layer_type for c in judged} == {"indexed_attention", "sliding_attention"}
    assert all(c.report is not None for c in judged), [c.note for c in judged]
    (made,) = pt.patch(model).replaced
    assert "its config's fields give" not in made.reason, made.reason
    assert {p.rotary_dim for p in model.model.rotary_emb.layer_params.values()} == {64}
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, before, atol=1e-4)
    assert posenc.audit(model, samples=64).passed


class _StaleByLength(T.models.llama.modeling_llama.LlamaRotaryEmbedding):
    """Caches its (cos, sin) by the number of positions: a second call of one length at other positions gets
    the first's values (every fresh probe equals the config's RoPE)."""

    def forward(self, x, position_ids):
        cache = self.__dict__.setdefault("_by_length", {})
        if position_ids.shape[-1] not in cache:
            cache[position_ids.shape[-1]] = super().forward(x, position_ids)
        return cache[position_ids.shape[-1]]


class _FirstRow(T.models.llama.modeling_llama.LlamaRotaryEmbedding):
    """The first row's positions for the whole batch (the probes are of one row)."""

    def forward(self, x, position_ids):
        return super().forward(x, position_ids[:1])


def _stale_forward(self, x, position_ids):  # _StaleByLength's, as a function of the module
    cache = self.__dict__.setdefault("_by_length", {})
    if position_ids.shape[-1] not in cache:
        cache[position_ids.shape[-1]] = type(self).forward(self, x, position_ids)
    return cache[position_ids.shape[-1]]


def _replaced_method(self, x, position_ids):  # transformers' own forward, patched onto its class from here
    return T.models.llama.modeling_llama.LlamaRotaryEmbedding.__dict__["forward"](self, x, position_ids)


@pytest.mark.parametrize("code", ["stale cache", "first row", "hook", "class method", "partial"])
def test_a_rotary_of_code_posenc_does_not_know_is_left_alone_though_equal_at_every_probe(code) -> None:
    """Its values equal the config's RoPE at every probe (each a first call, of one row, in float32), and in
    the model they do not: generate after 6 ids gave other tokens than the original's (the stale cache), the
    second row of a batch was off by 7.8 (the first row's positions). Code that is not transformers' own is
    declined, whatever the probes show."""
    model = _llama(256)
    rotary = model.model.rotary_emb
    if code == "stale cache":
        rotary.__class__ = _StaleByLength
    elif code == "first row":
        rotary.__class__ = _FirstRow
    elif code == "hook":
        rotary.register_forward_hook(lambda module, args, out: out)
    elif code == "partial":  # set on the instance as accelerate sets its hooks, around code of its own
        rotary.forward = functools.partial(_stale_forward, rotary)
    else:
        rotary.__class__ = type("Patched", (type(rotary),), {"__module__": type(rotary).__module__})
        rotary.__class__.forward = _replaced_method
    state = _state(model)
    (component,) = pt.patch(model).components
    assert not component.replaced and model.model.rotary_emb is rotary, component.reason
    assert component.reason.startswith("equal to this config's RoPE at its probes, but "), component.reason
    assert "with code of its own, what it computes at another batch, type, length or call" in component.reason
    assert _same_state(model, state) and pt.unpatch(model) == 0


def test_an_audit_leaves_a_grown_dynamic_rotary_as_it_was() -> None:
    """Its probes reset Hugging Face's "dynamic" module to its original length: the model's next call then
    used other frequencies (logits off by 5.6 after 100 tokens, audit, 80 tokens)."""
    import posenc

    model = _llama(64, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    reference = copy.deepcopy(model)
    with torch.no_grad():
        model(_ids(100, seed=1))
        reference(_ids(100, seed=1))
    posenc.audit(model)
    assert int(model.model.rotary_emb.max_seq_len_cached) == 100
    with torch.no_grad():
        assert torch.equal(model(_ids(80, seed=2)).logits, reference(_ids(80, seed=2)).logits)


@pytest.mark.parametrize("edit", ["scaled", "zeroed"])
def test_an_audit_names_frequencies_that_are_not_the_configs_not_the_rounding_of_an_angle(edit) -> None:
    """inv_freq × 1.0001 was "angles formed in float16", two zeroed frequencies "angles formed in bfloat16":
    both models form their angles in float32; their error grows ∝ p from the frequencies."""
    import posenc

    model = _llama(256)
    with torch.no_grad():
        if edit == "scaled":
            model.model.rotary_emb.inv_freq *= 1.0001
        else:
            model.model.rotary_emb.inv_freq[-2:] = 0
    (component,) = posenc.audit(model).components
    titles = [f.text.split(":")[0] for f in component.report.findings]
    assert titles == ["frequencies not rope-default's"], component.report.as_text()
    assert (f"{1e-4:.3g}" if edit == "scaled" else "up to 1 of themselves") in component.report.findings[
        0
    ].text


def test_accelerates_device_hook_around_the_class_forward_is_not_code_of_its_own() -> None:
    """accelerate's add_hook_to_module sets forward on the instance (a partial of its new_forward around the
    class's own, kept as _old_forward): a model dispatched with a device_map is still patched."""
    model = _llama(256)
    rotary = model.model.rotary_emb
    hook = type("AlignDevicesHook", (), {"__module__": "accelerate.hooks"})()
    rotary._hf_hook, rotary._old_forward = hook, rotary.forward

    def new_forward(module, *args, **kwargs):
        return module._old_forward(*args, **kwargs)

    rotary.forward = functools.update_wrapper(functools.partial(new_forward, rotary), rotary._old_forward)
    (component,) = pt.patch(model).components
    assert component.replaced, component.reason


def _guided_diffusion_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepEmbedderAutoScale(nn.Module):
    """t in [0, 1] read as t · 1000 (flow matching and DDPM in one model): equal to diffusers' embedding at
    the probes t = 0 .. 999, and not at t = 0.5."""

    def forward(self, timesteps):
        if timesteps.max() <= 1.0:
            timesteps = timesteps * 1000
        return _guided_diffusion_embedding(timesteps, 32)


class TimestepEmbedderJitter(nn.Module):
    """Jittered timesteps in training only (patched in eval)."""

    def forward(self, timesteps):
        if self.training:
            timesteps = timesteps + torch.rand_like(timesteps)
        return _guided_diffusion_embedding(timesteps, 32)


@pytest.mark.parametrize("embedder", [TimestepEmbedderAutoScale, TimestepEmbedderJitter])
def test_a_timestep_module_of_code_of_its_own_is_left_alone_though_equal_at_its_probes(embedder) -> None:
    """User-written forward(timesteps) modules were replaced on their values at t = 0 .. 999: after the
    patch t = [0.1, 0.5, 0.9] moved the output by 1.1 (of 1.17), the jitter was gone in training."""
    model = nn.Sequential(embedder(), nn.Linear(32, 8)).eval()
    state = _state(model)
    (component,) = pt.patch(model).components
    assert not component.replaced, component.reason
    assert "its values at the probe positions are diffusers-timestep" in component.reason, component.reason
    assert "with code of its own" in component.reason and _same_state(model, state)


# --- mutants: a model whose own code computes otherwise than its config says (a hostile review's cases) ---


def _dynamic_llama(dtype: torch.dtype = torch.float32) -> nn.Module:
    return _llama(256, rope_scaling={"rope_type": "dynamic", "factor": 2.0}).to(dtype)


@pytest.mark.parametrize(
    ("dtype", "wrong_up_to"),
    [(torch.float32, 1024), (torch.bfloat16, None)],
    ids=["float32, wrong at lengths up to 1024 only", "bfloat16, wrong at every grown length"],
)
def test_a_dynamic_rotarys_growth_law_is_proven_at_lengths_between(monkeypatch, dtype, wrong_up_to) -> None:
    """Its law was checked at one grown length (2**20) alone, and in bfloat16 with its config's 16-bit
    slack: a law 1% off up to 1024 (float32), or everywhere past the limit (bfloat16), was 'replaced'."""
    from transformers import modeling_rope_utils

    own = modeling_rope_utils.ROPE_INIT_FUNCTIONS["dynamic"]

    def off(config, device=None, seq_len=None, layer_type=None):
        inv_freq, scaling = own(config, device, seq_len=seq_len, layer_type=layer_type)
        wrong = seq_len is not None and (wrong_up_to is None or seq_len <= wrong_up_to)
        return inv_freq * (1.01 if wrong else 1.0), scaling

    model = _dynamic_llama(dtype)
    monkeypatch.setitem(modeling_rope_utils.ROPE_INIT_FUNCTIONS, "dynamic", off)
    component = pt.patch(model).components[0]
    assert not component.replaced and "not this config's RoPE" in component.reason, component.reason
    monkeypatch.setitem(modeling_rope_utils.ROPE_INIT_FUNCTIONS, "dynamic", own)
    assert pt.patch(_dynamic_llama(dtype)).components[0].replaced  # its own law: replaced


def test_a_wrapper_with_the_librarys_module_name_and_a_rebound_helper_are_seen(monkeypatch) -> None:
    """``functools.wraps`` copies ``__module__``: a rotary forward wrapped so (scaling cos/sin in 16-bit
    types only) passed as the library's own; a ``rotate_half`` rebound in the modeling module (used by the
    library's own apply) passed the fused apply's check. Both are code of the user's file: declined."""
    from transformers.models.llama import modeling_llama

    rotary = modeling_llama.LlamaRotaryEmbedding
    own_forward = rotary.forward

    @functools.wraps(own_forward)
    def forward(self, x, position_ids, *args, **kwargs):
        cos, sin = own_forward(self, x, position_ids, *args, **kwargs)
        return (cos, sin) if x.dtype == torch.float32 else (cos * 1.03, sin * 1.03)

    monkeypatch.setattr(rotary, "forward", forward)
    component = pt.patch(_llama()).components[0]
    assert not component.replaced and "LlamaRotaryEmbedding.forward runs code of" in component.reason
    monkeypatch.setattr(rotary, "forward", own_forward)

    own_turn = modeling_llama.rotate_half
    monkeypatch.setattr(
        modeling_llama, "rotate_half", lambda x: own_turn(x) * (1.05 if x.dtype != torch.float32 else 1)
    )
    apply = pt.patch(_llama(), fused=True).components[-1]
    assert not apply.replaced and "which calls rotate_half" in apply.reason, apply.reason

    class Turn:  # a callable object, and a partial with arguments of its own: seen as well
        def __call__(self, x):
            return own_turn(x)

    monkeypatch.setattr(modeling_llama, "rotate_half", Turn())
    assert not pt.patch(_llama(), fused=True).components[-1].replaced
    monkeypatch.setattr(modeling_llama, "rotate_half", functools.partial(lambda x, k: own_turn(x) * k, k=1.0))
    assert "with arguments of its own" in pt.patch(_llama(), fused=True).components[-1].reason
    monkeypatch.setattr(modeling_llama, "rotate_half", functools.partial(own_turn))  # the same function
    assert pt.patch(_llama(), fused=True).components[-1].replaced


def test_a_timestep_embedding_whose_module_helper_is_rebound_or_that_treats_fractions_otherwise_is_declined(
    monkeypatch,
) -> None:
    """diffusers' ``Timesteps.forward`` calls its module's ``get_timestep_embedding``: rebound to one that
    floors t (equal at t = 0 .. 1000, the only probe then), it was 'replaced'. Declined, naming it; and
    a forward that rescales a batch of t in [0, 1] shows on the fractional probes."""
    from diffusers.models import embeddings

    own = embeddings.get_timestep_embedding

    def floored(t, *args, **kwargs):  # floors float64 timesteps only: no probe shows it
        return own(t.floor() if t.dtype == torch.float64 else t, *args, **kwargs)

    monkeypatch.setattr(embeddings, "get_timestep_embedding", floored)
    component = pt.patch(nn.Sequential(embeddings.Timesteps(32, True, 0))).components[0]
    assert not component.replaced and "calls get_timestep_embedding" in component.reason, component.reason
    monkeypatch.setattr(embeddings, "get_timestep_embedding", lambda t, *a, **k: own(t.floor(), *a, **k))
    component = pt.patch(nn.Sequential(embeddings.Timesteps(32, True, 0))).components[0]
    assert not component.replaced and "not diffusers' timestep embedding" in component.reason  # t = 10.5
    monkeypatch.setattr(embeddings, "get_timestep_embedding", own)

    def rescaling(self, timesteps):  # diffusers' own module, as if its forward did this
        return embeddings.Timesteps.forward(
            self, timesteps * 1000 if bool(timesteps.max() <= 1) else timesteps
        )

    cls = type(
        "Timesteps", (embeddings.Timesteps,), {"forward": rescaling, "__module__": embeddings.__name__}
    )
    monkeypatch.setattr(patching, "_foreign_code", lambda module: None)  # only the probes judge it here
    component = pt.patch(nn.Sequential(cls(32, True, 0))).components[0]
    assert not component.replaced and "not diffusers' timestep embedding" in component.reason, (
        component.reason
    )
