"""A time embedding of periods (posenc.torch.period_time): π0's action-time embedding read, proven,
audited (the float32 cause), patched exact and given back; each value of posenc's equivalent against
mpmath, the quarter turns exactly; periods posenc has no exact equivalent of, and other values under the
same names, refused."""

from __future__ import annotations

import mpmath
import pytest
import torch

import posenc
import posenc.torch as pt
from posenc.torch import period_time
from tests.support import reference

T = pytest.importorskip("transformers")
from transformers.models.pi0.modeling_pi0 import PI0TimestepEmbeddings  # noqa: E402


def _pi0(width: int = 32, **periods: float) -> PI0TimestepEmbeddings:
    config = T.PI0Config(**periods)
    config.dit_config.hidden_size = width
    return PI0TimestepEmbeddings(config)


def test_values_against_mpmath_and_quarter_turns_exactly() -> None:
    width, count = 16, 8
    times = [0.0, 0.5, 0.25, 1 / 3, 0.123, 0.999, 1.0, 7.5, 63.0]
    values = period_time.PeriodTime(width, 0.004, 4.0)(torch.tensor(times))
    assert values.shape == (len(times), width) and values.dtype == torch.float32
    for row, t in enumerate(times):
        t = float(torch.tensor(t, dtype=torch.float32))  # the time as the module is given it
        for k in range(count):
            with mpmath.workdps(50):  # the periods as written: 0.004 and 4, decimal
                omega = (
                    2 * mpmath.pi / (mpmath.mpf("0.004") * mpmath.mpf(1000) ** (mpmath.mpf(k) / (count - 1)))
                )
                angle = mpmath.mpf(t) * omega
                want = (
                    reference.round_to(mpmath.sin(angle), "float32"),
                    reference.round_to(mpmath.cos(angle), "float32"),
                )
            assert (float(values[row, k]), float(values[row, count + k])) == want, (t, k)
    # t = 0.5: the first frequency 500π gives 250π, the last π/2 gives π/4: sin exactly 0, cos exactly 1
    assert float(values[1, 0]) == 0.0 and float(values[1, count]) == 1.0


def test_float64_times_give_float64_as_the_originals_product_does_and_a_gradient_is_refused() -> None:
    """π0's float32 frequencies times float64 times are float64 (posenc gave float32); a time that
    requires a gradient got values that carried none, silently: refused, naming ``time``."""
    module, mine = period_time.PeriodTime(16, 0.004, 4.0), _pi0(16)
    times = torch.tensor([0.3, 0.7, 0.123456789], dtype=torch.float64)
    got, want = module(times), mine(times)
    assert got.dtype == want.dtype == torch.float64
    assert float((got - want).abs().max()) < 1e-4  # its float32 frequencies: ~4e-5 at ω = 500π
    with mpmath.workdps(50):
        angle = mpmath.mpf(0.123456789) * 2 * mpmath.pi / mpmath.mpf("0.004")
        assert abs(float(got[2, 0]) - float(mpmath.sin(angle))) <= 1.2e-16
    with pytest.raises(TypeError, match=r"time: a gradient is asked for.*time\.detach\(\)"):
        module(times.clone().requires_grad_())


def test_pi0s_time_embedding_is_read_proven_audited_patched_and_given_back() -> None:
    module = _pi0()
    exact = period_time.read_period_time(module)
    assert isinstance(exact, period_time.PeriodTime) and exact.width == 32 and exact.theta == 1000.0
    difference, allowed = period_time.prove_period_time(module, exact)
    assert 0 < difference <= allowed
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    (judged,) = before.components
    assert judged.judged and not judged.passed and [f.kind for f in judged.report.findings] == ["float32"]
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["period-time"]
    assert posenc.audit(model, samples=32).passed
    t = torch.rand(5)
    out = model[0](t)
    assert out.shape == (5, 32) and out.dtype == torch.float32
    assert torch.equal(out, exact(t))
    pt.unpatch(model)
    assert model[0] is module


@pytest.mark.parametrize(
    "periods", [{"max_period": 3.0}, {"min_period": 0.003}], ids=["max-not-a-power-of-two", "ratio-not-whole"]
)
def test_periods_posenc_has_no_exact_equivalent_of_are_not_read(periods: dict) -> None:
    module = _pi0(**periods)
    assert period_time.read_period_time(module) is None
    assert period_time.unsupported(32, 0.004, 4.0) is None
    with pytest.raises(ValueError, match=r"max_period|min_period"):
        period_time.PeriodTime(32, periods.get("min_period", 0.004), periods.get("max_period", 4.0))


def test_other_values_under_the_same_names_are_refused_not_replaced() -> None:
    module = _pi0()
    exact = period_time.read_period_time(module)
    module.sinusoid_freq.mul_(1.001)  # frequencies that are not its config's
    proof = period_time.prove_period_time(module, exact)
    assert isinstance(proof, str) and proof.startswith("not the time embedding its config names")
    model = torch.nn.Sequential(module)
    report = pt.patch(model)
    assert not report.replaced and model[0] is module


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_boolean_or_complex_times_are_refused_naming_time(dtype) -> None:
    """Boolean times were encoded as 0 and 1 (complex ones lost their imaginary part); now refused."""
    with pytest.raises(
        TypeError, match=r"^time must be a tensor of real numbers; got a (bool|complex64)"
    ) as raised:
        period_time.PeriodTime(4, 0.004, 4.0)(torch.tensor([1, 0]).to(dtype))
    assert raised.value.parameter == "time"
