"""What each rope type is, in one place: one :class:`RopeType` per type in :data:`TYPES`.

A type is its scaling fields and their checks, its frequencies θ_i (the exact formula, evaluated in
:mod:`decimal`), its attention scaling m, and how it depends on the sequence length: not at all, by a base
that grows with it ("dynamic": needs the length, a host read where none is given), or by a switch between
two sets of frequencies at a fixed length ("longrope": an adapter computes both and picks on the device,
with no host read). :class:`~posenc.rope.RopeParameters` checks a record with its type, the frequencies and
the scaling of :mod:`posenc.rope.frequencies` are its type's, and every adapter (NumPy, torch eager,
compiled and fused, JAX) asks the type — never a type's name.

Adding a type is one entry of :data:`TYPES` (and its tests): its fields, its checks and its formulas,
written with the helpers below. The formulas (module docstring of :mod:`posenc.rope.frequencies`):

* ``default``:  θ_i = b^(-2i/d), m = 1;  ``linear``: θ_i / factor.
* ``dynamic``: the base grows to b' = b·s^(d/(d-2)), s = factor·L/M − (factor − 1) once L > M.
* ``yarn``: a ramp between interpolation and extrapolation; m from factor (and mscale, mscale_all_dim).
* ``longrope``: θ_i / short_factor_i, or / long_factor_i once L > original_max_position_embeddings.
* ``llama3``: wavelength bands by low_freq_factor / high_freq_factor, a smooth blend between.
* ``proportional`` (Gemma 4): exponents over the whole head, pairs past the rotated fraction get θ = 0.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from .. import validation
from ..core.highprec import pi
from ..errors import PosencTypeError, PosencValueError

#: Bounds, checked when the parameters are built (before any frequency is computed), far beyond any model but
#: keeping every frequency θ_i and the attention scaling finite and normal in float64 (and cos/sin finite in
#: every dtype): heads in use are at most 512 wide and the frequencies of a head of 2**16 take ~1 s;
#: context lengths, like positions, are below 2**31; scaling factors in use are at most ~100, and factors
#: within [2**-20, 2**20] keep θ_i <= 2**20 (so p·θ_i < 2**51); the base grows (dynamic NTK) at most by
#: (2**20 · 2**31)**2, so θ_i >= 2**-186 for a base <= 2**64 (in use: up to ~1e9); attention scalings in
#: use are ~1 to 2, and one <= 2**10 keeps A·cos finite even in float16.
MAX_HEAD_DIM = 2**16
MAX_CONTEXT = validation.MAX_POSITION
MAX_FACTOR = 2**20
MIN_FACTOR = 2.0**-20
MAX_BASE = 2**64
MAX_ATTENTION_SCALING = 2**10

Params = Any  # a RopeParameters (defined in .parameters, which imports this module)


class Ambiguous(ArithmeticError):
    """A floor or ceil whose argument is too close to an integer at the working precision: the caller
    retries with more digits."""


@dataclasses.dataclass(frozen=True)
class RopeType:
    """One rope type.

    * ``name``: as configs write it (``rope_type``).
    * ``fields``: the scaling fields it uses (the others are stored as their defaults, so that two records
      that give the same frequencies compare equal); ``defaults``: values for fields a config may omit.
    * ``check(p)``: its own rules, after the fields are normalized (raises ValueError naming the field).
    * ``frequencies(p, key)``: its θ_i as Decimals at the current decimal context's precision; ``key`` is
      what of the sequence length changes them (:meth:`seq_key`), None for the values a model is built with.
    * ``scaling(p)``: its attention scaling m (a Decimal), or None for m = 1.
    * ``grows_with_length``: the frequencies change with every length past ``max_position_embeddings``
      (the length must be given, or read from the positions on the host).
    * ``switch(p)``: for a type with two sets of frequencies, the length L past which the second applies
      (L > switch): an adapter without the length computes both and picks on the device.
    * ``full_head``: its rotary_dim is head_dim whatever partial_rotary_factor is (the unrotated pairs
      get frequency 0).
    * ``unfixed(p)``: where the frequencies fix only a combination of the fields (not each), that
      combination in words: what a fit from a cos/sin buffer can tell.
    * ``rarity``: how unusual the type is (0: the plain default), for choosing the plainest of several
      explanations of a fitted buffer; ``usual``: the published values of fields that models share.
    * ``factor_required``: a config must give ``factor``; ``min_factor``: its least value (1: a factor
      stretches the context; a type where it only divides the frequencies takes less).
    """

    name: str
    fields: tuple[str, ...]
    frequencies: Callable[[Params, int | None], list[Decimal]]
    check: Callable[[Params], None] = lambda p: None
    scaling: Callable[[Params], Decimal] | None = None
    grows_with_length: bool = False
    switch: Callable[[Params], int] | None = None
    full_head: bool = False
    unfixed: Callable[[Params], str] | None = None
    rarity: int = 0
    usual: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    factor_required: bool = False
    min_factor: float = 1.0
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def depends_on_length(self) -> bool:
        """Whether the sequence length can change the frequencies."""
        return self.grows_with_length or self.switch is not None

    def uses(self, field: str) -> bool:
        """Whether ``field`` is one of this type's scaling fields."""
        return field in self.fields

    def seq_key(self, p: Params, seq_len: int | None) -> int | None:
        """What of ``seq_len`` changes the frequencies (None: the values the model is built with), so that
        a cache holds each set once: the length itself past max_position_embeddings for a growing type,
        1 past the switch for a switching one."""
        if seq_len is None:
            return None
        if self.grows_with_length:
            return seq_len if seq_len > p.max_position_embeddings else None
        if self.switch is not None:
            return 1 if seq_len > self.switch(p) else None
        return None


