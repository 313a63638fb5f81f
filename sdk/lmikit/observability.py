"""Deploy the dashboard and alarms with boto3, for users who do not use CDK.

Both calls are idempotent ``put_*`` calls: rerunning them replaces the dashboard and each
alarm in place. ``deploy_alarms`` also deletes lmikit alarms of this deployment that the spec
no longer renders (e.g. a disk-tier alarm after the disk tier was removed).

>>> from lmikit.observability import deploy_dashboard, deploy_alarms  # doctest: +SKIP
>>> deploy_dashboard(spec, plan)   # uses boto3.client("cloudwatch", region_name=spec.region)
'docqa-qwen7b-lmikit'
"""

from __future__ import annotations

from typing import Any

from lmikit.errors import DeployError
from lmikit.plan import Plan
from lmikit.render.alarms import alarm_definitions, alarm_prefix
from lmikit.render.cloudwatch import put_dashboard_kwargs
from lmikit.spec import DeploymentSpec


def _client(spec: DeploymentSpec, cloudwatch_client: Any | None) -> Any:
    if cloudwatch_client is not None:
        return cloudwatch_client
    import boto3
    from botocore.config import Config

    return boto3.client("cloudwatch", region_name=spec.region,
                        config=Config(retries={"mode": "adaptive", "max_attempts": 8}))


def _call(what: str, fn: Any, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(**kwargs)
    except (BotoCoreError, ClientError) as exc:
        raise DeployError(f"{what} failed: {exc}") from exc


def deploy_dashboard(spec: DeploymentSpec, plan: Plan,
                     cloudwatch_client: Any | None = None) -> str:
    """Create or replace the deployment's dashboard; returns its name."""
    client = _client(spec, cloudwatch_client)
    kwargs = put_dashboard_kwargs(spec, plan)
    response = _call(f"PutDashboard {kwargs['DashboardName']}", client.put_dashboard, **kwargs)
    problems = response.get("DashboardValidationMessages") or []
    if problems:
        raise DeployError(f"dashboard {kwargs['DashboardName']} was stored with problems: "
                          + "; ".join(p.get("Message", str(p)) for p in problems))
    return str(kwargs["DashboardName"])


def deploy_alarms(spec: DeploymentSpec, plan: Plan, cloudwatch_client: Any | None = None,
                  *, prune: bool = True) -> list[str]:
    """Create or update every default alarm; returns their names.

    ``prune`` (default True) deletes alarms named ``<name>-lmikit-*`` that are no longer
    rendered, including all of them when ``observability.alarms.enabled`` is false.
    """
    client = _client(spec, cloudwatch_client)
    names = []
    for alarm in alarm_definitions(spec, plan):
        _call(f"PutMetricAlarm {alarm.name}", client.put_metric_alarm, **alarm.request())
        names.append(alarm.name)
    if prune:
        stale = sorted(set(_existing(client, alarm_prefix(spec))) - set(names))
        for i in range(0, len(stale), 100):  # DeleteAlarms takes at most 100 names
            _call("DeleteAlarms", client.delete_alarms, AlarmNames=stale[i:i + 100])
    return names


def _existing(client: Any, prefix: str) -> list[str]:
    names: list[str] = []
    kwargs: dict[str, Any] = {"AlarmNamePrefix": prefix}
    while True:
        page = _call("DescribeAlarms", client.describe_alarms, **kwargs)
        names += [a["AlarmName"] for a in page.get("MetricAlarms", [])]
        if not page.get("NextToken"):
            return names
        kwargs["NextToken"] = page["NextToken"]
