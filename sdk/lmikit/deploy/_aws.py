"""The names this module used to define, now served by :mod:`lmikit.aws` (the one AWS
layer); kept so code written against them (``_role.py``) works unchanged."""

from __future__ import annotations

from typing import Any

from lmikit.aws import (
    ArtifactStore,
    Clients,
    Clock,
    ProgressEvent,
    ProgressFn,
    RealClock,
    StoredArtifact,
    Waiter,
    call,
    describe_or_none,
    is_not_found,
    no_progress,
)

__all__ = ["Clients", "Clock", "ProgressEvent", "ProgressFn", "RealClock", "Waiter", "call",
           "describe_or_none", "error_code", "error_message", "is_not_found", "no_progress",
           "upload_artifact"]


def error_code(exc: BaseException) -> str:
    """AWS's error code of a botocore ClientError or an :class:`lmikit.errors.AwsError`."""
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(exc)


def upload_artifact(s3: Any, bucket: str, prefix: str, data: bytes,
                    kms_key_arn: str | None = None) -> StoredArtifact:
    """Upload ``data`` to ``<prefix>/<sha256>.tar.gz`` (see :class:`ArtifactStore.put`)."""
    parts = prefix.strip("/").split("/")
    deployment = parts[1] if len(parts) > 1 and parts[0] == "lmikit" else ""
    return ArtifactStore(s3, bucket, deployment=deployment,
                         kms_key_arn=kms_key_arn).put(prefix, data)
