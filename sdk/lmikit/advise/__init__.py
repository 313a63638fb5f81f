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

from lmikit.advise._advise import Advice, advise
from lmikit.advise._search import Candidate, Entry, Figures, SearchResult, pareto, search
from lmikit.advise._slo import Slo, parse_slo, parse_slos

__all__ = [
    "Advice",
    "Candidate",
    "Entry",
    "Figures",
    "SearchResult",
    "Slo",
    "advise",
    "pareto",
    "parse_slo",
    "parse_slos",
    "search",
]
