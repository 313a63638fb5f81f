"""The stream re-framer: LMI's JSON lines or SSE, cut anywhere, become the SSE openai parses."""

from __future__ import annotations

import json

import pytest

from lmikit.client._openai_sse import DONE_EVENT, SseReframer, error_event

CHUNKS = [
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "lmi",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "lmi",
     "choices": [{"index": 0, "delta": {"content": "héllo "}}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "lmi",
     "choices": [{"index": 0, "delta": {"content": "wörld ✓"}, "finish_reason": "stop"}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "lmi", "choices": [],
     "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
]
LINES = [json.dumps(c, ensure_ascii=False).encode() for c in CHUNKS]
EXPECTED = b"".join(b"data: " + line + b"\n\n" for line in LINES) + DONE_EVENT
# What LMI's vLLM async service writes (JSON lines, [DONE] as an empty line) and what an
# output formatter returning vLLM's SSE strings unchanged writes (each write + "\n").
JSONL_BODY = b"".join(line + b"\n" for line in LINES) + b"\n"
SSE_BODY = b"".join(b"data: " + line + b"\n\n\n" for line in LINES) + b"data: [DONE]\n\n\n\n"


def _events(sse: bytes) -> list[str]:
    """The data fields of an SSE byte string, parsed the way an SSE client does."""
    return [block[len("data: "):] for block in sse.decode().split("\n\n") if block]


@pytest.mark.parametrize("body", [JSONL_BODY, SSE_BODY], ids=["jsonlines", "sse"])
def test_reframer_gives_the_same_events_for_every_split_point(body: bytes) -> None:
    for cut in range(len(body) + 1):
        r = SseReframer()
        out = r.feed(body[:cut]) + r.feed(body[cut:]) + r.close()
        assert out == EXPECTED, f"split at byte {cut}"


@pytest.mark.parametrize("body", [JSONL_BODY, SSE_BODY], ids=["jsonlines", "sse"])
def test_reframer_survives_one_byte_parts(body: bytes) -> None:
    r = SseReframer()
    out = b"".join(r.feed(body[i:i + 1]) for i in range(len(body))) + r.close()
    assert out == EXPECTED


def test_reframer_emits_each_event_as_soon_as_its_line_is_complete() -> None:
    r = SseReframer()
    assert r.feed(LINES[0][:10]) == b""
    assert r.feed(LINES[0][10:] + b"\n" + LINES[1][:5]) == b"data: " + LINES[0] + b"\n\n"
    assert _events(r.feed(LINES[1][5:] + b"\n")) == [LINES[1].decode()]


def test_reframer_sends_done_once_and_ignores_what_follows_it() -> None:
    r = SseReframer()
    out = r.feed(b"data: [DONE]\n\n" + LINES[0] + b"\n\n") + r.close()
    assert out == DONE_EVENT
    assert r.done


def test_reframer_flushes_an_unterminated_last_line_before_done() -> None:
    r = SseReframer()
    assert r.feed(LINES[1]) == b""
    assert r.close() == b"data: " + LINES[1] + b"\n\n" + DONE_EVENT


def test_reframer_ignores_sse_comments_and_fields_and_crlf() -> None:
    r = SseReframer()
    body = (b": keep-alive\r\nevent: message\r\nid: 7\r\nretry: 10\r\ndata: " + LINES[1]
            + b"\r\n\r\n")
    assert r.feed(body) + r.close() == b"data: " + LINES[1] + b"\n\n" + DONE_EVENT


def test_reframer_passes_a_vllm_error_chunk_through_and_stops() -> None:
    err = {"error": {"message": "Internal server error", "type": "InternalServerError",
                     "param": None, "code": 500}}
    r = SseReframer()
    out = r.feed(LINES[1] + b"\n" + json.dumps(err).encode() + b"\n" + LINES[2] + b"\n")
    out += r.close()
    assert [json.loads(e) for e in _events(out)] == [CHUNKS[1], err]
    assert r.failed


def test_reframer_turns_an_lmi_error_line_into_an_openai_error_event() -> None:
    # async_utils.handle_streaming_response: a failing formatter -> {"code": 424, "error": ...}
    r = SseReframer()
    out = r.feed(b'{"code": 424, "error": "formatter raised"}\n') + r.close()
    assert json.loads(_events(out)[0]) == {"error": {
        "message": "formatter raised", "type": "ModelError", "param": None, "code": 424}}
    assert DONE_EVENT not in out


def test_reframer_reports_a_line_that_is_not_json_as_an_error_event() -> None:
    r = SseReframer()
    out = r.feed(b"<html>oops</html>\n") + r.close()
    error = json.loads(_events(out)[0])["error"]
    assert error["type"] == "ModelStreamError"
    assert "not JSON: '<html>oops</html>'" in error["message"]


def test_reframer_fail_ends_the_stream_once() -> None:
    r = SseReframer()
    first = r.fail("CUDA out of memory", "ModelStreamError", "ModelStreamError")
    assert first == error_event("CUDA out of memory", "ModelStreamError", "ModelStreamError")
    assert r.fail("again", "ModelStreamError") == b""
    assert r.feed(LINES[0] + b"\n") == b"" and r.close() == b""
