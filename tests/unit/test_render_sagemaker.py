"""SageMaker request dicts, checked against botocore's service model strictly (enums,
patterns, max lengths: the parts botocore's own client validation skips)."""

from __future__ import annotations

import json
import re

import botocore.session
import pytest

from lmikit.catalog._images import lmi_image_uri
from lmikit.catalog._instances import get_instance
from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._sagemaker import copies_one_instance_holds, render_requests
from lmikit.spec._loader import load_spec, load_spec_text
from lmikit.testing import ShapeValidator
from tests.conftest import EXAMPLE_SPECS, ROOT, assert_golden, lmcache_would_track_usage
from tests.unit.test_render_env import ISOLATED as ISOLATED_ENV
from tests.unit.test_spec import BASE

ROLE = "arn:aws:iam::111122223333:role/lmikit-exec"
ARTIFACT = "s3://lmikit-artifacts-111122223333/docqa/model/abc.tar.gz"
MODEL = botocore.session.get_session().get_service_model("sagemaker")


def _validate(operation: str, request: dict) -> list[str]:
    return ShapeValidator().validate(MODEL.operation_model(operation).input_shape, request)


def _render(spec, plan=None, **kw):
    plan = plan or plan_spec(spec, base_dir=ROOT)
    urls = {a.name: f"s3://b/adapters/{a.name}.tar.gz" for a in spec.adapters}
    return render_requests(spec, plan, image_uri=kw.pop("image", "img:1"),
                           execution_role_arn=ROLE, model_artifact_url=ARTIFACT,
                           adapter_artifact_urls=urls, **kw)


def _all_errors(r) -> list[str]:
    errors = _validate("CreateModel", r.model) if r.model is not None else []
    errors += _validate("CreateEndpointConfig", r.endpoint_config)
    errors += _validate("CreateEndpoint", r.endpoint)
    errors += _validate("CreateInferenceComponent", r.base_component)
    for req in r.adapter_components.values():
        errors += _validate("CreateInferenceComponent", req)
    return errors


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_requests_for_examples_pass_botocore_model(path):
    spec = load_spec(path)
    r = _render(spec, plan_spec(spec, base_dir=path.parent),
                image=lmi_image_uri(spec.region, spec.engine.lmi_version))
    assert _all_errors(r) == []
    body = {"endpoint_config": r.endpoint_config, "endpoint": r.endpoint,
            "base_component": r.base_component, "adapters": r.adapter_components}
    if r.model is not None:
        body["model"] = r.model
    assert_golden(f"sagemaker-{path.stem}.json", json.dumps(body, indent=2, sort_keys=True) + "\n")


def test_validator_rejects_what_botocore_client_would_send():
    """The strict check can fail: a bad routing enum and an over-long name are caught."""
    r = _render(load_spec_text(BASE))
    bad = json.loads(json.dumps(r.endpoint_config))
    bad["ProductionVariants"][0]["RoutingConfig"]["RoutingStrategy"] = "STICKY"
    bad["EndpointConfigName"] = "x" * 64
    errors = _validate("CreateEndpointConfig", bad)
    assert any("STICKY" in e for e in errors) and any("maximum 63" in e for e in errors)


def test_ic_endpoint_config_has_no_model_name_and_has_role():
    r = _render(load_spec_text(BASE))
    (variant,) = r.endpoint_config["ProductionVariants"]
    assert "ModelName" not in variant
    assert r.endpoint_config["ExecutionRoleArn"] == ROLE
    assert variant["ManagedInstanceScaling"]["Status"] == "ENABLED"


def test_scale_to_zero_keeps_initial_count_valid():
    spec = load_spec_text(BASE.replace("  type: ml.g6e.2xlarge",
                                       "  type: ml.g6e.2xlarge\n  min_count: 0"))
    (variant,) = _render(spec).endpoint_config["ProductionVariants"]
    assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    assert variant["InitialInstanceCount"] == 1


