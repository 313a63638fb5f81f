"""Builds lmikit's wheel with the simulator's hot path compiled to C by mypyc.

The metadata lives in ``pyproject.toml``; this file only adds the compiled modules. mypyc
(part of mypy: https://mypyc.readthedocs.io) turns type-annotated Python into a C extension
with the same behaviour, which runs ``benchmarks/simulate.py`` in about half the time
(docs/planner-model.md, "The simulator's speed").

- A wheel or a plain ``pip install .`` compiles ``COMPILED``. With ``LMIKIT_PURE_PYTHON=1``
  it installs them as Python; where compiling fails (no C compiler) it does too, and says
  so. The results are identical, only slower.
- An editable install (``pip install -e .``, what ``.ci/setup`` does) stays pure Python, so
  an edit to a module takes effect at once instead of being shadowed by a stale build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

# the modules one simulated request runs through (the workload builders, which check what
# users give them, are not: a compiled function refuses a wrong type before it can say which
# argument it was); the rest of lmikit stays Python
COMPILED = [
    "sdk/lmikit/sim/_engine.py",
    "sdk/lmikit/sim/_loop.py",
    "sdk/lmikit/sim/_routers.py",
    "sdk/lmikit/sim/_tiers.py",
    "sdk/lmikit/sim/_work.py",
]
PURE_ENV = "LMIKIT_PURE_PYTHON"
# build_ext's options a build sets (its command line, bdist_wheel, pip)
_KEPT = ("build_lib", "build_temp", "plat_name", "compiler", "debug", "force", "parallel")


class _MaybeBinary(Distribution):
    """Tells setuptools there may be extensions, so ``build_ext`` runs and the wheel is
    tagged for its platform; ``_Mypyc`` decides what, if anything, gets compiled."""

    compiled_nothing = False  # set when compiling failed: the build is pure Python after all

    def has_ext_modules(self) -> bool:
        return not (os.environ.get(PURE_ENV) or self.compiled_nothing)


class _Mypyc(build_ext):
    """Generates and compiles the C only when the build runs, not when setuptools merely
    finalizes this command (``egg_info`` and ``sdist`` do, to list its sources), and falls
    back to pure Python when that fails."""

    def run(self) -> None:
        # an editable install builds in place: a compiled module there would shadow later
        # edits of its source
        if self.editable_mode or self.inplace or os.environ.get(PURE_ENV):
            return
        try:
            from mypyc.build import mypycify

            # mypy's defaults, not pyproject's [tool.mypy], whose pydantic plugin the build
            # environment lacks; the rest of lmikit is analysed for its types but not
            # reported on (``mypy`` checks it with the plugin), the compiled modules are
            self.distribution.ext_modules = mypycify(
                ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent",
                 *COMPILED], group_name="lmikit_sim", opt_level="3")
            # finalize this command again, now with the extensions: reinitializing resets
            # it (finalizing twice fails), so keep where it was told to build
            kept = {name: getattr(self, name) for name in _KEPT}
            self.reinitialize_command("build_ext")
            for name, value in kept.items():
                setattr(self, name, value)
            self.ensure_finalized()
            super().run()
        except Exception as exc:  # no C compiler, or one mypyc cannot drive
            for path in self.get_outputs():
                Path(path).unlink(missing_ok=True)
            self.extensions = self.distribution.ext_modules = []
            _built_as_pure_python(self.distribution)
            print(f"lmikit: not compiling the simulator ({type(exc).__name__}: {exc}); "
                  "installing it as pure Python, which gives the same results more slowly",
                  file=sys.stderr)


def _built_as_pure_python(dist: Distribution) -> None:
    """After a failed compile, tag the wheel as what it now is, pure Python
    (``py3-none-any``): ``bdist_wheel`` chose a platform tag when it was set up, before the
    build ran, and only reads that choice back when it names and writes the wheel."""
    if isinstance(dist, _MaybeBinary):
        dist.compiled_nothing = True
    wheel = dist.command_obj.get("bdist_wheel")
    if wheel is not None:
        wheel.root_is_pure = True


setup(distclass=_MaybeBinary, cmdclass={"build_ext": _Mypyc})
