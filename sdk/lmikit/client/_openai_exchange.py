"""One OpenAI API request -> one SageMaker runtime call, independent of the HTTP library.

:mod:`lmikit.client._openai` wraps :class:`SageMakerExchange` in an ``httpx`` (or
``httpx2``) transport. Here: routing ``model=`` to a component (:class:`ModelRouter`), the
runtime call through boto3, re-framing the stream
(:class:`~lmikit.client._openai_sse.SseReframer`), and mapping SageMaker's errors to the
status codes the openai package turns into its exceptions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from lmikit.client._openai_sse import SseReframer
from lmikit.names import MODEL_ID_ENV, adapter_component_name, base_component_name

NEW_SESSION = "NEW_SESSION"  # InvokeEndpoint's SessionId that opens a session
# Where the base component names its model: lmikit's own record of the spec's model.id (in
# the component's environment, or in its SageMaker Model's when SageMaker copies S3 weights).
MODEL_ENV_KEYS = (MODEL_ID_ENV,)
_ROUTING_HEADER = "x-amzn-sagemaker-inference-component"
_OPERATIONS = {False: "InvokeEndpoint", True: "InvokeEndpointWithResponseStream"}

def base_url(endpoint: str) -> str:
    """The base URL the client is given; the transport answers it, nothing is resolved
    (``.invalid`` is reserved: no request can leave the machine by mistake).

    >>> base_url("docqa")
    'https://sagemaker.lmikit.invalid/endpoints/docqa/v1'
    """
    return f"https://sagemaker.lmikit.invalid/endpoints/{endpoint}/v1"


class UnknownModel(LookupError):
    """``model=`` names neither the endpoint, its base model nor one of its adapters."""


class TransportFailure(Exception):
    """The call did not get an answer (timeout, connection): the HTTP library's own
    exception is raised for it, which the openai package reports as such."""

    def __init__(self, message: str, *, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout


@dataclass
class HttpReply:
    """A library-neutral HTTP answer; ``body`` is bytes or an iterator (a stream)."""

    status: int
    headers: dict[str, str]
    body: bytes | Iterator[bytes] = b""
    close: Callable[[], None] | None = None


# --- routing --------------------------------------------------------------------------

@dataclass
class ModelRouter:
    """``model=`` -> inference component. Thread-safe; lists the endpoint's components only
    for what was not given, once, and again (at most every ``relist_s``) on a miss."""

    endpoint: str
    sagemaker: Callable[[], Any] | None = None  # -> a boto3 "sagemaker" client
    adapters: Iterable[str] | None = None
    base_model: str | None = None
    base_component: str | None = None
    relist_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _given_adapters: frozenset[str] | None = field(init=False, default=None)
    _found_adapters: frozenset[str] = field(init=False, default=frozenset())
    _found_model: str | None = field(init=False, default=None)
    _listed_at: float | None = field(init=False, default=None)
    _list_error: str | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.adapters is not None:
            self._given_adapters = frozenset(self.adapters)
        self.base_component = self.base_component or base_component_name(self.endpoint)

    @property
    def _complete(self) -> bool:
        return self._given_adapters is not None and self.base_model is not None

    def _lookup(self, model: str) -> str | None:
        if model in (self.endpoint, self.base_component):
            return self.base_component
        if model in (self.base_model, self._found_model):
            return self.base_component
        adapters = self._given_adapters if self._given_adapters is not None \
            else self._found_adapters
        if model in adapters:
            return adapter_component_name(self.endpoint, model)
        return None

    def component_for(self, model: str) -> str:
        """The component serving ``model``; raises :class:`UnknownModel` listing the valid
        names."""
        with self._lock:
            found = self._lookup(model)
            if found is None and not self._complete:
                now = self.clock()
                if self._listed_at is None or now - self._listed_at >= self.relist_s:
                    self._list(now)
                    found = self._lookup(model)
            if found is not None:
                return found
            valid = ", ".join(repr(n) for n in self._names())
            why = f" (listing its components failed: {self._list_error})" \
                if self._list_error else ""
            raise UnknownModel(f"model {model!r} is not served by endpoint {self.endpoint!r}"
                               f"{why}; use one of: {valid}")

    def models(self) -> dict[str, str]:
        """Every name ``model=`` accepts -> its component (lists the endpoint if needed)."""
        with self._lock:
            if not self._complete and self._listed_at is None:
                self._list(self.clock())
            return {n: self._lookup(n) or "" for n in self._names()}

    def _names(self) -> list[str]:
        names = [self.endpoint]
        for m in (self.base_model, self._found_model):
            if m and m not in names:
                names.append(m)
        adapters = self._given_adapters if self._given_adapters is not None \
            else self._found_adapters
        return names + sorted(adapters)

    def _list(self, now: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self._listed_at = now
        if self.sagemaker is None:
            self._list_error = "no SageMaker client to list them with"
            return
        try:
            client = self.sagemaker()
            names: list[str] = []
            kwargs: dict[str, Any] = {"EndpointNameEquals": self.endpoint, "MaxResults": 100}
            while True:
                page = client.list_inference_components(**kwargs)
                names += [c["InferenceComponentName"] for c in page["InferenceComponents"]]
                if not page.get("NextToken"):
                    break
                kwargs["NextToken"] = page["NextToken"]
            prefix = f"{self.endpoint}-"
            self._found_adapters = frozenset(
                n[len(prefix):] for n in names if n.startswith(prefix)
                and n != self.base_component)
            if self.base_model is None and self.base_component in names:
                described = client.describe_inference_component(
                    InferenceComponentName=self.base_component)
                spec = described.get("Specification", {})
                env = (spec.get("Container") or {}).get("Environment") or {}
                if not env and spec.get("ModelName"):
                    model = client.describe_model(ModelName=spec["ModelName"])
                    env = model.get("PrimaryContainer", {}).get("Environment", {})
                self._found_model = next((env[k] for k in MODEL_ENV_KEYS if env.get(k)), None)
            self._list_error = None
        except ClientError as exc:
            err = exc.response.get("Error", {})
            self._list_error = f"{err.get('Code', 'Error')}: {err.get('Message', exc)}"
        except BotoCoreError as exc:
            self._list_error = str(exc)


# --- errors -----------------------------------------------------------------------------

_STATUS_BY_CODE = {
    "ThrottlingException": 429, "Throttling": 429, "TooManyRequestsException": 429,
    "ModelNotReadyException": 429, "AccessDeniedException": 403, "AccessDenied": 403,
    "UnrecognizedClientException": 401, "InvalidSignatureException": 401,
    "ExpiredTokenException": 401, "InvalidClientTokenId": 401, "IncompleteSignature": 401,
    "ValidationError": 400, "ValidationException": 400,
}


def status_for_error(code: str, http_status: int, original_status: object = None) -> int:
    """The HTTP status the openai package sees for a SageMaker runtime error (it picks the
    exception class from it). ``ModelError`` carries the container's own status.

    >>> status_for_error("ModelError", 424, 400), status_for_error("ModelError", 424, 424)
    (400, 424)
    >>> status_for_error("ThrottlingException", 400), status_for_error("ServiceUnavailable", 503)
    (429, 503)
    """
    if code == "ModelError":
        if isinstance(original_status, int) and 400 <= original_status < 600:
            return original_status
        return 424
    if code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[code]
    return http_status if 400 <= http_status < 600 else 500


def error_reply(status: int, message: str, type_: str, code: object = None,
                param: str | None = None, request_id: str | None = None) -> HttpReply:
    """An OpenAI-shaped error answer. ``x-should-retry: false``: boto3 already retried."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    headers = {"content-type": "application/json", "x-should-retry": "false"}
    if request_id:
        headers["x-request-id"] = request_id
    return HttpReply(status, headers, json.dumps(body).encode())


