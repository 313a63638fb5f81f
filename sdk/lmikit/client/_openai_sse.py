"""Re-frame an LMI response stream as the server-sent events the ``openai`` package parses.

LMI's vLLM async service answers an OpenAI-schema request with ``"stream": true`` in JSON
lines, not SSE: its ``vllm_stream_output_formatter`` strips vLLM's ``data: `` prefix from
every chunk, ``create_stream_chunk_output`` appends ``\\n`` and vLLM's ``data: [DONE]``
becomes an empty line (djl-serving, branch master,
``djl_python/lmi_vllm/request_response_utils.py`` and ``djl_python/async_utils.py``).
An output formatter that returns vLLM's strings unchanged sends SSE (``data: {...}``).
InvokeEndpointWithResponseStream delivers either as PayloadPart byte chunks cut anywhere,
mid-line and mid-UTF-8 included. :class:`SseReframer` takes those chunks and gives back
complete ``data: {...}\\n\\n`` events and one closing ``data: [DONE]\\n\\n``.

Errors become the in-band error event the ``openai`` package raises ``openai.APIError``
for: vLLM's ``{"error": {...}}`` chunk passes through; LMI's ``{"code": N, "error": "..."}``
line (a failing stream formatter) and a line that is not JSON are rewritten to that shape.

>>> r = SseReframer()
>>> r.feed(b'{"choices": [{"delta": {"content": "Hi"}}]}\\n{"choi')
b'data: {"choices": [{"delta": {"content": "Hi"}}]}\\n\\n'
>>> r.feed(b'ces": []}\\n\\n') + r.close()
b'data: {"choices": []}\\n\\ndata: [DONE]\\n\\n'
"""

from __future__ import annotations

import json
from typing import Any

DONE_EVENT = b"data: [DONE]\n\n"
_IGNORED_FIELDS = (b":", b"event:", b"id:", b"retry:")


def error_event(message: str, type_: str, code: int | str | None = None) -> bytes:
    """One SSE event carrying an OpenAI-style error object.

    >>> error_event("CUDA out of memory", "ModelStreamError")
    b'data: {"error": {"message": "CUDA out of memory", "type": "ModelStreamError", \
"param": null, "code": null}}\\n\\n'
    """
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class SseReframer:
    """Incremental: ``feed`` bytes as they arrive, ``close`` at the end of the stream.

    After an error event nothing more is emitted (the consumer raises at the error).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.done = False
        self.failed = False

    def feed(self, data: bytes) -> bytes:
        """The complete events in what has arrived so far (``b""`` when none is complete)."""
        self._buffer += data
        out = []
        while b"\n" in self._buffer and not self.failed:
            line, self._buffer = self._buffer.split(b"\n", 1)
            out.append(self._line(line))
        return b"".join(out)

    def close(self) -> bytes:
        """Whatever a last unterminated line holds, then ``data: [DONE]`` (once)."""
        rest, self._buffer = self._buffer, b""
        out = b"" if self.failed else self._line(rest)
        if not self.failed and not self.done:
            self.done = True
            out += DONE_EVENT
        return out

    def fail(self, message: str, type_: str, code: int | str | None = None) -> bytes:
        """An error event ending the stream (a SageMaker stream error, a broken read)."""
        if self.failed:
            return b""
        self.failed = True
        return error_event(message, type_, code)

    def _line(self, raw: bytes) -> bytes:
        line = raw.strip()
        if not line or line.startswith(_IGNORED_FIELDS):
            return b""
        if line.startswith(b"data:"):
            line = line[5:].strip()
            if not line:
                return b""
        if line == b"[DONE]":
            if self.done:
                return b""
            self.done = True
            return DONE_EVENT
        if self.done:
            return b""  # LMI's closing empty write, or anything after [DONE]
        try:
            record: Any = json.loads(line)
        except ValueError:
            text = line[:200].decode("utf-8", errors="replace")
            return self.fail(f"the model's stream sent a line that is not JSON: {text!r}",
                             "ModelStreamError")
        if isinstance(record, dict) and record.get("error"):
            return self._error(record)
        return b"data: " + line + b"\n\n"

    def _error(self, record: dict[str, Any]) -> bytes:
        err = record["error"]
        if isinstance(err, dict):  # vLLM's ErrorResponse: already the OpenAI shape
            self.failed = True
            return b"data: " + json.dumps({"error": err}).encode() + b"\n\n"
        code = record.get("code")
        return self.fail(str(err), "ModelError", code if isinstance(code, int | str) else None)
