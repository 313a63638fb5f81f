from __future__ import annotations

import pytest

from lmikit.catalog._prices import PRICES, hourly_price
from lmikit.errors import PlanError, SimulationError
from lmikit.planner._planner import plan
from lmikit.sim._scenario import deployment, percentile, simulate
from lmikit.sim._workloads import long_doc_qa, rag

P4DE = "ml.p4de.24xlarge"


def test_deployment_takes_pool_and_tier_sizes_from_the_plan() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE)
    assert d.gpu_tokens == plan("Qwen/Qwen3-8B", P4DE).gpu_kv_capacity_tokens
    assert d.tier_tokens["cpu"][0] == plan("Qwen/Qwen3-8B", P4DE, mode="cpu").cpu_capacity_tokens
    assert d.tier_tokens["off"] == (0, 0) and d.tier_tokens["cpu+disk"][1] > 0


def test_disk_mode_needs_nvme_and_unknown_modes_are_refused() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE)
    no_nvme = d.__class__(**{**d.__dict__, "has_nvme": False, "tier_tokens": {
        k: v for k, v in d.tier_tokens.items() if k != "cpu+disk"}})
    with pytest.raises(PlanError, match="'cpu\\+disk' needs local NVMe"):
        no_nvme.copies("cpu+disk")
    with pytest.raises(PlanError, match="unknown kv_cache mode 'tape'"):
        d.copies("tape")


def test_a_host_without_room_for_lmcache_still_simulates_without_it() -> None:
    """A 7B on ml.g5.2xlarge (32 GiB) leaves no host memory for a CPU tier once the weights
    and worker are reserved: the planner refuses every LMCache mode, and 'off' still runs."""
    d = deployment("Qwen/Qwen2.5-7B-Instruct", "ml.g5.2xlarge")
    assert set(d.tier_tokens) == {"off"}
    assert set(d.unplannable) == {"cpu", "cpu+disk", "remote"}
    with pytest.raises(PlanError, match="kv_cache mode 'cpu' does not fit ml.g5.2xlarge: no "
                                        "host memory is left for an LMCache CPU tier"):
        d.copies("cpu")
    (r,) = simulate(d, rag(100, 256, 2, 1.0, 8, 2, requests=20), ["sticky_session"], ["off"])
    assert r.kv_cache == "off" and r.requests == 20


def test_same_seed_same_results_and_another_seed_may_differ() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE, instances=4)
    w = rag(300, 256, 3, 1.0, 16, 16, requests=300, seed=1)
    a = simulate(d, w, ["random"], ["cpu"], seed=5)[0]
    b = simulate(d, w, ["random"], ["cpu"], seed=5)[0]
    c = simulate(d, w, ["random"], ["cpu"], seed=6)[0]
    assert a == b and a.ttfts_s != c.ttfts_s


def test_cross_product_in_order() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE, instances=2)
    res = simulate(d, long_doc_qa(4, 1_000, 4, 2), ["random", "kv_aware"], ["off", "cpu"])
    assert [(r.routing, r.kv_cache) for r in res] == [
        ("random", "off"), ("random", "cpu"), ("kv_aware", "off"), ("kv_aware", "cpu")]


def test_long_doc_qa_reports_the_query_round_and_hit_shares_sum_to_one() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE)
    r = simulate(d, long_doc_qa(46, 10_000, 10, 4), ["sticky_session"], ["cpu"])[0]
    assert r.requests == 46
    assert sum(r.hit_rate.values()) == pytest.approx(1.0, abs=1e-5)
    assert r.hit_rate["cpu"] > 0.95  # 460K tokens outgrow the GPU pool, not the CPU tier


def test_cost_is_price_times_billed_instances_times_time_per_token() -> None:
    d = deployment("Qwen/Qwen3-8B", "ml.p4d.24xlarge", instances=3, copies=2)
    r = simulate(d, long_doc_qa(4, 1_000, 10, 2), ["random"], ["off"])[0]
    tokens = r.throughput_tokens_s * r.total_time_s
    price = hourly_price("ml.p4d.24xlarge", "us-east-1")
    assert price is not None
    expected = price.usd * 2 * r.total_time_s / 3600 / tokens * 1000  # ceil(3 / 2) instances
    assert r.usd_per_1k_tokens == pytest.approx(expected, rel=1e-3)
    assert "as of" in r.price_source


