"""The fake SageMaker runtime: InvokeEndpoint(WithResponseStream) against LMI-like components.

The "model" echoes the prompt, so tests can check routing: a reply names the component
that served it and, inside a live session, the turn. Sessions follow LMI's protocol
(``NEW_SESSION`` / ``CLOSE``, ``NewSessionId: <id>; Expires=...``); an expired or unknown
session silently runs without state, as LMI does. Streams are split into payload parts at
arbitrary byte boundaries (not at event boundaries), as the service does.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lmikit.testing._control import ControlPlane, Resource, ServiceError
from lmikit.testing._wire import payload_part, stream_exception

DEFAULT_MAX_TOKENS = 16


@dataclass
class Session:
    id: str
    component: str
    expires_at: float  # on the clock's monotonic scale
    expires_text: str
    turns: int = 0
    closed: bool = False


@dataclass
class Reply:
    """What the runtime answers: headers for the response plus the tokens to send."""

    headers: dict[str, str]
    tokens: list[str]
    style: str  # "chat" | "completion" | "lmi" | "raw"
    raw: bytes = b""


def model_error(message: str, original_status: int = 400) -> ServiceError:
    return ServiceError("ModelError", f"Received client error ({original_status}) from "
                        f"primary with message \"{message}\".", 424,
                        {"OriginalStatusCode": original_status, "OriginalMessage": message})


class Runtime:
    def __init__(self, control: ControlPlane, *, stream_part_bytes: int = 11,
                 ttft_seconds: float = 0.0, token_seconds: float = 0.0) -> None:
        self.control = control
        self.stream_part_bytes = stream_part_bytes
        self.ttft_seconds = ttft_seconds
        self.token_seconds = token_seconds
        self.sessions: dict[str, Session] = {}
        self.invocations: list[dict[str, Any]] = []

    # --- routing ---------------------------------------------------------------------

    def _target(self, p: dict[str, Any]) -> Resource:
        c = self.control
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

    def _base(self, res: Resource) -> Resource:
        base = res.request["Specification"].get("BaseInferenceComponentName")
        return self.control.components[base] if base else res

    def _env(self, res: Resource) -> dict[str, str]:
        spec = self._base(res).request["Specification"]
        env = spec.get("Container", {}).get("Environment")
        if not env and spec.get("ModelName"):
            return self.control.model_environment(spec["ModelName"])
        return dict(env or {})

    # --- invoke ----------------------------------------------------------------------

    def invoke(self, p: dict[str, Any], streaming: bool) -> Reply:
        res = self._target(p)
        body: bytes = p.get("Body", b"")
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = None
        session_id = p.get("SessionId")
        env = self._env(res)
        sessions_on = env.get("OPTION_ENABLE_STATEFUL_SESSIONS") == "true"
        request_type = payload.get("requestType") if isinstance(payload, dict) else None
        self.invocations.append({"component": res.name, "session": session_id,
                                 "prefix_aware_id": p.get("PrefixAwareId"),
                                 "streaming": streaming, "payload": payload})
        if session_id == "NEW_SESSION" or request_type in ("NEW_SESSION", "CLOSE"):
            return self._session_call(res, session_id, request_type, sessions_on, env)
        if not isinstance(payload, dict):
            raise model_error("the body is not a JSON object")
        turn = None
        if session_id:
            s = self.sessions.get(session_id)
            if s and not s.closed and self.control.clock.monotonic() < s.expires_at:
                s.turns += 1
                turn = s.turns
        prompt, style = _prompt(payload)
        if prompt is None:
            raise model_error("the body needs 'messages', 'prompt' or 'inputs'")
        limit = _max_tokens(payload)
        who = res.name + (f" turn {turn}" if turn else "")
        words = [f"[{who}]"] + (prompt.split() or ["(empty)"])
        tokens = [w + " " for w in words][:limit]
        return Reply({}, tokens, style)

    def _session_call(self, res: Resource, session_id: str | None, request_type: str | None,
                      sessions_on: bool, env: dict[str, str]) -> Reply:
        if not sessions_on:
            raise model_error("stateful sessions are not enabled on this endpoint "
                              "(OPTION_ENABLE_STATEFUL_SESSIONS is not 'true')")
        clock = self.control.clock
        if session_id == "NEW_SESSION":
            if request_type != "NEW_SESSION":
                raise model_error("a NEW_SESSION call needs the body "
                                  '{"requestType": "NEW_SESSION"}')
            ttl = int(env.get("OPTION_SESSIONS_EXPIRATION", "1200"))
            sid = uuid.uuid4().hex
            when = dt.datetime.fromtimestamp(clock.time() + ttl, tz=dt.timezone.utc)
            text = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            self.sessions[sid] = Session(sid, self._base(res).name, clock.monotonic() + ttl,
                                         text)
            return Reply({"X-Amzn-SageMaker-New-Session-Id": f"{sid}; Expires={text}"}, [],
                         "raw", json.dumps({"result": "session created"}).encode())
        if request_type == "CLOSE":
            s = self.sessions.get(session_id or "")
            if s is None or s.closed:
                raise model_error(f"session {session_id} not found", 404)
            s.closed = True
            return Reply({"X-Amzn-SageMaker-Closed-Session-Id": s.id}, [], "raw",
                         json.dumps({"result": "session closed"}).encode())
        raise model_error("a NEW_SESSION request needs SessionId=NEW_SESSION")

    # --- rendering ---------------------------------------------------------------------

    def render_body(self, reply: Reply) -> bytes:
        if reply.style == "raw":
            return reply.raw
        text = "".join(reply.tokens).rstrip()
        usage = {"prompt_tokens": 8, "completion_tokens": len(reply.tokens),
                 "total_tokens": 8 + len(reply.tokens)}
        if reply.style == "chat":
            return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion",
                               "model": "lmi", "choices": [{
                                   "index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": text}}],
                               "usage": usage}).encode()
        if reply.style == "completion":
            return json.dumps({"id": "cmpl-fake", "object": "text_completion",
                               "choices": [{"index": 0, "text": text,
                                            "finish_reason": "stop"}],
                               "usage": usage}).encode()
        return json.dumps({"generated_text": text}).encode()

    def stream_events(self, reply: Reply, error_after: int | None = None,
                      error_message: str = "") -> Iterator[bytes]:
        """Event-stream messages; the payload is cut into parts of ``stream_part_bytes``."""
        clock = self.control.clock
        if reply.style == "raw":
            yield payload_part(reply.raw)
            return
        pending = b""
        for i, token in enumerate(reply.tokens):
            clock.sleep(self.ttft_seconds if i == 0 else self.token_seconds)
            if error_after is not None and i >= error_after:
                if pending:
                    yield payload_part(pending)
                yield stream_exception("ModelStreamError", error_message, "ModelStreamError")
                return
            pending += _stream_line(reply.style, token, i, len(reply.tokens))
            size = max(1, self.stream_part_bytes)
            while pending:  # flush each token now, cut into parts of at most `size`
                yield payload_part(pending[:size])
                pending = pending[size:]
        if reply.style in ("chat", "completion"):
            pending += b"data: [DONE]\n\n"
        while pending:
            size = max(1, self.stream_part_bytes)
            yield payload_part(pending[:size])
            pending = pending[size:]


def _stream_line(style: str, token: str, i: int, n: int) -> bytes:
    last = i == n - 1
    if style == "chat":
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "lmi",
                 "choices": [{"index": 0, "delta": {"content": token},
                              "finish_reason": "stop" if last else None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"
    if style == "completion":
        chunk = {"id": "cmpl-fake", "object": "text_completion",
                 "choices": [{"index": 0, "text": token,
                              "finish_reason": "stop" if last else None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"
    line = {"token": {"id": i, "text": token, "log_prob": -0.1, "special": False},
            "generated_text": None}
    return json.dumps(line).encode() + b"\n"


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


def _max_tokens(payload: dict[str, Any]) -> int:
    value = payload.get("max_tokens") or payload.get("max_new_tokens")
    params = payload.get("parameters")
    if not value and isinstance(params, dict):
        value = params.get("max_new_tokens")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_TOKENS
