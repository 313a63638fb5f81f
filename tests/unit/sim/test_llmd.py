"""The llm-d replays: what the published scorer configuration implies, checked on the replay."""

from __future__ import annotations

from collections import defaultdict

import pytest

from lmikit.sim._loop import RunResult, run
from lmikit.sim._workloads import Request
from tests.unit.sim import llmd, llmd_service


@pytest.mark.parametrize("chars_per_token", [3, 4, 8])
def test_approximate_scorer_keeps_each_37_capacity_group_on_one_pod(chars_per_token) -> None:
    # 256 hashed 64-byte blocks lie inside the 8,000-token system prompt and a pod's LRU of
    # 31,250 blocks holds over 120 groups: the index can neither miss nor forget a group's
    # pod, and prefix weight 2 outweighs queue + KV-cache (at most 1 + 1), so every request
    # of a group goes where its first went, whatever the characters per token
    setup = llmd.X37
    work = llmd.workload(setup)
    rtr = llmd.router(setup.routers["default"], setup.system + setup.question, chars_per_token)
    out = run(work, llmd.copies(setup, pool_tokens=setup.reported_pool), rtr)
    pods = defaultdict(set)
    for r in work.requests:
        pods[r.session // setup.per_group].add(out.copy_of[r.id])
    assert len(pods) == setup.groups
    assert all(len(p) == 1 for p in pods.values())
    load = sorted(sum(1 for g in pods.values() if i in g) for i in range(setup.pods))
    assert load[-1] - load[0] <= 2  # first placements by load spread the groups evenly


def test_replays_are_deterministic() -> None:
    a = llmd.result.__wrapped__("37-capacity", "precise")
    b = llmd.result.__wrapped__("37-capacity", "precise")
    assert a == b


def test_b2b_saas_workload_file_is_the_73_capacity_run() -> None:
    # llm-d/llm-d llm-d-benchmarking/workloads/b2b-saas/b2b-saas.yaml at 06d672f7, which the
    # k8s Service rows (llmd_service.py) replay with llmd.X73
    stages = ((15, 50), (3, 20), (10, 20), (15, 20), (20, 38), (22, 34), (25, 30), (30, 25),
              (35, 21), (40, 38), (43, 36), (46, 33), (49, 30), (52, 29), (55, 27), (57, 26),
              (60, 25))
    x = llmd.X73
    assert x.stages == stages and x.poisson
    assert (x.groups, x.per_group, x.system, x.question, x.output) == (150, 5, 6_000, 1_200,
                                                                        1_000)
    assert (x.model, x.tp, x.pods, x.routers["random"]) == ("Qwen/Qwen3-32B", 2, 8, {})


# The reports' "Per-QPS Results" rows as published (llm-d-kv-cache-manager
# benchmarking/73-capacity/README.md and 37-capacity/README.md, added 2025-09-21 at
# d070ea6): arm -> (stage QPS, output tokens/s, TTFT mean s), in ladder order.
PER_QPS_73 = {
    "estimated": ((3, 1310.9, 0.300), (10, 3842.4, 0.271), (15, 5152.9, 0.232),
                  (20, 8082.6, 0.329), (22, 8415.7, 0.407), (25, 8445.1, 0.370),
                  (30, 8435.9, 0.373), (35, 7443.5, 2.780), (40, 8045.9, 13.160),
                  (43, 7969.6, 16.941), (46, 7695.2, 18.081), (49, 7455.9, 19.111),
                  (52, 7452.3, 21.940), (55, 7100.7, 22.327), (57, 7013.8, 23.423),
                  (60, 7247.9, 24.281)),
    "precise": ((3, 1219.1, 0.291), (10, 3902.1, 0.335), (15, 5761.1, 0.249),
                (20, 9184.5, 0.363), (22, 9382.0, 0.300), (25, 9242.2, 0.303),
                (30, 9221.8, 0.296), (35, 9780.6, 0.275), (40, 10270.8, 0.269),
                (43, 10054.8, 0.281), (46, 10128.7, 0.293), (49, 10296.5, 0.311),
                (52, 10284.6, 0.288), (55, 10140.9, 0.308), (57, 10313.9, 0.319),
                (60, 10496.9, 0.283)),
    "random": ((3, 1314.0, 0.622), (10, 3568.5, 0.826), (15, 3791.1, 1.278),
               (20, 4933.1, 25.073), (22, 4765.4, 28.185), (25, 4781.3, 30.689),
               (30, 4636.3, 32.212), (35, 4332.6, 34.043), (40, 4773.8, 54.196),
               (43, 4844.6, 53.247), (46, 4969.5, 53.572), (49, 4783.2, 56.130),
               (52, 4845.1, 56.035), (55, 4921.7, 54.844), (57, 4764.2, 56.803),
               (60, 4835.2, 57.426)),
    "load": ((3, 1274.8, 0.944), (10, 3607.0, 2.241), (15, 3348.4, 4.013),
             (20, 4902.5, 29.229), (22, 4785.5, 28.710), (25, 4872.8, 32.534),
             (30, 4888.7, 32.831), (35, 4660.7, 33.874), (40, 4946.4, 53.545),
             (43, 4973.3, 53.802), (46, 4723.6, 56.746), (49, 4004.8, 55.208),
             (52, 3991.0, 58.807), (55, 4671.9, 58.467), (57, 3866.5, 61.750),
             (60, 4745.1, 58.497)),
}
PER_QPS_37 = {
    "precise": ((3, 2579.8, 0.144), (4, 3366.8, 0.182), (5, 3940.5, 0.188),
                (6, 4665.9, 0.195), (8, 5675.9, 0.199), (10, 6456.9, 0.202),
                (12, 7062.0, 0.202), (15, 7807.3, 0.210), (20, 9295.2, 0.201)),
    "default": ((3, 2595.6, 0.207), (4, 3386.2, 0.236), (5, 3912.1, 0.307),
                (6, 4604.2, 0.254), (8, 5529.6, 0.399), (10, 6021.8, 0.466),
                (12, 6667.0, 0.420), (15, 6401.2, 1.294), (20, 6748.0, 7.609)),
    "random": ((3, 2518.0, 0.852), (4, 2734.2, 9.475), (5, 2647.1, 15.998),
               (6, 2946.7, 30.389), (8, 2968.5, 39.117), (10, 3119.5, 41.480),
               (12, 3022.5, 53.513), (15, 3003.1, 61.425), (20, 3099.1, 94.952)),
    "load": ((3, 2567.1, 1.443), (4, 2974.3, 6.367), (5, 3119.7, 10.158),
             (6, 3007.5, 29.175), (8, 3089.7, 39.076), (10, 3050.4, 44.587),
             (12, 3044.0, 51.247), (15, 3106.0, 63.407), (20, 3205.6, 92.947)),
}
# "Summary across QPS": arm -> (output tokens/s, TTFT mean s)
SUMMARY_73 = {"estimated": (6944.4, 13.316), "precise": (8730.0, 0.298),
              "random": (4428.7, 45.281), "load": (4266.4, 46.987)}
SUMMARY_37 = {"precise": (5650.0, 0.193), "default": (5096.2, 1.549),
              "random": (2895.4, 42.011), "load": (3018.3, 41.058)}


def _weighted_ttft(rows, stages) -> float:
    n = dict(stages[1:])  # ladder stage -> duration; requests = rate x duration
    return (sum(rate * n[rate] * mean for rate, _, mean in rows)
            / sum(rate * n[rate] for rate, _, _ in rows))


@pytest.mark.parametrize("per_qps, summary, stages", [
    (PER_QPS_73, SUMMARY_73, llmd.X73.stages), (PER_QPS_37, SUMMARY_37, llmd.X37.stages)])
def test_published_summary_output_rate_is_the_mean_of_the_per_qps_rows(
        per_qps, summary, stages) -> None:
    assert set(per_qps) == set(summary)
    for arm, rows in per_qps.items():
        assert [r for r, _, _ in rows] == [r for r, _ in stages[1:]]  # the ladder, no warm-up
        mean = sum(tps for _, tps, _ in rows) / len(rows)
        assert mean == pytest.approx(summary[arm][0], abs=0.05)  # printed to 0.1
        # not the whole run's tokens over its span, which weights the long saturated stages:
        # the time-weighted mean would differ by far more than the printed digit
        timed = (sum(tps * d for (_, tps, _), (_, d) in zip(rows, stages[1:], strict=True))
                 / sum(d for _, d in stages[1:]))
        assert abs(timed - summary[arm][0]) > 50


def test_published_37_capacity_summary_ttft_is_over_its_ladder_requests() -> None:
    for arm, rows in PER_QPS_37.items():
        assert _weighted_ttft(rows, llmd.X37.stages) == pytest.approx(SUMMARY_37[arm][1],
                                                                      abs=0.0015)


def test_published_73_capacity_summary_ttft_counts_its_warm_up() -> None:
    # weighting the 15 QPS row by the warm-up's 15 x 50 requests as well comes closer to every
    # arm that queues than the ladder alone (the precise arm's means are too alike to tell)
    warm_rate, warm_s = llmd.X73.stages[0]
    for arm, rows in PER_QPS_73.items():
        ladder = _weighted_ttft(rows, llmd.X73.stages)
        n = sum(rate * d for rate, d in llmd.X73.stages[1:])
        warm_mean = next(mean for rate, _, mean in rows if rate == warm_rate)
        with_warm = (ladder * n + warm_mean * warm_rate * warm_s) / (n + warm_rate * warm_s)
        published = SUMMARY_73[arm][1]
        if arm == "precise":
            assert abs(with_warm - ladder) < 0.01
        else:
            assert abs(with_warm - published) < abs(ladder - published)


@pytest.mark.parametrize("name", ["73-capacity", "37-capacity"])
def test_replay_summary_pools_its_stages_as_the_report_does(name) -> None:
    setup = llmd.SETUPS[name]
    rtr = llmd.router(setup.routers["precise"], setup.system + setup.question)
    summary, per_stage = llmd.replay(setup, rtr, pool_tokens=setup.reported_pool)
    ladder = setup.stages[1:]
    assert summary.output_tokens_s == pytest.approx(
        sum(per_stage[rate].output_tokens_s for rate, _ in ladder) / len(ladder))
    if setup.warmup_in_summary:  # every request of the run, the warm-up's too
        work = llmd.workload(setup)
        out = run(work, llmd.copies(setup, pool_tokens=setup.reported_pool),
                  llmd.router(setup.routers["precise"], setup.system + setup.question),
                  max_in_flight=setup.gateway_limit)
        whole = llmd.stats(out, work.requests)
        assert (summary.ttft_mean_s, summary.ttft_p90_s) == (whole.ttft_mean_s,
                                                             whole.ttft_p90_s)
    else:  # constant load: a stage sends rate x duration requests
        assert summary.ttft_mean_s == pytest.approx(
            sum(rate * d * per_stage[rate].ttft_mean_s for rate, d in ladder)
            / sum(rate * d for rate, d in ladder))


def test_2025_prompts_are_sent_as_vllm_re_encodes_them_and_2026_ones_exactly() -> None:
    # The September 2025 generator decoded random ids to text, which vLLM re-encodes into more
    # tokens: 1.052 per id with Qwen's BPE, 1.043 with Llama 3's (benchmarks/tokenize_prompts.py)
    for setup, per_id, tokens in ((llmd.X73, 1.052, 6_312 + 1_262),
                                  (llmd.X37, 1.043, 8_344 + 1_043)):
        assert llmd.RETOKENIZE[setup.model] == per_id
        assert {r.prompt_tokens for r in llmd.workload(setup).requests} == {tokens}
    # inference-perf v0.5.0 (the b2b-saas run) composes text of the configured length in tokens
    b2b = llmd_service.B2B_SAAS
    assert {r.prompt_tokens for r in llmd.workload(b2b).requests} == {6_000 + 1_200}
    assert b2b.stages == llmd.X73.stages


def test_itl_reads_as_the_reports_stamp_the_stream() -> None:
    # inference-perf stamps every line: n tokens are n data lines and n blank ones, then
    # [DONE] and its blank line, so 2n + 1 gaps from the first token to the end, pooled
    reqs = [Request(0, (), 100, 3, 0), Request(1, (), 100, 1, 1)]
    out = RunResult([0.0, 0.0], [1.0, 2.0], [1.6, 2.3], {}, [0, 0], [0.0])
    assert llmd.stats(out, reqs).itl_mean_s == pytest.approx((0.6 + 0.3) / (7 + 3))


def test_failed_requests_leave_every_figure_but_the_span() -> None:
    # inference-perf's summarize_requests: TTFT, ITL and output tokens over the successful
    # requests, the span (last end - first start) over all of them
    reqs = [Request(0, (), 100, 3, 0), Request(1, (), 100, 5, 1), Request(2, (), 100, 7, 2)]
    out = RunResult([0.0, 0.0, 0.0], [1.0, float("nan"), 2.0], [1.6, 0.0, 4.0], {},
                    [0, -1, 0], [0.0], failed=[False, True, False])
    st = llmd.stats(out, reqs)
    assert st.ttft_mean_s == pytest.approx(1.5)
    assert st.output_tokens_s == pytest.approx((3 + 7) / 4.0)
    assert st.itl_mean_s == pytest.approx((0.6 + 2.0) / (7 + 15))


def _failures(setup: llmd.Setup, experiment: str) -> tuple[list[int], list[int]]:
    """Per stage: requests sent and requests the gateway failed, one replay of the arm."""
    rtr = llmd.router(setup.routers[experiment], sum(llmd.prompt_segments(setup)))
    work = llmd.workload(setup)
    out = run(work, llmd.copies(setup, pool_tokens=setup.reported_pool), rtr,
              max_in_flight=setup.gateway_limit)
    sent = [len(p.sessions) for p in work.phases]
    failed = [sum(out.failed[s[0].id] for s in p.sessions) for p in work.phases]
    return sent, failed


@pytest.mark.parametrize("experiment", ["precise", "default", "load", "random"])
def test_the_37_capacity_gateway_fails_nothing_as_its_report_says(experiment) -> None:
    # the report prints a success rate of 100.00% for every arm and stage: its stages send
    # at most 1,000 requests, under Envoy's 1,024
    assert llmd.X37.gateway_limit == llmd.ENVOY_MAX_REQUESTS == 1_024
    sent, failed = _failures(llmd.X37, experiment)
    assert max(sent) == 1_000 and sum(failed) == 0


def test_the_73_capacity_gateway_fails_what_its_bursts_send_past_1024() -> None:
    # stages of up to 760 requests are all in flight at once and fail none; from 40 QPS a
    # stage sends ~1,500, and about a third fail (the report's output rate over the span of
    # its waiting-queue chart comes to ~1,000 requests' tokens of ~1,500)
    sent, failed = _failures(llmd.X73, "random")
    for n, f in zip(sent, failed, strict=True):
        if n <= llmd.ENVOY_MAX_REQUESTS:
            assert f == 0
        else:
            assert 0.25 <= f / n <= 0.40
    assert sum(n > llmd.ENVOY_MAX_REQUESTS for n in sent) == 8  # the 40-60 QPS stages
    # a Kubernetes Service has no gateway: the 2026 runs through one fail nothing
    assert llmd_service.B2B_SAAS.gateway_limit == 0
