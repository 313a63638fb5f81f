"""``LmiStack``: one CloudFormation stack per deployment spec, region-aware, account-agnostic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from lmikit.spec import DeploymentSpec, load_spec
from lmikit_cdk.endpoint import LmiEndpoint
from lmikit_cdk.image import ImageMode


def stack_id(spec: DeploymentSpec) -> str:
    return f"lmikit-{spec.name}"


class LmiStack(cdk.Stack):
    """A stack holding one :class:`LmiEndpoint` (and its adapters and scaling).

    The stack's region is the spec's region; the account is left to deploy time.

    :param spec: the deployment.
    :param base_dir: directory the spec's relative paths resolve against.
    :param image_mode: ``auto`` (default), ``stock`` or ``custom``.
    :param build_context: repository root for lmikit's own image.
    """

    def __init__(self, scope: Construct, construct_id: str | None = None, *,
                 spec: DeploymentSpec, base_dir: str | Path = ".",
                 image_mode: ImageMode = "auto", build_context: str | Path | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("env", cdk.Environment(region=spec.region))
        kwargs.setdefault("description", f"lmikit deployment {spec.name}: {spec.model.id} on "
                          f"{spec.instance.type} (LMCache-enabled LMI)")
        super().__init__(scope, construct_id or stack_id(spec), **kwargs)
        self.spec = spec
        self.endpoint = LmiEndpoint(self, "Lmi", spec=spec, base_dir=base_dir,
                                    image_mode=image_mode, build_context=build_context)
        cdk.CfnOutput(self, "EndpointName", value=self.endpoint.endpoint_name)
        cdk.CfnOutput(self, "InferenceComponentName",
                      value=self.endpoint.inference_component_name)

    @classmethod
    def from_file(cls, scope: Construct, path: str | Path, **kwargs: Any) -> LmiStack:
        """A stack for the spec file at ``path`` (relative paths resolve next to it)."""
        spec = load_spec(path)
        return cls(scope, spec=spec, base_dir=Path(path).parent, **kwargs)
