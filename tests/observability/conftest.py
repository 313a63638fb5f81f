"""Fixtures for the observability tests: example specs planned once, golden files, moto.

Fake AWS credentials come from the root conftest's autouse fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GOLDEN, assert_golden  # noqa: F401  (re-exported to the tests here)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN_SPECS = ("docqa-qwen7b", "rag-qwen72b-nvme")


def load_example(stem: str):  # type: ignore[no-untyped-def]
    from lmikit.planner._planner import plan_spec
    from lmikit.spec._loader import load_spec

    spec = load_spec(EXAMPLES / f"{stem}.yaml")
    return spec, plan_spec(spec, base_dir=EXAMPLES)


@pytest.fixture(params=sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def example(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return load_example(request.param)


@pytest.fixture
def cloudwatch():  # type: ignore[no-untyped-def]
    import boto3
    from moto import mock_aws

    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")
