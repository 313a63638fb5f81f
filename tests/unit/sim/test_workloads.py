from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from lmikit.errors import SimulationError
from lmikit.sim import _workloads as w
from lmikit.sim._workloads import QUESTION_TOKENS, load_trace, long_doc_qa, multi_turn_chat, rag
from tests.conftest import deadline


def test_long_doc_qa_warms_up_then_queries_every_document_once() -> None:
    w = long_doc_qa(5, 1_000, 10, 2)
    warm, query = w.phases
    assert (warm.measured, query.measured) == (False, True)
    assert [s[0].keys for s in warm.sessions] == [s[0].keys for s in query.sessions]
    assert query.sessions[0][0].prompt_tokens == 1_000 + QUESTION_TOKENS
    assert len({s[0].keys[0] for s in warm.sessions}) == 5  # no document prefixes another


def test_chat_history_grows_to_the_context_and_each_turn_extends_the_last() -> None:
    w = multi_turn_chat(8_000, 4, 100, 2, requests=8)
    turns = w.phases[0].sessions[0]
    assert len(w.phases[0].sessions) == 2 and len(turns) == 4
    assert turns[-1].prompt_tokens <= 8_000 < turns[-1].prompt_tokens + 4
    for a, b in zip(turns, turns[1:], strict=False):
        assert b.keys[:len(a.keys)] == a.keys


def test_chat_rejects_a_context_too_small_for_its_turns() -> None:
    with pytest.raises(SimulationError, match="--context-tokens 300 is too small"):
        multi_turn_chat(300, 4, 100, 1)


def test_rag_popular_chunks_lead_more_often_with_higher_zipf() -> None:
    def top_share(z: float) -> float:
        w = rag(200, 256, 3, z, 10, 1, requests=400, system_tokens=0)
        firsts = [s[0].keys[0] for s in w.phases[0].sessions]
        return max(firsts.count(k) for k in set(firsts)) / len(firsts)
    assert top_share(1.5) > top_share(0.0)


def test_rag_is_seeded() -> None:
    assert rag(50, 256, 2, 1.0, 10, 1, requests=20, seed=3).requests == \
        rag(50, 256, 2, 1.0, 10, 1, requests=20, seed=3).requests


