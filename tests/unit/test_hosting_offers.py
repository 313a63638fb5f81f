"""Where AWS sells each catalog type for SageMaker hosting on demand, checked against cfn-lint's
copy of the AWS Price List, and what lmikit says where a spec's region has none."""

from __future__ import annotations

import json
from importlib import resources
from importlib.metadata import version
from pathlib import Path

import cfnlint
import pytest

from lmikit.accept._accept import accept_spec
from lmikit.catalog import _offers as offers
from lmikit.catalog._instances import INSTANCES
from lmikit.catalog._prices import price_or_reason
from lmikit.errors import SpecError
from lmikit.spec._loader import load_spec_text
from tests.conftest import ROOT

SPEC = """
api_version: v1
name: big
region: {region}
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: {type}
{extra}"""
PLAN_ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5e-endpoints"


def _cfn_lint_file() -> dict:
    path = resources.files(cfnlint).joinpath(offers.SOURCE_FILE)
    return json.loads(path.read_text())


def test_the_table_is_cfn_lints_price_list_copy_cut_to_the_catalog() -> None:
    table = json.loads((ROOT / "sdk/lmikit/catalog/hosting_offers.json").read_text())
    assert table["cfn_lint_version"] == version("cfn-lint"), (
        "pyproject pins the cfn-lint the table was cut from: regenerate the table with "
        "`python -m lmikit.catalog._offers > sdk/lmikit/catalog/hosting_offers.json` when "
        "the pin moves")
    assert table["regions"] == offers.from_cfn_lint(_cfn_lint_file(), INSTANCES)


def test_every_region_the_price_list_names_is_in_the_table_even_with_no_gpu_type() -> None:
    listed = {r for r, entry in _cfn_lint_file().items() if isinstance(entry, dict)}
    assert set(offers.regions()) == listed
    assert offers.regions()["af-south-1"] == frozenset()  # known: sells none of the catalog
    assert offers.offered("af-south-1", "ml.g6e.2xlarge") is False


def test_known_rows() -> None:
    # a few rows read in cfn-lint 1.58.0's file by hand
    assert offers.offered("us-east-1", "ml.g6e.2xlarge") is True
    assert offers.offered("eu-west-1", "ml.g6e.2xlarge") is False
    assert offers.offered("us-west-2", "ml.p4de.24xlarge") is True
    assert offers.regions_offering("ml.p5e.48xlarge") == []  # training plans only
    assert "us-east-1" in offers.regions_offering("ml.p5en.48xlarge")


def test_problem_names_the_field_the_value_the_region_and_where_it_is_sold() -> None:
    text = offers.on_demand_problem("eu-west-1", "ml.g6e.2xlarge")
    assert text is not None
    assert text.startswith("instance.type ml.g6e.2xlarge has no on-demand SageMaker hosting "
                           "in region eu-west-1 (regions that sell it on demand: ")
    assert "us-east-1" in text and "eu-west-1, " not in text
    assert "no training plan reserves it" in text and "cfn-lint 1.58.0" in text
    nowhere = offers.on_demand_problem("us-east-1", "ml.p5e.48xlarge")
    assert nowhere is not None and "no region sells it on demand" in nowhere
    assert offers.on_demand_problem("us-east-1", "ml.g6e.2xlarge") is None
    assert offers.on_demand_problem("xx-nowhere-1", "ml.g6e.2xlarge") is None  # not known


def _accept(tmp_path: Path, region: str, type_: str, extra: str = ""):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(region=region, type=type_, extra=extra))
    return accept_spec(path, ("sagemaker",))


def test_a_type_with_no_on_demand_hosting_warns_and_renders_without_a_reservation(
        tmp_path: Path) -> None:
    accepted = _accept(tmp_path, "eu-west-1", "ml.g6e.2xlarge")
    assert [w for w in accepted.warnings if w.startswith("instance.type ml.g6e.2xlarge has no")]
    variant = json.loads(accepted.rendered["sagemaker"])["CreateEndpointConfig"][
        "ProductionVariants"][0]
    assert "CapacityReservationConfig" not in variant
    sold = _accept(tmp_path, "us-east-1", "ml.g6e.2xlarge")
    assert not [w for w in sold.warnings if "on-demand" in w]


