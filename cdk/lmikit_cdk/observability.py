"""``LmiObservability``: the deployment's CloudWatch dashboard and default alarms as L1s.

Built from the SAME renderer output the SDK deploys (:mod:`lmikit.deploy`):

* ``AWS::CloudWatch::Dashboard``: ``DashboardName`` and ``DashboardBody`` are
  :func:`lmikit.render.put_dashboard_kwargs` verbatim, the exact string
  ``PutDashboard`` receives;
* one ``AWS::CloudWatch::Alarm`` per :class:`lmikit.render.AlarmDef`, its properties
  being ``AlarmDef.request()`` (the ``PutMetricAlarm`` kwargs, the same PascalCase names as
  CloudFormation), only re-cased for jsii. PromQL alarms keep ``EvaluationCriteria`` and
  ``EvaluationInterval``.

Alarms name the endpoint and components literally (dimensions, PromQL label matchers), so
each alarm depends on the L1s of the resources it names. ``image`` is the image the base
component runs, as for the SDK: the stock image publishes no vLLM or LMCache metrics, so its
dashboard has no cache panels and the stack no cache alarms (they could never get data).

>>> obs = LmiObservability(stack, "Observability", spec=spec, plan=plan)  # doctest: +SKIP
>>> obs.cfn_alarms["5xx-rate"].alarm_name  # doctest: +SKIP
'docqa-qwen7b-lmikit-5xx-rate'
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct, IConstruct

from lmikit.catalog import ImageKind
from lmikit.errors import RenderError
from lmikit.metric_catalog import CONTAINER_SOURCE
from lmikit.planner import Plan
from lmikit.render import AlarmDef, alarm_definitions, put_dashboard_kwargs
from lmikit.resolve import Resolved, resolve_spec
from lmikit.spec import DeploymentSpec
from lmikit_cdk import nag
from lmikit_cdk._cfn import l1_kwargs

NAMED_DIMENSIONS = frozenset({"EndpointName", "InferenceComponentName"})
_PROMQL_NAMES = re.compile(
    "'(?:" + "|".join(re.escape(label) for label in (CONTAINER_SOURCE.endpoint_label,
                                                      CONTAINER_SOURCE.component_label))
    + r")'=~?\"([^\"]+)\"")
NO_ACTION_RULE = "HIPAA.Security-CloudWatchAlarmAction"


def referenced_names(request: Mapping[str, Any]) -> set[str]:
    """Endpoint and component names an alarm request names: ``EndpointName`` /
    ``InferenceComponentName`` dimensions (also inside metric-math queries) and PromQL
    label matchers on the endpoint and component labels.

    >>> sorted(referenced_names({"Dimensions": [{"Name": "EndpointName", "Value": "e"},
    ...                                         {"Name": "VariantName", "Value": "v"}]}))
    ['e']
    """
    return set(_names(request))


def _names(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        if value.get("Name") in NAMED_DIMENSIONS and isinstance(value.get("Value"), str):
            yield value["Value"]
        query = value.get("Query")
        if isinstance(query, str):
            yield from _PROMQL_NAMES.findall(query)
        for item in value.values():
            yield from _names(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _names(item)


class LmiObservability(Construct):
    """The dashboard (``spec.observability.dashboard``) and the default alarms
    (``spec.observability.alarms.enabled``) of one deployment. Usually created by
    :class:`lmikit_cdk.LmiEndpoint`.

    :param spec: the deployment.
    :param plan: its capacity plan (thresholds, tiers, the dashboard's summary).
    :param named_resources: literal endpoint / component name -> the construct that creates
        it. An alarm that names one depends on it; an alarm naming a name missing from a
        non-empty mapping is a RenderError (the renderers disagree). Default: no
        dependencies, no check.
    :param image: the image the base component runs (default ``stock``; ``LmiEndpoint``
        passes its own): the cache panels and alarms need ``lmikit``.
    :param resolved: the decisions of (spec, plan, image) (:func:`lmikit.resolve.resolve_spec`;
        ``LmiEndpoint`` passes its own); default: resolved here.
    """

    def __init__(self, scope: Construct, construct_id: str, *, spec: DeploymentSpec,
                 plan: Plan, named_resources: Mapping[str, IConstruct] | None = None,
                 image: ImageKind = "stock", resolved: Resolved | None = None) -> None:
        super().__init__(scope, construct_id)
        # defaults
        named = dict(named_resources or {})
        self.image: ImageKind = image
        resolved = resolved or resolve_spec(spec, plan, image_kind=image)
        self.alarm_definitions: list[AlarmDef] = alarm_definitions(spec, plan, image=image,
                                                                   resolved=resolved)
        self.alarm_requests: dict[str, dict[str, Any]] = {
            a.key: a.request() for a in self.alarm_definitions}
        # validate
        unknown = sorted({f"{key}: {name}" for key, req in self.alarm_requests.items()
                          for name in referenced_names(req) if named and name not in named})
        if unknown:
            raise RenderError("alarms name resources this stack does not create ("
                              + "; ".join(unknown) + "): the alarm and SageMaker renderers "
                              "disagree on names")
        # L1 resources
        self.dashboard_request: dict[str, Any] | None = None
        self.dashboard_name: str | None = None
        self.cfn_dashboard: cloudwatch.CfnDashboard | None = None
        if spec.observability.dashboard:
            self.dashboard_request = put_dashboard_kwargs(spec, plan, image=image,
                                                          resolved=resolved)
            self.dashboard_name = self.dashboard_request["DashboardName"]
            self.cfn_dashboard = cloudwatch.CfnDashboard(
                self, "Dashboard", **l1_kwargs(self.dashboard_request))
        self.cfn_alarms: dict[str, cloudwatch.CfnAlarm] = {}
        for key, request in self.alarm_requests.items():
            alarm = cloudwatch.CfnAlarm(self, f"Alarm-{key}", **l1_kwargs(request))
            for name in sorted(referenced_names(request)):
                if name in named:
                    alarm.node.add_dependency(named[name])
            self.cfn_alarms[key] = alarm
        # attributes
        self.alarm_names: dict[str, str] = {
            key: req["AlarmName"] for key, req in self.alarm_requests.items()}
        self._acknowledge(spec)

    def _acknowledge(self, spec: DeploymentSpec) -> None:
        for key, request in self.alarm_requests.items():
            if not request.get("AlarmActions"):
                nag.acknowledge(
                    self.cfn_alarms[key], NO_ACTION_RULE,
                    f"observability.alarms.sns_topic_arn is not set in the spec of "
                    f"{spec.name}: the alarm shows state on the dashboard and the alarm "
                    "console only; set sns_topic_arn to notify a topic (the alarm then gets "
                    "AlarmActions and OKActions)")
