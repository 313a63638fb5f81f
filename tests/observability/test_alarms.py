"""Default alarms: thresholds from the spec and plan, requests valid for PutMetricAlarm."""

from __future__ import annotations

import pytest

from lmikit.render.alarms import (
    AlarmDef,
    alarm_definitions,
    default_p90_model_latency_ms,
    put_metric_alarm_requests,
)

from ._service_model import problems
from .conftest import load_example

SNS = "arn:aws:sns:us-east-1:123456789012:oncall"


def _with_alarms(spec, **changes):  # type: ignore[no-untyped-def]
    alarms = spec.observability.alarms.model_copy(update=changes)
    return spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"alarms": alarms})})


def test_alarm_requests_match_service_model(example) -> None:
    spec, plan = example
    for req in put_metric_alarm_requests(_with_alarms(spec, sns_topic_arn=SNS), plan):
        assert problems("cloudwatch", "PutMetricAlarm", req) == [], req["AlarmName"]


def test_alarm_requests_use_one_evaluation_style_each(example) -> None:
    spec, plan = example
    for req in put_metric_alarm_requests(spec, plan):
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


def test_hit_rate_alarm_uses_min_hit_rate_and_ignores_idle() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(_with_alarms(spec, min_hit_rate=0.35),
                                                 plan)}["hit-rate-collapse"]
    assert alarm.kind == "math"
    assert (alarm.threshold, alarm.comparison_operator) == (0.35, "LessThanThreshold")
    (expr,) = [m["Expression"] for m in alarm.metrics if m.get("ReturnData")]
    # token-weighted over copies, and an idle interval (no requested tokens) is not breaching
    assert expr == "IF(requested > 0, FILL(hits, 0) / requested, 1)"
    stats = {m["Id"]: m["MetricStat"] for m in alarm.metrics if "MetricStat" in m}
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {
        "LMCacheHitTokens", "LMCacheRequestedTokens"}
    assert all(s["Stat"] == "Sum" and s["Metric"]["Namespace"] == "LMIKit/Container"
               for s in stats.values())
    assert alarm.evaluation_periods * 60 == 900 and alarm.treat_missing_data == "notBreaching"


def test_cache_alarms_use_the_emf_interval_as_period() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    slow = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"metric_publish_frequency_seconds": 300})})
    fast = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"metric_publish_frequency_seconds": 10})})
    for s, period in ((slow, 300), (fast, 60)):  # EMF lines never more often than 60 s
        alarms = {a.key: a for a in alarm_definitions(s, plan)}
        assert alarms["disk-tier-full"].period == period
        assert alarms["disk-tier-full"].evaluation_periods * period == 1800
        cpu = alarms["cpu-tier-full"]
        assert {m["MetricStat"]["Period"] for m in cpu.metrics if "MetricStat" in m} == {period}


def test_cpu_tier_alarm_needs_full_and_evicting() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = {a.key: a for a in alarm_definitions(spec, plan)}["cpu-tier-full"]
    (expr,) = [m["Expression"] for m in alarm.metrics if m.get("ReturnData")]
    limit = int(plan.lmcache["max_local_cpu_size_gb"] * 2**30 * plan.tp * 0.95)
    assert expr == f"IF(usage > {limit}, 1, 0) * IF(FILL(evictions, 0) > 0, 1, 0)"
    assert (alarm.threshold, alarm.comparison_operator) == (1, "GreaterThanOrEqualToThreshold")


def test_cache_alarms_absent_without_lmcache() -> None:
    spec, plan = load_example("chat-qwen1.5b-small")
    assert plan.tier == "none"
    keys = {a.key for a in alarm_definitions(spec, plan)}
    assert keys == {"5xx-rate", "p90-model-latency", "no-capacity"}


def test_disk_tier_alarm_only_with_disk_tier() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    assert plan.tier == "cpu+disk"
    assert "disk-tier-full" in {a.key for a in alarm_definitions(spec, plan)}
    spec, plan = load_example("docqa-qwen7b")
    assert "disk-tier-full" not in {a.key for a in alarm_definitions(spec, plan)}


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
    names = [a.name for a in alarm_definitions(spec, plan)]
    assert len(set(names)) == len(names)
    assert all(n.startswith(f"{spec.name}-lmikit-") for n in names)


def test_alarm_def_is_plain_frozen_data() -> None:
    spec, plan = load_example("docqa-qwen7b")
    alarm = alarm_definitions(spec, plan)[0]
    assert isinstance(alarm, AlarmDef)
    with pytest.raises(AttributeError, match="cannot assign"):
        alarm.threshold = 5  # type: ignore[misc]
