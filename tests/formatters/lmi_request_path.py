"""The path of one request from the client's JSON to LMCache's cache key, for tests.

Neither LMI's ``djl_python`` nor vLLM installs here (both need CUDA and torch), so the LMI
and vLLM steps are restated, one function per upstream function, each naming its source.
LMCache's steps are LMCache's own code from the installed package (0.5.6).

LMI: djl-serving ``master`` (identical in ``0.36.0-lmi27-dlc``), engines/python/setup/:
  djl_python/async_utils.py ``_extract_lora_adapter``; djl_python/adapter_formatter_mixin.py
  ``AdapterFormatterMixin.apply_input_formatter``; djl_python/custom_formatter_handling.py
  ``CustomFormatterHandler.apply_input_formatter``; djl_python/lmi_vllm/
  vllm_async_service.py ``VLLMHandler.preprocess_request``; djl_python/lmi_vllm/
  request_response_utils.py ``convert_lmi_schema_to_completion_request``.
vLLM 0.23.0 (LMI master ships a 0.23.1 dev build): vllm/entrypoints/openai/completion/
  protocol.py and chat_completion/protocol.py ``to_sampling_params``; completion/serving.py
  ``_create_completion`` (beam search goes to generate/beam_search/online.py, whose
  SamplingParams has no extra_args); engine/serving.py ``_maybe_get_adapters``.
"""

from __future__ import annotations

import ast
import copy
import importlib
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.formatters.conftest import find_decorated

SERVED_MODEL = "lmi"  # LMI's default served model name (vllm_async_service.initialize)
MODEL_NAME = "Qwen/Qwen2.5-7B-Instruct"
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"


@dataclass
class SamplingParams:
    """The one field of vLLM's SamplingParams that LMCache reads for request configs."""

    extra_args: dict[str, Any] | None


@dataclass
class Served:
    sampling_params: SamplingParams
    lora: str | None  # the LoRA vLLM runs the request with (None: the base model)


class LmiWorker:
    """One LMI worker process: the base's model.py and each registered adapter's."""

    def __init__(self, base: types.ModuleType | None,
                 adapters: dict[str, types.ModuleType | None]) -> None:
        self.base = base
        self.adapters = adapters

    def serve(self, payload: dict, headers: dict[str, str] | None = None) -> Served:
        payload = copy.deepcopy(payload)
        headers = headers or {}
        # _extract_lora_adapter: the SageMaker header, else a payload "adapters" entry
        adapter = headers.get(ADAPTER_HEADER)
        if adapter is None and "adapters" in payload:
            adapter = payload.pop("adapters")
        # AdapterFormatterMixin.apply_input_formatter: the adapter's own input formatter,
        # else the base's; none at all leaves the payload as it is
        formatter = None
        if adapter is not None and self.adapters.get(adapter) is not None:
            formatter = find_decorated(self.adapters[adapter], "is_input_formatter")
        if formatter is None and self.base is not None:
            formatter = find_decorated(self.base, "is_input_formatter")
        if formatter is not None:
            payload = formatter(payload, tokenizer=object())
        # preprocess_request: default model, then the adapter's name for adapter requests
        payload.setdefault("model", SERVED_MODEL)
        if adapter is not None:
            if adapter not in self.adapters:
                raise ValueError(f"LoRA adapter {adapter} not found in registry")
            payload["model"] = adapter
        if "prompt" in payload or "messages" in payload:
            request = payload
        elif "inputs" in payload:
            request = _lmi_schema_to_completion(payload)
        else:
            raise RuntimeError("invalid payload. must contain prompt, inputs, or messages")
        return Served(_to_sampling_params(request), self._lora_of(request))

    def _lora_of(self, request: dict) -> str | None:
        # _maybe_get_adapters: a registered LoRA name in "model" selects that LoRA
        model = request.get("model")
        return model if model in self.adapters else None


def _lmi_schema_to_completion(payload: dict) -> dict:
    parameters = payload.get("parameters", {})
    completion = {"model": payload.pop("model"), "prompt": payload.pop("inputs"),
                  "max_tokens": parameters.pop("max_new_tokens", 30),
                  "stream": payload.pop("stream", False)}
    completion.update(parameters)  # everything else in parameters reaches vLLM
    return completion


def _to_sampling_params(request: dict) -> SamplingParams:
    if request.get("use_beam_search"):
        return SamplingParams(extra_args=None)  # beam search: SamplingParams(logprobs=..)
    extra_args = dict(request.get("vllm_xargs") or {})
    if request.get("kv_transfer_params"):
        extra_args["kv_transfer_params"] = request["kv_transfer_params"]
    return SamplingParams(extra_args=extra_args or None)


# --- LMCache 0.5.6, installed ------------------------------------------------------------------
@dataclass
class LMCacheKeys:
    """LMCache's own CacheEngineKey and request-config extraction."""

    key_class: Any
    extract: Any
    dtype: Any

    def key(self, served: Served, chunk_hash: int = 0x5EED) -> Any:
        """The key LMCache stores and looks up one prompt chunk under (``_make_key_by_hash``
        in lmcache/v1/token_database.py: the chunk hash comes from the tokens only, the
        request configs from the sampling params)."""
        configs = self.extract(served.sampling_params)
        return self.key_class(MODEL_NAME, 1, 0, chunk_hash, self.dtype, configs)


def _torch_stand_in() -> types.ModuleType:
    """What lmcache/utils.py takes from torch at import: dtype objects for its dtype table
    and the Tensor/Size names in annotations. Only used when torch is not installed."""
    torch = types.ModuleType("torch")

    class dtype:  # noqa: N801 - torch's name
        def __init__(self, name: str) -> None:
            self.name = name

        def __repr__(self) -> str:
            return f"torch.{self.name}"

    for name in ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                 "int32", "int64", "bool", "float8_e4m3fn", "float8_e5m2"):
        setattr(torch, name, dtype(name))
    torch.half, torch.float, torch.double = (  # type: ignore[attr-defined]
        torch.float16, torch.float32, torch.float64)  # type: ignore[attr-defined]
    torch.dtype = dtype  # type: ignore[attr-defined]
    torch.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
    torch.Size = type("Size", (tuple,), {})  # type: ignore[attr-defined]
    return torch


def _installed_function(module: str, name: str, namespace: dict[str, Any]) -> Any:
    """A top-level function of an installed module, compiled from that file's own source,
    for modules whose import needs the GPU stack (lmcache.integration.vllm.utils)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not installed"
    source = Path(spec.origin).read_text(encoding="utf-8")
    tree = ast.parse(source)
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    code = compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec")
    exec(code, namespace)
    return namespace[name]


def load_lmcache_keys() -> Iterator[LMCacheKeys]:
    """LMCache's key parts; sys.modules is left as it was found."""
    before = dict(sys.modules)
    try:
        if importlib.util.find_spec("torch") is None:
            sys.modules["torch"] = _torch_stand_in()
        utils = importlib.import_module("lmcache.utils")
        from collections.abc import Mapping

        extract = _installed_function(
            "lmcache.integration.vllm.utils", "extract_request_configs_from_sampling_params",
            {"Mapping": Mapping, "Any": Any, "Optional": Any})
        yield LMCacheKeys(utils.CacheEngineKey, extract,
                          utils.STR_DTYPE_TO_TORCH_DTYPE["bfloat16"])
    finally:
        for name in set(sys.modules) - set(before):
            del sys.modules[name]
        sys.modules.update(before)
