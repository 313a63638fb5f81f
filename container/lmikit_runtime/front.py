"""Metrics front: port 8080 for SageMaker, vLLM/LMCache metrics at the metrics path.

SageMaker's detailed observability scrapes ``ContainerMetricsConfig``'s path on port 8080,
which LMI's djl-serving owns. With the front on, the start step moves djl-serving to
``127.0.0.1:LMIKIT_UPSTREAM_PORT`` (``SERVING_INFERENCE_ADDRESS``/``SERVING_MANAGEMENT_ADDRESS``)
and this process listens on 8080. Every request on a connection is routed by its own request
line, kept-alive and pipelined ones included (heads bounded in size and time):

- ``GET <LMIKIT_METRICS_PATH>`` (query string ignored; ``HEAD`` too) is answered here with
  the merged multiprocess exposition (``metrics.exposition``);
- anything else goes to djl-serving over one connection held for this client connection:
  the request, then the response, each relayed byte for byte as it arrives (one read at a
  time, ``drain`` awaited) to the end its framing gives (``http1``), so chunked/SSE responses
  flow as they are produced. djl-serving not reachable: ``502`` and close.

The connection stays open as HTTP/1.1 says: it closes after ``Connection: close``, an HTTP/1.0
request without keep-alive, a response that ends with its connection, or a request whose
body was not read to its end.

Run: ``python3 -m lmikit_runtime.front`` (the start step passes it a bound listening socket in
``LMIKIT_FRONT_FD`` and a pipe in ``LMIKIT_FRONT_READY_FD`` on which it writes ``ready``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lmikit_runtime.http1 import (
    FramingError,
    Head,
    parse_head,
    relay_body,
    request_body,
    response_body,
)
from lmikit_runtime.metrics import exposition

log = logging.getLogger("lmikit.front")

DEFAULT_FRONT_PORT = 8080
DEFAULT_UPSTREAM_PORT = 8081
UPSTREAM_HOST = "127.0.0.1"
CHUNK = 64 * 1024
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 5.0
LINGER_TIMEOUT = 2.0
REPLY_TIMEOUT = 30.0
READY = b"ready\n"


class FrontError(Exception):
    """The front could not start (port taken, child died): the container must not start."""


@dataclass
class FrontConfig:
    metrics_path: str = "/metrics"
    multiproc_dir: str = ""
    upstream_host: str = UPSTREAM_HOST
    upstream_port: int = DEFAULT_UPSTREAM_PORT
    head_timeout: float = HEAD_TIMEOUT
    max_head: int = MAX_HEAD
    connect_timeout: float = CONNECT_TIMEOUT
    collect: Callable[[str], tuple[bytes, str]] = field(default=exposition)


def upstream_address(port: int) -> str:
    """djl-serving's address behind the front (SERVING_INFERENCE_ADDRESS form)."""
    return f"http://{UPSTREAM_HOST}:{port}"


def is_metrics_request(head: bytes, path: str) -> tuple[bool, bool]:
    """(is it GET/HEAD of ``path``, is it HEAD) from the request line; nothing else parsed."""
    line = head.lstrip(b"\r\n").split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3 or parts[0] not in (b"GET", b"HEAD") or not parts[2].startswith(b"HTTP/"):
        return False, False
    target = parts[1].split(b"?", 1)[0]
    return target == path.encode("latin-1"), parts[0] == b"HEAD"


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8",
              head_only: bool = False, keep_alive: bool = False) -> bytes:
    connection = "keep-alive" if keep_alive else "close"
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: {connection}\r\n\r\n"
            ).encode("latin-1")
    return head if head_only else head + body


