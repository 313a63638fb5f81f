"""Artifacts encrypted with the spec's KMS key, as the SDK deployer stores them.

The SDK deployer uploads each artifact with ``ServerSideEncryption=aws:kms`` and
``SSEKMSKeyId=security.kms_key_arn`` to ``lmikit/<name>/model/<sha256>.tar.gz`` (adapters:
``lmikit/<name>/adapters/<adapter>/<sha256>.tar.gz``). CDK file assets land in the
bootstrap bucket, encrypted with whatever key the bootstrap chose, and no synthesizer
setting encrypts one asset with another key. So with a key in the spec,
:class:`KmsArtifactStore` adds a deploy-time copy step per artifact (aws-s3-deployment's
``BucketDeployment``: the asset copied unchanged, ``extract=False``) into an artifact bucket,
SSE-KMS under that key at the SDK's keys; the components read the copy, and the execution
role may read only the copy (and decrypt with the key).

The copy runs in BucketDeployment's Lambda function, one per stack. Its role is lmikit's,
passed without policy updates so that CDK's broad grants (``s3:GetObject*``, ``s3:List*``,
``s3:DeleteObject*``, ``kms:ReEncrypt*`` on whole buckets) are dropped, and a managed policy
grants exactly: read each source object, write each destination object, list the
deployment's prefix, ``kms:GenerateDataKey`` and ``kms:Decrypt`` (multipart uploads) on the
key, and write its own log group.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from lmikit.errors import RenderError
from lmikit_cdk import nag
from lmikit_cdk.artifacts import PublishedArtifact, TarballAsset

# The copy goes through the function's /tmp: Lambda's ephemeral storage is at most 10 GiB.
# Memory and storage also name BucketDeployment's singleton function (with the VPC), so an
# uncommon memory size keeps other BucketDeployments of the stack off lmikit's function.
COPY_EPHEMERAL_MIB = 10_240
COPY_MEMORY_MIB = 1_536
COPY_MAX_BYTES = (COPY_EPHEMERAL_MIB - 512) * 2**20
COPY_ROLE_ID = "LmikitArtifactCopy"  # stack-level: the singleton function's role and logs
_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/.+$")


class _CopyFunctionAccess(Construct):
    """The role and log group of the stack's copy function (one per stack, shared)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="lmikit: copies deployment artifacts into the "
                             "KMS-encrypted artifact bucket")
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR,
                                       removal_policy=cdk.RemovalPolicy.DESTROY)
        # What the copy function is given: the same role, imported without policy updates,
        # so CDK's own grants are dropped (and no redundant DependsOn on the role is added).
        self.function_role = iam.Role.from_role_arn(self, "FunctionRole", self.role.role_arn,
                                                    mutable=False)
        self.policy = iam.ManagedPolicy(
            self, "Policy", roles=[self.role],
            description="lmikit artifact copy: its own log group",
            statements=[iam.PolicyStatement(
                sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn])])
        nag.acknowledge(
            self.log_group, "HIPAA.Security-CloudWatchLogGroupEncrypted",
            "the copy function logs only S3 object keys and the AWS CLI's progress, never "
            "artifact contents; encrypting it with the spec's key would need that key's policy "
            "to admit the CloudWatch Logs service, which lmikit does not control")

    @classmethod
    def of(cls, scope: Construct) -> _CopyFunctionAccess:
        stack = cdk.Stack.of(scope)
        found = stack.node.try_find_child(COPY_ROLE_ID)
        if isinstance(found, cls):
            return found
        return cls(stack, COPY_ROLE_ID)


