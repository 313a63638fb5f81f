"""Network isolation: SageMaker copies the S3 weights through a Model the component names.

The deployer creates the Model (tagged like the other resources), the component refers to it,
a changed spec moves the component to a new Model and deletes the old one, a failed run and
``destroy`` delete it, and the adapter registry reads the base's settings from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.errors import DeployError
from lmikit.lora import AdapterRegistry
from lmikit.render._model_artifact import weights_model_py
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock
from tests.conftest import ROOT, stage_copy

from .conftest import BUCKET, deployment, live, make_adapter

ISOLATED = f"""
api_version: v1
name: docqa
region: us-east-1
model:
  id: s3://example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/
  config_path: {ROOT / "examples" / "models" / "llama-3.1-8b-config.json"}
instance:
  type: ml.g6e.4xlarge
kv_cache:
  mode: cpu
  in_memory_only: true
security:
  network_isolation: true
"""


def _spec(extra: str = "") -> DeploymentSpec:
    return load_spec_text(ISOLATED + extra)


def test_deploy_creates_a_tagged_model_the_component_names(fake: FakeSageMaker, session: Any,
                                                           clock: VirtualClock,
                                                           tmp_path: Path) -> None:
    result = deployment(_spec(), session, clock, tmp_path).deploy()
    assert ("model", "create") in {(c.kind, c.action) for c in result.changes}
    sm = session.client("sagemaker")
    (model,) = live(fake)["model"]
    desc = sm.describe_model(ModelName=model)
    assert desc["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3DataType"] == \
        "S3Prefix"
    assert "OPTION_MODEL_ID" not in desc["PrimaryContainer"]["Environment"]
    tags = sm.list_tags(ResourceArn=desc["ModelArn"])["Tags"]
    assert {"Key": "lmikit:deployment", "Value": "docqa"} in tags
    base = sm.describe_inference_component(InferenceComponentName="docqa-base")
    assert base["Specification"]["ModelName"] == model
    assert base["InferenceComponentStatus"] == "InService"
    s3 = session.client("s3")
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0  # no model artifact to ship


def test_deploy_again_changes_nothing(fake: FakeSageMaker, session: Any, clock: VirtualClock,
                                      tmp_path: Path) -> None:
    deployment(_spec(), session, clock, tmp_path).deploy()
    result = deployment(_spec(), session, clock, tmp_path).deploy()
    assert not result.changed


def test_changed_spec_moves_to_a_new_model_and_deletes_the_old(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    deployment(_spec(), session, clock, tmp_path).deploy()
    (old,) = live(fake)["model"]
    result = deployment(_spec("engine:\n  max_batch_size: 16\n"), session, clock,
                        tmp_path).deploy()
    (new,) = live(fake)["model"]
    assert new != old
    assert ("model", old, "delete") in {(c.kind, c.name, c.action) for c in result.changes}
    desc = session.client("sagemaker").describe_inference_component(
        InferenceComponentName="docqa-base")
    assert desc["Specification"]["ModelName"] == new


def test_failed_component_rolls_the_model_back(fake: FakeSageMaker, session: Any,
                                               clock: VirtualClock, tmp_path: Path) -> None:
    fake.inject("CreateInferenceComponent", "failed", name="docqa-base",
                reason="injected: weights failed to load")
    with pytest.raises(DeployError, match="Rolled back.*model docqa-model-"):
        deployment(_spec(), session, clock, tmp_path).deploy()
    assert "model" not in live(fake)


def test_destroy_deletes_the_model(fake: FakeSageMaker, session: Any, clock: VirtualClock,
                                   tmp_path: Path) -> None:
    d = deployment(_spec(), session, clock, tmp_path)
    d.deploy()
    result = d.destroy()
    assert "model" in {c.kind for c in result.changes if c.action == "delete"}
    assert live(fake) == {}


LORA = "engine:\n  lora: {enabled: true, max_rank: 32}\n"
WEIGHTS_BUCKET = "example-models-bucket"
MODEL_PY_KEY = "meta-llama/Llama-3.1-8B-Instruct/model.py"


def _stage_model_py(session: Any, body: bytes | None = None) -> None:
    """What `lmikit weights stage --lora-isolation` leaves in the weights' prefix."""
    from lmikit.planner._planner import plan_spec

    spec = _spec(LORA)
    expected = weights_model_py(spec, plan_spec(spec))
    assert expected is not None
    s3 = session.client("s3")
    s3.create_bucket(Bucket=WEIGHTS_BUCKET)
    if body != b"":
        s3.put_object(Bucket=WEIGHTS_BUCKET, Key=MODEL_PY_KEY,
                      Body=expected if body is None else body)


@pytest.mark.parametrize("body", [b"", b"# another model.py\n"], ids=["missing", "foreign"])
def test_deploy_with_lora_and_lmcache_refuses_weights_without_lmikits_model_py(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path,
        body: bytes) -> None:
    """LMCache's key has no LoRA id; on this path the base's isolating model.py can only come
    from the weights' prefix, so deploy checks it before it creates anything."""
    _stage_model_py(session, body)  # b"": the prefix has no model.py
    with pytest.raises(DeployError, match=r"model.id: s3://example-models-bucket/.*model.py "
                                          r"is (missing|not lmikit's).*--lora-isolation"):
        deployment(_spec(LORA), session, clock, tmp_path).deploy()
    assert live(fake) == {}


