"""Each sub-package's ``__init__`` is its surface: the names other folders and tests use.

A name on a surface is imported from the surface by every module outside its package
(``from proctor.suites import run_mutation``, not ``from proctor.suites.mutation import
run_mutation``), so a module of the package can be split or renamed without touching its
users. Names not on a surface are the package's internals: a white-box test may import them
from their module, which shows at the import that it reaches inside. Inside a package,
modules import their siblings by module path, never through their own surface (which may
still be half-initialised while they load).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SURFACES = ["proctor.patch", "proctor.sandbox", "proctor.suites", "proctor.rewards",
            "proctor.harness.integrity", "proctor.harness.tamper", "proctor.harness.pipeline",
            "proctor.harness.batch", "proctor.rl", "proctor.report"]
SOURCES = ["proctor", "tests", "bench", "examples", "scripts"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str) -> str | None:
    return next((p for p in SURFACES if module == p or module.startswith(p + ".")), None)


def _exports() -> dict[str, set[str]]:
    return {p: set(importlib.import_module(p).__all__) for p in SURFACES}


def _imports(path: Path):
    """``(line, module, name)`` of every absolute ``from M import name`` in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def _python_files():
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "incontainer" not in path.parts:  # run inside the sandbox, not imported
                yield path


@pytest.mark.parametrize("package", SURFACES)
def test_every_surface_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__doc__, f"{package}: the surface says what the package owns"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


@pytest.mark.parametrize("package", SURFACES)
def test_no_surface_name_shadows_a_module_of_its_package(package):
    # ``from pkg import name`` must mean one thing: a function exported under its module's
    # name replaces the module as the package's attribute (``monkeypatch.setattr`` on it,
    # ``from pkg import module`` then break)
    module = importlib.import_module(package)
    folder = Path(module.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py")} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert set(module.__all__) & submodules == set()


def test_names_on_a_surface_are_imported_from_it_outside_their_package():
    exports = _exports()
    wrong = []
    for path in _python_files():
        own = _package_of(_module_name(path)) if path.parts[len(ROOT.parts)] == "proctor" else None
        for line, module, name in _imports(path):
            package = _package_of(module)
            if package and package != own and module != package and name in exports[package]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: from {package} import {name}")
    assert wrong == [], "import these from the package's surface:\n" + "\n".join(wrong)


def test_modules_never_import_their_own_package_surface():
    exports = _exports()
    wrong = []
    for path in (ROOT / "proctor").rglob("*.py"):
        if path.name == "__init__.py":
            continue
        own = _package_of(_module_name(path))
        for line, module, name in _imports(path):
            if own and module == own and name in exports[own]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {name} from {own}")
    assert wrong == [], "import siblings by module path:\n" + "\n".join(wrong)
