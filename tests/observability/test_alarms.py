"""Default alarms: thresholds from the spec and plan, requests valid for PutMetricAlarm."""

from __future__ import annotations

from typing import Any

import pytest

from lmikit.catalog._containers import ImageKind
from lmikit.render._alarms import (
    HIT_RATE_MIN_REQUESTS,
    HIT_RATE_WINDOW_S,
    AlarmDef,
    alarm_definitions,
    default_p90_model_latency_ms,
    put_metric_alarm_requests,
)

from ._metric_math import alarm_state
from ._service_model import problems
from ._serving import ServingCopy, query_values
from .conftest import load_example

SNS = "arn:aws:sns:us-east-1:123456789012:oncall"


def _with_alarms(spec, **changes):  # type: ignore[no-untyped-def]
    alarms = spec.observability.alarms.model_copy(update=changes)
    return spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"alarms": alarms})})


def test_alarm_requests_match_service_model(example) -> None:
    spec, plan = example
    for req in put_metric_alarm_requests(_with_alarms(spec, sns_topic_arn=SNS), plan,
                                         image="lmikit"):
        assert problems("cloudwatch", "PutMetricAlarm", req) == [], req["AlarmName"]


def test_alarm_requests_use_one_evaluation_style_each(example) -> None:
    spec, plan = example
    for req in put_metric_alarm_requests(spec, plan, image="lmikit"):
        styles = [k for k in ("MetricName", "Metrics", "EvaluationCriteria") if k in req]
        assert len(styles) == 1, req["AlarmName"]
        if "EvaluationCriteria" in req:
            assert not {"Threshold", "Namespace", "EvaluationPeriods"} & set(req)


def test_5xx_alarm_threshold_comes_from_spec() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(_with_alarms(spec, error_5xx_rate_percent=2.5),
                                                 plan)}["5xx-rate"]
    assert alarm.threshold == 2.5
    expr = [m for m in alarm.metrics if m.get("ReturnData")][0]["Expression"]
    assert "errors" in expr and "invocations" in expr


def _minutes(invocations: int, errors_5xx: int, model_errors: int) -> list[dict[str, float]]:
    """Five minutes of AWS/SageMaker invocation metrics (Sums), as the alarms' queries read
    them (both error alarms name their queries by role)."""
    return [{"invocations": invocations, "errors": errors_5xx, "modelerrors": model_errors}
            ] * 5


@pytest.mark.parametrize(("minutes", "fires"), [
    # LMI answers every request with 424 (djl_python/outputs.py Output.error(code=424), used
    # by python_async_engine.py for any exception but out-of-memory): SageMaker counts it in
    # InvocationModelErrors (any non-2xx) and Invocation4XXErrors, never Invocation5XXErrors.
    (_minutes(100, 0, 100), {"model-error-rate"}),
    # ordinary client mistakes (bad JSON, expired sessions: 424 / 4xx too) stay quiet
    (_minutes(100, 0, 3), set()),
    # out of memory: 507, a 5xx, which both count
    (_minutes(100, 100, 100), {"5xx-rate", "model-error-rate"}),
    # idle
    (_minutes(0, 0, 0), set()),
])
def test_error_alarms_catch_an_engine_that_fails_every_request(
        minutes: list[dict[str, float]], fires: set[str]) -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarms = {a.key: a.request() for a in alarm_definitions(spec, plan)}
    got = {k for k in ("5xx-rate", "model-error-rate")
           if alarm_state(alarms[k], minutes) == "ALARM"}
    assert got == fires


def test_model_error_alarm_reads_invocation_model_errors_with_the_spec_threshold() -> None:
    spec, plan = load_example("docqa-qwen7b")
    request = {a.key: a for a in alarm_definitions(_with_alarms(
        spec, model_error_rate_percent=80), plan)}["model-error-rate"].request()
    assert (request["Threshold"], request["ComparisonOperator"]) == (80, "GreaterThanThreshold")
    stats = {q["Id"]: q["MetricStat"]["Metric"] for q in request["Metrics"] if "MetricStat" in q}
    assert stats["modelerrors"]["MetricName"] == "InvocationModelErrors"
    assert {d["Name"] for d in stats["modelerrors"]["Dimensions"]} == {"EndpointName",
                                                                       "VariantName"}


def test_p90_latency_default_comes_from_plan_in_microseconds() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(spec, plan)}["p90-model-latency"]
    assert alarm.threshold == default_p90_model_latency_ms(spec, plan) * 1000
    assert alarm.extended_statistic == "p90"


def test_p90_latency_threshold_from_spec_wins() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(_with_alarms(spec, p90_model_latency_ms=750),
                                                 plan)}["p90-model-latency"]
    assert alarm.threshold == 750_000


