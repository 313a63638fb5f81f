"""The fake SageMaker runtime: InvokeEndpoint(WithResponseStream) against LMI-like components.

Its rules and their sources: docs/sandbox.md, "The fake runtime".
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lmikit.testing._control import ControlPlane, Resource, ServiceError
from lmikit.testing._metrics import CacheModel, prompt_words
from lmikit.testing._placement import copy_instances
from lmikit.testing._wire import payload_part, stream_exception

DEFAULT_MAX_TOKENS = 16
LMI_DEFAULT_MODEL_NAME = "lmi"  # vllm_async_service.py: served_model_name or "lmi"
STREAM_FRAMINGS = ("jsonlines", "sse")


@dataclass
class Session:
    id: str
    component: str
    expires_at: float  # on the clock's monotonic scale
    expires_text: str
    turns: int = 0
    closed: bool = False
    copy: int = 0  # the copy (container) that holds it
    instance: int = 0  # the instance SageMaker pins it to


@dataclass
class Reply:
    """What the runtime answers: headers for the response plus the tokens to send."""

    headers: dict[str, str]
    tokens: list[str]
    style: str  # "chat" | "completion" | "lmi" | "raw"
    raw: bytes = b""
    stream: bool = False  # the body asked the container to stream
    include_usage: bool = False
    model: str = LMI_DEFAULT_MODEL_NAME
    prompt_tokens: int = 0
    cached_tokens: int | None = None  # sent as usage.prompt_tokens_details where not None
    finish_reason: str = "stop"
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = 0
    ttft_s: float | None = None  # the cache model's time to first token, when it runs
    component: str = ""

    @property
    def content_type(self) -> str:
        """LMI's Content-Type: create_stream_chunk_output says application/jsonlines."""
        return "application/jsonlines" if self.stream else "application/json"


def model_error(message: str, original_status: int = 424) -> ServiceError:
    """SageMaker's wrapping of a non-2xx container answer; LMI's body is {code, error}."""
    kind = "client" if original_status < 500 else "server"
    body = json.dumps({"code": original_status, "error": message})
    return ServiceError("ModelError", f"Received {kind} error ({original_status}) from "
                        f"primary with message \"{body}\". See the endpoint's CloudWatch "
                        "logs for more information.", 424,
                        {"OriginalStatusCode": original_status, "OriginalMessage": body})


def input_parsing_failed(message: str) -> ServiceError:
    """LMI's answer when the body cannot become a vLLM request (vllm_async_service.py)."""
    return model_error(f"Input parsing failed: {message}", 424)


