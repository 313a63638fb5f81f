"""Calibration recovers known coefficients from bench files the simulator itself wrote."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lmikit.bench._long_doc_qa import BenchResult, LongDocQA, Measurement, RoundResult, bench_file
from lmikit.errors import SimulationError
from lmikit.sim import _bench_format as bench_format
from lmikit.sim import _calibrate as calibrate
from lmikit.sim._calibrate import bench_from_dict, fit, load_bench, synthetic_bench
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._scenario import deployment
from lmikit.sim._workloads import Phase, Request, Workload, long_doc_qa
from tests.conftest import deadline

# Llama-3.1-8B on g5.4xlarge: a ~31K-token GPU pool, so 12 x 4,000-token documents come
# back from the CPU tier and the retrieve efficiency is observable.
DEP = deployment("meta-llama/Llama-3.1-8B-Instruct", "ml.g5.4xlarge")
TRUTHS = [
    Coefficients(prefill_mfu=0.42, request_overhead_s=0.035, decode_hbm_efficiency=0.6,
                 cpu_retrieve_efficiency=0.5),
    Coefficients(prefill_mfu=0.7, request_overhead_s=0.01, decode_hbm_efficiency=0.85,
                 cpu_retrieve_efficiency=0.9),
]


@pytest.mark.parametrize("truth", TRUTHS)
def test_fit_recovers_known_coefficients_within_5_percent(truth: Coefficients,
                                                          tmp_path: Path) -> None:
    bench = synthetic_bench(DEP.with_coefficients(truth), long_doc_qa(12, 4_000, 32, 4), "cpu")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench.to_dict()))
    result = fit(DEP, load_bench(path))
    for name in ("prefill_mfu", "request_overhead_s", "decode_hbm_efficiency",
                 "cpu_retrieve_efficiency"):
        assert getattr(result.coefficients, name) == pytest.approx(getattr(truth, name),
                                                                   rel=0.05), name
    assert result.ttft_error_after < 0.01 < result.ttft_error_before


def test_a_request_served_by_two_tiers_is_priced_tier_by_tier() -> None:
    """With 8 documents of 4,000 tokens the GPU pool (~31K tokens) keeps most of each query's
    document and LMCache's CPU tier the rest: each query row has GPU and CPU hits. Priced
    as if one tier served them all, the fit missed request_overhead_s by half and said the
    bench had no CPU hits."""
    truth = Coefficients(prefill_mfu=0.45, cpu_retrieve_efficiency=0.3)
    bench = synthetic_bench(DEP.with_coefficients(truth), long_doc_qa(8, 4_000, 32, 4), "cpu")
    split = [r.cached_by_tier for r in bench.records if r.round == "query"]
    assert {tuple(t for t, _ in r or ()) for r in split} == {("gpu", "cpu"), ("gpu",)}
    assert sum(len(r or ()) == 2 for r in split) >= len(split) // 2
    assert all(r.tier == "gpu" for r in bench.records if r.round == "query")  # most: GPU
    result = fit(DEP, bench_from_dict(json.loads(json.dumps(bench.to_dict()))))
    for name in ("prefill_mfu", "request_overhead_s", "decode_hbm_efficiency",
                 "cpu_retrieve_efficiency"):
        assert getattr(result.coefficients, name) == pytest.approx(getattr(truth, name),
                                                                   rel=0.05), name
    assert not [n for n in result.notes if "no cpu hits" in n]


def _with_pre_warmup(work: Workload) -> Workload:
    """``work`` after two 6-token requests, as ``lmikit bench`` sends them first: a prompt
    that short costs little but the request overhead, which sets it apart from prefill."""
    pre = [[Request(100_000 + i, (), 6, 32, session=100_000 + i)] for i in range(2)]
    return Workload(work.name, [Phase("pre-warmup", pre, 2), *work.phases], work.chunk_size)


def _served_from(tier: str, mode: str, truth: Coefficients) -> calibrate.BenchFile:
    """A bench whose query round came back from ``tier``: the CPU-tier bench's outcomes moved
    to ``tier``, every request timed again by the replay at ``truth``."""
    cpu = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(12, 4_000, 32, 4)), "cpu")
    moved = []
    for r in cpu.records:
        if r.cached_by_tier is not None:
            by = tuple((tier if t == "cpu" else t, v) for t, v in r.cached_by_tier)
            r = replace(r, cached_by_tier=by, tier=max(by, key=lambda tv: tv[1])[0])
        moved.append(r)
    bench = replace(cpu, kv_cache=mode, records=moved)
    ttft, decode = calibrate.replay(DEP, bench, truth)
    return replace(bench, records=[replace(r, ttft_s=t, total_s=t + d)
                                   for r, t, d in zip(bench.records, ttft, decode, strict=True)])


@pytest.mark.parametrize(("tier", "mode", "truth"), [
    ("disk", "cpu+disk", Coefficients(prefill_mfu=0.42, disk_read_efficiency=0.5)),
    ("disk", "cpu+disk", Coefficients(prefill_mfu=0.6, request_overhead_s=0.05,
                                      decode_hbm_efficiency=0.6, disk_read_efficiency=0.3)),
    ("remote", "remote", Coefficients(prefill_mfu=0.42, remote_gbps=1.0)),
    # ml.g5.4xlarge's network (up to 25 Gbit/s) caps a remote read at 3.125 GB/s
    ("remote", "remote", Coefficients(prefill_mfu=0.6, request_overhead_s=0.05,
                                      remote_gbps=2.8)),
])
def test_fit_recovers_disk_and_remote_coefficients_within_5_percent(
        tier: str, mode: str, truth: Coefficients) -> None:
    """The first disk case once stopped with request_overhead_s 66% off (Nelder-Mead alone
    settled on a ledge of the replay's loss), the first remote one 90% off."""
    result = fit(DEP, _served_from(tier, mode, truth))
    fitted = {"disk": "disk_read_efficiency", "remote": "remote_gbps"}[tier]
    assert fitted in result.fitted
    for name in ("prefill_mfu", "request_overhead_s", "decode_hbm_efficiency", fitted):
        assert getattr(result.coefficients, name) == pytest.approx(getattr(truth, name),
                                                                   rel=0.05), name


def test_a_bench_that_sits_on_a_bound_is_not_called_too_fast() -> None:
    """disk_read_efficiency's default is its bound, 1.0: a bench measured at exactly the
    catalog's NVMe figure fits there, and is no sign of another model or instance."""
    result = fit(DEP, _served_from("disk", "cpu+disk", Coefficients()))
    assert result.coefficients.disk_read_efficiency == pytest.approx(1.0, rel=0.05)
    assert not [n for n in result.notes if "reached its bound" in n], result.notes


def test_one_prompt_length_cannot_separate_prefill_from_overhead_so_overhead_is_held(
) -> None:
    """Requests that all prefill the same length fit any split of their time into a fixed
    and a per-token cost; the fixed one stays at its default, and the fit says why."""
    slower = DEP.with_coefficients(Coefficients(prefill_mfu=0.4))
    one = synthetic_bench(slower, long_doc_qa(4, 2_000, 8, 1), "off")
    one = replace(one, records=[r for r in one.records if r.round == "warmup"])  # all misses
    result = fit(DEP, one, max_evaluations=50)
    assert "request_overhead_s" not in result.fitted and "prefill_mfu" in result.fitted
    assert result.coefficients.request_overhead_s == DEP.engine.coeff.request_overhead_s
    assert (f"request_overhead_s kept at {DEP.engine.coeff.request_overhead_s:g}: the "
            "requests' prefill lengths span only 1-fold, which cannot tell a fixed cost from "
            "a per-token one (a fit needs 2-fold: short prompts beside long ones, as the two "
            "lmikit bench sends first)") in result.notes
    mixed = synthetic_bench(slower, _with_pre_warmup(long_doc_qa(4, 2_000, 8, 1)), "off")
    assert "request_overhead_s" in fit(DEP, mixed, max_evaluations=50).fitted


def test_fit_keeps_coefficients_without_evidence() -> None:
    """4,000 tokens of documents stay in the GPU pool: the CPU tier serves none, and a
    cpu-mode bench has no word on the disk or remote tiers it lacks."""
    bench = synthetic_bench(DEP, long_doc_qa(4, 1_000, 8, 2), "cpu")
    result = fit(DEP, bench)
    assert "cpu_retrieve_efficiency" not in result.fitted
    assert ("cpu_retrieve_efficiency kept at 0.7: the bench has 0 requests that read 256 "
            "tokens or more from the cpu tier; a fit needs 3") in result.notes
    assert not [n for n in result.notes if "disk" in n or "remote" in n]


def test_a_bench_too_small_to_fit_anything_is_refused() -> None:
    """One request once came back 'TTFT error 92.7% -> 0.0%' with three coefficients fitted
    to it, and a plan that predicted a 12.8 s miss from them."""
    bench = synthetic_bench(DEP, long_doc_qa(1, 4_000, 16, 1), "cpu")
    one = replace(bench, records=[r for r in bench.records if r.round == "warmup"])
    with pytest.raises(SimulationError, match=r"too little evidence to fit any coefficient: "
                                              r"prefill_mfu: the bench has 1 requests that "
                                              r"prefilled 256 tokens or more; a fit needs 3"):
        fit(DEP, one)


def test_each_coefficient_needs_three_requests_that_carry_it() -> None:
    """Two CPU hits are too few for cpu_retrieve_efficiency; and four requests fit at most
    two TTFT coefficients, so the tier's is held first."""
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(12, 4_000, 8, 1)), "cpu")
    cpu = [i for i, r in enumerate(bench.records) if r.tier == "cpu"]
    two = replace(bench, records=[r for i, r in enumerate(bench.records)
                                  if i not in cpu[2:]])
    result = fit(DEP, two, max_evaluations=60)
    assert "cpu_retrieve_efficiency" not in result.fitted
    assert ("cpu_retrieve_efficiency kept at 0.7: the bench has 2 requests that read 256 "
            "tokens or more from the cpu tier; a fit needs 3") in result.notes
    half = [replace(r, tier="cpu", cached_tokens=2_048, cached_by_tier=(("cpu", 2_048),))
            for r in bench.records[2 + 12:2 + 15]]  # each prefills 1,964 tokens, reads 2,048
    result = fit(DEP, replace(bench, records=bench.records[:1] + half), max_evaluations=60)
    assert [n for n in result.fitted if n != "decode_hbm_efficiency"] == [
        "prefill_mfu", "request_overhead_s"]
    assert ("cpu_retrieve_efficiency kept at 0.7: 4 requests are evidence, too few to fit 3 "
            "TTFT coefficients (a fit needs two requests more than the coefficients it fits)"
            ) in result.notes


