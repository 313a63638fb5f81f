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
    out = run(work, llmd.copies(setup), rtr)
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
