"""Deploy and destroy create and remove what the CDK stack declares besides SageMaker: the
execution role (``create_role``), the base component's autoscaling, the dashboard and the
alarms; a failed run puts back what these steps changed; a plan lists them read-only; and
the deploy leaves the copy count to autoscaling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.deploy import Deployment, StepContext
from lmikit.deploy._role import IAM_PROPAGATION_S
from lmikit.errors import DeployError, DeployFailed
from lmikit.names import DEPLOYMENT_TAG
from lmikit.render._alarms import alarm_definitions
from lmikit.render._cloudwatch import dashboard_body
from lmikit.render._scaling import no_capacity_alarm, render_scaling, service_linked_role_arn
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock

from ._account import extras, nothing
from .conftest import BUCKET, IMAGE, REGION, SPEC_YAML, spec_with

ACCOUNT = "123456789012"  # moto's
SCALE_TO_ZERO = "instance: {type: ml.g6e.2xlarge, min_count: 0, max_count: 2}\n"
READS = ("Describe", "List", "Get", "Head")


def _with_instance(tmp_path: Path, instance: str) -> Any:
    text = SPEC_YAML.replace("instance:\n  type: ml.g6e.2xlarge\n", instance)
    return load_spec_text(text, source=str(tmp_path / "spec.yaml"))


def _client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def _deployment(spec: Any, session: Any, clock: VirtualClock, tmp_path: Path,
                **kwargs: Any) -> Deployment:
    return Deployment(spec, session=session, bucket=BUCKET, base_dir=tmp_path,
                      image_uri=IMAGE, clock=clock, poll_seconds=10,
                      **{"create_role": True, **kwargs})


def _fail(ctx: StepContext) -> None:
    raise DeployError("a step after scaling and observability failed")


def test_deploy_with_min_count_zero_creates_scaling_dashboard_alarms_and_role(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    d = _deployment(spec, session, clock, tmp_path)
    d.deploy()
    have = extras(_client, "docqa")
    req = render_scaling(spec, role_arn=service_linked_role_arn("aws", ACCOUNT))
    assert have["scalable-targets"] == {"inference-component/docqa-base": (0, 2)}
    assert sorted(have["scaling-policies"]) == sorted(p["PolicyName"] for p in req.policies) \
        == ["docqa-base-scale-from-zero", "docqa-base-target-tracking"]
    rendered = {a.name for a in alarm_definitions(spec, d.plan)}
    assert set(have["alarms"]) == rendered | {"docqa-base-scale-from-zero"}
    cw = _client("cloudwatch")
    for alarm in cw.describe_alarms()["MetricAlarms"]:  # every alarm carries the tag
        tags = cw.list_tags_for_resource(ResourceARN=alarm["AlarmArn"])["Tags"]
        assert {"Key": DEPLOYMENT_TAG, "Value": "docqa"} in tags, alarm["AlarmName"]
    wake = cw.describe_alarms(AlarmNames=["docqa-base-scale-from-zero"])["MetricAlarms"][0]
    arn = next(p["PolicyARN"] for p in _client("application-autoscaling")
               .describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
               if p["PolicyName"] == "docqa-base-scale-from-zero")
    assert wake["AlarmActions"] == no_capacity_alarm(spec, arn)["AlarmActions"]
    assert json.loads(have["dashboards"]["docqa-lmikit"]) == dashboard_body(spec, d.plan)
    assert list(have["roles"]) == ["lmikit-docqa-execution"]
    config = next(iter(fake.control.configs.values())).request
    assert config["ExecutionRoleArn"] == f"arn:aws:iam::{ACCOUNT}:role/lmikit-docqa-execution"
    again = _deployment(spec, session, clock, tmp_path)
    assert [c.line() for c in again.plan_changes() if c.changed] == []
    assert not again.deploy().changed


def test_plan_lists_role_scaling_and_observability_without_writing(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    mark = len(fake.calls)
    changes = _deployment(spec, session, clock, tmp_path).plan_changes()
    writes = [c.operation for c in fake.calls[mark:] if not c.operation.startswith(READS)]
    assert writes == []
    assert extras(_client, "docqa") == nothing()
    planned = {(c.kind, c.name): c.action for c in changes}
    assert planned[("iam-role", "lmikit-docqa-execution")] == "create"
    assert planned[("iam-policy", "lmikit-docqa-execution")] == "create"
    assert planned[("scalable-target", "inference-component/docqa-base")] == "create"
    assert planned[("scaling-policy", "docqa-base-scale-from-zero")] == "create"
    assert planned[("alarm", "docqa-base-scale-from-zero")] == "create"
    assert planned[("dashboard", "docqa-lmikit")] == "create"
    kinds = [c.kind for c in changes]
    assert kinds.index("iam-role") < kinds.index("endpoint") < kinds.index("scalable-target")


@pytest.mark.parametrize("image_kind", ["stock", "lmikit"])
def test_plan_renders_the_cache_alarms_only_for_lmikits_image(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path,
        image_kind: Any) -> None:
    """The deployment passes its image to the observability step: AWS's stock image
    publishes no LMIKit/Container metrics, so no alarm on them is created."""
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    d = _deployment(spec, session, clock, tmp_path, image_kind=image_kind)
    planned = {c.name for c in d.plan_changes() if c.kind == "alarm"}
    assert ("docqa-lmikit-hit-rate-collapse" in planned) is (image_kind == "lmikit")
    assert {a.name for a in alarm_definitions(spec, d.plan, image=image_kind)} <= planned


def test_plan_reports_drift_of_scaling_and_alarms_and_deploy_repairs_it(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    _deployment(spec, session, clock, tmp_path).deploy()
    before = extras(_client, "docqa")
    _client("cloudwatch").delete_alarms(AlarmNames=["docqa-base-scale-from-zero"])
    _client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker", ResourceId="inference-component/docqa-base",
        ScalableDimension="sagemaker:inference-component:DesiredCopyCount", MaxCapacity=5)
    d = _deployment(spec, session, clock, tmp_path)
    drift = sorted(c.line() for c in d.plan_changes() if c.changed)
    assert drift == ["create alarm docqa-base-scale-from-zero",
                     "update scalable-target inference-component/docqa-base (0-5 -> 0-2 copies)"]
    d.deploy()
    assert extras(_client, "docqa") == before


def test_deploy_leaves_the_copy_count_to_autoscaling(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """With a scalable target registered, Application Auto Scaling owns DesiredCopyCount:
    a deploy does not scale the base back to its initial count, and a changed min/max is an
    update of the scalable target."""
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    _deployment(spec, session, clock, tmp_path).deploy()
    fake.settle()
    sm = session.client("sagemaker")
    sm.update_inference_component_runtime_config(  # what autoscaling does
        InferenceComponentName="docqa-base", DesiredRuntimeConfig={"CopyCount": 2})
    fake.settle()
    wider = _with_instance(tmp_path, "instance: {type: ml.g6e.2xlarge, min_count: 0, "
                                     "max_count: 3}\n")
    d = _deployment(wider, session, clock, tmp_path)
    planned = {(c.kind, c.name): c for c in d.plan_changes()}
    base = planned[("inference-component", "docqa-base")]
    assert (base.action, base.detail) == ("unchanged", "copies 2, set by autoscaling")
    assert planned[("scalable-target", "inference-component/docqa-base")].action == "update"
    mark = len(fake.calls)
    d.deploy()
    fake.settle()
    assert [c.operation for c in fake.calls[mark:]
            if c.operation == "UpdateInferenceComponentRuntimeConfig"] == []
    desc = sm.describe_inference_component(InferenceComponentName="docqa-base")
    assert desc["RuntimeConfig"]["DesiredCopyCount"] == 2
    assert extras(_client, "docqa")["scalable-targets"] == {
        "inference-component/docqa-base": (0, 3)}


def test_failed_first_deploy_leaves_no_scaling_alarm_dashboard_or_role(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    d = _deployment(_with_instance(tmp_path, SCALE_TO_ZERO), session, clock, tmp_path)
    d.post_deploy_steps.append(_fail)
    with pytest.raises(DeployFailed) as info:
        d.deploy()
    assert info.value.state == "old", str(info.value)
    assert extras(_client, "docqa") == nothing()
    fake.settle()
    assert {k: v for k, v in fake.resources().items() if v} == {}


def test_failed_update_puts_scaling_alarms_and_dashboard_back(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    old = _with_instance(tmp_path, SCALE_TO_ZERO)
    _deployment(old, session, clock, tmp_path).deploy()
    cw = _client("cloudwatch")
    wake = cw.describe_alarms(AlarmNames=["docqa-base-scale-from-zero"])["MetricAlarms"][0]
    cw.tag_resource(ResourceARN=wake["AlarmArn"], Tags=[{"Key": "team", "Value": "search"}])
    before = extras(_client, "docqa")
    # min 1 drops the scale-from-zero policy and alarm; max 3 and a new threshold update
    new = _with_instance(tmp_path, "instance: {type: ml.g6e.2xlarge, max_count: 3}\n"
                         "observability: {alarms: {error_5xx_rate_percent: 2.5}}\n"
                         "engine: {max_batch_size: 16}\n")
    d = _deployment(new, session, clock, tmp_path)
    d.post_deploy_steps.append(_fail)
    with pytest.raises(DeployFailed) as info:
        d.deploy()
    assert info.value.state == "old", str(info.value)
    assert extras(_client, "docqa") == before


@pytest.mark.slow
def test_step_failing_halfway_is_undone(fake: FakeSageMaker, session: Any,
                                        clock: VirtualClock, tmp_path: Path) -> None:
    """The undo is registered before the step's first write: a step that fails after the
    dashboard is stored but before its alarms are still leaves nothing behind."""
    d = _deployment(spec_with(tmp_path), session, clock, tmp_path, retry_mode="standard")
    fake.inject("PutMetricAlarm", "5xx", times=50)
    with pytest.raises(DeployFailed, match="PutMetricAlarm") as info:
        d.deploy()
    assert info.value.state == "old", str(info.value)
    assert extras(_client, "docqa") == nothing()


def test_destroy_removes_scaling_dashboard_alarms_and_role_and_status_lists_them(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    d = _deployment(spec, session, clock, tmp_path)
    d.deploy()
    rows = {(r.kind, r.name) for r in d.status()}
    assert {("scalable-target", "inference-component/docqa-base"),
            ("scaling-policy", "docqa-base-scale-from-zero"),
            ("alarm", "docqa-base-scale-from-zero"), ("dashboard", "docqa-lmikit"),
            ("iam-role", "lmikit-docqa-execution")} <= rows
    result = _deployment(spec, session, clock, tmp_path).destroy()
    kinds = [c.kind for c in result.changes if c.action == "delete"]
    assert kinds.index("scalable-target") < kinds.index("inference-component")
    assert kinds.index("endpoint") < kinds.index("iam-role")
    assert extras(_client, "docqa") == nothing()
    assert _client("iam").list_policies(Scope="Local")["Policies"] == []
    fake.settle()
    assert {k: v for k, v in fake.resources().items() if v} == {}
    assert _client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", []) == []


def test_deploy_waits_for_iam_to_propagate_a_role_it_created_and_only_then(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    events: list[Any] = []
    _deployment(spec, session, clock, tmp_path, progress=events.append).deploy()
    waits = [e for e in events if e.kind == "iam-role" and e.action == "wait"]
    assert len(waits) == 1 and f"{IAM_PROPAGATION_S:.0f} s" in waits[0].status
    first_sagemaker_write = next(e for e in events if e.kind in ("model", "endpoint-config"))
    assert first_sagemaker_write.at - waits[0].at >= IAM_PROPAGATION_S
    events.clear()
    _deployment(spec, session, clock, tmp_path, progress=events.append).deploy()
    assert not [e for e in events if e.action == "wait" and e.kind == "iam-role"]


def test_in_the_sandbox_a_new_role_is_used_at_once(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's IAM (moto's) is consistent at once, and the variables `lmikit sandbox
    serve` prints say so: a role created there is not waited for."""
    from lmikit.testing._server import Sandbox

    printed = Sandbox(fake, "127.0.0.1", 4566, 4567, None, None).env()  # type: ignore[arg-type]
    for key, value in printed.items():
        if key.startswith("LMIKIT_"):
            monkeypatch.setenv(key, value)
    events: list[Any] = []
    _deployment(_with_instance(tmp_path, SCALE_TO_ZERO), session, clock, tmp_path,
                progress=events.append).deploy()
    role = next(e for e in events if e.kind == "iam-role" and e.action == "create")
    assert not [e for e in events if e.action == "wait"]
    first_sagemaker_write = next(e for e in events if e.kind in ("model", "endpoint-config"))
    assert first_sagemaker_write.at - role.at < 1  # no sleep on the fake's clock between


