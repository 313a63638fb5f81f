"""One Hub file into one S3 object, streamed and checked on the way.

The bytes are read a part at a time (:data:`PART_SIZE`) and hashed as they pass; a file
larger than a part goes up as a multipart upload with each part's SHA-256 checked by S3
(``ChecksumAlgorithm`` SHA256), one part uploading while the next is read. The object
appears only when the whole file's digest equals the one the Hub publishes (the LFS sha256,
or the git blob id of a file kept in git); otherwise the upload is aborted and the file is
refused. S3 keeps the file's sha256 in the object's metadata, which a later run reads to
skip it.

S3 has no full-object SHA-256 for multipart uploads (only CRC algorithms have the
FULL_OBJECT checksum type; AWS's aws-s3-transfer crate, ``types/checksum.rs``), hence the
metadata.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from lmikit.aws import call
from lmikit.errors import AwsError
from lmikit.weights._destination import WeightsError
from lmikit.weights._hub import HubFile

# | fact | source |
# | a part is 5 MiB to 5 GiB, the last may be smaller; at most 10,000 parts | S3 User Guide,
# |   "Amazon S3 multipart upload limits" |
MIN_PART = 5 * 1024**2
MAX_PART = 5 * 1024**3
MAX_PARTS = 10_000
PART_SIZE = 16 * 1024**2  # boto3's TransferConfig: 8 MiB; 16 MiB x 10,000 parts = 156 GiB
SHA256_METADATA = "sha256"  # x-amz-meta-sha256: the content's sha256 (hex)
BLOB_METADATA = "git-blob"  # x-amz-meta-git-blob: the Hub's git blob id of a file kept in git


class ChecksumMismatch(WeightsError):
    """The bytes streamed from the Hub do not match the checksum the Hub publishes."""


class Stopped(Exception):
    """The run was asked to stop (Ctrl-C) while this file was being copied."""


@dataclass(frozen=True)
class Target:
    """Where and how objects are written: the bucket, SSE-KMS key (None: the bucket's
    default encryption), the part size, and the pool part uploads run in."""

    s3: Any
    bucket: str
    kms_key_id: str | None
    part_size: int
    uploads: Executor
    stop: threading.Event


def part_size_for(size: int, part_size: int) -> int:
    """``part_size``, or the smallest whole MiB that keeps ``size`` within 10,000 parts."""
    least = -(-size // MAX_PARTS)
    return max(part_size, -(-least // 1024**2) * 1024**2)


def git_blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what the Hub lists as ``blobId`` for a file in git).

    >>> git_blob_id(b"hello\\n")
    'ce013625030ba8dba906f756967f9e9ca394464a'
    """
    digest = hashlib.sha1(f"blob {len(data)}\0".encode(), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def stored_sha256(head: dict[str, Any] | None, file: HubFile, kms_key_id: str | None
                  ) -> str | None:
    """The sha256 of an object already at the file's key when it holds this very file (its
    size and the Hub's checksum match, and it is SSE-KMS encrypted when a key is asked);
    None when the file must be copied."""
    if head is None or head.get("ContentLength") != file.size:
        return None
    meta = head.get("Metadata", {})
    if kms_key_id and head.get("ServerSideEncryption") != "aws:kms":
        return None
    sha256 = meta.get(SHA256_METADATA)
    if not sha256:
        return None
    if file.sha256 is not None:
        return str(sha256) if sha256 == file.sha256 else None
    return str(sha256) if file.blob_id and meta.get(BLOB_METADATA) == file.blob_id else None


class _Digest:
    """The file's sha256, and its git blob id when the Hub gives one instead of an sha256."""

    def __init__(self, file: HubFile) -> None:
        self.file = file
        self.sha256 = hashlib.sha256()
        self.blob = None
        if file.sha256 is None:
            self.blob = hashlib.sha1(f"blob {file.size}\0".encode(), usedforsecurity=False)
        self.count = 0

    def update(self, data: bytes | bytearray) -> None:
        self.sha256.update(data)
        if self.blob is not None:
            self.blob.update(data)
        self.count += len(data)

    def check(self) -> str:
        """The sha256 (hex) when everything matches the Hub; ChecksumMismatch otherwise."""
        got = self.sha256.hexdigest()
        if self.count != self.file.size:
            raise ChecksumMismatch(f"{self.file.path}: the Hub sent {self.count:,} bytes, its "
                                   f"listing says {self.file.size:,}; refused")
        if self.file.sha256 is not None and got != self.file.sha256:
            raise ChecksumMismatch(f"{self.file.path}: the streamed bytes have sha256 {got}, "
                                   f"the Hub publishes {self.file.sha256}; refused")
        if self.blob is not None and self.blob.hexdigest() != self.file.blob_id:
            raise ChecksumMismatch(f"{self.file.path}: the streamed bytes have git blob id "
                                   f"{self.blob.hexdigest()}, the Hub lists "
                                   f"{self.file.blob_id}; refused")
        return got


def _parts(chunks: Iterable[bytes], size: int, total: int,
           stop: threading.Event) -> Iterator[bytearray]:
    """``chunks`` regrouped into parts of ``size`` bytes (the last one shorter), each in a
    buffer of exactly its size (``total``: the file's size); bytes past ``total`` come as
    one more part, for the caller to refuse."""
    produced = 0
    part, filled = bytearray(min(size, total)), 0
    for chunk in chunks:
        if stop.is_set():
            raise Stopped
        view = memoryview(chunk)
        while view:
            if filled == len(part):  # past the end the Hub listed
                part += view
                filled, view = len(part), view[len(view):]
                break
            take = min(len(part) - filled, len(view))
            part[filled:filled + take] = view[:take]
            filled, view = filled + take, view[take:]
            if filled == len(part) and produced + filled < total:
                yield part
                produced += filled
                part, filled = bytearray(min(size, total - produced)), 0
    if filled:
        yield part


class _PartBody(io.RawIOBase):
    """A part's bytes as a file botocore reads, seeks and re-reads on a retry, without
    copying the part (a bytearray body is not accepted everywhere a file is)."""

    def __init__(self, data: bytearray) -> None:
        self.view = memoryview(data)
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), len(self.view) - self.position)
        buffer[:count] = self.view[self.position:self.position + count]
        self.position += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: len(self.view)}
        self.position = max(0, base[whence] + offset)
        return self.position

    def tell(self) -> int:
        return self.position


