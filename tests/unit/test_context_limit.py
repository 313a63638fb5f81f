"""engine.max_model_len against the model's own limit, derived as vLLM derives it
(vllm/config/model.py ``_get_and_verify_max_len``)."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from lmikit.catalog._context import context_limit
from lmikit.cli import main
from lmikit.errors import PlanError
from lmikit.planner._planner import plan
from tests.conftest import DEFAULT_SPEC

LLAMA = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("config", "limit"), [
    ({"max_position_embeddings": 4096}, 4096),
    # the smallest length key wins; model_max_length overrides the others
    ({"max_position_embeddings": 8192, "seq_length": 4096}, 4096),
    ({"max_position_embeddings": 8192, "model_max_length": 16384}, 16384),
    # RoPE: yarn starts from original_max_position_embeddings; dynamic/linear multiply;
    # llama3, longrope and su are already counted in max_position_embeddings
    ({"max_position_embeddings": 32768, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 131072),
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2}}, 8192),
    ({"max_position_embeddings": 131072, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
     131072),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "longrope",
                                                          "factor": 32}}, 131072),
    ({"text_config": {"max_position_embeddings": 262144}, "max_position_embeddings": 8}, 262144),
    ({"hidden_size": 64}, 0),
    ({"max_position_embeddings": True}, 0),
])
def test_context_limit_follows_vllms_derivation(config, limit):
    assert context_limit(config)[0] == limit


def test_context_limit_catalog_model_refuses_a_longer_max_model_len():
    """Qwen2.5-7B-Instruct's config.json: max_position_embeddings 32768, no rope_scaling."""
    assert plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.12xlarge",
                max_model_len=32768).max_model_len == 32768
    with pytest.raises(PlanError, match=r"engine.max_model_len 32769 exceeds "
                       r"Qwen/Qwen2.5-7B-Instruct's limit of 32768 tokens "
                       r"\(max_position_embeddings in https://huggingface.co/.*\); vLLM refuses "
                       r"a longer max_model_len at start-up. Use at most 32768"):
        plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.12xlarge", max_model_len=32769)


def test_context_limit_config_path_with_yarn_allows_the_scaled_length(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA, "max_position_embeddings": 32768, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}))
    kwargs = {"config_path": str(config)}
    assert plan("acme/model", "ml.p4de.24xlarge", max_model_len=131072,
                **kwargs).max_model_len == 131072
    with pytest.raises(PlanError, match="limit of 131072 tokens .max_position_embeddings with "
                       "yarn RoPE scaling x4 in model config"):
        plan("acme/model", "ml.p4de.24xlarge", max_model_len=131073, **kwargs)


def test_context_limit_unknown_limit_is_said_not_passed_silently(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    result = plan("acme/model", "ml.g6e.12xlarge", max_model_len=8192,
                  config_path=str(config))
    assert any("engine.max_model_len 8192 was not checked against acme/model's own limit"
               in w for w in result.warnings)


def test_context_limit_validate_refuses_it(tmp_path):
    doc = yaml.safe_load(DEFAULT_SPEC.read_text())
    doc["engine"]["max_model_len"] = 65536
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith("PlanError: engine.max_model_len 65536 exceeds "
                                    "Qwen/Qwen2.5-7B-Instruct's limit of 32768 tokens")
