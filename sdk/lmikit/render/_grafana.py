"""The Grafana dashboard (Amazon Managed Grafana) of one deployment, built with the
grafana-foundation-sdk builders; pure function of (spec, plan).

Two data-source variables: ``cloudwatch`` (classic SageMaker metrics, same panels as the
CloudWatch dashboard) and ``prometheus`` (the container's LMCache/vLLM series through
CloudWatch's PromQL endpoint, ``https://monitoring.<region>.amazonaws.com``, SigV4 service
``monitoring``). Extra panels: hit tokens by tier and a cost-per-1K-tokens estimate.

Cost is an ESTIMATE: list on-demand prices (:mod:`lmikit.catalog`, with their
sources) times instances, divided by token throughput. The live panel divides by measured
vLLM tokens/s; the plan panel uses the planned concurrency and predicted TTFT with a stated
decode-speed assumption. Prices change and differ by region, savings plan and discount; pass
``hourly_price_usd`` to use your own.

The container panels (and the live cost, which divides by vLLM's tokens/s) need the series
only lmikit's image serves (``image="lmikit"`` with ``observability.detailed_metrics``); for
the stock image, the default, a text panel says why they are absent.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> grafana_dashboard(spec, plan_spec(spec))["uid"]
'lmikit-docqa'
"""

from __future__ import annotations

import json
from typing import Any

from lmikit import metric_catalog as mc
from lmikit.catalog import ImageKind, PriceTable
from lmikit.names import VARIANT_NAME, base_component_name
from lmikit.planner import Plan
from lmikit.render._promql import container_queries, selector
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

DS_CLOUDWATCH = "${cloudwatch}"
DS_PROMETHEUS = "${prometheus}"


def _ds(uid: str, kind: str) -> Any:
    from grafana_foundation_sdk.models.dashboard import DataSourceRef

    return DataSourceRef(type_val=kind, uid=uid)


def _cw(namespace: str, metric: str, dims: dict[str, str], stat: str, ref: str,
        label: str, region: str) -> Any:
    from grafana_foundation_sdk.builders import cloudwatch as cw
    from grafana_foundation_sdk.models.cloudwatch import (
        CloudWatchQueryMode,
        MetricEditorMode,
        MetricQueryType,
    )

    return (cw.CloudWatchMetricsQuery().query_mode(CloudWatchQueryMode.METRICS)
            .metric_query_type(MetricQueryType.SEARCH).metric_editor_mode(MetricEditorMode.BUILDER)
            .namespace(namespace).metric_name(metric).dimensions(dict(dims)).statistic(stat)
            .match_exact(True).region(region).period("60").ref_id(ref).label(label)
            .datasource(_ds(DS_CLOUDWATCH, "cloudwatch")))


def _prom(expr: str, ref: str, legend: str) -> Any:
    from grafana_foundation_sdk.builders import prometheus

    return (prometheus.Dataquery().expr(expr).range().legend_format(legend).ref_id(ref)
            .datasource(_ds(DS_PROMETHEUS, "prometheus")))


def _ts(title: str, unit: str, targets: list[Any], width: int = 12, desc: str = "") -> Any:
    from grafana_foundation_sdk.builders import timeseries

    panel = timeseries.Panel().title(title).unit(unit).span(width).height(8)
    if desc:
        panel = panel.description(desc)
    for t in targets:
        panel = panel.with_target(t)
    return panel


def _text(title: str, markdown: str, width: int = 24, height: int = 6) -> Any:
    from grafana_foundation_sdk.builders import text
    from grafana_foundation_sdk.models.text import TextMode

    return text.Panel().title(title).mode(TextMode.MARKDOWN).content(markdown).span(width) \
        .height(height)


