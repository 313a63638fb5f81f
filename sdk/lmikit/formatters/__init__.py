"""Custom input/output formatters for LMI, written as plain typed functions.

Write a formatter file with the decorators and ready-made formatters below, check it with
:func:`validate_formatter_file` and turn it into LMI's ``model.py`` with
:func:`build_model_py`. The decorators and ready-mades live in
:mod:`lmikit.formatters.runtime` (standard library only), which is inlined into that
``model.py``, so the same code runs in your tests and inside the LMI image.

>>> fmt = chain(strip_reasoning(), add_usage_metrics())
>>> fmt("data: [DONE]\\n\\n")
'data: [DONE]\\n\\n'
"""

from __future__ import annotations

from lmikit.formatters._build import build_model_py
from lmikit.formatters._validate import (
    FormatterFile,
    inspect_formatter_file,
    inspect_formatter_source,
    validate_formatter_file,
)
from lmikit.formatters.runtime import (
    DONE,
    FormatterError,
    add_request_metadata,
    add_usage_metrics,
    apply_prefix,
    apply_template,
    chain,
    enforce_json_schema,
    input_formatter,
    is_done,
    map_stream,
    output_formatter,
    parse_sse,
    response_dict,
    strip_reasoning,
    to_sse,
)

__all__ = [
    "DONE",
    "FormatterError",
    "FormatterFile",
    "add_request_metadata",
    "add_usage_metrics",
    "apply_prefix",
    "apply_template",
    "build_model_py",
    "chain",
    "enforce_json_schema",
    "input_formatter",
    "inspect_formatter_file",
    "inspect_formatter_source",
    "is_done",
    "map_stream",
    "output_formatter",
    "parse_sse",
    "response_dict",
    "strip_reasoning",
    "to_sse",
    "validate_formatter_file",
]
