from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lmikit.cli import main
from lmikit.sim._calibrate import synthetic_bench
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._scenario import deployment
from lmikit.sim._workloads import long_doc_qa
from tests.conftest import DEFAULT_SPEC, deadline

WHAT_IF = ["--model", "Qwen/Qwen3-8B", "--instance", "ml.p4de.24xlarge"]
SMALL = ["--workload", "long-doc-qa", "--documents", "4", "--document-tokens", "2000",
         "--output-tokens", "8"]
KEYS = {"routing", "kv_cache", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "ttft_mean_s",
        "total_time_s", "throughput_tokens_s", "hit_rate", "usd_per_1k_tokens"}


def lmikit(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_json_has_the_documented_shape() -> None:
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    (row,) = data["results"]
    assert KEYS <= set(row)
    assert set(row["hit_rate"]) == {"gpu", "cpu", "disk", "remote", "miss"}
    assert all(isinstance(row[k], float) for k in KEYS - {"routing", "kv_cache", "hit_rate",
                                                          "usd_per_1k_tokens"})


def test_repeated_routing_and_kv_cache_run_the_cross_product() -> None:
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--instances", "2", "--routing", "random",
               "--routing", "prefix_aware", "--routing", "kv_aware", "--kv-cache", "off",
               "--kv-cache", "cpu+disk", "--json")
    rows = json.loads(r.output)["results"]
    assert len(rows) == 6
    assert {(x["routing"], x["kv_cache"]) for x in rows} == {
        (a, b) for a in ("random", "prefix_aware", "kv_aware") for b in ("off", "cpu+disk")}


def test_seed_makes_runs_repeatable() -> None:
    args = ["simulate", *WHAT_IF, "--workload", "rag", "--requests", "200", "--instances", "3",
            "--routing", "random", "--json"]
    assert lmikit(*args, "--seed", "4").output == lmikit(*args, "--seed", "4").output
    assert lmikit(*args, "--seed", "4").output != lmikit(*args, "--seed", "5").output


def test_spec_gives_model_instance_routing_and_mode() -> None:
    r = lmikit("simulate", str(DEFAULT_SPEC), *SMALL, "--json")
    data = json.loads(r.output)
    assert data["deployment"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert (data["results"][0]["routing"], data["results"][0]["kv_cache"]) == (
        "sticky_session", "cpu")


def test_table_output_names_every_scenario() -> None:
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--routing", "random", "--kv-cache", "off",
               "--kv-cache", "cpu")
    assert r.exit_code == 0
    assert "lmikit simulate" in r.output and r.output.count("random") == 2


def test_table_prints_the_default_example_cost_to_three_significant_figures() -> None:
    # ml.g6e.2xlarge in us-east-1 is listed; its cost per 1K tokens is a few millionths of a
    # dollar, which four decimals would print as $0.0001 whatever the scenario
    args = ["simulate", str(DEFAULT_SPEC), *SMALL, "--routing", "random", "--kv-cache", "off"]
    (row,) = json.loads(lmikit(*args, "--json").output)["results"]
    usd = row["usd_per_1k_tokens"]
    assert usd is not None and 1e-6 < usd < 1e-3
    text = lmikit(*args).output
    assert f"${usd:.{2 - math.floor(math.log10(usd))}f}" in text
    assert "version 20261005212151" in text


@pytest.mark.parametrize(("args", "flag", "message"), [
    (["--workload", "long-doc-qa", "--zipf", "1.2"], "--zipf", "applies to --workload rag"),
    (["--workload", "rag", "--documents", "3"], "--documents", "long-doc-qa, not rag"),
    (["--workload", "trace", "--concurrency", "2"], "--concurrency", "not trace"),
    (["--workload", "trace"], "--trace", "needs a trace file"),
    (["--workload", "rag", "--kv-cache", "tape"], "--kv-cache", "tape"),
    (["--workload", "chat"], "--workload", "chat"),
])
def test_bad_flags_are_click_errors_naming_the_flag(args: list[str], flag: str,
                                                    message: str) -> None:
    r = lmikit("simulate", *WHAT_IF, *args)
    assert r.exit_code == 2
    assert flag in r.output and message in r.output


