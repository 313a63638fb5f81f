"""One deployment on the fake (adapters legal and medical, sticky sessions on), made once per
test module: ``yield from serve(tmp_path_factory)`` in a module-scoped fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from lmikit import Endpoint
from lmikit.testing import FakeSageMaker, Timings, VirtualClock, s3_artifact_exists

from .conftest import BUCKET, REGION, deployment, make_adapter, spec_with

BASE_MODEL = "Qwen/Qwen2.5-7B-Instruct"


class Served:
    """One deployment (adapters legal and medical, sticky sessions on) shared by the tests."""

    def __init__(self, tmp: Path) -> None:
        self.clock = VirtualClock()
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        self.fake = FakeSageMaker(REGION, clock=self.clock, timings=Timings(),
                                  artifact_exists=s3_artifact_exists(s3))
        self.session = self.fake.install(boto3.Session(region_name=REGION))
        make_adapter(tmp / "adapters", "legal")
        make_adapter(tmp / "adapters", "medical")
        spec = spec_with(tmp, "\nadapters:\n  - {name: legal, source: adapters/legal}\n"
                              "  - {name: medical, source: adapters/medical}\n")
        deployment(spec, self.session, self.clock, tmp).deploy()
        self.endpoint = Endpoint("docqa", session=self.session, clock=self.clock)

    def calls_since(self, mark: int, *operations: str) -> list[str]:
        return [c.operation for c in self.fake.calls[mark:]
                if not operations or c.operation in operations]


def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The body of a module-scoped ``served`` fixture."""
    with mock_aws():
        yield Served(tmp_path_factory.mktemp("served"))
