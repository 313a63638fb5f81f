"""The package's module graph has no import cycles, lazy (function-level) imports included.

A cycle hidden behind a function-level import still couples two modules both ways (the
renderers once did this: ``render.env`` imported ``render.sagemaker`` inside a function
because ``render.sagemaker`` imported ``render.env``). Names several modules share live in
``lmikit.names``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import lmikit

SDK = Path(lmikit.__file__).parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # parsed once per test process; callers only read the graph
def import_graph(root: Path = SDK) -> dict[str, set[str]]:
    """module -> lmikit modules it imports anywhere in its body (the root package's lazy
    re-exports excepted: ``lmikit/__init__`` imports everything on attribute access)."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        if name == "lmikit":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                           else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name].update(t for t in targets if t in modules and t not in (name, "lmikit"))
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


def test_lmikit_modules_import_no_cycle():
    graph = import_graph()
    assert "lmikit.render.env" in graph and "lmikit.names" in graph["lmikit.render.env"]
    assert cycles(graph) == []


def _package(module: str) -> str:
    """``lmikit.deploy._apply`` -> ``lmikit.deploy``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(_package(module), set()).update(
            _package(d) for d in deps if _package(d) != _package(module))
    return out


def test_package_graph_collapses_modules_to_their_package():
    graph = {"lmikit.deploy._a": {"lmikit.adapters"}, "lmikit.adapters": {"lmikit.deploy._b"},
             "lmikit.deploy._b": set()}
    assert cycles(package_graph(graph)) == [["lmikit.adapters", "lmikit.deploy"]]


def test_deploy_adapters_and_aws_form_no_package_cycle():
    """lmikit.aws is the shared AWS layer: lmikit.adapters and lmikit.deploy both use it, and
    lmikit.adapters does not import lmikit.deploy at all."""
    graph = package_graph(import_graph())
    assert graph["lmikit.aws"] <= {"lmikit.errors", "lmikit.names"}
    assert "lmikit.deploy" not in graph["lmikit.adapters"]
    involved = {"lmikit.aws", "lmikit.adapters", "lmikit.deploy"}
    assert [c for c in cycles(graph) if involved & set(c)] == []


def test_adapters_and_deploy_import_no_private_module_of_each_other():
    graph = import_graph()
    for module, deps in graph.items():
        for dep in deps:
            for mine, theirs in (("lmikit.adapters", "lmikit.deploy."),
                                 ("lmikit.deploy", "lmikit.adapters.")):
                if _package(module) == mine and dep.startswith(theirs):
                    assert not dep.rsplit(".", 1)[1].startswith("_"), f"{module} -> {dep}"
