"""Batching, queueing and caching rules of the event loop, each stated as arithmetic."""

from __future__ import annotations

import dataclasses
import random

import pytest

from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import engine_for
from lmikit.sim._loop import CopyConfig, run
from lmikit.sim._routers import KvAware, LeastOutstanding, RandomRouter
from lmikit.sim._tiers import GpuCache, chunk_keys
from lmikit.sim._workloads import Phase, Request, Workload, multi_turn_chat, rag
from tests.conftest import compiled_by_mypyc

ENGINE = engine_for("Qwen/Qwen3-8B", "ml.p4de.24xlarge",
                    coeff=Coefficients(request_overhead_s=0.01))
TOK = ENGINE.coeff.tokenize_s_per_token


def tok(tokens: int) -> float:
    """vLLM's API server tokenizing a prompt before the engine queues it."""
    return tokens * TOK


def trace(*reqs: tuple[float, list[tuple[int, int]], int]) -> Workload:
    requests = [Request(i, chunk_keys(segs, 256), sum(n for _, n in segs), out, session=i,
                        arrival_s=t) for i, (t, segs, out) in enumerate(reqs)]
    return Workload("t", [Phase("t", [[r] for r in requests], open_loop=True)], 256)


def copy(**kw: int) -> CopyConfig:
    base = {"gpu_tokens": 1_000_000, "chunk_size": 256, "max_batch_size": 64}
    return CopyConfig(ENGINE, **{**base, **kw})  # type: ignore[arg-type]


def test_lone_request_ttft_is_prefill_plus_overhead() -> None:
    out = run(trace((0.0, [(1, 5_000)], 1)), [copy()], LeastOutstanding())
    assert out.ttft[0] == pytest.approx(tok(5_000) + ENGINE.prefill_s(5_000, 0) + 0.01)


def test_a_prompt_cached_whole_still_prefills_its_last_token() -> None:
    # a chunk-aligned prompt sent again hits every chunk, but vLLM computes its last token
    # for the logits (the hit is capped at num_tokens - 1): one pass, not a free first token
    out = run(trace((0.0, [(1, 512)], 1), (5.0, [(1, 512)], 1)), [copy()], LeastOutstanding())
    assert out.served["gpu"][1] == 512
    assert out.ttft[1] - out.arrival[1] == pytest.approx(
        tok(512) + ENGINE.prefill_s(1, 512) + 0.01)


def test_second_request_queues_behind_the_first_prefill() -> None:
    out = run(trace((0.0, [(1, 5_000)], 1), (0.0, [(2, 5_000)], 1)), [copy()],
              LeastOutstanding())
    p = ENGINE.prefill_s(5_000, 0)
    assert out.ttft[1] == pytest.approx(tok(5_000) + 2 * p + 0.01)


def test_a_prompt_is_tokenized_before_it_joins_the_queue() -> None:
    # a 100,000-token prompt is still being tokenized (~0.2 s) when a 1,000-token one
    # arrives 10 ms later: the short one is queued, and prefilled, first
    work = trace((0.0, [(1, 100_000)], 1), (0.01, [(2, 1_000)], 1))
    out = run(work, [copy()], LeastOutstanding())
    assert out.ttft[1] == pytest.approx(0.01 + tok(1_000) + ENGINE.prefill_s(1_000, 0) + 0.01)
    assert out.ttft[1] < out.ttft[0]
    assert out.copy_of == [0, 0]


def test_a_cached_prompt_is_tokenized_in_full() -> None:
    doc = (1, 25_600)
    work = trace((0.0, [doc, (2, 100)], 1), (30.0, [doc, (3, 100)], 1))
    out = run(work, [copy()], LeastOutstanding())
    assert out.served["gpu"][1] == 25_600
    assert out.ttft[1] - 30.0 == pytest.approx(
        tok(25_700) + ENGINE.prefill_s(100, 25_600) + 0.01)


def test_a_prompt_sent_as_token_ids_is_not_tokenized() -> None:
    # vLLM's completions API takes a list of ints as the prompt and skips its tokenizer
    text = trace((0.0, [(1, 8_192)], 1))
    ids = Workload("t", [Phase("t", [[dataclasses.replace(r, pretokenized=True)]
                                      for r in text.phases[0].sessions[0]], open_loop=True)],
                   256)
    as_text = run(text, [copy()], LeastOutstanding()).ttft[0]
    as_ids = run(ids, [copy()], LeastOutstanding()).ttft[0]
    assert as_ids == pytest.approx(ENGINE.prefill_s(8_192, 0) + 0.01)
    assert as_text - as_ids == pytest.approx(tok(8_192))


