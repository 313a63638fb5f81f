"""What a deploy would change: the desired resources, what exists, and the steps between.

:func:`plan_steps` is pure: given the rendered requests and what :func:`observe` read, it
returns the ordered steps. ``lmikit deploy --dry-run`` prints them; a deploy executes them.

A deploy reconciles the adapters the spec manages (tag ``lmikit:managed-by``, read by
:func:`lmikit.names.adapter_manager`): it removes one the spec no longer lists, and keeps
those registered with ``lmikit adapters`` (created again if the base must be replaced), unless
``prune`` removes every adapter the spec does not list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lmikit.aws import (
    ArtifactSource,
    ArtifactStore,
    Waiter,
    artifact_key,
    artifact_of,
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
from lmikit.names import (
    BUCKET_TAG,
    MANAGED_BY_ADAPTERS,
    MANAGED_BY_SPEC,
    MANAGED_BY_TAG,
    adapter_manager,
)
from lmikit.render import SageMakerRequests

PRUNE_OR_KEEP = ("keep_unlisted_adapters (--keep-unlisted-adapters) and prune (--prune) "
                 "contradict each other: choose one")


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
        from lmikit.render import SCALABLE_DIMENSION, SERVICE_NAMESPACE

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


def plan_steps(desired: Desired, seen: Observed, *, keep_unlisted: bool = False,
               prune: bool = False) -> list[Step]:
    """The ordered steps from ``seen`` to ``desired`` (pure).

    Adapters the spec does not list: one the spec manages is deleted (kept with
    ``keep_unlisted``), one registered with ``lmikit adapters`` is kept; ``prune`` deletes
    both. Raises :class:`DeployError` when the spec lists an adapter registered with
    ``lmikit adapters`` (``lmikit adapters adopt`` puts it under the spec)."""
    if keep_unlisted and prune:
        raise DeployError(PRUNE_OR_KEEP)
    req = desired.requests
    names = req.names
    _refuse_registered_adapters(desired, seen)
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
        desc = None if base_fresh else components.get(name)
        step = _component_step(body, desc, is_base=False)
        steps.append(step)
        if desc is not None and step.action != "replace" and \
                seen.component_tags.get(name, {}).get(MANAGED_BY_TAG) != MANAGED_BY_SPEC:
            steps.append(Step(Change("inference-component", name, "tag",
                                     f"{MANAGED_BY_TAG}={MANAGED_BY_SPEC}"),
                              {"Tags": [{"Key": MANAGED_BY_TAG, "Value": MANAGED_BY_SPEC}]},
                              desc))
    steps += _unlisted_adapter_steps(desired, seen, base_fresh, keep_unlisted, prune)
    return steps


def _refuse_registered_adapters(desired: Desired, seen: Observed) -> None:
    """A listed adapter whose component ``lmikit adapters`` manages: adopt it first."""
    names = desired.requests.names
    taken = sorted(adapter for adapter, comp in names.adapters.items()
                   if comp in seen.components and adapter_manager(
                       seen.component_tags.get(comp, {}), listed=True) == MANAGED_BY_ADAPTERS)
    if taken:
        raise DeployError(
            f"the spec lists adapter(s) {', '.join(map(repr, taken))}, registered on "
            f"{names.endpoint!r} with `lmikit adapters` (tag {MANAGED_BY_TAG}="
            f"{MANAGED_BY_ADAPTERS}); nothing was changed. Put each under the spec with "
            f"`lmikit adapters adopt NAME --spec SPEC` (AdapterRegistry.adopt), then deploy "
            "again; or take it out of the spec's adapters")


def _unlisted_adapter_steps(desired: Desired, seen: Observed, base_fresh: bool,
                            keep_unlisted: bool, prune: bool) -> list[Step]:
    """Steps for the base's adapter components the spec does not list. One that is kept is
    created again when the base (or endpoint) is replaced, which deletes its adapters."""
    names = desired.requests.names
    wanted = {names.base_component, *names.adapters.values()}
    steps: list[Step] = []
    for name, desc in sorted(seen.components.items()):
        if name in wanted or base_of(desc) != names.base_component:
            continue
        key = name[len(names.endpoint) + 1:]
        tags = [{"Key": k, "Value": v}
                for k, v in sorted(seen.component_tags.get(name, {}).items())]
        registered = adapter_manager(seen.component_tags.get(name, {}),
                                     listed=False) == MANAGED_BY_ADAPTERS
        if registered:
            who = f"adapter {key!r} is registered with `lmikit adapters`, not in the spec"
        else:
            who = f"adapter {key!r} is not in the spec"
        keep = not prune and (registered or keep_unlisted)
        if keep and not base_fresh:
            why = "; --prune removes it" if registered else " (--keep-unlisted-adapters)"
            steps.append(Step(Change("inference-component", name, "kept", who + why),
                              {"Tags": tags}, desc))
        elif keep and desc.get("InferenceComponentStatus") != "Failed":
            steps.append(Step(Change("inference-component", name, "create",
                                     f"{who}: created again on the new base"),
                              adapter_request(names.endpoint, desc, tags), desc))
        else:
            why = ("; removed by --prune" if prune else
                   "; it is Failed: not created again on the new base" if keep else
                   "; --keep-unlisted-adapters keeps it")
            steps.append(Step(Change("inference-component", name, "delete", who + why),
                              {"Tags": tags}, desc))
    return steps


def adapter_request(endpoint: str, desc: dict[str, Any], tags: list[dict[str, str]]
                    ) -> dict[str, Any]:
    """The CreateInferenceComponent request that makes described adapter ``desc`` again."""
    return {"InferenceComponentName": desc["InferenceComponentName"], "EndpointName": endpoint,
            "Specification": {"BaseInferenceComponentName": base_of(desc),
                              "Container": {"ArtifactUrl": artifact_of(desc)}},
            "Tags": tags}


def kept_artifacts(steps: list[Step]) -> set[str]:
    """Artifact URLs of adapters the spec does not list that the steps keep (or create
    again): garbage collection must not take them."""
    return {url for s in steps if s.kind == "inference-component" and s.old is not None
            and s.action in ("kept", "create") and (url := artifact_of(s.old))}


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
