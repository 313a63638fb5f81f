"""One model copy's vLLM and LMCache counters, moved the way the real servers move them, read
by the container's real EMF emitter.

Who counts what (vLLM v1 with LMCacheConnectorV1, LMCache 0.5.6):

* vLLM's scheduler, once per request (``Scheduler.schedule``): ``prefix_cache_queries`` +=
  prompt tokens and ``prefix_cache_hits`` += the GPU prefix hit; the KV connector is asked for
  every token beyond that hit, so ``external_prefix_cache_queries`` += prompt - GPU hit and
  ``external_prefix_cache_hits`` += what LMCache supplied. ``prompt_tokens`` += prompt, one
  TTFT observation.
* LMCache, on EVERY tensor-parallel rank (each rank runs its own ``LMCacheEngine`` and
  ``PrometheusLogger``, ``v1/cache_engine.py``): ``retrieve()`` runs only for requests whose
  lookup found tokens (``vllm_v1_adapter.py``: ``if request.load_spec is None or not
  request.load_spec.can_load: continue``), and counts them in both ``num_requested_tokens``
  and ``num_hit_tokens`` (``observability.py`` ``on_retrieve_request`` /
  ``on_retrieve_finished``). A rank reads its own shard of the remote bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

CONTAINER = Path(__file__).resolve().parents[2] / "container"
if str(CONTAINER) not in sys.path:
    sys.path.insert(0, str(CONTAINER))

from lmikit_runtime.emf import EmfConfig, Emitter, load_table  # noqa: E402

VLLM = ("model_name", "engine")
LMCACHE = ("model_name", "worker_id", "role", "served_model_name")  # observability.py labels
VLLM_COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                 "vllm:external_prefix_cache_queries", "vllm:external_prefix_cache_hits",
                 "vllm:prompt_tokens", "vllm:generation_tokens")
LMCACHE_COUNTERS = ("lmcache:num_requested_tokens", "lmcache:num_hit_tokens",
                    "lmcache:num_remote_read_bytes")


class ServingCopy:
    """One copy: a registry as the multiprocess collector merges its processes' files."""

    def __init__(self, *, tp: int = 1, kv_bytes_per_token: int = 131_072) -> None:
        self.tp = tp
        self.kv_bytes_per_token = kv_bytes_per_token
        registry = CollectorRegistry()
        self.vllm = {n: Counter(n, n, VLLM, registry=registry).labels("m", "0")
                     for n in VLLM_COUNTERS}
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "", VLLM, registry=registry,
                              buckets=(0.1, 0.5, 1.0, 5.0)).labels("m", "0")
        families = {n: Counter(n, n, LMCACHE, registry=registry) for n in LMCACHE_COUNTERS}
        self.ranks = [{n: c.labels("m", str(rank), "worker", "m") for n, c in families.items()}
                      for rank in range(tp)]
        # per-rank tier usage in bytes (gauges, summed over ranks: multiprocess_mode "sum"
        # in LMCache's PrometheusLogger) and CPU-tier evictions
        gauges = {n: Gauge(n, n, LMCACHE, registry=registry)
                  for n in ("lmcache:local_cache_usage", "lmcache:local_storage_usage")}
        evictions = Counter("lmcache:local_cpu_evict_count", "", LMCACHE, registry=registry)
        self.tiers = [{"cpu": gauges["lmcache:local_cache_usage"].labels(*labels),
                       "disk": gauges["lmcache:local_storage_usage"].labels(*labels),
                       "evictions": evictions.labels(*labels)}
                      for labels in (("m", str(rank), "worker", "m") for rank in range(tp))]
        self.emitter = Emitter(load_table(), EmfConfig(
            "LMIKit/Container", {"EndpointName": "e", "InferenceComponentName": "e-base"}),
            registry.collect)
        self.emitter.values()  # the emitter's first collection: its baseline

    def request(self, prompt: int, *, gpu_hit: int = 0, lmcache_hit: int = 0,
                remote_hit: int = 0, output: int = 100) -> None:
        """One request: ``gpu_hit`` prompt tokens from the GPU prefix cache, then
        ``lmcache_hit`` tokens beyond them from LMCache (``remote_hit`` of those from the
        remote tier), the rest computed."""
        v = self.vllm
        v["vllm:prefix_cache_queries"].inc(prompt)
        v["vllm:prefix_cache_hits"].inc(gpu_hit)
        v["vllm:external_prefix_cache_queries"].inc(prompt - gpu_hit)
        v["vllm:external_prefix_cache_hits"].inc(lmcache_hit)
        v["vllm:prompt_tokens"].inc(prompt)
        v["vllm:generation_tokens"].inc(output)
        self.ttft.observe(0.3)
        if lmcache_hit:  # can_load: only then does any rank retrieve
            for rank in self.ranks:
                rank["lmcache:num_requested_tokens"].inc(lmcache_hit)
                rank["lmcache:num_hit_tokens"].inc(lmcache_hit)
                rank["lmcache:num_remote_read_bytes"].inc(
                    remote_hit * self.kv_bytes_per_token // self.tp)

    def tier_state(self, *, cpu_bytes: int = 0, disk_bytes: int = 0, evictions: int = 0
                   ) -> None:
        """Each rank's share: ``cpu_bytes`` / ``disk_bytes`` in use in the copy's tiers (all
        ranks together), and ``evictions`` more from each rank's CPU tier."""
        for rank in self.tiers:
            rank["cpu"].set(cpu_bytes / self.tp)
            rank["disk"].set(disk_bytes / self.tp)
            rank["evictions"].inc(evictions)

    def line(self) -> dict[str, float]:
        """The values of this interval's EMF line."""
        return self.emitter.values()


def sums(lines: list[dict[str, float]]) -> dict[str, float | None]:
    """Each metric's Sum over EMF lines (copies and intervals of one period); a metric no
    line carries has no datapoint (None)."""
    out: dict[str, float | None] = {}
    for line in lines:
        for name, value in line.items():
            out[name] = (out.get(name) or 0.0) + value
    return out


def query_values(metrics: list[dict[str, Any]], lines: list[dict[str, float]]
                 ) -> dict[str, float | None]:
    """id -> the period's statistic for every MetricStat query (Sum or Maximum over lines),
    ready for :func:`tests.observability._metric_math.evaluate`."""
    total = sums(lines)
    out: dict[str, float | None] = {}
    for m in metrics:
        stat = m.get("MetricStat")
        if stat is None:
            continue
        name = stat["Metric"]["MetricName"]
        if stat["Stat"] == "Sum":
            out[m["Id"]] = total.get(name)
        elif stat["Stat"] == "Maximum":
            seen = [line[name] for line in lines if name in line]
            out[m["Id"]] = max(seen) if seen else None
        else:
            raise ValueError(f"statistic {stat['Stat']} is not modelled")
    return out
