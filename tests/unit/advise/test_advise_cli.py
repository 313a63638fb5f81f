"""``lmikit advise`` on the shipped examples: the written spec validates, and simulating it
gives the figures advise reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from lmikit.advisor._trust import category, trust
from lmikit.cli import main

ROOT = Path(__file__).resolve().parents[3]
ENTRY = ["instance_type", "tp", "copies", "instances", "kv_cache", "cpu_size_gb",
         "disk_size_gb", "routing", "ttft_p50_s", "ttft_p90_s", "throughput_tokens_s",
         "usd_per_hour", "usd_per_1k_tokens", "meets_slo"]
# example -> (workload flags, search flags); the two specs outside us-east-1 are searched
# there, where lmikit's price table lists prices
EXAMPLES = {
    "docqa-qwen7b.yaml": (["--workload", "long-doc-qa", "--documents", "60"],
                          ["--instance-types", "ml.g6e.*,ml.g5.2xlarge", "--max-instances",
                           "2"]),
    "chat-qwen1.5b-small.yaml": (["--workload", "multi-turn-chat", "--requests", "80",
                                  "--concurrency", "8", "--think-time", "1"],
                                 ["--region", "us-east-1", "--instance-types",
                                  "ml.g6.*,ml.g5.xlarge", "--max-instances", "2"]),
    "rag-qwen72b-nvme.yaml": (["--workload", "rag", "--requests", "60", "--chunk-tokens",
                               "1024", "--chunks-per-request", "8"],
                              ["--region", "us-east-1", "--instance-types",
                               "ml.p4d.24xlarge,ml.g6e.12xlarge", "--max-instances", "1",
                               "--routing", "prefix_aware", "--routing", "random"]),
    "regulated-llama8b-inmemory.yaml": (["--workload", "long-doc-qa", "--documents", "40",
                                         "--document-tokens", "8000"],
                                        ["--instance-types", "ml.g6e.4xlarge,ml.g6e.xlarge",
                                         "--max-instances", "2"]),
}


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_advise_writes_a_spec_that_validates_and_simulates_to_its_figures(
        example: str, tmp_path: Path) -> None:
    workload, search = EXAMPLES[example]
    out = tmp_path / "best.yaml"
    data = json.loads(_run("advise", str(ROOT / "examples" / example), *workload, *search,
                           "--slo", "ttft_p90_s=2.0", "--json", "--write", str(out)))
    assert sorted(data["best"]) == sorted(ENTRY)
    best = data["best"]
    assert [(f["category"], f["quantity"]) for f in data["trust"]["figures"]] == [
        (data["trust"]["category"], q) for q in ("ttft_hit", "ttft_miss", "throughput")
        if (data["trust"]["category"], q) != ("cache_blind", "ttft_hit")]
    assert data["trust"]["category"] == category(best["kv_cache"], best["routing"])
    assert all(sorted(e) == sorted(ENTRY) for e in data["pareto"])
    assert data["candidates_evaluated"] > data["pruned"] >= 0
    assert "Predicted: TTFT p50" in out.read_text()
    _run("validate", str(out))
    simulated = json.loads(_run("simulate", str(out), *workload, "--json"))["results"][0]
    best = data["best"]
    assert (simulated["routing"], simulated["kv_cache"]) == (best["routing"], best["kv_cache"])
    for name in ("ttft_p50_s", "ttft_p90_s", "throughput_tokens_s", "usd_per_1k_tokens"):
        assert simulated[name] == best[name], name


def test_advise_prints_the_frontier_the_answer_and_the_trust(tmp_path: Path) -> None:
    text = _run("advise", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--workload", "rag",
                "--requests", "40", "--instance-types", "ml.g6.xlarge,ml.g6.2xlarge",
                "--max-instances", "2", "--slo", "ttft_p90_s=0.3")
    assert "Pareto frontier" in text and "Best (*): " in text
    assert "Trust, out of sample (leave one source out)" in text
    # the answer's category's figures, in the words trust() gives them
    best = text.split("Best (*): ")[1].split("\n")[0]
    kv_cache, routing = re.search(r"kv_cache (\w+), (\w+):", best).groups()
    words = " ".join(text.split())  # as printed, wrapped to the terminal
    for line in trust(["ttft_p90_s"], kv_cache, routing):
        assert " ".join(line.split()) in words, line


def test_advise_names_the_closest_when_none_meets() -> None:
    data = json.loads(_run("advise", "--model", "Qwen/Qwen2.5-7B-Instruct", "--workload",
                           "long-doc-qa", "--documents", "8", "--instance-types",
                           "ml.g6e.xlarge", "--max-instances", "1", "--slo",
                           "ttft_p90_s=0.001", "--json"))
    assert data["best"]["meets_slo"] is False
    assert data["misses"]["ttft_p90_s"]["bound"] == 0.001


def test_advise_skips_unpriced_types_with_a_note_never_at_zero() -> None:
    data = json.loads(_run("advise", "--model", "Qwen/Qwen2.5-7B-Instruct", "--region",
                           "eu-west-1", "--workload", "long-doc-qa", "--documents", "4",
                           "--slo", "ttft_p90_s=1", "--json"))
    assert data["best"] is None and data["candidates_evaluated"] == 0
    assert any("without a list price" in n and "lmikit prices fetch" in n
               for n in data["notes"])


@pytest.mark.parametrize(("args", "message"), [
    (["--slo", "ttft_p90_s>=1"], "PlanError: --slo 'ttft_p90_s>=1': ttft_p90_s is an upper"),
    (["--slo", "ttft_p90_s=1", "--instance-types", "ml.zz.*"],
     "PlanError: --instance-types 'ml.zz.*' matches no instance type"),
    (["--slo", "ttft_p90_s=1", "--turns", "3"],
     "--turns: applies to --workload multi-turn-chat, not long-doc-qa"),
])
def test_advise_refuses_bad_input_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["advise", "--model", "Qwen/Qwen2.5-7B-Instruct",
                                       "--workload", "long-doc-qa", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_advise_plot_draws_the_frontier_the_answer_and_the_objective(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "frontier.svg"
    result = CliRunner().invoke(main, [
        "advise", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--workload", "rag", "--requests",
        "40", "--instance-types", "ml.g6.xlarge,ml.g6.2xlarge", "--max-instances", "2",
        "--slo", "ttft_p90_s=0.3", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert f"Wrote the frontier chart to {out}" in result.stderr
    svg = out.read_text()  # matplotlib writes each text as a comment beside its paths
    for text in ("lmikit advise: rag", "USD per 1K tokens", "ttft_p90_s", "Pareto frontier",
                 "answer", "objective", "simulated in full"):
        assert f"<!-- {text} -->" in svg, text


def test_advise_refuses_a_plot_it_could_not_write_before_searching(tmp_path: Path) -> None:
    for path, message in ((tmp_path / "chart", "must end in .png, .svg, .pdf"),
                          (tmp_path / "no" / "chart.png", "does not exist")):
        result = CliRunner().invoke(main, [
            "advise", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--workload", "rag",
            "--slo", "ttft_p90_s=0.3", "--plot", str(path)])
        assert result.exit_code == 2 and message in result.output
        assert "Pareto" not in result.output
    assert not list(tmp_path.iterdir())


def _bench(tmp_path: Path, **fields: object) -> Path:
    """A bench file as a ml.g6.xlarge whose prefill runs at a fifth of the default MFU
    would have measured it."""
    from lmikit import sim
    from lmikit.sim._calibrate import synthetic_bench
    from lmikit.sim._coefficients import Coefficients

    dep = sim.deployment("Qwen/Qwen2.5-1.5B-Instruct", "ml.g6.xlarge")
    slow = dep.with_coefficients(Coefficients(prefill_mfu=Coefficients().prefill_mfu / 5))
    data = synthetic_bench(slow, sim.long_doc_qa(6, 2_000, 8, 2), "cpu").to_dict()
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({**data, **fields}))
    return path


CALIBRATED_SEARCH = ["--model", "Qwen/Qwen2.5-1.5B-Instruct", "--workload", "rag", "--requests",
                     "40", "--instance-types", "ml.g6.xlarge,ml.g6.2xlarge", "--max-instances",
                     "2", "--kv-cache", "cpu", "--routing", "sticky_session"]


def test_advise_calibrates_only_the_candidates_measured_like_the_bench(tmp_path: Path) -> None:
    from lmikit.sim._coefficients import Coefficients

    bench = str(_bench(tmp_path))
    data = json.loads(_run("advise", *CALIBRATED_SEARCH, "--slo", "ttft_p90_s=30", "--json",
                           "--calibrate", bench))
    cal = data["calibration"]
    assert (cal["instance_type"], cal["tp"]) == ("ml.g6.xlarge", 1)
    assert cal["coefficients"]["prefill_mfu"] == pytest.approx(Coefficients().prefill_mfu / 5,
                                                               rel=0.05)
    # ml.g6.xlarge: 1 or 2 instances x the planner's and a right-sized CPU tier; the
    # ml.g6.2xlarge ones likewise
    assert (cal["candidates_calibrated"], cal["candidates_uncalibrated"]) == (4, 4)
    for only, slower in (("ml.g6.xlarge", True), ("ml.g6.2xlarge", False)):
        one = [*CALIBRATED_SEARCH, "--instance-types", only, "--slo", "ttft_p90_s=30", "--json"]
        plain = json.loads(_run("advise", *one))["best"]
        fitted = json.loads(_run("advise", *one, "--calibrate", bench))["best"]
        if slower:  # a fifth of the MFU: slower prefill
            assert fitted["ttft_p90_s"] > plain["ttft_p90_s"]
        else:
            assert fitted == plain
    # uncalibrated, ml.g6.xlarge is the answer; measured slower, ml.g6.2xlarge is
    plain = json.loads(_run("advise", *CALIBRATED_SEARCH, "--slo", "ttft_p90_s=30", "--json"))
    assert (plain["best"]["instance_type"], data["best"]["instance_type"]) == \
        ("ml.g6.xlarge", "ml.g6.2xlarge")
    text = _run("advise", *CALIBRATED_SEARCH, "--slo", "ttft_p90_s=30", "--calibrate", bench)
    assert "Calibrated on 12 measured requests" in text
    assert "The fit applies to the 4 candidates on ml.g6.xlarge TP 1; the other 4 run the " \
           "uncalibrated engine; the answer's figures are uncalibrated" in text


def test_advise_writes_a_calibrated_answer_that_simulate_reproduces(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    out = tmp_path / "best.yaml"
    data = json.loads(_run("advise", *CALIBRATED_SEARCH, "--instance-types", "ml.g6.xlarge",
                           "--slo", "ttft_p90_s=30", "--json", "--calibrate", str(bench),
                           "--write", str(out)))
    best = data["best"]
    assert best["instance_type"] == "ml.g6.xlarge"
    written = out.read_text()
    again = next(line for line in written.splitlines() if "These figures again" in line)
    assert again.endswith(f"--calibrate {bench} --seed 0")
    assert "the answer's figures are calibrated" in written
    simulated = json.loads(_run("simulate", str(out), "--workload", "rag", "--requests", "40",
                                "--calibrate", str(bench), "--json"))["results"][0]
    for name in ("ttft_p50_s", "ttft_p90_s", "throughput_tokens_s", "usd_per_1k_tokens"):
        assert simulated[name] == best[name], name


@pytest.mark.parametrize(("fields", "anyway", "message"), [
    ({"instance": None}, True, "the bench file does not say which instance type it was "
                               "measured on, and --model names none"),
    ({"model": "Qwen/Qwen2.5-7B-Instruct"}, False, "the bench file was measured with model "
                                                   "'Qwen/Qwen2.5-7B-Instruct'"),
    ({"tp": 8}, False, "the bench ran on ml.g6.xlarge TP 8 with kv_cache cpu, which the "
                       "planner refuses here"),
])
def test_advise_refuses_a_bench_not_measured_on_the_model_or_a_known_layout(
        tmp_path: Path, fields: dict[str, object], anyway: bool, message: str) -> None:
    result = CliRunner().invoke(main, ["advise", *CALIBRATED_SEARCH, "--slo", "ttft_p90_s=30",
                                       "--calibrate", str(_bench(tmp_path, **fields)),
                                       *(["--calibrate-anyway"] if anyway else [])])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "Pareto" not in result.output


def test_advise_applies_a_bench_of_unknown_layout_to_the_spec_s_only_when_told(
        tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("api_version: v1\nname: small\nregion: us-east-1\nmodel:\n"
                    "  id: Qwen/Qwen2.5-1.5B-Instruct\ninstance:\n  type: ml.g6.xlarge\n")
    bench = str(_bench(tmp_path, instance=None))
    search = ["advise", str(spec), *CALIBRATED_SEARCH[2:], "--slo", "ttft_p90_s=30",
              "--calibrate", bench]
    result = CliRunner().invoke(main, search)
    assert result.exit_code == 2
    assert "does not say which instance type it was measured on, so which candidates it is " \
           "evidence for is unknown" in result.output
    data = json.loads(_run(*search, "--calibrate-anyway", "--json"))
    cal = data["calibration"]
    assert (cal["instance_type"], cal["tp"], cal["candidates_calibrated"]) == \
        ("ml.g6.xlarge", 1, 4)
    assert any(n.startswith("fitted regardless (--calibrate-anyway): the bench file does not "
                            "say which instance") for n in cal["notes"])
