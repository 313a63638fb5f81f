"""Runs advise takes from another candidate's are the runs the simulator would make."""

from __future__ import annotations

import dataclasses

import pytest

from lmikit import sim
from lmikit.advisor import Candidate
from lmikit.advisor._advise import _base
from lmikit.advisor._runs import THROUGH_TIERS, Runner, run_key
from lmikit.advisor._space import Deployments, Settings
from lmikit.catalog._prices import hourly_price
from lmikit.sim._loop import run
from lmikit.sim._routers import StickySession

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def _work() -> sim.Workload:
    return sim.rag(300, 512, 4, 1.1, 16, 8, requests=120, seed=0)


@pytest.mark.parametrize(("mode", "unread"), [
    ("off", list(THROUGH_TIERS)),
    ("cpu", ["nvme_read_gbps", "network_gbps"]),
    ("cpu+disk", ["network_gbps"]),
])
def test_engine_figures_read_only_through_absent_tiers_change_nothing(
        mode: str, unread: list[str]) -> None:
    dep = sim.deployment(MODEL, "ml.g6e.12xlarge", tp=2, copies=2, instances=2,
                         cpu_size_gb=4.0, disk_size_gb=20.0)
    copies = dep.copies(mode)
    other = dataclasses.replace(copies[0].engine, **dict.fromkeys(unread, 0.001))
    changed = [dataclasses.replace(c, engine=other) for c in copies]
    before, after = run(_work(), copies, StickySession()), run(_work(), changed, StickySession())
    assert (before.ttft, before.end, before.served) == (after.ttft, after.end, after.served)
    # the figures left in do change the run: the test can tell
    read = [n for n in THROUGH_TIERS if n not in unread]
    if read:
        slow = dataclasses.replace(copies[0].engine, **dict.fromkeys(read, 0.001))
        slowed = run(_work(), [dataclasses.replace(c, engine=slow) for c in copies],
                     StickySession())
        assert slowed.end != before.end


def test_a_run_taken_from_another_candidate_gives_what_simulate_gives() -> None:
    work = _work()
    base, _ = _base(None, MODEL, None, None, None)
    deployments = Deployments(Settings.from_spec(base, None))
    # one GPU each, different hosts: without LMCache their runs cannot differ
    alike = [Candidate(t, 1, 1, 2, "off", "auto", "auto", r)
             for t in ("ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6e.4xlarge")
             for r in ("kv_aware", "prefix_aware")]
    unlike = Candidate("ml.g6e.2xlarge", 1, 1, 2, "cpu", "auto", "auto", "kv_aware")
    prices = {c.instance_type: hourly_price(c.instance_type, "us-east-1") for c in alike}
    runner = Runner(deployments, work, prices, None, candidates=[*alike, unlike])
    assert len({run_key(deployments.of(c), c) for c in alike}) == 2  # one per routing
    for c in [*alike, unlike]:
        dep = deployments.of(c)
        mine = runner.run(c, True)
        theirs = sim.simulate(dep, work, [c.routing], [c.kv_cache])[0]
        assert (mine.ttft_p50_s, mine.ttft_p90_s, mine.throughput_tokens_s,
                mine.usd_per_1k_tokens) == (theirs.ttft_p50_s, theirs.ttft_p90_s,
                                            theirs.throughput_tokens_s,
                                            theirs.usd_per_1k_tokens)
    assert runner.repeats == 4  # two of each routing's three


def test_every_routing_advise_searches_renders_for_sagemaker(tmp_path):
    """advise writes specs that validate: it never proposes a strategy the SageMaker renderer
    refuses (kv_aware on the LMI image, botocore RoutingStrategy)."""
    from lmikit.accept._accept import accept_spec
    from lmikit.advisor._space import ROUTINGS

    for routing in ROUTINGS:
        spec = tmp_path / f"{routing}.yaml"
        spec.write_text("api_version: v1\nname: r\nregion: us-east-1\n"
                        "model: {id: Qwen/Qwen2.5-7B-Instruct}\n"
                        "instance: {type: ml.g6e.2xlarge, max_count: 2}\n"
                        f"routing: {{strategy: {routing}}}\n")
        assert accept_spec(spec, ("sagemaker",)).rendered["sagemaker"]
    assert "kv_aware" not in ROUTINGS
