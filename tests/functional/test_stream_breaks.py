"""An answer that breaks partway (the read times out, the connection drops) ends in lmikit's
errors, or the openai package's, never in urllib3's.

botocore's ``EventStream`` reads the raw urllib3 response without wrapping its errors
(botocore/eventstream.py ``EventStream._create_raw_event_generator``), so a stream that stalls
past the read timeout raises ``urllib3.exceptions.ReadTimeoutError`` and one whose connection
drops raises ``ProtocolError``; a plain answer's body is read through botocore's
``StreamingBody``, which turns them into ``ReadTimeoutError`` / ``ResponseStreamingError``.

A local HTTP server speaks the runtime's wire format over a real socket: it sends the headers
and one PayloadPart (or part of a JSON body), then stalls or closes the connection, so the
errors are the libraries' own. Every wait is bounded: the client's read timeout is 1 s and a
stalled handler is released when the test ends.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.config import Config
from click.testing import CliRunner

from lmikit.cli import main
from lmikit.client._endpoint import Endpoint
from lmikit.errors import InvokeError
from lmikit.testing._wire import payload_part

CHUNK = json.dumps({"choices": [{"index": 0, "delta": {"content": "Hello"}}]}).encode() + b"\n"
READ_TIMEOUT_S = 1


@dataclass
class BreakingServer:
    """``mode`` is "stall" (send a first part, then nothing) or "drop" (then close)."""

    url: str = ""
    mode: str = "drop"
    release: threading.Event = field(default_factory=threading.Event)

    def runtime(self) -> Any:
        return boto3.client("sagemaker-runtime", region_name="us-east-1", endpoint_url=self.url,
                            aws_access_key_id="testing", aws_secret_access_key="testing",
                            config=Config(read_timeout=READ_TIMEOUT_S, connect_timeout=1,
                                          retries={"mode": "standard", "max_attempts": 1}))


def _handler(server: BreakingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            if self.path.endswith("invocations-response-stream"):
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                part = payload_part(CHUNK)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            else:
                body = json.dumps({"choices": [{"message": {"content": "Hello"}}]}).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:10])
            self.wfile.flush()
            if server.mode == "stall":
                server.release.wait(10)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    return Handler


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hung up on a stalled answer: expected here


@pytest.fixture
def breaking() -> Iterator[BreakingServer]:
    state = BreakingServer()
    httpd = _Quiet(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _endpoint(server: BreakingServer, mode: str) -> Endpoint:
    server.mode = mode
    return Endpoint("demo", client=server.runtime())


@pytest.mark.slow
def test_stream_that_stalls_raises_invoke_error_naming_the_timeout(
        breaking: BreakingServer) -> None:
    stream = _endpoint(breaking, "stall").stream("hi")
    pieces: list[str] = []
    start = time.monotonic()
    with pytest.raises(InvokeError, match="^demo/demo-base: the response stream broke: no data "
                       "arrived within the client's read timeout") as info:
        pieces.extend(stream)
    assert pieces == ["Hello"]  # what arrived before the stall was delivered
    assert stream.result is None
    assert time.monotonic() - start < 5
    assert type(info.value.__cause__).__module__.startswith("urllib3")


def test_stream_whose_connection_drops_raises_invoke_error(breaking: BreakingServer) -> None:
    stream = _endpoint(breaking, "drop").stream("hi")
    pieces: list[str] = []
    with pytest.raises(InvokeError, match="^demo/demo-base: the response stream broke: the "
                       "connection dropped before the answer ended"):
        pieces.extend(stream)
    assert pieces == ["Hello"]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "match"), [
    ("stall", "no data arrived within the client's read timeout"),
    ("drop", "the connection dropped before the answer ended")])
def test_invoke_whose_body_breaks_raises_invoke_error(breaking: BreakingServer, mode: str,
                                                      match: str) -> None:
    with pytest.raises(InvokeError, match=f"^demo/demo-base: reading the answer failed: {match}"):
        _endpoint(breaking, mode).invoke("hi")


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "error"), [("stall", "APITimeoutError"),
                                             ("drop", "APIConnectionError")])
def test_openai_stream_that_breaks_raises_the_openai_error(breaking: BreakingServer,
                                                           mode: str, error: str) -> None:
    """The openai package raises APITimeoutError / APIConnectionError for its HTTP library's
    timeout / request errors while a stream is read (openai/_streaming.py
    ``Stream._iter_events``); the transport raises those for a broken SageMaker stream."""
    import openai

    from lmikit.client._openai import openai_client

    client = openai_client("demo", runtime_client=_endpoint(breaking, mode).client,
                           adapters=[], base_model="m")
    texts: list[str] = []
    with pytest.raises(getattr(openai, error)) as info:
        for chunk in client.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], stream=True):
            texts.append(chunk.choices[0].delta.content or "")
    assert texts == ["Hello"]
    assert type(info.value) is getattr(openai, error)  # a drop is not a timeout


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "error"), [("stall", "APITimeoutError"),
                                             ("drop", "APIConnectionError")])
def test_async_openai_stream_that_breaks_raises_the_openai_error(breaking: BreakingServer,
                                                                 mode: str, error: str) -> None:
    import asyncio

    import openai

    from lmikit.client._openai import async_openai_client

    client = async_openai_client("demo", runtime_client=_endpoint(breaking, mode).client,
                                 adapters=[], base_model="m")

    async def read() -> list[str]:
        texts: list[str] = []
        stream = await client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}], stream=True)
        async for chunk in stream:
            texts.append(chunk.choices[0].delta.content or "")
        return texts

    with pytest.raises(getattr(openai, error)) as info:
        asyncio.run(read())
    assert type(info.value) is getattr(openai, error)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "error"), [("stall", "APITimeoutError"),
                                             ("drop", "APIConnectionError")])
def test_openai_reply_whose_body_breaks_raises_the_openai_error(breaking: BreakingServer,
                                                                mode: str, error: str) -> None:
    import openai

    from lmikit.client._openai import openai_client

    client = openai_client("demo", runtime_client=_endpoint(breaking, mode).client,
                           adapters=[], base_model="m")
    with pytest.raises(getattr(openai, error)) as info:
        client.chat.completions.create(model="demo",
                                       messages=[{"role": "user", "content": "hi"}])
    assert type(info.value) is getattr(openai, error)


def test_cli_invoke_on_a_dropped_stream_says_so_without_a_traceback(
        breaking: BreakingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    breaking.mode = "drop"
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", breaking.url)
    r = CliRunner().invoke(main, ["invoke", "demo", "hi", "--region", "us-east-1"])
    assert r.exit_code == 2, r.output
    assert r.stdout == "Hello\n"  # the partial answer, ended by a newline
    assert r.stderr.startswith("InvokeError: demo/demo-base: the response stream broke: the "
                               "connection dropped before the answer ended")
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback
