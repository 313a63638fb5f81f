"""The llm-d precise-prefix-cache benchmarks, rebuilt from their published configurations.

Two runs, each with its workload profile and EndpointPickerConfig published beside the
results (llm-d-kv-cache-manager ``benchmarking/73-capacity/README.md`` and
``benchmarking/37-capacity/README.md``), driven by inference-perf. What inference-perf does
(kubernetes-sigs/inference-perf at 5b1da4d, the September 2025 tree):

- ``datagen/shared_prefix_datagen.py``: ``num_groups x num_prompts_per_group`` prompts, each
  a group's random system prompt + its own random question (random ids decoded to text,
  which vLLM re-encodes into more tokens: :data:`RETOKENIZE`), generated once and shuffled;
  request ``n`` of a stage sends prompt ``n % len(prompts)``, so every stage replays the same
  prompts (questions included) in the same order. ``max_tokens = output_len`` with
  ``ignore_eos`` (``config.py``): every request generates ``output_len`` tokens.
- ``loadgen/load_generator.py`` ``run_stage``: a stage of ``rate`` x ``duration`` requests
  starts one second after it is set up and waits until every one of its requests has
  finished before the next stage begins.
- ``loadgen/load_timer.py``: ``constant`` spaces a stage's requests by exponential gaps
  scaled to fill its duration; ``poisson`` draws a Poisson count per second and spaces them
  the same way within the second.
- TTFT is the first streamed line after the request is sent (``apis/completion.py``; the
  clock starts inside a new HTTP session per request, ``client/modelserver/openai_client.py``);
  output tokens/s is the output tokens of successful requests over (last end - first start)
  (``reportgen/base.py``, ``summarize_requests``). A request answered with an error status
  fails: TTFT, ITL and output tokens count successful requests only; the span counts all.

The gateway. Both runs reached their pods through an inference gateway, an Envoy that asks
the endpoint picker where to send each request over a gRPC ``ext_proc`` stream that stays
open for the whole request. Envoy fails any stream past its ``max_requests`` circuit breaker
on the picker's cluster, 1,024 when not set (:data:`ENVOY_MAX_REQUESTS`), with an HTTP 500
at once, so at most 1,024 requests are in flight and the rest of a burst fails (the
simulator's front door, ``lmikit.sim._loop`` rule 6, with its sources). Neither report names
its gateway, and the 73-capacity one prints no success rate, but its own figures show the
limit. From 40 QPS each stage sends 1,470-1,548 requests within 25-38 s, each of which runs
for a minute or more once it queues. The random and load arms' TTFT p90s then stay at
101-114 s from 40 to 60 QPS, where the same stages behind a Kubernetes Service, without a
gateway (``llmd_service.py``), measured 130-161 s and 126-139 s in two runs. And the random
arm's output rate (about 4,800 tokens/s) over the span each such stage takes on the
report's waiting-queue chart (about 200 s: its eight stages from 40 QPS take 26-27 minutes)
comes to about 1,000 requests' tokens, not 1,500, as do the estimated and precise arms'
(their per-pod plots give such a stage about 130 s at about 8,000 tokens/s and about 96 s
at about 10,300). Its stages of up to 760 requests, all in flight at once, show none of
this. The 37-capacity report, whose stages send at most 1,000
requests, prints a success rate of 100.00% for every arm and stage, and its replay fails
none (``test_llmd.py``). That the limit applied is read from the figures, so it is a choice
the accuracy fit makes (``variant.CHOICES["llmd_2025_gateway"]``: Envoy's 1,024 by default,
or no limit) and re-decides without these runs when it predicts them.

The "random" arm's figures are each the median over seven draws of the routing
(:data:`ROUTER_SEEDS`): one run is one draw, and the published run was one too.

Still assumed, because neither report says: the 4-characters-per-token ratio that turns
the approximate scorer's 64-byte blocks into tokens (it changes nothing here: any ratio
above 2.7 keeps the 256 hashed blocks inside the system prompt and each pod's LRU holding
over 120 groups, more than either run has; ``test_llmd.py`` checks it). The pool per pod is
the one each report sizes its workload by (73-capacity "KV/pod: 307,328", 37-capacity
"KV_cap (effective, min TP rank): 461,376 tokens"), a property of those servers as
published; lmikit's planner gives 324,636 and 488,721 (5.6% and 5.9% more), and the
accuracy table holds that as rows of its own (``published.py``). vLLM runs at its
defaults on H100 (``max_num_seqs`` 1024, ``max_num_batched_tokens`` 8192: vLLM
``engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``) with 64-token blocks (the
precise scorer's ``blockSize``, which must equal vLLM's block size for its hashes to match).
Both runs predate vLLM 0.19.0 (2026-04-03), the first with ``scheduler_reserve_full_isl``, so
their servers admit a request once its next chunk fits (``reserve_full_prompt=False``).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TypeVar

from lmikit.sim._loop import CopyConfig, RunResult, run
from lmikit.sim._routers import Epp, RandomRouter, Router
from lmikit.sim._scenario import Deployment, deployment, percentile
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import variant

QWEN3_32B = str(Path(__file__).parent / "data" / "qwen3-32b-config.json")
# Qwen3-32B at TP 2 on H100, memory share 0.9: the one published pool (73-capacity "KV/pod").
# The 2026 runs on the same model, TP, GPU and share publish none and replay on it too.
QWEN3_32B_TP2_POOL = 307_328
BLOCK = 64  # vLLM block size = the precise scorer's blockSize
CHARS_PER_TOKEN = 4  # assumed: the approximate scorer hashes characters, not tokens
T = TypeVar("T")


@dataclass(frozen=True)
class Setup:
    model: str
    tp: int
    pods: int
    groups: int
    per_group: int
    system: int
    question: int
    output: int
    stages: tuple[tuple[float, int], ...]  # (rate QPS, duration s)
    poisson: bool
    routers: dict[str, dict[str, float]]  # experiment -> scorer weights
    config_path: str | None = None
    reported_pool: int = 0  # KV tokens per pod, as the report gives them
    # whether the report's summary TTFTs count the warm-up stage's requests (see ``replay``)
    warmup_in_summary: bool = True
    # tokens vLLM sees per random token id the generator drew (:data:`RETOKENIZE`)
    tokens_per_id: float = 1.0
    # requests the gateway lets be in flight at once, the rest failing (0: no gateway)
    gateway_limit: int = 0


# Envoy's circuit-breaker default for a cluster's ``max_requests`` (envoy
# ``api/envoy/config/cluster/v3/circuit_breaker.proto``: "If not specified, the default is
# 1024"), which an inference gateway's stream to the endpoint picker is held to.
ENVOY_MAX_REQUESTS = 1_024


# Tokens vLLM sees per random id drawn. The September 2025 generator decoded each segment's
# random ids to text (``shared_prefix_datagen.py``, ``_generate_prompts``) and the server
# re-encodes that text, which comes to more tokens than ids (inference-perf composes
# exact-length text only from "Fix SharedPrefix Datagen Prompt Length", #383, 2026-05-01,
# in v0.5.0). Measured with each model's BPE ranks on 1,000-8,000-id segments
# (``benchmarks/tokenize_prompts.py``, column "per id"; Qwen's as in ``llmd_codegen.py``).
RETOKENIZE = {"Qwen/Qwen3-32B": 1.052, "meta-llama/Llama-3.1-70B-Instruct": 1.043}

# 73-capacity: load.type poisson; warm-up 15 QPS x 50 s, then the ladder.
X73 = Setup(
    "Qwen/Qwen3-32B", 2, 8, 150, 5, 6_000, 1_200, 1_000,
    ((15, 50), (3, 20), (10, 20), (15, 20), (20, 38), (22, 34), (25, 30), (30, 25),
     (35, 21), (40, 38), (43, 36), (46, 33), (49, 30), (52, 29), (55, 27), (57, 26),
     (60, 25)),
    True,
    {"precise": {"precise": 3.0, "kv": 2.0, "queue": 2.0},
     "estimated": {"approximate": 1.0, "kv": 1.0, "queue": 1.0},
     "load": {"kv": 1.0, "queue": 1.0},
     "random": {}},
    QWEN3_32B, QWEN3_32B_TP2_POOL, tokens_per_id=RETOKENIZE["Qwen/Qwen3-32B"],
    gateway_limit=ENVOY_MAX_REQUESTS)
# 37-capacity: load.type constant; warm-up 9 QPS x 30 s, then the ladder.
X37 = Setup(
    "meta-llama/Llama-3.1-70B-Instruct", 4, 4, 83, 3, 8_000, 1_000, 1_000,
    ((9, 30), (3, 210), (4, 180), (5, 120), (6, 120), (8, 90), (10, 70), (12, 60),
     (15, 50), (20, 50)),
    False,
    {"precise": {"precise": 2.0, "kv": 1.0, "queue": 1.0},
     "default": {"approximate": 2.0, "kv": 1.0, "queue": 1.0},
     "load": {"kv": 1.0, "queue": 1.0},
     "random": {}},
    None, 461_376, warmup_in_summary=False,
    tokens_per_id=RETOKENIZE["meta-llama/Llama-3.1-70B-Instruct"],
    gateway_limit=ENVOY_MAX_REQUESTS)

# The approximate ("estimate" mode) scorer both runs used: llm-d-inference-scheduler v0.2.1
# (pkg/plugins/scorer/prefix_cache.go) hands it to gateway-api-inference-extension v0.5.1's
# prefix plugin (pkg/epp/scheduling/framework/plugins/multi/prefix): the prompt's bytes in
# 64-byte blocks, at most 256 of them hashed (chained, seeded with the model name), each
# pod's blocks remembered in an LRU of 31,250 when the pod is picked (PostCycle), score =
# blocks matched from the start / blocks hashed. These are its defaults, which the
# 73-capacity config sets explicitly and the 37-capacity config leaves implicit.
APPROX_CHARS, APPROX_MAX_BLOCKS, APPROX_LRU_BLOCKS = 64, 256, 31_250
# Queue and KV-cache scorers read each pod's metrics as the picker last scraped them, every
# 50 ms (gateway-api-inference-extension v0.5.1 pkg/epp/server/runserver.go,
# DefaultRefreshMetricsInterval; backend/metrics/pod_metrics.go, one ticker per pod).
REFRESH_S = 0.05


def _offsets(rate: float, duration: int, poisson: bool, rng: random.Random) -> list[float]:
    """Send times within a stage, as inference-perf's timers draw them."""
    n = int(rate * duration)

    def spread(count: int, span: float, start: float) -> list[float]:
        gaps = [rng.expovariate(1.0) for _ in range(count)]
        scale = span / sum(gaps)
        out, t = [], start
        for g in gaps:
            t += g * scale
            out.append(t)
        return out

    if not poisson:
        return spread(n, float(duration), 0.0)
    times: list[float] = []
    second = 0.0
    while len(times) < n:
        count = _poisson(rate, rng)
        if count:
            times += spread(count, 1.0, second)
        second += 1.0
    return times[:n]