def test_trace_with_token_ids_and_chunk_ids(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [{"arrival_s": 1.5, "prompt_token_ids": list(range(600)), "output_tokens": 5,
             "session_id": "u1"},
            {"arrival_s": 0.5, "chunk_ids": ["a", "b"], "output_tokens": 7, "prefix_id": "p"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    w = load_trace(path)
    first, second = (s[0] for s in w.phases[0].sessions)
    assert (first.arrival_s, first.prompt_tokens, len(first.keys)) == (0.5, 512, 2)
    assert (second.arrival_s, second.prompt_tokens, len(second.keys)) == (1.5, 600, 2)
    assert first.prefix_id is not None and w.phases[0].open_loop


@pytest.mark.parametrize(("row", "message"), [
    ({"output_tokens": 1}, "arrival_s must be a finite number"),
    ({"arrival_s": 0, "output_tokens": 1}, "needs prompt_token_ids or chunk_ids"),
    ({"arrival_s": 0, "output_tokens": 1, "prompt_token_ids": ["x"]}, "list of ints"),
    ({"arrival_s": 0, "output_tokens": 1, "chunk_ids": [1, 2], "prompt_tokens": 10},
     "shorter than its 2 chunks"),
])
def test_trace_errors_name_the_line_and_field(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row))
    with pytest.raises(SimulationError, match=f"bad.jsonl:1: .*{message}"):
        load_trace(path)


# Bounds: every builder refuses, before building anything, what the simulator could not run
# in bounded time and memory, or what vLLM would refuse.

def test_a_request_may_fill_the_context_window_but_not_exceed_it() -> None:
    # vLLM 0.23.0 vllm/renderers/params.py (_token_len_check): a prompt may be at most
    # max_model_len - max_tokens tokens.
    window = 4_096
    doc = window - QUESTION_TOKENS - 100
    assert long_doc_qa(1, doc, 100, 1, context_window=window).phases[1].sessions[0][0] \
        .prompt_tokens + 100 == window
    with pytest.raises(SimulationError, match=r"--document-tokens 3,985 plus the 12-token "
                                              r"question is 3,997 tokens; with --output-tokens "
                                              r"100 that is 4,097, over the context window of "
                                              r"4,096 tokens .* at most 3,996 tokens"):
        long_doc_qa(1, doc + 1, 100, 1, context_window=window)


def test_without_a_window_a_request_is_still_bounded() -> None:
    with pytest.raises(SimulationError, match="over the context window of 16,777,216"):
        long_doc_qa(2, 100_000_000_000, 10, 1)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: long_doc_qa(w.MAX_REQUESTS // 2 + 1, 100, 1, 1),
     r"--documents 50,001 .* makes 100,002 requests; the simulator runs at most 100,000"),
    (lambda: long_doc_qa(30_000, 25_600, 1, 1),
     r"makes 6,000,000 full chunks of prompt in all; the simulator holds at most 5,000,000"),
    (lambda: multi_turn_chat(2_000_000_000, 100_000_000, 1, 1),
     r"--turns 100,000,000 makes 100,000,000 requests"),
    (lambda: multi_turn_chat(8_000, 4, 100, 1, think_time_s=float("nan")),
     r"--think-time must be a finite number >= 0 \(got nan\)"),
    (lambda: multi_turn_chat(8_000, 4, 100, 1, context_window=8_000),
     r"the last turn's prompt \(--context-tokens 8,000\) is 8,000 tokens; with --output-tokens "
     r"100 that is 8,100, over the context window of 8,000 .* at most 7,900 tokens"),
    (lambda: rag(100, 256, 2, float("inf"), 10, 1), r"--zipf must be a finite number between "
                                                    r"0 and 10 \(got inf\)"),
    (lambda: rag(100, 256, 2, 10.5, 10, 1), r"--zipf .* between 0 and 10 \(got 10.5\)"),
    (lambda: rag(w.MAX_CORPUS_CHUNKS + 1, 256, 2, 1.0, 10, 1),
     r"--corpus-chunks 1,000,001 is over the simulator's 1,000,000"),
    (lambda: rag(1_000, 1, 1_000, 1.0, 10, 1, requests=5_001),
     r"--requests 5,001 of --chunks-per-request 1,000 retrieve 5,001,000 corpus chunks"),
    (lambda: rag(1_000, 512, 64, 1.0, 10, 1, context_window=32_768),
     r"--chunks-per-request 64 x --chunk-tokens 512 .* over the context window of 32,768"),
])
def test_workloads_beyond_the_bounds_are_refused_before_they_are_built(
        build: object, message: str) -> None:
    with pytest.raises(SimulationError, match=message):
        build()  # type: ignore[operator]


def test_rag_draws_every_chunk_when_a_request_asks_for_the_whole_corpus() -> None:
    # Zipf 10 puts nearly all weight on the first chunks: drawing with rejection alone would
    # almost never reach the last ones, so the rest come from draws without replacement.
    wl = rag(300, 4, 300, 10.0, 1, 1, requests=3, system_tokens=0, query_tokens=0,
             chunk_size=4)
    for (req,) in wl.phases[0].sessions:
        assert len(req.keys) == 300 and len(set(req.keys)) == 300


def test_weighted_draws_without_replacement_follow_successive_draws() -> None:
    # weights 4, 2, 1, 1: the first draw is chunk 0 with 1/2, then chunk 1 with 2/4,
    # so the ordered pair (0, 1) comes with 1/4, and (2, 3) with 1/8 x 1/7 = 1/56
    tree = w._WeightTree([4.0, 2.0, 1.0, 1.0])
    rng = random.Random(7)
    pairs = [tuple(tree.draw_without([], 2, rng)) for _ in range(24_000)]
    assert pairs.count((0, 1)) / len(pairs) == pytest.approx(1 / 4, abs=0.01)
    assert pairs.count((2, 3)) / len(pairs) == pytest.approx(1 / 56, abs=0.003)
    assert all(tree.draw_without([0, 1], 2, rng) in ([2, 3], [3, 2]) for _ in range(50))
    assert tree.tree == w._WeightTree([4.0, 2.0, 1.0, 1.0]).tree


