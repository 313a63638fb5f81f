"""The SageMaker and scaling properties in each template equal the SDK's request dicts, field
by field.

The expected side is computed from the SDK alone (spec, plan, the pinned image URI and
sentinel strings for what only CloudFormation knows); where a sentinel stands, the template
must hold a CloudFormation intrinsic (a token) instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from lmikit.catalog._images import lmi_image_uri
from lmikit.planner._planner import plan_spec
from lmikit.render._sagemaker import render_requests
from lmikit.spec._loader import load_spec

from .conftest import EXAMPLES

ROLE, IMAGE, MODEL = "<token:role>", "<token:image>", "<token:model-name>"
ARTIFACT = "s3://<token:artifact>.tar.gz"
STEP_POLICY = "<token:step-policy-arn>"
SENTINELS = (ROLE, ARTIFACT, IMAGE, MODEL, STEP_POLICY)
NAMES = [load_spec(p).name for p in EXAMPLES] + ["docqa-lora", "secure-redis"]


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(
        ("Fn::", "Ref"))


def diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Every difference between a request dict and template properties, by field path."""
    if expected in SENTINELS:
        return [] if _is_intrinsic(actual) else [f"{path}: expected a token, got {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected a mapping, got {actual!r}"]
        out = [f"{path}.{k}: missing from the template" for k in expected if k not in actual]
        out += [f"{path}.{k}: in the template only" for k in actual if k not in expected]
        for k in expected.keys() & actual.keys():
            out += diff(expected[k], actual[k], f"{path}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for d in diff(e, a, f"{path}[{i}]")]
    if isinstance(expected, bool) or isinstance(actual, bool):
        return [] if expected is actual else [f"{path}: {expected!r} != {actual!r}"]
    return [] if expected == actual else [f"{path}: {expected!r} != {actual!r}"]


def expected_requests(synth: Any) -> Any:
    stack = synth.stack
    spec, endpoint = stack.spec, stack.endpoint
    image = IMAGE if endpoint.image.is_custom else lmi_image_uri(spec.region,
                                                                 spec.engine.lmi_version)
    req = render_requests(
        spec, plan_spec(spec, endpoint.base_dir), image_uri=image, execution_role_arn=ROLE,
        model_artifact_url=ARTIFACT if endpoint.model_artifact else None,
        adapter_artifact_urls={a.name: a.source if a.source.startswith("s3://") else ARTIFACT
                               for a in spec.adapters}, image_kind=endpoint.image_kind)
    if req.model is not None:
        # CloudFormation names the Model (a changed Model is replaced, not renamed in place);
        # the component refers to it by Fn::GetAtt.
        req.model.pop("ModelName")
        req.base_component["Specification"]["ModelName"] = MODEL
    return req


@pytest.mark.parametrize("name", NAMES)
def test_template_equals_render_requests_field_by_field(synths: dict[str, Any],
                                                        name: str) -> None:
    synth = synths[name]
    req = expected_requests(synth)
    _, config = synth.one("AWS::SageMaker::EndpointConfig")
    _, endpoint = synth.one("AWS::SageMaker::Endpoint")
    components = {r["Properties"]["InferenceComponentName"]: r["Properties"]
                  for r in synth.resources("AWS::SageMaker::InferenceComponent").values()}
    problems = diff(req.endpoint_config, config["Properties"], "EndpointConfig")
    models = synth.resources("AWS::SageMaker::Model")
    if req.model is None:
        assert models == {}
    else:
        ((_, model),) = models.items()
        problems += diff(req.model, model["Properties"], "Model")
    problems += diff(req.endpoint, endpoint["Properties"], "Endpoint")
    expected_components = {req.base_component["InferenceComponentName"]: req.base_component}
    expected_components |= {c["InferenceComponentName"]: c
                            for c in req.adapter_components.values()}
    assert sorted(components) == sorted(expected_components)
    for component, expected in expected_components.items():
        problems += diff(expected, components[component], f"InferenceComponent[{component}]")
    assert problems == []


def test_diff_reports_a_changed_field_by_path() -> None:
    assert diff({"A": {"B": [1, 2]}}, {"A": {"B": [1, 3]}}) == [".A.B[1]: 2 != 3"]


def test_diff_requires_a_token_where_the_sdk_has_a_sentinel() -> None:
    assert diff({"R": ROLE}, {"R": "arn:aws:iam::1:role/x"}) == [
        ".R: expected a token, got 'arn:aws:iam::1:role/x'"]


@pytest.mark.parametrize("name", NAMES)
def test_scaling_resources_equal_render_scaling_field_by_field(synths: dict[str, Any],
                                                               name: str) -> None:
    from lmikit.render._scaling import no_capacity_alarm, render_scaling
    from lmikit_cdk.scaling import target_props

    synth = synths[name]
    spec = synth.stack.spec
    req = render_scaling(spec, role_arn=ROLE)
    _, target = synth.one("AWS::ApplicationAutoScaling::ScalableTarget")
    problems = diff(target_props(req.target), target["Properties"], "ScalableTarget")
    policies = {r["Properties"]["PolicyName"]: r["Properties"] for r in
                synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()}
    assert sorted(policies) == sorted(p["PolicyName"] for p in req.policies)
    for policy in req.policies:
        problems += diff(policy, policies[policy["PolicyName"]], policy["PolicyName"])
    alarms = {k: r["Properties"] for k, r in synth.resources("AWS::CloudWatch::Alarm").items()
              if k.startswith("LmiScaling")}
    if req.scale_from_zero is None:
        assert alarms == {}
    else:
        (alarm,) = alarms.values()
        problems += diff(no_capacity_alarm(spec, STEP_POLICY), alarm, "NoCapacityAlarm")
    assert problems == []
