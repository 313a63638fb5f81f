"""``lmikit advise``: the cheapest deployment that meets a latency target, for a workload.

It searches instance type x tensor-parallel degree x copies per instance x instance count x
KV-cache mode and size x routing, prunes what the planner refuses and what a lower bound on
TTFT already rules out, screens the rest on the simulator at a reduced request count,
refines the best at the full count, and names the cheapest that meets every objective.

>>> from lmikit import sim
>>> work = sim.long_doc_qa(documents=4, document_tokens=2000, output_tokens=8, concurrency=2)
>>> a = advise(work, "ttft_p90_s=1.0", model="Qwen/Qwen2.5-1.5B-Instruct",
...            instance_types=["ml.g6.xlarge"], max_instances=1)
>>> a.best.candidate.instance_type, a.meets_slo
('ml.g6.xlarge', True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "Advice": "lmikit.advisor._advise",
    "Candidate": "lmikit.advisor._search",
    "Deployments": "lmikit.advisor._space",
    "Entry": "lmikit.advisor._search",
    "Figures": "lmikit.advisor._search",
    "Runner": "lmikit.advisor._runs",
    "SearchResult": "lmikit.advisor._search",
    "Settings": "lmikit.advisor._space",
    "Slo": "lmikit.advisor._slo",
    "advise": "lmikit.advisor._advise",
    "build_space": "lmikit.advisor._space",
    "pareto": "lmikit.advisor._search",
    "parse_slo": "lmikit.advisor._slo",
    "parse_slos": "lmikit.advisor._slo",
    "repeated_tokens": "lmikit.advisor._runs",
    "search": "lmikit.advisor._search",
}

__all__ = [
    "Advice",
    "Candidate",
    "Deployments",
    "Entry",
    "Figures",
    "Runner",
    "SearchResult",
    "Settings",
    "Slo",
    "advise",
    "build_space",
    "pareto",
    "parse_slo",
    "parse_slos",
    "repeated_tokens",
    "search",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.advisor._advise import Advice, advise
    from lmikit.advisor._runs import Runner, repeated_tokens
    from lmikit.advisor._search import Candidate, Entry, Figures, SearchResult, pareto, search
    from lmikit.advisor._slo import Slo, parse_slo, parse_slos
    from lmikit.advisor._space import Deployments, Settings, build_space
