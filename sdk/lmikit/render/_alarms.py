"""Default alarms of one deployment, as plain data both the SDK and CDK build from.

:func:`alarm_definitions` returns :class:`AlarmDef` objects; ``AlarmDef.request()`` is the
``PutMetricAlarm`` keyword dict, which is also the property dict of CloudFormation's
``AWS::CloudWatch::Alarm`` (the same PascalCase names), so CDK can pass it to
``cloudwatch.CfnAlarm(**to_cdk_kwargs(...))`` or read the fields to build ``Alarm``/
``PromQLAlarm``.

Alarms (REFERENCE §3 and §6 metrics; thresholds from ``observability.alarms`` or the plan):
``5xx-rate``, ``model-error-rate`` (LMI answers a failed request with 424, never a 5xx),
``p90-model-latency``, ``no-capacity``, and, on lmikit's image with LMCache tiers,
``hit-rate-collapse``, ``cpu-tier-full`` and ``disk-tier-full`` on the container's EMF metrics
(``LMIKit/Container``). The stock image prints no EMF lines, so the cache alarms are not
rendered for it. Each alarm's condition and the source of each rule: docs/observability.md,
"Alarms".

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}, "kv_cache": {"mode": "cpu"}})
>>> [a.key for a in alarm_definitions(spec, plan_spec(spec), image="lmikit")]
... # doctest: +NORMALIZE_WHITESPACE
['5xx-rate', 'model-error-rate', 'p90-model-latency', 'no-capacity', 'hit-rate-collapse',
 'cpu-tier-full']
>>> [a.key for a in alarm_definitions(spec, plan_spec(spec))]  # the stock image
['5xx-rate', 'model-error-rate', 'p90-model-latency', 'no-capacity']
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from lmikit import metric_catalog as mc
from lmikit.catalog import ImageKind
from lmikit.names import VARIANT_NAME, base_component_name, deployment_tags
from lmikit.planner import Plan
from lmikit.render._env import EMF_MIN_INTERVAL_S
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

GIB = 2**30
TIER_FULL_FRACTION = 0.95
DECODE_TOKENS_PER_S_FLOOR = 20.0
"""Slowest acceptable per-sequence decode speed used to size the default p90 ModelLatency
limit (ModelLatency covers the whole response, not only the first token)."""
HIT_RATE_WINDOW_S = 900
"""The hit-rate alarm judges the token-weighted hit rate of one window this long (rounded up
to whole EMF intervals), over every copy together."""
HIT_RATE_MIN_REQUESTS = 10
"""Fewer requests than this in a window (idle, or a trickle of new documents) give the
hit-rate alarm no datapoint: too little traffic to call the cache collapsed."""


@dataclass(frozen=True)
class AlarmDef:
    """One alarm as data. ``kind`` says which fields are set:

    * ``metric``: namespace, metric_name, dimensions, statistic | extended_statistic, period;
    * ``math``: ``metrics`` (MetricDataQuery dicts, one with ReturnData true);
    * ``promql``: promql_query, pending_period, recovery_period, evaluation_interval
      (PromQL alarms have no threshold: every series the query returns is breaching).
    """

    key: str
    name: str
    description: str
    kind: Literal["metric", "math", "promql"]
    threshold: float | None = None
    comparison_operator: str | None = None
    evaluation_periods: int | None = None
    datapoints_to_alarm: int | None = None
    treat_missing_data: str | None = None
    namespace: str | None = None
    metric_name: str | None = None
    dimensions: dict[str, str] = field(default_factory=dict)
    statistic: str | None = None
    extended_statistic: str | None = None
    period: int | None = None
    metrics: tuple[dict[str, Any], ...] = ()
    promql_query: str | None = None
    pending_period: int | None = None
    recovery_period: int | None = None
    evaluation_interval: int | None = None
    actions: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()

    def request(self) -> dict[str, Any]:
        """PutMetricAlarm kwargs (also AWS::CloudWatch::Alarm properties)."""
        out: dict[str, Any] = {"AlarmName": self.name, "AlarmDescription": self.description,
                               "ActionsEnabled": bool(self.actions)}
        if self.actions:
            out["AlarmActions"] = list(self.actions)
            out["OKActions"] = list(self.actions)
        if self.tags:
            out["Tags"] = [{"Key": k, "Value": v} for k, v in self.tags]
        if self.kind == "promql":
            criteria: dict[str, Any] = {"Query": self.promql_query}
            if self.pending_period is not None:
                criteria["PendingPeriod"] = self.pending_period
            if self.recovery_period is not None:
                criteria["RecoveryPeriod"] = self.recovery_period
            out["EvaluationCriteria"] = {"PromQLCriteria": criteria}
            out["EvaluationInterval"] = self.evaluation_interval
            return out
        out.update({"Threshold": self.threshold, "ComparisonOperator": self.comparison_operator,
                    "EvaluationPeriods": self.evaluation_periods,
                    "TreatMissingData": self.treat_missing_data})
        if self.datapoints_to_alarm:
            out["DatapointsToAlarm"] = self.datapoints_to_alarm
        if self.kind == "math":
            out["Metrics"] = [dict(m) for m in self.metrics]
            return out
        out.update({"Namespace": self.namespace, "MetricName": self.metric_name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in self.dimensions.items()],
                    "Period": self.period})
        if self.extended_statistic:
            out["ExtendedStatistic"] = self.extended_statistic
        else:
            out["Statistic"] = self.statistic
        return out


def alarm_name(spec: DeploymentSpec, key: str) -> str:
    return f"{alarm_prefix(spec)}{key}"


def alarm_prefix(spec: DeploymentSpec) -> str:
    """Every lmikit alarm of a deployment starts with this (used to prune stale ones)."""
    return f"{spec.name}-lmikit-"


def default_p90_model_latency_ms(spec: DeploymentSpec, plan: Plan) -> float:
    """2 x (predicted miss TTFT + output tokens at DECODE_TOKENS_PER_S_FLOOR), in ms."""
    seconds = plan.predicted.ttft_miss_s + spec.workload.output_tokens / DECODE_TOKENS_PER_S_FLOOR
    return float(math.ceil(2 * seconds * 1000))


def _stat(id_: str, name: str, dims: dict[str, str], stat: str,
          namespace: str = mc.NS_SAGEMAKER, period: int = 60) -> dict[str, Any]:
    return {"Id": id_, "ReturnData": False, "MetricStat": {
        "Metric": {"Namespace": namespace, "MetricName": name,
                   "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()]},
        "Period": period, "Stat": stat}}


def _share_of_invocations(spec: DeploymentSpec, key: str, actions: tuple[str, ...], id_: str,
                          metric: str, label: str, percent: float, description: str
                          ) -> AlarmDef:
    """An alarm on ``metric`` as a percentage of Invocations, above ``percent`` in 3 of 5
    minutes; a minute without invocations reads 0."""
    ev = {"EndpointName": spec.name, "VariantName": VARIANT_NAME}
    return AlarmDef(
        key=key, name=alarm_name(spec, key), kind="math", actions=actions,
        description=description, threshold=percent, comparison_operator="GreaterThanThreshold",
        evaluation_periods=5, datapoints_to_alarm=3, treat_missing_data="notBreaching",
        metrics=(
            _stat(id_, metric, ev, "Sum"),
            _stat("invocations", "Invocations", ev, "Sum"),
            {"Id": "rate", "ReturnData": True, "Label": label,
             "Expression": f"IF(invocations > 0, 100 * FILL({id_}, 0) / invocations, 0)"},
        ))


def emf_period(spec: DeploymentSpec) -> int:
    """Seconds between the container's EMF lines (``LMIKIT_EMF`` interval_s): the period
    of every alarm and graph on ``LMIKit/Container``."""
    return max(EMF_MIN_INTERVAL_S, spec.observability.metric_publish_frequency_seconds)


def container_dimensions(spec: DeploymentSpec) -> dict[str, str]:
    """The dimension values of the container's EMF metrics (``metric_catalog.
    CONTAINER_DIMENSIONS``): the endpoint and its base component."""
    return {"EndpointName": spec.name, "InferenceComponentName": base_component_name(spec.name)}


def alarm_tags(spec: DeploymentSpec) -> tuple[tuple[str, str], ...]:
    """Every lmikit alarm's tags: the deployment tag (what lets lmikit prune and remove only
    its own alarms) and ``spec.tags``."""
    return tuple((t["Key"], t["Value"]) for t in deployment_tags(spec.name, spec.tags))


def alarm_definitions(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                      resolved: Resolved | None = None) -> list[AlarmDef]:
    """The deployment's default alarms; empty when ``observability.alarms.enabled`` is off.
    ``image`` is the image the base component runs (default ``stock``): the cache alarms
    need lmikit's, the only one that publishes ``LMIKit/Container``."""
    cfg = spec.observability.alarms
    if not cfg.enabled:
        return []
    publishes = resolved_for(spec, plan, image, resolved).publishes_cache_metrics
    return [dataclasses.replace(a, tags=alarm_tags(spec))
            for a in _definitions(spec, plan, publishes)]