@pytest.mark.parametrize(("row", "message"), [
    ({"arrival_s": float("nan"), "output_tokens": 1, "chunk_ids": [1]},
     r"arrival_s must be a finite number between 0 and 2\.592e\+06 \(got nan\)"),
    # 30 days at most: at 4e12 s the simulated clock cannot tell a decode step from none,
    # and the run never ended
    ({"arrival_s": 4e12, "output_tokens": 1, "chunk_ids": [1]},
     r"arrival_s must be a finite number between 0 and 2\.592e\+06 \(got 4000000000000\.0\)"),
    ({"arrival_s": 0, "output_tokens": float("inf"), "chunk_ids": [1]},
     r"output_tokens must be a finite number >= 1 \(got inf\)"),
    # each of these was a traceback (OverflowError) or silently taken as something else
    ({"arrival_s": 10**400, "output_tokens": 1, "chunk_ids": [1]},
     r"arrival_s must be a finite number between 0 and 2\.592e\+06 \(got <an integer of "
     r"about 401 digits>\)"),
    ({"arrival_s": 0, "output_tokens": 1.9, "chunk_ids": [1]},
     r"output_tokens must be a whole number of at least 1 \(got 1\.9\)"),
    ({"arrival_s": 0, "output_tokens": 1, "chunk_ids": [1], "prompt_tokens": 300.5},
     r"prompt_tokens must be a whole number of at least 1 \(got 300\.5\)"),
    ({"arrival_s": 0, "output_tokens": 1, "chunk_ids": [1], "prompt_token_ids": [1, 2]},
     "give either prompt_token_ids or chunk_ids, not both"),
    ({"arrival_s": 0, "output_tokens": 10, "chunk_ids": [1], "prompt_tokens": 10**12},
     r"a prompt of 1,000,000,000,000 tokens and output_tokens 10 .* over the context window"),
])
def test_trace_numbers_must_be_finite_and_fit_the_window(tmp_path: Path, row: dict,
                                                          message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row))
    with pytest.raises(SimulationError, match=f"bad.jsonl:1: {message}"):
        load_trace(path)


def test_trace_is_bounded_in_bytes_and_requests(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"arrival_s": i, "output_tokens": 1, "chunk_ids": [i]})
                              for i in range(4)))
    with pytest.raises(SimulationError, match="context window of 256 tokens"):
        load_trace(path, context_window=256)  # a 256-token chunk and one output token
    assert len(load_trace(path, context_window=257).requests) == 4
    monkeypatch.setattr(w, "MAX_REQUESTS", 3)
    with pytest.raises(SimulationError, match=r"more than 3 requests \(line 4\)"):
        load_trace(path)
    monkeypatch.setattr(w, "MAX_TRACE_BYTES", 10)
    with pytest.raises(SimulationError, match=r"is \d+ bytes; the limit is 10$"):
        load_trace(path)


def test_trace_must_be_a_regular_file() -> None:
    with deadline(5), pytest.raises(SimulationError, match="not a regular file .*character"):
        load_trace("/dev/zero")


