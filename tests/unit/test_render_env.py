from __future__ import annotations

import json
import os

import pytest

from lmikit.errors import RenderError
from lmikit.planner._planner import plan_spec
from lmikit.planner._startup import weights_source
from lmikit.render._env import (
    CFN_ENVIRONMENT_MAX,
    MODEL_ID_ENV,
    container_environment,
    lmi_environment,
    lora_rank_limit,
    model_environment,
    model_options,
    serving_properties,
)
from lmikit.render._lmi_options import row
from lmikit.spec._loader import load_spec, load_spec_text
from tests.conftest import EXAMPLE_SPECS, ROOT, assert_golden
from tests.unit.test_spec import BASE

IMAGES = ("stock", "lmikit")
S3 = "s3://example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/"
ISOLATED = f"""\
api_version: v1
name: iso
region: us-east-1
model:
  id: {S3}
  config_path: {ROOT / "examples" / "models" / "llama-3.1-8b-config.json"}
instance:
  type: ml.g6e.4xlarge
security:
  network_isolation: true
"""


def _env(extra: str = "", image: str = "stock") -> dict[str, str]:
    spec = load_spec_text(BASE + extra)
    return lmi_environment(spec, plan_spec(spec), image=image)  # type: ignore[arg-type]


def parse_properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        assert key not in out, f"{key} is set twice in serving.properties"
        out[key] = value.encode().decode("unicode_escape")
    return out


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_env_matches_golden(path):
    spec = load_spec(path)
    env = lmi_environment(spec, plan_spec(spec, base_dir=path.parent))
    assert_golden(f"env-{path.stem}.json", json.dumps(env, indent=2, sort_keys=True) + "\n")


def test_env_always_pins_hash_seed_and_is_all_strings():
    env = _env()
    assert env["PYTHONHASHSEED"] == "0"
    assert all(isinstance(v, str) for v in env.values())


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
@pytest.mark.parametrize("image", IMAGES)
def test_env_defines_exactly_one_model(path, image):
    """One model definition: option.model_id in serving.properties (or, when SageMaker
    copies the weights, none: LMI loads /opt/ml/model), and never HF_MODEL_ID, which would
    register a second model beside /opt/ml/model (djl-serving ModelStore.initialize)."""
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    if weights_source(spec) == "s3-sagemaker":
        env = model_environment(spec, plan, image=image)
        assert "OPTION_MODEL_ID" not in env and "HF_MODEL_ID" not in env
        with pytest.raises(RenderError, match="no serving.properties"):
            serving_properties(spec, plan, image=image)
        return
    env = container_environment(spec, plan, image=image)
    props = parse_properties(serving_properties(spec, plan, image=image))
    assert props["option.model_id"] == spec.model.id
    assert "HF_MODEL_ID" not in env and "OPTION_MODEL_ID" not in env
    assert env[MODEL_ID_ENV] == spec.model.id  # read back by the adapter registry only


def test_env_async_service_with_explicit_batch_size():
    """The async path: rolling_batch disable + async_mode + the async entry point, and the
    batch size it reads (max_rolling_batch_size, default 32 there) is always explicit."""
    env = _env("engine:\n  max_batch_size: 200\n")
    assert env["OPTION_ROLLING_BATCH"] == "disable"
    assert env["OPTION_ASYNC_MODE"] == "true"
    assert env["OPTION_ENTRYPOINT"] == "djl_python.lmi_vllm.vllm_async_service"
    assert env["OPTION_MAX_ROLLING_BATCH_SIZE"] == "200"
    assert _env()["OPTION_MAX_ROLLING_BATCH_SIZE"] == "64"  # the spec's default, not LMI's 32


def test_env_sessions_flag_is_lowercase_true():
    env = _env("sessions:\n  expiration_seconds: 600\n")
    assert env["OPTION_ENABLE_STATEFUL_SESSIONS"] == "true"
    assert env["OPTION_SESSIONS_EXPIRATION"] == "600"


