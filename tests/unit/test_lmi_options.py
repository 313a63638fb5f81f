"""Everything lmikit renders for LMI is in the option table, with a value its row accepts.

The table (:mod:`lmikit.render`) records djl-serving's option rules with the file
each came from; these tests render every example spec and specs with every feature on, for
both images, and check each ``serving.properties`` line and environment variable against it.
"""

from __future__ import annotations

import pytest

from lmikit.planner._planner import plan_spec
from lmikit.planner._startup import weights_source
from lmikit.render._env import container_environment, model_environment, serving_properties
from lmikit.render._lmi_options import ROWS, check_rendered, env_to_property, row
from lmikit.spec._loader import load_spec_text
from tests.conftest import EXAMPLE_SPECS, ROOT
from tests.unit.test_render_env import ISOLATED, S3, parse_properties
from tests.unit.test_spec import BASE

SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hf-AbCdEf"
# Every feature lmikit renders an option for, on the Hub path and on SageMaker-copied S3.
FEATURE_RICH = BASE.replace("ml.g6e.2xlarge", "ml.g6e.12xlarge") + f"""\
  copies_per_instance: 2
engine:
  tensor_parallel_degree: 2
  max_model_len: 16384
  max_batch_size: 96
  gpu_memory_utilization: 0.85
  kv_cache_dtype: fp8
  enable_prefix_caching: false
  speculative: {{method: eagle3, draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B}}
  lora: {{max_rank: 64, max_adapters: 6}}
kv_cache:
  mode: cpu+disk
workload:
  reused_context_tokens: 9000000
sessions:
  expiration_seconds: 900
security:
  hf_token_secret_arn: {SECRET}
adapters:
  - {{name: legal, source: adapters/legal, rank: 32}}
"""
FEATURE_RICH_ISOLATED = ISOLATED + f"""\
engine:
  speculative: {{method: eagle, draft_model: {S3}draft/}}
  lora: {{enabled: true}}
workload:
  reused_context_tokens: 1500000
"""
SPECS = {p.stem: p.read_text() for p in EXAMPLE_SPECS}
SPECS |= {"feature-rich": FEATURE_RICH,
          "feature-rich-isolated": FEATURE_RICH_ISOLATED}


def _rendered(text: str, image: str) -> tuple[dict[str, str], dict[str, str]]:
    spec = load_spec_text(text, source=str(ROOT / "examples" / "x.yaml"))
    plan = plan_spec(spec, base_dir=ROOT / "examples")
    if weights_source(spec) == "s3-sagemaker":
        return {}, model_environment(spec, plan, image=image)  # type: ignore[arg-type]
    props = parse_properties(serving_properties(spec, plan, image=image))  # type: ignore[arg-type]
    return props, container_environment(spec, plan, image=image)  # type: ignore[arg-type]


