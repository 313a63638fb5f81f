"""Idempotent CloudWatch alarm writes that touch only lmikit's own alarms.

An alarm is lmikit's when its ``lmikit:deployment`` tag names the deployment. ``put`` keeps
an alarm unchanged when it already matches the request, refuses one another deployment owns
(its tag names that deployment) and adopts an untagged one that carries the exact name lmikit
renders for this deployment (alarms earlier lmikit versions created without tags), tagging it.
Deleting never touches an alarm without this deployment's tag.

Every writer takes ``dry_run``: it then reads as usual and returns the same
:class:`~lmikit.deploy.Change` records without writing anything (``lmikit deploy --dry-run``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lmikit.aws import call, owner_of, paginate, tag_dict
from lmikit.deploy._change import Change
from lmikit.errors import DeployError
from lmikit.names import DEPLOYMENT_TAG

# Fields PutMetricAlarm sets that DescribeAlarms returns under the same name; one the request
# leaves out but the stored alarm has (non-empty) is a difference too.
_COMPARED_ABSENT = ("OKActions", "AlarmActions", "InsufficientDataActions", "Namespace",
                    "MetricName", "Statistic", "ExtendedStatistic", "Period", "Dimensions",
                    "Metrics", "DatapointsToAlarm", "Unit", "ThresholdMetricId",
                    "EvaluateLowSampleCountPercentile")
_DEFAULTS: dict[str, Any] = {"ActionsEnabled": True}


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def differences(request: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """Fields where a stored alarm (DescribeAlarms) differs from a PutMetricAlarm request."""
    out = []
    for key, want in request.items():
        if key == "Tags":
            continue
        have = stored.get(key, _DEFAULTS.get(key))
        if _norm(want) != _norm(have) and not (want in ([], None) and have in ([], None)):
            out.append(key)
    out += [k for k in _COMPARED_ABSENT if k not in request and stored.get(k)]
    return out


def describe(cw: Any, *, names: list[str] | None = None, prefix: str | None = None
             ) -> dict[str, dict[str, Any]]:
    """Metric alarms by name (all pages), by exact names or a name prefix."""
    kwargs: dict[str, Any] = {"AlarmTypes": ["MetricAlarm"]}
    if names is not None:
        if not names:
            return {}
        kwargs["AlarmNames"] = names
    if prefix is not None:
        kwargs["AlarmNamePrefix"] = prefix
    return {a["AlarmName"]: a for a in paginate(cw, "describe_alarms", "MetricAlarms",
                                                 **kwargs)}


def alarm_tags(cw: Any, alarm: dict[str, Any]) -> dict[str, str]:
    return tag_dict(call(cw, "list_tags_for_resource",
                         ResourceARN=alarm["AlarmArn"]).get("Tags"))


def alarm_owner(cw: Any, alarm: dict[str, Any]) -> str | None:
    return owner_of(alarm_tags(cw, alarm))


def put(cw: Any, request: dict[str, Any], deployment: str,
        stored: dict[str, Any] | None, kind: str = "alarm", *, dry_run: bool = False
        ) -> Change:
    """Create or update one alarm from its PutMetricAlarm request (see the module doc)."""
    name = request["AlarmName"]
    if stored is None:
        if not dry_run:
            call(cw, "put_metric_alarm", **request)
        return Change(kind, name, "create")
    who = alarm_owner(cw, stored)
    if who not in (None, deployment):
        raise DeployError(f"alarm {name} belongs to lmikit deployment {who!r} (tag "
                          f"{DEPLOYMENT_TAG}={who}); deployment {deployment!r} does not "
                          "overwrite it")
    diff = differences(request, stored)
    if not diff and who == deployment:
        return Change(kind, name, "unchanged")
    if diff and not dry_run:
        call(cw, "put_metric_alarm", **request)
    if who is None and request.get("Tags") and not dry_run:
        # PutMetricAlarm ignores Tags when it updates an existing alarm.
        call(cw, "tag_resource", ResourceARN=stored["AlarmArn"], Tags=request["Tags"])
    detail = ", ".join(diff) if diff else ""
    if who is None:
        detail = (detail + "; " if detail else "") + f"tagged {DEPLOYMENT_TAG}={deployment}"
    return Change(kind, name, "update", detail)


def delete_ours(cw: Any, alarms: Iterable[dict[str, Any]], deployment: str,
                kind: str = "alarm", *, dry_run: bool = False) -> list[Change]:
    """Delete the alarms tagged as ``deployment``'s; keep (and report) the others."""
    changes: list[Change] = []
    doomed: list[str] = []
    for alarm in alarms:
        who = alarm_owner(cw, alarm)
        if who == deployment:
            doomed.append(alarm["AlarmName"])
            changes.append(Change(kind, alarm["AlarmName"], "delete"))
        else:
            changes.append(Change(kind, alarm["AlarmName"], "kept",
                                  f"not tagged {DEPLOYMENT_TAG}={deployment}"))
    for i in range(0, len(doomed) if not dry_run else 0, 100):  # at most 100 names a call
        call(cw, "delete_alarms", AlarmNames=doomed[i:i + 100])
    return changes
