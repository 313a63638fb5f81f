"""A deployment in capacity a training plan reserved: the fake refuses what SageMaker refuses
(an unknown plan, a plan of another instance type) and the deploy leaves nothing behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.errors import DeployError
from lmikit.loader import load_spec_text
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
    assert fake.plane("us-west-2").training_plans == {arn: "ml.p5e.48xlarge"}
    assert fake.plane("us-east-1").training_plans == {}


def test_the_fake_refuses_a_plan_of_a_type_no_training_plan_reserves(fake: FakeSageMaker) -> None:
    with pytest.raises(ValueError, match="a training plan cannot reserve ml.g6e.2xlarge"):
        fake.add_training_plan("g6e", "ml.g6e.2xlarge")
