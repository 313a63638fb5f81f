"""What a deploy would change: the desired resources, what exists, and the steps between.

:func:`plan_steps` is pure: given the rendered requests and what :func:`observe` read, it
returns the ordered steps. ``lmikit deploy --dry-run`` prints them; a deploy executes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lmikit.aws import (
    ArtifactSource,
    ArtifactStore,
    Waiter,
    artifact_key,
    base_of,
    components_of,
    describe,
    not_ours_message,
    owner_of,
    tags_of,
)
from lmikit.deploy._compare import desired_copies, spec_differences
from lmikit.deploy._result import Change
from lmikit.errors import DeployError
from lmikit.names import BUCKET_TAG
from lmikit.render.sagemaker import SageMakerRequests


@dataclass(frozen=True)
class PendingArtifact:
    """An artifact the deploy needs in S3 (packaged, not yet uploaded)."""

    prefix: str
    source: ArtifactSource
    url: str
    label: str  # "model" or "adapter <name>"

    @property
    def key(self) -> str:
        return artifact_key(self.prefix, self.source.sha256)


@dataclass(frozen=True)
class Desired:
    requests: SageMakerRequests
    artifacts: tuple[PendingArtifact, ...]
    bucket: str
    alarm: str | None  # the base component's update-rollback alarm, when alarms are on
    scaled: bool = False  # the deploy applies autoscaling to the base component


@dataclass
class Observed:
    """What exists now (read only; components settled first)."""

    existing_artifacts: set[str] = field(default_factory=set)
    endpoint: dict[str, Any] | None = None
    endpoint_tags: dict[str, str] = field(default_factory=dict)
    config_exists: bool = False
    model_exists: bool = False
    components: dict[str, dict[str, Any]] = field(default_factory=dict)  # ours, by name
    component_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)  # on our endpoint, not ours
    alarm_exists: bool = False
    scalable_target: dict[str, Any] | None = None  # the base component's, when registered


@dataclass(frozen=True)
class Step:
    change: Change
    body: dict[str, Any] | None = None  # the request of a create or update
    old: dict[str, Any] | None = None  # the description before, for an update or delete
    artifact: PendingArtifact | None = None

    @property
    def kind(self) -> str:
        return self.change.kind

    @property
    def name(self) -> str:
        return self.change.name

    @property
    def action(self) -> str:
        return self.change.action

    def request(self) -> dict[str, Any]:
        if self.body is None:
            raise DeployError(f"no request for step {self.change.line()!r}")
        return self.body

    def before(self) -> dict[str, Any]:
        if self.old is None:
            raise DeployError(f"no description for step {self.change.line()!r}")
        return self.old


def observe(sm: Any, waiter: Waiter, store: ArtifactStore, desired: Desired,
            deployment: str, cloudwatch: Any = None, autoscaling: Any = None) -> Observed:
    """Read the deployment's current state, waiting out transitions; refuse to go on when a
    name the deployment needs belongs to someone else."""
    from lmikit.aws import call

    names = desired.requests.names
    seen = Observed()
    bucket_ok = store.bucket_exists()
    for artifact in desired.artifacts:
        if bucket_ok and store.head(artifact.key) is not None:
            seen.existing_artifacts.add(artifact.url)
    endpoint = waiter.settled("endpoint", names.endpoint)
    if endpoint is not None:
        seen.endpoint_tags = tags_of(sm, endpoint["EndpointArn"])
        _refuse_unless_ours("endpoint", names.endpoint, seen.endpoint_tags, deployment)
        seen.endpoint = endpoint
    for kind, name in (("endpoint-config", names.endpoint_config), ("model", names.model)):
        if not name:
            continue
        desc = describe(sm, kind, name)
        if desc is not None:
            arn = desc["EndpointConfigArn" if kind == "endpoint-config" else "ModelArn"]
            _refuse_unless_ours(kind, name, tags_of(sm, arn), deployment)
            if kind == "endpoint-config":
                seen.config_exists = True
            else:
                seen.model_exists = True
    if endpoint is not None:
        for desc in components_of(sm, names.endpoint):
            name = desc["InferenceComponentName"]
            desc = waiter.settled("inference-component", name) or desc
            tags = tags_of(sm, desc["InferenceComponentArn"])
            if owner_of(tags) == deployment:
                seen.components[name] = desc
                seen.component_tags[name] = tags
            else:
                seen.foreign.append(name)
    for name in [names.base_component, *names.adapters.values()]:
        if name in seen.components:
            continue
        desc = describe(sm, "inference-component", name)
        if desc is not None:  # the name is taken: on another endpoint, or not ours
            raise DeployError(not_ours_message(
                "inference-component", name, deployment,
                owner_of(tags_of(sm, desc["InferenceComponentArn"]))) + (
                f" (it is on endpoint {desc.get('EndpointName')!r})"))
    if desired.alarm and cloudwatch is not None:
        found = call(cloudwatch, "describe_alarms", AlarmNames=[desired.alarm])
        seen.alarm_exists = bool(found.get("MetricAlarms"))
    base = seen.components.get(names.base_component)
    if desired.scaled and autoscaling is not None and base is not None:
        from lmikit.render.scaling import SCALABLE_DIMENSION, SERVICE_NAMESPACE

        found = call(autoscaling, "describe_scalable_targets",
                     ServiceNamespace=SERVICE_NAMESPACE, ScalableDimension=SCALABLE_DIMENSION,
                     ResourceIds=[f"inference-component/{names.base_component}"])
        targets = found.get("ScalableTargets") or []
        seen.scalable_target = targets[0] if targets else None
    return seen


def _refuse_unless_ours(kind: str, name: str, tags: dict[str, str], deployment: str) -> None:
    owner = owner_of(tags)
    if owner != deployment:
        raise DeployError(not_ours_message(kind, name, deployment, owner))


def plan_steps(desired: Desired, seen: Observed, *, keep_unlisted: bool = False
               ) -> list[Step]:
    """The ordered steps from ``seen`` to ``desired`` (pure)."""
    req = desired.requests
    names = req.names
    steps: list[Step] = []
    for a in desired.artifacts:
        steps.append(Step(Change("artifact", a.url, "unchanged" if a.url in
                                 seen.existing_artifacts else "upload", a.label), artifact=a))
    if req.model is not None:
        steps.append(Step(Change("model", req.model["ModelName"],
                                 "unchanged" if seen.model_exists else "create"), req.model))
    steps.append(Step(Change("endpoint-config", names.endpoint_config,
                             "unchanged" if seen.config_exists else "create"),
                      req.endpoint_config))
    endpoint_body = {**req.endpoint, "Tags": [*req.endpoint.get("Tags", []),
                                              {"Key": BUCKET_TAG, "Value": desired.bucket}]}
    ep = seen.endpoint
    fresh = ep is None or ep["EndpointStatus"] == "Failed"
    if ep is None:
        steps.append(Step(Change("endpoint", names.endpoint, "create"), endpoint_body))
    elif ep["EndpointStatus"] == "Failed":
        steps.append(Step(Change("endpoint", names.endpoint, "replace",
                                 f"it is Failed: {ep.get('FailureReason', 'no reason')}"),
                          endpoint_body, ep))
    elif ep.get("EndpointConfigName") != names.endpoint_config:
        steps.append(Step(Change("endpoint", names.endpoint, "update",
                                 f"config {ep.get('EndpointConfigName')} -> "
                                 f"{names.endpoint_config}"), endpoint_body, ep))
    else:
        steps.append(Step(Change("endpoint", names.endpoint, "unchanged"), endpoint_body, ep))
    if ep is not None and not fresh and seen.endpoint_tags.get(BUCKET_TAG) != desired.bucket:
        steps.append(Step(Change("endpoint", names.endpoint, "tag",
                                 f"{BUCKET_TAG}={desired.bucket}"), endpoint_body, ep))
    components = {} if fresh else seen.components
    base = components.get(names.base_component)
    # Application Auto Scaling owns the base's copy count once its target is registered:
    # the deploy neither scales it back to the spec's initial count nor sets it in updates.
    autoscaled = desired.scaled and base is not None and seen.scalable_target is not None
    base_step = _component_step(req.base_component, base, is_base=True, autoscaled=autoscaled)
    if base_step.action == "update" and desired.alarm and not seen.alarm_exists:
        steps.append(Step(Change("alarm", desired.alarm, "create",
                                 "rolls a bad base update back")))
    steps.append(base_step)
    base_fresh = base_step.action in ("create", "replace")
    for body in req.adapter_components.values():
        name = body["InferenceComponentName"]
        steps.append(_component_step(body, None if base_fresh else components.get(name),
                                     is_base=False))
    wanted = {names.base_component, *names.adapters.values()}
    for name, desc in sorted(components.items()):
        if name in wanted or base_of(desc) != names.base_component:
            continue
        key = name[len(names.endpoint) + 1:]
        if keep_unlisted:
            steps.append(Step(Change("inference-component", name, "keep",
                                     f"adapter {key!r} is not in the spec; kept "
                                     "(--keep-unlisted-adapters)"), old=desc))
        elif not base_fresh:
            tags = [{"Key": k, "Value": v}
                    for k, v in sorted(seen.component_tags.get(name, {}).items())]
            steps.append(Step(Change("inference-component", name, "delete",
                                     f"adapter {key!r} is not in the spec; "
                                     "--keep-unlisted-adapters keeps it"),
                              {"Tags": tags}, desc))
    return steps


def _component_step(body: dict[str, Any], desc: dict[str, Any] | None, is_base: bool,
                    autoscaled: bool = False) -> Step:
    name = body["InferenceComponentName"]
    if autoscaled and desc is not None and desc["InferenceComponentStatus"] != "Failed":
        body = {k: v for k, v in body.items() if k != "RuntimeConfig"}
    label = "" if is_base else f"adapter {name}"
    if desc is None:
        return Step(Change("inference-component", name, "create", label), body)
    if desc["InferenceComponentStatus"] == "Failed":
        return Step(Change("inference-component", name, "replace",
                           f"it is Failed: {desc.get('FailureReason', 'no reason given')}"),
                    body, desc)
    diff = spec_differences(body["Specification"], desc.get("Specification", {}))
    want_copies = (body.get("RuntimeConfig") or {}).get("CopyCount")
    have_copies = desired_copies(desc)
    if diff:
        return Step(Change("inference-component", name, "update",
                           "changed: " + ", ".join(diff)), body, desc)
    if is_base and want_copies is not None and want_copies != have_copies:
        return Step(Change("inference-component", name, "scale",
                           f"copies {have_copies} -> {want_copies}"), body, desc)
    if is_base and autoscaled:
        label = f"copies {have_copies}, set by autoscaling"
    return Step(Change("inference-component", name, "unchanged", label), body, desc)
