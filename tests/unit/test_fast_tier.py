"""The fast tier (``pytest -m "not slow"``) keeps a test of every package, and the lists that
put tests in the slow tier name tests that exist.

A package counts as covered when a fast test's file, a conftest.py above it, or a tests/
helper either of them imports, imports the package or a module in it (``from lmikit import
Deployment`` counts for the package that defines ``Deployment``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.unit.sim import conftest as sim_tier

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SOURCES = {"lmikit": ROOT / "sdk" / "lmikit", "lmikit_cdk": ROOT / "cdk" / "lmikit_cdk"}


def packages() -> set[str]:
    """Every package of the product: each folder with an ``__init__.py`` under sdk/lmikit and
    cdk/lmikit_cdk, as a dotted name."""
    found = set()
    for top, folder in SOURCES.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            found.add(".".join((top, *parts)))
    return found


def _package_of(module: str, known: set[str]) -> str | None:
    """The innermost package of ``known`` that holds ``module`` (None outside the product)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def _defining_module(package: str, name: str) -> str:
    """Where ``from package import name`` finds ``name``: a submodule, or the module a
    re-exported class or function was defined in."""
    value = getattr(importlib.import_module(package), name, None)
    if value is None:
        return f"{package}.{name}"
    return str(getattr(value, "__name__", None) if isinstance(value, type(sys))
               else getattr(value, "__module__", package))


@functools.cache
def _imports(path: Path) -> tuple[frozenset[str], frozenset[Path]]:
    """The product modules ``path`` imports, and the tests/ helper files it imports."""
    known = packages()
    modules: set[str] = set()
    helpers: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                module = ".".join(base.relative_to(ROOT).parts)
                module += f".{node.module}" if node.module else ""
            else:
                module = node.module or ""
            modules.add(module)
            for alias in node.names:
                nested = f"{module}.{alias.name}"
                if module in known and any(p.startswith(f"{module}.") for p in known):
                    nested = _defining_module(module, alias.name)
                modules.add(nested)
    for module in modules:
        if module.split(".")[0] == "tests":
            base = ROOT.joinpath(*module.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    helpers.add(candidate)
    product = {m for m in modules if m.split(".")[0] in SOURCES}
    return frozenset(product), frozenset(helpers)


def covered_packages(test_files: Iterable[Path]) -> set[str]:
    """The packages that the given test files, their conftest.py files and the tests/ helpers
    they import (transitively) import."""
    known = packages()
    todo: list[Path] = []
    for path in set(test_files):
        todo.append(path)
        todo.extend(folder / "conftest.py" for folder in path.parents
                    if folder.is_relative_to(TESTS) and (folder / "conftest.py").is_file())
    seen: set[Path] = set()
    covered: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        modules, helpers = _imports(path)
        covered.update(p for m in modules if (p := _package_of(m, known)) is not None)
        todo.extend(helpers)
    return covered


def _is_the_whole_suite(config: pytest.Config) -> bool:
    """Whether this run collected every test under tests/ with at most ``-m "not slow"``
    taken away, so that its own items, less the slow ones, are the fast tier."""
    paths = {(ROOT / arg.split("::")[0]).resolve() for arg in config.args}
    narrowing = ("keyword", "deselect", "ignore", "ignore_glob", "lf", "stepwise")
    return (paths <= {ROOT, TESTS}
            and not any(config.getoption(option, None) for option in narrowing)
            and (config.option.markexpr or "") in ("", "not slow"))


def fast_tier_files(session: pytest.Session) -> set[Path]:
    """The test files that hold at least one test of the fast tier. Taken from this run when
    it collected the whole suite; otherwise from ``pytest --collect-only -m "not slow"``."""
    if _is_the_whole_suite(session.config):
        return {item.path for item in session.items if item.get_closest_marker("slow") is None}
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-m", "not slow",
         "-p", "no:cacheprovider", str(TESTS)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    return {ROOT / line.split("::")[0] for line in listed.splitlines() if "::" in line}


def test_every_package_has_a_test_in_the_fast_tier(request: pytest.FixtureRequest) -> None:
    files = fast_tier_files(request.session)
    assert Path(__file__) in files  # this check is itself in the fast tier
    missing = sorted(packages() - covered_packages(files))
    assert not missing, (
        f"no test in the fast tier (pytest -m 'not slow') imports {', '.join(missing)}: give "
        "each one a test that is not marked slow")


def test_the_coverage_rule_sees_through_re_exports_and_helpers(tmp_path: Path) -> None:
    """The rule itself: ``from lmikit import Name`` covers the package that defines Name, a
    tests/ helper's imports count, and a file that imports no product code covers nothing."""
    (tmp_path / "test_exported.py").write_text("from lmikit import Deployment, get_model\n")
    (tmp_path / "test_helper.py").write_text("from tests.functional import _matrix\n")
    (tmp_path / "test_nothing.py").write_text("import json\n")
    assert covered_packages([tmp_path / "test_exported.py"]) == {
        "lmikit", "lmikit.deploy", "lmikit.catalog"}
    assert "lmikit.testing" in covered_packages([tmp_path / "test_helper.py"])
    assert covered_packages([tmp_path / "test_nothing.py"]) == set()


def test_every_test_the_simulator_tier_lists_exists() -> None:
    """tests/unit/sim/conftest.py marks files and tests slow by name: a renamed test would
    silently move back into the fast tier."""
    folder = TESTS / "unit" / "sim"
    assert all((folder / name).is_file() for name in sim_tier.SLOW_FILES), sim_tier.SLOW_FILES
    for name, tests in sim_tier.SLOW_TESTS.items():
        defined = {node.name for node in ast.parse((folder / name).read_text()).body
                   if isinstance(node, ast.FunctionDef)}
        assert tests <= defined, (name, sorted(tests - defined))


def test_the_readme_fast_line_selects_this_tier(request: pytest.FixtureRequest) -> None:
    """The README's fast command is ``pytest -m "not slow"``, and ``slow`` is a registered
    marker under --strict-markers, so a mistyped mark fails instead of staying fast."""
    line = next((x for x in (ROOT / "README.md").read_text().splitlines()
                 if x.startswith(".venv/bin/python -m pytest") and "# fast tier" in x), None)
    assert line, "the README names no fast test command"
    assert shlex.split(line.split("#")[0])[3:] == ["-m", "not slow"]
    assert any(m.startswith("slow:") for m in request.config.getini("markers"))
    assert "--strict-markers" in request.config.getini("addopts")