def test_an_iam_wait_that_is_not_a_number_of_seconds_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lmikit.deploy._role import iam_propagation_seconds

    monkeypatch.setenv("LMIKIT_IAM_PROPAGATION_SECONDS", "soon")
    with pytest.raises(DeployError, match="LMIKIT_IAM_PROPAGATION_SECONDS='soon' must be a "
                                          "number of seconds from 0 to 3600"):
        iam_propagation_seconds()


def test_destroy_without_iam_rights_finishes_and_says_the_role_was_not_checked(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    _deployment(spec, session, clock, tmp_path, create_role=False,
                role_arn="arn:aws:iam::123456789012:role/mine").deploy()
    fake.inject("GetRole", "denied", times=5)
    result = _deployment(spec, session, clock, tmp_path, create_role=False).destroy()
    fake.settle()
    assert {k: v for k, v in fake.resources().items() if v} == {}
    assert any("not checked: no permission to read IAM (AccessDenied)" in n
               for n in result.notes), result.notes
    assert "unknown iam-role lmikit-docqa-execution" in result.summary()


def test_progress_rows_of_a_deploy_that_creates_the_role_all_settle(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    from lmikit.cli._deploy import ProgressTable

    table = ProgressTable("deploy", clock=clock.monotonic)
    _deployment(_with_instance(tmp_path, SCALE_TO_ZERO), session, clock, tmp_path,
                progress=table).deploy()
    open_rows = {key: row["status"] for key, row in table.rows.items() if row["end"] is None}
    assert open_rows == {}  # the IAM wait ends in "done", not in a row left waiting
    assert table.rows[("iam-role", "lmikit-docqa-execution")]["status"] == "done"


def test_progress_rows_of_a_rolled_back_deploy_say_so(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    events: list[Any] = []
    d = _deployment(_with_instance(tmp_path, SCALE_TO_ZERO), session, clock, tmp_path,
                    progress=events.append)
    d.post_deploy_steps.append(_fail)
    with pytest.raises(DeployFailed, match="a step after scaling and observability failed"):
        d.deploy()
    last = {(e.kind, e.name): (e.action, e.status) for e in events}
    assert last[("iam-role", "lmikit-docqa-execution")] == ("rollback", "rolled back")
    assert last[("iam-policy", "lmikit-docqa-execution")] == ("rollback", "rolled back")
    assert last[("alarm", "docqa-lmikit-5xx-rate")] == ("rollback", "rolled back")
    config = next(key for key in last if key[0] == "endpoint-config")
    assert last[config] == ("rollback", "deleted")
    artifacts = [status for key, status in last.items() if key[0] == "artifact"]
    assert artifacts and all(s == ("rollback", "deleted") for s in artifacts)


def test_deploy_without_a_role_reuses_the_deployed_endpoints_role(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    spec = _with_instance(tmp_path, SCALE_TO_ZERO)
    with pytest.raises(DeployError, match="'docqa' is not deployed in us-east-1 yet, so there "
                       "is no role to reuse; pass role_arn="):
        _deployment(spec, session, clock, tmp_path, create_role=False).plan_changes()
    first = _deployment(spec, session, clock, tmp_path)
    first.deploy()
    again = _deployment(spec, session, clock, tmp_path, create_role=False)
    assert [c.line() for c in again.plan_changes() if c.changed] == []
    assert again.role_arn == first.role_arn
    assert again.deploy().summary().startswith("No changes")
