"""The house rules a tool checks (docs/architecture.md): `make lint` runs import-linter on the layers and
the no-circle rule (.importlinter); this file checks what import-linter cannot see, the names: no module
imports a private name (``_name``, or a name from a ``_module``) of another package of posenc, nor reaches
one as an attribute of a module it imported (``rounding._DELTA``). What is shared has a public home inside
its package."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src"


def _unit(module: str) -> str:
    """The package (``posenc.core``) or top-level module (``posenc.grids``) a module belongs to."""
    return ".".join(module.split(".")[:2])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports_of_private_names(source: Path = SOURCE) -> list[str]:
    found = []
    for path in sorted((source / "posenc").rglob("*.py")):
        parts = path.relative_to(source).with_suffix("").parts
        package = ".".join(parts[:-1])
        module = ".".join(parts) if parts[-1] != "__init__" else package
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: dict[str, str] = {}  # a name bound by an import -> the posenc module (or name) it is
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "posenc":
                        modules[alias.asname or alias.name.split(".")[0]] = (
                            alias.name if alias.asname else "posenc"
                        )
                continue
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "posenc":
                continue
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{target}.{alias.name}"
            if _unit(target) == _unit(module):
                continue
            for alias in node.names:
                if _private(alias.name) or any(_private(p) for p in target.split(".")[1:]):
                    found.append(f"{module}:{node.lineno} imports {target}.{alias.name}")
        for node in ast.walk(tree):  # module._name, of a module of another package
            if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
                target = modules.get(node.value.id)
                if target is not None and _unit(target) != _unit(module):
                    found.append(f"{module}:{node.lineno} reaches {target}.{node.attr}")
    return found


def test_no_package_imports_a_private_name_of_another():
    assert _imports_of_private_names() == []


def test_the_check_sees_a_private_import(tmp_path):
    """A negative control: a module that reaches into another package's private name is found."""
    package = tmp_path / "posenc"
    (package / "core").mkdir(parents=True)
    (package / "grids.py").write_text(
        "from .core.spec import _hidden\nfrom .core import spec\nfrom . import core\n\n"
        "spec._reached, core._too\n"
    )
    (package / "core" / "api.py").write_text(
        "from .spec import _own_package_is_fine\nfrom . import spec\nspec._x\n"
    )
    assert _imports_of_private_names(tmp_path) == [
        "posenc.grids:1 imports posenc.core.spec._hidden",
        "posenc.grids:5 reaches posenc.core.spec._reached",
        "posenc.grids:5 reaches posenc.core._too",
    ]
