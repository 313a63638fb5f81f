"""Long-Doc-QA workload and runner, driven by a simulated cache whose TTFT depends on hits."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from lmikit.bench._long_doc_qa import (
    BenchResult,
    LongDocQA,
    Measurement,
    RoundResult,
    bench_file,
    run_long_doc_qa,
)
from lmikit.errors import LmikitError
from lmikit.testing import VirtualClock


class SimulatedCache:
    """A server stand-in: a prompt seen before is a hit (fast), otherwise a miss (slow)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def send(self, prompt: str) -> Measurement:
        doc = prompt.split("\n\n")[0]
        with self.lock:
            hit = doc in self.seen
            self.seen.add(doc)
        return Measurement(ttft_s=0.05 if hit else 1.0, total_s=1.5, output_tokens=100)


def test_documents_never_prefix_each_other():
    w = LongDocQA(num_documents=12, document_tokens=5)
    docs = [w.document(i) for i in range(12)]
    assert not any(a != b and b.startswith(a) for a in docs for b in docs)


@pytest.mark.parametrize("mode", ["tile", "random", "interleave"])
def test_query_round_repeats_each_document(mode):
    w = LongDocQA(num_documents=5, document_tokens=3, repeat_count=3, repeat_mode=mode)
    order = [d for d, _ in w.query_prompts()]
    assert sorted(order) == sorted(list(range(5)) * 3)


def test_repeat_modes_order_as_lmcaches_long_doc_qa_and_random_is_seeded():
    """LMCache's benchmarks/long_doc_qa/long_doc_qa.py, repeat_prompts: 'tile' repeats the
    entire list ([1, 2, 3] -> [1, 2, 3, 1, 2, 3]), 'interleave' each prompt consecutively
    ([1, 2, 3] -> [1, 1, 2, 2, 3, 3])."""
    def order(mode: str) -> list[int]:
        w = LongDocQA(num_documents=3, document_tokens=2, repeat_count=2, repeat_mode=mode)
        return [d for d, _ in w.query_prompts()]

    assert order("tile") == [0, 1, 2, 0, 1, 2]
    assert order("interleave") == [0, 0, 1, 1, 2, 2]
    r1 = LongDocQA(num_documents=8, document_tokens=2, repeat_mode="random", repeat_count=2)
    assert r1.query_prompts() == LongDocQA(num_documents=8, document_tokens=2,
                                           repeat_mode="random", repeat_count=2).query_prompts()


def test_run_reports_warmup_misses_against_query_hits():
    cache = SimulatedCache()
    w = LongDocQA(num_documents=6, document_tokens=10, in_flight=3)
    result = run_long_doc_qa(w, cache.send)
    assert [r.name for r in result.rounds] == ["pre-warmup", "warmup", "query"]
    assert result.round("warmup").mean_ttft_s == pytest.approx(1.0)
    assert result.round("query").mean_ttft_s == pytest.approx(0.05)
    assert result.ttft_speedup == pytest.approx(20.0)
    assert result.to_dict()["rounds"][2]["requests"] == 6


def test_invalid_workload_is_rejected():
    with pytest.raises(LmikitError, match="repeat_mode"):
        LongDocQA(repeat_mode="shuffle")  # type: ignore[arg-type]
    with pytest.raises(LmikitError, match="in_flight"):
        LongDocQA(in_flight=0)


def _run(*query: Measurement, warmup: Measurement | None = None) -> BenchResult:
    w = LongDocQA(num_documents=len(query), document_tokens=3_900, pre_warmup=0)
    first = warmup or Measurement(0.5, 0.9, 3)
    return BenchResult(w, [
        RoundResult("warmup", len(query), 1.0, [], 3, [0.0] * len(query), [first] * len(query)),
        RoundResult("query", len(query), 1.0, [], 3, [1.0] * len(query), list(query))])


def test_the_servers_cached_token_count_is_the_outcome_not_the_prediction() -> None:
    """A request the cache model expected to hit, whose server counted no cached tokens,
    missed; one it expected to miss, whose server counted some, hit (which tier served it
    is not said: the server counts cached tokens, not where they came from)."""
    rows = bench_file(_run(Measurement(0.9, 1.2, 3, 3_931, 0),
                           Measurement(0.1, 0.4, 3, 3_931, 3_840)),
                      kv_cache="cpu", query_outcomes=[{"gpu": 3_840}, {}])["requests"]
    assert [(r["hit"], r["tier"], r["cached_tokens"], r["outcome_source"])
            for r in rows[2:]] == [(False, None, 0, "measured"), (True, None, 3_840, "measured")]
    assert all(r["prompt_tokens"] == 3_931 and r["prompt_source"] == "measured"
               for r in rows[2:])


def test_a_measured_count_keeps_the_predicted_tiers_when_they_agree_within_a_chunk() -> None:
    """vLLM's GPU blocks (16 tokens) are finer than LMCache's 256-token chunks: the GPU
    share takes the difference."""
    row = bench_file(_run(Measurement(0.1, 0.4, 3, 3_931, 3_920)), kv_cache="cpu",
                     query_outcomes=[{"gpu": 3_328, "cpu": 512}])["requests"][1]
    assert row["cached_by_tier"] == {"gpu": 3_408, "cpu": 512} and row["tier"] == "gpu"


