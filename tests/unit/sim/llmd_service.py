"""A second published run of the llm-d shared-prefix workload: a Kubernetes Service in front.

llm-d's blog "Sticky Until Saturated: Token-Aware Routing in llm-d" (2026-08-17,
llm-d/llm-d.github.io ``blog/2026-08-17_sticky-until-saturated-token-aware-routing.mdx``)
ran its "b2b-saas" workload on 8 Qwen3-32B vLLM servers of TP 2 on H100
(``max-num-batched-tokens`` 8192) behind five routers, and published every stage of every
run in llm-d/llm-d ``llm-d-benchmarking/workloads/b2b-saas/analysis/results.txt`` (at
7c4b49aa; the rows come from inference-perf's per-stage lifecycle reports, ``analysis.py``
beside it). Its workload file (``b2b-saas.yaml`` at 06d672f7) is, line for line, the
73-capacity run ``llmd.py`` rebuilds: Poisson stages 15 QPS x 50 s then 3 -> 60 QPS,
shared_prefix 150 groups x 5 prompts, 6,000 + 1,200 tokens, 1,000 output tokens with
``ignore_eos``. So these rows reuse ``llmd.X73``, but for the prompts' token counts: the
run's inference-perf v0.5.0 composes text of the configured length in tokens ("Fix
SharedPrefix Datagen Prompt Length", #383), where the 2025 run's decoded random ids that
vLLM re-encoded to 5% more (``llmd.RETOKENIZE``), so :data:`B2B_SAAS` has none of that.

Only the cache-blind arm is rebuilt: "k8", a Kubernetes Service ("baseline" in
results.txt). kube-proxy's iptables mode sends each new connection to an endpoint drawn at
random (kubernetes ``pkg/proxy/iptables/proxier.go``, ``syncProxyRules``: one
``-m statistic --mode random`` rule per endpoint). The September 2025 inference-perf
``llmd.py`` reads opened a new HTTP session per request; the run's job
(``b2b-saas/bench-job.yaml`` at 73f3dbbe) ran inference-perf v0.5.0, whose
``openai_client.py`` keeps one aiohttp session per worker over a keep-alive
``TCPConnector``, so a request takes an idle connection of its worker, each bound to the
endpoint drawn when it opened. The replay routes that way (:func:`service`, with
``b2b-saas.yaml``'s 64 workers taking requests from one shared channel). Under this load
it changes little: a stage's requests, 1,000 output tokens each, mostly end after the
stage's last send, the next stage starts only when they all have, and vLLM closes a
connection idle for 5 s, so 98% of requests find no idle connection of their worker and
open a new one, to a random pod. Each figure is the median over seven draws of the
Service (``llmd.ROUTER_SEEDS``); at the 10 and 15 QPS stages, where the fleet starts to
queue, the draws spread the TTFT p90 over 1.0-1.3 s and 1.4-2.0 s. The other arms use picker
plugins the simulator does not model (``prefix-cache-affinity-filter``, ``token-load-scorer``,
``no-hit-lru-scorer``).

The blog (August 2026) does not name this run's vLLM; the Deployment committed with its
other two workloads, for 10 pods, runs v0.19.1 (``llmd_codegen.py``), and a 2026 llm-d runs
a vLLM from 0.19.0 on, so its servers check that a whole prompt fits before admitting it
(assumed, ``reserve_full_prompt=True``), unlike the September 2025 run. The 2026 servers
publish no pool per pod: the rows use the one the accuracy fit chooses
(``variant.CHOICES["llmd_2026_pool"]``): lmikit's planner's by default, or the 73-capacity
report's 307,328 tokens for the same model, GPU, TP and memory share.

Rows, by one rule: the TTFT mean, TTFT p90 (the metric the blog plots) and output tokens/s
of every ladder stage, 3 to 60 QPS (the 15 QPS x 50 s warm-up stage is not a ladder stage).
A second run of the same arm on the same workload, published by llm-d's
precise-prefix-cache-routing guide (``PRECISE_GUIDE_SOURCE``), gives the same three figures
per stage; both are held against the same replay. llm-d's optimized-baseline guide
(guides/optimized-baseline/benchmark-results/vllm-qwen3-32b-h100/README.md at 53c5b20a)
prints this run's output rates again, not a new run: its "k8s Output" column is
results.txt's baseline out_t/s, with the warm-up stage's figure (6,066.2) under 15 QPS and,
from 20 QPS on, each stage's figure under the next rate (4,555 under 20 QPS is the 15 QPS
stage's), so it is not used. The blog's and llm-d's
calibration recipe's single-request prefill figures are rows too.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import partial

from lmikit.sim._loop import run
from lmikit.sim._routers import LeastOutstanding
from lmikit.sim._scenario import deployment
from lmikit.sim._tiers import chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload
from tests.unit.sim import llmd, variant
from tests.unit.sim.inference_perf import KeepAliveService
from tests.unit.sim.rows import Row

SOURCE = ("llm-d blog 'Sticky Until Saturated: Token-Aware Routing in llm-d' (2026-08-17) "
          "and its per-stage table, llm-d/llm-d llm-d-benchmarking/workloads/b2b-saas/analysis/"
          "results.txt at 7c4b49aa, arm 'baseline' (Kubernetes Service): Qwen3-32B on 8 vLLM "
          "pods x 2 H100, b2b-saas.yaml = the 73-capacity workload and stages")

# (stage rate, TTFT mean s, TTFT p90 s, output tokens/s) from results.txt's "baseline"
# section, in stage order after the warm-up row; it prints TTFTs to 0.1 s
PUBLISHED = ((3.0, 0.4, 0.5, 1_889.0), (10.0, 0.5, 0.9, 4_944.5), (15.0, 2.5, 4.9, 4_555.3),
             (20.0, 20.2, 56.8, 6_238.9), (22.0, 22.3, 60.2, 6_350.3),
             (25.0, 24.6, 67.6, 6_251.0), (30.0, 24.9, 65.5, 6_543.9),
             (35.0, 26.7, 69.2, 6_228.1), (40.0, 73.3, 153.1, 6_859.5),
             (43.0, 76.4, 158.1, 6_526.1), (46.0, 74.8, 158.1, 6_955.6),
             (49.0, 71.9, 129.9, 7_049.2), (52.0, 76.5, 161.1, 6_402.4),
             (55.0, 75.0, 134.3, 6_316.7), (57.0, 74.3, 135.0, 6_764.5),
             (60.0, 76.8, 161.3, 6_926.2))

# A second published run of the same arm: llm-d's precise-prefix-cache-routing guide,
# guides/precise-prefix-cache-routing/benchmark-results/vllm-qwen3-32b-h100.md (read as
# stored in the fork zetxqx/llm-d at 80e1169c; its benchmark template
# benchmark-templates/guide.yaml at 7808df6a is the same workload and ladder), the same 8
# servers behind "a stock Kubernetes Service", with a per-rate table of output tokens/s,
# TTFT mean and TTFT p90 to the millisecond. Rows: all three k8s figures of every ladder
# stage. Its summary "across the full ladder" does not say how the stages are pooled, so it
# is left out. vLLM and inference-perf not named: a 2026 llm-d, ``reserve_full_prompt=True``,
# and exact-length prompts, as the b2b-saas run's.
PRECISE_GUIDE_SOURCE = (
    "llm-d/llm-d guides/precise-prefix-cache-routing/benchmark-results/vllm-qwen3-32b-h100.md "
    "(as stored in zetxqx/llm-d at 80e1169c), per-rate table, k8s columns: Qwen3-32B on 8 "
    "vLLM servers x 2 H100 behind a Kubernetes Service, benchmark-templates/guide.yaml = the "
    "73-capacity workload and stages")
# (stage rate, output tokens/s, TTFT mean s, TTFT p90 s), in ladder order
PRECISE_GUIDE = ((3.0, 1_797, 0.415, 0.522), (10.0, 4_215, 0.630, 1.014),
                 (15.0, 5_381, 0.881, 1.593), (20.0, 6_205, 18.103, 35.344),
                 (22.0, 5_517, 20.171, 39.436), (25.0, 5_965, 21.842, 42.813),
                 (30.0, 5_702, 24.597, 46.036), (35.0, 5_890, 24.162, 45.190),
                 (40.0, 6_336, 68.673, 126.238), (43.0, 6_588, 72.429, 130.275),
                 (46.0, 6_459, 70.084, 129.810), (49.0, 6_265, 70.659, 133.718),
                 (52.0, 6_303, 74.326, 134.981), (55.0, 6_290, 72.564, 134.034),
                 (57.0, 6_089, 72.329, 135.023), (60.0, 6_551, 75.586, 138.663))


WORKERS = 64  # b2b-saas.yaml load.num_workers
# exact-length prompts (above), and no gateway: a Service fails nothing
B2B_SAAS = replace(llmd.X73, tokens_per_id=1.0, gateway_limit=0)


def service(seed: int) -> KeepAliveService:
    """The Service as inference-perf v0.5.0's 64 workers reach it: each request taken from
    one shared channel (``shared_prefix`` without multi-turn asks for no preferred worker)
    by any worker, and sent over that worker's keep-alive connections."""
    return KeepAliveService(random.Random(seed), workers=WORKERS)


