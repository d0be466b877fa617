"""The packages a user installs: ``python -m build`` gives an sdist and a wheel, built here from a copy of
the source tree as a fresh clone has it (``git ls-files``), so that the repository is left as it was.

The sdist holds what a build needs (the C source, py.typed) and the project's own files (README.md,
CHANGELOG.md, the licence); the wheel holds the package and its data, and no tests. The wheel installs into a
clean venv with no compiler on PATH and runs there (``posenc table``, ``import posenc.torch``); the sdist
installs into another and compiles the C extension.

Fast and offline: ``--no-isolation`` builds with this venv's setuptools (requirements-test.txt pins it),
pip installs with ``--no-index --no-deps``. The fresh venvs see this venv's site-packages through a .pth file
written after the install, appended after their own: posenc comes from the fresh venv, numpy and torch from
this one (the wheel's metadata declares numpy, which a user's pip installs).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

import posenc
from posenc.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, a dependency of build there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
COMPILERS = ("cc", "gcc", "clang")
KERNELS = "posenc/core/_kernels."  # the compiled extension's name in the wheel, its platform suffix after


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    tree: Path  # the copy the two were built from
    footprint: dict[str, tuple[int, int]]  # what the repository held, before the build


def _footprint() -> dict[str, tuple[int, int]]:
    """Every file in the repository that a build or an install could write (build/, dist/, the egg-info,
    the compiled extension), with its size and modification time."""
    places = [ROOT / "build", ROOT / "dist", *ROOT.glob("*.egg-info"), *(ROOT / "src").glob("*.egg-info")]
    files = [f for place in places for f in place.rglob("*")]
    files += [*(ROOT / "src" / "posenc").rglob("*.so"), *(ROOT / "src" / "posenc").rglob("*.pyd")]
    return {str(f.relative_to(ROOT)): (f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()}


def _environment(**changes: str) -> dict[str, str]:
    """This process's environment without what would point a child at other packages (PYTHONPATH, a venv)."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key not in ("VIRTUAL_ENV", "PIP_USER", "PIP_TARGET", "PIP_PREFIX")
    }
    environment.update(PYTHONNOUSERSITE="1", PYTHONUTF8="1", PIP_NO_INPUT="1")
    environment.update(PIP_DISABLE_PIP_VERSION_CHECK="1", **changes)
    return environment


