"""Construct behaviour: validation errors, image choice, artifacts, metrics, grants, the app."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam

from lmikit.errors import AdapterError, RenderError
from lmikit.metric_catalog import find_classic
from lmikit.spec import DeploymentSpec
from lmikit.testing import write_lora_adapter
from lmikit_cdk._cfn import camel_case, snake_case
from lmikit_cdk.app import spec_paths
from lmikit_cdk.artifacts import adapter_artifact
from lmikit_cdk.endpoint import LmiEndpoint
from lmikit_cdk.image import LmiImage, build_context_exclude, container_code_reasons

REPO = Path(__file__).resolve().parents[2]


def _spec(**overrides: Any) -> DeploymentSpec:
    data: dict[str, Any] = {"api_version": "v1", "name": "t", "region": "us-east-1",
                            "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
                            "instance": {"type": "ml.g6e.2xlarge"},
                            "observability": {"detailed_metrics": False}}
    data.update(overrides)
    return DeploymentSpec.model_validate(data)


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))


def test_kv_aware_routing_is_refused_with_the_lmi_images_reason() -> None:
    """botocore RoutingStrategy: KV_AWARE "works only with supported containers, such as the
    SageMaker AI vLLM Deep Learning Container"; cdk synth refuses it as render does."""
    spec = _spec(routing={"strategy": "kv_aware"})
    with pytest.raises(RenderError, match=r"routing.strategy 'kv_aware' cannot be used on "
                       r"SageMaker with the LMI image: .*works only with supported containers"):
        LmiEndpoint(_stack(), "E", spec=spec)


def test_lora_with_lmcache_on_weights_sagemaker_copies_is_refused() -> None:
    """The isolating model.py must be in the weights' S3 prefix, which a synth cannot check
    (tests/formatters/test_lora_isolation_paths.py)."""
    config = Path(__file__).resolve().parents[2] / "examples" / "models" / \
        "llama-3.1-8b-config.json"
    spec = _spec(model={"id": "s3://weights/llama/", "config_path": str(config)},
                 instance={"type": "ml.g6e.4xlarge"}, engine={"lora": {"enabled": True}},
                 kv_cache={"mode": "cpu"}, security={"network_isolation": True})
    with pytest.raises(RenderError, match=r"cannot read S3 .*lmikit deploy.*--lora-isolation"):
        LmiEndpoint(_stack(), "E", spec=spec)
    no_lora = _spec(model={"id": "s3://weights/llama/", "config_path": str(config)},
                    instance={"type": "ml.g6e.4xlarge"}, kv_cache={"mode": "cpu"},
                    security={"network_isolation": True})
    from lmikit.planner._planner import plan_spec
    from lmikit_cdk.endpoint import validate_for_cdk

    validate_for_cdk(no_lora, plan_spec(no_lora))


def test_required_volume_key_on_an_nvme_instance_is_refused() -> None:
    spec = _spec(security={"kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/k",
                           "kms_volume_encryption": "required"})
    with pytest.raises(RenderError, match="local NVMe"):
        LmiEndpoint(_stack(), "E", spec=spec)


def test_a_start_past_sagemakers_caps_is_refused_at_synth() -> None:
    """botocore caps the start-up timeouts at 3600 s: ~680 GB from the Hub cannot start."""
    spec = _spec(model={"id": "deepseek-ai/DeepSeek-V3.2"},
                 instance={"type": "ml.p5e.48xlarge", "capacity_reservation_arn":
                           "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e"},
                 engine={"tensor_parallel_degree": 8, "max_model_len": 131072},
                 kv_cache={"mode": "off"}, routing={"strategy": "least_outstanding"})
    with pytest.raises(RenderError, match=r"3600 s.*lmikit weights stage deepseek-ai"):
        LmiEndpoint(_stack(), "E", spec=spec)


def test_a_gated_hub_model_without_a_token_is_refused_at_synth() -> None:
    spec = _spec(model={"id": "meta-llama/Llama-3.1-8B-Instruct"})
    with pytest.raises(RenderError, match=r"gated Hugging Face repo.*hf_token_secret_arn"):
        LmiEndpoint(_stack(), "E", spec=spec)


def test_kv_aware_and_required_key_are_reported_together() -> None:
    spec = _spec(routing={"strategy": "kv_aware"},
                 security={"kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/k",
                           "kms_volume_encryption": "required"})
    with pytest.raises(RenderError, match=r"(?s)'kv_aware' cannot be used.*NVMe"):
        LmiEndpoint(_stack(), "E", spec=spec)


def _local_adapter(root: Path, name: str = "a") -> str:
    write_lora_adapter(root / name)
    return name


