"""Deterministic .tar.gz artifacts (base model dir, LoRA adapters) as S3 assets.

The same input gives the same bytes (:func:`lmikit.artifact.deterministic_tar`), so the
asset hash, the S3 key and therefore the template stay the same across synths and machines.
The bytes are staged in a file named by their sha256 before CDK copies them into the cloud
assembly.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from lmikit.artifact import sha256_hex
from lmikit.plan import Plan
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
    """An S3 asset holding one deterministic tarball; ``s3_url`` is the ArtifactUrl."""

    def __init__(self, scope: Construct, construct_id: str, *, data: bytes,
                 display_name: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.sha256 = sha256_hex(data)
        self.asset = s3_assets.Asset(self, "Asset", path=str(stage_bytes(data)),
                                     display_name=display_name)
        self.s3_url: str = self.asset.s3_object_url
        self.bucket_name: str = self.asset.s3_bucket_name
        self.object_key: str = self.asset.s3_object_key


def adapter_artifact(spec: DeploymentSpec, adapter: AdapterSpec,
                     base_dir: str | Path = ".", plan: Plan | None = None) -> bytes:
    """The adapter directory (weights, adapter_config.json[, model.py]) as a tarball.

    Packaged by :func:`lmikit.adapters.package_spec_adapter`, the function ``lmikit deploy``
    uses, so the SDK and CDK paths ship the same bytes and check the same things (config,
    base model, rank within the endpoint's OPTION_MAX_LORA_RANK, weights, formatter, and the
    cache-isolating model.py while LMCache is on).
    """
    from lmikit.adapters import package_spec_adapter
    from lmikit.plan import plan_spec

    return package_spec_adapter(spec, plan or plan_spec(spec, base_dir), adapter,
                                base_dir).data
