"""`pip install lmikit` with no extras runs every everyday command: each package lmikit
imports is a declared dependency, or optional behind an extra whose absence is one line.

The suite runs with every extra installed, so a missing package is simulated: in-process by
``sys.modules[name] = None`` (importing it then fails, as when it is absent), and in a fresh
interpreter by an import hook that lets only the standard library and the distributions
``[project].dependencies`` pulls in be imported. ``.ci/install-check`` does the same with
real installs (no extras, and every dependency at its floor).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lmikit import _extras
from lmikit.cli import main
from lmikit.errors import MissingPackage
from tests.conftest import DEFAULT_SPEC, EXAMPLES, ROOT

SOURCES = [p for folder in ("sdk/lmikit", "cdk/lmikit_cdk") for p in (ROOT / folder).rglob("*.py")]
FIRST_PARTY = {"lmikit", "lmikit_cdk", "__future__"}
# imported only by a maintainer's command (``main`` of the module named) that regenerates a
# shipped table from the package's data; the package is a dev dependency
MAINTAINER_ONLY = {"cfnlint": "lmikit.catalog.offers", "sagemaker": "lmikit.image"}
EVERY_SPEC = sorted(EXAMPLES.glob("*.yaml")) + sorted(EXAMPLES.glob("models/*.yaml"))


@cache
def _project() -> dict:
    import tomllib  # Python 3.11 on; CI runs 3.11

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _imports_in(node: ast.AST, path: Path,
                scopes: list[str]) -> Iterator[tuple[str, Path, list[str]]]:
    """(top-level module, file, enclosing function names) of every import under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield alias.name.split(".")[0], path, scopes
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            yield child.module.split(".")[0], path, scopes
        inner = [*scopes, child.name] if isinstance(
            child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else scopes
        yield from _imports_in(child, path, inner)


def _imports() -> Iterator[tuple[str, Path, list[str]]]:
    for path in SOURCES:
        yield from _imports_in(ast.parse(path.read_text()), path, [])


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_every_import_is_a_core_or_an_optional_package() -> None:
    third_party = {}
    for top, path, scopes in _imports():
        if top in FIRST_PARTY or top in sys.stdlib_module_names:
            continue
        if top in MAINTAINER_ONLY:
            assert _module_name(path) == MAINTAINER_ONLY[top] and scopes[:1] == ["main"], (
                f"{path}: {top} is a dev dependency, imported only by {MAINTAINER_ONLY[top]}"
                ".main")
            continue
        third_party.setdefault(top, path)
    unknown = {t: str(p) for t, p in third_party.items()
               if t not in _extras.CORE and t not in _extras.OPTIONAL}
    assert unknown == {}, "add each to pyproject and to lmikit._extras.CORE or OPTIONAL"
    # no stale rows either: every row is imported somewhere
    assert set(_extras.CORE) | set(_extras.OPTIONAL) == set(third_party)


def test_core_is_exactly_pyprojects_dependencies_and_each_module_is_its_distribution() -> None:
    assert {canonicalize_name(d) for d in _extras.CORE.values()} == \
        _names(_project()["dependencies"])
    provided = metadata.packages_distributions()
    for module, distribution in _extras.CORE.items():
        assert canonicalize_name(distribution) in {canonicalize_name(d)
                                                   for d in provided.get(module, [])}


def test_each_optional_package_is_in_the_extra_it_names() -> None:
    extras = _project()["optional-dependencies"]
    provided = metadata.packages_distributions()
    for module, (distribution, install) in _extras.OPTIONAL.items():
        assert canonicalize_name(distribution) in {canonicalize_name(d)
                                                   for d in provided.get(module, [])}
        if install.startswith("lmikit["):
            extra = install[len("lmikit["):-1]
            assert canonicalize_name(distribution) in _names(extras[extra]), (module, extra)
        else:  # no extra: a library function's own need; the tests install it
            assert install == distribution
            assert canonicalize_name(distribution) in _names(extras["dev"])
        assert canonicalize_name(distribution) not in _names(_project()["dependencies"])


# --- a package missing at run time --------------------------------------------------------

@pytest.fixture
def block(monkeypatch: pytest.MonkeyPatch):
    """``block("numpy")``: importing numpy (or any of its modules) now fails."""
    def blocked(*names: str) -> None:
        for name in names:
            for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                monkeypatch.setitem(sys.modules, loaded, None)
            monkeypatch.setitem(sys.modules, name, None)
    return blocked


def test_a_missing_dependency_is_one_line_naming_it_not_a_traceback(block) -> None:
    block("grafana_foundation_sdk")
    result = CliRunner().invoke(main, ["render", str(DEFAULT_SPEC), "-t", "grafana"])
    assert result.exit_code == 2
    assert result.stderr == ("Error: lmikit render needs grafana-foundation-sdk: "
                             "pip install 'grafana-foundation-sdk'\n")


def test_a_missing_module_of_an_installed_package_asks_for_a_newer_one() -> None:
    error = _extras.missing_package(ModuleNotFoundError(name="click.no_such_module"),
                                    "lmikit plan")
    assert str(error) == ("lmikit plan needs click.no_such_module, which the installed click "
                          "lacks: pip install --upgrade 'click'")


def test_a_missing_lmikit_module_is_a_bug_and_keeps_its_traceback(block) -> None:
    block("lmikit.render.grafana")
    result = CliRunner().invoke(main, ["render", str(DEFAULT_SPEC), "-t", "grafana"])
    assert isinstance(result.exception, ModuleNotFoundError)


def test_simulate_needs_no_numpy(block) -> None:
    block("numpy")  # the repeated-text note counts every chunk key the workload sends
    result = CliRunner().invoke(main, ["simulate", str(DEFAULT_SPEC), "--workload",
                                       "long-doc-qa", "--json"])
    assert result.exit_code == 0, result.output
    assert any("the text this workload repeats" in n
               for n in json.loads(result.stdout)["notes"])


def test_require_names_the_use_and_the_extra(block) -> None:
    block("moto")
    with pytest.raises(MissingPackage, match=r"^lmikit sandbox needs moto: "
                       r"pip install 'lmikit\[sandbox\]'$"):
        _extras.require("moto.server", "lmikit sandbox")


# --- only the core dependencies installed -------------------------------------------------

def _core_closure() -> set[str]:
    """Every distribution ``pip install lmikit`` installs: the dependencies, and theirs."""
    seen: set[str] = set()
    todo = [Requirement(r).name for r in _project()["dependencies"]]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.distribution(name).requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


ONLY_CORE = r'''
import importlib, json, pkgutil, sys
allowed = set(json.loads(sys.argv[1]))


class OnlyCore:
    """Refuses every module but the standard library's and the core distributions'."""

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in allowed and top not in sys.stdlib_module_names:
            raise ModuleNotFoundError(f"No module named {top!r}", name=top)
        return None


sys.meta_path.insert(0, OnlyCore())
from click.testing import CliRunner

from lmikit.cli import main

report = {"imports": {}, "cli": {}}
for top in ("lmikit", "lmikit_cdk"):
    try:
        package = importlib.import_module(top)
        names = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".")]
    except ImportError as exc:
        report["imports"][top] = f"{type(exc).__name__}: {exc}"
        continue
    for name in names:
        if name != "lmikit.cli.__main__":
            try:
                importlib.import_module(name)
            except ImportError as exc:
                report["imports"][name] = f"{type(exc).__name__}: {exc}"
for label, args in json.loads(sys.argv[2]).items():
    result = CliRunner().invoke(main, args)
    report["cli"][label] = [result.exit_code, result.stderr,
                            repr(result.exception) if result.exit_code not in (0, 1, 2) else ""]
try:
    import lmikit
    lmikit.openai_client("docqa-qwen7b", region="us-east-1")
except ImportError as exc:
    report["openai"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(report))
'''


def test_with_only_the_core_dependencies_every_module_imports_and_every_command_runs(
        tmp_path: Path) -> None:
    closure = _core_closure()
    allowed = sorted({module for module, dists in metadata.packages_distributions().items()
                      if any(canonicalize_name(d) in closure for d in dists)}
                     | FIRST_PARTY | {"_distutils_hack"})  # setuptools' .pth hook
    commands = {f"validate {p.relative_to(EXAMPLES)}": ["validate", str(p)] for p in EVERY_SPEC}
    commands |= {
        "plan": ["plan", str(DEFAULT_SPEC)],
        "simulate": ["simulate", str(DEFAULT_SPEC), "--workload", "long-doc-qa"],
        "simulate --plot": ["simulate", str(DEFAULT_SPEC), "--workload", "rag", "--requests",
                            "20", "--plot", str(tmp_path / "ttft.png")],
        "sandbox serve": ["sandbox", "serve", "--port", "4566"],
    }
    out = subprocess.run([sys.executable, "-c", ONLY_CORE, json.dumps(allowed),
                          json.dumps(commands)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.splitlines()[-1])
    cdk = "MissingPackage: lmikit_cdk needs aws-cdk-lib: pip install 'lmikit[cdk]'"
    assert report["imports"] == {"lmikit_cdk": cdk}
    cli = report["cli"]
    for label in commands:
        if label not in ("simulate --plot", "sandbox serve"):
            assert cli[label][0] == 0, (label, cli[label])
    assert cli["simulate --plot"][:2] == [
        2, "Error: lmikit simulate --plot needs matplotlib: pip install 'lmikit[plot]'\n"]
    assert not (tmp_path / "ttft.png").exists()
    code, stderr, _ = cli["sandbox serve"]
    assert code in (1, 2) and stderr.count("\n") == 1 and "pip install 'lmikit[sandbox]'" in stderr
    assert report["openai"] == ("MissingPackage: OpenAI-SDK access needs openai: "
                                "pip install 'lmikit[openai]'")
