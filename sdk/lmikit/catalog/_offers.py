"""Where AWS sells each catalog instance type for SageMaker hosting on demand.

``hosting_offers.json`` lists, for every region, the catalog's instance types that AWS's
Price List prices for SageMaker hosting: usage types ``Host:<type>`` (real-time endpoints) and
``AsyncInf:<type>`` (asynchronous ones) after the region's code (``USE1-Host:ml.g5.xlarge``).
It is cfn-lint's ``data/schemas/extensions/aws_sagemaker_hosting/instancetype_enum.json``, of
the cfn-lint version the table records (pinned in pyproject's dev extra), cut to lmikit's
catalog; cfn-lint's maintainers generate that file from the Price List's ``AmazonSageMaker``
products of family "ML Instance" (``scripts/update_specs_from_pricing.py``,
``get_sagemaker_pricing``). The test suite rebuilds the table from the installed cfn-lint
(:func:`from_cfn_lint`) and compares.

A type the Price List does not price in a region has no on-demand hosting there: an
endpoint of that type runs only in capacity reserved for it, a SageMaker training plan
whose target resource is "endpoint", named by ``ProductionVariant.CapacityReservationConfig``
(SageMaker Developer Guide, "Using training plans for SageMaker inference endpoints"); the
spec's ``instance.capacity_reservation_arn``.

>>> offered("us-east-1", "ml.g6e.2xlarge"), offered("us-east-1", "ml.p5e.48xlarge")
(True, False)
>>> offered("xx-nowhere-1", "ml.g6e.2xlarge") is None  # a region the table does not know
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

SOURCE_PACKAGE = "cfn-lint"
SOURCE_FILE = "data/schemas/extensions/aws_sagemaker_hosting/instancetype_enum.json"
# The instance types a training plan can reserve: botocore's ReservedCapacitySummary
# .InstanceType enum (sagemaker service model; a test compares). Another type cannot run in
# reserved capacity, so a spec naming a plan for it is refused.
TRAINING_PLAN_TYPES = frozenset({
    "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.4xlarge", "ml.p5.48xlarge",
    "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge",
    "ml.p6e-gb200.36xlarge", "ml.trn1.32xlarge", "ml.trn2.48xlarge"})


@cache
def _table() -> dict[str, Any]:
    text = resources.files("lmikit.catalog").joinpath("hosting_offers.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def source() -> str:
    """Where the table comes from, with the version it was cut from."""
    data = _table()
    return (f"the AWS Price List's SageMaker hosting rows as {SOURCE_PACKAGE} "
            f"{data['cfn_lint_version']} ships them")


def regions() -> dict[str, frozenset[str]]:
    """Region -> the catalog types it sells for hosting on demand."""
    return {r: frozenset(types) for r, types in _table()["regions"].items()}


def offered(region: str, instance_type: str) -> bool | None:
    """Whether ``region`` sells ``instance_type`` (its ``ml.`` name) for hosting on demand;
    None where the table does not know the region."""
    types = _table()["regions"].get(region)
    return None if types is None else instance_type in types


def regions_offering(instance_type: str) -> list[str]:
    """The regions that sell ``instance_type`` for hosting on demand, sorted."""
    return sorted(r for r, types in _table()["regions"].items() if instance_type in types)


def on_demand_problem(region: str, instance_type: str) -> str | None:
    """The sentence saying that ``region`` has no on-demand hosting of ``instance_type``,
    and what to do; None where it has, or where the table does not know the region."""
    if offered(region, instance_type) is not False:
        return None
    head = (f"instance.type {instance_type} has no on-demand SageMaker hosting in region "
            f"{region} ({elsewhere(region, instance_type)})")
    unless = " (unless AWS has added it there since that list)"
    if instance_type not in TRAINING_PLAN_TYPES:
        return f"{head}, and no training plan reserves it: choose another type or region{unless}"
    return (f"{head}, so it runs there only in capacity a training plan reserved: set "
            "instance.capacity_reservation_arn to a plan reserved for endpoints, or choose "
            f"another type or region{unless}")


def elsewhere(region: str, instance_type: str) -> str:
    """Where else ``instance_type`` is sold for hosting on demand, and the table's source."""
    where = [r for r in regions_offering(instance_type) if r != region]
    return ((f"regions that sell it on demand: {', '.join(where)}" if where else
             "no region sells it on demand") + f"; {source()}")


def from_cfn_lint(data: Mapping[str, Any], types: Iterable[str]) -> dict[str, list[str]]:
    """The table's ``regions`` from cfn-lint's file ``data``, cut to ``types``: every region
    cfn-lint lists, each with the types of ``types`` it sells, sorted."""
    wanted = set(types)
    return {region: sorted(wanted & set(entry["enum"]))
            for region, entry in sorted(data.items())
            if isinstance(entry, dict) and "enum" in entry}


def main() -> None:  # pragma: no cover - a maintainer's command, run by hand
    """Print the table from the installed cfn-lint: ``python -m lmikit.catalog._offers >
    sdk/lmikit/catalog/hosting_offers.json``."""
    from importlib.metadata import version

    import cfnlint

    from lmikit.catalog._instances import INSTANCES

    path = resources.files(cfnlint).joinpath(SOURCE_FILE)
    data = json.loads(path.read_text())
    print(json.dumps({"cfn_lint_version": version(SOURCE_PACKAGE),
                      "regions": from_cfn_lint(data, INSTANCES)}, indent=1, sort_keys=True))


if __name__ == "__main__":  # pragma: no cover
    main()