@pytest.mark.slow
def test_feature_rich_spec_fits_cloudformation_environment_cap(tmp_path: Path) -> None:
    """CloudFormation caps Container.Environment at 16; engine options go to
    serving.properties in the model artifact, so every feature at once still fits."""
    spec = _spec(observability={"detailed_metrics": True},
                 kv_cache={"mode": "remote", "remote_url": "rediss://cache:6380",
                           "remote_credentials_secret_arn":
                           "arn:aws:secretsmanager:us-east-1:111122223333:secret:kv-AbCdEf"},
                 adapters=[{"name": "a", "source": _local_adapter(tmp_path)}],
                 engine={"speculative": {"method": "eagle3", "draft_model": "org/draft"}},
                 security={"hf_token_secret_arn":
                           "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf",
                           "kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/k"})
    stack = _stack()
    endpoint = LmiEndpoint(stack, "E", spec=spec, build_context=REPO, base_dir=tmp_path)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    (component,) = [r for r in template["Resources"].values()
                    if r["Type"] == "AWS::SageMaker::InferenceComponent"
                    and "ComputeResourceRequirements" in r["Properties"]["Specification"]]
    env = component["Properties"]["Specification"]["Container"]["Environment"]
    assert len(env) <= 16
    assert env == endpoint.requests.base_component["Specification"]["Container"]["Environment"]
    assert "OPTION_SPECULATIVE_CONFIG" not in env  # it travels in serving.properties
    assert {"LMIKIT_HF_TOKEN_SECRET_ARN", "LMIKIT_KV_REMOTE_CREDENTIALS_SECRET_ARN"} <= set(env)


def test_stock_image_is_pinned_to_the_lmi_version() -> None:
    image = LmiImage(_stack(), "I", region="us-west-2", lmi_version="0.38.0")
    assert image.image_uri.startswith("763104351884.dkr.ecr.us-west-2.amazonaws.com/"
                                      "djl-inference:0.38.0-")
    assert not image.image_uri.endswith(":latest") and not image.is_custom


def test_custom_image_without_dockerfile_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="lmikit:image=stock"):
        LmiImage(_stack(), "I", region="us-east-1", lmi_version="0.38.0", custom=True,
                 build_context=tmp_path)


def test_custom_image_stages_only_what_the_dockerfile_needs(tmp_path: Path) -> None:
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("ARG LMI_IMAGE\nFROM ${LMI_IMAGE}\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("x = 1\n")
    outdir = tmp_path / "out"
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-east-1"))
    image = LmiImage(stack, "I", region="us-east-1", lmi_version="0.38.0", custom=True,
                     build_context=tmp_path)
    app.synth()
    (staged,) = [p for p in outdir.glob("asset.*") if p.is_dir()]
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*")
                  if p.is_file()) == ["container/Dockerfile"]
    assert image.is_custom


def test_build_context_follows_the_dockerfile_dockerignore() -> None:
    patterns = build_context_exclude(REPO)
    if (REPO / "container" / "Dockerfile.dockerignore").is_file():
        assert patterns[0] == "*" and "!container/Dockerfile" in patterns
    else:
        assert patterns[0] == "*"


def test_container_code_reasons_are_empty_for_a_plain_spec() -> None:
    assert container_code_reasons(_spec()) == []


def test_container_code_reasons_name_the_secret() -> None:
    spec = _spec(security={"hf_token_secret_arn":
                           "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf"})
    assert any("Secrets Manager" in r for r in container_code_reasons(spec))


def test_plain_spec_synthesizes_with_the_stock_image() -> None:
    endpoint = LmiEndpoint(_stack(), "E", spec=_spec())
    assert not endpoint.image.is_custom
    assert endpoint.inference_component_name == "t-base"


def test_stock_image_pull_is_limited_to_the_djl_inference_repository() -> None:
    stack = _stack()
    endpoint = LmiEndpoint(stack, "E", spec=_spec())
    doc = stack.resolve(endpoint.execution_role.policy.document.to_json())
    (st,) = [s for s in doc["Statement"] if s["Sid"] == "PullImage"]
    assert st["Resource"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":ecr:us-east-1:763104351884:repository/"
        "djl-inference"]]}


def test_adapter_artifact_is_byte_identical_across_calls(adapter_spec_path: Path) -> None:
    from lmikit.spec._loader import load_spec

    spec = load_spec(adapter_spec_path)
    first = adapter_artifact(spec, spec.adapters[0], adapter_spec_path.parent)
    os.utime(adapter_spec_path.parent / "adapters" / "legal" / "adapter_config.json",
             (0, 1_000_000_000))
    assert adapter_artifact(spec, spec.adapters[0], adapter_spec_path.parent) == first


def test_adapter_artifact_is_the_sdks_with_the_cache_tag(tmp_path: Path) -> None:
    """With LMCache on, the CDK ships the bytes ``lmikit deploy`` ships: the adapter plus a
    model.py that tags its requests' cache keys."""
    from lmikit.lora import package_spec_adapter
    from lmikit.planner._planner import plan_spec

    spec = _spec(kv_cache={"mode": "cpu"}, workload={"reused_context_tokens": 460000},
                 adapters=[{"name": "a", "source": _local_adapter(tmp_path)}])
    sdk = package_spec_adapter(spec, plan_spec(spec, tmp_path), spec.adapters[0], tmp_path)
    assert sdk.cache_tag is not None and sdk.cache_tag.startswith("a.")
    assert "model.py" in sdk.files
    assert adapter_artifact(spec, spec.adapters[0], tmp_path) == sdk.data