def test_fit_json_keeps_six_significant_figures_of_every_coefficient() -> None:
    """Rounded to decimals, the ~2e-6 s tokenizing rate would lose its digits (2.07e-6 -> 2e-6)."""
    result = fit(DEP, synthetic_bench(DEP, long_doc_qa(4, 1_000, 8, 2), "off"),
                 max_evaluations=50)
    written = json.loads(json.dumps(result.to_dict()))["coefficients"]
    for name, value in result.coefficients.to_dict().items():
        if isinstance(value, float):
            assert written[name] == pytest.approx(value, rel=1e-5), name
    assert written["tokenize_s_per_token"] != round(written["tokenize_s_per_token"], 6)


def test_fit_says_when_a_coefficient_is_pinned_at_its_bound() -> None:
    """A bench faster than the hardware allows (here: prefill on a GPU with 3x the catalog's
    peak) cannot be explained; the fit must say so rather than report the bound as a fact."""
    fast = replace(DEP, engine=replace(DEP.engine, tflops_per_gpu=DEP.engine.tflops_per_gpu * 3))
    bench = synthetic_bench(fast.with_coefficients(Coefficients(prefill_mfu=0.9)),
                            long_doc_qa(6, 4_000, 8, 2), "cpu")
    result = fit(DEP, bench, max_evaluations=300)
    assert result.coefficients.prefill_mfu == 1.0
    (note,) = [n for n in result.notes if n.startswith("prefill_mfu reached its bound 1.0")]
    assert "ml.g5.4xlarge" in note and "meta-llama/Llama-3.1-8B-Instruct" in note
    assert any(line.endswith(note) for line in result.summary())
    honest = fit(DEP, synthetic_bench(DEP.with_coefficients(TRUTHS[0]),
                                      long_doc_qa(6, 4_000, 8, 2), "cpu"), max_evaluations=300)
    assert not [n for n in honest.notes if "reached its bound" in n]


