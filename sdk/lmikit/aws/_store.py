"""Content-addressed artifacts in S3: ``<prefix>/<sha256>.tar.gz``, uploaded once, streamed.

The same bytes always land at the same key, so an upload is idempotent and safe to retry
(a lost answer included). Objects carry their deployment in their metadata; only objects
under a deployment's own prefix *and* carrying its name are ever deleted by it.

>>> src = BytesSource(b"abc")
>>> src.sha256[:12], src.size
('ba7816bf8f01', 3)
>>> artifact_key("lmikit/docqa/model", src.sha256)[-20:]
'0ff61f20015ad.tar.gz'
>>> check_bucket_name("my-artifacts")
>>> check_bucket_name("my..bucket")
Traceback (most recent call last):
...
lmikit.errors.DeployError: bucket 'my..bucket' is not a valid S3 bucket name: ...
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, runtime_checkable

from lmikit.aws._errors import call, is_not_found, map_error, paginate
from lmikit.errors import AwsError, DeployError
from lmikit.names import default_bucket_name, deployment_prefix

DEPLOYMENT_METADATA = "lmikit-deployment"  # S3 user metadata: x-amz-meta-lmikit-deployment
SHA256_METADATA = "sha256"
MULTIPART_THRESHOLD = 64 * 1024**2  # bodies above this go up in parts (s3transfer)
MULTIPART_CHUNK = 64 * 1024**2
# S3's rules for general purpose bucket names (Amazon S3 User Guide, "General purpose bucket
# naming rules").
_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def check_bucket_name(name: str) -> None:
    """Raise DeployError naming the rule when ``name`` is not a valid S3 bucket name."""
    problems = []
    if not 3 <= len(name) <= 63:
        problems.append(f"it has {len(name)} characters (3 to 63 allowed)")
    bad = sorted({c for c in name if not (c.islower() and c.isascii() or c.isdigit()
                                         or c in ".-")})
    if bad:
        problems.append("it contains " + " ".join(repr(c) for c in bad)
                        + " (only lowercase letters, digits, '.' and '-' are allowed)")
    if name and not bad and 3 <= len(name) <= 63 and not _BUCKET_CHARS.match(name):
        problems.append("it must begin and end with a lowercase letter or a digit")
    if ".." in name:
        problems.append("it contains two adjacent periods")
    try:
        ipaddress.IPv4Address(name)
        problems.append("it is formatted as an IP address")
    except ValueError:
        pass
    problems += [f"it starts with the reserved prefix {p!r}" for p in _RESERVED_PREFIXES
                 if name.startswith(p)]
    problems += [f"it ends with the reserved suffix {s!r}" for s in _RESERVED_SUFFIXES
                 if name.endswith(s)]
    if problems:
        raise DeployError(f"bucket {name!r} is not a valid S3 bucket name: "
                          + "; ".join(problems))


@runtime_checkable
class ArtifactSource(Protocol):
    """A packaged artifact that can be streamed: its digest and size are known up front and
    ``open()`` returns a file-like object to read it once."""

    @property
    def sha256(self) -> str: ...

    @property
    def size(self) -> int: ...

    def open(self) -> BinaryIO: ...


class BytesSource:
    """An :class:`ArtifactSource` over bytes already in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.size = len(data)

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)


def as_source(source: bytes | ArtifactSource) -> ArtifactSource:
    """Bytes become a :class:`BytesSource`; a streamed source is used as it is."""
    if isinstance(source, bytes | bytearray | memoryview):
        return BytesSource(bytes(source))
    if isinstance(source, ArtifactSource):
        return source
    raise TypeError("an artifact is bytes or an object with .sha256, .size and .open()")


def package_source(package: Any) -> ArtifactSource:
    """The source to upload for a packaged artifact: the package itself when it streams
    (``.sha256``, ``.size``, ``.open()``), else its ``.data`` bytes."""
    if isinstance(package, ArtifactSource):
        return package
    return as_source(package.data)


