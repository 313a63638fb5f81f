"""Latency the metrics front adds to each streamed chunk, on loopback.

A fake LMI (own process) streams SSE-shaped chunks, each stamped with CLOCK_MONOTONIC when
written (one chunk every --interval-ms, so nothing queues); the client (this process) notes
when each arrives. Measured directly and through the front (own process, as in the image),
then reported in microseconds: median, p90, p99 of the one-way chunk latency, and the
median added by the front.

    python benchmarks/metrics_front_overhead.py [--chunks 2000] [--interval-ms 1]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

RECORD = len(b"data: %020d\n\n" % 0)
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")


def _upstream(port_out: mp.connection.Connection, interval: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")  # GET /stream?n=<chunks> HTTP/1.1
        chunks = int(head.split(b" ", 2)[1].split(b"n=", 1)[1])
        writer.write(HEAD)
        for _ in range(chunks):
            await asyncio.sleep(interval)
            writer.write(b"data: %020d\n\n" % time.monotonic_ns())
            await writer.drain()
        writer.close()
        await writer.wait_closed()

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
        while len(out) < chunks:
            if len(buf) < RECORD:
                data = sock.recv(65536)
                if not data:
                    break
                now = time.monotonic_ns()
                buf += data
            while len(buf) >= RECORD:
                sent = int(buf[6:26])
                out.append((now - sent) / 1000)
                buf = buf[RECORD:]
    return out


def summary(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=100)
    return f"median {statistics.median(xs):7.1f}  p90 {q[89]:7.1f}  p99 {q[98]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--interval-ms", type=float, default=1.0)
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
        finally:
            for p in procs:
                p.terminate()
                p.join(5)
    print(f"chunk latency, us ({len(direct)} chunks, one every {args.interval_ms} ms, loopback)")
    print(f"  direct to LMI   {summary(direct)}")
    print(f"  through front   {summary(through)}")
    print(f"  added by front  median {statistics.median(through) - statistics.median(direct):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
