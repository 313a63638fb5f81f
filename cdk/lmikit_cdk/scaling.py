"""Application Auto Scaling of the base component's copy count, including scale from zero.

The L1 properties are :func:`lmikit.render.render_scaling`'s request dicts, the ones
:func:`lmikit.deploy.apply_scaling` sends with boto3, re-cased for jsii only:

* ``AWS::ApplicationAutoScaling::ScalableTarget`` = ``RegisterScalableTarget`` (its ``Tags``
  map becomes CloudFormation's tag list; ``RoleARN`` is the service-linked role's ARN);
* ``AWS::ApplicationAutoScaling::ScalingPolicy`` = ``PutScalingPolicy``: the policy names its
  target with the same ``ServiceNamespace``/``ResourceId``/``ScalableDimension`` the API takes
  (not ``ScalingTargetId``) and depends on the target explicitly;
* ``AWS::CloudWatch::Alarm`` = :func:`lmikit.render.no_capacity_alarm`, its action the
  step policy's ARN (``Ref``).

>>> scaling = CopyCountScaling(endpoint, "Scaling", spec=spec)  # doctest: +SKIP
>>> scaling.cfn_target_tracking.policy_name  # doctest: +SKIP
'chat-small-base-target-tracking'
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from lmikit.render import (
    ScalingRequests,
    copy_bounds,
    no_capacity_alarm,
    render_scaling,
    service_linked_role_arn,
)
from lmikit.spec import DeploymentSpec
from lmikit_cdk._cfn import l1_kwargs

__all__ = ["CopyCountScaling", "copy_bounds", "target_props"]


def target_props(request: dict[str, Any]) -> dict[str, Any]:
    """``RegisterScalableTarget`` kwargs as ScalableTarget properties: the API's ``Tags`` map
    becomes CloudFormation's ``[{"Key", "Value"}]`` list (sorted by key)."""
    out = {k: v for k, v in request.items() if k != "Tags"}
    if request.get("Tags"):
        out["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(request["Tags"].items())]
    return out


class CopyCountScaling(Construct):
    """Scaling of the base inference component's copy count.

    :param spec: supplies the component name, the bounds and the concurrency target.
    :param component: the construct that creates the component (the target depends on it).
    """

    def __init__(self, scope: Construct, construct_id: str, *, spec: DeploymentSpec,
                 component: Construct | None = None) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.requests: ScalingRequests = render_scaling(
            spec, role_arn=service_linked_role_arn(stack.partition, stack.account))
        self.cfn_target = appscaling.CfnScalableTarget(
            self, "Target", **l1_kwargs(target_props(self.requests.target)))
        if component is not None:
            self.cfn_target.node.add_dependency(component)
        self.cfn_target_tracking = appscaling.CfnScalingPolicy(
            self, "TargetTracking", **l1_kwargs(self.requests.target_tracking))
        self.cfn_target_tracking.node.add_dependency(self.cfn_target)
        self.cfn_scale_from_zero: appscaling.CfnScalingPolicy | None = None
        self.cfn_no_capacity_alarm: cloudwatch.CfnAlarm | None = None
        self.alarm_request: dict[str, Any] | None = None
        if self.requests.scale_from_zero is not None:
            self.cfn_scale_from_zero = appscaling.CfnScalingPolicy(
                self, "ScaleFromZero", **l1_kwargs(self.requests.scale_from_zero))
            self.cfn_scale_from_zero.node.add_dependency(self.cfn_target)
            # Ref of a ScalingPolicy is its ARN.
            self.alarm_request = no_capacity_alarm(spec, self.cfn_scale_from_zero.ref)
            self.cfn_no_capacity_alarm = cloudwatch.CfnAlarm(
                self, "NoCapacityAlarm", **l1_kwargs(self.alarm_request))
            if component is not None:
                self.cfn_no_capacity_alarm.node.add_dependency(component)
        low, high = copy_bounds(spec)
        self.min_copies: int = low
        self.max_copies: int = high
