"""The manifest a staged prefix carries, written last, and the check a deployer runs on it.

``<prefix>/lmikit-manifest.json`` names the model, the revision asked for, the commit it
resolved to, and every staged file with its size and sha256. It is written only after every
file is in S3 with a verified checksum, and deleted before a run changes any file of a
prefix staged earlier, so a prefix without it is unfinished and is never to be deployed.

>>> m = Manifest("Qwen/Qwen2.5-7B-Instruct", "main", "a" * 40,
...              (StagedFile("config.json", 663, "b" * 64),))
>>> Manifest.from_json(m.to_json(), "here") == m
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lmikit.aws import Clients, call, is_not_found, paginate
from lmikit.errors import AwsError
from lmikit.weights._destination import (
    MANIFEST_NAME,
    Destination,
    WeightsError,
    parse_destination,
)

FORMAT = "lmikit-weights/1"
MAX_MANIFEST_BYTES = 64 * 1024**2  # read no more of a manifest than this


@dataclass(frozen=True)
class StagedFile:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What a finished staging run wrote: ``revision`` as asked, ``commit`` as resolved."""

    model_id: str
    revision: str
    commit: str
    files: tuple[StagedFile, ...]
    excluded: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> bytes:
        data = {"format": FORMAT, "model_id": self.model_id, "revision": self.revision,
                "commit": self.commit, "excluded": list(self.excluded),
                "total_bytes": self.total_bytes,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256}
                          for f in sorted(self.files, key=lambda f: f.path)]}
        return (json.dumps(data, indent=1) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT!r}")
            files = tuple(StagedFile(str(f["path"]), int(f["size"]), str(f["sha256"]))
                          for f in raw["files"])
            return cls(str(raw["model_id"]), str(raw["revision"]), str(raw["commit"]),
                       tuple(sorted(files, key=lambda f: f.path)),
                       tuple(str(p) for p in raw.get("excluded", ())))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WeightsError(f"{where} is not a manifest lmikit can read ({exc}); stage the "
                               "weights again with `lmikit weights stage`") from None


def read_manifest(s3: Any, destination: Destination) -> Manifest | None:
    """The manifest under ``destination``, or None when there is none."""
    where = f"s3://{destination.bucket}/{destination.manifest_key}"
    try:
        answer = call(s3, "get_object", Bucket=destination.bucket,
                      Key=destination.manifest_key, Range=f"bytes=0-{MAX_MANIFEST_BYTES}")
    except AwsError as exc:
        if is_not_found(exc):
            return None
        raise WeightsError(f"cannot read {where}: {exc}") from exc
    body = answer["Body"].read(MAX_MANIFEST_BYTES + 1)
    if len(body) > MAX_MANIFEST_BYTES:
        raise WeightsError(f"{where} is over {MAX_MANIFEST_BYTES:,} bytes; not a manifest")
    return Manifest.from_json(body, where)


def write_manifest(s3: Any, destination: Destination, manifest: Manifest,
                   kms_key_id: str | None = None) -> None:
    import base64
    import hashlib

    body = manifest.to_json()
    extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id} if kms_key_id \
        else {}
    call(s3, "put_object", Bucket=destination.bucket, Key=destination.manifest_key, Body=body,
         ContentType="application/json",
         ChecksumSHA256=base64.b64encode(hashlib.sha256(body).digest()).decode(), **extra)


def delete_manifest(s3: Any, destination: Destination) -> None:
    call(s3, "delete_object", Bucket=destination.bucket, Key=destination.manifest_key)


def bucket_region(s3: Any, bucket: str) -> str:
    """The region ``bucket`` is in (HeadBucket's ``BucketRegion``); WeightsError when the
    bucket does not exist or cannot be reached."""
    try:
        answer = call(s3, "head_bucket", Bucket=bucket)
    except AwsError as exc:
        if exc.code in ("404", "NoSuchBucket", "NotFound"):
            raise WeightsError(f"bucket {bucket!r} does not exist: create it (in the "
                               "endpoint's region) or name another") from None
        raise WeightsError(f"cannot use bucket {bucket!r}: {exc}") from exc
    headers = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return str(answer.get("BucketRegion") or headers.get("x-amz-bucket-region") or "")


@dataclass(frozen=True)
class StagedWeights:
    """A complete staged prefix. ``extra_keys``: objects under it that the manifest does not
    list; SageMaker copies them to /opt/ml/model too (``lmikit-manifest.json`` excepted)."""

    uri: str
    manifest: Manifest
    extra_keys: tuple[str, ...] = field(default=())


