"""moto's Application Auto Scaling, taught the inference-component dimension.

moto (5.2.5, the newest release) rejects ``sagemaker:inference-component:DesiredCopyCount``:
its own enum of scalable dimensions predates it, while botocore's service model (the
service's published contract) lists it. Everything else about moto's behaviour is kept; this
only widens the enum it validates against. Tests check lmikit's requests against botocore's
model separately (lmikit.testing.ShapeValidator), so nothing here loosens that check.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

import botocore.session

DIMENSION = "sagemaker:inference-component:DesiredCopyCount"


@contextlib.contextmanager
def inference_component_dimension() -> Iterator[None]:
    """Within the block, moto accepts every scalable dimension botocore's model lists."""
    import moto.applicationautoscaling.models as models
    import moto.applicationautoscaling.responses as responses

    shape = (botocore.session.get_session().get_service_model("application-autoscaling")
             .shape_for("ScalableDimension"))
    assert DIMENSION in shape.enum, "botocore's model no longer lists the dimension"
    original = models.ScalableDimensionValueSet
    members = {m.name: m.value for m in original}
    known = set(members.values())
    for i, value in enumerate(v for v in shape.enum if v not in known):
        members[f"BOTOCORE_{i}"] = value
    widened = enum.Enum("ScalableDimensionValueSet", members)  # type: ignore[misc]
    models.ScalableDimensionValueSet = widened  # type: ignore[misc]
    responses.ScalableDimensionValueSet = widened  # type: ignore[misc,attr-defined]
    try:
        yield
    finally:
        models.ScalableDimensionValueSet = original  # type: ignore[misc]
        responses.ScalableDimensionValueSet = original  # type: ignore[misc,attr-defined]
