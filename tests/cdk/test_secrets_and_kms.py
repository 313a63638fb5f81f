"""Secrets are never published, and the CDK path encrypts artifacts with the spec's KMS key.

The ``secure-redis`` stack of the session synth (tests/cdk/conftest.py) has a customer KMS
key, a Redis remote tier whose credentials are a Secrets Manager secret, and a local LoRA
adapter. cfn-lint, cdk-nag and the field-by-field comparison with the SDK's requests run on
it with every other stack (test_validators.py, test_render_equality.py).
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import shlex
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from lmikit.accept._accept import TARGETS, RenderOptions, render_target
from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.render._env import KV_REMOTE_CREDENTIALS_ENV
from lmikit.render._model_artifact import model_artifact
from lmikit.spec import DeploymentSpec
from lmikit.spec._credentials import url_credentials
from lmikit.spec._loader import load_spec
from lmikit_cdk.endpoint import LmiEndpoint
from lmikit_cdk.image import container_code_reasons
from tests.cdk.conftest import KMS_KEY, KV_SECRET, Synth

NAME = "secure-redis"
SENTINEL = "Sentinel0Redis0Password"


def _statements(synth: Synth, sid_prefix: str = "") -> list[dict[str, Any]]:
    out = []
    for res in synth.resources("AWS::IAM::ManagedPolicy").values():
        out += [s for s in res["Properties"]["PolicyDocument"]["Statement"]
                if s.get("Sid", "").startswith(sid_prefix)]
    return out


def _join(value: Any) -> str:
    """A CloudFormation string as text: Ref/GetAtt become <Logical> / <Logical.Attr>."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_join(p) for p in parts)
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if "Fn::Sub" in value:
        return str(value["Fn::Sub"])
    raise AssertionError(f"unexpected intrinsic {value}")


def _copies(synth: Synth) -> dict[str, dict[str, Any]]:
    """Destination prefix -> the copy step's properties."""
    return {r["Properties"]["DestinationBucketKeyPrefix"]: r["Properties"]
            for r in synth.resources("Custom::CDKBucketDeployment").values()}


def _copy_id(synth: Synth, prefix: str) -> str:
    return next(k for k, r in synth.resources("Custom::CDKBucketDeployment").items()
                if r["Properties"]["DestinationBucketKeyPrefix"] == prefix)


# --- KMS on the CDK path ---------------------------------------------------------------------

def test_artifact_bucket_is_encrypted_with_the_spec_key(synths: dict[str, Synth]) -> None:
    bucket_id, bucket = synths[NAME].one("AWS::S3::Bucket")
    rule = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms",
                                                     "KMSMasterKeyID": KMS_KEY}
    assert bucket["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize(("component", "prefix"), [
    ("base", f"lmikit/{NAME}/model/"), ("adapter", f"lmikit/{NAME}/adapters/legal/")])
def test_components_read_a_sse_kms_copy_of_their_artifact(synths: dict[str, Synth],
                                                          component: str, prefix: str) -> None:
    synth = synths[NAME]
    endpoint = synth.stack.endpoint
    asset = (endpoint.model_artifact if component == "base"
             else endpoint.adapters["legal"].artifact)
    bucket_id, _ = synth.one("AWS::S3::Bucket")
    copy = _copies(synth)[prefix]
    assert copy["SourceObjectKeys"] == [f"{asset.sha256}.tar.gz"]
    assert copy["DestinationBucketName"] == {"Ref": bucket_id}
    assert copy["Extract"] is False and copy["Prune"] is False
    assert copy["SystemMetadata"] == {"sse": "aws:kms", "sse-kms-key-id": KMS_KEY}
    name = (endpoint.inference_component_name if component == "base"
            else endpoint.adapters["legal"].inference_component_name)
    (cid, ic), = [(k, r) for k, r in synth.resources("AWS::SageMaker::InferenceComponent").items()
                  if r["Properties"]["InferenceComponentName"] == name]
    url = _join(ic["Properties"]["Specification"]["Container"]["ArtifactUrl"])
    assert url == f"s3://<{bucket_id}>/{prefix}{asset.sha256}.tar.gz"
    assert _copy_id(synth, prefix) in ic["DependsOn"]  # the object exists before the component