def _client_error_reply(exc: Any, target: str) -> HttpReply:
    response = exc.response
    err = response.get("Error", {})
    code = str(err.get("Code", "Error"))
    meta = response.get("ResponseMetadata", {})
    original = response.get("OriginalStatusCode")
    status = status_for_error(code, int(meta.get("HTTPStatusCode") or 500), original)
    message = f"{target}: {code}: {err.get('Message') or exc}"
    return error_reply(status, message, code, original if code == "ModelError" else code,
                       request_id=meta.get("RequestId"))


def _transport_failure(exc: BaseException, target: str) -> TransportFailure:
    from lmikit.aws import is_timeout

    return TransportFailure(f"{target}: {exc}", timeout=is_timeout(exc))


# --- the exchange: one OpenAI API request -> one SageMaker runtime call -------------------

@cache
def _passthrough_headers(operation: str) -> dict[str, str]:
    """lower-cased SageMaker header -> boto3 parameter, from botocore's model: the request
    headers a caller may set per request with ``extra_headers``."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model(operation).input_shape
    return {m.serialization["name"].lower(): name for name, m in shape.members.items()
            if m.serialization.get("location") == "header"
            and name not in ("ContentType", "Accept", "InferenceComponentName")}


@dataclass
class SageMakerExchange:
    """Answers OpenAI API requests by calling the SageMaker runtime (HTTP-library neutral)."""

    endpoint: str
    runtime: Any  # a boto3 "sagemaker-runtime" client
    router: ModelRouter
    session_id: str | Callable[[], str] | None = None
    prefix_id: str | None = None

    def handle(self, method: str, path: str, headers: Mapping[str, str],
               body: bytes) -> HttpReply:
        route = _relative(path, self.endpoint)
        if method == "POST" and route in ("/chat/completions", "/completions"):
            return self._generate(route, {k.lower(): v for k, v in headers.items()}, body)
        if method == "GET" and route == "/models":
            return self._models(None)
        if method == "GET" and route.startswith("/models/"):
            return self._models(route[len("/models/"):])
        return error_reply(404, f"{method} {route} is not served: lmikit's SageMaker "
                           "transport answers POST /chat/completions, POST /completions, "
                           "GET /models and GET /models/{model}", "invalid_request_error",
                           "unknown_url")

    def _models(self, wanted: str | None) -> HttpReply:
        models = self.router.models()
        cards = [{"id": name, "object": "model", "created": 0, "owned_by": "lmikit",
                  "inference_component": component} for name, component in models.items()]
        if wanted is None:
            return HttpReply(200, {"content-type": "application/json"},
                             json.dumps({"object": "list", "data": cards}).encode())
        for card in cards:
            if card["id"] == wanted:
                return HttpReply(200, {"content-type": "application/json"},
                                 json.dumps(card).encode())
        try:
            self.router.component_for(wanted)  # lists again; its message names the valid
        except UnknownModel as exc:
            return error_reply(404, str(exc), "invalid_request_error", "model_not_found",
                               "model")
        return self._models(wanted)  # pragma: no cover - found after listing again

    def _generate(self, route: str, headers: dict[str, str], body: bytes) -> HttpReply:
        try:
            payload = json.loads(body or b"null")
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return error_reply(400, "the request body must be a JSON object",
                               "invalid_request_error")
        model = payload.pop("model", None)
        if not isinstance(model, str) or not model:
            return error_reply(400, "'model' is required: the endpoint's name, its base "
                               "model's id or an adapter's name", "invalid_request_error",
                               None, "model")
        if _ROUTING_HEADER in headers:
            return error_reply(400, "X-Amzn-SageMaker-Inference-Component cannot be set per "
                               "request: model= picks the inference component",
                               "invalid_request_error")
        try:
            component = self.router.component_for(model)
        except UnknownModel as exc:
            return error_reply(404, str(exc), "invalid_request_error", "model_not_found",
                               "model")
        stream = payload.get("stream") is True
        operation = _OPERATIONS[stream]
        kwargs: dict[str, Any] = {"EndpointName": self.endpoint,
                                  "InferenceComponentName": component,
                                  "ContentType": "application/json",
                                  "Body": json.dumps(payload).encode()}
        for header, param in _passthrough_headers(operation).items():
            if header in headers:
                kwargs[param] = headers[header]
        problem = self._routing_hints(kwargs, stream)
        if problem is not None:
            return problem
        target = f"{self.endpoint}/{component}"
        from botocore.exceptions import ClientError

        from lmikit.aws import read_errors

        try:
            if stream:
                response = self.runtime.invoke_endpoint_with_response_stream(**kwargs)
            else:
                response = self.runtime.invoke_endpoint(**kwargs)
        except ClientError as exc:
            return _client_error_reply(exc, target)
        except read_errors() as exc:
            raise _transport_failure(exc, target) from exc
        request_id = response.get("ResponseMetadata", {}).get("RequestId", "")
        if stream:
            events = response["Body"]
            return HttpReply(200, {"content-type": "text/event-stream",
                                   "x-request-id": request_id},
                             _sse_chunks(events, target), getattr(events, "close", None))
        try:
            data = response["Body"].read()
        except read_errors() as exc:  # the answer broke off: a stall, a dropped connection
            raise _transport_failure(exc, target) from exc
        return HttpReply(200, {"content-type": "application/json", "x-request-id": request_id},
                         data)

    def _routing_hints(self, kwargs: dict[str, Any], stream: bool) -> HttpReply | None:
        from lmikit.errors import LmikitError

        if "SessionId" not in kwargs and self.session_id is not None:
            try:
                kwargs["SessionId"] = self.session_id() if callable(self.session_id) \
                    else self.session_id
            except LmikitError as exc:
                return error_reply(424, f"{self.endpoint}: cannot open the sticky session: "
                                   f"{exc}", "session_error")
        if kwargs.get("SessionId") == NEW_SESSION:
            return error_reply(400, "SessionId NEW_SESSION cannot be sent with a chat or "
                               "completion request (InvokeEndpointWithResponseStream cannot "
                               "open a session, and LMI opens one only for the body "
                               '{"requestType": "NEW_SESSION"}): open it with '
                               "Endpoint.session() and use session.openai()",
                               "invalid_request_error")
        if "PrefixAwareId" not in kwargs and self.prefix_id is not None:
            kwargs["PrefixAwareId"] = self.prefix_id
        return None


def _relative(path: str, endpoint: str) -> str:
    prefix = f"/endpoints/{endpoint}/v1"
    route = path[len(prefix):] if path.startswith(prefix) else path
    return "/" + route.strip("/")


def _sse_chunks(events: Iterable[dict[str, Any]], target: str) -> Iterator[bytes]:
    """PayloadPart events -> SSE bytes; a stream error ends it with an error event, a broken
    read (a stall past the read timeout, a dropped connection) raises TransportFailure."""
    from botocore.exceptions import ClientError

    from lmikit.aws import read_errors

    reframer = SseReframer()
    try:
        for event in events:
            if "PayloadPart" in event:
                out = reframer.feed(event["PayloadPart"].get("Bytes", b""))
            else:
                kind = next(iter(event), "StreamError")
                detail = event.get(kind) or {}
                out = reframer.fail(f"{target}: {kind}: {detail.get('Message', detail)}", kind,
                                    detail.get("ErrorCode"))
            if out:
                yield out
            if reframer.failed:
                return
        yield reframer.close()
    except ClientError as exc:  # botocore's EventStreamError for an exception event
        err = exc.response.get("Error", {})
        kind = str(err.get("Code", "StreamError"))
        yield reframer.fail(f"{target}: {kind}: {err.get('Message', exc)}", kind,
                            err.get("ErrorCode") or exc.response.get("ErrorCode"))
    except read_errors() as exc:
        raise _transport_failure(exc, target) from exc
