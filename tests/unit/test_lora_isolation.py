"""Packaging-side rules of LoRA cache isolation: when it is on, what is refused, the tag."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmikit.errors import AdapterError, PlanError
from lmikit.formatters import build_model_py
from lmikit.lora._isolation import adapter_cache_tag, lmcache_in_environment
from lmikit.planner._planner import plan_spec
from lmikit.render._env import container_environment
from lmikit.render._model_artifact import model_artifact_files
from lmikit.spec import DeploymentSpec


def _spec(mode: str, **extra: object) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "api_version": "v1", "name": "d", "region": "us-east-1",
        "model": {"id": "Qwen/Qwen2.5-7B-Instruct"}, "instance": {"type": "ml.g6e.2xlarge"},
        "kv_cache": {"mode": mode}, "workload": {"reused_context_tokens": 460000}, **extra})


def test_plan_refuses_an_s3_adapter_while_lmcache_is_on() -> None:
    spec = _spec("cpu", adapters=[{"name": "legal", "source": "s3://b/legal.tar.gz"}])
    with pytest.raises(PlanError, match=r"'legal': an s3:// source cannot be used while the "
                                        r"KV cache \(LMCache\) is on.*kv_cache.mode: \"off\""):
        plan_spec(spec)


def test_plan_accepts_an_s3_adapter_without_lmcache() -> None:
    spec = _spec("off", adapters=[{"name": "legal", "source": "s3://b/legal.tar.gz"}])
    assert not plan_spec(spec).uses_lmcache


def test_lmcache_in_environment_reads_the_rendered_base_environment() -> None:
    """The adapter registry decides from the base component's environment; this ties that
    decision to what the renderer writes there."""
    on, off = _spec("cpu", engine={"lora": {"enabled": True}}), _spec(
        "off", engine={"lora": {"enabled": True}})
    assert lmcache_in_environment(container_environment(on, plan_spec(on)))
    assert not lmcache_in_environment(container_environment(off, plan_spec(off)))


def test_lmcache_in_environment_knows_lmis_own_switches() -> None:
    assert lmcache_in_environment({"OPTION_LMCACHE_AUTO_CONFIG": "true"})
    assert lmcache_in_environment({"OPTION_KV_TRANSFER_CONFIG":
                                   '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'})
    assert not lmcache_in_environment({"OPTION_KV_TRANSFER_CONFIG": "not json",
                                       "LMIKIT_PLAN": '{"tier":"none"}'})


def test_adapter_cache_tag_is_name_and_128_bit_digest_without_model_py() -> None:
    files = {"adapter_config.json": b"{}", "adapter_model.safetensors": b"w"}
    tag = adapter_cache_tag("legal", files)
    name, digest = tag.split(".")
    assert name == "legal" and len(digest) == 32 and int(digest, 16) >= 0
    assert adapter_cache_tag("legal", {**files, "model.py": b"x"}) == tag
    assert adapter_cache_tag("legal", {**files, "adapter_model.safetensors": b"v"}) != tag


def test_base_model_py_is_written_for_lora_with_lmcache(tmp_path: Path) -> None:
    spec = _spec("cpu", engine={"lora": {"enabled": True}})
    text = model_artifact_files(spec, plan_spec(spec), tmp_path)["model.py"].decode()
    assert "lmikit_isolated_input = _lk_isolating_input(None, None)" in text
    plain = _spec("cpu")
    assert "model.py" not in model_artifact_files(plain, plan_spec(plain), tmp_path)


def test_build_model_py_refuses_a_tag_lmcache_cannot_hold() -> None:
    with pytest.raises(AdapterError, match=r"cache tag 'legal@v1' must be letters, digits"):
        build_model_py(adapter_tag="legal@v1")


def test_build_model_py_is_for_the_base_or_an_adapter() -> None:
    with pytest.raises(AdapterError, match="the base's or an adapter's, not both"):
        build_model_py(isolate_base=True, adapter_tag="legal.0")
