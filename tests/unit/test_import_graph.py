"""Nothing imports in a circle: not the modules of ``lmikit`` or ``lmikit_cdk``, lazy
(function-level) and type-only imports included, and not lmikit's packages.

A cycle hidden behind a function-level import still couples two modules both ways (the
renderers once did this: ``render.env`` imported ``render.sagemaker`` inside a function
because ``render.sagemaker`` imported ``render.env``). Names several modules share live in
``lmikit.names``. A package face's lazy table (``_EXPORTS``) counts as imports of the modules
it names, so a cycle through a face is seen.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

import lmikit
from tests.conftest import ROOT

SDK = Path(lmikit.__file__).parent
CDK = ROOT / "cdk" / "lmikit_cdk"
# package cycles of lmikit still to break: only ever shrinks
KNOWN_PACKAGE_CYCLES: list[list[str]] = [["lmikit.planner", "lmikit.sim"]]
# the .py files at the root of sdk/lmikit: the face, errors, names and what several stages
# share (sizing.py and emf_metrics.json are also copied into the container image as they are)
ROOT_MODULES_AT_MOST = 10
# packages whose modules are private behind a face (grows to every package)
FACED = {"lmikit.accept", "lmikit.advisor", "lmikit.bench", "lmikit.catalog", "lmikit.cli",
         "lmikit.client", "lmikit.deploy", "lmikit.lora", "lmikit.planner", "lmikit.render",
         "lmikit.resolve", "lmikit.spec", "lmikit.weights"}
# lmikit's packages in pipeline order: each imports only packages before it and the root
STAGES = ["lmikit.aws", "lmikit.formatters", "lmikit.catalog", "lmikit.spec", "lmikit.sim",
          "lmikit.planner", "lmikit.resolve", "lmikit.advisor", "lmikit.render", "lmikit.lora",
          "lmikit.accept", "lmikit.weights", "lmikit.deploy", "lmikit.client", "lmikit.bench",
          "lmikit.testing", "lmikit.cli"]
# imports against that order still to remove (the simulator's deployment factories call the
# planner): only ever shrinks
KNOWN_BACKWARD = {("lmikit.sim", "lmikit.planner")}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package face's ``_EXPORTS = {name: module}`` table."""
    for node in tree.body:
        if (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict)
                and "_EXPORTS" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign)
                                              else node.target)):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values,
                                                     strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    return {}


@cache
def import_graph(root: Path = SDK) -> dict[str, frozenset[str]]:
    """module -> modules of the same top package it imports anywhere in its body (the top
    package's own lazy re-exports excepted: ``lmikit/__init__`` imports everything on
    attribute access)."""
    top = root.name
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules.items()}
    faces = {name: _lazy_exports(trees[name]) for name, path in modules.items()
             if path.name == "__init__.py" and name != top}
    graph: dict[str, frozenset[str]] = {}
    for name in modules:
        found: set[str] = set()
        if name != top:
            for node in ast.walk(trees[name]):
                targets: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    # a name taken from a lazy face loads only the module that defines it
                    face = faces.get(node.module, {})
                    targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                               else face.get(a.name, node.module) for a in node.names]
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                found.update(targets)
            found.update(faces.get(name, {}).values())
        graph[name] = frozenset(t for t in found if t in modules and t not in (name, top))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_graph_sees_function_level_imports(tmp_path):
    pkg = tmp_path / "lmikit"
    (pkg / "render").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "render" / "__init__.py").write_text("")
    (pkg / "render" / "env.py").write_text(
        "def f():\n    from lmikit.render.sagemaker import x\n    return x\n")
    (pkg / "render" / "sagemaker.py").write_text("from lmikit.render.env import f\nx = 1\n")
    assert cycles(import_graph(pkg)) == [["lmikit.render.env", "lmikit.render.sagemaker"]]


def test_graph_sees_a_package_faces_lazy_table(tmp_path):
    pkg = tmp_path / "lmikit"
    (pkg / "render").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "render" / "__init__.py").write_text(
        '_EXPORTS = {"f": "lmikit.render._env"}\n')
    (pkg / "render" / "_env.py").write_text("from lmikit.deploy import g\nf = g\n")
    (pkg / "deploy.py").write_text("from lmikit.render import f\ng = 1\n")
    assert import_graph(pkg)["lmikit.render"] == {"lmikit.render._env"}
    # a name taken from the face loads only the module that defines it
    assert import_graph(pkg)["lmikit.deploy"] == {"lmikit.render._env"}
    assert cycles(import_graph(pkg)) == [["lmikit.deploy", "lmikit.render._env"]]


def test_lmikit_modules_import_no_cycle():
    graph = import_graph()
    assert "lmikit.render._env" in graph and "lmikit.names" in graph["lmikit.render._env"]
    assert cycles(graph) == []


def test_lmikit_cdk_modules_import_no_cycle():
    graph = import_graph(CDK)
    assert "lmikit_cdk.endpoint" in graph["lmikit_cdk.stack"]
    assert cycles(graph) == []


