"""Deployment against the strict fake: create, converge, update, destroy, status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.deploy import Deployment
from lmikit.errors import DeployError
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import IMAGE, ROLE, deployment, live, spec_with


def test_deploy_creates_every_resource_in_service(fake: FakeSageMaker, session: Any,
                                                  clock: VirtualClock, spec: Any,
                                                  tmp_path: Path) -> None:
    result = deployment(spec, session, clock, tmp_path).deploy()
    assert [c.action for c in result.changes] == ["create"] * 3
    res = fake.resources()
    assert res["endpoint"] == {"docqa": "InService"}
    assert res["inference-component"] == {"docqa-base": "InService"}
    assert len(res["endpoint-config"]) == 1


def test_deploy_sends_requests_the_service_model_accepts(fake: FakeSageMaker, session: Any,
                                                         clock: VirtualClock, spec: Any,
                                                         tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    assert fake.calls and all(c.error is None for c in fake.calls
                              if not c.operation.startswith("Describe"))
    base = next(c for c in fake.calls if c.operation == "CreateInferenceComponent")
    assert base.params["Specification"]["Container"]["ArtifactUrl"].startswith(
        "s3://lmikit-test-artifacts/lmikit/docqa/model/")


def test_deploy_second_run_changes_nothing(fake: FakeSageMaker, session: Any,
                                           clock: VirtualClock, spec: Any,
                                           tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    before = len(fake.calls)
    result = deployment(spec, session, clock, tmp_path).deploy()
    assert not result.changed
    assert result.summary().startswith("No changes")
    writes = [c.operation for c in fake.calls[before:]
              if c.operation.startswith(("Create", "Update", "Delete"))]
    assert writes == []


def test_deploy_config_change_goes_through_update_endpoint(fake: FakeSageMaker, session: Any,
                                                           clock: VirtualClock,
                                                           tmp_path: Path) -> None:
    first = spec_with(tmp_path)
    deployment(first, session, clock, tmp_path).deploy()
    old_config = next(iter(fake.resources()["endpoint-config"]))
    bigger = spec_with(tmp_path, "").model_copy(update={"instance": first.instance.model_copy(
        update={"max_count": 3})})
    result = deployment(bigger, session, clock, tmp_path).deploy()
    actions = {(c.kind, c.action) for c in result.changes}
    assert ("endpoint", "update") in actions
    assert ("endpoint-config", "delete") in actions
    configs = fake.resources()["endpoint-config"]
    assert old_config not in configs and len(configs) == 1
    assert fake.operations("UpdateEndpoint")


def test_deploy_base_change_uses_rolling_update_with_alarm_rollback(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    deployment(spec_with(tmp_path), session, clock, tmp_path).deploy()
    changed = spec_with(tmp_path, "engine:\n  gpu_memory_utilization: 0.85\n")
    result = deployment(changed, session, clock, tmp_path).deploy()
    assert ("inference-component", "update") in {(c.kind, c.action) for c in result.changes}
    update = fake.operations("UpdateInferenceComponent")[-1].params
    policy = update["DeploymentConfig"]
    assert policy["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "COPY_COUNT",
                                                                 "Value": 1}
    alarm = policy["AutoRollbackConfiguration"]["Alarms"][0]["AlarmName"]
    import boto3

    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms(
        AlarmNames=[alarm])["MetricAlarms"]
    assert alarms[0]["MetricName"] == "Invocation5XXErrors"


def test_deploy_failed_base_update_is_reported_and_previous_kept(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    deployment(spec_with(tmp_path), session, clock, tmp_path).deploy()
    fake.inject("UpdateInferenceComponent", "failed", reason="health check failed")
    changed = spec_with(tmp_path, "engine:\n  gpu_memory_utilization: 0.85\n")
    with pytest.raises(DeployError, match="rolled back.*health check failed"):
        deployment(changed, session, clock, tmp_path).deploy()
    assert fake.resources()["inference-component"] == {"docqa-base": "InService"}


def test_deploy_adapters_are_created_in_parallel(fake: FakeSageMaker, session: Any,
                                                 clock: VirtualClock, lora_spec: Any,
                                                 tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    comps = fake.resources()["inference-component"]
    assert comps == {"docqa-base": "InService", "docqa-legal": "InService",
                     "docqa-medical": "InService"}


def test_destroy_deletes_everything_in_dependency_order(fake: FakeSageMaker, session: Any,
                                                        clock: VirtualClock, lora_spec: Any,
                                                        tmp_path: Path) -> None:
    d = deployment(lora_spec, session, clock, tmp_path)
    d.deploy()
    d.destroy()
    assert live(fake) == {}
    deletes = [c.params.get("InferenceComponentName") or c.operation
               for c in fake.operations("DeleteInferenceComponent", "DeleteEndpoint")]
    assert deletes.index("docqa-base") > max(deletes.index("docqa-legal"),
                                             deletes.index("docqa-medical"))
    assert deletes[-1] == "DeleteEndpoint"


def test_status_lists_every_resource(fake: FakeSageMaker, session: Any, clock: VirtualClock,
                                     lora_spec: Any, tmp_path: Path) -> None:
    d = deployment(lora_spec, session, clock, tmp_path)
    assert [r.status for r in d.status()] == ["absent"]
    d.deploy()
    rows = {(r.kind, r.name): r.status for r in d.status()}
    assert rows[("endpoint", "docqa")] == "InService"
    assert rows[("inference-component", "docqa-legal")] == "InService"
    assert sum(k == "endpoint-config" for k, _ in rows) == 1


def test_deploy_without_role_names_the_option(session: Any, spec: Any, tmp_path: Path) -> None:
    with pytest.raises(DeployError, match="--role-arn"):
        Deployment(spec, session=session, bucket="b", image_uri=IMAGE).deploy()


def test_deploy_resolves_the_real_lmi_image(fake: FakeSageMaker, session: Any,
                                            clock: VirtualClock, spec: Any,
                                            tmp_path: Path) -> None:
    d = Deployment(spec, session=session, role_arn=ROLE, bucket="lmikit-test-artifacts",
                   base_dir=tmp_path, clock=clock)
    d.deploy()
    image = fake.operations("CreateInferenceComponent")[0].params["Specification"][
        "Container"]["Image"]
    assert "djl-inference:0.38.0" in image and image.startswith("763104351884.dkr.ecr")
