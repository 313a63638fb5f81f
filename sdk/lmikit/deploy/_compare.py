"""Compare what the spec asks for with what SageMaker describes, field by field.

Every field of a component's ``Specification`` that the describe call returns is compared
(an environment variable added, removed or changed is a change), and a description can be
turned back into the request that recreates it (used to undo an update).

>>> want = {"Container": {"Image": "img:1", "Environment": {"A": "1"}}}
>>> have = {"Container": {"DeployedImage": {"SpecifiedImage": "img:1"},
...                       "Environment": {"A": "2"}}}
>>> spec_differences(want, have)
['environment']
>>> request_specification(have)
{'Container': {'Environment': {'A': '2'}, 'Image': 'img:1'}}
"""

from __future__ import annotations

import copy
from typing import Any

LABELS = {"Image": "image", "ArtifactUrl": "artifact", "Environment": "environment",
          "ContainerMetricsConfig": "metrics", "ModelName": "model",
          "StartupParameters": "startup timeouts", "ComputeResourceRequirements": "compute",
          "BaseInferenceComponentName": "base", "InstanceType": "instance type",
          "DataCacheConfig": "data cache", "SchedulingConfig": "scheduling"}


def request_specification(described: dict[str, Any]) -> dict[str, Any]:
    """The ``Specification`` request that recreates a described component's specification
    (``DeployedImage.SpecifiedImage`` becomes ``Image``)."""
    spec = copy.deepcopy(described)
    container = spec.get("Container")
    if isinstance(container, dict):
        deployed = container.pop("DeployedImage", None) or {}
        if deployed.get("SpecifiedImage"):
            container["Image"] = deployed["SpecifiedImage"]
        spec["Container"] = dict(sorted(container.items()))
    return spec


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def spec_differences(want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """Labels of the ``Specification`` fields that differ (``have`` as described)."""
    have_req = request_specification(have)
    diff: list[str] = []
    w_container = want.get("Container") or {}
    h_container = have_req.get("Container") or {}
    for key in sorted(set(w_container) | set(h_container)):
        if _norm(w_container.get(key)) != _norm(h_container.get(key)):
            diff.append(LABELS.get(key, key))
    for key in sorted((set(want) | set(have_req)) - {"Container"}):
        if _norm(want.get(key)) != _norm(have_req.get(key)):
            diff.append(LABELS.get(key, key))
    return diff


def desired_copies(described: dict[str, Any]) -> int | None:
    value = (described.get("RuntimeConfig") or {}).get("DesiredCopyCount")
    return int(value) if value is not None else None