def test_no_capacity_alarm_fires_on_one_failure() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(spec, plan)}["no-capacity"]
    assert (alarm.threshold, alarm.comparison_operator) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm.dimensions == {"InferenceComponentName": "docqa-qwen7b-base"}


def _hit_rate_alarm(spec, plan):  # type: ignore[no-untyped-def]
    return {a.key: a for a in alarm_definitions(spec, plan, image="lmikit")}[
        "hit-rate-collapse"].request()


def _window(minutes: int, per_minute: int, copies: int = 2,
            tiers: dict[str, int] | None = None, **request: int) -> list[dict[str, float]]:
    """The EMF lines of every copy over ``minutes`` one-minute intervals, each copy serving
    ``per_minute`` requests a minute shaped by ``request`` (see ServingCopy.request), its
    tiers as ``tiers`` says each minute (see ServingCopy.tier_state)."""
    fleet = [ServingCopy() for _ in range(copies)]
    lines = []
    for _ in range(minutes):
        for copy in fleet:
            for _ in range(per_minute):
                copy.request(**request)  # type: ignore[arg-type]
            if tiers:
                copy.tier_state(**tiers)
            lines.append(copy.line())
    return lines


@pytest.mark.parametrize(("traffic", "state"), [
    # Long-Doc-QA query round: the GPU prefix cache lost the documents, LMCache has them.
    ({"per_minute": 20, "prompt": 10_000, "lmcache_hit": 9_984}, "OK"),
    # The reuse fits in the GPU prefix cache: LMCache supplies nothing and is not needed.
    ({"per_minute": 20, "prompt": 10_000, "gpu_hit": 9_984}, "OK"),
    # Collapse with traffic: every lookup misses (sticky routing lost, cache restarted,
    # hashes differ). LMCache then retrieves nothing and counts no requested token at all.
    ({"per_minute": 20, "prompt": 10_000}, "ALARM"),
    # A partial collapse below min_hit_rate (0.2): 10% of the prompt from LMCache.
    ({"per_minute": 20, "prompt": 10_000, "lmcache_hit": 1_000}, "ALARM"),
    # Idle: the emitter still prints its lines, every counter moved by 0.
    ({"per_minute": 0, "prompt": 10_000}, "OK"),
    # A trickle of new documents is no collapse: under HIT_RATE_MIN_REQUESTS per window.
    ({"per_minute": 0, "prompt": 10_000, "trickle": HIT_RATE_MIN_REQUESTS - 1}, "OK"),
])
def test_hit_rate_alarm_counts_misses_and_ignores_idle(traffic: dict[str, int], state: str
                                                       ) -> None:
    """The alarm reads vLLM's scheduler counters, which count a miss, not LMCache's
    requested/hit tokens: LMCache 0.5.6 retrieves only for requests whose lookup found
    tokens (vllm_v1_adapter.py ``if ... not request.load_spec.can_load: continue``), so a
    collapse there reads 0 requested tokens. Evaluated with CloudWatch's metric-math rules
    (tests/observability/_metric_math.py) on what the real emitter prints."""
    spec, plan = load_example("docqa-qwen7b")
    request = _hit_rate_alarm(spec, plan)
    minutes = request["Metrics"][0]["MetricStat"]["Period"] // 60
    traffic = dict(traffic)
    trickle = traffic.pop("trickle", 0)
    lines = _window(minutes, **traffic)
    copy = ServingCopy()
    for _ in range(trickle):
        copy.request(prompt=10_000)
    lines.append(copy.line())
    assert alarm_state(request, query_values(request["Metrics"], lines)) == state


def test_hit_rate_alarm_is_ok_without_any_emf_line() -> None:
    """No line at all (emitter off, container starting): no datapoint, not breaching."""
    spec, plan = load_example("docqa-qwen7b")
    request = _hit_rate_alarm(spec, plan)
    assert request["TreatMissingData"] == "notBreaching"
    assert alarm_state(request, query_values(request["Metrics"], [])) == "OK"


def test_hit_rate_alarm_window_and_threshold() -> None:
    spec, plan = load_example("docqa-qwen7b")
    request = _hit_rate_alarm(_with_alarms(spec, min_hit_rate=0.35), plan)
    assert (request["Threshold"], request["ComparisonOperator"]) == (0.35, "LessThanThreshold")
    stats = [m["MetricStat"] for m in request["Metrics"] if "MetricStat" in m]
    # one 15-minute window, token sums over every copy of the base component
    assert {s["Period"] for s in stats} == {HIT_RATE_WINDOW_S}
    assert request["EvaluationPeriods"] == request["DatapointsToAlarm"] == 1
    assert all(s["Stat"] == "Sum" and s["Metric"]["Namespace"] == "LMIKit/Container"
               for s in stats)
    assert "LMCacheRequestedTokens" not in {s["Metric"]["MetricName"] for s in stats}