# The pool per pod of the 2026 Qwen3-32B TP 2 servers, which publish none, by the fit's choice
# ``llmd_2026_pool`` (tests/unit/sim/variant.py): the planner's (None) or the 73-capacity
# report's for the same model, GPU, TP and memory share.
POOLS = {"planner": None, "73-capacity": llmd.QWEN3_32B_TP2_POOL}


def pool_2026() -> int | None:
    """The pool the current model variant gives the 2026 servers (None: the planner's)."""
    return POOLS[variant.current().choice("llmd_2026_pool")]


@variant.cached
def replay(pool_tokens: int | None = llmd.QWEN3_32B_TP2_POOL) -> dict[float, llmd.Stats]:
    """The 73-capacity workload through the Service, per ladder stage (a 2026 vLLM's
    admission rule; ``pool_tokens`` per pod, None: the planner's), each figure the median
    over :data:`llmd.ROUTER_SEEDS`."""
    return llmd.median_replay(B2B_SAAS, service, reserve_full_prompt=True,
                              pool_tokens=pool_tokens)[1]


def _stage(rate: float, metric: str) -> float:
    """One figure of the replayed ladder stage at ``rate``."""
    return float(getattr(replay(pool_2026())[rate], metric))


# The blog's calibration ("Calibration for Qwen3-32B / H100"): single requests of k x 8,192
# tokens through the serving path, fitted; T(8,192) = 0.40 s, its R_peak of 20,480 tok/s.
CALIBRATION_TOKENS, CALIBRATION_TTFT_S = 8_192, 0.40


