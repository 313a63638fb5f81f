"""apply_scaling / remove_scaling against moto's Application Auto Scaling and CloudWatch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lmikit.deploy._scaling import apply_scaling, remove_scaling
from lmikit.errors import AwsError, DeployError
from lmikit.render._scaling import (
    SCALABLE_DIMENSION,
    no_capacity_alarm,
    render_scaling,
    service_linked_role_arn,
)
from lmikit.spec import DeploymentSpec
from tests.moto_autoscaling import inference_component_dimension

REGION = "eu-west-1"
KEY = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/chat-base",
       "ScalableDimension": SCALABLE_DIMENSION}


def _spec(min_count: int = 0, max_count: int = 2, **extra: Any) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "chat", "region": REGION,
        "model": {"id": "Qwen/Qwen2.5-1.5B-Instruct"},
        "instance": {"type": "ml.g6.xlarge", "min_count": min_count, "max_count": max_count},
        "workload": {"concurrency": 8}, **extra})


@pytest.fixture
def session() -> Iterator[Any]:
    with mock_aws(), inference_component_dimension():
        yield boto3.Session(region_name=REGION)


def _aas(session: Any) -> Any:
    return session.client("application-autoscaling")


def _policies(session: Any) -> dict[str, dict[str, Any]]:
    found = _aas(session).describe_scaling_policies(ServiceNamespace="sagemaker")
    return {p["PolicyName"]: p for p in found["ScalingPolicies"]}


def _alarms(session: Any) -> dict[str, dict[str, Any]]:
    found = session.client("cloudwatch").describe_alarms()["MetricAlarms"]
    return {a["AlarmName"]: a for a in found}


def test_apply_creates_what_the_renderer_says(session: Any) -> None:
    spec = _spec()
    changes = apply_scaling(spec, session=session)
    assert [(c.kind, c.action) for c in changes] == [
        ("scalable-target", "create"), ("scaling-policy", "create"),
        ("scaling-policy", "create"), ("alarm", "create")]
    req = render_scaling(spec, role_arn=service_linked_role_arn("aws", "123456789012"))
    (target,) = _aas(session).describe_scalable_targets(
        ServiceNamespace="sagemaker")["ScalableTargets"]
    assert {k: target[k] for k in req.target if k != "Tags"} == {
        k: v for k, v in req.target.items() if k != "Tags"}
    policies = _policies(session)
    for request in req.policies:
        stored = policies[request["PolicyName"]]
        assert {k: stored[k] for k in request} == request
    alarm = _alarms(session)["chat-base-scale-from-zero"]
    expected = no_capacity_alarm(spec, policies["chat-base-scale-from-zero"]["PolicyARN"])
    assert {k: alarm[k] for k in expected if k != "Tags"} == {
        k: v for k, v in expected.items() if k != "Tags"}
    tags = session.client("cloudwatch").list_tags_for_resource(ResourceARN=alarm["AlarmArn"])
    assert tags["Tags"] == expected["Tags"]


def test_apply_twice_changes_nothing(session: Any) -> None:
    apply_scaling(_spec(), session=session)
    again = apply_scaling(_spec(), session=session)
    assert {c.action for c in again} == {"unchanged"} and len(again) == 4


def test_apply_updates_bounds_and_target_in_place(session: Any) -> None:
    apply_scaling(_spec(min_count=1), session=session)
    changes = apply_scaling(
        _spec(min_count=1, max_count=4, workload={"concurrency": 16}), session=session)
    assert [(c.kind, c.action) for c in changes] == [
        ("scalable-target", "update"), ("scaling-policy", "update")]
    assert changes[0].detail == "1-2 -> 1-4 copies"
    config = _policies(session)["chat-base-target-tracking"][
        "TargetTrackingScalingPolicyConfiguration"]
    assert config["TargetValue"] == 16.0


def test_leaving_scale_to_zero_removes_the_wake_up_policy_and_alarm(session: Any) -> None:
    apply_scaling(_spec(min_count=0), session=session)
    changes = apply_scaling(_spec(min_count=1), session=session)
    assert ("alarm", "chat-base-scale-from-zero", "delete") in [
        (c.kind, c.name, c.action) for c in changes]
    assert sorted(_policies(session)) == ["chat-base-target-tracking"]
    assert "chat-base-scale-from-zero" not in _alarms(session)


def test_remove_deletes_everything_of_ours_and_is_idempotent(session: Any) -> None:
    apply_scaling(_spec(), session=session)
    first = remove_scaling(_spec(), session=session)
    assert [c.action for c in first] == ["delete"] * 4
    assert _policies(session) == {} and _alarms(session) == {}
    assert _aas(session).describe_scalable_targets(
        ServiceNamespace="sagemaker")["ScalableTargets"] == []
    assert {c.action for c in remove_scaling(_spec(), session=session)} == {"absent"}


def test_remove_keeps_the_target_while_another_policy_uses_it(session: Any) -> None:
    apply_scaling(_spec(min_count=1), session=session)
    _aas(session).put_scaling_policy(
        PolicyName="team-schedule", PolicyType="StepScaling", **KEY,
        StepScalingPolicyConfiguration={"AdjustmentType": "ChangeInCapacity",
                                        "StepAdjustments": [{"MetricIntervalLowerBound": 0,
                                                             "ScalingAdjustment": 1}]})
    changes = remove_scaling(_spec(min_count=1), session=session)
    assert changes[-1].action == "kept" and "team-schedule" in changes[-1].detail
    assert sorted(_policies(session)) == ["team-schedule"]


def test_remove_keeps_an_alarm_that_is_not_ours(session: Any) -> None:
    cw = session.client("cloudwatch")
    cw.put_metric_alarm(AlarmName="chat-base-scale-from-zero", MetricName="m", Namespace="n",
                        Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
                        ComparisonOperator="GreaterThanThreshold")
    changes = remove_scaling(_spec(), session=session)
    assert changes[0].action == "kept"
    assert "chat-base-scale-from-zero" in _alarms(session)


def test_apply_refuses_an_alarm_of_another_deployment(session: Any) -> None:
    session.client("cloudwatch").put_metric_alarm(
        AlarmName="chat-base-scale-from-zero", MetricName="m", Namespace="n", Statistic="Sum",
        Period=60, EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold",
        Tags=[{"Key": "lmikit:deployment", "Value": "other"}])
    with pytest.raises(DeployError, match=r"alarm chat-base-scale-from-zero belongs to lmikit "
                       r"deployment 'other' \(tag lmikit:deployment=other\)"):
        apply_scaling(_spec(), session=session)


def test_apply_adopts_and_tags_an_untagged_alarm_of_its_own_name(session: Any) -> None:
    cw = session.client("cloudwatch")
    cw.put_metric_alarm(AlarmName="chat-base-scale-from-zero", MetricName="m", Namespace="n",
                        Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
                        ComparisonOperator="GreaterThanThreshold")
    changes = apply_scaling(_spec(), session=session)
    assert changes[-1].action == "update"
    alarm = _alarms(session)["chat-base-scale-from-zero"]
    assert alarm["MetricName"] == "NoCapacityInvocationFailures"
    tags = cw.list_tags_for_resource(ResourceARN=alarm["AlarmArn"])["Tags"]
    assert {"Key": "lmikit:deployment", "Value": "chat"} in tags


def test_client_errors_become_aws_errors_naming_the_call() -> None:
    from botocore.stub import Stubber

    client = boto3.client("application-autoscaling", region_name=REGION)
    stub = Stubber(client)
    stub.add_client_error("describe_scalable_targets", "AccessDeniedException", "denied")
    stub.activate()

    class Session:
        def client(self, service: str, **_: Any) -> Any:
            return client if service == "application-autoscaling" else boto3.client(
                service, region_name=REGION)

    with pytest.raises(AwsError, match="^DescribeScalableTargets failed: "
                       "AccessDeniedException: denied$") as caught:
        apply_scaling(_spec(), session=Session(), account="123456789012")
    assert (caught.value.operation, caught.value.code) == ("DescribeScalableTargets",
                                                          "AccessDeniedException")
