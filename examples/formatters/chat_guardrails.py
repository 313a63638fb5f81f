"""Base-model formatters: a fixed system prefix in, reasoning stripped and metrics added out.

Build with ``lmikit render`` (spec ``formatters.input``/``formatters.output`` point here) or
``lmikit.formatters.build_model_py(input_file=..., output_file=...)``.
"""

from lmikit.formatters import (
    add_usage_metrics,
    apply_prefix,
    chain,
    input_formatter,
    output_formatter,
    strip_reasoning,
)

_prefix = apply_prefix("You answer questions about the attached documents. Be concise.")


@input_formatter
def format_request(request: dict) -> dict:
    """Default sampling for callers that send none, then the fixed system prefix."""
    request = dict(request)
    request.setdefault("temperature", 0.2)
    return _prefix(request)


format_response = output_formatter(chain(strip_reasoning(), add_usage_metrics()))
