"""The real ``openai`` package against the strict fake SageMaker through lmikit's transport."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lmikit import openai_client
from lmikit.client._openai import ModelRouter, UnknownModel, base_url, openai_http_client
from lmikit.testing import VirtualClock

from ._served import BASE_MODEL, Served, serve

openai = pytest.importorskip("openai")

USER = [{"role": "user", "content": "summarise clause four"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory)


@pytest.fixture(autouse=True)
def _reset(served: Served) -> Iterator[None]:
    yield
    runtime = served.fake.runtime
    served.fake.clear_faults()
    runtime.stream_part_bytes, runtime.stream_framing = 11, "jsonlines"


@pytest.fixture
def client(served: Served) -> Any:
    return served.endpoint.openai()


def last_call(served: Served) -> dict[str, Any]:
    return served.fake.runtime.invocations[-1]


# --- the client -----------------------------------------------------------------------------

def test_openai_client_is_a_real_openai_client(served: Served) -> None:
    client = openai_client("docqa", session=served.session)
    assert isinstance(client, openai.OpenAI)
    assert client.max_retries == 0  # boto3 retries underneath
    reply = client.chat.completions.create(model="docqa", messages=USER)
    assert reply.choices[0].message.content == "[docqa-base] summarise clause four"


def test_openai_client_refuses_arguments_it_sets_itself(served: Served) -> None:
    with pytest.raises(TypeError, match="openai_client sets base_url itself"):
        openai_client("docqa", session=served.session, base_url="http://x")


def test_openai_client_names_the_extra_when_openai_is_missing() -> None:
    code = ("import sys; sys.modules['openai'] = None\n"
            "import lmikit, lmikit.client._openai\n"
            "try:\n    lmikit.openai_client('docqa', region='us-east-1')\n"
            "except ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OpenAI-SDK access needs openai: pip install 'lmikit[openai]'"


# --- non-streaming --------------------------------------------------------------------------

def test_chat_completion_returns_a_chat_completion(client: Any, served: Served) -> None:
    reply = client.chat.completions.create(model="docqa", messages=USER, max_tokens=3)
    assert isinstance(reply, openai.types.chat.ChatCompletion)
    assert reply.choices[0].message.content == "[docqa-base] summarise clause"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 3
    call = last_call(served)
    assert call["streaming"] is False
    assert call["payload"] == {"messages": USER, "max_tokens": 3}  # model is not forwarded


def test_completion_returns_a_completion(client: Any) -> None:
    reply = client.completions.create(model="docqa", prompt="one two", max_tokens=8)
    assert isinstance(reply, openai.types.Completion)
    assert reply.choices[0].text == "[docqa-base] one two"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens == 2


# --- routing --------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "component"), [
    ("legal", "docqa-legal"), ("medical", "docqa-medical"), ("docqa", "docqa-base"),
    (BASE_MODEL, "docqa-base"), ("docqa-base", "docqa-base")])
def test_model_routes_to_its_component(client: Any, served: Served, model: str,
                                       component: str) -> None:
    reply = client.chat.completions.create(model=model, messages=USER)
    assert reply.choices[0].message.content.startswith(f"[{component}]")
    assert last_call(served)["component"] == component


def test_unknown_model_is_not_found_and_lists_the_valid_names(client: Any,
                                                              served: Served) -> None:
    before = len(served.fake.runtime.invocations)
    with pytest.raises(openai.NotFoundError, match=(
            r"model 'legl' is not served by endpoint 'docqa'; use one of: 'docqa', "
            r"'Qwen/Qwen2.5-7B-Instruct', 'legal', 'medical'")) as info:
        client.chat.completions.create(model="legl", messages=USER)
    assert info.value.code == "model_not_found"
    assert len(served.fake.runtime.invocations) == before  # nothing was sent


def test_routes_are_listed_once_and_cached(served: Served) -> None:
    client = served.endpoint.openai()
    mark = len(served.fake.calls)
    for model in ("legal", BASE_MODEL, "medical", "legal"):
        client.chat.completions.create(model=model, messages=USER)
    assert served.calls_since(mark, "ListInferenceComponents",
                              "DescribeInferenceComponent") == [
        "ListInferenceComponents", "DescribeInferenceComponent"]


def test_given_routes_skip_the_listing(served: Served) -> None:
    client = served.endpoint.openai(adapters=["legal"], base_model="my-model")
    mark = len(served.fake.calls)
    client.chat.completions.create(model="my-model", messages=USER)
    client.chat.completions.create(model="legal", messages=USER)
    with pytest.raises(openai.NotFoundError, match="use one of: 'docqa', 'my-model', 'legal'"):
        client.chat.completions.create(model="medical", messages=USER)
    assert served.calls_since(mark, "ListInferenceComponents",
                              "DescribeInferenceComponent") == []


def test_a_given_adapter_the_endpoint_lacks_is_sagemakers_validation_error(
        served: Served) -> None:
    client = served.endpoint.openai(adapters=["ghost"], base_model=BASE_MODEL)
    with pytest.raises(openai.BadRequestError,
                       match="ValidationError: Inference component docqa-ghost not found"):
        client.chat.completions.create(model="ghost", messages=USER)


def test_router_lists_again_on_a_miss_after_relist_s(served: Served) -> None:
    clock = VirtualClock()
    calls: list[str] = []

    def sagemaker() -> Any:
        calls.append("client")
        return served.session.client("sagemaker")

    router = ModelRouter("docqa", sagemaker, relist_s=10.0, clock=clock.monotonic)
    assert router.component_for("legal") == "docqa-legal"
    with pytest.raises(UnknownModel):
        router.component_for("support")  # listed 0 s ago: no second listing
    assert len(calls) == 1
    clock.advance(10)
    with pytest.raises(UnknownModel, match="use one of: 'docqa', 'Qwen/Qwen2.5-7B-Instruct', "
                                           "'legal', 'medical'"):
        router.component_for("support")
    assert len(calls) == 2


def test_router_says_why_it_could_not_list(served: Served) -> None:
    from botocore.config import Config

    served.fake.inject("ListInferenceComponents", "throttle", times=10)
    sagemaker = served.session.client("sagemaker", config=Config(
        retries={"mode": "standard", "total_max_attempts": 1}))
    router = ModelRouter("docqa", lambda: sagemaker)
    with pytest.raises(UnknownModel, match=r"model 'legal' is not served by endpoint 'docqa' "
                       r"\(listing its components failed: ThrottlingException: Rate exceeded\); "
                       r"use one of: 'docqa'"):
        router.component_for("legal")
    assert router.component_for("docqa") == "docqa-base"  # the endpoint's name always works


def test_models_list_names_every_route(client: Any) -> None:
    models = {m.id: m.inference_component for m in client.models.list()}
    assert models == {"docqa": "docqa-base", BASE_MODEL: "docqa-base",
                      "legal": "docqa-legal", "medical": "docqa-medical"}
    assert client.models.retrieve(BASE_MODEL).inference_component == "docqa-base"
    with pytest.raises(openai.NotFoundError, match="model 'nope' is not served"):
        client.models.retrieve("nope")


def test_an_api_the_transport_does_not_serve_is_not_found(client: Any) -> None:
    with pytest.raises(openai.NotFoundError, match="POST /embeddings is not served"):
        client.embeddings.create(model="docqa", input="x")


def test_the_component_cannot_be_set_per_request(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="model= picks the inference component"):
        client.chat.completions.create(
            model="docqa", messages=USER,
            extra_headers={"X-Amzn-SageMaker-Inference-Component": "docqa-legal"})


# --- streaming ------------------------------------------------------------------------------

def _stream_text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize("framing", ["jsonlines", "sse"])
@pytest.mark.parametrize("part_bytes", [1, 7, 4096])
def test_chat_stream_yields_chat_completion_chunks(client: Any, served: Served, framing: str,
                                                   part_bytes: int) -> None:
    served.fake.runtime.stream_framing = framing
    served.fake.runtime.stream_part_bytes = part_bytes  # cut lines, "data:" and UTF-8 anywhere
    stream = client.chat.completions.create(
        model="legal", messages=[{"role": "user", "content": "héllo wörld ✓"}], stream=True)
    chunks = list(stream)
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert _stream_text(chunks) == "[docqa-legal] héllo wörld ✓ "
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, None, None, "stop"]
    assert all(c.usage is None for c in chunks)
    assert last_call(served)["streaming"] is True


def test_stream_with_include_usage_ends_with_a_usage_chunk(client: Any) -> None:
    chunks = list(client.chat.completions.create(
        model="docqa", messages=USER, stream=True, stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == len([c for c in chunks[1:-1] if c.choices])
    assert (last.usage.prompt_tokens, last.usage.total_tokens) == (3, 3 + 4)


def test_completion_stream_yields_completions(client: Any) -> None:
    chunks = list(client.completions.create(model="medical", prompt="a b", stream=True,
                                            stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "[docqa-medical] a b "
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3


def test_stream_error_raises_an_api_error_after_the_chunks_before_it(client: Any,
                                                                     served: Served) -> None:
    served.fake.inject("InvokeEndpointWithResponseStream", "stream_error",
                       reason="CUDA out of memory", after_tokens=2)
    got: list[Any] = []
    stream = client.chat.completions.create(model="docqa", messages=USER, stream=True)
    with pytest.raises(openai.APIError, match="docqa/docqa-base: ModelStreamError: "
                                              "CUDA out of memory") as info:
        for chunk in stream:
            got.append(chunk)
    assert _stream_text(got) == "[docqa-base] summarise "
    assert not isinstance(info.value, openai.APIStatusError)


def test_stream_that_fails_before_starting_raises_the_status_error(client: Any,
                                                                   served: Served) -> None:
    served.fake.inject("InvokeEndpointWithResponseStream", "model_error", reason="boom")
    with pytest.raises(openai.InternalServerError, match="ModelError: .*boom"):
        client.chat.completions.create(model="docqa", messages=USER, stream=True)


# --- sessions and prefix ids ----------------------------------------------------------------

def test_client_session_id_reaches_every_runtime_call(served: Served) -> None:
    with served.endpoint.session() as s:
        client = served.endpoint.openai(session_id=s.id)
        first = client.chat.completions.create(model="docqa", messages=USER)
        chunks = list(client.chat.completions.create(model="docqa", messages=USER, stream=True))
        calls = served.fake.runtime.invocations[-2:]
        assert [c["session"] for c in calls] == [s.id, s.id]
    assert first.choices[0].message.content.startswith("[docqa-base turn 1]")
    assert _stream_text(chunks).startswith("[docqa-base turn 2]")


def test_session_openai_opens_and_reopens_the_session(served: Served) -> None:
    reopened: list[str] = []
    with served.endpoint.session(on_reopen=lambda s: reopened.append(str(s.id))) as s:
        client = s.openai()
        client.chat.completions.create(model="docqa", messages=USER)
        first = s.id
        served.clock.advance(1200)  # past OPTION_SESSIONS_EXPIRATION
        reply = client.chat.completions.create(model="docqa", messages=USER)
        assert s.id != first and reopened == [s.id]
        assert last_call(served)["session"] == s.id
    assert reply.choices[0].message.content.startswith("[docqa-base turn 1]")


def test_request_header_overrides_the_clients_session_and_prefix(served: Served) -> None:
    with served.endpoint.session() as first, served.endpoint.session() as second:
        client = served.endpoint.openai(session_id=first.id, prefix_id="doc-1")
        client.chat.completions.create(model="docqa", messages=USER)
        assert (last_call(served)["session"], last_call(served)["prefix_aware_id"]) == (
            first.id, "doc-1")
        client.chat.completions.create(
            model="docqa", messages=USER, stream=True,
            extra_headers={"X-Amzn-SageMaker-Session-Id": str(second.id),
                           "X-Amzn-SageMaker-Prefix-Aware-Id": "doc-2"})
        assert (last_call(served)["session"], last_call(served)["prefix_aware_id"]) == (
            second.id, "doc-2")


def test_a_session_id_no_container_holds_is_refused_as_lmi_does(served: Served) -> None:
    """LMI's SessionManager.get_session raises "session not found" for an id it never opened
    (djl-serving djl_python/session_manager.py), answered 424."""
    client = served.endpoint.openai(session_id="abc")
    with pytest.raises(openai.APIStatusError, match="Input parsing failed: session not found: "
                                                    "abc") as caught:
        client.chat.completions.create(model="docqa", messages=USER)
    assert caught.value.status_code == 424


def test_other_runtime_headers_pass_through(client: Any, served: Served) -> None:
    client.chat.completions.create(model="docqa", messages=USER, extra_headers={
        "X-Amzn-SageMaker-Custom-Attributes": "trace=1",
        "X-Amzn-SageMaker-Inference-Id": "req-7"})
    params = served.fake.operations("InvokeEndpoint")[-1].params
    assert (params["CustomAttributes"], params["InferenceId"]) == ("trace=1", "req-7")


def test_new_session_cannot_be_sent_with_a_chat_request(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match=r"open it with Endpoint.session\(\)"):
        client.chat.completions.create(model="docqa", messages=USER,
                                       extra_headers={"X-Amzn-SageMaker-Session-Id":
                                                      "NEW_SESSION"})


def test_a_session_id_sagemaker_rejects_is_a_bad_request(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="SessionId"):
        client.chat.completions.create(model="docqa", messages=USER, stream=True,
                                       extra_headers={"X-Amzn-SageMaker-Session-Id": "a_b"})


# --- errors ---------------------------------------------------------------------------------

def test_model_error_keeps_the_containers_status_and_message(client: Any,
                                                             served: Served) -> None:
    served.fake.inject("InvokeEndpoint", "model_error", reason="formatter raised")
    with pytest.raises(openai.InternalServerError,
                       match="docqa/docqa-base: ModelError: Received server error \\(500\\) "
                             "from primary with message \"formatter raised\"") as info:
        client.chat.completions.create(model="docqa", messages=USER)
    assert info.value.status_code == 500
    assert info.value.body["type"] == "ModelError"


def test_lmi_input_parsing_failure_is_status_424(client: Any) -> None:
    with pytest.raises(openai.APIStatusError,
                       match="Stream options can only be defined when `stream=True`") as info:
        client.chat.completions.create(model="docqa", messages=USER,
                                       stream_options={"include_usage": True})
    assert info.value.status_code == 424


def _two_attempt_client(served: Served) -> Any:
    """A runtime client that retries once (the default's backoff would slow the tests)."""
    from botocore.config import Config

    runtime = served.session.client("sagemaker-runtime", config=Config(
        retries={"mode": "standard", "total_max_attempts": 2}))
    return openai_client("docqa", session=served.session, runtime_client=runtime)


def test_throttling_after_boto3_retries_is_a_rate_limit_error(served: Served) -> None:
    client = _two_attempt_client(served)
    served.fake.inject("InvokeEndpoint", "throttle", times=10)
    mark = len(served.fake.calls)
    with pytest.raises(openai.RateLimitError, match="ThrottlingException: Rate exceeded"):
        client.chat.completions.create(model="docqa", messages=USER)
    # botocore made its two attempts; the openai client added none on top
    assert served.calls_since(mark, "InvokeEndpoint") == ["InvokeEndpoint"] * 2


def test_service_failure_is_an_internal_server_error(served: Served) -> None:
    client = _two_attempt_client(served)
    served.fake.inject("InvokeEndpoint", "5xx", times=10)
    mark = len(served.fake.calls)
    with pytest.raises(openai.InternalServerError, match="InternalFailure"):
        client.chat.completions.create(model="docqa", messages=USER)
    assert served.calls_since(mark, "InvokeEndpoint") == ["InvokeEndpoint"] * 2


@pytest.mark.slow
def test_openai_client_retries_through_boto3(served: Served) -> None:
    client = openai_client("docqa", session=served.session)  # its own adaptive-mode client
    served.fake.inject("InvokeEndpoint", "throttle", times=1)
    mark = len(served.fake.calls)
    reply = client.chat.completions.create(model="docqa", messages=USER)
    assert reply.choices[0].message.content.startswith("[docqa-base]")
    assert served.calls_since(mark, "InvokeEndpoint") == ["InvokeEndpoint"] * 2


def test_a_timeout_is_the_openai_timeout_error() -> None:
    from botocore.exceptions import ReadTimeoutError

    class SlowRuntime:
        def invoke_endpoint(self, **kwargs: Any) -> Any:
            raise ReadTimeoutError(endpoint_url="https://runtime.sagemaker/invocations")

    client = openai_client("docqa", runtime_client=SlowRuntime(), adapters=[],
                           base_model=BASE_MODEL)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="docqa", messages=USER)