def test_fit_replays_the_bench_on_the_copies_that_served_it() -> None:
    """Four requests in flight on one copy queue; on four copies they would not. A bench
    from one copy, fitted for a four-copy what-if, must still recover the truth."""
    truth = Coefficients(prefill_mfu=0.4, request_overhead_s=0.09)
    bench = synthetic_bench(DEP.with_coefficients(truth), long_doc_qa(6, 4_000, 8, 4), "cpu")
    assert bench.copies == 1
    four = replace(DEP, instances=4)
    result = fit(four, bench)
    assert result.coefficients.prefill_mfu == pytest.approx(0.4, rel=0.05)
    assert result.coefficients.request_overhead_s == pytest.approx(0.09, rel=0.05)
    assert not [n for n in result.notes if "copies" in n]
    # a file that does not say is replayed on the deployment's copies, and the fit says so
    unknown = fit(four, replace(bench, copies=None))
    assert ("the bench file does not say how many model copies served it; replayed on 4, "
            "the deployment's (lmikit bench records it)") in unknown.notes
    assert unknown.coefficients.prefill_mfu < 0.3  # no queueing to explain: a slower prefill


@pytest.mark.parametrize(("documents", "mode", "tier"), [
    (4, "cpu", "gpu"),   # 16K tokens: vLLM's GPU pool (~31K) serves the query round
    (12, "cpu", "cpu"),  # 48K: the warm-up's LRU order evicted every one; LMCache's CPU has it
    (12, "off", None),   # 48K without LMCache: nothing left to hit
])
def test_expected_outcomes_follow_the_capacities(documents: int, mode: str,
                                                 tier: str | None) -> None:
    """A client cannot see which tier answered; which one should is a matter of the pool
    and tier sizes and LRU order."""
    work = long_doc_qa(documents, 4_000, 8, 2)
    outcomes = calibrate.expected_outcomes(DEP, work, mode, "sticky_session")
    assert len(outcomes) == documents  # one per query request
    full = (4_000 + 12) // 256 * 256
    assert all(o == ({tier: full} if tier else {}) for o in outcomes), outcomes


