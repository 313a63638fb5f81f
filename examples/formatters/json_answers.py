"""Adapter formatters: answers must be JSON matching a schema; each gets request metadata."""

from lmikit.formatters import (
    add_request_metadata,
    apply_template,
    chain,
    enforce_json_schema,
    input_formatter,
    output_formatter,
)

ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer", "confidence"],
    "properties": {
        "answer": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
}

_template = apply_template(
    'Answer as JSON {"answer": <string>, "confidence": <0..1>}.\n\nQuestion: {input}')


@input_formatter
def to_json_prompt(request: dict) -> dict:
    return _template(request)


format_output = output_formatter(chain(enforce_json_schema(ANSWER_SCHEMA),
                                       add_request_metadata(adapter="json-answers")))