def test_lmikit_never_imports_lmikit_cdk():
    for path in SDK.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "lmikit_cdk" for n in names), path


def _package(module: str) -> str:
    """``lmikit.deploy._apply`` -> ``lmikit.deploy``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, frozenset[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(_package(module), set()).update(
            _package(d) for d in deps if _package(d) != _package(module))
    return out


def test_package_graph_collapses_modules_to_their_package():
    graph = {"lmikit.deploy._a": {"lmikit.lora._registry"},
             "lmikit.lora._registry": {"lmikit.deploy._b"}, "lmikit.deploy._b": set()}
    assert cycles(package_graph(graph)) == [["lmikit.deploy", "lmikit.lora"]]


def test_deploy_lora_and_aws_form_no_package_cycle():
    """lmikit.aws is the shared AWS layer: lmikit.lora and lmikit.deploy both use it, and
    lmikit.lora does not import lmikit.deploy at all."""
    graph = package_graph(import_graph())
    assert graph["lmikit.aws"] <= {"lmikit.errors", "lmikit.names"}
    assert "lmikit.deploy" not in graph["lmikit.lora"]
    involved = {"lmikit.aws", "lmikit.lora", "lmikit.deploy"}
    assert [c for c in cycles(graph) if involved & set(c)] == []


def test_lmikit_packages_import_no_cycle_but_the_known_ones():
    """A root module counts as its own package; KNOWN_PACKAGE_CYCLES only ever shrinks."""
    assert cycles(package_graph(import_graph())) == KNOWN_PACKAGE_CYCLES


def _backward_imports(graph: dict[str, set[str]], stages: list[str]) -> set[tuple[str, str]]:
    """(package, package it imports) pairs where the second is not an earlier stage."""
    rank = {package: i for i, package in enumerate(stages)}
    return {(a, b) for a in stages for b in graph.get(a, set())
            if b in rank and rank[b] >= rank[a]}


def test_stage_order_check_sees_a_planted_backward_import():
    graph = {"lmikit.spec": {"lmikit.errors"}, "lmikit.render": {"lmikit.spec"},
             "lmikit.catalog": {"lmikit.render"}}
    stages = ["lmikit.catalog", "lmikit.spec", "lmikit.render"]
    assert _backward_imports(graph, stages) == {("lmikit.catalog", "lmikit.render")}


def test_packages_import_only_earlier_stages():
    """The package listing reads as the pipeline: a new package takes its place in STAGES,
    and no package reaches forward to a later stage."""
    packages = {f"lmikit.{p.parent.name}" for p in SDK.glob("*/__init__.py")}
    assert sorted(STAGES) == sorted(packages)
    assert _backward_imports(package_graph(import_graph()), STAGES) == KNOWN_BACKWARD


@pytest.mark.parametrize("doc", ["README.md", "docs/sdk.md"])
def test_the_package_map_in_the_docs_lists_the_stages_in_order(doc):
    """The map of sdk/lmikit a reader sees (``  name/   what it holds``) is STAGES."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    listed = re.findall(r"^  ([a-z]\w*)/ +\S", text, flags=re.MULTILINE)
    assert [f"lmikit.{name}" for name in listed] == STAGES


def _root_modules() -> set[str]:
    return {_module_name(path, SDK) for path in SDK.glob("*.py")}


def test_root_holds_at_most_ten_modules():
    """The root keeps the package face and what every stage shares; the rest lives in the
    package of the stage it serves."""
    assert "lmikit.sizing" in _root_modules()
    assert len(_root_modules()) <= ROOT_MODULES_AT_MOST


def test_root_modules_import_only_root_modules():
    """The root is the foundation every stage may use, so it depends on no stage."""
    graph = import_graph()
    root = _root_modules()
    assert "lmikit.errors" in graph["lmikit.artifact"]
    assert {m: sorted(graph[m] - root) for m in root if graph[m] - root} == {}


def _imported_modules(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a.b import c`` gives ``a.b`` and
    ``a.b.c``: c may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _private_reach(importer: str, imported: str) -> str | None:
    """The faced package whose private module ``imported`` is, when ``importer`` is not in
    that package."""
    parts = imported.split(".")
    package = ".".join(parts[:2])
    if (parts[0] == "lmikit" and package in FACED and len(parts) > 2
            and parts[2].startswith("_") and not importer.startswith(package + ".")
            and importer != package):
        return package
    return None


def test_no_module_imports_another_packages_private_module():
    """Across packages, names come from the package's face (its ``__init__``); only the
    package's own modules import its private modules."""
    bad = []
    for root in (SDK, CDK):
        for path in root.rglob("*.py"):
            importer = _module_name(path, root)
            bad += [f"{importer} -> {m}" for m in sorted(_imported_modules(path))
                    if _private_reach(importer, m)]
    assert bad == []


def test_private_import_rule_sees_a_planted_import():
    assert _private_reach("lmikit.cli.invoke", "lmikit.client._endpoint") == "lmikit.client"
    assert _private_reach("lmikit.client._openai", "lmikit.client._endpoint") is None
    assert _private_reach("lmikit.cli.invoke", "lmikit.client") is None