def test_spec_and_what_if_do_not_mix() -> None:
    r = lmikit("simulate", str(DEFAULT_SPEC), "--model", "x", "--workload", "rag")
    assert r.exit_code == 2 and "not both" in r.output


def test_calibrate_reports_the_fit(tmp_path: Path) -> None:
    dep = deployment("meta-llama/Llama-3.1-8B-Instruct", "ml.g5.4xlarge")
    bench = synthetic_bench(dep.with_coefficients(Coefficients(prefill_mfu=0.4)),
                            long_doc_qa(6, 2_000, 8, 2), "cpu")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench.to_dict()))
    r = lmikit("simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--instance",
               "ml.g5.4xlarge", *SMALL, "--calibrate", str(path), "--json")
    data = json.loads(r.output)
    assert data["calibration"]["coefficients"]["prefill_mfu"] == pytest.approx(0.4, rel=0.05)
    assert data["coefficients"]["prefill_mfu"] == pytest.approx(0.4, rel=0.05)
    r = lmikit("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--instance",
               "ml.g5.4xlarge", "--calibrate", str(path), "--json")
    calibrated = json.loads(r.output)["predicted"]["ttft_miss_s"]
    plain = json.loads(lmikit("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                              "--instance", "ml.g5.4xlarge", "--json").output)
    assert calibrated > plain["predicted"]["ttft_miss_s"]  # a lower MFU: slower prefill


def test_calibrated_plan_states_the_fitted_coefficients_not_the_defaults(
        tmp_path: Path) -> None:
    """The TTFT block rests on the fitted coefficients, so the assumptions must say them."""
    what_if = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--instance", "ml.g5.4xlarge"]
    dep = deployment("meta-llama/Llama-3.1-8B-Instruct", "ml.g5.4xlarge")
    truth = Coefficients(prefill_mfu=0.4, request_overhead_s=0.09)
    # 48K tokens of documents: more than the GPU pool holds, so the query round hits the CPU
    bench = synthetic_bench(dep.with_coefficients(truth), long_doc_qa(6, 8_000, 8, 2), "cpu")
    path = tmp_path / "run1.json"
    path.write_text(json.dumps(bench.to_dict()))
    plain = json.loads(lmikit("plan", *what_if, "--json").output)["assumptions"]
    data = json.loads(lmikit("plan", *what_if, "--calibrate", str(path), "--json").output)
    fitted = data["calibration"]["coefficients"]
    changed = [(a, b) for a, b in zip(plain, data["assumptions"], strict=True) if a != b]
    assert [a.split(" ")[0] for a, _ in changed] == ["prefill", "host->GPU"]
    (_, prefill), (_, retrieve) = changed
    mark = " (fitted to run1.json)"
    assert prefill.startswith(f"prefill at {fitted['prefill_mfu']:.0%}{mark} of ")
    assert (f"fixed overhead {fitted['request_overhead_s'] * 1000:.0f} ms{mark} per request"
            in prefill)
    assert f"reaching {fitted['cpu_retrieve_efficiency']:.0%}{mark} of it" in retrieve
    assert "cpu_retrieve_efficiency" in data["calibration"]["fitted"]
    # what the bench had no evidence for (tokenizing, disk reads) is the default, not marked
    assert "disk_read_efficiency" not in data["calibration"]["fitted"]
    assert f"{fitted['tokenize_s_per_token'] * 1e6:.1f} us per token, hit or miss" in prefill
    assert retrieve.endswith("with O_DIRECT, not overlapped with the host->GPU copy")
    # the floor a short prefill cannot go below is a read of the weights at the fitted rate
    assert "decode_hbm_efficiency" in data["calibration"]["fitted"]
    assert f"per step at {fitted['decode_hbm_efficiency']:.0%}{mark} of 600 GB/s" in prefill
    assert prefill.count("fitted") == 3 and retrieve.count("fitted") == 1
    assert "prefill at 55% of" in " ".join(plain)  # the defaults, where nothing was fitted


def test_what_if_on_a_host_without_room_for_lmcache_defaults_to_off() -> None:
    small = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--instance", "ml.g5.2xlarge",
             "--workload", "rag", "--requests", "20"]
    r = lmikit("simulate", *small, "--json")
    assert r.exit_code == 0, r.output
    assert [x["kv_cache"] for x in json.loads(r.stdout)["results"]] == ["off"]
    assert "Note: simulating --kv-cache off, as the planner refuses LMCache's CPU tier on " \
        "ml.g5.2xlarge" in r.stderr
    r = lmikit("simulate", *small, "--kv-cache", "off", "--kv-cache", "cpu")
    assert r.exit_code == 2
    assert "Invalid value for --kv-cache: kv_cache mode 'cpu' does not fit ml.g5.2xlarge" \
        in r.output


def test_plot_into_a_missing_folder_is_refused_before_simulating(tmp_path: Path) -> None:
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(tmp_path / "no" / "ttft.png"))
    assert r.exit_code == 2
    assert "Invalid value for --plot: cannot write" in r.output and "does not exist" in r.output
    assert "TTFT" not in r.output  # no results: nothing was simulated


