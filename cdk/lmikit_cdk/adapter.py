"""``LoraAdapter``: one LoRA adapter as an adapter inference component on a base component.

CloudFormation cannot ``Fn::GetAtt`` an inference component's name, so the adapter names the
base component literally (``BaseInferenceComponentName``) and depends on it explicitly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from lmikit.errors import AdapterError
from lmikit.planner import Plan
from lmikit.render import SageMakerRequests
from lmikit.spec import AdapterSpec, DeploymentSpec
from lmikit_cdk._cfn import l1_kwargs
from lmikit_cdk.artifacts import PublishedArtifact, TarballAsset, adapter_artifact
from lmikit_cdk.metrics import ComponentMetrics
from lmikit_cdk.role import ExecutionRole


class AdapterHost(Protocol):
    """What a :class:`LoraAdapter` needs of its endpoint (:class:`LmiEndpoint` is one)."""

    @property
    def spec(self) -> DeploymentSpec: ...
    @property
    def base_dir(self) -> Path: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def execution_role(self) -> ExecutionRole: ...
    @property
    def inference_component_name(self) -> str: ...
    @property
    def endpoint_name(self) -> str: ...
    @property
    def endpoint_arn(self) -> str: ...
    @property
    def cfn_inference_component(self) -> sagemaker.CfnInferenceComponent: ...

    def publish_artifact(self, construct_id: str, asset: TarballAsset, subdir: str,
                         size: int) -> PublishedArtifact: ...

    def render(self, adapter_artifact_urls: dict[str, str] | None = None
               ) -> SageMakerRequests: ...


class LoraAdapter(ComponentMetrics, Construct):
    """An adapter component of ``endpoint`` for one entry of the spec's ``adapters``.

    A local ``adapter.source`` directory (weights, adapter_config.json, optional formatter) is
    packaged into a deterministic .tar.gz and uploaded as an S3 asset; an ``s3://`` source is
    used as it is. Usually created by :class:`LmiEndpoint` for every adapter in the spec.

    :param endpoint: the endpoint whose base component the adapter extends.
    :param adapter: the adapter's entry in ``endpoint.spec.adapters``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, endpoint: AdapterHost,
                 adapter: AdapterSpec) -> None:
        super().__init__(scope, construct_id)
        if adapter not in endpoint.spec.adapters:
            raise AdapterError(f"adapter {adapter.name!r} is not in the spec's adapters; "
                               "add it there so the base component enables LoRA")
        self.adapter = adapter
        self.artifact: TarballAsset | None = None
        ready: IConstruct | None = None
        if adapter.source.startswith("s3://"):
            # the execution policy reads an s3:// source where it is
            self.artifact_url: str = adapter.source
        else:
            data = adapter_artifact(endpoint.spec, adapter, endpoint.base_dir, endpoint.plan)
            self.artifact = TarballAsset(
                self, "Artifact", data=data,
                display_name=f"{endpoint.spec.name} adapter {adapter.name}")
            location = endpoint.publish_artifact(
                f"Adapter{_sid(adapter.name)}", self.artifact,
                f"adapters/{adapter.name}", len(data))
            ready = location.ready
            self.artifact_url = location.s3_url
            endpoint.execution_role.grant_read_objects(adapter.name, location.bucket_name,
                                                       location.object_key)
        self.request: dict[str, Any] = endpoint.render(
            {adapter.name: self.artifact_url}).adapter_components[adapter.name]
        self.inference_component_name: str = self.request["InferenceComponentName"]
        self.base_component_name: str = endpoint.inference_component_name
        self.endpoint_name: str = endpoint.endpoint_name
        self.endpoint_arn: str = endpoint.endpoint_arn
        self.cfn_inference_component = sagemaker.CfnInferenceComponent(
            self, "Component", **l1_kwargs(self.request))
        self.cfn_inference_component.node.add_dependency(endpoint.cfn_inference_component)
        if ready is not None:
            self.cfn_inference_component.node.add_dependency(ready)
        self.inference_component_arn: str = (
            self.cfn_inference_component.attr_inference_component_arn)



def _sid(name: str) -> str:
    """A construct-id-friendly form of an adapter name (``legal-v2`` -> ``LegalV2``)."""
    return "".join(part.capitalize() for part in name.split("-"))