def test_model_artifact_key_is_the_sha256_of_the_rendered_bytes(synths: dict[str, Synth]) -> None:
    import hashlib

    stack = synths[NAME].stack
    spec, endpoint = stack.spec, stack.endpoint
    data = model_artifact(spec, endpoint.plan, endpoint.base_dir, image="lmikit")
    assert data is not None and hashlib.sha256(data).hexdigest() == endpoint.model_artifact.sha256


def test_execution_role_reads_only_the_copies_and_can_decrypt(synths: dict[str, Synth]) -> None:
    synth = synths[NAME]
    role = synth.stack.endpoint.execution_role
    document = synth.stack.resolve(role.policy.document.to_json())
    reads = {s["Sid"]: _join(s["Resource"]) for s in document["Statement"]
             if s.get("Sid", "").startswith(("ReadModelArtifact", "ReadAdapter"))}
    bucket_id, _ = synth.one("AWS::S3::Bucket")
    endpoint = synth.stack.endpoint
    assert reads == {
        "ReadModelArtifact": f"arn:<AWS::Partition>:s3:::<{bucket_id}>/lmikit/{NAME}/model/"
                             f"{endpoint.model_artifact.sha256}.tar.gz",
        "ReadAdapterLegal": f"arn:<AWS::Partition>:s3:::<{bucket_id}>/lmikit/{NAME}/adapters/"
                            f"legal/{endpoint.adapters['legal'].artifact.sha256}.tar.gz"}
    (kms,) = [s for s in document["Statement"] if s.get("Sid") == "UseKmsKey"]
    assert "kms:Decrypt" in kms["Action"] and kms["Resource"] == KMS_KEY
    bootstrap_bucket = "-assets-"  # cdk-<qualifier>-assets-<account>-<region> (not ECR's)
    assert bootstrap_bucket not in json.dumps(document).replace("-container-assets-", "")


def test_copy_step_policy_names_exact_objects_and_the_key(synths: dict[str, Synth]) -> None:
    synth = synths[NAME]
    copy_policy = synth.stack.resolve(
        synth.stack.endpoint.artifact_store.policy.document.to_json())
    resources = [_join(r) for s in copy_policy["Statement"]
                 for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]
    assert not any("*" in r for r in resources)
    by_sid = {s["Sid"]: s for s in copy_policy["Statement"]}
    assert by_sid["EncryptWithKey"]["Resource"] == KMS_KEY
    assert by_sid["ListDestination"]["Condition"] == {
        "StringLike": {"s3:prefix": [f"lmikit/{NAME}/*"]}}
    assert set(by_sid) >= {"ReadModel", "WriteModel", "ReadAdapterLegal", "WriteAdapterLegal"}
    (function,) = synth.resources("AWS::Lambda::Function").values()
    assert "ManagedPolicyArns" not in json.dumps(synth.resources("AWS::IAM::Role"))
    assert function["Properties"]["Role"]["Fn::GetAtt"][0].startswith("LmikitArtifactCopyRole")


def test_without_a_key_components_read_the_asset_directly(synths: dict[str, Synth]) -> None:
    synth = synths["docqa-lora"]
    assert not synth.resources("Custom::CDKBucketDeployment")
    assert not synth.resources("AWS::S3::Bucket")


def test_alias_key_is_refused_for_the_copy() -> None:
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "t", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "observability": {"detailed_metrics": False},
        "security": {"kms_key_arn": "arn:aws:kms:us-east-1:111122223333:alias/lmikit"}})
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    with pytest.raises(RenderError, match="names an alias.*use the key's ARN"):
        LmiEndpoint(stack, "E", spec=spec, image_mode="stock")


# --- the remote tier's credentials --------------------------------------------------------

def test_secret_selects_lmikits_image_and_is_granted_exactly(synths: dict[str, Synth]) -> None:
    synth = synths[NAME]
    assert synth.stack.endpoint.image.is_custom
    assert any("remote_credentials_secret_arn" in r
               for r in container_code_reasons(synth.stack.spec))
    (grant,) = _statements(synth, "ReadKvRemoteCredentials")
    assert grant["Action"] == "secretsmanager:GetSecretValue" and grant["Resource"] == KV_SECRET


