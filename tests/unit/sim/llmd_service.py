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
``ignore_eos``. So these rows reuse ``llmd.X73`` unchanged.

Only the cache-blind arm is rebuilt: "k8", a Kubernetes Service ("baseline" in
results.txt). kube-proxy's iptables mode sends each new connection to an endpoint drawn at
random (kubernetes ``pkg/proxy/iptables/proxier.go``, ``syncProxyRules``: one
``-m statistic --mode random`` rule per endpoint), and inference-perf opens a new HTTP
session per request (``llmd.py``), so the Service is random routing per request, the
router ``llmd.py`` uses for the 73-capacity "random" run. The other arms use picker plugins
the simulator does not model (``prefix-cache-affinity-filter``, ``token-load-scorer``,
``no-hit-lru-scorer``).

The blog (August 2026) does not name its vLLM; a 2026 llm-d runs a vLLM from 0.19.0 on, so
its servers check that a whole prompt fits before admitting it (assumed,
``reserve_full_prompt=True``), unlike the September 2025 run.

Rows, by one rule: the TTFT p90 (the metric the blog plots) of every ladder stage, 3 to 60
QPS (the 15 QPS x 50 s warm-up stage is not a ladder stage). The same arm on the same workload
was published again by llm-d's optimized-baseline guide (``GUIDE_SOURCE``: the output rate
of every ladder stage) and by its precise-prefix-cache-routing guide
(``PRECISE_GUIDE_SOURCE``: output rate, TTFT mean and p90 of every stage); both are held
against the same replay. The blog's and llm-d's calibration
recipe's single-request prefill figures are rows too. Assumed as in ``llmd.py``: the pool
per pod is lmikit's planner's (the blog does not give the servers' memory settings), and
vLLM runs at its H100 defaults; the run used a 2026 vLLM, newer than the 73-capacity run's.
"""

from __future__ import annotations

from functools import partial

from lmikit.sim.loop import run
from lmikit.sim.routers import LeastOutstanding
from lmikit.sim.scenario import deployment
from lmikit.sim.tiers import chunk_keys
from lmikit.sim.workloads import Phase, Request, Workload
from tests.unit.sim import llmd

SOURCE = ("llm-d blog 'Sticky Until Saturated: Token-Aware Routing in llm-d' (2026-08-17) "
          "and its per-stage table, llm-d/llm-d llm-d-benchmarking/workloads/b2b-saas/analysis/"
          "results.txt at 7c4b49aa, arm 'baseline' (Kubernetes Service): Qwen3-32B on 8 vLLM "
          "pods x 2 H100, b2b-saas.yaml = the 73-capacity workload and stages")

# (stage rate, published TTFT p90 in s) from results.txt's "baseline" section, in stage order
# after the warm-up row; results.txt prints them to 0.1 s
PUBLISHED = ((3.0, 0.5), (10.0, 0.9), (15.0, 4.9), (20.0, 56.8), (22.0, 60.2), (25.0, 67.6),
             (30.0, 65.5), (35.0, 69.2), (40.0, 153.1), (43.0, 158.1), (46.0, 158.1),
             (49.0, 129.9), (52.0, 161.1), (55.0, 134.3), (57.0, 135.0), (60.0, 161.3))
# Outside 1.5x: the honest current band (docs/planner.md says why)
BANDS = {15.0: (0.209, 0.327)}


# A second published run of the same arm: llm-d's optimized-baseline guide,
# guides/optimized-baseline/benchmark-results/vllm-qwen3-32b-h100/README.md (at 53c5b20a):
# Qwen3-32B on 8 vLLM servers x 2 H100 (TP 2) behind "a stock Kubernetes Service", driven by
# inference-perf with the guide's shared-prefix template
# (guides/optimized-baseline/benchmark-templates/shared_prefix.yaml at 9084370b: 150 groups x
# 5 prompts of 6,000 + 1,200 tokens, 1,000 output tokens with ignore_eos, streaming, Poisson
# stages 15 QPS x 50 s then the same 3 -> 60 QPS ladder as the 73-capacity run, stage for
# stage). Rows: the output tokens/s of every ladder stage ("k8s Output" in its per-rate
# table; its summary's peak, 7,049, is the largest of them), inference-perf's per-stage
# output tokens over (last end - first start), as ``llmd.stats`` computes it. Its TTFT
# columns are left out: they come from a latency histogram the report says is empty (0.0)
# in low-load stages, and the series contradicts the per-request TTFT p90 of the same arm
# on the same workload above (results.txt): 0.9 s at 25 QPS, 4.9 s at 30 QPS, against 67.6
# s and 65.5 s there, with this run's own output rate flat from 15 QPS on. Its vLLM is not
# named; like the run above it is a 2026 llm-d (the guide's gpu/vllm overlay runs vLLM
# v0.23.0 by the calibration matrix), so ``reserve_full_prompt=True``.
GUIDE_SOURCE = ("llm-d/llm-d guides/optimized-baseline/benchmark-results/vllm-qwen3-32b-h100/"
                "README.md at 53c5b20a, per-rate table, column 'k8s Output': Qwen3-32B on 8 "
                "vLLM servers x 2 H100 behind a Kubernetes Service, benchmark-templates/"
                "shared_prefix.yaml = the 73-capacity workload and stages")
# (stage rate, published output tokens/s), in ladder order
GUIDE_OUTPUT = ((3.0, 1_889), (10.0, 4_944), (15.0, 6_066), (20.0, 4_555), (22.0, 6_239),
                (25.0, 6_350), (30.0, 6_251), (35.0, 6_544), (40.0, 6_228), (43.0, 6_860),
                (46.0, 6_526), (49.0, 6_956), (52.0, 7_049), (55.0, 6_402), (57.0, 6_317),
                (60.0, 6_764))

# A third: llm-d's precise-prefix-cache-routing guide,
# guides/precise-prefix-cache-routing/benchmark-results/vllm-qwen3-32b-h100.md (read as
# stored in the fork zetxqx/llm-d at 80e1169c; its benchmark template
# benchmark-templates/guide.yaml at 7808df6a is the same workload and ladder), the same 8
# servers behind "a stock Kubernetes Service", with a per-rate table of output tokens/s,
# TTFT mean and TTFT p90 to the millisecond. Rows: all three k8s figures of every ladder
# stage. Its summary "across the full ladder" does not say how the stages are pooled, so it
# is left out. vLLM not named: a 2026 llm-d, ``reserve_full_prompt=True``.
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


def _per_stage() -> dict[float, llmd.Stats]:
    _, per_stage = llmd.result("73-capacity", "random", reserve_full_prompt=True)
    return per_stage


def _stage(rate: float) -> float:
    return float(_per_stage()[rate].ttft_p90_s)


def _stage_output(rate: float) -> float:
    return float(_per_stage()[rate].output_tokens_s)


def _stage_ttft_mean(rate: float) -> float:
    return float(_per_stage()[rate].ttft_mean_s)


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
    out = run(work, dep.copies("off"), LeastOutstanding())
    return out.ttft[0] - out.arrival[0]


def rows() -> list:  # list[published.Row]; imported here, published.py imports this module
    from tests.unit.sim.published import WITHIN, Row

    return [*(Row(f"llm-d k8s Service at {rate:g} QPS: ttft p90", SOURCE, value, "s",
                  partial(_stage, rate), BANDS.get(rate, WITHIN))
              for rate, value in PUBLISHED),
            *(Row(f"llm-d optimized-baseline k8s Service at {rate:g} QPS: output tokens/s",
                  GUIDE_SOURCE, value, "tok/s", partial(_stage_output, rate), WITHIN)
              for rate, value in GUIDE_OUTPUT),
            *(row
              for rate, output, mean, p90 in PRECISE_GUIDE
              for row in (
                  Row(f"llm-d precise guide k8s Service at {rate:g} QPS: output tokens/s",
                      PRECISE_GUIDE_SOURCE, output, "tok/s", partial(_stage_output, rate),
                      WITHIN),
                  Row(f"llm-d precise guide k8s Service at {rate:g} QPS: ttft mean",
                      PRECISE_GUIDE_SOURCE, mean, "s", partial(_stage_ttft_mean, rate), WITHIN),
                  Row(f"llm-d precise guide k8s Service at {rate:g} QPS: ttft p90",
                      PRECISE_GUIDE_SOURCE, p90, "s", partial(_stage, rate), WITHIN))),
            Row("llm-d calibration: Qwen3-32B TP 2 H100, one 8,192-token prompt: ttft",
                SOURCE.split(" and its per-stage")[0] + ", section Calibration: single "
                "requests of k x 8,192 tokens, fitted T(8,192) = 0.40 s",
                CALIBRATION_TTFT_S, "s", partial(single_request_ttft, CALIBRATION_TOKENS),
                WITHIN),
            Row("llm-d calibration recipe: Qwen3-32B TP 2 H100, vLLM 0.23.0, 8,192 random "
                "token ids: peakPrefillThroughput", RECIPE_SOURCE, RECIPE_PEAK_TOKENS_S,
                "tok/s", _recipe_peak, WITHIN)]


def _recipe_peak() -> float:
    """The recipe's figure: CHUNK_SIZE over the (here single) cold request's TTFT."""
    return CALIBRATION_TOKENS / single_request_ttft(CALIBRATION_TOKENS, pretokenized=True)
