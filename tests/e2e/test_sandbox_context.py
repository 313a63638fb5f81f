"""``lmikit.testing.sandbox()``: boto3 points at the sandbox inside the block, and the
environment is as it was after it."""

from __future__ import annotations

import os

import boto3
import pytest

from lmikit.testing import sandbox


def test_sandbox_points_boto3_at_the_fakes_and_restores_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "someone-real")
    monkeypatch.delenv("AWS_ENDPOINT_URL_SAGEMAKER", raising=False)
    before = dict(os.environ)
    with sandbox() as sb:
        assert "AWS_PROFILE" not in os.environ
        assert os.environ["AWS_ENDPOINT_URL_SAGEMAKER"] == f"http://127.0.0.1:{sb.port}"
        assert boto3.client("sagemaker").list_endpoints()["Endpoints"] == []
        boto3.client("s3").create_bucket(Bucket="sandbox-check")
        assert [b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]] == [
            "sandbox-check"]
    assert dict(os.environ) == before


def test_sandbox_restores_the_environment_when_the_block_raises() -> None:
    before = dict(os.environ)
    with pytest.raises(RuntimeError, match="boom"), sandbox():
        raise RuntimeError("boom")
    assert dict(os.environ) == before
