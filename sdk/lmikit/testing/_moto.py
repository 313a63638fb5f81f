"""moto's Application Auto Scaling, taught the inference-component dimension.

moto (5.2.5, the newest release) rejects ``sagemaker:inference-component:DesiredCopyCount``:
its own enum of scalable dimensions predates it, while botocore's service model (the
service's published contract) lists it. Everything else about moto's behaviour is kept; this
only widens the enum it validates against to botocore's. lmikit's requests are checked
against botocore's model separately (:class:`lmikit.testing.ShapeValidator`), so nothing here
loosens that check.

:meth:`lmikit.testing.FakeSageMaker.install` and the sandbox widen it once per process (a
deploy registers a scalable target for its base component).
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterator
from typing import Any

import botocore.session

DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
_LOCK = threading.Lock()


def _modules() -> tuple[Any, Any] | None:
    try:
        import moto.applicationautoscaling.models as models
        import moto.applicationautoscaling.responses as responses
    except ModuleNotFoundError:  # moto is optional (lmikit[sandbox])
        return None
    return models, responses


def _widened(original: Any) -> Any:
    shape = (botocore.session.get_session().get_service_model("application-autoscaling")
             .shape_for("ScalableDimension"))
    if DIMENSION not in shape.enum:
        raise AssertionError("botocore's model no longer lists " + DIMENSION)
    members = {m.name: m.value for m in original}
    known = set(members.values())
    for i, value in enumerate(v for v in shape.enum if v not in known):
        members[f"BOTOCORE_{i}"] = value
    return enum.Enum("ScalableDimensionValueSet", members)


_IMPORTING = threading.local()


def teach_moto_inference_components() -> None:
    """Widen moto's scalable dimensions to botocore's, for this process (idempotent).

    Importing moto's module makes a ``boto3.Session()`` (moto's EC2 lists regions); a
    session factory that calls this again meanwhile must not import it a second time."""
    if getattr(_IMPORTING, "active", False):
        return
    _IMPORTING.active = True
    try:
        found = _modules()
    finally:
        _IMPORTING.active = False
    if found is None:
        return
    models, responses = found
    with _LOCK:
        current = models.ScalableDimensionValueSet
        if DIMENSION in {m.value for m in current}:
            return
        widened = _widened(current)
        models.ScalableDimensionValueSet = widened
        responses.ScalableDimensionValueSet = widened


@contextlib.contextmanager
def inference_component_dimension() -> Iterator[None]:
    """Within the block, moto accepts every scalable dimension botocore's model lists."""
    found = _modules()
    if found is None:
        raise ModuleNotFoundError("moto is not installed")
    models, responses = found
    original = models.ScalableDimensionValueSet
    widened = original if DIMENSION in {m.value for m in original} else _widened(original)
    models.ScalableDimensionValueSet = widened
    responses.ScalableDimensionValueSet = widened
    try:
        yield
    finally:
        models.ScalableDimensionValueSet = original
        responses.ScalableDimensionValueSet = original
