"""LoRA with LMCache off the default path, checked with LMCache's own ``CacheEngineKey``.

HyperPod: the operator's worker is vLLM's OpenAI server. It picks a LoRA by the request's
``model`` and takes ``kv_transfer_params`` from the client only (vLLM 0.11.1 and 0.23
entrypoints/openai/protocol.py: ``kv_transfer_params`` is copied into
``SamplingParams.extra_args``), so nothing on the server tags a request: the keys collide and
lmikit refuses the manifest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lmikit.errors import RenderError
from lmikit.loader import load_spec_text
from lmikit.plan import plan_spec
from lmikit.render.hyperpod import hyperpod_manifest
from tests.formatters.lmi_request_path import (
    LMCacheKeys,
    Served,
    _to_sampling_params,
    load_lmcache_keys,
)

LMI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"
PROMPT = "Summarise the attached contract. " * 20
HYPERPOD_SPEC = """
api_version: v1
name: docqa
region: us-east-1
model:
  id: Qwen/Qwen2.5-7B-Instruct
instance:
  type: ml.g6e.2xlarge
engine:
  lora:
    enabled: true
kv_cache:
  mode: "{mode}"
workload:
  reused_context_tokens: 460000
routing:
  strategy: prefix_aware
"""


@pytest.fixture(scope="module")
def lmcache() -> Iterator[LMCacheKeys]:
    yield from load_lmcache_keys()


def _vllm_openai_server(request: dict, adapters: set[str]) -> Served:
    """vLLM's OpenAI server: ``model`` naming a LoRA module runs it (serving_engine
    ``_maybe_get_adapters``); the sampling params carry the client's kv_transfer_params."""
    lora = request.get("model") if request.get("model") in adapters else None
    return Served(_to_sampling_params(request), lora)


def test_hyperpod_worker_cannot_tell_adapters_apart_in_lmcache(lmcache: LMCacheKeys) -> None:
    adapters = {"legal", "medical"}
    base = _vllm_openai_server({"model": "/opt/ml/model", "prompt": PROMPT}, adapters)
    legal = _vllm_openai_server({"model": "legal", "prompt": PROMPT}, adapters)
    medical = _vllm_openai_server({"model": "medical", "prompt": PROMPT}, adapters)
    assert (base.lora, legal.lora, medical.lora) == (None, "legal", "medical")
    assert lmcache.key(base) == lmcache.key(legal) == lmcache.key(medical)
    # A tag separates keys only when the client sends it, and any client can send any tag.
    tagged = {"lmcache.tag.adapter": "legal"}
    forged = _vllm_openai_server({"model": "/opt/ml/model", "prompt": PROMPT,
                                  "kv_transfer_params": tagged}, adapters)
    honest = _vllm_openai_server({"model": "legal", "prompt": PROMPT,
                                  "kv_transfer_params": tagged}, adapters)
    assert forged.lora is None and honest.lora == "legal"
    assert lmcache.key(forged) == lmcache.key(honest)


@pytest.mark.parametrize("mode", ["cpu", "cpu+disk"])
def test_hyperpod_refuses_lora_with_the_operators_kv_cache(mode: str) -> None:
    spec = load_spec_text(HYPERPOD_SPEC.format(mode=mode))
    with pytest.raises(RenderError, match=r"LoRA adapters .* cannot share the HyperPod "
                                          r"operator's KV cache .* no LoRA id"):
        hyperpod_manifest(spec, plan_spec(spec), image_uri=LMI_IMAGE)


def test_hyperpod_lora_with_routing_alone_runs_no_lmcache() -> None:
    spec = load_spec_text(HYPERPOD_SPEC.format(mode="off"))
    body = hyperpod_manifest(spec, plan_spec(spec), image_uri=LMI_IMAGE)["spec"]
    assert body["kvCacheSpec"] == {"enableL1Cache": False, "enableL2Cache": False}
    assert "--enable-lora" in body["worker"]["args"]
    assert not any("kv-transfer" in a for a in body["worker"]["args"])
