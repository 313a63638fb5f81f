"""PromQL for the container metrics detailed observability publishes (LMCache and vLLM).

One set of queries, used three ways: written into the CloudWatch dashboard (for Query
Studio), evaluated by the PromQL alarms, and drawn by the Grafana dashboard through a
Prometheus data source pointed at CloudWatch's PromQL endpoint. Series names and labels
come from :mod:`lmikit.metric_catalog` (``CONTAINER_SOURCE``, ``promql_name``).

>>> q = container_queries(selector("docqa"), kv_bytes_per_token=57344)
>>> q["lmcache_hit_rate"].expr.startswith("sum(rate(vllm_external_prefix_cache_hits_total{")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lmikit.metric_catalog import CONTAINER_SOURCE, promql_name

RATE_WINDOW = "5m"


@dataclass(frozen=True)
class PromQuery:
    key: str
    title: str
    expr: str
    unit: str
    legend: str = ""


def selector(endpoint: str, component: str | None = None) -> str:
    """Label matchers for one endpoint (and component); values may be Grafana variables."""
    parts = [f"'{CONTAINER_SOURCE.endpoint_label}'=\"{endpoint}\""]
    if component:
        parts.append(f"'{CONTAINER_SOURCE.component_label}'=~\"{component}\"")
    return ",".join(parts)


def _s(name: str, sel: str) -> str:
    return f"{promql_name(name)}{{{sel}}}"


def _rate(name: str, sel: str, window: str = RATE_WINDOW) -> str:
    return f"sum(rate({_s(name, sel)}[{window}]))"


def _quantile(q: float, histogram: str, sel: str) -> str:
    return (f"histogram_quantile({q}, sum by (le) "
            f"(rate({_s(histogram + '_bucket', sel)}[{RATE_WINDOW}])))")


def container_queries(sel: str, *, kv_bytes_per_token: int) -> dict[str, PromQuery]:
    """The dashboard's container-metric queries, keyed by a stable id."""
    hits_gpu = _rate("vllm:prefix_cache_hits_total", sel)
    # What LMCache supplied, as vLLM's scheduler counts it: once per request. LMCache's own
    # lmcache:num_hit_tokens is counted by every tensor-parallel rank (each runs its own
    # LMCacheEngine and logger), so summing it gives TP times the tokens.
    hits_ext = _rate("vllm:external_prefix_cache_hits_total", sel)
    # Remote tier: LMCache counts bytes read, not tokens; every rank reads its own shard, so
    # the sum over ranks / the plan's KV bytes per token is the copy's tokens (an estimate: it
    # assumes no KV-head replication across tensor-parallel ranks).
    hits_remote = f"({_rate('lmcache:num_remote_read_bytes_total', sel)} / {kv_bytes_per_token})"
    queries = [
        PromQuery("hit_tokens_gpu", "Hit tokens/s: GPU prefix cache", hits_gpu, "tokens/s",
                  "GPU prefix cache"),
        PromQuery("hit_tokens_local", "Hit tokens/s: LMCache CPU + disk",
                  f"{hits_ext} - {hits_remote}", "tokens/s", "LMCache CPU + disk"),
        PromQuery("hit_tokens_remote", "Hit tokens/s: LMCache remote (estimate)", hits_remote,
                  "tokens/s", "LMCache remote"),
        PromQuery("prompt_tokens", "Prompt tokens/s", _rate("vllm:prompt_tokens_total", sel),
                  "tokens/s", "prompt tokens"),
        # Over every prompt token vLLM served (vllm:prompt_tokens counts each request's
        # prompt once, at its first token: v1/metrics/stats.py), not over
        # vllm:prefix_cache_queries, which stays 0 when prefix caching is off
        # (KVCacheManager.get_computed_blocks returns before counting).
        PromQuery("prefix_hit_rate", "Prompt tokens served from any cache tier",
                  f"({hits_gpu} + {hits_ext}) / {_rate('vllm:prompt_tokens_total', sel)}",
                  "percentunit", "all tiers"),
        # vLLM's scheduler counts each request's tokens beyond the GPU prefix hit as a
        # connector query, hits and misses alike; LMCache's own num_requested_tokens counts
        # only requests whose lookup already found tokens, so it never sees a miss.
        PromQuery("lmcache_hit_rate", "LMCache hit rate (tokens the GPU prefix cache missed)",
                  f"{hits_ext} / {_rate('vllm:external_prefix_cache_queries_total', sel)}",
                  "percentunit", "LMCache"),
        # A mean, not a quantile: LMCache 0.5.6's retrieve_speed buckets end at 65,536
        # tokens/s, below a CPU-tier retrieve, and histogram_quantile cannot pass the top
        # finite bucket.
        PromQuery("retrieve_speed_mean", "LMCache retrieve speed (mean)",
                  f"{_rate('lmcache:retrieve_speed_sum', sel)} / "
                  f"{_rate('lmcache:retrieve_speed_count', sel)}", "tokens/s", "mean"),
        PromQuery("retrieve_time_p90", "LMCache time to retrieve p90",
                  _quantile(0.9, "lmcache:time_to_retrieve", sel), "s", "p90"),
        # Tier usage of the largest copy: every copy's TP ranks report one series each
        # (worker_id = the rank); the largest report per rank, summed over the ranks, is one
        # copy's worth (the CloudWatch panel's Maximum over copies of the copy's sum). A plain
        # sum would add every copy of the fleet. No remote usage: LMCache 0.5.6 never calls
        # LMCStatsMonitor.update_remote_cache_usage, so lmcache:remote_cache_usage stays 0.
        PromQuery("cache_usage_cpu", "LMCache CPU tier bytes (largest copy)",
                  f"sum(max by (worker_id) ({_s('lmcache:local_cache_usage', sel)}))", "bytes",
                  "CPU tier"),
        PromQuery("cache_usage_disk", "LMCache disk tier bytes (largest copy)",
                  f"sum(max by (worker_id) ({_s('lmcache:local_storage_usage', sel)}))",
                  "bytes", "disk tier"),
        PromQuery("evictions", "LMCache CPU evictions/s",
                  _rate("lmcache:local_cpu_evict_count_total", sel), "ops", "evictions/s"),
        PromQuery("gpu_kv_usage", "GPU KV cache in use",
                  f"avg({_s('vllm:kv_cache_usage_perc', sel)})", "percentunit", "GPU KV"),
        *(PromQuery(f"ttft_p{int(q * 100)}", f"Server TTFT p{int(q * 100)}",
                    _quantile(q, "vllm:time_to_first_token_seconds", sel), "s",
                    f"p{int(q * 100)}") for q in (0.5, 0.9, 0.99)),
        PromQuery("ttft_histogram", "Server TTFT histogram",
                  f"sum by (le) (rate({_s('vllm:time_to_first_token_seconds_bucket', sel)}"
                  f"[{RATE_WINDOW}]))", "s", "{{le}}"),
        PromQuery("tokens_per_s", "Tokens/s (prompt + generated)",
                  f"{_rate('vllm:prompt_tokens_total', sel)} + "
                  f"{_rate('vllm:generation_tokens_total', sel)}", "tokens/s", "tokens/s"),
        PromQuery("queue", "Requests waiting",
                  f"sum({_s('vllm:num_requests_waiting', sel)})", "short", "waiting"),
    ]
    return {q.key: q for q in queries}


_SERIES = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\{")


def series_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (``name{...}`` forms)."""
    return set(_SERIES.findall(expr)) - {"by"}
