"""Formatter runtime: typed decorators, SSE helpers and ready-made formatters.

Standard library only (``jsonschema`` is imported lazily by :func:`enforce_json_schema`):
this file is inlined, as is, into every ``model.py`` lmikit builds, so it runs inside the
LMI image next to LMI's own ``djl_python`` decorators.

What LMI passes (djl_python ``CustomFormatterHandler``, vLLM async handler):

- input formatter: ``f(decoded_payload: dict, **kwargs)`` (kwargs include ``tokenizer``);
  returns the request dict (``messages`` / ``prompt`` / ``inputs`` ...).
- output formatter, non-streaming: the vLLM OpenAI response object
  (``ChatCompletionResponse`` / ``CompletionResponse`` / ``ErrorResponse``, pydantic);
  returns a dict, a str or a pydantic model.
- output formatter, streaming: each raw SSE string ``"data: {...}\\n\\n"``, including the
  final ``"data: [DONE]"``; returns the string to send.

A formatter that raises never reaches LMI as an exception from an output formatter: the
guard returns an OpenAI-style error body (or SSE error event) naming the formatter. An input
formatter that raises is reported as :class:`FormatterError` with the same clear message
(LMI answers it with HTTP 424).

>>> @output_formatter
... def upper(output):
...     return map_stream(lambda event: event)(output) if isinstance(output, str) else output
>>> upper("data: [DONE]\\n\\n")
'data: [DONE]\\n\\n'
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = [
    "DONE",
    "FormatterError",
    "add_request_metadata",
    "add_usage_metrics",
    "apply_prefix",
    "apply_template",
    "chain",
    "enforce_json_schema",
    "input_formatter",
    "is_done",
    "map_stream",
    "output_formatter",
    "parse_sse",
    "response_dict",
    "strip_reasoning",
    "to_sse",
]

InputFn = Callable[..., dict]
OutputFn = Callable[[Any], Any]

DONE = "data: [DONE]"
_lk_log = logging.getLogger("lmikit.formatters")
# model.py sets these to LMI's own decorators; outside LMI they stay None.
_lk_djl: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]] | None] = {
    "input": None, "output": None}
_LK_MAX_STREAMS = 4096  # per-stream state kept by stateful streaming formatters


class FormatterError(ValueError):
    """A formatter failed; the message names the formatter and the cause."""


# --- decorators --------------------------------------------------------------------------
def input_formatter(fn: InputFn) -> InputFn:
    """Mark ``fn(request: dict, **kwargs) -> dict`` as the input formatter (guarded)."""
    name = getattr(fn, "__name__", "input_formatter")
    wanted = _lk_keyword_names(fn)

    def run(decoded_payload: Any, **kwargs: Any) -> dict:
        extra = kwargs if wanted is None else {k: v for k, v in kwargs.items() if k in wanted}
        try:
            result = fn(decoded_payload, **extra)
        except FormatterError:
            raise
        except Exception as exc:
            message = f"input formatter {name!r} failed: {type(exc).__name__}: {exc}"
            _lk_log.warning(message)
            raise FormatterError(message) from exc
        if not isinstance(result, dict):
            raise FormatterError(f"input formatter {name!r} returned "
                                 f"{type(result).__name__}; return the request dict")
        return result

    return _lk_finish(run, fn, "input")


def output_formatter(fn: OutputFn) -> OutputFn:
    """Mark ``fn(output) -> output`` as the output formatter (guarded: never raises)."""
    name = getattr(fn, "__name__", "output_formatter")

    def run(output: Any) -> Any:
        try:
            return fn(output)
        except Exception as exc:  # a formatter bug must not kill the response or the worker
            message = f"output formatter {name!r} failed: {type(exc).__name__}: {exc}"
            _lk_log.warning(message)
            error = {"error": {"message": message, "type": "formatter_error", "code": 424}}
            return to_sse(error) if isinstance(output, str) else error

    return _lk_finish(run, fn, "output")


def _lk_finish(run: Callable[..., Any], fn: Callable[..., Any], kind: str) -> Any:
    run.__name__ = getattr(fn, "__name__", run.__name__)
    run.__doc__ = fn.__doc__
    run.__wrapped__ = fn  # type: ignore[attr-defined]
    run.lmikit_kind = kind  # type: ignore[attr-defined]
    djl = _lk_djl[kind]
    return djl(run) if djl is not None else run


def _lk_keyword_names(fn: Callable[..., Any]) -> set[str] | None:
    """None when ``fn`` takes **kwargs (pass all), else the keyword names it accepts."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


