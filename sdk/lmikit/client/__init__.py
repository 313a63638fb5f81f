"""Talk to a deployed endpoint: invoke and stream, sessions, OpenAI access, client metrics.

>>> from lmikit.client import Endpoint  # doctest: +SKIP
>>> Endpoint("docqa-qwen7b", region="us-east-1").invoke("Hello").text  # doctest: +SKIP

:class:`Endpoint` invokes and streams (:class:`TokenStream`), with sticky sessions
(:class:`Session`); :func:`openai_client` gives the ``openai`` package's client for the same
endpoint; :class:`TtftPublisher` sends the client-side TTFT to CloudWatch. boto3 is imported
only when a client is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "Endpoint": "lmikit.client._endpoint",
    "InvokeResult": "lmikit.client._stream",
    "Session": "lmikit.client._endpoint",
    "SseReframer": "lmikit.client._openai_sse",
    "StreamParser": "lmikit.client._stream",
    "TokenStream": "lmikit.client._stream",
    "TtftPublisher": "lmikit.client._metrics",
    "async_openai_client": "lmikit.client._openai",
    "base_url": "lmikit.client._openai_exchange",
    "openai_client": "lmikit.client._openai",
    "openai_http_client": "lmikit.client._openai",
}

__all__ = [
    "Endpoint",
    "InvokeResult",
    "Session",
    "SseReframer",
    "StreamParser",
    "TokenStream",
    "TtftPublisher",
    "async_openai_client",
    "base_url",
    "openai_client",
    "openai_http_client",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.client._endpoint import Endpoint, Session
    from lmikit.client._metrics import TtftPublisher
    from lmikit.client._openai import async_openai_client, openai_client, openai_http_client
    from lmikit.client._openai_exchange import base_url
    from lmikit.client._openai_sse import SseReframer
    from lmikit.client._stream import InvokeResult, StreamParser, TokenStream
