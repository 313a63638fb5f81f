"""SageMaker API request dicts for an inference-component endpoint.

Rendered once, used twice: the boto3 deployer sends them as they are, and the CDK
constructs pass the same dicts to the L1 resources as CloudFormation properties.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.plan import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> r = render_requests(spec, plan_spec(spec), image_uri="img:1",
...     execution_role_arn="arn:aws:iam::123456789012:role/r",
...     model_artifact_url="s3://b/k.tar.gz")
>>> "ModelName" in r.endpoint_config["ProductionVariants"][0]
False
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from lmikit.catalog.instances import get_instance
from lmikit.errors import RenderError
from lmikit.names import DEPLOYMENT_TAG, VARIANT_NAME, deployment_tags
from lmikit.names import adapter_component_name as _adapter_component_name
from lmikit.names import base_component_name as _base_component_name
from lmikit.plan import Plan
from lmikit.render.env import CFN_ENVIRONMENT_MAX, container_environment
from lmikit.spec import DeploymentSpec

__all__ = ["DEPLOYMENT_TAG", "VARIANT_NAME", "ResourceNames", "SageMakerRequests",
           "adapter_component_name", "base_component_name", "render_requests", "tags"]
ROUTING = {
    "sticky_session": "LEAST_OUTSTANDING_REQUESTS",
    "least_outstanding": "LEAST_OUTSTANDING_REQUESTS",
    "random": "RANDOM",
    "prefix_aware": "PREFIX_AWARE",
    "kv_aware": "KV_AWARE",
}
DEFAULT_PREFIX_LENGTH = 4096


@dataclass(frozen=True)
class ResourceNames:
    endpoint: str
    endpoint_config: str
    variant: str
    base_component: str
    adapters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SageMakerRequests:
    """Keyword arguments for the boto3 SageMaker calls, in creation order."""

    names: ResourceNames
    endpoint_config: dict[str, Any]
    endpoint: dict[str, Any]
    base_component: dict[str, Any]
    adapter_components: dict[str, dict[str, Any]]


def adapter_component_name(spec: DeploymentSpec, adapter: str) -> str:
    return _adapter_component_name(spec.name, adapter)


def base_component_name(spec: DeploymentSpec) -> str:
    return _base_component_name(spec.name)


def tags(spec: DeploymentSpec) -> list[dict[str, str]]:
    return deployment_tags(spec.name, spec.tags)


def startup_timeouts(plan: Plan) -> dict[str, int]:
    """Download and health-check timeouts sized for the weights (60..3600 s each).

    Assumes >= 100 MB/s from the Hub or S3 and ~1 GB/s into GPU memory, plus warm-up
    (CUDA graphs, LMCache allocation) with a 2x margin.
    """
    gb = plan.weight_bytes / 1e9
    download = min(3600, max(600, math.ceil(2 * gb / 0.1 / 60) * 60))
    health = min(3600, max(600, math.ceil((2 * gb / 1.0 + 300) / 60) * 60))
    return {"ModelDataDownloadTimeoutInSeconds": download,
            "ContainerStartupHealthCheckTimeoutInSeconds": health}


def routing_config(spec: DeploymentSpec) -> dict[str, Any]:
    r = spec.routing
    out: dict[str, Any] = {"RoutingStrategy": ROUTING[r.strategy]}
    if r.strategy == "prefix_aware":
        out["PrefixAwareRoutingConfig"] = {
            "PrefixLength": r.prefix_length or DEFAULT_PREFIX_LENGTH,
            "ConcurrencyThreshold": r.concurrency_threshold
            or min(1024, max(1, 2 * spec.workload.concurrency)),
        }
    return out


def volume_kms_key(spec: DeploymentSpec) -> str | None:
    """The KMS key for the endpoint volume, or None where it must not be set."""
    sec = spec.security
    if not sec.kms_key_arn or sec.kms_volume_encryption == "off":
        return None
    inst = get_instance(spec.instance.type)
    if inst.has_nvme:
        if sec.kms_volume_encryption == "required":
            raise RenderError(
                f"security.kms_volume_encryption is 'required' but {inst.name} has local NVMe "
                "instance storage, and SageMaker rejects KmsKeyId for such instance types (the "
                "instance store is hardware-encrypted). Set it to 'auto' or choose an "
                "instance type without local storage")
        return None
    return sec.kms_key_arn


def render_requests(spec: DeploymentSpec, plan: Plan, *, image_uri: str,
                    execution_role_arn: str, model_artifact_url: str | None,
                    adapter_artifact_urls: dict[str, str] | None = None) -> SageMakerRequests:
    """All request dicts for one deployment."""
    adapter_artifact_urls = adapter_artifact_urls or {}
    missing = [a.name for a in spec.adapters if a.name not in adapter_artifact_urls]
    if missing:
        raise RenderError(f"no artifact URL for adapter(s): {', '.join(missing)}")
    timeouts = startup_timeouts(plan)
    variant: dict[str, Any] = {
        "VariantName": VARIANT_NAME,
        "InstanceType": spec.instance.type,
        "InitialInstanceCount": max(1, spec.instance.min_count),
        "ManagedInstanceScaling": {
            "Status": "ENABLED",
            "MinInstanceCount": spec.instance.min_count,
            "MaxInstanceCount": spec.instance.max_count,
        },
        "RoutingConfig": routing_config(spec),
        **timeouts,
    }
    config: dict[str, Any] = {
        "ProductionVariants": [variant],
        "ExecutionRoleArn": execution_role_arn,
        "Tags": tags(spec),
    }
    obs = spec.observability
    config["MetricsConfig"] = {
        "EnableEnhancedMetrics": True,
        "EnableDetailedObservability": obs.detailed_metrics,
        "MetricPublishFrequencyInSeconds": obs.metric_publish_frequency_seconds,
    }
    kms = volume_kms_key(spec)
    if kms:
        config["KmsKeyId"] = kms
    if spec.security.vpc:
        config["VpcConfig"] = {
            "SecurityGroupIds": list(spec.security.vpc.security_group_ids),
            "Subnets": list(spec.security.vpc.subnet_ids),
        }
    if spec.security.network_isolation:
        config["EnableNetworkIsolation"] = True
    config_name = endpoint_config_name(spec, config)
    config = {"EndpointConfigName": config_name, **config}

    container: dict[str, Any] = {"Image": image_uri,
                                 "Environment": container_environment(spec, plan)}
    if model_artifact_url:
        container["ArtifactUrl"] = model_artifact_url
    if obs.detailed_metrics:
        container["ContainerMetricsConfig"] = {"MetricsEndpoints": [{
            "MetricsEndpointPath": obs.metrics_path,
            "MetricPublishFrequencyInSeconds": obs.metric_publish_frequency_seconds,
        }]}
    if len(container["Environment"]) > CFN_ENVIRONMENT_MAX:
        raise RenderError(f"the container environment has {len(container['Environment'])} "
                          f"variables; CloudFormation accepts {CFN_ENVIRONMENT_MAX}")
    base_name = base_component_name(spec)
    base = {
        "InferenceComponentName": base_name,
        "EndpointName": spec.name,
        "VariantName": VARIANT_NAME,
        "Specification": {
            "Container": container,
            "StartupParameters": dict(timeouts),
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": float(plan.tp),
                "NumberOfCpuCoresRequired": plan.cpu_cores,
                "MinMemoryRequiredInMb": plan.min_memory_mb,
            },
        },
        "RuntimeConfig": {"CopyCount": spec.instance.copies_per_instance
                          * max(1, spec.instance.min_count)},
        "Tags": tags(spec),
    }
    adapters = {}
    names = {}
    for a in spec.adapters:
        name = adapter_component_name(spec, a.name)
        names[a.name] = name
        adapters[a.name] = {
            "InferenceComponentName": name,
            "EndpointName": spec.name,
            "Specification": {
                "BaseInferenceComponentName": base_name,
                "Container": {"ArtifactUrl": adapter_artifact_urls[a.name]},
            },
            "Tags": tags(spec),
        }
    endpoint = {"EndpointName": spec.name, "EndpointConfigName": config_name,
                "Tags": tags(spec)}
    return SageMakerRequests(
        names=ResourceNames(spec.name, config_name, VARIANT_NAME, base_name, names),
        endpoint_config=config, endpoint=endpoint, base_component=base,
        adapter_components=adapters,
    )


def endpoint_config_name(spec: DeploymentSpec, config: dict[str, Any]) -> str:
    """``<name>-<hash>``: a changed config gets a new name (configs are immutable)."""
    content = copy.deepcopy(config)
    content.pop("ExecutionRoleArn", None)  # a token under CDK; the role is per deployment
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
    return f"{spec.name}-{digest}"
