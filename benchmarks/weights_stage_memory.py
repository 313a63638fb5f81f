"""Peak memory and time of ``lmikit weights stage`` on a large file: the Python heap
(tracemalloc) and the process's peak RSS stay near ``2 x busy workers x part_size``
however large the file is.

    python benchmarks/weights_stage_memory.py [--mb 300 600] [--part-mb 16 64]

The Hub is tests/functional/weights/_fake_hub.py in the measured process (it makes the
file's zeros as it sends them); S3 is moto's server in another process, so what S3 stores
is not counted. Each (file size, part size) is staged by a process of its own, so its peak
RSS is its own; one JSON line per run. Exits 1 when a heap peak exceeds two parts + 16 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


def peak_rss_kib() -> int:
    """This process's peak RSS (/proc's VmHWM, which starts afresh at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(megabytes: int, part_mb: int, s3_url: str) -> None:
    sys.path.insert(0, str(ROOT))
    import boto3
    from huggingface_hub import HfApi, get_session

    from lmikit.weights import stage
    from tests.functional.weights._fake_hub import Content, FakeHub

    hub = FakeHub()
    hub.add_repo("org/big", {"config.json": b"{}", "model.safetensors":
                             Content(zeros=megabytes * MIB)})
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1")
    bucket = f"bench-{megabytes}-{part_mb}"
    s3.create_bucket(Bucket=bucket)
    HfApi(endpoint=hub.url).model_info("org/big")  # imports are not what is measured
    get_session()
    base = peak_rss_kib()
    tracemalloc.start()
    start = time.perf_counter()
    result = stage("org/big", f"s3://{bucket}/big/", endpoint=hub.url, region="us-east-1",
                   s3=s3, part_size=part_mb * MIB)
    seconds = time.perf_counter() - start
    _, heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    hub.close()
    peak = peak_rss_kib()
    head = s3.head_object(Bucket=bucket, Key="big/model.safetensors")
    assert head["ContentLength"] == megabytes * MIB
    print(json.dumps({"file_mb": megabytes, "part_mb": part_mb,
                      "seconds": round(seconds, 2),
                      "mb_per_s": round(result.bytes_copied / seconds / 1e6, 1),
                      "heap_peak_mb": round(heap / MIB, 1),
                      "rss_growth_mb": round((peak - base) / 1024, 1),
                      "peak_rss_mb": round(peak / 1024, 1)}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, nargs="+", default=[300], help="file sizes in MiB")
    ap.add_argument("--part-mb", type=int, nargs="+", default=[16], help="part sizes in MiB")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2])
        return 0
    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    failed = False
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        for megabytes in args.mb:
            for part_mb in args.part_mb:
                out = subprocess.run([sys.executable, __file__, "--child", str(megabytes),
                                      str(part_mb), f"http://127.0.0.1:{port}"], env=env,
                                     capture_output=True, text=True, check=True)
                print(out.stdout.strip(), flush=True)
                row = json.loads(out.stdout)
                failed |= row["heap_peak_mb"] > 2 * part_mb + 16
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
