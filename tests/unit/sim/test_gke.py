"""The GKE tiered-storage replay: the group-count rule and the workload sglang sends."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.sim import gke


def test_group_tokens_rule_reproduces_the_published_example_in_test_1s_range() -> None:
    # --gsp-num-groups 80 at 1,000 tokens: 80 x (1,000 + 20 x (256 + 512)) = 1,308,800,
    # which the blog rounds into Test 1's "1.1M - 1.3M"
    assert 80 * gke.group_tokens(1_000) == 1_308_800
    assert round(80 * gke.group_tokens(1_000) / 1e6, 1) == 1.3
    # counting prompts only, or every request's whole prompt, misses that range
    assert 80 * (1_000 + 20 * 256) < 1.1e6 < 1.3e6 < 80 * 20 * (1_000 + 256)


@pytest.mark.parametrize(("test", "system", "expected"), [
    ("Test 2", 5_000, 204), ("Test 2", 100_000, 36),
    ("Test 3", 1_000, 804), ("Test 3", 100_000, 114)])
def test_groups_divide_the_midpoint_total_cache_by_one_groups_tokens(test, system,
                                                                       expected) -> None:
    assert gke.groups(test, system) == expected
    low, high = gke.TOTAL_CACHE[test]
    assert low <= expected * gke.group_tokens(system) * 1.01
    assert expected * gke.group_tokens(system) <= high * 1.01


def test_each_test_spills_into_the_tier_the_blog_says_on_the_planners_sizes() -> None:
    # Test 1 fits HBM; Test 2 exceeds HBM but not HBM + CPU; Test 3 exceeds HBM + CPU but
    # not all three: the per-worker 128 / 640 GB sizes give the blog's 1 Ti and 5 Ti
    dep = gke._deployment()
    cpu, disk = dep.tier_tokens["cpu+disk"]
    assert dep.tier_tokens["cpu"] == (cpu, 0)
    assert 1.3e6 < dep.gpu_tokens
    assert dep.gpu_tokens < 4.0e6 and 4.3e6 < dep.gpu_tokens + cpu
    assert dep.gpu_tokens + cpu < 12.6e6 and 13.7e6 < dep.gpu_tokens + cpu + disk


def test_workload_sends_every_prompt_once_shuffled_after_one_unmeasured_warmup() -> None:
    work = gke.workload(10, 5_000)
    warmup, bench = work.phases
    assert not warmup.measured and warmup.sessions[0][0].output_tokens == 32
    assert warmup.sessions[0][0].keys == bench.sessions[0][0].keys
    assert bench.measured and bench.concurrency == 200 and not bench.open_loop
    reqs = [s[0] for s in bench.sessions]
    assert len(reqs) == 200 and len({r.keys for r in reqs}) == 200
    # 5,000 + 256 random ids decoded to text, re-encoded by vLLM at 1.043 tokens per id
    assert {(r.prompt_tokens, r.output_tokens) for r in reqs} == {(5_215 + 267, 512)}
    # a group's 20 prompts share its system prompt's 20 full chunks, and only those
    groups = Counter(r.keys[:20] for r in reqs)
    assert sorted(groups.values()) == [20] * 10
    assert len({r.keys[20] for r in reqs}) == 200
    # shuffled: the first 20 sent are not one group's
    assert len({r.keys[0] for r in reqs[:20]}) > 1


def test_rows_leave_out_only_the_row_whose_best_setup_is_hbm_only() -> None:
    rows = gke.rows()
    assert len(rows) == 3 * len(gke.PUBLISHED) == 27
    assert not any(" 1k" in r.name and "Test 2" in r.name for r in rows)
    assert {r.published for r in rows if "Test 2 5k" in r.name} == {0.82, 1.16, 0.86}