class KmsArtifactStore(Construct):
    """An artifact bucket encrypted with the spec's KMS key, and a copy step per artifact.

    The bucket is created (SSE-KMS with the key and an S3 Bucket Key, TLS only, no public
    access, versioned, retained when the stack is deleted) unless ``bucket`` is given. Each
    :meth:`publish` copies one asset unchanged with ``x-amz-server-side-encryption: aws:kms``
    and the key id, never pruning what earlier deployments wrote (a rollback may need it).

    :param key_arn: ``security.kms_key_arn``; a key ARN (IAM policies grant kms:Decrypt and
        kms:GenerateDataKey on key ARNs, not on aliases).
    :param prefix: the deployment's key prefix, ``lmikit/<name>``.
    :param bucket: an existing bucket to copy into (its own logging and replication apply).
    """

    def __init__(self, scope: Construct, construct_id: str, *, key_arn: str, prefix: str,
                 bucket: s3.IBucket | None = None) -> None:
        super().__init__(scope, construct_id)
        if not _KEY_ARN.match(key_arn):
            raise RenderError(f"security.kms_key_arn {key_arn!r} names an alias; the artifact "
                              "copy needs kms:GenerateDataKey and kms:Decrypt, which IAM grants "
                              "on key ARNs only: use the key's ARN "
                              "(arn:<partition>:kms:<region>:<account>:key/<id>)")
        self.key_arn = key_arn
        self.prefix = prefix.strip("/")
        self.key = kms.Key.from_key_arn(self, "Key", key_arn)
        self.created_bucket: s3.Bucket | None = None
        if bucket is None:
            self.created_bucket = s3.Bucket(
                self, "Bucket", encryption=s3.BucketEncryption.KMS, encryption_key=self.key,
                bucket_key_enabled=True, enforce_ssl=True, versioned=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                removal_policy=cdk.RemovalPolicy.RETAIN)
            _acknowledge_bucket(self.created_bucket)
            bucket = self.created_bucket
        self.bucket: s3.IBucket = bucket
        self.access = _CopyFunctionAccess.of(self)
        self.policy = iam.ManagedPolicy(
            self, "CopyPolicy", roles=[self.access.role],
            description=f"lmikit artifact copy into {self.prefix}/ with the spec's KMS key",
            statements=[
                iam.PolicyStatement(sid="ListDestination", actions=["s3:ListBucket"],
                                    resources=[self.bucket.bucket_arn],
                                    conditions={"StringLike": {"s3:prefix": [
                                        f"{self.prefix}/*"]}}),
                iam.PolicyStatement(sid="EncryptWithKey",
                                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                    resources=[key_arn]),
            ])
        self.copies: list[s3deploy.BucketDeployment] = []

    def publish(self, construct_id: str, asset: TarballAsset, subdir: str,
                size: int) -> PublishedArtifact:
        """Copy ``asset`` (``size`` bytes) to ``<prefix>/<subdir>/<sha256>.tar.gz``."""
        dest_prefix = f"{self.prefix}/{subdir.strip('/')}/"
        # extract=False keeps the source key's basename: <sha256>.tar.gz.
        key = dest_prefix + asset.object_key.rsplit("/", 1)[-1]
        if size > COPY_MAX_BYTES:
            raise RenderError(
                f"artifact {key} is {size / 2**30:.1f} GiB; the KMS copy step handles at most "
                f"{COPY_MAX_BYTES / 2**30:.1f} GiB (Lambda's ephemeral storage). Upload it "
                "with SSE-KMS yourself and name its s3:// URI as the adapter's source")
        source = s3.Bucket.from_bucket_name(self, f"{construct_id}Source", asset.bucket_name)
        self.policy.add_statements(
            iam.PolicyStatement(sid=f"Read{construct_id}", actions=["s3:GetObject"],
                                resources=[source.arn_for_objects(asset.object_key)]),
            iam.PolicyStatement(sid=f"Write{construct_id}", actions=["s3:PutObject"],
                                resources=[self.bucket.arn_for_objects(key)]))
        copy = s3deploy.BucketDeployment(
            self, construct_id, sources=[s3deploy.Source.bucket(source, asset.object_key)],
            destination_bucket=self.bucket, destination_key_prefix=dest_prefix,
            extract=False, prune=False, retain_on_delete=True,
            server_side_encryption=s3deploy.ServerSideEncryption.AWS_KMS,
            server_side_encryption_aws_kms_key_id=self.key_arn,
            role=self.access.function_role,
            log_group=self.access.log_group,
            memory_limit=COPY_MEMORY_MIB,
            ephemeral_storage_size=cdk.Size.mebibytes(COPY_EPHEMERAL_MIB))
        # The function may copy only once its policy exists.
        copy.node.add_dependency(self.policy)
        copy.node.add_dependency(self.access.policy)
        self.copies.append(copy)
        return PublishedArtifact(self.bucket.bucket_name, key,
                                 f"s3://{self.bucket.bucket_name}/{key}", copy)

    def acknowledge_copy_function(self) -> None:
        """Acknowledge the copy function's findings, each with its reason (call after the
        last :meth:`publish`; the function is the stack's ``Custom::CDKBucketDeployment*``)."""
        stack = cdk.Stack.of(self)
        for child in stack.node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                nag.acknowledge_copy_function(child)


def _acknowledge_bucket(bucket: s3.Bucket) -> None:
    why = ("this bucket holds only lmikit's content-addressed deployment artifacts "
           "(serving.properties, LMCache file, formatters, LoRA adapters), rebuilt from the "
           "spec by every deploy")
    nag.acknowledge(
        bucket, "AwsSolutions-S1", f"{why}; its writer is the stack's copy step and its reader "
        "the endpoint's execution role, both recorded by CloudTrail. Pass artifact_bucket= "
        "to use a bucket with server access logging",
        ("HIPAA.Security-S3BucketLoggingEnabled", f"{why}; pass artifact_bucket= to use a "
         "bucket with server access logging"),
        ("HIPAA.Security-S3BucketReplicationEnabled", f"{why}, so a lost bucket is rebuilt "
         "by the next deploy; pass artifact_bucket= to use a replicated bucket"))
