"""llm-d's tiered prefix-cache benchmark (LMCache CPU offload), rebuilt from its guide.

The guide ``guides/tiered-prefix-cache/cpu`` of llm-d/llm-d published, in its appendix
"Benchmark" (December 2025; kept verbatim in llm-d/llm-d.github.io at cd3430cd,
``docs-archive-pre-v0.7/guide/Installation/tiered-prefix-cache/cpu.md``), the setup and two
tables: baseline vLLM against vLLM + LMCache with 100 GB of CPU memory, for a working set
larger than the GPUs' KV pools ("high cache") and one that fits ("low cache"):

- Qwen3-32B on 16 H100 80 GB (4 ``a3-highgpu-4g``): 8 vLLM engines of TP 2,
  ``gpu_memory_utilization`` 0.65, which the guide reports as 9,271 blocks per engine
  (148,336 tokens at vLLM's 16-token blocks); LMCache ``LMCACHE_MAX_LOCAL_CPU_SIZE`` 100
  (per worker, as LMCache sizes it: 819,200 tokens per engine);
- inference-perf ``shared_prefix``: 45 groups x 10 prompts, a 30,000-token (high) or
  8,000-token (low) system prompt + a 256-token question, 1,024 output tokens, at a
  constant concurrency of 45;
- routing by the guide's endpoint picker: queue 2, KV-cache utilization 2, and two
  estimate-mode prefix-cache scorers (GPU, CPU) of weight 1 each.

What inference-perf did (kubernetes-sigs/inference-perf at a85b31b, 2025-11-26, the tree
the ``concurrent`` load type had when the guide was benchmarked): ``main.py`` turns a
concurrent stage into ``num_requests`` requests queued at once; workers send them as
semaphore permits free (``loadgen/load_generator.py``), request ``n`` sending prompt
``n % 450`` of the prompts ``datagen/shared_prefix_datagen.py`` generated and shuffled
once, each segment random ids decoded to text, which vLLM re-encodes into 1.052 tokens per
id (``llmd.RETOKENIZE``; exact-length text came with inference-perf #383 in 2026);
"overall throughput" is input + output tokens of successful requests over (last end - first
start), the input counted on the prompt's text with the model's tokenizer, and TTFT runs
from the send to the first streamed token (``reportgen/base.py``, ``summarize_requests``).

Assumed, the same for every row, because the guide does not say:

- ``num_requests`` 2,700: the configuration inference-perf's maintainers tested the
  concurrent loader with on this workload shape (pull request #320, 45 x 30,000 + 256,
  1,024 out, concurrency 45, Qwen3-32B; it had 2 prompts per group, the guide 10).
- 45 in flight, as published. The loader of that time gave each of its workers
  ``45 // workers + 1`` permits (fixed in #320), so the run may have held a few more;
  Little's law on the published figures (throughput / tokens per request x mean
  end-to-end latency, with the prompts' re-encoded token counts) gives 44.0-44.3 in flight
  in the four runs rebuilt here, a little under 45 as a run's last requests drain with
  fewer in flight, which ``test_llmd_offload.py`` checks.
- The same picker for every row (the tables change only the model server). With every
  system prompt far longer than the 256 hashed blocks of 64 characters, both estimate-mode
  scorers see a group's blocks on the engine they last sent it to and nowhere else, so
  the two act as one approximate prefix scorer of weight 2 (4 characters per token, as in
  ``llmd.py``).
- The GPU pool is the guide's 148,336 tokens per engine; lmikit's planner gives 161,616 at
  0.65 (9.0% more), and a working set of about 5.6 groups x 30,256 tokens per engine sits
  between the two, so the published figure is used. The run predates vLLM 0.19.0, so its
  servers admit a request once its next chunk fits. vLLM runs at its H100 defaults
  (``max_num_seqs`` 1024, the guide's manifest too; 8,192 batched tokens) with LMCache's
  256-token chunks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import partial

from lmikit.sim._loop import CopyConfig, RunResult, run
from lmikit.sim._routers import Epp
from lmikit.sim._scenario import Deployment, deployment, percentile
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import variant
from tests.unit.sim.llmd import (
    APPROX_CHARS,
    APPROX_LRU_BLOCKS,
    APPROX_MAX_BLOCKS,
    QWEN3_32B,
    REFRESH_S,
    reencoded,
)
from tests.unit.sim.rows import Row

CHUNK = 256  # LMCache's chunk size
GROUPS, PER_GROUP, QUESTION, OUTPUT = 45, 10, 256, 1_024
CONCURRENCY = 45
REQUESTS = 2_700  # assumed: inference-perf pull request #320's num_requests
GUIDE_POOL_TOKENS = 9_271 * 16  # the guide's GPU blocks per engine x vLLM's block size
CPU_GB = 100.0  # LMCACHE_MAX_LOCAL_CPU_SIZE, per worker
CHARS_PER_TOKEN = 4
SYSTEM = {"high": 30_000, "low": 8_000}


def sent(ids: int) -> int:
    """Tokens vLLM sees for a segment of ``ids`` random ids decoded to text."""
    return reencoded(ids, "Qwen/Qwen3-32B")


def workload(system: int, seed: int = 0) -> Workload:
    """2,700 requests cycling through 450 shuffled prompts, 45 in flight."""
    return shared_prefix_concurrent(GROUPS, PER_GROUP, sent(system), sent(QUESTION), OUTPUT,
                                    REQUESTS, CONCURRENCY, seed)


def shared_prefix_concurrent(groups: int, per_group: int, system: int, question: int,
                             output: int, requests: int, concurrency: int,
                             seed: int = 0) -> Workload:
    """inference-perf's ``shared_prefix`` data under a ``concurrent`` stage: ``requests``
    cycling through the ``groups x per_group`` prompts shuffled once, ``concurrency`` in
    flight; ``system`` and ``question`` are the tokens vLLM sees of each segment."""
    rng = random.Random(seed)
    prompts = [(g, u) for g in range(groups) for u in range(per_group)]
    rng.shuffle(prompts)
    keys = [chunk_keys([(1_000 + g, system), (1_000_000 + g * per_group + u, question)], CHUNK)
            for g, u in prompts]
    sessions = []
    for n in range(requests):
        g, u = prompts[n % len(prompts)]
        sessions.append([Request(n, keys[n % len(prompts)], system + question, output,
                                 session=g * per_group + u)])
    return Workload("inference-perf shared_prefix, concurrent",
                    [Phase("concurrent", sessions, concurrency)], CHUNK)


def router() -> Epp:
    """The guide's picker: queue 2, KV usage 2, GPU + CPU estimate-mode prefix scorers 1 + 1."""
    hashed = APPROX_CHARS * APPROX_MAX_BLOCKS // CHARS_PER_TOKEN // CHUNK
    capacity = APPROX_LRU_BLOCKS * APPROX_CHARS // CHARS_PER_TOKEN // CHUNK
    return Epp(random.Random(1), prefix_weight=2.0, kv_weight=2.0, queue_weight=2.0,
               approximate=(capacity, hashed), refresh_s=REFRESH_S)


