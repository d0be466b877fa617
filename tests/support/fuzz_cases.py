"""What the fuzz suite (the test_fuzz_*.py files under tests/, with tests/support/fuzzing.py) shares: the
"right value or clear
error" rule, a per-call time guard, an independent oracle of which arguments are valid, and spot checks
against the mpmath reference (tests/support/reference.py).

The rule: every call returns the right value or raises ValueError/TypeError whose message names
the offending parameter (or shows the value); any other exception (IndexError, OverflowError, MemoryError,
RuntimeError, NotImplementedError, AssertionError, ...) or a call that runs past its time limit is a failure.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from typing import Any

import ml_dtypes
import mpmath
import numpy as np

from tests.support import reference as ref

CLEAR = (ValueError, TypeError)
LAYOUTS = ("interleaved", "sin_cos", "cos_sin")
ODD_RULES = ("zero", "literal", "drop", "error")
DTYPE_NAMES = ("float64", "float32", "float16", "bfloat16")
MAX_POSITION = 2**31
MAX_D_MODEL = 2**20
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

#: Seconds one call may take before it counts as a hang (every request in the suite takes < 1 s, a first
#: compilation of a kernel some seconds).
CALL_SECONDS = 45.0


class Hang(BaseException):
    """Raised by :func:`time_limit` in the main thread when a call runs past its limit (a BaseException, so
    that no ``except Exception`` in the code under test swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float = CALL_SECONDS) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM; a no-op outside the main thread)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no result within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def right_value_or_clear_error(
    call: Callable[[], Any],
    *,
    check: Callable[[Any], None] | None = None,
    names: Iterable[str] = (),
    valid: bool | None = None,
    seconds: float = CALL_SECONDS,
) -> Any:
    """Run ``call()`` under a time limit and return its result (or the clear error it raised).

    ``valid``: True = the arguments are valid, an error is a failure; False = they are not, a value is a
    failure; None = either. ``names``: the words of which a clear error's message must contain one (the
    offending parameter's name, or its value); with ``valid=False`` at least one name must be given.
    ``check(result)`` asserts the value is right.
    """
    names = [str(n) for n in names]
    try:
        with time_limit(seconds):
            result = call()
    except CLEAR as error:
        message = str(error)
        if valid:
            raise AssertionError(f"valid arguments gave {type(error).__name__}: {message}") from error
        assert names, f"no parameter names to look for in {type(error).__name__}: {message}"
        assert any(n.lower() in message.lower() for n in names), (
            f"{type(error).__name__} names none of {names}: {message!r}"
        )
        assert "\n" not in message.strip() or len(message) < 2000, f"message too long: {message!r}"
        return error
    except Hang as error:
        raise AssertionError(f"the call hangs: {error}") from None
    except Exception as error:  # everything but ValueError/TypeError is an unclear error
        raise AssertionError(f"unclear error {type(error).__name__}: {error}") from error
    if valid is False:
        raise AssertionError(f"invalid arguments (bad: {names}) gave a value: {_short(result)}")
    if check is not None:
        check(result)
    return result


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:297] + "..."


# --- an independent oracle of valid options ----------------------------------------------------------