def test_cost_is_none_without_a_listed_price_and_uses_a_given_one() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE)
    w = long_doc_qa(2, 1_000, 4, 1)
    r = simulate(d, w, ["random"], ["off"])[0]
    assert r.usd_per_1k_tokens is None and "no list price" in r.price_source
    r = simulate(d, w, ["random"], ["off"], hourly_price_usd=40.0)[0]
    assert r.usd_per_1k_tokens and r.price_source == "given by the caller"


def test_price_table_rows_are_dated_and_sourced() -> None:
    for (region, instance), p in PRICES.items():
        assert p.region == region and instance.startswith("ml.") and p.as_of and p.source


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.9) == pytest.approx(3.7)
    assert percentile([], 0.5) == 0.0


def test_cache_aware_routing_beats_random_on_repeated_documents() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE, instances=4)
    w = long_doc_qa(40, 8_000, 10, 8)
    res = {r.routing: r for r in simulate(d, w, ["random", "prefix_aware", "kv_aware",
                                                 "sticky_session"], ["cpu"])}
    assert res["prefix_aware"].hit_rate["miss"] < res["random"].hit_rate["miss"]
    assert res["kv_aware"].ttft_mean_s < res["random"].ttft_mean_s


def test_us_east_1_gpu_prices_agree_where_two_sources_list_one() -> None:
    # the fmbench table is read as us-east-1 because its g5/p4d rows match the other sources
    for name in ("ml.g5.xlarge", "ml.g5.2xlarge", "ml.p4d.24xlarge"):
        listed = hourly_price(name, "us-east-1")
        assert listed is not None and "fmbench" not in listed.source
    assert hourly_price("ml.p5.48xlarge", "us-east-1").usd == 113.068  # type: ignore[union-attr]
    assert hourly_price("ml.g6e.48xlarge", "us-east-1") is None  # no public copy found


def test_g6e_prices_agree_where_both_quotes_of_aws_price_list_list_one() -> None:
    # the cost model (Query API, 2026-08-17) rounds these two to the cent; the research note
    # quotes the bulk file of 2026-10-05 to four decimals
    cost_model = {"ml.g6e.2xlarge": 2.80, "ml.g6e.12xlarge": 13.12}
    for name, usd in cost_model.items():
        listed = hourly_price(name, "us-east-1")
        assert listed is not None and "20261005212151" in listed.source
        assert round(listed.usd, 2) == usd
    sizes = ("xlarge", "2xlarge", "4xlarge", "8xlarge")  # one L40S each, more host
    usd = [hourly_price(f"ml.g6e.{size}", "us-east-1").usd for size in sizes]  # type: ignore[union-attr]
    assert usd == sorted(usd) and len(set(usd)) == len(usd)


def test_deployment_knows_the_max_model_len_vllm_would_run_with() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE)
    assert d.max_model_len == plan("Qwen/Qwen3-8B", P4DE).max_model_len == 40_960
    assert deployment("Qwen/Qwen3-8B", P4DE, max_model_len=8_192).max_model_len == 8_192


def test_simulate_refuses_a_request_vllm_would_refuse_before_running_any() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE, max_model_len=8_192)
    calls: list[tuple[int, int, str, str]] = []
    fits = long_doc_qa(2, 8_192 - 12 - 4, 4, 1)  # prompt + output = 8,192: allowed
    simulate(d, fits, ["random"], ["off"], progress=lambda *a: calls.append(a))
    assert calls == [(0, 1, "random", "off")]
    with pytest.raises(SimulationError, match=r"request 0: a prompt of 8,189 tokens and 4 output "
                                              r"tokens exceed Qwen/Qwen3-8B's max_model_len of "
                                              r"8,192"):
        simulate(d, long_doc_qa(2, 8_192 - 12 - 3, 4, 1), ["random"], ["off"],
                 progress=lambda *a: calls.append(a))
    assert len(calls) == 1


def test_progress_is_reported_before_each_scenario() -> None:
    d = deployment("Qwen/Qwen3-8B", P4DE, instances=2)
    calls: list[tuple[int, int, str, str]] = []
    simulate(d, long_doc_qa(2, 1_000, 4, 1), ["random", "kv_aware"], ["off", "cpu"],
             progress=lambda *a: calls.append(a))
    assert calls == [(0, 4, "random", "off"), (1, 4, "random", "cpu"),
                     (2, 4, "kv_aware", "off"), (3, 4, "kv_aware", "cpu")]