def test_plot_must_name_a_format_and_a_regular_file(tmp_path: Path) -> None:
    """Without a suffix matplotlib wrote FILE.png, not FILE; to a FIFO named .svg it blocked
    for ever."""
    import os

    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(tmp_path / "chart"))
    assert r.exit_code == 2 and "must end in .png, .svg, .pdf" in r.output
    assert not list(tmp_path.iterdir())
    fifo = tmp_path / "f.svg"
    os.mkfifo(fifo)
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(fifo))
    assert r.exit_code == 2 and "is not a regular file" in r.output


@pytest.mark.parametrize("suffix", [".svg", ".PDF"])
def test_plot_writes_the_format_its_name_says(tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"ttft{suffix}"
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(out))
    assert r.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == [out.name]
    assert out.read_bytes()[:5] in (b"<?xml", b"%PDF-")


def test_plot_writes_a_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "ttft.png"
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--kv-cache", "off", "--kv-cache", "cpu",
               "--plot", str(out))
    assert r.exit_code == 0 and out.read_bytes()[:4] == b"\x89PNG"


def test_plot_says_where_it_wrote_the_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "charts" / "ttft.svg"
    out.parent.mkdir()
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(out))
    assert r.exit_code == 0
    assert r.stderr.splitlines()[-1] == f"Wrote the TTFT distribution chart to {out}"


ONE = ["--workload", "long-doc-qa", "--documents", "1", "--document-tokens", "4000",
       "--output-tokens", "1", "--concurrency", "1", "--kv-cache", "off"]


