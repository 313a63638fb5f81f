"""SageMaker resources lmikit manages, described in one table, and the calls on them that
survive lost answers: a create whose answer was lost is found and adopted, a delete whose
answer was lost is taken as done, and nothing that is not ours (by tag) is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmikit.aws._errors import (
    call,
    describe_or_none,
    is_already_existing,
    is_not_found,
    paginate,
)
from lmikit.errors import AwsError, DeployError
from lmikit.names import DEPLOYMENT_TAG


@dataclass(frozen=True)
class Kind:
    """How to describe, create and delete one kind of SageMaker resource."""

    name: str  # "endpoint" | "endpoint-config" | "inference-component" | "model"
    key: str  # the name parameter, e.g. "EndpointName"
    describe: str
    create: str
    delete: str
    arn_key: str
    status_key: str | None  # None: the resource has no status (configs, Models)


KINDS = {k.name: k for k in (
    Kind("endpoint", "EndpointName", "describe_endpoint", "create_endpoint", "delete_endpoint",
         "EndpointArn", "EndpointStatus"),
    Kind("endpoint-config", "EndpointConfigName", "describe_endpoint_config",
         "create_endpoint_config", "delete_endpoint_config", "EndpointConfigArn", None),
    Kind("inference-component", "InferenceComponentName", "describe_inference_component",
         "create_inference_component", "delete_inference_component", "InferenceComponentArn",
         "InferenceComponentStatus"),
    Kind("model", "ModelName", "describe_model", "create_model", "delete_model", "ModelArn",
         None),
)}
# States a resource moves through on its own; anything else is settled.
TRANSITIONAL = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"})


def describe(sm: Any, kind: str, name: str) -> dict[str, Any] | None:
    """The resource's description, or None when it does not exist."""
    k = KINDS[kind]
    return describe_or_none(sm, k.describe, **{k.key: name})


def status_of(kind: str, desc: dict[str, Any]) -> str:
    key = KINDS[kind].status_key
    return str(desc.get(key, "")) if key else "exists"


def tags_of(sm: Any, arn: str) -> dict[str, str]:
    """A SageMaker resource's tags as a dict ({} when it is gone)."""
    try:
        rows = paginate(sm, "list_tags", "Tags", ResourceArn=arn)
    except AwsError as exc:
        if is_not_found(exc):
            return {}
        raise
    return {t["Key"]: t.get("Value", "") for t in rows}


def tag_dict(tags: Any) -> dict[str, str]:
    """``[{"Key": k, "Value": v}, ...]`` (as IAM and CloudWatch list them) as a dict."""
    return {t["Key"]: t.get("Value", "") for t in tags or ()}


def owner_of(tags: dict[str, str]) -> str | None:
    """The deployment a resource belongs to (its ``lmikit:deployment`` tag), if any."""
    return tags.get(DEPLOYMENT_TAG)


def not_ours_message(kind: str, name: str, deployment: str, owner: str | None) -> str:
    whose = f"lmikit deployment {owner!r}'s" if owner else "not created by lmikit (no " \
        f"{DEPLOYMENT_TAG} tag)"
    return (f"{kind} {name} exists and is {whose}, not {deployment!r}'s; lmikit does not "
            "touch resources it does not own")


def create(sm: Any, kind: str, body: dict[str, Any], deployment: str) -> bool:
    """Create a resource; True when this call created it.

    When the answer is lost (botocore then retries, and the retry finds the resource already
    existing), the resource is described: one tagged for ``deployment`` is adopted as
    created by this call, anything else raises.
    """
    k = KINDS[kind]
    name = body[k.key]
    try:
        call(sm, k.create, **body)
        return True
    except AwsError as exc:
        if not (exc.lost or is_already_existing(exc)):
            raise
        desc = describe(sm, kind, name)
        if desc is None:
            raise
        owner = owner_of(tags_of(sm, desc[k.arn_key]))
        if owner != deployment:
            raise DeployError(not_ours_message(kind, name, deployment, owner)) from exc
        return True


def delete(sm: Any, kind: str, name: str) -> bool:
    """Delete a resource; True when it is gone or going (an answer lost is no failure)."""
    k = KINDS[kind]
    try:
        call(sm, k.delete, **{k.key: name})
        return True
    except AwsError as exc:
        if is_not_found(exc):
            return True
        desc = describe(sm, kind, name)
        if desc is None or status_of(kind, desc) == "Deleting":
            return True
        raise


def components_of(sm: Any, endpoint: str) -> list[dict[str, Any]]:
    """The description of every inference component on ``endpoint`` (sorted by name)."""
    out = []
    for row in paginate(sm, "list_inference_components", "InferenceComponents",
                        EndpointNameEquals=endpoint):
        desc = describe(sm, "inference-component", row["InferenceComponentName"])
        if desc is not None:
            out.append(desc)
    return sorted(out, key=lambda d: d["InferenceComponentName"])


def base_of(component: dict[str, Any]) -> str | None:
    """The base a described component is an adapter of (None for a base component)."""
    return component.get("Specification", {}).get("BaseInferenceComponentName")


def artifact_of(component: dict[str, Any]) -> str | None:
    return component.get("Specification", {}).get("Container", {}).get("ArtifactUrl")


def component_environment(sm: Any, description: dict[str, Any]) -> dict[str, str]:
    """The environment a described inference component runs with: its container's, or the
    environment of the SageMaker Model it names (``Specification.ModelName``)."""
    spec = description.get("Specification", {})
    env = spec.get("Container", {}).get("Environment")
    if env:
        return dict(env)
    name = spec.get("ModelName")
    if not name:
        return {}
    model = describe(sm, "model", name) or {}
    return dict(model.get("PrimaryContainer", {}).get("Environment", {}))


def component_image(sm: Any, description: dict[str, Any]) -> str | None:
    """The image a described inference component runs, as it was specified: its container's
    (``Container.DeployedImage.SpecifiedImage``), or the ``PrimaryContainer.Image`` of the
    SageMaker Model it names (``Specification.ModelName``; DescribeInferenceComponent then
    has no ``Container``)."""
    spec = description.get("Specification", {})
    container = spec.get("Container") or {}
    image = (container.get("DeployedImage") or {}).get("SpecifiedImage") \
        or container.get("Image")
    if image:
        return str(image)
    name = spec.get("ModelName")
    if not name:
        return None
    model = describe(sm, "model", name) or {}
    image = (model.get("PrimaryContainer") or {}).get("Image")
    return str(image) if image else None


def owned_names(sm: Any, kind: str, deployment: str) -> list[str]:
    """Names of every endpoint config or Model tagged for ``deployment``.

    ``NameContains`` only narrows the listing; the tag decides (``docqa-v2-...`` contains
    ``docqa`` and is not ``docqa``'s)."""
    operation, result, key, arn = {
        "endpoint-config": ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName",
                            "EndpointConfigArn"),
        "model": ("list_models", "Models", "ModelName", "ModelArn"),
    }[kind]
    return sorted(row[key] for row in paginate(sm, operation, result, NameContains=deployment)
                  if owner_of(tags_of(sm, row[arn])) == deployment)