# llm-d's calibration recipe (llm-d/llm-d guides/recipes/router/calibration): its Job sends
# 5 warm-up then 20 measured requests one after the other, each a fresh list of CHUNK_SIZE
# random token ids as the ``prompt`` of a streamed /v1/completions call with max_tokens 1
# through the router, times the first streamed data line, and reports peakPrefillThroughput =
# CHUNK_SIZE / median(TTFT) (README.md at ba44fe19; the Job's script,
# calibration-peak-throughput.yaml, as stored at zetxqx/llm-d c32b4a06). Random ids never hit
# a cache, so every request is the same cold prefill and the median is one request's TTFT.
# configuration-matrix.md (at 127478c) publishes it for the gpu/vllm overlay: Qwen3-32B, TP 2,
# H100 80 GB, vLLM v0.23.0, CHUNK_SIZE 8,192: 15,928 tok/s, the router's default; the blog
# quotes the same figure for the same path. The matrix's other rows are left out: gpt-oss-120B
# (MXFP4 MoE) and Qwen3-VL-32B are not in lmikit's catalog, and SGLang, TPU, NPU and CPU
# servers are not modelled.
RECIPE_SOURCE = ("llm-d/llm-d guides/recipes/router/calibration: configuration-matrix.md at "
                 "127478c (gpu/vllm: Qwen3-32B, TP 2, H100 80 GB, vLLM v0.23.0), README.md at "
                 "ba44fe19 (peakPrefillThroughput = CHUNK_SIZE / median TTFT of 20 requests of "
                 "CHUNK_SIZE random token ids), CHUNK_SIZE 8,192")
RECIPE_PEAK_TOKENS_S = 15_928.0