def grafana_dashboard(spec: DeploymentSpec, plan: Plan,
                      hourly_price_usd: float | None = None,
                      prices: PriceTable | None = None, *,
                      image: ImageKind = "stock", resolved: Resolved | None = None
                      ) -> dict[str, Any]:
    """The dashboard model as a JSON-ready dict (import it into Grafana). ``image``: the
    image the base component runs (default ``stock``, which serves no vLLM or LMCache
    series). ``resolved``, when given, holds the planned cost (its price included)."""
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import VariableOption

    region = spec.region
    ev = {"EndpointName": spec.name, "VariantName": VARIANT_NAME}
    ic = {"InferenceComponentName": base_component_name(spec.name)}
    sm = mc.NS_SAGEMAKER
    resolved = resolved_for(spec, plan, image, resolved, hourly_price_usd, prices)

    d = (db.Dashboard(f"lmikit {spec.name}").uid(f"lmikit-{spec.name}")
         .tags(["lmikit", "sagemaker", "lmcache"]).time("now-6h", "now").refresh("1m")
         .timezone("browser").editable())
    d = d.with_variable(db.DatasourceVariable("cloudwatch").label("CloudWatch")
                        .type("cloudwatch"))
    d = d.with_variable(db.DatasourceVariable("prometheus").type("prometheus").label(
        "Prometheus: " + mc.CONTAINER_SOURCE.promql_url.format(region=region)))
    d = d.with_variable(db.ConstantVariable("endpoint").value(spec.name))
    d = d.with_variable(db.CustomVariable("component").label("Inference component")
                        .values(",".join([base_component_name(spec.name)]
                                         + [f"{spec.name}-{a.name}" for a in spec.adapters]))
                        .current(VariableOption(selected=True, text="All", value="$__all"))
                        .include_all(True).all_value(".*").multi(True))

    sel = selector("$endpoint", "$component")
    q = container_queries(sel, kv_bytes_per_token=plan.kv_bytes_per_token)

    d = d.with_row(db.Row("Traffic, errors and latency (CloudWatch)"))
    d = d.with_panel(_ts("Invocations", "short", [
        _cw(sm, "Invocations", ev, "Sum", "A", "invocations", region)], 8))
    d = d.with_panel(_ts("Errors", "short", [
        _cw(sm, n, ev, "Sum", r, lbl, region) for r, n, lbl in (
            ("A", "Invocation4XXErrors", "4xx"), ("B", "Invocation5XXErrors", "5xx"),
            ("C", "InvocationModelErrors", "model errors"))], 8))
    d = d.with_panel(_ts("No-capacity failures", "short", [
        _cw(sm, "NoCapacityInvocationFailures", ic, "Sum", "A", "no capacity", region)], 8))
    d = d.with_panel(_ts("Model latency", "µs", [
        _cw(sm, "ModelLatency", ev, s, chr(65 + i), s, region)
        for i, s in enumerate(("p50", "p90", "p99"))]))
    d = d.with_panel(_ts("Overhead latency", "µs", [
        _cw(sm, "OverheadLatency", ev, s, chr(65 + i), s, region)
        for i, s in enumerate(("p50", "p90", "p99"))]))
    d = d.with_panel(_ts("Concurrent requests per copy", "short", [
        _cw(sm, "ConcurrentRequestsPerCopy", ic, "Maximum", "A", "max", region)]))
    d = d.with_panel(_ts("Invocations per copy", "short", [
        _cw(sm, "InvocationsPerCopy", ic, "Sum", "A", "per copy", region)]))

    d = d.with_row(db.Row("GPU and hosts (CloudWatch)"))
    d = d.with_panel(_ts("Component GPU / GPU memory / memory", "percent", [
        _cw(mc.NS_INFERENCE_COMPONENTS, n, ic, "Average", chr(65 + i), n, region)
        for i, n in enumerate(("GPUUtilizationNormalized", "GPUMemoryUtilizationNormalized",
                               "MemoryUtilizationNormalized", "CPUUtilizationNormalized"))]))
    d = d.with_panel(_ts("Hosts: CPU, memory (CPU tier), disk (disk tier), GPU", "percent", [
        _cw(mc.NS_ENDPOINTS, n, ev, "Average", chr(65 + i), n, region)
        for i, n in enumerate(("CPUUtilization", "MemoryUtilization", "DiskUtilization",
                               "GPUUtilization", "GPUMemoryUtilization"))]))
    if spec.observability.client_ttft_metrics:
        cd = {"EndpointName": spec.name}
        d = d.with_panel(_ts("Client TTFT", "s", [
            _cw(mc.CLIENT_NAMESPACE, "TimeToFirstToken", cd, s, chr(65 + i), s, region)
            for i, s in enumerate(("p50", "p90", "p99"))]))
        d = d.with_panel(_ts("Client decode tokens/s", "short", [
            _cw(mc.CLIENT_NAMESPACE, "OutputTokensPerSecond", cd, "p50", "A", "p50", region)]))

    absent = resolved.cache_metrics_absent_reason
    d = d.with_row(db.Row("KV cache (container metrics via PromQL)"))
    if absent is None:
        d = _container_panels(d, spec, plan, q)
    else:
        d = d.with_panel(_text("No container metrics", f"{absent}.", height=3))
    d = _cost_panels(d, plan, resolved, sel, q, live=absent is None)
    model = d.build()
    return json.loads(json.dumps(model, cls=JSONEncoder, sort_keys=True))


