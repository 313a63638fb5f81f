"""Ready-made formatters and helpers, called directly (as user tests of a formatter file would)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from lmikit.formatters import (
    DONE,
    FormatterError,
    add_request_metadata,
    apply_prefix,
    apply_template,
    enforce_json_schema,
    input_formatter,
    map_stream,
    output_formatter,
    parse_sse,
    response_dict,
    strip_reasoning,
    to_sse,
)
from tests.formatters.conftest import DONE_CHUNK, chat_response, sse_chunk, stream_text


def test_parse_sse_done_and_data() -> None:
    assert parse_sse(DONE_CHUNK) is None
    assert parse_sse(sse_chunk("hi"))["choices"][0]["delta"]["content"] == "hi"
    assert parse_sse(": keep-alive\n\n") is None
    assert to_sse({"a": 1}) == 'data: {"a":1}\n\n'
    assert DONE == "data: [DONE]"


def test_apply_template_wraps_last_user_turn() -> None:
    fmt = apply_template("Q: {input}\nA:")
    request = {"messages": [{"role": "user", "content": "one"},
                            {"role": "assistant", "content": "x"},
                            {"role": "user", "content": "two"}]}
    out = fmt(request)
    assert out["messages"][2]["content"] == "Q: two\nA:"
    assert request["messages"][2]["content"] == "two"  # the caller's dict is not mutated


def test_apply_template_needs_placeholder() -> None:
    with pytest.raises(FormatterError, match=r"needs an \{input\} placeholder"):
        apply_template("no placeholder")


def test_apply_prefix_prompt_and_existing_system() -> None:
    fmt = apply_prefix("RULES")
    assert fmt({"prompt": "hi"})["prompt"] == "RULESHi".replace("H", "h")
    out = fmt({"messages": [{"role": "system", "content": "be brief"},
                            {"role": "user", "content": "hi"}]})
    assert out["messages"][0]["content"] == "RULES\n\nbe brief" and len(out["messages"]) == 2


def test_input_formatter_passes_only_accepted_kwargs() -> None:
    @input_formatter
    def fmt(request: dict, tokenizer=None) -> dict:
        return {"prompt": request["inputs"], "tok": tokenizer}

    assert fmt({"inputs": "a"}, tokenizer="T", configs=object()) == {"prompt": "a", "tok": "T"}


def test_input_formatter_rejects_non_dict_result() -> None:
    @input_formatter
    def fmt(request):
        return "text"

    with pytest.raises(FormatterError, match="returned str; return the request dict"):
        fmt({})


def test_strip_reasoning_concurrent_streams_starting_inside() -> None:
    fmt = output_formatter(strip_reasoning(starts_in_reasoning=True))
    a = [sse_chunk("plan", stream_id="a"), sse_chunk("</think>", stream_id="a"),
         sse_chunk("Answer A", stream_id="a", finish="stop")]
    b = [sse_chunk("think b", stream_id="b"), sse_chunk("more</think>\nAnswer B",
                                                       stream_id="b", finish="stop")]
    out_a, out_b = [], []
    for x, y in zip(a, b + [DONE_CHUNK], strict=True):
        out_a.append(fmt(x))
        out_b.append(fmt(y))
    assert stream_text(out_a) == "Answer A"
    assert stream_text(out_b) == "Answer B"


def test_strip_reasoning_drops_reasoning_delta_field() -> None:
    out = strip_reasoning()(sse_chunk(None, reasoning="secret"))
    assert "secret" not in out


def test_strip_reasoning_fast_path_returns_same_string() -> None:
    chunk = sse_chunk("plain")
    assert strip_reasoning()(chunk) is chunk


def test_enforce_json_schema_streaming_appends_error_event() -> None:
    fmt = enforce_json_schema({"type": "object", "required": ["answer"]})
    out = [fmt(c) for c in (sse_chunk('{"ans'), sse_chunk('wer": 1}', finish="stop"))]
    assert "error" not in out[-1]
    bad = [fmt(c) for c in (sse_chunk('{"x"', stream_id="z"),
                            sse_chunk(": 1}", stream_id="z", finish="stop"))]
    events = [json.loads(e[len("data: "):]) for e in bad[-1].strip().split("\n\n")]
    assert events[-1]["error"]["type"] == "schema_validation_error"
    assert "'answer' is a required property" in events[-1]["error"]["message"]


def test_enforce_json_schema_rejects_non_json() -> None:
    out = enforce_json_schema({"type": "object"})(chat_response("not json"))
    assert out["error"]["message"].startswith("output is not JSON")


def test_enforce_json_schema_checks_schema_up_front() -> None:
    with pytest.raises(jsonschema.SchemaError):
        enforce_json_schema({"type": "no-such-type"})


def test_add_request_metadata_final_chunk_only() -> None:
    fmt = add_request_metadata(tenant="acme")
    middle = sse_chunk("x")
    assert fmt(middle) is middle
    final = parse_sse(fmt(sse_chunk("y", finish="stop")))
    assert final["lmikit"]["tenant"] == "acme" and final["lmikit"]["created"] == 1_700_000_000
    assert "processed_at_iso" in final["lmikit"]


def test_add_request_metadata_non_streaming_keeps_response() -> None:
    out = add_request_metadata(timestamps=False)(chat_response("hi"))
    assert out["lmikit"] == {"id": "chatcmpl-abc123", "model": "Qwen/Qwen3-8B"}
    assert out["choices"][0]["message"]["content"] == "hi"


def test_map_stream_passes_done_and_drops_none() -> None:
    fmt = map_stream(lambda e: None if e["choices"][0]["delta"].get("content") == "" else e)
    assert fmt(DONE_CHUNK) == DONE_CHUNK
    assert fmt(sse_chunk("")) == ""


def test_response_dict_rejects_unknown_object() -> None:
    with pytest.raises(FormatterError, match="cannot read a response of type int"):
        response_dict(3)
