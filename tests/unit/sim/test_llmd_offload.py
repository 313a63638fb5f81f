"""The llm-d tiered prefix-cache replay: what its module docstring claims, checked."""

from __future__ import annotations

import pytest

from tests.unit.sim import llmd_offload as offload


def test_offload_workload_cycles_450_shuffled_prompts_with_45_in_flight() -> None:
    work = offload.workload(offload.SYSTEM["high"])
    reqs = work.requests
    assert len(reqs) == 2_700 and len(work.phases) == 1
    assert work.phases[0].concurrency == 45 and not work.phases[0].open_loop
    assert len({r.keys for r in reqs}) == 450
    assert all(reqs[n].keys == reqs[n + 450].keys for n in range(len(reqs) - 450))
    assert {r.prompt_tokens for r in reqs} == {31_560 + 269}  # 30,000 + 256 ids, re-encoded
    assert {r.output_tokens for r in reqs} == {1_024}
    assert [r.session for r in reqs[:450]] != sorted(r.session for r in reqs[:450])  # shuffled


def test_offload_estimate_scorers_index_only_system_prompts_and_hold_every_group() -> None:
    # the hashed window ends inside the shorter system prompt, so a request's blocks name
    # its group alone; a pod's LRU holds the window of all 45 groups, so neither scorer
    # forgets where a group went and the two act as one prefix scorer of weight 2
    capacity, hashed = offload.router().approximate
    assert hashed * offload.CHUNK <= min(offload.SYSTEM.values())
    assert capacity >= offload.GROUPS * hashed


def test_offload_copies_have_the_guides_pool_and_100_gb_per_worker_of_lmcache() -> None:
    base, lmc = offload.copies(False), offload.copies(True)
    assert len(base) == len(lmc) == 8
    assert {c.gpu_tokens for c in base + lmc} == {9_271 * 16}
    assert {c.cpu_tokens for c in base} == {0}
    kv_bytes_per_token = base[0].engine.kv_bytes_per_token  # Qwen3-32B, both ranks
    assert {c.cpu_tokens for c in lmc} == {2 * 100 * 2**30 // kv_bytes_per_token}


@pytest.mark.parametrize("system, throughput, e2e_mean", [
    (30_000, 38_534.8, 37.8), (30_000, 46_910.6, 30.8),
    (8_000, 23_389.6, 18.4), (8_000, 22_772.5, 18.9)])
def test_offload_published_figures_imply_a_little_under_45_in_flight(system, throughput,
                                                                      e2e_mean) -> None:
    # Little's law on the guide's tables: requests/s x mean end-to-end latency, a request's
    # tokens counted as inference-perf counts them (the prompt re-encoded, the output)
    tokens = offload.sent(system) + offload.sent(offload.QUESTION) + offload.OUTPUT
    assert 43.9 < throughput / tokens * e2e_mean < 44.5
