from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import lmikit
from tests.conftest import ROOT

SDK = Path(lmikit.__file__).parent
FACES = sorted(".".join(("lmikit", *p.parent.relative_to(SDK).parts))
               for p in SDK.rglob("__init__.py"))
# packages whose __init__ is not a lazy face yet (shrinks to none)
NOT_YET_FACED = {"lmikit.aws", "lmikit.cli", "lmikit.formatters",
                 "lmikit.sim", "lmikit.testing"}


def test_all_is_sorted_and_complete():
    assert lmikit.__all__ == sorted(lmikit.__all__)
    assert set(lmikit.__all__) == set(lmikit._EXPORTS)
    for name in lmikit.__all__:
        assert getattr(lmikit, name) is not None


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> module of every import under the face's ``if TYPE_CHECKING:``."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    out |= {a.asname or a.name: stmt.module for a in stmt.names}
    return out


def _names_imported_from(face: str) -> dict[str, str]:
    """name -> first file, of every ``from <face> import name`` in sdk, cdk and benchmarks."""
    out: dict[str, str] = {}
    for folder in ("sdk", "cdk", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == face and not node.level:
                    for alias in node.names:
                        out.setdefault(alias.name, str(path.relative_to(ROOT)))
    return out


def test_the_planner_package_leaves_the_root_function_plan_alone():
    """lmikit.plan is the function whatever was imported first (a module of that name would
    replace it once imported)."""
    code = "import lmikit.planner, lmikit; print(callable(lmikit.plan), type(lmikit.plan).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "function"]


def test_not_yet_faced_lists_only_packages():
    assert NOT_YET_FACED <= set(FACES)


@pytest.mark.parametrize("face", [f for f in FACES if f not in NOT_YET_FACED])
def test_every_face_exports_a_sorted_complete_all(face):
    """A face's ``__all__`` is sorted and is its lazy table's names; the type checker sees
    each name where the face finds it; each resolves; whatever lmikit, lmikit_cdk or the
    benchmarks import from the face is in it."""
    module = importlib.import_module(face)
    exports: dict[str, str] = module._EXPORTS
    assert module.__all__ == sorted(module.__all__)
    assert set(module.__all__) == set(exports)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    assert _type_checking_imports(tree) == exports
    for name, where in exports.items():
        # its own private module (a root module, for the root), or another package's face
        own = where.rsplit(".", 1)[0] == face and (face == "lmikit" or "._" in where)
        unfaced = ".".join(where.split(".")[:2]) in NOT_YET_FACED
        assert own or where in FACES or unfaced, (name, where)
        assert getattr(module, name) is getattr(importlib.import_module(where), name)
    folder = SDK.joinpath(*face.split(".")[1:])
    missing = {name: path for name, path in _names_imported_from(face).items()
               if name not in module.__all__ and not name.startswith("_")
               and not (folder / f"{name}.py").exists()
               and not (folder / name / "__init__.py").exists()}
    assert missing == {}


def test_unknown_attribute_raises_attribute_error():
    try:
        lmikit.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_sdk_path_imports_no_cdk_or_boto3():
    code = ("import sys, lmikit, lmikit.cli, lmikit.planner._planner, lmikit.render._env, "
            "lmikit.render._lmcache, lmikit.render._sagemaker, lmikit.spec._loader;"
            "bad = [m for m in ('aws_cdk', 'jsii', 'boto3', 'sagemaker') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_container_shared_modules_use_stdlib_only():
    code = ("import sys; before = set(sys.modules);"
            "import lmikit.sizing, lmikit.catalog._instances, lmikit.catalog._models;"
            "third = {m.split('.')[0] for m in set(sys.modules) - before} - "
            "set(sys.stdlib_module_names) - {'lmikit'};"
            "print(sorted(third)); sys.exit(1 if third else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