def test_a_connection_failure_is_the_openai_connection_error() -> None:
    from botocore.exceptions import EndpointConnectionError

    class Unreachable:
        def invoke_endpoint_with_response_stream(self, **kwargs: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://runtime.sagemaker/invocations")

    client = openai_client("docqa", runtime_client=Unreachable(), adapters=[],
                           base_model=BASE_MODEL)
    with pytest.raises(openai.APIConnectionError, match="Connection error"):
        client.chat.completions.create(model="docqa", messages=USER, stream=True)


# --- a framework-style consumer -------------------------------------------------------------

def summarise(llm: openai.OpenAI, text: str, *, model: str) -> str:
    """What a framework does with the client it is handed: options, streaming, parsing."""
    assert isinstance(llm, openai.OpenAI)
    tuned = llm.with_options(timeout=30.0)
    pieces = []
    with tuned.chat.completions.create(model=model, stream=True, temperature=0,
                                       messages=[{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": text}]) as stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    return "".join(pieces).strip()


def test_a_framework_handed_the_client_works(served: Served) -> None:
    client = served.endpoint.openai()
    assert summarise(client, "clause four says", model="legal") == \
        "[docqa-legal] clause four says"


def test_a_framework_that_builds_its_own_client_from_http_client(served: Served) -> None:
    http = openai_http_client("docqa", session=served.session)
    client = openai.OpenAI(api_key="unused", base_url=base_url("docqa"), http_client=http)
    reply = client.chat.completions.create(model="medical", messages=USER)
    assert reply.choices[0].message.content.startswith("[docqa-medical]")


# --- asyncio --------------------------------------------------------------------------------

def test_async_client_answers_and_streams(served: Served) -> None:
    import asyncio

    async def main() -> tuple[str, str, int]:
        client = served.endpoint.async_openai(prefix_id="doc-9")
        assert isinstance(client, openai.AsyncOpenAI)
        reply = await client.chat.completions.create(model="legal", messages=USER)
        pieces = []
        usage = 0
        stream = await client.completions.create(model=BASE_MODEL, prompt="a b c", stream=True,
                                                 stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].text)
            elif chunk.usage is not None:
                usage = chunk.usage.completion_tokens
        return reply.choices[0].message.content or "", "".join(pieces), usage

    served.fake.runtime.stream_part_bytes = 3
    text, streamed, usage = asyncio.run(main())
    assert text == "[docqa-legal] summarise clause four"
    assert streamed == "[docqa-base] a b c "
    assert usage == 4
    assert last_call(served)["prefix_aware_id"] == "doc-9"


def test_async_client_maps_errors_like_the_sync_one(served: Served) -> None:
    import asyncio

    async def main() -> None:
        client = served.endpoint.async_openai()
        with pytest.raises(openai.NotFoundError, match="model 'nope' is not served"):
            await client.chat.completions.create(model="nope", messages=USER)
        served.fake.inject("InvokeEndpointWithResponseStream", "stream_error",
                           reason="CUDA out of memory", after_tokens=1)
        stream = await client.chat.completions.create(model="docqa", messages=USER,
                                                      stream=True)
        with pytest.raises(openai.APIError, match="ModelStreamError: CUDA out of memory"):
            async for _ in stream:
                pass

    asyncio.run(main())
