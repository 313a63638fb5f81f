"""llm-d's shared-storage guide: LMCache CPU + a Lustre disk tier at concurrency 20, rebuilt.

The guide ``guides/tiered-prefix-cache/storage/README.md`` of llm-d/llm-d (stored at
105e3bc3), section "Benchmarking", "LMCache connector", publishes two tables: vLLM + LMCache
with a CPU tier only ("Baseline vLLM + CPU offloading") against the same with a disk tier on
a GCP Managed Lustre volume ("vLLM + CPU offloading + Lustre"), for 50,000- and
70,000-token system prompts. Its setup, as the guide states it:

- Llama-3.3-70B-Instruct on 16 H100 80GB in 4 ``a3-highgpu-4g`` (4 engines of TP 4),
  ``gpu_memory_utilization`` 0.65, "10768 GPU blocks available per engine" (16-token
  blocks: 172,288 tokens);
- LMCache ``LMCACHE_MAX_LOCAL_CPU_SIZE`` 20 GB per GPU, ``LMCACHE_MAX_LOCAL_DISK_SIZE``
  1120 Gi per GPU on an 18,000 GiB Lustre PVC ("Lustre PVC as local backend disk"; the
  connector's kustomization sets ``use_odirect``);
- inference-perf ``concurrent``, 2,700 requests at a concurrency of 20, ``shared_prefix`` 50
  groups x 50 prompts, a 50,000- or 70,000-token system prompt + a 256-token question, 1,024
  output tokens;
- the inference pool "following the CPU offloading inferencepool guide": the same picker as
  ``llmd_offload.py`` (queue 2, KV usage 2, GPU and CPU estimate-mode prefix scorers 1 + 1).

Assumed, the same for every row:

- the Lustre read rate: the guide's StorageClass (``manifests/backends/lustre/
  storage_class.yaml``) asks for ``perUnitStorageThroughput: "1000"``, Managed Lustre's
  1,000 MBps-per-TiB tier (cloud.google.com managed-lustre "Create an instance"), so 18,000
  GiB give 17.6 GB/s in all, here split evenly over the 4 engines (4.39 GB/s each);
- the prompts are random ids decoded to text that vLLM re-encodes (1.043 tokens per id with
  Llama 3's BPE, ``llmd.RETOKENIZE``), as inference-perf generated them before 2026-05; the
  guide's own cache sizes agree (994 GiB and 1.3 TiB of KV: 999 GiB and 1.29 TiB re-encoded,
  958 GiB and 1.23 TiB not);
- Llama-3.1-70B's geometry for Llama-3.3-70B (as ``gke.py``), ``ml.p5.48xlarge`` for the
  a3-highgpu nodes (the same H100 80GB), LMCache's 256-token chunks, vLLM's H100 defaults,
  a vLLM before 0.19.0 (admits a request once its next chunk fits), LMCache writing a disk
  hit back to its CPU tier (0.3.15 on).
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from functools import partial

from lmikit.sim._loop import CopyConfig, run
from lmikit.sim._scenario import deployment
from tests.unit.sim import llmd_offload, variant
from tests.unit.sim.llmd import reencoded
from tests.unit.sim.rows import Row

SOURCE = ("llm-d guide 'Offloading Prefix Cache to Shared Storage' (llm-d/llm-d "
          "guides/tiered-prefix-cache/storage/README.md at 105e3bc3), Benchmarking, LMCache "
          "connector: Llama-3.3-70B-Instruct on 4 vLLM engines x TP 4 (16 H100), "
          "gpu_memory_utilization 0.65 (10,768 blocks per engine), LMCache CPU 20 GB and Lustre "
          "disk 1,120 Gi per GPU, inference-perf concurrent 2,700 requests at 20, shared_prefix "
          "50 groups x 50 prompts, {system:,} + 256 tokens, 1,024 output")
MODEL = "meta-llama/Llama-3.1-70B-Instruct"  # Llama-3.3-70B's geometry
GROUPS, PER_GROUP, QUESTION, OUTPUT = 50, 50, 256, 1_024
REQUESTS, CONCURRENCY = 2_700, 20
ENGINES, TP = 4, 4
POOL_TOKENS = 10_768 * 16  # the guide's GPU blocks per engine x vLLM's block size
CPU_GB, DISK_GB = 20.0, 1_120.0  # per GPU (LMCache worker)
LUSTRE_GBPS = 18_000 / 1024 * 1.0  # 18,000 GiB = 17.6 TiB at 1.0 GB/s per TiB, all engines
# (published: mean TTFT s, p90 TTFT s, mean E2E s, p90 E2E s, input, output, overall tok/s)
PUBLISHED = {
    (50_000, False): (25.38, 37.74, 56.21, 69.69, 18_607, 354, 18_962),
    (50_000, True): (20.12, 34.02, 45.83, 58.73, 22_827, 435, 23_262),
    (70_000, False): (58.02, 74.75, 87.99, 105.46, 16_598, 226.65, 16_825),
    (70_000, True): (45.0, 64.79, 68.28, 87.47, 21_364, 291, 21_656),
}
METRICS = (("ttft_mean_s", "mean TTFT", "s", "ttft"), ("ttft_p90_s", "p90 TTFT", "s", "ttft"),
           ("e2e_mean_s", "mean E2E latency", "s", "total_time"),
           ("e2e_p90_s", "p90 E2E latency", "s", "total_time"),
           ("input_tokens_s", "input throughput", "tok/s", "throughput"),
           ("output_tokens_s", "output throughput", "tok/s", "throughput"),
           ("throughput_tokens_s", "overall throughput", "tok/s", "throughput"))


def copies(lustre: bool) -> list[CopyConfig]:
    """The 4 engines on the guide's pool, LMCache CPU (and Lustre) per worker."""
    dep = deployment(MODEL, "ml.p5.48xlarge", tp=TP, copies=8 // TP, instances=ENGINES,
                     chunk_size=llmd_offload.CHUNK, max_batch_size=1024,
                     gpu_memory_utilization=0.65, cpu_size_gb=CPU_GB, disk_size_gb=DISK_GB,
                     reserve_full_prompt=False)
    out = []
    for c in variant.apply(dep.copies("cpu+disk" if lustre else "cpu")):
        engine = dataclasses.replace(c.engine, nvme_read_gbps=LUSTRE_GBPS / ENGINES)
        out.append(replace(c, engine=engine, gpu_tokens=POOL_TOKENS))
    return out


