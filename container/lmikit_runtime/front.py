"""Metrics front: port 8080 for SageMaker, vLLM/LMCache metrics at the metrics path.

SageMaker's detailed observability scrapes ``ContainerMetricsConfig``'s path on port 8080,
which LMI's djl-serving owns. With the front on, the start step moves djl-serving to
``127.0.0.1:LMIKIT_UPSTREAM_PORT`` (``SERVING_INFERENCE_ADDRESS``/``SERVING_MANAGEMENT_ADDRESS``)
and this process listens on 8080. Per accepted connection it reads the first request head
(bounded in size and time):

- ``GET <LMIKIT_METRICS_PATH>`` (query string ignored; ``HEAD`` too) is answered here with
  the merged multiprocess exposition (``metrics.exposition``), ``Connection: close``;
- anything else is forwarded: the bytes already read are written to djl-serving, then both
  directions are spliced byte for byte (one read-size chunk at a time, ``drain`` awaited, half
  closes passed on) until both sides are done. No HTTP parsing, so chunked/SSE responses
  flow as they are produced. djl-serving not reachable: ``502`` and close.

Only the FIRST request on a connection is inspected: a keep-alive connection whose first
request went to djl-serving stays spliced. Scrapers open their own connection.

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


class _HeadTooLarge(Exception):
    pass


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
              head_only: bool = False) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
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
        try:
            await self._handle(reader, writer)
        except (ConnectionError, OSError):
            pass  # a peer went away: nothing to tell anyone
        finally:
            if task is not None:
                self._connections.discard(task)
            if not writer.is_closing():
                writer.transport.abort()

    async def close_connections(self) -> None:
        """Cancel the connections in flight (tests, shutdown)."""
        tasks = list(self._connections)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cfg = self.config
        buf = bytearray()
        try:
            await asyncio.wait_for(self._read_head(reader, buf), cfg.head_timeout)
        except asyncio.TimeoutError:
            if buf:  # a partial head: say why; an idle connection is closed silently
                await self._reply(reader, writer, _response(
                    "408 Request Timeout", b"request head not received in time\n"))
            else:
                writer.close()
            return
        except _HeadTooLarge:
            await self._reply(reader, writer, _response(
                "400 Bad Request", f"request head exceeds {cfg.max_head} bytes\n".encode()))
            return
        if not buf:  # closed before sending anything
            writer.close()
            return
        metrics, head_only = is_metrics_request(bytes(buf), cfg.metrics_path)
        if metrics:
            await self._serve_metrics(reader, writer, head_only)
        else:
            await self._forward(reader, writer, bytes(buf))

    async def _read_head(self, reader: asyncio.StreamReader, buf: bytearray) -> None:
        """Read until the end of the first head (or EOF) into ``buf``; bounded by max_head."""
        while b"\r\n\r\n" not in buf:
            if len(buf) > self.config.max_head:
                raise _HeadTooLarge
            chunk = await reader.read(CHUNK)
            if not chunk:
                return
            buf += chunk
        if buf.index(b"\r\n\r\n") + 4 > self.config.max_head:
            raise _HeadTooLarge

    async def _serve_metrics(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             head_only: bool) -> None:
        loop = asyncio.get_running_loop()
        try:  # reading the mmap files is file I/O: keep it off the splicing loop
            body, content_type = await loop.run_in_executor(
                None, self.config.collect, self.config.multiproc_dir)
        except Exception as exc:  # a bad mmap file must not kill the front
            log.warning("metrics collection failed: %s", exc)
            await self._reply(reader, writer, _response(
                "500 Internal Server Error", b"metrics collection failed\n"))
            return
        await self._reply(reader, writer, _response("200 OK", body, content_type, head_only))

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

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       first: bytes) -> None:
        cfg = self.config
        try:
            up_reader, up_writer = await asyncio.wait_for(
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
            return
        clean = False
        try:
            up_writer.write(first)
            await up_writer.drain()
            clean = await _splice(reader, writer, up_reader, up_writer)
        finally:
            for w in (up_writer, writer):
                if clean:
                    w.close()  # both sides reached EOF: flush what is left, then FIN
                else:
                    w.transport.abort()  # an error or cancellation: drop both at once
            for w in (up_writer, writer):
                await _close(w)


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
        server = await asyncio.start_server(front.handle, sock=sock, limit=CHUNK)
    else:
        server = await asyncio.start_server(front.handle, host, port, limit=CHUNK,
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
