"""Long-Doc-QA workload and runner, driven by a simulated cache whose TTFT depends on hits."""

from __future__ import annotations

import threading

import pytest

from lmikit.bench import LongDocQA, Measurement, run_long_doc_qa
from lmikit.errors import LmikitError


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