def test_env_sessions_off_is_never_rendered_as_false():
    """The async service leaves its session manager unset on any value but "true", and
    every request then fails: sessions off means the option is absent."""
    env = _env("routing:\n  strategy: random\n")
    assert "OPTION_ENABLE_STATEFUL_SESSIONS" not in env


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


@pytest.mark.parametrize(("rank", "limit"), [(1, 16), (8, 16), (16, 16), (17, 32), (64, 64),
                                              (65, 128), (257, 320), (321, 512)])
def test_env_lora_rank_limit_is_the_smallest_vllm_rank_that_fits(rank, limit):
    """vLLM takes max_lora_rank from MaxLoRARanks (1, 8, ..., 320, 512); lmikit picks the
    smallest member >= the largest adapter rank, and never below vLLM's default 16."""
    assert lora_rank_limit(rank) == limit


def test_env_max_loras_defaults_to_four_or_the_adapter_count():
    """max(4, adapters) unless engine.lora.max_adapters says otherwise (4 is DJL's default)."""
    two = "".join(f"  - {{name: a{i}, source: x}}\n" for i in range(2))
    assert _env("adapters:\n" + two)["OPTION_MAX_LORAS"] == "4"
    nine = "".join(f"  - {{name: a{i}, source: x}}\n" for i in range(9))
    assert _env("adapters:\n" + nine)["OPTION_MAX_LORAS"] == "9"


def test_env_speculative_config_is_json():
    env = _env("engine:\n  speculative:\n    method: eagle3\n    draft_model: yuhuili/EAGLE3-x\n")
    assert json.loads(env["OPTION_SPECULATIVE_CONFIG"]) == {
        "method": "eagle3", "model": "yuhuili/EAGLE3-x", "num_speculative_tokens": 4}


def test_env_s3_draft_under_the_weights_is_a_local_path():
    spec = load_spec_text(ISOLATED + "engine:\n  speculative:\n    method: eagle3\n"
                          f"    draft_model: {S3}eagle3-draft/\n")
    env = model_environment(spec, plan_spec(spec))
    assert json.loads(env["OPTION_SPECULATIVE_CONFIG"])["model"] == \
        "/opt/ml/model/eagle3-draft"


def test_env_never_holds_a_token_only_the_secret_arn():
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-token-AbCdEf"
    env = _env(f"security:\n  hf_token_secret_arn: {arn}\n", image="lmikit")
    assert "HF_TOKEN" not in env
    assert env["LMIKIT_HF_TOKEN_SECRET_ARN"] == arn


def test_env_metrics_variables_follow_the_image():
    """Each image gets what makes its own metrics endpoint answer."""
    stock, lmikit = _env(), _env(image="lmikit")
    assert stock["SERVING_PROMETHEUS"] == "true" and "LMIKIT_METRICS_PATH" not in stock
    assert lmikit["LMIKIT_METRICS_PATH"] == "/metrics" and "SERVING_PROMETHEUS" not in lmikit
    off = _env("observability:\n  detailed_metrics: false\n")
    assert "SERVING_PROMETHEUS" not in off


def test_env_plan_contract_is_read_by_the_container(monkeypatch):
    """The container's own reader accepts what the SDK emits (no drift between the two)."""
    monkeypatch.syspath_prepend(str(ROOT / "container"))
    autoconfig = pytest.importorskip("lmikit_runtime.autoconfig")
    env = _env("workload:\n  reused_context_tokens: 400000\n", image="lmikit")
    contract = json.loads(env["LMIKIT_PLAN"])
    assert contract["tier"] == "cpu" and contract["cpu_size_gb"] == "auto"
    read = autoconfig.runtime_plan_from_env({"LMIKIT_PLAN": env["LMIKIT_PLAN"]},
                                            model_dir=ROOT / "nowhere")
    assert (read.tier, read.tp, read.copies) == ("cpu", 1, 1)
    assert read.weight_bytes == contract["weight_bytes"] > 10**10
    assert read.cpu_size_gb is None  # "auto": sized from the host at start-up


