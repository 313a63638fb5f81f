"""The rebuilt llm-d reasoning run: inference-perf's sampling, the Service, the timeout."""

from __future__ import annotations

import statistics

import pytest

from lmikit.sim._loop import RunResult
from lmikit.sim._workloads import Request
from tests.unit.sim import llmd_reasoning as reasoning

# prompt_p50 of every arm of results.txt at 06d672f7 (the same seeds; its "k8" section)
PUBLISHED_PROMPT_P50 = {50: 1085, 150: 1086, 250: 1039, 350: 1084, 450: 1111}
# Success% of the "k8" section of results.txt at 7c4b49aa
PUBLISHED_SUCCESS = {50: 100.0, 150: 99.6, 250: 97.7, 350: 97.7, 450: 96.7}


def test_lengths_replay_the_generators_draws() -> None:
    # The replayed prompts (system + user) sit a re-tokenization's few percent under the
    # published medians at every concurrency, lowest at 250 and highest at 450 in both.
    medians = {c: statistics.median(reasoning.SYSTEM_TOKENS + p for p in reasoning.lengths(c)[0])
               for c in PUBLISHED_PROMPT_P50}
    for conc, published in PUBLISHED_PROMPT_P50.items():
        assert 1.03 < published / medians[conc] < 1.06, conc
    assert min(medians, key=medians.__getitem__) == 250
    assert max(medians, key=medians.__getitem__) == 450
    # ... and the prompts sent, re-encoded as vLLM sees them, sit within 2% of the published
    for conc, published in PUBLISHED_PROMPT_P50.items():
        sent = statistics.median(r.prompt_tokens for r in reasoning.workload(conc).requests[:conc])
        assert abs(sent / published - 1) < 0.02, conc


def test_lengths_are_clipped_to_the_configured_ranges() -> None:
    prompts, outputs = reasoning.lengths(450)
    assert len(prompts) == len(outputs) == 450
    assert 100 <= min(prompts) and max(prompts) <= 5000
    assert 500 <= min(outputs) and max(outputs) == 32000  # the tail reaches the cap


def test_workload_sends_each_conversation_three_times_in_order() -> None:
    work = reasoning.workload(50)
    reqs = work.requests
    assert len(reqs) == 150 and work.phases[0].concurrency == 50
    assert [r.session for r in reqs[:3]] == [0, 1, 2] and reqs[50].session == 0
    assert reqs[0].keys == reqs[50].keys == reqs[100].keys
    assert reqs[0].output_tokens == reqs[100].output_tokens
    # the 250-id system prompt, re-encoded to 263 tokens: 4 full blocks
    assert reqs[0].keys[:4] == reqs[1].keys[:4]
    assert reqs[0].keys[4] != reqs[1].keys[4]


def test_reasoning_timeouts_settle_and_match_the_published_success_rate() -> None:
    for conc, published in PUBLISHED_SUCCESS.items():
        res = reasoning.result(conc)
        assert res.settled, conc
        assert abs(100 * res.success - published) <= 2.0, (conc, res.success)
    assert reasoning.result(450).success < 1.0


def test_reasoning_rows_follow_one_rule() -> None:
    rows = reasoning.rows()
    assert len(rows) == 6 * len(reasoning.PUBLISHED)
    assert {r.name.rsplit(": ", 1)[1] for r in rows} == {m[1] for m in reasoning.METRICS}


def test_report_counts_a_failed_request_in_the_span_but_not_in_the_figures() -> None:
    reqs = [Request(0, (), 100, 10, session=0), Request(1, (), 300, 50, session=1)]
    out = RunResult(arrival=[0.0, 5.0], ttft=[1.0, 6.0], end=[100.0, 700.0], served={},
                    copy_of=[0, 0], busy_s=[0.0])
    stats = reasoning.report(reqs, out, failed={1})
    # the span runs to the failed request's timeout (5 + 600 s), its tokens do not count
    assert stats.out_tokens_s == pytest.approx(10 / 605.0)
    assert stats.in_tokens_s == pytest.approx(100 / 605.0)
    assert stats.e2e_p90_s == pytest.approx(100.0) and stats.ttft_p90_s == pytest.approx(1.0)
    assert stats.success == 0.5


def test_histogram_quantile_reads_the_published_one_bucket_pattern() -> None:
    # results.txt at conc 50: vTPOT p50 17.5 ms, p90 23.5 ms, p99 24.9 ms, what Prometheus
    # reads when every request's TPOT lies in vLLM's (10 ms, 25 ms] bucket
    tpots = [0.012 + 0.012 * i / 99 for i in range(100)]
    buckets = reasoning.VLLM_TPOT_BUCKETS
    assert [round(1000 * reasoning.histogram_quantile(q, tpots, buckets), 1)
            for q in (0.5, 0.9, 0.99)] == [17.5, 23.5, 24.9]


def test_histogram_quantile_interpolates_across_buckets_and_caps_at_the_last_bound() -> None:
    buckets = (1.0, 2.0, 4.0)
    # 2 of 4 values up to 1, 3 up to 2: the 0.9 rank (3.6) lies 60% into (2, 4]
    assert reasoning.histogram_quantile(0.9, [0.5, 0.7, 1.5, 3.0], buckets) == 3.2
    assert reasoning.histogram_quantile(0.25, [0.5, 0.7, 1.5, 3.0], buckets) == 0.5
    assert reasoning.histogram_quantile(0.99, [0.5, 9.0], buckets) == 4.0  # the +Inf bucket
