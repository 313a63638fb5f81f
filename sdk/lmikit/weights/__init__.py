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

from lmikit.weights._destination import MANIFEST_NAME, Destination, WeightsError, parse_destination
from lmikit.weights._hub import HubFile, Snapshot
from lmikit.weights._manifest import Manifest, StagedFile, StagedWeights, check_staged
from lmikit.weights._stage import StageEvent, StageResult, stage
from lmikit.weights._upload import PART_SIZE, ChecksumMismatch

__all__ = [
    "MANIFEST_NAME",
    "PART_SIZE",
    "ChecksumMismatch",
    "Destination",
    "HubFile",
    "Manifest",
    "Snapshot",
    "StageEvent",
    "StageResult",
    "StagedFile",
    "StagedWeights",
    "WeightsError",
    "check_staged",
    "parse_destination",
    "stage",
]
