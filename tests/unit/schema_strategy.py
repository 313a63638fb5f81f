"""A hypothesis strategy for documents of a JSON Schema: the keywords lmikit's spec schema uses.

hypothesis-jsonschema 0.23.1 (its latest release) fails with the installed hypothesis
(``AttributeError: 'many' object has no attribute 'more'``), so this covers what
``lmikit schema`` emits: ``$ref``/``$defs``, ``type`` (one or a list), ``properties`` /
``required`` / ``additionalProperties: false`` / ``propertyNames`` / ``maxProperties``,
``items`` / ``minItems`` / ``maxItems``, ``enum``, ``const``, ``anyOf`` / ``oneOf``,
``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``multipleOf``, and ``pattern`` /
``minLength`` / ``maxLength``. ``overrides`` maps a property path (``("model", "id")``) to a
strategy used there instead, so generated specs name models and instances that exist.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

Path = tuple[str, ...]


def from_schema(schema: dict[str, Any],
                overrides: Mapping[Path, st.SearchStrategy[Any]] | None = None
                ) -> st.SearchStrategy[Any]:
    return _Builder(schema, dict(overrides or {})).node(schema, ())


class _Builder:
    def __init__(self, root: dict[str, Any], overrides: dict[Path, st.SearchStrategy[Any]]):
        self.defs = root.get("$defs", {})
        self.overrides = overrides

    def node(self, schema: dict[str, Any], path: Path) -> st.SearchStrategy[Any]:
        if path in self.overrides:
            return self.overrides[path]
        if "$ref" in schema:
            return self.node(self.defs[schema["$ref"].rsplit("/", 1)[-1]], path)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return st.one_of([self.node(s, path) for s in schema[key]])
        kind = schema.get("type")
        if isinstance(kind, list):
            return st.one_of([self.node({**schema, "type": k}, path) for k in kind])
        if kind == "object":
            return self.obj(schema, path)
        if kind == "array":
            item = self.node(schema.get("items", {}), (*path, "[]"))
            return st.lists(item, min_size=schema.get("minItems", 0),
                            max_size=min(schema.get("maxItems", 4), 4))
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            low = schema.get("minimum", -(2**40))
            high = schema.get("maximum", 2**40)
            if "exclusiveMinimum" in schema:
                low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
            ints = st.integers(low, high)
            step = schema.get("multipleOf")
            if step:
                ints = st.integers(math.ceil(low / step), high // step).map(lambda n: n * step)
            return ints
        if kind == "number":
            low = schema.get("minimum", schema.get("exclusiveMinimum"))
            return st.floats(min_value=low, max_value=schema.get("maximum", 1e9),
                             exclude_min="exclusiveMinimum" in schema, allow_nan=False,
                             allow_infinity=False)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return st.none()

    def obj(self, schema: dict[str, Any], path: Path) -> st.SearchStrategy[Any]:
        props = schema.get("properties", {})
        if not props:  # a map (tags): names and values from propertyNames / the values schema
            names = self.string(schema.get("propertyNames", {"type": "string"}))
            values = schema.get("additionalProperties")
            value = self.node(values, (*path, "*")) if isinstance(values, dict) else st.text()
            return st.dictionaries(names, value, max_size=min(schema.get("maxProperties", 3), 3))
        required = set(schema.get("required", ()))
        fields = {name: self.node(sub, (*path, name)) for name, sub in props.items()}
        chosen = st.fixed_dictionaries(
            {n: s for n, s in fields.items() if n in required},
            optional={n: s for n, s in fields.items() if n not in required})
        return chosen

    @staticmethod
    def string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 80)
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: low <= len(s) <= high)
        return st.text(min_size=low, max_size=max(low, high))
