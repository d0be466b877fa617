"""The auditor: anyone's positional encoding against the exact one. :func:`audit` returns an
:class:`AuditReport`.

The steps, one module each: :mod:`.targets` turns the target (a function, a torch module, a table, a
checkpoint, a rotary module or Hugging Face config) into a sampler; :mod:`.variant` finds the exact
encoding to compare with (given, or identified from the first rows); :mod:`.measure` compares band by
band of positions; :mod:`.findings` says what went wrong; :mod:`.report` (and :mod:`.html`) present it.
:mod:`.guard` runs it all so that the auditor survives its target (its exceptions, its NumPy error state,
its slowness: ``timeout=``).

``posenc.audit`` is the function :func:`audit` of this package (``posenc.auditor``), a plain function:
``posenc.audit(target)``.

>>> import posenc
>>> report = posenc.audit(posenc.table(4096, 64), samples=512)
>>> report.passed, report.variant.name.split(" = ")[0], report.findings
(True, 'paper', [])
"""

from __future__ import annotations

from typing import Any

from .. import validation
from ..errors import PosencValueError
from .findings import Finding, find_all
from .guard import TargetError, check_timeout, label_of, run
from .measure import measure
from .models import (
    ComponentAudit,
    ModelAudit,
    ModelDirectoryError,
    audit_model,
    from_directory,
    is_model,
    is_model_directory,
)
from .report import AuditReport, check_tolerance
from .targets import MAX_POSITION, Target, WrongOutput, as_target, is_code, load_object
from .variant import Variant, find_variant, read_base, rebased

__all__ = [
    "AuditReport",
    "ComponentAudit",
    "Finding",
    "ModelAudit",
    "ModelDirectoryError",
    "Target",
    "TargetError",
    "Variant",
    "WrongOutput",
    "audit",
]

#: Positions measured per band at most (a band of this many or fewer is measured whole).
SAMPLES = 4096
#: The most positions per band an audit samples: its memory grows with them (a table's rows, a rotary's
#: cos/sin), and a few thousand already find any error a band holds.
MAX_SAMPLES = 2**14
_SAMPLES_WHY = "each sampled position costs memory; a stored table of at most 2**24 values is measured whole"
_DTYPES = ("float64", "float32", "float16", "bfloat16")