def test_cache_alarms_use_the_emf_interval_as_period() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    slow = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"metric_publish_frequency_seconds": 300})})
    fast = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"metric_publish_frequency_seconds": 240})})
    for s, window in ((slow, 900), (fast, 960)):  # whole EMF intervals, at least 15 minutes
        alarms = {a.key: a for a in alarm_definitions(s, plan, image="lmikit")}
        for key in ("hit-rate-collapse", "cpu-tier-full", "disk-tier-full"):
            assert {m["MetricStat"]["Period"] for m in alarms[key].metrics
                    if "MetricStat" in m} == {window}, key
        for key in ("cpu-tier-full", "disk-tier-full"):  # two windows, both breaching
            assert (alarms[key].evaluation_periods, alarms[key].datapoints_to_alarm) == (2, 2)


def _tier_alarms(example: str) -> dict[str, dict[str, Any]]:
    spec, plan = load_example(example)
    return {a.key: a.request() for a in alarm_definitions(spec, plan, image="lmikit")
            if a.key.endswith("tier-full")}


def _tier_windows(request: dict[str, Any], *, per_minute: int = 20, cpu_bytes: int = 0,
                  disk_bytes: int = 0, evictions: int = 0, **traffic: int
                  ) -> list[dict[str, float | None]]:
    """The query values of each window the alarm evaluates: two copies serve ``per_minute``
    10,000-token prompts shaped by ``traffic`` each minute, with their tiers holding
    ``cpu_bytes`` / ``disk_bytes`` and their CPU tiers evicting ``evictions`` a minute."""
    minutes = request["Metrics"][0]["MetricStat"]["Period"] // 60
    tiers = {"cpu_bytes": cpu_bytes, "disk_bytes": disk_bytes, "evictions": evictions}
    return [query_values(request["Metrics"], _window(minutes, per_minute, tiers=tiers,
                                                     prompt=10_000, **traffic))
            for _ in range(request["EvaluationPeriods"])]


def _size(request: dict[str, Any]) -> int:
    """The planned tier size the alarm compares with (its 95% limit / 0.95)."""
    (result,) = [m for m in request["Metrics"] if m.get("ReturnData")]
    limit = int(result["Expression"].split("usage > ")[1].split()[0])
    return int(limit / 0.95)


@pytest.mark.parametrize(("tier", "state", "alarm"), [
    # A long-running LRU tier that sees more distinct text than it holds: full, evicting
    # at every new chunk, and its hot chunks still hit. That is the tier at work.
    ({"full": True, "evictions": 50, "lmcache_hit": 9_000}, "healthy churn", "OK"),
    # Full and evicting while the cache stopped paying: the working set outgrew the tier.
    ({"full": True, "evictions": 50, "lmcache_hit": 500}, "thrashing", "ALARM"),
    # The hit rate collapsed but the tier has room (routing lost, cache restarted):
    # hit-rate-collapse's case, not this one.
    ({"full": False, "evictions": 0, "lmcache_hit": 500}, "collapse with room", "OK"),
    # Full, the hit rate low, but nothing evicted: the tier holds what it was given.
    ({"full": True, "evictions": 0, "lmcache_hit": 500}, "full, not evicting", "OK"),
])
def test_cpu_tier_alarm_fires_only_when_the_full_tier_stops_paying(
        tier: dict[str, Any], state: str, alarm: str) -> None:
    """Evaluated with CloudWatch's metric-math rules on what the real emitter prints."""
    request = _tier_alarms("docqa-qwen7b")["cpu-tier-full"]
    size = _size(request)
    windows = _tier_windows(request, cpu_bytes=int(size * (0.99 if tier["full"] else 0.5)),
                            evictions=tier["evictions"], lmcache_hit=tier["lmcache_hit"])
    assert alarm_state(request, windows) == alarm, state


@pytest.mark.parametrize(("full", "lmcache_hit", "alarm"), [
    (True, 9_000, "OK"), (True, 500, "ALARM"), (False, 500, "OK")])
def test_disk_tier_alarm_fires_only_when_the_full_tier_stops_paying(
        full: bool, lmcache_hit: int, alarm: str) -> None:
    """LMCache counts no disk evictions: a disk tier over 95% while the cache stops paying
    is one whose working set no longer fits."""
    request = _tier_alarms("rag-qwen72b-nvme")["disk-tier-full"]
    size = _size(request)
    windows = _tier_windows(request, disk_bytes=int(size * (0.99 if full else 0.5)),
                            lmcache_hit=lmcache_hit)
    assert alarm_state(request, windows) == alarm