# --- SSE and response helpers ---------------------------------------------------------------
def is_done(chunk: str) -> bool:
    """True for the stream's final ``data: [DONE]`` event."""
    return chunk.strip() == DONE


def parse_sse(chunk: str) -> dict | None:
    """The JSON payload of one ``data: {...}`` event; None for [DONE] and non-data lines."""
    text = chunk.strip()
    if not text.startswith("data:"):
        return None
    payload = text[5:].strip()
    if payload == "[DONE]":
        return None
    value = json.loads(payload)
    return value if isinstance(value, dict) else None


def to_sse(event: dict) -> str:
    """One SSE event string, as LMI streams them."""
    return "data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n\n"


def response_dict(output: Any) -> dict:
    """A non-streaming response (vLLM pydantic object, dict or JSON text) as a dict."""
    if isinstance(output, dict):
        return output
    if hasattr(output, "model_dump"):
        return output.model_dump()
    if isinstance(output, (str, bytes)):
        value = json.loads(output)
        if isinstance(value, dict):
            return value
    raise FormatterError(f"cannot read a response of type {type(output).__name__}")


def map_stream(fn: Callable[[dict], dict | None]) -> Callable[[str], str]:
    """Lift ``fn(event) -> event`` to raw SSE strings; [DONE] passes through, None drops."""
    def run(chunk: str) -> str:
        event = parse_sse(chunk)
        if event is None:
            return chunk
        out = fn(event)
        return "" if out is None else to_sse(out)
    return run


def chain(*formatters: Callable[..., Any]) -> Callable[..., Any]:
    """Apply formatters left to right (output formatters; an empty chunk stops the chain)."""
    def run(output: Any) -> Any:
        for f in formatters:
            output = f(output)
            if output == "":
                return output
        return output
    return run


def _lk_text(choice: dict) -> tuple[str, dict] | None:
    """(text, holder-with-key) of a choice: message, delta (chat) or text (completions)."""
    for key in ("message", "delta"):
        holder = choice.get(key)
        if isinstance(holder, dict):
            content = holder.get("content")
            return (content, holder) if isinstance(content, str) else None
    text = choice.get("text")
    return (text, choice) if isinstance(text, str) else None


def _lk_set_text(holder: dict, text: str) -> None:
    holder["content" if "content" in holder else "text"] = text


class _LkStreams(OrderedDict):
    """Per-stream state keyed by the SSE payload's id, bounded (aborted streams age out)."""

    def state(self, stream_id: str, factory: Callable[[], Any]) -> Any:
        if stream_id not in self:
            self[stream_id] = factory()
            if len(self) > _LK_MAX_STREAMS:
                self.popitem(last=False)
        return self[stream_id]


def _lk_stream_id(chunk: str) -> str | None:
    """The response id of a ``data: {"id":"..."`` chunk without parsing the JSON (vLLM
    writes ``id`` first); None for [DONE] and non-data lines."""
    start = chunk.find('"id":"')
    if start < 0 or not chunk.lstrip().startswith("data:"):
        return None
    start += 6
    return chunk[start:chunk.find('"', start)]


def _lk_finished(event: dict) -> bool:
    return any(c.get("finish_reason") for c in event.get("choices") or ()) \
        or bool(event.get("usage"))


# --- ready-made input formatters -------------------------------------------------------------
def _lk_map_user_text(request: dict, fn: Callable[[str], str]) -> dict:
    request = dict(request)
    for key in ("prompt", "inputs"):
        if isinstance(request.get(key), str):
            request[key] = fn(request[key])
            return request
    messages = request.get("messages")
    if isinstance(messages, list):
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if isinstance(msg, dict) and msg.get("role") == "user":
                msg = dict(msg)
                if isinstance(msg.get("content"), str):
                    msg["content"] = fn(msg["content"])
                elif isinstance(msg.get("content"), list):
                    msg["content"] = [dict(p, text=fn(p["text"])) if isinstance(p, dict)
                                      and p.get("type") == "text" else p
                                      for p in msg["content"]]
                request["messages"] = [*messages[:i], msg, *messages[i + 1:]]
                return request
    raise FormatterError("request has no 'messages' with a user turn, 'prompt' or 'inputs'")


