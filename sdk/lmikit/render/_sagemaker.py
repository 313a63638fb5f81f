"""SageMaker API request dicts for an inference-component endpoint.

Rendered once, used twice: the boto3 deployer sends them as they are, and the CDK
constructs pass the same dicts to the L1 resources as CloudFormation properties.

The base component runs one of two ways:

- the model artifact (a single .tar.gz, botocore: ``Container.ArtifactUrl``) holds
  ``serving.properties``, the LMCache file and formatters; LMI fetches the weights itself;
- with network isolation the container reaches neither the Hub nor S3, so SageMaker copies
  the S3 weights into /opt/ml/model: a SageMaker Model (``CreateModel``,
  ``ModelDataSource.S3DataSource{S3Prefix, CompressionType None}``) that the component names
  with ``Specification.ModelName``, every option in the Model's environment.

``image_kind`` says which image runs (``stock`` LMI or ``lmikit``'s): the metrics path
scraped is one that image serves (:func:`lmikit.catalog.metrics_endpoint`).

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
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
from dataclasses import dataclass, field
from typing import Any

from lmikit.catalog import (
    DJL_METRICS_PATH,
    SCRAPE_DEFAULT_PATH,
    ImageKind,
    get_instance,
    on_demand_problem,
)
from lmikit.errors import RenderError
from lmikit.names import (
    DEPLOYMENT_TAG,
    MANAGED_BY_SPEC,
    MANAGED_BY_TAG,
    VARIANT_NAME,
    deployment_tags,
)
from lmikit.names import adapter_component_name as _adapter_component_name
from lmikit.names import base_component_name as _base_component_name
from lmikit.planner import Plan
from lmikit.render._env import CFN_ENVIRONMENT_MAX, container_environment, model_environment
from lmikit.render._hub_token import gated_problem
from lmikit.render._resolved import resolved_for
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

__all__ = ["DEPLOYMENT_TAG", "KV_AWARE_REFUSAL", "VARIANT_NAME", "ResourceNames",
           "SageMakerRequests", "adapter_component_name", "adapter_tags", "base_component_name",
           "copies_one_instance_holds", "render_requests", "sessions_problem", "start_problems",
           "startup_timeouts", "stock_disk_tier_clause", "stock_image_note",
           "stock_image_secret_problems", "tags"]
ROUTING = {
    "sticky_session": "LEAST_OUTSTANDING_REQUESTS",
    "least_outstanding": "LEAST_OUTSTANDING_REQUESTS",
    "random": "RANDOM",
    "prefix_aware": "PREFIX_AWARE",
}  # kv_aware: refused (KV_AWARE_REFUSAL)
# botocore ProductionVariantRoutingConfig.RoutingStrategy, KV_AWARE: "works only with supported
# containers, such as the SageMaker AI vLLM Deep Learning Container"; both images lmikit runs
# are AWS's LMI (djl-inference) image or built on it (container/Dockerfile FROM), not named.
KV_AWARE_REFUSAL = (
    "routing.strategy 'kv_aware' cannot be used on SageMaker with the LMI image: SageMaker "
    "documents that KV_AWARE \"works only with supported containers, such as the SageMaker AI "
    "vLLM Deep Learning Container\" (botocore ProductionVariantRoutingConfig.RoutingStrategy), "
    "and AWS's LMI image, which lmikit runs (its own image is built on it), is not one, so "
    "the endpoint would not route by KV cache. Valid on SageMaker: 'prefix_aware' (requests "
    "that share a prompt prefix go to the same copy), 'sticky_session', 'least_outstanding' "
    "or 'random'; 'kv_aware' stays valid for HyperPod (--target hyperpod)")


@dataclass(frozen=True)
class ResourceNames:
    endpoint: str
    endpoint_config: str
    variant: str
    base_component: str
    adapters: dict[str, str] = field(default_factory=dict)
    model: str | None = None


@dataclass(frozen=True)
class SageMakerRequests:
    """Keyword arguments for the boto3 SageMaker calls, in creation order."""

    names: ResourceNames
    endpoint_config: dict[str, Any]
    endpoint: dict[str, Any]
    base_component: dict[str, Any]
    adapter_components: dict[str, dict[str, Any]]
    model: dict[str, Any] | None = None  # CreateModel, when SageMaker copies S3 weights
    warnings: tuple[str, ...] = ()
    image_note: str | None = None  # what the stock image leaves out (stock_image_note)


def adapter_component_name(spec: DeploymentSpec, adapter: str) -> str:
    return _adapter_component_name(spec.name, adapter)


def base_component_name(spec: DeploymentSpec) -> str:
    return _base_component_name(spec.name)


def tags(spec: DeploymentSpec) -> list[dict[str, str]]:
    return deployment_tags(spec.name, spec.tags)


def adapter_tags(spec: DeploymentSpec) -> list[dict[str, str]]:
    """The tags of a spec adapter's component: the deployment's, and ``lmikit:managed-by=spec``
    (lmikit's own tags win over a spec tag of the same key)."""
    return deployment_tags(spec.name, {**spec.tags, MANAGED_BY_TAG: MANAGED_BY_SPEC})


def startup_timeouts(spec: DeploymentSpec, plan: Plan, *, resolved: Resolved | None = None
                     ) -> dict[str, int]:
    """Download and health-check timeouts sized from the weights and where they come from
    (:func:`lmikit.planner.estimate_startup`: rates, margin, 600..3600 s)."""
    start = resolved_for(spec, plan, None, resolved).startup
    return {"ModelDataDownloadTimeoutInSeconds": start.download_timeout_s,
            "ContainerStartupHealthCheckTimeoutInSeconds": start.health_check_timeout_s}


def routing_config(spec: DeploymentSpec) -> dict[str, Any]:
    r = spec.routing
    out: dict[str, Any] = {"RoutingStrategy": ROUTING[r.strategy]}
    if r.strategy == "prefix_aware":
        length, threshold = spec.prefix_aware_settings
        out["PrefixAwareRoutingConfig"] = {"PrefixLength": length,
                                           "ConcurrencyThreshold": threshold}
    return out


def start_problems(spec: DeploymentSpec, plan: Plan, *, resolved: Resolved | None = None
                   ) -> list[str]:
    """Why the endpoint would not start: a gated Hub model with no token, or a start that
    cannot fit SageMaker's 3600 s caps (:func:`lmikit.planner.startup_problem`)."""
    resolved = resolved_for(spec, plan, None, resolved)
    found = (gated_problem(spec, "sagemaker", resolved.hub_gate), resolved.startup_problem)
    return [problem for problem in found if problem]


def stock_image_secret_problems(spec: DeploymentSpec) -> list[str]:
    """Secrets the spec names that only lmikit's image can read: the stock LMI image has no
    start step that fetches a Secrets Manager secret (lmikit_runtime.start does)."""
    image = ("deploy lmikit's image (container/Dockerfile, passed as image_uri with image_kind "
             "'lmikit'; CDK picks it for this spec) or remove the field")
    out = []
    if spec.security.hf_token_secret_arn:
        out.append("security.hf_token_secret_arn: the stock LMI image cannot read a Secrets "
                   f"Manager secret; {image}")
    if spec.kv_cache.remote_credentials_secret_arn:
        out.append("kv_cache.remote_credentials_secret_arn: the stock LMI image cannot read a "
                   "Secrets Manager secret and hand the credentials to LMCache (it has no start "
                   f"step, and credentials are never rendered into the URL); {image}")
    return out


def volume_kms_key(spec: DeploymentSpec, *, resolved: Resolved | None = None) -> str | None:
    """The KMS key for the endpoint volume, or None where it must not be set."""
    sec = spec.security
    if not sec.kms_key_arn or sec.kms_volume_encryption == "off":
        return None
    inst = resolved.instance if resolved is not None else get_instance(spec.instance.type)
    if inst.has_nvme:
        if sec.kms_volume_encryption == "required":
            raise RenderError(
                f"security.kms_volume_encryption is 'required' but {inst.name} has local NVMe "
                "instance storage, and SageMaker rejects KmsKeyId for such instance types (the "
                "instance store is hardware-encrypted). Set it to 'auto' or choose an "
                "instance type without local storage")
        return None
    return sec.kms_key_arn


def stock_image_note(spec: DeploymentSpec, plan: Plan, *, resolved: Resolved | None = None
                     ) -> str | None:
    """What AWS's stock LMI image leaves out of this spec's deployment, in one line that
    says what to change; None where it leaves out nothing. The stock image serves only DJL's
    server metrics (:func:`lmikit.catalog.metrics_endpoint`), cannot be scraped at
    all where SageMaker copies the weights, and runs a disk tier sized at deploy time for a
    /tmp lmikit cannot measure (:func:`stock_disk_tier_clause`)."""
    left_out = []
    if spec.observability.detailed_metrics:
        copies = (", and with weights SageMaker copies (security.network_isolation) detailed "
                  f"observability is off, as it scrapes {SCRAPE_DEFAULT_PATH}"
                  if resolved_for(spec, plan, None, resolved).sagemaker_copies_weights
                  else "")
        left_out.append(f"it serves only DJL's server metrics ({DJL_METRICS_PATH}), so the "
                        "dashboard and alarms leave out the vLLM and LMCache ones" + copies)
    disk = stock_disk_tier_clause(plan)
    if disk:
        left_out.append(disk)
    if not left_out:
        return None
    does = " and ".join(
        (["publishes them"] if spec.observability.detailed_metrics else [])
        + (["measures /tmp at start (the tier is then off, or a fixed "
            "kv_cache.disk_size_gb refused, where it does not fit)"] if disk else []))
    return ("checked for AWS's stock LMI image, which `lmikit deploy` runs: "
            + "; ".join(left_out) + f". lmikit's image {does}: `cdk deploy` builds it, and "
            "`--image lmikit` checks for it")


def stock_disk_tier_clause(plan: Plan) -> str | None:
    """What lmikit cannot check about a disk tier the stock image runs, or None without one:
    its size is written at deploy time (the image has no start step) for a /tmp whose place
    SageMaker does not document for hosting (:mod:`lmikit.planner`, the ML storage volume)."""
    if plan.tier != "cpu+disk" or plan.volume is None:
        return None
    sizes = plan.lmcache
    return (f"its LMCache disk tier is fixed at {sizes['max_local_disk_size_gb']:g} GB per "
            f"worker x {sizes['workers']} workers at {sizes['local_disk']}, sized from "
            f"{plan.instance_type}'s {plan.volume.size_gb:g} GB of instance store less every "
            "copy's weights, but SageMaker does not document where a hosting container's "
            "instance storage is mounted (djl-serving's own LMCache set-up assumes /tmp is the "
            "NVMe); LMCache bounds the tier by that size only, not by the free space, so on a "
            "smaller /tmp its writes fail")


def copies_one_instance_holds(spec: DeploymentSpec, plan: Plan, *,
                              resolved: Resolved | None = None) -> int:
    """The most copies of the base component SageMaker can place on one instance. It allocates
    every copy its ComputeResourceRequirements (botocore
    InferenceComponentComputeResourceRequirements: accelerators, CPU cores, memory "to
    allocate to run a model"): TP GPUs, ``plan.cpu_cores`` cores and ``plan.min_memory_mb``
    here, so the instance's GPUs, vCPUs and memory bound it. ``plan.cpu_cores`` (vCPUs per
    planned copy, less one) keeps it at ``instance.copies_per_instance``."""
    inst = resolved.instance if resolved is not None else get_instance(spec.instance.type)
    return max(1, min(inst.gpu_count // plan.tp, int(inst.vcpus // plan.cpu_cores),
                      int(inst.host_memory_gib * 1024 // plan.min_memory_mb)))


def sessions_problem(spec: DeploymentSpec, plan: Plan, *, resolved: Resolved | None = None
                     ) -> str | None:
    """Why stateful sessions cannot work on this endpoint, or None. SageMaker pins a session
    to an INSTANCE (botocore InvokeEndpoint.SessionId: "routes the request to the same
    instance that supports the session"); LMI keeps it in the container that opened it
    (djl-serving djl_python/session_manager.py: a per-process dict, loaded once at start;
    get_session raises "session not found" for any other id, answered 424). With two copies
    on one instance, a turn can reach the copy that does not hold its session."""
    if not spec.sessions_enabled:
        return None
    held = copies_one_instance_holds(spec, plan, resolved=resolved)
    if held < 2:
        return None
    field = ("routing.strategy 'sticky_session'" if spec.routing.strategy == "sticky_session"
             else "sessions.enabled")
    return (f"{field}: stateful sessions need one model copy per instance, but up to {held} "
            f"copies can share one {spec.instance.type} (instance.copies_per_instance "
            f"{spec.instance.copies_per_instance}; each copy takes {plan.tp} GPU(s), "
            f"{plan.cpu_cores:g} CPU cores, {plan.min_memory_mb} MB). SageMaker pins a "
            "session to an instance, not to a copy, and LMI keeps a session in the copy that "
            "opened it, so a turn that lands on another copy fails with 'session not found'. "
            "Set instance.copies_per_instance: 1 (lmikit then reserves the instance's CPU "
            "cores for one copy), or routing.strategy: prefix_aware, which SageMaker routes "
            "to the same copy by prompt prefix, without sessions")


def weights_model_py_warning(spec: DeploymentSpec) -> str:
    """LoRA + LMCache + weights SageMaker copies: the isolating model.py lives in the S3 prefix
    (:func:`lmikit.render.weights_model_py`), which only a deployer can check."""
    return (f"model.id {spec.model.id}: with LoRA and the KV cache, the weights' prefix must "
            "hold lmikit's model.py, which keeps LoRA adapters' LMCache keys apart (LMCache's "
            "key has no LoRA id; SageMaker copies the prefix into /opt/ml/model, where LMI "
            "loads it). `lmikit weights stage MODEL_ID "
            f"{spec.model.id} --lora-isolation` writes it; `lmikit deploy` refuses to deploy "
            "without it, and `cdk synth`, which cannot read S3, refuses the spec")


def capacity_warning(spec: DeploymentSpec, *, resolved: Resolved | None = None) -> str | None:
    """Why the spec's instances may not start: its type has no on-demand hosting in its region
    and it names no reservation (:func:`lmikit.catalog.on_demand_problem`). The render,
    ``lmikit deploy`` and the CDK construct all say it."""
    if spec.instance.capacity_reservation_arn:
        return None
    if resolved is not None:
        return resolved.on_demand_problem
    return on_demand_problem(spec.region, spec.instance.type)


def render_requests(spec: DeploymentSpec, plan: Plan, *, image_uri: str,
                    execution_role_arn: str, model_artifact_url: str | None,
                    adapter_artifact_urls: dict[str, str] | None = None,
                    image_kind: ImageKind = "stock", resolved: Resolved | None = None
                    ) -> SageMakerRequests:
    """All request dicts for one deployment.

    ``image_kind`` is the image ``image_uri`` names: ``stock`` (AWS's LMI image) or
    ``lmikit`` (``container/Dockerfile``); it decides which metrics path is scraped and
    which variables the container gets. ``resolved``: the decisions of (spec, plan,
    image_kind), when the caller made them.
    """
    resolved = resolved_for(spec, plan, image_kind, resolved)
    adapter_artifact_urls = adapter_artifact_urls or {}
    missing = [a.name for a in spec.adapters if a.name not in adapter_artifact_urls]
    if missing:
        raise RenderError(f"no artifact URL for adapter(s): {', '.join(missing)}")
    refused = stock_image_secret_problems(spec) if image_kind == "stock" else []
    refused += start_problems(spec, plan, resolved=resolved)
    if spec.routing.strategy == "kv_aware":
        refused.append(KV_AWARE_REFUSAL)
    problem = sessions_problem(spec, plan, resolved=resolved)
    if problem:
        refused.append(problem)
    if refused:
        raise RenderError("; ".join(refused))
    sagemaker_copies = resolved.sagemaker_copies_weights
    warnings: list[str] = []
    timeouts = startup_timeouts(spec, plan, resolved=resolved)
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
    if plan.volume is not None and plan.volume.volume_size_in_gb:
        variant["VolumeSizeInGB"] = plan.volume.volume_size_in_gb
    reservation = spec.instance.capacity_reservation_arn
    if reservation:
        variant["CapacityReservationConfig"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "MlReservationArn": reservation}
    problem = capacity_warning(spec, resolved=resolved)
    if problem:
        warnings.append(problem)
    if sagemaker_copies and resolved.isolates_base:
        warnings.append(weights_model_py_warning(spec))
    metrics_config = _container_metrics(spec, resolved)
    config: dict[str, Any] = {
        "ProductionVariants": [variant],
        "ExecutionRoleArn": execution_role_arn,
        "Tags": tags(spec),
    }
    obs = spec.observability
    config["MetricsConfig"] = {
        "EnableEnhancedMetrics": True,
        "EnableDetailedObservability": obs.detailed_metrics and (
            metrics_config is not None or (sagemaker_copies and image_kind == "lmikit")),
        "MetricPublishFrequencyInSeconds": obs.metric_publish_frequency_seconds,
    }
    kms = volume_kms_key(spec, resolved=resolved)
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

    base_name = base_component_name(spec)
    model: dict[str, Any] | None = None
    specification: dict[str, Any]
    if sagemaker_copies:
        model = model_request(spec, plan, image_uri=image_uri,
                              execution_role_arn=execution_role_arn, image_kind=image_kind,
                              resolved=resolved)
        specification = {"ModelName": model["ModelName"]}
    else:
        if not model_artifact_url:
            raise RenderError("the base component needs its model artifact (serving.properties "
                              "names the model): no model_artifact_url was given")
        # An unresolved CDK token is checked where CDK names the object (TarballAsset).
        if "${Token[" not in model_artifact_url and not model_artifact_url.endswith(".tar.gz"):
            raise RenderError(f"model artifact {model_artifact_url!r}: SageMaker takes a single "
                              ".tar.gz (botocore: Container.ArtifactUrl)")
        container: dict[str, Any] = {
            "Image": image_uri, "ArtifactUrl": model_artifact_url,
            "Environment": container_environment(spec, plan, image=image_kind,
                                                 resolved=resolved)}
        if metrics_config:
            container["ContainerMetricsConfig"] = metrics_config
        if len(container["Environment"]) > CFN_ENVIRONMENT_MAX:
            raise RenderError(f"the container environment has {len(container['Environment'])} "
                              f"variables; CloudFormation accepts {CFN_ENVIRONMENT_MAX}")
        specification = {"Container": container}
    base = {
        "InferenceComponentName": base_name,
        "EndpointName": spec.name,
        "VariantName": VARIANT_NAME,
        "Specification": {
            **specification,
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
            "Tags": adapter_tags(spec),
        }
    endpoint = {"EndpointName": spec.name, "EndpointConfigName": config_name,
                "Tags": tags(spec)}
    return SageMakerRequests(
        names=ResourceNames(spec.name, config_name, VARIANT_NAME, base_name, names,
                            model["ModelName"] if model else None),
        endpoint_config=config, endpoint=endpoint, base_component=base,
        adapter_components=adapters, model=model, warnings=tuple(warnings),
        image_note=(stock_image_note(spec, plan, resolved=resolved) if image_kind == "stock"
                    else None),
    )


def _container_metrics(spec: DeploymentSpec, resolved: Resolved) -> dict[str, Any] | None:
    """``ContainerMetricsConfig`` for a path the image serves, or None.

    A component that names a SageMaker Model has no ``Container`` (and CloudFormation's
    AWS::SageMaker::Model has no ContainerMetricsConfig), so SageMaker scrapes its default
    /metrics: lmikit's image serves it there; the stock image serves nothing there, so
    detailed observability stays off (:func:`stock_image_note` says so).
    """
    obs = spec.observability
    if not obs.detailed_metrics:
        return None
    endpoint = resolved.metrics_endpoint
    if resolved.sagemaker_copies_weights:
        if resolved.image_kind == "lmikit" and endpoint.path != SCRAPE_DEFAULT_PATH:
            raise RenderError(
                f"observability.metrics_path {obs.metrics_path!r}: with weights copied by "
                "SageMaker (security.network_isolation) the component names a SageMaker "
                f"Model, whose scrape path cannot be set; SageMaker scrapes "
                f"{SCRAPE_DEFAULT_PATH}. Use {SCRAPE_DEFAULT_PATH}")
        return None
    return {"MetricsEndpoints": [{
        "MetricsEndpointPath": endpoint.path,
        "MetricPublishFrequencyInSeconds": obs.metric_publish_frequency_seconds,
    }]}


def model_request(spec: DeploymentSpec, plan: Plan, *, image_uri: str,
                  execution_role_arn: str, image_kind: ImageKind = "stock",
                  resolved: Resolved | None = None) -> dict[str, Any]:
    """``CreateModel`` for weights SageMaker copies from ``model.id`` into /opt/ml/model.

    ``S3DataType`` S3Prefix with ``CompressionType`` None copies every object under the
    prefix as it is (botocore: S3ModelDataSource). The name carries a hash of the content:
    a Model cannot change, a changed one is a new Model the component is updated to. (The
    CDK construct leaves the name to CloudFormation, which replaces a changed Model.)
    """
    prefix = spec.model.id.rstrip("/") + "/"
    body: dict[str, Any] = {
        "PrimaryContainer": {
            "Image": image_uri,
            "ModelDataSource": {"S3DataSource": {
                "S3Uri": prefix, "S3DataType": "S3Prefix", "CompressionType": "None"}},
            "Environment": model_environment(spec, plan, image=image_kind, resolved=resolved),
        },
        "ExecutionRoleArn": execution_role_arn,
        "EnableNetworkIsolation": spec.security.network_isolation,
    }
    if spec.security.vpc:
        body["VpcConfig"] = {"SecurityGroupIds": list(spec.security.vpc.security_group_ids),
                             "Subnets": list(spec.security.vpc.subnet_ids)}
    content = copy.deepcopy(body)
    content.pop("ExecutionRoleArn", None)  # a token under CDK; one role per deployment
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
    return {"ModelName": f"{spec.name}-model-{digest}", **body, "Tags": tags(spec)}


def endpoint_config_name(spec: DeploymentSpec, config: dict[str, Any]) -> str:
    """``<name>-<hash>``: a changed config gets a new name (configs are immutable)."""
    content = copy.deepcopy(config)
    content.pop("ExecutionRoleArn", None)  # a token under CDK; the role is per deployment
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
    return f"{spec.name}-{digest}"
