"""A formatter written against LMI's own decorators also works unchanged."""

from djl_python.output_formatter import output_formatter


@output_formatter
def tag_output(output):
    if isinstance(output, str):  # streaming: one raw SSE string per call
        return output
    data = output.model_dump() if hasattr(output, "model_dump") else dict(output)
    data["served_by"] = "lmikit"
    return data
