"""GPUStack's LMCache evaluation on one RTX 4090: what LMCache costs a miss, rebuilt.

GPUStack's "Evaluating LMCache Prefill Acceleration in vLLM" (gpustack/gpustack
``docs/performance-lab/references/evaluating-lmcache-prefill-acceleration-in-vllm.md`` at
4650ef43) serves Qwen3-8B on one RTX 4090 24GB with vLLM v0.10.1.1, with and without LMCache
(``chunk_size`` 256, ``local_cpu``, ``max_local_cpu_size`` 50). Its "Cache Miss Scenarios"
run ``vllm bench serve --endpoint-type openai-chat --dataset-name random
--random-input-len {1024, 8192, 20480} --random-output-len 128 --num-prompts 100 --seed 40``
and publish output tokens/s, mean TTFT and mean TPOT per arm: the only published isolation of
LMCache's store on the miss path we found.

From vLLM 0.10.1.1's source (the PyPI sdist): ``benchmarks/datasets.py``, ``RandomDataset``:
``range_ratio`` 0, so every prompt has exactly the input length (random ids decoded,
re-encoded and cut to it), each unique, and ``max_tokens`` 128; ``vllm bench serve``
without ``--request-rate`` sends all 100 at once. The published totals agree: total over
output tokens/s is 8.99, 65.0 and 161.0, i.e. 100 x 128 outputs beside 100 x 1,024, 8,192
and 20,480 prompt tokens. ``engine/arg_utils.py``, ``_set_default_args_v1``: a GPU under 70
GiB runs the API server with ``max_num_batched_tokens`` 2,048 and ``max_num_seqs`` 256;
vLLM 0.10 admits a request once its next chunk fits (``reserve_full_prompt=False``).

The GPU is not in lmikit's catalog (no SageMaker instance has it); its figures come from
NVIDIA's Ada GPU architecture whitepaper (GeForce RTX 4090: 165.2 dense BF16 tensor TFLOPS
with FP32 accumulate, 1,008 GB/s of GDDR6X, PCIe Gen 4) and nvidia-smi's 24,564 MiB.
Assumed: a PCIe Gen4 x16 host at the catalog's pinned-copy figure for such links (25 GB/s),
the chat template's few tokens left out, lmikit's default coefficients.

Not rebuilt: the multi-turn tables (the generator configuration is printed once for two
variants, "5K" and "20K", without saying which), the "All VRAM KV Cache Hit" tables (how
their prompts were made to hit is not stated) and the remote-backend rows (a single
20K-token request's miss in 0.74-0.76 s would take 440 dense BF16 TFLOPS of prefill, above
the card's 165: the request or the hardware is not as stated).
"""

from __future__ import annotations

from functools import partial

from lmikit import sizing
from lmikit.catalog._models import get_model
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import EngineModel
from lmikit.sim._loop import CopyConfig, RunResult, run
from lmikit.sim._routers import LeastOutstanding
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import variant
from tests.unit.sim.rows import Row

SOURCE = ("GPUStack 'Evaluating LMCache Prefill Acceleration in vLLM' (gpustack/gpustack "
          "docs/performance-lab/references/evaluating-lmcache-prefill-acceleration-in-vllm.md "
          "at 4650ef43), Cache Miss Scenarios: Qwen3-8B on one RTX 4090 24GB, vLLM v0.10.1.1, "
          "LMCache local_cpu 50 GB, vllm bench serve random {length:,} in / 128 out, 100 prompts")
MODEL = "Qwen/Qwen3-8B"
RTX4090_TFLOPS = 165.2  # NVIDIA Ada whitepaper: dense BF16 tensor, FP32 accumulate
RTX4090_GBPS = 1008.0  # NVIDIA Ada whitepaper: GDDR6X bandwidth
RTX4090_GIB = 24_564 / 1024  # nvidia-smi: 24,564 MiB
PCIE4_GBPS = 25.0  # lmikit's catalog: pinned host->GPU copies over PCIe Gen4 x16
MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS = 2_048, 256  # vLLM 0.10.1.1 under 70 GiB
CHUNK = 256
LMCACHE_CPU_GB = 50.0
PROMPTS, OUTPUT = 100, 128
# input length -> (without, with LMCache): output tokens/s, mean TTFT ms, mean TPOT ms
PUBLISHED = {1_024: ((579.86, 8_886.36, 42.08), (561.44, 9_242.72, 43.47)),
             8_192: ((77.87, 80_610.70, 43.33), (66.77, 92_682.22, 42.27)),
             20_480: ((22.97, 277_456.13, 31.68), (21.77, 292_811.62, 32.80))}


