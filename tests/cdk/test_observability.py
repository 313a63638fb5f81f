"""The dashboard and alarms in each template equal the SDK renderer's output, field by field.

The expected side comes from the SDK alone (``dashboard_body``, ``put_dashboard_kwargs``,
``alarm_definitions`` for the same spec and plan): what ``lmikit.deploy._observability`` sends to
PutDashboard / PutMetricAlarm is what CloudFormation gets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._alarms import alarm_definitions
from lmikit.render._cloudwatch import dashboard_body, dashboard_name, put_dashboard_kwargs
from lmikit.spec import DeploymentSpec
from lmikit_cdk.nag import nag_packs
from lmikit_cdk.observability import LmiObservability, referenced_names
from lmikit_cdk.stack import LmiStack

from .conftest import REPO
from .test_render_equality import NAMES, diff

TOPIC = "arn:aws:sns:us-east-1:111122223333:lmikit-alarms"
ALARM = "AWS::CloudWatch::Alarm"


def _plan(synth: Any) -> Any:
    return plan_spec(synth.stack.spec, synth.stack.endpoint.base_dir)


def _image(synth: Any) -> Any:
    """The image the stack's base component runs (``stock`` or ``lmikit``)."""
    return synth.stack.endpoint.image_kind


def _lmikit_alarms(synth: Any) -> dict[str, dict[str, Any]]:
    """AlarmName -> (logical id, resource) of the alarms the observability construct made
    (CopyCountScaling's scale-from-zero alarm is checked in test_template)."""
    return {r["Properties"]["AlarmName"]: {"id": k, **r}
            for k, r in synth.resources(ALARM).items() if k.startswith("LmiObservability")}


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_equals_the_sdk_dashboard_field_by_field(synths: dict[str, Any],
                                                           name: str) -> None:
    synth = synths[name]
    spec = synth.stack.spec
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    props = dashboard["Properties"]
    assert props["DashboardName"] == dashboard_name(spec)
    assert diff(dashboard_body(spec, _plan(synth), image=_image(synth)),
                json.loads(props["DashboardBody"]), "DashboardBody") == []


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_body_is_the_string_put_dashboard_sends(synths: dict[str, Any],
                                                          name: str) -> None:
    synth = synths[name]
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    sdk = put_dashboard_kwargs(synth.stack.spec, _plan(synth), image=_image(synth))
    assert dashboard["Properties"] == sdk


@pytest.mark.parametrize("name", NAMES)
def test_every_alarm_equals_its_alarm_definition(synths: dict[str, Any], name: str) -> None:
    synth = synths[name]
    expected = {a.name: a.request()
                for a in alarm_definitions(synth.stack.spec, _plan(synth), image=_image(synth))}
    alarms = _lmikit_alarms(synth)
    assert sorted(alarms) == sorted(expected)
    problems = [p for alarm, request in expected.items()
                for p in diff(request, alarms[alarm]["Properties"], f"Alarm[{alarm}]")]
    assert problems == []


def test_cache_alarms_reach_the_template_as_emf_metric_math(synths: dict[str, Any]) -> None:
    """cfn-lint (test_validators) reads these: the cache alarms are classic metric math on
    the container's EMF metrics (LMIKit/Container), no longer PromQL."""
    props = _lmikit_alarms(synths["docqa-qwen7b"])["docqa-qwen7b-lmikit-hit-rate-collapse"][
        "Properties"]
    stats = [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    assert {m["Namespace"] for m in stats} == {"LMIKit/Container"}
    assert not {"EvaluationCriteria", "EvaluationInterval", "MetricName"} & set(props)


def test_alarms_depend_on_the_resources_they_name(synths: dict[str, Any]) -> None:
    checked = 0
    for synth in synths.values():
        by_name = {r["Properties"]["EndpointName"]: k
                   for k, r in synth.resources("AWS::SageMaker::Endpoint").items()}
        by_name |= {r["Properties"]["InferenceComponentName"]: k for k, r in
                    synth.resources("AWS::SageMaker::InferenceComponent").items()}
        for alarm in _lmikit_alarms(synth).values():
            names = referenced_names(alarm["Properties"])
            assert names and names <= set(by_name), alarm["Properties"]["AlarmName"]
            assert {by_name[n] for n in names} <= set(alarm["DependsOn"])
            checked += 1
    assert checked


def test_referenced_names_reads_dimensions_math_and_promql() -> None:
    request = {
        "Metrics": [{"MetricStat": {"Metric": {"Dimensions": [
            {"Name": "InferenceComponentName", "Value": "c"}]}}}],
        "EvaluationCriteria": {"PromQLCriteria": {
            "Query": "x{'aws.sagemaker.endpoint.name'=\"e\","
                     "'aws.sagemaker.inference_component.name'=~\"d\"}"}}}
    assert referenced_names(request) == {"c", "e", "d"}


def _spec(**observability: Any) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "obs", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "kv_cache": {"mode": "cpu"}, "observability": observability})