def test_expected_outcomes_take_the_query_order() -> None:
    """'interleave' asks about each document twice in a row: the repeat is a GPU hit even
    where the documents outgrow the pool."""
    work = long_doc_qa(12, 4_000, 8, 1, query_order=[d for d in range(12) for _ in (0, 1)])
    tiers = [list(o) for o in calibrate.expected_outcomes(DEP, work, "cpu", "sticky_session")]
    assert tiers == [["cpu"], ["gpu"]] * 12


def test_expected_outcomes_follow_the_routing_across_copies() -> None:
    """On two copies a document's repeat hits only where it lands on the copy that holds it:
    always with a session per document, not always when each request is routed anew."""
    two = replace(DEP, instances=2)
    work = long_doc_qa(5, 2_000, 8, 1)  # 5: the idle copies' tie-break turns by one
    pinned = calibrate.expected_outcomes(two, work, "cpu", "sticky_session")
    anew = calibrate.expected_outcomes(two, work, "cpu", "least_outstanding")
    assert all(list(o) == ["gpu"] for o in pinned)
    assert any(not o for o in anew)


def test_unknown_outcomes_are_load_but_not_ttft_evidence() -> None:
    truth = Coefficients(prefill_mfu=0.4, request_overhead_s=0.09)
    bench = synthetic_bench(DEP.with_coefficients(truth), long_doc_qa(6, 4_000, 8, 2), "cpu")
    query = [replace(r, hit=None, tier=None, cached_tokens=None) if r.round == "query" else r
             for r in bench.records]
    result = fit(DEP, replace(bench, records=query))
    assert result.coefficients.prefill_mfu == pytest.approx(0.4, rel=0.05)
    assert ("6 request(s) with an unknown cache outcome ('hit': null) are replayed as load "
            "(as misses) but left out of the fit") in result.notes
    unknown = replace(bench, records=[replace(r, hit=None) for r in bench.records])
    with pytest.raises(SimulationError, match="no request in the bench file says whether it "
                                              "hit the cache"):
        fit(DEP, unknown)


def test_fit_refuses_a_bench_from_another_model(tmp_path: Path) -> None:
    bench = synthetic_bench(DEP, long_doc_qa(2, 1_000, 4, 1), "cpu")
    other = deployment("Qwen/Qwen3-8B", "ml.g5.4xlarge")
    with pytest.raises(SimulationError, match="measured with model"):
        fit(other, bench)


def test_fit_refuses_requests_over_the_context_window() -> None:
    """Two 16M-token requests once ran a 150 s fit to predicted TTFTs of 441,657 s."""
    bench = synthetic_bench(DEP, long_doc_qa(2, 1_000, 4, 1), "cpu")
    big = replace(bench.records[1], prompt_tokens=DEP.max_model_len)
    with pytest.raises(SimulationError, match=rf"bench request 1 has {DEP.max_model_len:,} "
                                              r"prompt and 4 output tokens, over the "
                                              r"deployment's context window"):
        fit(DEP, replace(bench, records=[bench.records[0], big, *bench.records[2:]]))


def test_fit_refuses_a_bench_measured_at_another_tp_or_cache_mode() -> None:
    """A bench at TP 1 fitted on TP 2 puts every GPU figure off by about half; one measured
    with a tier the deployment cannot replay would be replayed without it."""
    bench = synthetic_bench(DEP, long_doc_qa(2, 1_000, 4, 1), "cpu")
    with pytest.raises(SimulationError, match=r"the bench file was measured with tp 1, not 2"):
        fit(replace(DEP, tp=2), bench)
    # a deployment whose plan leaves no room for a CPU tier (Deployment.unplannable)
    no_cpu = replace(DEP, tier_tokens={k: v for k, v in DEP.tier_tokens.items() if k == "off"},
                     unplannable={"cpu": "no host memory is left for it"})
    with pytest.raises(SimulationError, match=r"measured with kv_cache 'cpu', which this "
                                              r"deployment cannot replay: kv_cache mode 'cpu' "
                                              r"does not fit ml.g5.4xlarge: no host memory"):
        fit(no_cpu, bench)


