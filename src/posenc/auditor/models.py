"""A whole model's positions audited: :func:`audit_model` finds every positional component of a torch model
(:func:`posenc.torch.patching.find`: rotary modules, sinusoidal tables, diffusers' ``Timesteps``) and audits
each one (:func:`posenc.audit`), as a :class:`ModelAudit`: one :class:`~posenc.auditor.report.AuditReport`
per component with its path and kind, a one-line verdict for each, ``passed``, ``as_text()``, ``as_dict()``,
``to_html(path)`` and the line that fixes it (``posenc.torch.patch(model)``).

Each component is measured over the positions the model uses: a rotary module over 0 ..
``max_position_embeddings`` − 1 of its config (every layer type of a per-layer one, Gemma 3), a table over
its rows, a ``Timesteps`` over the timesteps 0 .. 999 (one that scales them against its own options).

A folder holding a Hugging Face ``config.json`` (``posenc audit MODEL_DIR``) is built by
:func:`from_directory` without allocating the model's weights and without running anything the folder
ships (a config with ``auto_map`` is refused): its config is checked and bounded first, the model is built
on the meta device under a torch function mode of the calling thread only (nothing global is patched), the
buffers of its positional components (inv_freq, sinusoidal tables) are then computed by the model's own
``_init_weights``, and the positional tensors that are weights (Whisper's encoder table) are read from the
safetensors files transformers loads (``model.safetensors``, or the shards its index names; their own key,
with or without the model's prefix); one they do not hold (Marian's) is computed as building the model
does — unless the folder's weights are in a file posenc does not open (``pytorch_model.bin``): then it is
not audited, and says so. A 70B model's config audits in seconds; ``timeout=`` covers building it.

``posenc.audit(model)`` gives a ModelAudit when the positional components lie in the model's submodules
(a Hugging Face ``LlamaForCausalLM``, an M2M100, a UNet); a module that is one component itself (a rotary
module, the PyTorch tutorial's ``PositionalEncoding``) gets the component's own report, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import inspect
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import validation
from ..errors import PosencValueError
from ..porting.readers import MAX_HEADER_BYTES
from ..rope.configs import CONFIG_BYTES
from .report import AuditReport
from .targets import MAX_POSITION

__all__ = [
    "ComponentAudit",
    "ModelAudit",
    "ModelDirectoryError",
    "audit_model",
    "from_directory",
    "is_model",
    "is_model_directory",
]

#: The call that makes every failing component exact.
FIX = "posenc.torch.patch(model)"
#: A component whose values differ from what posenc reads it as by more than this share of their amplitude,
#: with no known cause, is read wrong (an unknown formula or layout): not judged, never a finding.
UNKNOWN = 2.0**-4


@dataclasses.dataclass
class ComponentAudit:
    """One component: ``path``, ``kind`` ("rotary", "table", "timesteps"), ``layer_type`` (a per-layer
    rotary's type, else None), and its ``report``: None when it is **not judged** — learned weights (a
    table no sinusoid comes near), an unknown formula, no values (meta) — and ``note`` says why. A report
    that itself judges nothing (:attr:`AuditReport.judged` false: no variant identified, last bits no
    reading pins) leaves the component not judged too, its report kept to say why. A judged component is
    exact (``passed``) or inexact (its report's findings give the cause and the fix)."""

    path: str
    kind: str
    report: AuditReport | None
    note: str = ""
    layer_type: str | None = None
    declined: str = ""  # an inexact component posenc.torch.patch would leave alone: its reason

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    @property
    def judged(self) -> bool:
        return self.report is not None and self.report.judged

    def verdict(self) -> str:
        """One line: where, what, PASS/FAIL/NOT JUDGED with the largest error and the first finding."""
        where = f"{self.path}" + (f" ({self.layer_type})" if self.layer_type else "") + f" [{self.kind}]"
        if self.report is None:
            return f"{where}: not judged — {self.note}"
        r = self.report
        error = r.max_abs if math.isfinite(r.max_abs) else r.finite_max_abs
        first = f"; {r.findings[0].text.split(':')[0]}" if r.findings else ""
        more = f" (+{len(r.findings) - 1} more)" if len(r.findings) > 1 else ""
        note = f" — {self.note}" if self.note else ""
        return f"{where}: {r.verdict()} max error {error:.3g} ({r.dtype}){first}{more}{note}"


@dataclasses.dataclass
class ModelAudit:
    """The audit of a whole model: its ``components`` (:class:`ComponentAudit`); ``passed`` speaks of the
    judged ones only — True when at least one was judged and every judged one is exact (the text says how
    many were not judged, and why); ``fix``: the call that makes the inexact ones exact. A model with no
    positional component found has no components, and has not passed."""

    target: str
    components: list[ComponentAudit]

    @property
    def judged(self) -> list[ComponentAudit]:
        return [c for c in self.components if c.judged]

    @property
    def passed(self) -> bool:
        return bool(self.judged) and all(c.passed for c in self.judged)

    @property
    def fix(self) -> str:
        """The call that makes the inexact components exact — only where ``patch``'s proofs hold for at
        least one of them (those it would decline name their reason in the text)."""
        return FIX if any(not c.passed and not c.declined for c in self.judged) else ""

    def summary(self) -> str:
        """The last line: PASS / FAIL of the judged components, and how many were not judged."""
        judged, total = len(self.judged), len(self.components)
        if not total:
            return "NOT JUDGED: no positional component found (rotary module, sinusoidal table, Timesteps)"
        left = f"; {total - judged} not judged" if judged < total else ""
        if not judged:
            return f"NOT JUDGED: none of its {total} component(s) could be judged (their lines say why)"
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict}: {sum(c.passed for c in self.judged)} of {judged} judged component(s) exact{left}"

    def as_text(self, width: int = 100) -> str:
        lines = [f"posenc audit: {self.target} — {len(self.components)} positional component(s)"]
        lines += [f"  {c.verdict()}" for c in self.components]
        for c in self.components:
            if c.report is not None:
                lines += [
                    "",
                    f"— {c.path}" + (f" ({c.layer_type})" if c.layer_type else ""),
                    c.report.as_text(width),
                ]
        lines += ["", self.summary()]
        lines += [f"fix: {self.fix}"] if self.fix else []
        lines += [
            f"no fix from posenc for {c.path}: {FIX} declines it — {c.declined}"
            for c in self.judged
            if c.declined
        ]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "passed": self.passed,
            "judged": len(self.judged),
            "not_judged": len(self.components) - len(self.judged),
            "fix": self.fix,
            "components": [
                {
                    "path": c.path,
                    "kind": c.kind,
                    "judged": c.judged,
                    "layer_type": c.layer_type,
                    "verdict": c.verdict(),
                    "note": c.note,
                    "report": None if c.report is None else c.report.as_dict(),
                }
                for c in self.components
            ],
        }

    def to_html(self, path: str | Path) -> Path:
        """One self-contained HTML file: the verdicts, then each component's report (written atomically)."""
        from ..atomic import atomic_output
        from .html import page, report_html, verdict_html

        summary = self.summary()
        word = summary.split(":", 1)[0]  # PASS, FAIL or NOT JUDGED
        head = html.escape(summary)
        if word in ("PASS", "FAIL"):
            head = verdict_html(word == "PASS") + html.escape(summary[len(word) :])
        parts = [
            f"<h1>posenc audit: {html.escape(self.target)}</h1><p>{head}</p><ul>"
            + "".join(f"<li>{html.escape(c.verdict())}</li>" for c in self.components)
            + "</ul>"
            + (f"<p>fix: <code>{html.escape(self.fix)}</code></p>" if self.fix else "")
        ]
        for c in self.components:
            if c.report is not None:
                title = html.escape(c.path + (f" ({c.layer_type})" if c.layer_type else ""))
                parts.append(
                    f"<section><h2>{title}: {verdict_html(c.passed, c.report.verdict())}</h2>"
                    f"{report_html(c.report, 3)}</section>"
                )
        document = page(f"posenc audit: {self.target}", "".join(parts))
        path = Path(path)
        with atomic_output(path, binary=False) as stream:
            stream.write(document)
        return path


