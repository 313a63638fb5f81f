"""The Application Auto Scaling requests: the rules they follow, and botocore's models.

Every request is checked against botocore's ``application-autoscaling`` and ``cloudwatch``
service models with lmikit.testing.ShapeValidator (enums, patterns, lengths and ranges,
which botocore's own client validation skips).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import botocore.session
import pytest

from lmikit.render._scaling import (
    SCALABLE_DIMENSION,
    SERVICE_LINKED_ROLE,
    TARGET_METRIC,
    copy_bounds,
    no_capacity_alarm,
    render_scaling,
    service_linked_role_arn,
)
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec
from lmikit.testing import ShapeValidator

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/models/*.yaml")])
POLICY_ARN = ("arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:0b8d5f5e-1f7c-4a9f-"
              "8d42-1b2c3d4e5f60:resource/sagemaker/inference-component/x-base:policyName/p")


def _spec(**instance: Any) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "chat", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
        "instance": {"type": "ml.g6e.2xlarge", **instance},
        "workload": {"concurrency": 6}, "tags": {"team": "ml"}})


def _problems(service: str, operation: str, request: dict[str, Any]) -> list[str]:
    model = botocore.session.get_session().get_service_model(service)
    return ShapeValidator().validate(model.operation_model(operation).input_shape, request)


def _all_requests(spec: DeploymentSpec) -> list[tuple[str, str, dict[str, Any]]]:
    req = render_scaling(spec, role_arn=service_linked_role_arn("aws", "123456789012"))
    out = [("application-autoscaling", "RegisterScalableTarget", req.target)]
    out += [("application-autoscaling", "PutScalingPolicy", p) for p in req.policies]
    if req.scale_from_zero is not None:
        out.append(("cloudwatch", "PutMetricAlarm", no_capacity_alarm(spec, POLICY_ARN)))
    return out


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_scaling_requests_pass_botocore_model_validation(path: Path) -> None:
    spec = load_spec(path)
    variants = [spec, spec.model_copy(update={"instance": spec.instance.model_copy(
        update={"min_count": 0})})]
    problems = [f"{spec.name} {operation}: {p}" for s in variants
                for service, operation, request in _all_requests(s)
                for p in _problems(service, operation, request)]
    assert problems == []


def test_validation_catches_a_bad_policy_type() -> None:
    """The check above is not vacuous: a value outside the model's enum is reported."""
    request = dict(render_scaling(_spec()).target_tracking, PolicyType="Tracking")
    assert _problems("application-autoscaling", "PutScalingPolicy", request) == [
        "PolicyType: 'Tracking' is not one of StepScaling, TargetTrackingScaling, "
        "PredictiveScaling"]


def test_validation_applies_the_resource_id_pattern() -> None:
    """ResourceId's Java pattern (surrogate-pair ranges) is compiled and enforced."""
    request = dict(render_scaling(_spec()).target, ResourceId="inference-component/\x00")
    problems = _problems("application-autoscaling", "RegisterScalableTarget", request)
    assert len(problems) == 1 and problems[0].startswith("ResourceId: ")


def test_copy_bounds_are_copies_per_instance_times_instance_bounds() -> None:
    assert copy_bounds(_spec(min_count=1, max_count=4, copies_per_instance=2)) == (2, 8)
    assert copy_bounds(_spec(min_count=0, max_count=3, copies_per_instance=3)) == (0, 9)


def test_target_names_the_base_component_copy_count() -> None:
    target = render_scaling(_spec(min_count=1, max_count=2),
                            role_arn=service_linked_role_arn("aws-cn", "123456789012")).target
    assert target == {
        "ServiceNamespace": "sagemaker", "ResourceId": "inference-component/chat-base",
        "ScalableDimension": SCALABLE_DIMENSION, "MinCapacity": 1, "MaxCapacity": 2,
        "RoleARN": f"arn:aws-cn:iam::123456789012:role/{SERVICE_LINKED_ROLE}",
        "Tags": {"lmikit:deployment": "chat", "team": "ml"}}


def test_target_tracking_targets_concurrency_per_copy() -> None:
    config = render_scaling(_spec()).target_tracking["TargetTrackingScalingPolicyConfiguration"]
    assert config["PredefinedMetricSpecification"] == {"PredefinedMetricType": TARGET_METRIC}
    assert config["TargetValue"] == 6.0  # workload.concurrency: requests in flight per copy
    assert (config["ScaleOutCooldown"], config["ScaleInCooldown"]) == (60, 300)


def test_no_scale_from_zero_policy_above_zero_instances() -> None:
    assert render_scaling(_spec(min_count=1)).scale_from_zero is None


def test_scale_from_zero_adds_one_instance_of_copies() -> None:
    step = render_scaling(_spec(min_count=0, max_count=3, copies_per_instance=2)).scale_from_zero
    assert step is not None and step["PolicyType"] == "StepScaling"
    config = step["StepScalingPolicyConfiguration"]
    assert config["AdjustmentType"] == "ChangeInCapacity"
    assert config["StepAdjustments"] == [{"MetricIntervalLowerBound": 0.0,
                                          "ScalingAdjustment": 2}]


def test_no_capacity_alarm_fires_on_the_first_failed_request() -> None:
    """REFERENCE §3: NoCapacityInvocationFailures >= 1 (not > 1), one 60 s period."""
    alarm = no_capacity_alarm(_spec(min_count=0), POLICY_ARN)
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SageMaker",
                                                         "NoCapacityInvocationFailures")
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": "chat-base"}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "GreaterThanOrEqualToThreshold", 1)
    assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
        60, 1, 1)
    assert alarm["AlarmActions"] == [POLICY_ARN]
    assert {"Key": "lmikit:deployment", "Value": "chat"} in alarm["Tags"]


def test_names_come_from_lmikit_names() -> None:
    req = render_scaling(_spec(min_count=0))
    assert [p["PolicyName"] for p in req.policies] == ["chat-base-target-tracking",
                                                       "chat-base-scale-from-zero"]
    assert no_capacity_alarm(_spec(min_count=0), POLICY_ARN)["AlarmName"] == (
        "chat-base-scale-from-zero")