def _definitions(spec: DeploymentSpec, plan: Plan, publishes_cache_metrics: bool
                 ) -> list[AlarmDef]:
    cfg = spec.observability.alarms
    actions = (cfg.sns_topic_arn,) if cfg.sns_topic_arn else ()
    ev = {"EndpointName": spec.name, "VariantName": VARIANT_NAME}
    base = base_component_name(spec.name)
    latency_ms = cfg.p90_model_latency_ms or default_p90_model_latency_ms(spec, plan)
    out = [
        _share_of_invocations(
            spec, "5xx-rate", actions, "errors", "Invocation5XXErrors", "5xx percent",
            cfg.error_5xx_rate_percent,
            f"{spec.name}: more than {cfg.error_5xx_rate_percent:g}% of invocations "
            "returned 5xx in 3 of 5 minutes"),
        _share_of_invocations(
            spec, "model-error-rate", actions, "modelerrors", "InvocationModelErrors",
            "model error percent", cfg.model_error_rate_percent,
            f"{spec.name}: the model container answered more than "
            f"{cfg.model_error_rate_percent:g}% of invocations with an error (any non-2xx; LMI "
            "returns 424 for a failed request, which Invocation5XXErrors does not count) in "
            "3 of 5 minutes: the engine is failing requests; see the container log"),
        AlarmDef(
            key="p90-model-latency", name=alarm_name(spec, "p90-model-latency"), kind="metric",
            actions=actions,
            description=f"{spec.name}: p90 ModelLatency above {latency_ms:g} ms for 5 minutes "
            + ("(observability.alarms.p90_model_latency_ms)" if cfg.p90_model_latency_ms else
               f"(default: 2 x (planned miss TTFT {plan.predicted.ttft_miss_s} s + "
               f"{spec.workload.output_tokens} tokens at {DECODE_TOKENS_PER_S_FLOOR:g} tok/s))"),
            namespace=mc.NS_SAGEMAKER, metric_name="ModelLatency", dimensions=ev,
            extended_statistic="p90", period=60, evaluation_periods=5, datapoints_to_alarm=5,
            threshold=latency_ms * 1000, comparison_operator="GreaterThanThreshold",
            treat_missing_data="notBreaching"),
        AlarmDef(
            key="no-capacity", name=alarm_name(spec, "no-capacity"), kind="metric",
            actions=actions,
            description=f"{spec.name}: requests failed because no model copy was running "
            "(scale from zero too slow, or capacity unavailable)",
            namespace=mc.NS_SAGEMAKER, metric_name="NoCapacityInvocationFailures",
            dimensions={"InferenceComponentName": base}, statistic="Sum", period=60,
            evaluation_periods=1, threshold=1, comparison_operator="GreaterThanOrEqualToThreshold",
            treat_missing_data="notBreaching"),
    ]
    if not (plan.uses_lmcache and publishes_cache_metrics):
        return out
    # The container's EMF metrics (LMIKit/Container; lmikit_runtime.emf): classic metrics,
    # one datapoint per copy per interval, so the period is the emitter's interval.
    period = emf_period(spec)
    cd = container_dimensions(spec)

    def periods(seconds: int) -> int:
        return max(1, math.ceil(seconds / period))

    window = period * periods(HIT_RATE_WINDOW_S)
    out.append(AlarmDef(
        key="hit-rate-collapse", name=alarm_name(spec, "hit-rate-collapse"), kind="math",
        actions=actions,
        description=f"{spec.name}: under {cfg.min_hit_rate:.0%} of prompt tokens came from a "
        f"cache tier (GPU prefix cache or LMCache) in {window // 60} minutes with at least "
        f"{HIT_RATE_MIN_REQUESTS} requests (sticky routing broken, cache restarted, or "
        "hashes differ: check PYTHONHASHSEED=0)",
        threshold=cfg.min_hit_rate, comparison_operator="LessThanThreshold",
        evaluation_periods=1, datapoints_to_alarm=1, treat_missing_data="notBreaching",
        metrics=hit_rate_queries(spec, window, min_requests=HIT_RATE_MIN_REQUESTS)))
    tp = plan.tp
    tiers = [("cpu-tier-full", "CPU", "LMCacheCpuUsageBytes",
              plan.lmcache.get("max_local_cpu_size_gb") or 0.0)]
    if plan.tier == "cpu+disk":
        tiers.append(("disk-tier-full", "disk", "LMCacheDiskUsageBytes",
                      plan.lmcache.get("max_local_disk_size_gb") or 0.0))
    # Full (and evicting) is any long-running LRU tier's steady state; full while the cache
    # stopped paying, in hit-rate-collapse's windows, is a working set that outgrew it.
    hit_stats = hit_rate_queries(spec, window)[:-1]
    rate = "(gpuhits + lmchits) / (gpuhits + lmcqueries)"
    for key, label, metric, size_gb in tiers:
        if size_gb <= 0:
            continue
        # One copy's workers (TP ranks) together: the emitter sums the per-worker gauge.
        limit = int(size_gb * GIB * tp * TIER_FULL_FRACTION)
        stats = [*hit_stats, _stat("usage", metric, cd, "Maximum", mc.CONTAINER_NAMESPACE,
                                   window)]
        full = f"usage > {limit}"
        if label == "CPU":  # LMCache counts CPU-tier evictions only
            stats.append(_stat("evictions", "LMCacheCpuEvictions", cd, "Sum",
                               mc.CONTAINER_NAMESPACE, window))
            full += " AND FILL(evictions, 0) > 0"
        description = (f"{spec.name}: LMCache {label} tier above {TIER_FULL_FRACTION:.0%} of "
                       f"its {size_gb:g} GB x {tp} worker(s) in a copy"
                       + (" and evicting" if label == "CPU" else "")
                       + f", while under {cfg.min_hit_rate:.0%} of prompt tokens came from a "
                       f"cache tier, in two {window // 60}-minute windows: the working set "
                       "outgrew the tier (raise its size, add instances, or add a tier). A "
                       "full tier with hits above that is an LRU cache at work")
        out.append(AlarmDef(
            key=key, name=alarm_name(spec, key), kind="math", actions=actions,
            description=description, threshold=1,
            comparison_operator="GreaterThanOrEqualToThreshold", evaluation_periods=2,
            datapoints_to_alarm=2, treat_missing_data="notBreaching",
            metrics=(*stats, {
                "Id": "outgrown", "ReturnData": True,
                "Label": f"{label} tier full while the hit rate collapsed",
                # one IF with AND, as hit-rate-collapse: idle windows read 0; a window
                # with nothing looked up divides by zero, which drops its point
                "Expression": f"IF(requests >= {HIT_RATE_MIN_REQUESTS} AND gpuhits + "
                              f"lmcqueries > 0 AND {full} AND {rate} < "
                              f"{cfg.min_hit_rate:g}, 1, 0)"})))
    return out