def apply_template(template: str) -> InputFn:
    """Wrap the user's text: ``{input}`` in ``template`` is replaced by it (last user turn)."""
    if "{input}" not in template:
        raise FormatterError("apply_template: the template needs an {input} placeholder")
    return lambda request, **_: _lk_map_user_text(request, lambda t: template.replace(
        "{input}", t))


def apply_prefix(prefix: str) -> InputFn:
    """Put a fixed prefix first: a system message for chat, text before prompt/inputs.

    A stable prefix is also what LMCache reuses across requests.
    """
    def run(request: dict, **_: Any) -> dict:
        request = dict(request)
        messages = request.get("messages")
        if isinstance(messages, list):
            first = messages[0] if messages else None
            if isinstance(first, dict) and first.get("role") == "system" \
                    and isinstance(first.get("content"), str):
                head = dict(first, content=prefix + "\n\n" + first["content"])
                request["messages"] = [head, *messages[1:]]
            else:
                request["messages"] = [{"role": "system", "content": prefix}, *messages]
            return request
        for key in ("prompt", "inputs"):
            if isinstance(request.get(key), str):
                request[key] = prefix + request[key]
                return request
        raise FormatterError("request has no 'messages', 'prompt' or 'inputs' to prefix")
    return run


# --- ready-made output formatters ------------------------------------------------------------
def add_request_metadata(timestamps: bool = True, **fields: Any) -> OutputFn:
    """Add ``lmikit`` metadata: response id, model, created and processing timestamps, plus
    ``fields`` (static values such as a tenant or adapter name). Streaming: final chunk only.
    """
    def meta(event: dict) -> dict:
        data: dict[str, Any] = {"id": event.get("id"), "model": event.get("model")}
        if timestamps:
            now = time.time()
            data["created"] = event.get("created")
            data["processed_at"] = round(now, 6)
            data["processed_at_iso"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        data.update(fields)
        event["lmikit"] = data
        return event

    def run(output: Any) -> Any:
        if isinstance(output, str):
            if '"finish_reason":null' in output or is_done(output):
                return output
            event = parse_sse(output)
            return output if event is None or not _lk_finished(event) else to_sse(meta(event))
        return meta(response_dict(output))
    return run


def add_usage_metrics() -> OutputFn:
    """Add ``metrics``: token counts, latency since ``created`` and output tokens/s.

    Streaming: on the final chunk, the stream's duration and chunk count as seen by the
    formatter (token counts when the request asked for ``stream_options.include_usage``).
    """
    streams = _LkStreams()

    def run(output: Any) -> Any:
        now = time.time()
        if isinstance(output, str):
            stream_id = _lk_stream_id(output)
            if stream_id is None:
                return output
            seen = streams.state(stream_id, lambda: [now, 0])
            seen[1] += 1
            if '"finish_reason":null' in output and '"usage":{' not in output:
                return output  # fast path: a middle chunk, no JSON parse
            event = parse_sse(output)
            if event is None or not _lk_finished(event):
                return output
            streams.pop(stream_id, None)
            elapsed = now - seen[0]
            metrics: dict[str, Any] = {"stream_seconds": round(elapsed, 6), "chunks": seen[1]}
            usage = event.get("usage") or {}
            if usage.get("completion_tokens") and elapsed > 0:
                metrics["output_tokens_per_s"] = round(usage["completion_tokens"] / elapsed, 2)
            metrics.update({k: usage[k] for k in ("prompt_tokens", "completion_tokens")
                            if k in usage})
            event["metrics"] = metrics
            return to_sse(event)
        data = response_dict(output)
        usage = data.get("usage") or {}
        created = data.get("created")
        latency = now - created if isinstance(created, (int, float)) else None
        out_tokens = usage.get("completion_tokens")
        data["metrics"] = {
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": out_tokens,
            "total_tokens": usage.get("total_tokens"),
            "cached_prompt_tokens": (usage.get("prompt_tokens_details") or {}).get(
                "cached_tokens"),
            "latency_s": None if latency is None else round(latency, 3),
            "output_tokens_per_s": round(out_tokens / latency, 2)
            if out_tokens and latency and latency > 0 else None,
        }
        return data
    return run


def enforce_json_schema(schema: dict) -> OutputFn:
    """Require each choice's text to be JSON valid against ``schema`` (jsonschema).

    Non-streaming: an invalid answer is replaced by an error body (code 422). Streaming:
    text is collected per stream and checked at its end; an error event follows the final
    chunk when it does not validate (the text was already sent).
    """
    try:  # the LMI image has it; where lmikit runs, it is a package of its own
        import jsonschema
    except ImportError as exc:
        raise ImportError("enforce_json_schema needs jsonschema: pip install jsonschema") \
            from exc

    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    validator = validator_cls(schema)
    streams = _LkStreams()

    def problem(text: str) -> str | None:
        try:
            value = json.loads(text)
        except ValueError as exc:
            return f"output is not JSON: {exc}"
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        return f"output does not match the JSON Schema at {where}: {error.message}"

    def error_body(message: str) -> dict:
        return {"error": {"message": message, "type": "schema_validation_error", "code": 422}}

    def run(output: Any) -> Any:
        if isinstance(output, str):
            event = parse_sse(output)
            if event is None or "id" not in event:
                return output
            parts = streams.state(event["id"], list)
            for choice in event.get("choices") or ():
                found = _lk_text(choice)
                if found:
                    parts.append(found[0])
            if not _lk_finished(event):
                return output
            streams.pop(event["id"], None)
            message = problem("".join(parts))
            return output if message is None else output + to_sse(error_body(message))
        data = response_dict(output)
        for choice in data.get("choices") or ():
            found = _lk_text(choice)
            message = problem(found[0]) if found else "output has no text to validate"
            if message:
                return error_body(message)
        return data
    return run


def strip_reasoning(open_tag: str = "<think>", close_tag: str = "</think>",
                    starts_in_reasoning: bool = False) -> OutputFn:
    """Drop reasoning: ``reasoning_content``/``reasoning`` fields and tagged spans of text.

    ``starts_in_reasoning`` for chat templates that open the tag in the prompt (the answer
    begins inside the reasoning and only the close tag appears). Streaming assumes a tag
    arrives within one chunk (reasoning models emit each tag as one special token).
    """
    span = re.compile(re.escape(open_tag) + ".*?(?:" + re.escape(close_tag) + r"|\Z)\s*",
                      re.DOTALL)
    inside = _LkStreams()

    def clean_text(text: str) -> str:
        if starts_in_reasoning and close_tag in text and open_tag not in \
                text.split(close_tag, 1)[0]:
            text = text.split(close_tag, 1)[1].lstrip()
        return span.sub("", text)

    def drop_fields(holder: dict) -> None:
        holder.pop("reasoning_content", None)
        holder.pop("reasoning", None)

    def stream_text(stream_id: str, text: str) -> str:
        out = []
        in_reasoning = inside.get(stream_id, starts_in_reasoning)
        while text:
            if in_reasoning:
                head, sep, text = text.partition(close_tag)
                in_reasoning = not sep
                text = text.lstrip() if sep else ""
            else:
                head, sep, text = text.partition(open_tag)
                out.append(head)
                in_reasoning = bool(sep)
        inside[stream_id] = in_reasoning
        if len(inside) > _LK_MAX_STREAMS:
            inside.popitem(last=False)
        return "".join(out)

    def run(output: Any) -> Any:
        if isinstance(output, str):
            if not inside and not starts_in_reasoning and open_tag not in output \
                    and '"reasoning' not in output:
                return output  # fast path: no stream is inside reasoning, nothing to strip
            event = parse_sse(output)
            if event is None or "id" not in event:
                return output
            for choice in event.get("choices") or ():
                if isinstance(choice.get("delta"), dict):
                    drop_fields(choice["delta"])
                found = _lk_text(choice)
                if found:
                    _lk_set_text(found[1], stream_text(event["id"], found[0]))
            if _lk_finished(event):
                inside.pop(event["id"], None)
            elif not starts_in_reasoning and inside.get(event["id"]) is False:
                del inside[event["id"]]  # keep only streams inside reasoning (fast path)
            return to_sse(event)
        data = response_dict(output)
        for choice in data.get("choices") or ():
            if isinstance(choice.get("message"), dict):
                drop_fields(choice["message"])
            found = _lk_text(choice)
            if found:
                _lk_set_text(found[1], clean_text(found[0]))
        return data
    return run
