"""Register N LoRA adapters against the fake SageMaker (real clock, simulated creation
time) concurrently and one by one; print both wall times and their ratio (target < 0.2).

    python benchmarks/adapters_parallel.py [--adapters 16] [--seconds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(var, None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from lmikit.deploy import Deployment  # noqa: E402
from lmikit.lora import AdapterRegistry  # noqa: E402
from lmikit.spec import load_spec_text  # noqa: E402
from lmikit.testing import FakeSageMaker, SystemClock, Timings, write_lora_adapter  # noqa: E402

BUCKET = "lmikit-bench"
SPEC = """api_version: v1
name: bench
region: us-east-1
model: {id: Qwen/Qwen2.5-7B-Instruct}
instance: {type: ml.g6e.2xlarge}
adapters: [{name: seed, source: adapters/seed}]
"""


def make_adapter(root: Path, name: str) -> Path:
    return write_lora_adapter(root / name, fill=sum(name.encode()) % 256)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--adapters", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated creation time")
    args = ap.parse_args()
    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_adapter(root / "adapters", "seed")
        fake = FakeSageMaker(clock=SystemClock(), timings=Timings(
            endpoint_create=0.1, component_create=0.1, adapter_create=args.seconds,
            delete=0.1))
        session = fake.install(boto3.Session(region_name="us-east-1"))
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        spec = load_spec_text(SPEC)
        Deployment(spec, session=session, role_arn="arn:aws:iam::123456789012:role/bench",
                   bucket=BUCKET, base_dir=root, image_uri="img:1", poll_seconds=0.05).deploy()
        registry = AdapterRegistry("bench", session=session, bucket=BUCKET, poll_seconds=0.1)

        def batch(tag: str) -> list[tuple[str, str | Path, str | Path | None]]:
            return [(f"{tag}{i}", make_adapter(root / tag, f"{tag}{i}"), None)
                    for i in range(args.adapters)]

        parallel = batch("p")
        start = time.perf_counter()
        registry.register_many(parallel)
        t_parallel = time.perf_counter() - start

        sequential = batch("s")
        start = time.perf_counter()
        for name, path, fmt in sequential:
            registry.register(name, path, fmt)
        t_sequential = time.perf_counter() - start

    ratio = t_parallel / t_sequential
    print(f"adapters: {args.adapters}, simulated creation: {args.seconds:.1f} s each")
    print(f"concurrent: {t_parallel:.2f} s wall")
    print(f"sequential: {t_sequential:.2f} s wall")
    print(f"ratio: {ratio:.3f} (target < 0.2) -> {'PASS' if ratio < 0.2 else 'FAIL'}")
    return 0 if ratio < 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