def _container_panels(d: Any, spec: DeploymentSpec, plan: Plan, q: dict[str, Any]) -> Any:
    """The KV-cache row's PromQL panels."""
    d = d.with_panel(_ts("Hit tokens/s by tier", "short", [
        _prom(q[k].expr, chr(65 + i), q[k].legend) for i, k in enumerate(
            ("hit_tokens_gpu", "hit_tokens_local", "hit_tokens_remote", "prompt_tokens"))],
        desc="GPU prefix cache and LMCache hits as vLLM's scheduler counts them (once per "
        "request; LMCache's own hit counter is counted by every tensor-parallel rank), "
        "LMCache CPU+disk, LMCache remote (bytes read / "
        f"{plan.kv_bytes_per_token} KV bytes per token), against all prompt tokens. LMCache "
        "does not split CPU from disk hits."))
    d = d.with_panel(_ts("Hit rate", "percentunit", [
        _prom(q[k].expr, chr(65 + i), q[k].legend)
        for i, k in enumerate(("prefix_hit_rate", "lmcache_hit_rate"))],
        desc="All tiers: prompt tokens from the GPU prefix cache or LMCache. LMCache: of the "
        "tokens the GPU prefix cache missed, the share LMCache supplied (vLLM's counters, "
        "which count misses too). The hit-rate-collapse alarm fires below "
        f"{spec.observability.alarms.min_hit_rate:.0%} (all tiers)."))
    d = d.with_panel(_ts("Cache tier usage (largest copy)", "bytes", [
        _prom(q[k].expr, chr(65 + i), q[k].legend) for i, k in enumerate(
            ("cache_usage_cpu", "cache_usage_disk"))],
        desc="The largest report of each tensor-parallel rank, summed over the ranks: one "
        f"copy. Planned per copy: CPU {plan.lmcache.get('max_local_cpu_size_gb')} GB x "
        f"{plan.tp} worker(s), disk {plan.lmcache.get('max_local_disk_size_gb')} GB x "
        f"{plan.tp}. Remote tier usage is not shown: LMCache 0.5.6 does not report it "
        "(lmcache:remote_cache_usage is never updated)."))
    d = d.with_panel(_ts("Evictions and GPU KV use", "short", [
        _prom(q["evictions"].expr, "A", "CPU evictions/s"),
        _prom(q["gpu_kv_usage"].expr, "B", "GPU KV in use (0-1)")]))
    d = d.with_panel(_ts("Retrieve speed / time", "short", [
        _prom(q["retrieve_speed_mean"].expr, "A", "tokens/s, mean"),
        _prom(q["retrieve_time_p90"].expr, "B", "seconds p90")]))
    d = d.with_panel(_ts("Server TTFT", "s", [
        _prom(q[k].expr, chr(65 + i), q[k].legend)
        for i, k in enumerate(("ttft_p50", "ttft_p90", "ttft_p99"))],
        desc=f"Planned: miss {plan.predicted.ttft_miss_s} s, hit {plan.predicted.ttft_hit_s}."))
    from grafana_foundation_sdk.builders import heatmap
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    # Format "heatmap": Grafana turns the cumulative le buckets into per-bucket counts and
    # sorts them by bound; the panel then draws the buckets as they are (no calculation).
    d = d.with_panel(heatmap.Panel().title("Server TTFT histogram").span(12).height(8)
                     .calculate(False).show_tooltip()
                     .y_axis(heatmap.YAxisConfig().unit("s"))
                     .with_target(_prom(q["ttft_histogram"].expr, "A", "{{le}}")
                                  .format(PromQueryFormat.HEATMAP)))
    return d


def _cost_panels(d: Any, plan: Plan, resolved: Resolved, sel: str, q: dict[str, Any], *,
                 live: bool) -> Any:
    """The cost row: the live estimate (vLLM's tokens/s; only where the container serves
    them) and the plan's estimate."""
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import stat

    d = d.with_row(db.Row("Cost (estimate)"))
    cost = resolved.cost
    price = cost.hourly_price_usd
    if price is not None and live:
        # Live: price x instances serving / measured tokens per hour.
        instances = (f"count(count by ('{mc.CONTAINER_SOURCE.host_label}') "
                     f"({mc.promql_name('vllm:num_requests_running')}{{{sel}}}))")
        expr = f"{price} * {instances} / (3600 * ({q['tokens_per_s'].expr})) * 1000"
        # as many decimals as print the plan's estimate to three significant figures
        decimals = resolved.cost_decimals
        d = d.with_panel(stat.Panel().title("Cost per 1K tokens (live estimate)")
                         .unit("currencyUSD").decimals(decimals).span(8).height(6)
                         .with_target(_prom(expr, "A", "$ / 1K tokens")))
    d = d.with_panel(_text("Cost per 1K tokens from the plan (estimate)", "\n".join([
        f"**{resolved.planned_cost_text} per 1K tokens** at full planned load on "
        f"{plan.instance_type} "
        f"(${price if price is not None else 'n/a'}/h: {cost.price_source}).",
        f"Planned throughput: {cost.tokens_per_hour_per_instance:,.0f} tokens/hour/instance.",
        "", "Assumptions:", *[f"- {a}" for a in cost.assumptions],
        "- list on-demand price, us-east-1; not your bill"]),
        16 if price is not None and live else 24))
    return d


def render_grafana_json(spec: DeploymentSpec, plan: Plan,
                        hourly_price_usd: float | None = None,
                        prices: PriceTable | None = None, *,
                        image: ImageKind = "stock", resolved: Resolved | None = None) -> str:
    body = grafana_dashboard(spec, plan, hourly_price_usd, prices, image=image,
                             resolved=resolved)
    return json.dumps(body,
                      indent=2, sort_keys=True) + "\n"
