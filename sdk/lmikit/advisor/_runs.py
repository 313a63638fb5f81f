"""Candidates run on the simulator, through its public functions, and bounded without it.

The lower bound on a TTFT percentile is the planner's physics applied to each measured
request with a perfect cache: its time is at least ``request_overhead_s``, tokenizing the
prompt, and the prefill FLOPs (:func:`lmikit.sizing.prefill_flops`) of the tokens no cache
can hold (from the first chunk no other request sends, to the end; at least the last
token), at ``prefill_mfu`` of the GPUs' dense peak. Each request's TTFT is at least its
bound, so each percentile is at least the bounds' percentile (``tests`` hold it to the
simulator).

Candidates whose runs cannot differ are simulated once: the same copies (engine, pools,
tiers) behind the same router run the same events, whatever the instance's name and price
(:func:`run_key`); each is then summarized, and so priced, as its own deployment.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmikit import sim, sizing
from lmikit.advisor._search import Candidate, Figures
from lmikit.advisor._space import Deployments
from lmikit.catalog import Price, PriceTable
from lmikit.sim import RunResult, percentile, run, summarize

SCREEN_REQUESTS = 500  # requests a screening run keeps (whole sessions, every phase cut alike)
# engine figures a copy reads only through an LMCache tier (EngineModel.retrieve_s, store_s):
# without LMCache none of them; without a disk tier the NVMe's; without remote the network's
THROUGH_TIERS = {"host_to_gpu_gbps": "lmcache", "nvme_read_gbps": "disk_tokens",
                 "network_gbps": "remote"}
ROUTER_READS = {"prefix_aware": "copies_per_instance"}  # the fleet's layout, beyond its copies


def reduced(workload: sim.Workload, requests: int = SCREEN_REQUESTS) -> sim.Workload | None:
    """The same workload cut to about ``requests`` requests: the first sessions of each phase,
    in proportion (a long-doc-qa of fewer documents, a chat of fewer sessions, a trace's
    first requests); None when it is already about that small or a phase sends its requests
    in its own order."""
    total = len(workload.requests)
    if total <= 2 * requests or any(p.dispatcher is not None for p in workload.phases):
        return None
    share = requests / total
    phases = [dataclasses.replace(p, sessions=p.sessions[:max(1, math.ceil(len(p.sessions)
                                                                          * share))])
              for p in workload.phases]
    renumbered = []
    next_id = 0
    for p in phases:  # the loop indexes its arrays by request id: number them from 0 again
        sessions = []
        for s in p.sessions:
            sessions.append([dataclasses.replace(r, id=next_id + i) for i, r in enumerate(s)])
            next_id += len(s)
        renumbered.append(dataclasses.replace(p, sessions=sessions))
    return sim.Workload(workload.name, renumbered, workload.chunk_size, dict(workload.params))


def repeated_tokens(workload: sim.Workload) -> int:
    """Tokens of the full chunks sent by more than one request (each counted once)."""
    counts = Counter(k for r in workload.requests for k in r.keys)
    return sum(1 for n in counts.values() if n > 1) * workload.chunk_size


@dataclass(frozen=True)
class _Uncached:
    prompt_tokens: int
    new_tokens: int
    tokenized: bool


def uncached(workload: sim.Workload) -> list[_Uncached]:
    """Per measured request: its prompt, and the tokens no cache could have served it."""
    counts = Counter(k for r in workload.requests for k in r.keys)
    measured = [r for p in workload.phases if p.measured for s in p.sessions for r in s]
    out = []
    for r in measured:
        first_own = next((i for i, k in enumerate(r.keys) if counts[k] == 1), len(r.keys))
        new = max(1, r.prompt_tokens - first_own * workload.chunk_size)
        out.append(_Uncached(r.prompt_tokens, new, not r.pretokenized))
    return out


def ttft_bounds(dep: sim.Deployment, requests: list[_Uncached]) -> dict[str, float]:
    """Lower bounds on TTFT p50 and p90 of ``dep`` for these requests."""
    e = dep.engine
    c = e.coeff
    rate = e.tflops_per_gpu * 1e12 * e.tp * c.prefill_mfu
    times = sorted(
        c.request_overhead_s + (r.prompt_tokens * c.tokenize_s_per_token if r.tokenized else 0)
        + sizing.prefill_flops(e.active_params, e.layers, e.attention_dim, r.new_tokens,
                               r.prompt_tokens - r.new_tokens) / rate
        for r in requests)
    return {"ttft_p50_s": percentile(times, 0.5), "ttft_p90_s": percentile(times, 0.9)}


def run_key(dep: sim.Deployment, c: Candidate) -> Hashable:
    """What a run of ``c`` on ``dep`` depends on: its copies, less the engine figures no
    tier of theirs reads, and its router, less what that router does not read."""
    copy = dep.copies(c.kv_cache)[0]  # every copy is configured alike
    unread: dict[str, Any] = {name: 0.0 for name, used_by in THROUGH_TIERS.items()
              if not getattr(copy, used_by)}
    engine = dataclasses.replace(copy.engine, **unread)
    fleet = getattr(dep, ROUTER_READS[c.routing]) if c.routing in ROUTER_READS else None
    return (dataclasses.replace(copy, engine=engine), dep.instances, c.routing, fleet,
            dep.chunk_size, dep.max_batch_size, dep.prefix_length_bytes,
            dep.concurrency_threshold)


@dataclass
class Runner:
    """Runs candidates on the full workload or its reduced copy (``reduced`` None: the
    full one stands in); figures as ``lmikit simulate`` reports them. A run that another
    of ``candidates`` would repeat (:func:`run_key`) is kept for it."""

    deployments: Deployments
    workload: sim.Workload
    prices: dict[str, Price]
    table: PriceTable | None
    seed: int = 0
    candidates: Sequence[Candidate] = ()
    repeats: int = field(default=0, init=False)  # runs taken from another candidate's

    def __post_init__(self) -> None:
        self.small = reduced(self.workload)
        self.requests = uncached(self.workload)
        self._bounds: dict[tuple[str, int], dict[str, float]] = {}
        keys = Counter(run_key(self._planned(c), c) for c in set(self.candidates))
        self._shared = {k for k, n in keys.items() if n > 1}
        self._runs: dict[tuple[Hashable, bool], RunResult] = {}

    def _planned(self, c: Candidate) -> sim.Deployment:
        dep = self.deployments.of(c)
        if isinstance(dep, str):  # the space keeps only planned candidates
            raise ValueError(f"{c} was refused by the planner: {dep}")
        return dep

    def run(self, c: Candidate, full: bool) -> Figures:
        dep = self._planned(c)
        work = self.workload if full or self.small is None else self.small
        key = run_key(dep, c)
        out = self._runs.get((key, work is self.workload))
        if out is None:  # as lmikit.sim.simulate runs a scenario
            out = run(work, dep.copies(c.kv_cache),
                      dep.router(c.routing, random.Random(self.seed)),
                      random.Random(self.seed + 1))
            if key in self._shared:
                self._runs[key, work is self.workload] = out
        else:
            self.repeats += 1
        r = summarize(dep, work, out, c.routing, c.kv_cache, None, self.table)
        if r.usd_per_1k_tokens is None:  # the space keeps only priced types
            raise ValueError(f"{c} has no price: {r.price_source}")
        return Figures(ttft_p50_s=r.ttft_p50_s, ttft_p90_s=r.ttft_p90_s,
                       throughput_tokens_s=r.throughput_tokens_s,
                       usd_per_hour=round(self.prices[c.instance_type].usd * c.instances, 4),
                       usd_per_1k_tokens=r.usd_per_1k_tokens)

    def lower_bound(self, c: Candidate) -> dict[str, float]:
        key = (c.instance_type, c.tp)
        if key not in self._bounds:
            dep = self.deployments.of(c)
            self._bounds[key] = ({} if isinstance(dep, str)
                                 else ttft_bounds(dep, self.requests))
        return self._bounds[key]
