"""Fixtures for the observability tests: example specs planned once, golden files, moto."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GOLDEN, assert_golden  # noqa: F401  (re-exported to the tests here)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN_SPECS = ("docqa-qwen7b", "rag-qwen72b-nvme")


def load_example(stem: str):  # type: ignore[no-untyped-def]
    from lmikit.loader import load_spec
    from lmikit.plan import plan_spec

    spec = load_spec(EXAMPLES / f"{stem}.yaml")
    return spec, plan_spec(spec, base_dir=EXAMPLES)


@pytest.fixture(params=sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def example(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return load_example(request.param)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def cloudwatch(aws_env: None):  # type: ignore[no-untyped-def]
    import boto3
    from moto import mock_aws

    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")
