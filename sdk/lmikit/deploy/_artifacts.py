"""Content-addressed artifact storage in S3: ``<prefix>/<sha256>.tar.gz``.

The same bytes always land at the same key, so uploads are idempotent and safe against
concurrent runs; an object that already exists is never uploaded again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmikit.artifact import sha256_hex
from lmikit.deploy._aws import call, error_code, is_not_found
from lmikit.errors import DeployError


@dataclass(frozen=True)
class StoredArtifact:
    bucket: str
    key: str
    sha256: str
    uploaded: bool  # False when the object was already there

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def artifact_key(prefix: str, data: bytes) -> str:
    return f"{prefix.strip('/')}/{sha256_hex(data)}.tar.gz"


def object_exists(s3: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if is_not_found(exc):
            return False
        raise DeployError(f"HeadObject s3://{bucket}/{key} failed: {error_code(exc)}") from exc


def upload_artifact(s3: Any, bucket: str, prefix: str, data: bytes,
                    kms_key_arn: str | None = None) -> StoredArtifact:
    key = artifact_key(prefix, data)
    digest = key.rsplit("/", 1)[1].split(".", 1)[0]
    if object_exists(s3, bucket, key):
        return StoredArtifact(bucket, key, digest, uploaded=False)
    extra: dict[str, Any] = {"ContentType": "application/gzip",
                             "Metadata": {"sha256": digest}}
    if kms_key_arn:
        extra.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=kms_key_arn)
    call(s3, "put_object", Bucket=bucket, Key=key, Body=data, **extra)
    return StoredArtifact(bucket, key, digest, uploaded=True)


def delete_artifact(s3: Any, artifact: StoredArtifact) -> None:
    call(s3, "delete_object", Bucket=artifact.bucket, Key=artifact.key)


def split_s3_url(url: str) -> tuple[str, str]:
    if not url.startswith("s3://") or "/" not in url[5:]:
        raise DeployError(f"not an s3://bucket/key URL: {url!r}")
    bucket, key = url[5:].split("/", 1)
    return bucket, key


def default_bucket(clients: Any) -> str:
    """SageMaker's default bucket name, ``sagemaker-<region>-<account>``."""
    account = call(clients.sts, "get_caller_identity")["Account"]
    return f"sagemaker-{clients.region}-{account}"


def ensure_bucket(s3: Any, bucket: str, region: str) -> None:
    """Create the bucket if it does not exist (private, encrypted by default)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return
    except ClientError as exc:
        if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
            raise DeployError(f"cannot use bucket {bucket!r}: {error_code(exc)}") from exc
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    call(s3, "create_bucket", **kwargs)
    call(s3, "put_public_access_block", Bucket=bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True})
