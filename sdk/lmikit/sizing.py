"""The planner's arithmetic: pure functions of numbers, standard library only.

The SDK planner and the container's start-up auto-configuration both call these, so the
sizes written at deploy time and at container start come from one implementation.

Units: bytes unless a name says otherwise; GiB = 2**30 bytes (LMCache's "GB" sizes are
multiplied by 1024**3); bandwidths in GB/s = 1e9 bytes/s.

>>> cpu = host_cache_budget(host_bytes=1152 * GIB, weight_bytes=15 * 10**9, copies=1, tp=1)
>>> round(cpu.per_worker_gib)
918
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3

# --- constants, each one stated in every plan's assumptions --------------------------------
GPU_RUNTIME_OVERHEAD_GIB = 1.5  # CUDA context, activations, CUDA graphs per GPU
HOST_RESERVE_FRACTION = 0.2  # OS, container runtime, page cache headroom (as LMI)
WEIGHT_LOAD_FACTOR = 2.0  # host RAM used while loading weights, per copy (as LMI)
WORKER_HOST_OVERHEAD_GIB = 4.0  # vLLM worker process: Python, torch, CUDA host allocations
DISK_USABLE_FRACTION = 0.9  # filesystem overhead and a free-space margin on the NVMe
DISK_MIN_FREE_FRACTION = 0.1  # below this free share a disk tier is not sized at all
# LMI downloads Hub and S3 weights under /tmp (its image's HF_HOME=/tmp/.cache/huggingface,
# DJL_CACHE_DIR=/tmp/.djl.ai: djl-serving serving/docker/lmi.Dockerfile), the filesystem of
# LMCache's disk tier (/tmp/lmcache/): every copy's weights are kept free of the tier
DOWNLOAD_SLACK = 1.1  # temporary files while a download is in flight
PREFILL_MFU = 0.55  # share of dense bf16 peak achieved by vLLM prefill
GPU_CACHE_RELIABLE_FRACTION = 0.5  # share of free KV pool that reliably keeps prefixes
MAX_MODEL_LEN_POOL_SHARE = 0.9  # default max_model_len at most this share of the KV pool
#                                 estimate, which runs up to 9% above measured pools
#                                 (docs/planner-model.md); vLLM will not start if one sequence
#                                 of max_model_len does not fit the pool it measures
REQUEST_OVERHEAD_S = 0.02  # HTTP, scheduling, sampling, first token out (source: PROVENANCE
#                            in lmikit.sim.Coefficients; tokenizing is costed per token there)


@dataclass(frozen=True)
class HostBudget:
    """LMCache CPU memory: what the instance has, what is reserved, what each worker gets."""

    host_bytes: int
    reserved_bytes: int
    workers: int
    per_worker_bytes: int

    @property
    def per_worker_gib(self) -> float:
        return self.per_worker_bytes / GIB

    @property
    def total_bytes(self) -> int:
        return self.per_worker_bytes * self.workers


def host_cache_budget(host_bytes: int, weight_bytes: int, copies: int, tp: int,
                      limit_bytes: int | None = None) -> HostBudget:
    """Host RAM LMCache may pin, split across every worker process on the instance.

    ``limit_bytes`` is a hard cap (a container's cgroup limit) that the total never exceeds.
    Reserves: max(20% of the host, 2x the weights of every copy) for the OS and weight
    loading, plus a fixed overhead per vLLM worker process.
    """
    workers = copies * tp
    usable = host_bytes if limit_bytes is None else min(host_bytes, limit_bytes)
    reserve = max(int(HOST_RESERVE_FRACTION * usable), int(WEIGHT_LOAD_FACTOR * weight_bytes
                                                          * copies))
    reserve += int(WORKER_HOST_OVERHEAD_GIB * GIB) * workers
    per_worker = max(0, (usable - reserve) // workers)
    return HostBudget(usable, reserve, workers, per_worker)


@dataclass(frozen=True)
class DiskBudget:
    free_bytes: int
    workers: int
    per_worker_bytes: int
    reason: str = ""

    @property
    def per_worker_gib(self) -> float:
        return self.per_worker_bytes / GIB


def weights_on_disk(weight_bytes: int, copies: int) -> int:
    """Bytes the downloaded weights of ``copies`` copies take, download slack included."""
    return int(DOWNLOAD_SLACK * weight_bytes * copies)


def disk_cache_budget(free_bytes: int, total_bytes: int, copies: int, tp: int,
                      is_nvme: bool = True) -> DiskBudget:
    """NVMe space for LMCache's disk tier, from the FREE space of the filesystem (less any
    weights still to come: :func:`weights_on_disk`)."""
    workers = copies * tp
    if not is_nvme:
        return DiskBudget(free_bytes, workers, 0, "the cache directory is not on NVMe")
    if total_bytes <= 0 or free_bytes < DISK_MIN_FREE_FRACTION * total_bytes:
        return DiskBudget(free_bytes, workers, 0,
                          f"less than {DISK_MIN_FREE_FRACTION:.0%} of the filesystem is free")
    usable = int(free_bytes * DISK_USABLE_FRACTION)
    return DiskBudget(free_bytes, workers, usable // workers)


def gpu_kv_capacity_tokens(gpu_memory_gib: float, gpu_memory_utilization: float, tp: int,
                           weight_bytes: int, gpu_bytes_per_token: int,
                           replication: int) -> int:
    """Tokens of KV one model copy's GPUs hold after weights and runtime overhead."""
    per_gpu = gpu_memory_gib * GIB * gpu_memory_utilization
    free = tp * per_gpu - weight_bytes - tp * GPU_RUNTIME_OVERHEAD_GIB * GIB
    if free <= 0 or gpu_bytes_per_token <= 0:
        return 0
    return int(free / (gpu_bytes_per_token * replication))