def _poisson(lam: float, rng: random.Random) -> int:
    count, total = 0, rng.expovariate(1.0)
    while total < lam:
        count += 1
        total += rng.expovariate(1.0)
    return count


def reencoded(ids: int, model: str) -> int:
    """Tokens vLLM sees for ``ids`` random ids decoded to text with ``model``'s tokenizer."""
    return round(ids * RETOKENIZE[model])


def prompt_segments(setup: Setup) -> tuple[int, int]:
    """Tokens vLLM sees of a prompt's system prompt and question."""
    return round(setup.system * setup.tokens_per_id), round(setup.question * setup.tokens_per_id)


def workload(setup: Setup, seed: int = 0) -> Workload:
    rng = random.Random(seed)
    prompts = [(g, u) for g in range(setup.groups) for u in range(setup.per_group)]
    rng.shuffle(prompts)
    system, question = prompt_segments(setup)
    keys = [chunk_keys([(1_000 + g, system),
                        (1_000_000 + g * setup.per_group + u, question)], BLOCK)
            for g, u in prompts]
    prompt_tokens = system + question
    phases, rid = [], 0
    for rate, duration in setup.stages:
        reqs = []
        for n, t in enumerate(_offsets(rate, duration, setup.poisson, rng)):
            g, u = prompts[n % len(prompts)]
            reqs.append(Request(rid, keys[n % len(prompts)], prompt_tokens, setup.output,
                                session=g * setup.per_group + u, arrival_s=1.0 + t))
            rid += 1
        phases.append(Phase(f"{rate:g} QPS", [[r] for r in reqs], open_loop=True))
    return Workload("inference-perf shared_prefix", phases, BLOCK)


