"""Where staged weights go: an ``s3://bucket/prefix/`` that SageMaker reads as uncompressed
model data (``ModelDataSource.S3DataSource``, S3DataType ``S3Prefix``, CompressionType
``None``), checked against the rules SageMaker and S3 state for it.

>>> parse_destination("s3://my-models/llama-3.1-8b").uri
's3://my-models/llama-3.1-8b/'
>>> parse_destination("s3://my-models/a//b/")
Traceback (most recent call last):
...
lmikit.weights._destination.WeightsError: destination 's3://my-models/a//b/': ...
"""

from __future__ import annotations

from dataclasses import dataclass

from lmikit.aws import check_bucket_name
from lmikit.errors import DeployError, LmikitError

MANIFEST_NAME = "lmikit-manifest.json"  # written last, at the prefix's root

# | rule | source |
# | an S3Prefix URI ends with "/" | botocore sagemaker S3ModelDataSource.S3DataType |
# | no file or folder name that is empty, holds a NUL byte, is longer than 255 bytes, or is
# |   "." or ".." | botocore sagemaker S3ModelDataSource.CompressionType |
# | S3Uri at most 1024 characters | botocore sagemaker shape S3ModelUri (max 1024) |
# | an object key at most 1024 bytes (UTF-8) | S3 User Guide, "Naming Amazon S3 objects" |
MAX_NAME_BYTES = 255
MAX_URI_CHARS = 1024
MAX_KEY_BYTES = 1024


class WeightsError(LmikitError):
    """Staging or checking weights failed; the message says why and what fixes it."""

    kind = "WeightsError"


@dataclass(frozen=True)
class Destination:
    """A bucket and a key prefix (``""`` for the bucket's root, else ending in ``/``)."""

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, path: str) -> str:
        return self.prefix + path

    @property
    def manifest_key(self) -> str:
        return self.key(MANIFEST_NAME)


def name_problems(path: str) -> list[str]:
    """Why SageMaker cannot make a file of ``path`` under /opt/ml/model (empty list: it can)."""
    problems = []
    for part in path.split("/"):
        if part in ("", ".", ".."):
            problems.append(f"it has a folder or file name {part!r} (empty, '.' and '..' are "
                            "not allowed)")
        elif "\0" in part:
            problems.append("it holds a NUL byte")
        elif len(part.encode()) > MAX_NAME_BYTES:
            problems.append(f"the name {part[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")
    return problems


def parse_destination(uri: str) -> Destination:
    """``uri`` as a :class:`Destination`; a missing trailing ``/`` is added. Raises
    :class:`WeightsError` naming every rule the URI breaks."""
    if not uri.startswith("s3://"):
        raise WeightsError(f"destination {uri!r} is not an s3:// URI: give "
                           "s3://BUCKET/PREFIX/ (the folder SageMaker copies to /opt/ml/model)")
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    problems = []
    try:
        check_bucket_name(bucket)
    except DeployError as exc:
        problems.append(str(exc))
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    if prefix:
        problems += [f"the prefix {prefix!r}: {p}" for p in name_problems(prefix[:-1])]
    destination = Destination(bucket, prefix)
    if len(destination.uri) > MAX_URI_CHARS:
        problems.append(f"it is {len(destination.uri)} characters long (SageMaker's S3Uri "
                        f"takes at most {MAX_URI_CHARS})")
    if problems:
        raise WeightsError(f"destination {uri!r}: " + "; ".join(problems))
    return destination


def path_problems(destination: Destination, path: str) -> list[str]:
    """Why the Hub file ``path`` cannot be staged under ``destination``."""
    problems = name_problems(path)
    if path == MANIFEST_NAME:
        problems.append(f"it is named like lmikit's manifest ({MANIFEST_NAME})")
    key_bytes = len(destination.key(path).encode())
    if key_bytes > MAX_KEY_BYTES:
        problems.append(f"its S3 key would be {key_bytes} bytes (S3 allows {MAX_KEY_BYTES})")
    return problems
