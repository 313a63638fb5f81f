"""The generated model.py, loaded the way LMI loads it.

djl_python cannot be installed here: the ``load_model_py`` fixture (conftest) installs a
stand-in for LMI's two decorator modules that only records the function (sets
``is_input_formatter`` / ``is_output_formatter``, as the real ones do), and
``find_decorated`` scans the module as LMI's ``find_decorated_function`` does. The
functions are then called with realistic payloads: the decoded request dict, a pydantic
object shaped like vLLM's ChatCompletionResponse, and raw SSE strings including
``data: [DONE]``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from lmikit.errors import AdapterError
from lmikit.formatters import build_model_py
from tests.formatters.conftest import (
    DONE_CHUNK,
    chat_response,
    find_decorated,
    sse_chunk,
    stream_text,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formatters"


def _write(tmp_path: Path, source: str, name: str = "fmt.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_build_model_py_needs_nothing_from_lmikit() -> None:
    text = build_model_py(input_file=EXAMPLES / "chat_guardrails.py",
                          output_file=EXAMPLES / "chat_guardrails.py")
    assert "import lmikit" not in text and "from lmikit" not in text


def test_build_model_py_base_formatters_found_by_lmi_scan(load_model_py) -> None:
    path = EXAMPLES / "chat_guardrails.py"
    module = load_model_py(build_model_py(input_file=path, output_file=path))
    assert find_decorated(module, "is_input_formatter").__name__ == "format_request"
    assert find_decorated(module, "is_output_formatter").__name__ == "run"


def test_build_model_py_input_formatter_on_decoded_request(load_model_py) -> None:
    path = EXAMPLES / "chat_guardrails.py"
    module = load_model_py(build_model_py(path))
    fmt = find_decorated(module, "is_input_formatter")
    request = {"messages": [{"role": "user", "content": "What is in doc 7?"}], "stream": True}
    out = fmt(request, tokenizer=object(), configs=None)
    assert out["messages"][0]["role"] == "system"
    assert out["messages"][1] == request["messages"][0]
    assert out["temperature"] == 0.2 and out["stream"] is True


def test_build_model_py_output_on_vllm_response_object(load_model_py) -> None:
    module = load_model_py(build_model_py(EXAMPLES / "chat_guardrails.py"))
    fmt = find_decorated(module, "is_output_formatter")
    out = fmt(chat_response("<think>plan</think>Doc 7 covers leases.", reasoning="r"))
    message = out["choices"][0]["message"]
    assert message["content"] == "Doc 7 covers leases."
    assert "reasoning_content" not in message
    assert out["metrics"]["cached_prompt_tokens"] == 1024


def test_build_model_py_streaming_chunks_and_done(load_model_py) -> None:
    module = load_model_py(build_model_py(EXAMPLES / "chat_guardrails.py"))
    fmt = find_decorated(module, "is_output_formatter")
    chunks = [sse_chunk(""), sse_chunk("<think>"), sse_chunk("hidden"), sse_chunk("</think>"),
              sse_chunk("Hello"), sse_chunk(" world", finish="stop"), DONE_CHUNK]
    out = [fmt(c) for c in chunks]
    assert out[-1] == DONE_CHUNK
    assert stream_text(out) == "Hello world"
    final = json.loads(out[-2][len("data: "):])
    assert final["metrics"]["chunks"] == 6


def test_build_model_py_schema_adapter_rejects_bad_answer(load_model_py) -> None:
    module = load_model_py(build_model_py(EXAMPLES / "json_answers.py"))
    fmt = find_decorated(module, "is_output_formatter")
    good = fmt(chat_response('{"answer": "yes", "confidence": 0.9}'))
    assert good["lmikit"]["adapter"] == "json-answers"
    bad = fmt(chat_response('{"answer": "yes", "confidence": 3}'))
    assert bad["error"]["code"] == 422
    assert "confidence" in bad["error"]["message"]


def test_build_model_py_lmi_native_file(load_model_py) -> None:
    module = load_model_py(build_model_py(EXAMPLES / "passthrough_lmi_native.py"))
    fmt = find_decorated(module, "is_output_formatter")
    assert fmt(chat_response("hi"))["served_by"] == "lmikit"
    assert fmt(DONE_CHUNK) == DONE_CHUNK


def test_build_model_py_formatter_error_returns_message(load_model_py, tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        @output_formatter
        def fragile(output):
            return {"first": output["choices"][0]}
    """)
    fmt = find_decorated(load_model_py(build_model_py(path)), "is_output_formatter")
    streamed = fmt(sse_chunk("x"))
    assert streamed.startswith("data: {\"error\"")
    assert "output formatter 'fragile' failed: TypeError" in streamed
    body = fmt(chat_response("x"))
    assert body["error"]["type"] == "formatter_error"


def test_build_model_py_input_error_is_clear(load_model_py, tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import input_formatter

        @input_formatter
        def needs_question(request):
            return {"prompt": request["question"]}
    """)
    module = load_model_py(build_model_py(path))
    fmt = find_decorated(module, "is_input_formatter")
    with pytest.raises(module.FormatterError,
                       match="input formatter 'needs_question' failed: KeyError: 'question'"):
        fmt({"inputs": "hi"})


def test_build_model_py_aliased_import(load_model_py, tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter as out, strip_reasoning as sr

        cleaned = out(sr())
    """)
    fmt = find_decorated(load_model_py(build_model_py(path)), "is_output_formatter")
    assert fmt(chat_response("<think>x</think>ok"))["choices"][0]["message"]["content"] == "ok"


def test_build_model_py_rejects_two_input_formatters_across_files(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="two input formatters"):
        build_model_py(EXAMPLES / "chat_guardrails.py", EXAMPLES / "json_answers.py")


def test_build_model_py_rejects_name_clash_between_files(tmp_path: Path) -> None:
    a = _write(tmp_path, """
        from lmikit.formatters import input_formatter
        LIMIT = 1
        @input_formatter
        def a(request):
            return request
    """, "a.py")
    b = _write(tmp_path, """
        from lmikit.formatters import output_formatter
        LIMIT = 2
        @output_formatter
        def b(output):
            return output
    """, "b.py")
    with pytest.raises(AdapterError, match="a.py and b.py both define 'LIMIT'"):
        build_model_py(input_file=a, output_file=b)


def test_build_model_py_rejects_shadowing_runtime_name(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter
        def chain(x):
            return x
        @output_formatter
        def out(output):
            return output
    """)
    with pytest.raises(AdapterError, match="defines 'chain', which lmikit.formatters already"):
        build_model_py(path)


def test_build_model_py_rejects_unknown_runtime_name(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter, magic
        out = output_formatter(magic())
    """)
    with pytest.raises(AdapterError, match="has no 'magic'; available:"):
        build_model_py(path)


def test_build_model_py_requires_input_in_input_file(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="has no input formatter"):
        build_model_py(input_file=EXAMPLES / "passthrough_lmi_native.py")
