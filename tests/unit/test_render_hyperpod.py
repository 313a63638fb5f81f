"""HyperPod manifests are validated against the operator's CRD schema (shared/schemas)."""

from __future__ import annotations

import json
import math
import re

import botocore.session
import jsonschema
import pytest
import yaml

from lmikit.aws import owner_of
from lmikit.errors import RenderError, SpecError
from lmikit.names import DEPLOYMENT_TAG, HYPERPOD_DEPLOYMENT_TAG, hyperpod_endpoint_name
from lmikit.planner._planner import plan_spec
from lmikit.planner._startup import estimate_startup
from lmikit.render._hyperpod import (
    hyperpod_manifest,
    hyperpod_notes,
    max_deploy_time_s,
    rfc1123,
)
from lmikit.spec import NAME_MAX, load_spec, load_spec_text
from tests.conftest import EXAMPLE_SPECS, ROOT, assert_golden, hyperpod_crd, hyperpod_crd_v1
from tests.unit.test_spec import BASE

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"


@pytest.fixture(scope="module")
def crd_validator():
    schema = hyperpod_crd_v1()
    assert hyperpod_crd()["spec"]["group"] + "/v1" == "inference.sagemaker.aws.amazon.com/v1"
    return jsonschema.Draft7Validator(schema)


def _manifest(text: str):
    spec = load_spec_text(text)
    return hyperpod_manifest(spec, plan_spec(spec), image_uri=IMAGE)


def _errors(validator, manifest):
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(manifest)]


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_hyperpod_examples_validate_against_crd(crd_validator, path):
    spec = load_spec(path)
    manifest = hyperpod_manifest(spec, plan_spec(spec, base_dir=path.parent), image_uri=IMAGE)
    assert _errors(crd_validator, manifest) == []
    assert_golden(f"hyperpod-{path.stem}.yaml", yaml.safe_dump(manifest, sort_keys=True))


def test_hyperpod_validator_catches_a_bad_manifest(crd_validator):
    manifest = _manifest(BASE + "routing:\n  strategy: prefix_aware\n")
    manifest["spec"]["intelligentRoutingSpec"]["routingStrategy"] = "prefix"
    del manifest["spec"]["worker"]["image"]
    errors = _errors(crd_validator, manifest)
    assert len(errors) == 2


def test_hyperpod_names_are_lowercase_rfc1123():
    assert rfc1123("DocQA-Prod") == "docqa-prod"
    manifest = _manifest(BASE.replace("name: docqa", "name: DocQA-Prod"))
    assert manifest["metadata"]["name"] == "docqa-prod"
    assert manifest["spec"]["endpointName"] == "docqa-prod-hyperpod"


# Spec names at the edges: the longest (NAME_MAX), one character, mixed case, runs of dashes.
EDGE_NAMES = ["docqa", "DocQA", "a", "A1--b2", "x" * NAME_MAX, "Ab-" * 13 + "C"]


@pytest.mark.parametrize("name", EDGE_NAMES)
def test_hyperpod_endpoint_is_never_the_sagemaker_endpoint(name):
    """The operator creates a SageMaker endpoint named endpointName (CRD: "Name used for
    Sagemaker Endpoint"); lmikit's SageMaker target creates one named after the spec. Endpoint
    names are unique per account and region, case-insensitively (botocore's CreateEndpoint
    documentation), so the two must differ ignoring case, and the HyperPod one must satisfy
    botocore's EndpointName shape and the CRD's endpointName schema."""
    from lmikit.render._sagemaker import render_requests

    spec = load_spec_text(BASE.replace("name: docqa", f"name: {name}"))
    plan = plan_spec(spec)
    ours = hyperpod_manifest(spec, plan, image_uri=IMAGE)["spec"]["endpointName"]
    sagemaker = render_requests(spec, plan, image_uri="img:1",
                                execution_role_arn="arn:aws:iam::111122223333:role/r",
                                model_artifact_url="s3://b/m.tar.gz").endpoint["EndpointName"]
    assert ours.lower() != sagemaker.lower()
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "EndpointName").metadata
    assert len(ours) <= shape["max"] == 63
    assert re.fullmatch(shape["pattern"], ours)
    assert re.fullmatch(r"^$|^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", ours)  # the CRD's pattern
    assert ours == ours.lower()  # Kubernetes names are lowercase (shared/REFERENCE.md s. 7)


