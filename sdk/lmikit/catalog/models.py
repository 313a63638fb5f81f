"""Model KV-cache geometry from a Hugging Face ``config.json``.

Standard library only (the container imports it). Handles:

- GQA/MHA: K and V per layer = 2 * num_key_value_heads * head_dim values per token;
- MLA (DeepSeek V3.x, Mistral Large 3): one compressed latent of
  ``kv_lora_rank + qk_rope_head_dim`` values per layer per token;
- sliding-window layers (``layer_types`` / ``use_sliding_window`` + ``max_window_layers``):
  LMCache stores them per token like any layer, but vLLM keeps only the window on the GPU;
- vision-language models: the language model's geometry lives in ``text_config``;
- DeepSeek sparse attention (``index_topk``, DeepSeek V3.2): each layer also keeps an
  indexer key cache on the GPU, and an fp8 KV cache uses vLLM's ``fp8_ds_mla`` layout;
- FP8 checkpoints: vLLM quantizes linear and expert layers only, so the embeddings, the
  LM head and the vision encoder stay in bf16 (see :meth:`ModelGeometry.weight_bytes_for`).

>>> g = get_model("Qwen/Qwen2.5-7B-Instruct")
>>> g.kv_bytes_per_token(2)
57344
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmikit.errors import CatalogError

CATALOG_DIR = Path(__file__).parent / "models"

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "float8": 1}


@dataclass(frozen=True)
class ModelGeometry:
    model_id: str
    attention: str  # "gqa" or "mla"
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    sliding_window: int | None = None
    sliding_layers: int = 0
    vocab_size: int = 0
    max_position_embeddings: int = 0
    total_params: int = 0
    active_params: int = 0
    weight_dtype: str = "bfloat16"
    is_vision_language: bool = False
    embedding_params: int = 0  # input embeddings + LM head (once when tied)
    vision_params: int = 0
    sparse_attention: bool = False  # DeepSeek sparse attention (an indexer picks the keys)
    index_kv_bytes_per_layer: int = 0  # the indexer's key cache, bytes per token per layer
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def full_attention_layers(self) -> int:
        return self.num_layers - self.sliding_layers

    @property
    def kv_values_per_layer(self) -> int:
        """Values stored per token per layer (K and V together)."""
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_layer_bytes(self, dtype_bytes: int) -> int:
        """Bytes of KV one layer keeps per token.

        Sparse MLA with an fp8 cache uses vLLM's ``fp8_ds_mla`` layout (vLLM 0.23.0,
        v1/attention/backends/mla/flashmla_sparse.py): the latent in fp8, one float32 scale
        per 128 latent values, and the RoPE part left in bf16 (656 bytes for DeepSeek V3.2).
        """
        if self.sparse_attention and self.attention == "mla" and dtype_bytes == 1:
            return self.kv_lora_rank + self.kv_lora_rank // 128 * 4 + self.qk_rope_head_dim * 2
        return self.kv_values_per_layer * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of KV per token across all layers: what LMCache stores per token."""
        return self.num_layers * self.kv_layer_bytes(dtype_bytes)

    def gpu_kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes per token that grow with context on the GPU (full-attention layers, plus the
        sparse-attention indexer's key cache, which every layer keeps)."""
        return (self.full_attention_layers * self.kv_layer_bytes(dtype_bytes)
                + self.num_layers * self.index_kv_bytes_per_layer)

    def kv_replication(self, tp: int) -> int:
        """How many tensor-parallel ranks hold a copy of each KV value.

        GQA shards KV heads across ranks (replicated when there are fewer heads than ranks);
        MLA's latent is not sharded, so every rank holds all of it.
        """
        if self.attention == "mla":
            return tp
        return max(1, tp // min(self.num_kv_heads, tp))

    @property
    def weight_bytes_per_param(self) -> float:
        return DTYPE_BYTES.get(self.weight_dtype, 2)

    @property
    def weight_bytes(self) -> int:
        return self.weight_bytes_for(self.weight_dtype)

    def weight_bytes_for(self, dtype: str) -> int:
        """GPU bytes of the weights when the checkpoint is stored in ``dtype``.

        An 8-bit checkpoint is 8-bit only where vLLM quantizes: linear and expert layers
        (vLLM 0.23.0 model_executor/layers/quantization/fp8.py ``Fp8Config.get_quant_method``).
        The embeddings and LM head (vocabulary-parallel, not linear layers) and the vision
        encoder (left out of the FP8 checkpoints of Ministral 3 and Mistral Large 3) stay in
        bf16. Scales (one float32 per 128x128 block or per channel) are left out.

        >>> g = get_model("mistralai/Ministral-3-8B-Instruct-2512")
        >>> g.weight_bytes_for("fp8") - g.total_params == g.embedding_params + g.vision_params
        True
        """
        per_param = DTYPE_BYTES.get(dtype, 2)
        if per_param >= 2:
            return int(self.total_params * per_param)
        kept = min(self.total_params, self.embedding_params + self.vision_params)
        return int((self.total_params - kept) * per_param + kept * 2)

    @property
    def attention_dim(self) -> int:
        """Width of Q.K^T and A.V per layer, for the attention FLOP term."""
        if self.attention == "mla":
            # MLA attends with (nope + rope) query/key width and v_head_dim values; vLLM
            # runs prefill in the decompressed (MHA) form.
            return self.num_attention_heads * self.head_dim
        return self.num_attention_heads * self.head_dim


def get_model(model_id: str, config_path: str | Path | None = None) -> ModelGeometry:
    """Geometry for a model id: from ``config_path`` if given, else lmikit's catalog."""
    if config_path is not None:
        path = Path(config_path)
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CatalogError(f"cannot read model config {str(path)!r}: {exc}") from exc
        if not isinstance(raw, dict):
            raise CatalogError(f"model config {str(path)!r} is not a JSON object")
        entry = raw if "config" in raw and isinstance(raw["config"], dict) else {"config": raw}
        return from_config(model_id, entry["config"], entry, source=str(path))
    entry = catalog_entry(model_id)
    return from_config(entry["model_id"], entry["config"], entry, source=entry.get("source", ""))


def catalog_ids() -> list[str]:
    return sorted(_catalog())


def catalog_entry(model_id: str) -> dict[str, Any]:
    entries = _catalog()
    key = model_id.lower()
    for mid, entry in entries.items():
        if mid.lower() == key:
            return entry
    import difflib

    close = difflib.get_close_matches(model_id, list(entries), n=2, cutoff=0.6)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise CatalogError(
        f"model {model_id!r} is not in lmikit's catalog.{hint} Set model.config_path to its "
        "config.json (planning never downloads it). Catalog models: " + ", ".join(sorted(entries))
    )


_CACHE: dict[str, dict[str, Any]] = {}


def _catalog() -> dict[str, dict[str, Any]]:
    if not _CACHE:
        for path in sorted(CATALOG_DIR.glob("*.json")):
            entry = json.loads(path.read_text())
            _CACHE[entry["model_id"]] = entry
    return _CACHE


def _req(cfg: dict[str, Any], key: str, model_id: str) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise CatalogError(f"model {model_id!r}: config.json needs a positive integer {key!r} "
                           f"(got {value!r})")
    return value


def from_config(model_id: str, config: dict[str, Any], entry: dict[str, Any] | None = None,
                source: str = "") -> ModelGeometry:
    """Build geometry from a config.json dict (top level or ``text_config``)."""
    entry = entry or {}
    top = config
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    cfg = {**text} if text else dict(config)
    is_vl = text is not None
    notes: list[str] = []

    layers = _req(cfg, "num_hidden_layers", model_id)
    hidden = _req(cfg, "hidden_size", model_id)
    heads = _req(cfg, "num_attention_heads", model_id)
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    mla = bool(cfg.get("kv_lora_rank"))
    if mla:
        head_dim = int(cfg.get("qk_nope_head_dim", 128)) + int(cfg.get("qk_rope_head_dim", 64))

    sliding_layers, window = _sliding(cfg, layers)
    if sliding_layers:
        notes.append(f"{sliding_layers} of {layers} layers use a {window}-token sliding window")

    quant = top.get("quantization_config") or cfg.get("quantization_config") or {}
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype")
                or top.get("dtype") or "bfloat16")
    if isinstance(quant, dict) and ("fp8" in json.dumps(quant).lower()
                                    or quant.get("format") == "float-quantized"):
        dtype = "fp8"
        notes.append("weights are published in FP8")

    total, active = count_params(cfg, mla=mla, head_dim=head_dim, kv_heads=kv_heads)
    vision = top.get("vision_config") if is_vl else None
    vision_params = 0
    if isinstance(vision, dict):
        v_hidden = vision.get("hidden_size") or 0
        v_depth = vision.get("depth") or vision.get("num_hidden_layers") or 0
        vision_params = 12 * v_hidden * v_hidden * v_depth
        total += vision_params
        active += vision_params
    tied = bool(cfg.get("tie_word_embeddings", False))
    embedding_params = int(cfg.get("vocab_size") or 0) * hidden * (1 if tied else 2)
    # DeepSeek sparse attention: vLLM 0.23.0 (model_executor/models/deepseek_v2.py, Indexer)
    # caches one key of index_head_dim fp8 values plus a float32 scale per 128 values, per
    # token and layer, replicated on every tensor-parallel rank like the MLA latent.
    sparse = mla and bool(cfg.get("index_topk"))
    index_dim = int(cfg.get("index_head_dim") or 0) if sparse else 0
    index_bytes = index_dim + index_dim // 128 * 4
    if sparse:
        notes.append(f"DeepSeek sparse attention: an indexer keeps {index_bytes} more bytes of "
                     "keys per token and layer on the GPU")

    return ModelGeometry(
        model_id=model_id,
        attention="mla" if mla else "gqa",
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0) if mla else 0,
        sliding_window=window,
        sliding_layers=sliding_layers,
        vocab_size=int(cfg.get("vocab_size") or 0),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 0),
        total_params=total,
        active_params=active,
        weight_dtype=dtype,
        is_vision_language=is_vl,
        embedding_params=embedding_params,
        vision_params=vision_params,
        sparse_attention=sparse,
        index_kv_bytes_per_layer=index_bytes,
        source=source,
        notes=tuple(notes),
    )


