"""The llm-d code-generation replay: what its module docstring claims, checked."""

from __future__ import annotations

import math
import statistics

import pytest

from lmikit.sim._loop import RunResult
from lmikit.sim._workloads import Request
from tests.unit.sim import llmd
from tests.unit.sim import llmd_codegen as codegen

# results.txt at 06d672f7, section "k8": the same seeds run without streaming (answers in
# the context); its prompt_p50 column, the report's median prompt length of each run
OLDER_PROMPT_P50 = {10: 92_361, 20: 69_642, 30: 59_529, 40: 69_892, 50: 66_015,
                    60: 70_731, 70: 77_492, 80: 69_606, 90: 70_322}
# the same section's gen_p50: the median output of each run, recounted from the answer's text
OLDER_GEN_P50 = {10: 402, 20: 518, 30: 624, 40: 547, 50: 437, 60: 518, 70: 505, 80: 564,
                 90: 514}


def test_codegen_conversations_follow_the_workload_file_distributions() -> None:
    convs = codegen.conversations(100, 100)
    assert len(convs) == 100
    assert all(2 <= c.turns <= 20 and len(c.inputs) == len(c.outputs) == c.turns
               for c in convs)
    assert all(15_000 <= c.system <= 100_000 for c in convs)
    inputs = [n for c in convs for n in c.inputs]
    outputs = [n for c in convs for n in c.outputs]
    assert min(inputs) >= 100 and max(inputs) <= 10_000
    assert min(outputs) >= 50 and max(outputs) <= 4_000
    # lognormal moment-matched to the file's means (1,500 and 800), then clipped
    assert 1_200 < statistics.mean(inputs) < 1_800 and 650 < statistics.mean(outputs) < 950
    assert 4.5 < statistics.mean(c.turns for c in convs) < 7.5
    assert codegen.conversations(100, 100) == convs  # seeded: the same run, the same prompts


@pytest.mark.parametrize("conc", sorted(OLDER_PROMPT_P50))
def test_codegen_replayed_prompts_match_the_older_tables_median_within_3_percent(
        conc: int) -> None:
    # a wrong seed, draw order or tokens-per-id ratio moves these medians by far more
    lengths = []
    for conv in codegen.conversations(conc, conc):
        for r in range(codegen.ROUNDS):
            turn = r % conv.turns
            ids = codegen.SHARED + conv.system + sum(conv.inputs[:turn + 1])
            lengths.append(codegen.tokens(ids) + sum(conv.outputs[:turn]))
    assert statistics.median(lengths) == pytest.approx(OLDER_PROMPT_P50[conc], rel=0.03)


@pytest.mark.parametrize("conc", sorted(OLDER_GEN_P50))
def test_the_older_tables_recounted_output_median_is_below_what_the_seeds_ask_for(
        conc: int) -> None:
    """docs/planner-model.md's reading of the out_t/s rows: per request the report counts fewer
    output tokens than ``max_tokens`` asked for (0.70-0.92 of the drawn median at every
    concurrency), so the published sums' excess lies in a tail of requests, not in every
    request's count."""
    asked = [conv.outputs[r % conv.turns] for conv in codegen.conversations(conc, conc)
             for r in range(codegen.ROUNDS)]
    assert 0.70 < OLDER_GEN_P50[conc] / statistics.median(asked) < 0.92


def test_codegen_workload_is_one_user_per_conversation_slot_replaying_six_rounds() -> None:
    work = codegen.workload(10)
    (phase,) = work.phases
    assert phase.concurrency == 10 and not phase.open_loop and phase.think_time_s == 0.0
    assert len(phase.sessions) == 10 and {len(s) for s in phase.sessions} == {6}
    convs = codegen.conversations(10, 10)
    for conv, rounds in zip(convs, phase.sessions, strict=True):
        for r, req in enumerate(rounds):
            turn = r % conv.turns
            assert req.output_tokens == conv.outputs[turn]
            assert req.prompt_tokens == sum(codegen.tokens(n) for n in (
                codegen.SHARED, conv.system, *conv.inputs[:turn + 1]))
            if turn:  # the context grows by the user prompts: the last turn is a prefix
                prev = rounds[r - 1].keys
                assert req.keys[:len(prev)] == prev
            else:  # a restarted conversation sends round 0's prompt again
                assert req.keys == rounds[0].keys
    # every conversation starts with the same shared 3,000-token system prompt
    shared = codegen.tokens(codegen.SHARED) // work.chunk_size
    assert len({s[0].keys[:shared] for s in phase.sessions}) == 1
    assert len({s[0].keys[:shared + 1] for s in phase.sessions}) == 10


def _fake(arrival: list[float], ttft: list[float], end: list[float]) -> RunResult:
    n = len(arrival)
    return RunResult(arrival, ttft, end, {"gpu": [0] * n}, [0] * n, [0.0])


def test_codegen_report_drops_requests_past_the_300_s_timeout_and_ends_them_there() -> None:
    reqs = [Request(0, (), 1_000, 10, 0), Request(1, (), 2_000, 20, 1),
            Request(2, (), 4_000, 40, 2)]
    out = _fake([0.0, 10.0, 20.0], [1.0, 12.0, 50.0], [100.0, 200.0, 20.0 + 301.0])
    rep = codegen.report(reqs, out)
    span = 20.0 + codegen.TIMEOUT_S  # the failed request ends at its timeout
    assert rep.in_tokens_s == pytest.approx(3_000 / span)
    assert rep.out_tokens_s == pytest.approx(30 / span)
    assert rep.success == pytest.approx(2 / 3)
    assert rep.ttft_p90_s == pytest.approx(1.0 + 0.9 * (2.0 - 1.0))  # successes only


def test_codegen_report_keeps_a_request_that_ends_exactly_at_the_timeout() -> None:
    reqs = [Request(0, (), 1_000, 10, 0)]
    rep = codegen.report(reqs, _fake([5.0], [6.0], [5.0 + codegen.TIMEOUT_S]))
    assert rep.success == 1.0 and rep.in_tokens_s == pytest.approx(1_000 / codegen.TIMEOUT_S)


def test_codegen_rows_are_every_concurrency_in_out_and_ttft_p90() -> None:
    rows = codegen.rows()
    assert len(rows) == 3 * len(codegen.PUBLISHED) == 30
    assert {r.published for r in rows} >= {15168.5, 117.5, 25.7, 37699.2, 548.1, 175.1}
    assert all(math.isfinite(r.published) and "7c4b49aa" in r.source for r in rows)


# prefix% of results.txt's k8 section (vLLM's prefix-cache hit rate over the run)
PUBLISHED_PREFIX_HIT = {10: 0.363, 30: 0.095}


def test_routing_per_connection_would_hit_the_cache_far_more_than_the_run_did() -> None:
    # Why the rows route at random per request: per connection, as the client's source
    # implies, every draw of the Service hits the prefix cache more than 1.5x the published
    # rate and more than any draw of per-request random routing, whose median lies less
    # than half as far from the published rate as the per-connection median
    for conc, published in PUBLISHED_PREFIX_HIT.items():
        per_connection = [codegen.connection_replay(conc, s).prefix_hit
                          for s in llmd.ROUTER_SEEDS]
        per_request = [codegen.replay(conc, s).prefix_hit for s in llmd.ROUTER_SEEDS]
        assert min(per_connection) > 1.5 * published, (conc, per_connection)
        assert max(per_request) < min(per_connection), (conc, per_request, per_connection)
        off_request = abs(statistics.median(per_request) - published)
        off_connection = abs(statistics.median(per_connection) - published)
        assert off_request < off_connection / 2, (conc, per_request, per_connection)