def hit_rate_queries(spec: DeploymentSpec, period: int, *, min_requests: int = 1
                     ) -> tuple[dict[str, Any], ...]:
    """Metric math for the share of prompt tokens served from any cache tier, summed over
    every copy (token-weighted). vLLM's scheduler records, once per request, the GPU prefix
    hit and the tokens beyond it that it asks the KV connector for (hits and misses alike),
    so GPU hits + connector queries are the prompt tokens looked up, and misses are connector
    queries - connector hits. A period with fewer than ``min_requests`` first tokens, or
    with nothing looked up, has no datapoint (``IF`` without a false value drops it; CloudWatch
    "Using IF expressions"): an idle endpoint is not a collapsed cache."""
    cd = container_dimensions(spec)
    ns = mc.CONTAINER_NAMESPACE
    return (
        _stat("gpuhits", "GpuPrefixCacheHitTokens", cd, "Sum", ns, period),
        _stat("lmchits", "ExternalPrefixCacheHitTokens", cd, "Sum", ns, period),
        _stat("lmcqueries", "ExternalPrefixCacheQueryTokens", cd, "Sum", ns, period),
        _stat("requests", "TimeToFirstTokenCount", cd, "Sum", ns, period),
        {"Id": "hitrate", "ReturnData": True, "Label": "prompt tokens from any cache tier",
         "Expression": f"IF(requests >= {min_requests} AND gpuhits + lmcqueries > 0, "
                       "(gpuhits + lmchits) / (gpuhits + lmcqueries))"},
    )


def put_metric_alarm_requests(spec: DeploymentSpec, plan: Plan, *, image: ImageKind = "stock",
                              resolved: Resolved | None = None) -> list[dict[str, Any]]:
    """Every alarm's PutMetricAlarm kwargs."""
    return [a.request() for a in alarm_definitions(spec, plan, image=image, resolved=resolved)]
