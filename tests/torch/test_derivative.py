"""The encodings' derivative in real positions (``torch.autograd``, ``torch.func``, forward mode, compiled),
against mpmath's exact d/dp sin(p ω) = ω cos(p ω); the rotary cos/sin, which define none, refuse."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as forward_ad

import posenc.torch as pt
from tests.support import reference as ref

POSITIONS = [0.5, 3.0, 1000.25, -77.125, 123456.5]
CASES = [  # d_model, options: every layout, each odd-width rule, a shift and a scale
    (8, {}),
    (7, {"odd": "zero", "layout": "sin_cos"}),
    (7, {"odd": "literal", "layout": "interleaved", "shift": 1.0}),
    (7, {"odd": "drop", "layout": "cos_sin", "scale": 0.3}),
    (9, {"odd": "literal", "layout": "sin_cos", "base": 100.0}),
]


def _within_two_units(got: np.ndarray, position: float, d_model: int, options: dict) -> None:
    """Each column within 2 units of float64 at ω_i plus one at the exact slope (cos rounded, times ω)."""
    options = {"base": 10000.0, "layout": "interleaved", **options}
    exact = ref.slope(position, d_model, **options)
    bound = 2 * max(float(np.spacing(abs(float(e)))) for e in exact) + 2.0**-60
    for j, (g, e) in enumerate(zip(got.tolist(), exact, strict=True)):
        assert abs(mpmath.mpf(g) - e) <= bound, (position, d_model, options, j, g, float(e))


@pytest.mark.parametrize(("d_model", "options"), CASES)
def test_the_derivative_is_the_exact_one_in_float64_every_layout_and_odd_width(d_model, options):
    p = torch.tensor(POSITIONS, dtype=torch.float64)
    _, rate = torch.func.jvp(
        lambda t: pt.encode(t, d_model, dtype=torch.float64, **options), (p,), (torch.ones_like(p),)
    )
    for k, position in enumerate(POSITIONS):
        _within_two_units(rate[k].numpy(), position, d_model, options)
    leaf = p.clone().requires_grad_()
    values = pt.encode(leaf, d_model, dtype=torch.float64, **options)
    weights = torch.linspace(-1, 1, d_model, dtype=torch.float64)
    (values * weights).sum().backward()  # backward: the weighted sum of the same columns
    assert torch.allclose(leaf.grad, (rate * weights).sum(-1), rtol=0, atol=1e-12)
    assert torch.equal(values.detach(), pt.encode(p, d_model, dtype=torch.float64, **options))  # same bits


def test_every_way_of_differentiating_gives_the_same_derivative_and_the_second_one_is_defined():
    p = torch.tensor([2.5, 40.0, 999.75], dtype=torch.float64)

    def f(t):
        return pt.encode(t, 6, dtype=torch.float64)

    assert torch.autograd.gradcheck(f, (p.clone().requires_grad_(),))
    assert torch.autograd.gradgradcheck(f, (p.clone().requires_grad_(),))
    jacobian = torch.func.jacrev(f)(p)  # (3, 6, 3): each row depends on its own position only
    forward = torch.func.jacfwd(f)(p)
    assert torch.equal(jacobian, forward)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(p, torch.ones_like(p))
        tangent = forward_ad.unpack_dual(f(dual)).tangent
    assert torch.equal(tangent, torch.einsum("kjk->kj", jacobian))
    second = torch.func.grad(lambda t: torch.func.grad(lambda u: f(u).sum())(t))(
        torch.tensor(2.5, dtype=torch.float64)
    )
    w = 10000.0 ** -(torch.arange(3, dtype=torch.float64) / 3)  # ω of width 6, base 10000
    want = -(w**2 * (torch.sin(2.5 * w) + torch.cos(2.5 * w))).sum()
    assert float(second) == pytest.approx(float(want), rel=1e-12)


def test_timesteps_and_the_module_pass_the_gradient_to_their_positions():
    """``Timesteps(t)`` with ``t.requires_grad`` (consistency models differentiate in t), and the module's
    real positions plus an offset: the derivative at p + offset, rounded once to float32 from float64."""
    t = torch.tensor([10.0, 999.5, 0.25], requires_grad=True)
    module = pt.Timesteps(16, True, 1.0, scale=2.0)
    out = module(t)
    assert out.requires_grad and torch.equal(out.detach(), module(t.detach()))
    weights = torch.randn(16, generator=torch.Generator().manual_seed(0))
    (out * weights).sum().backward()
    wide = t.detach().double().requires_grad_()
    (
        pt.encode(wide, 16, dtype=torch.float64, layout="cos_sin", shift=1.0, scale=2.0) * weights.double()
    ).sum().backward()
    assert torch.equal(t.grad, wide.grad.float())

    encoding = pt.SinusoidalPositionalEncoding(8, batch_first=True)
    positions = torch.tensor([[0.5, 1.5, 2.5]], requires_grad=True)
    encoding(torch.zeros(1, 3, 8), positions, offset=torch.tensor([3])).sum().backward()
    moved = (positions.detach() + 3).double().requires_grad_()
    pt.encode(moved, 8, dtype=torch.float64).sum().backward()
    assert torch.equal(positions.grad, moved.grad.float())


def test_compiled_the_same_values_and_the_same_gradient():
    module = pt.Timesteps(16, True, 0.0)
    compiled = torch.compile(module, fullgraph=True)
    t = (torch.rand(4, generator=torch.Generator().manual_seed(1)) * 1000).requires_grad_()
    weights = torch.randn(16, generator=torch.Generator().manual_seed(2))
    eager_out, compiled_out = module(t), compiled(t)
    assert torch.equal(eager_out, compiled_out)
    (eager,) = torch.autograd.grad((eager_out * weights).sum(), t)
    (traced,) = torch.autograd.grad((compiled_out * weights).sum(), t)
    assert torch.equal(eager, traced) and bool(eager.abs().sum() > 0)


def test_the_rotary_cos_sin_define_no_derivative_and_refuse():
    rotary = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    ids = torch.tensor([[0.0, 1.0]], requires_grad=True)
    with pytest.raises(TypeError, match=r"no derivative of posenc's rotary cos/sin.*positions\.detach\(\)"):
        rotary(torch.zeros(1, 1, 2, 8), ids)
    with torch.no_grad():
        cos, _ = rotary(torch.zeros(1, 1, 2, 8), ids)
    assert torch.equal(cos, rotary(torch.zeros(1, 1, 2, 8), ids.detach())[0])


def test_a_patched_diffusers_timestep_embedding_keeps_its_gradient_in_t():
    """``patch`` on a model whose timesteps require a gradient (it refused them): the gradient in t is the
    unpatched model's, to its float32 error (diffusers' angles are rounded in float32)."""
    import copy

    from diffusers.models.embeddings import TimestepEmbedding
    from diffusers.models.embeddings import Timesteps as DiffusersTimesteps

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj, self.emb = DiffusersTimesteps(64, True, 0), TimestepEmbedding(64, 32)

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return self.emb(self.proj(t))

    torch.manual_seed(0)
    plain = Embed()
    patched = copy.deepcopy(plain)
    pt.patch(patched)
    t = torch.tensor([10.0, 500.5, 999.0], requires_grad=True)
    (want,) = torch.autograd.grad(plain(t).sum(), t)
    (got,) = torch.autograd.grad(patched(t).sum(), t)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5) and bool(got.abs().min() > 0)


def test_inside_torch_compile_a_torch_func_transform_or_a_dual_tensor_is_refused_never_zero():
    """Compiled, a torch.func transform or forward-mode AD of real positions saw no derivative (zero,
    silently): it raises now; the transform around the compiled call, and backward, give it."""
    t = torch.tensor([1.0, 2.5], dtype=torch.float64)

    def f(p):
        return pt.encode(p, 8, dtype=torch.float64).sum()

    with pytest.raises(Exception):  # noqa: B017 (posenc's TypeError, or torch's own error on the way)
        torch.compile(torch.func.grad(f), backend="eager")(t[0])
    compiled = torch.compile(lambda p: pt.encode(p, 8, dtype=torch.float64), backend="eager")
    with forward_ad.dual_level(), pytest.raises(TypeError, match=r"within torch\.compile"):
        compiled(forward_ad.make_dual(t, torch.ones_like(t)))
    _, rate = torch.func.jvp(compiled, (t,), (torch.ones_like(t),))
    assert torch.allclose(rate.sum(-1), torch.func.vmap(torch.func.grad(f))(t), rtol=0, atol=1e-12)


class _Encodings(torch.nn.Module):
    """encode, Timesteps and the module with real positions: each an exact operator when exported."""

    def __init__(self):
        super().__init__()
        self.timesteps = pt.Timesteps(8, True, 0.0)
        self.module = pt.SinusoidalPositionalEncoding(8, batch_first=True)

    def forward(self, p, x):
        return pt.encode(p, 8), self.timesteps(p), self.module(x, p)


def test_an_exported_program_carries_the_derivative_however_its_positions_were_traced():
    """Exported while its positions required a gradient, a program kept the autograd.Function's forward
    and not its backward: no gradient to them, silently (only x's). Now its graph holds the operator, whose
    autograd kernel carries the derivative when the program runs: backward and dual tensors give the
    eager call's, traced with or without a gradient; a torch.func transform of the program over real
    positions raises (it gave a tangent of zero)."""
    p, x = (
        torch.tensor([0.5, 10.0, 3.0, 999.25]),
        torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(3)),
    )
    model = _Encodings()

    def gradients(run):
        leaves = p.clone().requires_grad_(), x.clone().requires_grad_()
        outputs = run(*leaves)
        sum((o * o).sum() for o in outputs).backward()
        return [o.detach() for o in outputs], [t.grad for t in leaves]

    want = gradients(model)
    for traced_with_grad in (True, False):
        example = (p.clone().requires_grad_(traced_with_grad), x.clone().requires_grad_(traced_with_grad))
        program = torch.export.export(model, example).module()
        got = gradients(program)
        assert all(torch.equal(a, b) for a, b in zip(got[0] + got[1], want[0] + want[1], strict=True))
    assert bool(want[1][0].abs().sum() > 0)
    encode = torch.export.export(_Encode(), (p,)).module()
    with forward_ad.dual_level():
        rate = forward_ad.unpack_dual(encode(forward_ad.make_dual(p, torch.ones_like(p)))).tangent
    assert torch.equal(rate, torch.func.jvp(_Encode(), (p,), (torch.ones_like(p),))[1])
    with pytest.raises(TypeError, match=r"positions are real inside a torch\.func transform of a traced"):
        torch.func.jvp(encode, (p,), (torch.ones_like(p),))


class _Encode(torch.nn.Module):
    def forward(self, p):
        return pt.encode(p, 8)


def test_forward_mode_through_an_exported_sum_and_rotation_and_an_eager_rotation():
    """Forward mode through the module with its default positions (one add_table node) and apply_rotary
    (one rotate_half node), exported: the tangent of x, q was zero (the operators fell below autograd,
    which holds forward mode); now the eager call's. Eagerly, torch.func.jvp of apply_rotary raised inside
    the one pass in C; the formula's operations carry it now."""
    generator = torch.Generator().manual_seed(4)
    x, q, k = torch.randn(2, 5, 8, generator=generator), *torch.randn(2, 1, 2, 5, 8, generator=generator)
    rope = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    cos, sin = rope(q, torch.arange(5)[None])

    class Rotate(torch.nn.Module):
        def forward(self, q, k):
            return pt.apply_rotary(q, k, cos, sin)

    module = pt.SinusoidalPositionalEncoding(8, batch_first=True).eval()
    for model, inputs in ((module, (x,)), (Rotate(), (q, k))):
        program = torch.export.export(model, inputs).module()
        ones = tuple(torch.ones_like(t) for t in inputs)
        _, want = torch.func.jvp(model, inputs, ones)
        _, got = torch.func.jvp(program, inputs, ones)
        want, got = (t if isinstance(t, tuple) else (t,) for t in (want, got))
        with forward_ad.dual_level():
            out = program(*(forward_ad.make_dual(t, o) for t, o in zip(inputs, ones, strict=True)))
            duals = [forward_ad.unpack_dual(o).tangent for o in (out if isinstance(out, tuple) else (out,))]
        assert all(torch.equal(a, b) and torch.equal(b, c) for a, b, c in zip(want, got, duals, strict=True))
        assert bool(want[0].abs().sum() > 0)
    tangent = torch.func.jvp(lambda q: pt.apply_rotary(q, k, cos, sin)[0], (q,), (torch.ones_like(q),))[1]
    assert torch.equal(tangent, pt.apply_rotary(torch.ones_like(q), k, cos, sin)[0])  # linear in q
