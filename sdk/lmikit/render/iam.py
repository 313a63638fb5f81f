"""The deployment's SageMaker execution role as data: trust policy, descriptions, tags and the
least-privilege permissions policy document.

Rendered once, used twice: ``lmikit deploy --create-role``
(:func:`lmikit.deploy.ensure_execution_role`) creates the role and a customer-managed policy
with these values, and :class:`lmikit_cdk.role.ExecutionRole` builds the stack's
``AWS::IAM::Role`` and ``AWS::IAM::ManagedPolicy`` from the same functions, passing
CloudFormation's partition and account (tokens) and its asset locations.

Every ARN is built from ``partition`` (``aws``, ``aws-us-gov``, ``aws-cn``, ...: see
:func:`partition_of`), never a literal ``aws``. A wildcard resource appears only where the
API has no resource-level permission (``ecr:GetAuthorizationToken``,
``cloudwatch:PutMetricData`` (limited by namespace), EC2 ``Describe*``) or where names are
made at run time (log streams, network interfaces, objects under a weights prefix, adapters
registered after the deploy); :data:`WILDCARD_REASONS` says why, and the CDK stack quotes it
to cdk-nag.

>>> from lmikit.spec import DeploymentSpec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-gov-west-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> doc = execution_policy_document(spec, partition=partition_of(spec.region),
...     account="123456789012", image_repository_arn="arn:aws-us-gov:ecr:us-gov-west-1:"
...     "442386744353:repository/djl-inference", artifacts={"model": ("b", "k.tar.gz")})
>>> [s["Sid"] for s in doc["Statement"]]
['Logs', 'Metrics', 'PullImage', 'EcrAuthToken', 'ReadModelArtifact']
>>> doc["Statement"][0]["Resource"][0]
'arn:aws-us-gov:logs:us-gov-west-1:123456789012:log-group:/aws/sagemaker/Endpoints/docqa:*'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from lmikit.errors import RenderError
from lmikit.names import adapters_prefix, deployment_tags
from lmikit.spec import DeploymentSpec, s3_remote_bucket_region

POLICY_VERSION = "2012-10-17"
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
TRUST_POLICY: dict[str, Any] = {"Version": POLICY_VERSION, "Statement": [{
    "Action": "sts:AssumeRole", "Effect": "Allow",
    "Principal": {"Service": SAGEMAKER_PRINCIPAL}}]}
# SageMaker writes endpoint logs to /aws/sagemaker/Endpoints/<endpoint> and inference
# component logs to /aws/sagemaker/InferenceComponents/<component>; lmikit's components are
# <name>-base and <name>-<adapter>.
LOG_GROUP_PATTERNS = ("/aws/sagemaker/Endpoints/{name}", "/aws/sagemaker/InferenceComponents/"
                      "{name}-*")
LOG_ACTIONS = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
               "logs:PutLogEvents")
METRIC_NAMESPACES = ("/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents")
ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer")
KMS_USE_ACTIONS = ("kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey")
VPC_DESCRIBE_ACTIONS = ("ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs")
VPC_ENI_ACTIONS = ("ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                   "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission")

# Why each wildcard exists (the CDK stack's cdk-nag acknowledgements quote these).
WILDCARD_REASONS = {
    "ecr:GetAuthorizationToken": "ecr:GetAuthorizationToken has no resource-level permission; "
    "AWS requires Resource '*' (image layers are pulled from this image's repository only)",
    "cloudwatch:PutMetricData": "cloudwatch:PutMetricData has no resource-level permission; "
    "AWS requires Resource '*', so the statement is limited by cloudwatch:namespace to the "
    "SageMaker endpoint and inference-component namespaces",
    "logs": "SageMaker creates one log stream per instance and container at run time; the "
    "statement is limited to this deployment's log groups, streams are named by SageMaker",
    "ec2:Describe": "EC2 Describe* calls have no resource-level permission; AWS requires "
    "Resource '*' for the VPC lookups SageMaker makes when it attaches the endpoint to the VPC",
    "ec2:NetworkInterface": "SageMaker creates the endpoint's network interfaces at run time, "
    "so their IDs are unknown; the statement is limited to this deployment's subnets and "
    "security groups and to network interfaces in this account and region",
    "s3:weights": "the model weights are many objects under the model.id S3 prefix; the "
    "statement is limited to that prefix (read only)",
    "s3:artifacts": "lmikit deploy stores each artifact under a content-addressed key below "
    "the deployment's own prefix; the statement is limited to that prefix (read only)",
    "s3:adapters": "lmikit adapters register stores each adapter it adds to this endpoint "
    "under a content-addressed key below the deployment's adapters/ prefix, named when it is "
    "registered; the statement is limited to that prefix of that bucket (read only)",
    "s3:kv-remote": "LMCache's S3 connector stores each KV chunk as an object named by its "
    "hash at the root of the kv_cache.remote_url bucket; the statement is limited to that "
    "bucket",
}

_ECR_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com"
                      r"(?:\.cn)?/(?P<repo>[a-z0-9._/-]+)(?::[\w.-]+|@sha256:[0-9a-f]{64})$")


@functools.lru_cache(maxsize=64)
def partition_of(region: str) -> str:
    """The ARN partition of ``region``, from botocore's bundled partition data.

    >>> partition_of("us-east-1"), partition_of("us-gov-west-1"), partition_of("cn-north-1")
    ('aws', 'aws-us-gov', 'aws-cn')
    """
    import botocore.session

    return str(botocore.session.get_session().get_partition_for_region(region))


def ecr_repository_arn(image_uri: str, partition: str) -> str:
    """The ECR repository ARN of an image URI (the registry's account and region).

    >>> ecr_repository_arn("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/"
    ...                    "djl-inference:0.38.0-lmi29.0.0-cu130", "aws-cn")
    'arn:aws-cn:ecr:cn-north-1:727897471807:repository/djl-inference'
    """
    match = _ECR_URI.match(image_uri)
    if not match:
        raise RenderError(f"image {image_uri!r} is not an Amazon ECR image URI "
                          "(<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag>); "
                          "SageMaker pulls the serving image from ECR")
    return (f"arn:{partition}:ecr:{match['region']}:{match['account']}:"
            f"repository/{match['repo']}")


def s3_object_arn(partition: str, bucket: str, key: str) -> str:
    return f"arn:{partition}:s3:::{bucket}/{key}"


def role_description(spec: DeploymentSpec) -> str:
    return f"SageMaker execution role of lmikit deployment {spec.name}"


def policy_description(spec: DeploymentSpec) -> str:
    return f"Least-privilege permissions of lmikit deployment {spec.name}"


def role_tags(spec: DeploymentSpec) -> list[dict[str, str]]:
    """The role's tags: the deployment tag (what marks the role as lmikit's) and spec.tags."""
    return deployment_tags(spec.name, spec.tags)


def _statement(sid: str, actions: tuple[str, ...] | list[str], resources: list[str],
               condition: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": list(actions),
                           "Resource": resources}
    if condition:
        out["Condition"] = condition
    return out


# The Sid of the read on every adapter of the deployment; adapter_sid never makes it (its
# names start with "ReadAdapter").
REGISTERED_ADAPTERS_SID = "ReadRegisteredAdapters"


def adapter_sid(adapter: str) -> str:
    """``ReadAdapter<Name>``: IAM Sids take letters and digits only.

    >>> adapter_sid("legal-v2")
    'ReadAdapterLegalV2'
    """
    return "ReadAdapter" + "".join(part.capitalize() for part in adapter.split("-"))


def execution_policy_document(spec: DeploymentSpec, *, partition: str, account: str,
                              image_repository_arn: str,
                              artifacts: Mapping[str, tuple[str, str]],
                              adapter_bucket: str | None = None) -> dict[str, Any]:
    """The permissions policy of the execution role.

    :param partition: the ARN partition (``partition_of(spec.region)``; a token under CDK).
    :param account: the account id (a token under CDK).
    :param image_repository_arn: the ECR repository of the serving image.
    :param artifacts: ``"model"`` and the name of every adapter whose source is not an
        ``s3://`` URI -> ``(bucket, key)`` of its artifact; the key may end in ``*`` (a
        prefix). ``s3://`` adapter sources are read where they are.
    :param adapter_bucket: the bucket ``lmikit adapters register`` uploads this endpoint's
        adapters to; needed when the endpoint serves LoRA, whose role then reads the
        deployment's whole adapters prefix there (``lmikit/<name>/adapters/*``).
    """
    region = spec.region
    logs = [f"arn:{partition}:logs:{region}:{account}:log-group:"
            f"{pattern.format(name=spec.name)}:*" for pattern in LOG_GROUP_PATTERNS]
    statements = [
        _statement("Logs", LOG_ACTIONS, logs),
        _statement("Metrics", ["cloudwatch:PutMetricData"], ["*"], {
            "StringEquals": {"cloudwatch:namespace": list(METRIC_NAMESPACES)}}),
        _statement("PullImage", ECR_PULL_ACTIONS, [image_repository_arn]),
        _statement("EcrAuthToken", ["ecr:GetAuthorizationToken"], ["*"]),
    ]
    if "model" in artifacts:
        statements.append(_statement("ReadModelArtifact", ["s3:GetObject"],
                                     [s3_object_arn(partition, *artifacts["model"])]))
    for adapter in spec.adapters:
        if adapter.source.startswith("s3://"):
            bucket, _, key = adapter.source.removeprefix("s3://").partition("/")
        elif adapter.name in artifacts:
            bucket, key = artifacts[adapter.name]
        else:
            raise RenderError(f"no artifact location for adapter {adapter.name!r}: the "
                              "execution role must be able to read it")
        statements.append(_statement(adapter_sid(adapter.name), ["s3:GetObject"],
                                     [s3_object_arn(partition, bucket, key)]))
    if spec.lora_enabled:  # adapters registered later with `lmikit adapters` are read too
        if adapter_bucket is None:
            raise RenderError("no bucket for the adapters `lmikit adapters register` adds: "
                              "the execution role of an endpoint that serves LoRA must be "
                              "able to read them")
        statements.append(_statement(REGISTERED_ADAPTERS_SID, ["s3:GetObject"], [
            s3_object_arn(partition, adapter_bucket, f"{adapters_prefix(spec.name)}*")]))
    sec = spec.security
    if sec.kms_key_arn:
        statements.append(_statement("UseKmsKey", KMS_USE_ACTIONS, [sec.kms_key_arn]))
        # SageMaker creates grants on the key for the volume and the copied weights.
        statements.append(_statement("KmsGrantForVolume", ["kms:CreateGrant"],
                                     [sec.kms_key_arn],
                                     {"Bool": {"kms:GrantIsForAWSResource": "true"}}))
    if sec.hf_token_secret_arn:
        statements.append(_statement("ReadHfToken", ["secretsmanager:GetSecretValue"],
                                     [sec.hf_token_secret_arn]))
    if spec.kv_cache.remote_credentials_secret_arn:  # read by lmikit's start step
        statements.append(_statement("ReadKvRemoteCredentials", ["secretsmanager:GetSecretValue"],
                                     [spec.kv_cache.remote_credentials_secret_arn]))
    if sec.vpc:
        ec2 = f"arn:{partition}:ec2:{region}:{account}"
        statements.append(_statement("VpcDescribe", VPC_DESCRIBE_ACTIONS, ["*"]))
        statements.append(_statement("VpcNetworkInterfaces", VPC_ENI_ACTIONS, [
            f"{ec2}:network-interface/*",
            *(f"{ec2}:subnet/{s}" for s in sec.vpc.subnet_ids),
            *(f"{ec2}:security-group/{g}" for g in sec.vpc.security_group_ids)]))
    s3_remote = s3_remote_bucket_region(spec.kv_cache.remote_url or "")
    if s3_remote:  # LMCache's S3 connector signs with the role's credentials
        bucket_arn = f"arn:{partition}:s3:::{s3_remote[0]}"
        # ListBucket makes a missing chunk a 404 rather than a 403 to the connector's HEAD
        statements.append(_statement("KvRemoteBucketList", ["s3:ListBucket"], [bucket_arn]))
        statements.append(_statement("KvRemoteBucket", ["s3:GetObject", "s3:PutObject"],
                                     [f"{bucket_arn}/*"]))
    draft = spec.engine.speculative.draft_model if spec.engine.speculative else ""
    for sid, uri in (("ReadModelWeights", spec.model.id), ("ReadDraftWeights", draft)):
        if uri.startswith("s3://"):
            statements += _s3_prefix_read(sid, uri, partition)
    return {"Version": POLICY_VERSION, "Statement": statements}


def _s3_prefix_read(sid: str, uri: str, partition: str) -> list[dict[str, Any]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/")
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    condition = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}} if prefix else None
    return [_statement(f"{sid}List", ["s3:ListBucket"], [bucket_arn], condition),
            _statement(sid, ["s3:GetObject"], [f"{bucket_arn}/{prefix}/*" if prefix
                                               else f"{bucket_arn}/*"])]


def wildcard_reason(statement: Mapping[str, Any]) -> str | None:
    """The :data:`WILDCARD_REASONS` entry that explains a statement's wildcard resource."""
    actions = statement.get("Action", [])
    actions = actions if isinstance(actions, list) else [actions]
    sid = str(statement.get("Sid", ""))
    if "ecr:GetAuthorizationToken" in actions:
        return WILDCARD_REASONS["ecr:GetAuthorizationToken"]
    if "cloudwatch:PutMetricData" in actions:
        return WILDCARD_REASONS["cloudwatch:PutMetricData"]
    by_sid = {"Logs": "logs", "VpcDescribe": "ec2:Describe",
              "VpcNetworkInterfaces": "ec2:NetworkInterface"}
    if sid in by_sid:
        return WILDCARD_REASONS[by_sid[sid]]
    if sid.startswith(("ReadModelWeights", "ReadDraftWeights")):
        return WILDCARD_REASONS["s3:weights"]
    if sid == REGISTERED_ADAPTERS_SID:
        return WILDCARD_REASONS["s3:adapters"]
    if sid == "ReadModelArtifact" or sid.startswith("ReadAdapter"):
        return WILDCARD_REASONS["s3:artifacts"]
    if sid == "KvRemoteBucket":
        return WILDCARD_REASONS["s3:kv-remote"]
    return None