class Front:
    """The connection handler; ``serve`` wraps it in an asyncio server."""

    def __init__(self, config: FrontConfig) -> None:
        self.config = config
        self._last_502_log = 0.0
        self._connections: set[asyncio.Task] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        upstream: list[asyncio.StreamWriter] = []  # the connection to LMI, while it is open
        try:
            await self._handle(reader, writer, upstream)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, FramingError):
            pass  # a peer went away or broke its framing mid-message: drop the connection
        finally:
            if task is not None:
                self._connections.discard(task)
            for w in (*upstream, writer):
                if not w.is_closing():
                    w.transport.abort()

    async def close_connections(self) -> None:
        """Cancel the connections in flight (tests, shutdown)."""
        tasks = list(self._connections)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      upstream: list[asyncio.StreamWriter]) -> None:
        """One request after another, each routed by its own request line."""
        cfg = self.config
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        first = True
        while True:
            try:
                raw = await self._read_head(reader, first)
            except asyncio.TimeoutError:  # a head begun and not finished in time
                await self._reply(reader, writer, _response(
                    "408 Request Timeout", b"request head not received in time\n"))
                return
            except asyncio.LimitOverrunError:
                await self._reply(reader, writer, _response(
                    "400 Bad Request", f"request head exceeds {cfg.max_head} bytes\n".encode()))
                return
            if raw is None:  # closed, or idle past the first head's timeout: no answer
                await _close(writer)
                return
            first = False
            try:
                head = parse_head(raw)
                framing = request_body(head)
                if not head.is_request:
                    raise FramingError("a status line where a request line belongs")
            except FramingError as exc:
                await self._reply(reader, writer, _response("400 Bad Request",
                                                            f"{exc}\n".encode()))
                return
            metrics, head_only = is_metrics_request(raw, cfg.metrics_path)
            if metrics:
                await relay_body(reader, None, framing)  # a body on GET is read and dropped
                if not await self._serve_metrics(reader, writer, head_only, head.keep_alive):
                    return
                continue
            if up is None:
                up = await self._connect(reader, writer)
                if up is None:
                    return
                upstream.append(up[1])
            keep_client, keep_upstream = await self._forward(reader, writer, head, framing, up)
            if not keep_upstream:
                upstream.remove(up[1])
                up[1].close()
                up = None
            if not keep_client:  # a lingering close: the client may still be sending
                await self._reply(reader, writer, b"")
                return

    async def _read_head(self, reader: asyncio.StreamReader, first: bool) -> bytes | None:
        """The next request head; None at EOF, or when the first request does not begin within
        the head timeout. A later one may wait idle as long as the client keeps the connection
        (djl-serving has no idle timeout either); once begun, a head has the timeout to end."""
        begun = False

        async def read() -> bytes:
            nonlocal begun
            lead = await reader.readexactly(1)
            begun = True
            return lead + await reader.readuntil(b"\r\n\r\n")

        try:
            if first:
                try:
                    return await asyncio.wait_for(read(), self.config.head_timeout)
                except asyncio.TimeoutError:
                    if begun:
                        raise
                    return None
            lead = await reader.readexactly(1)
            return lead + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                                 self.config.head_timeout)
        except asyncio.IncompleteReadError:
            return None

    async def _serve_metrics(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             head_only: bool, keep_alive: bool) -> bool:
        """Answer the metrics path; whether the connection stays open."""
        loop = asyncio.get_running_loop()
        try:  # reading the mmap files is file I/O: keep it off the relaying loop
            body, content_type = await loop.run_in_executor(
                None, self.config.collect, self.config.multiproc_dir)
            status = "200 OK"
        except Exception as exc:  # a bad mmap file must not kill the front
            log.warning("metrics collection failed: %s", exc)
            status, body, content_type = ("500 Internal Server Error",
                                          b"metrics collection failed\n", "text/plain")
        data = _response(status, body, content_type, head_only, keep_alive)
        if not keep_alive:
            await self._reply(reader, writer, data)
            return False
        writer.write(data)
        await writer.drain()
        return True

    async def _reply(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     data: bytes) -> None:
        """Send a whole response, then a lingering close: FIN, then discard what the client
        still sends for a moment, so unread request bytes do not turn the close into an RST
        that destroys the response before the client reads it."""
        try:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), REPLY_TIMEOUT)
            if writer.can_write_eof():
                writer.write_eof()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._discard(reader), LINGER_TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            writer.transport.abort()  # a client that does not read: drop it
            return
        await _close(writer)

    @staticmethod
    async def _discard(reader: asyncio.StreamReader) -> None:
        while await reader.read(CHUNK):
            pass

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to LMI, or None after answering 502."""
        cfg = self.config
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(cfg.upstream_host, cfg.upstream_port, limit=CHUNK),
                cfg.connect_timeout)
        except (asyncio.TimeoutError, OSError) as exc:
            now = time.monotonic()
            if now - self._last_502_log > 60:  # LMI loads for minutes; /ping is frequent
                self._last_502_log = now
                log.warning("LMI is not reachable on %s:%d (%s); answering 502",
                            cfg.upstream_host, cfg.upstream_port, str(exc) or type(exc).__name__)
            await self._reply(reader, writer, _response(
                "502 Bad Gateway", b"LMI server is not reachable\n"))
            return None

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       head: Head, framing: tuple[str, int],
                       up: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                       ) -> tuple[bool, bool]:
        """One request to LMI and its response back, bytes unchanged; the request body is
        sent while the response is read (``100 Continue``, an early answer). Returns whether
        the client and the LMI connection can carry another request."""
        up_reader, up_writer = up
        up_writer.write(head.raw)
        sending = asyncio.ensure_future(_send_body(reader, up_writer, framing))
        try:
            while True:  # interim 1xx heads, then the final one
                try:
                    response = parse_head(await up_reader.readuntil(b"\r\n\r\n"))
                except asyncio.LimitOverrunError as exc:
                    raise FramingError("LMI sent a response head over 64 KiB") from exc
                writer.write(response.raw)
                await writer.drain()
                status = int(response.start[1])
                if status == 101:  # another protocol from here on: bytes both ways
                    await _splice(reader, writer, up_reader, up_writer)
                    return False, False
                if status >= 200:
                    break
            body = response_body(response, head.start[0])
            await relay_body(up_reader, writer, body)
            sent = sending.done() and sending.exception() is None
        finally:
            if not sending.done():
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
        keep_upstream = sent and response.keep_alive and body[0] != "close"
        return keep_upstream and head.keep_alive, keep_upstream


async def _send_body(reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter,
                     framing: tuple[str, int]) -> None:
    """The request body to LMI; if it cannot be sent whole, the LMI connection is dropped,
    which ends the wait for a response that will not come."""
    try:
        await relay_body(reader, up_writer, framing)
    except BaseException:
        up_writer.transport.abort()
        raise


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close and wait (bounded) for the socket to go; abort a peer that does not read."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), LINGER_TIMEOUT)
    except asyncio.TimeoutError:
        writer.transport.abort()
    except (ConnectionError, OSError):
        pass


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy src to dst one chunk at a time; on EOF pass the half close on."""
    while True:
        data = await src.read(CHUNK)
        if not data:
            break
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof() and not dst.is_closing():
        with contextlib.suppress(ConnectionError, OSError):
            dst.write_eof()


