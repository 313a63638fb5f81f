"""A discrete-event simulator of a workload on an LMCache-enabled deployment.

Pure (no AWS, no terminal output): engine costs (:mod:`lmikit.sim.engine`), LMCache's
remote stores (:mod:`lmikit.sim.stores`), cache tiers (:mod:`lmikit.sim.tiers`), routers
(:mod:`lmikit.sim.routers`), workloads (:mod:`lmikit.sim.workloads`, made of
:mod:`lmikit.sim.work`'s requests), the event loop (:mod:`lmikit.sim.loop`), scenarios and
their results (:mod:`lmikit.sim.scenario`) and calibration from ``lmikit bench`` results
(:mod:`lmikit.sim.calibrate`). Names are imported lazily, so ``lmikit.plan`` can use the
engine model without loading the rest.

>>> from lmikit import sim
>>> d = sim.deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge", instances=2)
>>> w = sim.long_doc_qa(documents=4, document_tokens=2000, output_tokens=8, concurrency=2)
>>> r = sim.simulate(d, w, ["prefix_aware"], ["cpu"], seed=1)[0]
>>> r.hit_rate["gpu"] > 0.85  # the rest: the question and the partial last chunk
True
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Coefficients": "lmikit.sim.coefficients",
    "Deployment": "lmikit.sim.scenario",
    "STORES": "lmikit.sim.stores",
    "ScenarioResult": "lmikit.sim.scenario",
    "Workload": "lmikit.sim.workloads",
    "deployment": "lmikit.sim.scenario",
    "deployment_from_spec": "lmikit.sim.scenario",
    "engine_notes": "lmikit.sim.scenario",
    "fit": "lmikit.sim.calibrate",
    "load_bench": "lmikit.sim.calibrate",
    "load_trace": "lmikit.sim.workloads",
    "long_doc_qa": "lmikit.sim.workloads",
    "multi_turn_chat": "lmikit.sim.workloads",
    "rag": "lmikit.sim.workloads",
    "reading_notes": "lmikit.sim.scenario",
    "simulate": "lmikit.sim.scenario",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lmikit.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
