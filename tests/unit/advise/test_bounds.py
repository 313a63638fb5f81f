"""The TTFT lower bound that prunes candidates never exceeds what the simulator gives."""

from __future__ import annotations

import pytest

from lmikit import sim
from lmikit.advisor._runs import reduced, repeated_tokens, ttft_bounds, uncached

WORKLOADS = {
    "long-doc-qa": lambda: sim.long_doc_qa(12, 6000, 20, 4),
    "rag": lambda: sim.rag(300, 512, 4, 1.0, 20, 8, requests=200),
    "chat": lambda: sim.multi_turn_chat(6000, 4, 20, 6, requests=120, think_time_s=0.5),
}
LAYOUTS = [("ml.g6e.xlarge", 1, 1), ("ml.g6e.12xlarge", 4, 2), ("ml.p4d.24xlarge", 2, 3),
           ("ml.g5.2xlarge", 1, 2)]


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize(("instance", "tp", "copies"), LAYOUTS)
def test_ttft_bound_is_below_every_simulated_percentile(workload: str, instance: str, tp: int,
                                                        copies: int) -> None:
    work = WORKLOADS[workload]()
    dep = sim.deployment("Qwen/Qwen2.5-7B-Instruct", instance, tp=tp, instances=copies)
    bound = ttft_bounds(dep, uncached(work))
    modes = [m for m in ("off", "cpu", "cpu+disk") if dep.mode_problem(m) is None]
    for r in sim.simulate(dep, work, ["random", "sticky_session"], modes, seed=3):
        assert bound["ttft_p50_s"] <= r.ttft_p50_s
        assert bound["ttft_p90_s"] <= r.ttft_p90_s


def test_ttft_bound_is_close_when_nothing_queues() -> None:
    work = sim.long_doc_qa(6, 8000, 10, 1)  # one user: every query alone, its document cached
    dep = sim.deployment("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.2xlarge")
    bound = ttft_bounds(dep, uncached(work))["ttft_p50_s"]
    simulated = sim.simulate(dep, work, ["sticky_session"], ["off"])[0].ttft_p50_s
    assert 0.5 * simulated < bound <= simulated


def test_uncached_counts_what_no_other_request_sends() -> None:
    work = sim.long_doc_qa(3, 1000, 10, 2, chunk_size=256)
    # the query round repeats each document: only the question and the partial chunk are new
    assert [u.new_tokens for u in uncached(work)] == [1012 - 3 * 256] * 3
    assert repeated_tokens(work) == 3 * 3 * 256


def test_reduced_keeps_the_first_sessions_of_each_phase_numbered_from_zero() -> None:
    work = sim.long_doc_qa(1000, 1000, 10, 4)
    small = reduced(work, 100)
    assert [len(p.sessions) for p in small.phases] == [50, 50]
    assert [r.id for r in small.requests] == list(range(100))
    assert small.phases[1].sessions[0][0].keys == work.phases[1].sessions[0][0].keys
    assert reduced(sim.long_doc_qa(10, 1000, 10, 4), 100) is None
