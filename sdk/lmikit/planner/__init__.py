"""The capacity plan: from a spec (or what-if arguments), the copies, tensor parallelism,
KV cache tiers, sizes, start-up time and cost an endpoint will have, and the LMI version
rules a spec must meet. The simulator's engine model supplies the predicted latencies.

>>> from lmikit.planner import plan_spec  # doctest: +SKIP
>>> plan_spec(spec).tier  # doctest: +SKIP
'cpu'

The root re-exports :func:`plan`, :func:`plan_spec` and :class:`Plan` (``lmikit.planner`` is the
function).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "Costs": "lmikit.planner._planner",
    "FASTER_LOADERS": "lmikit.planner._startup",
    "MARGIN": "lmikit.planner._startup",
    "MinVersion": "lmikit.planner._versions",
    "PIN_BYTES_PER_S": "lmikit.planner._startup",
    "Plan": "lmikit.planner._planner",
    "PlanInputs": "lmikit.planner._planner",
    "Predicted": "lmikit.planner._planner",
    "RATES": "lmikit.planner._startup",
    "StartupEstimate": "lmikit.planner._startup",
    "Volume": "lmikit.planner._startup",
    "WeightsSource": "lmikit.planner._startup",
    "check_adapter_sources": "lmikit.planner._planner",
    "check_lmi_version": "lmikit.planner._versions",
    "estimate_startup": "lmikit.planner._startup",
    "instance_volume": "lmikit.planner._startup",
    "isolates_base": "lmikit.planner._planner",
    "plan": "lmikit.planner._planner",
    "plan_spec": "lmikit.planner._planner",
    "startup_problem": "lmikit.planner._startup",
    "startup_warning": "lmikit.planner._startup",
    "tp_degrees": "lmikit.planner._fit",
    "weights_source": "lmikit.planner._startup",
}

__all__ = [
    "Costs",
    "FASTER_LOADERS",
    "MARGIN",
    "MinVersion",
    "PIN_BYTES_PER_S",
    "Plan",
    "PlanInputs",
    "Predicted",
    "RATES",
    "StartupEstimate",
    "Volume",
    "WeightsSource",
    "check_adapter_sources",
    "check_lmi_version",
    "estimate_startup",
    "instance_volume",
    "isolates_base",
    "plan",
    "plan_spec",
    "startup_problem",
    "startup_warning",
    "tp_degrees",
    "weights_source",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.planner._fit import tp_degrees
    from lmikit.planner._planner import (
        Costs,
        Plan,
        PlanInputs,
        Predicted,
        check_adapter_sources,
        isolates_base,
        plan,
        plan_spec,
    )
    from lmikit.planner._startup import (
        FASTER_LOADERS,
        MARGIN,
        PIN_BYTES_PER_S,
        RATES,
        StartupEstimate,
        Volume,
        WeightsSource,
        estimate_startup,
        instance_volume,
        startup_problem,
        startup_warning,
        weights_source,
    )
    from lmikit.planner._versions import MinVersion, check_lmi_version
