"""The CloudWatch dashboard of one deployment: a pure function of (spec, plan).

The same body goes to ``PutDashboard`` (:func:`lmikit.deploy.deploy_dashboard`), to
CDK (``cloudwatch.CfnDashboard(dashboard_body=json.dumps(body))``) and to
``lmikit render SPEC --target cloudwatch``.

Classic metric widgets cover what SageMaker publishes to AWS/SageMaker,
/aws/sagemaker/InferenceComponents and /aws/sagemaker/Endpoints, plus the client TTFT
namespace when the spec opts in. The container's LMCache/vLLM metrics reach CloudWatch twice:
through detailed observability as OTLP metrics that only PromQL can read, and as classic
metrics in ``LMIKit/Container``, which CloudWatch Logs extracts from the Embedded Metric
Format lines the container's emitter prints (``lmikit_runtime.emf``; the metric list is
:data:`lmikit.metric_catalog.CONTAINER_EMF_METRICS`). The cache panels plot the latter; one
small text widget keeps the PromQL for Query Studio. Only lmikit's image publishes either
(``image="lmikit"`` with ``observability.detailed_metrics``); for the stock image, the
default, the cache panels are left out and the summary says why.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> body = dashboard_body(spec, plan_spec(spec), image="lmikit")
>>> body["widgets"][0]["type"]
'text'
"""

from __future__ import annotations

import json
from typing import Any

from lmikit import metric_catalog as mc
from lmikit.catalog import ImageKind
from lmikit.names import VARIANT_NAME, adapter_component_name, base_component_name
from lmikit.planner import Plan
from lmikit.render._alarms import (
    GIB,
    container_dimensions,
    default_p90_model_latency_ms,
    emf_period,
)
from lmikit.render._promql import PromQuery, container_queries, selector
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

PERIOD = 60
WIDTH = 24
LATENCY_STATS = ("p50", "p90", "p99")


def dashboard_name(spec: DeploymentSpec) -> str:
    """``<name>-lmikit``: letters, digits, ``-`` and ``_`` only, as PutDashboard requires."""
    return f"{spec.name}-lmikit"


def put_dashboard_kwargs(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                         resolved: Resolved | None = None) -> dict[str, Any]:
    """Keyword arguments for ``cloudwatch.put_dashboard``."""
    body = dashboard_body(spec, plan, image=image, resolved=resolved)
    return {"DashboardName": dashboard_name(spec),
            "DashboardBody": json.dumps(body, sort_keys=True, separators=(",", ":"))}