def test_plot_of_one_request_draws_its_step(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    # one TTFT was one point of a step plot, a line of no length: an empty chart
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    drawn: list[tuple[list[float], list[float]]] = []
    step = Axes.step

    def recording(self: Axes, x: list[float], y: list[float], *a: object,
                  **kw: object) -> object:
        drawn.append((list(x), list(y)))
        return step(self, x, y, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "step", recording)
    r = lmikit("simulate", *WHAT_IF, *ONE, "--plot", str(tmp_path / "one.png"))
    assert r.exit_code == 0, r.output
    ((xs, ys),) = drawn
    assert ys == [0.0, 1.0] and xs[0] == xs[1] > 0


def test_the_table_shows_a_sub_second_run_in_milliseconds() -> None:
    total = json.loads(lmikit("simulate", *WHAT_IF, *ONE, "--json").stdout)[
        "results"][0]["total_time_s"]
    assert total < 1
    table = lmikit("simulate", *WHAT_IF, *ONE).output
    assert f"{total * 1000:.0f} ms │" in table and "0.0 s" not in table


def test_plot_without_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # importing it now fails
    r = lmikit("simulate", *WHAT_IF, *SMALL, "--plot", str(tmp_path / "x.png"))
    assert r.exit_code == 2
    assert r.stderr == ("Error: lmikit simulate --plot needs matplotlib: "
                        "pip install 'lmikit[plot]'\n")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "long-doc-qa", "--documents", "100000000"],
     "makes 200,000,000 requests; the simulator runs at most 100,000"),
    (["--workload", "long-doc-qa", "--document-tokens", "100000000000"],
     "over the context window of 40,960 tokens (vLLM refuses such a request)"),
    (["--workload", "multi-turn-chat", "--think-time", "nan"], "nan is not a finite number"),
    (["--workload", "multi-turn-chat", "--think-time", "inf"], "inf is not a finite number"),
    (["--workload", "rag", "--zipf", "nan"], "nan is not a finite number"),
    (["--workload", "rag", "--zipf", "11"], "11.0 is not in the range 0<=x<=10"),
    (["--workload", "rag", "--corpus-chunks", "100000000"], "over the simulator's 1,000,000"),
    (["--workload", "rag", "--hourly-price", "inf"], "inf is not in the range 0<x<=10000.0"),
    # the cost overflowed to Infinity, which --json printed as invalid JSON
    (["--workload", "rag", "--hourly-price", "1e308"], "1e+308 is not in the range 0<x<=10000.0"),
    (["--workload", "multi-turn-chat", "--turns", "100000000", "--context-tokens",
      "2000000000"], "makes 100,000,000 requests"),
])
def test_hostile_flags_fail_fast_with_the_flag_value_and_limit(args: list[str],
                                                               message: str) -> None:
    with deadline(10):
        r = lmikit("simulate", *WHAT_IF, *args)
    assert r.exit_code == 2 and message in r.output, r.output


def test_spec_max_model_len_bounds_the_prompts(tmp_path: Path) -> None:
    text = DEFAULT_SPEC.read_text()
    assert "  max_model_len: 32768\n" in text
    spec = tmp_path / "s.yaml"
    spec.write_text(text.replace("  max_model_len: 32768\n", "  max_model_len: 4096\n"))
    r = lmikit("simulate", str(spec), "--workload", "long-doc-qa", "--document-tokens", "4000",
               "--output-tokens", "100")
    assert r.exit_code == 2 and "over the context window of 4,096 tokens" in r.output, r.output


def test_plan_of_a_remote_tier_spec_prints_the_remote_hit(tmp_path: Path) -> None:
    spec = tmp_path / "remote.yaml"
    spec.write_text(DEFAULT_SPEC.read_text().replace(
        "  mode: cpu\n", "  mode: remote\n  remote_url: redis://cache.internal:6379\n", 1))
    assert "mode: remote" in spec.read_text()
    out = lmikit("plan", str(spec))
    assert out.exit_code == 0, out.output
    assert "TTFT on a remote hit" in out.output
    assert "TTFT on a remote hit" not in lmikit("plan", str(DEFAULT_SPEC)).output


