"""The llm-d replays: what the published scorer configuration implies, checked on the replay."""

from __future__ import annotations

from collections import defaultdict

import pytest

from lmikit.sim.loop import run
from tests.unit.sim import llmd


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