@pytest.mark.parametrize(("data", "message"), [
    ({"format": "other"}, "not a lmikit-bench/1 file"),
    ({"format": "lmikit-bench/1", "requests": []}, "non-empty list"),
    ({"format": "lmikit-bench/1", "requests": [{"start_s": 0}]}, r"requests\[0\] needs"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1,
         "tier": "tape"}]}, r"requests\[0\]\.tier must be one of gpu, cpu, disk, remote, "
                            r"or null \(got 'tape'\)"),
    ({"format": "lmikit-bench/1", "copies": 0, "requests": [{}]},
     r"copies must be a whole number from 1 to 512 \(the model copies that served the "
     r"bench\), or null \(got 0\)"),
    ({"format": "lmikit-bench/1", "copies": True, "requests": [{}]}, r"copies .*\(got True\)"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1,
         "hit": "no"}]}, r"requests\[0\]\.hit must be true, false or null \(unknown\) "
                        r"\(got 'no'\)"),
    # each of these was a Python traceback, or silently replayed as something else
    ({"format": "lmikit-bench/1", "model": 5, "requests": [{}]},
     r"model must be a string or null \(got 5\)"),
    ({"format": "lmikit-bench/1", "instance": ["ml.g5.4xlarge"], "requests": [{}]},
     r"instance must be a string or null \(got \['ml.g5.4xlarge'\]\)"),
    ({"format": "lmikit-bench/1", "kv_cache": ["cpu"], "requests": [{}]},
     r"kv_cache must be one of off, cpu, cpu\+disk, remote, or null \(got \['cpu'\]\)"),
    ({"format": "lmikit-bench/1", "kv_cache": "tape", "requests": [{}]},
     r"kv_cache must be one of .* \(got 'tape'\)"),
    ({"format": "lmikit-bench/1", "tp": 0, "requests": [{}]},
     r"tp must be a whole number of at least 1 .* \(got 0\)"),
    ({"format": "lmikit-bench/1", "requests": [{"start_s": 0, "ttft_s": 1}]},
     r"requests\[0\] needs total_s, prompt_tokens, output_tokens"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": False, "tier": "cpu", "cached_tokens": 256}]},
     r"requests\[0\]: hit is false, yet tier 'cpu' and cached_tokens 256 say it was cached"),
    ({"format": "lmikit-bench/1", "kv_cache": "off", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "tier": "cpu", "cached_tokens": 256}]},
     r"requests\[0\] was served from the cpu tier, but the bench file's kv_cache is off"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "cached_by_tier": {"gpu": 256, "tape": 1}}]},
     r"requests\[0\]\.cached_by_tier must be an object whose keys are tiers"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "cached_tokens": 300, "cached_by_tier": {"gpu": 256, "cpu": 256}}]},
     r"requests\[0\]\.cached_by_tier holds 512 tokens, more than its prompt_tokens 500"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 600, "output_tokens": 1,
         "hit": True, "cached_tokens": 300, "cached_by_tier": {"gpu": 256, "cpu": 256}}]},
     r"requests\[0\]\.cached_tokens 300 is not the sum of its cached_by_tier \(512\)"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 1000, "output_tokens": 1,
         "hit": True, "tier": "cpu", "cached_by_tier": {"gpu": 512, "cpu": 256}}]},
     r"requests\[0\]\.tier 'cpu' is not the tier that served most of its cached_by_tier "
     r"\('gpu'\)"),
    # each of these was accepted, and a coefficient "fitted" from it
    ({"format": "lmikit-bench/1", "kv_cache": "cpu", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "tier": "cpu", "cached_tokens": 0}]},
     r"requests\[0\]: hit is true, yet cached_tokens is 0; a hit has cached tokens"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "cached_by_tier": {"cpu": 0}}]},
     r"requests\[0\]: hit is true, yet cached_tokens is 0"),
    ({"format": "lmikit-bench/1", "kv_cache": "cpu", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": None, "tier": "cpu", "cached_tokens": 256}]},
     r"requests\[0\]: hit is null \(unknown\), yet tier 'cpu' and cached_tokens 256 say what "
     r"was cached"),
    ({"format": "lmikit-bench/1", "kv_cache": "cpu", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 500, "output_tokens": 1,
         "hit": True, "tier": "disk", "cached_tokens": 256}]},
     r"requests\[0\] was served from the disk tier, but the bench file's kv_cache is cpu "
     r"\(its tiers: gpu, cpu\)"),
    ({"format": "lmikit-bench/1", "kv_cache": "cpu+disk", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 900, "output_tokens": 1,
         "hit": True, "cached_by_tier": {"gpu": 512, "remote": 256}}]},
     r"requests\[0\] was served from the remote tier, but the bench file's kv_cache is "
     r"cpu\+disk \(its tiers: gpu, cpu, disk\)"),
    # a replay clock this far out cannot tell a millisecond step from none: the fit hung
    ({"format": "lmikit-bench/1", "requests": [ROW_ := {
        "start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1},
        {**ROW_, "start_s": 4e12}]},
     r"requests\[1\]\.start_s 4000000000000\.0 is 4,000,000,000,000 s after the first "
     r"request's; a bench spans at most 2,592,000 s \(30 days\)"),
])
def test_bad_bench_files_say_what_is_wrong(tmp_path: Path, data: dict, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SimulationError, match=message):
        load_bench(path)


