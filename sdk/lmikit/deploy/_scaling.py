"""Copy-count autoscaling of the base component with boto3: what CDK's ``CopyCountScaling``
creates, from the same request dicts (:func:`lmikit.render.render_scaling`).

:func:`apply_scaling` registers the scalable target, puts the target-tracking policy and, for
``instance.min_count: 0``, the scale-from-zero step policy and the alarm that runs it; when
the spec no longer scales to zero it deletes that policy and alarm. :func:`remove_scaling`
deletes lmikit's policies and alarm and deregisters the target unless someone else's policy
is still on it (deregistering deletes every policy of a target). Both are idempotent and
touch only lmikit's own: the policies lmikit names (:mod:`lmikit.names`), the alarm tagged
``lmikit:deployment=<name>``, the target of lmikit's base component.

:class:`lmikit.deploy.Deployment` runs ``apply_scaling`` after the base component is InService
(Application Auto Scaling checks that the component exists) and ``remove_scaling`` before it
deletes the component. ``dry_run=True`` reads and reports without writing.

>>> from lmikit.deploy import apply_scaling  # doctest: +SKIP
>>> [c.line() for c in apply_scaling(spec)]  # doctest: +SKIP
['create scalable-target inference-component/chat-small-base', ...]
"""

from __future__ import annotations

from typing import Any

from lmikit.aws import Clients, call, paginate
from lmikit.deploy import _alarm_writes
from lmikit.deploy._change import Change
from lmikit.names import scale_from_zero_name, target_tracking_policy_name
from lmikit.render import (
    SERVICE_NAMESPACE,
    no_capacity_alarm,
    partition_of,
    render_scaling,
    service_linked_role_arn,
    target_key,
)
from lmikit.spec import DeploymentSpec

__all__ = ["apply_scaling", "our_policy_names", "remove_scaling", "scalable_target",
           "scaling_policies"]

_CONFIGS = ("TargetTrackingScalingPolicyConfiguration", "StepScalingPolicyConfiguration")
# The ARN a dry run gives a policy that does not exist yet (the alarm that names it is new).
_PENDING_ARN = "<the scale-from-zero policy's ARN>"


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v not in (None, False, [], {})}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _clients(spec: DeploymentSpec, session: Any, clients: Clients | None) -> Clients:
    return clients if clients is not None else Clients(session, spec.region)


def our_policy_names(spec: DeploymentSpec) -> tuple[str, str]:
    """The scaling policies lmikit puts on the base component's target."""
    return target_tracking_policy_name(spec.name), scale_from_zero_name(spec.name)


def scalable_target(aas: Any, spec: DeploymentSpec) -> dict[str, Any] | None:
    """The base component's scalable target as described, or None."""
    key = target_key(spec)
    found = paginate(aas, "describe_scalable_targets", "ScalableTargets",
                     ServiceNamespace=SERVICE_NAMESPACE, ResourceIds=[key["ResourceId"]],
                     ScalableDimension=key["ScalableDimension"])
    return found[0] if found else None


