"""Calibration recovers known coefficients from bench files the simulator itself wrote."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lmikit.bench import BenchResult, LongDocQA, Measurement, RoundResult, bench_file
from lmikit.errors import SimulationError
from lmikit.sim import calibrate
from lmikit.sim.calibrate import fit, load_bench, synthetic_bench
from lmikit.sim.coefficients import Coefficients
from lmikit.sim.scenario import deployment
from lmikit.sim.workloads import long_doc_qa
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


def test_fit_keeps_coefficients_without_evidence() -> None:
    bench = synthetic_bench(DEP, long_doc_qa(4, 1_000, 8, 2), "off")
    result = fit(DEP, bench)
    assert "disk_read_efficiency" not in result.fitted
    assert any("no disk hits" in n for n in result.notes)


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
    assert {t for t, _ in outcomes} == {tier}
    full = (4_000 + 12) // 256 * 256
    assert {c for _, c in outcomes} == {full if tier else 0}


def test_expected_outcomes_take_the_query_order() -> None:
    """'interleave' asks about each document twice in a row: the repeat is a GPU hit even
    where the documents outgrow the pool."""
    work = long_doc_qa(12, 4_000, 8, 1, query_order=[d for d in range(12) for _ in (0, 1)])
    tiers = [t for t, _ in calibrate.expected_outcomes(DEP, work, "cpu", "sticky_session")]
    assert tiers == ["cpu", "gpu"] * 12


def test_expected_outcomes_follow_the_routing_across_copies() -> None:
    """On two copies a document's repeat hits only where it lands on the copy that holds it:
    always with a session per document, not always when each request is routed anew."""
    two = replace(DEP, instances=2)
    work = long_doc_qa(5, 2_000, 8, 1)  # 5: the idle copies' tie-break turns by one
    pinned = calibrate.expected_outcomes(two, work, "cpu", "sticky_session")
    anew = calibrate.expected_outcomes(two, work, "cpu", "least_outstanding")
    assert all(t == "gpu" for t, _ in pinned)
    assert any(t is None for t, _ in anew)


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
    with pytest.raises(SimulationError, match="measured on model"):
        fit(other, bench)


@pytest.mark.parametrize(("data", "message"), [
    ({"format": "other"}, "not a lmikit-bench/1 file"),
    ({"format": "lmikit-bench/1", "requests": []}, "non-empty list"),
    ({"format": "lmikit-bench/1", "requests": [{"start_s": 0}]}, r"requests\[0\] needs"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1,
         "tier": "tape"}]}, "tier 'tape'"),
    ({"format": "lmikit-bench/1", "copies": 0, "requests": [{}]},
     r"copies must be a whole number from 1 to 512 \(the model copies that served the "
     r"bench\), or null \(got 0\)"),
    ({"format": "lmikit-bench/1", "copies": True, "requests": [{}]}, r"copies .*\(got True\)"),
    ({"format": "lmikit-bench/1", "requests": [
        {"start_s": 0, "ttft_s": 1, "total_s": 2, "prompt_tokens": 5, "output_tokens": 1,
         "hit": "no"}]}, r"requests\[0\]\.hit must be true, false or null \(unknown\) "
                        r"\(got 'no'\)"),
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
                      kv_cache="cpu", query_outcomes=[("cpu", 64), (None, 0)], copies=2)
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
    ({**ROW, "ttft_s": float("nan")}, r"requests\[0\]\.ttft_s must be a finite number >= 0 "
                                      r"\(got nan\)"),
    ({**ROW, "start_s": float("inf")}, r"requests\[0\]\.start_s must be a finite number"),
    ({**ROW, "prompt_tokens": 10**9, "output_tokens": 10**9}, "at most 16,777,216 together"),
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
    monkeypatch.setattr(calibrate, "MAX_BENCH_REQUESTS", 2)
    with pytest.raises(SimulationError, match="3 requests; a fit takes at most 2"):
        load_bench(path)
    monkeypatch.setattr(calibrate, "MAX_BENCH_BYTES", 100)
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
