"""What the account holds besides SageMaker, read straight from the services (moto here, the
sandbox in e2e), independently of lmikit's own readers: scalable targets and scaling
policies, CloudWatch alarms (with their tags) and dashboards, IAM roles and policies.

Used to judge deploys, rollbacks and destroys: ``extras(clients, "docqa")`` is everything of
deployment ``docqa``'s (by its names and the ``lmikit:deployment`` tag), and nothing of
``docqa-v2``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

ALARM_FIELDS = ("AlarmDescription", "ActionsEnabled", "AlarmActions", "OKActions",
                "InsufficientDataActions", "MetricName", "Namespace", "Statistic", "Dimensions",
                "Period", "EvaluationPeriods", "DatapointsToAlarm", "Threshold",
                "ComparisonOperator", "TreatMissingData", "Metrics")


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _owned(tags: list[dict[str, str]], name: str) -> bool:
    return {"Key": "lmikit:deployment", "Value": name} in tags


def extras(client: Callable[[str], Any], name: str) -> dict[str, Any]:
    """Deployment ``name``'s scaling, alarms, dashboard and role, as comparable values.

    ``client(service)`` makes a boto3 client of the account."""
    aas, cw, iam = client("application-autoscaling"), client("cloudwatch"), client("iam")
    resource = f"inference-component/{name}-base"
    targets = {t["ResourceId"]: (t["MinCapacity"], t["MaxCapacity"]) for t in
               aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
               if t["ResourceId"] == resource}
    policies = {p["PolicyName"]: _dump([p["PolicyType"],
                                        p.get("TargetTrackingScalingPolicyConfiguration"),
                                        p.get("StepScalingPolicyConfiguration")])
                for p in aas.describe_scaling_policies(
                    ServiceNamespace="sagemaker")["ScalingPolicies"]
                if p["ResourceId"] == resource}
    alarms = {}
    for a in cw.describe_alarms()["MetricAlarms"]:
        tags = cw.list_tags_for_resource(ResourceARN=a["AlarmArn"])["Tags"]
        if _owned(tags, name) or a["AlarmName"].startswith((f"{name}-base-",
                                                            f"{name}-lmikit-")):
            # a policy's ARN carries an id that changes when the policy is put again
            actions = [re.sub(r":scalingPolicy:[^:]+:", ":scalingPolicy:*:", x)
                       for x in a.get("AlarmActions", [])]
            alarms[a["AlarmName"]] = _dump([{k: a.get(k) for k in ALARM_FIELDS
                                             if k != "AlarmActions"}, actions,
                                            sorted((t["Key"], t["Value"]) for t in tags)])
    dashboards = {d["DashboardName"]: cw.get_dashboard(
        DashboardName=d["DashboardName"])["DashboardBody"]
        for d in cw.list_dashboards()["DashboardEntries"]
        if d["DashboardName"] == f"{name}-lmikit"}
    role = f"lmikit-{name}-execution"
    roles = {}
    for r in iam.list_roles()["Roles"]:
        if r["RoleName"] == role:
            attached = [p["PolicyName"] for p in iam.list_attached_role_policies(
                RoleName=role)["AttachedPolicies"]]
            tags = iam.list_role_tags(RoleName=role)["Tags"]
            roles[role] = _dump([attached, sorted((t["Key"], t["Value"]) for t in tags)])
    iam_policies = {}
    for p in iam.list_policies(Scope="Local")["Policies"]:
        if p["PolicyName"] == role:
            doc = iam.get_policy_version(PolicyArn=p["Arn"], VersionId=p["DefaultVersionId"])
            iam_policies[role] = _dump(doc["PolicyVersion"]["Document"])
    return {"scalable-targets": targets, "scaling-policies": policies, "alarms": alarms,
            "dashboards": dashboards, "roles": roles, "iam-policies": iam_policies}


def nothing() -> dict[str, Any]:
    """What :func:`extras` reads for a deployment that has nothing."""
    return {"scalable-targets": {}, "scaling-policies": {}, "alarms": {}, "dashboards": {},
            "roles": {}, "iam-policies": {}}