def audit(
    target: Any,
    *,
    d_model: int | None = None,
    positions: Any = None,
    dtype: str | None = None,
    preset: Any = None,
    key: str | None = None,
    tol: Any = None,
    samples: int = SAMPLES,
    timeout: float | None = None,
) -> AuditReport | ModelAudit:
    """Measure ``target`` against posenc's exact encoding: max absolute and ulp error per band of
    positions, collisions, thresholds, NaN rows and findings (:class:`AuditReport`).

    A whole torch model (its positional components in its submodules: a Hugging Face ``LlamaForCausalLM``,
    an M2M100, a diffusers UNet) gives a :class:`ModelAudit` instead: each component found
    (:func:`posenc.torch.patching.find`) audited on its own (:mod:`posenc.auditor.models`); ``dtype`` is
    then the dtype its rotary modules are called in (the hidden states': default float32; a folder's:
    its config's ``dtype``), and the hints that apply to one component (``d_model``, ``positions``,
    ``preset``, ``key``) are refused.

    ``target``: a callable ``positions (k,) -> (k, d_model)`` (NumPy, torch or JAX), a torch module that adds
    encodings or holds a table / ``inv_freq``, an array or tensor ``(rows, d_model)``, a checkpoint path
    (``key=`` the tensor), ``"file.py:Name"``, a rotary module or a Hugging Face config, or a model folder
    holding a ``config.json`` (a ModelAudit of its model, built on the meta device by
    ``posenc.auditor.models.from_directory``: no code of the folder runs, nothing global changes, and a
    config it refuses is a :class:`ModelDirectoryError` naming the field or file).
    Hints, all optional: ``d_model`` (for a module or a function that needs it), ``positions`` (``b``,
    ``(a, b)`` or ``"a:b"``: positions a .. b - 1; default: the target's range, else 0 .. 2³¹ - 1),
    ``dtype`` (the type to judge in; default the target's own), ``preset`` (the variant it claims to be:
    a preset name, a Preset, a dict of core options with ``padding_idx``, or rotary keywords of
    :func:`posenc.rope.config`; default: identified, and the report says how), ``tol`` (None: correctly
    rounded; a float: absolute; ``"2ulp"``), ``samples`` (positions per band, ≥ 16), ``timeout`` (seconds
    the whole audit may take, building a folder's model included; default None: no limit).

    The target is someone else's code, and the audit survives it (:mod:`posenc.auditor.guard`): any exception
    it raises while it is imported, built or called (``SystemExit`` included; ``KeyboardInterrupt`` is taken
    for Ctrl-C, except in the worker thread of a timed audit) raises :class:`TargetError`, a ValueError that
    names the target, the exception and what it was doing, with the target's exception as its
    ``__cause__``. A call that returns something other than an encoding (a list, None, a meta tensor, ...)
    raises :class:`WrongOutput`, a ValueError saying what was expected. The target runs under the caller's
    NumPy error state and what it sets there is undone after each call. With ``timeout``, the audit runs in a
    daemon thread and raises TargetError when the time is up; Python cannot stop a thread from outside, so
    that thread goes on until the target's current call returns, then stops.

    The usual float32 code forms its angles in float32, so its error grows with the position:

    >>> import posenc
    >>> from posenc.analysis import naive_table
    >>> report = audit(naive_table(16384, 64), samples=256)
    >>> report.passed, [finding.text for finding in report.findings]
    (False, ['angles formed in float32: error grows ∝ position (slope 1.04)'])
    >>> report = audit(posenc.table(16384, 64), samples=256)  # posenc's: correctly rounded
    >>> report.passed, report.max_abs, report.findings
    (True, 0.0, [])
    """
    for name, value in (("dtype", dtype), ("preset", preset), ("key", key), ("tol", tol)):
        if isinstance(value, str) and not value.strip():  # a CLI's empty --key '' is not "no key"
            raise PosencValueError(
                f"{name} is an empty string; name one, or leave it out for its default", parameter=name
            )
    if d_model is not None:
        d_model = validation.d_model(d_model)
    samples = validation.integer("samples", samples, minimum=16, maximum=MAX_SAMPLES, why=_SAMPLES_WHY)
    tolerance = check_tolerance(tol)
    limit = check_timeout(timeout)
    given = {"d_model": d_model, "positions": positions, "preset": preset, "key": key}
    if is_model_directory(target):  # a folder with a config.json: its model, built without its weights
        _whole_model_only(given)
        label, compute = str(target), _model_dtype(dtype)
        # built inside the guarded run: timeout= covers building the model too
        return run(label, lambda: _audit_directory(target, label, samples, tol, compute), limit)
    if is_model(target):  # a whole model: each positional component audited on its own
        _whole_model_only(given)
        label, compute = label_of(target), _model_dtype(dtype)
        return run(
            label, lambda: audit_model(target, samples=samples, tol=tol, label=label, dtype=compute), limit
        )
    hints = (d_model, positions, dtype, preset, key, samples, tolerance)
    if is_code(target):  # "file.py:Name": its object, a whole model as the object itself would be
        return run(str(target), lambda: _audit_code(str(target), given, hints, tol), limit)
    return run(label_of(target), lambda: _audit(target, *hints), limit)


def _audit_code(spec: str, given: dict[str, Any], hints: tuple, tol: Any) -> AuditReport | ModelAudit:
    """The object ``"file.py:Name"`` names (a class built, with ``d_model`` where it needs it), audited as
    :func:`audit` audits that object: a whole model (:func:`is_model`) as a :class:`ModelAudit`."""
    d_model, _, dtype, *_, samples, _ = hints
    target = load_object(spec, d_model=d_model)
    if is_model(target):
        _whole_model_only({**given, "d_model": None})  # d_model built it
        return audit_model(target, samples=samples, tol=tol, label=spec, dtype=_model_dtype(dtype))
    return _audit(as_target(target, d_model=d_model, dtype=dtype, label=spec), *hints)


def _whole_model_only(given: dict[str, Any]) -> None:
    """Refuse the hints that apply to one positional component, given for a whole model."""
    named = [name for name, value in given.items() if value is not None]
    if named:
        verb, them = ("applies", "it") if len(named) == 1 else ("apply", "them")
        raise ValueError(
            f"{' and '.join(named)} {verb} to one positional component, not a whole model: leave {them} out "
            "(in Python, one component is audited alone: posenc.audit(model.get_submodule(path), ...))"
        )


def _model_dtype(dtype: Any) -> str | None:
    """A whole model's ``dtype`` hint checked: the dtype its rotary modules are called in (the hidden
    states' dtype they cast cos/sin to), or None (a folder's: its config's; a model's: float32)."""
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    if name not in ("float32", "float16", "bfloat16", "float64"):
        raise ValueError(
            f"dtype={dtype!r}: a model is judged in float32, float16, bfloat16 or float64; pass one of them"
        )
    return name


