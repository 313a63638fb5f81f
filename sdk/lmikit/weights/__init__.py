"""Weights staging: a Hugging Face Hub snapshot copied to S3 as SageMaker's uncompressed
model data (``ModelDataSource.S3DataSource``: S3Prefix, CompressionType None), so a large
model starts from S3 instead of downloading from the Hub inside the container.

:func:`stage` copies (``lmikit weights stage``); :func:`check_staged` tells a deployer
whether a prefix holds a finished copy. Reaching the Hub needs ``pip install
'lmikit[weights]'`` (huggingface_hub); checking a prefix needs only boto3.

>>> from lmikit.weights import check_staged, stage
>>> stage("Qwen/Qwen2.5-7B-Instruct", "s3://my-models/qwen2.5-7b/")  # doctest: +SKIP
>>> check_staged("s3://my-models/qwen2.5-7b/", region="us-east-1")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "ChecksumMismatch": "lmikit.weights._upload",
    "Destination": "lmikit.weights._destination",
    "HubFile": "lmikit.weights._hub",
    "MANIFEST_NAME": "lmikit.weights._destination",
    "Manifest": "lmikit.weights._manifest",
    "PART_SIZE": "lmikit.weights._upload",
    "Snapshot": "lmikit.weights._hub",
    "StageEvent": "lmikit.weights._stage",
    "StageResult": "lmikit.weights._stage",
    "StagedFile": "lmikit.weights._manifest",
    "StagedWeights": "lmikit.weights._manifest",
    "WeightsError": "lmikit.weights._destination",
    "check_model_py": "lmikit.weights._manifest",
    "check_staged": "lmikit.weights._manifest",
    "parse_destination": "lmikit.weights._destination",
    "stage": "lmikit.weights._stage",
}

__all__ = [
    "ChecksumMismatch",
    "Destination",
    "HubFile",
    "MANIFEST_NAME",
    "Manifest",
    "PART_SIZE",
    "Snapshot",
    "StageEvent",
    "StageResult",
    "StagedFile",
    "StagedWeights",
    "WeightsError",
    "check_model_py",
    "check_staged",
    "parse_destination",
    "stage",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.weights._destination import (
        MANIFEST_NAME,
        Destination,
        WeightsError,
        parse_destination,
    )
    from lmikit.weights._hub import HubFile, Snapshot
    from lmikit.weights._manifest import (
        Manifest,
        StagedFile,
        StagedWeights,
        check_model_py,
        check_staged,
    )
    from lmikit.weights._stage import StageEvent, StageResult, stage
    from lmikit.weights._upload import PART_SIZE, ChecksumMismatch