@pytest.mark.parametrize(("build", "field", "low", "value"), [
    (lambda v: long_doc_qa(v, 1_000, 10, 2), "documents", 1, 4.0),
    (lambda v: long_doc_qa(4, v, 10, 2), "document_tokens", 1, None),
    (lambda v: long_doc_qa(4, 1_000, 10, 2, query_order=[0, v]), "query_order", 0, 1.5),
    (lambda v: multi_turn_chat(8_000, v, 100, 2), "turns", 1, 4.5),
    (lambda v: multi_turn_chat(8_000, 4, 100, v), "concurrency", 1, "8"),
    (lambda v: rag(200, 256, 3, 1.1, 10, v), "concurrency", 1, True),
    (lambda v: rag(200, 256, 3, 1.1, 10, 1, query_tokens=v), "query_tokens", 0, -1),
    (lambda v: rag(200, 256, 3, 1.1, 10, 1, context_window=v), "context_window", 2, 8192.0),
    (lambda v: load_trace("unread.jsonl", chunk_size=v), "chunk_size", 1, 0),
])
def test_counts_must_be_whole_numbers_and_the_error_names_the_field(
        build: Callable[[object], object], field: str, low: int, value: object) -> None:
    # a float, a string, None or a bool where a count belongs is refused before anything is
    # built (the trace's file is not even opened), naming the argument and the value
    with pytest.raises(SimulationError) as refused:
        build(value)
    assert str(refused.value) == f"{field} must be a whole number of at least {low} (got {value!r})"


def test_numpy_integers_build_the_same_workload_with_plain_ints() -> None:
    # what a notebook passes from numpy; the workload holds plain ints, as the compiled
    # request classes of a wheel require (``setup.py``)
    np = pytest.importorskip("numpy")
    plain = rag(200, 256, 3, 1.1, 10, 4, requests=50, query_tokens=32)
    numpy_args = rag(np.int64(200), np.int32(256), np.int64(3), 1.1, np.int64(10),
                     np.int64(4), requests=np.int64(50), query_tokens=np.int16(32))
    assert numpy_args == plain
    doc = long_doc_qa(np.int64(3), np.int64(1_000), np.int64(10), np.int64(2),
                      query_order=np.array([2, 0]))
    assert doc == long_doc_qa(3, 1_000, 10, 2, query_order=[2, 0])
    for work in (numpy_args, doc):
        for phase in work.phases:
            assert type(phase.concurrency) is int
            for r in (r for s in phase.sessions for r in s):
                assert all(type(x) is int for x in (r.id, r.prompt_tokens, r.output_tokens,
                                                    r.session))


def test_trace_lines_that_once_broke_the_loader(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(SimulationError, match=r"deep.jsonl:1: nests too deeply"):
        load_trace(deep)
    # a lone surrogate is valid JSON for a string id; hashing it raised UnicodeEncodeError
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"arrival_s": 0, "output_tokens": 2, "chunk_ids": ["\\ud800"], '
                   '"session_id": "\\udfff"}\n')
    (req,) = load_trace(odd).requests
    from lmikit.sim._tiers import id_chunk_keys, stable_id

    assert req.keys == id_chunk_keys(["\ud800"]) and req.session == stable_id("\udfff")
    assert stable_id("\ud800") != stable_id("\udfff")


def test_trace_requests_are_numbered_by_record_not_by_line(tmp_path: Path) -> None:
    """The loop sizes its per-request arrays by the largest id: a trace of one request after
    a million blank lines took gigabytes."""
    path = tmp_path / "sparse.jsonl"
    path.write_text("\n" * 1_000_000 + json.dumps(
        {"arrival_s": 0, "output_tokens": 1, "chunk_ids": [1]}) + "\n\n" + json.dumps(
        {"arrival_s": 1, "output_tokens": 1, "chunk_ids": [2]}))
    assert [r.id for r in load_trace(path).requests] == [0, 1]


def test_a_request_over_the_window_is_told_what_would_fit() -> None:
    """An output count alone over the window was told "the prompt may be at most 0 tokens"."""
    with pytest.raises(SimulationError, match=r"the prompt may be at most 5,960 tokens, or "
                                              r"--output-tokens at most 30,948 with this prompt"):
        w.long_doc_qa(2, 10_000, 35_000, 1, context_window=40_960)
    with pytest.raises(SimulationError, match=r"--output-tokens must be below the context "
                                              r"window, at most 40,959$"):
        w.long_doc_qa(2, 10_000, 10_000_000, 1, context_window=40_960)
