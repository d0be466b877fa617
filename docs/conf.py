"""Sphinx configuration of posenc's site: the guides (docs/*.md, Markdown read by MyST) and the API reference
generated from the docstrings. ``make docs`` builds it into docs/_build/html; Read the Docs builds the same
(.readthedocs.yaml).

Why Sphinx and not MkDocs + mkdocstrings: the docstrings are already written in reStructuredText with
Sphinx roles (:func:`...`, :mod:`...`, :class:`...`, ``::`` literal blocks), which Sphinx's builtin autodoc
reads as they are; napoleon (also builtin) reads the Google-style ``Attributes:`` / ``Args:`` sections. The
guides are plain Markdown, so they read the same on the forge; MyST (myst-parser) reads them into the site,
their links to each other and to the API pages included. The toolchain is Sphinx, MyST and their own
dependencies (requirements-docs.txt), no theme to pin.

The build runs with warnings as errors (``-W --keep-going``) and nitpicky on, so every cross-reference in a
docstring must resolve to a documented name: a renamed function breaks the build, not the page.
"""

import functools
import importlib
import os
import re
import sys
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

project = "posenc"
author = "posenc developers"
copyright = "posenc developers"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]

# Offline and reproducible: no intersphinx (it would fetch numpy/torch/jax inventories over the network),
# so references to third-party types are listed in nitpick_ignore_regex below instead.
nitpicky = True

html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {"description": "exact sinusoidal positional encodings", "page_width": "1100px"}
exclude_patterns = ["_build", "images"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# The guides' headings get anchors (#the-command), as the forge gives them, so links to a section resolve.
myst_heading_anchors = 3

# Only the public names: autodoc takes a module's members from its __all__ (ignore-module-all is off), and
# undoc-members makes a public name without a docstring still appear (and stand out).
autodoc_default_options = {"members": True, "undoc-members": True, "member-order": "groupwise"}
autodoc_class_signature = "separated"
# Parameter types go into the parameter list, not the signature: the signature stays readable
# (``encode(positions, d_model, *, base=10000.0, ...)``) with NumPy's long ArrayLike union written once.
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
# Not autodoc_preserve_defaults: the option-taking functions (posenc.torch.encode, ...) carry a computed
# __signature__, whose defaults are the values themselves.
# Not inherited docstrings: a module's forward() would show torch's nn.Module.forward text.
autodoc_inherit_docstrings = False

# The docstrings' "Attributes:" sections list the fields of dataclasses that autodoc also documents as
# members: render them as :ivar: fields so that each attribute is described once.
napoleon_use_ivar = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Third-party and standard-library types named in type hints, with no inventory to resolve against offline.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|npt|torch|jax|jnp|flax|nn|matplotlib|plt|typing|collections|types|os|pathlib)\..*"),
    (
        "py:.*",
        r"(Any|Callable|Sequence|Iterable|Iterator|Mapping|Literal|Path|TextIO|ArrayLike|DTypeLike|Figure)",
    ),
]

# The modules of the reference, one page each (docs/api/<name>.rst; posenc.analysis.plot is on the page of
# posenc.analysis); the names in their __all__ are public.
PUBLIC_MODULES = [
    "posenc.torch",
    "posenc.jax",
    "posenc.rope",
    "posenc.presets",
    "posenc.grids",
    "posenc.positions",
    "posenc.sharding",
    "posenc.torch.sharding",
    "posenc.porting",
    "posenc.auditor",
    "posenc.testing",
    "posenc.errors",
    "posenc.analysis",
    "posenc.analysis.plot",
]
# posenc's own page documents only these (its other names are the submodules and their functions).
TOP_LEVEL = ["encode", "frequencies", "table"]


