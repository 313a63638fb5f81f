"""Faults at single points of deploy and destroy, each checked in detail: lost answers are
reconciled, a failed update leaves the endpoint on what it runs, Ctrl-C finishes or undoes
what is in flight (and says which), a second Ctrl-C says what is still running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.aws import ProgressEvent
from lmikit.deploy import Interrupts, StepContext
from lmikit.errors import DeployError, DeployFailed, Interrupted
from lmikit.testing import FakeSageMaker, VirtualClock
from lmikit.testing._adapters import write_lora_adapter

from ._matrix import no_backoff
from .conftest import BUCKET, deployment, live, spec_with


def _keys(prefix: str = "lmikit/docqa/") -> set[str]:
    rows = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET,
                                                                      Prefix=prefix)
    return {r["Key"] for r in rows.get("Contents", [])}


def _in_use(fake: FakeSageMaker) -> tuple[str, set[str]]:
    """The endpoint's config and every artifact a component runs."""
    plane = fake.control
    urls = {c.request["Specification"].get("Container", {}).get("ArtifactUrl")
            for c in plane.components.values()}
    return plane.endpoints["docqa"].request["EndpointConfigName"], {
        u.split("/", 3)[3] for u in urls if u}


@pytest.mark.parametrize("operation,name", [("CreateEndpoint", None),
                                            ("CreateInferenceComponent", "docqa-base"),
                                            ("CreateInferenceComponent", "docqa-legal"),
                                            ("CreateEndpointConfig", None)])
