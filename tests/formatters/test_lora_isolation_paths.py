"""LoRA with LMCache off the default path, checked with LMCache's own ``CacheEngineKey``.

S3 weights that SageMaker copies (network isolation): no model artifact ships, so the base
model's isolating model.py must be in the weights' prefix: ``lmikit weights stage
--lora-isolation`` writes it, ``lmikit deploy`` checks it (``check_model_py``), and the model.py
read back from S3 keeps adapters and the base apart as on the default path.

HyperPod: the operator's worker is vLLM's OpenAI server. It picks a LoRA by the request's
``model`` and takes ``kv_transfer_params`` from the client only (vLLM 0.11.1 and 0.23
entrypoints/openai/protocol.py: ``kv_transfer_params`` is copied into
``SamplingParams.extra_args``), so nothing on the server tags a request: the keys collide and
lmikit refuses the manifest.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import lmikit
from lmikit.errors import RenderError
from lmikit.lora import package_spec_adapter
from lmikit.planner._planner import plan_spec
from lmikit.render._hyperpod import hyperpod_manifest
from lmikit.render._model_artifact import (
    model_artifact_files,
    read_artifact_files,
    weights_model_py,
)
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import write_lora_adapter
from lmikit.weights import WeightsError, check_model_py, check_staged, stage
from tests.formatters.lmi_request_path import (
    ADAPTER_HEADER,
    LMCacheKeys,
    LmiWorker,
    Served,
    _to_sampling_params,
)
from tests.functional.weights._fake_hub import FakeHub

LoadModelPy = Callable[[str], types.ModuleType]

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


pytestmark = pytest.mark.usefixtures("fresh_worker")  # each test is a new LMI worker


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


# --- S3 weights that SageMaker copies (security.network_isolation) -------------------------
# No model artifact ships: SageMaker copies model.id's prefix into /opt/ml/model, and LMI loads
# <model dir>/model.py's formatters (djl-serving vllm_async_service.py VLLMHandler.initialize
# -> load_formatters). So the base's isolating model.py must be in the prefix itself.
BUCKET = "staged-models"
PREFIX = f"s3://{BUCKET}/qwen7b/"
S3_SPEC = f"""
api_version: v1
name: claims
region: us-east-1
model:
  id: {PREFIX}
  config_path: config.json
instance:
  type: ml.g6e.4xlarge
kv_cache:
  mode: cpu
workload:
  reused_context_tokens: 460000
security:
  network_isolation: true
adapters:
  - name: legal
    source: adapters/legal
  - name: medical
    source: adapters/medical
