"""Deterministic .tar.gz artifacts (base model dir, LoRA adapters) as S3 assets.

The same input gives the same bytes (:func:`lmikit.artifact.deterministic_tar`), so the
asset hash, the S3 key and therefore the template stay the same across synths and machines.
The bytes are staged in a file named by their sha256 before CDK copies them into the cloud
assembly.

With ``security.kms_key_arn`` the components do not read the asset where CDK put it (the
bootstrap bucket, encrypted with the bootstrap's own key) but a copy encrypted with the
spec's key (:mod:`lmikit_cdk.kms_artifacts`); :class:`PublishedArtifact` says which.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from constructs import Construct, IConstruct

from lmikit.artifact import sha256_hex
from lmikit.planner import Plan
from lmikit.spec import AdapterSpec, DeploymentSpec


def staging_dir() -> Path:
    """Where artifact bytes wait for CDK (``LMIKIT_CDK_STAGING`` or a temp directory)."""
    root = os.environ.get("LMIKIT_CDK_STAGING") or Path(tempfile.gettempdir()) / "lmikit-cdk"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def stage_bytes(data: bytes, suffix: str = ".tar.gz") -> Path:
    """Write ``data`` once to ``<staging>/<sha256><suffix>`` and return the path."""
    path = staging_dir() / f"{sha256_hex(data)}{suffix}"
    if not path.is_file() or path.stat().st_size != len(data):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


class TarballAsset(Construct):
    """An S3 asset holding one deterministic tarball; ``s3_url`` is the ArtifactUrl.

    SageMaker takes a single gzip-compressed tar whose key ends in ``.tar.gz`` (botocore:
    ``InferenceComponentContainerSpecification.ArtifactUrl``). A plain ``s3_assets.Asset``
    names the object ``<hash><extension>``, and the extension of ``x.tar.gz`` is only
    ``.gz``; so the file is staged with :class:`aws_cdk.AssetStaging` and registered with the
    stack's synthesizer under the source hash ``<sha256>.tar`` (the sha256 of the bytes),
    which makes the key ``<sha256>.tar.gz``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, data: bytes,
                 display_name: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.sha256 = sha256_hex(data)
        self.staging = cdk.AssetStaging(self, "Stage", source_path=str(stage_bytes(data)))
        stack = cdk.Stack.of(self)
        location = stack.synthesizer.add_file_asset(
            file_name=self.staging.relative_staged_path(stack),
            packaging=cdk.FileAssetPackaging.FILE,
            # The content's sha256 names the object, as the SDK deployer names its uploads.
            source_hash=f"{self.sha256}.tar",
            display_name=display_name)
        self.bucket_name: str = location.bucket_name
        self.object_key: str = location.object_key
        self.s3_url: str = location.s3_object_url


def adapter_artifact(spec: DeploymentSpec, adapter: AdapterSpec,
                     base_dir: str | Path = ".", plan: Plan | None = None) -> bytes:
    """The adapter directory (weights, adapter_config.json[, model.py]) as a tarball.

    Packaged by :func:`lmikit.lora.package_spec_adapter`, the function ``lmikit deploy``
    uses, so the SDK and CDK paths ship the same bytes and check the same things (config,
    base model, rank within the endpoint's OPTION_MAX_LORA_RANK, weights, formatter, and the
    cache-isolating model.py while LMCache is on).
    """
    from lmikit.lora import package_spec_adapter
    from lmikit.planner import plan_spec

    return package_spec_adapter(spec, plan or plan_spec(spec, base_dir), adapter,
                                base_dir).data


@dataclass(frozen=True)
class PublishedArtifact:
    """Where a component reads an artifact, and what must exist before it does."""

    bucket_name: str
    object_key: str
    s3_url: str
    ready: IConstruct  # the construct that puts the object there (a dependency target)


def published(asset: TarballAsset) -> PublishedArtifact:
    """The asset read where CDK uploads it (no KMS key in the spec)."""
    return PublishedArtifact(asset.bucket_name, asset.object_key, asset.s3_url, asset)