def test_utilization_counts_from_the_first_request_not_from_zero(tmp_path) -> None:
    """The same 50 requests starting 1,000 s into a trace: same TTFTs and total time, and
    the same utilization (it was 0.008 against 0.999, busy time over the clock from 0)."""
    import json

    from lmikit.sim._workloads import load_trace

    dep = deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
    results = []
    for shift in (0, 1_000):
        path = tmp_path / f"t{shift}.jsonl"
        path.write_text("".join(json.dumps({"arrival_s": shift + i * 0.05, "output_tokens": 64,
                                            "chunk_ids": [i % 5, i]}) + "\n"
                                for i in range(50)))
        (r,) = simulate(dep, load_trace(path), ["least_outstanding"], ["cpu"])
        results.append(r)
    same, shifted = results
    assert same.ttfts_s == pytest.approx(shifted.ttfts_s, rel=1e-6)
    assert same.total_time_s == pytest.approx(shifted.total_time_s, rel=1e-6)
    assert same.utilization == pytest.approx(shifted.utilization, abs=1e-3)
    assert same.utilization[0] > 0.5


def _lone_and_burst() -> tuple[object, object]:
    from lmikit.sim._tiers import chunk_keys
    from lmikit.sim._workloads import Phase, Request, Workload

    reqs = [Request(i, chunk_keys([(i, 1_024)], 256), 1_024, 2, session=i, arrival_s=0.0)
            for i in range(4)]
    return deployment("Qwen/Qwen3-8B", P4DE), Workload(
        "burst", [Phase("burst", [[r] for r in reqs], open_loop=True)], 256)


def test_requests_turned_away_at_the_front_door_are_counted_apart() -> None:
    """Four requests at once through a front door that holds one: the one served gives the
    TTFTs, tokens and hit rates; the three turned away count in ``failed`` and the span
    (they had given NaN TTFTs, and tokens and misses that no copy saw)."""
    import random

    from lmikit.sim._loop import run
    from lmikit.sim._scenario import summarize

    dep, work = _lone_and_burst()
    out = run(work, dep.copies("off"), dep.router("random", random.Random(0)),
              max_in_flight=1)
    r = summarize(dep, work, out, "random", "off")
    served = [i for i in range(4) if not out.failed[i]]
    assert len(served) == 1 and (r.requests, r.failed) == (1, 3)
    ttft = out.ttft[served[0]] - out.arrival[served[0]]
    assert r.ttft_p50_s == r.ttft_p99_s == r.ttft_mean_s == pytest.approx(ttft, abs=1e-6)
    assert r.throughput_tokens_s == pytest.approx(1_026 / r.total_time_s, rel=1e-4)
    assert r.hit_rate["miss"] == 1.0


def test_nothing_to_measure_is_an_error_not_nan() -> None:
    import dataclasses
    import random

    from lmikit.sim._loop import run
    from lmikit.sim._scenario import summarize

    dep, work = _lone_and_burst()
    out = run(work, dep.copies("off"), dep.router("random", random.Random(0)),
              max_in_flight=1)
    out.failed[:] = [True] * 4  # as if the one let through had been turned away too
    with pytest.raises(SimulationError, match="all 4 measured requests of workload 'burst' "
                                              "were turned away at the front door"):
        summarize(dep, work, out, "random", "off")
    warm = dataclasses.replace(work, phases=[dataclasses.replace(work.phases[0],
                                                                 measured=False)])
    with pytest.raises(SimulationError, match="workload 'burst' has no measured requests"):
        simulate(dep, warm, ["random"], ["off"])


def test_utilization_runs_to_the_last_requests_end() -> None:
    """One request alone: the copy is busy for its prefill and decode, and the run lasts
    until its end, which is the request overhead after the last event (utilization was
    taken over the time to the last event)."""
    import dataclasses

    dep, work = _lone_and_burst()
    one = dataclasses.replace(work, phases=[dataclasses.replace(
        work.phases[0], sessions=work.phases[0].sessions[:1])])
    (r,) = simulate(dep, one, ["random"], ["off"])
    m = dep.engine
    busy = m.prefill_s(1_024, 0) + m.decode_step_s(1, 1_025)
    assert r.utilization[0] == pytest.approx(busy / r.total_time_s, rel=1e-3)
    assert r.utilization[0] < 1 - m.coeff.request_overhead_s / r.total_time_s + 1e-3


