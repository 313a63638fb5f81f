"""The dashboard and default alarms with boto3: what CDK's ``LmiObservability`` creates.

:func:`apply_observability` makes CloudWatch hold exactly what the stack would: the
dashboard ``<name>-lmikit`` when ``observability.dashboard`` is on (else it deletes lmikit's
dashboard), and every alarm of :func:`lmikit.render.alarm_definitions` (the same
``PutMetricAlarm`` dicts the stack's ``AWS::CloudWatch::Alarm`` resources carry), deleting
this deployment's alarms the spec no longer renders. :func:`remove_observability` deletes them
all. Both are idempotent and touch only lmikit's own: alarms tagged
``lmikit:deployment=<name>`` (see :mod:`lmikit.deploy._alarm_writes`), and the dashboard of
that name whose title widget is lmikit's (dashboards take no tags).

``deploy_dashboard`` / ``deploy_alarms`` are the single-purpose calls these build on. Each
takes ``image``, the image the base component runs (``stock`` by default, as
:class:`lmikit.deploy.Deployment`): the cache panels and alarms need lmikit's image, the only
one that publishes the container's vLLM and LMCache metrics.

>>> from lmikit.deploy import apply_observability  # doctest: +SKIP
>>> [c.line() for c in apply_observability(spec, plan)]  # doctest: +SKIP
['create dashboard docqa-qwen7b-lmikit', 'create alarm docqa-qwen7b-lmikit-5xx-rate', ...]
"""

from __future__ import annotations

import json
from typing import Any

from lmikit.aws import Clients, call, describe_or_none
from lmikit.catalog import ImageKind
from lmikit.deploy import _alarm_writes
from lmikit.deploy._change import Change
from lmikit.errors import DeployError
from lmikit.planner import Plan
from lmikit.render import alarm_definitions, alarm_prefix, dashboard_name, put_dashboard_kwargs
from lmikit.resolve import Resolved
from lmikit.spec import DeploymentSpec

__all__ = ["apply_observability", "deploy_alarms", "deploy_dashboard", "remove_observability"]


def _client(spec: DeploymentSpec, cloudwatch_client: Any | None, session: Any = None,
            clients: Clients | None = None) -> Any:
    if cloudwatch_client is not None:
        return cloudwatch_client
    return (clients or Clients(session, spec.region)).cloudwatch


def stored_dashboard(cw: Any, name: str) -> dict[str, Any] | None:
    """The dashboard's body as stored (parsed), or None when there is no such dashboard."""
    found = describe_or_none(cw, "get_dashboard", DashboardName=name)
    if found is None:
        return None
    body = found.get("DashboardBody")
    parsed = json.loads(body) if body else {}
    return parsed if isinstance(parsed, dict) else {}


def is_lmikit_dashboard(spec: DeploymentSpec, body: dict[str, Any]) -> bool:
    """Whether a dashboard body is lmikit's for ``spec``: its first widget is the summary
    text titled ``# <name>:`` (:func:`lmikit.render.dashboard_body`)."""
    widgets = body.get("widgets") or [{}]
    text = widgets[0].get("properties", {}).get("markdown", "")
    return widgets[0].get("type") == "text" and str(text).startswith(f"# {spec.name}:")


def deploy_dashboard(spec: DeploymentSpec, plan: Plan,
                     cloudwatch_client: Any | None = None, *, session: Any = None,
                     image: ImageKind = "stock", resolved: Resolved | None = None) -> str:
    """Create or replace the deployment's dashboard; returns its name."""
    cw = _client(spec, cloudwatch_client, session)
    kwargs = put_dashboard_kwargs(spec, plan, image=image, resolved=resolved)
    response = call(cw, "put_dashboard", **kwargs)
    problems = response.get("DashboardValidationMessages") or []
    if problems:
        raise DeployError(f"dashboard {kwargs['DashboardName']} was stored with problems: "
                          + "; ".join(p.get("Message", str(p)) for p in problems))
    return str(kwargs["DashboardName"])


def deploy_alarms(spec: DeploymentSpec, plan: Plan, cloudwatch_client: Any | None = None,
                  *, prune: bool = True, session: Any = None,
                  image: ImageKind = "stock") -> list[str]:
    """Create or update every default alarm; returns their names.

    ``prune`` (default True) deletes this deployment's alarms (``<name>-lmikit-*`` tagged
    ``lmikit:deployment=<name>``) that are no longer rendered, including all of them when
    ``observability.alarms.enabled`` is false.
    """
    return [c.name for c in _apply_alarms(spec, plan, _client(spec, cloudwatch_client, session),
                                          prune=prune, image=image)
            if c.action not in ("delete", "kept")]