def _run(command: list, environment: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment,
        cwd=cwd,
        timeout=300,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _fresh_venv(folder: Path) -> tuple[Path, Path]:
    """A venv with nothing installed (no pip either: this venv's pip installs into it, ``--python``); its
    python and its site-packages."""
    _run([sys.executable, "-m", "venv", "--without-pip", folder], _environment(), folder.parent)
    python = folder / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = _run([python, "-c", where], _environment(), folder)
    return python, Path(site.strip())


def _see_this_venv(site: Path) -> None:
    """Let a fresh venv import this venv's packages (numpy, torch), after its own."""
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (site / "zz_test_venv.pth").write_text("".join(f"{path}\n" for path in ours), encoding="utf-8")


def _pip_install(python: Path, arguments: list, environment: dict[str, str], cwd: Path) -> str:
    command = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps"]
    return _run([*command, *arguments], environment, cwd)


def _source_tree(destination: Path) -> Path:
    """A copy of the files a fresh clone has: the tracked ones and the new ones git does not ignore."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = _run(command, _environment(), ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of it
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    footprint = _footprint()
    folder = tmp_path_factory.mktemp("packaging")
    tree = _source_tree(folder / "posenc-source")
    dist = folder / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, tree], _environment(), folder)
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    return Built(sdists[0], wheels[0], tree, footprint)


def _modules(tree: Path) -> set[str]:
    """The package's files in the source tree, as ``posenc/...`` (the wheel's names)."""
    return {str(p.relative_to(tree / "src")) for p in (tree / "src" / "posenc").rglob("*") if p.is_file()}


def test_the_sdist_holds_what_a_build_needs_and_the_projects_own_files(built):
    with tarfile.open(built.sdist) as sdist:
        members = [m.name for m in sdist.getmembers() if m.isfile()]
    top = {name.split("/")[0] for name in members}
    assert top == {built.sdist.name.removesuffix(".tar.gz")}, top
    names = {name.split("/", 1)[1] for name in members}
    licences = {p.name for pattern in ("LICEN[CS]E*", "COPYING*") for p in ROOT.glob(pattern)}
    wanted = {"pyproject.toml", "setup.py", "README.md", "CHANGELOG.md", *licences}
    wanted |= {f"src/{name}" for name in _modules(built.tree)}  # every module, _kernels.c and py.typed
    assert {"src/posenc/core/_kernels.c", "src/posenc/py.typed"} <= wanted
    assert wanted - names == set()
    assert [n for n in names if n.endswith((".so", ".pyd", ".pyc", ".o")) or "__pycache__" in n] == []


def test_the_wheel_holds_the_package_and_its_data_and_no_tests(built):
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode("utf-8"))
        entry_points = wheel.read(f"{info}/entry_points.txt").decode("utf-8")
    assert {name.split("/")[0] for name in names} == {"posenc", info}  # no tests/, nothing else
    assert not [n for n in names if Path(n).name.startswith(("test_", "conftest")) or "/tests/" in n]
    assert _modules(built.tree) - names == set()  # every module, py.typed (and the C source)
    assert "posenc/py.typed" in names
    assert {"posenc/explore/static/index.html", "posenc/explore/static/app.js"} <= names  # the page
    assert len([n for n in names if n.startswith(KERNELS) and n.endswith((".so", ".pyd"))]) == 1
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    assert [r.name for r in requires if r.marker is None] == ["numpy"]
    assert "posenc = posenc.cli:main" in entry_points


def test_the_wheel_installs_with_no_compiler_and_runs_the_cli_and_the_torch_adapter(built, tmp_path, capsys):
    python, site = _fresh_venv(tmp_path / "venv")
    environment = _environment(PATH=str(python.parent))  # the venv's bin alone
    for name in ("CC", "CXX", "LDSHARED"):
        environment.pop(name, None)
    assert [shutil.which(c, path=environment["PATH"]) for c in COMPILERS] == [None] * len(COMPILERS)
    probe = f"import shutil; print([shutil.which(c) for c in {COMPILERS}])"
    seen = _run([python, "-c", probe], environment, tmp_path)
    assert seen.strip() == str([None] * len(COMPILERS))

    installed = _pip_install(python, [built.wheel], environment, tmp_path)
    assert "Successfully installed posenc-" in installed and "Building wheel" not in installed
    with zipfile.ZipFile(built.wheel) as wheel:
        (kernels,) = [n for n in wheel.namelist() if n.startswith(KERNELS) and n.endswith(".so")]
        assert (site / kernels).read_bytes() == wheel.read(kernels)  # installed as built, nothing compiled
    _see_this_venv(site)

    printed = _run([python.parent / "posenc", "table", "5", "4"], environment, tmp_path)
    assert main(["table", "5", "4"]) == 0
    assert printed == capsys.readouterr().out  # what this venv's posenc prints
    rows = [line.split() for line in printed.splitlines()[1:]]
    assert [int(row[0]) for row in rows] == [0, 1, 2, 3, 4]
    values = np.array([[float(v) for v in row[1:]] for row in rows])
    assert values[0].tolist() == [0.0, 1.0, 0.0, 1.0]  # the worked example: sin 0, cos 0, sin 0, cos 0
    np.testing.assert_allclose(values, posenc.table(5, 4), rtol=0, atol=0.5e-4 + 1e-9)  # to 4 digits

    probe = (
        "import json, numpy, torch, posenc, posenc.torch, posenc.core, importlib.metadata as m\n"
        "print(json.dumps({'posenc': posenc.__file__, 'adapter': posenc.torch.__file__,\n"
        "    'numpy': numpy.__file__, 'torch': torch.__file__, 'path': posenc.core.compiled_path(),\n"
        "    'dist': str(m.distribution('posenc').locate_file(''))}))"
    )
    found = json.loads(_run([python, "-c", probe], environment, tmp_path).strip().splitlines()[-1])
    for name in ("posenc", "adapter", "dist"):
        assert Path(found[name]).resolve().is_relative_to(site.resolve()), found
    ours = Path(sysconfig.get_path("purelib")).resolve()
    for name in ("numpy", "torch"):  # this venv's, through the .pth file
        assert Path(found[name]).resolve().is_relative_to(ours), found
    assert found["path"] == "C"  # the wheel's compiled extension


def test_the_sdist_installs_with_a_compiler_and_builds_the_extension(built, tmp_path):
    python, site = _fresh_venv(tmp_path / "venv")
    assert any(shutil.which(c) for c in COMPILERS), "no C compiler on PATH: the sdist would install without C"
    # --no-build-isolation: the build runs in the fresh venv, which sees this venv's setuptools alone
    tools = tmp_path / "setuptools"
    tools.mkdir()
    setuptools = importlib.metadata.distribution("setuptools")
    for top in {Path(f).parts[0] for f in setuptools.files or ()} - {".."}:
        if not top.endswith(".pth") and top != "__pycache__":
            (tools / top).symlink_to(setuptools.locate_file(top))
    environment = _environment(PYTHONPATH=str(tools))
    installed = _pip_install(python, ["--no-build-isolation", built.sdist], environment, tmp_path)
    assert "Successfully built posenc" in installed and "Successfully installed posenc-" in installed
    _see_this_venv(site)

    environment = _environment()
    command = [python, "-c", "import posenc.core; print(posenc.core.compiled_path())"]
    printed = _run(command, environment, tmp_path)
    assert printed == "C\n"
    where = _run([python, "-c", "import posenc.core._kernels as k; print(k.__file__)"], environment, tmp_path)
    assert Path(where.strip()).resolve().is_relative_to(site.resolve()), where


def test_the_build_requirement_admits_the_licence_expression():
    """``license = "MIT"`` (an SPDX expression, PEP 639) is read by setuptools 77 and later: an older one
    rejects pyproject.toml, so [build-system] must not admit it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(project["project"]["license"], str)
    requires = [Requirement(r) for r in project["build-system"]["requires"]]
    (setuptools,) = [r for r in requires if r.name == "setuptools"]
    assert not setuptools.specifier.contains("76.1.0") and setuptools.specifier.contains("77.0.3")


def test_building_and_installing_left_the_repository_as_it_was(built):
    """Run last (the file's order): the builds and installs above wrote nothing into the repository."""
    assert _footprint() == built.footprint