def _sliding(cfg: dict[str, Any], layers: int) -> tuple[int, int | None]:
    window = cfg.get("sliding_window")
    if not isinstance(window, int) or window <= 0:
        return 0, None
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return sum(1 for t in layer_types if "sliding" in str(t)), window
    if "use_sliding_window" in cfg:
        if not cfg.get("use_sliding_window"):
            return 0, None
        # Qwen2-style: layers from max_window_layers on use the window.
        return max(0, layers - int(cfg.get("max_window_layers") or layers)), window
    pattern = cfg.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:
        return layers - layers // pattern, window
    if window >= int(cfg.get("max_position_embeddings") or 0) > 0:
        return 0, None
    return layers, window


def count_params(cfg: dict[str, Any], *, mla: bool, head_dim: int,
                 kv_heads: int) -> tuple[int, int]:
    """Total and active (per token) parameter counts from the config's shapes."""
    hidden = int(cfg["hidden_size"])
    layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    vocab = int(cfg.get("vocab_size") or 0)
    inter = int(cfg.get("intermediate_size") or 4 * hidden)

    if mla:
        q_rank = int(cfg.get("q_lora_rank") or 0)
        kv_rank = int(cfg["kv_lora_rank"])
        rope = int(cfg.get("qk_rope_head_dim") or 64)
        nope = int(cfg.get("qk_nope_head_dim") or 128)
        v_dim = int(cfg.get("v_head_dim") or 128)
        q = (hidden * q_rank + q_rank * heads * (nope + rope)) if q_rank else \
            hidden * heads * (nope + rope)
        kv = hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim)
        attn = q + kv + heads * v_dim * hidden
    else:
        attn = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim \
            + heads * head_dim * hidden

    experts = int(cfg.get("n_routed_experts") or cfg.get("num_experts")
                  or cfg.get("num_local_experts") or 0)
    if experts:
        moe_inter = int(cfg.get("moe_intermediate_size") or inter)
        shared = int(cfg.get("n_shared_experts") or 0)
        per_tok = int(cfg.get("num_experts_per_tok") or 1)
        dense_layers = int(cfg.get("first_k_dense_replace") or 0)
        moe_layers = layers - dense_layers
        dense_mlp = 3 * hidden * inter
        expert = 3 * hidden * moe_inter
        total_mlp = dense_layers * dense_mlp + moe_layers * (
            (experts + shared) * expert + hidden * experts)
        active_mlp = dense_layers * dense_mlp + moe_layers * ((per_tok + shared) * expert)
    else:
        total_mlp = active_mlp = layers * 3 * hidden * inter

    tied = bool(cfg.get("tie_word_embeddings", False))
    embed = vocab * hidden * (1 if tied else 2)
    total = layers * attn + total_mlp + embed
    active = layers * attn + active_mlp + embed
    return total, active