def test_prefix_aware_routing_config():
    spec = load_spec_text(BASE + "routing:\n  strategy: prefix_aware\n  prefix_length: 8192\n")
    routing = _render(spec).endpoint_config["ProductionVariants"][0]["RoutingConfig"]
    assert routing == {"RoutingStrategy": "PREFIX_AWARE", "PrefixAwareRoutingConfig": {
        "PrefixLength": 8192, "ConcurrencyThreshold": 8}}


def test_sticky_sessions_route_new_sessions_to_least_loaded():
    routing = _render(load_spec_text(BASE)).endpoint_config["ProductionVariants"][0]
    assert routing["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_base_component_compute_from_plan():
    spec = load_spec_text(BASE.replace("ml.g6e.2xlarge", "ml.g6e.12xlarge")
                          + "engine:\n  tensor_parallel_degree: 2\n")
    plan = plan_spec(spec)
    req = _render(spec, plan).base_component["Specification"]
    compute = req["ComputeResourceRequirements"]
    assert compute["NumberOfAcceleratorDevicesRequired"] == 2
    assert compute["MinMemoryRequiredInMb"] == plan.min_memory_mb
    from lmikit.render._env import serving_properties

    assert "option.tensor_parallel_degree=2\n" in serving_properties(spec, plan)
    assert req["Container"]["ArtifactUrl"] == ARTIFACT


def test_startup_timeouts_grow_with_the_model():
    small = _render(load_spec_text(BASE)).base_component["Specification"]["StartupParameters"]
    big_spec = load_spec_text(BASE.replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-72B-Instruct")
                              .replace("ml.g6e.2xlarge", "ml.p4de.24xlarge")
                              + "engine:\n  tensor_parallel_degree: 4\n")
    big = _render(big_spec).base_component["Specification"]["StartupParameters"]
    for key in small:
        assert 60 <= small[key] <= big[key] <= 3600
    # 145 GB from the Hub at 100 MB/s alone is ~24 min: far beyond a 600 s default.
    assert big["ContainerStartupHealthCheckTimeoutInSeconds"] >= 3000


def test_adapters_reference_the_base_by_literal_name():
    spec = load_spec_text(BASE + "adapters:\n  - {name: legal, source: adapters/legal}\n")
    r = _render(spec)
    adapter = r.adapter_components["legal"]
    assert adapter["InferenceComponentName"] == "docqa-legal"
    assert adapter["Specification"]["BaseInferenceComponentName"] == "docqa-base"
    assert "ComputeResourceRequirements" not in adapter["Specification"]


def test_missing_adapter_artifact_is_an_error():
    spec = load_spec_text(BASE + "adapters:\n  - {name: legal, source: adapters/legal}\n")
    with pytest.raises(RenderError, match="legal"):
        render_requests(spec, plan_spec(spec), image_uri="i", execution_role_arn=ROLE,
                        model_artifact_url=None)


def test_kms_on_nvme_instance_auto_skips_volume_key_required_fails():
    key = "arn:aws:kms:us-east-1:111122223333:key/abcd"
    auto = load_spec_text(BASE + f"security:\n  kms_key_arn: {key}\n")
    assert "KmsKeyId" not in _render(auto).endpoint_config
    required = load_spec_text(BASE + f"security:\n  kms_key_arn: {key}\n"
                              "  kms_volume_encryption: required\n")
    with pytest.raises(RenderError, match="local NVMe instance storage"):
        _render(required)


def test_config_name_changes_with_content_only():
    a = _render(load_spec_text(BASE)).names.endpoint_config
    assert a == _render(load_spec_text(BASE)).names.endpoint_config
    b = _render(load_spec_text(BASE.replace("  type: ml.g6e.2xlarge",
                                            "  type: ml.g6e.2xlarge\n  max_count: 3")))
    assert b.names.endpoint_config != a
    assert len(a) <= 63


def test_vpc_and_network_isolation():
    r = _render(load_spec(EXAMPLE_SPECS[-1]), plan_spec(load_spec(EXAMPLE_SPECS[-1]),
                                                        base_dir=EXAMPLE_SPECS[-1].parent))
    assert r.endpoint_config["EnableNetworkIsolation"] is True
    assert r.endpoint_config["VpcConfig"]["Subnets"]


def test_image_uri_is_pinned_and_regional():
    uri = lmi_image_uri("eu-west-1", "0.38.0")
    assert ".dkr.ecr.eu-west-1.amazonaws.com/djl-inference:0.38.0-lmi" in uri
    with pytest.raises(RenderError, match="lmi_version"):
        lmi_image_uri("us-east-1", "0.1.0")


ISOLATED = ISOLATED_ENV.replace("name: iso-env", "name: iso")


def test_network_isolation_names_a_model_that_sagemaker_fills_from_s3():
    spec = load_spec_text(ISOLATED)
    r = _render(spec)
    assert _all_errors(r) == []
    model = r.model
    assert model is not None
    assert model["PrimaryContainer"]["ModelDataSource"] == {"S3DataSource": {
        "S3Uri": "s3://example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/",
        "S3DataType": "S3Prefix", "CompressionType": "None"}}
    assert model["EnableNetworkIsolation"] is True
    assert {"Key": "lmikit:deployment", "Value": "iso"} in model["Tags"]
    spec_ = r.base_component["Specification"]
    assert spec_["ModelName"] == model["ModelName"] == r.names.model
    assert "Container" not in spec_
    assert "OPTION_MODEL_ID" not in model["PrimaryContainer"]["Environment"]


def test_model_name_changes_with_its_content():
    a = _render(load_spec_text(ISOLATED)).model
    b = _render(load_spec_text(ISOLATED + "engine:\n  max_batch_size: 8\n")).model
    assert a and b and a["ModelName"] != b["ModelName"]
    assert len(a["ModelName"]) <= 63


@pytest.mark.parametrize(("image", "path", "env"), [
    ("stock", "/server/metrics", "SERVING_PROMETHEUS"),
    ("lmikit", "/metrics", "LMIKIT_METRICS_PATH"),
])
def test_scraped_metrics_path_is_one_the_image_serves(image, path, env):
    r = _render(load_spec_text(BASE), image_kind=image)
    container = r.base_component["Specification"]["Container"]
    (endpoint,) = container["ContainerMetricsConfig"]["MetricsEndpoints"]
    assert endpoint["MetricsEndpointPath"] == path
    assert env in container["Environment"]


def test_stock_image_metrics_come_with_a_note_on_what_to_change():
    stock = _render(load_spec_text(BASE))
    assert stock.warnings == ()  # not a problem of the spec: a fact of the image
    assert stock.image_note is not None
    assert "serves only DJL's server metrics (/server/metrics)" in stock.image_note
    assert stock.image_note.endswith("lmikit's image publishes them: `cdk deploy` builds it, "
                                     "and `--image lmikit` checks for it")
    lmikit = _render(load_spec_text(BASE), image_kind="lmikit")
    assert lmikit.warnings == () and lmikit.image_note is None


P4DE_TP4 = """
api_version: v1
name: rag
region: us-west-2
model: {id: Qwen/Qwen2.5-72B-Instruct}
instance: {type: ml.p4de.24xlarge, copies_per_instance: COPIES}
engine: {tensor_parallel_degree: 4, max_model_len: 32768}
"""


def test_copies_one_instance_holds_is_what_its_gpus_cpus_and_memory_allow():
    """SageMaker allocates each copy its ComputeResourceRequirements (botocore), so one
    instance holds min(GPUs // TP, vCPUs // cores, memory // MinMemoryRequiredInMb)."""
    inst = get_instance("ml.p4de.24xlarge")
    for copies in (1, 2):
        spec = load_spec_text(P4DE_TP4.replace("COPIES", str(copies))
                              + "routing: {strategy: prefix_aware}\n")
        plan = plan_spec(spec, base_dir=ROOT)
        need = _render(spec, plan).base_component["Specification"][
            "ComputeResourceRequirements"]
        held = min(inst.gpu_count // need["NumberOfAcceleratorDevicesRequired"],
                   inst.vcpus // need["NumberOfCpuCoresRequired"],
                   inst.host_memory_gib * 1024 // need["MinMemoryRequiredInMb"])
        assert copies_one_instance_holds(spec, plan) == held == copies


@pytest.mark.parametrize("routing,field", [
    ("routing: {strategy: sticky_session}\n", "routing.strategy 'sticky_session'"),
    ("routing: {strategy: prefix_aware}\nsessions: {enabled: true}\n", "sessions.enabled")])
def test_sessions_with_two_copies_on_one_instance_are_refused(routing, field):
    """SageMaker pins a session to an instance (botocore InvokeEndpoint.SessionId), LMI keeps
    it in the copy that opened it (djl-serving session_manager.py): with two copies on one
    instance a turn can reach the copy that does not hold it."""
    spec = load_spec_text(P4DE_TP4.replace("COPIES", "2") + routing)
    with pytest.raises(RenderError, match=re.escape(field) + r": stateful sessions need one "
                       r"model copy per instance, but up to 2 copies can share one "
                       r"ml.p4de.24xlarge .*Set instance.copies_per_instance: 1 .*"
                       r"routing.strategy: prefix_aware"):
        _render(spec)


def test_sessions_with_one_copy_per_instance_render():
    """copies_per_instance 1 on an 8-GPU instance at TP 4: the copy's CPU cores leave no room
    for a second copy, so every session has its instance to itself."""
    spec = load_spec_text(P4DE_TP4.replace("COPIES", "1")
                          + "routing: {strategy: sticky_session}\n")
    assert spec.sessions_enabled
    r = _render(spec)
    assert r.endpoint_config["ProductionVariants"][0]["RoutingConfig"] == {
        "RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_stock_image_disk_tier_is_a_fixed_size_lmikit_cannot_check():
    """The stock image writes the planned disk tier as is; SageMaker does not document where a
    hosting container's instance storage is mounted (botocore ProductionVariant.VolumeSizeInGB
    speaks of EBS only; djl-serving lmcache_utils.py "assumes /tmp is a NVMe"), so the one
    stock-image note says so and names lmikit's image, which measures /tmp at start."""
    path = ROOT / "examples" / "rag-qwen72b-nvme.yaml"
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    assert plan.tier == "cpu+disk"
    stock = _render(spec, plan)
    assert stock.warnings == ()
    note = stock.image_note or ""
    assert (f"its LMCache disk tier is fixed at {plan.lmcache['max_local_disk_size_gb']:g} GB "
            "per worker x 8 workers at file:///tmp/lmcache/, sized from ml.p4de.24xlarge's "
            "8000 GB of instance store") in note
    assert "does not document where a hosting container's instance storage is mounted" in note
    assert note.endswith("lmikit's image publishes them and measures /tmp at start (the tier "
                         "is then off, or a fixed kv_cache.disk_size_gb refused, where it "
                         "does not fit): `cdk deploy` builds it, and `--image lmikit` checks "
                         "for it")
    assert _render(spec, plan, image_kind="lmikit").image_note is None
    no_metrics = load_spec_text(path.read_text() + "observability: {detailed_metrics: false}\n")
    only_disk = _render(no_metrics, plan_spec(no_metrics, base_dir=path.parent)).image_note
    assert only_disk is not None and "DJL's server metrics" not in only_disk
    assert "lmikit's image measures /tmp at start" in only_disk
    cpu_only = load_spec_text(BASE)
    assert plan_spec(cpu_only, base_dir=ROOT).tier != "cpu+disk"
    assert "disk tier" not in (_render(cpu_only).image_note or "")


def test_stock_image_on_sagemaker_copied_weights_turns_detailed_metrics_off():
    r = _render(load_spec_text(ISOLATED))
    assert r.endpoint_config["MetricsConfig"]["EnableDetailedObservability"] is False
    assert r.image_note is not None and "detailed observability is off" in r.image_note
    lmikit = _render(load_spec_text(ISOLATED), image_kind="lmikit")
    assert lmikit.endpoint_config["MetricsConfig"]["EnableDetailedObservability"] is True


def test_custom_metrics_path_with_sagemaker_copied_weights_is_refused():
    spec = load_spec_text(ISOLATED + "observability:\n  metrics_path: /stats\n")
    with pytest.raises(RenderError, match="metrics_path '/stats'.*Use /metrics"):
        _render(spec, image_kind="lmikit")


def test_hf_token_secret_needs_lmikits_image():
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
    spec = load_spec_text(BASE + f"security:\n  hf_token_secret_arn: {arn}\n")
    with pytest.raises(RenderError, match="stock LMI image cannot read a Secrets Manager"):
        _render(spec)
    env = _render(spec, image_kind="lmikit").base_component["Specification"]["Container"][
        "Environment"]
    assert env["LMIKIT_HF_TOKEN_SECRET_ARN"] == arn


def test_model_artifact_must_be_a_single_tar_gz():
    spec = load_spec_text(BASE)
    with pytest.raises(RenderError, match=r"single \.tar\.gz"):
        render_requests(spec, plan_spec(spec), image_uri="i", execution_role_arn=ROLE,
                        model_artifact_url="s3://b/model.gz")


def test_nvme_instances_request_no_ebs_volume():
    """SageMaker mounts the instance store where there is one; VolumeSizeInGB is only for
    EBS-only instance types."""
    (variant,) = _render(load_spec_text(BASE)).endpoint_config["ProductionVariants"]
    assert "VolumeSizeInGB" not in variant


def test_kv_aware_is_refused_on_the_lmi_image_with_botocores_reason():
    """botocore ProductionVariantRoutingConfig.RoutingStrategy: KV_AWARE "works only with
    supported containers, such as the SageMaker AI vLLM Deep Learning Container"; lmikit runs
    the LMI image (its own is built on it), so it refuses rather than render a routing that
    would not happen, and names the strategies that are valid."""
    doc = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "ProductionVariantRoutingConfig").members["RoutingStrategy"].documentation
    quoted = "works only with supported containers, such as the SageMaker AI vLLM Deep " \
             "Learning Container"
    assert quoted in doc
    spec = load_spec_text(BASE + "routing: {strategy: kv_aware}\n")
    for kind in ("stock", "lmikit"):
        with pytest.raises(RenderError) as caught:
            _render(spec, image_kind=kind)
        message = str(caught.value)
        assert message.startswith("routing.strategy 'kv_aware' cannot be used on SageMaker")
        assert quoted in message
        assert all(f"'{valid}'" in message for valid in
                   ("prefix_aware", "sticky_session", "least_outstanding", "random"))


@pytest.mark.parametrize("image_kind", ["stock", "lmikit"])
def test_lmcache_telemetry_is_off_in_every_sagemaker_container_that_runs_it(image_kind,
                                                                            monkeypatch):
    """LMCache sends usage messages (remote URL, model name) over plain HTTP unless
    LMCACHE_TRACK_USAGE is exactly "false" (LMCache 0.5.6 usage_telemetry/identity.py,
    transport.py, messages.py): the base component's environment, and the Model's where
    SageMaker copies the weights, turn it off; a deployment without LMCache gets nothing."""
    assert lmcache_would_track_usage({}, monkeypatch)
    cases = [(load_spec_text(BASE), "component"), (load_spec_text(ISOLATED), "model")]
    for spec, where in cases:
        plan = plan_spec(spec, base_dir=ROOT)
        assert plan.uses_lmcache
        r = _render(spec, plan, image_kind=image_kind)
        env = (r.base_component["Specification"]["Container"]["Environment"]
               if where == "component" else r.model["PrimaryContainer"]["Environment"])
        assert not lmcache_would_track_usage(env, monkeypatch), where
    off = load_spec_text(BASE + "kv_cache: {mode: 'off'}\n")
    r = _render(off, image_kind=image_kind)
    assert "LMCACHE_TRACK_USAGE" not in r.base_component["Specification"]["Container"][
        "Environment"]
