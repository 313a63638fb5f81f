"""How often a spec's walk through ``lmikit validate`` climbs back to an earlier stage.

Layers, in pipeline order (a module's layer is its package's). The deciding layer is the
planner with what it consults (the catalog's facts, the simulator's engine model) and the
resolve step, which settles every derived decision from (spec, plan) once:

    spec  <  catalog = sim = planner = resolve  <  render  <  lora  <  accept  <  cli

A *climb* is a call from a module of layer A into a function of an earlier layer B: the walk
goes back to a layer it had already left. Not climbs: calls made by the orchestrators
(accept, cli), which are the walk itself; calls into the foundation (the root modules and
``formatters``), which every stage may use; reads of an immutable value handed down the
pipeline (a method or property of a frozen dataclass or a pydantic model, such as
``spec.lora_enabled`` or ``plan.uses_lmcache``). The figure is the number of distinct
(caller module, callee function) pairs.

Run it on its own: ``python -m tests.unit.layer_walk [SPEC ...]`` (from the repository root).
"""

from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

RANK = {"spec": 0, "catalog": 1, "sim": 1, "planner": 1, "resolve": 1, "render": 2,
        "lora": 3, "accept": 4, "cli": 5}
FOUNDATION = {"lmikit", "lmikit.errors", "lmikit.names", "lmikit.sizing",
              "lmikit.metric_catalog", "lmikit.artifact", "lmikit._files", "lmikit._extras"}
PACKAGES = {  # package -> stage; None: not on the validate walk, a call into it is not counted
    "lmikit.catalog": "catalog", "lmikit.spec": "spec", "lmikit.sim": "sim",
    "lmikit.planner": "planner", "lmikit.resolve": "resolve", "lmikit.render": "render",
    "lmikit.lora": "lora", "lmikit.accept": "accept", "lmikit.cli": "cli",
    "lmikit.formatters": None, "lmikit.aws": None, "lmikit.deploy": None,
    "lmikit.client": None, "lmikit.bench": None, "lmikit.testing": None,
    "lmikit.weights": None,
}

Climbs = dict[tuple[str, str], set[str]]


def stage_of(module: str) -> str | None:
    """The stage of an lmikit module; None for the foundation and modules off the walk."""
    if module in FOUNDATION or not module.startswith("lmikit."):
        return None
    for package, stage in PACKAGES.items():
        if module == package or module.startswith(package + "."):
            return stage
    raise KeyError(f"{module}: no stage; add its package to PACKAGES")


def _is_value_read(frame: FrameType) -> bool:
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return False
    owner = frame.f_locals.get("self")
    if dataclasses.is_dataclass(owner) and not isinstance(owner, type):
        return bool(owner.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    from pydantic import BaseModel

    return isinstance(owner, BaseModel)


def trace(fn: Callable[..., object], *args: object) -> tuple[list[str], Climbs]:
    """Run ``fn(*args)`` under a profiler: (stage modules entered, in order; every climb as
    {(caller module, callee module): callee functions})."""
    entered: dict[str, None] = {}
    climbs: Climbs = defaultdict(set)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("lmikit") or frame.f_code.co_name == "<module>":
            return
        if stage_of(callee) not in (None, "accept", "cli"):
            entered.setdefault(callee, None)
        back = frame.f_back  # a call made through a library (pydantic, functools) is its
        while back is not None and not back.f_globals.get("__name__", "").startswith("lmikit"):
            back = back.f_back  # nearest lmikit caller's
        if back is None:
            return
        caller = back.f_globals["__name__"]
        to, since = stage_of(callee), stage_of(caller)
        if to is None or since is None or since in ("accept", "cli"):
            return
        if RANK[to] < RANK[since] and not _is_value_read(frame):
            climbs[(caller, callee)].add(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(previous)
    return list(entered), dict(climbs)


def walk(spec_path: str | Path) -> tuple[list[str], Climbs]:
    """The walk of ``lmikit validate SPEC``: every target, as the CLI renders them."""
    from lmikit.accept._accept import TARGETS, accept_spec

    return trace(accept_spec, spec_path, TARGETS)


def count(climbs: Climbs) -> int:
    return sum(len(names) for names in climbs.values())


def listing(climbs: Climbs) -> str:
    return "\n".join(f"{caller} -> {callee}: {', '.join(sorted(names))}"
                     for (caller, callee), names in sorted(climbs.items()))


def main(paths: list[str]) -> int:
    worst = 0
    for path in paths or sorted(str(p) for p in Path("examples").glob("*.yaml")):
        entered, climbs = walk(path)
        worst = max(worst, count(climbs))
        print(f"{path}: {len(entered)} modules entered, {count(climbs)} climbs")
        for line in listing(climbs).splitlines():
            print("    " + line)
    print("worst:", worst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
