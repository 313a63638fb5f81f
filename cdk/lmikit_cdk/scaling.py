"""Application Auto Scaling of the base component's copy count, including scale from zero.

* Target tracking on ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``
  with the spec's ``workload.concurrency`` (requests in flight per copy) as the target.
* When ``instance.min_count`` is 0 the copy count may reach 0, and target tracking cannot
  wake it (no copy, no per-copy metric). A step policy adds one instance worth of copies when
  an alarm sees ``NoCapacityInvocationFailures >= 1``.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from constructs import Construct

from lmikit.spec import DeploymentSpec

SCALABLE_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
TARGET_METRIC = appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION  # noqa: E501
# Application Auto Scaling's service-linked role for SageMaker: no role of our own.
SERVICE_LINKED_ROLE = ("aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                       "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
SCALE_IN_COOLDOWN = cdk.Duration.minutes(5)
SCALE_OUT_COOLDOWN = cdk.Duration.minutes(1)


def copy_bounds(spec: DeploymentSpec) -> tuple[int, int]:
    """(min, max) copies: copies per instance times the instance bounds."""
    per = spec.instance.copies_per_instance
    return per * spec.instance.min_count, per * spec.instance.max_count


class CopyCountScaling(Construct):
    """Scaling of one inference component's copy count.

    :param component_name: the literal inference component name.
    :param spec: supplies the bounds and the concurrency target.
    """

    def __init__(self, scope: Construct, construct_id: str, *, component_name: str,
                 spec: DeploymentSpec,
                 no_capacity_metric: cloudwatch.Metric) -> None:
        super().__init__(scope, construct_id)
        low, high = copy_bounds(spec)
        stack = cdk.Stack.of(self)
        self.service_role = iam.Role.from_role_arn(
            self, "ServiceLinkedRole",
            f"arn:{stack.partition}:iam::{stack.account}:role/{SERVICE_LINKED_ROLE}",
            mutable=False)
        self.target = appscaling.ScalableTarget(
            self, "Target", service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"inference-component/{component_name}",
            scalable_dimension=SCALABLE_DIMENSION, min_capacity=low, max_capacity=high,
            role=self.service_role)
        self.target_tracking = self.target.scale_to_track_metric(
            "ConcurrencyPerCopy", target_value=float(spec.workload.concurrency),
            predefined_metric=TARGET_METRIC, scale_in_cooldown=SCALE_IN_COOLDOWN,
            scale_out_cooldown=SCALE_OUT_COOLDOWN)
        self.scale_from_zero: appscaling.StepScalingAction | None = None
        self.no_capacity_alarm: cloudwatch.Alarm | None = None
        if low == 0:
            self.scale_from_zero = appscaling.StepScalingAction(
                self, "ScaleOutFromZero", scaling_target=self.target,
                adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
                cooldown=SCALE_OUT_COOLDOWN)
            self.scale_from_zero.add_adjustment(
                adjustment=spec.instance.copies_per_instance, lower_bound=0)
            self.no_capacity_alarm = cloudwatch.Alarm(
                self, "NoCapacityAlarm", metric=no_capacity_metric, threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator
                .GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1, datapoints_to_alarm=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{component_name} was invoked with no copy running: "
                "scale out from zero")
            self.no_capacity_alarm.add_alarm_action(
                cw_actions.ApplicationScalingAction(self.scale_from_zero))
