"""Fixtures for the observability tests: example specs planned once, golden files, moto."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden"
GOLDEN_SPECS = ("docqa-qwen7b", "rag-qwen72b-nvme")


def load_example(stem: str):  # type: ignore[no-untyped-def]
    from lmikit.loader import load_spec
    from lmikit.plan import plan_spec

    spec = load_spec(EXAMPLES / f"{stem}.yaml")
    return spec, plan_spec(spec, base_dir=EXAMPLES)


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/<name>; LMIKIT_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("LMIKIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with LMIKIT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"{name} differs from its golden file; review the diff and, if intended, rerun "
        "`LMIKIT_UPDATE_GOLDEN=1 pytest tests/observability`")


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
