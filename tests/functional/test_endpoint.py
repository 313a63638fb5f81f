"""Runtime client against the fake: invoke, stream parsing, timings, adapters, sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.client._endpoint import Endpoint
from lmikit.client._stream import StreamParser
from lmikit.errors import InvokeError
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import SPEC_YAML, deployment


@pytest.fixture
def endpoint(fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
             tmp_path: Path) -> Endpoint:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    return Endpoint("docqa", session=session, clock=clock)


def test_invoke_returns_the_base_components_reply(endpoint: Endpoint) -> None:
    result = endpoint.invoke("hello there")
    assert result.text == "[docqa-base] hello there"
    assert result.component == "docqa-base"
    assert result.tokens == 3


@pytest.mark.parametrize("framing", ["jsonlines", "sse"])
def test_stream_reassembles_chunks_split_across_payload_parts(endpoint: Endpoint,
                                                              fake: FakeSageMaker,
                                                              framing: str) -> None:
    fake.runtime.stream_part_bytes = 7  # cut events mid-JSON, mid-"data:", mid-UTF-8
    fake.runtime.stream_framing = framing
    stream = endpoint.stream("héllo wörld ünïcode")
    pieces = list(stream)
    assert "".join(pieces).strip() == "[docqa-base] héllo wörld ünïcode"
    assert stream.result is not None and stream.result.tokens == 4


def test_stream_parses_lmi_token_lines(endpoint: Endpoint) -> None:
    stream = endpoint.stream({"inputs": "one two three", "stream": True,
                              "parameters": {"max_new_tokens": 3}})
    assert "".join(stream).strip() == "[docqa-base] one two"


@pytest.mark.parametrize("body", [{"inputs": "one two"},
                                  {"messages": [{"role": "user", "content": "one two"}]},
                                  {"prompt": "one two"}])
def test_stream_of_a_body_that_does_not_ask_to_stream_yields_the_whole_reply(
        endpoint: Endpoint, body: dict[str, Any]) -> None:
    # LMI streams only when the body says "stream": true; otherwise one JSON body arrives.
    stream = endpoint.stream(body)
    assert list(stream) == ["[docqa-base] one two"]


def test_stream_reports_ttft_and_tokens_per_second(fake: FakeSageMaker,
                                                   endpoint: Endpoint) -> None:
    fake.runtime.ttft_seconds, fake.runtime.token_seconds = 0.5, 0.1
    stream = endpoint.stream("a b c d e f g h i")
    list(stream)
    result = stream.result
    assert result is not None
    assert result.ttft_s == pytest.approx(0.5)
    assert result.tokens == 10
    assert result.tokens_per_s == pytest.approx(10.0)


def test_adapter_routes_to_the_adapter_component(endpoint: Endpoint) -> None:
    assert endpoint.invoke("hi", adapter="legal").text.startswith("[docqa-legal]")
    assert "".join(endpoint.stream("hi", adapter="medical")).startswith("[docqa-medical]")


def test_prefix_id_is_sent_as_prefix_aware_id(endpoint: Endpoint, fake: FakeSageMaker) -> None:
    endpoint.invoke("doc", prefix_id="contract-42")
    assert fake.runtime.invocations[-1]["prefix_aware_id"] == "contract-42"


def test_model_stream_error_is_surfaced_clearly(endpoint: Endpoint,
                                                fake: FakeSageMaker) -> None:
    """The event carries ErrorCode, but botocore's event-stream parser keeps only the
    exception type and Message (botocore/parsers.py BaseEventStreamParser._do_error_parse),
    so the error names the kind and the message, never the code (docs/sdk.md says so)."""
    fake.inject("InvokeEndpointWithResponseStream", "stream_error", reason="CUDA out of memory")
    stream = endpoint.stream("a b c d e")
    with pytest.raises(InvokeError) as info:
        list(stream)
    assert str(info.value) == "ModelStreamError while streaming: CUDA out of memory"


def test_model_error_names_the_component(endpoint: Endpoint, fake: FakeSageMaker) -> None:
    fake.inject("InvokeEndpoint", "model_error", reason="formatter raised")
    with pytest.raises(InvokeError, match="docqa/docqa-base: ModelError.*formatter raised"):
        endpoint.invoke("x")


def test_unknown_adapter_is_a_validation_error(endpoint: Endpoint) -> None:
    with pytest.raises(InvokeError, match="ValidationError: Inference component docqa-nope"):
        endpoint.invoke("x", adapter="nope")


def test_session_sends_its_id_on_every_call_and_closes(endpoint: Endpoint,
                                                       fake: FakeSageMaker) -> None:
    with endpoint.session() as s:
        sid = s.id
        assert s.expires_at is not None
        first = s.invoke("remember this")
        second = "".join(s.stream("and this"))
    assert first.text.startswith("[docqa-base turn 1]")
    assert second.startswith("[docqa-base turn 2]")
    calls = fake.runtime.invocations[-4:]
    assert [c["session"] for c in calls] == ["NEW_SESSION", sid, sid, sid]
    assert calls[-1]["payload"] == {"requestType": "CLOSE"}
    assert fake.runtime.sessions[sid].closed


def test_session_reopens_after_expiry_and_calls_the_hook(endpoint: Endpoint,
                                                         clock: VirtualClock) -> None:
    reopened: list[str] = []
    with endpoint.session(on_reopen=lambda s: reopened.append(str(s.id))) as s:
        old = s.id
        s.invoke("context")
        clock.advance(1200)  # OPTION_SESSIONS_EXPIRATION of the spec
        result = s.invoke("question")
        assert s.id != old and reopened == [s.id]
        assert result.text.startswith("[docqa-base turn 1]")


def test_session_opened_on_first_use_calls_the_hook_only_when_it_reopens(
        endpoint: Endpoint, clock: VirtualClock) -> None:
    """on_reopen re-sends context a reopened session lost; a first open has lost nothing."""
    calls: list[str] = []
    s = endpoint.session(on_reopen=lambda s: calls.append(str(s.id)))
    s.invoke("context")  # opens the session: no hook
    assert calls == [] and s.reopened == 0 and len(s.history) == 1
    clock.advance(1200)  # past OPTION_SESSIONS_EXPIRATION
    s.invoke("question")
    assert calls == [s.id] and s.reopened == 1 and len(s.history) == 2
    s.close()


def _least_outstanding(fake: FakeSageMaker, session: Any, clock: VirtualClock,
                       tmp_path: Path) -> Endpoint:
    spec = load_spec_text(SPEC_YAML.replace("strategy: sticky_session",
                                            "strategy: least_outstanding"))
    deployment(spec, session, clock, tmp_path).deploy()
    return Endpoint("docqa", session=session, clock=clock)


def test_session_opens_where_the_option_is_not_set(fake: FakeSageMaker, session: Any,
                                                   clock: VirtualClock, tmp_path: Path) -> None:
    """LMI's vLLM async service enables sessions unless enable_stateful_sessions says
    otherwise (djl-serving vllm_async_service.py VLLMHandler.initialize:
    ``properties.get("enable_stateful_sessions", "true") == "true"``)."""
    ep = _least_outstanding(fake, session, clock, tmp_path)
    env = session.client("sagemaker").describe_inference_component(
        InferenceComponentName="docqa-base")["Specification"]["Container"]["Environment"]
    assert "OPTION_ENABLE_STATEFUL_SESSIONS" not in env  # lmikit renders it for sticky only
    with ep.session() as s:
        assert s.invoke("hello").text.startswith("[docqa-base turn 1]")


def test_every_request_fails_where_the_option_is_not_true(fake: FakeSageMaker, session: Any,
                                                          clock: VirtualClock,
                                                          tmp_path: Path) -> None:
    """Any value but "true" leaves VLLMHandler.session_manager unset, and preprocess_request
    reads it for every request (djl-serving vllm_async_service.py): LMI answers 424."""
    ep = _least_outstanding(fake, session, clock, tmp_path)
    sm = session.client("sagemaker")
    spec = sm.describe_inference_component(InferenceComponentName="docqa-base")["Specification"]
    container = spec["Container"]
    container["Image"] = container.pop("DeployedImage")["SpecifiedImage"]
    container["Environment"]["OPTION_ENABLE_STATEFUL_SESSIONS"] = "false"
    sm.update_inference_component(InferenceComponentName="docqa-base", Specification=spec)
    fake.settle()
    missing = "Input parsing failed: 'VLLMHandler' object has no attribute 'session_manager'"
    with pytest.raises(InvokeError, match=missing):
        ep.session().open()
    with pytest.raises(InvokeError, match=missing):
        ep.invoke("hello")


def test_session_open_without_a_session_id_in_the_answer_says_so() -> None:
    """A container that does not serve LMI's sessions answers without NewSessionId."""
    import io

    import boto3
    from botocore.response import StreamingBody
    from botocore.stub import Stubber

    client = boto3.client("sagemaker-runtime", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(b"{}"), 2)})
        with pytest.raises(InvokeError, match="docqa/docqa-base did not open a session "
                           r"\(no NewSessionId in the answer\)"):
            Endpoint("docqa", client=client).session().open()


def test_stream_parser_rejects_garbage() -> None:
    with pytest.raises(InvokeError, match="cannot parse a stream line"):
        StreamParser().feed(b"not json\n")


@pytest.mark.parametrize("details", [False, True])
def test_stream_keeps_the_servers_prompt_and_cached_token_counts(endpoint: Endpoint,
                                                                 fake: FakeSageMaker,
                                                                 details: bool) -> None:
    """vLLM's usage chunk has prompt_tokens; prompt_tokens_details.cached_tokens only from a
    server started with --enable-prompt-tokens-details, which LMI is not (the fake without
    a cache model serves nothing from cache: 0)."""
    fake.runtime.prompt_tokens_details = details
    stream = endpoint.stream("one two three")
    list(stream)
    assert stream.result is not None
    assert stream.result.prompt_tokens == 3
    assert stream.result.cached_tokens == (0 if details else None)
