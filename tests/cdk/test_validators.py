"""External validators on every synthesized template: cfn-lint, cdk-nag, botocore's model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from lmikit_cdk.nag import nag_packs

LINT_REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
RULE_ID = r"^(AwsSolutions|HIPAA\.Security)-[A-Za-z0-9]+(\[.+\])?$"


@pytest.mark.timeout(600 + 300)  # cfn-lint's own bound, and the session's synth
def test_cfn_lint_reports_nothing_on_every_template(synths: dict[str, Any]) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    templates = [str(s.path) for s in synths.values()]
    result = subprocess.run([str(cfn_lint), "--regions", *LINT_REGIONS, "--", *templates],
                            capture_output=True, text=True, check=False, timeout=600)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("pack", [0, 1], ids=["AwsSolutions", "HIPAA.Security"])
def test_cdk_nag_pack_has_no_unacknowledged_finding(synth_app: Any, pack: int) -> None:
    app, _ = synth_app
    checks = nag_packs()[pack]
    result = checks.validate_scope(app)
    found = [f"{v.rule_name} at {[r.construct_path for r in v.violating_resources]}"
             for v in result.violations]
    assert found == []


def _acknowledgements(app: Any) -> list[tuple[str, str, str]]:
    out = []
    key = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                out += [(construct.node.path, rule.removeprefix("Annotation::"), reason)
                        for rule, reason in dict(entry.data).items()]
    return out


def test_every_acknowledgement_names_a_rule_and_a_specific_reason(synth_app: Any) -> None:
    import re

    acks = _acknowledgements(synth_app[0])
    assert acks, "expected the documented acknowledgements"
    vague = [a for a in acks
             if not re.match(RULE_ID, a[1]) or len(a[2].split()) < 10]
    assert vague == []


def test_wildcard_findings_are_acknowledged_one_by_one(synth_app: Any) -> None:
    rules = {a[1] for a in _acknowledgements(synth_app[0])}
    assert "AwsSolutions-IAM5" not in rules  # never the whole rule
    assert "AwsSolutions-IAM5[Resource::*]" in rules


def test_the_registered_adapters_read_is_acknowledged_with_its_own_reason(
        synth_app: Any) -> None:
    """cdk-nag reports the wildcard in lmikit/<name>/adapters/* (AwsSolutions-IAM5); the
    acknowledgement names that one resource and says why it is a prefix."""
    from lmikit.render.iam import WILDCARD_REASONS

    found = {(rule, reason) for _, rule, reason in _acknowledgements(synth_app[0])
             if "/lmikit/docqa-lora/adapters/*" in rule}
    assert found == {("AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
                      "sagemaker-us-west-2-<AWS::AccountId>/lmikit/docqa-lora/adapters/*]",
                      WILDCARD_REASONS["s3:adapters"])}


def test_sagemaker_properties_pass_botocore_model_validation(synths: dict[str, Any]) -> None:
    """Template properties (tokens replaced by valid samples) against botocore's input
    shapes, including the enums, patterns and max lengths botocore itself skips."""
    import botocore.session

    from lmikit.testing._validate import ShapeValidator

    model = botocore.session.get_session().get_service_model("sagemaker")
    shapes = {"AWS::SageMaker::EndpointConfig": "CreateEndpointConfig",
              "AWS::SageMaker::Endpoint": "CreateEndpoint",
              "AWS::SageMaker::InferenceComponent": "CreateInferenceComponent",
              "AWS::SageMaker::Model": "CreateModel"}
    validator = ShapeValidator()
    problems = []
    for name, synth in synths.items():
        for logical_id, res in synth.template["Resources"].items():
            if res["Type"] in shapes:
                shape = model.operation_model(shapes[res["Type"]]).input_shape
                request = _sample_tokens(res["Properties"])
                if res["Type"] == "AWS::SageMaker::Model":
                    request.setdefault("ModelName", "lmikit-model")  # CloudFormation names it
                problems += [f"{name}/{logical_id}: {p}"
                             for p in validator.validate(shape, request)]
    assert problems == []


def _sample_tokens(value: Any, key: str = "") -> Any:
    samples = {"ExecutionRoleArn": "arn:aws:iam::123456789012:role/lmikit",
               "ArtifactUrl": "s3://cdk-assets-123456789012-us-east-1/a.tar.gz",
               "Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-assets:abc",
               "ModelName": "lmikit-model"}
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref")):
            return samples[key]
        return {k: _sample_tokens(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_sample_tokens(v, key) for v in value]
    return value


def test_cdk_synth_fails_on_an_unacknowledged_finding(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """The app's nag plugins run during synth: without lmikit's acknowledgements it fails."""
    import lmikit_cdk.nag
    from lmikit_cdk.app import build_app

    monkeypatch.setattr(lmikit_cdk.nag, "acknowledge", lambda *args: None)
    repo = Path(__file__).resolve().parents[2]
    app = cdk.App(outdir=str(tmp_path), context={
        "spec": str(repo / "examples" / "chat-qwen1.5b-small.yaml"), "lmikit:image": "stock"})
    build_app(app, build_context=repo)
    expected = r"(?s)ValidationFailed.*AwsSolutions-IAM5.*HIPAA.Security-SageMakerEndpoint"
    with pytest.raises(RuntimeError, match=expected):
        app.synth()
