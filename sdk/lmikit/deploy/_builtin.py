"""The deploy's built-in steps besides SageMaker: the execution role (``create_role``), the
base component's autoscaling, and the dashboard and alarms; what a dry run and a destroy see
of them.

Each step runs under the deployment's lease as part of the run: it snapshots what it may
touch, registers "put the snapshot back" as its undo *before* its first write
(:mod:`lmikit.deploy._restore`), then applies (:func:`lmikit.deploy.apply_execution_role`,
:func:`lmikit.deploy.apply_scaling`, :func:`lmikit.deploy.apply_observability`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from lmikit.aws import Clients, call
from lmikit.catalog import ImageKind
from lmikit.deploy._change import Change
from lmikit.deploy._observability import apply_observability, remove_observability
from lmikit.deploy._restore import ObservabilitySnapshot, RoleSnapshot, ScalingSnapshot
from lmikit.deploy._result import ResourceState
from lmikit.deploy._role import (
    RoleResult,
    apply_execution_role,
    iam_propagation_seconds,
    remove_execution_role,
)
from lmikit.deploy._run import Run, Undo
from lmikit.deploy._scaling import apply_scaling, remove_scaling
from lmikit.names import DEPLOYMENT_TAG, execution_role_name
from lmikit.render import resource_id
from lmikit.spec import DeploymentSpec

if TYPE_CHECKING:
    from lmikit.resolve import Resolved


class Target(Protocol):
    """What the built-in steps use of :class:`lmikit.deploy.Deployment`."""

    spec: DeploymentSpec
    clients: Clients

    @property
    def bucket(self) -> str: ...
    @property
    def image_uri(self) -> str: ...
    @property
    def plan(self) -> Any: ...
    @property
    def image_kind(self) -> ImageKind: ...
    @property
    def resolved(self) -> Resolved: ...


def rollback_alarm_name(deployment: str) -> str:
    """The alarm that rolls a bad update of the base component back."""
    from lmikit.names import base_component_name

    return f"{base_component_name(deployment)}-update-5xx"


def _step(run: Run, left: str, snapshot: Callable[[], Any],
          apply: Callable[[], list[Change]]) -> None:
    run.checkpoint()
    snap = snapshot()
    applied: list[Change] = []

    def undo() -> str | None:
        did = snap.restore(run.clients)
        if did:  # the table's rows of this step show they were put back
            for change in applied:
                run.note(change.kind, change.name, "rollback", "rolled back")
        return did

    run.undo(Undo(left, undo))
    for change in apply():
        run.note(change.kind, change.name, change.action,
                 "unchanged" if not change.changed else "done", change.detail)
        run.record(change)
        if change.changed:
            applied.append(change)


def role_step(d: Target, run: Run) -> str:
    """Create or update ``lmikit-<name>-execution``; returns its ARN."""
    results: list[RoleResult] = []

    def apply() -> list[Change]:
        results.append(apply_execution_role(d.spec, d.bucket, clients=d.clients,
                                            image_uri=d.image_uri))
        return results[0].changes

    _step(run, f"iam-role {execution_role_name(d.spec.name)}",
          lambda: RoleSnapshot.read(d.clients, d.spec), apply)
    created = [c for c in results[0].changes if c.kind == "iam-role" and c.action == "create"]
    seconds = iam_propagation_seconds()
    if created and seconds:  # let IAM propagate the new role before SageMaker checks it
        run.note("iam-role", created[0].name, "wait",
                 f"waiting {seconds:.0f} s for IAM to propagate the new role")
        run.clock.sleep(seconds)
        run.note("iam-role", created[0].name, "create", "done")
    return results[0].arn


def scaling_step(d: Target, run: Run) -> None:
    _step(run, f"scalable-target {resource_id(d.spec)} and its policies",
          lambda: ScalingSnapshot.read(d.clients, d.spec),
          lambda: apply_scaling(d.spec, clients=d.clients))


def observability_step(d: Target, run: Run) -> None:
    _step(run, f"dashboard and alarms of {d.spec.name}",
          lambda: ObservabilitySnapshot.read(d.clients, d.spec),
          lambda: apply_observability(d.spec, d.plan, clients=d.clients, image=d.image_kind,
                                      resolved=d.resolved))


def plan_role(d: Target) -> list[Change]:
    return apply_execution_role(d.spec, d.bucket, clients=d.clients, image_uri=d.image_uri,
                                dry_run=True).changes


def plan_extras(d: Target, *, autoscaling: bool, observability: bool) -> list[Change]:
    """What the scaling and observability steps would change (read only)."""
    out: list[Change] = []
    if autoscaling:
        out += apply_scaling(d.spec, clients=d.clients, dry_run=True)
    if observability:
        out += apply_observability(d.spec, d.plan, clients=d.clients, dry_run=True,
                                   image=d.image_kind, resolved=d.resolved)
    return out


# --- destroy and status --------------------------------------------------------------------

def remove_scaling_step(d: Target, run: Run) -> None:
    """Before the base component is deleted: lmikit's policies, alarm and target."""
    run.checkpoint()
    for change in remove_scaling(d.spec, clients=d.clients):
        if change.changed:
            run.note(change.kind, change.name, "delete", "deleted")
        run.record(change)


def remove_rest_step(d: Target, run: Run) -> None:
    """After the endpoint is gone: dashboard and alarms, the rollback alarm, the role."""
    run.checkpoint()
    for change in remove_observability(d.spec, clients=d.clients):
        run.record(change)
    run.checkpoint()
    delete_rollback_alarm(d.clients, d.spec.name, run)
    run.checkpoint()
    for change in remove_execution_role(d.spec, clients=d.clients):
        run.record(change)
        if change.action == "unknown":
            run.result.notes.append(change.line())


def delete_rollback_alarm(clients: Clients, deployment: str, run: Run | None = None
                          ) -> Change | None:
    """Delete ``<base>-update-5xx`` when its tags say it is ``deployment``'s."""
    from lmikit.deploy import _alarm_writes

    cw = clients.cloudwatch
    name = rollback_alarm_name(deployment)
    found = _alarm_writes.describe(cw, names=[name])
    if not found or _alarm_writes.alarm_owner(cw, found[name]) != deployment:
        return None
    if run is not None:
        call(cw, "delete_alarms", AlarmNames=[name])
        run.record(Change("alarm", name, "delete"))
    return Change("alarm", name, "delete")


def leftovers(d: Target) -> list[Change]:
    """What a destroy would still delete besides SageMaker and S3 (read only)."""
    out = [c for c in remove_scaling(d.spec, clients=d.clients, dry_run=True) if c.changed]
    out += [c for c in remove_observability(d.spec, clients=d.clients, dry_run=True)
            if c.changed]
    alarm = delete_rollback_alarm(d.clients, d.spec.name)
    if alarm is not None:
        out.append(alarm)
    out += [c for c in remove_execution_role(d.spec, clients=d.clients, dry_run=True)
            if c.changed]
    return out


def status_rows(d: Target) -> list[ResourceState]:
    """The deployment's scaling, dashboard, alarms and role (those tagged as its own)."""
    return [ResourceState(c.kind, c.name, "exists", f"{DEPLOYMENT_TAG}={d.spec.name}")
            for c in leftovers(d)]