def test_calibrated_spec_plan_costs_the_spec_with_the_fitted_engine(tmp_path: Path) -> None:
    """``plan SPEC --calibrate`` prices the spec's own request (its typical tokens and
    suffix) with the simulator's engine for that spec, fitted coefficients in."""
    from lmikit.sim._engine import single_request
    from lmikit.sim._scenario import deployment_from_spec
    from lmikit.spec._loader import load_spec

    spec = load_spec(DEFAULT_SPEC)
    dep = deployment_from_spec(spec, DEFAULT_SPEC.parent)
    bench = synthetic_bench(dep.with_coefficients(Coefficients(prefill_mfu=0.35)),
                            long_doc_qa(6, 8_000, 8, 2), "cpu")
    path = tmp_path / "run2.json"
    path.write_text(json.dumps(bench.to_dict()))
    r = lmikit("plan", str(DEFAULT_SPEC), "--calibrate", str(path), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    fitted = Coefficients(**data["calibration"]["coefficients"])
    one = single_request(dep.engine.with_coefficients(fitted),
                         spec.workload.typical_request_tokens,
                         spec.workload.unique_suffix_tokens, dep.chunk_size,
                         lmcache=data["tier"] != "none")
    assert data["tier"] == "cpu"
    assert data["predicted"]["ttft_miss_s"] == pytest.approx(one.miss_s, rel=1e-3)
    assert data["predicted"]["ttft_hit_s"]["cpu"] == pytest.approx(one.hit_s["cpu"], rel=1e-3)
    assert fitted.prefill_mfu == pytest.approx(0.35, rel=0.05)
    assert any(a.startswith(f"prefill at {fitted.prefill_mfu:.0%} (fitted to run2.json)")
               for a in data["assumptions"])


QWEN3_32B_CONFIG = str(Path(__file__).parent / "data" / "qwen3-32b-config.json")


@pytest.mark.parametrize("command", [
    ["plan"], ["simulate", "--workload", "rag", "--requests", "20"]])
def test_what_if_takes_the_config_of_a_model_outside_the_catalog(command: list[str]) -> None:
    """Qwen3-32B is not in the catalog; its config.json (64 layers, 8 KV heads of 128) gives
    64 x 2 x 8 x 128 x 2 bytes = 256 KiB of KV a token, at TP 2 on an H100 pool."""
    what_if = ["--model", "Qwen/Qwen3-32B", "--instance", "ml.p5.48xlarge", "--tp", "2"]
    refused = lmikit(*command, *what_if)
    assert refused.exit_code != 0
    assert "--config with --model" in str(refused.exception or "") + refused.output
    r = lmikit(*command, *what_if, "--config", QWEN3_32B_CONFIG, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    if command == ["plan"]:
        assert data["kv_bytes_per_token"] == 64 * 2 * 8 * 128 * 2
    else:
        assert data["deployment"]["model"] == "Qwen/Qwen3-32B"
        assert data["deployment"]["tp"] == 2 and data["results"]


@pytest.mark.parametrize(("command", "flags", "named"), [
    (["plan"], ["--tp", "2"], "--tp"),
    (["plan"], ["--context", "5000", "--request-tokens", "900"], "--context/--request-tokens"),
    (["plan"], ["--config", QWEN3_32B_CONFIG], "--config"),
    (["simulate", "--workload", "rag"], ["--config", QWEN3_32B_CONFIG], "--config"),
    (["simulate", "--workload", "rag"], ["--copies", "2"], "--copies"),
])
def test_a_spec_refuses_what_if_flags_it_would_ignore(command: list[str], flags: list[str],
                                                      named: str) -> None:
    r = lmikit(*command, str(DEFAULT_SPEC), *flags)
    assert r.exit_code == 2
    assert f"give either SPEC or --model/--instance/{named}, not both" in r.output


@pytest.mark.parametrize(("copies", "instances", "billed"), [(4, None, 1), (1, 4, 4),
                                                             (2, 4, 2), (3, 4, 2)])
def test_what_if_copies_share_an_instance_and_cost_counts_whole_instances(
        copies: int, instances: int | None, billed: int) -> None:
    """Cost per 1K tokens = USD per instance-hour x instances billed (copies over copies per
    instance, rounded up) x the run's hours / its thousands of tokens."""
    more = ["--instances", str(instances)] if instances else []
    r = lmikit("simulate", "--model", "Qwen/Qwen3-8B", "--instance", "ml.g6.12xlarge",
               "--copies", str(copies), *more, "--workload", "rag", "--requests", "40",
               "--hourly-price", "3.6", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["deployment"]["copies_per_instance"] == copies
    assert data["deployment"]["instances"] == (instances or copies)
    (row,) = data["results"]
    assert row["usd_per_1k_tokens"] == pytest.approx(
        3.6 / 3600 * billed / row["throughput_tokens_s"] * 1000, rel=1e-3)


def test_what_if_copies_must_fit_the_instances_gpus() -> None:
    r = lmikit("simulate", "--model", "Qwen/Qwen3-8B", "--instance", "ml.g6.12xlarge",
               "--tp", "2", "--copies", "3", "--workload", "rag")
    assert r.exit_code != 0
    assert "needs 6 GPUs but ml.g6.12xlarge has 4" in str(r.exception or "") + r.output


def _notes(*args: str) -> list[str]:
    r = lmikit("simulate", str(DEFAULT_SPEC), "--workload", "long-doc-qa", *args, "--json")
    assert r.exit_code == 0, r.output
    notes: list[str] = json.loads(r.stdout)["notes"]
    return notes


def test_repeated_tokens_counts_each_prefix_sent_more_than_once() -> None:
    from lmikit.sim._scenario import repeated_tokens

    # 3 documents of 1,000 tokens: each sent in warm-up and query; its 3 full 256-token
    # chunks (the question shares the last partial one) are what repeats
    assert repeated_tokens(long_doc_qa(3, 1_000, 8, 1)) == 3 * 3 * 256
    assert repeated_tokens(long_doc_qa(1, 200, 8, 1)) == 0  # no full chunk to repeat


def test_repeated_tokens_equals_counting_every_key_at_once() -> None:
    """The sharded count against one Counter of every key, on workloads whose keys are
    real hashes (negative ones too) and on keys that fall in one shard."""
    from collections import Counter

    from lmikit.sim._scenario import KEY_SHARDS, repeated_tokens
    from lmikit.sim._workloads import Phase, Request, Workload, multi_turn_chat, rag

    one_shard = [Request(i, keys, 0, 1, i) for i, keys in enumerate(
        [(KEY_SHARDS, 2 * KEY_SHARDS), (KEY_SHARDS, -KEY_SHARDS), (-KEY_SHARDS,)])]
    works = [rag(500, 256, 4, 1.1, 8, 4, requests=300), multi_turn_chat(4_000, 4, 8, 4),
             long_doc_qa(20, 3_000, 8, 4), Workload("w", [Phase("p", [one_shard])], 16)]
    for work in works:
        counts = Counter(k for r in work.requests for k in r.keys)
        assert any(k < 0 for k in counts)
        expected = sum(1 for n in counts.values() if n > 1) * work.chunk_size
        assert expected > 0 and repeated_tokens(work) == expected


def test_a_note_says_the_repeated_text_fits_the_gpu_pool() -> None:
    """Docqa's copy holds 464,658 tokens of GPU KV; 12 x 4,000 tokens fit it."""
    gpu = deployment("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.2xlarge").gpu_tokens
    (note,) = _notes("--documents", "12", "--document-tokens", "4000", "--kv-cache", "off",
                     "--kv-cache", "cpu")
    assert note.startswith(f"the text this workload repeats ({12 * 15 * 256:,} tokens) fits "
                           f"vLLM's GPU prefix cache ({gpu:,} tokens per copy)")


def test_a_note_says_a_cycle_bigger_than_every_tier_is_evicted_before_it_returns() -> None:
    # 80 x 8,000 tokens asked in turn, twice: more than the GPU pool and the CPU tier hold,
    # so least-recently-used tiers have dropped each document before it comes back
    (note,) = _notes("--documents", "80", "--document-tokens", "8000", "--kv-cache", "cpu")
    assert "outgrows both vLLM's GPU prefix cache" in note and "had evicted it" in note


def test_no_note_where_lmcache_serves_or_is_not_simulated() -> None:
    # 60 x 8,000 tokens: more than the GPU pool, less than the CPU tier, so LMCache serves
    assert _notes("--documents", "60", "--document-tokens", "8000", "--kv-cache", "cpu") == []
    assert _notes("--documents", "12", "--document-tokens", "4000", "--kv-cache", "off") == []


def test_a_note_says_when_nothing_repeats(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": i, "chunk_ids": [f"u{i}-{k}" for k in
                                                                       range(4)],
                                         "output_tokens": 5}) + "\n" for i in range(5)))
    r = lmikit("simulate", str(DEFAULT_SPEC), "--workload", "trace", "--trace", str(trace),
               "--kv-cache", "cpu", "--json")
    assert r.exit_code == 0, r.output
    (note,) = json.loads(r.stdout)["notes"]
    assert note.startswith("no prompt began with a prefix an earlier prompt had sent")


