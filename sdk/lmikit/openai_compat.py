"""OpenAI-SDK access to lmikit endpoints: an ``openai.OpenAI`` whose transport is SageMaker.

The client's HTTP transport turns each OpenAI API call into a SageMaker runtime call made
through boto3 (so credentials, regions, retries, the fake and the sandbox work as for the
rest of lmikit): ``InvokeEndpoint`` for a plain request, ``InvokeEndpointWithResponseStream``
for ``stream=True``, whose LMI output is re-framed as server-sent events
(:mod:`lmikit.openai_sse`). ``chat.completions.create`` and ``completions.create`` work
unchanged; ``models.list`` names what ``model=`` accepts.

>>> import lmikit
>>> client = lmikit.openai_client("docqa-qwen7b", region="us-east-1")  # doctest: +SKIP
>>> reply = client.chat.completions.create(  # doctest: +SKIP
...     model="legal", messages=[{"role": "user", "content": "Summarise clause 4"}])

``model=`` routes: an adapter's name to its component ``<endpoint>-<adapter>``; the
endpoint's name or the base model's id to the base component ``<endpoint>-base``; anything
else is ``openai.NotFoundError`` listing what is valid. The adapters and the base model id
come from the endpoint's components (ListInferenceComponents, DescribeInferenceComponent on
first need, cached, listed again when an unknown name is asked), or from ``adapters=`` and
``base_model=``. ``model`` is not forwarded: LMI names the served model itself.

Routing hints travel per client (``session_id=``, ``prefix_id=``) or per request as
SageMaker's own runtime headers in ``extra_headers`` (``X-Amzn-SageMaker-Session-Id``,
``X-Amzn-SageMaker-Prefix-Aware-Id``, ``X-Amzn-SageMaker-Custom-Attributes``, ...: every
header of the operation in botocore's model). ``extra_body`` goes to the model unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lmikit._openai_exchange import (
    HttpReply,
    ModelRouter,
    SageMakerExchange,
    TransportFailure,
    UnknownModel,
    base_url,
    error_reply,
    status_for_error,
)

if TYPE_CHECKING:
    import openai

API_KEY = "sagemaker"  # the openai package needs a key; SigV4 (boto3) authenticates instead
_OWN_OPENAI_ARGS = ("api_key", "base_url", "http_client")


# --- the HTTP library the installed openai package uses --------------------------------

def import_openai() -> ModuleType:
    """The ``openai`` package, or :class:`~lmikit.errors.MissingPackage` (an ImportError)
    naming the extra that installs it."""
    from lmikit._extras import require

    return require("openai", "OpenAI-SDK access")


def http_module(openai_module: ModuleType) -> ModuleType:
    """``httpx`` (openai 1.x, 2.x) or ``httpx2`` (openai 3.x): whichever its client is."""
    client = getattr(openai_module, "DefaultHttpxClient", None)
    for cls in getattr(client, "__mro__", ()):
        root = cls.__module__.split(".")[0]
        if cls.__name__ == "Client" and root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    return importlib.import_module("httpx")


@cache
def transport_class(http: ModuleType) -> type:
    """A ``BaseTransport`` of ``http`` that hands each request to a :class:`SageMakerExchange`."""

    class ReplyStream(http.SyncByteStream):  # type: ignore[name-defined]
        def __init__(self, reply: HttpReply, request: Any) -> None:
            self._reply = reply
            self._request = request

        def __iter__(self) -> Iterator[bytes]:
            body = self._reply.body
            if isinstance(body, bytes):
                yield body
                return
            try:
                yield from body
            except TransportFailure as exc:
                kind = http.ReadTimeout if exc.timeout else http.ReadError
                raise kind(str(exc), request=self._request) from exc

        def close(self) -> None:
            if self._reply.close is not None:
                self._reply.close()

    class SageMakerTransport(http.BaseTransport):  # type: ignore[name-defined]
        """Sends each request to SageMaker through boto3 (see :mod:`lmikit.openai_compat`)."""

        def __init__(self, exchange: SageMakerExchange) -> None:
            self.exchange = exchange

        def handle_request(self, request: Any) -> Any:
            try:
                reply = self.exchange.handle(request.method, request.url.path,
                                             dict(request.headers), request.read())
            except TransportFailure as exc:
                kind = http.ConnectTimeout if exc.timeout else http.ConnectError
                raise kind(str(exc), request=request) from exc
            return http.Response(reply.status, headers=reply.headers,
                                 stream=ReplyStream(reply, request), request=request)

    return SageMakerTransport


@cache
def async_transport_class(http: ModuleType) -> type:
    """An ``AsyncBaseTransport`` of ``http``: the same exchange, its blocking boto3 calls and
    stream reads run in worker threads (anyio), so an event loop is never blocked."""
    import anyio.to_thread

    done = object()

    class AsyncReplyStream(http.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, reply: HttpReply, request: Any) -> None:
            self._reply = reply
            self._request = request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            body = self._reply.body
            if isinstance(body, bytes):
                yield body
                return
            while True:
                try:
                    chunk = await anyio.to_thread.run_sync(next, body, done)
                except TransportFailure as exc:
                    kind = http.ReadTimeout if exc.timeout else http.ReadError
                    raise kind(str(exc), request=self._request) from exc
                if not isinstance(chunk, bytes):
                    return
                yield chunk

        async def aclose(self) -> None:
            if self._reply.close is not None:
                await anyio.to_thread.run_sync(self._reply.close)

    class AsyncSageMakerTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        """Sends each request to SageMaker through boto3, off the event loop."""

        def __init__(self, exchange: SageMakerExchange) -> None:
            self.exchange = exchange

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            try:
                reply = await anyio.to_thread.run_sync(
                    self.exchange.handle, request.method, request.url.path,
                    dict(request.headers), body)
            except TransportFailure as exc:
                kind = http.ConnectTimeout if exc.timeout else http.ConnectError
                raise kind(str(exc), request=request) from exc
            return http.Response(reply.status, headers=reply.headers,
                                 stream=AsyncReplyStream(reply, request), request=request)

    return AsyncSageMakerTransport


# --- public entry points ------------------------------------------------------------------

def _exchange(endpoint: str, *, region: str | None = None, session: Any = None,
              runtime_client: Any = None, sagemaker_client: Any = None,
              adapters: Iterable[str] | None = None, base_model: str | None = None,
              base_component: str | None = None,
              session_id: str | Callable[[], str] | None = None,
              prefix_id: str | None = None) -> SageMakerExchange:
    from botocore.config import Config

    config = Config(retries={"mode": "adaptive", "max_attempts": 5}, user_agent_extra="lmikit")
    boto: list[Any] = [session]

    def boto_session() -> Any:
        if boto[0] is None:
            import boto3

            boto[0] = boto3.Session(region_name=region)
        return boto[0]

    def client(service: str, config: Config) -> Any:
        from lmikit.aws._clients import session_region

        session = boto_session()
        return session.client(service, region_name=session_region(session, region),
                              config=config)

    if runtime_client is None:
        runtime_client = client("sagemaker-runtime", config.merge(Config(read_timeout=300)))
    control: list[Any] = [sagemaker_client]

    def sagemaker() -> Any:
        if control[0] is None:
            control[0] = client("sagemaker", config)
        return control[0]

    router = ModelRouter(endpoint, sagemaker, adapters, base_model, base_component)
    return SageMakerExchange(endpoint, runtime_client, router, session_id, prefix_id)


def openai_http_client(endpoint: str, *, asynchronous: bool = False, region: str | None = None,
                       session: Any = None, runtime_client: Any = None,
                       sagemaker_client: Any = None, adapters: Iterable[str] | None = None,
                       base_model: str | None = None, base_component: str | None = None,
                       session_id: str | Callable[[], str] | None = None,
                       prefix_id: str | None = None) -> Any:
    """The ``httpx.Client`` (``AsyncClient`` when ``asynchronous``; ``httpx2`` for openai
    3.x) behind :func:`openai_client`, for frameworks that build their own OpenAI client from
    ``http_client=`` and ``base_url=`` (use :func:`base_url`). Arguments as for
    :func:`openai_client`."""
    http = http_module(import_openai())
    exchange = _exchange(endpoint, region=region, session=session,
                         runtime_client=runtime_client, sagemaker_client=sagemaker_client,
                         adapters=adapters, base_model=base_model,
                         base_component=base_component, session_id=session_id,
                         prefix_id=prefix_id)
    if asynchronous:
        return http.AsyncClient(transport=async_transport_class(http)(exchange))
    return http.Client(transport=transport_class(http)(exchange))


def _client_kwargs(endpoint: str, openai_kwargs: dict[str, Any]) -> dict[str, Any]:
    clash = [k for k in _OWN_OPENAI_ARGS if k in openai_kwargs]
    if clash:
        raise TypeError(f"openai_client sets {', '.join(clash)} itself; use "
                        "openai_http_client() and base_url() to build your own client")
    return {"api_key": API_KEY, "base_url": base_url(endpoint), **openai_kwargs}


def openai_client(endpoint: str, *, region: str | None = None, session: Any = None,
                  runtime_client: Any = None, sagemaker_client: Any = None,
                  adapters: Iterable[str] | None = None, base_model: str | None = None,
                  base_component: str | None = None,
                  session_id: str | Callable[[], str] | None = None,
                  prefix_id: str | None = None, max_retries: int = 0,
                  **openai_kwargs: Any) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for the lmikit endpoint ``endpoint``.

    ``session`` (a boto3 Session) or ``region`` build the boto3 clients, unless
    ``runtime_client`` (sagemaker-runtime) / ``sagemaker_client`` (control plane, used only
    to list adapters) are given. ``adapters`` / ``base_model`` name the routes and skip the
    listing; ``base_component`` defaults to ``<endpoint>-base``. ``session_id`` (an id, or a
    callable returning the live one) and ``prefix_id`` (PrefixAwareId) go with every request
    unless a request sets its own header. ``max_retries`` defaults to 0: boto3 retries
    (adaptive mode) underneath. Other keyword arguments go to ``openai.OpenAI``
    (``timeout``, ``default_headers``, ...); the transport always answers, so the openai
    ``timeout`` does not bound a SageMaker call: boto3's configuration does.
    """
    kwargs = _client_kwargs(endpoint, openai_kwargs)
    openai_module = import_openai()
    http_client = openai_http_client(
        endpoint, region=region, session=session, runtime_client=runtime_client,
        sagemaker_client=sagemaker_client, adapters=adapters, base_model=base_model,
        base_component=base_component, session_id=session_id, prefix_id=prefix_id)
    client: openai.OpenAI = openai_module.OpenAI(http_client=http_client,
                                                 max_retries=max_retries, **kwargs)
    return client