def _rendered_everything(spec_path: Path, synth: Synth) -> dict[str, str]:
    """Every text lmikit publishes for the spec: each render target for each image (a
    refusal's message where a target refuses), the CDK template, both artifacts' files."""
    spec = load_spec(spec_path)
    plan = plan_spec(spec, spec_path.parent)
    out: dict[str, str] = {}
    for image in ("stock", "lmikit"):
        for target in TARGETS:
            try:
                out[f"{target}/{image}"] = render_target(
                    target, spec, plan, RenderOptions(image=image), image_uri="img:1")
            except RenderError as exc:
                out[f"{target}/{image} (refused)"] = str(exc)
    out["template"] = synth.path.read_text()
    endpoint = synth.stack.endpoint
    for name, asset in (("model", endpoint.model_artifact),
                        ("adapter", endpoint.adapters["legal"].artifact)):
        path = Path(asset.staging.absolute_staged_path)
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                body = tar.extractfile(member)
                out[f"{name}:{member.name}"] = body.read().decode(errors="replace") if body else ""
    return out


def test_no_published_text_holds_a_credential(secure_spec_path: Path,
                                              synths: dict[str, Synth]) -> None:
    texts = _rendered_everything(secure_spec_path, synths[NAME])
    assert {"template", "env/lmikit", "sagemaker/lmikit", "model:serving.properties",
            "model:lmcache_config.yaml"} <= set(texts)
    assert "hyperpod/lmikit (refused)" in texts and "sagemaker/stock (refused)" in texts
    assert [k for k, t in texts.items() if url_credentials(t)] == []
    # The ARN is where it is needed: the container environment and the role's grant.
    for key in ("env/lmikit", "sagemaker/lmikit", "template"):
        assert KV_SECRET in texts[key], key
    assert KV_SECRET not in texts["env/stock"] and KV_SECRET not in texts["lmcache/lmikit"]


def test_rendered_deployment_starts_with_the_secret_only_in_lmcaches_env(
        secure_spec_path: Path, synths: dict[str, Synth], tmp_path: Path, caplog) -> None:
    """End to end: the template's container environment and the model artifact, started with
    a Secrets Manager that holds the sentinel. It reaches LMCACHE_REMOTE_URL and nothing else:
    not a file, not a log line, not the published texts."""
    from tests.container import conftest as container  # puts container/ on sys.path
    from tests.container.test_start import FakeSecrets

    start = importlib.import_module("lmikit_runtime.start")
    synth = synths[NAME]
    (ic,) = [r for r in synth.resources("AWS::SageMaker::InferenceComponent").values()
             if "Container" in r["Properties"]["Specification"]
             and "Environment" in r["Properties"]["Specification"]["Container"]]
    env = ic["Properties"]["Specification"]["Container"]["Environment"]
    assert env[KV_REMOTE_CREDENTIALS_ENV] == KV_SECRET
    model_dir = tmp_path / "model"
    with tarfile.open(synth.stack.endpoint.model_artifact.staging.absolute_staged_path) as tar:
        # extraction filters came in 3.10.12 / 3.11.4; the project supports every 3.10+
        if hasattr(tarfile, "data_filter"):
            tar.extractall(model_dir, filter="data")
        else:  # our own artifact, built just above
            tar.extractall(model_dir)
    env = {**env, "LMIKIT_MODEL_DIR": str(model_dir), "LMIKIT_RUNTIME_DIR": str(tmp_path / "rt")}
    env.pop("LMIKIT_METRICS_PATH", None)
    env.pop("LMIKIT_EMF", None)
    client = FakeSecrets({"SecretString": json.dumps({"username": "app",
                                                      "password": SENTINEL})})
    host = start.Host(container.make_root(tmp_path, mem_total_gib=128, mem_available_gib=120,
                                          cgroup=("v2", 64 * 1024**3, 0), gpus=1), env={})
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG):
        assert start.main(env, stdout=out, host=host, secrets_client=client) == 0
    assert client.calls == [KV_SECRET]
    exports = {line.split("=", 1)[0].removeprefix("export "): shlex.split(
        line.split("=", 1)[1])[0] for line in out.getvalue().splitlines()}
    assert [k for k, v in exports.items() if SENTINEL in v] == ["LMCACHE_REMOTE_URL"]
    assert exports["LMCACHE_REMOTE_URL"] == (
        f"rediss://app:{SENTINEL}@cache.internal:6380/0")
    assert SENTINEL not in caplog.text
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not any(SENTINEL in p.read_text(errors="replace") for p in written)
    texts = _rendered_everything(secure_spec_path, synth)
    assert not any(SENTINEL in t for t in texts.values())
