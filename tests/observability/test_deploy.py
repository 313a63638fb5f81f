"""deploy_dashboard / deploy_alarms / apply_observability / remove_observability against moto's
CloudWatch: idempotent, and touching only lmikit's own alarms and dashboard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lmikit.deploy._observability import (
    apply_observability,
    deploy_alarms,
    deploy_dashboard,
    remove_observability,
)
from lmikit.errors import AwsError, DeployError
from lmikit.render._alarms import alarm_definitions
from lmikit.render._cloudwatch import dashboard_body

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


def _foreign_alarm(client: Any, name: str, owner: str | None = None) -> None:
    tags = [{"Key": "lmikit:deployment", "Value": owner}] if owner else []
    client.put_metric_alarm(
        AlarmName=name, MetricName="x", Namespace="y", Statistic="Sum", Period=60,
        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold", Tags=tags)


def test_deploy_alarms_prunes_alarms_no_longer_rendered(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    _foreign_alarm(cloudwatch, "docqa-qwen7b-lmikit-disk-tier-full", owner="docqa-qwen7b")
    _foreign_alarm(cloudwatch, "someone-elses-alarm")
    deploy_alarms(spec, plan, cloudwatch)
    assert "docqa-qwen7b-lmikit-disk-tier-full" not in _alarm_names(cloudwatch, "docqa")
    assert _alarm_names(cloudwatch, "someone-elses-alarm") == {"someone-elses-alarm"}


def test_pruning_keeps_same_prefixed_alarms_that_are_not_tagged_ours(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    _foreign_alarm(cloudwatch, "docqa-qwen7b-lmikit-hand-made")
    _foreign_alarm(cloudwatch, "docqa-qwen7b-lmikit-other", owner="docqa-qwen7b-lmikit")
    changes = apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    kept = {c.name: c.detail for c in changes if c.action == "kept"}
    assert kept == {"docqa-qwen7b-lmikit-hand-made": "not tagged lmikit:deployment=docqa-qwen7b",
                    "docqa-qwen7b-lmikit-other": "not tagged lmikit:deployment=docqa-qwen7b"}
    assert {"docqa-qwen7b-lmikit-hand-made", "docqa-qwen7b-lmikit-other"} <= _alarm_names(
        cloudwatch, "docqa-qwen7b-lmikit-")


def test_alarms_carry_the_deployment_tags(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    deploy_alarms(spec, plan, cloudwatch)
    for alarm in cloudwatch.describe_alarms(AlarmNamePrefix="docqa-qwen7b-lmikit-")[
            "MetricAlarms"]:
        tags = cloudwatch.list_tags_for_resource(ResourceARN=alarm["AlarmArn"])["Tags"]
        assert tags == [{"Key": "lmikit:deployment", "Value": "docqa-qwen7b"},
                        {"Key": "team", "Value": "ml-platform"}]


def test_apply_observability_creates_then_changes_nothing(cloudwatch) -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    first = apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    assert {c.action for c in first} == {"create"}
    assert [c.name for c in first] == ["rag-qwen72b-lmikit", *(
        a.name for a in alarm_definitions(spec, plan))]
    again = apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    assert [(c.name, c.action) for c in again] == [(c.name, "unchanged") for c in first]


def test_apply_observability_updates_a_changed_threshold(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    obs = spec.observability
    changed = spec.model_copy(update={"observability": obs.model_copy(update={
        "alarms": obs.alarms.model_copy(update={"error_5xx_rate_percent": 5.0})})})
    changes = apply_observability(changed, plan, cloudwatch_client=cloudwatch)
    updated = [(c.name, c.detail) for c in changes if c.action == "update"]
    # the percentage is the 5xx alarm's threshold and is named in its description; the
    # dashboard does not show it
    assert updated == [("docqa-qwen7b-lmikit-5xx-rate", "AlarmDescription, Threshold")]
    assert changes[0].line() == "unchanged dashboard docqa-qwen7b-lmikit"


def test_dashboard_off_deletes_lmikits_dashboard(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    off = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"dashboard": False})})
    changes = apply_observability(off, plan, cloudwatch_client=cloudwatch)
    assert changes[0].line() == ("delete dashboard docqa-qwen7b-lmikit "
                                 "(observability.dashboard is false)")
    assert cloudwatch.list_dashboards()["DashboardEntries"] == []


def test_a_dashboard_that_is_not_lmikits_is_never_overwritten(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    body = json.dumps({"widgets": [{"type": "text", "x": 0, "y": 0, "width": 6, "height": 2,
                                    "properties": {"markdown": "# team board"}}]})
    cloudwatch.put_dashboard(DashboardName="docqa-qwen7b-lmikit", DashboardBody=body)
    with pytest.raises(DeployError, match="dashboard docqa-qwen7b-lmikit exists and is not "
                       "lmikit's dashboard of docqa-qwen7b"):
        apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    assert remove_observability(spec, cloudwatch_client=cloudwatch)[0].action == "kept"
    stored = cloudwatch.get_dashboard(DashboardName="docqa-qwen7b-lmikit")["DashboardBody"]
    assert json.loads(stored) == json.loads(body)


def test_remove_observability_deletes_only_ours_and_is_idempotent(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    apply_observability(spec, plan, cloudwatch_client=cloudwatch)
    _foreign_alarm(cloudwatch, "docqa-qwen7b-lmikit-hand-made")
    changes = remove_observability(spec, cloudwatch_client=cloudwatch)
    assert [c.action for c in changes].count("delete") == 1 + len(alarm_definitions(spec, plan))
    assert _alarm_names(cloudwatch, "docqa-qwen7b") == {"docqa-qwen7b-lmikit-hand-made"}
    assert cloudwatch.list_dashboards()["DashboardEntries"] == []
    again = remove_observability(spec, cloudwatch_client=cloudwatch)
    assert [c.action for c in again] == ["absent", "kept"]


def test_deploy_alarms_disabled_removes_them(cloudwatch) -> None:
    spec, plan = load_example("docqa-qwen7b")
    deploy_alarms(spec, plan, cloudwatch)
    off = spec.model_copy(update={"observability": spec.observability.model_copy(update={
        "alarms": spec.observability.alarms.model_copy(update={"enabled": False})})})
    assert deploy_alarms(off, plan, cloudwatch) == []
    assert _alarm_names(cloudwatch, "docqa-qwen7b-lmikit-") == set()


def test_client_errors_become_aws_errors() -> None:
    import boto3
    from botocore.stub import Stubber

    spec, plan = load_example("docqa-qwen7b")
    client = boto3.client("cloudwatch", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("put_dashboard", "InvalidParameterInput", "bad body")
        with pytest.raises(AwsError, match="^PutDashboard failed: InvalidParameterInput: "
                           "bad body$"):
            deploy_dashboard(spec, plan, client)


def test_moving_to_the_stock_image_removes_the_cache_alarms_and_panels(cloudwatch) -> None:
    """The stock image publishes no LMIKit/Container metrics: what was rendered for lmikit's
    image and can no longer receive data is deleted, not left in OK forever."""
    spec, plan = load_example("docqa-qwen7b")
    apply_observability(spec, plan, cloudwatch_client=cloudwatch, image="lmikit")
    assert "docqa-qwen7b-lmikit-hit-rate-collapse" in _alarm_names(cloudwatch, "docqa")
    changes = apply_observability(spec, plan, cloudwatch_client=cloudwatch, image="stock")
    assert {(c.name, c.action) for c in changes} >= {
        ("docqa-qwen7b-lmikit", "update"), ("docqa-qwen7b-lmikit-hit-rate-collapse", "delete"),
        ("docqa-qwen7b-lmikit-cpu-tier-full", "delete")}
    assert _alarm_names(cloudwatch, "docqa") == {a.name for a in alarm_definitions(spec, plan)}