def test_lmikit_bench_result_file_round_trips_through_the_loader(tmp_path: Path) -> None:
    w = LongDocQA(num_documents=2, document_tokens=100, pre_warmup=0)
    rounds = [RoundResult("warmup", 2, 1.0, [0.5, 0.6], 6, [0.0, 0.1],
                          [Measurement(0.5, 0.9, 3), Measurement(0.6, 1.0, 3)]),
              RoundResult("query", 2, 1.0, [0.1, 0.1], 6, [1.0, 1.1],
                          [Measurement(0.1, 0.4, 3), Measurement(0.1, 0.4, 3)])]
    data = bench_file(BenchResult(w, rounds), model="m", instance="ml.g5.4xlarge", tp=1,
                      kv_cache="cpu", query_outcomes=[{"cpu": 64}, {}], copies=2)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    bench = load_bench(path)
    assert [(r.round, r.hit, r.tier) for r in bench.records] == [
        ("warmup", False, None), ("warmup", False, None), ("query", True, "cpu"),
        ("query", False, None)]
    assert bench.records[2].cached_tokens == 64
    assert bench.records[2].start_s == 1.0 and bench.records[2].total_s == 0.4
    assert bench.copies == 2 and bench.to_dict()["copies"] == 2


ROW = {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1}


@pytest.mark.parametrize(("row", "message"), [
    ({**ROW, "ttft_s": float("nan")}, r"requests\[0\]\.ttft_s must be a number of seconds "
                                      r"above 0 and at most 3,600 \(got nan\)"),
    ({**ROW, "ttft_s": 0}, r"requests\[0\]\.ttft_s must be a number of seconds above 0 and "
                           r"at most 3,600 \(got 0\)"),
    # a string once got "must be a finite number >= 0", which 0 is not
    ({**ROW, "ttft_s": "0.5"}, r"requests\[0\]\.ttft_s must be a number of seconds above 0 "
                               r"and at most 3,600 \(got '0\.5'\)"),
    # SageMaker ends an invocation long before an hour: 1e300 s once printed an error of 4e301%
    ({**ROW, "ttft_s": 1e300, "total_s": 1e300}, r"requests\[0\]\.ttft_s must be a number of "
                                                 r"seconds above 0 and at most 3,600"),
    ({**ROW, "total_s": 3601}, r"requests\[0\]\.total_s must be a number of seconds above 0 "
                               r"and at most 3,600 \(got 3601\)"),
    ({**ROW, "total_s": 0.5}, r"requests\[0\]\.total_s must be at least its ttft_s 1 s "
                              r"\(got 0\.5\)"),
    ({**ROW, "start_s": float("inf")}, r"requests\[0\]\.start_s must be a finite number"),
    ({**ROW, "start_s": 10**400}, r"requests\[0\]\.start_s must be a finite number >= 0 "
                                  r"\(got <an integer of about 401 digits>\)"),
    ({**ROW, "prompt_tokens": 10**400}, r"requests\[0\]\.prompt_tokens must be a whole number"),
    ({**ROW, "prompt_tokens": 10**9}, r"requests\[0\]\.prompt_tokens must be a whole number "
                                      r"from 1 to 16,777,216 \(got 1000000000\)"),
    ({**ROW, "prompt_tokens": 10**7, "output_tokens": 10**7}, "at most 16,777,216 together"),
    ({**ROW, "prompt_tokens": 4012.7}, r"requests\[0\]\.prompt_tokens must be a whole number "
                                       r"from 1 to 16,777,216 \(got 4012\.7\)"),
    ({**ROW, "cached_tokens": 6}, r"cached_tokens must be a whole number from 0 to its "
                                  r"prompt_tokens 5 \(got 6\)"),
])
def test_bench_numbers_must_be_finite_and_bounded(tmp_path: Path, row: dict,
                                                  message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": "lmikit-bench/1", "requests": [row]}))
    with pytest.raises(SimulationError, match=message):
        load_bench(path)


def test_bench_files_are_bounded_in_requests_and_bytes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": "lmikit-bench/1", "requests": [ROW] * 3}))
    assert len(load_bench(path).records) == 3
    monkeypatch.setattr(bench_format, "MAX_BENCH_REQUESTS", 2)
    with pytest.raises(SimulationError, match="3 requests; a fit takes at most 2"):
        load_bench(path)
    monkeypatch.setattr(bench_format, "MAX_BENCH_BYTES", 100)
    with pytest.raises(SimulationError, match=r"is \d+ bytes; the limit is 100$"):
        load_bench(path)
    with deadline(5), pytest.raises(SimulationError, match="not a regular file"):
        load_bench("/dev/zero")


def test_fit_reports_progress_per_replay_up_to_its_budget() -> None:
    bench = synthetic_bench(DEP, long_doc_qa(2, 1_000, 4, 1), "cpu")
    seen: list[tuple[int, int]] = []
    fit(DEP, bench, max_evaluations=60, progress=lambda done, most: seen.append((done, most)))
    assert [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert {m for _, m in seen} == {60} and len(seen) <= 60 + 3 * 4  # a shrink may overrun


def test_the_fit_rests_on_measured_outcomes_where_the_file_has_them() -> None:
    """Rows whose outcome is only predicted (here wrongly: GPU hits that were CPU hits) are
    load, not evidence, beside measured ones; the fit still finds the truth. (One request
    at a time: a wrong outcome replayed as load would also move its neighbours.)"""
    truth = Coefficients(prefill_mfu=0.42, request_overhead_s=0.035)
    bench = synthetic_bench(DEP.with_coefficients(truth),
                            _with_pre_warmup(long_doc_qa(12, 4_000, 32, 1)), "cpu")
    query = [i for i, r in enumerate(bench.records) if r.round == "query"]
    assert {bench.records[i].tier for i in query} == {"cpu"}
    wrong = [replace(r, tier="gpu", cached_by_tier=(("gpu", r.cached_tokens or 0),),
                     outcome_source="predicted") if i in query[:6] else r
             for i, r in enumerate(bench.records)]
    result = fit(DEP, replace(bench, records=wrong))
    for name in ("prefill_mfu", "request_overhead_s"):
        assert getattr(result.coefficients, name) == pytest.approx(getattr(truth, name),
                                                                   rel=0.05), name
    assert ("6 request(s) whose cache outcome is predicted, not measured, are replayed as "
            "load but left out of the fit: it rests on the measured ones") in result.notes


def test_a_hit_whose_tier_is_unknown_is_not_evidence_where_tiers_besides_the_gpu_exist(
) -> None:
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(12, 4_000, 8, 2)), "cpu")
    blind = [replace(r, tier=None, cached_by_tier=None) if r.hit else r
             for r in bench.records]
    result = fit(DEP, replace(bench, records=blind), max_evaluations=60)
    assert "cpu_retrieve_efficiency" not in result.fitted
    assert any(n.startswith("12 hit(s) whose tier is unknown") for n in result.notes)