def planned() -> Deployment:
    """The guide's engines as lmikit plans them (pool per engine from the planner)."""
    return deployment("Qwen/Qwen3-32B", "ml.p5.48xlarge", tp=2, copies=4, instances=8,
                      chunk_size=CHUNK, max_batch_size=1024, gpu_memory_utilization=0.65,
                      cpu_size_gb=CPU_GB, config_path=QWEN3_32B)


def copies(lmcache: bool) -> list[CopyConfig]:
    return [replace(c, gpu_tokens=GUIDE_POOL_TOKENS, reserve_full_prompt=False)
            for c in variant.apply(planned().copies("cpu" if lmcache else "off"))]


@dataclass(frozen=True)
class Stats:
    """inference-perf's ``summarize_requests`` figures over a run (every request succeeds)."""

    ttft_mean_s: float
    ttft_p90_s: float
    throughput_tokens_s: float
    e2e_mean_s: float = 0.0
    e2e_p90_s: float = 0.0
    input_tokens_s: float = 0.0
    output_tokens_s: float = 0.0


def stats(out: RunResult, reqs: list[Request]) -> Stats:
    ttfts = sorted(out.ttft[r.id] - out.arrival[r.id] for r in reqs)
    e2es = sorted(out.end[r.id] - out.arrival[r.id] for r in reqs)
    span = max(out.end[r.id] for r in reqs) - min(out.arrival[r.id] for r in reqs)
    prompt = sum(r.prompt_tokens for r in reqs)
    output = sum(r.output_tokens for r in reqs)
    return Stats(sum(ttfts) / len(ttfts), percentile(ttfts, 0.9), (prompt + output) / span,
                 sum(e2es) / len(e2es), percentile(e2es, 0.9), prompt / span, output / span)