def scaling_policies(aas: Any, spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """Every scaling policy on the base component's target, by name."""
    return {p["PolicyName"]: p for p in paginate(aas, "describe_scaling_policies",
                                                 "ScalingPolicies", **target_key(spec))}


def apply_scaling(spec: DeploymentSpec, *, session: Any = None, account: str | None = None,
                  clients: Clients | None = None, dry_run: bool = False) -> list[Change]:
    """Create or update the scaling of the base component (idempotent).

    :param session: boto3 session (one for ``spec.region`` if None); or pass ``clients``.
    :param account: the account id for the service-linked role's ARN (read with STS if None).
    :param dry_run: read only; return what would change.
    :returns: one :class:`lmikit.deploy.Change` per scalable target, policy and alarm.
    """
    c = _clients(spec, session, clients)
    aas, cw = c.autoscaling, c.cloudwatch
    role = service_linked_role_arn(partition_of(spec.region), account or c.account())
    req = render_scaling(spec, role_arn=role)
    key = target_key(spec)
    changes: list[Change] = []
    stored = scalable_target(aas, spec)
    if stored is None:
        if not dry_run:
            call(aas, "register_scalable_target", **req.target)
        changes.append(Change("scalable-target", key["ResourceId"], "create",
                              f"{req.target['MinCapacity']}-{req.target['MaxCapacity']} "
                              "copies"))
    else:
        want = {k: req.target[k] for k in ("MinCapacity", "MaxCapacity", "RoleARN")}
        have = {k: stored.get(k) for k in want}
        if want == have:
            changes.append(Change("scalable-target", key["ResourceId"], "unchanged"))
        else:
            # Tags apply only when a target is created; re-registering updates it in place.
            update = {k: v for k, v in req.target.items() if k != "Tags"}
            if not dry_run:
                call(aas, "register_scalable_target", **update)
            changes.append(Change("scalable-target", key["ResourceId"], "update",
                                  f"{have['MinCapacity']}-{have['MaxCapacity']} -> "
                                  f"{want['MinCapacity']}-{want['MaxCapacity']} copies"))
    policies = scaling_policies(aas, spec) if stored is not None else {}
    arns: dict[str, str] = {}
    for request in req.policies:
        change, arns[request["PolicyName"]] = _put_policy(
            aas, request, policies.get(request["PolicyName"]), dry_run)
        changes.append(change)
    alarm_name = scale_from_zero_name(spec.name)
    alarms = _alarm_writes.describe(cw, names=[alarm_name])
    if req.scale_from_zero is not None:
        alarm = no_capacity_alarm(spec, arns[req.scale_from_zero["PolicyName"]])
        changes.append(_alarm_writes.put(cw, alarm, spec.name, alarms.get(alarm_name),
                                       dry_run=dry_run))
    else:
        # No longer scales to zero: the wake-up alarm and policy go.
        changes += _alarm_writes.delete_ours(cw, alarms.values(), spec.name, dry_run=dry_run)
        if alarm_name in policies:
            changes.append(_delete_policy(aas, spec, alarm_name, dry_run))
    return changes


def _put_policy(aas: Any, request: dict[str, Any], stored: dict[str, Any] | None,
                dry_run: bool) -> tuple[Change, str]:
    name = request["PolicyName"]
    if stored is not None:
        diff = [k for k in ("PolicyType", *_CONFIGS)
                if _norm(request.get(k)) != _norm(stored.get(k))]
        if not diff:
            return Change("scaling-policy", name, "unchanged"), str(stored["PolicyARN"])
    arn = str(stored["PolicyARN"]) if stored is not None else _PENDING_ARN
    if not dry_run:
        arn = str(call(aas, "put_scaling_policy", **request)["PolicyARN"])
    if stored is None:
        return Change("scaling-policy", name, "create", request["PolicyType"]), arn
    return Change("scaling-policy", name, "update", ", ".join(diff)), arn


def _delete_policy(aas: Any, spec: DeploymentSpec, name: str, dry_run: bool = False
                   ) -> Change:
    if not dry_run:
        call(aas, "delete_scaling_policy", PolicyName=name, **target_key(spec))
    return Change("scaling-policy", name, "delete")


def remove_scaling(spec: DeploymentSpec, *, session: Any = None,
                   clients: Clients | None = None, dry_run: bool = False) -> list[Change]:
    """Delete lmikit's scaling of the base component (idempotent; see the module doc).

    :returns: one :class:`lmikit.deploy.Change` per alarm, policy and the target
        (``delete``, ``absent``, or ``kept`` with the reason).
    """
    c = _clients(spec, session, clients)
    aas, cw = c.autoscaling, c.cloudwatch
    key = target_key(spec)
    alarm_name = scale_from_zero_name(spec.name)
    alarms = _alarm_writes.describe(cw, names=[alarm_name])
    changes = _alarm_writes.delete_ours(cw, alarms.values(), spec.name, dry_run=dry_run) or [
        Change("alarm", alarm_name, "absent")]
    policies = scaling_policies(aas, spec)
    ours = our_policy_names(spec)
    for name in ours:
        if name in policies:
            changes.append(_delete_policy(aas, spec, name, dry_run))
        else:
            changes.append(Change("scaling-policy", name, "absent"))
    if scalable_target(aas, spec) is None:
        return [*changes, Change("scalable-target", key["ResourceId"], "absent")]
    others = sorted(set(policies) - set(ours))
    if others:
        return [*changes, Change("scalable-target", key["ResourceId"], "kept",
                                 "other scaling policies remain: " + ", ".join(others))]
    if not dry_run:
        call(aas, "deregister_scalable_target", **key)
    return [*changes, Change("scalable-target", key["ResourceId"], "delete")]