def test_hyperpod_endpoint_names_of_distinct_deployments_differ():
    names = [hyperpod_endpoint_name(n) for n in EDGE_NAMES if n != "DocQA"]
    assert len(set(names)) == len(names)


def test_hyperpod_endpoint_tags_are_never_lmikit_ownership_tags():
    """lmikit's SageMaker deploy adopts, and destroy deletes, an endpoint whose
    lmikit:deployment tag names the deployment (lmikit.aws.owner_of); the operator copies
    spec.tags onto its endpoint (CRD: "tags to be added to the Sagemaker Endpoint")."""
    manifest = _manifest(BASE + "tags:\n  team: search\n")
    tags = {t["name"]: t["value"] for t in manifest["spec"]["tags"]}
    assert tags == {HYPERPOD_DEPLOYMENT_TAG: "docqa", "team": "search"}
    assert owner_of(tags) is None


@pytest.mark.parametrize("key", [DEPLOYMENT_TAG, HYPERPOD_DEPLOYMENT_TAG])
def test_hyperpod_refuses_lmikit_tags_in_spec_tags(key):
    """The spec itself refuses them now (every lmikit: key), before any renderer runs."""
    with pytest.raises(SpecError, match=f"tags.{key} .*the lmikit: prefix is reserved"):
        _manifest(BASE + f"tags:\n  {key}: docqa\n")


@pytest.mark.parametrize(("strategy", "expected"), [
    ("prefix_aware", "prefixaware"), ("kv_aware", "kvaware"), ("sticky_session", "session")])
def test_hyperpod_intelligent_routing(strategy, expected):
    spec = _manifest(BASE + f"routing:\n  strategy: {strategy}\n")["spec"]
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": expected}


def test_hyperpod_plain_routing_uses_the_load_balancer():
    spec = _manifest(BASE + "routing:\n  strategy: random\nkv_cache:\n  mode: \"off\"\n")["spec"]
    assert "intelligentRoutingSpec" not in spec
    assert spec["loadBalancer"] == {"routingAlgorithm": "round_robin"}
    cached = _manifest(BASE + "routing:\n  strategy: random\nkv_cache:\n  mode: cpu\n")["spec"]
    assert cached["loadBalancer"]["routingAlgorithm"] == "round_robin"


def test_hyperpod_tiers_map_to_l1_and_l2():
    cpu = _manifest(BASE + "kv_cache:\n  mode: cpu\n")["spec"]["kvCacheSpec"]
    assert cpu == {"enableL1Cache": True, "enableL2Cache": False}
    big = BASE.replace("ml.g6e.2xlarge", "ml.g6e.12xlarge")
    disk = _manifest(big + "kv_cache:\n  mode: cpu+disk\n")["spec"]["kvCacheSpec"]
    assert disk["l2CacheSpec"] == {"l2CacheBackend": "tieredstorage"}
    redis = _manifest(BASE + "kv_cache:\n  mode: remote\n  remote_url: redis://r:6379\n")
    assert redis["spec"]["kvCacheSpec"]["l2CacheSpec"] == {
        "l2CacheBackend": "redis", "l2CacheLocalUrl": "redis://r:6379"}


def test_hyperpod_remote_backend_must_be_redis():
    with pytest.raises(RenderError, match="redis://"):
        _manifest(BASE + "kv_cache:\n  mode: remote\n  remote_url: s3://kv-cache.s3.us-east-1.amazonaws.com\n")


