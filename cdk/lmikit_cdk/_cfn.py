"""SageMaker request dicts -> L1 construct keyword arguments.

The SDK renders PascalCase request dicts (botocore's shapes). CloudFormation uses the same
shapes and names for every field lmikit sets, so the L1 props are the SAME dicts, only
re-cased the way jsii expects: top-level keys as Python keyword names (snake_case), nested
struct keys in jsii's camelCase. Free-form maps (the container ``Environment``) keep their keys.

>>> l1_kwargs({"EndpointName": "e", "Tags": [{"Key": "a", "Value": "b"}]})
{'endpoint_name': 'e', 'tags': [{'key': 'a', 'value': 'b'}]}
>>> jsii_struct({"VolumeSizeInGB": 100, "Environment": {"HF_MODEL_ID": "x"}})
{'volumeSizeInGb': 100, 'environment': {'HF_MODEL_ID': 'x'}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FREE_FORM_MAPS = frozenset({"Environment"})

_ACRONYM_RUN = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_START = re.compile(r"([a-z\d])([A-Z])")


def snake_case(name: str) -> str:
    """``VolumeSizeInGB`` -> ``volume_size_in_gb`` (jsii's rule for CloudFormation names)."""
    return _WORD_START.sub(r"\1_\2", _ACRONYM_RUN.sub(r"\1_\2", name)).lower()


def camel_case(name: str) -> str:
    head, *rest = snake_case(name).split("_")
    return head + "".join(part.capitalize() for part in rest)


def jsii_struct(value: Any) -> Any:
    """A PascalCase request value as a jsii struct value (camelCase keys, recursively)."""
    if isinstance(value, Mapping):
        return {camel_case(k): (dict(v) if k in FREE_FORM_MAPS else jsii_struct(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsii_struct(v) for v in value]
    return value


def l1_kwargs(request: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for an L1 constructor built from one request dict."""
    return {snake_case(k): (dict(v) if k in FREE_FORM_MAPS else jsii_struct(v))
            for k, v in request.items()}