def test_adapter_without_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "adapter_model.safetensors").write_bytes(b"w")
    spec = _spec(adapters=[{"name": "a", "source": "a"}])
    with pytest.raises(AdapterError, match="adapter_config.json is missing"):
        adapter_artifact(spec, spec.adapters[0], tmp_path)


@pytest.mark.slow
def test_adapter_asset_hash_is_stable_across_synths(synths: dict[str, Any],
                                                    adapter_spec_path: Path) -> None:
    from lmikit_cdk.stack import LmiStack

    first = synths["docqa-lora"].stack.endpoint.adapters["legal"].artifact.sha256
    again = LmiStack.from_file(cdk.App(), adapter_spec_path, build_context=REPO)
    assert again.endpoint.adapters["legal"].artifact.sha256 == first


def test_metric_methods_name_catalogued_metrics(synths: dict[str, Any]) -> None:
    endpoint = synths["docqa-qwen7b"].stack.endpoint
    names = ["invocations", "errors", "client_errors", "model_errors", "model_latency",
             "invocations_per_copy", "concurrent_requests_per_copy",
             "no_capacity_invocation_failures", "gpu_utilization", "gpu_memory_utilization"]
    for name in names:
        metric = getattr(endpoint, f"metric_{name}")()
        assert isinstance(metric, cloudwatch.Metric)
        assert metric.dimensions == {"InferenceComponentName": "docqa-qwen7b-base"}
        assert find_classic(metric.namespace, metric.metric_name,
                            ("InferenceComponentName",)), name


def test_adapter_metrics_use_the_adapter_component(synths: dict[str, Any]) -> None:
    adapter = synths["docqa-lora"].stack.endpoint.adapters["legal"]
    assert adapter.metric_invocations().dimensions == {
        "InferenceComponentName": "docqa-lora-legal"}


def test_grant_invoke_allows_invocation_of_this_endpoint_only() -> None:
    stack = _stack()
    endpoint = LmiEndpoint(stack, "E", spec=_spec())
    user = iam.User(stack, "U")
    grant = endpoint.grant_invoke(user)
    assert isinstance(grant, iam.Grant) and grant.success
    doc = stack.resolve(user.node.find_child("DefaultPolicy").document.to_json())
    (st,) = doc["Statement"]
    assert st["Action"] == ["sagemaker:InvokeEndpoint",
                            "sagemaker:InvokeEndpointWithResponseStream"]
    assert st["Resource"] == stack.resolve(endpoint.endpoint_arn)


def test_construct_exposes_l1_resources_names_and_arns() -> None:
    stack = _stack()
    endpoint = LmiEndpoint(stack, "E", spec=_spec())
    assert endpoint.cfn_endpoint_config.endpoint_config_name == endpoint.endpoint_config_name
    assert endpoint.cfn_inference_component.inference_component_name == "t-base"
    assert cdk.Token.is_unresolved(endpoint.inference_component_arn)


def test_spec_context_accepts_several_comma_separated_paths() -> None:
    assert spec_paths("a.yaml, b.yaml") == [Path("a.yaml"), Path("b.yaml")]
    assert spec_paths(None) == [Path("examples/docqa-qwen7b.yaml")]


def test_recasing_follows_jsii_names() -> None:
    assert snake_case("VolumeSizeInGB") == "volume_size_in_gb"
    assert camel_case("EnableSSMAccess") == "enableSsmAccess"
    assert camel_case("NumberOfAcceleratorDevicesRequired") == (
        "numberOfAcceleratorDevicesRequired")


def _warnings(stack: cdk.Stack) -> list[str]:
    from aws_cdk.assertions import Annotations, Match

    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*"))
    return [str(w.entry.data) for w in found]


def test_a_type_with_no_on_demand_hosting_in_the_region_is_a_synth_warning() -> None:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="eu-west-1"))
    LmiEndpoint(stack, "E", spec=_spec(region="eu-west-1"))
    assert [w for w in _warnings(stack) if w.startswith(
        "instance.type ml.g6e.2xlarge has no on-demand SageMaker hosting in region eu-west-1")]
    quiet = _stack()
    LmiEndpoint(quiet, "E", spec=_spec())  # us-east-1 sells it
    assert not [w for w in _warnings(quiet) if "on-demand" in w]


def test_a_training_plan_renders_into_the_template_and_silences_the_warning() -> None:
    plan = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e-endpoints"
    stack = _stack()
    LmiEndpoint(stack, "E", spec=_spec(instance={"type": "ml.p5e.48xlarge",
                                                 "capacity_reservation_arn": plan},
                                       engine={"tensor_parallel_degree": 4}))
    template = cdk.assertions.Template.from_stack(stack)
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {
        "ProductionVariants": [cdk.assertions.Match.object_like({
            "InstanceType": "ml.p5e.48xlarge",
            "CapacityReservationConfig": {
                "CapacityReservationPreference": "capacity-reservations-only",
                "MlReservationArn": plan}})]})
    assert not [w for w in _warnings(stack) if "on-demand" in w]
