"""Deployment against the strict fake: create, converge, update, reconcile, destroy, status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.aws import ProgressEvent
from lmikit.deploy import Deployment
from lmikit.deploy._plan import Desired, Observed, plan_steps
from lmikit.errors import DeployError, RenderError
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import BUCKET, IMAGE, ROLE, deployment, live, make_adapter, spec_with

MUTATING = ("Create", "Update", "Delete", "Put", "Add")


def _sagemaker_writes(fake: FakeSageMaker, since: int = 0) -> list[str]:
    return [c.operation for c in fake.calls[since:]
            if c.service == "sagemaker" and c.operation.startswith(MUTATING)]


def test_deploy_creates_every_resource_in_service(fake: FakeSageMaker, session: Any,
                                                  clock: VirtualClock, spec: Any,
                                                  tmp_path: Path) -> None:
    result = deployment(spec, session, clock, tmp_path).deploy()
    assert [(c.kind, c.action) for c in result.changes
            if c.kind in ("endpoint-config", "endpoint", "inference-component")] == [
        ("endpoint-config", "create"), ("endpoint", "create"),
        ("inference-component", "create")]
    res = fake.resources()
    assert res["endpoint"] == {"docqa": "InService"}
    assert res["inference-component"] == {"docqa-base": "InService"}
    assert len(res["endpoint-config"]) == 1


def test_deploy_sends_requests_the_service_model_accepts(fake: FakeSageMaker, session: Any,
                                                         clock: VirtualClock, spec: Any,
                                                         tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    writes = [c for c in fake.calls if c.service == "sagemaker"
              and c.operation.startswith(MUTATING)]
    assert writes and all(c.error is None for c in writes)
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
    assert _sagemaker_writes(fake, before) == []
    s3_writes = [c.operation for c in fake.calls[before:] if c.service == "s3"
                 and c.operation.startswith(MUTATING)]
    assert s3_writes == ["PutObject", "DeleteObject"]  # the lease, taken and released


def test_deploy_tags_the_endpoint_with_its_bucket(fake: FakeSageMaker, session: Any,
                                                 clock: VirtualClock, spec: Any,
                                                 tmp_path: Path) -> None:
    deployment(spec, session, clock, tmp_path).deploy()
    sm = session.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName="docqa")["EndpointArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags == {"lmikit:deployment": "docqa", "lmikit:bucket": BUCKET}
    again = Deployment(spec, session=session, role_arn=ROLE, base_dir=tmp_path,
                       image_uri=IMAGE, clock=clock)
    assert again.bucket == BUCKET  # found on the endpoint, not sagemaker-<region>-<account>


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
    assert ("endpoint-config", old_config, "delete") in {
        (c.kind, c.name, c.action) for c in result.changes}  # garbage collection
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
    assert "RuntimeConfig" not in update  # autoscaling owns the copy count
    policy = update["DeploymentConfig"]
    assert policy["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "COPY_COUNT",
                                                                 "Value": 1}
    alarm = policy["AutoRollbackConfiguration"]["Alarms"][0]["AlarmName"]
    cw = boto3.client("cloudwatch", region_name="us-east-1")
    alarms = cw.describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    assert alarms[0]["MetricName"] == "Invocation5XXErrors"
    tags = cw.list_tags_for_resource(ResourceARN=alarms[0]["AlarmArn"])["Tags"]
    assert {"Key": "lmikit:deployment", "Value": "docqa"} in tags


def test_deploy_base_environment_change_is_a_change(fake: FakeSageMaker, session: Any,
                                                    clock: VirtualClock,
                                                    tmp_path: Path) -> None:
    d = deployment(spec_with(tmp_path), session, clock, tmp_path)
    d.deploy()
    desired = d.desired()
    body = desired.requests.base_component
    env = dict(body["Specification"]["Container"]["Environment"])
    seen = Observed(endpoint={"EndpointStatus": "InService",
                              "EndpointConfigName": desired.requests.names.endpoint_config},
                    endpoint_tags={"lmikit:bucket": BUCKET}, config_exists=True,
                    existing_artifacts={a.url for a in desired.artifacts})
    described = session.client("sagemaker").describe_inference_component(
        InferenceComponentName="docqa-base")
    seen.components["docqa-base"] = described
    assert {s.action for s in plan_steps(desired, seen)} == {"unchanged"}
    for change in ({**env, "OPTION_MAX_ROLLING_BATCH_SIZE": "7"},
                   {k: v for k, v in env.items() if k != "PYTHONHASHSEED"}):
        body["Specification"]["Container"]["Environment"] = change
        step = next(s for s in plan_steps(desired, seen) if s.name == "docqa-base")
        assert (step.action, step.change.detail) == ("update", "changed: environment")
    body["Specification"]["Container"]["Environment"] = env


def test_deploy_failed_base_update_is_reported_and_previous_kept(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    deployment(spec_with(tmp_path), session, clock, tmp_path).deploy()
    fake.inject("UpdateInferenceComponent", "failed", reason="health check failed")
    changed = spec_with(tmp_path, "engine:\n  gpu_memory_utilization: 0.85\n")
    with pytest.raises(DeployError, match="rolled back.*health check failed") as info:
        deployment(changed, session, clock, tmp_path).deploy()
    assert info.value.state == "old"  # type: ignore[attr-defined]
    assert fake.resources()["inference-component"] == {"docqa-base": "InService"}


def test_deploy_adapters_are_created_in_parallel(fake: FakeSageMaker, session: Any,
                                                 clock: VirtualClock, lora_spec: Any,
                                                 tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    comps = fake.resources()["inference-component"]
    assert comps == {"docqa-base": "InService", "docqa-legal": "InService",
                     "docqa-medical": "InService"}


def test_deploy_removes_an_adapter_the_spec_no_longer_lists(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    only_legal = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n")
    planned = deployment(only_legal, session, clock, tmp_path).plan_changes()
    line = next(c.line() for c in planned if c.name == "docqa-medical")
    assert line.startswith("delete inference-component docqa-medical (adapter 'medical' is "
                           "not in the spec; --keep-unlisted-adapters keeps it")
    deployment(only_legal, session, clock, tmp_path).deploy()
    assert set(live(fake)["inference-component"]) == {"docqa-base", "docqa-legal"}
    objects = boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET, Prefix="lmikit/docqa/adapters/medical/")
    assert objects["KeyCount"] == 0  # its artifact, no longer used, was collected


def test_deploy_keep_unlisted_adapters_keeps_them(fake: FakeSageMaker, session: Any,
                                                  clock: VirtualClock, lora_spec: Any,
                                                  tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    only_legal = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n")
    result = deployment(only_legal, session, clock, tmp_path,
                        keep_unlisted_adapters=True).deploy()
    assert ("inference-component", "docqa-medical", "kept") in {
        (c.kind, c.name, c.action) for c in result.changes}
    assert "docqa-medical" in live(fake)["inference-component"]
    objects = boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET, Prefix="lmikit/docqa/adapters/medical/")
    assert objects["KeyCount"] == 1  # still used: never collected


def test_dry_run_prints_the_diff_and_calls_nothing_that_changes(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
        tmp_path: Path) -> None:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    make_adapter(tmp_path / "adapters", "tax")
    new = spec_with(tmp_path, "engine:\n  max_batch_size: 16\nadapters:\n"
                    "  - {name: tax, source: adapters/tax}\n"
                    "  - {name: legal, source: adapters/legal}\n")
    new = new.model_copy(update={"instance": new.instance.model_copy(update={"max_count": 2})})
    mark = len(fake.calls)
    changes = deployment(new, session, clock, tmp_path).plan_changes()
    assert [c for c in fake.calls[mark:] if c.operation.startswith(MUTATING)] == []
    actions = {(c.kind, c.name.split("/")[-2] if c.kind == "artifact" else c.name, c.action)
               for c in changes}
    assert ("endpoint", "docqa", "update") in actions
    assert ("inference-component", "docqa-base", "update") in actions
    assert ("inference-component", "docqa-tax", "create") in actions
    assert ("inference-component", "docqa-medical", "delete") in actions
    assert ("inference-component", "docqa-legal", "unchanged") in actions
    assert ("artifact", "tax", "upload") in actions
    assert ("artifact", "medical", "delete") in actions  # no longer used afterwards
    old_config = next(iter(fake.resources()["endpoint-config"]))
    assert ("endpoint-config", old_config, "delete") in actions


def test_deploy_reports_progress_with_elapsed_time(fake: FakeSageMaker, session: Any,
                                                   clock: VirtualClock, spec: Any,
                                                   tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    deployment(spec, session, clock, tmp_path, progress=events.append).deploy()
    endpoint = [e for e in events if e.kind == "endpoint"]
    assert endpoint[-1].status == "InService"
    assert endpoint[-1].elapsed_s >= 300  # the fake's endpoint creation time
    assert endpoint[-1].at - endpoint[0].at >= 300


def test_progress_table_shows_elapsed_time_while_waiting() -> None:
    from lmikit.cli._deploy import ProgressTable

    now = [100.0]
    table = ProgressTable("deploy", clock=lambda: now[0])
    table(ProgressEvent("endpoint", "docqa", "create", "Creating", 0.0, "", 100.0))
    now[0] = 160.0  # still Creating, no new event: the row keeps counting
    assert table.elapsed(("endpoint", "docqa")) == 60.0
    assert "(60s)" in str(table.render().title)
    table(ProgressEvent("endpoint", "docqa", "create", "InService", 70.0, "", 170.0))
    now[0] = 500.0
    assert table.elapsed(("endpoint", "docqa")) == 70.0


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
    s3 = boto3.client("s3", region_name="us-east-1")
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix="lmikit/docqa/")["KeyCount"] == 0


def test_destroy_keep_artifacts_keeps_them(fake: FakeSageMaker, session: Any,
                                           clock: VirtualClock, spec: Any,
                                           tmp_path: Path) -> None:
    d = deployment(spec, session, clock, tmp_path)
    d.deploy()
    d.destroy(keep_artifacts=True)
    assert live(fake) == {}
    keys = [o["Key"] for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET, Prefix="lmikit/docqa/")["Contents"]]
    assert len(keys) == 1 and keys[0].startswith("lmikit/docqa/model/")


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
        Deployment(spec, session=session, bucket="my-bucket", image_uri=IMAGE).deploy()


@pytest.mark.parametrize("bucket,why", [
    ("Invalid_Bucket!", r"contains '!' 'B' 'I' '_' \(only lowercase letters"),
    ("ab", "it has 2 characters"),
    ("my..bucket", "two adjacent periods"),
    ("192.168.5.4", "formatted as an IP address"),
    ("-bucket", "begin and end with a lowercase letter or a digit"),
    ("xn--bucket", "reserved prefix 'xn--'"),
    ("bucket-s3alias", "reserved suffix '-s3alias'"),
])
def test_deploy_refuses_an_invalid_bucket_before_anything(fake: FakeSageMaker, session: Any,
                                                          spec: Any, bucket: str,
                                                          why: str) -> None:
    with pytest.raises(DeployError, match=why) as info:
        Deployment(spec, session=session, role_arn=ROLE, bucket=bucket, image_uri=IMAGE)
    assert str(info.value).startswith(f"bucket {bucket!r} is not a valid S3 bucket name: ")
    assert fake.calls == []


def test_deploy_resolves_the_real_lmi_image(fake: FakeSageMaker, session: Any,
                                            clock: VirtualClock, spec: Any,
                                            tmp_path: Path) -> None:
    d = Deployment(spec, session=session, role_arn=ROLE, bucket="lmikit-test-artifacts",
                   base_dir=tmp_path, clock=clock)
    d.deploy()
    image = fake.operations("CreateInferenceComponent")[0].params["Specification"][
        "Container"]["Image"]
    assert "djl-inference:0.38.0" in image and image.startswith("763104351884.dkr.ecr")


def test_desired_is_rendered_without_touching_aws(fake: FakeSageMaker, session: Any,
                                                  clock: VirtualClock, lora_spec: Any,
                                                  tmp_path: Path) -> None:
    desired: Desired = deployment(lora_spec, session, clock, tmp_path).desired()
    assert [a.label for a in desired.artifacts] == ["model", "adapter legal", "adapter medical"]
    assert fake.calls == []


def test_stock_image_refuses_an_hf_token_secret_before_anything(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-AbCdEf"
    spec = spec_with(tmp_path, f"security:\n  hf_token_secret_arn: {arn}\n")
    with pytest.raises(RenderError, match="stock LMI image cannot read a Secrets Manager"):
        deployment(spec, session, clock, tmp_path).deploy()
    assert fake.calls == []


def test_post_deploy_steps_run_in_service_and_roll_back_with_the_run(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        tmp_path: Path) -> None:
    from lmikit.deploy import Change, StepContext

    seen: list[str] = []

    def step(ctx: StepContext) -> list[Change]:
        seen.append(fake.resources()["inference-component"]["docqa-base"])
        ctx.on_rollback("dashboard docqa", lambda: seen.append("undone"))
        return [Change("dashboard", "docqa", "create")]

    def broken(ctx: StepContext) -> None:
        raise DeployError("PutDashboard failed: injected")

    d = deployment(spec, session, clock, tmp_path)
    d.post_deploy_steps += [step, broken]
    with pytest.raises(DeployError, match="PutDashboard failed: injected") as info:
        d.deploy()
    assert seen == ["InService", "undone"]
    assert info.value.state == "old" and live(fake) == {}  # type: ignore[attr-defined]
    d.post_deploy_steps = [step]
    assert ("dashboard", "create") in {(c.kind, c.action) for c in d.deploy().changes}


def test_pre_destroy_steps_run_before_anything_is_deleted(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: Any,
        tmp_path: Path) -> None:
    d = deployment(spec, session, clock, tmp_path)
    d.deploy()
    seen: list[dict[str, Any]] = []
    d.pre_destroy_steps.append(lambda ctx: seen.append(live(fake)) or None)
    d.destroy()
    assert seen[0]["endpoint"] == {"docqa": "InService"} and live(fake) == {}