def test_a_file_of_predicted_outcomes_says_they_are_predictions() -> None:
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(4, 2_000, 8, 2)), "off")
    predicted = replace(bench, records=[replace(r, outcome_source="predicted")
                                        for r in bench.records])
    (note,) = [n for n in fit(DEP, predicted, max_evaluations=60).notes
               if n.startswith("every cache outcome")]
    assert "LMI does not start vLLM with --enable-prompt-tokens-details" in note


def test_a_decode_the_model_cannot_match_leaves_the_ttft_coefficients_alone() -> None:
    """Decode times at 0.6x what the HBM bound allows once moved request_overhead_s by
    +175% and prefill_mfu by +24% when TTFT and decode were fitted as one sum; fitted apart,
    the TTFT coefficients come back within 5% and the bound is named."""
    truth = replace(TRUTHS[0], decode_hbm_efficiency=0.9)
    bench = synthetic_bench(DEP.with_coefficients(truth), long_doc_qa(12, 4_000, 32, 4), "cpu")
    fast = replace(bench, records=[replace(r, total_s=r.ttft_s + (r.total_s - r.ttft_s) * 0.6)
                                   for r in bench.records])
    result = fit(DEP, fast)
    for name in ("prefill_mfu", "request_overhead_s", "cpu_retrieve_efficiency"):
        assert getattr(result.coefficients, name) == pytest.approx(getattr(truth, name),
                                                                   rel=0.05), name
    assert result.coefficients.decode_hbm_efficiency == 1.0
    assert any(n.startswith("decode_hbm_efficiency reached its bound 1.0") for n in result.notes)


def test_a_fit_that_does_not_lower_the_error_is_not_applied() -> None:
    """Short of replays, this disk fit stops where it started, 10% under the default
    disk_read_efficiency of 1.0 that the bench was measured at: worse than the defaults,
    so the defaults stay, and the summary says nothing was applied."""
    bench = _served_from("disk", "cpu+disk", Coefficients())
    result = fit(DEP, bench, max_evaluations=2)
    assert result.coefficients == DEP.engine.coeff and result.fitted == []
    assert result.ttft_error_after == result.ttft_error_before
    assert any(n.startswith("disk_read_efficiency kept at 1: its fit (0.9) did not lower the "
                            "TTFT error") and n.endswith("so it is not applied")
               for n in result.notes)
    assert "(no fit did better than the defaults: none applied)" in result.summary()[0]


