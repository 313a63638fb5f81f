"""``lmikit bench`` (and ``lmikit invoke --publish-metrics``) run in-process against the fake.

The fake SageMaker is served over local HTTP (as the sandbox does) and the CLI's boto3 finds
it through ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``; moto answers CloudWatch. No AWS account.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result

from lmikit.bench._long_doc_qa import BenchInterrupted, Measurement, run_round
from lmikit.cli import main
from lmikit.errors import InvokeError
from lmikit.metric_catalog import CLIENT_NAMESPACE
from lmikit.testing import FakeSageMaker, VirtualClock
from lmikit.testing._server import _handler

from .conftest import REGION, SPEC_YAML, deployment

SMALL = ["--num-documents", "4", "--document-tokens", "50", "--output-tokens", "8"]


@pytest.fixture
def served(fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSageMaker]:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    fake.calls.clear()
    # the CLI runs on wall time; session expiry (from the fake's clock) must agree with it
    clock.advance(time.time() - clock.time())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for api in ("SAGEMAKER_RUNTIME", "SAGEMAKER"):  # bench --output describes the endpoint
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{api}", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def lmikit(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def streams(fake: FakeSageMaker) -> list[dict[str, Any]]:
    return [i for i in fake.runtime.invocations if i["streaming"]]


def test_bench_json_reports_every_round_and_sends_every_request(served: FakeSageMaker) -> None:
    r = lmikit("bench", "docqa", *SMALL, "--repeat-count", "2", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert set(data) == {"endpoint", "adapter", "sessions", "workload", "rounds",
                         "ttft_speedup"}
    assert data["workload"]["num_documents"] == 4 and data["sessions"] == 0
    assert [(x["round"], x["requests"]) for x in data["rounds"]] == [
        ("pre-warmup", 2), ("warmup", 4), ("query", 8)]
    assert set(data["rounds"][0]) == {"round", "requests", "round_time_s", "mean_ttft_s",
                                      "p90_ttft_s", "output_tokens"}
    assert len(served.operations("InvokeEndpointWithResponseStream")) == 2 + 4 + 8
    sent = streams(served)
    assert all(s["payload"]["max_tokens"] == 8 and s["payload"]["temperature"] == 0
               for s in sent)
    run = data["workload"]["run_id"]
    assert sum(s["payload"]["messages"][0]["content"].startswith(f"{run}3 hi hi")
               for s in sent) == 1 + 2


def test_bench_routes_to_an_adapter(served: FakeSageMaker) -> None:
    r = lmikit("bench", "docqa", *SMALL, "--adapter", "legal", "--json")
    assert r.exit_code == 0, r.output
    assert {s["component"] for s in streams(served)} == {"docqa-legal"}


def test_bench_session_per_document_opens_one_session_per_document(
        served: FakeSageMaker) -> None:
    r = lmikit("bench", "docqa", *SMALL, "--session-per-document", "--repeat-count", "2",
               "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["sessions"] == 4
    opened = [i for i in served.runtime.invocations if i["session"] == "NEW_SESSION"]
    assert len(opened) == 4
    by_doc: dict[str, set[str]] = {}
    for s in streams(served):
        prompt = s["payload"]["messages"][0]["content"]
        if " hi " in prompt:
            by_doc.setdefault(prompt.split()[0], set()).add(s["session"])
    assert len(by_doc) == 4 and all(len(ids) == 1 for ids in by_doc.values())
    assert len({next(iter(ids)) for ids in by_doc.values()}) == 4  # one session each
    assert all(s.closed for s in served.runtime.sessions.values())


def test_bench_takes_the_endpoint_from_a_spec_and_prints_a_table(
        served: FakeSageMaker, tmp_path: Path) -> None:
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    r = lmikit("bench", str(spec), *SMALL)
    assert r.exit_code == 0, r.output
    assert "Long-Doc-QA on docqa" in r.stdout and "warmup over query" in r.stdout
    for name in ("pre-warmup", "warmup", "query", "Mean TTFT", "p90 TTFT"):
        assert name in r.stdout


def test_bench_without_a_terminal_prints_progress_lines(served: FakeSageMaker) -> None:
    """Redirected (CI, `> log 2>&1`), the bar is not drawn: a line per tenth of a round."""
    r = lmikit("bench", "docqa", *SMALL, "--repeat-count", "3")
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("bench ")]
    assert [line.split(" (")[0] for line in lines] == [
        "bench pre-warmup: 1/2 requests done", "bench pre-warmup: 2/2 requests done",
        *(f"bench warmup: {i}/4 requests done" for i in range(1, 5)),
        *(f"bench query: {i}/12 requests done" for i in (2, 4, 6, 8, 10, 12))]
    assert all(re.fullmatch(r".*\(\d+ s\)", line) for line in lines)


def test_progress_lines_come_every_tenth_of_a_round_and_at_its_end(
        capsys: pytest.CaptureFixture[str]) -> None:
    from lmikit.cli._bench import progress_lines

    done = progress_lines({"warmup": 46}, clock=lambda: 0.0)
    for i in range(46):
        done("warmup", i, Measurement(0.1, 0.2, 8))
    assert capsys.readouterr().err.splitlines() == [
        f"bench warmup: {n}/46 requests done (0 s)"
        for n in (5, 10, 15, 20, 25, 30, 35, 40, 45, 46)]


@pytest.mark.slow
def test_bench_output_is_a_calibration_file_of_every_request(
        served: FakeSageMaker, tmp_path: Path) -> None:
    from lmikit.sim._calibrate import load_bench

    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    out = tmp_path / "bench.json"
    r = lmikit("bench", str(spec), *SMALL, "--output", str(out))
    assert r.exit_code == 0, r.output
    bench = load_bench(out)
    assert [x.round for x in bench.records] == ["pre-warmup"] * 2 + ["warmup"] * 4 \
        + ["query"] * 4
    assert bench.model and bench.instance and bench.kv_cache
    assert bench.copies == 1  # the base component's CurrentCopyCount, which the fit replays on
    warm = [x.start_s for x in bench.records if x.round == "warmup"]
    query = [x.start_s for x in bench.records if x.round == "query"]
    assert min(query) >= max(warm) >= 0  # one clock for the whole run, rounds in order
    assert all(not x.hit for x in bench.records if x.round != "query")
    # the server's usage.prompt_tokens: the fake counts words, the run id, 50 "hi" and the
    # question's 7 words
    assert all(x.prompt_tokens == 1 + 50 + 7 and x.prompt_source == "measured"
               for x in bench.records if x.round == "warmup")


@pytest.mark.slow
def test_bench_output_says_which_tier_should_serve_each_query(
        served: FakeSageMaker, tmp_path: Path) -> None:
    """A spec target labels each query request with what the spec's caches should give it
    (here 4 documents of 612 tokens, 2 full chunks each, all in the GPU pool); an endpoint
    name cannot, and leaves them unknown for the fit to set aside."""
    from lmikit.sim._calibrate import load_bench

    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    out = tmp_path / "bench.json"
    args = ["--num-documents", "4", "--document-tokens", "600", "--output-tokens", "8",
            "--repeat-count", "2"]
    assert lmikit("bench", str(spec), *args, "--output", str(out)).exit_code == 0
    query = [x for x in load_bench(out).records if x.round == "query"]
    assert [(x.hit, x.tier, x.cached_tokens) for x in query] == [(True, "gpu", 512)] * 8
    # LMI sends no usage.prompt_tokens_details: the file says these are predictions
    assert {x.outcome_source for x in query} == {"predicted"}
    r = lmikit("bench", "docqa", "--region", REGION, *args, "--output", str(out))
    assert r.exit_code == 0, r.output
    bench = load_bench(out)
    assert bench.copies == 1
    assert {x.hit for x in bench.records if x.round == "query"} == {None}
    assert {x.hit for x in bench.records if x.round != "query"} == {False}


def test_a_second_bench_on_a_warm_endpoint_still_starts_cold(
        served: FakeSageMaker, tmp_path: Path) -> None:
    """The endpoint's caches keep the first run's documents; each run's own id, the first
    word of each document, keeps its warm-up from sharing a cached prefix with them."""
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    args = ["--num-documents", "3", "--document-tokens", "20", "--output-tokens", "4"]
    for _ in range(2):
        assert lmikit("bench", str(spec), *args).exit_code == 0
    documents = [i["payload"]["messages"][0]["content"] for i in streams(served)]
    documents = [d for d in documents if " hi hi" in d]
    assert len(documents) == 2 * 2 * 3  # two runs of 3 documents, asked twice each
    ids = [d.split(" ", 1)[0] for d in documents]
    first, second = set(ids[:6]), set(ids[6:])
    assert len(first) == len(second) == 3 and not first & second
    assert {i.split("-")[0] for i in first} != {i.split("-")[0] for i in second}


@pytest.mark.slow
@pytest.mark.parametrize(("where", "why"), [
    ("no/bench.json", "folder '{tmp}/no' does not exist"),
    (".", "is a directory"),  # click.Path(dir_okay=False)
])
def test_bench_refuses_an_output_it_could_not_write_before_sending_anything(
        served: FakeSageMaker, tmp_path: Path, where: str, why: str) -> None:
    """A bench takes minutes; its measurements must not be lost to a path that fails after."""
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    out = tmp_path / where
    r = lmikit("bench", str(spec), *SMALL, "--output", str(out))
    assert r.exit_code == 2
    assert why.format(tmp=tmp_path) in r.output
    assert streams(served) == []


def test_bench_labels_assume_the_routing_its_requests_get() -> None:
    from lmikit.cli._bench import _bench_routing

    assert _bench_routing("sticky_session", True) == "sticky_session"
    # without a session, SageMaker routes by the variant's strategy: least outstanding
    assert _bench_routing("sticky_session", False) == "least_outstanding"
    assert _bench_routing("prefix_aware", False) == "prefix_aware"
    assert _bench_routing("prefix_aware", True) == "sticky_session"


def test_the_copies_recorded_are_those_the_bench_ran_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A component scaled to zero has no copy until the first request; a count that changed
    during the run is recorded at its largest, with a warning."""
    from lmikit.cli._bench import _copies_during

    assert _copies_during("docqa", 0, 1) == 1
    assert _copies_during("docqa", 2, 2) == 2
    assert _copies_during("docqa", 0, 0) is None and _copies_during("docqa", 1, None) == 1
    assert capsys.readouterr().err == ""
    assert _copies_during("docqa", 1, 3) == 3
    assert "docqa went from 1 to 3 model copies during the bench; the result file records " \
        "3" in capsys.readouterr().err