class _Grid:
    """Places widgets left to right in rows of 24 units."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.widgets: list[dict[str, Any]] = []

    def add(self, kind: str, width: int, height: int, properties: dict[str, Any]) -> None:
        if self.x + width > WIDTH:
            self.x, self.y, self.row_height = 0, self.y + self.row_height, 0
        self.widgets.append({"type": kind, "x": self.x, "y": self.y, "width": width,
                             "height": height, "properties": properties})
        self.x += width
        self.row_height = max(self.row_height, height)

    def newline(self) -> None:
        if self.x:
            self.x, self.y, self.row_height = 0, self.y + self.row_height, 0


def _dims(dimensions: dict[str, str]) -> list[str]:
    out: list[str] = []
    for name, value in dimensions.items():
        out += [name, value]
    return out


def _metric(ns: str, name: str, dimensions: dict[str, str], **opts: Any) -> list[Any]:
    return [ns, name, *_dims(dimensions), opts]


def _graph(title: str, region: str, metrics: list[list[Any]], **extra: Any) -> dict[str, Any]:
    props: dict[str, Any] = {"title": title, "region": region, "view": "timeSeries",
                             "stacked": False, "period": PERIOD, "metrics": metrics}
    props.update(extra)
    return props


def _summary(spec: DeploymentSpec, plan: Plan, absent: str | None) -> str:
    p = plan.predicted
    hit = p.ttft_hit_s.get("cpu") if plan.tier != "none" else p.ttft_hit_s.get("gpu")
    lines = [
        f"# {spec.name}: {plan.model_id} on {plan.instance_type}",
        f"Plan: KV tier **{plan.tier}**, {plan.copies} copy(ies) per instance, "
        f"{spec.instance.min_count}-{spec.instance.max_count} instances. "
        f"Predicted TTFT for a {spec.workload.typical_request_tokens}-token request: "
        f"miss {p.ttft_miss_s:.3f} s, hit {hit if hit is not None else 'n/a'} s.",
        "SageMaker publishes no TTFT metric: server TTFT comes from vLLM through the "
        "container's EMF lines (`LMIKit/Container`"
        + (", below)" if absent is None else ", absent here)")
        + ", client TTFT from `observability.client_ttft_metrics`.",
        "Copy count: derived as Invocations / InvocationsPerCopy (blank without traffic). "
        "Instance count is not a classic metric; see SageMaker AI Insights.",
    ]
    if absent is not None:
        lines.append(f"**No cache panels or cache alarms:** {absent}.")
    return "\n\n".join(lines)


def _promql_text(title: str, queries: list[PromQuery], note: str) -> dict[str, Any]:
    rows = "\n".join(f"| {q.title} | `{q.expr}` |" for q in queries)
    return {"markdown": f"### {title}\n\n{note}\n\n| Panel | PromQL (Query Studio) |\n"
                        f"|---|---|\n{rows}"}


def dashboard_body(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                   resolved: Resolved | None = None) -> dict[str, Any]:
    """The dashboard body (a dict; ``json.dumps`` it for PutDashboard / CfnDashboard).
    ``image``: the image the base component runs (default ``stock``); the cache panels need
    lmikit's, the only one that publishes the container's vLLM and LMCache metrics."""
    absent = resolved_for(spec, plan, image, resolved).cache_metrics_absent_reason
    region = spec.region
    ev = {"EndpointName": spec.name, "VariantName": VARIANT_NAME}
    base = base_component_name(spec.name)
    components = [base] + [adapter_component_name(spec.name, a.name) for a in spec.adapters]
    g = _Grid()
    g.add("text", WIDTH, 4 if absent is None else 5,
          {"markdown": _summary(spec, plan, absent)})

    # Traffic and errors.
    g.add("metric", 8, 6, _graph("Invocations", region, [
        _metric(mc.NS_SAGEMAKER, "Invocations", ev, stat="Sum", label="endpoint"),
        *(_metric(mc.NS_SAGEMAKER, "Invocations", {"InferenceComponentName": c}, stat="Sum",
                  label=c) for c in components),
    ]))
    g.add("metric", 8, 6, _graph("Errors", region, [
        _metric(mc.NS_SAGEMAKER, "Invocation4XXErrors", ev, stat="Sum", label="4xx"),
        _metric(mc.NS_SAGEMAKER, "Invocation5XXErrors", ev, stat="Sum", label="5xx"),
        _metric(mc.NS_SAGEMAKER, "InvocationModelErrors", ev, stat="Sum", label="model errors"),
    ]))
    g.add("metric", 8, 6, _graph("No-capacity failures (scale from zero)", region, [
        _metric(mc.NS_SAGEMAKER, "NoCapacityInvocationFailures",
                {"InferenceComponentName": base}, stat="Sum", label=base),
    ]))

    # Latency.
    limit_us = 1000 * (spec.observability.alarms.p90_model_latency_ms
                       or default_p90_model_latency_ms(spec, plan))
    g.add("metric", 12, 6, _graph("Model latency (microseconds)", region, [
        _metric(mc.NS_SAGEMAKER, "ModelLatency", ev, stat=s, label=s) for s in LATENCY_STATS
    ], annotations={"horizontal": [{"label": "p90 alarm", "value": limit_us}]}))
    g.add("metric", 12, 6, _graph("Overhead latency (microseconds)", region, [
        _metric(mc.NS_SAGEMAKER, "OverheadLatency", ev, stat=s, label=s)
        for s in LATENCY_STATS
    ]))

    # Capacity: concurrency and copies per component.
    g.add("metric", 12, 6, _graph("Concurrent requests per copy", region, [
        _metric(mc.NS_SAGEMAKER, "ConcurrentRequestsPerCopy", {"InferenceComponentName": c},
                stat="Maximum", label=c) for c in components
    ]))
    copies: list[list[Any]] = []
    for i, c in enumerate(components):
        dims = {"InferenceComponentName": c}
        copies += [
            _metric(mc.NS_SAGEMAKER, "Invocations", dims, stat="Sum", id=f"inv{i}",
                    visible=False),
            _metric(mc.NS_SAGEMAKER, "InvocationsPerCopy", dims, stat="Sum", id=f"ipc{i}",
                    visible=False),
        ]
    copy_exprs: list[list[Any]] = [[{"expression": f"inv{i} / ipc{i}", "id": f"copies{i}",
                                     "label": f"{c} copies"}] for i, c in enumerate(components)]
    g.add("metric", 12, 6, _graph("Model copies (derived)", region, copy_exprs + copies))

    # GPU and host utilization.
    for title, metric in (("GPU utilization per component", "GPUUtilizationNormalized"),
                          ("GPU memory per component", "GPUMemoryUtilizationNormalized"),
                          ("Memory per component", "MemoryUtilizationNormalized")):
        g.add("metric", 8, 6, _graph(title, region, [
            _metric(mc.NS_INFERENCE_COMPONENTS, metric, {"InferenceComponentName": base},
                    stat="Average", label=base)], yAxis={"left": {"min": 0}}))
    g.add("metric", 12, 6, _graph("Hosts: CPU, memory (CPU tier), disk (disk tier)", region, [
        _metric(mc.NS_ENDPOINTS, n, ev, stat="Average", label=n)
        for n in ("CPUUtilization", "MemoryUtilization", "DiskUtilization")
    ]))
    g.add("metric", 12, 6, _graph("Hosts: GPU and GPU memory", region, [
        _metric(mc.NS_ENDPOINTS, n, ev, stat="Average", label=n)
        for n in ("GPUUtilization", "GPUMemoryUtilization")
    ]))

    if spec.observability.client_ttft_metrics:
        cd = {"EndpointName": spec.name}
        g.add("metric", 12, 6, _graph("Client TTFT (seconds)", region, [
            _metric(mc.CLIENT_NAMESPACE, "TimeToFirstToken", cd, stat=s, label=s)
            for s in LATENCY_STATS]))
        g.add("metric", 12, 6, _graph("Client decode tokens/s", region, [
            _metric(mc.CLIENT_NAMESPACE, "OutputTokensPerSecond", cd, stat=s, label=s)
            for s in ("p10", "p50")]))

    if absent is None:
        _container_panels(g, spec, plan)
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": g.widgets}


def _container_panels(g: _Grid, spec: DeploymentSpec, plan: Plan) -> None:
    """The cache panels: ``LMIKit/Container`` metrics from the container's EMF lines."""
    region = spec.region
    cd = container_dimensions(spec)
    period = emf_period(spec)
    ns = mc.CONTAINER_NAMESPACE

    def m(name: str, stat: str, **opts: Any) -> list[Any]:
        return _metric(ns, name, cd, stat=stat, **opts)

    def graph(title: str, metrics: list[list[Any]], **extra: Any) -> None:
        g.add("metric", 8, 6, _graph(title, region, metrics, period=period, **extra))

    g.newline()
    # Hit tokens per second by tier, each counted once per request so the bands add up to
    # prompt tokens: vLLM's scheduler counts the GPU prefix hit and what LMCache supplied
    # beyond it. LMCache's own num_hit_tokens is counted by every tensor-parallel rank (each
    # runs its own LMCacheEngine), TP times too high, so it is not plotted. LMCache does not
    # split its hits between the CPU and disk tiers; remote hits are estimated from bytes read
    # (every rank reads its shard: the sum is the copy's) / the plan's KV bytes per token.
    hits: list[list[Any]] = [[{"expression": "gpu / PERIOD(gpu)", "id": "gpus",
                               "label": "GPU prefix cache"}]]
    hidden = [m("GpuPrefixCacheHitTokens", "Sum", id="gpu", visible=False)]
    if plan.uses_lmcache:
        remote = f"FILL(rbytes, 0) / {plan.kv_bytes_per_token}"
        hits.append([{"expression": f"(lmc - {remote}) / PERIOD(lmc)", "id": "locals",
                      "label": "LMCache CPU + disk"}])
        hidden.append(m("ExternalPrefixCacheHitTokens", "Sum", id="lmc", visible=False))
        if plan.tier == "remote":
            hits.append([{"expression": f"{remote} / PERIOD(lmc)", "id": "remotes",
                          "label": "LMCache remote (estimate)"}])
        hidden.append(m("LMCacheRemoteReadBytes", "Sum", id="rbytes", visible=False))
    graph("KV cache hit tokens/s by tier", hits + hidden, stacked=True)
    # Hit rates from token sums over every copy. vLLM's scheduler counts each request once:
    # GPU prefix hits, then the tokens beyond them it asks LMCache for (hits and misses
    # alike) and LMCache's hits. LMCache's own requested-token counter never sees a miss.
    if plan.uses_lmcache:
        looked = "gpuh + lmcq"
        rates: list[list[Any]] = [
            [{"expression": f"IF({looked} > 0, (gpuh + lmch) / ({looked}))", "id": "anyrate",
              "label": "prompt tokens from any tier"}],
            [{"expression": "IF(lmcq > 0, lmch / lmcq)", "id": "lmcrate",
              "label": "LMCache (of tokens the GPU cache missed)"}],
            [{"expression": f"IF({looked} > 0, gpuh / ({looked}))", "id": "gpurate",
              "label": "GPU prefix cache"}],
            m("GpuPrefixCacheHitTokens", "Sum", id="gpuh", visible=False),
            m("ExternalPrefixCacheHitTokens", "Sum", id="lmch", visible=False),
            m("ExternalPrefixCacheQueryTokens", "Sum", id="lmcq", visible=False)]
    else:
        rates = [[{"expression": "IF(gpuq > 0, gpuh / gpuq)", "id": "gpurate",
                   "label": "GPU prefix cache"}],
                 m("GpuPrefixCacheHitTokens", "Sum", id="gpuh", visible=False),
                 m("GpuPrefixCacheQueryTokens", "Sum", id="gpuq", visible=False)]
    extra: dict[str, Any] = {"yAxis": {"left": {"min": 0, "max": 1}}}
    if plan.uses_lmcache:
        extra["annotations"] = {"horizontal": [{
            "label": "hit-rate-collapse alarm (any tier)",
            "value": spec.observability.alarms.min_hit_rate}]}
    graph("Cache hit rate (prompt tokens, all copies)", rates, **extra)
    graph("Server TTFT (seconds)", [
        m(f"TimeToFirstToken{p.upper()}", "Average", label=p) for p in LATENCY_STATS
    ], annotations={"horizontal": _ttft_lines(plan)})
    if plan.uses_lmcache:
        usage = [m("LMCacheCpuUsageBytes", "Maximum", label="CPU tier")]
        lines = []
        cpu_gb = plan.lmcache.get("max_local_cpu_size_gb") or 0.0
        if cpu_gb:
            lines.append({"label": "CPU tier size (copy)", "value": int(cpu_gb * GIB * plan.tp)})
        if plan.tier == "cpu+disk":
            usage.append(m("LMCacheDiskUsageBytes", "Maximum", label="disk tier"))
            disk_gb = plan.lmcache.get("max_local_disk_size_gb") or 0.0
            if disk_gb:
                lines.append({"label": "disk tier size (copy)",
                              "value": int(disk_gb * GIB * plan.tp)})
        # No remote line: LMCache 0.5.6 never updates lmcache:remote_cache_usage.
        graph("LMCache tier usage (bytes, largest copy)"
              + ("; remote not reported" if plan.tier == "remote" else ""), usage,
              annotations={"horizontal": lines})
        graph("LMCache CPU evictions/s", [
            [{"expression": "ev / PERIOD(ev)", "id": "evs", "label": "evictions/s"}],
            m("LMCacheCpuEvictions", "Sum", id="ev", visible=False)])
        graph("LMCache retrieve", [
            m("LMCacheRetrieveSpeedMean", "Average", label="speed, mean (tokens/s)"),
            m("LMCacheRetrieveTimeP90", "Average", label="time p90 (s)", yAxis="right")])
    graph("GPU KV cache in use, queue", [
        m("GpuKvCacheUsage", "Maximum", label="GPU KV in use (0-1)"),
        m("RequestsWaiting", "Maximum", label="requests waiting", yAxis="right")])
    graph("Tokens/s and requests/s", [
        [{"expression": "pt / PERIOD(pt)", "id": "pts", "label": "prompt tokens/s"}],
        [{"expression": "gt / PERIOD(gt)", "id": "gts", "label": "generated tokens/s"}],
        [{"expression": "req / PERIOD(req)", "id": "reqs", "label": "first tokens/s (requests)",
          "yAxis": "right"}],
        m("PromptTokens", "Sum", id="pt", visible=False),
        m("GenerationTokens", "Sum", id="gt", visible=False),
        m("TimeToFirstTokenCount", "Sum", id="req", visible=False)])
    q = container_queries(selector(spec.name), kv_bytes_per_token=plan.kv_bytes_per_token)
    g.add("text", 8, 6, _promql_text("The same series in PromQL", [
        q[k] for k in ("lmcache_hit_rate", "prefix_hit_rate", "ttft_p90", "ttft_histogram")],
        "Detailed observability also publishes the raw series for PromQL: open CloudWatch "
        "**Query Studio**, choose PromQL and paste a query."))


def _ttft_lines(plan: Plan) -> list[dict[str, Any]]:
    p = plan.predicted
    lines = [{"label": "planned miss TTFT", "value": p.ttft_miss_s}]
    hit = p.ttft_hit_s.get("cpu") if plan.tier != "none" else p.ttft_hit_s.get("gpu")
    if hit is not None:
        lines.append({"label": "planned hit TTFT", "value": hit})
    return lines


def referenced_metrics(body: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(namespace, metric, dimension names) of every classic metric the body plots."""
    out = []
    for widget in body["widgets"]:
        for row in widget.get("properties", {}).get("metrics", []):
            if row and isinstance(row[0], str):
                parts = [p for p in row if not isinstance(p, dict)]
                ns, name, rest = parts[0], parts[1], parts[2:]
                out.append((ns, name, tuple(rest[0::2])))
    return out
