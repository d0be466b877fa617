"""The slow tier is named in tests/conftest.py by file and by test: every name there must still name a test,
or a renamed slow test would silently join the fast tier (`make check`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import conftest

TESTS = Path(__file__).resolve().parents[1]
#: every test file under tests/, by its base name (the tiers name files so; base names are unique)
FILES = {path.name: path for path in TESTS.rglob("test_*.py")}


def test_test_file_names_are_unique():
    names = [path.name for path in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test files share a base name: the tiers name files by it"


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("name", sorted(conftest.SLOW_FILES))
def test_every_slow_file_exists_and_holds_tests(name):
    path = FILES.get(name, TESTS / name)
    assert path.is_file(), f"tests/conftest.py SLOW_FILES names {name}, which is not in tests/"
    assert any(f.startswith("test_") for f in _functions(path)), f"{name} holds no test"


@pytest.mark.parametrize("node", sorted(conftest.SLOW_TESTS))
def test_every_slow_test_exists(node):
    name, function = node.split("::")
    path = FILES.get(name, TESTS / name)
    assert path.is_file(), f"tests/conftest.py SLOW_TESTS names {name}, which is not in tests/"
    assert function in _functions(path), f"{name} has no test {function} (renamed? update SLOW_TESTS)"
    assert name not in conftest.SLOW_FILES, f"{node}: its whole file is slow already"


@pytest.mark.parametrize("name", conftest.LONGEST_FILES)
def test_every_longest_file_exists(name):
    assert name in FILES, f"tests/conftest.py LONGEST_FILES names {name}, which is not in tests/"


def test_the_slow_marker_is_registered(pytestconfig):
    markers = pytestconfig.getini("markers")
    assert any(m.startswith("slow:") for m in markers)