def test_bench_output_from_a_spec_the_planner_refuses_fails_before_sending(
        served: FakeSageMaker, tmp_path: Path) -> None:
    """The result file needs the spec's plan; a refusal must come before the run, not after."""
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML.replace("mode: cpu", "mode: cpu+disk").replace(
        "ml.g6e.2xlarge", "ml.g5.2xlarge"))
    r = lmikit("bench", str(spec), *SMALL, "--output", str(tmp_path / "b.json"))
    assert r.exit_code != 0 and "kv_cache" in r.output, r.output
    assert streams(served) == [] and not (tmp_path / "b.json").exists()


def test_bench_rejects_an_adapter_the_spec_does_not_have(tmp_path: Path) -> None:
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    r = lmikit("bench", str(spec), "--adapter", "nope")
    assert r.exit_code == 2 and "'nope' is not an adapter of docqa" in r.output


def test_ctrl_c_during_a_round_waits_only_for_the_requests_in_flight() -> None:
    sent: list[str] = []
    gate = threading.Event()

    def send(prompt: str) -> Measurement:
        sent.append(prompt)
        if prompt != "0":
            gate.wait(5)
        return Measurement(0.1, 0.2, 1)

    def ctrl_c(*_: Any) -> None:  # Ctrl-C reaches the main thread while it waits
        threading.Timer(0.2, gate.set).start()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stopped:
        run_round("query", [str(i) for i in range(50)], send, in_flight=2, on_done=ctrl_c)
    assert len(sent) <= 1 + 2  # the first, then at most the two in flight; 47 cancelled
    # what was measured comes with it, the requests in flight that ended included
    assert isinstance(stopped.value, BenchInterrupted)
    (partial,) = stopped.value.rounds
    assert partial.stopped == "interrupted (Ctrl-C)"
    assert len(partial.measurements) == len(sent) and partial.indices == list(range(len(sent)))