def async_openai_client(endpoint: str, *, region: str | None = None, session: Any = None,
                        runtime_client: Any = None, sagemaker_client: Any = None,
                        adapters: Iterable[str] | None = None, base_model: str | None = None,
                        base_component: str | None = None,
                        session_id: str | Callable[[], str] | None = None,
                        prefix_id: str | None = None, max_retries: int = 0,
                        **openai_kwargs: Any) -> openai.AsyncOpenAI:
    """:func:`openai_client` for asyncio code: an ``openai.AsyncOpenAI`` whose boto3 calls
    run in worker threads.

    >>> client = async_openai_client("docqa-qwen7b", region="us-east-1")  # doctest: +SKIP
    >>> await client.chat.completions.create(model="legal", messages=[...])  # doctest: +SKIP
    """
    kwargs = _client_kwargs(endpoint, openai_kwargs)
    openai_module = import_openai()
    http_client = openai_http_client(
        endpoint, asynchronous=True, region=region, session=session,
        runtime_client=runtime_client, sagemaker_client=sagemaker_client, adapters=adapters,
        base_model=base_model, base_component=base_component, session_id=session_id,
        prefix_id=prefix_id)
    client: openai.AsyncOpenAI = openai_module.AsyncOpenAI(http_client=http_client,
                                                           max_retries=max_retries, **kwargs)
    return client


__all__ = ["API_KEY", "HttpReply", "ModelRouter", "SageMakerExchange",
           "TransportFailure", "UnknownModel", "async_openai_client", "async_transport_class",
           "base_url", "error_reply", "http_module", "import_openai", "openai_client",
           "openai_http_client", "status_for_error", "transport_class"]
