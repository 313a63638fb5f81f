"""deploy_dashboard / deploy_alarms against moto's CloudWatch: idempotent put_* calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lmikit.errors import DeployError
from lmikit.observability import deploy_alarms, deploy_dashboard
from lmikit.render.alarms import alarm_definitions
from lmikit.render.cloudwatch import dashboard_body

from .conftest import load_example


def _alarm_names(client: Any, prefix: str) -> set[str]:
    return {a["AlarmName"] for a in
            client.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]}


def test_deploy_dashboard_stores_the_rendered_body(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    name = deploy_dashboard(spec, plan, cloudwatch)
    stored = json.loads(cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"])
    assert stored == dashboard_body(spec, plan)


def test_deploy_dashboard_is_idempotent(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    deploy_dashboard(spec, plan, cloudwatch)
    deploy_dashboard(spec, plan, cloudwatch)
    entries = cloudwatch.list_dashboards()["DashboardEntries"]
    assert [e["DashboardName"] for e in entries] == ["docqa-qwen7b-lmikit"]


def test_deploy_alarms_creates_every_alarm(cloudwatch) -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    names = deploy_alarms(spec, plan, cloudwatch)
    assert set(names) == {a.name for a in alarm_definitions(spec, plan)}
    assert _alarm_names(cloudwatch, "rag-qwen72b-lmikit-") == set(names)


def test_deploy_alarms_twice_changes_nothing(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    first = deploy_alarms(spec, plan, cloudwatch)
    assert deploy_alarms(spec, plan, cloudwatch) == first
    assert _alarm_names(cloudwatch, "docqa-qwen7b-lmikit-") == set(first)


def test_deploy_alarms_prunes_alarms_no_longer_rendered(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    cloudwatch.put_metric_alarm(
        AlarmName="docqa-qwen7b-lmikit-disk-tier-full", MetricName="x", Namespace="y",
        Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
        ComparisonOperator="GreaterThanThreshold")
    cloudwatch.put_metric_alarm(
        AlarmName="someone-elses-alarm", MetricName="x", Namespace="y", Statistic="Sum",
        Period=60, EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold")
    deploy_alarms(spec, plan, cloudwatch)
    assert "docqa-qwen7b-lmikit-disk-tier-full" not in _alarm_names(cloudwatch, "docqa")
    assert _alarm_names(cloudwatch, "someone-elses-alarm") == {"someone-elses-alarm"}


def test_deploy_alarms_disabled_removes_them(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    deploy_alarms(spec, plan, cloudwatch)
    off = spec.model_copy(update={"observability": spec.observability.model_copy(update={
        "alarms": spec.observability.alarms.model_copy(update={"enabled": False})})})
    assert deploy_alarms(off, plan, cloudwatch) == []
    assert _alarm_names(cloudwatch, "docqa-qwen7b-lmikit-") == set()


def test_client_errors_become_deploy_errors() -> None:
    import boto3
    from botocore.stub import Stubber

    spec, plan = load_example("docqa-qwen7b")
    client = boto3.client("cloudwatch", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("put_dashboard", "InvalidParameterInput", "bad body")
        with pytest.raises(DeployError, match="PutDashboard docqa-qwen7b-lmikit failed"):
            deploy_dashboard(spec, plan, client)
