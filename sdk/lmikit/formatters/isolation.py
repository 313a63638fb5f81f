"""KV-cache isolation between LoRA adapters (and the base model) under LMCache.

Standard library only: inlined, after :mod:`lmikit.formatters.runtime`, into the ``model.py``
of every adapter lmikit packages while LMCache is on, and into the base model's ``model.py``
when LoRA and LMCache are both on.

LMCache's cache key has no LoRA adapter in it, so two adapters that share a prompt prefix
would reuse each other's KV. The key does hold every ``lmcache.tag.<name>`` entry of the
request's ``kv_transfer_params`` (``lmcache/utils.py`` CacheEngineKey, fed by
``lmcache/integration/vllm/utils.py`` extract_request_configs_from_sampling_params, LMCache
0.5.6), and vLLM copies the request's ``kv_transfer_params`` into
``sampling_params.extra_args`` (``to_sampling_params`` of CompletionRequest and
ChatCompletionRequest, vLLM 0.23). LMI (``vllm_async_service.preprocess_request``) builds
that request from the dict the input formatter returns. So the input formatter is where a
tag can be set that a client cannot skip:

- adapter requests carry exactly ``lmcache.tag.lmikit_adapter = <name>.<content digest>``
  (client ``lmcache.*`` entries are dropped first); beam search is refused, because vLLM's
  beam search builds its own sampling params without ``kv_transfer_params``;
- base requests carry no ``lmcache.*`` entry and cannot pick an adapter through ``model``
  (vLLM would run that LoRA with the base model's untagged keys).

>>> client = {"prompt": "hi", "model": "legal", "kv_transfer_params": {"lmcache.tag.x": "y"}}
>>> isolate_request(client, "legal.0123abcd")["kv_transfer_params"]
{'lmcache.tag.lmikit_adapter': 'legal.0123abcd'}
>>> isolate_request(client, None)
{'prompt': 'hi'}
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from lmikit.formatters.runtime import FormatterError, _lk_djl  # (provided above in model.py)

CACHE_TAG_KEY = "lmcache.tag.lmikit_adapter"
_LK_SHARED_MODULE = "lmikit_formatters_shared"  # one per LMI worker process


def _lk_shared() -> dict[str, Any]:
    """State shared by the base's and the adapters' model.py in one LMI worker process."""
    module = sys.modules.get(_LK_SHARED_MODULE)
    if module is None:
        module = types.ModuleType(_LK_SHARED_MODULE)
        module.base_input = None  # type: ignore[attr-defined]
        sys.modules[_LK_SHARED_MODULE] = module
    return module.__dict__


def _lk_drop_cache_params(holder: dict) -> None:
    """Remove client ``lmcache.*`` entries (and a ``kv_transfer_params`` smuggled through
    ``vllm_xargs``, which vLLM starts ``extra_args`` from) from one level of a request."""
    params = holder.get("kv_transfer_params")
    if isinstance(params, dict):
        kept = {k: v for k, v in params.items()
                if not (isinstance(k, str) and k.startswith("lmcache."))}
        if kept:
            holder["kv_transfer_params"] = kept
        else:
            del holder["kv_transfer_params"]
    elif "kv_transfer_params" in holder:
        del holder["kv_transfer_params"]
    xargs = holder.get("vllm_xargs")
    if isinstance(xargs, dict) and "kv_transfer_params" in xargs:
        holder["vllm_xargs"] = {k: v for k, v in xargs.items() if k != "kv_transfer_params"}


def isolate_request(request: dict, tag: str | None) -> dict:
    """The request as LMI should see it: ``tag`` set for an adapter, nothing for the base.

    Covers LMI's three request shapes: ``prompt`` and ``messages`` go to vLLM as they are;
    ``inputs`` (LMI's own schema) passes only ``parameters`` on, so the tag goes there too.
    """
    out = dict(request)
    lmi_schema = "prompt" not in out and "inputs" in out
    params = out.get("parameters")
    if params is None and lmi_schema and tag is not None:
        params = {}
    levels = [out]
    if isinstance(params, dict):
        params = dict(params)
        params.pop("model", None)  # LMI merges parameters over the model it chose
        out["parameters"] = params
        levels.append(params)
    elif params is not None and lmi_schema:
        raise FormatterError(f"'parameters' must be a JSON object, not "
                             f"{type(params).__name__}")
    for level in levels:
        _lk_drop_cache_params(level)
        if tag is not None and level.get("use_beam_search"):
            raise FormatterError("beam search is not available on a LoRA adapter while the KV "
                                 "cache (LMCache) is on: vLLM's beam search drops the "
                                 "adapter's cache tag; use sampling or greedy decoding")
    if tag is None:
        out.pop("model", None)  # LMI then serves the base model; a LoRA name is refused here
        return out
    for level in levels if lmi_schema else levels[:1]:
        level["kv_transfer_params"] = {**level.get("kv_transfer_params", {}),
                                       CACHE_TAG_KEY: tag}
    return out


def _lk_share_base_input(fn: Callable[..., Any] | None) -> None:
    """Record the base model's own input formatter for adapters without one of their own
    (LMI applies the base's formatter to them; an adapter's model.py takes that place)."""
    _lk_shared()["base_input"] = fn


def _lk_isolating_input(user_fn: Callable[..., Any] | None, tag: str | None) -> Any:
    """The model.py's one input formatter: the user's (an adapter without one falls back to
    the base's, as LMI does), then :func:`isolate_request`."""
    if user_fn is not None:
        user_fn.is_input_formatter = False  # type: ignore[attr-defined]  # LMI finds one

    def lmikit_isolated_input(decoded_payload: Any, **kwargs: Any) -> dict:
        fn = user_fn
        if fn is None and tag is not None:
            fn = _lk_shared()["base_input"]
        request = fn(decoded_payload, **kwargs) if fn is not None else decoded_payload
        if not isinstance(request, dict):
            raise FormatterError(f"the request is a {type(request).__name__}, not a JSON "
                                 "object; send a JSON object (prompt, messages or inputs)")
        return isolate_request(request, tag)

    djl = _lk_djl["input"]
    return djl(lmikit_isolated_input) if djl is not None else lmikit_isolated_input
