"""A deployment in capacity a training plan reserved: the fake refuses what SageMaker refuses
(an unknown plan, a plan of another instance type) and the deploy leaves nothing behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.errors import DeployError
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import REGION, ROLE, deployment, live

SPEC = """
api_version: v1
name: reserved
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.p4d.24xlarge
  capacity_reservation_arn: {arn}
kv_cache:
  mode: cpu
"""


def _config(arn: str, instance_type: str = "ml.p4d.24xlarge") -> dict[str, Any]:
    return {"EndpointConfigName": "c", "ExecutionRoleArn": ROLE, "ProductionVariants": [{
        "VariantName": "AllTraffic", "InstanceType": instance_type, "InitialInstanceCount": 1,
        "CapacityReservationConfig": {"CapacityReservationPreference":
                                      "capacity-reservations-only", "MlReservationArn": arn}}]}


def test_the_fake_takes_a_config_in_a_known_plan_of_its_type(fake: FakeSageMaker,
                                                             session: Any) -> None:
    arn = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge")
    assert arn == "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p4d-endpoints"
    sm = session.client("sagemaker", region_name=REGION)
    sm.create_endpoint_config(**_config(arn))
    got = sm.describe_endpoint_config(EndpointConfigName="c")["ProductionVariants"][0]
    assert got["CapacityReservationConfig"]["MlReservationArn"] == arn


def test_the_fake_refuses_an_unknown_plan_and_a_plan_of_another_type(fake: FakeSageMaker,
                                                                    session: Any) -> None:
    from botocore.exceptions import ClientError

    sm = session.client("sagemaker", region_name=REGION)
    unknown = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/none"
    with pytest.raises(ClientError, match="Could not find training plan"):
        sm.create_endpoint_config(**_config(unknown))
    arn = fake.add_training_plan("p5-endpoints", "ml.p5.48xlarge")
    with pytest.raises(ClientError, match="does not match the instance type of training plan"):
        sm.create_endpoint_config(**_config(arn))
    # a plan is regional: the same name in another region is another plan
    other = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge", region="us-west-2")
    with pytest.raises(ClientError, match="Could not find training plan"):
        sm.create_endpoint_config(**_config(other))
    assert live(fake) == {}


def test_a_deploy_into_a_plan_runs_and_one_into_an_unknown_plan_leaves_nothing(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    missing = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/missing"
    spec = load_spec_text(SPEC.format(arn=missing), source=str(tmp_path / "spec.yaml"))
    with pytest.raises(DeployError, match="Could not find training plan") as info:
        deployment(spec, session, clock, tmp_path).deploy()
    assert info.value.state == "old" and live(fake) == {}  # type: ignore[attr-defined]

    arn = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge")
    spec = load_spec_text(SPEC.format(arn=arn), source=str(tmp_path / "spec.yaml"))
    deployment(spec, session, clock, tmp_path).deploy()
    sm = session.client("sagemaker", region_name=REGION)
    config = sm.describe_endpoint(EndpointName="reserved")["EndpointConfigName"]
    variant = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]
    assert variant["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only", "MlReservationArn": arn}


def test_a_plan_may_be_registered_by_the_arn_a_spec_names(fake: FakeSageMaker) -> None:
    arn = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/p5e-endpoints"
    assert fake.add_training_plan(arn, "ml.p5e.48xlarge") == arn
    assert {a: p.instance_type for a, p in fake.plane("us-west-2").training_plans.items()} \
        == {arn: "ml.p5e.48xlarge"}
    assert fake.plane("us-east-1").training_plans == {}


def test_the_fake_refuses_a_plan_of_a_type_no_training_plan_reserves(fake: FakeSageMaker) -> None:
    with pytest.raises(ValueError, match="a training plan cannot reserve ml.g6e.2xlarge"):
        fake.add_training_plan("g6e", "ml.g6e.2xlarge")


def test_describe_training_plan_answers_as_the_service_model_says(fake: FakeSageMaker,
                                                                  session: Any) -> None:
    from botocore.exceptions import ClientError

    arn = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge", count=2, hours=48)
    sm = session.client("sagemaker", region_name=REGION)
    got = sm.describe_training_plan(TrainingPlanName="p4d-endpoints")
    assert (got["TrainingPlanArn"], got["Status"], got["TotalInstanceCount"]) == (arn, "Active", 2)
    assert (got["EndTime"] - got["StartTime"]).total_seconds() == 48 * 3600
    assert got["DurationHours"] == 48 and got["TargetResources"] == ["endpoint"]
    assert got["ReservedCapacitySummaries"][0]["InstanceType"] == "ml.p4d.24xlarge"
    with pytest.raises(ClientError) as info:
        sm.describe_training_plan(TrainingPlanName="none")
    assert info.value.response["Error"]["Code"] == "ResourceNotFound"  # botocore's error shape


def _capacity(spec_text: str, session: Any, clock: VirtualClock, tmp_path: Path):
    import datetime as dt

    from lmikit.deploy._doctor import Doctor

    spec = load_spec_text(spec_text, source=str(tmp_path / "spec.yaml"))
    now = dt.datetime.fromtimestamp(clock.time(), tz=dt.timezone.utc)
    return Doctor(spec, session=session, base_dir=tmp_path, now=now).capacity()


def test_doctor_reads_the_plan_a_deployment_runs_in(fake: FakeSageMaker, session: Any,
                                                    clock: VirtualClock,
                                                    tmp_path: Path) -> None:
    import datetime as dt

    from lmikit.deploy._doctor import doctor

    arn = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge", hours=24 * 30)
    spec = load_spec_text(SPEC.format(arn=arn), source=str(tmp_path / "spec.yaml"))
    deployment(spec, session, clock, tmp_path).deploy()
    now = dt.datetime.fromtimestamp(clock.time(), tz=dt.timezone.utc)  # the fake's clock
    report = doctor(spec, session=session, base_dir=tmp_path, now=now)
    check = report.check("capacity")
    assert check.verdict == "ok", check.line()
    assert check.detail.startswith("training plan p4d-endpoints is Active until ")
    assert check.detail.endswith("with 1 instance(s) of ml.p4d.24xlarge")


def test_doctor_warns_before_the_plan_ends_and_fails_once_it_has(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    from lmikit.deploy._doctor import PLAN_ENDING_S

    # the rule: a plan with less than 7 days left warns (the endpoint stops serving then)
    assert PLAN_ENDING_S == 7 * 86400
    arn = fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge", hours=24 * 7 - 1)
    check = _capacity(SPEC.format(arn=arn), session, clock, tmp_path)
    assert check.verdict == "warn" and "in 167 h: the endpoint stops serving then" in \
        check.detail, check.line()
    fake.add_training_plan("p4d-endpoints", "ml.p4d.24xlarge", hours=24 * 7 + 1)
    assert _capacity(SPEC.format(arn=arn), session, clock, tmp_path).verdict == "ok"
    clock.advance(24 * 7 * 3600 + 7200)  # past its end, the service not yet saying Expired
    check = _capacity(SPEC.format(arn=arn), session, clock, tmp_path)
    assert check.verdict == "fail" and "ended" in check.detail, check.line()
    fake.control.training_plans[arn].status = "Expired"
    check = _capacity(SPEC.format(arn=arn), session, clock, tmp_path)
    assert check.verdict == "fail" and "is Expired" in check.detail
    assert "instance.capacity_reservation_arn" in check.fix


def test_doctor_fails_a_missing_plan_and_warns_of_scaling_past_it(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    missing = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/missing"
    check = _capacity(SPEC.format(arn=missing), session, clock, tmp_path)
    assert check.verdict == "fail" and "does not exist in us-east-1" in check.detail
    arn = fake.add_training_plan("two", "ml.p4d.24xlarge", count=2)
    wide = SPEC.format(arn=arn).replace("  type: ml.p4d.24xlarge\n",
                                        "  type: ml.p4d.24xlarge\n  max_count: 3\n")
    check = _capacity(wide, session, clock, tmp_path)
    assert check.verdict == "warn" and check.fix == "lower instance.max_count to 2, or reserve more"
    fake.control.training_plans[arn].status = "Scheduled"
    check = _capacity(SPEC.format(arn=arn), session, clock, tmp_path)
    assert check.verdict == "warn" and "is Scheduled, from " in check.detail
    none = SPEC.format(arn=arn).replace(f"  capacity_reservation_arn: {arn}\n", "")
    assert _capacity(none, session, clock, tmp_path) is None  # no plan, no check
