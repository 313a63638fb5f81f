from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmikit.errors import SimulationError
from lmikit.sim.workloads import QUESTION_TOKENS, load_trace, long_doc_qa, multi_turn_chat, rag


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
    ({"output_tokens": 1}, "arrival_s must be a number"),
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