def test_hyperpod_operator_owned_env_is_not_passed():
    spec = _manifest(BASE + "kv_cache:\n  mode: cpu\n")["spec"]
    names = {e["name"] for e in spec["worker"]["environmentVariables"]}
    # LMCache's settings are the operator's; its telemetry switch is lmikit's to turn off
    assert not any(n.startswith(("LMCACHE_", "OPTION_", "LMIKIT_"))
                   for n in names - {"LMCACHE_TRACK_USAGE"})
    assert not any("prefix-caching" in a or "kv-transfer" in a for a in spec["worker"]["args"])
    assert names == {"PYTHONHASHSEED", "LMCACHE_TRACK_USAGE", "DO_NOT_TRACK"}


def test_hyperpod_lmi_worker_serves_the_mounted_weights_without_lmikit_env():
    text = BASE + "kv_cache:\n  mode: \"off\"\nrouting:\n  strategy: least_outstanding\n"
    worker = _manifest(text)["spec"]["worker"]
    env = {e["name"]: e["value"] for e in worker["environmentVariables"]}
    assert env["HF_MODEL_ID"] == worker["modelVolumeMount"]["mountPath"] == "/opt/ml/model"
    assert not any(n.startswith(("LMIKIT_", "LMCACHE_")) for n in env)
    assert env["OPTION_ENABLE_PREFIX_CACHING"] == "true"


def test_hyperpod_in_memory_only_never_enables_l2():
    manifest = _manifest(BASE + "kv_cache:\n  in_memory_only: true\n"
                         "workload:\n  reused_context_tokens: 100000000\n")
    assert manifest["spec"]["kvCacheSpec"]["enableL2Cache"] is False


def test_hyperpod_s3_weights_and_token_secret_reference():
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
    text = BASE + f"security:\n  hf_token_secret_arn: {arn}\n"
    src = _manifest(text)["spec"]["modelSourceConfig"]
    assert src["huggingFaceModel"]["tokenSecretRef"] == {"name": "docqa-hf-token", "key": "token"}
    assert arn not in json.dumps(src)
    config = ROOT / "examples/models/llama-3.1-8b-config.json"
    s3 = _manifest(BASE.replace("Qwen/Qwen2.5-7B-Instruct",
                                f"s3://bkt/models/llama8b/\n  config_path: {config}"))
    assert s3["spec"]["modelSourceConfig"]["s3Storage"] == {"bucketName": "bkt",
                                                            "region": "us-east-1"}


LMI_PATH = "kv_cache:\n  mode: \"off\"\nrouting:\n  strategy: least_outstanding\n"
VLLM_PATH = "kv_cache:\n  mode: cpu\n"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _with_revision(revision: str, path: str) -> str:
    model = "Qwen/Qwen2.5-7B-Instruct"
    return BASE.replace(model, f"{model}\n  revision: {revision}") + path


@pytest.mark.parametrize("path", [LMI_PATH, VLLM_PATH], ids=["lmi", "vllm"])
def test_hyperpod_revision_that_is_not_a_commit_is_refused_for_either_worker(path):
    """CRD: commitSHA "Must be a full 40-character lowercase hex SHA. If not provided, the
    operator defaults to \"main\" branch"; the SageMaker target pins option.revision, so a
    dropped branch or tag would serve other weights there than here."""
    with pytest.raises(RenderError, match=r"model.revision 'v1.0': .*commitSHA, a full "
                                          r"40-character hex commit SHA"):
        _manifest(_with_revision("v1.0", path))


@pytest.mark.parametrize("path", [LMI_PATH, VLLM_PATH], ids=["lmi", "vllm"])
def test_hyperpod_commit_sha_is_pinned_in_lowercase_for_either_worker(crd_validator, path):
    manifest = _manifest(_with_revision(SHA.upper(), path))
    assert manifest["spec"]["modelSourceConfig"]["huggingFaceModel"]["commitSHA"] == SHA
    assert _errors(crd_validator, manifest) == []