def test_a_calibrated_what_if_plan_of_a_model_outside_the_catalog_reads_its_config(
        tmp_path: Path) -> None:
    """The fit builds its own deployment of the model: it needs --config as the plan does."""
    what_if = ["--model", "Qwen/Qwen3-32B", "--instance", "ml.p5.48xlarge", "--tp", "2",
               "--config", QWEN3_32B_CONFIG]
    dep = deployment("Qwen/Qwen3-32B", "ml.p5.48xlarge", tp=2, config_path=QWEN3_32B_CONFIG)
    bench = synthetic_bench(dep.with_coefficients(Coefficients(prefill_mfu=0.4)),
                            long_doc_qa(6, 4_000, 8, 2), "cpu")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench.to_dict()))
    r = lmikit("plan", *what_if, "--calibrate", str(path), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["calibration"]["coefficients"]["prefill_mfu"] == pytest.approx(0.4, rel=0.05)
    assert data["kv_bytes_per_token"] == 64 * 2 * 8 * 128 * 2


def test_tensor_parallel_over_pcie_is_noted_as_a_floor() -> None:
    def notes(instance: str, tp: str) -> list[str]:
        r = lmikit("simulate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance", instance,
                   "--tp", tp, "--workload", "long-doc-qa", "--documents", "4",
                   "--kv-cache", "off", "--json")
        assert r.exit_code == 0, r.output
        got: list[str] = json.loads(r.stdout)["notes"]
        return got

    assert notes("ml.g6e.12xlarge", "4") == [
        "ml.g6e.12xlarge's GPUs have no NVLink: the all-reduces of its 4 tensor-parallel ranks "
        "are costed at their floor over PCIe (25 GB/s a GPU), so prefill and decode times are "
        "lower bounds; measure them with lmikit bench."]
    assert notes("ml.p4de.24xlarge", "4") == []
    assert notes("ml.g6e.12xlarge", "1") == []


def test_the_readmes_simulate_example_is_real_and_shows_the_disk_taking_the_rest() -> None:
    """The README's command prints the rows shown beside it, and its `cpu+disk` rows differ
    from its `cpu` rows: each copy's repeated context outgrows the CPU tier, and the disk
    tier, which LMCache writes every chunk to, serves what it evicted."""
    import shlex

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    start = readme.index("$ lmikit simulate examples/docqa-qwen7b.yaml")
    block = readme[start:readme.index("```", start)].splitlines()
    command = " ".join(line.rstrip("\\ ") for line in block[:2])
    shown = [line for line in block if line.startswith("│")]
    r = CliRunner().invoke(main, shlex.split(command)[2:], env={"COLUMNS": "130"})  # $ lmikit
    assert r.exit_code == 0, r.output
    printed = [line.rstrip() for line in r.stdout.splitlines() if line.startswith("│")]
    assert len(shown) == 6 and printed == shown
    rows = {tuple(cell.strip() for cell in line.split("│")[1:3]): line.split("│")
            for line in printed}
    for routing in ("sticky_session", "random"):
        disk = int(rows[(routing, "cpu+disk")][8].split("/")[2])  # Hit % gpu/cpu/disk/rem
        assert disk > 0 and int(rows[(routing, "cpu")][8].split("/")[2]) == 0
        assert rows[(routing, "cpu+disk")][3] != rows[(routing, "cpu")][3]  # TTFT p50


# -- the what-if tier sizes ---------------------------------------------------------------

G6E = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--instance", "ml.g6e.2xlarge"]
DOCS = ["--workload", "long-doc-qa", "--documents", "55", "--document-tokens", "10000",
        "--output-tokens", "8"]


def test_cpu_size_gb_shrinks_the_cpu_tier_and_the_disk_takes_the_rest() -> None:
    """550K tokens of documents outgrow the GPU prefix cache (465K tokens on ml.g6e.2xlarge)
    and fit the auto CPU tier (592K), so cpu+disk reads them from CPU memory as cpu does;
    at 10 GB a worker (187K tokens) they do not, and
    the disk tier, which LMCache writes every chunk to, serves what the CPU tier evicted:
    the hit rate per tier says so in the table and in --json."""
    def hits(*flags: str) -> dict[str, dict[str, float]]:
        r = lmikit("simulate", *G6E, *DOCS, "--kv-cache", "cpu", "--kv-cache", "cpu+disk",
                   "--json", *flags)
        assert r.exit_code == 0, r.output
        data = json.loads(r.output)
        return {row["kv_cache"]: row["hit_rate"] for row in data["results"]} | {
            "tokens": data["deployment"]["tier_tokens"]}

    auto = hits()
    assert auto["cpu"] == auto["cpu+disk"] and auto["cpu+disk"]["cpu"] > 0.99
    small = hits("--cpu-size-gb", "10")
    assert small["tokens"]["cpu"]["cpu"] == 10 * 2**30 // 57_344 < auto["tokens"]["cpu"]["cpu"]
    assert small["cpu"]["cpu"] == 0 and small["cpu+disk"]["disk"] > 0.99
    table = lmikit("simulate", *G6E, *DOCS, "--kv-cache", "cpu+disk", "--cpu-size-gb", "10")
    row = next(line for line in table.output.splitlines() if "cpu+disk" in line)
    assert row.split("│")[8].strip() == "0/0/100/0"  # Hit % gpu/cpu/disk/rem


def test_disk_size_gb_sets_the_disk_tier() -> None:
    r = lmikit("simulate", *G6E, *DOCS, "--kv-cache", "cpu+disk", "--disk-size-gb", "20",
               "--json")
    assert r.exit_code == 0, r.output
    tiers = json.loads(r.output)["deployment"]["tier_tokens"]
    assert tiers["cpu+disk"]["disk"] == 20 * 2**30 // 57_344


@pytest.mark.parametrize(("flags", "hint", "message"), [
    (["--cpu-size-gb", "0"], "--cpu-size-gb", "'0' is not 'auto' or a size in GB"),
    (["--cpu-size-gb", "nan"], "--cpu-size-gb", "'nan' is not 'auto' or a size in GB"),
    (["--cpu-size-gb", "big"], "--cpu-size-gb", "'big' is not 'auto' or a size in GB"),
    (["--cpu-size-gb", "500"], "--cpu-size-gb",
     "cpu_size_gb is 500; expected at most 31.6 GB, the host memory ml.g6e.2xlarge gives"),
    (["--kv-cache", "cpu+disk", "--disk-size-gb", "5000"], "--disk-size-gb",
     "disk_size_gb is 5000; expected at most 363.1 GB, the NVMe ml.g6e.2xlarge gives"),
    (["--kv-cache", "cpu", "--disk-size-gb", "50"], "--disk-size-gb",
     "sizes the disk tier of --kv-cache cpu\\+disk, which is not simulated here"),
])
def test_tier_sizes_that_cannot_be_are_refused_naming_the_flag(flags: list[str], hint: str,
                                                               message: str) -> None:
    r = lmikit("simulate", *G6E, *DOCS, *flags)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert hint in r.output
    assert __import__("re").search(message, " ".join(r.output.split())), r.output


def test_tier_sizes_and_the_remote_store_are_refused_beside_a_spec() -> None:
    for flag, value in (("--cpu-size-gb", "10"), ("--disk-size-gb", "10"),
                        ("--remote-store", "hyperpod")):
        r = lmikit("simulate", str(DEFAULT_SPEC), *DOCS, flag, value)
        assert r.exit_code == 2 and f"/{flag}, not both" in r.output, r.output


def test_remote_store_picks_the_store_the_remote_tier_reads() -> None:
    """The HyperPod scenario: L1 (LMCache's CPU tier) + L2 (HyperPod's tiered storage) +
    KV-aware routing; its store's lookup takes two round trips a chunk, Redis's one."""
    from lmikit.cli._simulate import REMOTE_STORES
    from lmikit.sim._stores import STORES

    assert REMOTE_STORES == tuple(STORES)
    r = lmikit("simulate", *WHAT_IF, "--instances", "2", *SMALL, "--kv-cache", "remote",
               "--routing", "kv_aware", "--remote-store", "hyperpod", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["deployment"]["remote_store"] == "hyperpod"
    assert data["results"][0]["kv_cache"] == "remote"
    bad = lmikit("simulate", *WHAT_IF, *SMALL, "--remote-store", "tape")
    assert bad.exit_code == 2 and "--remote-store" in bad.output
