"""Snapshots of what the built-in steps change, and how to put a snapshot back.

A deploy's rollback must leave the account "old or new". The built-in steps (execution role,
scaling, dashboard and alarms) each read what they may touch *before* they change anything;
the run registers "put this back" as the step's undo before its first write, so a step that
fails, loses an answer or is interrupted halfway is undone as surely as one that finished.
Putting a snapshot back compares it with the live state and only writes what differs:
whatever the run created is deleted (only when tagged as this deployment's), whatever it
updated or deleted is put again as it was (alarms with their tags, the dashboard's body, the
scalable target's bounds, the policies' configurations, the role's policy version).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from lmikit.aws import Clients, call, describe_or_none, paginate
from lmikit.deploy import _alarm_writes, _role
from lmikit.deploy._change import Change
from lmikit.deploy._scaling import our_policy_names, scalable_target, scaling_policies
from lmikit.errors import DeployError
from lmikit.names import DEPLOYMENT_TAG, execution_role_name
from lmikit.render import target_key
from lmikit.spec import DeploymentSpec

_POLICY_FIELDS = ("PolicyType", "TargetTrackingScalingPolicyConfiguration",
                  "StepScalingPolicyConfiguration")


@cache
def _put_alarm_fields() -> frozenset[str]:
    """The members of a PutMetricAlarm request (botocore's model of CloudWatch)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("cloudwatch")
    return frozenset(model.operation_model("PutMetricAlarm").input_shape.members)


def alarm_request(described: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    """The PutMetricAlarm request that recreates a described alarm (with its tags)."""
    request = {k: v for k, v in described.items()
               if k in _put_alarm_fields() and v not in (None, [], "")}
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return request


@dataclass
class Alarms:
    """Alarms by name (as described) with their tags; the scope is exact names or a prefix."""

    names: list[str] | None
    prefix: str | None
    found: dict[str, tuple[dict[str, Any], dict[str, str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, cw: Any, *, names: list[str] | None = None, prefix: str | None = None
             ) -> Alarms:
        out = cls(names, prefix)
        for name, alarm in _alarm_writes.describe(cw, names=names, prefix=prefix).items():
            out.found[name] = (alarm, _alarm_writes.alarm_tags(cw, alarm))
        return out

    def restore(self, cw: Any, deployment: str, arns: dict[str, str] | None = None
                ) -> list[str]:
        """Put the alarms back; ``arns`` maps an action ARN of the snapshot to its current
        value (a policy put again has a new ARN)."""
        now = Alarms.read(cw, names=self.names, prefix=self.prefix)
        done: list[str] = []
        doomed = [n for n, (_, tags) in now.found.items()
                  if n not in self.found and tags.get(DEPLOYMENT_TAG) == deployment]
        if doomed:
            call(cw, "delete_alarms", AlarmNames=sorted(doomed))
            done += [f"alarm {n} deleted" for n in sorted(doomed)]
        for name, (alarm, tags) in sorted(self.found.items()):
            request = alarm_request(alarm, tags)
            for key in ("AlarmActions", "OKActions", "InsufficientDataActions"):
                if request.get(key) and arns:
                    request[key] = [arns.get(a, a) for a in request[key]]
            current = now.found.get(name)
            if current is None or _alarm_writes.differences(request, current[0]):
                call(cw, "put_metric_alarm", **request)
                done.append(f"alarm {name} restored")
                # PutMetricAlarm tags only an alarm it creates: an update ignores Tags
                # (CloudWatch API reference, PutMetricAlarm), so those are set below.
            if current is not None and current[1] != tags:
                extra = sorted(set(current[1]) - set(tags))
                if extra:
                    call(cw, "untag_resource", ResourceARN=current[0]["AlarmArn"],
                         TagKeys=extra)
                if tags:
                    call(cw, "tag_resource", ResourceARN=current[0]["AlarmArn"],
                         Tags=request["Tags"])
                done.append(f"alarm {name} tags restored")
        return done


@dataclass
class ScalingSnapshot:
    """The base component's scalable target, lmikit's policies on it and their alarm."""

    spec: DeploymentSpec
    target: dict[str, Any] | None
    policies: dict[str, dict[str, Any]]
    alarms: Alarms

    @classmethod
    def read(cls, clients: Clients, spec: DeploymentSpec) -> ScalingSnapshot:
        aas = clients.autoscaling
        target = scalable_target(aas, spec)
        ours = our_policy_names(spec)
        policies = {n: p for n, p in scaling_policies(aas, spec).items() if n in ours} \
            if target is not None else {}
        return cls(spec, target, policies,
                   Alarms.read(clients.cloudwatch, names=[our_policy_names(spec)[1]]))

    def restore(self, clients: Clients) -> str | None:
        aas, cw, key = clients.autoscaling, clients.cloudwatch, target_key(self.spec)
        done: list[str] = []
        now = scalable_target(aas, self.spec)
        if self.target is None:
            done += self.alarms.restore(cw, self.spec.name)
            if now is not None:
                for name in scaling_policies(aas, self.spec):  # ours: the target is new
                    call(aas, "delete_scaling_policy", PolicyName=name, **key)
                call(aas, "deregister_scalable_target", **key)
                done.append(f"scalable target {key['ResourceId']} deregistered")
            return "; ".join(done) or None
        bounds = ("MinCapacity", "MaxCapacity", "RoleARN")
        if now is None or any(now.get(k) != self.target.get(k) for k in bounds):
            call(aas, "register_scalable_target", **key,
                 **{k: self.target[k] for k in bounds if self.target.get(k) is not None})
            done.append(f"scalable target {key['ResourceId']} back to "
                        f"{self.target['MinCapacity']}-{self.target['MaxCapacity']} copies")
        live = scaling_policies(aas, self.spec)
        arns: dict[str, str] = {}
        for name in our_policy_names(self.spec):
            old, current = self.policies.get(name), live.get(name)
            if old is None and current is not None:
                call(aas, "delete_scaling_policy", PolicyName=name, **key)
                done.append(f"scaling policy {name} deleted")
            elif old is not None and (current is None or any(
                    current.get(k) != old.get(k) for k in _POLICY_FIELDS)):
                put = call(aas, "put_scaling_policy", PolicyName=name, **key,
                           **{k: old[k] for k in _POLICY_FIELDS if old.get(k)})
                arns[str(old["PolicyARN"])] = str(put["PolicyARN"])
                done.append(f"scaling policy {name} restored")
        done += self.alarms.restore(cw, self.spec.name, arns)
        return "; ".join(done) or None


@dataclass
class ObservabilitySnapshot:
    """The deployment's dashboard (its body) and its ``<name>-lmikit-*`` alarms."""

    spec: DeploymentSpec
    dashboard_name: str
    dashboard: str | None  # the body exactly as stored
    alarms: Alarms

    @classmethod
    def read(cls, clients: Clients, spec: DeploymentSpec) -> ObservabilitySnapshot:
        from lmikit.render import alarm_prefix, dashboard_name

        name = dashboard_name(spec)
        return cls(spec, name, _dashboard_body(clients.cloudwatch, name),
                   Alarms.read(clients.cloudwatch, prefix=alarm_prefix(spec)))

    def restore(self, clients: Clients) -> str | None:
        cw = clients.cloudwatch
        done = self.alarms.restore(cw, self.spec.name)
        now = _dashboard_body(cw, self.dashboard_name)
        if self.dashboard is None and now is not None:  # created by this run
            call(cw, "delete_dashboards", DashboardNames=[self.dashboard_name])
            done.append(f"dashboard {self.dashboard_name} deleted")
        elif self.dashboard is not None and now != self.dashboard:
            call(cw, "put_dashboard", DashboardName=self.dashboard_name,
                 DashboardBody=self.dashboard)
            done.append(f"dashboard {self.dashboard_name} restored")
        return "; ".join(done) or None


@dataclass
class RoleSnapshot:
    """``lmikit-<name>-execution`` and its managed policy, as they were."""

    spec: DeploymentSpec
    role: dict[str, Any] | None
    role_tags: dict[str, str] = field(default_factory=dict)
    policy_arn: str | None = None
    default_version: str | None = None
    versions: set[str] = field(default_factory=set)
    attached: bool = False
    inline: dict[str, Any] | None = None

    @classmethod
    def read(cls, clients: Clients, spec: DeploymentSpec) -> RoleSnapshot:
        iam, name = clients.iam, execution_role_name(spec.name)
        found = describe_or_none(iam, "get_role", RoleName=name)
        if found is None:
            return cls(spec, None)
        snap = cls(spec, found["Role"], _tag_map(iam, "list_role_tags", RoleName=name))
        arn = str(found["Role"]["Arn"]).replace(":role/", ":policy/", 1)
        policy = describe_or_none(iam, "get_policy", PolicyArn=arn)
        if policy is not None:
            snap.policy_arn = arn
            snap.default_version = str(policy["Policy"]["DefaultVersionId"])
            snap.versions = {v["VersionId"] for v in paginate(
                iam, "list_policy_versions", "Versions", PolicyArn=arn)}
        snap.attached = arn in {p["PolicyArn"] for p in paginate(
            iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name)}
        snap.inline = describe_or_none(iam, "get_role_policy", RoleName=name,
                                       PolicyName=_role.LEGACY_INLINE_POLICY)
        return snap

    def restore(self, clients: Clients) -> str | None:
        iam, name = clients.iam, execution_role_name(self.spec.name)
        if self.role is None:
            gone = [c for c in _role.remove_execution_role(self.spec, clients=clients)
                    if c.action == "delete"]
            return ", ".join(f"{c.kind} {c.name} deleted" for c in gone) or None
        done: list[str] = []
        now = describe_or_none(iam, "get_role", RoleName=name)
        if now is None:
            raise DeployError(f"IAM role {name} was deleted during the run")
        role = now["Role"]
        if role.get("Description") != self.role.get("Description"):
            call(iam, "update_role", RoleName=name,
                 Description=self.role.get("Description") or "")
            done.append("description")
        trust = self.role.get("AssumeRolePolicyDocument")
        if _role.document_of(role.get("AssumeRolePolicyDocument")) != _role.document_of(trust):
            call(iam, "update_assume_role_policy", RoleName=name,
                 PolicyDocument=json.dumps(_role.document_of(trust)))
            done.append("trust policy")
        tags = _tag_map(iam, "list_role_tags", RoleName=name)
        if tags != self.role_tags:
            extra = sorted(set(tags) - set(self.role_tags))
            if extra:
                call(iam, "untag_role", RoleName=name, TagKeys=extra)
            call(iam, "tag_role", RoleName=name,
                 Tags=[{"Key": k, "Value": v} for k, v in sorted(self.role_tags.items())])
            done.append("tags")
        done += self._restore_policy(iam, name, str(role["Arn"]))
        return f"iam-role {name} restored ({', '.join(done)})" if done else None

    def _restore_policy(self, iam: Any, name: str, role_arn: str) -> list[str]:
        done: list[str] = []
        arn = role_arn.replace(":role/", ":policy/", 1)
        attached = arn in {p["PolicyArn"] for p in paginate(
            iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name)}
        if attached and not self.attached:
            call(iam, "detach_role_policy", RoleName=name, PolicyArn=arn)
            done.append("policy detached")
        policy = describe_or_none(iam, "get_policy", PolicyArn=arn)
        if self.policy_arn is None and policy is not None:
            for change in _role.remove_policy(iam, self.spec, arn):
                done.append(change.line())
        elif self.policy_arn is not None and policy is not None:
            if policy["Policy"]["DefaultVersionId"] != self.default_version:
                call(iam, "set_default_policy_version", PolicyArn=arn,
                     VersionId=self.default_version)
                done.append(f"policy version {self.default_version}")
            for v in paginate(iam, "list_policy_versions", "Versions", PolicyArn=arn):
                if v["VersionId"] not in self.versions and not v["IsDefaultVersion"]:
                    call(iam, "delete_policy_version", PolicyArn=arn, VersionId=v["VersionId"])
        if self.attached and not attached:
            call(iam, "attach_role_policy", RoleName=name, PolicyArn=arn)
            done.append("policy attached")
        if self.inline is not None and describe_or_none(
                iam, "get_role_policy", RoleName=name,
                PolicyName=_role.LEGACY_INLINE_POLICY) is None:
            document = _role.document_of(self.inline["PolicyDocument"])
            call(iam, "put_role_policy", RoleName=name, PolicyName=_role.LEGACY_INLINE_POLICY,
                 PolicyDocument=json.dumps(document))
            done.append("inline policy")
        return done


def _dashboard_body(cw: Any, name: str) -> str | None:
    found = describe_or_none(cw, "get_dashboard", DashboardName=name)
    return None if found is None else str(found.get("DashboardBody") or "")


def _tag_map(iam: Any, operation: str, **kwargs: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in paginate(iam, operation, "Tags", **kwargs)}


__all__ = ["Alarms", "Change", "ObservabilitySnapshot", "RoleSnapshot", "ScalingSnapshot",
           "alarm_request"]
