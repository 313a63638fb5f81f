"""Destroy and status: every resource of a deployment, found by its tags.

A destroy that stops halfway (an error, Ctrl-C) says what is still there and that
``lmikit destroy`` again finishes it: every step is idempotent.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from lmikit.aws import (
    ArtifactStore,
    Clients,
    Lease,
    base_of,
    components_of,
    delete,
    describe,
    not_ours_message,
    owned_names,
    owner_of,
    tags_of,
)
from lmikit.deploy import _builtin
from lmikit.deploy._gc import usage
from lmikit.deploy._hooks import Hook
from lmikit.deploy._interrupt import Interrupts, StopRequested
from lmikit.deploy._result import Change, DeployResult, ResourceState
from lmikit.deploy._run import Run
from lmikit.errors import DeployError, DeployFailed, Interrupted, LmikitError
from lmikit.spec import DeploymentSpec


class Deployment(_builtin.Target, Protocol):
    """What destroy and status use of :class:`lmikit.deploy.Deployment`."""

    spec: DeploymentSpec
    spec_path: str
    clients: Clients
    interrupts: Interrupts
    force_unlock: bool
    pre_destroy_steps: list[Hook]

    @property
    def base_name(self) -> str: ...
    def new_run(self) -> Run: ...
    def store(self) -> ArtifactStore: ...
    def lease(self, operation: str) -> Lease: ...
    def run_steps(self, steps: list[Hook], run: Run) -> None: ...
    def release(self, lease: Lease, run: Run) -> None: ...


def destroy(d: Deployment, *, keep_artifacts: bool = False) -> DeployResult:
    run = d.new_run()
    store = d.store()
    lease: Lease | None = None
    if store.bucket_exists():
        lease = d.lease("destroy")
        lease.acquire(force=d.force_unlock)
        run.keep_alive = lease.keep_alive
    try:
        try:
            d.run_steps(d.pre_destroy_steps, run)
            _destroy(d, run, store, keep_artifacts)
        except (LmikitError, StopRequested, KeyboardInterrupt) as exc:
            raise _stopped(d, run, store, exc, keep_artifacts) from exc
    finally:
        if lease is not None:
            d.release(lease, run)
    return run.result


def _destroy(d: Deployment, run: Run, store: ArtifactStore, keep_artifacts: bool) -> None:
    sm, name = run.sm, d.spec.name
    endpoint = run.waiter.settled("endpoint", name)
    if endpoint is not None:
        owner = owner_of(tags_of(sm, endpoint["EndpointArn"]))
        if owner != name:
            raise DeployError(not_ours_message("endpoint", name, name, owner))
    ours: list[dict[str, Any]] = []
    foreign: list[dict[str, Any]] = []
    for comp in components_of(sm, name) if endpoint is not None else []:
        comp = run.waiter.settled("inference-component", comp["InferenceComponentName"]) \
            or comp
        (ours if owner_of(tags_of(sm, comp["InferenceComponentArn"])) == name
         else foreign).append(comp)
    _builtin.remove_scaling_step(d, run)  # before the component it scales goes
    for group in ([c for c in ours if base_of(c)], [c for c in ours if not base_of(c)]):
        run.parallel([functools.partial(_delete_component, run, c["InferenceComponentName"])
                      for c in group])
    used = usage(sm, name)
    for model in owned_names(sm, "model", name):
        if model not in used.models:
            _delete(run, "model", model)
    if endpoint is not None:
        if foreign:
            raise DeployError(
                f"endpoint {name} also hosts inference components that are not deployment "
                f"{name!r}'s ({', '.join(c['InferenceComponentName'] for c in foreign)}); "
                "lmikit does not delete them, so the endpoint stays")
        run.checkpoint()
        with run.flight(f"endpoint {name}", "Deleting"):
            run.note("endpoint", name, "delete", "Deleting")
            delete(sm, "endpoint", name)
            run.waiter.gone("endpoint", name)
        run.record(Change("endpoint", name, "delete"))
    else:
        run.record(Change("endpoint", name, "absent"))
    used = usage(sm, name)
    for config in owned_names(sm, "endpoint-config", name):
        if config not in used.configs:
            _delete(run, "endpoint-config", config)
    _builtin.remove_rest_step(d, run)
    if not keep_artifacts:
        for key in store.keys():
            url = f"s3://{store.bucket}/{key}"
            if url not in used.urls and store.is_ours(key):
                run.checkpoint()
                store.delete_key(key)
                run.note("artifact", url, "delete", "deleted")
                run.record(Change("artifact", url, "delete"))


def _delete_component(run: Run, name: str) -> None:
    run.checkpoint()
    with run.flight(f"inference-component {name}", "Deleting"):
        run.note("inference-component", name, "delete", "Deleting")
        delete(run.sm, "inference-component", name)
        run.waiter.gone("inference-component", name)
    run.record(Change("inference-component", name, "delete"))


def _delete(run: Run, kind: str, name: str) -> None:
    run.checkpoint()
    delete(run.sm, kind, name)
    run.note(kind, name, "delete", "deleted")
    run.record(Change(kind, name, "delete"))


def remaining(d: Deployment, store: ArtifactStore, keep_artifacts: bool) -> list[str]:
    """What of the deployment is still there (best effort)."""
    sm, name = d.clients.sagemaker, d.spec.name
    out: list[str] = []
    endpoint = describe(sm, "endpoint", name)
    if endpoint is not None:
        out += [f"inference-component {c['InferenceComponentName']} "
                f"({c['InferenceComponentStatus']})" for c in components_of(sm, name)
                if owner_of(tags_of(sm, c["InferenceComponentArn"])) == name]
        out.append(f"endpoint {name} ({endpoint['EndpointStatus']})")
    out += [f"model {m}" for m in owned_names(sm, "model", name)]
    out += [f"endpoint-config {c}" for c in owned_names(sm, "endpoint-config", name)]
    out += [f"{c.kind} {c.name}" for c in _builtin.leftovers(d)]
    if not keep_artifacts:
        out += [f"artifact s3://{store.bucket}/{k}" for k in store.keys() if store.is_ours(k)]
    return out


def _stopped(d: Deployment, run: Run, store: ArtifactStore, exc: BaseException,
             keep_artifacts: bool) -> DeployFailed:
    if isinstance(exc, KeyboardInterrupt) and not d.interrupts.handler_installed:
        d.interrupts.press()
    stopped = d.interrupts.stop_requested
    cause = ("stopped waiting (a second Ctrl-C)" if d.interrupts.abandon else
             "interrupted by the user (Ctrl-C)" if stopped else str(exc))
    lines = [f"destroy of {d.spec.name!r} stopped: {cause}"]
    gone = [f"{c.kind} {c.name}" for c in run.result.changes if c.action == "delete"]
    lines.append("Deleted: " + (", ".join(gone) if gone else "nothing") + ".")
    flying = [f"{what} ({doing})" for what, doing in sorted(run.in_flight.items())]
    if flying:
        lines.append("Still in progress on AWS: " + ", ".join(flying) + ".")
    try:
        left = remaining(d, store, keep_artifacts)
    except LmikitError as err:
        left = [f"(could not list what is left: {err})"]
    lines.append("Still there: " + (", ".join(left) if left else "nothing") + ".")
    lines.append(f"Run `lmikit destroy {d.spec_path}` again to finish deleting it.")
    cls = Interrupted if stopped else DeployFailed
    return cls("\n".join(lines), state="partial" if left else "new", left=tuple(left))


def status(d: Deployment) -> list[ResourceState]:
    """Every resource of the deployment with its current state."""
    sm, name = d.clients.sagemaker, d.spec.name
    rows: list[ResourceState] = []
    desc = describe(sm, "endpoint", name)
    if desc is None:
        rows.append(ResourceState("endpoint", name, "absent"))
    else:
        detail = f"config {desc.get('EndpointConfigName')}"
        for v in desc.get("ProductionVariants", []):
            detail += f"; {v['VariantName']}: {v.get('CurrentInstanceCount', '?')} instance(s)"
        if desc.get("FailureReason"):
            detail += f"; {desc['FailureReason']}"
        owner = owner_of(tags_of(sm, desc["EndpointArn"]))
        if owner != name:
            detail += f"; not this deployment's (lmikit:deployment={owner})"
        rows.append(ResourceState("endpoint", name, desc["EndpointStatus"], detail))
        cfg = desc.get("EndpointConfigName")
        if cfg:
            exists = describe(sm, "endpoint-config", cfg) is not None
            rows.append(ResourceState("endpoint-config", cfg,
                                      "exists" if exists else "deleted", "in use"))
        for comp in components_of(sm, name):
            rows.append(_component_row(sm, comp, name))
    if desc is None:
        for cfg in owned_names(sm, "endpoint-config", name):
            rows.append(ResourceState("endpoint-config", cfg, "exists", "not in use"))
    return rows + _builtin.status_rows(d)


def _component_row(sm: Any, d: dict[str, Any], deployment: str) -> ResourceState:
    base = base_of(d)
    detail = f"adapter of {base}" if base else "base"
    rc = d.get("RuntimeConfig")
    if rc:
        detail += f"; copies {rc.get('CurrentCopyCount')}/{rc.get('DesiredCopyCount')}"
    if d.get("FailureReason"):
        detail += f"; {d['FailureReason']}"
    owner = owner_of(tags_of(sm, d["InferenceComponentArn"]))
    if owner != deployment:
        detail += f"; not this deployment's (lmikit:deployment={owner})"
    return ResourceState("inference-component", d["InferenceComponentName"],
                         d["InferenceComponentStatus"], detail)