def single_request_ttft(tokens: int, pretokenized: bool = False) -> float:
    """TTFT of one uncached prompt alone on one Qwen3-32B TP 2 H100 server (the loop's path:
    tokenization unless the prompt is sent as token ids, prefill, request overhead)."""
    dep = deployment("Qwen/Qwen3-32B", "ml.p5.48xlarge", tp=2, copies=4, chunk_size=llmd.BLOCK,
                     max_batch_size=1024, config_path=llmd.QWEN3_32B)
    req = Request(0, chunk_keys([(1, tokens)], llmd.BLOCK), tokens, 1, session=0, arrival_s=0.0,
                  pretokenized=pretokenized)
    work = Workload("calibration", [Phase("one", [[req]], open_loop=True)], llmd.BLOCK)
    out = run(work, variant.apply(dep.copies("off")), LeastOutstanding())
    return out.ttft[0] - out.arrival[0]


PUBLICATION, PRECISE_GUIDE_PUBLICATION = "llmd-sticky-2026", "llmd-precise-guide"
SETUP, CALIBRATION_SETUP = "llmd-b2b-service", "single-prefill-qwen3-32b"


def rows() -> list[Row]:
    """The Service's stages (both publications, one replay) and the two single prefills.

    Every Service figure is cache-blind; its TTFTs are misses (the Service spreads each
    group's prompts over the pods at random)."""
    def stage_row(name: str, source: str, publication: str, value: float, unit: str,
                  rate: float, metric: str) -> Row:
        quantity = "throughput" if metric == "output_tokens_s" else "ttft_miss"
        return Row(name, source, value, unit, partial(_stage, rate, metric), quantity,
                   "cache_blind", publication, SETUP, "b2b-service")

    out = []
    for rate, mean, p90, output in PUBLISHED:
        out += [stage_row(f"llm-d k8s Service at {rate:g} QPS: ttft mean", SOURCE, PUBLICATION,
                          mean, "s", rate, "ttft_mean_s"),
                stage_row(f"llm-d k8s Service at {rate:g} QPS: ttft p90", SOURCE, PUBLICATION,
                          p90, "s", rate, "ttft_p90_s"),
                stage_row(f"llm-d k8s Service at {rate:g} QPS: output tokens/s", SOURCE,
                          PUBLICATION, output, "tok/s", rate, "output_tokens_s")]
    for rate, output, mean, p90 in PRECISE_GUIDE:
        prefix = f"llm-d precise guide k8s Service at {rate:g} QPS"
        out += [stage_row(f"{prefix}: output tokens/s", PRECISE_GUIDE_SOURCE,
                          PRECISE_GUIDE_PUBLICATION, output, "tok/s", rate, "output_tokens_s"),
                stage_row(f"{prefix}: ttft mean", PRECISE_GUIDE_SOURCE,
                          PRECISE_GUIDE_PUBLICATION, mean, "s", rate, "ttft_mean_s"),
                stage_row(f"{prefix}: ttft p90", PRECISE_GUIDE_SOURCE,
                          PRECISE_GUIDE_PUBLICATION, p90, "s", rate, "ttft_p90_s")]
    out += [Row("llm-d calibration: Qwen3-32B TP 2 H100, one 8,192-token prompt: ttft",
                SOURCE.split(" and its per-stage")[0] + ", section Calibration: single "
                "requests of k x 8,192 tokens, fitted T(8,192) = 0.40 s",
                CALIBRATION_TTFT_S, "s", partial(single_request_ttft, CALIBRATION_TOKENS),
                "ttft_miss", "cache_blind", PUBLICATION, CALIBRATION_SETUP, "single/8192"),
            # a cold prefill's TTFT, read as its inverse (8,192 / TTFT)
            Row("llm-d calibration recipe: Qwen3-32B TP 2 H100, vLLM 0.23.0, 8,192 random "
                "token ids: peakPrefillThroughput", RECIPE_SOURCE, RECIPE_PEAK_TOKENS_S,
                "tok/s", _recipe_peak, "ttft_miss", "cache_blind", "llmd-calibration-recipe",
                CALIBRATION_SETUP, "single/8192-ids")]
    return out


def _recipe_peak() -> float:
    """The recipe's figure: CHUNK_SIZE over the (here single) cold request's TTFT."""
    return CALIBRATION_TOKENS / single_request_ttft(CALIBRATION_TOKENS, pretokenized=True)
