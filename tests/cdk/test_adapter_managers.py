"""``cdk deploy`` manages the spec's adapters only, as ``lmikit deploy`` does: they are in the
template, tagged ``lmikit:managed-by=spec``, and one taken out of the spec leaves the template
(CloudFormation deletes a resource its template no longer declares). An adapter registered
with ``lmikit adapters`` is in no template, and nothing in the stack can act on SageMaker, so
a stack update never touches it (CloudFormation acts only on its template's resources)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from lmikit.names import MANAGED_BY_SPEC, MANAGED_BY_TAG, adapter_component_name
from lmikit.spec import DeploymentSpec
from lmikit_cdk.endpoint import LmiEndpoint

from .conftest import REPO, Synth

IC = "AWS::SageMaker::InferenceComponent"


def _components(*adapters: str) -> dict[str, dict[str, Any]]:
    """Logical id -> properties of every inference component of a stack for ``adapters``."""
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "t", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "observability": {"detailed_metrics": False}, "kv_cache": {"mode": "off"},
        "adapters": [{"name": a, "source": f"s3://team-adapters/{a}.tar.gz"} for a in adapters]})
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    LmiEndpoint(stack, "E", spec=spec, build_context=REPO)
    resources = Template.from_stack(stack).to_json()["Resources"]
    return {k: r["Properties"] for k, r in resources.items() if r["Type"] == IC}


def test_spec_adapters_are_tagged_spec_managed_and_one_taken_out_leaves_the_template() -> None:
    before = _components("legal", "tax")
    after = _components("legal")
    managed = {p["InferenceComponentName"]: {t["Key"]: t["Value"] for t in p["Tags"]}
               .get(MANAGED_BY_TAG) for p in before.values()}
    assert managed == {"t-base": None, "t-legal": MANAGED_BY_SPEC, "t-tax": MANAGED_BY_SPEC}
    assert sorted(p["InferenceComponentName"] for p in after.values()) == ["t-base", "t-legal"]
    # the kept adapter keeps its logical id: CloudFormation updates it in place, and deletes
    # only the one the template no longer declares
    assert set(after) < set(before)
    assert [before[k]["InferenceComponentName"] for k in set(before) - set(after)] == ["t-tax"]


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for doc in [props.get("PolicyDocument"), *(p.get("PolicyDocument") for p in
                                                   props.get("Policies", []))]:
            out += (doc or {}).get("Statement", [])
    return out


def test_a_stack_names_only_spec_adapters_and_nothing_in_it_acts_on_sagemaker(
        synths: dict[str, Synth]) -> None:
    """For every synthesized stack with adapters (one with a KMS key, whose artifact copies
    run in a Lambda-backed custom resource): the components are the base and the spec's
    adapters; no IAM statement grants a SageMaker action; the only custom resources are the
    artifact copies, which prune nothing and write only under the spec's artifact prefixes."""
    checked = 0
    for synth in synths.values():
        spec = synth.stack.spec
        if not spec.adapters:
            continue
        checked += 1
        names = {p["Properties"]["InferenceComponentName"]
                 for p in synth.resources(IC).values()}
        assert names == {f"{spec.name}-base",
                         *(adapter_component_name(spec.name, a.name) for a in spec.adapters)}
        actions = [a for s in _statements(synth.template)
                   for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
        assert actions and not [a for a in actions if a.lower().startswith("sagemaker:")
                                or a == "*"]
        prefixes = {f"lmikit/{spec.name}/model/",
                    *(f"lmikit/{spec.name}/adapters/{a.name}/" for a in spec.adapters)}
        for resource in synth.template["Resources"].values():
            if resource["Type"].startswith("Custom::"):
                props = resource["Properties"]
                assert resource["Type"] == "Custom::CDKBucketDeployment"
                assert props["Prune"] is False and props["RetainOnDelete"] is True
                assert props["DestinationBucketKeyPrefix"] in prefixes
    assert checked >= 2