def test_deploy_adopts_a_resource_whose_create_answer_was_lost(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path, operation: str, name: str | None) -> None:
    fake.inject(operation, "lost", name=name)
    deployment(lora_spec, session, clock, tmp_path, retry_mode="standard").deploy()
    tried = [c for c in fake.operations(operation) if not name
             or c.params.get("InferenceComponentName") == name]
    assert [c.error for c in tried][:2] == ["lost", "ValidationException"]  # botocore retried
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal",
                                                      "docqa-medical"}
    assert len(live(fake)["endpoint-config"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("times", [1, 8])  # 8: every retry's answer too; botocore gives up
def test_rollback_deletes_a_resource_whose_create_answer_was_lost(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path, times: int) -> None:
    fake.inject("CreateEndpoint", "lost", times=times)
    fake.inject("CreateInferenceComponent", "failed", name="docqa-medical",
                reason="injected: no capacity")
    with pytest.raises(DeployFailed, match="docqa-medical is Failed") as info:
        deployment(lora_spec, session, clock, tmp_path, retry_mode="standard").deploy()
    assert "Rolled back: " in str(info.value) and "endpoint docqa" in str(info.value)
    assert info.value.state == "old"
    assert "nothing this run created or changed is left behind" in str(info.value)
    assert live(fake) == {} and _keys() == set()


def test_failed_update_leaves_the_endpoint_on_the_config_it_runs(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    old_config, old_keys = _in_use(fake)
    write_lora_adapter(tmp_path / "adapters" / "legal", fill=9)  # retrained
    bigger = lora_spec.model_copy(update={
        "instance": lora_spec.instance.model_copy(update={"max_count": 3}),
        "engine": lora_spec.engine.model_copy(update={"max_batch_size": 16})})
    fake.inject("UpdateInferenceComponent", "failed", name="docqa-legal",
                reason="injected: adapter load failed")
    with pytest.raises(DeployFailed, match="adapter load failed") as info:
        deployment(bigger, session, clock, tmp_path).deploy()
    assert info.value.state == "old", str(info.value)
    config, keys = _in_use(fake)
    assert config == old_config and old_config in fake.control.configs
    assert keys == old_keys and keys <= _keys()  # nothing in use was deleted
    assert _keys() == old_keys  # and what the failed run uploaded is gone
    assert set(fake.control.configs) == {old_config}


def test_first_ctrl_c_rolls_back_what_is_in_flight_and_says_so(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    pressed: list[ProgressEvent] = []

    def interrupt(event: ProgressEvent) -> None:
        if event.name == "docqa-base" and event.status == "Creating" and not pressed:
            pressed.append(event)
            raise KeyboardInterrupt  # Ctrl-C while waiting for the base component

    with pytest.raises(Interrupted, match="interrupted by the user") as info:
        deployment(lora_spec, session, clock, tmp_path, progress=interrupt).deploy()
    assert info.value.state == "old"
    assert "The deployment is as it was before this run" in str(info.value)
    assert live(fake) == {} and _keys() == set()


def test_ctrl_c_after_every_change_finishes_and_says_so(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        tmp_path: Path) -> None:
    interrupts = Interrupts()

    def press_at_the_end(ctx: StepContext) -> None:  # after scaling, dashboard and alarms
        interrupts.press()

    d = deployment(spec, session, clock, tmp_path, interrupts=interrupts)
    d.post_deploy_steps.append(press_at_the_end)
    result = d.deploy()
    assert "Interrupted after every change was applied: the deployment is on the new " \
        "spec" in result.summary()
    assert live(fake)["inference-component"] == {"docqa-base": "InService"}


def test_second_ctrl_c_says_what_is_still_running_and_how_to_resume(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(spec_with(tmp_path), session, clock, tmp_path).deploy()
    interrupts = Interrupts()

    def press_twice(event: ProgressEvent) -> None:
        if event.name == "docqa-base" and event.status == "Updating" \
                and not interrupts.presses:
            interrupts.press()
            interrupts.press()

    with pytest.raises(Interrupted, match="second Ctrl-C") as info:
        deployment(lora_spec, session, clock, tmp_path, interrupts=interrupts,
                   progress=press_twice).deploy()
    message = str(info.value)
    assert info.value.state == "partial"
    assert "Still in progress on AWS: inference-component docqa-base (Updating (update))" \
        in message
    assert "Run `lmikit deploy SPEC` again to converge" in message
    fake.settle()
    _, keys = _in_use(fake)
    assert keys <= _keys()  # nothing a component runs was deleted
    deployment(lora_spec, session, clock, tmp_path).deploy()  # converges
    assert not deployment(lora_spec, session, clock, tmp_path).deploy().changed


@pytest.mark.slow
def test_destroy_that_stops_halfway_says_what_is_left(fake: FakeSageMaker, session: Any,
                                                      clock: VirtualClock, lora_spec: Any,
                                                      tmp_path: Path) -> None:
    d = deployment(lora_spec, session, clock, tmp_path, retry_mode="standard")
    d.deploy()
    fake.inject("DeleteEndpoint", "5xx", times=20)
    with pytest.raises(DeployFailed) as info:
        d.destroy()
    message = str(info.value)
    assert "destroy of 'docqa' stopped: DeleteEndpoint failed: InternalFailure" in message
    deleted = next(line for line in message.splitlines() if line.startswith("Deleted: "))
    assert sorted(deleted[len("Deleted: "):].rstrip(".").split(", ")) == [
        "inference-component docqa-base", "inference-component docqa-legal",
        "inference-component docqa-medical", "scalable-target inference-component/docqa-base",
        "scaling-policy docqa-base-target-tracking"]
    assert "Still there: endpoint docqa (InService), endpoint-config docqa-" in message
    assert "dashboard docqa-lmikit" in message  # removed after the endpoint: still there
    assert "Run `lmikit destroy SPEC` again to finish deleting it." in message
    assert info.value.state == "partial" and info.value.left
    fake.clear_faults()
    d.destroy()
    assert live(fake) == {} and _keys() == set()


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


def test_deploy_replaces_a_failed_endpoint(fake: FakeSageMaker, session: Any,
                                           clock: VirtualClock, lora_spec: Any,
                                           tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    endpoint = fake.control.endpoints["docqa"]  # the instances failed after the deploy
    endpoint.status, endpoint.failure = "Failed", "injected: instance failure"
    result = deployment(lora_spec, session, clock, tmp_path).deploy()
    assert ("endpoint", "replace") in {(c.kind, c.action) for c in result.changes}
    assert live(fake)["endpoint"] == {"docqa": "InService"}
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal",
                                                      "docqa-medical"}


def _update(lora_spec: Any, tmp_path: Path) -> Any:
    """An update that replaces the endpoint config and both artifacts (model, legal)."""
    write_lora_adapter(tmp_path / "adapters" / "legal", fill=9)  # retrained
    return lora_spec.model_copy(update={
        "instance": lora_spec.instance.model_copy(update={"max_count": 3}),
        "engine": lora_spec.engine.model_copy(update={"max_batch_size": 16})})


def test_an_update_whose_clean_up_keeps_failing_names_what_it_left_and_the_next_deploy_deletes_it(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    old_config, old_keys = _in_use(fake)
    bigger = _update(lora_spec, tmp_path)
    fake.inject("DeleteEndpointConfig", "5xx", times=100)
    fake.inject("DeleteObject", "5xx", times=100, name="/model/")
    with no_backoff():  # botocore retries each delete, without sleeping in real time
        result = deployment(bigger, session, clock, tmp_path, retry_mode="standard").deploy()
    new_config, new_keys = _in_use(fake)
    assert new_config != old_config and set(fake.control.configs) == {old_config, new_config}
    (old_model,) = [k for k in old_keys if "/model/" in k]
    (old_legal,) = [k for k in old_keys - new_keys if "/legal/" in k]
    assert _keys() == new_keys | {old_model}  # the legal artifact's delete went through
    (note,) = [n for n in result.notes if "garbage collection" in n]
    assert note.startswith("The deployment is on the new spec, but garbage collection left 2 "
                           "unused resource(s): ")
    assert f"endpoint-config {old_config} (DeleteEndpointConfig failed: InternalFailure" in note
    assert f"artifact s3://{BUCKET}/{old_model} (DeleteObject failed: InternalError" in note
    assert note.endswith("The next `lmikit deploy SPEC` or `lmikit gc SPEC` deletes them.")
    assert f"delete artifact s3://{BUCKET}/{old_legal}" in result.summary()
    fake.clear_faults()
    again = deployment(bigger, session, clock, tmp_path).deploy()
    assert set(fake.control.configs) == {new_config} and _keys() == new_keys
    assert {(c.kind, c.action) for c in again.changes if c.changed} == {
        ("endpoint-config", "delete"), ("artifact", "delete")}
    assert not [n for n in again.notes if "garbage collection" in n]


def test_a_second_ctrl_c_during_clean_up_names_what_it_left_and_gc_deletes_it(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    old_config, old_keys = _in_use(fake)
    interrupts = Interrupts()

    def press_twice_at_the_first_clean_up(event: ProgressEvent) -> None:
        if event.action == "delete" and event.status == "deleted" and not interrupts.presses:
            interrupts.press()
            interrupts.press()

    d = deployment(_update(lora_spec, tmp_path), session, clock, tmp_path,
                   interrupts=interrupts, progress=press_twice_at_the_first_clean_up)
    result = d.deploy()
    new_config, new_keys = _in_use(fake)
    assert old_config not in fake.control.configs  # the first delete finished
    left = _keys() - new_keys
    assert len(left) == 2 and left <= old_keys
    (note,) = [n for n in result.notes if "garbage collection" in n]
    assert note.startswith("The deployment is on the new spec, but garbage collection stopped "
                           "(Ctrl-C) and left 2 unused resource(s): ")
    for key in left:
        assert f"artifact s3://{BUCKET}/{key} (not tried)" in note
    gc = deployment(_update(lora_spec, tmp_path), session, clock, tmp_path).gc()
    assert sorted(c.name for c in gc.changes) == sorted(f"s3://{BUCKET}/{k}" for k in left)
    assert _keys() == new_keys and set(fake.control.configs) == {new_config}


def test_gc_whose_deletes_keep_failing_names_what_it_left_and_fails(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    old_config, _ = _in_use(fake)
    fake.inject("DeleteEndpointConfig", "5xx", times=100)
    bigger = _update(lora_spec, tmp_path)
    with no_backoff():
        deployment(bigger, session, clock, tmp_path, retry_mode="standard").deploy()
        with pytest.raises(DeployFailed) as info:
            deployment(bigger, session, clock, tmp_path, retry_mode="standard").gc()
    assert info.value.state == "partial"
    assert str(info.value).startswith(f"gc of 'docqa' left 1 unused resource(s): "
                                      f"endpoint-config {old_config} (DeleteEndpointConfig "
                                      "failed: InternalFailure")
    assert str(info.value).endswith("Run `lmikit gc SPEC` again to finish.")
    assert info.value.left == (next(x for x in info.value.left if old_config in x),)
