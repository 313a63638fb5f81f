"""What ``pip install lmikit`` installs: every module and data file of the checkout, and the CLI.

The tests run on an editable install, which imports straight from the checkout, so a package
the wheel's configuration leaves out passes every other test and is missing only for users
(``lmikit.cli`` and ``lmikit.aws`` once were: the ``lmikit`` command of a wheel could not
start). This builds the packages the way a wheel does (setuptools' ``build_py``, as Python:
``LMIKIT_PURE_PYTHON``) and compares what it holds with the files in ``sdk/`` and ``cdk/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sdk/lmikit", "cdk/lmikit_cdk")
# in the checkout, not for users: the catalog folder's notes on where each file comes from
NOT_SHIPPED = {"lmikit/catalog/models/README.md"}
BUILD_OUTPUTS = ("__pycache__", "*.pyc", "*.so", "*.pyd", "*.egg-info")


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
            and not p.name.endswith((".pyc", ".so", ".pyd"))}


def _copy_project(to: Path) -> None:
    for folder in PACKAGES:
        shutil.copytree(ROOT / folder, to / folder,
                        ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, to / name)


def test_a_wheel_holds_every_module_and_data_file_and_its_command_starts(
        tmp_path: Path) -> None:
    _copy_project(tmp_path)
    lib = tmp_path / "lib"
    built = subprocess.run(
        [sys.executable, "setup.py", "build_py", "--build-lib", str(lib)], cwd=tmp_path,
        env={**os.environ, "LMIKIT_PURE_PYTHON": "1"}, capture_output=True, text=True,
        timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-4000:]
    # nothing setuptools says will stop working: a folder it would ship only as data, a
    # license written as a table
    assert "deprecated" not in built.stderr, built.stderr[-4000:]

    checkout = set()
    for folder in PACKAGES:
        top = Path(folder).name
        checkout |= {f"{top}/{f}" for f in _files(tmp_path / folder)}
    assert checkout - NOT_SHIPPED == _files(lib)

    # the console script's module is among them, and starts from the built tree alone
    import tomllib  # Python 3.11 on; CI runs 3.11

    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = script["lmikit"].partition(":")
    started = subprocess.run(
        [sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(lib)!r}); import {module} as m; "
         f"print(m.__file__); sys.argv = ['lmikit', '--version']; m.{function}()"],
        capture_output=True, text=True, timeout=300, check=False)
    assert started.returncode == 0, started.stderr[-4000:]
    assert started.stdout.startswith(str(lib)), started.stdout


def test_a_wheel_built_where_compiling_fails_is_tagged_pure_python(tmp_path: Path) -> None:
    """Without a C compiler setup.py installs the simulator as Python; the wheel must then
    say so (``py3-none-any``), not carry the platform tag of a binary it does not hold."""
    project = tmp_path / "project"
    _copy_project(project)
    # a mypyc whose compile fails, as it does where there is no C compiler
    (tmp_path / "nocc" / "mypyc").mkdir(parents=True)
    (tmp_path / "nocc" / "mypyc" / "__init__.py").write_text("")
    (tmp_path / "nocc" / "mypyc" / "build.py").write_text(
        "def mypycify(*args, **kwargs):\n    raise RuntimeError('no C compiler here')\n")
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "bdist_wheel", "--dist-dir", str(tmp_path / "dist")],
        cwd=project, env={**os.environ, "PYTHONPATH": str(tmp_path / "nocc")},
        capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-4000:]
    assert "not compiling the simulator (RuntimeError: no C compiler here)" in built.stderr
    wheels = [p.name for p in (tmp_path / "dist").iterdir()]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl"), wheels
    import zipfile

    with zipfile.ZipFile(tmp_path / "dist" / wheels[0]) as whl:
        names = whl.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        assert "Root-Is-Purelib: true" in whl.read(info).decode()
        assert "lmikit/sim/_loop.py" in names
        assert not [n for n in names if n.endswith((".so", ".pyd"))]
