"""Reading an endpoint's answers: the result of one call, and the incremental parser for its
streamed body (server-sent events, OpenAI style, or JSON lines, LMI style), split by
SageMaker into payload parts at arbitrary byte offsets."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from lmikit.errors import InvokeError


@dataclass
class InvokeResult:
    """Text plus client-side timings (SageMaker has no TTFT metric; we measure it here)."""

    text: str
    body: Any
    total_s: float
    ttft_s: float | None = None
    tokens: int = 0
    component: str = ""
    session_id: str | None = None
    # the server's own counts, from the stream's usage chunk (None where it sent none):
    # usage.prompt_tokens, and usage.prompt_tokens_details.cached_tokens, which vLLM sends
    # only when started with --enable-prompt-tokens-details (LMI does not start it so)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    # the first generated token of any kind: answer text, reasoning (vLLM's reasoning
    # parser streams it as delta.reasoning_content, newer vLLM as delta.reasoning) or a
    # tool call; the engine's time to first token, where ttft_s is the first answer text's
    first_token_s: float | None = None
    # times botocore retried the call (throttling, 5xx) before this answer came: its
    # back-off is inside the timings (ResponseMetadata.RetryAttempts)
    retries: int = 0

    @property
    def tokens_per_s(self) -> float | None:
        """Decode speed: tokens after the first over the time after the first token."""
        if self.tokens <= 1 or self.ttft_s is None or self.total_s <= self.ttft_s:
            return None
        return (self.tokens - 1) / (self.total_s - self.ttft_s)


class StreamParser:
    """Incremental parser for SSE and JSON-lines bodies split at arbitrary byte offsets.

    >>> p = StreamParser()
    >>> p.feed(b'data: {"choices": [{"delta": {"content": "He')
    []
    >>> p.feed(b'llo"}}]}\\n\\ndata: [DONE]\\n\\n')
    [{'choices': [{'delta': {'content': 'Hello'}}]}]
    >>> p.done
    True
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.done = False

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        events = []
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[Any]:
        rest, self._buffer = self._buffer, b""
        event = self._line(rest)
        return [event] if event is not None else []

    def _line(self, raw: bytes) -> Any:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line or line.startswith((":", "event:", "id:", "retry:")):
            return None
        if line.startswith("data:"):
            line = line[5:].strip()
            if line == "[DONE]":
                self.done = True
                return None
        try:
            return json.loads(line)
        except ValueError as exc:
            raise InvokeError(f"cannot parse a stream line as JSON: {line[:200]!r}") from exc


def event_text(event: Any) -> str:
    """The new text in one stream event (OpenAI chat/completion chunk or LMI token)."""
    if not isinstance(event, dict):
        return ""
    if "error" in event or event.get("object") == "error":
        err = event.get("error", event)
        message = err.get("message", err) if isinstance(err, dict) else err
        raise InvokeError(f"the model returned an error in the stream: {message}")
    choices = event.get("choices")
    if isinstance(choices, list) and choices:
        c = choices[0]
        if not isinstance(c, dict):
            return ""
        for key in ("delta", "message"):  # a chunk, or a whole reply sent unstreamed
            if isinstance(c.get(key), dict):
                return str(c[key].get("content") or "")
        return str(c.get("text") or "")
    token = event.get("token")
    if isinstance(token, dict):
        return "" if token.get("special") else str(token.get("text") or "")
    if isinstance(event.get("generated_text"), str):  # LMI's reply to an unstreamed body
        return str(event["generated_text"])
    return ""