MODEL_EXAMPLES = sorted((ROOT / "examples" / "models").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLE_SPECS + MODEL_EXAMPLES, ids=lambda p: p.name)
def test_hyperpod_max_deploy_time_is_the_startup_estimate_with_margin(crd_validator, path):
    """maxDeployTimeInSeconds (CRD: default 3600, int32) = the plan's expected download +
    load + warm-up x 1.5 (lmikit.planner.MARGIN, as for SageMaker's start-up timeouts),
    rounded up to a minute, at least the operator's 3600 s default."""
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    manifest = hyperpod_manifest(spec, plan, image_uri=IMAGE)
    got = manifest["spec"]["maxDeployTimeInSeconds"]
    expected_s = plan.startup.expected_s
    assert got == max(3600, math.ceil(1.5 * expected_s / 60) * 60)
    assert got >= 1.5 * expected_s and got % 60 == 0
    assert _errors(crd_validator, manifest) == []


def test_hyperpod_max_deploy_time_exceeds_the_default_for_the_largest_models():
    # DeepSeek-V3.2 from the Hub: about 2 h 20 min expected, so the 1 h default times it out
    # (the example stages it in S3: SageMaker's caps are 3600 s).
    path = ROOT / "examples" / "models" / "deepseek-v3.2-p5e.yaml"
    staged = "  id: s3://example-models-bucket/deepseek-ai/DeepSeek-V3.2/\n"
    text = path.read_text()
    assert staged in text
    spec = load_spec_text(text.replace(staged, "  id: deepseek-ai/DeepSeek-V3.2\n")
                          .replace("  hub_id: deepseek-ai/DeepSeek-V3.2", "  # hub_id"))
    plan = plan_spec(spec, base_dir=path.parent)
    assert plan.startup.expected_s > 3600
    assert hyperpod_manifest(spec, plan, image_uri=IMAGE)["spec"][
        "maxDeployTimeInSeconds"] == 12600


def test_hyperpod_max_deploy_time_stays_an_int32():
    assert max_deploy_time_s(estimate_startup(10**20, "hub")) == 2**31 - 1


def _notes(text: str, base_dir=None) -> tuple[dict, list[str]]:
    spec = load_spec_text(text)
    plan = plan_spec(spec, base_dir=base_dir)
    return hyperpod_manifest(spec, plan, image_uri=IMAGE), hyperpod_notes(spec, plan)


def _dropped(notes: list[str]) -> dict[str, str]:
    """Field -> note, for the notes that say a spec setting is not in the manifest."""
    return {n.split(" ", 1)[0]: n for n in notes if "is not in the manifest" in n}


def test_hyperpod_notes_each_lmcache_setting_the_operator_sizes_itself():
    """kvCacheSpec only switches L1/L2 and names the L2 backend (CRD); the operator strips
    user LMCACHE_* variables (shared/REFERENCE.md section 7). cacheConfigFile is a path inside
    the worker, which a manifest cannot ship."""
    manifest, notes = _notes(BASE + "kv_cache:\n  mode: cpu\n  cpu_size_gb: 10\n"
                             "  chunk_size: 512\n")
    assert manifest["spec"]["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": False}
    dropped = _dropped(notes)
    assert set(dropped) == {"kv_cache.cpu_size_gb", "kv_cache.chunk_size"}
    assert "(10 GB)" in dropped["kv_cache.cpu_size_gb"]
    assert "(512)" in dropped["kv_cache.chunk_size"]
    assert all("LMCACHE_" in n for n in dropped.values())


def test_hyperpod_notes_prefix_caching_off_next_to_the_operators_cache():
    manifest, notes = _notes(BASE + "kv_cache:\n  mode: cpu\n"
                             "engine:\n  enable_prefix_caching: false\n")
    assert not any("prefix-caching" in a for a in manifest["spec"]["worker"]["args"])
    assert "vLLM's own prefix caching stays on" in _dropped(notes)[
        "engine.enable_prefix_caching"]
    # Without the operator's cache the flag is carried, so there is nothing to note.
    off = BASE + "kv_cache:\n  mode: \"off\"\nengine:\n  enable_prefix_caching: false\n"
    assert _dropped(_notes(off)[1]) == {}