async def _splice(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter,
                  u_reader: asyncio.StreamReader, u_writer: asyncio.StreamWriter) -> bool:
    """Both directions until both reach EOF (True); an error on either ends both (False)."""
    tasks = [asyncio.ensure_future(_pump(c_reader, u_writer)),
             asyncio.ensure_future(_pump(u_reader, c_writer))]
    try:
        pending: set[asyncio.Future] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(t.exception() is not None for t in done):
                return False
        return True
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def serve(config: FrontConfig, *, sock: socket.socket | None = None,
                host: str = "0.0.0.0", port: int = DEFAULT_FRONT_PORT,
                ) -> tuple[asyncio.Server, Front]:
    """Start accepting (on ``sock`` if given, else bind host:port)."""
    front = Front(config)
    if sock is not None:
        server = await asyncio.start_server(front.handle, sock=sock, limit=config.max_head)
    else:
        server = await asyncio.start_server(front.handle, host, port, limit=config.max_head,
                                            backlog=1024)
    return server, front


def config_from_env(env: dict[str, str] | os._Environ[str]) -> FrontConfig:
    return FrontConfig(
        metrics_path=env.get("LMIKIT_METRICS_PATH") or "/metrics",
        multiproc_dir=env.get("PROMETHEUS_MULTIPROC_DIR", ""),
        upstream_port=int(env.get("LMIKIT_UPSTREAM_PORT") or DEFAULT_UPSTREAM_PORT),
        head_timeout=float(env.get("LMIKIT_FRONT_HEAD_TIMEOUT") or HEAD_TIMEOUT),
    )


async def _main(env: dict[str, str] | os._Environ[str]) -> None:
    cfg = config_from_env(env)
    fd = env.get("LMIKIT_FRONT_FD")
    if fd:
        sock = socket.socket(fileno=int(fd))
        server, _ = await serve(cfg, sock=sock)
    else:
        server, _ = await serve(cfg, host=env.get("LMIKIT_FRONT_HOST") or "0.0.0.0",
                                port=int(env.get("LMIKIT_FRONT_PORT") or DEFAULT_FRONT_PORT))
    where = ", ".join(f"{s.getsockname()[0]}:{s.getsockname()[1]}" for s in server.sockets)
    log.info("listening on %s: %s from %s, everything else to LMI on %s:%d", where,
             cfg.metrics_path, cfg.multiproc_dir, cfg.upstream_host, cfg.upstream_port)
    ready = env.get("LMIKIT_FRONT_READY_FD")
    if ready:
        os.write(int(ready), READY)
        os.close(int(ready))
    async with server:
        await server.serve_forever()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="lmikit-front: %(message)s",
                        stream=sys.stderr)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        log.error("PROMETHEUS_MULTIPROC_DIR is not set; nothing to serve")
        return 1
    try:
        asyncio.run(_main(os.environ))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