@pytest.mark.parametrize("image", ["stock", "lmikit"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_rendered_option_is_in_the_table_with_an_accepted_value(name, image):
    text = SPECS[name]
    if image == "stock" and SECRET in text:
        text = text.replace(f"security:\n  hf_token_secret_arn: {SECRET}\n", "")
    props, env = _rendered(text, image)
    assert check_rendered(props, env) == []


def test_feature_rich_spec_renders_every_feature():
    """The spec above really exercises the rows (a spec that rendered nothing would pass)."""
    props, env = _rendered(SPECS["feature-rich"], "lmikit")
    keys = set(props) | {env_to_property(k) or k for k in env}
    for option in ("option.model_id", "option.speculative_config", "option.kv_cache_dtype",
                   "option.enable_lora", "option.max_lora_rank", "option.max_cpu_loras",
                   "option.kv_transfer_config", "option.lmcache_config_file",
                   "option.enable_stateful_sessions", "option.sessions_expiration",
                   "option.model_loading_timeout", "option.max_rolling_batch_size",
                   "option.entryPoint", "LMIKIT_HF_TOKEN_SECRET_ARN", "LMIKIT_PLAN"):
        assert option in keys, option
    _, iso = _rendered(SPECS["feature-rich-isolated"], "stock")
    assert {"LMCACHE_MAX_LOCAL_CPU_SIZE", "OPTION_SPECULATIVE_CONFIG"} <= set(iso)


@pytest.mark.parametrize(("props", "env", "expected"), [
    ({}, {"HF_MODEL_ID": "Qwen/Qwen2.5-7B-Instruct"}, "HF_MODEL_ID='Qwen/Qwen2.5-7B-Instruct'"
     ": must not be rendered: it registers a second model"),
    ({"option.rolling_batch": "vllm"}, {}, "option.rolling_batch='vllm': must be one of"),
    ({}, {"OPTION_ENABLE_STATEFUL_SESSIONS": "false"}, "must be one of: true"),
    ({"option.max_lora_rank": "48"}, {}, "option.max_lora_rank='48': must be one of"),
    ({"option.kv_transfer_config": '{"kv_connector":"LMCacheConnectorV1","x":1}'}, {},
     "has keys LMI/vLLM does not take: x"),
    ({"option.flux_capacitor": "1"}, {}, "option.flux_capacitor: not in the LMI option table"),
    ({"option.tensor_parallel_degree": "2"}, {"OPTION_TENSOR_PARALLEL_DEGREE": "4"},
     "the file wins"),
    ({}, {"LMCACHE_LOCAL_DISK": "file://tmp/lmcache/"}, "must match file:///"),
])
def test_check_rendered_catches_what_lmi_would_reject_or_misread(props, env, expected):
    problems = check_rendered(props, env)
    assert any(expected in p for p in problems), problems


def test_lmi_maps_option_variables_like_djl_serving():
    """ModelInfo.loadServingProperties: OPTION_<KEY> lower-cased, ENTRYPOINT -> entryPoint,
    ENGINE -> the top-level engine property."""
    assert env_to_property("OPTION_MAX_MODEL_LEN") == "option.max_model_len"
    assert env_to_property("OPTION_ENTRYPOINT") == "option.entryPoint"
    assert env_to_property("OPTION_ENGINE") == "engine"
    assert env_to_property("PYTHONHASHSEED") is None
    for option in ROWS:
        if option.form == "option":
            assert env_to_property(option.env_name) == option.property_name


def test_table_rows_are_unique_and_cite_a_source():
    names = [r.env_name for r in ROWS]
    assert len(names) == len(set(names))
    for option in ROWS:
        assert option.source and option.default and option.wins, option.key
        assert "/" in option.source or "lmikit" in option.source, option.key


def test_lmcache_rows_are_lmcache_config_keys():
    """Every LMCACHE_<KEY> row names a key LMCache 0.5.6's own config knows, but the usage
    telemetry switch, which its usage_telemetry/identity.py reads from the environment."""
    config = pytest.importorskip("lmcache.v1.config")
    for option in ROWS:
        if option.key == "LMCACHE_TRACK_USAGE":
            assert option.key.lower() not in config._CONFIG_DEFINITIONS
            assert "usage_telemetry/identity.py" in option.source
        elif option.key.startswith("LMCACHE_"):
            assert option.key[len("LMCACHE_"):].lower() in config._CONFIG_DEFINITIONS, option.key


def test_row_lookup_by_any_name():
    assert row("model_id") is row("option.model_id") is row("OPTION_MODEL_ID")
    with pytest.raises(KeyError, match="no LMI option row"):
        row("option.nope")


@pytest.mark.parametrize(("uri", "kind"), [
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130",
     "stock"),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference@sha256:" + "a" * 64, "stock"),
    ("111122223333.dkr.ecr.us-east-1.amazonaws.com/cdk-hnb659fds-container-assets:abc",
     "lmikit"),
    ("localhost:5000/lmikit-lmi", "lmikit"),
])
def test_image_kind_is_read_from_the_repository(uri, kind):
    from lmikit.catalog._containers import image_kind_of

    assert image_kind_of(uri) == kind


def test_lmi_has_no_option_that_turns_on_cached_token_counts():
    """vLLM reports a request's cached prompt tokens only when its serving object is built
    with enable_prompt_tokens_details; LMI's VLLMHandler.initialize (djl-serving master,
    lmi_vllm/vllm_async_service.py) builds OpenAIServingChat without it, and only EngineArgs
    fields pass through as options. lmikit must not render an option LMI ignores."""
    option = row("enable_prompt_tokens_details")
    assert "VLLMHandler.initialize" in option.source
    assert check_rendered({"option.enable_prompt_tokens_details": "true"}, {}) == [
        "option.enable_prompt_tokens_details='true': must not be rendered: "
        + option.accepts.never]
