"""Fixtures for functional tests: the fake SageMaker under real boto3, moto for the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result
from moto import mock_aws

from lmikit.deploy import Deployment
from lmikit.loader import load_spec_text
from lmikit.spec import DeploymentSpec
from lmikit.testing import (
    FakeSageMaker,
    SystemClock,
    Timings,
    VirtualClock,
    cloudwatch_sink,
    iam_role_reads,
    s3_artifact_exists,
    s3_artifact_reader,
    write_lora_adapter,
)

REGION = "us-east-1"
BUCKET = "lmikit-test-artifacts"
ROLE = "arn:aws:iam::123456789012:role/lmikit-test"
IMAGE = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/"
         "djl-inference:0.38.0-lmi20.0.0-cu128")

LMIKIT_IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/lmikit-lmi:1"


def cache_spec_text(mode: str = "cpu", routing: str = "sticky_session", instances: int = 1,
                    extra: str = "") -> str:
    """A docqa spec on ml.g6e.2xlarge for the cache-model tests; ``extra`` adds sections."""
    return f"""
api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
  min_count: {instances}
  max_count: {max(2, instances)}
kv_cache:
  mode: "{mode}"
routing:
  strategy: {routing}
{extra}"""


SPEC_YAML = """
api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
kv_cache:
  mode: cpu
workload:
  reused_context_tokens: 460000
routing:
  strategy: sticky_session
"""


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def _role_reads() -> Any:
    """The fake's download check against moto's IAM: a role lmikit created (create_role=True)
    must read every artifact; ROLE, which IAM does not hold, is not judged."""
    return iam_role_reads(boto3.client("iam", region_name=REGION))


@pytest.fixture
def fake(aws: None, clock: VirtualClock) -> FakeSageMaker:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return FakeSageMaker(REGION, clock=clock, timings=Timings(),
                         artifact_exists=s3_artifact_exists(s3), role_reads=_role_reads())


@pytest.fixture
def cached_fake(aws: None, clock: VirtualClock) -> FakeSageMaker:
    """The fake with its KV cache model on: it reads deployed artifacts from moto's S3 and
    publishes the container's and SageMaker's metrics to moto's CloudWatch."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return FakeSageMaker(REGION, clock=clock, timings=Timings(),
                         artifact_exists=s3_artifact_exists(s3), role_reads=_role_reads(),
                         artifact_reader=s3_artifact_reader(s3),
                         metrics_sink=cloudwatch_sink(boto3.client("cloudwatch",
                                                                   region_name=REGION)))


@pytest.fixture
def session(fake: FakeSageMaker) -> Any:
    return fake.install(boto3.Session(region_name=REGION))


def make_adapter(root: Path, name: str = "legal", *, rank: int = 8,
                 base: str = "Qwen/Qwen2.5-7B-Instruct", weights: bool = True) -> Path:
    d = write_lora_adapter(root / name, base_model=base, rank=rank,
                           fill=sum(name.encode()) % 256)
    if not weights:
        (d / "adapter_model.safetensors").unlink()
    return d


def spec_with(tmp_path: Path, extra: str = "") -> DeploymentSpec:
    return load_spec_text(SPEC_YAML + extra, source=str(tmp_path / "spec.yaml"))


@pytest.fixture
def spec(tmp_path: Path) -> DeploymentSpec:
    return spec_with(tmp_path)


@pytest.fixture
def lora_spec(tmp_path: Path) -> DeploymentSpec:
    make_adapter(tmp_path / "adapters", "legal")
    make_adapter(tmp_path / "adapters", "medical")
    return spec_with(tmp_path, """
adapters:
  - name: legal
    source: adapters/legal
  - name: medical
    source: adapters/medical
""")


def deployment(spec: DeploymentSpec, session: Any, clock: VirtualClock, tmp_path: Path,
               **kwargs: Any) -> Deployment:
    return Deployment(spec, session=session, role_arn=ROLE, bucket=BUCKET, base_dir=tmp_path,
                      image_uri=IMAGE, clock=clock, poll_seconds=10, **kwargs)


def live(fake: FakeSageMaker) -> dict[str, dict[str, Any]]:
    """Every resource still present in the fake (after pending deletions finish)."""
    fake.settle()
    return {k: v for k, v in fake.resources().items() if v}


def realtime_fake() -> FakeSageMaker:
    """The fake for CLI tests, which wait in real time: transitions take milliseconds. Call
    it inside moto (the ``aws`` fixture): it creates the test bucket."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return FakeSageMaker(REGION, clock=SystemClock(), artifact_exists=s3_artifact_exists(s3),
                         role_reads=_role_reads(),
                         timings=Timings(endpoint_create=0.05, endpoint_update=0.05,
                                         component_create=0.05, component_update=0.05,
                                         adapter_create=0.02, delete=0.02))


def cli_against(fake: FakeSageMaker, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``run("deploy", spec, ...)``: the ``lmikit`` CLI in-process, every boto3 session it
    makes talking to ``fake`` (and moto); deploy and destroy poll every 0.1 s, the adapter
    commands every 0.05 s."""
    from lmikit.cli import adapters_cmd, main

    real = boto3.Session
    monkeypatch.setattr(boto3, "Session", lambda **kw: fake.install(real(**kw)))
    monkeypatch.setattr(adapters_cmd, "POLL", 0.05)

    def run(*args: str) -> Result:
        poll = ["--poll-seconds", "0.1"] if args[0] in ("deploy", "destroy") else []
        return CliRunner().invoke(main, [*args, *poll])
    return run
