"""The family table of ``posenc.torch.patch`` (``posenc.torch.families``): its rows describe the installed
transformers; a family with no row gets the generic row where its attention calls ``apply_rotary_pos_emb``
alone, and is declined with the reason where it calls another apply; a row that no longer describes its
library is declined, not trusted; and the position ids reach posenc's apply through one named,
per-thread channel tied to the very cos tensor the patched rotary embedding returned."""

from __future__ import annotations

import copy
import importlib
import inspect
import threading

import pytest
import torch
from torch import nn

import posenc.torch as pt
from posenc.torch import families, patching

transformers = pytest.importorskip("transformers")
T = transformers

from transformers.models.llama import modeling_llama  # noqa: E402  (needs transformers)
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb  # noqa: E402

from tests.torch.test_patching import DECODERS  # noqa: E402

CONFIG = dict(
    vocab_size=101,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=4096,
)


@pytest.mark.parametrize("row", list(families.FAMILIES.values()), ids=lambda r: r.model_type)
def test_every_row_describes_the_installed_transformers(row: families.Family) -> None:
    assert row.model_type in T.CONFIG_MAPPING  # the config's model_type names the module
    module = importlib.import_module(row.module)
    for name in row.attention:
        forward = inspect.unwrap(getattr(module, name).forward)
        assert forward.__module__ == row.module and forward.__qualname__ == f"{name}.forward"
        assert all(apply.name in forward.__code__.co_names for apply in row.calls), (name, row.calls)
    for apply in (*row.calls, *row.leave):
        function = getattr(module, apply.name)
        assert (
            str(inspect.signature(function)).replace(": torch.Tensor", "").split(" ->")[0] == apply.signature
        )
        assert apply.layout in ("half", "interleaved")
    assert families.family_of(row.module) is row


@pytest.mark.parametrize("name", DECODERS)
def test_every_decoder_the_tests_patch_has_its_row(name: str) -> None:
    with torch.device("meta"):
        model = DECODERS[name][0]()
    modules = {type(m).forward.__module__ for m in model.modules() if type(m).__name__.endswith("Attention")}
    assert modules and all(families.family_of(m) is not families.GENERIC for m in modules), modules


# --- a family of no row ------------------------------------------------------------------------------------


def apply_rotary_custom(q, k, cos, sin):  # an apply the table does not know
    return apply_rotary_pos_emb(q, k, cos, sin)


class _Attention(nn.Module):
    """An attention of no row (this test module's): it calls apply_rotary_pos_emb alone."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q, k = (p(x).view(*x.shape[:2], 4, 16).transpose(1, 2) for p in (self.q, self.k))
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q @ k.transpose(-1, -2)


class _CustomAttention(_Attention):
    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q, k = (p(x).view(*x.shape[:2], 4, 16).transpose(1, 2) for p in (self.q, self.k))
        q, k = apply_rotary_custom(q, k, cos, sin)
        return q @ k.transpose(-1, -2)


class _Model(nn.Module):
    def __init__(self, attention: type[nn.Module]) -> None:
        super().__init__()
        self.rotary_emb = modeling_llama.LlamaRotaryEmbedding(T.LlamaConfig(**CONFIG))
        self.attn = attention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rotary_emb(x, torch.arange(x.shape[1])[None])
        return self.attn(x, cos, sin)


def test_a_family_of_no_row_that_calls_the_standard_apply_alone_gets_the_generic_row() -> None:
    torch.manual_seed(0)
    model = _Model(_Attention).eval()
    unfused = copy.deepcopy(model)
    pt.patch(unfused, fused=False)
    apply = pt.patch(model, fused=True).components[-1]
    assert apply.replaced and apply.path == "attn" and "the family table's row generic" in apply.reason
    x = torch.randn(2, 40, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(model(x), unfused(x))  # float32: the same bits
    assert pt.unpatch(model) == 2 and "forward" not in model.attn.__dict__


def test_a_family_of_no_row_that_calls_another_apply_is_declined_with_the_reason() -> None:
    model = _Model(_CustomAttention)
    apply = pt.patch(model, fused=True).components[-1]
    assert not apply.replaced and apply.path == "attn"
    assert (
        apply.reason
        == "attn rotates by apply_rotary_custom, which the family table does not know: its apply kept"
    )
    assert "forward" not in model.attn.__dict__ and model.rotary_emb.fused is False


def test_a_row_that_no_longer_describes_its_library_is_declined(monkeypatch: pytest.MonkeyPatch) -> None:
    row = families.Family("custom", ("_Attention",), calls=(families.INTERLEAVED_PAIRS,))
    monkeypatch.setitem(families.FAMILIES, __name__, row)  # a row whose class calls another apply now
    apply = pt.patch(_Model(_Attention), fused=True).components[-1]
    assert not apply.replaced
    assert apply.reason == (
        "attn: the family table's row 'custom' says _Attention.forward calls "
        "apply_rotary_pos_emb_interleave, which it does not (another transformers version?): the model's "
        "apply kept"
    )


# --- the position ids' channel ------------------------------------------------------------------------------


def test_the_exact_apply_gets_the_ids_of_the_very_cos_it_is_given_in_its_own_thread(monkeypatch) -> None:
    monkeypatch.setattr(patching, "KERNEL_DEVICES", ["cuda", "cpu"])  # record on the CPU too
    calls = []
    exact = patching.by_positions
    monkeypatch.setattr(patching, "by_positions", lambda *a, **kw: calls.append(a[2]) or exact(*a, **kw))
    torch.manual_seed(0)
    model = DECODERS["llama3.1"][0]().eval()
    unfused = copy.deepcopy(model)
    pt.patch(unfused, fused=False)
    assert pt.patch(model, fused=True).components[-1].replaced
    calls.clear()  # the patch's own proof ran the model's forward on 16 probe tokens
    tokens = torch.randint(3, 101, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, unfused(tokens).logits)
    assert len(calls) == 2 and all(torch.equal(ids, torch.arange(24)[None]) for ids in calls)  # both layers
    ids = torch.arange(5)[None] * 7
    cos, _ = model.model.rotary_emb(torch.zeros(1), ids)
    issued = patching._issued(cos)
    assert issued is not None and issued[0] is ids and issued[1] is model.model.rotary_emb.params
    assert patching._issued(cos.clone()) is None  # equal values, another tensor: nothing
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(patching._issued(cos)))
    thread.start()
    thread.join()
    assert elsewhere == [None]  # another thread's channel is its own
    assert not any(name.startswith("_posenc") for name in vars(cos))  # nothing rides on the tensor
