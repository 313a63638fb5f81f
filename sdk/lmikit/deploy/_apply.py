"""Carry out a deploy's steps, registering before each call how to undo it.

Every call survives a lost answer: creates are reconciled by describing (and adopting what is
ours), updates by waiting for the resource to settle and comparing it with the request,
deletes by checking the resource is gone. An undo never deletes what the endpoint or a
component still uses (configs, Models, artifacts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from lmikit.aws import (
    ArtifactStore,
    artifact_of,
    base_of,
    call,
    components_of,
    create,
    delete,
    describe,
    owner_of,
    tags_of,
    upload_progress,
)
from lmikit.deploy._compare import desired_copies, request_specification, spec_differences
from lmikit.deploy._plan import Desired, Step, adapter_request
from lmikit.deploy._result import Change
from lmikit.deploy._run import Run, Undo
from lmikit.errors import AwsError, DeployError
from lmikit.names import deployment_tags

ROLLING_WAIT_SECONDS = 120
ROLLING_TIMEOUT_SECONDS = 3600
IN_USE_STATES = ("InService", "Updating", "Creating", "SystemUpdating", "RollingBack")


class Applier:
    """Executes :class:`~lmikit.deploy._plan.Step` lists for one deployment."""

    def __init__(self, run: Run, store: ArtifactStore, desired: Desired, deployment: str
                 ) -> None:
        self.run = run
        self.sm = run.sm
        self.waiter = run.waiter
        self.store = store
        self.desired = desired
        self.deployment = deployment
        self.endpoint = desired.requests.names.endpoint
        self.base = desired.requests.names.base_component

    def apply(self, steps: list[Step]) -> None:
        """In order; adapter steps in parallel, removals of unlisted adapters last."""
        adapters = [s for s in steps if s.kind == "inference-component"
                    and s.name != self.base and s.action not in ("delete", "kept")]
        removals = [s for s in steps if s.kind == "inference-component"
                    and s.action == "delete"]
        for step in steps:
            if step in adapters or step in removals:
                continue
            self._one(step)
        self.run.parallel([functools.partial(self._one, s) for s in adapters])
        self.run.parallel([functools.partial(self._one, s) for s in removals])

    def _one(self, step: Step) -> None:
        handler: Callable[[Step], None] | None = {
            ("artifact", "upload"): self._upload,
            ("model", "create"): self._create_simple,
            ("endpoint-config", "create"): self._create_simple,
            ("endpoint", "create"): self._create_endpoint,
            ("endpoint", "replace"): self._replace_endpoint,
            ("endpoint", "update"): self._update_endpoint,
            ("endpoint", "tag"): self._tag_endpoint,
            ("alarm", "create"): self._create_alarm,
            ("inference-component", "create"): self._create_component,
            ("inference-component", "replace"): self._replace_component,
            ("inference-component", "update"): self._update_component,
            ("inference-component", "scale"): self._scale_component,
            ("inference-component", "tag"): self._tag_component,
            ("inference-component", "delete"): self._remove_adapter,
        }.get((step.kind, step.action))
        if handler is None:  # unchanged / kept
            self.run.note(step.kind, step.name, step.action, "unchanged")
            self.run.record(step.change)
            return
        self.run.checkpoint()
        handler(step)
        self.run.record(step.change)

    # --- artifacts, Models, configs --------------------------------------------------

    def _upload(self, step: Step) -> None:
        artifact = step.artifact
        if artifact is None:
            raise DeployError(f"no artifact for step {step.change.line()!r}")
        self.run.undo(Undo(f"artifact {artifact.url}", lambda: self._undo_upload(artifact.url),
                           group="artifact"))
        on_bytes = upload_progress(  # a status every 5% of a large upload
            artifact.source.size,
            lambda pct, _: self.run.note("artifact", artifact.url, "upload", f"{pct}%",
                                         artifact.label))
        self.run.note("artifact", artifact.url, "upload", "uploading", artifact.label)
        self.store.put(artifact.prefix, artifact.source, on_bytes=on_bytes)
        self.run.note("artifact", artifact.url, "upload", "done", artifact.label)

    def _undo_upload(self, url: str) -> str | None:
        """Delete an artifact this run uploaded unless a component uses it."""
        key = url.split("/", 3)[3]
        if not self.store.head(key):
            return None
        users = self.users_of(url)
        if users:
            raise DeployError(f"kept: still used by {', '.join(users)}")
        self.store.delete_key(key)
        self.run.note("artifact", url, "rollback", "deleted")
        return f"artifact {url}"

    def users_of(self, url: str) -> list[str]:
        """Components of the endpoint that reference ``url``."""
        if describe(self.sm, "endpoint", self.endpoint) is None:
            return []
        return [c["InferenceComponentName"] for c in components_of(self.sm, self.endpoint)
                if artifact_of(c) == url]

    def _create_simple(self, step: Step) -> None:
        kind, name = step.kind, step.name
        self.run.undo(Undo(f"{kind} {name}", lambda: self._undo_create_unused(kind, name)))
        create(self.sm, kind, step.request(), self.deployment)
        self.run.note(kind, name, "create", "created")

    def _undo_create_unused(self, kind: str, name: str) -> str | None:
        desc = describe(self.sm, kind, name)
        if desc is None:
            return None
        arn = desc["EndpointConfigArn" if kind == "endpoint-config" else "ModelArn"]
        if owner_of(tags_of(self.sm, arn)) != self.deployment:
            return None
        ep = describe(self.sm, "endpoint", self.endpoint)
        if kind == "endpoint-config" and ep is not None:
            pending = (ep.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
            if name in (ep.get("EndpointConfigName"), pending):
                raise DeployError(f"kept: endpoint {self.endpoint} uses it")
        if kind == "model" and ep is not None:
            users = [c["InferenceComponentName"] for c in components_of(self.sm, self.endpoint)
                     if c.get("Specification", {}).get("ModelName") == name]
            if users:
                raise DeployError(f"kept: used by {', '.join(users)}")
        delete(self.sm, kind, name)
        self.run.note(kind, name, "rollback", "deleted")
        return f"{kind} {name}"

    # --- the endpoint ----------------------------------------------------------------

    def _create_endpoint(self, step: Step) -> None:
        self.run.undo(Undo(f"endpoint {self.endpoint}", self._undo_create_endpoint))
        with self.run.flight(f"endpoint {self.endpoint}", "Creating"):
            create(self.sm, "endpoint", step.request(), self.deployment)
            self.waiter.in_service("endpoint", self.endpoint, step.action)

    def _undo_create_endpoint(self) -> str | None:
        desc = describe(self.sm, "endpoint", self.endpoint)
        if desc is None or owner_of(tags_of(self.sm, desc["EndpointArn"])) != self.deployment:
            return None
        with self.run.flight(f"endpoint {self.endpoint}", "Deleting (rollback)"):
            self.run.note("endpoint", self.endpoint, "rollback", "Deleting")
            try:  # a Creating endpoint can be deleted at once ...
                delete(self.sm, "endpoint", self.endpoint)
            except AwsError:  # ... or, if the service refuses, once it is settled
                if self.waiter.settled("endpoint", self.endpoint) is None:
                    return f"endpoint {self.endpoint}"
                delete(self.sm, "endpoint", self.endpoint)
            self.waiter.gone("endpoint", self.endpoint)
        return f"endpoint {self.endpoint}"

    def _replace_endpoint(self, step: Step) -> None:
        for comp in self._our_components(adapters_first=True):
            self._delete_component(comp)
        delete(self.sm, "endpoint", self.endpoint)
        self.waiter.gone("endpoint", self.endpoint)
        self._create_endpoint(step)

    def _update_endpoint(self, step: Step) -> None:
        old = step.before()["EndpointConfigName"]
        new = self.desired.requests.names.endpoint_config
        self.run.undo(Undo(f"endpoint {self.endpoint} (on config {new}, not {old})",
                           lambda: self._switch_config(new, old, "rollback")))
        self._switch_config(old, new, "update")

    def _switch_config(self, old: str, new: str, action: str) -> str | None:
        """Move the endpoint from ``old`` to ``new`` (idempotent: no call when it already
        runs ``new``); raise when it does not end on ``new``."""
        what = f"endpoint {self.endpoint}"
        desc = self.waiter.settled("endpoint", self.endpoint)
        if desc is None:
            return None
        if desc.get("EndpointConfigName") == new:
            return None
        with self.run.flight(what, f"Updating to config {new}"):
            self.run.note("endpoint", self.endpoint, action, "Updating")
            try:
                call(self.sm, "update_endpoint", EndpointName=self.endpoint,
                     EndpointConfigName=new)
            except AwsError as exc:
                after = self.waiter.settled("endpoint", self.endpoint) or {}
                if after.get("EndpointConfigName") != new:
                    raise DeployError(f"UpdateEndpoint of {self.endpoint} failed: {exc}; it "
                                      f"runs config {after.get('EndpointConfigName')}") from exc
            after = self.waiter.in_service("endpoint", self.endpoint, action)
        if after.get("EndpointConfigName") != new:
            raise DeployError(f"UpdateEndpoint of {self.endpoint} was rolled back by "
                              f"SageMaker: {after.get('FailureReason', 'no reason given')}; "
                              f"it still runs endpoint config {after.get('EndpointConfigName')}")
        return f"endpoint {self.endpoint} back on config {new}" if action == "rollback" else None

    def _tag_endpoint(self, step: Step) -> None:
        call(self.sm, "add_tags", ResourceArn=step.before()["EndpointArn"],
             Tags=step.request()["Tags"])

    def _tag_component(self, step: Step) -> None:
        """Record who manages an adapter (AddTags: idempotent, so an answer lost is no
        failure, and nothing to undo)."""
        call(self.sm, "add_tags", ResourceArn=step.before()["InferenceComponentArn"],
             Tags=step.request()["Tags"])

    # --- the rollback alarm ----------------------------------------------------------

    def _create_alarm(self, step: Step) -> None:
        cw = self.run.clients.cloudwatch
        name = step.name
        self.run.undo(Undo(f"alarm {name}", lambda: self._delete_alarm(name)))
        call(cw, "put_metric_alarm", AlarmName=name,
             AlarmDescription=f"lmikit: 5xx errors on {self.base}; rolls back a bad update",
             Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors",
             Dimensions=[{"Name": "InferenceComponentName", "Value": self.base}],
             Statistic="Sum", Period=60, EvaluationPeriods=2, DatapointsToAlarm=2,
             Threshold=1.0, ComparisonOperator="GreaterThanOrEqualToThreshold",
             TreatMissingData="notBreaching", Tags=deployment_tags(self.deployment))

    def _delete_alarm(self, name: str) -> str | None:
        cw = self.run.clients.cloudwatch
        if not call(cw, "describe_alarms", AlarmNames=[name]).get("MetricAlarms"):
            return None
        call(cw, "delete_alarms", AlarmNames=[name])
        return f"alarm {name}"

    def _rolling_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": ROLLING_WAIT_SECONDS,
            "MaximumExecutionTimeoutInSeconds": ROLLING_TIMEOUT_SECONDS,
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
        }}
        if self.desired.alarm:
            config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName":
                                                               self.desired.alarm}]}
        return config

    # --- inference components --------------------------------------------------------

    def _create_component(self, step: Step) -> None:
        name = step.name
        group = "" if name == self.base else "adapter"
        self.run.undo(Undo(f"inference-component {name}",
                           lambda: self._undo_create_component(name), group))
        with self.run.flight(f"inference-component {name}", "Creating"):
            create(self.sm, "inference-component", step.request(), self.deployment)
            self.waiter.in_service("inference-component", name, step.action)

    def _undo_create_component(self, name: str) -> str | None:
        desc = self.waiter.settled("inference-component", name)
        if desc is None or owner_of(tags_of(self.sm, desc["InferenceComponentArn"])) \
                != self.deployment:
            return None
        self._delete_component(desc, action="rollback")
        return f"inference-component {name}"

    def _replace_component(self, step: Step) -> None:
        if step.name == self.base:
            for comp in self._our_components(adapters_first=True):
                if base_of(comp) == self.base:
                    self._delete_component(comp)
        self._delete_component({"InferenceComponentName": step.name})
        self._create_component(step)

    def _update_component(self, step: Step) -> None:
        name, body, before = step.name, step.request(), step.before()
        old_spec = request_specification(before.get("Specification", {}))
        # Without RuntimeConfig (autoscaling owns the copy count) neither way sets copies.
        old_copies = desired_copies(before) if "RuntimeConfig" in body else None
        group = "" if name == self.base else "adapter"
        self.run.undo(Undo(f"inference-component {name} (runs the new specification)",
                           lambda: self._set_component(name, old_spec, old_copies,
                                                       "rollback"), group))
        want_copies = (body.get("RuntimeConfig") or {}).get("CopyCount")
        self._set_component(name, body["Specification"], want_copies, "update")

    def _scale_component(self, step: Step) -> None:
        name, old_copies = step.name, desired_copies(step.before())
        self.run.undo(Undo(f"inference-component {name} (copy count)",
                           lambda: self._set_copies(name, old_copies, "rollback")))
        self._set_copies(name, step.request()["RuntimeConfig"]["CopyCount"], "update")

    def _set_component(self, name: str, spec: dict[str, Any], copies: int | None,
                       action: str) -> str | None:
        """Update ``name`` to ``spec`` (and ``copies``) unless it already runs them."""
        desc = self.waiter.settled("inference-component", name)
        if desc is None:
            return None
        if not spec_differences(spec, desc.get("Specification", {})) and (
                copies is None or desired_copies(desc) == copies):
            return None
        update: dict[str, Any] = {"InferenceComponentName": name, "Specification": spec}
        if copies is not None:
            update["RuntimeConfig"] = {"CopyCount": copies}
        if name == self.base:  # one copy at a time, rolled back by the 5xx alarm
            update["DeploymentConfig"] = self._rolling_config()
        with self.run.flight(f"inference-component {name}", f"Updating ({action})"):
            self.run.note("inference-component", name, action, "Updating")
            try:
                call(self.sm, "update_inference_component", **update)
            except AwsError as exc:
                after = self.waiter.settled("inference-component", name) or {}
                if spec_differences(spec, after.get("Specification", {})):
                    raise DeployError(f"UpdateInferenceComponent of {name} failed: "
                                      f"{exc}") from exc
            after = self.waiter.in_service("inference-component", name, action)
        if spec_differences(spec, after.get("Specification", {})) or (
                copies is not None and desired_copies(after) != copies):
            raise DeployError(f"the update of inference component {name} was rolled back: "
                              f"{after.get('FailureReason', 'no reason given')}; it keeps "
                              "its previous specification")
        return f"inference-component {name} back on its previous specification" \
            if action == "rollback" else None

    def _set_copies(self, name: str, copies: int | None, action: str) -> str | None:
        desc = self.waiter.settled("inference-component", name)
        if desc is None or copies is None or desired_copies(desc) == copies:
            return None
        with self.run.flight(f"inference-component {name}", f"Scaling to {copies} copies"):
            try:
                call(self.sm, "update_inference_component_runtime_config",
                     InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": copies})
            except AwsError as exc:
                after = self.waiter.settled("inference-component", name) or {}
                if desired_copies(after) != copies:
                    raise DeployError(f"scaling {name} to {copies} copies failed: "
                                      f"{exc}") from exc
            after = self.waiter.in_service("inference-component", name, action)
        if desired_copies(after) != copies:
            raise DeployError(f"scaling inference component {name} to {copies} copies was "
                              f"rolled back: {after.get('FailureReason', 'no reason given')}")
        return f"inference-component {name} back to {copies} copies" \
            if action == "rollback" else None

    def _remove_adapter(self, step: Step) -> None:
        old, tags = step.before(), step.request()["Tags"]
        self.run.undo(Undo(f"inference-component {step.name} (removed)",
                           lambda: self._recreate_adapter(old, tags), "adapter"))
        self._delete_component(old)

    def _recreate_adapter(self, old: dict[str, Any], tags: list[dict[str, str]]
                          ) -> str | None:
        name = old["InferenceComponentName"]
        if describe(self.sm, "inference-component", name) is not None:
            return None
        body = adapter_request(self.endpoint, old, tags or deployment_tags(self.deployment))
        with self.run.flight(f"inference-component {name}", "Creating (rollback)"):
            create(self.sm, "inference-component", body, self.deployment)
            self.waiter.in_service("inference-component", name, "rollback")
        return f"inference-component {name} (created again)"

    def _delete_component(self, desc: dict[str, Any], action: str = "delete") -> None:
        name = desc["InferenceComponentName"]
        with self.run.flight(f"inference-component {name}", "Deleting"):
            self.waiter.settled("inference-component", name)
            self.run.note("inference-component", name, action, "Deleting")
            delete(self.sm, "inference-component", name)
            self.waiter.gone("inference-component", name)

    def _our_components(self, adapters_first: bool) -> list[dict[str, Any]]:
        comps = [c for c in components_of(self.sm, self.endpoint)
                 if owner_of(tags_of(self.sm, c["InferenceComponentArn"])) == self.deployment]
        return sorted(comps, key=lambda c: (base_of(c) is None) == adapters_first)


def change_list(steps: list[Step]) -> list[Change]:
    return [s.change for s in steps]
