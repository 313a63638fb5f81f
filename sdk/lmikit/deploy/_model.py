"""The SageMaker Model behind a base component whose weights SageMaker copies from S3.

A Model cannot be changed: its name carries a hash of its content
(:func:`lmikit.render.sagemaker.model_request`), so a changed spec creates a new Model, the
component is updated to it, and the old one is deleted when it is this deployment's.
"""

from __future__ import annotations

from typing import Any

from lmikit.deploy._aws import call, describe_or_none
from lmikit.names import DEPLOYMENT_TAG


def ensure_model(sagemaker: Any, request: dict[str, Any]) -> bool:
    """Create the Model unless one of that name exists; True when it was created."""
    if describe_or_none(sagemaker, "describe_model", ModelName=request["ModelName"]):
        return False
    call(sagemaker, "create_model", **request)
    return True


def model_is_ours(sagemaker: Any, name: str, deployment: str) -> bool:
    """True when the Model exists and carries this deployment's tag."""
    desc = describe_or_none(sagemaker, "describe_model", ModelName=name)
    if desc is None:
        return False
    tags = call(sagemaker, "list_tags", ResourceArn=desc["ModelArn"]).get("Tags", [])
    return any(t["Key"] == DEPLOYMENT_TAG and t["Value"] == deployment for t in tags)


def delete_model_if_ours(sagemaker: Any, name: str | None, deployment: str) -> bool:
    """Delete the Model when it is this deployment's; True when it was deleted."""
    if not name or not model_is_ours(sagemaker, name, deployment):
        return False
    call(sagemaker, "delete_model", ModelName=name)
    return True


def component_environment(sagemaker: Any, description: dict[str, Any]) -> dict[str, str]:
    """The environment a described inference component runs with: its container's, or the
    environment of the SageMaker Model it names (``Specification.ModelName``)."""
    spec = description.get("Specification", {})
    env = spec.get("Container", {}).get("Environment")
    if env:
        return dict(env)
    name = spec.get("ModelName")
    if not name:
        return {}
    model = describe_or_none(sagemaker, "describe_model", ModelName=name) or {}
    return dict(model.get("PrimaryContainer", {}).get("Environment", {}))