def _real(value: Any) -> float | None:
    """``value`` as a finite float when it is a real number posenc must accept, else None."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return None
    try:
        result = float(value)
    except (OverflowError, ValueError):
        return None
    if not math.isfinite(result):
        return None
    if isinstance(value, numbers.Integral) and int(result) != int(value):
        return None
    return result


def _integer(value: Any) -> int | None:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def twice_half(d_model: int, odd: str) -> int:
    """2 × the exponent's denominator before the shift (README: the odd-width rules)."""
    if d_model % 2 == 0 or odd in ("zero", "error"):
        return 2 * (d_model // 2)
    return d_model if odd == "literal" else d_model + 1


def dtype_name(value: Any) -> str | None:
    """The output dtype a spelling means, or None when posenc must refuse it."""
    if isinstance(value, str):
        return value if value in DTYPE_NAMES else None
    if type(value).__module__ == "torch":
        name = str(value).removeprefix("torch.")
        return name if name in DTYPE_NAMES else None
    try:
        name = np.dtype(value).name
    except TypeError:
        return None
    return name if name in DTYPE_NAMES and value is not None else None


def option_problems(
    d_model: Any,
    *,
    base: Any = 10000.0,
    shift: Any = 0,
    scale: Any = 1.0,
    layout: Any = "interleaved",
    odd: Any = "zero",
    dtype: Any = "float32",
) -> list[str]:
    """The names of the invalid options, by the documented rules (README, Options); [] when all are valid."""
    bad = []
    d = _integer(d_model)
    if d is None or not 2 <= d <= MAX_D_MODEL:
        bad.append("d_model")
    if not (isinstance(odd, str) and odd in ODD_RULES):
        bad.append("odd")
    elif d is not None and "d_model" not in bad and odd == "error" and d % 2:
        bad += ["odd", "d_model"]
    b = _real(base)
    if b is None or not b > 1:
        bad.append("base")
    s = _real(shift)
    if s is None or (
        "d_model" not in bad and "odd" not in bad and not Fraction(twice_half(d, odd), 2) - Fraction(s) > 0
    ):
        bad.append("shift")
    c = _real(scale)
    if c is None or not 0 < c <= 2**20:
        bad.append("scale")
    if not (isinstance(layout, str) and layout in LAYOUTS):
        bad.append("layout")
    if dtype_name(dtype) is None:
        bad.append("dtype")
    return bad


def frequency_count(d_model: int, odd: str) -> int:
    return d_model // 2 + (1 if d_model % 2 and odd in ("literal", "drop") else 0)


def lowest_frequency_log2(d_model: int, base: float, shift: float, scale: float, odd: str) -> float:
    """log2 of the lowest frequency ω_(count-1), for options the oracle calls valid."""
    count = frequency_count(d_model, odd)
    denominator = Fraction(twice_half(d_model, odd), 2) - Fraction(shift)
    return math.log2(scale) - float((count - 1) / denominator) * math.log2(base)


def may_underflow(d_model: int, base: float, shift: float, scale: float, odd: str) -> bool:
    """True when the lowest frequency is so small (< ~2**-880) that posenc may refuse it as underflowing
    (its documented ValueError) rather than compute it."""
    return lowest_frequency_log2(d_model, base, shift, scale, odd) < -880


# --- exact values --------------------------------------------------------------------------------------


def exact_positions(values: np.ndarray) -> np.ndarray:
    """The positions as an object array of exact Fractions (any int or float dtype, bfloat16 included)."""
    array = np.asarray(values)
    flat = array.reshape(-1)
    if array.dtype.kind in "iu":
        items = [Fraction(int(v)) for v in flat.tolist()]
    elif array.dtype.kind == "O":
        items = [Fraction(v) for v in flat.tolist()]
    elif array.dtype.itemsize > 8:
        items = [-0.0 if v == 0 and np.signbit(v) else _longdouble_fraction(v) for v in flat]
    else:  # -0.0 stays a float: the sign of a zero position decides the sign of its sine
        items = [v if negative_zero(v) else Fraction(v) for v in flat.astype(np.float64).tolist()]
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result.reshape(array.shape)


def _longdouble_fraction(value: np.longdouble) -> Fraction:
    numerator, denominator = value.as_integer_ratio()
    return Fraction(numerator, denominator)


def negative_zero(value: Any) -> bool:
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


def _as_float(value: Any) -> float:
    """One output element as a Python float (bfloat16 and float16 widen exactly)."""
    return float(np.asarray(value).astype(np.float64))


def expected_value(position: Fraction | float, column: int, d_model: int, **options: Any) -> tuple[Any, bool]:
    """(the exact mpmath value of one column, whether its sign is negative); a float 0.0 for zero columns.
    ``options`` are every option of the request: base, shift, scale, layout, odd.

    Signed zeros follow IEEE: sin at position -0.0 is -0.0; a negative value that rounds to zero is -0.0.
    """
    base, shift, scale, layout, odd = (options[name] for name in ("base", "shift", "scale", "layout", "odd"))
    count = frequency_count(d_model, odd)
    for i in range(count):
        s, c = ref.column(i, d_model, layout, odd)
        if column in (s, c):
            break
    else:  # odd="zero": the zero column
        return mpmath.mpf(0), False
    if position == 0:
        negative = column == s and negative_zero(position)
        return (mpmath.mpf(0) if column == s else mpmath.mpf(1)), negative
    p = position if isinstance(position, float) else mpmath.mpf(position.numerator) / position.denominator
    with mpmath.workdps(90):
        sin, cos = ref.sincos(p, i, d_model, base, shift, scale, odd)
        value = sin if column == s else cos
        return +value, value < 0


def assert_element(got: Any, exact: Any, negative: bool, fmt: str, where: str) -> None:
    """One element against the exact value: correctly rounded (float32/16, bfloat16), within 1 ulp (float64),
    with the sign of the exact value (IEEE signed zeros)."""
    value = _as_float(got)
    assert math.isfinite(value), f"{where}: {value} is not finite"
    if exact == 0 and not negative:
        assert value == 0 and math.copysign(1.0, value) > 0, f"{where}: {value!r}, want +0.0"
        return
    if fmt == "float64":
        with mpmath.workdps(90):
            distance = ref.ulp_distance(value, exact) if exact != 0 else abs(value) / 5e-324
        assert distance <= 1.0, f"{where}: {value!r} is {distance:.3g} ulp from {mpmath.nstr(exact, 25)}"
    else:
        with mpmath.workdps(90):
            want = ref.round_to(exact, fmt)
        assert abs(value) == abs(want), (
            f"{where}: {value!r} is not {mpmath.nstr(exact, 25)} rounded to {fmt} ({want!r})"
        )
    if value == 0 or exact != 0:
        assert (math.copysign(1.0, value) < 0) == negative, (
            f"{where}: {value!r} has the wrong sign (exact value {mpmath.nstr(exact, 25)}; sign negative: "
            f"{negative})"
        )


def spot_check(
    values: np.ndarray,
    positions: np.ndarray,
    d_model: int,
    *,
    options: dict[str, Any],
    fmt: str,
    rng: Any,
    samples: int = 6,
) -> None:
    """Compare ``samples`` elements of ``values`` (shape ``positions.shape + (d_model,)``) with mpmath; the
    first and last element of the first row are always among them, and every zero column is checked."""
    flat_values = np.asarray(values).reshape(-1, d_model)
    flat_positions = np.asarray(positions, dtype=object).reshape(-1)
    if not len(flat_positions):
        return
    picks = {(0, 0), (0, d_model - 1), (len(flat_positions) - 1, 1 % d_model)}
    while len(picks) < samples + 3:
        picks.add((rng.randrange(len(flat_positions)), rng.randrange(d_model)))
    for row, column in sorted(picks):
        position = flat_positions[row]
        exact, negative = expected_value(position, column, d_model, **options)
        assert_element(
            flat_values[row, column], exact, negative, fmt, f"position {position!r} column {column} {options}"
        )


def bits(array: Any) -> np.ndarray:
    """The bit patterns of a float array (any width), to compare values, NaN payloads and signed zeros."""
    array = np.asarray(array)
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def same_bits(got: Any, want: np.ndarray) -> bool:
    got = np.asarray(got)
    return got.shape == want.shape and got.dtype == want.dtype and np.array_equal(bits(got), bits(want))
