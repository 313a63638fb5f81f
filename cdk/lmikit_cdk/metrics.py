"""``metric_*()`` methods for inference components (one mixin, shared by the constructs).

Names, namespaces and dimensions follow :mod:`lmikit.metric_catalog`. SageMaker publishes no
copy-count metric: the copy-related metrics are the per-copy load metrics that drive the
copy-count autoscaling (read the count itself with DescribeInferenceComponent).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam

NS_SAGEMAKER = "AWS/SageMaker"
NS_INFERENCE_COMPONENTS = "/aws/sagemaker/InferenceComponents"
INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")
DEFAULT_PERIOD = cdk.Duration.minutes(1)


class ComponentMetrics:
    """Metrics of one inference component; the class sets ``inference_component_name``."""

    inference_component_name: str
    endpoint_arn: str

    def metric(self, metric_name: str, *, namespace: str = NS_SAGEMAKER,
               statistic: str = "Sum", period: cdk.Duration = DEFAULT_PERIOD,
               **props: Any) -> cloudwatch.Metric:
        """Any metric of this component (dimension InferenceComponentName)."""
        return cloudwatch.Metric(
            namespace=namespace, metric_name=metric_name, statistic=statistic, period=period,
            dimensions_map={"InferenceComponentName": self.inference_component_name}, **props)

    def metric_invocations(self, **props: Any) -> cloudwatch.Metric:
        """InvokeEndpoint requests (Sum per minute)."""
        return self.metric("Invocations", **props)

    def metric_errors(self, **props: Any) -> cloudwatch.Metric:
        """5xx responses (Sum per minute): errors SageMaker or the container caused."""
        return self.metric("Invocation5XXErrors", **props)

    def metric_client_errors(self, **props: Any) -> cloudwatch.Metric:
        """4xx responses (Sum per minute), including HTTP 424 from a failing formatter."""
        return self.metric("Invocation4XXErrors", **props)

    def metric_model_errors(self, **props: Any) -> cloudwatch.Metric:
        """Requests the model answered with an error (Sum per minute)."""
        return self.metric("InvocationModelErrors", **props)

    def metric_model_latency(self, **props: Any) -> cloudwatch.Metric:
        """Whole-response model latency in microseconds (p90 by default; not TTFT)."""
        props.setdefault("statistic", "p90")
        return self.metric("ModelLatency", unit=cloudwatch.Unit.MICROSECONDS, **props)

    def metric_invocations_per_copy(self, **props: Any) -> cloudwatch.Metric:
        """Invocations divided by the copy count (Sum per minute)."""
        return self.metric("InvocationsPerCopy", **props)

    def metric_concurrent_requests_per_copy(self, **props: Any) -> cloudwatch.Metric:
        """Requests in flight per copy (Maximum): what the copy-count target tracks."""
        props.setdefault("statistic", "Maximum")
        return self.metric("ConcurrentRequestsPerCopy", **props)

    def metric_no_capacity_invocation_failures(self, **props: Any) -> cloudwatch.Metric:
        """Requests rejected while no copy runs (Sum): wakes a scaled-to-zero endpoint."""
        return self.metric("NoCapacityInvocationFailures", **props)

    def metric_gpu_utilization(self, **props: Any) -> cloudwatch.Metric:
        """GPU use of the component's accelerators, percent (Average)."""
        props.setdefault("statistic", "Average")
        return self.metric("GPUUtilizationNormalized", namespace=NS_INFERENCE_COMPONENTS,
                           **props)

    def metric_gpu_memory_utilization(self, **props: Any) -> cloudwatch.Metric:
        """GPU memory use of the component's accelerators, percent (Average)."""
        props.setdefault("statistic", "Average")
        return self.metric("GPUMemoryUtilizationNormalized",
                           namespace=NS_INFERENCE_COMPONENTS, **props)

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to invoke this endpoint (InvokeEndpoint and the streaming call;
        sessions use the same actions). IAM scopes invocation to the endpoint ARN."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=list(INVOKE_ACTIONS),
                                          resource_arns=[self.endpoint_arn])