@variant.cached
def result(scenario: str, lmcache: bool) -> Stats:
    """Mean and p90 TTFT and overall throughput of one published run."""
    work = workload(SYSTEM[scenario])
    return stats(run(work, copies(lmcache), router()), work.requests)


SOURCE = ("llm-d guide 'Offloading Prefix Cache to CPU Memory', appendix Benchmark (llm-d/llm-d "
          "guides/tiered-prefix-cache/cpu/README.md, December 2025, archived in "
          "llm-d/llm-d.github.io cd3430cd docs-archive-pre-v0.7/guide/Installation/"
          "tiered-prefix-cache/cpu.md; high-cache table also in blog/2025-12-02_llm-d-v0.4): "
          "Qwen3-32B on 8 vLLM engines x TP 2 (16 H100), gpu_memory_utilization 0.65, LMCache "
          "CPU 100 GB, inference-perf shared_prefix 45 groups x 10 prompts, 30,000 (high) / "
          "8,000 (low) + 256 tokens, 1,024 output, concurrency 45")

# (scenario, LMCache on, label, published mean TTFT s, p90 TTFT s, overall throughput tok/s)
PUBLISHED = (
    ("high", False, "baseline", 9.0, 20.9, 38534.8),
    ("high", True, "LMCache CPU", 6.5, 18.8, 46910.6),
    ("low", False, "baseline", 0.12, 0.09, 23389.6),
    ("low", True, "LMCache CPU", 0.15, 0.10, 22772.5),
)
def _metric(scenario: str, lmcache: bool, metric: str) -> float:
    return float(getattr(result(scenario, lmcache), metric))


def _ratio(scenario: str, metric: str) -> float:
    return _metric(scenario, True, metric) / _metric(scenario, False, metric)


def rows() -> list[Row]:
    """Both scenarios' arms and the LMCache effect on the high-cache run: one sweep (two
    system-prompt lengths), one setup.

    The baseline routes by an approximate prefix scorer over GPU caches (cache-aware
    routing); its high-cache TTFTs are misses (each engine's share of the working set, about
    5.6 prompts of 31,829 tokens, exceeds its pool of 148,336), its low-cache ones hits."""
    out = []
    for scenario, lmcache, label, mean, p90, tps in PUBLISHED:
        category = "lmcache_offload" if lmcache else "cache_aware_routing"
        ttft = "ttft_hit" if lmcache or scenario == "low" else "ttft_miss"
        arm = "cpu" if lmcache else "off"
        for metric, value, unit in (("ttft_mean_s", mean, "s"), ("ttft_p90_s", p90, "s"),
                                    ("throughput_tokens_s", tps, "tok/s")):
            name = {"ttft_mean_s": "ttft mean", "ttft_p90_s": "ttft p90",
                    "throughput_tokens_s": "throughput"}[metric]
            out.append(Row(f"llm-d offload {scenario} cache, {label}: {name}", SOURCE, value,
                           unit, partial(_metric, scenario, lmcache, metric),
                           "throughput" if unit == "tok/s" else ttft, category,
                           PUBLICATION, "llmd-offload", f"offload/{scenario}/{arm}"))
    for metric, name, value, quantity in (
            ("ttft_mean_s", "mean TTFT", 6.5 / 9.0, "ttft_hit"),
            ("throughput_tokens_s", "throughput", 46910.6 / 38534.8, "throughput")):
        out.append(Row(f"llm-d offload high cache: {name}, LMCache / baseline", SOURCE, value,
                       "x", partial(_ratio, "high", metric), quantity, "lmcache_offload",
                       PUBLICATION, "llmd-offload", "offload/high/cpu+off"))
    out.append(Row("llm-d offload Qwen3-32B TP 2 at memory share 0.65: KV pool per engine "
                   "(planner)", SOURCE, GUIDE_POOL_TOKENS, "tokens",
                   lambda: float(planned().gpu_tokens), "kv_pool", "cache_aware_routing",
                   PUBLICATION, "llmd-offload", "planner"))
    return out


PUBLICATION = "llmd-offload-guide-2025"