class Runtime:
    def __init__(self, clock: Any, *, stream_part_bytes: int = 11,
                 ttft_seconds: float = 0.0, token_seconds: float = 0.0) -> None:
        self.clock = clock
        self.stream_part_bytes = stream_part_bytes
        self.ttft_seconds = ttft_seconds
        self.token_seconds = token_seconds
        self.stream_framing = "jsonlines"
        self.prompt_tokens_details = False  # LMI's: vLLM's usage without cached tokens
        self.sessions: dict[str, Session] = {}
        self.rng = random.Random(0)  # which copy serves a request, where SageMaker may pick
        self.invocations: list[dict[str, Any]] = []
        self.cache: CacheModel | None = None  # set by FakeSageMaker(artifact_reader=...)
        self.compute_scale = 1.0  # multiplies the cache model's prefill/retrieve times

    # --- routing ---------------------------------------------------------------------

    def _target(self, p: dict[str, Any], c: ControlPlane) -> Resource:
        name = p["EndpointName"]
        endpoint = c.endpoints.get(name)
        if endpoint is None or endpoint.status not in ("InService", "Updating"):
            raise ServiceError("ValidationError", f"Endpoint {name} of account 123456789012 "
                               "not found.", 400)
        component = p.get("InferenceComponentName")
        hosted = [r for r in c.components.values() if r.request["EndpointName"] == name]
        if not component:
            if hosted:
                raise ServiceError("ValidationError", "Inference Component Name header is "
                                   "required for endpoints to which you plan to deploy "
                                   "inference components.", 400)
            raise ServiceError("ValidationError", f"Endpoint {name} has no model.", 400)
        res = c.components.get(component)
        if res is None or res.request["EndpointName"] != name:
            raise ServiceError("ValidationError", f"Inference component {component} not "
                               f"found on endpoint {name}.", 400)
        if res.status not in ("InService", "Updating"):
            raise ServiceError("ValidationError", f"Inference component {component} is in "
                               f"status {res.status}.", 400)
        return res

    @staticmethod
    def _base(res: Resource, c: ControlPlane) -> Resource:
        base = res.request["Specification"].get("BaseInferenceComponentName")
        return c.components[base] if base else res

    def _copy_instances(self, base: Resource, c: ControlPlane) -> list[int]:
        """The instance of each copy of ``base`` (``_placement.copy_instances``)."""
        variant = c.variant_of(base)
        return copy_instances(base.request, variant.get("InstanceType", ""),
                              int(variant.get("InitialInstanceCount", 1)))

    def _session_copy(self, session: Session, base: Resource, c: ControlPlane) -> int:
        """The copy a request of ``session`` reaches: any copy on the session's instance; a
        copy that did not open the session does not hold it (LMI SessionManager.get_session:
        ValueError "session not found", which vllm_async_service answers with 424)."""
        placed = self._copy_instances(base, c)
        on_instance = [i for i, where in enumerate(placed) if where == session.instance]
        copy = self.rng.choice(on_instance) if on_instance else session.copy
        if copy != session.copy:
            raise input_parsing_failed(f"session not found: {session.id}")
        return copy

    def _env(self, res: Resource, c: ControlPlane) -> dict[str, str]:
        spec = self._base(res, c).request["Specification"]
        env = spec.get("Container", {}).get("Environment")
        if not env and spec.get("ModelName"):
            return c.model_environment(spec["ModelName"])
        return dict(env or {})

    # --- invoke ----------------------------------------------------------------------

    def invoke(self, p: dict[str, Any], streaming: bool, control: ControlPlane) -> Reply:
        """Answer one invocation against ``control`` (the region's control plane)."""
        res = self._target(p, control)
        body: bytes = p.get("Body", b"")
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = None
        session_id = p.get("SessionId")
        env = self._env(res, control)
        # LMI's vLLM async service makes its SessionManager when enable_stateful_sessions is
        # "true" or unset (djl-serving v0.35.0 to master, lmi_vllm/vllm_async_service.py
        # VLLMHandler.initialize: properties.get("enable_stateful_sessions", "true") ==
        # "true"); on any other value the attribute is never set, and preprocess_request's
        # get_session(self.session_manager, ...) fails every request.
        if env.get("OPTION_ENABLE_STATEFUL_SESSIONS", "true") != "true":
            raise input_parsing_failed("'VLLMHandler' object has no attribute "
                                       "'session_manager'")
        request_type = payload.get("requestType") if isinstance(payload, dict) else None
        self.invocations.append({"component": res.name, "session": session_id,
                                 "prefix_aware_id": p.get("PrefixAwareId"),
                                 "streaming": streaming, "payload": payload})
        if session_id == "NEW_SESSION" or request_type in ("NEW_SESSION", "CLOSE"):
            return self._session_call(res, session_id, request_type, env, control)
        if not isinstance(payload, dict):
            raise input_parsing_failed("the body is not a JSON object")
        turn = copy = None
        if session_id:
            s = self.sessions.get(session_id)
            if s is None or s.closed:  # no copy holds it (LMI deletes a closed session)
                raise input_parsing_failed(f"session not found: {session_id}")
            copy = self._session_copy(s, self._base(res, control), control)
            if self.clock.monotonic() < s.expires_at:
                s.turns += 1
                turn = s.turns
        prompt, style = _prompt(payload)
        if prompt is None:
            raise input_parsing_failed(
                "invalid payload. must contain prompt, inputs, or messages")
        if style in ("chat", "completion"):
            _check_openai_request(payload, style)
        model = self._served_model(res, payload, env)
        limit = _max_tokens(payload)
        who = res.name + (f" turn {turn}" if turn else "")
        words = [f"[{who}]"] + (prompt.split() or ["(empty)"])
        tokens = [w + " " for w in words][:limit]
        stream_options = payload.get("stream_options")
        ttft, cached = self._through_cache(res, control, env, payload, p, copy, len(tokens))
        return Reply({}, tokens, style, stream=payload.get("stream") is True,
                     include_usage=isinstance(stream_options, dict)
                     and stream_options.get("include_usage") is True,
                     model=model, prompt_tokens=_prompt_tokens(payload),
                     cached_tokens=cached if self.prompt_tokens_details else None,
                     finish_reason="length" if len(words) > limit else "stop",
                     created=int(self.clock.time()), ttft_s=ttft, component=res.name)

    def _through_cache(self, res: Resource, control: ControlPlane, env: dict[str, str],
                       payload: dict[str, Any], p: dict[str, Any], copy: int | None,
                       output_tokens: int) -> tuple[float | None, int]:
        """Route the request to a copy, look its prompt up in that copy's tiers, publish
        the container's metrics; the time to first token (None without a cache model) and
        the prompt tokens the caches supplied (GPU pool plus LMCache, as vLLM counts them)."""
        if self.cache is None:
            return None, 0
        base = self._base(res, control)
        fleet = self.cache.fleet(base, control, env)
        served = fleet.serve(prompt_words(payload), session=p.get("SessionId"), at_copy=copy,
                             prefix_id=p.get("PrefixAwareId"),
                             salt=res.name if res is not base else "")
        self.cache.container(served, output_tokens, fleet, env)
        return (self.ttft_seconds + served.ttft_s * self.compute_scale,
                min(served.gpu_hit + served.external_hit, max(0, served.prompt_tokens - 1)))

    def _served_model(self, res: Resource, payload: dict[str, Any],
                      env: dict[str, str]) -> str:
        """The ``model`` vLLM sees: LMI names the adapter for an adapter component (the
        SageMaker adapter header), else the body's model, defaulting to the served name."""
        if res.request["Specification"].get("BaseInferenceComponentName"):
            return res.name
        served = env.get("OPTION_SERVED_MODEL_NAME") or LMI_DEFAULT_MODEL_NAME
        asked = payload.get("model")
        if asked is None or asked == served:
            return served
        # vLLM _check_model -> ErrorResponse(NotFoundError, 404); LMI's
        # vllm_non_stream_output_formatter finds no top-level code and answers 500 with
        # the ErrorResponse's str().
        raise model_error(f"error=ErrorInfo(message='The model `{asked}` does not exist.', "
                          "type='NotFoundError', param='model', code=404)", 500)

    def _session_call(self, res: Resource, session_id: str | None, request_type: str | None,
                      env: dict[str, str], control: ControlPlane) -> Reply:
        clock = self.clock
        if session_id == "NEW_SESSION":
            if request_type != "NEW_SESSION":
                raise input_parsing_failed("a NEW_SESSION call needs the body "
                                           '{"requestType": "NEW_SESSION"}')
            ttl = int(env.get("OPTION_SESSIONS_EXPIRATION", "1200"))
            sid = uuid.uuid4().hex
            when = dt.datetime.fromtimestamp(clock.time() + ttl, tz=dt.timezone.utc)
            text = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            base = self._base(res, control)
            placed = self._copy_instances(base, control)
            if self.cache is not None:  # the variant's routing picks the opening copy
                copy = self.cache.fleet(base, control, env).open_session(sid)
            else:
                copy = self.rng.randrange(len(placed)) if placed else 0
            self.sessions[sid] = Session(sid, base.name, clock.monotonic() + ttl, text,
                                         copy=copy, instance=placed[copy] if placed else 0)
            return Reply({"X-Amzn-SageMaker-New-Session-Id": f"{sid}; Expires={text}"}, [],
                         "raw", json.dumps({"result": f"Session {sid} created"}).encode())
        if request_type == "CLOSE":  # session_utils.close_session's answers
            s = self.sessions.get(session_id or "")
            if s is None or s.closed:
                raise model_error(f"Failed to close session: session not found: {session_id}")
            try:
                self._session_copy(s, self._base(res, control), control)
            except ServiceError:
                raise model_error("Failed to close session: session not found: "
                                  f"{session_id}") from None
            s.closed = True
            return Reply({"X-Amzn-SageMaker-Closed-Session-Id": s.id}, [], "raw",
                         json.dumps({"result": f"Session {s.id} closed"}).encode())
        raise input_parsing_failed("a NEW_SESSION request needs SessionId=NEW_SESSION")

    # --- rendering ---------------------------------------------------------------------

    def latency(self, reply: Reply) -> float:
        """Seconds the container takes for the whole reply (SageMaker's ModelLatency)."""
        first = self.ttft_seconds if reply.ttft_s is None else reply.ttft_s
        return first + self.token_seconds * max(0, len(reply.tokens) - 1)

    def render_body(self, reply: Reply) -> bytes:
        """The whole body, as InvokeEndpoint returns it (a streamed body arrives whole)."""
        if reply.style == "raw":
            return reply.raw
        per_token, tail = self._writes(reply)
        return b"".join(per_token + tail)

    def _writes(self, reply: Reply) -> tuple[list[bytes], list[bytes]]:
        """What the container writes: one write per token, then the closing writes."""
        if not reply.stream:
            return [], [json.dumps(_whole(reply)).encode() + b"\n"]
        chunks = _chunks(reply)
        frame = _sse_write if self.stream_framing == "sse" else _jsonl_write
        per_token = [b"".join(frame(c) for c in group) for group in chunks[0]]
        tail = [frame(c) for c in chunks[1]]
        if reply.style in ("chat", "completion"):
            tail.append(b"data: [DONE]\n\n\n" if self.stream_framing == "sse" else b"\n")
        if self.stream_framing == "sse":
            tail.append(b"\n")  # create_stream_chunk_output("", last_chunk=True)
        return per_token, tail

    def stream_events(self, reply: Reply, error_after: int | None = None,
                      error_message: str = "") -> Iterator[bytes]:
        """Event-stream messages; the payload is cut into parts of ``stream_part_bytes``."""
        clock = self.clock
        if reply.style == "raw":
            yield payload_part(reply.raw)
            return
        per_token, tail = self._writes(reply)
        size = max(1, self.stream_part_bytes)
        first = self.ttft_seconds if reply.ttft_s is None else reply.ttft_s
        if not per_token:  # not streamed by the container: the body after generation
            clock.sleep(first + self.token_seconds * max(0, len(reply.tokens) - 1))
        for i, data in enumerate(per_token):
            clock.sleep(first if i == 0 else self.token_seconds)
            if error_after is not None and i >= error_after:
                yield stream_exception("ModelStreamError", error_message, "ModelStreamError")
                return
            for start in range(0, len(data), size):  # flush each token now, cut into parts
                yield payload_part(data[start:start + size])
        pending = b"".join(tail)
        for start in range(0, len(pending), size):
            yield payload_part(pending[start:start + size])