@pytest.mark.parametrize(("fault", "code", "said"), [
    (InvokeError("docqa/docqa-base: ModelError: CUDA out of memory"), 2,
     "BenchStopped: the bench stopped: request 3 of the warmup round failed: docqa/docqa-base: "
     "ModelError: CUDA out of memory"),
    (KeyboardInterrupt(), 130, "Interrupted."),
])
def test_a_run_that_stops_still_writes_what_it_measured_and_fails(
        served: FakeSageMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        fault: BaseException, code: int, said: str) -> None:
    """One failed request, or Ctrl-C, once threw the whole run away: nothing was written."""
    from lmikit.cli import _bench as bench_cmd
    from lmikit.sim._calibrate import load_bench

    real, calls = bench_cmd._Runner.send, []

    def send(self: Any, prompt: str) -> Measurement:
        calls.append(prompt)
        if len(calls) == 2 + 3:  # the warm-up round's third request
            raise fault
        return real(self, prompt)

    monkeypatch.setattr(bench_cmd._Runner, "send", send)
    spec = tmp_path / "bench.yaml"
    spec.write_text(SPEC_YAML)
    out = tmp_path / "bench.json"
    r = lmikit("bench", str(spec), *SMALL, "--in-flight", "1", "--output", str(out))
    assert r.exit_code == code, r.output
    assert said in r.stderr and '"complete": false' in r.stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["stopped"]
    # the two before it, and the fourth where it had started before the run was stopped
    rounds = [x["round"] for x in data["requests"]]
    assert rounds[:4] == ["pre-warmup"] * 2 + ["warmup"] * 2 and rounds[4:] in ([], ["warmup"])
    bench = load_bench(out)
    assert bench.stopped == data["stopped"] and len(bench.records) == len(rounds)