# --- shared formulas ---------------------------------------------------------------------------------------


def powers(p: Params, ln_base: Decimal, count: int | None = None) -> list[Decimal]:
    """b^(-2i/d) = exp(−2i·ln b / d) for i < ``count`` (default rotary_dim // 2), d = rotary_dim."""
    d = p.rotary_dim
    return [(-2 * i * ln_base / d).exp() for i in range(p.rotary_dim // 2 if count is None else count)]


def _ln_base(p: Params) -> Decimal:
    return Decimal(p.base).ln()


def _floor(x: Decimal) -> Decimal:
    """⌊x⌋, refusing (:class:`Ambiguous`) an x within the working precision's error of an integer."""
    nearest = x.to_integral_value(rounding=decimal.ROUND_HALF_EVEN)
    precision = decimal.getcontext().prec
    if abs(x - nearest) <= max(abs(x), Decimal(1)).scaleb(10 - precision):
        raise Ambiguous(x)
    return x.to_integral_value(rounding=decimal.ROUND_FLOOR)


def _in_range(scaling: Decimal, fields: str, p: Params) -> Decimal:
    """``scaling`` if it lies in (0, :data:`MAX_ATTENTION_SCALING`]; else a ValueError naming ``fields``,
    the fields of ``p`` that make it (the last guard: A·cos must stay finite in every dtype)."""
    if not 0 < scaling <= MAX_ATTENTION_SCALING:
        raise PosencValueError(
            f"{fields} give {p.rope_type}'s attention scaling {float(scaling):.6g}, outside (0, 2**10] (it "
            "multiplies cos and sin; models use ~1 to 2): check them",
            parameter="params",
        )
    return scaling


# --- the types -------------------------------------------------------------------------------------------


def _default(p: Params, key: int | None) -> list[Decimal]:
    return powers(p, _ln_base(p))


def _linear(p: Params, key: int | None) -> list[Decimal]:
    factor = Decimal(p.factor)
    return [t / factor for t in powers(p, _ln_base(p))]


def _dynamic(p: Params, key: int | None) -> list[Decimal]:
    """bloc97's NTK-aware scaling, dynamic form: b' = b·s^(d/(d-2)), s = factor·L/M − (factor − 1)."""
    ln_base, d = _ln_base(p), p.rotary_dim
    if key is not None:
        factor = Decimal(p.factor)
        s = factor * key / p.max_position_embeddings - (factor - 1)
        ln_base += Decimal(d) / (d - 2) * s.ln()
    return powers(p, ln_base)


def _check_dynamic(p: Params) -> None:
    if p.max_position_embeddings is None:
        raise PosencValueError(
            "rope_type='dynamic' needs max_position_embeddings (the length beyond which the base grows); "
            "got None: add max_position_embeddings to the config",
            parameter="max_position_embeddings",
        )
    if p.rotary_dim == 2:
        raise PosencValueError(
            "rope_type='dynamic' needs rotary_dim > 2 (its base grows as s**(d/(d-2))); got 2",
            parameter="rotary_dim",
        )


def _proportional(p: Params, key: int | None) -> list[Decimal]:
    n = p.rotary_dim // 2
    rotated = min(int(p.partial_rotary_factor * p.head_dim // 2), n)  # transformers' rope_angles, float64
    factor = Decimal(p.factor)
    return [t / factor for t in powers(p, _ln_base(p), rotated)] + [Decimal(0)] * (n - rotated)


def _longrope(p: Params, key: int | None) -> list[Decimal]:
    ext = p.long_factor if key is not None else p.short_factor
    return [t / Decimal(e) for t, e in zip(powers(p, _ln_base(p)), ext, strict=True)]


def _longrope_scaling(p: Params) -> Decimal:
    """attention_factor, else with F = factor (or max_position_embeddings / M₀): sqrt(1 + ln F / ln M₀)."""
    if p.attention_factor is not None:
        return Decimal(p.attention_factor)
    original = Decimal(p.original_max_position_embeddings)
    factor = Decimal(p.factor) if p.factor is not None else Decimal(p.max_position_embeddings) / original
    if factor <= 1:
        return Decimal(1)
    scaling = (1 + factor.ln() / original.ln()).sqrt()
    return _in_range(scaling, "factor and original_max_position_embeddings", p)


def _check_longrope(p: Params) -> None:
    n = p.rotary_dim // 2
    for name in ("short_factor", "long_factor"):
        value = getattr(p, name)
        if value is None:
            raise PosencValueError(
                f"rope_type='longrope' needs {name}, a list of rotary_dim // 2 = {n} numbers", parameter=name
            )
        if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__len__"):
            raise PosencTypeError(
                f"{name} must be a list of {n} numbers; got {validation.shorten(value)}", parameter=name
            )
        if len(value) != n:
            raise PosencValueError(
                f"{name} must have rotary_dim // 2 = {n} entries (one per frequency); got {len(value)}: "
                "check head_dim and partial_rotary_factor against the factor lists",
                parameter=name,
            )
        numbers = tuple(validation.real(f"{name}[{i}]", x) for i, x in enumerate(value))
        bad = [i for i, x in enumerate(numbers) if not x > 0.0]
        if bad:
            raise PosencValueError(
                f"{name} must hold positive numbers; {name}[{bad[0]}] = {numbers[bad[0]]}", parameter=name
            )
        bad = [i for i, x in enumerate(numbers) if not MIN_FACTOR <= x <= MAX_FACTOR]
        if bad:
            raise PosencValueError(
                f"{name} must hold numbers from 2**-20 to 2**20 (each divides a frequency; Phi-3's "
                f"lie in 1 .. ~100); {name}[{bad[0]}] = {numbers[bad[0]]}",
                parameter=name,
            )
        object.__setattr__(p, name, numbers)
    if p.factor is None and p.attention_factor is None and p.max_position_embeddings is None:
        raise PosencValueError(
            "longrope without factor takes factor = max_position_embeddings / "
            "original_max_position_embeddings, but max_position_embeddings is None: add 'factor' to "
            "rope_scaling or max_position_embeddings to the config",
            parameter="factor",
        )
    if p.original_max_position_embeddings < 2:
        raise PosencValueError(
            "longrope needs original_max_position_embeddings >= 2 (its attention factor divides by its "
            f"log); got {p.original_max_position_embeddings}",
            parameter="original_max_position_embeddings",
        )


def _llama3(p: Params, key: int | None) -> list[Decimal]:
    """Meta's Llama 3.1 scaling: keep the short wavelengths, divide the long ones by factor, blend between.

    The branch tests compare exact wavelengths; at λ_i = λ_lo the blend gives θ_i/factor and at λ_i = λ_hi
    it gives θ_i, so the result is continuous and a boundary case (none occurs in a realistic config) only
    moves the value by a rounding error whichever side a float computation picks.
    """
    factor, low, high = Decimal(p.factor), Decimal(p.low_freq_factor), Decimal(p.high_freq_factor)
    original = Decimal(p.original_max_position_embeddings)
    two_pi = 2 * pi(decimal.getcontext().prec)
    low_wavelength, high_wavelength = original / low, original / high
    out = []
    for t in powers(p, _ln_base(p)):
        wavelength = two_pi / t
        if wavelength > low_wavelength:
            out.append(t / factor)
        elif wavelength < high_wavelength:
            out.append(t)
        else:
            smooth = (original / wavelength - low) / (high - low)
            out.append(t * ((1 - smooth) / factor + smooth))
    return out


def _check_llama3(p: Params) -> None:
    low, high = p.low_freq_factor, p.high_freq_factor
    if low is None or high is None:
        raise PosencValueError(
            f"rope_type='llama3' needs low_freq_factor and high_freq_factor; got {low!r} and {high!r}: "
            "Llama 3.1 uses 1.0 and 4.0",
            parameter="low_freq_factor",
        )
    if not 0.0 < low < high:
        raise PosencValueError(
            f"llama3 needs 0 < low_freq_factor < high_freq_factor; got low_freq_factor={low}, "
            f"high_freq_factor={high}: Llama 3.1 uses 1.0 and 4.0",
            parameter="low_freq_factor",
        )


def _yarn(p: Params, key: int | None) -> list[Decimal]:
    """YaRN (Peng et al. 2023): blend interpolation (θ_i/factor) and extrapolation (θ_i) by a linear ramp
    over the dimensions whose frequency turns between beta_fast and beta_slow times in the original
    context."""
    d, factor, ln_base = p.rotary_dim, Decimal(p.factor), _ln_base(p)
    original = Decimal(p.original_max_position_embeddings)
    two_pi = 2 * pi(decimal.getcontext().prec)

    def correction_dim(rotations: float) -> Decimal:
        # the (fractional) dimension 2i whose frequency turns `rotations` times over `original` positions
        return d * (original / (two_pi * Decimal(rotations))).ln() / (2 * ln_base)

    low, high = correction_dim(p.beta_fast), correction_dim(p.beta_slow)
    if p.truncate:
        # The only discontinuous choice: decided exactly here, refused (more digits) when too close to call.
        low, high = _floor(low), -_floor(-high)
    low, high = max(low, Decimal(0)), min(high, Decimal(d - 1))
    if low == high:
        high += Decimal("0.001")  # transformers' guard against a zero-width ramp
    out = []
    for i, t in enumerate(powers(p, ln_base)):
        ramp = min(max((i - low) / (high - low), Decimal(0)), Decimal(1))
        out.append(t * (1 - ramp + ramp / factor))
    return out


def _yarn_scaling(p: Params) -> Decimal:
    """attention_factor, else YaRN's g(factor, mscale) / g(factor, mscale_all_dim) when both are given
    (DeepSeek-V2/V3), else g(factor, 1); g(s, μ) = 0.1·μ·ln s + 1 (1 when s <= 1)."""
    if p.attention_factor is not None:
        return Decimal(p.attention_factor)
    factor = Decimal(p.factor)

    def mscale(weight: Any) -> Decimal:
        return Decimal(1) if factor <= 1 else Decimal("0.1") * Decimal(weight) * factor.ln() + 1

    if p.mscale and p.mscale_all_dim:  # transformers tests both for truth (0 is off)
        top, bottom = mscale(p.mscale), mscale(p.mscale_all_dim)
        if not top > 0 < bottom:
            raise PosencValueError(
                "yarn's attention scaling (0.1·mscale·ln factor + 1) / (0.1·mscale_all_dim·ln factor "
                f"+ 1) has a term <= 0 with mscale={p.mscale}, mscale_all_dim={p.mscale_all_dim}, "
                f"factor={p.factor}; DeepSeek-V3 uses mscale = mscale_all_dim = 1",
                parameter="mscale",
            )
        return _in_range(top / bottom, "mscale, mscale_all_dim and factor", p)
    return _in_range(mscale(1), "factor", p)


def _check_yarn(p: Params) -> None:
    if not 0.0 < p.beta_slow <= p.beta_fast:
        raise PosencValueError(
            f"yarn needs 0 < beta_slow <= beta_fast (rotations at the ramp's two ends); got "
            f"beta_fast={p.beta_fast}, beta_slow={p.beta_slow}: the usual values are 32 and 1",
            parameter="beta_slow",
        )


_ORIGINAL = "original_max_position_embeddings"

#: Every rope type :mod:`posenc.rope` computes (transformers' ``ROPE_INIT_FUNCTIONS`` and "default"), by name.
TYPES: dict[str, RopeType] = {
    kind.name: kind
    for kind in (
        RopeType("default", (), _default),
        RopeType("linear", ("factor",), _linear, rarity=1, factor_required=True),
        RopeType(
            "dynamic",
            ("factor",),
            _dynamic,
            check=_check_dynamic,
            grows_with_length=True,
            rarity=4,
            factor_required=True,
        ),
        RopeType(
            "yarn",
            (
                "factor",
                _ORIGINAL,
                "attention_factor",
                "beta_fast",
                "beta_slow",
                "mscale",
                "mscale_all_dim",
                "truncate",
            ),
            _yarn,
            check=_check_yarn,
            scaling=_yarn_scaling,
            rarity=3,
            factor_required=True,
        ),
        RopeType(
            "longrope",
            ("factor", _ORIGINAL, "attention_factor", "short_factor", "long_factor"),
            _longrope,
            check=_check_longrope,
            scaling=_longrope_scaling,
            switch=lambda p: p.original_max_position_embeddings,
            rarity=4,
        ),
        RopeType(
            "llama3",
            ("factor", _ORIGINAL, "low_freq_factor", "high_freq_factor"),
            _llama3,
            check=_check_llama3,
            unfixed=lambda p: (
                f"original_max_position_embeddings / low_freq_factor = "
                f"{p.original_max_position_embeddings / p.low_freq_factor:g} and / high_freq_factor = "
                f"{p.original_max_position_embeddings / p.high_freq_factor:g}"
            ),
            rarity=2,
            usual={"low_freq_factor": 1.0, "high_freq_factor": 4.0},  # Llama 3.1's
            factor_required=True,
        ),
        RopeType(
            "proportional",
            ("factor",),
            _proportional,
            full_head=True,
            rarity=1,
            min_factor=MIN_FACTOR,
            defaults={"factor": 1.0},
        ),
    )
}

#: Their names, in order.
ROPE_TYPES = tuple(TYPES)

#: Legacy rope type names and the type they mean (Qwen2-VL's "mrope", early Phi-3's "su").
ALIASES = {"mrope": "default", "su": "longrope"}

#: The scaling fields of any type.
SCALING_FIELDS = tuple(dict.fromkeys(field for kind in TYPES.values() for field in kind.fields))


def named(name: Any) -> RopeType:
    """The type called ``name`` (a legacy alias too); a TypeError or ValueError listing the types."""
    if not isinstance(name, str):
        raise PosencTypeError(
            f"rope_type must be a string such as 'yarn'; got {name!r}", parameter="rope_type"
        )
    kind = TYPES.get(ALIASES.get(name, name))
    if kind is None:
        raise PosencValueError(
            f"rope_type={name!r} is not a rope type posenc.rope knows; use one of {', '.join(ROPE_TYPES)}",
            parameter="rope_type",
        )
    return kind