def prefill_flops(active_params: int, layers: int, attention_dim: int, new_tokens: int,
                  context_tokens: int) -> float:
    """FLOPs to prefill ``new_tokens`` appended to ``context_tokens`` already cached.

    Linear layers: 2 * active params per token. Attention (causal): Q.K^T and A.V cost
    2 * 2 * attention_dim per (query, key) pair per layer; each new token i attends to
    context + i keys.
    """
    linear = 2.0 * active_params * new_tokens
    pairs = new_tokens * context_tokens + new_tokens * (new_tokens + 1) / 2
    attention = 4.0 * layers * attention_dim * pairs
    return linear + attention


def prefill_seconds(flops: float, tflops_per_gpu: float, tp: int) -> float:
    return flops / (tflops_per_gpu * 1e12 * tp * PREFILL_MFU)


def transfer_seconds(num_bytes: float, gbps: float) -> float:
    return num_bytes / (gbps * 1e9) if gbps > 0 else float("inf")


def chunk_aligned(tokens: int, chunk: int) -> int:
    """LMCache stores and matches whole chunks only."""
    return (tokens // chunk) * chunk


# --- container start-up: the same arithmetic on the facts of the host it landed on ----------
CGROUP_UNLIMITED = 2**60  # cgroup v1 reports "no limit" as a huge page-aligned number


@dataclass(frozen=True)
class ContainerBudget:
    """LMCache CPU memory for one container (one model copy) at start-up.

    ``bound`` names the fact that set the size: "cgroup limit", "available memory" or
    "host memory" (the planner's split of the whole host across copies).
    """

    per_worker_bytes: int
    workers: int
    bound: str

    @property
    def per_worker_gib(self) -> float:
        return self.per_worker_bytes / GIB


def container_cache_budget(mem_total: int, mem_available: int, cgroup_limit: int | None,
                           cgroup_usage: int, weight_bytes: int, copies: int,
                           tp: int) -> ContainerBudget:
    """Host RAM one container's LMCache workers may pin, never more than it can get.

    Three ceilings, smallest wins:

    - host memory: :func:`host_cache_budget` on the whole host split across ``copies``
      (what the planner assumed);
    - cgroup limit (an inference component runs under one): :func:`host_cache_budget` on
      the room left under the limit, for this copy's ``tp`` workers only, so cache +
      reserves never exceed the limit;
    - available memory now (other copies may already hold theirs): what is available minus
      this copy's weight-loading and worker reserves.

    >>> b = container_cache_budget(mem_total=1152 * GIB, mem_available=1100 * GIB,
    ...                            cgroup_limit=200 * GIB, cgroup_usage=0,
    ...                            weight_bytes=15 * 10**9, copies=4, tp=1)
    >>> b.bound, round(b.per_worker_gib)
    ('cgroup limit', 156)
    """
    workers = tp
    ceilings = [(host_cache_budget(mem_total, weight_bytes, copies, tp).per_worker_bytes,
                 "host memory")]
    if cgroup_limit is not None and cgroup_limit < CGROUP_UNLIMITED:
        room = max(0, cgroup_limit - cgroup_usage)
        ceilings.append((host_cache_budget(room, weight_bytes, 1, tp).per_worker_bytes,
                         "cgroup limit"))
    own_reserve = int(WEIGHT_LOAD_FACTOR * weight_bytes) + int(WORKER_HOST_OVERHEAD_GIB * GIB) \
        * tp
    ceilings.append((max(0, (mem_available - own_reserve) // tp), "available memory"))
    per_worker, bound = min(ceilings, key=lambda c: c[0])
    return ContainerBudget(per_worker, workers, bound)


def floor_gb_tenth(num_bytes: int) -> float:
    """A size in LMCache GB (GiB), rounded down to a tenth (as the planner writes them)."""
    return math.floor(num_bytes / GIB * 10) / 10


def default_max_model_len(model_limit: int, gpu_tokens: int) -> int:
    """The ``max_model_len`` a plan renders when the spec sets none: the model's own limit,
    capped at ``MAX_MODEL_LEN_POOL_SHARE`` of the estimated KV pool so that vLLM's start-up
    check (one sequence of ``max_model_len`` must fit the pool it measures) passes when the
    pool comes out a few percent smaller than estimated.

    >>> default_max_model_len(131072, 31072)
    27964
    >>> default_max_model_len(32768, 500000)
    32768
    """
    return min(model_limit, int(gpu_tokens * MAX_MODEL_LEN_POOL_SHARE))
