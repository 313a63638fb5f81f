"""Runtime client for a deployed endpoint: invoke, stream, adapters and sticky sessions.

>>> from lmikit.client import Endpoint  # doctest: +SKIP
>>> ep = Endpoint("docqa-qwen7b")  # doctest: +SKIP
>>> stream = ep.stream("Summarise the contract.", adapter="legal")  # doctest: +SKIP
>>> for piece in stream: print(piece, end="")  # doctest: +SKIP
>>> stream.result.ttft_s  # doctest: +SKIP
0.182
>>> with ep.session() as s:  # doctest: +SKIP
...     s.invoke("Read this document: ...")
...     s.invoke("What does clause 4 say?")   # lands on the same instance

Opt in to client-side TTFT metrics (CloudWatch ``LMIKit/Client``); every completed stream is
recorded without blocking, and closing the endpoint flushes them:

>>> with Endpoint("docqa-qwen7b", publish_metrics=True) as ep:  # doctest: +SKIP
...     "".join(ep.stream("Summarise the contract."))

Streams are parsed incrementally across payload-part boundaries, whether the container
sends server-sent events (``data: {...}``, OpenAI style) or JSON lines (LMI style).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lmikit.client._stream import (
    InvokeResult,
    TokenStream,
    body_text,
    usage_tokens,
)
from lmikit.errors import InvokeError
from lmikit.names import adapter_component_name, base_component_name

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

    from lmikit.client._metrics import TtftPublisher

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256
NEW_SESSION = "NEW_SESSION"


class PerfClock:
    """``monotonic`` from perf_counter for timings; ``time`` for session expiry."""

    def monotonic(self) -> float:
        return time.perf_counter()

    def time(self) -> float:
        return time.time()


class Endpoint:
    """A deployed lmikit endpoint. ``component`` defaults to ``<name>-base``; an
    ``adapter=`` argument routes a call to the adapter component ``<name>-<adapter>``.

    Client-side metrics are off by default. ``publisher=`` records every completed stream's
    TTFT and tokens/s into a :class:`~lmikit.client.TtftPublisher` you own (closing
    the endpoint flushes it, you close it); ``publish_metrics=True`` creates one the endpoint
    owns (closing the endpoint closes it), from ``cloudwatch_client`` or else from
    ``session``. Use the endpoint as a context manager, or call :meth:`close`.
    ``max_connections`` (default 10, botocore's) sizes the runtime client's connection pool
    (when the endpoint makes the client): make it at least the calls you make at once.
    """

    def __init__(self, name: str, *, session: Any = None, region: str | None = None,
                 client: Any = None, component: str | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, clock: Any = None,
                 publisher: TtftPublisher | None = None, publish_metrics: bool = False,
                 cloudwatch_client: Any = None, max_connections: int = 10) -> None:
        if publisher is not None and publish_metrics:
            raise ValueError("pass either publisher= or publish_metrics=True, not both")
        if cloudwatch_client is not None and not publish_metrics:
            raise ValueError("cloudwatch_client= is only used with publish_metrics=True")
        self.name = name
        self.component = component or base_component_name(name)
        self.max_tokens = max_tokens
        self.clock = clock or PerfClock()
        self.region = region
        if client is None or (publish_metrics and cloudwatch_client is None):
            from botocore.config import Config

            from lmikit.aws._clients import session_region

            if session is None:
                import boto3

                session = boto3.Session(region_name=region)
            region = self.region = session_region(session, region)
            config = Config(retries={"mode": "adaptive", "max_attempts": 5},
                            user_agent_extra="lmikit")
            if client is None:  # a pool as large as the calls made at once, or urllib3
                # drops the connections past it and later calls open new ones (TCP, TLS)
                client = session.client("sagemaker-runtime", region_name=region,
                                        config=config.merge(Config(
                                            read_timeout=300,
                                            max_pool_connections=max_connections)))
            if publish_metrics and cloudwatch_client is None:
                cloudwatch_client = session.client("cloudwatch", region_name=region,
                                                   config=config)
        self.client = client
        self._boto_session = session
        self._owns_publisher = publish_metrics
        if publish_metrics:
            from lmikit.client._metrics import TtftPublisher

            publisher = TtftPublisher(cloudwatch_client)
        self.publisher: TtftPublisher | None = publisher

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout_s: float = 10.0) -> None:
        """Send queued metrics: close a publisher the endpoint created, flush an injected one."""
        if self.publisher is None:
            return
        if self._owns_publisher:
            self.publisher.close(timeout_s)
        else:
            self.publisher.flush(timeout_s)

    def _publish(self, adapter: str | None) -> Callable[[InvokeResult], None] | None:
        publisher = self.publisher
        if publisher is None:
            return None

        def record(result: InvokeResult) -> None:
            if result.ttft_s is None:  # no text came back: nothing to measure
                return
            try:
                publisher.record(result.ttft_s, result.tokens_per_s, self.name, adapter)
            except Exception:  # noqa: BLE001 - metrics must never break the caller
                logger.warning("recording client metrics failed", exc_info=True)

        return record

    def component_for(self, adapter: str | None) -> str:
        return adapter_component_name(self.name, adapter) if adapter else self.component

    def openai(self, **kwargs: Any) -> OpenAI:
        """An ``openai.OpenAI`` client for this endpoint, sharing its boto3 clients;
        ``model=`` picks the component (an adapter's name, the endpoint's name or the base
        model's id). Keyword arguments as for :func:`lmikit.client.openai_client`
        (``adapters``, ``base_model``, ``session_id``, ``prefix_id``, ...); needs the
        ``openai`` extra.

        >>> client = Endpoint("docqa-qwen7b").openai(prefix_id="contract-42")  # doctest: +SKIP
        >>> client.chat.completions.create(model="legal", messages=[...])  # doctest: +SKIP
        """
        from lmikit.client._openai import openai_client

        kwargs.setdefault("base_component", self.component)
        return openai_client(self.name, region=self.region, session=self._boto_session,
                             runtime_client=self.client, **kwargs)

    def async_openai(self, **kwargs: Any) -> AsyncOpenAI:
        """:meth:`openai` for asyncio code: an ``openai.AsyncOpenAI`` whose boto3 calls run
        in worker threads (:func:`lmikit.client.async_openai_client`)."""
        from lmikit.client._openai import async_openai_client

        kwargs.setdefault("base_component", self.component)
        return async_openai_client(self.name, region=self.region, session=self._boto_session,
                                   runtime_client=self.client, **kwargs)

    def payload(self, prompt: str | dict[str, Any], *, stream: bool = False,
                max_tokens: int | None = None) -> dict[str, Any]:
        """A str becomes an OpenAI-style chat request; a dict is sent as it is."""
        if isinstance(prompt, dict):
            return prompt
        body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}],
                                "max_tokens": max_tokens or self.max_tokens}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _kwargs(self, body: dict[str, Any], adapter: str | None, prefix_id: str | None,
                session_id: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"EndpointName": self.name,
                                  "InferenceComponentName": self.component_for(adapter),
                                  "ContentType": "application/json",
                                  "Body": json.dumps(body).encode()}
        if prefix_id:
            kwargs["PrefixAwareId"] = prefix_id
        if session_id:
            kwargs["SessionId"] = session_id
        return kwargs

    def _call(self, operation: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            result: dict[str, Any] = getattr(self.client, operation)(**kwargs)
            return result
        except ClientError as exc:
            err = exc.response.get("Error", {})
            original = exc.response.get("OriginalMessage")
            message = err.get("Message", str(exc)) + (f" (model said: {original})"
                                                      if original else "")
            raise InvokeError(f"{self.name}/{kwargs.get('InferenceComponentName')}: "
                              f"{err.get('Code', 'Error')}: {message}") from exc
        except BotoCoreError as exc:
            raise InvokeError(f"{self.name}: {exc}") from exc

    def _read(self, response: dict[str, Any], component: str) -> bytes:
        """The whole body of a plain answer; an answer that breaks off is an InvokeError."""
        from lmikit.aws import read_errors, read_failure

        try:
            return bytes(response["Body"].read())
        except read_errors() as exc:
            raise InvokeError(f"{self.name}/{component}: reading the answer failed: "
                              f"{read_failure(exc)} ({exc})") from exc

    def invoke(self, prompt: str | dict[str, Any], *, adapter: str | None = None,
               prefix_id: str | None = None, max_tokens: int | None = None,
               session_id: str | None = None) -> InvokeResult:
        """One request (InvokeEndpoint); returns the text and total time.

        No TTFT is measured (the body arrives whole), so nothing is published."""
        body = self.payload(prompt, max_tokens=max_tokens)
        kwargs = self._kwargs(body, adapter, prefix_id, session_id)
        start = self.clock.monotonic()
        response = self._call("invoke_endpoint", kwargs)
        raw = self._read(response, kwargs["InferenceComponentName"])
        total = self.clock.monotonic() - start
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = raw.decode("utf-8", errors="replace")
        text = body_text(parsed)
        usage = usage_tokens(parsed)
        tokens = usage if usage is not None else len(text.split())
        return InvokeResult(text, parsed, total, None, tokens,
                            kwargs["InferenceComponentName"], session_id)

    def stream(self, prompt: str | dict[str, Any], *, adapter: str | None = None,
               prefix_id: str | None = None, max_tokens: int | None = None,
               session_id: str | None = None) -> TokenStream:
        """A streaming request (InvokeEndpointWithResponseStream) measuring TTFT.

        With a publisher, the TTFT and tokens/s of the stream are recorded when it ends."""
        body = self.payload(prompt, stream=True, max_tokens=max_tokens)
        kwargs = self._kwargs(body, adapter, prefix_id, session_id)
        start = self.clock.monotonic()
        response = self._call("invoke_endpoint_with_response_stream", kwargs)
        retries = (response.get("ResponseMetadata") or {}).get("RetryAttempts", 0)
        return TokenStream(iter(response["Body"]), self.clock, start,
                           kwargs["InferenceComponentName"], session_id, self._publish(adapter),
                           retries if isinstance(retries, int) else 0, endpoint=self.name)

    def session(self, *, adapter: str | None = None,
                on_reopen: Callable[[Session], None] | None = None,
                expiry_margin_s: float = 5.0) -> Session:
        """A sticky session: every call in it lands on the same instance."""
        return Session(self, adapter=adapter, on_reopen=on_reopen,
                       expiry_margin_s=expiry_margin_s)


@dataclass
class Session:
    """LMI stateful session. Opens with NEW_SESSION (on entering ``with``, or on first use),
    closes with CLOSE, and reopens transparently when it has expired or was closed, calling
    ``on_reopen(session)`` so the caller can re-send context; ``reopened`` counts those
    reopens (the first open is not one)."""

    endpoint: Endpoint
    adapter: str | None = None
    on_reopen: Callable[[Session], None] | None = None
    expiry_margin_s: float = 5.0
    id: str | None = None
    expires_at: dt.datetime | None = None
    reopened: int = 0
    history: list[str] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False,
                                   compare=False)

    def __enter__(self) -> Session:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> str:
        ep = self.endpoint
        kwargs = ep._kwargs({"requestType": NEW_SESSION}, self.adapter, None, NEW_SESSION)
        response = ep._call("invoke_endpoint", kwargs)
        ep._read(response, kwargs["InferenceComponentName"])
        header = response.get("NewSessionId")
        if not header:
            raise InvokeError(f"{ep.name}/{kwargs['InferenceComponentName']} did not open a "
                              "session (no NewSessionId in the answer): its container does "
                              "not serve LMI's stateful sessions (LMI's vLLM async service "
                              "does by default)")
        self.id, self.expires_at = parse_new_session_id(header)
        self.history.append(self.id)
        return self.id

    def close(self) -> None:
        if self.id is None:
            return
        ep = self.endpoint
        sid, self.id = self.id, None
        if self._expired():
            return  # nothing to close on the server
        kwargs = ep._kwargs({"requestType": "CLOSE"}, self.adapter, None, sid)
        response = ep._call("invoke_endpoint", kwargs)
        ep._read(response, kwargs["InferenceComponentName"])
        closed = response.get("ClosedSessionId")
        if closed and closed != sid:
            raise InvokeError(f"closing session {sid} closed {closed} instead")

    def _expired(self) -> bool:
        if self.expires_at is None:
            return False
        now = dt.datetime.fromtimestamp(self.endpoint.clock.time(), tz=dt.timezone.utc)
        return now >= self.expires_at - dt.timedelta(seconds=self.expiry_margin_s)

    def _live_id(self) -> str:
        with self._lock:  # concurrent calls reopen once; RLock: on_reopen may call us
            return self._live_id_locked()

    def _live_id_locked(self) -> str:
        if self.id is None or self._expired():
            reopening = bool(self.history)  # a first open has lost no context
            self.id = None
            self.open()
            if reopening:
                self.reopened += 1
                if self.on_reopen is not None:
                    self.on_reopen(self)
        if self.id is None:  # pragma: no cover - open() sets it or raises
            raise InvokeError("the session could not be opened")
        return self.id

    def invoke(self, prompt: str | dict[str, Any], **kwargs: Any) -> InvokeResult:
        sid = self._live_id()
        kwargs.setdefault("adapter", self.adapter)
        return self.endpoint.invoke(prompt, session_id=sid, **kwargs)

    def stream(self, prompt: str | dict[str, Any], **kwargs: Any) -> TokenStream:
        sid = self._live_id()
        kwargs.setdefault("adapter", self.adapter)
        return self.endpoint.stream(prompt, session_id=sid, **kwargs)

    def openai(self, **kwargs: Any) -> OpenAI:
        """An ``openai.OpenAI`` client whose every request carries this session's id,
        opening the session on first use and reopening it when it has expired (calling
        ``on_reopen``). ``model=`` still picks the component.

        >>> with Endpoint("docqa-qwen7b").session() as s:  # doctest: +SKIP
        ...     client = s.openai()
        ...     client.chat.completions.create(model="docqa-qwen7b", messages=[...])
        """
        return self.endpoint.openai(session_id=self._live_id, **kwargs)


def parse_new_session_id(header: str) -> tuple[str, dt.datetime | None]:
    """``"<id>; Expires=2026-01-01T00:20:00Z"`` -> (id, expiry).

    >>> parse_new_session_id("abc123; Expires=2026-01-01T00:20:00Z")[1].minute
    20
    """
    sid, _, rest = header.partition(";")
    sid = sid.strip()
    if not sid:
        raise InvokeError(f"cannot parse NewSessionId {header!r}")
    expires = None
    for part in rest.split(";"):
        key, _, value = part.strip().partition("=")
        if key.lower() == "expires" and value:
            try:
                expires = dt.datetime.strptime(value.strip(), "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=dt.timezone.utc)
            except ValueError as exc:
                raise InvokeError(f"cannot parse the session expiry in {header!r}") from exc
    return sid, expires