def generated_other(event: Any) -> bool:
    """Whether a chat stream event carries a generated token that is not answer text:
    reasoning (``reasoning_content``, or ``reasoning`` in newer vLLM) or a tool call.

    >>> generated_other({"choices": [{"delta": {"reasoning_content": "Let"}}]})
    True
    >>> generated_other({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    False
    """
    choices = event.get("choices") if isinstance(event, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    delta = choices[0].get("delta")
    return isinstance(delta, dict) and any(
        delta.get(k) for k in ("reasoning_content", "reasoning", "tool_calls"))


def body_text(body: Any) -> str:
    """The generated text in a non-streaming response body."""
    if isinstance(body, dict):
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            c = choices[0]
            if isinstance(c.get("message"), dict):
                return str(c["message"].get("content") or "")
            return str(c.get("text") or "")
        if "generated_text" in body:
            return str(body["generated_text"])
    if isinstance(body, list) and body and isinstance(body[0], dict):
        return str(body[0].get("generated_text", ""))
    return body if isinstance(body, str) else json.dumps(body)


def usage_tokens(event: Any) -> int | None:
    """The completion token count in an event's (or a whole body's) ``usage``, if any."""
    return _usage_counts(event).get("completion_tokens")


def _usage_counts(event: Any) -> dict[str, int]:
    """The token counts in one event's ``usage`` (vLLM's UsageInfo): ``completion_tokens``,
    ``prompt_tokens`` and, where the server reports it, ``cached_tokens`` (from
    ``prompt_tokens_details``); only those present as whole numbers.

    >>> _usage_counts({"usage": {"prompt_tokens": 4031, "completion_tokens": 8,
    ...                          "prompt_tokens_details": {"cached_tokens": 3840}}})
    {'completion_tokens': 8, 'prompt_tokens': 4031, 'cached_tokens': 3840}
    """
    usage = event.get("usage") if isinstance(event, dict) else None
    if not isinstance(usage, dict):
        return {}
    details = usage.get("prompt_tokens_details")
    found = {"completion_tokens": usage.get("completion_tokens"),
             "prompt_tokens": usage.get("prompt_tokens"),
             "cached_tokens": details.get("cached_tokens") if isinstance(details, dict)
             else None}
    return {k: v for k, v in found.items()
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


class TokenStream:
    """Iterate to get text pieces as they arrive; ``result`` is set when the stream ends."""

    def __init__(self, events: Iterator[dict[str, Any]], clock: Any, start: float,
                 component: str, session_id: str | None,
                 on_result: Callable[[InvokeResult], None] | None = None,
                 retries: int = 0, *, endpoint: str | None = None) -> None:
        self._events = events
        self._retries = retries
        self._target = f"{endpoint}/{component}" if endpoint else component
        self._on_result = on_result
        self._clock = clock
        self._start = start
        self._component = component
        self._session_id = session_id
        self._parts: list[str] = []
        self._tokens = 0
        self._usage: dict[str, int] = {}
        self._ttft: float | None = None
        self._first: float | None = None
        self.result: InvokeResult | None = None

    @property
    def started_at(self) -> float:
        """When the request was sent, on the endpoint's clock (``clock.monotonic()``)."""
        return self._start

    def __iter__(self) -> Iterator[str]:
        from botocore.exceptions import ClientError

        from lmikit.aws import read_errors

        broken = read_errors()
        parser = StreamParser()
        try:
            for event in self._events:
                if "PayloadPart" in event:
                    data = event["PayloadPart"].get("Bytes", b"")
                    yield from self._emit(parser.feed(data))
                elif "ModelStreamError" in event or "InternalStreamFailure" in event:
                    kind = "ModelStreamError" if "ModelStreamError" in event else \
                        "InternalStreamFailure"
                    raise InvokeError(_stream_error_text(kind, event[kind]))
            yield from self._emit(parser.close())
        except InvokeError:
            raise
        except ClientError as exc:  # botocore's EventStreamError for an exception event
            raise _map_stream_error(exc) from exc
        except broken as exc:  # a stall past the read timeout, a dropped connection
            from lmikit.aws import read_failure

            raise InvokeError(f"{self._target}: the response stream broke: "
                              f"{read_failure(exc)} ({exc})") from exc
        total = self._clock.monotonic() - self._start
        tokens = self._usage.get("completion_tokens", self._tokens)
        self.result = InvokeResult("".join(self._parts), None, total, self._ttft, tokens,
                                   self._component, self._session_id,
                                   self._usage.get("prompt_tokens"),
                                   self._usage.get("cached_tokens"), self._first,
                                   self._retries)
        if self._on_result is not None:
            self._on_result(self.result)

    def _emit(self, events: list[Any]) -> Iterator[str]:
        for event in events:
            usage = _usage_counts(event)
            if usage:
                self._usage = usage
            text = event_text(event)
            now = None
            if self._first is None and (text or generated_other(event)):
                self._first = now = self._clock.monotonic() - self._start
            if not text:
                continue
            if self._ttft is None:
                self._ttft = now if now is not None else self._clock.monotonic() - self._start
            self._tokens += 1
            self._parts.append(text)
            yield text

    @property
    def text(self) -> str:
        return "".join(self._parts)


def _stream_error_text(kind: str, err: dict[str, Any]) -> str:
    code = err.get("ErrorCode")
    message = err.get("Message") or err.get("message") or "no message"
    return f"{kind} while streaming: {message}" + (f" (ErrorCode {code})" if code else "")


def _map_stream_error(exc: Any) -> InvokeError:
    error = exc.response.get("Error", {})
    code = error.get("Code", "StreamError")
    return InvokeError(_stream_error_text(code, {
        "Message": error.get("Message"),
        "ErrorCode": error.get("ErrorCode") or exc.response.get("ErrorCode")}))