@functools.cache
def _public_names() -> dict[int, str]:
    """id(object) -> the dotted name it is documented under."""
    names: dict[int, str] = {}
    for name in TOP_LEVEL:
        names[id(getattr(importlib.import_module("posenc"), name))] = f"posenc.{name}"
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        names.setdefault(id(module), modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) or callable(obj):  # not constants: small ints and strings are shared
                names.setdefault(id(obj), f"{modname}.{name}")
    return names


_MISSING = object()
_FIELD = object()


def _lookup(target: str) -> Any:
    """The object a dotted name refers to, or _MISSING."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif isinstance(obj, type) and any(
                part in vars(c).get("__annotations__", {}) for c in obj.__mro__
            ):
                obj = _FIELD  # a dataclass field without a default: no class attribute
            else:
                return _MISSING
        return obj
    return _MISSING


def _candidates(node: Any) -> list[str]:
    """The absolute names a (possibly relative) reference can mean, in the order Python would look."""
    target = node["reftarget"].lstrip("~.")
    modname, classname = node.get("py:module"), node.get("py:class")
    found = [target]
    if modname:
        found.insert(0, f"{modname}.{target}")
        if classname:
            found.insert(0, f"{modname}.{classname}.{target}")
            owner = getattr(_lookup(f"{modname}.{classname}"), "__module__", None)
            if owner:
                found.append(f"{owner}.{target}")
    return found


def _resolve_private(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Docstrings name objects where they are defined (``posenc.analysis.check.check``, ``posenc.core``, a
    relative ``:mod:`targets```); the reference documents them where they are public. Link such a reference
    to the public name of the same object; render it as plain text when the object exists but is private.
    A name that does not exist at all still fails the build."""
    if node.get("refdomain") != "py":
        return None
    public = _public_names()
    domain = env.get_domain("py")
    for candidate in _candidates(node):
        if _lookup(candidate) is _MISSING:
            continue
        parts = candidate.split(".")
        # the longest public prefix: posenc.analysis.report.Report.passed -> posenc.analysis.Report.passed
        for cut in range(len(parts), 0, -1):
            head = _lookup(".".join(parts[:cut]))
            if head is not _MISSING and id(head) in public:
                # the name itself, else its public owner (a field napoleon lists as the class's :ivar:)
                for name in (".".join([public[id(head)], *parts[cut:]]), public[id(head)]):
                    for reftype in ("obj", "mod"):
                        resolved = domain.resolve_xref(
                            env, node["refdoc"], app.builder, reftype, name, node, contnode
                        )
                        if resolved is not None:
                            return resolved
                break
        if not candidate.startswith("posenc") or any(p.startswith("_") for p in parts):
            continue
        return contnode  # it exists, and is private: text, no link
    return None


def _prose_attribute_docstring(self: Any) -> list[str]:
    """napoleon reads an attribute's or property's first line ``The position of ...: ...`` as
    ``type: description``; posenc writes prose there (the type comes from the annotation)."""
    return self._format_field("", "", self._dedent(self._consume_to_end()))


_LITERAL = re.compile(r"(``.+?``|:[a-z:]+:`[^`]*`)")


def _escape_bars(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """posenc's docstrings write |p| for an absolute value and ||PE(a) - PE(b)|| for a norm, never a
    reStructuredText substitution: escape those bars, outside inline literals, literal blocks and doctests."""
    block_indent = None  # the indent of the paragraph that ended with "::", while inside its literal block
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if stripped.startswith(">>>") or stripped.startswith("..."):
            continue
        if "|" in line:
            parts = _LITERAL.split(line)
            parts[::2] = [re.sub(r"(?<!\\)\|", r"\\|", part) for part in parts[::2]]
            lines[i] = "".join(parts)
        if stripped.endswith("::"):
            block_indent = indent


def setup(app: Any) -> None:
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    GoogleDocstring._parse_attribute_docstring = _prose_attribute_docstring
    app.connect("missing-reference", _resolve_private)
    app.connect("autodoc-process-docstring", _escape_bars, priority=400)  # before napoleon (500)
