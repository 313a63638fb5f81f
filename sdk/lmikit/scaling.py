"""Copy-count autoscaling of the base component with boto3: what CDK's ``CopyCountScaling``
creates, from the same request dicts (:mod:`lmikit.render.scaling`).

:func:`apply_scaling` registers the scalable target, puts the target-tracking policy and, for
``instance.min_count: 0``, the scale-from-zero step policy and the alarm that runs it; when
the spec no longer scales to zero it deletes that policy and alarm. :func:`remove_scaling`
deletes lmikit's policies and alarm and deregisters the target unless someone else's policy
is still on it (deregistering deletes every policy of a target). Both are idempotent and
touch only lmikit's own: the policies lmikit names (:mod:`lmikit.names`), the alarm tagged
``lmikit:deployment=<name>``, the target of lmikit's base component.

Run ``apply_scaling`` after the base component is InService (Application Auto Scaling checks
that the component exists) and ``remove_scaling`` before the component is deleted.

>>> from lmikit.scaling import apply_scaling  # doctest: +SKIP
>>> [c.line() for c in apply_scaling(spec)]  # doctest: +SKIP
['create scalable-target inference-component/chat-small-base', ...]
"""

from __future__ import annotations

from typing import Any

from lmikit import _cloudwatch
from lmikit._boto import account_id, call, client
from lmikit.change import Change
from lmikit.names import scale_from_zero_name, target_tracking_policy_name
from lmikit.render.iam import partition_of
from lmikit.render.scaling import (
    SERVICE_NAMESPACE,
    no_capacity_alarm,
    render_scaling,
    service_linked_role_arn,
    target_key,
)
from lmikit.spec import DeploymentSpec

__all__ = ["apply_scaling", "remove_scaling"]

_CONFIGS = ("TargetTrackingScalingPolicyConfiguration", "StepScalingPolicyConfiguration")


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v not in (None, False, [], {})}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _target(aas: Any, spec: DeploymentSpec) -> dict[str, Any] | None:
    key = target_key(spec)
    page = call(aas, "describe_scalable_targets", key["ResourceId"],
                ServiceNamespace=SERVICE_NAMESPACE, ResourceIds=[key["ResourceId"]],
                ScalableDimension=key["ScalableDimension"])
    found = page.get("ScalableTargets", [])
    return found[0] if found else None


def _policies(aas: Any, spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """Every scaling policy on the base component's target, by name."""
    out: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {**target_key(spec)}
    while True:
        page = call(aas, "describe_scaling_policies", kwargs["ResourceId"], **kwargs)
        out |= {p["PolicyName"]: p for p in page.get("ScalingPolicies", [])}
        if not page.get("NextToken"):
            return out
        kwargs["NextToken"] = page["NextToken"]


def apply_scaling(spec: DeploymentSpec, *, session: Any = None,
                  account: str | None = None) -> list[Change]:
    """Create or update the scaling of the base component (idempotent).

    :param session: boto3 session (one for ``spec.region`` if None).
    :param account: the account id for the service-linked role's ARN (read with STS if None).
    :returns: one :class:`lmikit.change.Change` per scalable target, policy and alarm.
    """
    aas = client("application-autoscaling", spec.region, session)
    cw = client("cloudwatch", spec.region, session)
    partition = partition_of(spec.region)
    role = service_linked_role_arn(partition, account or account_id(spec.region, session))
    req = render_scaling(spec, role_arn=role)
    key = target_key(spec)
    changes: list[Change] = []
    stored = _target(aas, spec)
    if stored is None:
        call(aas, "register_scalable_target", key["ResourceId"], **req.target)
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
            call(aas, "register_scalable_target", key["ResourceId"], **update)
            changes.append(Change("scalable-target", key["ResourceId"], "update",
                                  f"{have['MinCapacity']}-{have['MaxCapacity']} -> "
                                  f"{want['MinCapacity']}-{want['MaxCapacity']} copies"))
    policies = _policies(aas, spec)
    arns: dict[str, str] = {}
    for request in req.policies:
        change, arns[request["PolicyName"]] = _put_policy(aas, request,
                                                          policies.get(request["PolicyName"]))
        changes.append(change)
    alarm_name = scale_from_zero_name(spec.name)
    alarms = _cloudwatch.describe(cw, names=[alarm_name])
    if req.scale_from_zero is not None:
        alarm = no_capacity_alarm(spec, arns[req.scale_from_zero["PolicyName"]])
        changes.append(_cloudwatch.put(cw, alarm, spec.name, alarms.get(alarm_name)))
    else:
        # No longer scales to zero: the wake-up alarm and policy go.
        changes += _cloudwatch.delete_ours(cw, alarms.values(), spec.name)
        if alarm_name in policies:
            changes.append(_delete_policy(aas, spec, alarm_name))
    return changes


def _put_policy(aas: Any, request: dict[str, Any], stored: dict[str, Any] | None
                ) -> tuple[Change, str]:
    name = request["PolicyName"]
    if stored is not None:
        diff = [k for k in ("PolicyType", *_CONFIGS)
                if _norm(request.get(k)) != _norm(stored.get(k))]
        if not diff:
            return Change("scaling-policy", name, "unchanged"), str(stored["PolicyARN"])
    arn = str(call(aas, "put_scaling_policy", name, **request)["PolicyARN"])
    if stored is None:
        return Change("scaling-policy", name, "create", request["PolicyType"]), arn
    return Change("scaling-policy", name, "update", ", ".join(diff)), arn


def _delete_policy(aas: Any, spec: DeploymentSpec, name: str) -> Change:
    call(aas, "delete_scaling_policy", name, PolicyName=name, **target_key(spec))
    return Change("scaling-policy", name, "delete")


def remove_scaling(spec: DeploymentSpec, *, session: Any = None) -> list[Change]:
    """Delete lmikit's scaling of the base component (idempotent; see the module doc).

    :returns: one :class:`lmikit.change.Change` per alarm, policy and the target
        (``delete``, ``absent``, or ``kept`` with the reason).
    """
    aas = client("application-autoscaling", spec.region, session)
    cw = client("cloudwatch", spec.region, session)
    key = target_key(spec)
    alarm_name = scale_from_zero_name(spec.name)
    alarms = _cloudwatch.describe(cw, names=[alarm_name])
    changes = _cloudwatch.delete_ours(cw, alarms.values(), spec.name) or [
        Change("alarm", alarm_name, "absent")]
    policies = _policies(aas, spec)
    ours = (target_tracking_policy_name(spec.name), scale_from_zero_name(spec.name))
    for name in ours:
        if name in policies:
            changes.append(_delete_policy(aas, spec, name))
        else:
            changes.append(Change("scaling-policy", name, "absent"))
    if _target(aas, spec) is None:
        return [*changes, Change("scalable-target", key["ResourceId"], "absent")]
    others = sorted(set(policies) - set(ours))
    if others:
        return [*changes, Change("scalable-target", key["ResourceId"], "kept",
                                 "other scaling policies remain: " + ", ".join(others))]
    call(aas, "deregister_scalable_target", key["ResourceId"], **key)
    return [*changes, Change("scalable-target", key["ResourceId"], "delete")]
