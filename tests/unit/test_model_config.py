"""``model.config_path``: a config.json is input; every bad value is a CatalogError naming the
file, the key, the value and what is valid (never TypeError, ValueError or ZeroDivisionError).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lmikit.catalog._model_config import LIMITS, MAX_CONFIG_BYTES, MAX_JSON_DEPTH
from lmikit.catalog._models import get_model
from lmikit.errors import CatalogError
from lmikit.planner._planner import plan
from tests.conftest import EXAMPLES, deadline

LLAMA = json.loads((EXAMPLES / "models" / "llama-3.1-8b-config.json").read_text())
MLA = {"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
       "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
       "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
       "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
       "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "vocab_size": 129280}
VL = {"text_config": dict(LLAMA), "vision_config": {"hidden_size": 1152, "depth": 27}}


def _write(tmp_path: Path, config: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def _geometry(tmp_path: Path, config: object):
    return get_model("acme/model", _write(tmp_path, config))


def test_model_config_example_reads(tmp_path):
    geo = _geometry(tmp_path, LLAMA)
    assert (geo.num_layers, geo.num_kv_heads, geo.head_dim) == (32, 8, 128)


# --- the file itself -----------------------------------------------------------------------

def test_model_config_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with deadline(5), pytest.raises(CatalogError, match=r"config.json' is not a regular file "
                                    r"\(it is a FIFO"):
        get_model("acme/model", fifo)


def test_model_config_symlink_to_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "config.json").symlink_to(tmp_path / "pipe")
    with deadline(5), pytest.raises(CatalogError, match="not a regular file"):
        get_model("acme/model", tmp_path / "config.json")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_model_config_dev_zero_is_refused():
    with deadline(5), pytest.raises(CatalogError, match="it is a character device"):
        get_model("acme/model", "/dev/zero")


def test_model_config_directory_is_refused(tmp_path):
    with pytest.raises(CatalogError, match="it is a directory"):
        get_model("acme/model", tmp_path)


def test_model_config_missing_file_names_it(tmp_path):
    with pytest.raises(CatalogError, match=r"cannot read model config '.*nope.json': No such"):
        get_model("acme/model", tmp_path / "nope.json")


def test_model_config_over_the_size_limit_is_refused_before_reading(tmp_path):
    big = tmp_path / "config.json"
    with big.open("wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(CatalogError, match=f"is {MAX_CONFIG_BYTES + 1:,} bytes; the limit"):
        get_model("acme/model", big)


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000, f"nests deeper than {MAX_JSON_DEPTH} levels"),
    ('{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1),
     f"nests deeper than {MAX_JSON_DEPTH} levels"),
    ('{"hidden_size": ' + "9" * 5000 + "}", "holds a number of 5,000 digits"),
    ("{not json", "is not valid UTF-8 JSON"),
    ("[1, 2]", "must hold a JSON object .*not a list"),
    ("null", "must hold a JSON object .*not null"),
])
def test_model_config_bad_json_is_a_catalog_error(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with deadline(5), pytest.raises(CatalogError, match=message):
        get_model("acme/model", path)


def test_model_config_not_utf8_is_a_catalog_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"hidden_size": "\xff"}')
    with pytest.raises(CatalogError, match="is not valid UTF-8 JSON"):
        get_model("acme/model", path)


# --- every value the catalog reads ---------------------------------------------------------

def _bad(base: dict, key: str, value: object) -> dict:
    config = json.loads(json.dumps(base))
    target = config["text_config"] if "text_config" in config and key in LLAMA else config
    target[key] = value
    return config


INTEGER_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
                "max_position_embeddings", "intermediate_size"]


@pytest.mark.parametrize("key", INTEGER_KEYS)
@pytest.mark.parametrize("value", ["4096", True, 4096.5, -1, [1], {"a": 1}])
def test_model_config_integer_of_wrong_type_or_sign_is_named(tmp_path, key, value):
    low, high = LIMITS[key]
    low = 0 if key in ("vocab_size", "max_position_embeddings") else low  # 0: not given
    with pytest.raises(CatalogError) as info:
        _geometry(tmp_path, _bad(LLAMA, key, value))
    message = str(info.value)
    assert "config.json" in message and f": {key} must be " in message
    assert f"from {low} to {high:,} [got " in message


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "num_attention_heads",
                                 "intermediate_size"])
def test_model_config_zero_is_out_of_range(tmp_path, key):
    with pytest.raises(CatalogError, match=rf"{key} must be from 1 to .* \[got 0\]"):
        _geometry(tmp_path, _bad(LLAMA, key, 0))


@pytest.mark.parametrize("key", sorted(LIMITS))
def test_model_config_every_limit_is_enforced(tmp_path, key):
    """Each integer key refuses one past its upper limit (the rule the LIMITS table states)."""
    base = MLA if key in MLA or key in ("num_experts", "num_local_experts", "index_topk",
                                        "index_head_dim") else LLAMA
    config = _bad(base, key, LIMITS[key][1] + 1)
    if key in ("num_experts", "num_local_experts"):
        config.pop("n_routed_experts")
    if key in ("sliding_window", "max_window_layers"):
        config["use_sliding_window"] = True
        config.setdefault("sliding_window", 4096)
    if key == "sliding_window_pattern":
        config["sliding_window"] = 4096
    if key == "depth":
        config = json.loads(json.dumps(VL))
        config["vision_config"]["depth"] = LIMITS[key][1] + 1
        key = "vision_config.depth"
    with pytest.raises(CatalogError, match=rf"{key} must be from .* \[got "
                                           rf"{LIMITS[key.split('.')[-1]][1] + 1}\]"):
        _geometry(tmp_path, config)


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "num_attention_heads"])
def test_model_config_required_keys_are_named(tmp_path, key):
    config = dict(LLAMA)
    del config[key]
    with pytest.raises(CatalogError, match=rf"config.json': {key} is required: a whole "
                       r"number \[got None\]"):
        _geometry(tmp_path, config)


def test_model_config_kv_heads_must_divide_heads(tmp_path):
    with pytest.raises(CatalogError, match=r"num_key_value_heads must divide "
                       r"num_attention_heads \(32\); valid: 1, 2, 4, 8, 16, 32 \[got 5\]"):
        _geometry(tmp_path, _bad(LLAMA, "num_key_value_heads", 5))


def test_model_config_kv_heads_above_heads_is_refused(tmp_path):
    with pytest.raises(CatalogError, match=r"num_key_value_heads must be from 0 to 32 "
                       r"\[got 64\]"):
        _geometry(tmp_path, _bad(LLAMA, "num_key_value_heads", 64))


def test_model_config_kv_heads_null_or_zero_means_all_heads(tmp_path):
    """transformers (configuration_utils.get_head_shapes, Qwen2Config): a null or 0
    num_key_value_heads falls back to num_attention_heads."""
    assert _geometry(tmp_path, _bad(LLAMA, "num_key_value_heads", None)).num_kv_heads == 32
    assert _geometry(tmp_path, _bad(LLAMA, "num_key_value_heads", 0)).num_kv_heads == 32


def test_model_config_head_size_zero_is_refused(tmp_path):
    config = _bad(LLAMA, "hidden_size", 16)  # 16 // 32 heads = 0
    with pytest.raises(CatalogError, match=r"hidden_size is smaller than num_attention_heads "
                       r"\(32\), so the head size is 0; give head_dim \[got 16\]"):
        _geometry(tmp_path, config)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("head_dim", "128", "head_dim must be a whole number"),
    ("head_dim", -1, "head_dim must be from 0"),
    ("tie_word_embeddings", "false", "tie_word_embeddings must be true or false"),
    ("tie_word_embeddings", 0, "tie_word_embeddings must be true or false"),
    ("torch_dtype", "bf16", "torch_dtype must be one of float32, bfloat16, float16, fp8"),
    ("torch_dtype", 16, "torch_dtype must be one of"),
    ("dtype", ["bfloat16"], "dtype must be one of"),
    ("quantization_config", [1], "quantization_config must be a JSON object or null"),
    ("sliding_window", "4096", "sliding_window must be a whole number"),
    ("sliding_window", -1, "sliding_window must be from 0"),
    ("layer_types", "full_attention", "layer_types must be a list of strings"),
    ("layer_types", [1] * 32, "layer_types must be a list of strings"),
    ("layer_types", ["full_attention"] * 31, r"layer_types must have one entry per hidden "
                                             r"layer \(num_hidden_layers 32\), not 31"),
    ("use_sliding_window", "yes", "use_sliding_window must be true or false"),
    ("max_window_layers", 2.5, "max_window_layers must be a whole number"),
    ("sliding_window_pattern", "6", "sliding_window_pattern must be a whole number"),
    ("text_config", [], "text_config must be a JSON object or null"),
])
def test_model_config_bad_value_is_named(tmp_path, key, value, message):
    config = dict(LLAMA, **{key: value})
    if key == "dtype":  # read only where torch_dtype is not given
        del config["torch_dtype"]
    with pytest.raises(CatalogError, match=r"config.json': " + message):
        _geometry(tmp_path, config)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("kv_lora_rank", -1, "kv_lora_rank must be from 0"),
    ("kv_lora_rank", "512", "kv_lora_rank must be a whole number"),
    ("q_lora_rank", True, "q_lora_rank must be a whole number"),
    ("qk_rope_head_dim", "64", "qk_rope_head_dim must be a whole number"),
    ("qk_nope_head_dim", -128, "qk_nope_head_dim must be from 0"),
    ("v_head_dim", 0, "v_head_dim must be from 1"),
    ("n_routed_experts", -1, "n_routed_experts must be from 0"),
    ("n_shared_experts", "1", "n_shared_experts must be a whole number"),
    ("num_experts_per_tok", 257, r"num_experts_per_tok must be from 1 to 256 \[got 257\]"),
    ("num_experts_per_tok", 0, "num_experts_per_tok must be from 1"),
    ("first_k_dense_replace", 62, r"first_k_dense_replace must be from 0 to 61 \[got 62\]"),
    ("moe_intermediate_size", 0, "moe_intermediate_size must be from 1"),
])
def test_model_config_bad_mla_or_moe_value_is_named(tmp_path, key, value, message):
    with pytest.raises(CatalogError, match=r"config.json': " + message):
        _geometry(tmp_path, dict(MLA, **{key: value}))


def test_model_config_mla_rank_dims_of_zero_are_refused(tmp_path):
    config = dict(MLA, qk_nope_head_dim=0, qk_rope_head_dim=0)
    with pytest.raises(CatalogError, match="qk_nope_head_dim plus qk_rope_head_dim must be"):
        _geometry(tmp_path, config)


def test_model_config_text_config_keys_carry_their_prefix(tmp_path):
    config = json.loads(json.dumps(VL))
    config["text_config"]["num_attention_heads"] = "32"
    with pytest.raises(CatalogError, match=r"text_config.num_attention_heads must be a whole "
                       r"number from 1 to 4,096 \[got '32'\]"):
        _geometry(tmp_path, config)


def test_model_config_vision_config_values_are_checked(tmp_path):
    config = json.loads(json.dumps(VL))
    config["vision_config"] = {"hidden_size": "1152", "depth": 27}
    with pytest.raises(CatalogError, match=r"vision_config.hidden_size must be a whole number"):
        _geometry(tmp_path, config)
    config["vision_config"] = "big"
    with pytest.raises(CatalogError, match=r"vision_config must be a JSON object or null"):
        _geometry(tmp_path, config)


def test_model_config_qwen2_window_starts_at_max_window_layers(tmp_path):
    """transformers Qwen2Config: with use_sliding_window, layers i >= max_window_layers
    slide; max_window_layers defaults to 28."""
    config = dict(LLAMA, use_sliding_window=True, sliding_window=4096, max_window_layers=0)
    assert _geometry(tmp_path, config).sliding_layers == 32
    config["max_window_layers"] = 30
    assert _geometry(tmp_path, config).sliding_layers == 2
    del config["max_window_layers"]
    assert _geometry(tmp_path, config).sliding_layers == 32 - 28
    config["use_sliding_window"] = False
    assert _geometry(tmp_path, config).sliding_layers == 0


def test_model_config_message_is_short_for_a_huge_value(tmp_path):
    with pytest.raises(CatalogError) as info:
        _geometry(tmp_path, dict(LLAMA, torch_dtype="x" * 100_000))
    assert len(str(info.value)) < 400


def test_plan_with_bad_config_is_a_catalog_error_not_a_crash(tmp_path):
    path = _write(tmp_path, dict(LLAMA, num_attention_heads=32, hidden_size=16, head_dim=1,
                                 num_key_value_heads=32))
    result = plan("acme/model", "ml.g6e.2xlarge", config_path=str(path))
    assert result.kv_bytes_per_token == 32 * 2 * 32 * 1 * 2
    with pytest.raises(CatalogError, match="num_hidden_layers must be a whole number"):
        plan("acme/model", "ml.g6e.2xlarge",
             config_path=str(_write(tmp_path, dict(LLAMA, num_hidden_layers=1.5), "b.json")))
