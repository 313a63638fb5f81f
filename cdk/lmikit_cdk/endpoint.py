"""``LmiEndpoint``: an inference-component endpoint rendered from one deployment spec.

The SageMaker request dicts come from :func:`lmikit.render.render_requests`, the
same function the boto3 deployer uses, and become the L1 properties unchanged (re-cased for
jsii only). Tokens fill the fields only CDK knows: the role ARN, the artifact URLs, for
lmikit's own image the image URI, and the name of the SageMaker Model (with network
isolation SageMaker copies the S3 weights; CloudFormation names the Model, so a changed one
is replaced rather than clashing with its own name).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from lmikit.catalog import ImageKind, get_instance
from lmikit.errors import RenderError
from lmikit.planner import Plan, plan_spec
from lmikit.render import (
    KV_AWARE_REFUSAL,
    SageMakerRequests,
    capacity_warning,
    model_artifact,
    render_requests,
    volume_kms_key,
    weights_model_py,
)
from lmikit.resolve import Resolved, resolve_spec
from lmikit.spec import DeploymentSpec
from lmikit_cdk import nag
from lmikit_cdk._cfn import l1_kwargs
from lmikit_cdk.adapter import LoraAdapter
from lmikit_cdk.artifacts import PublishedArtifact, TarballAsset, published
from lmikit_cdk.image import ImageMode, LmiImage
from lmikit_cdk.kms_artifacts import KmsArtifactStore
from lmikit_cdk.metrics import ComponentMetrics
from lmikit_cdk.observability import LmiObservability
from lmikit_cdk.role import ExecutionRole
from lmikit_cdk.scaling import CopyCountScaling

PENDING_ADAPTER_URL = "s3://lmikit-pending/adapter.tar.gz"

WEIGHTS_MODEL_PY_MESSAGE = (
    "LoRA with a KV cache tier and security.network_isolation needs lmikit's model.py in the "
    "weights' prefix {prefix} (SageMaker copies that prefix into /opt/ml/model, and LMCache's "
    "cache key has no LoRA id: that model.py keeps adapters' KV apart), and a CDK synth cannot "
    "read S3 to check it is there. Deploy this spec with `lmikit deploy`, which checks it, "
    "after `lmikit weights stage MODEL_ID {prefix} --lora-isolation` writes it; or turn LoRA, "
    "the KV cache (kv_cache.mode 'off') or network isolation off")


def validate_for_cdk(spec: DeploymentSpec, plan: Plan | None = None) -> None:
    """Every reason this spec cannot be synthesized, raised once as a RenderError.

    CloudFormation's 16-entry cap on the container Environment is enforced by
    render_requests, on exactly what the template carries."""
    errors = []
    if spec.routing.strategy == "kv_aware":
        errors.append(KV_AWARE_REFUSAL)
    if plan is not None and weights_model_py(spec, plan) is not None:
        errors.append(WEIGHTS_MODEL_PY_MESSAGE.format(prefix=spec.model.id))
    try:
        volume_kms_key(spec)
    except RenderError as exc:
        errors.append(str(exc))
    if errors:
        raise RenderError("; ".join(errors))


class LmiEndpoint(ComponentMetrics, Construct):
    """Endpoint config, endpoint, base inference component, LoRA adapters and scaling.

    >>> endpoint = LmiEndpoint(stack, "Endpoint", spec=load_spec("d.yaml"))  # doctest: +SKIP
    >>> endpoint.grant_invoke(my_lambda)  # doctest: +SKIP

    :param spec: the deployment.
    :param base_dir: directory the spec's relative paths (formatters, adapters, model
        config) resolve against; default ".".
    :param plan: the capacity plan; default ``plan_spec(spec, base_dir)``.
    :param image: the image; default ``LmiImage.for_spec(..., mode=image_mode)``.
    :param image_mode: ``auto`` (default), ``stock`` or ``custom``; see :class:`LmiImage`.
    :param build_context: repository root for lmikit's own image.
    :param autoscaling: create copy-count autoscaling (default True).
    :param artifact_bucket: with ``security.kms_key_arn``, the bucket artifacts are copied
        into, SSE-KMS with that key (default: a bucket this construct creates).
    :param observability: create the dashboard and default alarms the spec asks for
        (``observability.dashboard``, ``observability.alarms.enabled``; default True).
    """

    def __init__(self, scope: Construct, construct_id: str, *, spec: DeploymentSpec,
                 base_dir: str | Path = ".", plan: Plan | None = None,
                 image: LmiImage | None = None, image_mode: ImageMode = "auto",
                 build_context: str | Path | None = None, autoscaling: bool = True,
                 observability: bool = True,
                 artifact_bucket: s3.IBucket | None = None) -> None:
        super().__init__(scope, construct_id)
        # defaults
        self.spec = spec
        self.base_dir = Path(base_dir)
        self.plan = plan or plan_spec(spec, self.base_dir)
        # validate
        validate_for_cdk(spec, self.plan)
        # children: image, role, artifacts
        self.image = image or LmiImage.for_spec(self, "Image", spec, mode=image_mode,
                                                build_context=build_context)
        self.execution_role = ExecutionRole(self, "ExecutionRole", spec=spec)
        # every decision the renderers derive from (spec, plan, image), made once
        self.resolved: Resolved = resolve_spec(spec, self.plan, image_kind=self.image_kind)
        data = model_artifact(spec, self.plan, self.base_dir, image=self.image_kind,
                              resolved=self.resolved)
        self.artifact_store: KmsArtifactStore | None = None
        if spec.security.kms_key_arn and (data is not None or any(
                not a.source.startswith("s3://") for a in spec.adapters)):
            self.artifact_store = KmsArtifactStore(self, "Artifacts",
                                                   key_arn=spec.security.kms_key_arn,
                                                   prefix=f"lmikit/{spec.name}",
                                                   bucket=artifact_bucket)
        self.model_artifact: TarballAsset | None = None
        self.model_artifact_location: PublishedArtifact | None = None
        if data is not None:
            self.model_artifact = TarballAsset(self, "ModelArtifact", data=data,
                                               display_name=f"{spec.name} model artifact")
            self.model_artifact_location = self.publish_artifact(
                "Model", self.model_artifact, "model", len(data))
            self.execution_role.grant_read_objects("model",
                                                   self.model_artifact_location.bucket_name,
                                                   self.model_artifact_location.object_key)
        # render
        self.requests = self.render()
        names = self.requests.names
        self.endpoint_name: str = names.endpoint
        self.endpoint_config_name: str = names.endpoint_config
        self.variant_name: str = names.variant
        self.inference_component_name: str = names.base_component
        # L1 resources
        self.cfn_endpoint_config = sagemaker.CfnEndpointConfig(
            self, "EndpointConfig", **l1_kwargs(self.requests.endpoint_config))
        problem = capacity_warning(spec, resolved=self.resolved)
        if problem:  # `cdk synth` and `cdk deploy` print it; --strict makes it an error
            cdk.Annotations.of(self.cfn_endpoint_config).add_warning_v2(
                "lmikit:NoOnDemandHosting", problem)
        self.cfn_endpoint = sagemaker.CfnEndpoint(self, "Endpoint",
                                                  **l1_kwargs(self.requests.endpoint))
        self.cfn_endpoint.node.add_dependency(self.cfn_endpoint_config)
        # SageMaker assumes the role when it creates the endpoint: its policy must exist.
        self.cfn_endpoint.node.add_dependency(self.execution_role.policy)
        self.cfn_model: sagemaker.CfnModel | None = None
        base_props = self.requests.base_component
        if self.requests.model is not None:
            model_props = {k: v for k, v in self.requests.model.items() if k != "ModelName"}
            self.cfn_model = sagemaker.CfnModel(self, "Model", **l1_kwargs(model_props))
            # SageMaker checks the role when it creates the Model and copies the weights.
            self.cfn_model.node.add_dependency(self.execution_role.policy)
            base_props = copy.deepcopy(base_props)
            base_props["Specification"]["ModelName"] = self.cfn_model.attr_model_name
        self.cfn_inference_component = sagemaker.CfnInferenceComponent(
            self, "BaseComponent", **l1_kwargs(base_props))
        self.cfn_inference_component.node.add_dependency(self.cfn_endpoint)
        if self.model_artifact_location is not None:
            self.cfn_inference_component.node.add_dependency(self.model_artifact_location.ready)
        self.endpoint_arn: str = self.cfn_endpoint.attr_endpoint_arn
        self.endpoint_config_arn: str = self.cfn_endpoint_config.attr_endpoint_config_arn
        self.inference_component_arn: str = (
            self.cfn_inference_component.attr_inference_component_arn)
        # adapters, scaling
        self.adapters: dict[str, LoraAdapter] = {
            a.name: LoraAdapter(self, f"Adapter-{a.name}", endpoint=self, adapter=a)
            for a in spec.adapters}
        # every artifact the role reads is registered now: render its policy once
        self.execution_role.render_policy(image_repository_arn=self.image.repository_arn)
        self.scaling: CopyCountScaling | None = None
        if autoscaling:
            self.scaling = CopyCountScaling(self, "Scaling", spec=spec,
                                            component=self.cfn_inference_component)
        # dashboard, alarms
        self.observability: LmiObservability | None = None
        obs = spec.observability
        if observability and (obs.dashboard or obs.alarms.enabled):
            self.observability = LmiObservability(
                self, "Observability", spec=spec, plan=self.plan,
                named_resources=self.named_resources, image=self.image_kind,
                resolved=self.resolved)
        self._acknowledge()

    def render(self, adapter_artifact_urls: dict[str, str] | None = None) -> SageMakerRequests:
        """The request dicts with this construct's tokens (role, image, artifacts).

        Adapters not in ``adapter_artifact_urls`` get a placeholder URL: callers take only
        the parts whose inputs they supplied.
        """
        urls = {a.name: PENDING_ADAPTER_URL for a in self.spec.adapters}
        urls.update(adapter_artifact_urls or {})
        return render_requests(
            self.spec, self.plan, image_uri=self.image.image_uri,
            execution_role_arn=self.execution_role.role_arn,
            model_artifact_url=(self.model_artifact_location.s3_url
                                if self.model_artifact_location else None),
            adapter_artifact_urls=urls, image_kind=self.image_kind, resolved=self.resolved)

    def publish_artifact(self, construct_id: str, asset: TarballAsset, subdir: str,
                         size: int) -> PublishedArtifact:
        """Where components read ``asset``: with ``security.kms_key_arn`` a SSE-KMS copy at
        ``lmikit/<name>/<subdir>/<sha256>.tar.gz`` in the artifact bucket, else the asset
        where CDK uploads it."""
        if self.artifact_store is None:
            return published(asset)
        return self.artifact_store.publish(construct_id, asset, subdir, size)

    @property
    def image_kind(self) -> ImageKind:
        """``lmikit`` when this endpoint runs lmikit's image, else ``stock``."""
        return "lmikit" if self.image.is_custom else "stock"

    @property
    def named_resources(self) -> dict[str, Construct]:
        """Literal endpoint and component names -> the L1 that creates each."""
        out: dict[str, Construct] = {self.endpoint_name: self.cfn_endpoint,
                                     self.inference_component_name:
                                         self.cfn_inference_component}
        out |= {a.inference_component_name: a.cfn_inference_component
                for a in self.adapters.values()}
        return out

    @property
    def props(self) -> dict[str, Any]:
        """The request dicts by resource, as passed to the L1s (before re-casing; the
        Model's name is left to CloudFormation)."""
        out = {"endpoint_config": self.requests.endpoint_config,
               "endpoint": self.requests.endpoint,
               "base_component": self.requests.base_component}
        if self.requests.model is not None:
            out["model"] = self.requests.model
        return out

    def _acknowledge(self) -> None:
        if "KmsKeyId" not in self.requests.endpoint_config:
            nag.acknowledge(self.cfn_endpoint_config,
                            "HIPAA.Security-SageMakerEndpointConfigurationKMSKeyConfigured",
                            _no_volume_key_reason(self.spec))
        nag.acknowledge_role_wildcards(self.execution_role)
        if self.artifact_store is not None:
            self.artifact_store.acknowledge_copy_function()


def _no_volume_key_reason(spec: DeploymentSpec) -> str:
    inst = get_instance(spec.instance.type)
    if inst.has_nvme:
        return (f"{inst.name} has local NVMe instance storage: SageMaker rejects KmsKeyId on "
                "endpoint configs for such instance types, and the instance store is "
                "hardware-encrypted (AES-256) by AWS")
    if spec.security.kms_volume_encryption == "off":
        return "security.kms_volume_encryption is 'off' in the spec: the volume uses the "\
               "AWS-managed default encryption by the owner's choice"
    return "no security.kms_key_arn in the spec: the ML storage volume is encrypted with "\
           "the AWS-managed default key"
