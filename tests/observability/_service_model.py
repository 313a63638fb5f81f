"""Check request kwargs against botocore's service model, including what botocore skips.

botocore's client validation checks required members, types and minimums; this also checks
enums, patterns, string/list max lengths and integer ranges, recursively.
"""

from __future__ import annotations

import re
from typing import Any

import botocore.session

_MODELS: dict[str, Any] = {}


def service_model(service: str) -> Any:
    if service not in _MODELS:
        _MODELS[service] = botocore.session.get_session().get_service_model(service)
    return _MODELS[service]


def problems(service: str, operation: str, params: dict[str, Any]) -> list[str]:
    shape = service_model(service).operation_model(operation).input_shape
    out: list[str] = []
    _check(shape, params, operation, out)
    return out


def _check(shape: Any, value: Any, path: str, out: list[str]) -> None:  # noqa: C901
    meta = shape.metadata
    t = shape.type_name
    if t == "structure":
        if not isinstance(value, dict):
            out.append(f"{path}: expected a structure")
            return
        for name in shape.required_members:
            if name not in value:
                out.append(f"{path}.{name}: required")
        for name, v in value.items():
            if name not in shape.members:
                out.append(f"{path}.{name}: unknown member")
                continue
            _check(shape.members[name], v, f"{path}.{name}", out)
        if meta.get("union") and len(value) != 1:
            out.append(f"{path}: a union takes exactly one member")
    elif t == "list":
        if not isinstance(value, list):
            out.append(f"{path}: expected a list")
            return
        if "min" in meta and len(value) < meta["min"]:
            out.append(f"{path}: fewer than {meta['min']} items")
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{path}: more than {meta['max']} items")
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}[{i}]", out)
    elif t == "string":
        if not isinstance(value, str):
            out.append(f"{path}: expected a string")
            return
        if "enum" in meta and value not in meta["enum"]:
            out.append(f"{path}: {value!r} not in {meta['enum']}")
        if "min" in meta and len(value) < meta["min"]:
            out.append(f"{path}: shorter than {meta['min']}")
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{path}: longer than {meta['max']}")
        if "pattern" in meta and not re.search(meta["pattern"], value):
            out.append(f"{path}: {value!r} does not match {meta['pattern']}")
    elif t in ("integer", "long", "double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{path}: expected a number")
            return
        if "min" in meta and value < meta["min"]:
            out.append(f"{path}: below {meta['min']}")
        if "max" in meta and value > meta["max"]:
            out.append(f"{path}: above {meta['max']}")
    elif t == "boolean" and not isinstance(value, bool):
        out.append(f"{path}: expected a boolean")