def test_max_batch_size_holds_requests_until_one_finishes() -> None:
    work = trace((0.0, [(1, 1_000)], 50), (0.0, [(2, 1_000)], 50))
    out = run(work, [copy(max_batch_size=1)], LeastOutstanding())
    assert out.ttft[1] - out.arrival[1] >= out.end[0] - 0.01 - 1e-9


class _Probe:
    """Routes to copy 0 and notes (queued, num_waiting) of it at each pick."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def pick(self, req: Request, fleet: list) -> int:
        self.seen.append((fleet[0].queued, fleet[0].num_waiting))
        return 0


def test_vllm_counts_as_waiting_only_what_its_next_step_cannot_start() -> None:
    # pretokenized prompts join at once: 5,000 tokens prefill; 1,000 and 3,000 are admitted
    # behind it and fit the 8,192-token step budget it leaves (3,192: the second starts in
    # part); a fourth has no budget left; a fifth finds no room in a 10,000-token pool
    sizes = [5_000, 1_000, 3_000, 500, 600]
    reqs = [Request(i, chunk_keys([(i + 1, n)], 256), n, 1, session=i, arrival_s=0.0,
                    pretokenized=True) for i, n in enumerate(sizes)]
    probe = Request(9, chunk_keys([(99, 256)], 256), 256, 1, session=9, arrival_s=1e-6,
                    pretokenized=True)
    work = Workload("t", [Phase("t", [[r] for r in [*reqs, probe]], open_loop=True)], 256)
    rtr = _Probe()
    run(work, [copy(gpu_tokens=10_000)], rtr)
    assert ENGINE.coeff.prefill_chunk_tokens == 8_192
    queued, waiting = rtr.seen[-1]  # as the probe arrives
    assert (queued, waiting) == (4, 2)  # 3 admitted behind the prefill + 1 kept out; 1 + 1


def test_the_front_door_fails_what_arrives_past_its_limit_and_no_copy_sees_it() -> None:
    # three at t=0 behind a door of two: the third fails on arrival; one sent after both
    # have ended is served again
    work = trace((0.0, [(1, 1_000)], 50), (0.0, [(2, 1_000)], 50), (0.0, [(3, 1_000)], 50),
                 (60.0, [(4, 1_000)], 50))
    out = run(work, [copy(), copy()], LeastOutstanding(), max_in_flight=2)
    assert out.failed == [False, False, True, False]
    assert out.end[2] == out.arrival[2] == 0.0
    assert out.ttft[2] != out.ttft[2]  # no first token (NaN)
    assert out.copy_of[2] == -1 and out.served["gpu"][2] == 0
    assert out.end[1] < 60.0 and out.ttft[3] < out.end[3]
    # the failed request takes no room: the served ones run as they do with no door
    free = run(trace((0.0, [(1, 1_000)], 50), (0.0, [(2, 1_000)], 50)), [copy(), copy()],
               LeastOutstanding())
    assert out.ttft[:2] == free.ttft and out.end[:2] == free.end
    # no door, no failures
    assert run(work, [copy(), copy()], LeastOutstanding()).failed == [False] * 4


def test_a_closed_loop_user_whose_request_fails_sends_the_next() -> None:
    reqs = [Request(i, chunk_keys([(i, 500)], 256), 500, 20, session=i) for i in range(4)]
    work = Workload("c", [Phase("c", [[r] for r in reqs], concurrency=3)], 256)
    out = run(work, [copy()], LeastOutstanding(), max_in_flight=2)
    # the third user's request fails at once and it sends the next, which the door still
    # turns away: both served requests are in flight until t > 0
    assert out.failed == [False, False, True, True]
    assert out.arrival[3] == out.end[2] == 0.0
    assert min(out.end[:2]) > 0.0


def test_a_negative_front_door_is_refused() -> None:
    with pytest.raises(ValueError, match="max_in_flight must be 0"):
        run(trace((0.0, [(1, 1_000)], 5)), [copy()], LeastOutstanding(), max_in_flight=-1)


def test_kv_pool_admits_only_what_fits() -> None:
    work = trace((0.0, [(1, 3_000)], 100), (0.0, [(2, 3_000)], 100))
    out = run(work, [copy(gpu_tokens=5_000)], LeastOutstanding())
    assert out.ttft[1] >= out.end[0] - 0.01 - 1e-9  # 3,100 + 3,100 > 5,000: waits


def test_repeat_hits_gpu_prefix_cache_and_prefills_only_the_suffix() -> None:
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 100)], 1), (10.0, [doc, (3, 100)], 1))
    out = run(work, [copy()], LeastOutstanding())
    assert out.served["gpu"][1] == 2_560
    assert out.ttft[1] - 10.0 == pytest.approx(tok(2_660) + ENGINE.prefill_s(100, 2_560) + 0.01)


def test_cpu_hit_pays_retrieve_and_the_first_request_pays_the_store() -> None:
    doc, other = (1, 2_560), (9, 2_560)
    work = trace((0.0, [doc, (2, 100)], 1), (5.0, [other, (3, 100)], 1),
                 (10.0, [doc, (4, 100)], 1))
    cfg = copy(gpu_tokens=2_700, cpu_tokens=100_000)  # the GPU pool holds one document
    out = run(work, [cfg], LeastOutstanding())
    # every request of a copy with LMCache first waits for LMCache's lookup of its 10 chunks
    lookup = ENGINE.lookup_s(10)
    assert out.ttft[0] == pytest.approx(tok(2_660) + lookup + ENGINE.prefill_s(2_660, 0)
                                        + ENGINE.store_s(2_560) + 0.01)
    assert (out.served["gpu"][2], out.served["cpu"][2]) == (0, 2_560)
    assert out.ttft[2] - 10.0 == pytest.approx(
        tok(2_660) + lookup + ENGINE.retrieve_s("cpu", 2_560) + ENGINE.prefill_s(100, 2_560)
        + 0.01)


def test_decode_takes_one_step_per_output_token() -> None:
    out = run(trace((0.0, [(1, 1_000)], 11)), [copy()], LeastOutstanding())
    step = ENGINE.decode_step_s(1, 1_000)
    assert out.end[0] - out.ttft[0] == pytest.approx(10 * step, rel=0.01)


def test_remote_tier_is_shared_by_every_copy() -> None:
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 10)], 1), (5.0, [doc, (3, 10)], 1))
    cfg = copy(cpu_tokens=10_000, remote=True)
    for seed in range(10):  # whichever copy the second lands on, it finds the document
        out = run(work, [cfg, cfg], RandomRouter(random.Random(seed)))
        assert out.served["gpu"][1] + out.served["cpu"][1] + out.served["remote"][1] == 2_560


def test_local_tiers_are_per_copy() -> None:
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 10)], 1), (5.0, [doc, (3, 10)], 1))
    cfg = copy(cpu_tokens=10_000)
    outs = [run(work, [cfg, cfg], RandomRouter(random.Random(s))) for s in range(20)]
    other = [o for o in outs if o.copy_of[0] != o.copy_of[1]]
    assert other and all(o.served["cpu"][1] == o.served["gpu"][1] == 0 for o in other)


def test_a_shared_prefix_is_held_once_so_more_requests_fit_the_pool() -> None:
    # two 3,000-token prompts sharing 2,560 tokens: 2,560 + 2 x (440 + 100) < 4,000, so the
    # second is admitted while the first decodes (vLLM shares the prefix blocks)
    doc = (1, 2_560)
    work = trace((0.0, [doc, (2, 440)], 100), (0.5, [doc, (3, 440)], 100))
    out = run(work, [copy(gpu_tokens=4_000)], LeastOutstanding())
    assert out.served["gpu"][1] == 2_560
    assert out.ttft[1] < out.end[0]


def test_unshared_prompts_that_do_not_fit_together_wait() -> None:
    work = trace((0.0, [(1, 3_000)], 100), (0.5, [(2, 3_000)], 100))
    out = run(work, [copy(gpu_tokens=4_000)], LeastOutstanding())
    assert out.ttft[1] >= out.end[0] - 0.01 - 1e-9


def test_next_turn_hits_the_previous_answer_in_the_gpu_cache() -> None:
    # turn 2 repeats turn 1's prompt (512) and answer (512): all four full chunks hit
    t1 = Request(0, chunk_keys([(1, 512)], 256), 512, 512, session=0)
    t2 = Request(1, chunk_keys([(1, 512), (2, 512), (3, 100)], 256), 1_124, 10, session=0)
    work = Workload("chat", [Phase("c", [[t1, t2]], concurrency=1)], 256)
    out = run(work, [copy()], LeastOutstanding())
    assert out.served["gpu"][1] == 1_024


def test_prefill_beside_a_batch_runs_in_mixed_steps() -> None:
    m = ENGINE
    dur, steps = m.mixed_prefill_s(20_000, 0, 100, 300_000)
    assert steps == -(-20_000 // (m.coeff.prefill_chunk_tokens - 100))
    compute = m.prefill_s(20_000, 0) + steps * 2 * m.active_params * 100 / (312e12 * 0.55)
    memory = steps * (m.weight_bytes + 300_000 * m.kv_bytes_per_token) / (2039e9 * 0.75)
    assert dur == pytest.approx(max(compute, memory) + steps * m.coeff.decode_step_overhead_s)
    assert m.mixed_prefill_s(1_000, 0, 0, 0) == (m.prefill_s(1_000, 0), 0)


def test_prompts_queued_together_fill_one_step_budget_in_order() -> None:
    # vLLM's Scheduler.schedule (vllm/v1/core/sched/scheduler.py) gives each step's token
    # budget to the running requests, then to waiting ones while budget is left: three
    # 32-token prompts sent together take one step's read of the weights, not three, and
    # the two behind the first add only their FLOPs to it
    out = run(trace(*[(0.0, [(i, 32)], 1) for i in (1, 2, 3)]), [copy()], LeastOutstanding())
    alone = ENGINE.prefill_s(32, 0)
    packed = ENGINE.packed_prefill_s(32, 0)
    assert out.ttft[0] == pytest.approx(tok(32) + alone + 0.01)
    assert out.ttft[1] - out.ttft[0] == pytest.approx(packed)
    assert out.ttft[2] - out.ttft[1] == pytest.approx(packed)
    assert packed < alone / 2  # 32 tokens alone pay for a pass over 16 GB of weights


def test_a_prompt_takes_what_the_step_before_left_and_pays_steps_for_the_rest() -> None:
    budget = ENGINE.coeff.prefill_chunk_tokens
    first, second = budget - 192, 1_000  # the first prefill's one step leaves 192 tokens
    # the second is sent once the first is queued, and queues while it prefills
    out = run(trace((0.0, [(1, first)], 1), (tok(first), [(2, second)], 1)), [copy()],
              LeastOutstanding())
    assert out.ttft[1] - out.ttft[0] == pytest.approx(
        ENGINE.packed_prefill_s(192, 0) + ENGINE.prefill_s(second - 192, 192))
    # sent after the first prefill ended, the same prompt has no step to share
    late = run(trace((0.0, [(1, first)], 1), (2.0, [(2, second)], 1)), [copy()],
               LeastOutstanding())
    assert late.ttft[1] - 2.0 == pytest.approx(tok(second) + ENGINE.prefill_s(second, 0) + 0.01)


def test_output_takes_room_as_generated_and_the_newest_is_preempted_when_full() -> None:
    # 1,000 + 1,000 prompt tokens fit a 4,000-token pool, 2 x 3,000 with outputs do not:
    # the second starts at once (vLLM allocates output blocks as they fill), is preempted
    # when the pool fills, and resumes by recomputing once the first has finished
    work = trace((0.0, [(1, 1_000)], 2_000), (0.5, [(2, 1_000)], 2_000))
    out = run(work, [copy(gpu_tokens=4_000)], LeastOutstanding())
    assert out.ttft[1] < out.end[0] < out.end[1]
    alone = run(trace((0.0, [(2, 1_000)], 2_000)), [copy(gpu_tokens=4_000)],
                LeastOutstanding())
    assert out.end[1] - out.end[0] > 0.5 * (alone.end[0] - alone.ttft[0])  # it waited


SMALL = engine_for("Qwen/Qwen3-8B", "ml.p4de.24xlarge",
                   coeff=Coefficients(request_overhead_s=0.01, prefill_chunk_tokens=2_048))


def small(**kw: int) -> CopyConfig:
    """A copy with a 2,048-token step budget that admits as vLLM before 0.19 (next chunk)."""
    base = {"gpu_tokens": 1_000_000, "chunk_size": 256, "max_batch_size": 64,
            "reserve_full_prompt": False}
    return CopyConfig(SMALL, **{**base, **kw})  # type: ignore[arg-type]


def test_a_long_prompt_starts_its_prefill_before_the_whole_prompt_fits() -> None:
    # a 4,000-token request decodes 400 tokens in a 12,000-token pool; a 10,000-token prompt
    # arriving meanwhile needs room for one 2,048-token step to be admitted (vLLM allocates
    # blocks step by step), computes what fits, and only its last chunks wait for the first
    # request to finish: its first token comes less than a full prefill after that
    work = trace((0.0, [(1, 4_000)], 400), (0.2, [(2, 10_000)], 1))
    out = run(work, [small(gpu_tokens=12_000)], LeastOutstanding())
    room_for_all = out.end[0] - 0.01  # the first request's blocks are freed here
    assert out.ttft[1] >= room_for_all
    assert out.ttft[1] - room_for_all < 0.5 * SMALL.prefill_s(10_000, 0)
    assert out.peak_kv_usage[0] <= 1.0


def test_a_finished_requests_output_displaces_older_cached_prefixes() -> None:
    # vLLM appends every block a request frees to the tail of its free queue, cached or not,
    # and takes new blocks from the head (BlockPool.free_blocks, get_new_blocks). A 10-chunk
    # pool: prompt X (4 chunks) is cached at 0.1 s; a request with a 2-chunk prompt frees
    # its 768 output tokens (3 chunks) after it; a new 4-chunk prompt then needs room and
    # takes it from X, freed longest ago (its tail first), not from that output: X comes
    # back with its first chunk only
    work = trace((0.0, [(1, 1_024)], 1), (10.0, [(2, 512)], 768), (40.0, [(3, 1_024)], 1),
                 (60.0, [(1, 1_024)], 1))
    out = run(work, [copy(gpu_tokens=10 * 256)], LeastOutstanding())
    assert out.end[1] < 40.0  # one request at a time
    assert out.served["gpu"][3] == 256
    assert out.evictions["gpu"] == 3


# a wheel's tiers are compiled by mypyc (setup.py): their classes cannot be monkeypatched;
# test_compiled.py holds the compiled loop to the results of the Python one tested here
@pytest.mark.skipif(compiled_by_mypyc("lmikit.sim._tiers"),
                    reason="monkeypatches GpuCache, compiled in this install")
def test_a_preempted_request_loads_its_output_still_cached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM hashes generated blocks too (Request.append_output_token_ids) and, readmitting a
    # preempted request, matches them after its prompt's (get_computed_blocks): blocks not
    # evicted meanwhile are not computed again. A 12-chunk pool: the second request is
    # preempted with 411 tokens generated; with its prompt's 200-token tail that is two
    # chunks, and the first request ends before it needs their room, so the second
    # computes 99 tokens on readmission instead of 611
    work = trace((0.0, [(1, 1_024)], 560), (0.1, [(2, 1_224)], 2_000))
    out = run(work, [copy(gpu_tokens=12 * 256)], LeastOutstanding())
    monkeypatch.setattr(GpuCache, "take", lambda self, keys: 0)
    again = run(work, [copy(gpu_tokens=12 * 256)], LeastOutstanding())
    assert again.ttft == out.ttft and again.end[0] == out.end[0]
    assert again.end[1] - out.end[1] == pytest.approx(
        ENGINE.prefill_s(611, 1_024) - ENGINE.prefill_s(99, 1_536), rel=1e-6)


def test_from_vllm_0_19_a_prompt_waits_until_its_whole_uncached_part_fits() -> None:
    # scheduler_reserve_full_isl (vLLM 0.19.0 on, the default here): 6,000 free tokens do not
    # admit a 10,000-token prompt even though its 2,048-token first step fits; it starts once
    # the decoding request frees its room, then prefills all of it at full speed
    work = trace((0.0, [(1, 6_000)], 300), (0.2, [(2, 10_000)], 1))
    out = run(work, [small(gpu_tokens=12_000, reserve_full_prompt=True)], LeastOutstanding())
    room_for_all = out.end[0] - 0.01
    assert out.ttft[1] - room_for_all == pytest.approx(SMALL.prefill_s(10_000, 0) + 0.01,
                                                       rel=0.01)
    older = run(work, [small(gpu_tokens=12_000)], LeastOutstanding())
    assert older.ttft[1] < out.ttft[1]  # before 0.19 its first chunks ran while it waited


def test_a_prompt_is_admitted_when_its_next_chunk_fits() -> None:
    # 6,000 free tokens: a 10,000-token prompt with a 2,048-token budget starts at once
    # beside a decoding request (its first token still waits for room for all of it); with
    # an 8,192-token budget not even its first step fits, so it starts after the first ends
    work = trace((0.0, [(1, 6_000)], 300), (0.2, [(2, 10_000)], 1))
    chunked = run(work, [small(gpu_tokens=12_000)], LeastOutstanding())
    whole = run(work, [copy(gpu_tokens=12_000)], LeastOutstanding())
    p = SMALL.prefill_s(10_000, 0)
    assert whole.ttft[1] - (whole.end[0] - 0.01) == pytest.approx(p + 0.01, rel=0.01)
    assert chunked.ttft[1] - (chunked.end[0] - 0.01) < p
    assert chunked.ttft[1] >= chunked.end[0] - 0.01


def test_nothing_is_admitted_beyond_the_pool() -> None:
    rng = random.Random(7)
    reqs = [(rng.uniform(0, 5), [(i, rng.randrange(500, 9_000))], rng.randrange(1, 600))
            for i in range(40)]
    work = trace(*sorted(reqs))
    for cfg in (small(gpu_tokens=16_000), copy(gpu_tokens=16_000)):
        out = run(work, [cfg], LeastOutstanding())
        assert all(e == e for e in out.end)  # every request finished
        assert 0.9 < out.peak_kv_usage[0] <= 1.0


def test_the_newest_request_is_preempted_first() -> None:
    # three 1,000-token prompts decoding 3,000 tokens each in a 6,000-token pool: the pool
    # fills, the newest goes back to waiting first, then the next newest; they finish in
    # the order they came, and the oldest never stops
    work = trace((0.0, [(1, 1_000)], 3_000), (0.1, [(2, 1_000)], 3_000),
                 (0.2, [(3, 1_000)], 3_000))
    out = run(work, [copy(gpu_tokens=6_000)], LeastOutstanding())
    assert out.end[0] < out.end[1] < out.end[2]
    alone = run(trace((0.0, [(1, 1_000)], 3_000)), [copy(gpu_tokens=6_000)],
                LeastOutstanding())
    assert out.end[0] - out.ttft[0] < 1.5 * (alone.end[0] - alone.ttft[0])
    assert out.end[2] - out.end[1] > 0.5 * (alone.end[0] - alone.ttft[0])  # it waited


def test_a_stalled_prefill_is_preempted_before_older_decodes() -> None:
    # the 10,000-token prompt stalls for room; the decoding request's growth then fills the
    # pool and vLLM preempts the newest: the prefill, not the decode, goes back to waiting
    work = trace((0.0, [(1, 4_000)], 3_000), (0.2, [(2, 10_000)], 1))
    out = run(work, [small(gpu_tokens=12_000)], LeastOutstanding())
    alone = run(trace((0.0, [(1, 4_000)], 3_000)), [small(gpu_tokens=12_000)],
                LeastOutstanding())
    assert out.ttft[1] >= out.end[0] - 0.01
    assert out.end[0] - out.ttft[0] < 1.3 * (alone.end[0] - alone.ttft[0])
    assert out.peak_kv_usage[0] <= 1.0


def _bounded_run(out, reqs, pool: int, eng, seed: int) -> None:
    """What every run of random requests on 256-token chunks must keep."""
    assert all(a <= t <= e for a, t, e in zip(out.arrival, out.ttft, out.end, strict=True))
    # preemption is checked at events, not every step: the pool may be over by a chunk
    assert max(out.peak_kv_usage) <= 1 + 1 / (pool // 256) + 1e-9, seed
    # a request's tiers serve at most its prompt, counted for its last prefill only
    for rid, (_, segs, _) in enumerate(reqs):
        served = sum(per_request[rid] for per_request in out.served.values())
        assert served <= sum(n for _, n in segs), (seed, rid)
    # the run ends with the last request's last token (a finish lands request_overhead_s
    # after it), not at a rescheduled decode's stale time, so no copy is busier than it
    assert out.makespan_s == pytest.approx(max(out.end) - eng.coeff.request_overhead_s), seed
    assert all(b <= out.makespan_s + 1e-9 for b in out.busy_s), seed


@pytest.mark.parametrize("reserve_full_prompt", [True, False])
def test_random_workloads_finish_in_order_and_overfill_the_pool_by_at_most_a_chunk(
        reserve_full_prompt: bool) -> None:
    # preemption is checked at events, not every step: between two events the pool may be
    # over by up to one chunk, never more; every request finishes after its first token
    for seed in range(60):
        rng = random.Random(seed)
        eng = engine_for("Qwen/Qwen3-8B", "ml.p4de.24xlarge",
                         coeff=Coefficients(prefill_chunk_tokens=rng.choice([512, 2_048, 8_192])))
        pool = rng.choice([31, 63, 156]) * 256
        reqs = []
        for i in range(rng.randrange(5, 60)):
            segs = [(rng.randrange(3), rng.randrange(256, 4_000)),
                    (1_000 + i, rng.randrange(1, 2_000))]
            reqs.append((rng.uniform(0, 3), segs, rng.randrange(1, 800)))
        reqs = [r for r in sorted(reqs) if sum(n for _, n in r[1]) + r[2] + 256 <= pool]
        cfg = CopyConfig(eng, pool, 256, rng.choice([4, 16, 64]),
                         cpu_tokens=rng.choice([0, 50_000]),
                         reserve_full_prompt=reserve_full_prompt)
        out = run(trace(*reqs), [cfg] * rng.choice([1, 2]), RandomRouter(random.Random(seed)))
        _bounded_run(out, reqs, pool, eng, seed)


def test_random_workloads_over_every_tier_keep_the_pool_and_the_hit_counts_bounded() -> None:
    # Tighter pools, one-token batches, 256-token budgets, tokenized arrivals, disk and a
    # remote tier shared by up to three copies. A prefill that an arrival stalls must bring
    # the preemption of the growing decodes forward (the pool is over by at most a chunk),
    # and a request preempted and prefilled again counts the tiers of its last prefill
    # only: its served tokens never exceed its prompt.
    for seed in range(150):
        rng = random.Random(seed)
        eng = engine_for("Qwen/Qwen3-8B", rng.choice(["ml.p4de.24xlarge", "ml.g6e.12xlarge"]),
                         rng.choice([1, 2]), coeff=Coefficients(
                             prefill_chunk_tokens=rng.choice([256, 512, 2_048, 8_192])))
        pool = rng.choice([15, 31, 63, 156]) * 256
        reqs = []
        for i in range(rng.randrange(2, 80)):
            segs = [(rng.randrange(3), rng.randrange(1, 4_000)),
                    (1_000 + i, rng.randrange(1, 2_000))]
            reqs.append((rng.uniform(0, rng.choice([0.01, 3, 30])), segs, rng.randrange(1, 800)))
        reqs = [r for r in sorted(reqs) if sum(n for _, n in r[1]) + r[2] + 256 <= pool]
        if not reqs:
            continue
        full = rng.choice([True, False])
        cfg = CopyConfig(eng, pool, 256, rng.choice([1, 4, 16, 64]),
                         cpu_tokens=rng.choice([0, 2_000, 50_000]),
                         disk_tokens=rng.choice([0, 100_000]), remote=rng.choice([False, True]),
                         reserve_full_prompt=full)
        out = run(trace(*reqs), [cfg] * rng.choice([1, 2, 3]), RandomRouter(random.Random(seed)))
        _bounded_run(out, reqs, pool, eng, seed)


class _Recorder:
    """A router that keeps a clock and hears of finishes, as connection-aware routers do."""

    name = "recorder"

    def __init__(self) -> None:
        self.now = -1.0
        self.picks: list[tuple[int, float]] = []
        self.ends: list[tuple[int, float]] = []

    def pick(self, req: Request, fleet: object) -> int:
        self.picks.append((req.id, self.now))
        return 0

    def finished(self, request_id: int, t: float) -> None:
        self.ends.append((request_id, t))


def test_a_router_with_a_clock_and_a_finish_hook_hears_both() -> None:
    router = _Recorder()
    out = run(trace((0.5, [(1, 600)], 3), (2.0, [(2, 600)], 3)), [copy()], router)
    assert router.picks == [(0, 0.5), (1, 2.0)]  # ``now`` is the request's send time
    assert router.ends == [(0, out.end[0]), (1, out.end[1])]


class _InOrder:
    """A dispatcher that sends one request at a time, in a fixed order."""

    def __init__(self, order: list[Request]) -> None:
        self.order = list(order)

    def start(self) -> list[Request]:
        return [self.order.pop(0)]

    def finished(self, request_id: int) -> list[Request]:
        return [self.order.pop(0)] if self.order else []


def test_a_phase_dispatcher_decides_when_each_request_is_sent() -> None:
    reqs = [Request(i, chunk_keys([(i + 1, 512)], 256), 512, 4, session=i) for i in range(3)]
    # the sessions say all three at once; the dispatcher sends 2, then 0, then 1, one by one
    phase = Phase("t", [[r] for r in reqs], concurrency=3, dispatcher=_InOrder(
        [reqs[2], reqs[0], reqs[1]]))
    out = run(Workload("t", [phase], 256), [copy()], LeastOutstanding())
    assert out.arrival[2] == 0.0
    assert out.arrival[0] == pytest.approx(out.end[2])
    assert out.arrival[1] == pytest.approx(out.end[0])


@pytest.mark.parametrize("write_back", [True, False])
def test_a_disk_hit_is_written_back_to_the_cpu_tier_as_lmcache_does(write_back: bool) -> None:
    # LMCache's StorageManager.batched_get puts what it read from disk or a remote store into
    # its CPU tier (0.3.15 and 0.5.6; not 0.3.9 and earlier), so the next hit is a CPU hit.
    # The pool holds one document, the CPU tier two: X is on disk only when it comes back.
    docs = [1, 2, 3, 1, 2, 1]
    work = trace(*((5.0 * i, [(d, 1_024), (100 + i, 100)], 1) for i, d in enumerate(docs)))
    cfg = dataclasses.replace(copy(gpu_tokens=1_536, cpu_tokens=2_048, disk_tokens=100_000),
                              write_back=write_back)
    out = run(work, [cfg], LeastOutstanding())
    assert out.served["disk"][3] == 1_024  # X after Y and Z pushed it out of the CPU tier
    # X again: what the pool no longer holds comes from the CPU tier only if it was written
    # back there when it was read from disk
    beyond_gpu = 1_024 - out.served["gpu"][5]
    assert beyond_gpu > 0
    assert out.served["cpu"][5] == (beyond_gpu if write_back else 0)
    assert out.served["disk"][5] == (0 if write_back else beyond_gpu)


def test_lmcache_storing_a_chunk_its_cpu_tier_holds_leaves_it_where_it_was() -> None:
    # LMCache's CPU tier returns from a put of a key it holds without touching it
    # (LocalCPUBackend.submit_put_task, 0.3.3 and 0.5.6), so a prompt stored again after
    # its first chunk was evicted keeps its older chunks at the front of the LRU order.
    # The pool holds one 4-chunk document, the CPU tier 9 chunks: A (4) and B (4) fit, C's
    # 2 push out A's first chunk; A comes back (a miss: its first chunk is gone), and its
    # store adds that chunk and evicts its second, the oldest, not B's first.
    a, b, c = (1, 1_024), (2, 1_024), (3, 512)
    docs = [a, b, c, a, b, a]
    work = trace(*((5.0 * i, [d, (100 + i, 100)], 1) for i, d in enumerate(docs)))
    out = run(work, [copy(gpu_tokens=1_280, cpu_tokens=2_304)], LeastOutstanding())
    assert out.served["cpu"][3] == out.served["gpu"][3] == 0
    assert out.served["cpu"][4] == 1_024  # B whole in the CPU tier (the pool holds A)
    assert out.served["cpu"][5] + out.served["gpu"][5] < 1_024  # A's second chunk is gone


@pytest.mark.parametrize("think_time_s", [1e8, 1e9])
def test_a_run_whose_clock_runs_far_out_still_ends(think_time_s: float) -> None:
    """Past ~3e8 s a float's step is ~6e-8 s, larger than the time some last fraction of a
    decode token takes: the decode event was pushed for ever at the same time. A chat's
    think time puts the clock there (an hour between turns over 100,000 requests too)."""
    from lmikit.sim._scenario import deployment
    from lmikit.sim._workloads import multi_turn_chat
    from tests.conftest import deadline

    dep = deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
    work = multi_turn_chat(2_000, 8, 100, 4, requests=16, think_time_s=think_time_s)
    with deadline(30):
        out = run(work, dep.copies("cpu"), LeastOutstanding(), random.Random(0))
    assert len(out.end) == 16 and min(out.end) > 0 and max(out.end) > think_time_s


class _AsksEveryCopy(KvAware):
    """``KvAware`` without its index: every copy may hold all of a prompt."""

    @property
    def holders(self) -> None:
        return None

    @holders.setter
    def holders(self, value: object) -> None:
        pass


def test_kv_aware_routes_the_same_with_and_without_its_index() -> None:
    # a pool and a CPU tier far smaller than the corpus, so copies evict what they were sent
    work = rag(400, 256, 3, 0.8, 8, 24, requests=1500, system_tokens=0, seed=5)
    fleet = [copy(gpu_tokens=6_000, cpu_tokens=12_000, max_batch_size=8) for _ in range(12)]
    indexed = KvAware(busy_at=2)
    out = run(work, fleet, indexed)
    plain = run(work, fleet, _AsksEveryCopy(busy_at=2))
    assert indexed.holders  # the loop turned the index on
    assert out.copy_of == plain.copy_of and out.ttft == plain.ttft
    assert out.evictions == plain.evictions and out.evictions["gpu"] > 0
    # the next run, on a smaller fleet, starts with an empty index
    again = run(work, fleet[:5], indexed)
    assert again.copy_of == run(work, fleet[:5], _AsksEveryCopy(busy_at=2)).copy_of


def test_kv_aware_index_counts_answers_a_copy_cached_for_the_next_turn() -> None:
    # first turns shorter than a chunk: the chunk a turn's answer completes is cached on its
    # copy for the next turn (its first chunk), though no request starting with it was sent
    # there; the index must still list that copy
    work = multi_turn_chat(1_000, 8, 100, 16, requests=800, think_time_s=0.5)
    assert work.requests[0].keys == ()
    fleet = [copy(gpu_tokens=20_000, max_batch_size=8) for _ in range(6)]
    indexed = KvAware(busy_at=2)
    out = run(work, fleet, indexed)
    plain = run(work, fleet, _AsksEveryCopy(busy_at=2))
    assert out.copy_of == plain.copy_of and out.ttft == plain.ttft


def test_kv_aware_index_on_prompts_that_share_a_system_prompt() -> None:
    # every copy holds the shared start: the index bounds copies by how far past it they
    # were sent, and asks the best bounds first
    work = rag(300, 256, 3, 1.0, 8, 24, requests=1200, system_tokens=512, seed=2)
    fleet = [copy(gpu_tokens=8_000, cpu_tokens=10_000, max_batch_size=8) for _ in range(12)]
    out = run(work, fleet, KvAware(busy_at=2))
    plain = run(work, fleet, _AsksEveryCopy(busy_at=2))
    assert out.copy_of == plain.copy_of and out.ttft == plain.ttft