def test_a_specs_copies_are_routed_with_the_prefix_settings_its_endpoint_gets() -> None:
    # the endpoint was given twice the workload's concurrency (8 for docqa) while the
    # simulator used max_batch_size (64)
    from lmikit.render._sagemaker import routing_config
    from lmikit.sim._scenario import deployment_from_spec
    from lmikit.spec._loader import load_spec

    spec = load_spec("examples/docqa-qwen7b.yaml")
    spec = spec.model_copy(update={"routing": spec.routing.model_copy(
        update={"strategy": "prefix_aware"})})
    rendered = routing_config(spec)["PrefixAwareRoutingConfig"]
    dep = deployment_from_spec(spec)
    assert (dep.prefix_length_bytes, dep.concurrency_threshold) == (
        rendered["PrefixLength"], rendered["ConcurrencyThreshold"]) == (4096, 8)
    router = dep.router("prefix_aware", __import__("random").Random(0))
    assert (router.threshold, router.per_instance) == (8, 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("argument", "value", "message"), [
    # each had given NaN, a negative tier, a silent default or a traceback from deep inside
    ("max_batch_size", 0, "max_batch_size is 0; expected greater than or equal to 1 (the "
                          "spec's engine.max_batch_size)"),
    ("max_batch_size", 8.5, "max_batch_size is 8.5; expected a valid integer"),
    ("max_batch_size", "64", "max_batch_size is '64'; expected a valid integer"),
    ("gpu_memory_utilization", 5, "gpu_memory_utilization is 5; expected less than or equal "
                                  "to 0.98"),
    ("kv_cache_dtype", "fp9", "kv_cache_dtype is 'fp9'; expected 'auto' or 'fp8'"),
    ("weight_dtype", "int3", "weight_dtype is 'int3'; expected 'auto', 'bfloat16', "
                             "'float16' or 'fp8'"),
    ("cpu_size_gb", -5, "cpu_size_gb is -5; expected 'auto' or a size in GB"),
    ("chunk_size", 0, "chunk_size is 0; expected greater than or equal to 16"),
    ("prefix_length", 0, "prefix_length is 0; expected greater than or equal to 1024"),
    ("concurrency_threshold", -1, "concurrency_threshold is -1; expected greater than or "
                                  "equal to 1"),
    ("instances", "2", "instances is '2'; expected a whole number of model copies from 1 "
                       "to 512"),
    ("instances", 2.0, "instances is 2.0; expected a whole number"),
    ("region", "Ireland", "region is 'Ireland'; expected an AWS region name"),
])
def test_deployment_checks_its_arguments_as_the_spec_checks_its_fields(
        argument: str, value: object, message: str) -> None:
    with pytest.raises(PlanError, match=__import__("re").escape(message)):
        deployment("Qwen/Qwen3-8B", P4DE, **{argument: value})  # type: ignore[arg-type]


def test_plan_checks_what_if_arguments_as_the_spec_does() -> None:
    with pytest.raises(PlanError, match="gpu_memory_utilization is 5; expected less than"):
        plan("Qwen/Qwen3-8B", P4DE, gpu_memory_utilization=5)
    with pytest.raises(PlanError, match="mode is 'tape'; expected 'auto', 'off'"):
        plan("Qwen/Qwen3-8B", P4DE, mode="tape")


@pytest.mark.parametrize(("change", "message"), [
    ({"routings": []}, "routings is []; expected a non-empty list of names from "
                       "sticky_session"),
    ({"routings": "random"}, "routings is 'random'; expected a non-empty list"),
    ({"kv_modes": "cpu"}, "kv_modes is 'cpu'; expected a non-empty list of names from off"),
    ({"seed": None}, "seed is None; expected a whole number"),
    ({"hourly_price_usd": -1}, "hourly_price_usd is -1; expected US dollars above 0"),
    ({"hourly_price_usd": float("nan")}, "hourly_price_usd is nan"),
    ({"prices": "prices.json"}, "prices is 'prices.json'; expected a PriceTable"),
    ({"dep": "x"}, "dep is 'x'; expected a Deployment"),
])
def test_simulate_refuses_arguments_of_the_wrong_kind_by_name(change: dict[str, object],
                                                              message: str) -> None:
    args: dict[str, object] = {"dep": deployment("Qwen/Qwen3-8B", P4DE),
                               "workload": long_doc_qa(2, 1_000, 4, 1),
                               "routings": ["random"], "kv_modes": ["off"], **change}
    with pytest.raises(PlanError, match=__import__("re").escape(message)):
        simulate(**args)  # type: ignore[arg-type]


def test_engine_notes_are_public() -> None:
    from lmikit import sim

    dep = sim.deployment("Qwen/Qwen3-8B", "ml.g6e.12xlarge", tp=4)
    assert sim.engine_notes(dep) and "no NVLink" in sim.engine_notes(dep)[0]