TopicApp = tuple[cdk.App, LmiStack, dict[str, Any]]


@pytest.fixture(scope="module")
def topic_app(tmp_path_factory: pytest.TempPathFactory) -> TopicApp:
    """A spec with an SNS topic and LMCache on lmikit's image (so the cache alarms too),
    synthesized once (synth stages the image's build context; it runs no Docker)."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("topic")))
    stack = LmiStack(app, spec=_spec(alarms={"sns_topic_arn": TOPIC}), image_mode="custom",
                     build_context=REPO)
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    return app, stack, dict(template)


def test_sns_topic_becomes_alarm_and_ok_actions(topic_app: TopicApp) -> None:
    _, stack, template = topic_app
    obs = stack.endpoint.observability
    assert obs is not None and {"5xx-rate", "hit-rate-collapse"} <= set(obs.cfn_alarms)
    expected = {a.key: a.request() for a in obs.alarm_definitions}
    for key, alarm in obs.cfn_alarms.items():
        props = template["Resources"][stack.resolve(alarm.logical_id)]["Properties"]
        assert (props["AlarmActions"], props["OKActions"]) == ([TOPIC], [TOPIC])
        assert props["ActionsEnabled"] is True
        assert diff(expected[key], props, key) == []


def test_alarms_with_a_topic_need_no_acknowledgement(topic_app: TopicApp) -> None:
    app, _, _ = topic_app
    found = [v.rule_name for pack in nag_packs() for v in pack.validate_scope(app).violations]
    assert found == []
    acks = [entry for c in app.node.find_all() for entry in c.node.metadata
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
            and "CloudWatchAlarmAction" in str(entry.data)]
    assert acks == []


def test_construct_exposes_the_l1s_by_key(synths: dict[str, Any]) -> None:
    obs = synths["docqa-qwen7b"].stack.endpoint.observability
    assert obs.cfn_dashboard is not None
    assert obs.cfn_dashboard.dashboard_name == obs.dashboard_name == "docqa-qwen7b-lmikit"
    assert sorted(obs.cfn_alarms) == sorted(a.key for a in obs.alarm_definitions)
    assert obs.cfn_alarms["5xx-rate"].alarm_name == "docqa-qwen7b-lmikit-5xx-rate"


def test_spec_switches_turn_the_dashboard_and_alarms_off() -> None:
    app = cdk.App()
    off = LmiStack(app, spec=_spec(dashboard=False, alarms={"enabled": False}),
                   image_mode="stock")
    assert off.endpoint.observability is None
    app = cdk.App()
    alarms_only = LmiStack(app, spec=_spec(dashboard=False), image_mode="stock")
    obs = alarms_only.endpoint.observability
    assert obs is not None and obs.cfn_dashboard is None and obs.cfn_alarms


def test_stock_image_stacks_get_no_cache_alarms_or_panels() -> None:
    """AWS's stock image publishes no LMIKit/Container metrics (no EMF emitter; LMIKIT_EMF is
    rendered for lmikit's image only): alarms on them would sit in OK forever, panels empty.
    The stack creates what the SDK deploys for the same image."""
    app = cdk.App()
    stack = LmiStack(app, spec=_spec(), image_mode="stock")
    obs = stack.endpoint.observability
    assert obs is not None and stack.endpoint.image_kind == "stock" == obs.image
    assert set(obs.cfn_alarms) == {"5xx-rate", "model-error-rate", "p90-model-latency",
                                   "no-capacity"}
    assert obs.dashboard_request == put_dashboard_kwargs(stack.spec, stack.endpoint.plan)
    body = json.loads(obs.dashboard_request["DashboardBody"])
    assert not [w for w in body["widgets"]
                if w["type"] == "metric" and "LMIKit/Container" in json.dumps(w)]
    assert "No cache panels or cache alarms" in body["widgets"][0]["properties"]["markdown"]


def test_alarm_naming_a_resource_the_stack_lacks_is_refused(tmp_path: Path) -> None:
    spec = _spec()
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    with pytest.raises(RenderError, match=r"obs-base.*renderers disagree"):
        LmiObservability(stack, "O", spec=spec, plan=plan_spec(spec),
                         named_resources={"obs": stack})