def _b64_sha256(data: bytes | bytearray) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _encryption(kms_key_id: str | None) -> dict[str, str]:
    return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id} if kms_key_id else {}


def copy_file(target: Target, key: str, file: HubFile, chunks: Iterable[bytes],
              on_bytes: Callable[[int], None]) -> str:
    """Stream ``file`` (``chunks``) to ``key``; its sha256 (hex) once the object exists.
    Raises :class:`ChecksumMismatch` (nothing written), :class:`Stopped`, or the error that
    broke the stream or the upload (an unfinished multipart upload is aborted first)."""
    digest = _Digest(file)
    part_size = part_size_for(file.size, target.part_size)
    if file.size <= part_size:
        body = bytearray()
        for part in _parts(chunks, part_size, file.size, target.stop):  # one part, unless
            digest.update(part)                          # the Hub sends more than it lists
            if digest.count > file.size:
                break
            body = part
        sha256 = digest.check()
        metadata = {SHA256_METADATA: sha256, **({BLOB_METADATA: file.blob_id}
                                                if file.sha256 is None and file.blob_id else {})}
        call(target.s3, "put_object", Bucket=target.bucket, Key=key, Body=_PartBody(body),
             Metadata=metadata, ChecksumSHA256=_b64_sha256(body),
             **_encryption(target.kms_key_id))
        on_bytes(len(body))
        return sha256
    return _multipart(target, key, file, chunks, digest, part_size, on_bytes)


def _multipart(target: Target, key: str, file: HubFile, chunks: Iterable[bytes],
               digest: _Digest, part_size: int, on_bytes: Callable[[int], None]) -> str:
    metadata = ({SHA256_METADATA: file.sha256} if file.sha256 is not None
                else {BLOB_METADATA: file.blob_id or ""})
    upload_id = call(target.s3, "create_multipart_upload", Bucket=target.bucket, Key=key,
                     Metadata=metadata, ChecksumAlgorithm="SHA256",
                     **_encryption(target.kms_key_id))["UploadId"]
    done: list[dict[str, Any]] = []
    pending: Future[dict[str, Any]] | None = None
    try:
        for number, part in enumerate(_parts(chunks, part_size, file.size, target.stop),
                                     start=1):
            digest.update(part)
            if digest.count > file.size:
                break
            checksum = _b64_sha256(part)
            if pending is not None:  # at most one part uploads while the next is read
                done.append(pending.result())
            pending = target.uploads.submit(_upload_part, target, key, upload_id, number,
                                            part, checksum, on_bytes)
        if pending is not None:
            done.append(pending.result())
            pending = None
        sha256 = digest.check()
        call(target.s3, "complete_multipart_upload", Bucket=target.bucket, Key=key,
             UploadId=upload_id, MultipartUpload={"Parts": done}, MpuObjectSize=file.size)
    except BaseException:
        if pending is not None:
            pending.cancel()
            try:
                pending.result()
            except Exception:  # the upload's own error is not the one to report
                pass
        abort(target, key, upload_id)
        raise
    return sha256


def _upload_part(target: Target, key: str, upload_id: str, number: int, part: bytearray,
                 checksum: str, on_bytes: Callable[[int], None]) -> dict[str, Any]:
    if target.stop.is_set():
        raise Stopped
    answer = call(target.s3, "upload_part", Bucket=target.bucket, Key=key, UploadId=upload_id,
                  PartNumber=number, Body=_PartBody(part), ChecksumSHA256=checksum)
    on_bytes(len(part))
    return {"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": checksum}


def abort(target: Target, key: str, upload_id: str) -> None:
    """Abort an unfinished multipart upload (S3 would keep, and bill, its parts)."""
    try:
        call(target.s3, "abort_multipart_upload", Bucket=target.bucket, Key=key,
             UploadId=upload_id)
    except AwsError:  # already gone; a later run aborts what is left
        pass
