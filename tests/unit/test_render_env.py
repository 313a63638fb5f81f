from __future__ import annotations

import json

import pytest

from lmikit.loader import load_spec, load_spec_text
from lmikit.plan import plan_spec
from lmikit.render.env import lmi_environment
from tests.conftest import EXAMPLE_SPECS, assert_golden
from tests.unit.test_spec import BASE


def _env(extra: str = "") -> dict[str, str]:
    spec = load_spec_text(BASE + extra)
    return lmi_environment(spec, plan_spec(spec))


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_env_matches_golden(path):
    spec = load_spec(path)
    env = lmi_environment(spec, plan_spec(spec, base_dir=path.parent))
    assert_golden(f"env-{path.stem}.json", json.dumps(env, indent=2, sort_keys=True) + "\n")


def test_env_always_pins_hash_seed_and_is_all_strings():
    env = _env()
    assert env["PYTHONHASHSEED"] == "0"
    assert all(isinstance(v, str) for v in env.values())


def test_env_sessions_flag_is_lowercase_true():
    env = _env("sessions:\n  expiration_seconds: 600\n")
    assert env["OPTION_ENABLE_STATEFUL_SESSIONS"] == "true"
    assert env["OPTION_SESSIONS_EXPIRATION"] == "600"


def test_env_no_sessions_without_sticky_routing():
    assert "OPTION_ENABLE_STATEFUL_SESSIONS" not in _env("routing:\n  strategy: random\n")


def test_env_lmcache_connector_when_tier_used():
    env = _env("workload:\n  reused_context_tokens: 400000\n")
    assert json.loads(env["OPTION_KV_TRANSFER_CONFIG"]) == {
        "kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert env["OPTION_LMCACHE_CONFIG_FILE"] == "lmcache_config.yaml"


def test_env_no_lmcache_when_cache_off():
    env = _env("kv_cache:\n  mode: 'off'\n")
    assert "OPTION_KV_TRANSFER_CONFIG" not in env


def test_env_lora_limits_follow_adapters():
    adapters = "".join(f"  - {{name: a{i}, source: x, rank: {r}}}\n"
                       for i, r in enumerate([8, 64, 16, 8, 8, 8]))
    env = _env("adapters:\n" + adapters)
    assert env["OPTION_ENABLE_LORA"] == "true"
    assert env["OPTION_MAX_LORA_RANK"] == "64"
    assert env["OPTION_MAX_LORAS"] == "6"
    assert int(env["OPTION_MAX_CPU_LORAS"]) >= 6


def test_env_speculative_config_is_json():
    env = _env("engine:\n  speculative:\n    method: eagle3\n    draft_model: yuhuili/EAGLE3-x\n")
    assert json.loads(env["OPTION_SPECULATIVE_CONFIG"]) == {
        "method": "eagle3", "model": "yuhuili/EAGLE3-x", "num_speculative_tokens": 4}


def test_env_never_holds_a_token_only_the_secret_arn():
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-token-AbCdEf"
    env = _env(f"security:\n  hf_token_secret_arn: {arn}\n")
    assert "HF_TOKEN" not in env
    assert env["LMIKIT_HF_TOKEN_SECRET_ARN"] == arn


def test_env_plan_contract_is_read_by_the_container(monkeypatch):
    """The container's own reader accepts what the SDK emits (no drift between the two)."""
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "container"))
    autoconfig = pytest.importorskip("lmikit_runtime.autoconfig")
    env = _env("workload:\n  reused_context_tokens: 400000\n")
    contract = json.loads(env["LMIKIT_PLAN"])
    assert contract["tier"] == "cpu" and contract["cpu_size_gb"] == "auto"
    read = autoconfig.runtime_plan_from_env({"LMIKIT_PLAN": env["LMIKIT_PLAN"]},
                                            model_dir=ROOT / "nowhere")
    assert (read.tier, read.tp, read.copies) == ("cpu", 1, 1)
    assert read.weight_bytes == contract["weight_bytes"] > 10**10
    assert read.cpu_size_gb is None  # "auto": sized from the host at start-up


def _parse_properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        out[key] = value.encode().decode("unicode_escape")
    return out


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_env_and_serving_properties_split_every_option_once(path):
    from lmikit.render.env import CFN_ENVIRONMENT_MAX, container_environment, serving_properties

    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    full = lmi_environment(spec, plan)
    env = container_environment(spec, plan)
    props = _parse_properties(serving_properties(spec, plan))
    assert len(env) <= CFN_ENVIRONMENT_MAX
    env.pop("LMIKIT_EMF", None)  # SageMaker-only (names the inference component): not in full
    assert props.pop("engine") == "Python"
    from_props = {"OPTION_" + k[len("option."):].upper(): v for k, v in props.items()}
    assert not set(env) & set(from_props)
    assert {**env, **from_props} == full


def test_env_stays_small_with_every_feature_on():
    from lmikit.render.env import CFN_ENVIRONMENT_MAX, container_environment

    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
    text = BASE + ("engine:\n  speculative: {method: eagle, draft_model: a/b}\n"
                   "  kv_cache_dtype: fp8\n"
                   "workload:\n  reused_context_tokens: 400000\n"
                   f"security:\n  hf_token_secret_arn: {arn}\n"
                   "adapters:\n  - {name: a, source: x, rank: 32}\n")
    spec = load_spec_text(text)
    env = container_environment(spec, plan_spec(spec))
    assert len(env) <= CFN_ENVIRONMENT_MAX
    assert env["OPTION_MAX_LORA_RANK"] == "32"  # the adapter registry reads it back


def test_env_lora_can_be_enabled_before_any_adapter():
    env = _env("engine:\n  lora: {enabled: true, max_rank: 64, max_adapters: 8}\n")
    assert env["OPTION_ENABLE_LORA"] == "true"
    assert env["OPTION_MAX_LORA_RANK"] == "64"
    assert env["OPTION_MAX_LORAS"] == "8"


def test_env_no_lora_by_default():
    assert "OPTION_ENABLE_LORA" not in _env()
