"""The spec's JSON Schema, and validation of a file against it.

The schema is generated from the pydantic model; a committed copy
(``sdk/lmikit/schema/deployment-spec.schema.json``) is kept in sync by a test so editors
and CI can use it without installing lmikit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmikit.errors import Problem, SpecError
from lmikit.spec import DeploymentSpec

SCHEMA_ID = "https://lmikit.dev/schemas/deployment-spec.v1.json"
SCHEMA_FILE = Path(__file__).parent / "schema" / "deployment-spec.schema.json"


def spec_json_schema() -> dict[str, Any]:
    schema = DeploymentSpec.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            **schema}


def validate_file(path: str | Path) -> DeploymentSpec:
    """Check a spec file against the committed JSON Schema and the model.

    The CLI accepts specs through :func:`lmikit.accept.accept_spec` (the model, the plan and
    every render target); this is the schema's view, as an editor using the committed schema
    shows it. A problem the model reports at a path is listed once, in the model's words
    (with the value); schema messages are kept for paths the model did not flag.
    """
    from lmikit._extras import require
    from lmikit.loader import parse_yaml, read_spec_text, validate_data

    jsonschema = require("jsonschema", "lmikit.schema.validate_file")

    source = str(path)
    data, lines = parse_yaml(read_spec_text(path), source)
    model_problems: list[Problem] = []
    try:
        spec = validate_data(data, lines, source)
    except SpecError as exc:
        model_problems = exc.problems
    flagged = {p.path for p in model_problems}
    problems = list(model_problems)
    validator = jsonschema.Draft202012Validator(spec_json_schema())
    for err in validator.iter_errors(data):
        loc = tuple(err.absolute_path)
        dotted = ".".join(map(str, loc))
        if any(dotted == f or dotted.startswith(f + ".") or f.startswith(dotted + ".")
               for f in flagged):
            continue
        probe = loc
        while probe and probe not in lines:
            probe = probe[:-1]
        problems.append(Problem(dotted, f"schema: {err.message}", has_value=False,
                                line=lines.get(probe)))
        flagged.add(dotted)
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.line or 0, p.path)), source)
    return spec


def spec_reference_markdown() -> str:
    """docs/spec.md: every field with its type, default and description, from the model."""
    from pydantic import BaseModel

    from lmikit.loader import _unwrap

    lines = ["# Spec reference", "",
             "Generated from `lmikit.spec.DeploymentSpec` (a test keeps it in sync; "
             "regenerate with `python -c \"from lmikit.schema import spec_reference_markdown as m;"
             " print(m(), end='')\" > docs/spec.md`).", ""]

    def walk(model: type[BaseModel], prefix: str) -> None:
        nested: list[tuple[type[BaseModel], str]] = []
        lines.extend([f"## `{prefix or 'top level'}`", "",
                      "| field | type | default | description |", "|---|---|---|---|"])
        for name, field in model.model_fields.items():
            inner = _unwrap(field.annotation)
            is_model = isinstance(inner, type) and issubclass(inner, BaseModel)
            type_name = f"[{inner.__name__}](#{_anchor(prefix, name)})" if is_model \
                else _type_text(field.annotation)
            if field.is_required():
                default = "required"
            elif field.default_factory is not None:
                default = "see below" if is_model else "empty"
            else:
                default = f"`{field.default!r}`"
            desc = (field.description or "").replace("|", "/")
            lines.append(f"| `{name}` | {type_name} | {default} | {desc} |")
            if is_model:
                nested.append((inner, f"{prefix}.{name}" if prefix else name))
        lines.append("")
        for sub, path in nested:
            walk(sub, path)

    walk(DeploymentSpec, "")
    return "\n".join(lines)


def _anchor(prefix: str, name: str) -> str:
    path = f"{prefix}.{name}" if prefix else name
    return path.replace(".", "")


def _type_text(annotation: Any) -> str:
    import types
    import typing

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin is typing.Literal:
        return " / ".join(f"`{a!r}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args)
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if origin is dict:
        return "mapping of string to string"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))
