"""``lmikit.deploy.upload_artifact``, kept from earlier versions as a one-call front of
:class:`lmikit.aws.ArtifactStore` (the one AWS layer holds everything else)."""

from __future__ import annotations

from typing import Any

from lmikit.aws import ArtifactStore, StoredArtifact

__all__ = ["upload_artifact"]


def upload_artifact(s3: Any, bucket: str, prefix: str, data: bytes,
                    kms_key_arn: str | None = None) -> StoredArtifact:
    """Upload ``data`` to ``<prefix>/<sha256>.tar.gz`` (see :class:`ArtifactStore.put`)."""
    parts = prefix.strip("/").split("/")
    deployment = parts[1] if len(parts) > 1 and parts[0] == "lmikit" else ""
    return ArtifactStore(s3, bucket, deployment=deployment,
                         kms_key_arn=kms_key_arn).put(prefix, data)
