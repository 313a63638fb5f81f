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

from lmikit.artifact import deterministic_tar, directory_files, sha256_hex
from lmikit.errors import AdapterError, LmikitError
from lmikit.spec import AdapterSpec

ADAPTER_CONFIG = "adapter_config.json"
FORMATTER_FILE = "model.py"


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


def adapter_artifact(adapter: AdapterSpec, base_dir: str | Path = ".") -> bytes:
    """The adapter directory (weights, adapter_config.json[, model.py]) as a tarball.

    ``adapter.formatter``, when given, becomes ``model.py`` at the archive root (LMI loads a
    per-adapter formatter from there); a directory that already has one is refused.
    """
    source = Path(base_dir) / adapter.source
    try:
        files = directory_files(source)
    except LmikitError as exc:
        raise AdapterError(f"adapter {adapter.name!r}: {exc}") from exc
    if ADAPTER_CONFIG not in files:
        raise AdapterError(f"adapter {adapter.name!r}: {str(source)!r} has no {ADAPTER_CONFIG}; "
                           "point adapters[].source at a PEFT LoRA adapter directory")
    if adapter.formatter:
        if FORMATTER_FILE in files:
            raise AdapterError(f"adapter {adapter.name!r}: {str(source)!r} already has "
                               f"{FORMATTER_FILE} and adapters[].formatter is set; keep one")
        path = Path(base_dir) / adapter.formatter
        try:
            files[FORMATTER_FILE] = path.read_bytes()
        except OSError as exc:
            raise AdapterError(f"adapter {adapter.name!r}: cannot read formatter "
                               f"{str(path)!r}: {exc.strerror}") from exc
    return deterministic_tar(files)
