"""Staging streams: the Python heap stays near ``2 x workers x part_size`` however large the
files are (``tracemalloc``). moto keeps every object it is sent in this process, so here S3
part bodies are read and dropped (a sink in front of moto) to measure lmikit's own memory;
``benchmarks/weights_stage_memory.py`` measures a 300 MiB file against moto's server in
another process, RSS included."""

from __future__ import annotations

import hashlib
import tracemalloc
from typing import Any

import boto3
import pytest

from lmikit.weights import stage

from ._fake_hub import Content, FakeHub
from .conftest import BUCKET, REGION

MIB = 1024 * 1024
PART = 8 * MIB
FILE = 64 * MIB


class PartSink:
    """moto's S3 client, except that part bodies are read like a socket would send them
    (1 MiB at a time), counted and hashed, not stored."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self.received: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)

    def upload_part(self, **params: Any) -> dict[str, Any]:
        body, digest, count = params["Body"], hashlib.md5(usedforsecurity=False), 0
        block = bytearray(MIB)
        while got := body.readinto(block):
            digest.update(memoryview(block)[:got])
            count += got
        self.received[params["Key"]] = self.received.get(params["Key"], 0) + count
        return {"ETag": f'"{digest.hexdigest()}"'}

    def complete_multipart_upload(self, **params: Any) -> dict[str, Any]:
        self.s3.abort_multipart_upload(Bucket=params["Bucket"], Key=params["Key"],
                                       UploadId=params["UploadId"])
        return {}


@pytest.mark.slow
def test_the_heap_peaks_at_two_parts_per_worker_whatever_the_file_size(aws: None) -> None:
    hub = FakeHub()
    hub.add_repo("org/big", {"a.safetensors": Content(zeros=FILE),
                             "b.safetensors": Content(zeros=FILE)})
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    sink = PartSink(s3)
    from huggingface_hub import HfApi, get_session  # imported (and counted) before tracing

    HfApi(endpoint=hub.url).model_info("org/big")
    get_session()
    tracemalloc.start()
    try:
        stage("org/big", f"s3://{BUCKET}/big/", endpoint=hub.url, region=REGION, s3=sink,
              workers=2, part_size=PART)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        hub.close()
    assert sink.received == {"big/a.safetensors": FILE, "big/b.safetensors": FILE}
    # 2 workers x 2 parts of 8 MiB = 32 MiB, and a few MiB of HTTP buffers (36 MiB measured)
    assert peak < 2 * 2 * PART + 6 * MIB, f"peak {peak / MIB:.1f} MiB"