@variant.cached
def result(system: int, lustre: bool) -> llmd_offload.Stats:
    work = llmd_offload.shared_prefix_concurrent(
        GROUPS, PER_GROUP, reencoded(system, MODEL), reencoded(QUESTION, MODEL), OUTPUT,
        REQUESTS, CONCURRENCY)
    return llmd_offload.stats(run(work, copies(lustre), llmd_offload.router()), work.requests)


def _figure(system: int, lustre: bool, metric: str) -> float:
    return float(getattr(result(system, lustre), metric))


def rows() -> list[Row]:
    """Both arms of both prompt lengths: one sweep, one setup. Both arms have LMCache; the
    CPU-only arm's working set is about twice what its GPU and CPU tiers hold (its TTFTs
    count as misses), the Lustre arm holds it all (hits)."""
    out = []
    for (system, lustre), values in PUBLISHED.items():
        label = "CPU + Lustre" if lustre else "CPU only"
        for (metric, name, unit, kind), value in zip(METRICS, values, strict=True):
            quantity = ("ttft_hit" if lustre else "ttft_miss") if kind == "ttft" else kind
            out.append(Row(f"llm-d storage {system // 1000}K, LMCache {label}: {name}",
                           SOURCE.format(system=system), value, unit,
                           partial(_figure, system, lustre, metric), quantity,
                           "lmcache_offload", "llmd-storage-guide", "llmd-storage",
                           f"storage/{system // 1000}k/{'cpu+disk' if lustre else 'cpu'}"))
    return out
