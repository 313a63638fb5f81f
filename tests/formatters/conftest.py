"""Realistic LMI payloads and a loader for generated model.py files.

djl_python is not installable here, so ``load_model_py`` puts a stand-in for the two
decorator modules into ``sys.modules``. The stand-ins do only what LMI's real decorators do
(``djl_python.input_parser.input_formatter`` / ``djl_python.output_formatter.
output_formatter`` set ``is_input_formatter`` / ``is_output_formatter`` on the function and
return it), and ``find_decorated`` mirrors LMI's ``find_decorated_function`` (scan the
module for a callable with that attribute).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel


def _marker(attribute: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
        setattr(function, attribute, True)
        return function
    return decorator


@pytest.fixture
def djl_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = types.ModuleType("djl_python")
    inp = types.ModuleType("djl_python.input_parser")
    out = types.ModuleType("djl_python.output_formatter")
    inp.input_formatter = _marker("is_input_formatter")  # type: ignore[attr-defined]
    out.output_formatter = _marker("is_output_formatter")  # type: ignore[attr-defined]
    for module in (pkg, inp, out):
        monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture(scope="module")
def lmcache() -> Iterator[Any]:
    """LMCache's own key parts (:func:`tests.formatters.lmi_request_path.load_lmcache_keys`)."""
    from tests.formatters.lmi_request_path import load_lmcache_keys

    yield from load_lmcache_keys()


@pytest.fixture
def fresh_worker() -> Iterator[None]:
    """A new LMI worker process: no model.py shared state left over."""
    from lmikit.formatters.isolation import _LK_SHARED_MODULE

    sys.modules.pop(_LK_SHARED_MODULE, None)
    yield
    sys.modules.pop(_LK_SHARED_MODULE, None)


def find_decorated(module: types.ModuleType, attribute: str) -> Callable[..., Any] | None:
    for name in dir(module):
        obj = getattr(module, name)
        if callable(obj) and getattr(obj, attribute, False):
            return obj
    return None


@pytest.fixture
def load_model_py(djl_stub: None, tmp_path: Path) -> Iterator[Callable[[str], types.ModuleType]]:
    counter = iter(range(1000))

    def load(text: str) -> types.ModuleType:
        path = tmp_path / f"model_{next(counter)}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    yield load


# --- vLLM OpenAI response shapes (vllm.entrypoints.openai.protocol, trimmed) ---------------
class PromptTokenUsageInfo(BaseModel):
    cached_tokens: int | None = None


class UsageInfo(BaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo | None = None


class ChatMessage(BaseModel):
    role: str
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict] = []


class ChatCompletionResponseChoice(BaseModel):
    index: int
    message: ChatMessage
    logprobs: dict | None = None
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionResponseChoice]
    usage: UsageInfo
    prompt_logprobs: list | None = None
    kv_transfer_params: dict | None = None


def chat_response(content: str, reasoning: str | None = None,
                  created: int = 1_700_000_000) -> ChatCompletionResponse:
    return ChatCompletionResponse(
        id="chatcmpl-abc123", created=created, model="Qwen/Qwen3-8B",
        choices=[ChatCompletionResponseChoice(index=0, message=ChatMessage(
            role="assistant", content=content, reasoning_content=reasoning))],
        usage=UsageInfo(prompt_tokens=1200, completion_tokens=40, total_tokens=1240,
                        prompt_tokens_details=PromptTokenUsageInfo(cached_tokens=1024)))


def sse_chunk(content: str | None, *, stream_id: str = "chatcmpl-abc123",
              finish: str | None = None, usage: dict | None = None,
              reasoning: str | None = None) -> str:
    """One chunk exactly as vLLM serializes ChatCompletionStreamResponse (model_dump_json)."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    event = {"id": stream_id, "object": "chat.completion.chunk", "created": 1_700_000_000,
             "model": "Qwen/Qwen3-8B",
             "choices": [{"index": 0, "delta": delta, "logprobs": None,
                          "finish_reason": finish}] if usage is None else [],
             "usage": usage}
    return "data: " + json.dumps(event, separators=(",", ":")) + "\n\n"


DONE_CHUNK = "data: [DONE]\n\n"


def stream_text(chunks: list[str]) -> str:
    text = []
    for chunk in chunks:
        if chunk.strip() == "data: [DONE]" or not chunk:
            continue
        for part in chunk.strip().split("\n\n"):
            event = json.loads(part[len("data: "):])
            for choice in event.get("choices") or ():
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)