def _jsonl_write(chunk: dict[str, Any]) -> bytes:
    return json.dumps(chunk, ensure_ascii=False).encode() + b"\n"


def _sse_write(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n\n"


def _usage(reply: Reply) -> dict[str, Any]:
    n = len(reply.tokens)
    usage: dict[str, Any] = {"prompt_tokens": reply.prompt_tokens,
                             "total_tokens": reply.prompt_tokens + n, "completion_tokens": n}
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


def _whole(reply: Reply) -> dict[str, Any]:
    """A non-streamed body: vLLM's ChatCompletionResponse / CompletionResponse, or LMI's."""
    text = "".join(reply.tokens).rstrip()
    if reply.style == "chat":
        return {"id": f"chatcmpl-{reply.id}", "object": "chat.completion",
                "created": reply.created, "model": reply.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": reply.finish_reason,
                             "stop_reason": None}],
                "usage": _usage(reply)}
    if reply.style == "completion":
        return {"id": f"cmpl-{reply.id}", "object": "text_completion",
                "created": reply.created, "model": reply.model,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": reply.finish_reason, "stop_reason": None}],
                "usage": _usage(reply)}
    return {"generated_text": text}


def _chunks(reply: Reply) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Stream chunks grouped per token (the first token's group opens the stream), and the
    chunks after the last token (vLLM's usage chunk)."""
    n = len(reply.tokens)
    groups: list[list[dict[str, Any]]] = []
    if reply.style == "lmi":
        text = "".join(reply.tokens).rstrip()
        for i, tok in enumerate(reply.tokens):
            groups.append([{"token": {"id": i, "text": tok, "log_prob": -0.1,
                                      "special": False},
                            "generated_text": text if i == n - 1 else None,
                            "details": None}])
        return groups, []
    head = {"id": f"chatcmpl-{reply.id}" if reply.style == "chat" else f"cmpl-{reply.id}",
            "object": "chat.completion.chunk" if reply.style == "chat" else "text_completion",
            "created": reply.created, "model": reply.model}
    for i, tok in enumerate(reply.tokens):
        finish = reply.finish_reason if i == n - 1 else None
        if reply.style == "chat":
            choice = {"index": 0, "delta": {"content": tok}, "logprobs": None,
                      "finish_reason": finish}
        else:
            choice = {"index": 0, "text": tok, "logprobs": None, "finish_reason": finish,
                      "stop_reason": None}
        groups.append([{**head, "choices": [choice]}])
    if reply.style == "chat" and groups:  # vLLM opens a chat stream with the role
        groups[0].insert(0, {**head, "choices": [{
            "index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
            "finish_reason": None}]})
    tail: list[dict[str, Any]] = []
    if reply.include_usage:  # vLLM's last chunk: no choices, the usage
        tail.append({**head, "choices": [], "usage": _usage(reply)})
    return groups, tail


def _check_openai_request(payload: dict[str, Any], style: str) -> None:
    """The checks of vLLM's request models that a client can trip; LMI reports the
    pydantic ValidationError as ``Input parsing failed`` (424)."""
    name = "ChatCompletionRequest" if style == "chat" else "CompletionRequest"

    def fail(field_name: str, message: str) -> ServiceError:
        return input_parsing_failed(f"1 validation error for {name}\n{field_name}\n  "
                                    f"{message}")

    if payload.get("stream_options") and not payload.get("stream"):
        # vLLM protocol.py validate_stream_options
        raise fail("stream_options",
                   "Value error, Stream options can only be defined when `stream=True`.")
    if "stream" in payload and not isinstance(payload["stream"], bool | None):
        raise fail("stream", "Input should be a valid boolean")
    for key in ("max_tokens", "max_completion_tokens", "n"):
        value = payload.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise fail(key, "Input should be a valid integer")
    if style == "chat":
        messages = payload["messages"]
        if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            raise fail("messages", "every message needs a 'role'")
    model = payload.get("model")
    if model is not None and not isinstance(model, str):
        raise fail("model", "Input should be a valid string")


def _prompt(payload: dict[str, Any]) -> tuple[str | None, str]:
    if isinstance(payload.get("messages"), list) and payload["messages"]:
        last = payload["messages"][-1]
        content = last.get("content") if isinstance(last, dict) else None
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return (content if isinstance(content, str) else None), "chat"
    if isinstance(payload.get("prompt"), str):
        return payload["prompt"], "completion"
    if isinstance(payload.get("inputs"), str):
        return payload["inputs"], "lmi"
    return None, "raw"


def _prompt_tokens(payload: dict[str, Any]) -> int:
    """The echo model's tokenizer: whitespace-separated words of every message/prompt."""
    return len(prompt_words(payload))


def _max_tokens(payload: dict[str, Any]) -> int:
    value = (payload.get("max_completion_tokens") or payload.get("max_tokens")
             or payload.get("max_new_tokens"))
    params = payload.get("parameters")
    if not value and isinstance(params, dict):
        value = params.get("max_new_tokens")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_TOKENS