"""
HUB_FILES = {"config.json": b'{"architectures": ["Qwen2ForCausalLM"]}\n',
             "model.safetensors": b"\0" * 4096}


def _s3_spec(root: Path) -> DeploymentSpec:
    catalog = Path(lmikit.__file__).parent / "catalog" / "models" / "Qwen--Qwen2.5-7B-Instruct.json"
    (root / "config.json").write_text(json.dumps(json.loads(catalog.read_text())["config"]))
    for name, fill in (("legal", 1), ("medical", 2)):
        write_lora_adapter(root / "adapters" / name, fill=fill,
                           config={"base_model_name_or_path": PREFIX})
    return load_spec_text(S3_SPEC, source=str(root / "spec.yaml"))


@pytest.fixture
def staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Path]]:
    """A Hub snapshot staged under PREFIX in moto's S3 by `lmikit weights stage
    --lora-isolation`, as the spec's deployment needs it."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    hub = FakeHub()
    hub.add_repo("Qwen/Qwen2.5-7B-Instruct", HUB_FILES)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        spec = _s3_spec(tmp_path)
        expected = weights_model_py(spec, plan_spec(spec, tmp_path))
        assert expected is not None
        stage("Qwen/Qwen2.5-7B-Instruct", PREFIX, endpoint=hub.url, s3=s3, region="us-east-1",
              model_py=expected)
        yield s3, tmp_path
    hub.close()


def test_s3_weights_without_lmikit_model_py_share_keys_across_adapters(
        tmp_path: Path, lmcache: LMCacheKeys, load_model_py: LoadModelPy) -> None:
    """The problem on this path: the adapters are tagged by their own model.py, but the base
    (no model.py) runs an adapter named in ``model`` under untagged base keys."""
    spec = _s3_spec(tmp_path)
    plan = plan_spec(spec, tmp_path)
    assert model_artifact_files(spec, plan, tmp_path) == {}
    worker = _worker_with_base(spec, tmp_path, None, load_model_py)
    by_name = worker.serve({"prompt": PROMPT, "model": "legal"})
    assert by_name.lora == "legal"
    assert lmcache.key(by_name) == lmcache.key(worker.serve({"prompt": PROMPT}))


def test_s3_weights_staged_with_lora_isolation_keep_adapters_apart(
        staged: tuple[Any, Path], lmcache: LMCacheKeys, load_model_py: LoadModelPy) -> None:
    s3, root = staged
    spec = _s3_spec(root)
    base_text = s3.get_object(Bucket=BUCKET, Key="qwen7b/model.py")["Body"].read().decode()
    worker = _worker_with_base(spec, root, base_text, load_model_py)
    base = worker.serve({"prompt": PROMPT})
    legal = worker.serve({"prompt": PROMPT}, {ADAPTER_HEADER: "legal"})
    medical = worker.serve({"prompt": PROMPT}, {ADAPTER_HEADER: "medical"})
    assert len({lmcache.key(base), lmcache.key(legal), lmcache.key(medical)}) == 3
    assert len({k.to_string() for k in map(lmcache.key, (base, legal, medical))}) == 3
    # The base can neither run an adapter by name nor borrow an adapter's tag.
    by_name = worker.serve({"prompt": PROMPT, "model": "legal"})
    forged = worker.serve({"prompt": PROMPT, "kv_transfer_params": {
        "lmcache.tag.lmikit_adapter": lmcache.key(legal).tags[0][1]}})
    assert by_name.lora is None and forged.lora is None
    assert lmcache.key(by_name) == lmcache.key(forged) == lmcache.key(base)
    manifest = check_staged(PREFIX, s3=s3).manifest
    assert "model.py" in {f.path for f in manifest.files}


def test_s3_weights_model_py_is_checked_before_a_deploy(staged: tuple[Any, Path]) -> None:
    s3, root = staged
    spec = _s3_spec(root)
    expected = weights_model_py(spec, plan_spec(spec, root))
    assert expected is not None
    check_model_py(PREFIX, expected, s3=s3)
    s3.put_object(Bucket=BUCKET, Key="qwen7b/model.py", Body=b"# someone else's model.py\n")
    with pytest.raises(WeightsError, match="not lmikit's LoRA isolation model.py .* "
                                           "--lora-isolation"):
        check_model_py(PREFIX, expected, s3=s3)
    s3.delete_object(Bucket=BUCKET, Key="qwen7b/model.py")
    with pytest.raises(WeightsError, match=r"model.py is missing: .* --lora-isolation"):
        check_model_py(PREFIX, expected, s3=s3)


def test_s3_weights_model_py_is_needed_only_with_lora_and_lmcache(tmp_path: Path) -> None:
    spec = _s3_spec(tmp_path)
    assert weights_model_py(spec, plan_spec(spec, tmp_path)) is not None
    off = spec.model_copy(update={"kv_cache": spec.kv_cache.model_copy(update={"mode": "off"})})
    assert weights_model_py(off, plan_spec(off, tmp_path)) is None
    no_lora = spec.model_copy(update={"adapters": []})
    assert weights_model_py(no_lora, plan_spec(no_lora, tmp_path)) is None
    hub = spec.model_copy(update={"security": spec.security.model_copy(
        update={"network_isolation": False})})
    assert weights_model_py(hub, plan_spec(hub, tmp_path)) is None  # the artifact ships it


def _worker_with_base(spec: DeploymentSpec, root: Path, base_text: str | None,
                      load_model_py: LoadModelPy) -> LmiWorker:
    """An LMI worker with ``base_text`` as the model dir's model.py and the adapter
    artifacts lmikit packages (each with its tagging model.py)."""
    plan = plan_spec(spec, root)
    adapters: dict[str, types.ModuleType | None] = {}
    for a in spec.adapters:
        package = package_spec_adapter(spec, plan, a, root)
        text = read_artifact_files(package.data).get("model.py")
        adapters[a.name] = load_model_py(text.decode()) if text else None
    return LmiWorker(load_model_py(base_text) if base_text else None, adapters)
