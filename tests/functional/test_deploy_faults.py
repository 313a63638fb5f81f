"""Fault matrix: every deploy step x {throttle, 5xx, Failed} ends InService or rolled back
with zero orphans, and a re-run without faults converges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.deploy import ProgressEvent
from lmikit.errors import DeployError
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import BUCKET, deployment, live

STEPS = [
    ("CreateEndpointConfig", None),
    ("CreateEndpoint", None),
    ("CreateInferenceComponent", "docqa-base"),
    ("CreateInferenceComponent", "docqa-legal"),
]
FAULTS = ["throttle", "5xx", "failed"]


def _expected_all_in_service() -> dict[str, dict[str, str]]:
    return {"endpoint": {"docqa": "InService"},
            "inference-component": {"docqa-base": "InService", "docqa-legal": "InService",
                                    "docqa-medical": "InService"}}


@pytest.mark.parametrize("operation,name", STEPS, ids=[f"{o}-{n}" for o, n in STEPS])
@pytest.mark.parametrize("kind", FAULTS)
def test_deploy_fault_ends_in_service_or_rolled_back(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path, operation: str, name: str | None, kind: str) -> None:
    # "Failed" for a config (which has no status) is the service refusing it
    fake.inject(operation, "limit" if kind == "failed" and operation ==
                "CreateEndpointConfig" else kind, name=name, reason="injected: no capacity")
    # standard retries: adaptive mode would also rate-limit (in real time) after a throttle
    d = deployment(lora_spec, session, clock, tmp_path, retry_mode="standard")
    try:
        d.deploy()
        outcome = "in-service"
    except DeployError as exc:
        outcome = "rolled-back"
        assert "Nothing this run created is left behind." in str(exc)
        assert "injected" in str(exc)
    state = live(fake)
    if outcome == "in-service":
        assert kind in ("throttle", "5xx"), "a Failed resource must not pass"
        assert {k: v for k, v in state.items() if k != "endpoint-config"} == \
            _expected_all_in_service()
    else:
        assert kind == "failed"
        assert state == {}, f"orphans left: {state}"
        objects = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET)
        assert objects.get("KeyCount", 0) == 0
    # a re-run without faults converges
    fake.clear_faults()
    deployment(lora_spec, session, clock, tmp_path).deploy()
    assert {k: v for k, v in live(fake).items() if k != "endpoint-config"} == \
        _expected_all_in_service()
    assert len(fake.resources()["endpoint-config"]) == 1
    assert not deployment(lora_spec, session, clock, tmp_path).deploy().changed


def test_deploy_interrupted_rolls_back_what_it_created(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    pressed = []

    def interrupt(event: ProgressEvent) -> None:
        if event.name == "docqa-base" and event.status == "Creating" and not pressed:
            pressed.append(event)
            raise KeyboardInterrupt  # Ctrl-C while waiting for the base component

    with pytest.raises(DeployError, match="interrupted by the user"):
        deployment(lora_spec, session, clock, tmp_path, progress=interrupt).deploy()
    assert live(fake) == {}


def test_deploy_failure_keeps_resources_that_existed_before(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        lora_spec: Any, tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    before = live(fake)
    # the adapter-enabled spec changes the base env (LoRA on): an update that fails
    fake.inject("UpdateInferenceComponent", "failed", reason="injected: bad weights")
    with pytest.raises(DeployError) as info:
        deployment(lora_spec, session, clock, tmp_path).deploy()
    message = str(info.value)
    assert "Rolled back" in message and "existed before this run" in message
    after = live(fake)
    assert after["endpoint"] == before["endpoint"]
    assert after["inference-component"] == before["inference-component"]


def test_deploy_slow_transition_hits_the_timeout_and_rolls_back(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        tmp_path: Path) -> None:
    fake.inject("CreateEndpoint", "slow", seconds=10_000)
    with pytest.raises(DeployError, match="timed out .* endpoint docqa"):
        deployment(spec, session, clock, tmp_path, timeout_seconds=1800).deploy()
    assert live(fake) == {}


def test_deploy_resource_limit_is_not_retried_and_rolls_back(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        tmp_path: Path) -> None:
    fake.inject("CreateInferenceComponent", "limit", reason="ml.g6e.2xlarge for endpoint usage")
    with pytest.raises(DeployError, match="ResourceLimitExceeded"):
        deployment(spec, session, clock, tmp_path).deploy()
    assert len(fake.operations("CreateInferenceComponent")) == 1
    assert live(fake) == {}
