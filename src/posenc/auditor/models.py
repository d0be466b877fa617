"""A whole model's positions audited: :func:`audit_model` finds every positional component of a torch model
(:func:`posenc.torch.patching.find`: rotary modules, sinusoidal tables, diffusers' ``Timesteps``) and audits
each one (:func:`posenc.audit`), as a :class:`ModelAudit`: one :class:`~posenc.auditor.report.AuditReport`
per component with its path and kind, a one-line verdict for each, ``passed``, ``as_text()``, ``as_dict()``,
``to_html(path)`` and the line that fixes it (``posenc.torch.patch(model)``).

Each component is measured over the positions the model uses: a rotary module over 0 ..
``max_position_embeddings`` − 1 of its config (every layer type of a per-layer one, Gemma 3), a table over
its rows, a ``Timesteps`` over the timesteps 0 .. 999.

A folder holding a Hugging Face ``config.json`` (``posenc audit MODEL_DIR``) is built by
:func:`from_directory` without allocating the model's weights: its parameters go to the meta device while it
is built, its buffers (inv_freq, sinusoidal tables) are computed as the model computes them, and the
positional tensors that are weights (Whisper's encoder table) are read from the folder's ``*.safetensors``
when present (else that component is not audited, and says so). A 70B model's config audits in seconds.

``posenc.audit(model)`` gives a ModelAudit when the positional components lie in the model's submodules
(a Hugging Face ``LlamaForCausalLM``, an M2M100, a UNet); a module that is one component itself (a rotary
module, the PyTorch tutorial's ``PositionalEncoding``) gets the component's own report, as before.
"""

from __future__ import annotations

import dataclasses
import html
import math
from pathlib import Path
from typing import Any

from .report import AuditReport

__all__ = ["ComponentAudit", "ModelAudit", "audit_model", "from_directory", "is_model", "is_model_directory"]

#: The call that makes every failing component exact.
FIX = "posenc.torch.patch(model)"


@dataclasses.dataclass
class ComponentAudit:
    """One component: ``path``, ``kind`` ("rotary", "table", "timesteps"), ``layer_type`` (a per-layer
    rotary's type, else None), and its ``report`` (None when it could not be audited: ``note`` says why)."""

    path: str
    kind: str
    report: AuditReport | None
    note: str = ""
    layer_type: str | None = None

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    def verdict(self) -> str:
        """One line: where, what, PASS/FAIL with the largest error and the first finding."""
        where = f"{self.path}" + (f" ({self.layer_type})" if self.layer_type else "") + f" [{self.kind}]"
        if self.report is None:
            return f"{where}: not audited — {self.note}"
        r = self.report
        error = r.max_abs if math.isfinite(r.max_abs) else r.finite_max_abs
        first = f"; {r.findings[0].text.split(':')[0]}" if r.findings else ""
        more = f" (+{len(r.findings) - 1} more)" if len(r.findings) > 1 else ""
        verdict = "PASS" if r.passed else "FAIL"
        return f"{where}: {verdict} max error {error:.3g} ({r.dtype}){first}{more}"