def test_hyperpod_notes_disk_settings_replaced_by_tiered_storage():
    big = BASE.replace("ml.g6e.2xlarge", "ml.g6e.12xlarge")
    manifest, notes = _notes(big + "kv_cache:\n  mode: cpu+disk\n  disk_size_gb: 500\n"
                             "  disk_path: /opt/dml/lmcache/\n")
    assert manifest["spec"]["kvCacheSpec"]["l2CacheSpec"] == {"l2CacheBackend": "tieredstorage"}
    assert set(_dropped(notes)) == {"kv_cache.disk_size_gb", "kv_cache.disk_path"}


def test_hyperpod_notes_the_regulated_examples_security_settings():
    """network_isolation, vpc and kms_key_arn have no field in the v1 CRD (its only kmsKeyId
    is dataCapture's)."""
    path = ROOT / "examples" / "regulated-llama8b-inmemory.yaml"
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    dropped = _dropped(hyperpod_notes(spec, plan))
    assert set(dropped) == {"security.network_isolation", "security.vpc",
                            "security.kms_key_arn"}
    assert all("CRD has no field for it" in n for n in dropped.values())
    text = json.dumps(hyperpod_manifest(spec, plan, image_uri=IMAGE))
    assert "subnet-" not in text and "arn:aws:kms" not in text


def test_hyperpod_notes_routing_settings_of_sagemakers_prefix_routing():
    _, notes = _notes(BASE + "routing:\n  strategy: prefix_aware\n  prefix_length: 8192\n"
                      "  concurrency_threshold: 16\n")
    assert set(_dropped(notes)) == {"routing.prefix_length", "routing.concurrency_threshold"}


def test_hyperpod_notes_nothing_dropped_for_a_plain_spec():
    assert _dropped(_notes(BASE + "kv_cache:\n  mode: cpu\n")[1]) == {}


def test_hyperpod_refuses_required_volume_encryption():
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    text = BASE + f"security:\n  kms_key_arn: {arn}\n  kms_volume_encryption: required\n"
    with pytest.raises(RenderError, match="kms_volume_encryption is 'required'.*CRD has no "
                                          "field for it"):
        _manifest(text)


ADAPTER = "adapters:\n  - {name: a1, source: s3://bkt/a1.tar.gz, rank: 8}\n"


def _lora_note(path: str) -> tuple[dict, str]:
    manifest, notes = _notes(BASE + path + ADAPTER)
    return manifest, next(n for n in notes if "LoRA" in n)


def test_hyperpod_lora_note_for_the_vllm_worker():
    """vLLM 0.11.1 registers /v1/load_lora_adapter only when VLLM_ALLOW_RUNTIME_LORA_UPDATING
    is set, and warns it is for local development (api_server.py); the manifest leaves it
    unset, so the note says how to serve adapters without it."""
    # Routing alone makes it a vLLM worker (an s3:// adapter cannot be used with LMCache on).
    manifest, note = _lora_note("kv_cache:\n  mode: \"off\"\nrouting:\n  strategy: prefix_aware\n")
    worker = manifest["spec"]["worker"]
    assert "--enable-lora" in worker["args"]
    assert "--lora-modules <name>=<path>" in note
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true, which the manifest does not set" in note
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in {
        e["name"] for e in worker["environmentVariables"]}


def test_hyperpod_lora_note_for_the_lmi_worker_names_no_vllm_api():
    manifest, note = _lora_note(LMI_PATH)
    assert manifest["spec"]["worker"]["modelInvocationPort"]["containerPort"] == 8080
    assert "vLLM" not in note and "--lora-modules" not in note
    assert "POST /models/<model>/adapters?name=<name>&src=<path>" in note


def test_hyperpod_notes_a_training_plan_the_cluster_decides():
    plan = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"
    manifest, notes = _notes(BASE.replace("  type: ml.g6e.2xlarge\n",
                                          f"  type: ml.p4d.24xlarge\n  capacity_reservation_arn: "
                                          f"{plan}\n"))
    assert plan not in json.dumps(manifest)
    assert f"({plan}) is not in the manifest" in _dropped(notes)[
        "instance.capacity_reservation_arn"]
