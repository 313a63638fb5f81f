"""Training plans reserved for endpoints in the fake control plane: DescribeTrainingPlan, and
the check CreateEndpointConfig makes of a variant's ``CapacityReservationConfig``.

SageMaker's guide ("Using training plans for SageMaker inference endpoints") says a plan must
be Active to be used, the endpoint serves only inside the plan's window, and the variant's
``InstanceType`` must be the plan's. Plans are made with ``FakeSageMaker.add_training_plan``
(lmikit never creates one); a plan reserves only the types botocore's
``ReservedCapacitySummary.InstanceType`` enum lists.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lmikit.testing._service import ServiceError, validation


@dataclass
class TrainingPlan:
    arn: str
    name: str
    instance_type: str
    count: int
    start: dt.datetime
    end: dt.datetime
    status: str = "Active"  # Pending | Active | Scheduled | Expired | Failed (botocore)

    def describe(self) -> dict[str, Any]:
        hours, rest = divmod(int((self.end - self.start).total_seconds()), 3600)
        window = {"DurationHours": hours, "DurationMinutes": rest // 60,
                  "StartTime": self.start.timestamp(), "EndTime": self.end.timestamp()}
        return {"TrainingPlanArn": self.arn, "TrainingPlanName": self.name,
                "Status": self.status, **window, "TotalInstanceCount": self.count,
                "AvailableInstanceCount": self.count, "InUseInstanceCount": 0,
                "TargetResources": ["endpoint"],
                "ReservedCapacitySummaries": [{
                    "ReservedCapacityArn": self.arn.replace(":training-plan/",
                                                            ":reserved-capacity/", 1),
                    "ReservedCapacityType": "Instance", "InstanceType": self.instance_type,
                    "TotalInstanceCount": self.count, "Status": self.status, **window}]}


class TrainingPlansMixin:
    """Plan operations for :class:`lmikit.testing._control.ControlPlane` (which provides
    ``training_plans``)."""

    training_plans: dict[str, TrainingPlan]

    def describe_training_plan(self, p: dict[str, Any]) -> dict[str, Any]:
        for plan in self.training_plans.values():
            if plan.name == p["TrainingPlanName"]:
                return plan.describe()
        raise ServiceError("ResourceNotFound",
                           f'Training plan "{p["TrainingPlanName"]}" does not exist.')

    def _check_reservation(self, variant: dict[str, Any]) -> None:
        """A variant that names a capacity reservation needs a known training plan of this
        account and region, of the variant's instance type."""
        arn = variant.get("CapacityReservationConfig", {}).get("MlReservationArn")
        if arn is None:
            return
        plan = self.training_plans.get(arn)
        if plan is None:
            raise validation(f'Could not find training plan "{arn}".')
        if plan.instance_type != variant["InstanceType"]:
            raise validation(f"Variant {variant['VariantName']}: InstanceType "
                             f"{variant['InstanceType']} does not match the instance type of "
                             f'training plan "{arn}" ({plan.instance_type}).')