@dataclasses.dataclass
class ModelAudit:
    """The audit of a whole model: its ``components`` (:class:`ComponentAudit`), ``passed`` when every one
    passed, and ``fix``: the call that makes the failing ones exact."""

    target: str
    components: list[ComponentAudit]

    @property
    def passed(self) -> bool:
        return bool(self.components) and all(c.passed for c in self.components)

    @property
    def fix(self) -> str:
        return "" if self.passed else FIX

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
        verdict = "PASS" if self.passed else "FAIL"
        lines += ["", f"{verdict}: {sum(c.passed for c in self.components)} of {len(self.components)} exact"]
        lines += [f"fix: {self.fix}"] if self.fix else []
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "passed": self.passed,
            "fix": self.fix,
            "components": [
                {
                    "path": c.path,
                    "kind": c.kind,
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
        from .html import render

        parts = [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>posenc audit: {html.escape(self.target)}</title></head><body>"
            f"<h1>posenc audit: {'PASS' if self.passed else 'FAIL'}</h1><ul>"
            + "".join(f"<li>{html.escape(c.verdict())}</li>" for c in self.components)
            + "</ul>"
            + (f"<p>fix: <code>{html.escape(self.fix)}</code></p>" if self.fix else "")
        ]
        for c in self.components:
            if c.report is not None:
                page = render(c.report)
                body = page[page.index("<body>") + 6 : page.rindex("</body>")]
                parts.append(f"<section><h2>{html.escape(c.path)}</h2>{body}</section>")
        parts.append("</body></html>\n")
        path = Path(path)
        with atomic_output(path, binary=False) as stream:
            stream.write("".join(parts))
        return path


def is_model(target: Any) -> bool:
    """Whether ``target`` is a torch module whose positional components lie in its submodules."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(target, torch.nn.Module):
        return False
    from ..torch.patching import find

    owners = [path.rpartition(".")[0] if kind == "table" else path for path, kind, _ in find(target)]
    return any(owners)


def audit_model(model: Any, *, samples: int, tol: Any = None, label: str | None = None) -> ModelAudit:
    """Audit every positional component of ``model`` (module docstring)."""
    from ..torch.patching import find

    components = []
    for path, kind, what in find(model):
        components += _component(model, path, kind, what, samples, tol)
    return ModelAudit(label or type(model).__name__, components)


def _component(model: Any, path: str, kind: str, what: Any, samples: int, tol: Any) -> list[ComponentAudit]:
    from . import audit

    try:
        if kind == "table":
            return [ComponentAudit(path, kind, audit(what, samples=samples, tol=tol))]
        if kind == "timesteps":
            import torch

            def timesteps(t: Any) -> Any:
                return what(torch.as_tensor(t, dtype=torch.float32))

            return [ComponentAudit(path, kind, audit(timesteps, positions=1000, samples=samples, tol=tol))]
        return _rotary(path, what, samples, tol)
    except ValueError as error:  # the component cannot be read as an encoding: said, not raised
        return [ComponentAudit(path, kind, None, f"{type(error).__name__}: {str(error)[:200]}")]


def _rotary(path: str, module: Any, samples: int, tol: Any) -> list[ComponentAudit]:
    import torch

    from .. import rope
    from . import audit

    config = getattr(module, "config", None)
    held = getattr(module, "layer_params", None)  # posenc's per-layer module: its parameters per type
    limit = int(getattr(config, "max_position_embeddings", 0) or 0) or None
    buffers = {k for k, _ in module.named_buffers(recurse=False)}
    types = [k.removesuffix("_inv_freq") for k in buffers if k.endswith("_inv_freq") and "original" not in k]
    if "inv_freq" in buffers or (config is None and not held) or not types:
        return [ComponentAudit(path, "rotary", audit(module, positions=limit, samples=samples, tol=tol))]
    found = []
    for layer_type in sorted(types):
        params = held[layer_type] if held else rope.config(config, layer_type=layer_type)

        def cos_sin(ids: Any, layer_type: str = layer_type) -> Any:
            with torch.no_grad():
                return module(torch.zeros(1), torch.as_tensor(ids)[None], layer_type)

        report = audit(cos_sin, options=params, positions=limit, samples=samples, tol=tol)
        found.append(ComponentAudit(path, "rotary", report, layer_type=layer_type))
    return found


def is_model_directory(target: Any) -> bool:
    """Whether ``target`` names a folder holding a ``config.json``."""
    if not isinstance(target, (str, Path)):
        return False
    folder = Path(target)
    return folder.is_dir() and (folder / "config.json").is_file()


def from_directory(folder: str | Path) -> Any:
    """The model of ``folder/config.json`` (``transformers.AutoModel``), its parameters on the meta device,
    its buffers real; positional weights read from ``folder/*.safetensors`` when present."""
    import torch
    import transformers

    folder = Path(folder)
    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{folder / 'config.json'} is not a config transformers can read: {error}") from None
    register = torch.nn.Module.register_parameter

    def on_meta(module: Any, name: str, param: Any) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            module._parameters[name] = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    torch.nn.Module.register_parameter = on_meta  # only while this model is built
    try:
        model = transformers.AutoModel.from_config(config).eval()
    finally:
        torch.nn.Module.register_parameter = register
    _read_positional_weights(model, folder)
    return model


def _read_positional_weights(model: Any, folder: Path) -> None:
    """Fill the model's positional parameters (left on meta) from the folder's safetensors files, matching
    names by their ending (a checkpoint may prefix them with ``model.``)."""
    from ..torch.patching import find

    wanted = {path: tensor for path, kind, tensor in find(model) if kind == "table" and tensor.is_meta}
    files = sorted(folder.glob("*.safetensors"))
    if not wanted or not files:
        return
    import torch
    from safetensors import safe_open

    for file in files:
        with safe_open(str(file), framework="pt") as stored:
            for key in stored.keys():  # noqa: SIM118  (safe_open has keys(), no iteration)
                path = next((p for p in wanted if key == p or key.endswith("." + p)), None)
                if path is None:
                    continue
                value = stored.get_tensor(key)
                owner, _, name = path.rpartition(".")
                module = model.get_submodule(owner) if owner else model
                if tuple(value.shape) == tuple(wanted[path].shape):
                    setattr(module, name, torch.nn.Parameter(value, requires_grad=False))