def test_a_reservation_renders_capacity_reservations_only_and_silences_the_warning(
        tmp_path: Path) -> None:
    accepted = _accept(tmp_path, "us-east-1", "ml.p5e.48xlarge",
                       f"  capacity_reservation_arn: {PLAN_ARN}\n")
    variant = json.loads(accepted.rendered["sagemaker"])["CreateEndpointConfig"][
        "ProductionVariants"][0]
    # the only value botocore's model allows, and the one AWS's guide uses for training plans
    assert variant["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": PLAN_ARN}
    assert not [w for w in accepted.warnings if "on-demand" in w]


def test_reservation_preference_is_botocores_only_enum_value() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    config = model.shape_for("ProductionVariant").members["CapacityReservationConfig"]
    assert config.members["CapacityReservationPreference"].enum == ["capacity-reservations-only"]


@pytest.mark.parametrize(("arn", "expected"), [
    ("arn:aws:sagemaker:eu-west-1:111122223333:training-plan/p5e",
     "instance.capacity_reservation_arn .*is in region eu-west-1 but the spec deploys to "
     "us-east-1.*give one in us-east-1"),
    ("arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1",
     "instance.capacity_reservation_arn"),
    ("training-plan/p5e", "instance.capacity_reservation_arn"),
])
def test_a_reservation_of_another_region_or_service_is_refused(arn: str, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        load_spec_text(SPEC.format(region="us-east-1", type="ml.p5e.48xlarge",
                                   extra=f"  capacity_reservation_arn: {arn}\n"))


def test_price_reason_says_there_is_no_on_demand_price_to_fetch() -> None:
    reason = price_or_reason("ml.p5e.48xlarge", "us-east-1")
    assert isinstance(reason, str)
    assert reason.startswith("no on-demand price: ml.p5e.48xlarge has no on-demand SageMaker "
                             "hosting in us-east-1 (no region sells it on demand")
    assert "prices fetch" not in reason
    # a type AWS sells there but lmikit's table lacks: fetch can read it
    fetchable = price_or_reason("ml.g6e.48xlarge", "us-east-1")
    assert isinstance(fetchable, str) and "`lmikit prices fetch` reads it" in fetchable


def test_validate_prints_the_warning_and_still_accepts_the_spec(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lmikit.cli import main

    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(region="eu-west-1", type="ml.g6e.2xlarge", extra=""))
    result = CliRunner().invoke(main, ["validate", str(path), "--target", "sagemaker"])
    assert result.exit_code == 0, result.output
    assert "Warning: instance.type ml.g6e.2xlarge has no on-demand SageMaker hosting in " \
        "region eu-west-1" in result.stderr
    path.write_text(SPEC.format(region="us-east-1", type="ml.g6e.2xlarge", extra=""))
    result = CliRunner().invoke(main, ["validate", str(path), "--target", "sagemaker"])
    assert result.exit_code == 0 and "on-demand" not in result.stderr


def test_deploy_warns_before_it_creates_anything(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lmikit.cli import main

    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(region="eu-west-1", type="ml.g6e.2xlarge", extra=""))
    # an invalid bucket stops the deploy before any AWS call; the warning comes first
    result = CliRunner().invoke(main, ["deploy", str(path), "--role-arn",
                                       "arn:aws:iam::123456789012:role/r", "--bucket", "B!"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Warning: instance.type ml.g6e.2xlarge has no on-demand "
                                    "SageMaker hosting in region eu-west-1")


def test_training_plan_types_are_botocores_reserved_capacity_enum() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    summary = model.shape_for("ReservedCapacitySummary")
    assert offers.TRAINING_PLAN_TYPES == frozenset(summary.members["InstanceType"].enum)


def test_a_training_plan_for_a_type_no_plan_reserves_is_refused() -> None:
    arn = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/g6e"
    with pytest.raises(SpecError, match=r"instance.capacity_reservation_arn .*names a training "
                       r"plan, but training plans reserve only ml.p4d.24xlarge, .*not "
                       r"instance.type ml.g6e.2xlarge: remove it or choose one of those types"):
        load_spec_text(SPEC.format(region="us-east-1", type="ml.g6e.2xlarge",
                                   extra=f"  capacity_reservation_arn: {arn}\n"))


def test_the_fix_offered_depends_on_whether_a_plan_can_reserve_the_type() -> None:
    g6e = offers.on_demand_problem("eu-west-1", "ml.g6e.2xlarge")
    assert g6e is not None and g6e.split("), ", 1)[1].startswith(
        "and no training plan reserves it: choose another type or region")
    assert "capacity_reservation_arn" not in g6e
    p4de = offers.on_demand_problem("eu-west-1", "ml.p4de.24xlarge")
    assert p4de is not None and "set instance.capacity_reservation_arn" in p4de
