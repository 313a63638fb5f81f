"""The execution role's policy documents: IAM grammar, real action names, partitions, scope.

External references: the IAM policy grammar checks of lmikit.testing.iam_policy_problems
(IAM User Guide grammar and quotas), action names from botocore's service models
(lmikit.testing.unknown_actions), partitions from botocore's partition data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.deploy import execution_role_policy
from lmikit.errors import RenderError
from lmikit.image import lmi_image_uri
from lmikit.loader import load_spec
from lmikit.render.iam import (
    TRUST_POLICY,
    ecr_repository_arn,
    execution_policy_document,
    partition_of,
)
from lmikit.spec import DeploymentSpec
from lmikit.testing import iam_policy_problems, unknown_actions

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/models/*.yaml")])
ACCOUNT = "123456789012"
KEY = "arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET = "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:hf-AbCdEf"
# AWS grants these only on Resource "*" (no resource-level permissions).
STAR_ONLY_ACTIONS = {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData",
                     "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
                     "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs"}


def _with_region(spec: DeploymentSpec, region: str) -> DeploymentSpec:
    """The spec moved to ``region``, its ARNs (KMS key, secret, training plan) moved with it."""
    data = spec.model_dump(mode="json", exclude_none=True)
    data["region"] = region
    for section, key in (("security", "kms_key_arn"), ("security", "hf_token_secret_arn"),
                         ("instance", "capacity_reservation_arn")):
        if key in data[section]:
            _, _, service, _, rest = data[section][key].split(":", 4)
            data[section][key] = f"arn:{partition_of(region)}:{service}:{region}:{rest}"
    return DeploymentSpec.model_validate(data)


def _policy(spec: DeploymentSpec) -> dict[str, Any]:
    return execution_role_policy(spec, "lmikit-artifacts", account=ACCOUNT)


def _by_sid(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in doc["Statement"]}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("region", [None, "us-gov-west-1", "cn-north-1"])
def test_policy_is_well_formed_in_every_partition(path: Path, region: str | None) -> None:
    spec = load_spec(path)
    spec = _with_region(spec, region) if region else spec
    doc = _policy(spec)
    assert iam_policy_problems(doc, partition=partition_of(spec.region)) == []
    assert unknown_actions(doc) == []


def test_trust_policy_is_well_formed_and_trusts_sagemaker_only() -> None:
    assert iam_policy_problems(TRUST_POLICY, identity=False) == []
    assert unknown_actions(TRUST_POLICY) == []
    (statement,) = TRUST_POLICY["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}


def test_grammar_check_reports_a_wrong_partition() -> None:
    """The partition check above can fail: an aws ARN in a GovCloud policy is reported."""
    doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                   "Resource": "arn:aws:s3:::b/*"}]}
    assert iam_policy_problems(doc, partition="aws-us-gov") == [
        "Statement[0].Resource: 'arn:aws:s3:::b/*' is not in partition aws-us-gov"]


def test_partition_comes_from_the_region() -> None:
    assert [partition_of(r) for r in ("eu-west-1", "us-gov-east-1", "cn-northwest-1")] == [
        "aws", "aws-us-gov", "aws-cn"]


def test_govcloud_policy_names_govcloud_arns_only() -> None:
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "gov", "region": "us-gov-west-1",
        "model": {"id": "s3://weights-bucket/qwen7b/"},
        "instance": {"type": "ml.g6e.2xlarge"},
        "security": {"kms_key_arn": KEY, "hf_token_secret_arn": SECRET,
                     "vpc": {"subnet_ids": ["subnet-0a1b2c3d4e5f60718"],
                             "security_group_ids": ["sg-0123456789abcdef0"]}}})
    doc = _policy(spec)
    resources = [r for s in doc["Statement"] for r in s["Resource"] if r != "*"]
    assert resources and all(r.startswith("arn:aws-us-gov:") for r in resources)
    assert _by_sid(doc)["PullImage"]["Resource"] == [ecr_repository_arn(
        lmi_image_uri("us-gov-west-1", spec.engine.lmi_version), "aws-us-gov")]
    assert _by_sid(doc)["PullImage"]["Resource"][0].startswith(
        "arn:aws-us-gov:ecr:us-gov-west-1:")


def test_china_image_repository_arn() -> None:
    uri = lmi_image_uri("cn-north-1", "0.38.0")
    assert ecr_repository_arn(uri, partition_of("cn-north-1")).startswith(
        "arn:aws-cn:ecr:cn-north-1:")


def test_wildcard_resources_only_where_aws_requires_them() -> None:
    bad = []
    for path in SPECS:
        doc = _policy(load_spec(path))
        for st in doc["Statement"]:
            bad += [a for a in st["Action"] if "*" in a]
            if "*" in st["Resource"]:
                bad += [f"{a} on *" for a in st["Action"] if a not in STAR_ONLY_ACTIONS]
    assert bad == []


def test_logs_are_scoped_to_the_region_and_the_deployment_log_groups() -> None:
    spec = load_spec(ROOT / "examples" / "docqa-qwen7b.yaml")
    assert _by_sid(_policy(spec))["Logs"]["Resource"] == [
        "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/docqa-qwen7b:*",
        "arn:aws:logs:us-east-1:123456789012:log-group:"
        "/aws/sagemaker/InferenceComponents/docqa-qwen7b-*:*"]


def test_metrics_are_limited_by_namespace() -> None:
    spec = load_spec(ROOT / "examples" / "docqa-qwen7b.yaml")
    assert _by_sid(_policy(spec))["Metrics"]["Condition"] == {"StringEquals": {
        "cloudwatch:namespace": ["/aws/sagemaker/Endpoints",
                                 "/aws/sagemaker/InferenceComponents"]}}


def test_artifacts_are_read_under_the_deployment_prefix_only() -> None:
    spec = load_spec(ROOT / "examples" / "docqa-qwen7b.yaml")
    assert _by_sid(_policy(spec))["ReadModelArtifact"] == {
        "Sid": "ReadModelArtifact", "Effect": "Allow", "Action": ["s3:GetObject"],
        "Resource": ["arn:aws:s3:::lmikit-artifacts/lmikit/docqa-qwen7b/model/*"]}


def test_regulated_spec_gets_vpc_kms_and_weights_prefix_but_no_artifact() -> None:
    doc = _policy(load_spec(ROOT / "examples" / "regulated-llama8b-inmemory.yaml"))
    sids = _by_sid(doc)
    assert "ReadModelArtifact" not in sids  # SageMaker copies the S3 weights itself
    assert sids["KmsGrantForVolume"]["Condition"] == {
        "Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert sids["UseKmsKey"]["Action"] == ["kms:Decrypt", "kms:DescribeKey",
                                           "kms:GenerateDataKey"]
    assert sids["VpcNetworkInterfaces"]["Resource"] == [
        "arn:aws:ec2:us-east-1:123456789012:network-interface/*",
        "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0a1b2c3d4e5f60718",
        "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0f1e2d3c4b5a69788",
        "arn:aws:ec2:us-east-1:123456789012:security-group/sg-0123456789abcdef0"]
    assert sids["ReadModelWeightsList"]["Condition"] == {"StringLike": {"s3:prefix": [
        "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct/*"]}}
    assert sids["ReadModelWeights"]["Resource"] == [
        "arn:aws:s3:::example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/*"]


def test_without_key_vpc_or_secret_there_are_no_such_statements() -> None:
    sids = set(_by_sid(_policy(load_spec(ROOT / "examples" / "docqa-qwen7b.yaml"))))
    assert sids == {"Logs", "Metrics", "PullImage", "EcrAuthToken", "ReadModelArtifact"}


def test_hf_token_secret_is_readable_when_set() -> None:
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "gated", "region": "us-gov-west-1",
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
        "instance": {"type": "ml.g6e.2xlarge"}, "security": {"hf_token_secret_arn": SECRET}})
    assert _by_sid(_policy(spec))["ReadHfToken"] == {
        "Sid": "ReadHfToken", "Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"],
        "Resource": [SECRET]}


@pytest.mark.parametrize("region", ["us-east-1", "cn-north-1"])
def test_s3_remote_tier_bucket_is_read_and_written_by_the_role(region: str) -> None:
    """LMCache's S3 connector signs with the default credential chain (the execution role on
    SageMaker; s3_connector.py) and HEADs, GETs and PUTs objects at the bucket's root."""
    host = f"kv-cache.s3.{region}.amazonaws.com" + (".cn" if region.startswith("cn-") else "")
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "s3tier", "region": region,
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "kv_cache": {"mode": "remote", "remote_url": f"s3://{host}"}})
    doc = _policy(spec)
    assert iam_policy_problems(doc, partition=partition_of(region)) == []
    assert unknown_actions(doc) == []
    arn = f"arn:{partition_of(region)}:s3:::kv-cache"
    sids = _by_sid(doc)
    assert sids["KvRemoteBucketList"]["Action"] == ["s3:ListBucket"]
    assert sids["KvRemoteBucketList"]["Resource"] == [arn]
    assert sids["KvRemoteBucket"]["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert sids["KvRemoteBucket"]["Resource"] == [f"{arn}/*"]


def test_adapters_read_their_own_artifacts(tmp_path: Path) -> None:
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "lora", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "adapters": [{"name": "legal-v2", "source": "adapters/legal"},
                     {"name": "med", "source": "s3://adapters-bucket/med/adapter.tar.gz"}]})
    sids = _by_sid(_policy(spec))
    assert sids["ReadAdapterLegalV2"]["Resource"] == [
        "arn:aws:s3:::lmikit-artifacts/lmikit/lora/adapters/legal-v2/*"]
    assert sids["ReadAdapterMed"]["Resource"] == [
        "arn:aws:s3:::adapters-bucket/med/adapter.tar.gz"]


def _lora_spec(**engine: Any) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "lora", "region": "cn-north-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "engine": engine})


@pytest.mark.parametrize("engine", [{"lora": {"enabled": True}}, {}], ids=["lora", "no-lora"])
def test_an_endpoint_serving_lora_reads_every_adapter_of_the_deployment(
        engine: dict[str, Any]) -> None:
    """`lmikit adapters register` puts an adapter at lmikit/<name>/adapters/<adapter>/
    <sha256>.tar.gz in the deployment's bucket, after the role was made: the role reads that
    prefix (and only there), when the base serves LoRA at all."""
    spec = _lora_spec(**engine)
    sids = _by_sid(execution_role_policy(spec, "lmikit-artifacts", account=ACCOUNT))
    if not engine:
        assert "ReadRegisteredAdapters" not in sids
        return
    assert sids["ReadRegisteredAdapters"] == {
        "Sid": "ReadRegisteredAdapters", "Effect": "Allow", "Action": ["s3:GetObject"],
        "Resource": ["arn:aws-cn:s3:::lmikit-artifacts/lmikit/lora/adapters/*"]}


def test_an_endpoint_serving_lora_needs_the_registry_bucket() -> None:
    with pytest.raises(RenderError, match="no bucket for the adapters `lmikit adapters "
                                          "register` adds"):
        execution_policy_document(_lora_spec(lora={"enabled": True}), partition="aws-cn",
                                  account=ACCOUNT, artifacts={},
                                  image_repository_arn="arn:aws-cn:ecr:cn-north-1:1:"
                                                       "repository/r")


def test_local_adapter_without_a_location_is_a_render_error() -> None:
    spec = DeploymentSpec.model_validate({
        "api_version": "v1", "name": "lora", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "adapters": [{"name": "legal", "source": "adapters/legal"}]})
    with pytest.raises(RenderError, match="no artifact location for adapter 'legal'"):
        execution_policy_document(spec, partition="aws", account=ACCOUNT,
                                  image_repository_arn="arn:aws:ecr:us-east-1:1:repository/r",
                                  artifacts={})


def test_image_outside_ecr_is_a_render_error() -> None:
    with pytest.raises(RenderError, match=r"'ghcr.io/x/lmi:1' is not an Amazon ECR image URI"):
        ecr_repository_arn("ghcr.io/x/lmi:1", "aws")