@pytest.mark.parametrize("key", ["cpu-tier-full", "disk-tier-full"])
def test_tier_alarms_are_ok_when_idle_or_without_lines(key: str) -> None:
    request = _tier_alarms("rag-qwen72b-nvme")[key]
    size = _size(request)
    idle = _tier_windows(request, per_minute=0, cpu_bytes=size, disk_bytes=size,
                         evictions=50)
    assert alarm_state(request, idle) == "OK"
    assert alarm_state(request, [query_values(request["Metrics"], [])] * 2) == "OK"


def test_cpu_tier_alarm_limit_is_95_percent_of_the_copys_planned_tier() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(spec, plan, image="lmikit")}["cpu-tier-full"]
    (expr,) = [m["Expression"] for m in alarm.metrics if m.get("ReturnData")]
    limit = int(plan.lmcache["max_local_cpu_size_gb"] * 2**30 * plan.tp * 0.95)
    assert expr == (f"IF(requests >= {HIT_RATE_MIN_REQUESTS} AND gpuhits + lmcqueries > 0 "
                    f"AND usage > {limit} AND FILL(evictions, 0) > 0 AND "
                    f"(gpuhits + lmchits) / (gpuhits + lmcqueries) < "
                    f"{spec.observability.alarms.min_hit_rate:g}, 1, 0)")
    assert (alarm.threshold, alarm.comparison_operator) == (1, "GreaterThanOrEqualToThreshold")


def test_cache_alarms_absent_without_lmcache() -> None:
    spec, plan = load_example("chat-qwen1.5b-small")
    assert plan.tier == "none"
    keys = {a.key for a in alarm_definitions(spec, plan, image="lmikit")}
    assert keys == {"5xx-rate", "model-error-rate", "p90-model-latency", "no-capacity"}


@pytest.mark.parametrize(("image", "detailed", "cache_alarms"), [
    ("lmikit", True, True),
    ("stock", True, False),  # no EMF emitter in AWS's image: LMIKIT_EMF is lmikit's only
    ("lmikit", False, False),
])
def test_cache_alarms_only_where_the_container_publishes_their_metrics(
        image: ImageKind, detailed: bool, cache_alarms: bool) -> None:
    """An alarm on LMIKit/Container where nothing publishes it sits in OK forever
    (TreatMissingData notBreaching): it is not created at all. Same rule as LMIKIT_EMF."""
    from lmikit.render._env import container_environment

    spec, plan = load_example("rag-qwen72b-nvme")
    spec = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"detailed_metrics": detailed})})
    alarms = alarm_definitions(spec, plan, image=image)
    on_container = [a.key for a in alarms if "LMIKit/Container" in str(a.request())]
    assert bool(on_container) is cache_alarms
    emf = "LMIKIT_EMF" in container_environment(spec, plan, image=image)
    assert emf is cache_alarms
    assert {"5xx-rate", "p90-model-latency", "no-capacity"} <= {a.key for a in alarms}


def test_default_alarms_are_the_stock_images() -> None:
    """``Deployment`` and ``lmikit render`` default to AWS's stock image."""
    spec, plan = load_example("docqa-qwen7b")
    assert alarm_definitions(spec, plan) == alarm_definitions(spec, plan, image="stock")
    assert "hit-rate-collapse" not in {a.key for a in alarm_definitions(spec, plan)}


def test_disk_tier_alarm_only_with_disk_tier() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    assert plan.tier == "cpu+disk"
    assert "disk-tier-full" in {a.key for a in alarm_definitions(spec, plan, image="lmikit")}
    spec, plan = load_example("docqa-qwen7b")
    assert "disk-tier-full" not in {a.key for a in alarm_definitions(spec, plan,
                                                                     image="lmikit")}


def test_sns_topic_becomes_alarm_and_ok_actions() -> None:
    spec, plan = load_example("docqa-qwen7b")
    for req in put_metric_alarm_requests(_with_alarms(spec, sns_topic_arn=SNS), plan):
        assert req["AlarmActions"] == [SNS] and req["OKActions"] == [SNS]
        assert req["ActionsEnabled"] is True


def test_alarms_disabled_renders_none() -> None:
    spec, plan = load_example("docqa-qwen7b")
    assert alarm_definitions(_with_alarms(spec, enabled=False), plan) == []


def test_alarm_names_share_the_deployment_prefix(example) -> None:
    spec, plan = example
    names = [a.name for a in alarm_definitions(spec, plan, image="lmikit")]
    assert len(set(names)) == len(names)
    assert all(n.startswith(f"{spec.name}-lmikit-") for n in names)


def test_alarm_def_is_plain_frozen_data() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = alarm_definitions(spec, plan)[0]
    assert isinstance(alarm, AlarmDef)
    with pytest.raises(AttributeError, match="cannot assign"):
        alarm.threshold = 5  # type: ignore[misc]
