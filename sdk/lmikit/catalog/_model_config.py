"""Read a model's ``config.json`` and check every value the catalog uses.

A config named by ``model.config_path`` is input like the spec: it must be a regular file of
at most MAX_CONFIG_BYTES, nest at most MAX_JSON_DEPTH levels, and every key the planner reads
must have the type and range the model code gives it. A bad value is a :class:`CatalogError`
naming the file, the key, the value and what is valid. Standard library only.

Where each rule comes from: the source rows below (each rule is also a test in
tests/unit/test_model_config.py).

The upper bounds are sanity limits far above any model in the catalog (the largest has 128
heads, hidden size 8192, 256 experts and a 294,912-token context); they keep the planner's
arithmetic in range.

>>> shape = config_shape({"num_hidden_layers": 32, "hidden_size": 4096,
...                       "num_attention_heads": 32, "num_key_value_heads": 8}, "config.json")
>>> shape.kv_heads, shape.head_dim
(8, 128)
>>> config_shape({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
...               "num_key_value_heads": 5}, "config.json")
Traceback (most recent call last):
...
lmikit.errors.CatalogError: config.json: num_key_value_heads must divide ... 16, 32 [got 5]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmikit._files import FileRefused, read_limited
from lmikit.errors import CatalogError, safe_repr

# Sources of the rules, one row each:
# - transformers models/qwen2/configuration_qwen2.py (Qwen2Config): the fields are typed
#   int/bool/list[str]; num_key_value_heads defaults to num_attention_heads;
#   use_sliding_window, sliding_window and max_window_layers (default 28) give layers
#   i >= max_window_layers the window.
# - transformers configuration_utils.py (layer_type_validation): layer_types has one entry
#   per hidden layer.
# - transformers models/deepseek_v3/configuration_deepseek_v3.py (DeepseekV3Config): the MLA
#   and MoE keys and their defaults (qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128).
# - vllm-project/vllm vllm/attention/layer.py (Attention.__init__): the attention heads must
#   be a multiple of the KV heads.
MAX_CONFIG_BYTES = 2_000_000  # real config.json files are a few kilobytes
MAX_JSON_DEPTH = 32
MAX_NUMBER_DIGITS = 30

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "float8": 1}

# key -> (lowest, highest) for every integer the catalog reads
LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 1024),
    "hidden_size": (1, 131_072),
    "num_attention_heads": (1, 4096),
    "head_dim": (1, 4096),
    "vocab_size": (1, 1 << 24),
    "max_position_embeddings": (1, 1 << 27),
    "intermediate_size": (1, 1 << 20),
    "moe_intermediate_size": (1, 1 << 20),
    "kv_lora_rank": (0, 65_536),
    "q_lora_rank": (0, 65_536),
    "qk_nope_head_dim": (0, 4096),
    "qk_rope_head_dim": (0, 4096),
    "v_head_dim": (1, 4096),
    "n_routed_experts": (0, 16_384),
    "num_experts": (0, 16_384),
    "num_local_experts": (0, 16_384),
    "n_shared_experts": (0, 16_384),
    "sliding_window": (0, 1 << 27),
    "max_window_layers": (0, 1024),
    "sliding_window_pattern": (0, 1024),
    "depth": (0, 1024),
    "index_topk": (0, 1 << 20),
    "index_head_dim": (0, 4096),
}
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")


@dataclass(frozen=True)
class ConfigShape:
    """The checked numbers of one config (the language model's part for VL models)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    kv_lora_rank: int
    q_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    sliding_layers: int
    sliding_window: int | None
    vocab_size: int
    max_position_embeddings: int
    intermediate_size: int
    experts: int
    moe_intermediate_size: int
    shared_experts: int
    experts_per_token: int
    dense_layers: int
    tie_word_embeddings: bool
    dtype: str
    fp8_weights: bool
    is_vision_language: bool
    vision_hidden: int
    vision_depth: int
    index_topk: int = 0  # DeepSeek sparse attention: keys the indexer selects (0: dense)
    index_head_dim: int = 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path``; a CatalogError for anything else."""
    where = f"model config {str(path)!r}"
    try:
        data = read_limited(path, MAX_CONFIG_BYTES, where)
    except FileRefused as exc:
        raise CatalogError(str(exc)) from exc
    try:
        raw = json.loads(data.decode("utf-8"), parse_int=_parse_int)
    except _TooLong as exc:
        raise CatalogError(f"{where} holds a number of {exc.digits:,} digits; no config "
                           f"value has more than {MAX_NUMBER_DIGITS}") from exc
    except RecursionError as exc:
        raise CatalogError(f"{where} nests deeper than {MAX_JSON_DEPTH} levels") from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CatalogError(f"{where} is not valid UTF-8 JSON: {safe_repr(str(exc), 200)}") \
            from exc
    if not isinstance(raw, dict):
        raise CatalogError(f"{where} must hold a JSON object (the model's config.json), not "
                           f"{_kind(raw)}")
    if _depth(raw) > MAX_JSON_DEPTH:
        raise CatalogError(f"{where} nests deeper than {MAX_JSON_DEPTH} levels")
    return raw


class _TooLong(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_DIGITS:  # int() refuses over 4,300 digits; nothing needs 30
        raise _TooLong(len(text))
    return int(text)


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion; stops early past the limit."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest


class _Fields:
    """Typed reads of one JSON object, each failure naming the file, key and value."""

    def __init__(self, data: dict[str, Any], where: str, prefix: str = "") -> None:
        self.data, self.where, self.prefix = data, where, prefix

    def fail(self, key: str, message: str, value: Any) -> CatalogError:
        return CatalogError(f"{self.where}: {self.prefix}{key} {message} "
                            f"[got {safe_repr(value)}]")

    def number(self, key: str, default: int | None = None, *, low: int | None = None,
            high: int | None = None, required: bool = False) -> int:
        value = self.data.get(key)
        if value is None:
            if required or default is None:
                raise self.fail(key, "is required: a whole number", value)
            return default
        lo, hi = LIMITS.get(key, (0, 1 << 40))
        lo = lo if low is None else low
        hi = hi if high is None else high
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be a whole number from {lo} to {hi:,}", value)
        if not lo <= value <= hi:
            raise self.fail(key, f"must be from {lo} to {hi:,}", value)
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false", value)
        return value

    def mapping(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, dict):
            raise self.fail(key, "must be a JSON object or null", value)
        return value


def config_shape(config: dict[str, Any], where: str) -> ConfigShape:
    """Check a config.json object (top level, or ``text_config`` for VL models)."""
    top = _Fields(config, where)
    text = top.mapping("text_config")
    f = _Fields(text, where, "text_config.") if text is not None else top
    layers = f.number("num_hidden_layers", required=True)
    hidden = f.number("hidden_size", required=True)
    heads = f.number("num_attention_heads", required=True)
    kv_heads = f.number("num_key_value_heads", heads, low=0, high=heads) or heads  # 0: as null
    if heads % kv_heads:
        valid = ", ".join(str(d) for d in range(1, heads + 1) if heads % d == 0)
        raise f.fail("num_key_value_heads", f"must divide num_attention_heads ({heads}); "
                     f"valid: {valid}", kv_heads)
    kv_rank = f.number("kv_lora_rank", 0)
    nope = f.number("qk_nope_head_dim", 128) if kv_rank else 0
    rope = f.number("qk_rope_head_dim", 64) if kv_rank else 0
    if kv_rank:
        head_dim = nope + rope
        if head_dim < 1:
            raise f.fail("qk_nope_head_dim", "plus qk_rope_head_dim must be at least 1", nope)
    else:  # transformers: head_dim, or hidden_size // num_attention_heads when null or 0
        head_dim = f.number("head_dim", 0, low=0) or hidden // heads
        if head_dim < 1:
            raise f.fail("hidden_size", f"is smaller than num_attention_heads ({heads}), so "
                         "the head size is 0; give head_dim", hidden)
    sliding_layers, window = _sliding(f, layers)
    experts = 0
    for key in EXPERT_KEYS:  # the first one given and not 0
        experts = f.number(key, 0)
        if experts:
            break
    inter = f.number("intermediate_size", 4 * hidden)
    vision = top.mapping("vision_config") if text is not None else None
    v = _Fields(vision, where, "vision_config.") if vision is not None else None
    return ConfigShape(
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        kv_lora_rank=kv_rank, q_lora_rank=f.number("q_lora_rank", 0) if kv_rank else 0,
        qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        v_head_dim=f.number("v_head_dim", 128) if kv_rank else 0,
        sliding_layers=sliding_layers, sliding_window=window,
        vocab_size=f.number("vocab_size", 0, low=0),
        max_position_embeddings=f.number("max_position_embeddings", 0, low=0),
        intermediate_size=inter, experts=experts,
        moe_intermediate_size=f.number("moe_intermediate_size", inter) if experts else 0,
        shared_experts=f.number("n_shared_experts", 0) if experts else 0,
        experts_per_token=f.number("num_experts_per_tok", 1, low=1, high=experts)
        if experts else 0,
        dense_layers=f.number("first_k_dense_replace", 0, high=layers) if experts else 0,
        tie_word_embeddings=f.flag("tie_word_embeddings", False),
        dtype=_dtype(f, top), fp8_weights=_fp8(top, f),
        is_vision_language=text is not None,
        vision_hidden=v.number("hidden_size", 0, low=0) if v else 0,
        vision_depth=(v.number("depth", 0) or v.number("num_hidden_layers", 0, low=0)) if v else 0,
        index_topk=f.number("index_topk", 0) if kv_rank else 0,
        index_head_dim=f.number("index_head_dim", 0) if kv_rank else 0,
    )


def _sliding(f: _Fields, layers: int) -> tuple[int, int | None]:
    """(layers with a sliding window, the window); the window 0 or null means none."""
    window = f.number("sliding_window", 0)
    types = f.data.get("layer_types")
    if types is not None and not (isinstance(types, list)
                                  and all(isinstance(t, str) for t in types)):
        raise f.fail("layer_types", "must be a list of strings such as 'full_attention' or "
                     "'sliding_attention'", types)
    if types and len(types) != layers:
        raise f.fail("layer_types", f"must have one entry per hidden layer "
                     f"(num_hidden_layers {layers}), not {len(types)}", types)
    use = f.flag("use_sliding_window", False) if "use_sliding_window" in f.data else None
    first = f.number("max_window_layers", 28)
    pattern = f.number("sliding_window_pattern", 1)
    if not window:
        return 0, None
    if types:
        return sum(1 for t in types if "sliding" in t), window
    if use is not None:  # Qwen2-style: layers from max_window_layers on use the window
        return (max(0, layers - first), window) if use else (0, None)
    if pattern > 1:
        return layers - layers // pattern, window
    if window >= f.number("max_position_embeddings", 0, low=0) > 0:
        return 0, None
    return layers, window


def _dtype(f: _Fields, top: _Fields) -> str:
    for fields in (f, top) if f is not top else (f,):
        for key in ("torch_dtype", "dtype"):
            value = fields.data.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or value not in DTYPE_BYTES:
                raise fields.fail(key, f"must be one of {', '.join(DTYPE_BYTES)}", value)
            return str(value)
    return "bfloat16"


def _fp8(top: _Fields, f: _Fields) -> bool:
    quant = top.mapping("quantization_config") or f.mapping("quantization_config") or {}
    try:
        text = json.dumps(quant)
    except (TypeError, ValueError, RecursionError) as exc:
        raise top.fail("quantization_config", "must be plain JSON", quant) from exc
    return "fp8" in text.lower() or quant.get("format") == "float-quantized"


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), "null")
