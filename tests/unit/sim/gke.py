"""LMCache's GKE tiered-storage benchmark, rebuilt from its published setup.

Source: the LMCache blog "LMCache on Google Kubernetes Engine: Boosting LLM Inference
Performance with KV Cache on Tiered Storage" (2025-10-07; LMCache/lmcache.github.io
``_posts/2025-10-07-LMCache-on-GKE.md``). One vLLM server, Llama-3.3-70B-Instruct at TP 8 on
an A3 mega node (8 x H100 80GB), LMCache v0.3.3, three cache configurations (HBM only, HBM +
CPU RAM, HBM + CPU RAM + local SSD; 640 Gi, 1 Ti and 5 Ti), driven by SGLang's
``bench_serving`` with ``--dataset-name generated-shared-prefix --gsp-prompts-per-group 20
--gsp-question-len 256 --gsp-output-len 512 --request-rate 800 --max-concurrency 200`` and
``--backend vllm``. Tests 2 and 3 publish, per system prompt length, the best storage setup
and its change against HBM only in mean TTFT, input throughput and mean end-to-end latency.

The server configuration is the one the blog links as "the same setup": vLLM production-stack
``tutorials/assets/gke-example/values-01-offload-kv-cache-local-disk.yaml`` (commit 5ba8813):
``tensorParallelSize: 8``, ``gpuMemoryUtilization: "0.9"``, prefix caching and chunked
prefill on, LMCache ``cpuOffloadingBufferSize: "128"`` and ``diskOffloadingBufferSize: "640"``
GB per worker (8 workers: the blog's 1 Ti and 5 Ti), and ``--max_num_batched_tokens 2048``,
vLLM's per-step token budget, which the simulator takes as ``prefill_chunk_tokens`` (a server
setting of the published setup, like ``max_num_seqs``; every fitted coefficient keeps its
default).

What the load generator does (sglang v0.5.2, the PyPI wheel built 2025-09-11, file
``python/sglang/bench_serving.py``):

- ``sample_generated_shared_prefix_requests``: ``num_groups`` random system prompts of
  ``system_prompt_len`` tokens, ``num_groups x prompts_per_group`` random questions of
  ``question_len`` tokens, each prompt ``system + "\\n\\n" + question``; the list is shuffled
  once (``random.shuffle``) and sent in that order. ``gen_prompt`` draws that many ids from
  the vocabulary and decodes them to text, which vLLM re-encodes into more tokens: 1.043 per
  id with Llama 3's BPE (``llmd.RETOKENIZE``; the 256 special tokens among the 128,256 ids
  drawn come back one each), so each segment is sent at that many, and the benchmark counts
  the prompt re-encoded too (``prompt_len = len(tokenizer.encode(full_prompt))``).
  ``--num-prompts`` does not apply to this dataset: every prompt is sent once.
- ``benchmark``: one warm-up request (the first prompt, at most 32 output tokens), then
  ``get_request`` yields the prompts with exponential gaps of mean 1 / ``request_rate`` (a
  Poisson process; at 800 requests/s the 200th is sent after ~0.25 s) and each becomes a task
  behind ``asyncio.Semaphore(max_concurrency)``. The request function starts its clock after
  the semaphore is acquired, so from ~0.25 s on this is a closed loop of 200 requests in
  flight, FIFO in the shuffled order, and neither TTFT nor latency counts the wait for the
  semaphore.
- ``async_request_openai_completions`` (``--backend vllm``): ``ignore_eos`` is on, so every
  request generates 512 tokens; TTFT is the first streamed token, latency the last chunk.
- ``calculate_metrics``: mean TTFT and mean E2E latency over the requests; input throughput
  is the prompt tokens of every request over the benchmark's duration (first send to last
  reply), so its ratio between two setups is the inverse ratio of their durations.

Assumed (the blog does not say; the same for every row):

- The group count per row, from the stated total cache: a group holds its system prompt once
  and 20 questions and answers, ``G x (S + 20 x (256 + 512))`` tokens. The published example
  (``--gsp-num-groups 80`` at 1,000 tokens) gives 1,308,800 tokens, the top of Test 1's
  "1.1M - 1.3M"; counting prompts only (489,600) or every request's whole prompt (2.0M)
  misses that range. Each row takes the midpoint of its test's range (4.15M, 13.15M), so
  ``G = round(midpoint / (S + 15,360))``.
- A prompt is the system prompt plus the question (BOS and the separator ignored); the
  shuffle is a seeded uniform permutation, not sglang's exact one.
- Each setup runs on a fresh server (nothing cached from an earlier run but the warm-up).
- lmikit's catalog has no Llama-3.3-70B-Instruct; Llama-3.1-70B-Instruct stands in, taken
  to have the same geometry (80 layers, hidden 8,192, 8 KV heads, 28,672 intermediate,
  128,256 vocabulary; Llama 3.3's gated ``config.json`` was not read here).
  It has no A3 mega either; ``ml.p5.48xlarge`` has the same eight H100 80GB. vLLM's
  ``max_num_seqs`` is its H100 default of 1,024 (above the 200 in flight), and its vLLM
  (LMCache v0.3.3's, 2025) predates 0.19.0, so it admits a request once its next chunk fits
  (``reserve_full_prompt=False``); LMCache's default
  256-token chunks are also the GPU prefix cache's granularity here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import cache, partial

from lmikit.sim._coefficients import Coefficients
from lmikit.sim._loop import RunResult, run
from lmikit.sim._routers import StickySession
from lmikit.sim._scenario import Deployment, deployment
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import variant
from tests.unit.sim.llmd import reencoded
from tests.unit.sim.rows import Row

SOURCE = ("LMCache blog 'LMCache on Google Kubernetes Engine' (2025-10-07; "
          "LMCache/lmcache.github.io _posts/2025-10-07-LMCache-on-GKE.md at efe14eb): "
          "Llama-3.3-70B-Instruct TP 8 on 8 x H100, LMCache v0.3.3, SGLang bench_serving "
          "generated-shared-prefix 20 prompts per group, 256-token question, 512 output, "
          "800 req/s capped at 200 concurrent; {test}")
PER_GROUP, QUESTION, OUTPUT = 20, 256, 512
CONCURRENCY = 200
WARMUP_OUTPUT = 32
CHUNK = 256
MAX_NUM_SEQS = 1024
MAX_NUM_BATCHED_TOKENS = 2048  # values-01-offload-kv-cache-local-disk.yaml
CPU_GB_PER_WORKER, DISK_GB_PER_WORKER = 128.0, 640.0
TOTAL_CACHE = {"Test 2": (4.0e6, 4.3e6), "Test 3": (12.6e6, 13.7e6)}
MODES = {"HBM + CPU RAM": "cpu", "HBM + CPU RAM + Local SSD": "cpu+disk"}


def group_tokens(system: int) -> int:
    """Tokens one group leaves in the cache: its system prompt once, 20 questions and answers."""
    return system + PER_GROUP * (QUESTION + OUTPUT)


def groups(test: str, system: int) -> int:
    """``--gsp-num-groups`` for a row: the test's midpoint total cache over one group's tokens."""
    low, high = TOTAL_CACHE[test]
    return round((low + high) / 2 / group_tokens(system))


def workload(n_groups: int, system: int, seed: int = 0) -> Workload:
    rng = random.Random(seed)
    prompts = [(g, u) for g in range(n_groups) for u in range(PER_GROUP)]
    rng.shuffle(prompts)
    # Llama 3.3's tokenizer is Llama 3.1's
    system, question = (reencoded(n, "meta-llama/Llama-3.1-70B-Instruct")
                        for n in (system, QUESTION))
    reqs = []
    for rid, (g, u) in enumerate(prompts, start=1):
        keys = chunk_keys([(1_000 + g, system),
                           (10_000_000 + g * PER_GROUP + u, question)], CHUNK)
        reqs.append(Request(rid, keys, system + question, OUTPUT, session=rid))
    first = reqs[0]
    warmup = Request(0, first.keys, first.prompt_tokens, WARMUP_OUTPUT, session=0)
    return Workload("sglang generated-shared-prefix", [
        Phase("warm-up", [[warmup]], 1, measured=False),
        Phase("benchmark", [[r] for r in reqs], CONCURRENCY)], CHUNK)


@cache
def _deployment() -> Deployment:
    return deployment("meta-llama/Llama-3.1-70B-Instruct", "ml.p5.48xlarge", tp=8,
                      chunk_size=CHUNK, max_batch_size=MAX_NUM_SEQS,
                      cpu_size_gb=CPU_GB_PER_WORKER, disk_size_gb=DISK_GB_PER_WORKER,
                      coefficients=Coefficients(prefill_chunk_tokens=MAX_NUM_BATCHED_TOKENS),
                      reserve_full_prompt=False)


@dataclass(frozen=True)
class Stats:
    ttft_mean_s: float
    input_tokens_s: float
    e2e_mean_s: float


def stats(out: RunResult, reqs: list[Request]) -> Stats:
    n = len(reqs)
    span = max(out.end[r.id] for r in reqs) - min(out.arrival[r.id] for r in reqs)
    return Stats(sum(out.ttft[r.id] - out.arrival[r.id] for r in reqs) / n,
                 sum(r.prompt_tokens for r in reqs) / span,
                 sum(out.end[r.id] - out.arrival[r.id] for r in reqs) / n)


@variant.cached
def result(test: str, system: int, mode: str) -> Stats:
    work = workload(groups(test, system), system)
    # LMCache v0.3.3 does not write a disk hit back to its CPU tier (StorageManager.batched_get)
    copies = [replace(c, write_back=False) for c in variant.apply(_deployment().copies(mode))]
    out = run(work, copies, StickySession())
    return stats(out, [s[0] for s in work.phases[1].sessions])


# (test, system prompt tokens, best setup, published change vs HBM only in %: mean TTFT,
# input throughput, mean E2E latency). Test 2's 1,000-token row is left out: its best setup
# is HBM only, so its ratios are 1 by definition.
PUBLISHED = (
    ("Test 2", 5_000, "HBM + CPU RAM", -18, 16, -14),
    ("Test 2", 10_000, "HBM + CPU RAM", -44, 50, -33),
    ("Test 2", 50_000, "HBM + CPU RAM + Local SSD", -68, 179, -64),
    ("Test 2", 100_000, "HBM + CPU RAM + Local SSD", -79, 264, -73),
    ("Test 3", 1_000, "HBM + CPU RAM", 5, 1, -1),
    ("Test 3", 5_000, "HBM + CPU RAM", -6, 27, -21),
    ("Test 3", 10_000, "HBM + CPU RAM + Local SSD", 121, 23, -19),
    ("Test 3", 50_000, "HBM + CPU RAM + Local SSD", 48, 69, -41),
    ("Test 3", 100_000, "HBM + CPU RAM + Local SSD", -3, 130, -57),
)
METRICS = (("mean TTFT", "ttft_mean_s"), ("input throughput", "input_tokens_s"),
           ("mean E2E latency", "e2e_mean_s"))


def ratio(test: str, system: int, mode: str, metric: str) -> float:
    """The best setup's figure over HBM only's, as simulated."""
    return float(getattr(result(test, system, mode), metric)
                 / getattr(result(test, system, "off"), metric))


QUANTITY = {"ttft_mean_s": "ttft_hit", "input_tokens_s": "throughput",
            "e2e_mean_s": "total_time"}


def rows() -> list[Row]:
    """Each published change as the best setup's figure over HBM only's: LMCache offload
    gains (a hit's TTFT, throughput, request latency); each test is one sweep, one setup."""
    out = []
    for test, system, setup, *changes in PUBLISHED:
        mode = MODES[setup]
        for (label, metric), change in zip(METRICS, changes, strict=True):
            out.append(Row(f"GKE {test} {system // 1000}k, {setup}: {label} / HBM only",
                           SOURCE.format(test=test), round(1 + change / 100, 2), "x",
                           partial(ratio, test, system, mode, metric), QUANTITY[metric],
                           "lmcache_offload", "lmcache-gke-blog-2025",
                           f"gke-{test.lower().replace(' ', '')}",
                           f"gke/{test}/{system}/{mode}+off"))
    return out