def engine() -> EngineModel:
    geo = get_model(MODEL)
    return EngineModel(
        active_params=geo.active_params, layers=geo.num_layers,
        attention_dim=geo.attention_dim, tp=1, tflops_per_gpu=RTX4090_TFLOPS,
        hbm_gbps=RTX4090_GBPS, weight_bytes=geo.weight_bytes,
        kv_bytes_per_token=geo.kv_bytes_per_token(2), host_to_gpu_gbps=PCIE4_GBPS,
        nvme_read_gbps=0.0, coeff=Coefficients(prefill_chunk_tokens=MAX_NUM_BATCHED_TOKENS),
        hidden_size=geo.hidden_size)


def copy(lmcache: bool) -> CopyConfig:
    """The one server: the planner's pool at vLLM's default share (0.9)."""
    geo = get_model(MODEL)
    pool = sizing.gpu_kv_capacity_tokens(RTX4090_GIB, 0.9, 1, geo.weight_bytes,
                                         geo.kv_bytes_per_token(2), 1)
    cpu = int(LMCACHE_CPU_GB * sizing.GIB) // geo.kv_bytes_per_token(2) if lmcache else 0
    return variant.apply([CopyConfig(engine(), pool, CHUNK, MAX_NUM_SEQS, cpu_tokens=cpu,
                                     reserve_full_prompt=False)])[0]


def workload(length: int) -> Workload:
    """100 unique prompts of ``length`` tokens, all sent at once."""
    reqs = [Request(i, chunk_keys([(1_000 + i, length)], CHUNK), length, OUTPUT, session=i,
                    arrival_s=0.0) for i in range(PROMPTS)]
    return Workload("vllm bench serve random", [Phase("all", [[r] for r in reqs],
                                                      open_loop=True)], CHUNK)


@variant.cached
def result(length: int, lmcache: bool) -> tuple[float, float, float]:
    """(output tokens/s, mean TTFT ms, mean TPOT ms) as ``vllm bench serve`` reports them."""
    work = workload(length)
    out: RunResult = run(work, [copy(lmcache)], LeastOutstanding())
    reqs = work.requests
    span = max(out.end[r.id] for r in reqs) - min(out.arrival[r.id] for r in reqs)
    ttfts = [out.ttft[r.id] - out.arrival[r.id] for r in reqs]
    tpots = [(out.end[r.id] - out.ttft[r.id]) / (r.output_tokens - 1) for r in reqs]
    return (sum(r.output_tokens for r in reqs) / span, 1000 * sum(ttfts) / len(ttfts),
            1000 * sum(tpots) / len(tpots))


def _figure(length: int, lmcache: bool, index: int) -> float:
    return result(length, lmcache)[index]


def _ttft_ratio(length: int) -> float:
    return result(length, True)[1] / result(length, False)[1]


def rows() -> list[Row]:
    """Both arms at each length (one sweep, one setup), every TTFT a miss; with LMCache's
    published TTFT change as a ratio of its own."""
    out = []
    for length, arms in PUBLISHED.items():
        source = SOURCE.format(length=length)
        for lmcache, values in zip((False, True), arms, strict=True):
            label = "LMCache CPU" if lmcache else "vLLM"
            category = "lmcache_offload" if lmcache else "cache_blind"
            replay = f"gpustack/{length}/{'cpu' if lmcache else 'off'}"
            for index, (name, unit, quantity) in enumerate((
                    ("output tokens/s", "tok/s", "throughput"), ("mean TTFT", "ms", "ttft_miss"),
                    ("mean TPOT", "ms", "itl"))):
                out.append(Row(f"GPUStack RTX 4090 random {length // 1024}K, {label}: {name}",
                               source, values[index], unit, partial(_figure, length, lmcache,
                                                                    index),
                               quantity, category, "gpustack-lmcache", "gpustack-random",
                               replay))
        out.append(Row(f"GPUStack RTX 4090 random {length // 1024}K: mean TTFT, LMCache / vLLM",
                       source, round(arms[1][1] / arms[0][1], 4), "x",
                       partial(_ttft_ratio, length), "ttft_miss", "lmcache_offload",
                       "gpustack-lmcache", "gpustack-random", f"gpustack/{length}/cpu+off"))
    return out
