"""Latency the metrics front adds to each streamed chunk, and what a connection costs.

A fake LMI (own process) streams SSE-shaped chunks as djl-serving does (chunked transfer,
connection kept alive), each stamped with CLOCK_MONOTONIC when written (one chunk every
--interval-ms, so nothing queues); the client (this process) notes when each arrives.
Measured directly and through the front (own process, as in the image), then reported in
microseconds: median, p90, p99 of the one-way chunk latency, and the median added by the
front. Then --requests small requests (GET /ping) through the front, all on one kept-alive
connection, and each on a new connection (what closing after every forwarded response
would cost: the client and the front connect again per request).

    python benchmarks/metrics_front_overhead.py [--chunks 2000] [--interval-ms 1]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

RECORD = re.compile(rb"data: (\d{20})\n\n")
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: keep-alive\r\n\r\n")
PONG = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: keep-alive\r\n\r\nhealthy\n"


def _upstream(port_out: mp.connection.Connection, interval: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")  # GET /stream?n=<chunks>, /ping
                target = head.split(b" ", 2)[1]
                if not target.startswith(b"/stream"):
                    writer.write(PONG)
                    continue
                writer.write(HEAD)
                for _ in range(int(target.split(b"n=", 1)[1])):
                    await asyncio.sleep(interval)
                    record = b"data: %020d\n\n" % time.monotonic_ns()
                    writer.write(b"%x\r\n%s\r\n" % (len(record), record))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def _front(port_out: mp.connection.Connection, upstream_port: int, multiproc_dir: str) -> None:
    from lmikit_runtime.front import FrontConfig, serve

    async def main() -> None:
        server, _ = await serve(FrontConfig(multiproc_dir=multiproc_dir,
                                            upstream_port=upstream_port),
                                host="127.0.0.1", port=0)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def _start(target, *args) -> tuple[mp.Process, int]:  # type: ignore[no-untyped-def]
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=target, args=(send, *args), daemon=True)
    proc.start()
    if not recv.poll(10):
        raise SystemExit(f"{target.__name__} did not start")
    return proc, recv.recv()


def latencies_us(port: int, chunks: int) -> list[float]:
    out: list[float] = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /stream?n=%d HTTP/1.1\r\nHost: bench\r\n\r\n" % chunks)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        now = time.monotonic_ns()
        buf = buf.split(b"\r\n\r\n", 1)[1]
        while True:
            end = 0
            for match in RECORD.finditer(buf):
                out.append((now - int(match.group(1))) / 1000)
                end = match.end()
            buf = buf[end:]
            if len(out) >= chunks:
                break
            data = sock.recv(65536)
            if not data:
                break
            now = time.monotonic_ns()
            buf += data
    return out


def request_us(port: int, requests: int, reuse: bool) -> float:
    """Mean microseconds per GET /ping: on one connection, or each on a new one."""
    ping = b"GET /ping HTTP/1.1\r\nHost: bench\r\n\r\n"
    start = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30) if reuse else None
    for _ in range(requests):
        conn = sock or socket.create_connection(("127.0.0.1", port), timeout=30)
        conn.sendall(ping)
        got = b""
        while not got.endswith(b"healthy\n"):
            got += conn.recv(65536)
        if not reuse:
            conn.close()
    if sock:
        sock.close()
    return (time.perf_counter() - start) / requests * 1e6


def summary(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=100)
    return f"median {statistics.median(xs):7.1f}  p90 {q[89]:7.1f}  p99 {q[98]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--interval-ms", type=float, default=1.0)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    procs: list[mp.Process] = []
    with tempfile.TemporaryDirectory() as prom:
        try:
            up, up_port = _start(_upstream, args.interval_ms / 1000)
            procs.append(up)
            front, front_port = _start(_front, up_port, prom)
            procs.append(front)
            latencies_us(up_port, min(args.chunks, 200))  # warm-up, both paths
            latencies_us(front_port, min(args.chunks, 200))
            direct = latencies_us(up_port, args.chunks)
            through = latencies_us(front_port, args.chunks)
            request_us(front_port, 200, True)  # warm-up
            kept = request_us(front_port, args.requests, True)
            fresh = request_us(front_port, args.requests, False)
        finally:
            for p in procs:
                p.terminate()
                p.join(5)
    print(f"chunk latency, us ({len(direct)} chunks, one every {args.interval_ms} ms, loopback)")
    print(f"  direct to LMI   {summary(direct)}")
    print(f"  through front   {summary(through)}")
    print(f"  added by front  median {statistics.median(through) - statistics.median(direct):7.1f}")
    print(f"GET /ping through the front, us per request ({args.requests} requests)")
    print(f"  one kept-alive connection   {kept:7.1f}")
    print(f"  a new connection each       {fresh:7.1f}  (+{fresh - kept:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
