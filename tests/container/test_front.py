"""The metrics front on real loopback sockets: splice to a fake LMI, metrics at the path.

Everything runs in one event loop per test (front, fake upstream, clients) on 127.0.0.1 and
ephemeral ports, bounded by ``_run``'s timeout. The streaming test proves the front does not
buffer: the fake upstream holds its remaining chunks until the client has received the first
one THROUGH the front, so a buffering front would time out instead of passing.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest
from lmikit_runtime.front import FrontConfig, is_metrics_request, serve

from tests.container.conftest import free_port
from tests.container.test_metrics import samples_of

T = TypeVar("T")
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


STREAM_CHUNKS = [_chunk(b'data: {"token": "%d"}\n\n' % i) for i in range(5)] + [
    _chunk(b"data: [DONE]\n\n"), b"0\r\n\r\n"]


def _run(coro: Awaitable[T], timeout: float = 8.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


class Upstream:
    """A fake djl-serving: /ping, echoing /invocations, a slow chunked SSE /stream, an
    /echo-until-eof that answers only after the client half-closes, 404 otherwise.
    Records the exact bytes of every request it receives."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.release = asyncio.Event()
        self.stream_finished = False
        self._tasks: set[asyncio.Task] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].split(b" ")
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        body = await reader.readexactly(int(m.group(1))) if m else b""
        if target == b"/echo-until-eof":
            body = await reader.read()  # until the client's half close
        self.received.append(head + body)
        if target == b"/stream":
            writer.write(STREAM_HEAD + STREAM_CHUNKS[0])
            await writer.drain()
            await self.release.wait()  # set once the client has the first chunk
            for chunk in STREAM_CHUNKS[1:]:
                await asyncio.sleep(0.01)
                writer.write(chunk)
                await writer.drain()
            self.stream_finished = True
            return False  # Connection: close
        if target == b"/ping":
            status, out = b"200 OK", b"healthy\n"
        elif target in (b"/invocations", b"/echo-until-eof") and method == b"POST":
            status, out = b"200 OK", body
        else:
            status, out = b"404 Not Found", b'{"code": 404, "message": "Resource not found"}'
        writer.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (status, len(out), out))
        await writer.drain()
        return target != b"/echo-until-eof"

    async def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


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


def post(body: bytes, target: str = "/invocations") -> bytes:
    return (f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_streamed_sse_flows_through_unbuffered_and_identical() -> None:
    async def go() -> None:
        async with stack() as (port, up), connect(port) as (reader, writer):
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            await writer.drain()
            first = STREAM_HEAD + STREAM_CHUNKS[0]
            got = await asyncio.wait_for(reader.readexactly(len(first)), 3)
            assert got == first and not up.stream_finished  # first chunk before the end
            up.release.set()
            rest = await reader.read()  # until the upstream's close reaches us
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


def test_ping_passes_through() -> None:
    async def go() -> None:
        async with stack() as (port, up):
            response = await exchange(port, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n",
                                      half_close=True)
            assert split(response)[0] == "HTTP/1.1 200 OK" and split(response)[2] == b"healthy\n"
            assert up.received == [b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"]
    _run(go())


def test_half_close_reaches_upstream_and_answer_comes_back() -> None:
    async def go() -> None:
        async with stack() as (port, up):
            request = b"POST /echo-until-eof HTTP/1.1\r\nHost: x\r\n\r\nabc"
            response = await exchange(port, request + b"def", half_close=True)
            assert split(response)[2] == b"abcdef"
    _run(go())


def test_metrics_path_serves_merged_multiprocess_exposition(multiproc_dir: str) -> None:
    async def go() -> tuple[bytes, bytes]:
        async with stack(multiproc_dir) as (port, up):
            response = await exchange(port, b"GET /metrics?name[]=x HTTP/1.1\r\nHost: x\r\n"
                                      b"Connection: keep-alive\r\n\r\n")
            head_only = await exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert up.received == []  # answered by the front, LMI never saw them
            return response, head_only
    response, head_only = _run(go())
    status, headers, body = split(response)
    assert status == "HTTP/1.1 200 OK" and headers["connection"] == "close"
    assert headers["content-type"].startswith("text/plain")
    assert int(headers["content-length"]) == len(body)
    samples = samples_of(body.decode())
    assert samples[("lmcache:num_hit_tokens_total",
                    (("model_name", "qwen"), ("tier", "cpu")))] == 8192  # two processes
    assert samples[("vllm:time_to_first_token_seconds_count", (("model_name", "qwen"),))] == 2
    status, headers, body = split(head_only)
    assert status == "HTTP/1.1 200 OK" and body == b"" and int(headers["content-length"]) > 0


def test_metrics_collection_failure_is_500_not_a_crash() -> None:
    def broken(_: str) -> tuple[bytes, str]:
        raise ValueError("corrupt mmap file")

    async def go() -> tuple[bytes, bytes]:
        async with stack(collect=broken) as (port, _up):
            bad = await exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n")
            ok = await exchange(port, b"GET /ping HTTP/1.1\r\n\r\n", half_close=True)
            return bad, ok
    bad, ok = _run(go())
    assert split(bad)[0].startswith("HTTP/1.1 500") and split(ok)[0] == "HTTP/1.1 200 OK"


def test_only_the_first_request_of_a_connection_is_inspected(multiproc_dir: str) -> None:
    """The documented limit: after a spliced first request, /metrics goes to LMI too."""
    async def go() -> None:
        async with stack(multiproc_dir) as (port, up), connect(port) as (reader, writer):
            writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await reader.readuntil(b"healthy\n")
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            writer.write_eof()
            rest = await reader.read()
            assert rest.startswith(b"HTTP/1.1 404") and len(up.received) == 2
    _run(go())


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