def test_adapter_registry_reads_the_base_settings_from_the_model(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    _stage_model_py(session)
    deployment(_spec(LORA), session, clock, tmp_path).deploy()
    registry = AdapterRegistry("docqa", session=session, bucket=BUCKET, clock=clock,
                               poll_seconds=1)
    assert registry.max_rank() == 32
    info = registry.register("legal", make_adapter(tmp_path / "a", "legal", rank=16,
                                                   base="meta-llama/Llama-3.1-8B-Instruct"))
    assert info.status == "InService"


def test_fake_refuses_a_component_naming_a_missing_model(fake: FakeSageMaker,
                                                         session: Any) -> None:
    from lmikit.planner._planner import plan_spec
    from lmikit.render._sagemaker import render_requests

    from .conftest import IMAGE, ROLE

    spec = _spec()
    r = render_requests(spec, plan_spec(spec), image_uri=IMAGE, execution_role_arn=ROLE,
                        model_artifact_url=None)
    sm = session.client("sagemaker")
    sm.create_endpoint_config(**r.endpoint_config)
    sm.create_endpoint(**r.endpoint)
    fake.settle()
    with pytest.raises(sm.exceptions.ClientError, match="Could not find model"):
        sm.create_inference_component(**r.base_component)


def test_fake_model_rules_follow_the_service_model(fake: FakeSageMaker, session: Any) -> None:
    sm = session.client("sagemaker")
    container = {"Image": "img:1", "ModelDataSource": {"S3DataSource": {
        "S3Uri": "s3://b/weights", "S3DataType": "S3Prefix", "CompressionType": "None"}}}
    with pytest.raises(sm.exceptions.ClientError, match="must end with '/'"):
        sm.create_model(ModelName="m", PrimaryContainer=container)
    with pytest.raises(sm.exceptions.ClientError, match="'Zip' is not one of"):
        sm.create_model(ModelName="m", PrimaryContainer={**container, "ModelDataSource": {
            "S3DataSource": {"S3Uri": "s3://b/w/", "S3DataType": "S3Prefix",
                             "CompressionType": "Zip"}}})
    container["ModelDataSource"]["S3DataSource"]["S3Uri"] = "s3://b/weights/"
    sm.create_model(ModelName="m", PrimaryContainer=container)
    with pytest.raises(sm.exceptions.ClientError, match="already existing model"):
        sm.create_model(ModelName="m", PrimaryContainer=container)
    assert sm.describe_model(ModelName="m")["PrimaryContainer"]["Image"] == "img:1"
    sm.delete_model(ModelName="m")
    with pytest.raises(sm.exceptions.ClientError, match="Could not find model"):
        sm.describe_model(ModelName="m")


def test_openai_client_finds_the_base_model_id_in_the_model_environment(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """With S3 weights the base component has no container environment: the OpenAI-compatible
    client reads the model id from the SageMaker Model the component names."""
    pytest.importorskip("openai")
    from lmikit import Endpoint

    deployment(_spec(), session, clock, tmp_path).deploy()
    client = Endpoint("docqa", session=session, clock=clock).openai()
    model = "s3://example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/"
    assert model in [m.id for m in client.models.list()]
    reply = client.chat.completions.create(model=model,
                                           messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content


HUB_ID = "  hub_id: meta-llama/Llama-3.1-8B-Instruct\n"
PREFIX = "meta-llama/Llama-3.1-8B-Instruct/"


def _hub_id_spec() -> DeploymentSpec:
    """The isolated spec, its weights named as a staged copy of a Hub model."""
    return load_spec_text(ISOLATED.replace("model:\n", "model:\n" + HUB_ID, 1))


def _stage_copy(session: Any, model_id: str, *, manifest: bool = True) -> None:
    s3 = session.client("s3")
    s3.create_bucket(Bucket=WEIGHTS_BUCKET)
    stage_copy(s3, f"s3://{WEIGHTS_BUCKET}/{PREFIX}", model_id,
               {"config.json": b"{}", "model.safetensors": b"\0" * 2048}, manifest=manifest)


def test_deploy_uses_a_finished_staged_copy_of_the_hub_model(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    _stage_copy(session, "meta-llama/Llama-3.1-8B-Instruct")
    deployment(_hub_id_spec(), session, clock, tmp_path).deploy()
    assert len(live(fake)["model"]) == 1


@pytest.mark.parametrize(("model_id", "manifest", "says"), [
    ("meta-llama/Llama-3.1-8B-Instruct", False,
     r"has no lmikit-manifest.json: the copy is unfinished"),
    ("Qwen/Qwen3-8B", True, r"it holds Qwen/Qwen3-8B, not meta-llama/Llama-3.1-8B-Instruct"),
], ids=["half-copied", "another-model"])
def test_deploy_refuses_staged_weights_that_are_unfinished_or_another_model(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path,
        model_id: str, manifest: bool, says: str) -> None:
    """The manifest is written last, so a copy that stopped part-way has none: deploy checks
    it, and the model it names, before it creates anything."""
    _stage_copy(session, model_id, manifest=manifest)
    with pytest.raises(DeployError, match=rf"model.id: .*{says}"):
        deployment(_hub_id_spec(), session, clock, tmp_path).deploy()
    assert live(fake) == {}
