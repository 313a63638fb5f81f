"""Application Auto Scaling of the base component's copy count, as request dicts.

Rendered once, used twice: :mod:`lmikit.deploy` sends them with boto3 and
:class:`lmikit_cdk.scaling.CopyCountScaling` passes the same dicts to the L1 resources
(``AWS::ApplicationAutoScaling::ScalableTarget`` / ``ScalingPolicy``, ``AWS::CloudWatch::Alarm``;
the same PascalCase names, re-cased for jsii only).

* ``RegisterScalableTarget``: ``inference-component/<base>``'s
  ``sagemaker:inference-component:DesiredCopyCount``, copies per instance times the bounds.
* ``PutScalingPolicy`` (target tracking) on
  ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``, target
  ``workload.concurrency`` (requests in flight per copy).
* With ``instance.min_count`` 0 no per-copy metric exists at 0 copies: a step-scaling policy
  adds one instance worth of copies on an alarm on ``NoCapacityInvocationFailures >= 1``
  (REFERENCE §3; SageMaker guide "Scale an endpoint to zero instances").

Tests validate every dict against botocore's ``application-autoscaling`` and ``cloudwatch``.

>>> from lmikit.spec import DeploymentSpec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "chat",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge", "min_count": 0, "max_count": 2}})
>>> r = render_scaling(spec)
>>> r.target["ResourceId"], r.target["MinCapacity"], r.target["MaxCapacity"]
('inference-component/chat-base', 0, 2)
>>> r.scale_from_zero["PolicyName"]
'chat-base-scale-from-zero'
>>> no_capacity_alarm(spec, "arn:aws:autoscaling:...")["Threshold"]
1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmikit import metric_catalog as mc
from lmikit.names import (
    base_component_name,
    deployment_tags,
    scale_from_zero_name,
    target_tracking_policy_name,
)
from lmikit.spec import DeploymentSpec

SERVICE_NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
TARGET_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
# Application Auto Scaling's service-linked role for SageMaker (Application Auto Scaling User
# Guide, "Service-linked role ARN reference"); it creates the role when it is missing.
SERVICE_LINKED_ROLE = ("aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                       "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
SCALE_IN_COOLDOWN_S = 300
SCALE_OUT_COOLDOWN_S = 60
NO_CAPACITY_PERIOD_S = 60


def copy_bounds(spec: DeploymentSpec) -> tuple[int, int]:
    """(min, max) copies: copies per instance times the instance bounds.

    >>> from lmikit.spec import DeploymentSpec
    >>> copy_bounds(DeploymentSpec.model_validate({"api_version": "v1", "name": "x",
    ...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
    ...     "instance": {"type": "ml.g6e.2xlarge", "min_count": 1, "max_count": 4,
    ...                  "copies_per_instance": 2}}))
    (2, 8)
    """
    per = spec.instance.copies_per_instance
    return per * spec.instance.min_count, per * spec.instance.max_count


def resource_id(spec: DeploymentSpec) -> str:
    """Application Auto Scaling's id of the base component: ``inference-component/<name>``."""
    return f"inference-component/{base_component_name(spec.name)}"


def service_linked_role_arn(partition: str, account: str) -> str:
    """The ARN of Application Auto Scaling's SageMaker service-linked role."""
    return f"arn:{partition}:iam::{account}:role/{SERVICE_LINKED_ROLE}"


def target_key(spec: DeploymentSpec) -> dict[str, str]:
    """The three fields that name the scalable target in every Application Auto Scaling call."""
    return {"ServiceNamespace": SERVICE_NAMESPACE, "ResourceId": resource_id(spec),
            "ScalableDimension": SCALABLE_DIMENSION}


@dataclass(frozen=True)
class ScalingRequests:
    """The Application Auto Scaling requests of one deployment.

    ``target`` is ``RegisterScalableTarget`` (``Tags`` a map, as the API takes it);
    ``target_tracking`` and ``scale_from_zero`` are ``PutScalingPolicy``; the latter is None
    unless ``instance.min_count`` is 0. The alarm that drives it names the policy's ARN,
    which only exists once the policy does: :func:`no_capacity_alarm`.
    """

    target: dict[str, Any]
    target_tracking: dict[str, Any]
    scale_from_zero: dict[str, Any] | None

    @property
    def policies(self) -> list[dict[str, Any]]:
        return [p for p in (self.target_tracking, self.scale_from_zero) if p is not None]


def render_scaling(spec: DeploymentSpec, *, role_arn: str | None = None) -> ScalingRequests:
    """The scaling requests; ``role_arn`` is the scalable target's ``RoleARN`` (normally
    :func:`service_linked_role_arn`; left out when None)."""
    low, high = copy_bounds(spec)
    key = target_key(spec)
    target: dict[str, Any] = {**key, "MinCapacity": low, "MaxCapacity": high}
    if role_arn is not None:
        target["RoleARN"] = role_arn
    target["Tags"] = {t["Key"]: t["Value"] for t in deployment_tags(spec.name, spec.tags)}
    tracking = {
        "PolicyName": target_tracking_policy_name(spec.name), **key,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(spec.workload.concurrency),
            "PredefinedMetricSpecification": {"PredefinedMetricType": TARGET_METRIC},
            "ScaleInCooldown": SCALE_IN_COOLDOWN_S,
            "ScaleOutCooldown": SCALE_OUT_COOLDOWN_S,
        },
    }
    step = None
    if low == 0:
        step = {
            "PolicyName": scale_from_zero_name(spec.name), **key,
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                # Any breach (the alarm's metric at or above its threshold) adds the copies
                # one instance holds.
                "StepAdjustments": [{"MetricIntervalLowerBound": 0.0,
                                     "ScalingAdjustment": spec.instance.copies_per_instance}],
                "MetricAggregationType": "Maximum",
                "Cooldown": SCALE_OUT_COOLDOWN_S,
            },
        }
    return ScalingRequests(target=target, target_tracking=tracking, scale_from_zero=step)


def no_capacity_alarm(spec: DeploymentSpec, policy_arn: str) -> dict[str, Any]:
    """``PutMetricAlarm`` (also ``AWS::CloudWatch::Alarm`` properties) of the alarm that runs
    the scale-from-zero policy ``policy_arn`` when a request finds no copy running."""
    base = base_component_name(spec.name)
    return {
        "AlarmName": scale_from_zero_name(spec.name),
        "AlarmDescription": f"{base} was invoked with no copy running: scale out from zero",
        "ActionsEnabled": True,
        "AlarmActions": [policy_arn],
        "Namespace": mc.NS_SAGEMAKER,
        "MetricName": "NoCapacityInvocationFailures",
        "Dimensions": [{"Name": "InferenceComponentName", "Value": base}],
        "Statistic": "Sum",
        "Period": NO_CAPACITY_PERIOD_S,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": 1,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "notBreaching",
        "Tags": deployment_tags(spec.name, spec.tags),
    }