def _apply_alarms(spec: DeploymentSpec, plan: Plan, cw: Any, *, prune: bool,
                  dry_run: bool = False, image: ImageKind = "stock",
                  resolved: Resolved | None = None) -> list[Change]:
    stored = _alarm_writes.describe(cw, prefix=alarm_prefix(spec))
    changes = []
    rendered = alarm_definitions(spec, plan, image=image, resolved=resolved)
    for alarm in rendered:
        changes.append(_alarm_writes.put(cw, alarm.request(), spec.name, stored.get(alarm.name),
                                       dry_run=dry_run))
    if prune:
        names = {a.name for a in rendered}
        stale = [a for n, a in sorted(stored.items()) if n not in names]
        changes += _alarm_writes.delete_ours(cw, stale, spec.name, dry_run=dry_run)
    return changes


def apply_observability(spec: DeploymentSpec, plan: Plan, *, session: Any = None,
                        cloudwatch_client: Any | None = None, clients: Clients | None = None,
                        dry_run: bool = False, image: ImageKind = "stock",
                        resolved: Resolved | None = None) -> list[Change]:
    """Make the dashboard and the default alarms what the spec renders (idempotent).

    Returns one :class:`lmikit.deploy.Change` per dashboard and alarm (``create``,
    ``update``, ``unchanged``, ``delete`` for what the spec no longer renders, ``kept`` for a
    same-prefixed alarm that is not this deployment's). ``dry_run``: read only.
    ``resolved``: the decisions of (spec, plan, image), when the caller made them.
    """
    cw = _client(spec, cloudwatch_client, session, clients)
    changes = [_apply_dashboard(spec, plan, cw, dry_run, image, resolved)]
    return [c for c in changes if c is not None] + _apply_alarms(
        spec, plan, cw, prune=True, dry_run=dry_run, image=image, resolved=resolved)


def _apply_dashboard(spec: DeploymentSpec, plan: Plan, cw: Any, dry_run: bool = False,
                     image: ImageKind = "stock", resolved: Resolved | None = None
                     ) -> Change | None:
    name = dashboard_name(spec)
    stored = stored_dashboard(cw, name)
    if stored is not None and not is_lmikit_dashboard(spec, stored):
        if not spec.observability.dashboard:
            return Change("dashboard", name, "kept", "not an lmikit dashboard")
        raise DeployError(f"dashboard {name} exists and is not lmikit's dashboard of "
                          f"{spec.name} (its first widget is not the lmikit summary); "
                          "lmikit does not overwrite it: rename or delete it, or set "
                          "observability.dashboard to false")
    if not spec.observability.dashboard:
        if stored is None:
            return None
        if not dry_run:
            call(cw, "delete_dashboards", DashboardNames=[name])
        return Change("dashboard", name, "delete", "observability.dashboard is false")
    kwargs = put_dashboard_kwargs(spec, plan, image=image, resolved=resolved)
    if stored == json.loads(kwargs["DashboardBody"]):
        return Change("dashboard", name, "unchanged")
    if not dry_run:
        deploy_dashboard(spec, plan, cw, image=image, resolved=resolved)
    return Change("dashboard", name, "create" if stored is None else "update")


def remove_observability(spec: DeploymentSpec, *, session: Any = None,
                         cloudwatch_client: Any | None = None, clients: Clients | None = None,
                         dry_run: bool = False) -> list[Change]:
    """Delete lmikit's dashboard and every alarm tagged as this deployment's under
    ``<name>-lmikit-``; anything else is kept (and reported as ``kept``)."""
    cw = _client(spec, cloudwatch_client, session, clients)
    name = dashboard_name(spec)
    stored = stored_dashboard(cw, name)
    changes: list[Change] = []
    if stored is None:
        changes.append(Change("dashboard", name, "absent"))
    elif not is_lmikit_dashboard(spec, stored):
        changes.append(Change("dashboard", name, "kept", "not an lmikit dashboard"))
    else:
        if not dry_run:
            call(cw, "delete_dashboards", DashboardNames=[name])
        changes.append(Change("dashboard", name, "delete"))
    alarms = _alarm_writes.describe(cw, prefix=alarm_prefix(spec))
    return changes + _alarm_writes.delete_ours(cw, [alarms[n] for n in sorted(alarms)], spec.name,
                                             dry_run=dry_run)