def is_model(target: Any) -> bool:
    """Whether ``target`` is a torch module whose positional components lie in its submodules."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(target, torch.nn.Module):
        return False
    from ..torch.patching import find

    found = find(target)
    owners = [path.rpartition(".")[0] if kind == "table" else path for path, kind, _ in found]
    library = {"PreTrainedModel", "ModelMixin"}  # a Hugging Face or diffusers model: a ModelAudit, even empty
    # a timm model, as well (create_model gives it its pretrained_cfg; its layers have none)
    timm = type(target).__module__.split(".")[0] == "timm" and hasattr(target, "pretrained_cfg")
    return any(owners) or timm or any(cls.__name__ in library for cls in type(target).__mro__)


def audit_model(
    model: Any, *, samples: int, tol: Any = None, label: str | None = None, dtype: str | None = None
) -> ModelAudit:
    """Audit every positional component of ``model`` (module docstring); its rotary modules called in
    ``dtype`` (the hidden states' dtype they cast to; None: float32)."""
    from ..torch.patching import find

    components = []
    for path, kind, what in find(model):
        found = [_unknown(c) for c in _component(model, path, kind, what, samples, tol, dtype)]
        if any(c.judged and not c.passed for c in found):
            declined = _declined(model, path, kind, what)
            library = _library(model, path, kind, what)
            found = [_for_library(c, library, declined) for c in found] if library else found
            found = [dataclasses.replace(c, declined=declined) if c.judged else c for c in found]
        components += found
    return ModelAudit(label or type(model).__name__, components)


#: The libraries whose modules a user of them does not edit: a finding there gets the fix that applies to a
#: library user (posenc's patch, or the library's own option), never a change to the library's code.
LIBRARIES = ("transformers", "diffusers", "timm")


def _library(model: Any, path: str, kind: str, what: Any) -> str | None:
    """The library whose code computes the component (its module's, or for a table its owner's), or None
    where it is the user's own."""
    module = what
    if kind == "table":
        owner = path.rpartition(".")[0]
        module = model.get_submodule(owner) if owner else model
    top = type(module).__module__.split(".")[0]
    return top if top in LIBRARIES else None


def _for_library(component: ComponentAudit, library: str, declined: str) -> ComponentAudit:
    """``component``'s findings with the fix a user of ``library`` can apply: :data:`FIX` (which replaces
    the library's module at run time), never an edit of the library's code; where patch declines it
    (``declined``: its reason), no fix from posenc, and why."""
    report = component.report
    if report is None or report.passed:
        return component
    owner = f"{library}'" if library.endswith("s") else f"{library}'s"
    fix = f"{FIX}: posenc's exact module in place of {owner} (its code is not yours to edit)"
    if declined:
        fix = f"none from posenc: {FIX} declines it ({declined}); the values are {owner} code's, not yours"
    findings = [dataclasses.replace(f, fix=fix) if f.fix else f for f in report.findings]
    return dataclasses.replace(component, report=dataclasses.replace(report, findings=findings))


def _unknown(component: ComponentAudit) -> ComponentAudit:
    """``component``, not judged where its only finding is an unexplained error above :data:`UNKNOWN` of
    the amplitude: posenc does not know what it computes (GPT-OSS's half-width cos/sin, a formula of its
    own), and a guess would be a false finding."""
    report = component.report
    if report is None or report.passed or [f.kind for f in report.findings] != ["unexplained"]:
        return component
    from .. import rope

    error = report.max_abs if math.isfinite(report.max_abs) else report.finite_max_abs
    params = getattr(report.variant, "params", None)
    amplitude = 1.0 if params is None else abs(rope.attention_scaling(params))
    if error <= UNKNOWN * amplitude:
        return component
    note = (
        f"not what posenc reads it as ({report.variant.name}): its values differ by up to {error:.3g}, with "
        "no known cause — an unknown formula or layout; not judged"
    )
    return dataclasses.replace(component, report=None, note=note)


def _declined(model: Any, path: str, kind: str, what: Any) -> str:
    """Why ``posenc.torch.patch`` would leave this inexact component alone (its proofs, run without
    changing anything), or "" where it would make it exact."""
    from ..torch.patching import prove

    try:
        component = prove(model, path, kind, what)
    except Exception as error:  # a proof that cannot run: patch would raise, not fix
        return f"its proof cannot run: {type(error).__name__}: {str(error)[:120]}"
    return "" if component.replaced else component.reason


def _component(
    model: Any, path: str, kind: str, what: Any, samples: int, tol: Any, dtype: str | None = None
) -> list[ComponentAudit]:
    """The audit of one component; a module's forward run on the audit's positions changes nothing of it
    (Hugging Face's "dynamic" resets the frequencies its longest call grew, which the model's next call
    uses): its buffers and attributes are put back after."""
    import torch

    from ..torch.patching import kept_state

    with kept_state(what) if isinstance(what, torch.nn.Module) else contextlib.nullcontext():
        return _judged(model, path, kind, what, samples, tol, dtype)


def _judged(
    model: Any, path: str, kind: str, what: Any, samples: int, tol: Any, dtype: str | None = None
) -> list[ComponentAudit]:
    from . import audit

    try:
        if kind == "computed":
            return _computed(path, what, samples, tol, model)
        if kind == "table":
            from ..torch.patching import read_table

            reason, zeros = read_table(what)
            if reason is not None:
                unread = getattr(model, "__dict__", {}).get(UNREAD, {})  # in a file posenc does not open
                return [ComponentAudit(path, kind, None, unread.get(path, reason))]
            if not zeros:
                return [ComponentAudit(path, kind, audit(what, samples=samples, tol=tol))]
            rows = what.detach().reshape(-1, what.shape[-1])[zeros:]
            note = f"judged from row {zeros}: its first {zeros} row(s) are zeros (places that add nothing)"
            return [ComponentAudit(path, kind, audit(rows, samples=samples, tol=tol), note)]
        if kind == "timesteps":
            import torch

            def timesteps(t: Any) -> Any:
                return what(torch.as_tensor(t, dtype=torch.float32))

            timesteps.__qualname__ = f"{type(what).__name__} (its embedding of float32 timesteps)"

            claimed = _scaled_timesteps(what)
            report = audit(timesteps, positions=1000, samples=samples, tol=tol, preset=claimed)
            return [ComponentAudit(path, kind, report)]
        return _rotary(path, what, samples, tol, dtype, model)
    except ValueError as error:  # the component cannot be read as an encoding: said, not raised
        return [ComponentAudit(path, kind, None, f"{type(error).__name__}: {str(error)[:200]}")]


def _scaled_timesteps(module: Any) -> Any:
    """The variant a ``Timesteps`` that scales its timesteps (``scale`` ≠ 1: Qwen-Image's 1000) claims, from
    its options (identification knows no scale), else None (identified from its values)."""
    from .. import presets

    scale = getattr(module, "scale", 1)
    if not isinstance(scale, (int, float)) or scale == 1:
        return None
    options = {
        "flip_sin_to_cos": bool(module.flip_sin_to_cos),
        "downscale_freq_shift": float(module.downscale_freq_shift),
        "scale": float(scale),
    }
    return presets.get("diffusers-timestep", **options)


#: A 1-D sinusoid computed in forward is audited at positions 0 .. MAX_SINUSOID − 1 (its module names no
#: length; Pegasus-X's configs reach 16384).
MAX_SINUSOID = 16384
#: The image a DETR sine is audited on: every pixel of an unpadded image of this (H, W), row by row.
DETR_SHAPE = (48, 64)


def _dinov3(path: str, module: Any, exact: Any, samples: int, tol: Any, proof: Any = None) -> ComponentAudit:
    """DINOv3's rotary (:func:`posenc.torch.computed.read_dinov3`) or timm's axial rotary of an index grid
    (:func:`posenc.torch.computed.read_timm_rope`): its ``get_embed`` of a :data:`DETR_SHAPE` grid (one
    that caches its own grid's: of that grid) against :func:`posenc.grids.dinov3_rope` or
    :func:`posenc.grids.timm_rope`, once proven of the form its attributes name; else not judged, with the
    reason."""
    import torch

    from ..torch import computed
    from . import check_tolerance, report_of
    from .findings import Finding
    from .targets import Target
    from .variant import Variant

    name = type(getattr(module, "module", module)).__name__
    if proof is None:
        proof = exact if isinstance(exact, str) else computed.prove_dinov3(module, exact)
    if isinstance(exact, str) or isinstance(proof, str):
        return ComponentAudit(path, "computed", None, f"{name}: {exact if isinstance(exact, str) else proof}")
    timm = isinstance(exact, computed.TimmRope)
    shape = exact.feat_shape if timm and exact.feat_shape is not None else DETR_SHAPE  # a cache: its grid's
    with torch.no_grad(), computed.in_eval(module):  # its inference values: in training it may draw
        embed = module.get_embed(shape=list(shape))
    rows = embed.detach().to("cpu", torch.float64).numpy()
    dtype = str(embed.dtype).removeprefix("torch.")
    height, width = shape
    what = f"{name}: its get_embed of a {height}×{width} grid, row h·{width} + w"
    target = Target("table", what, lambda positions: rows[positions], dtype, len(rows), rows.shape[1])
    options = {
        "feat_shape": shape,
        "temperature": exact.temperature,
        "grid_offset": exact.grid_offset,
        "grid_indexing": exact.grid_indexing,
        "rotate_half": exact.rotate_half,
    }
    if timm:
        options["ref_feat_shape"] = exact.ref_feat_shape
        variant = Variant("timm-rope", options, "read from its attributes (timm's axial rotary)", True, 0.0)
    else:
        options.update(
            min_period=exact.min_period, max_period=exact.max_period, normalize_coords=exact.normalize_coords
        )
        variant = Variant("dinov3-rope", options, "read from its attributes (timm's DINOv3 form)", True, 0.0)
    report = report_of(target, variant, dtype, (0, len(rows)), samples, check_tolerance(tol))
    kinds = [f.kind for f in report.findings]
    if (
        not report.passed
        and kinds in ([], ["unexplained"], ["rounding"])
        and not isinstance(module, computed.DinoV3Rope)
    ):
        # proven within float32 code's rounding of its coordinates, frequencies and angles: the cause
        finding = Finding(
            "float32",
            f"coordinates, frequencies and angles formed in float32: up to {report.max_abs:.3g} from the "
            "exact values",
            f"{name} computes its coordinates, its frequencies and their products in float32: its values "
            f"are within that code's rounding of them (up to {proof[1]:.3g}) on probe grids",
            {"max_abs": report.max_abs, "allowed": proof[1]},
            fix=f"{FIX}: it becomes posenc.torch.computed.{type(exact).__name__}, exact at its coordinates",
        )
        report = dataclasses.replace(report, findings=[finding])
    kind = "timm's axial rotary" if timm else "DINOv3's rotary"
    note = f"{kind} of a {height}×{width} grid's coordinates"
    return ComponentAudit(path, "computed", report, note)


def _as_rope(
    path: str,
    module: Any,
    exact: Any,
    proof: Any,
    rows_of: Any,
    params: Any,
    span: int,
    note: str,
    samples: int,
    tol: Any,
) -> ComponentAudit:
    """A rotary of a form posenc reads (a length's, a latent grid's, Kandinsky's), once ``proof`` holds:
    one axis' (cos, sin) at positions 0 .. ``span`` − 1 (``rows_of(module, positions)``: each ``(1, k, w)``
    in RoPE's halves) audited as RoPE of ``params``; where every value is within what float32 code errs at
    its position and frequency, that is the finding (float64 code's where its values are float64). Else not
    judged, with the proof's reason."""
    import numpy as np
    import torch

    from .. import rope
    from ..torch.computed import within_rounding
    from ..torch.patching import COMPUTED, original_of
    from . import audit
    from .findings import Finding

    name = type(original_of(module) or module).__name__
    if isinstance(proof, str):
        reason = f"{COMPUTED}: {proof}" if proof.startswith("its forward") else proof
        return ComponentAudit(path, "computed", None, f"{name} {reason}")

    def rows(positions: Any) -> Any:
        return rows_of(module, positions)

    rows.__qualname__ = f"{name} (its cos, sin)"  # what the report names
    report = audit(rows, preset=params, positions=span, samples=samples, tol=tol)
    if not report.passed and [f.kind for f in report.findings] in ([], ["unexplained"], ["rounding"]):
        positions = np.arange(span)
        mine, ours = (torch.cat([t[0] for t in rows_of(m, positions)]) for m in (module, exact))
        frequencies = rope.inv_freq(params)
        code = "float64" if mine.dtype == torch.float64 else "float32"
        twice = np.concatenate([positions, positions]).astype(float)
        checked = within_rounding(mine, ours, twice, frequencies, "half", getattr(torch, code))
        if not isinstance(checked, float):
            own = next(c for c in type(exact).__mro__ if not c.__name__.startswith("_"))
            finding = Finding(
                code,
                f"frequencies and angles formed in {code}: up to {report.max_abs:.3g} from the exact values",
                f"{name} forms its frequencies and their angles in {code}: every value at 0 .. {span - 1} "
                f"is within that code's rounding of them (up to {checked[1]:.3g})",
                {"max_abs": report.max_abs, "allowed": checked[1]},
                fix=f"{FIX}: it becomes {own.__module__}.{own.__name__}, exact at its positions",
            )
            report = dataclasses.replace(report, findings=[finding])
    return ComponentAudit(path, "computed", report, note)


def _length_rope(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """A rotary of a length (:func:`posenc.torch.length_rope.read_length_rope`): its (cos, sin) at
    positions 0 .. 2047 against RoPE of its width and theta (:func:`_as_rope`)."""
    from ..torch import length_rope

    proof = length_rope.prove_length_rope(module, exact)
    span = length_rope.PROBE_LENGTHS[-1]
    note = f"RoPE of a length (width {exact.width}, theta {exact.theta:g}) at positions 0 .. {span - 1}"

    def rows_of(held: Any, positions: Any) -> Any:
        return length_rope.rows(held, exact, positions)

    return _as_rope(path, module, exact, proof, rows_of, exact.params, span, note, samples, tol)


def _grid_rope(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """A rotary of a latent's grid in halves (:func:`posenc.torch.grid_rope.read_grid_rope`), or of patch
    coordinates (:func:`posenc.torch.grid_rope.read_coords_rope`): its first axis at positions 0 ..
    :func:`posenc.torch.grid_rope.span` − 1 against RoPE of that axis' width and theta (:func:`_as_rope`)."""
    from .. import rope
    from ..torch import grid_rope

    coords = isinstance(exact, grid_rope.CoordsRope)
    width, theta = (exact.width, exact.theta) if coords else (exact.widths[0], exact.thetas[0])
    prove = grid_rope.prove_grid_rope  # the proof of its form (a patched class is its form's subclass)
    if coords:
        prove = grid_rope.prove_coords_rope
    elif isinstance(exact, grid_rope.IdsRope):
        prove = grid_rope.prove_ids_rope
    params = rope.RopeParameters("default", head_dim=width, rotary_dim=width, base=theta)
    span = grid_rope.span(exact, module)
    note = (
        f"a rotary of a grid: its first axis ({width} channels, theta {theta:g}) at positions 0 .. {span - 1}"
    )

    def rows_of(held: Any, positions: Any) -> Any:
        return grid_rope.axis_rows(held, exact, positions)

    proof = prove(module, exact)
    return _as_rope(path, module, exact, proof, rows_of, params, span, note, samples, tol)


def _anyflow(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """AnyFlow's rotary (:func:`posenc.torch.anyflow.read_anyflow`): its frames at positions 0 ..
    :func:`posenc.torch.anyflow.span` − 1 against RoPE of the frames' width and theta (:func:`_as_rope`)."""
    from .. import rope
    from ..torch import anyflow

    width, span = exact.widths[0], anyflow.span(module, exact)
    params = rope.RopeParameters("default", head_dim=width, rotary_dim=width, base=exact.theta)
    note = (
        f"AnyFlow's rotary of a grid: its frames ({width} channels, theta {exact.theta:g}) at 0 .. {span - 1}"
    )

    def rows_of(held: Any, positions: Any) -> Any:
        return anyflow.axis_rows(held, exact, positions)

    proof = anyflow.prove_anyflow(module, exact)
    return _as_rope(path, module, exact, proof, rows_of, params, span, note, samples, tol)


def _ltx_vae(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """LTX-2's decoder rotary (:func:`posenc.torch.ltx.read_ltx_vae`): its frames' cos and sin (its rotation
    of the pairs (1, 0)) at 0 .. 1023 against RoPE of the frames' chunk and its base (:func:`_as_rope`)."""
    import torch

    from .. import rope
    from ..torch import ltx

    width, span = exact.split[0], 1024
    params = rope.RopeParameters("default", head_dim=width, rotary_dim=width, base=exact.base)
    note = f"{exact.describe()}: its frames' chunk at positions 0 .. {span - 1}"

    def rows_of(held: Any, positions: Any) -> Any:
        positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
        count = int(positions.max()) + 1 if positions.numel() else 1
        pair = ltx.vae_cos_sin(held, exact, 0, count) if held is not exact else exact.cos_sin(0, count, "cpu")
        return tuple(torch.cat([t[positions], t[positions]], dim=-1)[None] for t in pair)

    proof = ltx.prove_ltx_vae(module, exact)
    return _as_rope(path, module, exact, proof, rows_of, params, span, note, samples, tol)


def _kandinsky(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """Kandinsky's rotary of rotation matrices (:func:`posenc.torch.kandinsky.read_kandinsky`): its first
    axis at positions 0 .. :func:`posenc.torch.kandinsky.span` − 1 against RoPE of that axis' width and
    max_period (Kandinsky 6's ``freqs_scaling`` s: a linear scaling of factor 1/s; :func:`_as_rope`)."""
    from .. import rope
    from ..torch import kandinsky

    width, scaling = exact.widths[0], getattr(exact, "scaling", 1.0)
    params = rope.RopeParameters("default", head_dim=width, rotary_dim=width, base=exact.max_period)
    if scaling != 1:
        params = rope.RopeParameters(
            "linear", head_dim=width, rotary_dim=width, base=exact.max_period, factor=1 / scaling
        )
    span = kandinsky.span(module, exact)
    note = f"rotation matrices: its first axis ({width} channels) at positions 0 .. {span - 1}"

    def rows_of(held: Any, positions: Any) -> Any:
        return kandinsky.axis_rows(held, exact, positions)

    proof = kandinsky.prove_kandinsky(module, exact)
    return _as_rope(path, module, exact, proof, rows_of, params, span, note, samples, tol)


#: LTX's rotary is audited along its first axis at the coordinates 0 .. LTX_ROWS − 1.
LTX_ROWS = 1024


def _ltx(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """LTX-Video's or LTX-2's rotary (:func:`posenc.torch.ltx.read_ltx`): its (cos, sin) of the coordinates
    0 .. :data:`LTX_ROWS` − 1 on its first axis against posenc's, once proven of the form its attributes
    name; else not judged, with the reason. Where every value is within what float32 code errs there, that
    is the finding."""
    import numpy as np
    import torch

    from ..torch import ltx
    from ..torch.patching import COMPUTED, original_of
    from . import check_tolerance, report_of
    from .findings import Finding
    from .targets import Target
    from .variant import Variant

    name = type(original_of(module) or module).__name__
    proof = ltx.prove_ltx(module, exact)
    if isinstance(proof, str):
        reason = f"{COMPUTED}: {proof}" if proof.startswith("its forward") else proof
        return ComponentAudit(path, "computed", None, f"{name} {reason}")
    cos, sin, fractions = ltx.axis_rows(module, exact, LTX_ROWS)
    rows = torch.cat([cos, sin], dim=-1).to(torch.float64).numpy()
    ours = ltx.axis_rows(exact, exact, LTX_ROWS)
    exact_rows = torch.cat(ours[:2], dim=-1).to(torch.float64).numpy()
    what = (
        f"{name}: its (cos, sin) of the coordinates 0 .. {LTX_ROWS - 1} on its first axis (0 on the others)"
    )
    target = Target("table", what, lambda positions: rows[positions], "float32", len(rows), rows.shape[1])
    variant = Variant(
        "ltx-rope",
        {"theta": exact.theta, "dim": exact.dim},
        "read from its attributes (LTX's form)",
        True,
        0.0,
        values=lambda positions, dtype: exact_rows[positions],
    )
    report = report_of(target, variant, "float32", (0, len(rows)), samples, check_tolerance(tol))
    allowed = ltx.axis_allowance(exact, fractions).numpy()
    difference = np.abs(rows - exact_rows)
    if not report.passed and bool((difference <= allowed).all()):
        finding = Finding(
            "float32",
            f"coordinates, frequencies and angles formed in float32: up to {report.max_abs:.3g} from the "
            "exact values",
            f"{name} forms its fractions, its frequencies (π/2)·theta^(k/(n−1)) and their angles in float32: "
            f"every value is within that code's rounding of them at its coordinate (up to {proof[1]:.3g} "
            "on the probes)",
            {"max_abs": report.max_abs, "allowed": float(allowed.max())},
            fix=f"{FIX}: it becomes posenc.torch.ltx.{type(exact).__name__.removeprefix('_Patched')}, exact "
            "at its coordinates",
        )
        report = dataclasses.replace(report, findings=[finding])
    return ComponentAudit(path, "computed", report, "LTX's rotary of fractional coordinates")


def _period_time(path: str, module: Any, exact: Any, samples: int, tol: Any) -> ComponentAudit:
    """A time embedding of periods (:func:`posenc.torch.period_time.read_period_time`: π0's): its values at
    :data:`posenc.torch.period_time.PROBE_TIMES` (rows, one a time) against posenc's, once proven of the
    form its config names; else not judged, with the reason. Where every value is within what float32 code
    errs there, that is the finding."""
    import torch

    from ..torch import period_time
    from ..torch.patching import COMPUTED, original_of
    from . import check_tolerance, report_of
    from .findings import Finding
    from .targets import Target
    from .variant import Variant

    name = type(original_of(module) or module).__name__
    proof = period_time.prove_period_time(module, exact)
    if isinstance(proof, str):
        reason = f"{COMPUTED}: {proof}" if proof.startswith("its forward") else proof
        return ComponentAudit(path, "computed", None, f"{name} {reason}")
    times = torch.from_numpy(period_time.PROBE_TIMES.astype("float32"))
    with torch.no_grad():
        rows, ours = (m(times).to(torch.float64).numpy() for m in (module, exact))
    what = f"{name}: its [sin | cos] at the times 0 .. 1 (steps of 1/512) and 2 .. 64, a row each"
    target = Target("table", what, lambda positions: rows[positions], "float32", len(rows), rows.shape[1])
    variant = Variant(
        "period-time",
        {"min_period": exact.min_period, "max_period": exact.max_period, "width": exact.width},
        "read from its config (π0's time embedding)",
        True,
        0.0,
        values=lambda positions, dtype: ours[positions],
    )
    report = report_of(target, variant, "float32", (0, len(rows)), samples, check_tolerance(tol))
    if not report.passed:  # the proof holds: every value is within float32 code's rounding at its time
        finding = Finding(
            "float32",
            f"frequencies and angles formed in float32: up to {report.max_abs:.3g} from the exact values",
            f"{name} forms its frequencies 2π / (min_period · (max_period / min_period)^(k/(n−1))) and their "
            f"angles in float32: every value is within that code's rounding of them at its time (up to "
            f"{proof[1]:.3g})",
            {"max_abs": report.max_abs, "allowed": proof[1]},
            fix=f"{FIX}: it becomes posenc.torch.period_time.PeriodTime, exact at every time",
        )
        report = dataclasses.replace(report, findings=[finding])
    return ComponentAudit(path, "computed", report, "a time embedding of periods (π0's)")


def _polar(path: str, module: Any, reading: Any, samples: int, tol: Any) -> list[ComponentAudit]:
    """Qwen-Image's complex rotary tables (:func:`posenc.torch.computed.read_polar_tables`): each axis' rows
    of positions 0, 1, ... as a table of its theta, once every value is proven of the form its attributes
    name; else not judged, with the reason."""
    from ..torch import computed
    from . import audit

    name = type(module).__name__
    proof = reading if isinstance(reading, str) else computed.prove_polar_tables(module, reading)
    if isinstance(proof, str):
        return [ComponentAudit(path, "computed", None, f"{name}: {proof}")]
    judged = []
    for axis, width in enumerate(reading.axes_dim):
        rows = computed.polar_rows(module, reading, axis)
        if rows is None:
            judged.append(ComponentAudit(path, "computed", None, f"{name}: no table of axis {axis} from 0"))
            continue
        report = audit(rows, samples=samples, tol=tol, preset={"base": reading.theta, "layout": "sin_cos"})
        note = f"axis {axis} ({width} channels, theta {reading.theta:g}) at positions 0 .. {len(rows) - 1}"
        judged.append(ComponentAudit(path, "computed", report, note, f"axis {axis}"))
    return judged


def _axes(path: str, module: Any, exact: Any, samples: int, tol: Any) -> list[ComponentAudit]:
    """A rotary on several axes (Flux's, :func:`posenc.torch.computed.rope_on_axes`): each axis whose
    positions are 0, 1, ... at 0 .. ROWS − 1, as a table; not judged where its proof fails."""
    from ..torch import computed
    from ..torch.patching import COMPUTED
    from . import audit

    proof = computed.prove_rope_on_axes(module, exact)
    if isinstance(proof, str):  # not of the form its attributes say: not judged, with what it is not
        reason = f"{COMPUTED}: {proof}" if proof.startswith("its forward") else proof
        return [ComponentAudit(path, "computed", None, f"{type(module).__name__} {reason}")]
    judged = []
    for axis, width in enumerate(exact.axes_dim):
        if exact.integer_axes is not None and axis not in exact.integer_axes:
            continue  # positions of a crop region (EasyAnimate's rows, columns): its proof's
        rows = computed.rope_rows(module, exact, axis)
        claimed = {"base": exact.theta, "layout": "sin_cos"}
        report = audit(rows, samples=samples, tol=tol, preset=claimed)
        note = f"axis {axis} ({width} columns, theta {exact.theta:g}) at positions 0 .. {len(rows) - 1}"
        judged.append(ComponentAudit(path, "computed", report, note, f"axis {axis}"))
    return judged


def _forms() -> dict[type, Callable[..., list[ComponentAudit]]]:
    """How the audit takes each form :func:`posenc.torch.forms.read` gives, by the class of posenc's
    equivalent: a list of judgments."""
    from ..torch import anyflow, computed, grid_rope, kandinsky, length_rope, ltx, period_time

    def one(judge: Callable[..., ComponentAudit]) -> Callable[..., list[ComponentAudit]]:
        return lambda *args: [judge(*args)]

    def rotary(judge: Callable[..., ComponentAudit]) -> Callable[..., list[ComponentAudit]]:
        return lambda *args: [dataclasses.replace(judge(*args), kind="rotary")]

    return {
        computed.AxesRope: _axes,
        ltx.LtxRope: one(_ltx),
        ltx.Ltx2Rope: one(_ltx),
        ltx.LtxVaeRope: one(_ltx_vae),
        length_rope.LengthRope: one(_length_rope),
        period_time.PeriodTime: one(_period_time),
        grid_rope.GridRope: one(_grid_rope),
        grid_rope.CosmosRope: one(_grid_rope),
        grid_rope.CoordsRope: rotary(_grid_rope),  # patched in: no inv_freq, still a rotary
        grid_rope.IdsRope: rotary(_grid_rope),
        kandinsky.KandinskyRope1D: one(_kandinsky),
        kandinsky.KandinskyRope3D: one(_kandinsky),
        anyflow.AnyFlowRope: one(_anyflow),
    }


def _computed(path: str, module: Any, samples: int, tol: Any, model: Any = None) -> list[ComponentAudit]:
    """A module that computes its sinusoids in its forward: judged where posenc reads it
    (:mod:`posenc.torch.computed`: a DETR sine, measured on the pixels of an unpadded image against
    :func:`posenc.grids.detr_grid`), else not judged, with the reason."""
    import torch

    from ..torch import computed, forms
    from ..torch.patching import COMPUTED, inside_code, original_of
    from . import check_tolerance, report_of
    from .findings import Finding
    from .targets import Target
    from .variant import Variant

    grid = computed.grid_sine_options(module)
    if grid is not None:  # RT-DETR's 2-D sine: every cell of a grid, against posenc.grids.timm_2d
        dim, temperature = grid
        height, width = DETR_SHAPE
        rows = computed.call_grid_sine(module, height, width).detach().to("cpu", torch.float64).numpy()
        what = f"{type(module).__name__}: its rows for a {height}×{width} grid"
        target = Target("table", what, lambda positions: rows[positions], "float32", len(rows), dim)
        options = {"feat_shape": DETR_SHAPE, "temperature": temperature, "interleave_sin_cos": True}
        variant = Variant("timm-2d", options, "read from its attributes (RT-DETR's form)", True, 0.0)
        report = report_of(target, variant, "float32", (0, len(rows)), samples, check_tolerance(tol))
        return [ComponentAudit(path, "computed", report, "RT-DETR's 2-D sine")]
    grid = computed.grid_method_options(module)
    if grid is not None:  # the same, a static method of its encoder (OmDet-Turbo's): rows width-major
        dim, temperature = grid
        height, width = DETR_SHAPE
        rows = computed.grid_method_rows(module, height, width).detach().to("cpu", torch.float64).numpy()
        what = f"{type(module).__name__}: its {computed.GRID_METHOD} for a {height}×{width} grid"
        target = Target("table", what, lambda positions: rows[positions], "float32", len(rows), dim)
        options = {"feat_shape": (width, height), "temperature": temperature, "interleave_sin_cos": True}
        variant = Variant("timm-2d", options, "read from its attributes (RT-DETR's first form)", True, 0.0)
        report = report_of(target, variant, "float32", (0, len(rows)), samples, check_tolerance(tol))
        return [ComponentAudit(path, "computed", report, f"RT-DETR's 2-D sine (its {computed.GRID_METHOD})")]
    dinov3 = computed.read_dinov3(module)
    dinov3 = computed.read_timm_rope(module) if dinov3 is None else dinov3
    if dinov3 is not None:  # DINOv3's rotary, timm's axial one: its get_embed of a grid, as a table
        return [_dinov3(path, module, dinov3, samples, tol)]
    exact = forms.read(module)
    if exact is not None:  # a rotary posenc reads by its form: as a table or as a rotary, by its kind
        return forms.handler(exact, _forms())(path, module, exact, samples, tol)
    if computed.reads_relative(module):  # XLNet's relative encoding (a method): its rows, as a table
        from . import audit

        method = getattr(module, computed.RELATIVE_METHOD)
        rows = torch.from_numpy(computed.relative_rows(module)).float()
        if isinstance(method, computed.ExactRelative):  # patched: posenc's rows
            rows = method(1, len(rows) - 1)[:, 0].flip(0)
        report = audit(rows, samples=samples, tol=tol)
        note = f"its {computed.RELATIVE_METHOD} at positions 0 .. {len(rows) - 1}"
        return [ComponentAudit(path, "computed", report, note)]
    widths = computed.axes_rotation_widths(module)
    if widths is not None:  # V-JEPA 2's rotary in its attention: each block at 0 .. ROWS − 1, as a table
        from . import audit

        try:
            tables = computed.axes_rotation_rows(module)
        except Exception as error:  # its own code refuses the probe, or another layout
            reason = (
                f"its {computed.AXES_ROTATION_METHOD} is not read ({type(error).__name__}: {error!s:.100})"
            )
            return [ComponentAudit(path, "computed", None, f"{type(module).__name__}: {reason}")]
        judged = []
        claimed = {"base": computed.AXES_ROTATION_BASE, "layout": "sin_cos"}
        for axis, (width, rows) in enumerate(zip(widths, tables, strict=True)):
            report = audit(rows.float(), samples=samples, tol=tol, preset=claimed)
            note = f"axis {axis} ({width} channels, base 10000) at positions 0 .. {len(rows) - 1}"
            judged.append(ComponentAudit(path, "computed", report, note, f"axis {axis}"))
        return judged
    polar = computed.read_polar_tables(module)
    if polar is not None:  # Qwen-Image's complex tables: each axis at 0 .. ROWS − 1, as a table
        return _polar(path, module, polar, samples, tol)
    method = computed.sinusoid_method(module)
    if method is not None:  # a sinusoid computed by a method: its rows at 0 .. ROWS − 1, as a table
        from . import audit

        try:
            rows = computed.method_rows(module, method)
        except Exception as error:  # its method refuses the probe positions
            reason = f"its {method} refuses posenc's probe ({type(error).__name__}: {error!s:.100})"
            return [ComponentAudit(path, "computed", None, f"{type(module).__name__}: {reason}")]
        report = audit(rows, samples=samples, tol=tol, preset=computed.SINUSOID_METHODS[method][1])
        return [ComponentAudit(path, "computed", report, f"its {method} at positions 0 .. {len(rows) - 1}")]
    reading = computed.read_detr_sine(module)
    convention = computed.sinusoid_convention(module)
    refusal = computed.probe_refusal(module, convention) if convention is not None else None
    if isinstance(reading, str) and refusal is not None:
        return [ComponentAudit(path, "computed", None, f"{type(module).__name__} {COMPUTED}: {refusal}")]
    if isinstance(reading, str) and convention is not None:  # a 1-D sinusoid: measured at its positions
        from . import audit

        if convention == "rows":  # its fixed rows, as a table
            report = audit(computed.fixed_rows(module), samples=samples, tol=tol)
            return [ComponentAudit(path, "computed", report, "its rows, in the order of their positions")]
        if convention == "relative":  # its rows of positions 0 .. ROWS − 1, as a table
            rows = torch.from_numpy(computed.sinusoid_rows(module, convention))
            report = audit(rows.float(), samples=samples, tol=tol)
            note = (
                f"its rows of the positions 0 .. {len(rows) - 1} (of an input of n = {len(rows)}: n − 1 .. "
            )
            note += "−(n − 1))"
            return [ComponentAudit(path, "computed", report, note)]

        def values(positions: Any) -> Any:
            return computed.call_sinusoid(module, convention, torch.as_tensor(positions))

        values.__qualname__ = f"{type(original_of(module) or module).__name__} (its forward)"  # the report's

        timed = convention in computed.TIMED
        span = computed.TIMESTEPS if timed else MAX_SINUSOID
        note = "its values at t = 0 .. 999" if timed else "its values at its positions"
        scale = computed.time_scale(module) if convention == "timesteps" else 1.0
        if scale == 1:
            report = audit(values, positions=span, samples=samples, tol=tol)
            return [ComponentAudit(path, "computed", report, note)]

        def unscaled(positions: Any) -> Any:  # t = p / scale: its values at the positions 0, 1, ...
            return values(torch.as_tensor(positions, dtype=torch.float32) / scale)

        # identified at t = p / scale (identification knows no scale), then judged at t = 0 .. 999 against
        # that variant times its scale, as a Timesteps of a scale is
        found = audit(unscaled, positions=span, samples=samples, tol=tol)
        if not found.variant.matches:
            return [ComponentAudit(path, "computed", found, f"its values at t = p / {scale:g}, p = 0 .. 999")]
        claimed = {k: found.variant.options[k] for k in computed.CORE_OPTIONS if k in found.variant.options}
        claimed["scale"] = float(claimed.get("scale", 1.0)) * scale
        report = audit(values, positions=span, samples=samples, tol=tol, preset=claimed)
        note += f" (its positions t · {scale:g})"
        return [ComponentAudit(path, "computed", report, note)]
    learned = inside_code(module) or computed.learned_angles(module, model) or computed.with_layers(module)
    if isinstance(reading, str) and learned is not None:
        return [ComponentAudit(path, "computed", None, f"{type(module).__name__}: {learned}")]
    if isinstance(reading, str):
        reason = COMPUTED if reading.startswith("computes") else reading
        return [ComponentAudit(path, "computed", None, f"{type(module).__name__} {reason}")]
    height, width = DETR_SHAPE
    output = computed.call_detr_sine(
        module, reading.convention, torch.ones(1, height, width, dtype=torch.long)
    )
    rows = output.detach().to("cpu", torch.float64)[0].permute(1, 2, 0).reshape(height * width, -1).numpy()
    dtype = str(output.dtype).removeprefix("torch.")
    what = f"{type(module).__name__}: its output for an unpadded {height}×{width} image, row h·{width} + w"
    target = Target("table", what, lambda positions: rows[positions], dtype, len(rows), rows.shape[1])
    options = {"shape": DETR_SHAPE, **reading.options()}
    variant = Variant(
        "detr-2d", options, f"read from its attributes and values: {reading.describe()}", True, 0.0
    )
    report = report_of(target, variant, dtype, (0, len(rows)), samples, check_tolerance(tol))
    kinds = [f.kind for f in report.findings]
    if not report.passed and kinds in ([], ["unexplained"], ["rounding"]) and reading.convention != "posenc":
        # its values are proven within float32 code's rounding of ω and of p·ω at DETR's own positions
        # (read_detr_sine): that is the cause, and patch's drop-in the fix
        finding = Finding(
            "float32",
            f"angles and frequencies formed in float32: up to {report.max_abs:.3g} from the exact values",
            f"{type(module).__name__} computes temperature^(2i/F) and p / that in float32: its values are "
            f"within that code's rounding of them (up to {reading.allowed:.3g}) on probe masks, at its own "
            "positions",
            {"max_abs": report.max_abs, "allowed": reading.allowed},
            fix=f"{FIX}: it becomes posenc.torch.DetrSinePositionEmbedding({reading.features}, ...), "
            "exact at DETR's positions",
        )
        report = dataclasses.replace(report, findings=[finding])
    return [ComponentAudit(path, "computed", report, reading.describe())]


def _rotary(
    path: str, module: Any, samples: int, tol: Any, dtype: str | None = None, model: Any = None
) -> list[ComponentAudit]:
    import torch

    from .. import rope
    from ..torch import axial, computed, grid_rope, length_rope, su_rope
    from ..torch.patching import kept_state, original_of
    from . import audit

    states = getattr(torch, dtype or "float32")  # the hidden states' dtype: what its cos/sin are cast to
    reading = axial.read_axial(module)
    if reading is not None:
        return [_axial(path, module, reading, samples, tol, states)]
    pixels = computed.read_hf_dinov3(module)
    if pixels is not None:  # transformers' DINOv3 rotary: judged as timm's, on its forward of a grid
        embed = pixels if isinstance(pixels, str) else computed.hf_dinov3_embed(module, pixels.patch)
        audited = _dinov3(path, embed, pixels, samples, tol, computed.prove_hf_dinov3(module, pixels))
        return [dataclasses.replace(audited, kind="rotary")]
    scaled = su_rope.read_su_rope(module)
    if scaled is not None:  # LongRoPE written without a config (OmniGen's): (S, dim) of its first row of ids

        def first_row(ids: Any) -> Any:
            with torch.no_grad():
                return tuple(t[None] for t in module(torch.zeros(1), torch.as_tensor(ids)[None]))

        first_row.__qualname__ = f"{type(original_of(module) or module).__name__} (its cos, sin)"
        limit = scaled.params.max_position_embeddings
        report = audit(first_row, preset=scaled.params, positions=limit, samples=samples, tol=tol)
        return [ComponentAudit(path, "rotary", report, "LongRoPE of its attributes (short and long factors)")]
    stacked = length_rope.read_length_rope(module)
    if stacked is not None:  # wav2vec2-conformer's stack([cos, sin]) of (hidden_states), its inv_freq held
        return [dataclasses.replace(_length_rope(path, module, stacked, samples, tol), kind="rotary")]
    grid = grid_rope.read_coords_rope(module) or grid_rope.read_ids_rope(module)
    if grid is not None:  # timm's Gemma 4 ViT rotary, MiniMax-H3's (positions given): its first axis
        return [dataclasses.replace(_grid_rope(path, module, grid, samples, tol), kind="rotary")]
    sections = su_rope.read_sections_rope(module, computed.config_base(model))
    if sections is not None:  # Ideogram 4's, Cosmos3-Omni's: text ids (one position on every axis) 0 ..

        def text_rows(ids: Any) -> Any:
            return su_rope.sections_rows(module, sections, ids)

        text_rows.__qualname__ = f"{type(original_of(module) or module).__name__} (its cos, sin)"
        proof = su_rope.prove_sections_rope(module, sections)  # first: every axis, as patch proves it
        if isinstance(proof, str):
            return [ComponentAudit(path, "rotary", None, proof)]
        p = sections.params
        params = rope.RopeParameters("default", head_dim=p.head_dim, rotary_dim=p.rotary_dim, base=p.base)
        report = audit(text_rows, preset=params, positions=4096, samples=samples, tol=tol)
        note = (
            f"interleaved multimodal sections {list(p.mrope_section)} of its inv_freq (no config): text ids, "
            "one position on every axis"
        )
        return [ComponentAudit(path, "rotary", report, note)]
    plain = su_rope.read_plain_rope(module)
    if plain is not None:  # a default rotary holding only its inv_freq (Anima's): its cos, sin of ids 0 ..

        def rows(ids: Any) -> Any:
            with torch.no_grad():
                return tuple(t.float() for t in module(torch.zeros(1), torch.as_tensor(ids)[None]))

        rows.__qualname__ = f"{type(original_of(module) or module).__name__} (its cos, sin)"
        proof = su_rope.prove_plain_rope(module, plain)  # first: another form is not judged as this one
        if isinstance(proof, str):
            return [ComponentAudit(path, "rotary", None, proof)]
        report = audit(rows, preset=plain.params, positions=4096, samples=samples, tol=tol)
        return [ComponentAudit(path, "rotary", report, "a rotary of its inv_freq (no config)")]
    config = getattr(module, "config", None)
    held = getattr(module, "layer_params", None)  # posenc's per-layer module: its parameters per type
    limit = int(getattr(config, "max_position_embeddings", 0) or 0) or None
    buffers = {k for k, _ in module.named_buffers(recurse=False)}
    # the layer types the model's own module held (Gemma 3 builds only those its layers use): a patched
    # one answers for the same ones, before and after the patch
    original = original_of(module)
    held_by = module if original is None else original
    named = {k for k, _ in held_by.named_buffers(recurse=False)}
    types = [k.removesuffix("_inv_freq") for k in named if k.endswith("_inv_freq") and "original" not in k]
    own = getattr(module, "params", None)
    params = own if isinstance(own, rope.RopeParameters) else None
    if params is None and config is not None and "inv_freq" in buffers:
        try:
            params = rope.config(config)
        except (ValueError, TypeError, KeyError) as error:  # a vision tower's 2-D "axial" rotary, ...
            return [ComponentAudit(path, "rotary", None, f"its config is no RoPE posenc knows: {error}")]
    section = getattr(params, "mrope_section", None) or getattr(module, "mrope_section", None)
    if params is not None and isinstance(section, (list, tuple)) and section:
        # M-RoPE: text positions, one id on each of its three axes (time = height = width), where every
        # layout of the sections gives plain RoPE's values: judged against those
        plain = dataclasses.replace(params, mrope_section=None, mrope_interleaved=False)

        def text(ids: Any) -> Any:
            with torch.no_grad(), kept_state(module):  # each call from the state it was given
                return module(torch.zeros(1, dtype=states), torch.as_tensor(ids)[None, None].expand(3, 1, -1))

        note = "M-RoPE at text positions (the three axes equal)"
        if _pairs(text, plain):  # GLM's design: judged in halves' order, every value as it is

            def pairs(ids: Any) -> Any:
                return tuple(torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1) for t in text(ids))

            report = audit(pairs, preset=plain, positions=limit, samples=samples, tol=tol)
            note += "; its cos/sin in interleaved pairs (its design, as its values show), read as halves"
            return [ComponentAudit(path, "rotary", report, note)]
        report = audit(text, preset=plain, positions=limit, samples=samples, tol=tol)
        return [ComponentAudit(path, "rotary", report, note)]
    if "inv_freq" in buffers or (config is None and not held) or not types:
        report = audit(module, positions=limit, samples=samples, tol=tol, dtype=dtype)
        return [ComponentAudit(path, "rotary", report)]
    found = []
    for layer_type in sorted(types):
        params = held[layer_type] if held else rope.config(config, layer_type=layer_type)
        count = dict(held_by.named_buffers(recurse=False))[f"{layer_type}_inv_freq"].numel()
        if count != params.n_frequencies:  # a width of the type's own, as its frequencies give it (dots3's)
            try:
                params = params.with_frequencies(count)
            except ValueError as error:
                note = f"its {count} {layer_type} frequencies give no width posenc builds: {error}"
                found.append(ComponentAudit(path, "rotary", None, note, layer_type=layer_type))
                continue

        def cos_sin(ids: Any, layer_type: str = layer_type, half: int = params.n_frequencies) -> Any:
            with torch.no_grad(), kept_state(module):  # each call from the state it was given
                out = module(torch.zeros(1, dtype=states), torch.as_tensor(ids)[None], layer_type)
            cos, sin = (out.real, out.imag) if isinstance(out, torch.Tensor) and out.is_complex() else out
            if cos.shape[-1] == half:  # one column per frequency (DeepSeek-V4's): the halves repeat them
                cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
            return cos, sin

        report = audit(cos_sin, preset=params, positions=limit, samples=samples, tol=tol)
        found.append(ComponentAudit(path, "rotary", report, layer_type=layer_type))
    return found


def _pairs(text: Any, params: Any) -> bool:
    """Whether a rotary's cos at positions 0 .. 15 (``text(ids)`` -> (cos, sin)) is ``params``' in
    interleaved pairs ([c0, c0, c1, c1, ...]: GLM's M-RoPE) rather than halves: nearer those exact values,
    and within 2⁻⁴ of them."""
    import numpy as np

    from .. import rope

    positions = np.arange(16)
    try:
        cos = np.asarray(text(positions)[0].detach().to("cpu").double()).reshape(16, -1)
    except Exception:  # the judgment that follows says what it is
        return False
    errors = {}
    for layout in ("half", "interleaved"):
        exact = rope.cos_sin(positions, params, dtype="float64", layout=layout)[0]
        errors[layout] = float(np.abs(exact - cos).max()) if exact.shape == cos.shape else np.inf
    return errors["interleaved"] < min(errors["half"], 2.0**-4)


#: An axial rotary is audited along its first axis at coordinates 0 .. AXIAL_SPAN − 1 (its config names no
#: grid size; 2048 patches of 14 pixels are a 28672-pixel side).
AXIAL_SPAN = 2048


def _axial(path: str, module: Any, reading: Any, samples: int, tol: Any, states: Any) -> ComponentAudit:
    """Hugging Face's axial rotary of a grid (:func:`posenc.torch.axial.read_axial`): its first axis'
    frequencies (:func:`posenc.torch.axial.first_axis`) at coordinates 0 .. :data:`AXIAL_SPAN` − 1, the
    others 0, against the rotary of their width and its config's theta; else not judged, with the reason."""
    from .. import rope
    from ..torch import axial
    from . import audit

    name = type(module).__name__
    first = reading if isinstance(reading, str) else axial.first_axis(module, reading)
    if isinstance(first, str):
        return ComponentAudit(path, "rotary", None, f"{name}: {first}")
    width = first[1]
    params = rope.RopeParameters("default", head_dim=width, rotary_dim=width, base=reading.theta)

    def rows(ids: Any) -> Any:
        return axial.axial_rows(module, reading, ids, states)

    report = audit(rows, preset=params, positions=AXIAL_SPAN, samples=samples, tol=tol)
    note = (
        f"axial rotary of a grid ({reading.describe()}): its first axis ({width // 2} frequencies) at "
        f"coordinates 0 .. {AXIAL_SPAN - 1}, the others 0"
    )
    return ComponentAudit(path, "rotary", report, note)


class ModelDirectoryError(PosencValueError):
    """A model folder that posenc refuses to build (``from_directory``): ``parameter`` names the field of
    its ``config.json`` (``hidden_size``, ``text_config.rope_theta``) or its file (``model.safetensors``) at
    fault, when one is."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message, parameter=parameter)


#: The bounds a folder's config.json is held to before anything is built (each far beyond any real model).
#: Bytes of config.json read at most: the largest real ones (with label maps) are a few hundred KiB (the
#: bound of ``posenc.rope.config`` reading a path too).
MAX_CONFIG_BYTES = CONFIG_BYTES
#: Levels config.json may nest: a model's nests three or four (``text_config.rope_parameters.factor``).
MAX_CONFIG_DEPTH = 32
#: Parameters a config may describe, estimated from its sizes before building: 10**14, some 50 times the
#: largest published model. The model is built on the meta device, so this bounds no allocation: it refuses
#: a config no model has (``hidden_size: 2**20`` with many layers) before minutes are spent building it.
MAX_PARAMETERS = 10**14
#: Values a positional table read from the folder's safetensors may hold: 2**28 (1 GiB of float32).
MAX_TABLE_VALUES = 2**28
#: Values a positional buffer computed from the config may hold: 2**25. Some classes build theirs in Python
#: lists (DistilBERT's, XLM's: ~50 bytes and ~2.4 µs a value), so 2**25 is ~2 GB and ~80 s at most.
MAX_COMPUTED_VALUES = 2**25

_WIDTH = (1, 2**18, "the widest models are about 2**14 wide")
_LAYERS = (0, 2**12, "the deepest models have about 2**7 layers")
_HEADS = (1, 2**16, "the models with the most heads have about 2**7")
_EXPERTS = (0, 2**12, "the largest mixtures have about 2**9 experts")
_POSITIONS = (1, MAX_POSITION, "the positions posenc audits")
#: The size fields of a config (at any level: ``text_config.hidden_size`` too): (minimum, maximum, why).
_SIZES: dict[str, tuple[int, int, str]] = {
    **dict.fromkeys(
        (
            "hidden_size",
            "d_model",
            "n_embd",
            "intermediate_size",
            "ffn_dim",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "n_inner",
            "kv_channels",
            "moe_intermediate_size",
            "d_ff",
            "d_kv",
            "dim",
            "hidden_dim",
            "emb_dim",
            "embed_dim",
            "hidden_sizes",
        ),
        _WIDTH,
    ),
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "n_layer",
            "num_layers",
            "encoder_layers",
            "decoder_layers",
            "num_decoder_layers",
            "n_layers",
            "depth",
            "depths",
        ),
        _LAYERS,
    ),
    **dict.fromkeys(
        (
            "num_attention_heads",
            "num_key_value_heads",
            "n_head",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "n_heads",
            "num_heads",
        ),
        _HEADS,
    ),
    # 0 where a config derives it from others (GLM-5 Next's text config: its qk_rope_head_dim, 0 there)
    "head_dim": (0, _WIDTH[1], _WIDTH[2]),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts"), _EXPERTS),
    **dict.fromkeys(
        (
            "max_position_embeddings",
            "original_max_position_embeddings",
            "n_positions",
            "n_ctx",
            "max_source_positions",
            "max_target_positions",
        ),
        _POSITIONS,
    ),
    "vocab_size": (1, 2**24, "the largest vocabularies hold about 2**18 tokens"),
    # transformers builds an id2label entry per label, MusicGen a module per codebook, DETR a query each
    "num_labels": (0, 2**17, "the largest label sets hold about 2**15 (ImageNet-22k: 21,843)"),
    "num_codebooks": (1, 2**10, "audio models use about 2**3 codebooks"),
    "num_queries": (1, 2**16, "detection models use about 2**8 to 2**12 queries"),
}
#: The size fields a config may give per layer, as a list of one size each (Gemma 3n's intermediate_size)
_PER_LAYER = ("intermediate_size", "num_key_value_heads", "num_attention_heads", "head_dim", "ffn_dim")
#: ... or per stage of a vision tower (Swin's, ConvNeXt's: ``depths``, ``hidden_sizes``, ``num_heads``)
_PER_LAYER += ("depths", "hidden_sizes", "num_heads", "embed_dim")
#: The numbers of a rotary block (``rope_scaling``, ``rope_parameters``, or one layer type's block in it).
_ROPE_BLOCKS = ("rope_scaling", "rope_parameters")
_ROPE_NUMBERS = (
    "factor",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "low_freq_factor",
    "high_freq_factor",
    "mscale",
    "mscale_all_dim",
)
#: Rotary bases: a number > 0 wherever they are written (null is refused: transformers raises on it).
_BASES = ("rope_theta", "rope_local_base_freq")
#: The floating types a config may build its model in (its ``dtype``/``torch_dtype``); others: float32.
_BUILD_DTYPES = ("float32", "float16", "bfloat16", "float64")
#: At most this many steps, a ``torch.linspace`` made while a model is built is computed on the cpu, not
#: sent to meta: the drop-path rates a Swin-like tower reads back with ``.item()`` as it builds (MaskFormer,
#: Florence-2), a handful of numbers, never a weight.
MAX_CPU_LINSPACE = 4096
#: torch's functions that create a tensor on a device: sent to the meta device while a model is built.
_CONSTRUCTORS = (
    "empty",
    "empty_permuted",
    "empty_strided",
    "zeros",
    "ones",
    "full",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "tensor",
    "as_tensor",
    "asarray",
    "scalar_tensor",
    "tril_indices",
    "triu_indices",
    "bartlett_window",
    "blackman_window",
    "hamming_window",
    "hann_window",
    "kaiser_window",
)


def is_model_directory(target: Any) -> bool:
    """Whether ``target`` names a folder holding a ``config.json`` (whatever that entry is: a folder, a FIFO
    or a broken link is refused by :func:`from_directory` with a message that says so)."""
    if not isinstance(target, (str, Path)):
        return False
    folder = Path(target)
    return folder.is_dir() and os.path.lexists(folder / "config.json")


def from_directory(folder: str | Path) -> Any:
    """The model of ``folder/config.json`` (the class its ``architectures`` names where transformers defines
    it, the class it was saved from; else the one ``transformers.AutoModel`` maps its ``model_type`` to),
    its parameters on the meta device, its positional buffers real; positional weights read from
    the safetensors files transformers loads (``model.safetensors``, else the shards of
    ``model.safetensors.index.json``) when present.

    Nothing of the folder runs, nothing is fetched, and nothing global changes but the Hub's offline switch
    while the config is read and the model built (:func:`offline`):

    * a config with ``auto_map`` (a model that ships its own code) or a ``model_type`` transformers does not
      know is refused (:class:`ModelDirectoryError`): posenc never executes a checkpoint's code
      (``trust_remote_code=False`` wherever transformers resolves a config or a class);
    * config.json is read and checked before transformers sees it: at most :data:`MAX_CONFIG_BYTES`,
      :data:`MAX_CONFIG_DEPTH` levels, every number finite, each size field (``hidden_size``, the layer,
      head and expert counts, ``vocab_size``, the position counts) a whole number within its bound,
      ``pad_token_id`` an integer (one beyond ``vocab_size`` is named where the build then fails), no
      ``backbone`` on the Hub without its ``backbone_config``, the
      rotary numbers real (``rope_theta`` > 0), and the parameters
      it describes at most :data:`MAX_PARAMETERS`; a config naming ``configuration_files`` (another file
      transformers would read) is refused; each safetensors file transformers loads is a regular file with
      a sound header, an index's shards files of the folder itself;
    * the model is built under a torch function mode of this thread only (no class or module attribute is
      patched, no default dtype or device set: another thread building a model meanwhile is untouched, and
      transformers' own weight initialisation, which patches ``torch.nn.init``, is skipped on meta): every
      tensor torch creates goes to the meta device, in the config's dtype where the code gives none — but
      a small ``torch.linspace`` (:data:`MAX_CPU_LINSPACE`), whose values a model reads back as it builds;
    * the buffers of the positional components (``inv_freq``, sinusoidal tables) are then computed on the
      cpu by the model's own ``_init_weights`` (transformers' way to recompute what ``__init__`` computes:
      it loads every checkpoint this way), at most :data:`MAX_COMPUTED_VALUES` each; a buffer it does not
      recompute stays on meta, and its component is reported not audited.

    Any failure is a :class:`ModelDirectoryError` (a ValueError) naming the folder, the field or file, and
    the fix.
    """
    folder = Path(folder)
    data = _read_config(folder)
    files = _weight_files(folder)
    try:
        import torch
        import transformers
    except ImportError as error:
        raise ModelDirectoryError(
            f"{folder}: auditing a model folder builds its model with torch and transformers, and "
            f"{error.name or 'one'} is not installed: pip install 'posenc[torch]' transformers"
        ) from None

    config, model_class = _config_and_class(folder, data, transformers)
    dtype = getattr(config, "dtype", None)
    name = str(dtype).removeprefix("torch.")
    dtype = getattr(torch, name) if name in _BUILD_DTYPES else None
    try:
        with offline(), _OnMeta.of(torch)(dtype):
            model = model_class(config)
        model.eval()
    except Exception as error:  # transformers' code on a config it accepted: any error is said
        _refuse_hub_reached(folder / "config.json", error)
        built = model_class.__name__
        said = f"{folder}: transformers could not build its {built} from config.json ({_said(error)})"
        beyond = _pad_beyond_vocab(data)  # a pad id no embedding of the vocabulary holds: the likely cause
        if beyond is not None:
            name, pad, vocab = beyond
            raise ModelDirectoryError(
                f"{said}: {name} is {pad} but vocab_size is {vocab}: token ids run 0 .. {vocab - 1}; set "
                "pad_token_id below vocab_size (or null) in config.json",
                name,
            ) from None
        raise ModelDirectoryError(f"{said}; correct the field it names in {folder / 'config.json'}") from None
    unread = _read_positional_weights(model, folder, files)
    _compute_positional_buffers(model, folder, dtype, torch, transformers, unread)
    if unread:
        model.__dict__[UNREAD] = unread
    return model


@contextlib.contextmanager
def offline() -> Any:
    """The Hugging Face Hub unreachable within the block (huggingface_hub's offline switch, put back after):
    a config that names a repository (a backbone's, say) fails instead of fetching it — the folder alone is
    read."""
    try:
        from huggingface_hub import constants
    except ImportError:  # no client: nothing reaches the Hub
        yield
        return
    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def _refuse_hub_reached(path: Path, error: BaseException) -> None:
    """Refuse, saying so, a config whose reading or build reached for the Hub (:func:`offline` stopped it)."""
    if type(error).__name__ != "OfflineModeIsEnabled":
        return
    words = str(error).split()
    url = next((w.rstrip(":") for w in words if w.startswith("https://")), "the Hub")
    raise ModelDirectoryError(
        f"{path} has transformers reach for the Hugging Face Hub ({url}), and posenc reads the folder alone "
        "(nothing is fetched); give in config.json what it names (a backbone's: its backbone_config, as "
        "transformers saves it)",
        "config.json",
    ) from None


def _pad_beyond_vocab(data: dict[str, Any]) -> tuple[str, int, int] | None:
    """The first level of a config whose ``pad_token_id`` is beyond its ``vocab_size``: (its field's name,
    the pad id, the vocabulary size), else None. Not refused before the build: a model may embed more ids
    than its vocabulary (MusicGen's decoder embeds ``vocab_size + 1``, its pad id ``vocab_size``)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        pad, vocab = node.get("pad_token_id"), node.get("vocab_size")
        known = isinstance(pad, int) and isinstance(vocab, int) and not isinstance(pad, bool)
        if known and not -vocab <= pad < vocab:
            return (f"{where}.pad_token_id" if where else "pad_token_id"), pad, vocab
        stack += [(f"{where}.{k}" if where else k, v) for k, v in node.items() if isinstance(v, dict)]
    return None


def _said(error: BaseException) -> str:
    """An exception on one line, cut to 300 characters: ``TypeError: unsupported operand ...``."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def _read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict, checked (:func:`from_directory`); no code of the folder runs."""
    from .targets import _not_a_file as not_a_file

    path = folder / "config.json"
    problem = not_a_file(path)
    if problem:
        raise ModelDirectoryError(
            f"{path} {problem}; a model folder holds its config as a JSON file", "config.json"
        )
    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ModelDirectoryError(
            f"{path} cannot be read ({error.strerror or error})", "config.json"
        ) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ModelDirectoryError(
            f"{path} is larger than {MAX_CONFIG_BYTES >> 20} MiB; a model's config.json is a few KiB: give "
            "the folder of the model's own config.json",
            "config.json",
        )
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ModelDirectoryError(
            f"{path} nests deeper than a JSON reader follows; a model's config nests a few levels: give the "
            "model's own config.json",
            "config.json",
        ) from None
    except ValueError as error:  # not UTF-8, not JSON
        raise ModelDirectoryError(
            f"{path} is not JSON ({' '.join(str(error).split())[:200]}); give the model's own config.json",
            "config.json",
        ) from None
    if not isinstance(data, dict):
        raise ModelDirectoryError(
            f"{path} holds a JSON {type(data).__name__}, not an object of fields; give the model's own "
            "config.json",
            "config.json",
        )
    _refuse_own_code(folder, data.get("auto_map"), "auto_map")
    if "configuration_files" in data:  # transformers would read another file: posenc checked this one
        named = validation.shorten(data["configuration_files"])
        raise ModelDirectoryError(
            f"{path} names configuration_files ({named}): transformers would build the model from one of "
            "those files, and posenc checks and audits config.json alone; remove configuration_files, or "
            "copy the file it names over config.json",
            "configuration_files",
        )
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelDirectoryError(
            f"{path} names no model_type (got {validation.shorten(model_type)}); a Hugging Face config names "
            'its architecture, e.g. "model_type": "llama"',
            "model_type",
        )
    _check_config(path, data)
    return data


def _refuse_own_code(folder: Path, auto_map: Any, where: str) -> None:
    """Refuse a config that asks transformers to run the folder's own code (an ``auto_map``)."""
    if auto_map is None:
        return
    named = ", ".join(sorted(map(str, auto_map.values())))[:200] if isinstance(auto_map, dict) else "code"
    raise ModelDirectoryError(
        f"{folder} asks for its own code (config.json's {where}: {named}), and posenc never runs a "
        "checkpoint's code; build the model yourself in Python, if you trust that code, and audit it there: "
        "posenc.audit(model)",
        where,
    )


def _check_config(path: Path, data: dict[str, Any]) -> None:
    """Every level of config.json: its depth, its numbers finite, its size fields, pad token and rotary
    numbers within their bounds, and the parameters it describes (:func:`from_directory`)."""
    stack: list[tuple[str, Any, int, bool]] = [("", data, 1, False)]
    parameters = 0
    while stack:
        where, node, depth, rope = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise ModelDirectoryError(
                f"{path}: {where} nests {depth} levels deep (at most {MAX_CONFIG_DEPTH}); a model's config "
                "nests a few levels: give the model's own config.json",
                where,
            )
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            name = f"{where}.{key}" if isinstance(node, dict) and where else str(key)
            name = f"{where}[{key}]" if isinstance(node, list) else name
            if isinstance(value, (dict, list)):
                stack.append((name, value, depth + 1, rope or key in _ROPE_BLOCKS))
            elif isinstance(value, float) and not math.isfinite(value):
                written = "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
                raise ModelDirectoryError(
                    f"{path}: {name} is {written}, which is no number (nor JSON); write a finite number", name
                )
        if isinstance(node, dict):
            if where and "auto_map" in node:
                _refuse_own_code(path.parent, node["auto_map"], f"{where}.auto_map")
            _refuse_hub_kernels(path, where, node)
            _refuse_hub_backbone(path, where, node)
            _check_fields(path, where, node, rope)
            _check_patches(path, where, node)
            parameters += _parameters(node)
    if parameters > MAX_PARAMETERS:
        raise ModelDirectoryError(
            f"{path} describes a model of about {parameters:.2g} parameters (from its hidden size, layers, "
            f"experts and vocabulary); posenc builds models of at most {MAX_PARAMETERS:.0e} (50 times the "
            "largest published): correct hidden_size, intermediate_size or the layer counts",
            "hidden_size",
        )


#: The config fields transformers reads an implementation's name from; "org/repo" (or "org/repo:name") there
#: is a kernel it fetches from the Hub and runs.
_IMPLEMENTATIONS = ("attn_implementation", "_attn_implementation", "experts_implementation")


def _refuse_hub_backbone(path: Path, where: str, node: dict[str, Any]) -> None:
    """Refuse one level of a config naming a backbone on the Hub ("org/repo") without its config:
    transformers would ask the Hub whether it exists and fetch its config (the folder alone is read)."""
    backbone = node.get("backbone")
    if isinstance(backbone, str) and "/" in backbone and node.get("backbone_config") is None:
        name = f"{where}.backbone" if where else "backbone"
        raise ModelDirectoryError(
            f"{path}: {name} is {validation.shorten(backbone)}, a model on the Hub whose config transformers "
            "would fetch, and posenc reads the folder alone; give that model's config as backbone_config in "
            "config.json (as transformers saves it)",
            name,
        )


def _refuse_hub_kernels(path: Path, where: str, node: dict[str, Any]) -> None:
    """Refuse an implementation field of one level of a config that names a kernel on the Hub: transformers
    would download that code and run it (with the ``kernels`` package), and posenc runs no checkpoint's
    code."""
    for key in _IMPLEMENTATIONS:
        value = node.get(key)
        if isinstance(value, str) and ("/" in value or ":" in value):
            name = f"{where}.{key}" if where else key
            raise ModelDirectoryError(
                f"{path}: {name} is {value!r}, a kernel on the Hub that transformers would fetch and run, "
                'and posenc never runs a checkpoint\'s code; remove the field (or set it to "eager")',
                name,
            )


def _check_fields(path: Path, where: str, node: dict[str, Any], rope: bool) -> None:
    """The size fields, the pad token and the rotary numbers of one level of a config."""
    prefix = f"{where}." if where else ""

    def refuse(error: Exception, name: str) -> ModelDirectoryError:
        return ModelDirectoryError(f"{path}: {error}; correct it in config.json", name)

    for key, (low, high, why) in _SIZES.items():
        value = node.get(key)
        if value is None:
            continue
        per_layer = isinstance(value, list) and key in _PER_LAYER and 0 < len(value) <= _LAYERS[1]
        try:  # a whole float (4096.0) counted as the integer it is; a list: one per layer (Gemma 3n's)
            checked = [
                validation.integer(
                    f"{prefix}{key}[{i}]" if per_layer else prefix + key,
                    v,
                    minimum=low,
                    maximum=high,
                    why=why,
                    integral_floats=True,
                )
                for i, v in enumerate(value if per_layer else [value])
            ]
        except (TypeError, ValueError) as error:
            raise refuse(error, prefix + key) from None
        node[key] = checked if per_layer else checked[0]
    pad = node.get("pad_token_id")
    if pad is not None:
        name = prefix + "pad_token_id"
        if isinstance(pad, bool) or not isinstance(pad, int):
            raise ModelDirectoryError(
                f"{path}: {name} must be a token id (an integer) or null; got {validation.shorten(pad)}", name
            )
    for block in _ROPE_BLOCKS:
        if node.get(block) is not None and not isinstance(node[block], dict):
            raise ModelDirectoryError(
                f"{path}: {prefix + block} must be an object of rotary fields (or null); got "
                f"{validation.shorten(node[block])}",
                prefix + block,
            )
    numbers = [(k, True) for k in _BASES if k in node]
    numbers += [(k, False) for k in _ROPE_NUMBERS if rope and node.get(k) is not None]
    numbers += [("partial_rotary_factor", False)] if node.get("partial_rotary_factor") is not None else []
    for key, base in numbers:
        if node[key] is None:
            raise refuse(ValueError(f"{prefix + key} must be a number > 0; got null"), prefix + key)
        try:
            value = validation.real(prefix + key, node[key])
        except (TypeError, ValueError) as error:
            raise refuse(error, prefix + key) from None
        if (base or key in ("factor", "partial_rotary_factor")) and not value > 0:
            raise refuse(ValueError(f"{prefix + key} must be > 0; got {node[key]!r}"), prefix + key)


#: The fields of a vision or video config whose patch grid a class may fill a positional table for in Python
#: as it is built (VideoMAE's sinusoid table: a list of lists of (image / patch)² · frames / tubelet rows).
_GRID_FIELDS = ("image_size", "patch_size", "num_frames", "tubelet_size")


def _check_patches(path: Path, where: str, node: dict[str, Any]) -> None:
    """The patch grid of one level of a config (image_size / patch_size per side, times num_frames /
    tubelet_size), times its width, at most :data:`MAX_COMPUTED_VALUES` values: a 250-byte config of
    VideoMAE with image_size 32000 made its class build a table of 3·10¹⁰ values in Python lists, which the
    meta device does not hold (memory grew without bound)."""
    if node.get("image_size") is None or node.get("patch_size") is None:
        return
    prefix = f"{where}." if where else ""
    sides: dict[str, list[int]] = {}
    for key in _GRID_FIELDS:
        value = node.get(key, 1)
        if value is None:
            value = 1
        given = value if isinstance(value, list) and 0 < len(value) <= 3 else [value]
        try:
            sides[key] = [
                validation.integer(
                    prefix + key,
                    v,
                    minimum=1,
                    maximum=2**20,
                    why="a side of an image, in pixels",
                    integral_floats=True,
                )
                for v in given
            ]
        except (TypeError, ValueError) as error:
            raise ModelDirectoryError(f"{path}: {error}; correct it in config.json", prefix + key) from None
    image, patch = sides["image_size"], sides["patch_size"]
    image = image * 2 if len(image) == 1 else image  # one number: a square
    patch = patch * len(image) if len(patch) == 1 else patch
    patches = math.prod(max(1, i // p) for i, p in zip(image, patch, strict=False))
    patches *= max(1, sides["num_frames"][0] // sides["tubelet_size"][0])
    widths = [node[k] for k in ("hidden_size", "d_model", "embed_dim", "dim") if isinstance(node.get(k), int)]
    values = patches * max(widths, default=1)
    if values > MAX_COMPUTED_VALUES:
        raise ModelDirectoryError(
            f"{path}: {prefix}image_size {node['image_size']} in patches of {node['patch_size']}"
            + (f" over {node['num_frames']} frames" if "num_frames" in node else "")
            + f" makes {patches:,} patches, {values:,} values of a positional table as wide as the model; "
            f"some classes compute that table in Python as they are built, and posenc builds at most "
            f"{validation.power_text(MAX_COMPUTED_VALUES)}: lower image_size (or num_frames)",
            prefix + "image_size",
        )


def _parameters(node: dict[str, Any]) -> int:
    """The parameters one level of a config describes, roughly: embeddings plus, per layer, attention (4 h²)
    and MLP (3 h i per expert). Fields already checked."""

    def first(*keys: str) -> int:  # a size per layer: the largest
        sizes = [node[k] if isinstance(node[k], int) else max(node[k]) for k in keys if node.get(k)]
        return next(iter(sizes), 0)

    width = first("hidden_size", "d_model", "n_embd", "dim", "emb_dim", "embed_dim")
    if not width:
        return 0
    inner = first(
        "intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff", "hidden_dim"
    )
    counts = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers")
    layers = sum(node[k] for k in (*counts, "depth") if isinstance(node.get(k), int))
    layers += sum(node["depths"]) if isinstance(node.get("depths"), list) else 0
    experts = max(1, first("num_experts", "num_local_experts", "n_routed_experts"))
    vocab = first("vocab_size")
    return vocab * width + layers * (4 * width * width + 3 * width * (inner or 4 * width) * experts)


#: The model attribute (in its ``__dict__``) where :func:`from_directory` leaves, per positional parameter it
#: could not read, why (its component's "not judged" note).
UNREAD = "_posenc_unread"
#: The weight files transformers loads from a folder where it holds no safetensors ones, which posenc does not
#: open (a pickle runs code as it loads; TensorFlow's and Flax's files are not read).
OTHER_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")


@dataclasses.dataclass(frozen=True)
class _Weights:
    """The weight files of a folder as transformers loads them: ``model.safetensors``, else the shards
    ``model.safetensors.index.json`` names (``shard_of``: each key's file), else none — and then ``other``,
    the first of :data:`OTHER_WEIGHTS` the folder holds (its tables are in a file posenc does not open)."""

    files: list[Path]
    shard_of: dict[str, str] | None = None
    other: str | None = None


def _weight_files(folder: Path) -> _Weights:
    """The safetensors files transformers loads from the folder (:class:`_Weights`: no other file counts —
    transformers reads none), each checked to be a regular file with a sound header (a folder, a FIFO or
    garbage named so is refused, naming it)."""
    from .targets import _not_a_file as not_a_file

    shard_of = None
    if os.path.lexists(folder / "model.safetensors"):
        files = [folder / "model.safetensors"]
    elif os.path.lexists(folder / "model.safetensors.index.json"):
        shard_of = _shards(folder / "model.safetensors.index.json")
        files = [folder / name for name in sorted(set(shard_of.values()))]
    else:
        other = next((name for name in OTHER_WEIGHTS if os.path.lexists(folder / name)), None)
        return _Weights([], None, other)
    for file in files:
        problem = not_a_file(file)
        if problem:
            raise ModelDirectoryError(
                f"{file} {problem}, not a safetensors file; remove or rename it", file.name
            )
        why = _header_problem(file)
        if why:
            raise ModelDirectoryError(
                f"{file} is not a safetensors file ({why}); replace it with the checkpoint's own file, or "
                "remove it to audit without the weights",
                file.name,
            )
    return _Weights(files, shard_of)


def _file_name(name: Any) -> bool:
    """Whether ``name`` names a file of the folder itself (no path, no ``..``)."""
    return isinstance(name, str) and name == Path(name).name and name not in ("", ".", "..")


def _shards(index: Path) -> dict[str, str]:
    """``model.safetensors.index.json``'s ``weight_map``: each key's shard, a file of the folder."""
    from .targets import _not_a_file as not_a_file

    problem = not_a_file(index)
    try:
        if problem:
            raise ValueError(problem)
        with open(index, "rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError(f"larger than {MAX_CONFIG_BYTES >> 20} MiB")
        shard_of = json.loads(raw)["weight_map"]
        if not isinstance(shard_of, dict) or not all(
            isinstance(key, str) and _file_name(name) for key, name in shard_of.items()
        ):
            raise ValueError("its weight_map is not an object of keys to file names of the folder")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
        said = " ".join(str(error).split())[:200]
        raise ModelDirectoryError(
            f"{index} is not a safetensors index ({said}); replace it with the checkpoint's own file, or "
            "remove it to audit without the weights",
            index.name,
        ) from None
    return shard_of


def _header_problem(file: Path) -> str | None:
    """Why ``file`` has no sound safetensors header (8 bytes of length, then a JSON object), or None."""
    try:
        with open(file, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            head = stream.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a header"
            length = int.from_bytes(head, "little")
            if length > size - 8:
                return f"its header claims {length:,} bytes of a file of {size:,}"
            if length > MAX_HEADER_BYTES:
                return f"its header claims {length:,} bytes; a checkpoint's takes at most a few MB"
            header = json.loads(stream.read(length))
    except RecursionError:
        return "its header nests too deep"
    except (OSError, ValueError) as error:
        return " ".join(str(error).split())[:200]
    return None if isinstance(header, dict) else "its header is not a JSON object"


def _config_and_class(folder: Path, data: dict[str, Any], transformers: Any) -> tuple[Any, Any]:
    """The folder's config (``AutoConfig``, ``trust_remote_code=False``) and the model class to build: the
    one its ``architectures`` names — the class it was saved from — where transformers itself defines it
    and it takes this config (a ``SpeechT5ForSpeechToText`` folder holds speech and text pre-nets, with
    their positions, that AutoModel's ``SpeechT5Model`` does not build), else the class AutoModel maps it
    to; a ``model_type`` transformers does not know is refused (that folder needs its own code)."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    path = folder / "config.json"
    model_type = data["model_type"]
    if model_type not in transformers.CONFIG_MAPPING:
        raise ModelDirectoryError(
            f"{path}: model_type {model_type!r} is not one transformers {transformers.__version__} knows: "
            "the folder asks for its own code, and posenc never runs a checkpoint's code; build the model "
            "yourself in Python, if you trust that code, and audit it there: posenc.audit(model)",
            "model_type",
        )
    try:
        with offline():
            config = transformers.AutoConfig.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=False
            )
    except Exception as error:  # transformers' reading of a config it does not accept
        _refuse_hub_reached(path, error)
        raise ModelDirectoryError(
            f"{path} is not a config transformers can read ({_said(error)}); correct the field it names",
            "config.json",
        ) from None
    named = _architecture_class(config, transformers)
    if named is not None:  # the class the folder was saved from (its architectures), transformers' own
        return config, named
    if type(config) not in MODEL_MAPPING:
        raise ModelDirectoryError(
            f"{path}: transformers has no model class for model_type {model_type!r} (AutoModel maps none); "
            "build the model in Python and audit it there: posenc.audit(model)",
            "model_type",
        )
    try:
        model_class = MODEL_MAPPING[type(config)]
    except (ValueError, AttributeError, ImportError) as error:  # mapped to a class it does not export
        model_class = _family_class(config, model_type, transformers)
        if model_class is None:
            raise ModelDirectoryError(
                f"{path}: transformers maps model_type {model_type!r} to a class it cannot load "
                f"({_said(error)}); build the model in Python and audit it there: posenc.audit(model)",
                "model_type",
            ) from None
    if isinstance(
        model_class, (list, tuple)
    ):  # several: the one the config's architectures name, else the first
        named = {c.__name__: c for c in model_class}
        model_class = next((named[a] for a in config.architectures or [] if a in named), model_class[0])
    text = getattr(config, "sub_configs", {}).get("text_config")
    if text is not None and getattr(model_class, "config_class", None) == text:  # as AutoModel.from_config
        config = config.get_text_config()
    return config, model_class


def _family_class(config: Any, model_type: str, transformers: Any) -> Any:
    """The class AutoModel's table names for ``model_type`` where transformers does not export it (Voxtral
    Realtime's text model), taken from the modeling module of the config's own family in transformers, if
    it is there and takes this config; else None. Only transformers' own code."""
    import importlib

    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(model_type)
    family = type(config).__module__.rpartition(".")[0]  # transformers.models.<family>
    if not isinstance(name, str) or not family.startswith("transformers.models."):
        return None
    try:
        modeling = importlib.import_module(f"{family}.modeling_{family.rpartition('.')[2]}")
    except ImportError:
        return None
    found = getattr(modeling, name, None)
    takes = isinstance(found, type) and isinstance(config, getattr(found, "config_class", ()) or ())
    return found if takes and issubclass(found, transformers.PreTrainedModel) else None


def _architecture_class(config: Any, transformers: Any) -> Any:
    """The first class the config's ``architectures`` names that transformers itself defines and that takes
    this config (``config_class``), else None: the class the folder was saved from (and, where AutoModel
    maps its ``model_type`` to none — Emu3's, Mllama's text model — the only one named). Only transformers'
    own classes: no code of the folder."""
    for name in getattr(config, "architectures", None) or []:
        found = getattr(transformers, name, None) if isinstance(name, str) and name.isidentifier() else None
        if (
            isinstance(found, type)
            and issubclass(found, transformers.PreTrainedModel)
            and isinstance(config, getattr(found, "config_class", ()) or ())
        ):
            return found
    return None


class _OnMeta:
    """``_OnMeta.of(torch)(dtype)``: a torch function mode (torch keeps its modes per thread) under which
    every tensor torch creates goes to the meta device — none is allocated, whatever its size — but a
    ``torch.linspace`` of at most :data:`MAX_CPU_LINSPACE` steps (values a model reads back as it builds),
    and a floating one created without a dtype is of ``dtype`` (the config's; None: as it comes)."""

    _class: Any = None

    @classmethod
    def of(cls, torch: Any) -> Any:
        if cls._class is None:
            from torch.overrides import TorchFunctionMode

            constructors = {getattr(torch, n) for n in _CONSTRUCTORS if hasattr(torch, n)}
            from_data = {getattr(torch, n) for n in ("tensor", "as_tensor", "asarray") if hasattr(torch, n)}
            meta = torch.device("meta")

            class OnMeta(TorchFunctionMode):
                def __init__(self, dtype: Any) -> None:
                    super().__init__()
                    self.dtype = dtype

                def __torch_function__(
                    self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                ) -> Any:
                    kwargs = dict(kwargs or {})
                    if func not in constructors:
                        return func(*args, **kwargs)
                    steps = args[2] if len(args) > 2 else kwargs.get("steps")
                    small = isinstance(steps, int) and steps <= MAX_CPU_LINSPACE
                    read_back = func is torch.linspace and small
                    kwargs["device"] = torch.device("cpu") if read_back else meta
                    result = func(*args, **kwargs)
                    typed = kwargs.get("dtype") is not None or (
                        func in from_data and args and not isinstance(args[0], (int, float, list, tuple))
                    )
                    if self.dtype is not None and not typed and result.dtype == torch.float32:
                        result = result.to(self.dtype)
                    return result

            cls._class = OnMeta
        return cls._class


def _compute_positional_buffers(
    model: Any, folder: Path, dtype: Any, torch: Any, transformers: Any, unread: dict[str, str]
) -> None:
    """Compute the meta buffers of each positional component (``inv_freq``, a sinusoidal table), and a
    positional parameter the folder's files do not hold (Marian's tables, which ``save_pretrained`` of its
    ``MarianMTModel`` leaves out), on the cpu, with the ``_init_weights`` of the transformers model that
    holds it — what building the model in Python gives; what it leaves uncomputed goes back to meta (that
    component is then not audited, and says so). A float32 table is held in the config's ``dtype``, as
    transformers holds it when it builds under that default dtype (M2M100 and its family cast their table
    to ``torch.get_default_dtype()``, which posenc leaves alone). A table of ``unread`` (in a weight file
    posenc does not open) is not computed: transformers loads it from that file."""
    from ..torch.patching import find

    for path, kind, what in find(model):
        if path in unread:
            continue
        owner, module = path, what
        tensors = dict(module.named_buffers(recurse=False)) if kind != "table" else {}
        if kind == "table":
            owner, _, name = path.rpartition(".")
            module = model.get_submodule(owner) if owner else model
            tensors = {name: what}  # a buffer, or a parameter the files did not hold (still on meta)
        pending = {k: b for k, b in tensors.items() if b.is_meta and b.is_floating_point()}
        if not pending:
            continue
        values = sum(b.numel() for b in pending.values())
        if values > MAX_COMPUTED_VALUES:
            raise ModelDirectoryError(
                f"{folder}: {owner or type(model).__name__} would compute {values:,} values (at most "
                f"{validation.power_text(MAX_COMPUTED_VALUES)}); lower max_position_embeddings or the width "
                "in config.json",
                path,
            )
        parts = owner.split(".") if owner else []
        holders = (model.get_submodule(".".join(parts[:n])) for n in range(len(parts), -1, -1))
        holder = next((m for m in holders if isinstance(m, transformers.PreTrainedModel)), None)
        if holder is None:
            continue
        for key, buffer in pending.items():
            held = dtype if kind == "table" and dtype is not None and buffer.dtype == torch.float32 else None
            value = torch.full(buffer.shape, math.nan, dtype=held or buffer.dtype)
            parameter = isinstance(buffer, torch.nn.Parameter)
            setattr(module, key, torch.nn.Parameter(value, requires_grad=False) if parameter else value)
        chain = [module] + [model.get_submodule(".".join(parts[:n])) for n in range(len(parts) - 1, -1, -1)]
        chain = chain[: chain.index(holder) + 1] if holder in chain else chain
        try:  # as transformers' init runs: the module, then each module above it to its model (Whisper's
            # encoder copies its sinusoid into its table); draws on a forked generator, the caller's kept
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                for each in chain:
                    holder._init_weights(each)
            failed = False
        except Exception:  # its own init of this module: then not audited, as on meta
            failed = True
        for key, buffer in pending.items():
            if not failed and bool(torch.isnan(getattr(module, key)).all()):
                _built_by_its_class(module, key, buffer, dtype if kind == "table" else None, torch)
            if failed or bool(torch.isnan(getattr(module, key)).all()):
                setattr(module, key, buffer)


def _built_by_its_class(module: Any, key: str, buffer: Any, dtype: Any, torch: Any) -> None:
    """A table only its module's ``__init__`` computes, by its class's static builder — fairseq's
    ``get_embedding(num_embeddings, embedding_dim, padding_idx)``, as TrOCR's sinusoid holds its table as a
    plain attribute that no ``_init_weights`` touches — set on ``module`` where it gives the shape of the
    table on meta (a float32 one in the config's ``dtype``); else left as it is."""
    builder = inspect.getattr_static(type(module), "get_embedding", None)
    if not isinstance(builder, staticmethod) or buffer.dim() != 2:
        return
    padding = getattr(module, "padding_idx", None)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            value = builder.__func__(*buffer.shape, padding if isinstance(padding, int) else None)
    except Exception:  # its builder wants other arguments: not computed, as on meta
        return
    if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(buffer.shape):
        held = dtype if dtype is not None and value.dtype == torch.float32 else buffer.dtype
        value = value.to(held)
        parameter = isinstance(getattr(module, key), torch.nn.Parameter)
        setattr(module, key, torch.nn.Parameter(value, requires_grad=False) if parameter else value)


def _read_positional_weights(model: Any, folder: Path, weights: _Weights) -> dict[str, str]:
    """Fill the model's positional parameters from the safetensors files transformers loads
    (:func:`_weight_files`), each under the key transformers gives it (its own path, or with or without
    the model's ``base_model_prefix``: :func:`_keys`) and of its shape (read from the header before the
    tensor). A positional parameter the files do not hold goes (back) to meta: computed after as building
    the model does (Marian's tables, which its checkpoints leave out), or not audited, and says so — never
    the values of whatever memory a class's own ``torch.Tensor(...)`` took outside the meta device
    (FastSpeech2-Conformer's ``pos_bias_u``). Where the folder's weights are in a file posenc does not open
    (``pytorch_model.bin``), returns each positional parameter's reason for not being audited."""
    import torch

    from ..torch.patching import find

    wanted = {
        path: tensor
        for path, kind, tensor in find(model)
        if kind == "table" and (tensor.is_meta or isinstance(tensor, torch.nn.Parameter))
    }
    if not wanted:
        return {}
    read: set[str] = set()
    unread: dict[str, str] = {}
    try:
        if weights.other is None:
            _read_weights(model, weights, wanted, read)
        else:
            reason = (
                f"its weights are in {weights.other}, which posenc does not open (a pickle runs code as it "
                "loads; other frameworks' files are not read); save the model with safetensors "
                "(model.save_pretrained(folder) does) to audit this table"
            )
            unread = dict.fromkeys((path for path in wanted if _saved(model, path, torch)), reason)
    finally:
        for path in wanted.keys() - read:
            owner, _, name = path.rpartition(".")
            module = model.get_submodule(owner) if owner else model
            value = wanted[path]
            if not value.is_meta:
                setattr(module, name, torch.nn.Parameter(torch.empty_like(value, device="meta"), False))
    return unread


def _saved(model: Any, path: str, torch: Any) -> bool:
    """Whether the tensor of ``path`` is one a checkpoint holds: a parameter or a persistent buffer (not a
    non-persistent buffer or a plain attribute, which building the model computes)."""
    owner, _, name = path.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    if isinstance(module._parameters.get(name), torch.nn.Parameter):
        return True
    return name in module._buffers and name not in module._non_persistent_buffers_set


def _keys(model: Any, path: str) -> tuple[str, ...]:
    """The checkpoint keys transformers loads a parameter of ``path`` from, first found first: its path, then
    with the model's ``base_model_prefix`` (a base model's key in a checkpoint of a model with a head), then
    without it (the reverse)."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    keys = [path]
    if prefix:
        keys.append(f"{prefix}.{path}")
        if path.startswith(prefix + "."):
            keys.append(path.removeprefix(prefix + "."))
    return tuple(keys)


def _read_weights(model: Any, weights: _Weights, wanted: dict[str, Any], read: set[str]) -> None:
    """:func:`_read_positional_weights`' reading: the ``wanted`` tensors found in the files, each under the
    first of its keys (:func:`_keys`) the files hold — in the shard the index names, where it names one —
    each path put in ``read``."""
    import torch
    from safetensors import safe_open

    held: dict[str, Path] = {}  # key -> the file transformers reads it from
    for file in weights.files:
        with _opened(file, safe_open) as stored:
            for key in stored.keys():  # noqa: SIM118  (safe_open has keys(), no iteration)
                if weights.shard_of is None or weights.shard_of.get(key) == file.name:
                    held.setdefault(key, file)
    for path in wanted:
        key = next((k for k in _keys(model, path) if k in held), None)
        if key is None:
            continue
        with _opened(held[key], safe_open) as stored:
            shape = tuple(stored.get_slice(key).get_shape())
            if shape != tuple(wanted[path].shape) or math.prod(shape) > MAX_TABLE_VALUES:
                continue
            value = stored.get_tensor(key)
        owner, _, name = path.rpartition(".")
        module = model.get_submodule(owner) if owner else model
        setattr(module, name, torch.nn.Parameter(value, requires_grad=False))
        read.add(path)


@contextlib.contextmanager
def _opened(file: Path, safe_open: Any) -> Any:
    """``safe_open(file)``; a file that is no safetensors one (its header, its offsets) said, naming it."""
    try:
        with safe_open(str(file), framework="pt") as stored:
            yield stored
    except ModelDirectoryError:
        raise
    except Exception as error:  # a file that is no safetensors one: said, naming it
        raise ModelDirectoryError(
            f"{file} cannot be read as safetensors ({_said(error)}); replace it with the checkpoint's "
            "own file, or remove it to audit without the weights",
            file.name,
        ) from None