def test_env_stock_image_on_s3_weights_configures_lmcache_by_its_own_variables(monkeypatch):
    """No config file can ship beside weights SageMaker copies; LMCache 0.5.6 reads
    LMCACHE_<KEY> when no file is named. Its own loader must read back the planned sizes."""
    config_mod = pytest.importorskip("lmcache.v1.config")
    spec = load_spec_text(ISOLATED + "workload:\n  reused_context_tokens: 1500000\n")
    plan = plan_spec(spec)
    env = model_environment(spec, plan)
    assert "OPTION_LMCACHE_CONFIG_FILE" not in env
    lmcache_env = {k: v for k, v in env.items() if k.startswith("LMCACHE_")}
    assert set(lmcache_env) >= {"LMCACHE_CHUNK_SIZE", "LMCACHE_MAX_LOCAL_CPU_SIZE"}
    for key in [k for k in os.environ if k.startswith("LMCACHE_")]:
        monkeypatch.delenv(key)
    for key, value in lmcache_env.items():
        monkeypatch.setenv(key, value)
    config = config_mod.LMCacheEngineConfig.from_env()
    assert config.max_local_cpu_size == plan.lmcache["max_local_cpu_size_gb"]
    assert config.chunk_size == plan.lmcache["chunk_size"]
    assert config.local_cpu is True
    assert config.enable_lazy_memory_allocator is False  # not rendered: no LMI honours it


@pytest.mark.parametrize("path", [p for p in EXAMPLE_SPECS if "regulated" not in p.name],
                         ids=lambda p: p.name)
@pytest.mark.parametrize("image", IMAGES)
def test_env_and_serving_properties_split_every_option_once(path, image):
    spec = load_spec(path)
    plan = plan_spec(spec, base_dir=path.parent)
    full = lmi_environment(spec, plan, image=image)
    env = container_environment(spec, plan, image=image)
    props = parse_properties(serving_properties(spec, plan, image=image))
    assert len(env) <= CFN_ENVIRONMENT_MAX
    for key in ("LMIKIT_EMF", MODEL_ID_ENV):  # SageMaker-only: not in the generic env
        env.pop(key, None)
    assert props.pop("engine") == "Python"
    model = {row(k).env_name: v for k, v in model_options(spec).items()}
    from_props = {row(k[len("option."):]).env_name: v for k, v in props.items()}
    assert not set(env) & set(from_props)
    assert {**env, **from_props} == {**full, **model}


def test_env_stays_small_with_every_feature_on():
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
    text = BASE + ("engine:\n  speculative: {method: eagle, draft_model: a/b}\n"
                   "  kv_cache_dtype: fp8\n"
                   "workload:\n  reused_context_tokens: 400000\n"
                   f"security:\n  hf_token_secret_arn: {arn}\n"
                   "adapters:\n  - {name: a, source: x, rank: 32}\n")
    spec = load_spec_text(text)
    for image in IMAGES:
        env = container_environment(spec, plan_spec(spec), image=image)  # type: ignore[arg-type]
        assert len(env) <= CFN_ENVIRONMENT_MAX
        assert env["OPTION_MAX_LORA_RANK"] == "32"  # the adapter registry reads it back


def test_env_lora_can_be_enabled_before_any_adapter():
    env = _env("engine:\n  lora: {enabled: true, max_rank: 64, max_adapters: 8}\n")
    assert env["OPTION_ENABLE_LORA"] == "true"
    assert env["OPTION_MAX_LORA_RANK"] == "64"
    assert env["OPTION_MAX_LORAS"] == "8"


def test_env_no_lora_by_default():
    assert "OPTION_ENABLE_LORA" not in _env()
