"""A discrete-event simulator of a workload on an LMCache-enabled deployment.

Pure (no AWS, no terminal output), in private modules: engine costs (``_engine``), LMCache's
remote stores (``_stores``), cache tiers (``_tiers``), routers (``_routers``), requests and
workloads (``_work``, ``_workloads``), the event loop (``_loop``), scenarios and their results
(``_scenario``) and calibration from ``lmikit bench`` results (``_calibrate``). Names are
imported lazily, so the planner can use the engine model without loading the rest.

>>> from lmikit import sim
>>> d = sim.deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge", instances=2)
>>> w = sim.long_doc_qa(documents=4, document_tokens=2000, output_tokens=8, concurrency=2)
>>> r = sim.simulate(d, w, ["prefix_aware"], ["cpu"], seed=1)[0]
>>> r.hit_rate["gpu"] > 0.85  # the rest: the question and the partial last chunk
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "Coefficients": "lmikit.sim._coefficients",
    "CopyPoint": "lmikit.sim._gpu_calibration",
    "DecodePoint": "lmikit.sim._gpu_calibration",
    "Deployment": "lmikit.sim._scenario",
    "EngineModel": "lmikit.sim._engine",
    "Fit": "lmikit.sim._calibrate",
    "GpuCalibration": "lmikit.sim._gpu_calibration",
    "Hardware": "lmikit.sim._gpu_calibration",
    "KERNELS": "lmikit.sim._gpu_calibration",
    "LAYOUTS": "lmikit.sim._gpu_calibration",
    "LMCACHE_CHUNK_TOKENS": "lmikit.sim._gpu_calibration",
    "LMCACHE_TIERS": "lmikit.sim._loop",
    "LruTier": "lmikit.sim._tiers",
    "Phase": "lmikit.sim._work",
    "PrefillPoint": "lmikit.sim._gpu_calibration",
    "Request": "lmikit.sim._work",
    "Router": "lmikit.sim._routers",
    "RunResult": "lmikit.sim._loop",
    "STORES": "lmikit.sim._stores",
    "ScenarioResult": "lmikit.sim._scenario",
    "SuffixPoint": "lmikit.sim._gpu_calibration",
    "UnboundedTier": "lmikit.sim._tiers",
    "Workload": "lmikit.sim._work",
    "capped": "lmikit.sim._bench_format",
    "catalog_gpu_for": "lmikit.sim._gpu_calibration",
    "copy_gbps": "lmikit.sim._gpu_calibration",
    "deployment": "lmikit.sim._scenario",
    "deployment_from_spec": "lmikit.sim._scenario",
    "engine_for": "lmikit.sim._engine",
    "engine_notes": "lmikit.sim._scenario",
    "expected_outcomes": "lmikit.sim._calibrate",
    "fit": "lmikit.sim._calibrate",
    "from_dict": "lmikit.sim._gpu_calibration",
    "hbm_gbps": "lmikit.sim._coefficients",
    "kv_chunk_bytes": "lmikit.sim._gpu_calibration",
    "load_bench": "lmikit.sim._bench_format",
    "load_trace": "lmikit.sim._workloads",
    "long_doc_qa": "lmikit.sim._workloads",
    "make_router": "lmikit.sim._routers",
    "measured_outcome": "lmikit.sim._bench_format",
    "multi_turn_chat": "lmikit.sim._workloads",
    "outcome_fields": "lmikit.sim._bench_format",
    "percentile": "lmikit.sim._scenario",
    "rag": "lmikit.sim._workloads",
    "reading_notes": "lmikit.sim._scenario",
    "remote_read_gbps": "lmikit.sim._engine",
    "run": "lmikit.sim._loop",
    "simulate": "lmikit.sim._scenario",
    "single_request": "lmikit.sim._engine",
    "stable_id": "lmikit.sim._tiers",
    "store_for_url": "lmikit.sim._stores",
    "summarize": "lmikit.sim._scenario",
    "token_chunk_keys": "lmikit.sim._tiers",
}

__all__ = [
    "Coefficients",
    "CopyPoint",
    "DecodePoint",
    "Deployment",
    "EngineModel",
    "Fit",
    "GpuCalibration",
    "Hardware",
    "KERNELS",
    "LAYOUTS",
    "LMCACHE_CHUNK_TOKENS",
    "LMCACHE_TIERS",
    "LruTier",
    "Phase",
    "PrefillPoint",
    "Request",
    "Router",
    "RunResult",
    "STORES",
    "ScenarioResult",
    "SuffixPoint",
    "UnboundedTier",
    "Workload",
    "capped",
    "catalog_gpu_for",
    "copy_gbps",
    "deployment",
    "deployment_from_spec",
    "engine_for",
    "engine_notes",
    "expected_outcomes",
    "fit",
    "from_dict",
    "hbm_gbps",
    "kv_chunk_bytes",
    "load_bench",
    "load_trace",
    "long_doc_qa",
    "make_router",
    "measured_outcome",
    "multi_turn_chat",
    "outcome_fields",
    "percentile",
    "rag",
    "reading_notes",
    "remote_read_gbps",
    "run",
    "simulate",
    "single_request",
    "stable_id",
    "store_for_url",
    "summarize",
    "token_chunk_keys",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.sim._bench_format import capped, load_bench, measured_outcome, outcome_fields
    from lmikit.sim._calibrate import Fit, expected_outcomes, fit
    from lmikit.sim._coefficients import Coefficients, hbm_gbps
    from lmikit.sim._engine import EngineModel, engine_for, remote_read_gbps, single_request
    from lmikit.sim._gpu_calibration import (
        KERNELS,
        LAYOUTS,
        LMCACHE_CHUNK_TOKENS,
        CopyPoint,
        DecodePoint,
        GpuCalibration,
        Hardware,
        PrefillPoint,
        SuffixPoint,
        catalog_gpu_for,
        copy_gbps,
        from_dict,
        kv_chunk_bytes,
    )
    from lmikit.sim._loop import LMCACHE_TIERS, RunResult, run
    from lmikit.sim._routers import Router, make_router
    from lmikit.sim._scenario import (
        Deployment,
        ScenarioResult,
        deployment,
        deployment_from_spec,
        engine_notes,
        percentile,
        reading_notes,
        simulate,
        summarize,
    )
    from lmikit.sim._stores import STORES, store_for_url
    from lmikit.sim._tiers import LruTier, UnboundedTier, stable_id, token_chunk_keys
    from lmikit.sim._work import Phase, Request, Workload
    from lmikit.sim._workloads import load_trace, long_doc_qa, multi_turn_chat, rag
