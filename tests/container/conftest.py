"""Synthetic hosts for the container start-up code: /proc, cgroup v1/v2, /sys, statvfs.

The container code is imported from container/ (as in the image, where it sits in
/opt/lmikit next to a copy of lmikit/sizing.py; here the SDK provides lmikit.sizing).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

CONTAINER = Path(__file__).resolve().parents[2] / "container"
if str(CONTAINER) not in sys.path:
    sys.path.insert(0, str(CONTAINER))

GIB = 1024**3


@dataclass(frozen=True)
class StatVfs:
    f_bavail: int
    f_blocks: int
    f_frsize: int = 4096


def fake_statvfs(sizes: dict[str, tuple[int, int]]):
    """statvfs for mount points: {mount_point: (free_bytes, total_bytes)}."""
    def statvfs(path: str) -> StatVfs:
        free, total = sizes[path]
        return StatVfs(f_bavail=free // 4096, f_blocks=total // 4096)
    return statvfs


def make_root(tmp_path: Path, *, mem_total_gib: float, mem_available_gib: float,
              cgroup: tuple | None = None, mounts: list[tuple[str, str, str, str]] = (),
              models: dict[str, str] | None = None, gpus: int = 1) -> Path:
    """A fake filesystem root. cgroup: ("v2", limit|"max", usage) or ("v1", limit, usage).
    mounts: (major:minor, mount point, fs type, source). models: {major:minor: device model}.
    """
    root = tmp_path / "root"
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(
        f"MemTotal:       {int(mem_total_gib * 1024 * 1024)} kB\n"
        f"MemFree:        {int(mem_available_gib * 1024 * 1024 * 0.5)} kB\n"
        f"MemAvailable:   {int(mem_available_gib * 1024 * 1024)} kB\n"
        "Buffers:          123456 kB\n")
    cg = root / "sys/fs/cgroup"
    cg.mkdir(parents=True)
    if cgroup and cgroup[0] == "v2":
        (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (root / "proc/self/cgroup").write_text("0::/\n")
        (cg / "memory.max").write_text(f"{cgroup[1]}\n")
        (cg / "memory.current").write_text(f"{cgroup[2]}\n")
    elif cgroup and cgroup[0] == "v1":
        mem = cg / "memory"
        mem.mkdir()
        (root / "proc/self/cgroup").write_text(
            "12:pids:/docker/abc\n5:memory:/docker/abc\n1:name=systemd:/docker/abc\n")
        (mem / "memory.limit_in_bytes").write_text(f"{cgroup[1]}\n")
        (mem / "memory.usage_in_bytes").write_text(f"{cgroup[2]}\n")
    lines = [f"{20 + i} 1 {mm} / {mp} rw,relatime - {fs} {src} rw"
             for i, (mm, mp, fs, src) in enumerate(mounts)]
    (root / "proc/self/mountinfo").write_text("\n".join(lines) + "\n")
    for mm, model in (models or {}).items():
        dev = root / "sys/dev/block" / mm / "device"
        dev.mkdir(parents=True)
        (dev / "model").write_text(model + "\n")
    gpu_dir = root / "proc/driver/nvidia/gpus"
    gpu_dir.mkdir(parents=True)
    for i in range(gpus):
        (gpu_dir / f"0000:{i:02x}:00.0").mkdir()
    return root


INSTANCE_NVME = "Amazon EC2 NVMe Instance Storage"
EBS = "Amazon Elastic Block Store"
OVERLAY_ROOT = ("0:52", "/", "overlay", "overlay")


# A worker recording metrics under the names vLLM and LMCache use, as their processes would.
METRICS_WORKER = r"""
from prometheus_client import Counter, Gauge, Histogram
hit = Counter("lmcache:num_hit_tokens", "hit tokens", ["model_name", "tier"])
hit.labels("qwen", "cpu").inc(4096)
hit.labels("qwen", "disk").inc(1024)
Counter("lmcache:local_cpu_evict_count", "evictions", ["model_name"]).labels("qwen").inc(3)
Gauge("lmcache:local_cache_usage", "bytes", ["model_name"],
      multiprocess_mode="livesum").labels("qwen").set(2.5e9)
Histogram("lmcache:retrieve_speed", "tokens/s", ["model_name"],
          buckets=(1e3, 1e5, 1e7)).labels("qwen").observe(5e4)
Histogram("vllm:time_to_first_token_seconds", "TTFT", ["model_name"],
          buckets=(0.1, 0.5, 1.0)).labels("qwen").observe(0.3)
"""


@pytest.fixture(scope="session")
def multiproc_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real prometheus_client multiprocess dir written by two worker processes (as with
    tensor parallelism)."""
    path = tmp_path_factory.mktemp("prom")
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(path))
    for _ in range(2):
        subprocess.run([sys.executable, "-c", METRICS_WORKER], env=env, check=True, timeout=30)
    return str(path)


def free_port() -> int:
    """A loopback port nobody listens on right now (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