def router(weights: dict[str, float], prompt_tokens: int,
           chars_per_token: int = CHARS_PER_TOKEN) -> Router:
    if not weights:
        return RandomRouter(random.Random(1))
    approx = None
    if "approximate" in weights:
        chars = min(prompt_tokens * chars_per_token, APPROX_CHARS * APPROX_MAX_BLOCKS)
        approx = (APPROX_LRU_BLOCKS * APPROX_CHARS // chars_per_token // BLOCK,
                  chars // chars_per_token // BLOCK)
    return Epp(random.Random(1),
               prefix_weight=weights.get("precise", weights.get("approximate", 0.0)),
               kv_weight=weights.get("kv", 0.0), queue_weight=weights.get("queue", 0.0),
               approximate=approx, refresh_s=REFRESH_S)


def planned(setup: Setup, reserve_full_prompt: bool = False) -> Deployment:
    """The setup's servers as lmikit plans them (pool per pod from the planner)."""
    return deployment(setup.model, "ml.p5.48xlarge", tp=setup.tp, copies=8 // setup.tp,
                      instances=setup.pods, chunk_size=BLOCK, max_batch_size=1024,
                      config_path=setup.config_path, reserve_full_prompt=reserve_full_prompt)


def copies(setup: Setup, reserve_full_prompt: bool = False,
           pool_tokens: int | None = None) -> list[CopyConfig]:
    """The setup's servers under the current model variant; ``pool_tokens`` replaces the
    planner's pool per pod."""
    cfgs = variant.apply(planned(setup, reserve_full_prompt).copies("off"))
    return [replace(c, gpu_tokens=pool_tokens) for c in cfgs] if pool_tokens else cfgs


@dataclass(frozen=True)
class Stats:
    ttft_mean_s: float
    ttft_p90_s: float
    output_tokens_s: float
    itl_mean_s: float  # as the reports' "ITL mean" reads: see :func:`stats`


def stats(out: RunResult, reqs: list[Request]) -> Stats:
    """The reports' figures over ``reqs``: TTFT, ITL and output tokens over the successful
    ones, the span over all (``summarize_requests``).

    ITL is inference-perf's mean gap between the stream's timestamps over all of them:
    ``apis/completion.py`` (5b1da4d) stamps every line the stream yields, blank ones too,
    and vLLM sends each token as a server-sent event of two lines (``data: ...`` and a blank
    line) and ends with ``data: [DONE]``, so a request of ``n`` tokens has ``2n + 1`` gaps
    from its first token to its end (hence the reports' ITL median of 0): half the time
    per output token.
    """
    span = max(out.end[r.id] for r in reqs) - min(out.arrival[r.id] for r in reqs)
    ok = [r for r in reqs if not (out.failed and out.failed[r.id])]
    ttfts = sorted(out.ttft[r.id] - out.arrival[r.id] for r in ok)
    streamed = sum(out.end[r.id] - out.ttft[r.id] for r in ok)
    return Stats(sum(ttfts) / len(ttfts), percentile(ttfts, 0.9),
                 sum(r.output_tokens for r in ok) / span,
                 streamed / sum(2 * r.output_tokens + 1 for r in ok))


SETUPS = {"73-capacity": X73, "37-capacity": X37}


@variant.cached
def result(name: str, experiment: str,
           gateway: bool = True) -> tuple[Stats, dict[float, Stats]]:
    """Summary over every request, and per stage rate (the last stage of a repeated rate),
    on the report's pool; the September 2025 servers' vLLM (before 0.19.0) admits a request
    once its next chunk fits. ``gateway=False`` sends without the gateway's limit."""
    setup = SETUPS[name] if gateway else replace(SETUPS[name], gateway_limit=0)
    weights = setup.routers[experiment]
    pool = setup.reported_pool
    if weights:
        return replay(setup, router(weights, sum(prompt_segments(setup))), False, pool)
    return median_replay(setup, lambda seed: RandomRouter(random.Random(seed)), False, pool)


# Routing by random draws (random routing, a Service): each figure is its median over these
# seeds' runs. One run is one draw of the routing; the published run is one draw too.
ROUTER_SEEDS = tuple(range(1, 8))


def median_stats(runs: Sequence[T]) -> T:
    """Each field's median over ``runs`` (dataclasses of numbers)."""
    return type(runs[0])(*(statistics.median(getattr(r, f.name) for r in runs)
                           for f in fields(runs[0])))


def median_replay(setup: Setup, routed_by: Callable[[int], Router],
                  reserve_full_prompt: bool = False,
                  pool_tokens: int | None = None) -> tuple[Stats, dict[float, Stats]]:
    """:func:`replay` with the router of each of :data:`ROUTER_SEEDS`, figure by figure."""
    runs = [replay(setup, routed_by(seed), reserve_full_prompt, pool_tokens)
            for seed in ROUTER_SEEDS]
    return (median_stats([summary for summary, _ in runs]),
            {rate: median_stats([stages[rate] for _, stages in runs]) for rate in runs[0][1]})


def replay(setup: Setup, routed_by: Router, reserve_full_prompt: bool = False,
           pool_tokens: int | None = None) -> tuple[Stats, dict[float, Stats]]:
    """A run of ``setup``'s workload routed by ``routed_by``: its summary as the report
    pools it, and per stage; ``pool_tokens`` replaces the planner's pool per pod (the 2025
    reports give theirs).

    Each report's "Summary across QPS" pools its "Per-QPS Results" rows, and the replay
    pools its stages the same way (``test_llmd.py`` checks the published rows add up):

    - output tokens/s is the plain mean of the per-QPS rows (the ladder's stages, not the
      warm-up), not the run's tokens over its span: in both reports, for all eight arms,
      the mean of the rows gives the summary to the printed digit;
    - TTFT and ITL are over the requests of the ladder's stages in the 37-capacity report (its
      per-QPS means weighted by their stages' requests give all four arms' summary means
      to the printed digit), and of the warm-up too in the 73-capacity report, whose
      ladder alone (each row weighted by its requests/s x its stage's duration) gives
      47.58 s, 49.20 s, 0.297 s and 14.85 s for the published random 45.28, load 46.99,
      precise 0.298 and estimated 13.32, and with the warm-up counted at its 15 QPS row's
      mean 45.33, 47.20, 0.295 and 14.26.
    """
    work = workload(setup)
    out = run(work, copies(setup, reserve_full_prompt=reserve_full_prompt,
                           pool_tokens=pool_tokens), routed_by,
              max_in_flight=setup.gateway_limit)
    staged = [stats(out, [s[0] for s in phase.sessions]) for phase in work.phases]
    per_stage = {rate: st for (rate, _), st in zip(setup.stages, staged, strict=True)}
    counted = (work.requests if setup.warmup_in_summary
               else [s[0] for phase in work.phases[1:] for s in phase.sessions])
    rates = statistics.fmean(st.output_tokens_s for st in staged[1:])  # the ladder's
    return replace(stats(out, counted), output_tokens_s=rates), per_stage


def figure(name: str, experiment: str, metric: str, stage: float | None = None,
           gateway: bool = True) -> float:
    """One :class:`Stats` figure of a replay: over every request, or of the stage at ``stage``
    QPS (the last stage of a repeated rate)."""
    summary, per_stage = result(name, experiment, gateway)
    return float(getattr(summary if stage is None else per_stage[stage], metric))