def test_invoke_publish_metrics_sends_ttft_to_cloudwatch(served: FakeSageMaker) -> None:
    r = lmikit("invoke", "docqa", "what is a tort", "--adapter", "legal", "--publish-metrics")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "[docqa-legal] what is a tort"
    assert f"published 4 datums to {CLIENT_NAMESPACE}" in r.stderr
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    names = {m["MetricName"] for m in cloudwatch.list_metrics(
        Namespace=CLIENT_NAMESPACE)["Metrics"]}
    assert names == {"TimeToFirstToken", "OutputTokensPerSecond"}


def test_invoke_takes_the_endpoint_and_region_from_a_spec(
        served: FakeSageMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec path names the endpoint (the spec's name) and the region (the spec's, over
    AWS_DEFAULT_REGION), as for bench and adapters."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    spec = tmp_path / "docqa.yaml"
    spec.write_text(SPEC_YAML)
    r = lmikit("invoke", str(spec), "what is a tort", "--adapter", "legal")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "[docqa-legal] what is a tort"
    (call,) = served.operations("InvokeEndpointWithResponseStream")
    assert call.params["EndpointName"] == "docqa"


def test_invoke_refuses_a_region_other_than_its_specs(tmp_path: Path) -> None:
    spec = tmp_path / "docqa.yaml"
    spec.write_text(SPEC_YAML)
    r = lmikit("invoke", str(spec), "hi", "--region", "eu-west-1")
    assert r.exit_code == 2
    assert f"--region eu-west-1 is not the region of {spec} (us-east-1)" in r.output


@pytest.mark.parametrize("command", [["invoke", "examples/nothing.txt", "hi"],
                                     ["bench", "docqa_qwen7b!"],
                                     ["adapters", "list", "--endpoint", "no/such"]])
def test_a_target_that_is_neither_a_spec_nor_an_endpoint_name_is_refused_in_words(
        command: list[str]) -> None:
    r = lmikit(*command)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "is neither a spec file (no such file) nor an endpoint name (letters, digits " \
        "and hyphens" in r.output


def test_adapters_take_a_spec_given_as_the_endpoint(served: FakeSageMaker, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    spec = tmp_path / "docqa.yaml"
    spec.write_text(SPEC_YAML)
    r = lmikit("adapters", "list", "--endpoint", str(spec))
    assert r.exit_code == 0, r.output
    assert "lmikit adapters: endpoint docqa in us-east-1" in r.stderr
    assert r.stdout.splitlines()[0].startswith("legal: docqa-legal InService")


def test_bench_reads_the_copy_count_from_the_endpoint_or_says_why_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without inference components the copies are the endpoint's instances; where the caller
    may not describe the endpoint the file leaves copies out, with a warning, and the bench
    still runs. botocore's Stubber checks each request and response against the model."""
    from botocore.stub import Stubber

    from lmikit.cli._bench import _serving_copies
    from lmikit.client._endpoint import Endpoint

    ep = Endpoint("docqa", region=REGION, client=object())
    sm = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x",
                      aws_secret_access_key="x")
    with Stubber(sm) as stub:
        stub.add_client_error("describe_inference_component", "ValidationException",
                              "Could not find inference component", 400,
                              expected_params={"InferenceComponentName": ep.component})
        stub.add_response("describe_endpoint", {
            "EndpointName": "docqa", "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/docqa",
            "EndpointStatus": "InService", "CreationTime": "2026-01-01",
            "LastModifiedTime": "2026-01-01", "ProductionVariants": [
                {"VariantName": "a", "CurrentInstanceCount": 2},
                {"VariantName": "b", "CurrentInstanceCount": 1}]},
            {"EndpointName": "docqa"})
        assert _serving_copies(ep, sm) == 3
        stub.add_response("describe_inference_component", {
            "InferenceComponentName": ep.component, "EndpointName": "docqa",
            "InferenceComponentArn": "arn:aws:sagemaker:us-east-1:1:inference-component/b",
            "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/docqa",
            "CreationTime": "2026-01-01", "LastModifiedTime": "2026-01-01",
            "RuntimeConfig": {"DesiredCopyCount": 0, "CurrentCopyCount": 0}})
        assert _serving_copies(ep, sm) == 0  # scaled to zero: not an error
        stub.add_client_error("describe_inference_component", "AccessDeniedException",
                              "not authorized to perform: sagemaker:DescribeInferenceComponent",
                              400)
        assert _serving_copies(ep, sm) is None
        stub.assert_no_pending_responses()
    err = capsys.readouterr().err
    assert "cannot read how many model copies serve docqa" in err
    assert "sagemaker:DescribeInferenceComponent" in err


@pytest.mark.slow
def test_a_bench_of_an_endpoint_name_records_what_the_endpoint_runs(
        served: FakeSageMaker, tmp_path: Path) -> None:
    """Its model, instance type and TP come from DescribeInferenceComponent and
    DescribeEndpointConfig; its tier, in the stock image, is in the artifact's LMCache file,
    which bench does not read: unknown. A calibration refuses what the file leaves unknown
    or states otherwise, naming the fields, unless told --calibrate-anyway. Such a file
    once calibrated a Llama-3.1-70B plan on p5 from a Qwen-7B bench on g6e."""
    out = tmp_path / "byname.json"
    r = lmikit("bench", "docqa", "--region", REGION, *SMALL, "--adapter", "legal",
               "--output", str(out))
    assert r.exit_code == 0, r.output
    assert "docqa's description does not say its kv_cache" in r.stderr
    data = json.loads(out.read_text())
    assert (data["model"], data["instance"], data["tp"], data["kv_cache"], data["adapter"]) == (
        "Qwen/Qwen2.5-7B-Instruct", "ml.g6e.2xlarge", 1, None, "legal")
    other = lmikit("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--instance",
                   "ml.p5.48xlarge", "--tp", "8", "--calibrate", str(out))
    assert other.exit_code == 2
    for said in ("does not say which kv_cache", "model 'Qwen/Qwen2.5-7B-Instruct', not "
                 "'meta-llama/Llama-3.1-70B-Instruct'", "instance 'ml.g6e.2xlarge'",
                 "tp 1, not 8", "through adapter 'legal'", "--calibrate-anyway"):
        assert said in other.stderr, other.stderr
    anyway = lmikit("plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--instance",
                    "ml.g6e.2xlarge", "--calibrate", str(out), "--calibrate-anyway", "--json")
    assert anyway.exit_code == 0, anyway.output
    notes = json.loads(anyway.stdout)["calibration"]["notes"]
    assert any(n.startswith("fitted regardless (--calibrate-anyway): the bench file does not "
                            "say which kv_cache") for n in notes)


def test_bench_keeps_a_pooled_connection_per_request_in_flight(
        served: FakeSageMaker, caplog: pytest.LogCaptureFixture) -> None:
    """botocore pools 10 connections; at 16 in flight urllib3 once discarded 12 of them
    ('Connection pool is full'), and the requests after opened new ones inside their TTFT."""
    with caplog.at_level("WARNING", logger="urllib3"):
        r = lmikit("bench", "docqa", "--region", REGION, "--num-documents", "32",
                   "--document-tokens", "20", "--output-tokens", "4", "--in-flight", "16")
    assert r.exit_code == 0, r.output
    assert not [m for m in caplog.messages if "Connection pool is full" in m]