def test_a_bench_that_does_not_say_what_it_ran_on_is_refused_unless_told_otherwise() -> None:
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(4, 2_000, 8, 1)), "off")
    unknown = replace(bench, model=None, kv_cache=None)
    with pytest.raises(SimulationError, match=r"does not say which model, kv_cache it was "
                                              r"measured with .*--calibrate-anyway"):
        fit(DEP, unknown)
    with pytest.raises(SimulationError, match=r"measured through adapter 'legal', not the base"):
        fit(DEP, replace(bench, adapter="legal"))
    anyway = fit(DEP, unknown, max_evaluations=30, unverified=True)
    assert any(n.startswith("fitted regardless (--calibrate-anyway): the bench file does not "
                            "say which model, kv_cache") for n in anyway.notes)


def test_requests_the_bench_marks_as_no_evidence_are_load_only() -> None:
    truth = Coefficients(prefill_mfu=0.42, request_overhead_s=0.035)
    bench = synthetic_bench(DEP.with_coefficients(truth),
                            _with_pre_warmup(long_doc_qa(8, 4_000, 32, 1)), "cpu")
    why = "no generated token arrived (only the role and usage), so it has no TTFT"
    broken = [replace(r, ttft_s=r.total_s, excluded=why) if r.round == "query" and i % 2 else r
              for i, r in enumerate(bench.records)]
    result = fit(DEP, replace(bench, records=broken))
    assert result.coefficients.request_overhead_s == pytest.approx(0.035, rel=0.05)
    assert (f"4 request(s) the bench marked as no evidence are replayed as load but left out "
            f"of the fit: {why}") in result.notes


def test_a_bench_that_stopped_early_is_fitted_to_what_it_measured_and_says_so() -> None:
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(4, 2_000, 8, 1)), "off")
    data = {**bench.to_dict(), "complete": False, "stopped": "interrupted (Ctrl-C)"}
    stopped = bench_from_dict(json.loads(json.dumps(data)))
    assert stopped.stopped == "interrupted (Ctrl-C)"
    assert ("the bench stopped before its last request (interrupted (Ctrl-C)); fitted to the "
            "10 it measured") in fit(DEP, stopped, max_evaluations=30).notes
    assert bench_from_dict({**data, "stopped": None}).stopped is not None  # complete: false


def test_a_fit_stays_within_its_time_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid 5,000-request bench of 120,000-token prompts replays in about 3 s, so its
    1,500 replays would have taken 78 minutes (the docs said about 500 s at that bound): a
    fit now times its first replay and takes only as many as fit in max_seconds."""
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(6, 2_000, 8, 1)), "off")
    real = calibrate.replay

    def slow(*args: object) -> tuple[list[float], list[float]]:
        time.sleep(0.05)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(calibrate, "replay", slow)
    seen: list[int] = []
    started = time.perf_counter()
    result = fit(DEP, bench, max_seconds=1.5, progress=lambda _, most: seen.append(most))
    assert time.perf_counter() - started < 1.5 + 0.5
    assert len(set(seen)) == 1 and seen[0] < 30 - 8  # the cap, the extra replays aside
    assert any(n.startswith("a replay of this bench takes 0.05")
               and n.endswith("to stay within 1.5 s: its coefficients may fall short of the "
                              "best fit") for n in result.notes), result.notes


def test_the_summary_counts_the_requests_the_fit_rested_on() -> None:
    """It once said 'Calibrated on 10 measured requests' when 4 had an unknown outcome and
    only 6 were used."""
    bench = synthetic_bench(DEP, _with_pre_warmup(long_doc_qa(4, 2_000, 8, 1)), "off")
    unknown = replace(bench, records=[replace(r, hit=None, tier=None, cached_tokens=None,
                                              cached_by_tier=None, outcome_source=None)
                                      if r.round == "query" else r for r in bench.records])
    result = fit(DEP, unknown, max_evaluations=30)
    assert (result.requests, result.in_file) == (6, 10)
    assert result.summary()[0].startswith("Calibrated on 6 measured requests (of the file's 10): ")
    assert result.to_dict()["requests_in_file"] == 10


def test_a_remote_rate_past_the_instances_network_is_set_to_the_network() -> None:
    """A remote read is no faster than the instance's network (ml.g5.4xlarge: up to 25 Gbit/s,
    3.125 GB/s), so a bench made with a faster store cannot tell the store's rate: the fit
    sets remote_gbps to the network's rate and says so."""
    truth = Coefficients(prefill_mfu=0.6, request_overhead_s=0.05, remote_gbps=6.0)
    result = fit(DEP, _served_from("remote", "remote", truth))
    assert DEP.engine.network_gbps == 3.125
    assert result.coefficients.remote_gbps == 3.125
    assert any("remote_gbps fitted past" in n for n in result.notes)
    assert result.coefficients.prefill_mfu == pytest.approx(0.6, rel=0.05)
