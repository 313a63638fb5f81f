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
    """Validate with jsonschema first (the committed contract), then the model."""
    import jsonschema

    from lmikit.loader import parse_yaml, validate_data

    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem("", f"cannot read the spec file: {exc}", has_value=False)],
                        source) from exc
    data, lines = parse_yaml(text, source)
    validator = jsonschema.Draft202012Validator(spec_json_schema())
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path))):
        loc = tuple(err.absolute_path)
        line = None
        probe = loc
        while probe and probe not in lines:
            probe = probe[:-1]
        line = lines.get(probe)
        problems.append(Problem(".".join(map(str, loc)), f"schema: {err.message}",
                                has_value=False, line=line))
    model_error = None
    try:
        spec = validate_data(data, lines, source)
    except SpecError as exc:
        model_error = exc
    if problems or model_error:
        merged = {(p.path, p.message): p for p in problems + (model_error.problems if
                                                              model_error else [])}
        raise SpecError(sorted(merged.values(), key=lambda p: (p.line or 0, p.path)), source)
    return spec