def test_a_usage_chunk_without_cached_tokens_counts_none_where_the_server_counts_them() -> None:
    """vLLM before _make_prompt_tokens_details wrote prompt_tokens_details only for a
    request with cached tokens ('if self.enable_prompt_tokens_details and
    num_cached_tokens', serving_chat.py): its misses carry none."""
    rows = bench_file(_run(Measurement(0.1, 0.4, 3, 3_931, 3_840),
                           warmup=Measurement(0.9, 1.2, 3, 3_931)),
                      kv_cache="off", query_outcomes=[{"gpu": 3_840}])["requests"]
    assert [(r["hit"], r["cached_tokens"], r["outcome_source"]) for r in rows] == [
        (False, 0, "measured"), (True, 3_840, "measured")]


def test_without_the_servers_counts_outcomes_are_predicted_and_capped_by_the_prompt() -> None:
    """LMI sends usage.prompt_tokens but no cached tokens: the prediction stands, said to
    be one, and never claims more than the prompt less its last token (vLLM computes it)."""
    rows = bench_file(_run(Measurement(0.1, 0.4, 3, 3_800)), kv_cache="cpu",
                      query_outcomes=[{"gpu": 3_840}])["requests"]
    assert rows[0]["outcome_source"] == "predicted" and rows[0]["hit"] is False
    assert (rows[1]["cached_tokens"], rows[1]["outcome_source"]) == (3_799, "predicted")
    estimated = bench_file(_run(Measurement(0.1, 0.4, 3)))["requests"][1]
    assert (estimated["prompt_tokens"], estimated["prompt_source"]) == (3_912, "estimated")
    assert (estimated["hit"], estimated["outcome_source"]) == (None, None)


class _StubRuntime:
    """A runtime client whose stream sends ``lines`` (JSON lines, as LMI does), each after
    its delay on ``clock``."""

    def __init__(self, clock: VirtualClock, *lines: tuple[float, str]) -> None:
        self.clock = clock
        self.lines = lines

    def invoke_endpoint_with_response_stream(self, **_: object) -> dict:
        def body() -> Iterator[dict]:
            for delay, line in self.lines:
                self.clock.advance(delay)
                yield {"PayloadPart": {"Bytes": line.encode() + b"\n"}}
        return {"Body": body()}


ROLE = '{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}'
THINK = '{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}'
ANSWER = '{"choices":[{"index":0,"delta":{"content":"Yes"}}]}'
USAGE = '{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":100}}'


def _send(*lines: tuple[float, str]) -> Measurement:
    from lmikit.cli._bench import _Runner
    from lmikit.client._endpoint import Endpoint

    clock = VirtualClock()
    ep = Endpoint("x", client=_StubRuntime(clock, *lines), region="us-east-1", clock=clock)
    return _Runner(ep, LongDocQA(num_documents=1, document_tokens=5), None, False).send("hi")


def test_a_reasoning_token_is_the_first_token() -> None:
    """vLLM's reasoning parser streams the thinking as delta.reasoning_content before any
    content: the engine's first token is the first reasoning one, not the answer's."""
    m = _send((0.05, ROLE), (0.3, THINK), (2.0, ANSWER), (0.1, USAGE))
    assert m.ttft_s == pytest.approx(0.35) and m.total_s == pytest.approx(2.45)
    assert m.excluded is None


def test_a_stream_without_a_generated_token_is_no_ttft_evidence() -> None:
    """Only the role and the usage arrived: its total time once became a 2 s 'TTFT' with no
    decode time, and entered the fit."""
    m = _send((0.05, ROLE), (2.0, USAGE))
    assert m.excluded is not None and "no generated token arrived" in m.excluded
    row = bench_file(_run(m))["requests"][1]
    assert row["excluded"] == m.excluded


def test_a_request_botocore_retried_is_no_ttft_evidence() -> None:
    """botocore's adaptive retries (up to 5 attempts) put their back-off inside the
    measured time: a throttled request would look like a slow miss. botocore says how many
    it made in ResponseMetadata.RetryAttempts."""
    class Retried(_StubRuntime):
        def invoke_endpoint_with_response_stream(self, **kw: object) -> dict:
            return {**super().invoke_endpoint_with_response_stream(**kw),
                    "ResponseMetadata": {"RetryAttempts": 2}}

    from lmikit.cli._bench import _Runner
    from lmikit.client._endpoint import Endpoint

    clock = VirtualClock()
    ep = Endpoint("x", client=Retried(clock, (0.1, ANSWER), (0.1, USAGE)), region="us-east-1",
                  clock=clock)
    m = _Runner(ep, LongDocQA(num_documents=1, document_tokens=5), None, False).send("hi")
    assert m.excluded == ("botocore retried it 2 time(s) (throttled or a 5xx answer), so its "
                          "TTFT includes the back-off")


def test_bench_pools_a_connection_per_request_in_flight(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """botocore pools 10 connections by default; at 16 in flight urllib3 discarded 12
    ('Connection pool is full') and those requests opened new TCP and TLS connections
    inside their TTFT."""
    from lmikit.client._endpoint import Endpoint

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    assert Endpoint("x", region="us-east-1").client.meta.config.max_pool_connections == 10
    ep = Endpoint("x", region="us-east-1", max_connections=17)
    assert ep.client.meta.config.max_pool_connections == 17


def test_a_request_starts_when_it_leaves_not_when_its_session_was_opened() -> None:
    """With --session-per-document the first request of a document opens its session
    first: its start once counted that call while its TTFT did not, so a replay had it
    arrive early."""
    from lmikit.bench._long_doc_qa import run_round

    rnd = run_round("warmup", ["a"], lambda _: Measurement(0.1, 0.2, 1, sent_after_s=0.5),
                    in_flight=1)
    assert rnd.starts_s[0] == pytest.approx(0.5, abs=0.05)  # from the round's start