def check_staged(uri: str, *, model_id: str | None = None, revision: str | None = None,
                 region: str | None = None, s3: Any = None,
                 session: Any = None) -> StagedWeights:
    """Check that ``uri`` (``s3://bucket/prefix/``) holds a finished copy made by
    ``lmikit weights stage``, before a deployment names it as its model data.

    A finished copy has its manifest (written last: a copy that stopped part-way has none);
    the manifest names ``model_id`` and ``revision`` when they are given (``revision`` may be
    the branch or tag given to the stage command, or the commit sha it resolved to); every
    file it lists is under the prefix with its size; nothing under the prefix is a folder
    marker (a key ending in ``/``, which SageMaker refuses: botocore, S3ModelDataSource); and,
    when ``region`` is given, the bucket is in that region (SageMaker reads model data only
    from a bucket in the endpoint's region: botocore, ContainerDefinition.ModelDataUrl).

    ``s3``: a boto3 S3 client (else one is made with ``session`` in ``region``). Returns
    :class:`StagedWeights`; raises :class:`WeightsError` listing every problem found.

    >>> staged = check_staged("s3://my-models/llama-3.1-8b/",  # doctest: +SKIP
    ...                       model_id="meta-llama/Llama-3.1-8B-Instruct", region="us-east-1")
    >>> staged.manifest.commit  # doctest: +SKIP
    '0e9e39f249a16976918f6564b8830bc894c89659'
    """
    destination = parse_destination(uri)
    if s3 is None:
        s3 = Clients(session=session, region=region).s3
    problems = []
    if region:
        found = bucket_region(s3, destination.bucket)
        if found and found != region:
            problems.append(f"bucket {destination.bucket} is in {found}, not {region}: "
                            "SageMaker reads model data only from a bucket in the endpoint's "
                            "region")
    manifest = read_manifest(s3, destination)
    if manifest is None:
        raise WeightsError("; ".join(problems + [
            f"{destination.uri} has no {MANIFEST_NAME}: the copy is unfinished (or was not "
            "made by lmikit weights stage); run `lmikit weights stage MODEL_ID "
            f"{destination.uri}` to finish it"]))
    if model_id and manifest.model_id != model_id:
        problems.append(f"it holds {manifest.model_id}, not {model_id}")
    if revision and revision not in (manifest.revision, manifest.commit):
        problems.append(f"it holds revision {manifest.revision} (commit {manifest.commit}), "
                        f"not {revision}")
    listed = {row["Key"]: int(row.get("Size", 0)) for row in paginate(
        s3, "list_objects_v2", "Contents", Bucket=destination.bucket, Prefix=destination.prefix)}
    for staged in manifest.files:
        size = listed.get(destination.key(staged.path))
        if size is None:
            problems.append(f"{staged.path} is missing")
        elif size != staged.size:
            problems.append(f"{staged.path} has {size:,} bytes, the manifest says "
                            f"{staged.size:,}")
    problems += [f"{key} is a folder marker (a key ending in '/'), which SageMaker refuses"
                 for key in sorted(listed) if key.endswith("/")]
    if problems:
        raise WeightsError(f"{destination.uri} is not a complete copy: " + "; ".join(problems))
    known = {destination.key(f.path) for f in manifest.files} | {destination.manifest_key}
    return StagedWeights(destination.uri, manifest,
                         tuple(sorted(k for k in listed if k not in known)))


def check_model_py(uri: str, expected: bytes, *, s3: Any = None, session: Any = None,
                   region: str | None = None) -> None:
    """Check that ``uri``'s ``model.py`` is exactly ``expected``: the file LMI loads from the
    model dir SageMaker copies the prefix into. Raises :class:`WeightsError` saying what is
    there and how to put the right file in place."""
    destination = parse_destination(uri)
    if s3 is None:
        s3 = Clients(session=session, region=region).s3
    where = f"s3://{destination.bucket}/{destination.key('model.py')}"
    fix = (f"run `lmikit weights stage MODEL_ID {destination.uri} --lora-isolation` (files "
           "already there are skipped), which writes it; without it LoRA adapters and the base "
           "model share LMCache's cache keys and answer from one another's KV")
    try:
        answer = call(s3, "get_object", Bucket=destination.bucket,
                      Key=destination.key("model.py"), Range=f"bytes=0-{len(expected)}")
    except AwsError as exc:
        if is_not_found(exc):
            raise WeightsError(f"{where} is missing: with LoRA, a KV cache tier and "
                               "security.network_isolation, the base model's model.py that "
                               f"keeps adapters' KV apart must be in the weights' prefix; {fix}"
                               ) from None
        raise WeightsError(f"cannot read {where} ({exc}), the base model's model.py that "
                           f"keeps LoRA adapters' KV apart; {fix}") from exc
    if answer["Body"].read(len(expected) + 1) != expected:
        raise WeightsError(f"{where} is not lmikit's LoRA isolation model.py for this version "
                           f"of lmikit (another model.py would run instead of it); {fix}")
