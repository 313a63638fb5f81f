"""The deployer renders for the image it deploys: stock unless told otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import BUCKET, ROLE, deployment, spec_with

LMIKIT_IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/lmikit-lmi:1"


def _base_env(fake: FakeSageMaker) -> dict[str, str]:
    call = fake.operations("CreateInferenceComponent")[-1]
    return call.params["Specification"]["Container"]["Environment"]


def test_stock_image_scrapes_djl_server_metrics(fake: FakeSageMaker, session: Any,
                                                clock: VirtualClock, tmp_path: Path) -> None:
    d = deployment(spec_with(tmp_path), session, clock, tmp_path)
    assert d.image_kind == "stock"
    d.deploy()
    call = fake.operations("CreateInferenceComponent")[-1]
    metrics = call.params["Specification"]["Container"]["ContainerMetricsConfig"]
    assert metrics["MetricsEndpoints"][0]["MetricsEndpointPath"] == "/server/metrics"
    assert _base_env(fake)["SERVING_PROMETHEUS"] == "true"


def test_lmikit_image_uri_renders_for_lmikit_image(fake: FakeSageMaker, session: Any,
                                                   clock: VirtualClock, tmp_path: Path) -> None:
    from lmikit.deploy import Deployment

    d = Deployment(spec_with(tmp_path), session=session, role_arn=ROLE, bucket=BUCKET,
                   base_dir=tmp_path, image_uri=LMIKIT_IMAGE, clock=clock, poll_seconds=10)
    assert d.image_kind == "lmikit"
    d.deploy()
    env = _base_env(fake)
    assert env["LMIKIT_METRICS_PATH"] == "/metrics" and "LMIKIT_PLAN" in env