def _audit_directory(folder: Any, label: str, samples: int, tol: Any, dtype: str | None) -> ModelAudit:
    """The model of a folder's config.json (:func:`~posenc.auditor.models.from_directory`), audited in
    ``dtype`` (default: its config's ``dtype``, where it names a floating one; else float32)."""
    model = from_directory(folder)
    if not is_model(model):
        raise ModelDirectoryError(
            f"{label}: its {type(model).__name__} holds no positional component posenc knows (a rotary "
            "module, a sinusoidal table, a Timesteps); audit one of its tensors instead: "
            "posenc.audit(tensor)"
        )
    if dtype is None:
        named = str(getattr(model.config, "dtype", None)).removeprefix("torch.")
        dtype = named if named in ("float16", "bfloat16", "float64") else None
    return audit_model(model, samples=samples, tol=tol, label=label, dtype=dtype)


def _audit(
    target: Any,
    d_model: int | None,
    positions: Any,
    dtype: str | None,
    preset: Any,
    key: str | None,
    samples: int,
    tolerance: Any,
) -> AuditReport:
    """:func:`audit` once its hints are checked: read the target, find the variant, measure, report."""
    read = as_target(target, d_model=d_model, dtype=dtype, key=key)
    judged = _check_dtype(dtype or read.dtype)
    if d_model is not None and read.width is not None and read.rotary is None and read.width != d_model:
        raise ValueError(
            f"d_model is {d_model} but the target has {read.width} columns; leave d_model out or give "
            "its width"
        )
    span = _span(positions, read.limit)
    variant = find_variant(read, preset, judged)
    report = report_of(read, variant, judged, span, samples, tolerance)
    measured = report.measurement
    better = rebased(variant, measured.positions, measured.values, judged)
    if better is not None:  # identified from its first rows with a base that is off: far out it shows
        return report_of(read, better, judged, span, samples, tolerance)
    if variant.declared and variant.matches and variant.found_instead is None:
        held = read_base(variant, measured.positions, measured.values, judged)
        if held is not None:  # declared with a base the first rows cannot tell from the rows' own
            variant.found_instead = {
                "name": None,
                "options": held.options,
                "width": measured.values.shape[1],
                "variant": held,
                "evidence": held.how,
            }
            return report_of(read, variant, judged, span, samples, tolerance)
    return report


def report_of(
    read: Target, variant: Variant, judged: str, span: tuple[int, int], samples: int, tolerance: Any
) -> AuditReport:
    """The :class:`AuditReport` of ``read`` measured against ``variant`` in ``judged`` over ``span``."""
    measurement = measure(read, variant, judged, span, samples)
    findings = find_all(read, variant, measurement, judged)
    width = read.width or measurement.values.shape[1]
    return AuditReport(
        read.description,
        read.kind,
        read.note,
        judged,
        width,
        span,
        samples,
        variant,
        measurement,
        findings,
        tolerance,
    )


def _check_dtype(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise PosencValueError(
            f"dtype must be one of {', '.join(_DTYPES)} (the type the target is judged in); got {dtype!r}: "
            "give dtype= for a target whose values are integers or another type",
            parameter="dtype",
        )
    return name


def _span(positions: Any, limit: int) -> tuple[int, int]:
    """``positions`` as (a, b), 0 <= a < b <= min(limit, 2³¹)."""
    if positions is None:
        return 0, min(limit, MAX_POSITION)
    given = positions
    if isinstance(positions, str):
        a, sep, b = positions.partition(":")
        if not sep:
            a, b = "0", a
        try:
            positions = (int(a or 0), int(b) if b else limit)
        except ValueError:
            positions = None
    elif isinstance(positions, int) and not isinstance(positions, bool):
        positions = (0, positions)
    if not (isinstance(positions, (tuple, list)) and len(positions) == 2):
        raise ValueError(f"positions must be b, (a, b) or 'a:b' (positions a .. b - 1); got {given!r}")
    a = validation.integer("positions start", positions[0], minimum=0)
    b = validation.integer("positions end", positions[1], minimum=a + 1)
    top = min(limit, MAX_POSITION)
    if b > top:
        raise ValueError(
            f"positions {given!r} reach {b - 1}, but the target holds positions 0..{top - 1}; ask for "
            "at most "
            f"'{a}:{top}'"
        )
    return a, b
