"""The metrics front on real loopback sockets: every request routed by its own path.

Everything runs in one event loop per test (front, fake upstream, clients) on 127.0.0.1 and
ephemeral ports, bounded by ``_run``'s timeout. Responses are read with h11 (python-hyper's
HTTP/1.1 state machine), a parser none of us wrote, so a front that misframes a message on a
kept-alive connection fails here. The fake upstream answers as djl-serving does
(``NettyUtils.sendHttpResponse``: ``Connection: keep-alive`` always, a streamed response
chunked; ``Connection: close`` and a close after a 4xx/5xx). The streaming tests prove the
front does not buffer: the upstream holds its remaining chunks until the client has received
the first one THROUGH the front, so a buffering front times out instead of passing.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import h11
import pytest
from lmikit_runtime.front import FrontConfig, is_metrics_request, serve

from tests.container.conftest import free_port
from tests.container.test_metrics import samples_of

T = TypeVar("T")
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


STREAM_EVENTS = [b'data: {"token": "%d"}\n\n' % i for i in range(5)] + [b"data: [DONE]\n\n"]
STREAM_CHUNKS = [_chunk(e) for e in STREAM_EVENTS] + [b"0\r\n\r\n"]


def _run(coro: Awaitable[T], timeout: float = 8.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


class Upstream:
    """A fake djl-serving: /ping, echoing POST /invocations (Content-Length or chunked
    body), a slow chunked SSE /stream, 404 (and close) otherwise. Records the exact bytes
    of every request it receives and how many connections it accepted."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.connections = 0
        self.release = asyncio.Event()
        self.stream_finished = False
        self.tasks: set[asyncio.Task] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].split(b" ")
        if re.search(rb"(?i)\r\nexpect: *100-continue", head):  # as Netty's aggregator
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        raw, body = await self._body(reader, head)
        self.received.append(head + raw)
        if target == b"/stream":
            writer.write(STREAM_HEAD + STREAM_CHUNKS[0])
            await writer.drain()
            await self.release.wait()  # set once the client has the first chunk
            for chunk in STREAM_CHUNKS[1:]:
                await asyncio.sleep(0.01)
                writer.write(chunk)
                await writer.drain()
            self.stream_finished = True
            return True
        if target == b"/ping":
            status, out = b"200 OK", b"healthy\n"
        elif target == b"/invocations" and method == b"POST":
            status, out = b"200 OK", body
        else:
            status, out = b"404 Not Found", b'{"code": 404, "message": "Resource not found"}'
        keep = status == b"200 OK"
        writer.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: %s\r\n\r\n%s" % (
            status, len(out), b"keep-alive" if keep else b"close", out))
        await writer.drain()
        return keep

    @staticmethod
    async def _body(reader: asyncio.StreamReader, head: bytes) -> tuple[bytes, bytes]:
        """(the body's bytes as sent, the decoded body)."""
        if re.search(rb"(?i)\r\ntransfer-encoding: *chunked", head):
            raw, body = b"", b""
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0], 16)
                data = await reader.readexactly(size + 2)
                raw, body = raw + line + data, body + data[:-2]
                if size == 0:
                    return raw, body
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        body = await reader.readexactly(int(m.group(1))) if m else b""
        return body, body

    async def cancel(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def stack(multiproc_dir: str = "", upstream: bool = True,
                **cfg: object) -> AsyncIterator[tuple[int, Upstream]]:
    """(front port, fake upstream) running in this loop; torn down completely on exit."""
    fake = Upstream()
    up_server = None
    up_port = free_port()
    if upstream:
        up_server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
        up_port = up_server.sockets[0].getsockname()[1]
    config = FrontConfig(metrics_path="/metrics", multiproc_dir=multiproc_dir,
                         upstream_port=up_port, **cfg)  # type: ignore[arg-type]
    server, front = await serve(config, host="127.0.0.1", port=0)
    try:
        yield server.sockets[0].getsockname()[1], fake
    finally:
        server.close()
        await front.close_connections()
        await server.wait_closed()
        if up_server is not None:
            up_server.close()
            await fake.cancel()
            await up_server.wait_closed()


@contextlib.asynccontextmanager
async def connect(port: int) -> AsyncIterator[tuple[asyncio.StreamReader,
                                                    asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


class Responses:
    """Reads the responses of one connection in order with h11; the requests themselves are
    written raw by the test (so they can be pipelined)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.conn = h11.Connection(h11.CLIENT)

    async def next_event(self) -> object:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(await self.reader.read(65536))

    async def begin(self, method: str = "GET") -> h11.Response:
        """The head of the next response (to a request with ``method``)."""
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        self.conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        self.conn.send(h11.EndOfMessage())
        event = await self.next_event()
        assert isinstance(event, h11.Response), event
        return event

    async def rest(self) -> bytes:
        body = b""
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        return body

    async def read(self, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        head = await self.begin(method)
        headers = {k.decode(): v.decode() for k, v in head.headers}
        return head.status_code, headers, await self.rest()

    async def closed(self) -> bool:
        """Whether the front closed the connection after the last response."""
        return self.conn.their_state is h11.MUST_CLOSE and await self.reader.read() == b""


async def exchange(port: int, request: bytes, half_close: bool = False) -> bytes:
    """Send a request, read the whole answer until the front closes."""
    async with connect(port) as (reader, writer):
        writer.write(request)
        await writer.drain()
        if half_close:
            writer.write_eof()
        return await reader.read()


def split(response: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return status, headers, body


def post(body: bytes, target: str = "/invocations", extra: str = "") -> bytes:
    return (f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def chunked_post(parts: list[bytes]) -> bytes:
    return (b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(_chunk(p) for p in parts) + b"0\r\n\r\n")


PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
METRICS = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
STREAM = b"GET /stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
HIT_TOKENS = ("lmcache:num_hit_tokens_total", (("model_name", "qwen"), ("tier", "cpu")))


def test_keep_alive_ping_then_metrics_gets_lmikits_metrics(multiproc_dir: str) -> None:
    """A scraper that reuses a connection first used for /ping still gets the front's
    metrics (before, the connection stayed spliced to LMI, which answers 404)."""
    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(PING)
            assert await responses.read() == (200, {"content-length": "8",
                                                    "connection": "keep-alive"}, b"healthy\n")
            writer.write(METRICS)
            status, headers, body = await responses.read()
            assert status == 200 and headers["connection"] == "keep-alive"
            assert samples_of(body.decode())[HIT_TOKENS] == 8192
            assert up.received == [PING]  # LMI never saw /metrics
    _run(go())


def test_metrics_then_invocations_on_one_connection_reach_upstream(
        multiproc_dir: str) -> None:
    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(METRICS)
            assert (await responses.read())[0] == 200
            writer.write(post(b'{"inputs": "hi"}'))
            assert await responses.read() == (200, {"content-length": "16",
                                                    "connection": "keep-alive"},
                                              b'{"inputs": "hi"}')
            assert up.received == [post(b'{"inputs": "hi"}')]
    _run(go())


def test_pipelined_requests_answered_in_order_each_by_its_path(multiproc_dir: str) -> None:
    """/ping, /metrics, a chunked /invocations and /metrics again, written at once."""
    parts = [b'{"inputs": ', b'"caf\xc3\xa9"}']

    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(PING + METRICS + chunked_post(parts) + METRICS)
            await writer.drain()
            assert (await responses.read())[2] == b"healthy\n"
            assert samples_of((await responses.read())[2].decode())[HIT_TOKENS] == 8192
            assert (await responses.read())[2] == b"".join(parts)
            assert samples_of((await responses.read())[2].decode())[HIT_TOKENS] == 8192
            assert up.received == [PING, chunked_post(parts)]  # byte for byte
            assert up.connections == 1  # one LMI connection carried both
    _run(go())


def test_stream_after_metrics_streams_unbuffered_then_the_connection_goes_on(
        multiproc_dir: str) -> None:
    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(METRICS)
            assert (await responses.read())[0] == 200
            writer.write(STREAM)
            head = await responses.begin()
            first = await asyncio.wait_for(responses.next_event(), 3)
            assert isinstance(first, h11.Data) and first.data == STREAM_EVENTS[0]
            assert head.status_code == 200 and not up.stream_finished  # before the end
            up.release.set()
            assert STREAM_EVENTS[0] + await responses.rest() == b"".join(STREAM_EVENTS)
            assert up.stream_finished
            writer.write(METRICS)
            assert samples_of((await responses.read())[2].decode())[HIT_TOKENS] == 8192
    _run(go())


def test_streamed_sse_flows_through_unbuffered_and_identical() -> None:
    async def go() -> None:
        async with stack() as (port, up), connect(port) as (reader, writer):
            writer.write(STREAM)
            await writer.drain()
            first = STREAM_HEAD + STREAM_CHUNKS[0]
            got = await asyncio.wait_for(reader.readexactly(len(first)), 3)
            assert got == first and not up.stream_finished  # first chunk before the end
            up.release.set()
            rest = await reader.readexactly(len(b"".join(STREAM_CHUNKS[1:])))
            assert up.stream_finished
            assert got + rest == STREAM_HEAD + b"".join(STREAM_CHUNKS)
    _run(go())


def test_post_invocations_byte_exact_both_ways() -> None:
    body = b'{"inputs": "caf\xc3\xa9 \\u00e9", "parameters": {"max_new_tokens": 8}}\r\n\x00\xff'
    request = post(body)

    async def go() -> None:
        async with stack() as (port, up):
            response = await exchange(port, request, half_close=True)
            assert up.received == [request]
            status, headers, got = split(response)
            assert status == "HTTP/1.1 200 OK" and got == body
    _run(go())


def test_large_body_with_backpressure_both_ways() -> None:
    body = bytes(range(256)) * (4 * 4096)  # 4 MiB, many read-size chunks each way

    async def go() -> None:
        async with stack() as (port, up), connect(port) as (reader, writer):
            async def send() -> None:
                writer.write(post(body))
                await writer.drain()
            sender = asyncio.ensure_future(send())
            head = await reader.readuntil(b"\r\n\r\n")
            got = await reader.readexactly(len(body))
            await sender
            assert head.startswith(b"HTTP/1.1 200") and got == body
            assert up.received == [post(body)]
    _run(go())


def test_connection_close_request_is_answered_then_closed() -> None:
    async def go() -> None:
        async with stack() as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(post(b"{}", extra="Connection: close\r\n"))
            assert (await responses.read())[2] == b"{}"
            assert await asyncio.wait_for(reader.read(), 3) == b""  # the front closed
    _run(go())


def test_upstream_error_that_closes_closes_the_client_too(multiproc_dir: str) -> None:
    """djl-serving answers 4xx/5xx with Connection: close and closes: so does the front."""
    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, _ = await responses.read()
            assert status == 404 and headers["connection"] == "close"
            assert await asyncio.wait_for(responses.closed(), 3)
    _run(go())


def test_expect_100_continue_is_relayed_before_the_body() -> None:
    body = b'{"inputs": "x"}'
    head = post(body, extra="Expect: 100-continue\r\n")[:-len(body)]

    async def go() -> None:
        async with stack() as (port, up), connect(port) as (reader, writer):
            writer.write(head)
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(body)
            final = await reader.readuntil(b"\r\n\r\n")
            assert final.startswith(b"HTTP/1.1 200") and await reader.readexactly(15) == body
            assert up.received == [head + body]
    _run(go())


def test_client_gone_mid_body_drops_the_lmi_connection_too() -> None:
    async def go() -> None:
        async with stack() as (port, up):
            async with connect(port) as (_reader, writer):
                writer.write(post(b"0123456789")[:-7])  # 3 of 10 body bytes, then gone
                await writer.drain()
                while not up.tasks:
                    await asyncio.sleep(0.01)
            for _ in range(300):  # the fake LMI's connection ends: nothing waits forever
                if not up.tasks:
                    break
                await asyncio.sleep(0.01)
            assert not up.tasks and up.received == []
    _run(go())


def test_ping_passes_through() -> None:
    async def go() -> None:
        async with stack() as (port, up):
            response = await exchange(port, PING, half_close=True)
            assert split(response)[0] == "HTTP/1.1 200 OK" and split(response)[2] == b"healthy\n"
            assert up.received == [PING]
    _run(go())


def test_metrics_path_serves_merged_multiprocess_exposition(multiproc_dir: str) -> None:
    async def go() -> tuple[bytes, bytes]:
        async with stack(multiproc_dir) as (port, up):
            response = await exchange(port, b"GET /metrics?name[]=x HTTP/1.1\r\nHost: x\r\n"
                                      b"Connection: close\r\n\r\n")
            head_only = await exchange(port, b"HEAD /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            assert up.received == []  # answered by the front, LMI never saw them
            return response, head_only
    response, head_only = _run(go())
    status, headers, body = split(response)
    assert status == "HTTP/1.1 200 OK" and headers["connection"] == "close"
    assert headers["content-type"].startswith("text/plain")
    assert int(headers["content-length"]) == len(body)
    samples = samples_of(body.decode())
    assert samples[HIT_TOKENS] == 8192  # two processes
    assert samples[("vllm:time_to_first_token_seconds_count", (("model_name", "qwen"),))] == 2
    status, headers, body = split(head_only)
    assert status == "HTTP/1.1 200 OK" and body == b"" and int(headers["content-length"]) > 0


def test_metrics_collection_failure_is_500_not_a_crash() -> None:
    def broken(_: str) -> tuple[bytes, str]:
        raise ValueError("corrupt mmap file")

    async def go() -> tuple[bytes, bytes]:
        async with stack(collect=broken) as (port, _up):
            bad = await exchange(port, METRICS, half_close=True)
            ok = await exchange(port, PING, half_close=True)
            return bad, ok
    bad, ok = _run(go())
    assert split(bad)[0].startswith("HTTP/1.1 500") and split(ok)[0] == "HTTP/1.1 200 OK"


def test_other_paths_and_methods_go_to_lmi() -> None:
    path = "/metrics"
    assert is_metrics_request(b"GET /metrics HTTP/1.1\r\n\r\n", path) == (True, False)
    assert is_metrics_request(b"\r\nGET /metrics?x=1 HTTP/1.0\r\n\r\n", path) == (True, False)
    assert is_metrics_request(b"HEAD /metrics HTTP/1.1\r\n\r\n", path) == (True, True)
    for line in (b"POST /metrics HTTP/1.1", b"GET /metrics/x HTTP/1.1", b"GET /metricsx HTTP/1.1",
                 b"GET /server/metrics HTTP/1.1", b"GET  /metrics HTTP/1.1", b"\x16\x03\x01"):
        assert is_metrics_request(line + b"\r\n\r\n", path)[0] is False, line


def test_many_concurrent_connections() -> None:
    n = 100

    async def one(port: int, i: int) -> bytes:
        return split(await exchange(port, post(b'{"i": %d}' % i), half_close=True))[2]

    async def go() -> None:
        async with stack() as (port, up):
            bodies = await asyncio.gather(*(one(port, i) for i in range(n)))
            assert bodies == [b'{"i": %d}' % i for i in range(n)]
            assert len(up.received) == n
    _run(go())


def test_upstream_down_is_502_and_close() -> None:
    async def go() -> bytes:
        async with stack(upstream=False) as (port, _up):
            return await exchange(port, post(b"{}"))
    status, headers, body = split(_run(go()))
    assert status == "HTTP/1.1 502 Bad Gateway" and headers["connection"] == "close"
    assert body == b"LMI server is not reachable\n"


@pytest.mark.parametrize("request_bytes,why", [
    (b"POST /invocations HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
     b"both Transfer-Encoding and Content-Length"),
    (b"POST /invocations HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", b"does not end in"),
    (b"POST /invocations HTTP/1.1\r\nContent-Length: 2, 3\r\n\r\n", b"bad Content-Length"),
    (b"GET /ping HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", b"malformed header line"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"HTTP/1.0 and HTTP/1.1 only")])
def test_request_whose_end_cannot_be_told_is_400(request_bytes: bytes, why: bytes) -> None:
    async def go() -> bytes:
        async with stack() as (port, up):
            response = await exchange(port, request_bytes)
            assert up.received == []
            return response
    status, headers, body = split(_run(go()))
    assert status == "HTTP/1.1 400 Bad Request" and why in body


def test_head_too_large_is_400() -> None:
    request = b"GET /ping HTTP/1.1\r\nX-Pad: " + b"a" * (70 * 1024)  # no end of head

    async def go() -> bytes:
        async with stack() as (port, up):
            response = await exchange(port, request)
            assert up.received == []
            return response
    status, headers, body = split(_run(go()))
    assert status == "HTTP/1.1 400 Bad Request" and b"65536" in body


@pytest.mark.parametrize("sent,expected", [(b"GET /ping HTTP/1.1\r\nHost", b"HTTP/1.1 408"),
                                           (b"", b"")])  # idle: closed without a word
def test_head_timeout(sent: bytes, expected: bytes) -> None:
    async def go() -> bytes:
        async with stack(head_timeout=0.2) as (port, up):
            response = await exchange(port, sent)
            assert up.received == []
            return response
    assert _run(go(), timeout=4).startswith(expected)


def test_kept_alive_connection_may_idle_past_the_head_timeout() -> None:
    """After a first request the connection idles as long as the client keeps it (as on
    djl-serving); only a head once begun must end within the timeout."""
    async def go() -> None:
        async with stack(head_timeout=0.2) as (port, up), connect(port) as (reader, writer):
            responses = Responses(reader)
            writer.write(PING)
            assert (await responses.read())[0] == 200
            await asyncio.sleep(0.5)
            writer.write(PING)
            assert (await responses.read())[0] == 200
    _run(go(), timeout=4)