def artifact_key(prefix: str, sha256: str) -> str:
    return f"{prefix.strip('/')}/{sha256}.tar.gz"


def split_s3_url(url: str) -> tuple[str, str]:
    if not url.startswith("s3://") or "/" not in url[5:]:
        raise DeployError(f"not an s3://bucket/key URL: {url!r}")
    bucket, key = url[5:].split("/", 1)
    return bucket, key


@dataclass(frozen=True)
class StoredArtifact:
    bucket: str
    key: str
    sha256: str
    uploaded: bool  # False when the object was already there

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


class _HashingReader(io.RawIOBase):
    """Reads through to ``raw`` while hashing, so a streamed upload is checked against the
    digest its key claims."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.digest.update(data)
        self.count += n
        return n


def upload_progress(size: int, note: Callable[[int, int], None],
                    steps: int = 20) -> Callable[[int], None]:
    """An ``on_bytes`` callback that calls ``note(percent, bytes_sent)`` each time another
    ``1/steps`` of ``size`` bytes has gone (every 5% by default), not for every chunk.

    >>> seen = []
    >>> on_bytes = upload_progress(100, lambda pct, sent: seen.append(pct))
    >>> for _ in range(10): on_bytes(10)
    >>> seen
    [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    """
    sent = [0]

    def on_bytes(n: int) -> None:
        before = sent[0] * steps // max(size, 1)
        sent[0] += n
        if sent[0] * steps // max(size, 1) > before:
            note(sent[0] * 100 // max(size, 1), sent[0])
    return on_bytes


class ArtifactStore:
    """One bucket's content-addressed artifacts for one deployment.

    ``put(prefix, source)`` takes bytes or an :class:`ArtifactSource` and uploads it with
    boto3's managed transfer (multipart above :data:`MULTIPART_THRESHOLD`, ``on_bytes``
    called with each chunk's size), SSE-KMS when ``kms_key_arn`` is set. An object already at
    its key is not uploaded again.

    >>> store = ArtifactStore(s3, "my-artifacts", deployment="docqa")  # doctest: +SKIP
    >>> store.put("lmikit/docqa/model", b"...").url  # doctest: +SKIP
    's3://my-artifacts/lmikit/docqa/model/<sha256>.tar.gz'
    """

    def __init__(self, s3: Any, bucket: str, *, deployment: str, region: str | None = None,
                 kms_key_arn: str | None = None,
                 on_bytes: Callable[[int], None] | None = None,
                 multipart_threshold: int = MULTIPART_THRESHOLD,
                 multipart_chunk: int = MULTIPART_CHUNK) -> None:
        self.s3 = s3
        self.multipart_threshold = multipart_threshold
        self.multipart_chunk = multipart_chunk
        self.bucket = bucket
        self.deployment = deployment
        self.region = region
        self.kms_key_arn = kms_key_arn
        self.on_bytes = on_bytes

    @property
    def root(self) -> str:
        """The deployment's own prefix (with its trailing slash: ``docqa-v2`` is not in
        ``lmikit/docqa/``)."""
        return deployment_prefix(self.deployment)

    def url(self, prefix: str, sha256: str) -> str:
        return f"s3://{self.bucket}/{artifact_key(prefix, sha256)}"

    # --- the bucket ------------------------------------------------------------------

    def bucket_exists(self) -> bool:
        try:
            call(self.s3, "head_bucket", Bucket=self.bucket)
            return True
        except AwsError as exc:
            if exc.code in ("404", "NoSuchBucket", "NotFound"):
                return False
            raise DeployError(f"cannot use bucket {self.bucket!r}: {exc}") from exc

    def ensure_bucket(self) -> bool:
        """Create the bucket (private) if it does not exist; True when it was created."""
        check_bucket_name(self.bucket)
        if self.bucket_exists():
            return False
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.region and self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            call(self.s3, "create_bucket", **kwargs)
        except AwsError as exc:
            if exc.code != "BucketAlreadyOwnedByYou":  # a concurrent run, or a lost answer
                raise
        call(self.s3, "put_public_access_block", Bucket=self.bucket,
             PublicAccessBlockConfiguration={
                 "BlockPublicAcls": True, "IgnorePublicAcls": True,
                 "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
        return True

    # --- objects ---------------------------------------------------------------------

    def head(self, key: str) -> dict[str, Any] | None:
        try:
            return call(self.s3, "head_object", Bucket=self.bucket, Key=key)
        except AwsError as exc:
            if is_not_found(exc):
                return None
            raise

    def exists(self, url: str) -> bool:
        bucket, key = split_s3_url(url)
        if bucket != self.bucket:
            return ArtifactStore(self.s3, bucket, deployment=self.deployment).exists(url)
        return self.head(key) is not None

    def put(self, prefix: str, source: bytes | ArtifactSource,
            on_bytes: Callable[[int], None] | None = None) -> StoredArtifact:
        """Upload ``source`` to ``<prefix>/<sha256>.tar.gz`` unless it is there already
        (``on_bytes``, else the store's, is called with each chunk's size)."""
        src = as_source(source)
        key = artifact_key(prefix, src.sha256)
        if self.head(key) is not None:
            return StoredArtifact(self.bucket, key, src.sha256, uploaded=False)
        extra: dict[str, Any] = {"ContentType": "application/gzip", "Metadata": {
            SHA256_METADATA: src.sha256, DEPLOYMENT_METADATA: self.deployment}}
        if self.kms_key_arn:
            extra.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=self.kms_key_arn)
        self._upload(src, key, extra, on_bytes or self.on_bytes)
        return StoredArtifact(self.bucket, key, src.sha256, uploaded=True)

    def _upload(self, src: ArtifactSource, key: str, extra: dict[str, Any],
                on_bytes: Callable[[int], None] | None) -> None:
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        config = TransferConfig(multipart_threshold=self.multipart_threshold,
                                multipart_chunksize=self.multipart_chunk)
        with src.open() as raw:
            reader = _HashingReader(raw)
            try:
                self.s3.upload_fileobj(io.BufferedReader(reader), self.bucket, key,
                                       ExtraArgs=extra, Callback=on_bytes, Config=config)
            except (ClientError, BotoCoreError) as exc:
                raise map_error(exc, "put_object") from exc
            # s3transfer may stop reading at the declared end: read what is left
            while reader.readinto(bytearray(1024 * 1024)):
                pass
        if reader.digest.hexdigest() != src.sha256 or reader.count != src.size:
            self.delete_key(key)
            raise DeployError(f"artifact stream for {key} did not match its digest: read "
                              f"{reader.count} bytes with sha256 {reader.digest.hexdigest()}, "
                              f"expected {src.size} bytes with sha256 {src.sha256}")

    def delete_key(self, key: str) -> None:
        call(self.s3, "delete_object", Bucket=self.bucket, Key=key)

    def is_ours(self, key: str) -> bool:
        """True when ``key`` is under this deployment's prefix and its metadata names it."""
        if not key.startswith(self.root):
            return False
        head = self.head(key)
        return head is not None and \
            head.get("Metadata", {}).get(DEPLOYMENT_METADATA) == self.deployment

    def keys(self) -> list[str]:
        """Every artifact key under this deployment's prefix (``.tar.gz`` objects)."""
        if not self.bucket_exists():
            return []
        rows = paginate(self.s3, "list_objects_v2", "Contents", Bucket=self.bucket,
                        Prefix=self.root)
        return sorted(r["Key"] for r in rows if r["Key"].endswith(".tar.gz"))


def default_bucket(clients: Any) -> str:
    """SageMaker's default bucket name, ``sagemaker-<region>-<account>``."""
    account = call(clients.sts, "get_caller_identity")["Account"]
    return default_bucket_name(clients.region, str(account))
