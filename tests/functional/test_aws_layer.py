"""lmikit.aws against moto: the artifact store (streamed, multipart, KMS, content-addressed),
the deployment lease (conditional writes), and the error mapper."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import Any, BinaryIO

import boto3
import pytest
from moto import mock_aws

from lmikit.aws import ArtifactStore, Lease, call, map_error
from lmikit.errors import AwsError, DeployError, LeaseHeld
from lmikit.testing import FakeSageMaker, VirtualClock

BUCKET = "lmikit-store-test"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


class Streamed:
    """An artifact known by digest and size, read once from a file-like object."""

    def __init__(self, data: bytes, *, lie: bool = False) -> None:
        self._data = data
        self.sha256 = hashlib.sha256(b"other" if lie else data).hexdigest()
        self.size = len(data)
        self.opened = 0

    def open(self) -> BinaryIO:
        self.opened += 1
        return io.BytesIO(self._data)


def test_store_put_streams_a_source_to_its_content_address(s3: Any) -> None:
    source = Streamed(b"x" * 1000)
    store = ArtifactStore(s3, BUCKET, deployment="docqa")
    stored = store.put("lmikit/docqa/adapters/legal", source)
    assert stored.key == f"lmikit/docqa/adapters/legal/{source.sha256}.tar.gz"
    assert stored.uploaded and source.opened == 1
    head = s3.head_object(Bucket=BUCKET, Key=stored.key)
    assert head["Metadata"] == {"sha256": source.sha256, "lmikit-deployment": "docqa"}
    again = store.put("lmikit/docqa/adapters/legal", source)
    assert not again.uploaded and source.opened == 1  # already there: not read again


def test_store_put_accepts_bytes(s3: Any) -> None:
    stored = ArtifactStore(s3, BUCKET, deployment="docqa").put("lmikit/docqa/model", b"abc")
    assert stored.sha256 == hashlib.sha256(b"abc").hexdigest()
    assert s3.get_object(Bucket=BUCKET, Key=stored.key)["Body"].read() == b"abc"


def test_store_uploads_large_bodies_in_parts_and_reports_progress(s3: Any) -> None:
    data = bytes(range(256)) * 50_000  # 12.8 MB
    seen: list[int] = []
    store = ArtifactStore(s3, BUCKET, deployment="docqa", on_bytes=seen.append,
                          multipart_threshold=5 * 1024**2, multipart_chunk=5 * 1024**2)
    stored = store.put("lmikit/docqa/model", Streamed(data))
    etag = s3.head_object(Bucket=BUCKET, Key=stored.key)["ETag"]
    assert etag.strip('"').endswith("-3")  # S3's ETag of a 3-part multipart upload
    assert sum(seen) == len(data)
    assert s3.get_object(Bucket=BUCKET, Key=stored.key)["Body"].read() == data


def test_store_encrypts_with_the_spec_key(s3: Any) -> None:
    kms = boto3.client("kms", region_name="us-east-1")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    stored = ArtifactStore(s3, BUCKET, deployment="docqa", kms_key_arn=key).put(
        "lmikit/docqa/model", b"secret")
    head = s3.head_object(Bucket=BUCKET, Key=stored.key)
    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == key


def test_store_refuses_a_stream_that_does_not_match_its_digest(s3: Any) -> None:
    store = ArtifactStore(s3, BUCKET, deployment="docqa")
    with pytest.raises(DeployError, match="did not match its digest"):
        store.put("lmikit/docqa/model", Streamed(b"data", lie=True))
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


def test_store_owns_only_its_prefix_and_its_objects(s3: Any) -> None:
    mine = ArtifactStore(s3, BUCKET, deployment="docqa")
    other = ArtifactStore(s3, BUCKET, deployment="docqa-v2")
    a = mine.put("lmikit/docqa/model", b"1")
    b = other.put("lmikit/docqa-v2/model", b"2")
    s3.put_object(Bucket=BUCKET, Key="lmikit/docqa/model/hand-made.tar.gz", Body=b"3")
    assert mine.keys() == sorted([a.key, "lmikit/docqa/model/hand-made.tar.gz"])
    assert mine.is_ours(a.key) and not mine.is_ours(b.key)
    assert not mine.is_ours("lmikit/docqa/model/hand-made.tar.gz")  # no metadata: not ours


def test_store_creates_a_missing_bucket_in_its_region() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        store = ArtifactStore(s3, "lmikit-new-bucket", deployment="d", region="eu-west-1")
        assert store.ensure_bucket() is True
        assert store.ensure_bucket() is False
        location = s3.get_bucket_location(Bucket="lmikit-new-bucket")["LocationConstraint"]
        assert location == "eu-west-1"


def test_lease_names_its_holder_and_expires(s3: Any) -> None:
    clock = VirtualClock()
    first = Lease(s3, BUCKET, "docqa", clock=clock, owner="alice@laptop", seconds=600)
    first.acquire()
    second = Lease(s3, BUCKET, "docqa", clock=clock, owner="ci", operation="destroy")
    with pytest.raises(LeaseHeld, match="deployment 'docqa' is locked by alice@laptop, "
                                        "running `lmikit deploy` since 2026-01-01 00:00:00 "
                                        "UTC \\(lease expires 2026-01-01 00:10:00 UTC\\)"):
        second.acquire()
    clock.advance(601)  # alice's run died: its lease expired
    second.acquire()
    assert second.broken is not None and second.broken.owner == "alice@laptop"
    first.release()  # no longer alice's: leaves ci's lease alone
    assert second.read() is not None and second.read()[0].owner == "ci"  # type: ignore[index]
    second.release()
    assert second.read() is None


def test_lease_force_takes_a_live_lease(s3: Any) -> None:
    clock = VirtualClock()
    Lease(s3, BUCKET, "docqa", clock=clock, owner="stuck").acquire()
    mine = Lease(s3, BUCKET, "docqa", clock=clock, owner="me")
    mine.acquire(force=True)
    assert mine.broken is not None and mine.broken.owner == "stuck"


def test_lease_of_another_deployment_is_independent(s3: Any) -> None:
    clock = VirtualClock()
    Lease(s3, BUCKET, "docqa", clock=clock).acquire()
    Lease(s3, BUCKET, "docqa-v2", clock=clock).acquire()  # no conflict


def test_lease_put_whose_answer_was_lost_is_ours(s3: Any) -> None:
    clock = VirtualClock()
    fake = FakeSageMaker(clock=clock)
    session = fake.install(boto3.Session(region_name="us-east-1"))
    from botocore.config import Config

    client = session.client("s3", config=Config(retries={"mode": "standard"}))
    fake.inject("PutObject", "lost", name="lease.json")
    lease = Lease(client, BUCKET, "docqa", clock=clock)
    lease.acquire()  # botocore retried the put and got 412: it reads back its own run id
    assert [c.error for c in fake.operations("PutObject")] == ["lost", "412"]
    assert lease.held
    lease.release()
    assert lease.read() is None


def test_lease_renewal_notices_a_takeover(s3: Any) -> None:
    clock = VirtualClock()
    mine = Lease(s3, BUCKET, "docqa", clock=clock, owner="me", seconds=100)
    mine.acquire()
    Lease(s3, BUCKET, "docqa", clock=clock, owner="forcer").acquire(force=True)
    with pytest.raises(DeployError, match="taken over by forcer"):
        mine.renew()


def test_error_mapper_turns_botocore_errors_into_the_error_tree() -> None:
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    throttled = map_error(ClientError({"Error": {"Code": "ThrottlingException",
                                                 "Message": "Rate exceeded"},
                                       "ResponseMetadata": {"HTTPStatusCode": 400}},
                                      "CreateEndpoint"), "create_endpoint")
    assert (throttled.code, throttled.status, throttled.lost) == ("ThrottlingException", 400,
                                                                  False)
    assert str(throttled) == "CreateEndpoint failed: ThrottlingException: Rate exceeded"
    lost = map_error(ReadTimeoutError(endpoint_url="https://x"), "create_endpoint")
    assert lost.lost and "the request may have been applied" in str(lost)
    offline = map_error(EndpointConnectionError(endpoint_url="https://x"), "put_object")
    assert not offline.lost and "could not reach AWS" in str(offline)
    creds = map_error(NoCredentialsError(), "head_object")
    assert "no AWS credentials found" in str(creds) and "lmikit sandbox serve" in str(creds)
    assert all(isinstance(e, AwsError) and isinstance(e, DeployError)
               for e in (throttled, lost, offline, creds))


def test_call_maps_s3_errors(s3: Any) -> None:
    with pytest.raises(AwsError, match="GetObject failed: NoSuchKey") as info:
        call(s3, "get_object", Bucket=BUCKET, Key="missing")
    assert info.value.code == "NoSuchKey" and info.value.operation == "GetObject"
