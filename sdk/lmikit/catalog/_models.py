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

from lmikit.catalog._context import context_limit
from lmikit.catalog._model_config import DTYPE_BYTES, ConfigShape, config_shape, read_config_file
from lmikit.errors import CatalogError

__all__ = ["CATALOG_DIR", "DTYPE_BYTES", "HubGate", "ModelGeometry", "catalog_entry",
           "catalog_ids", "count_params", "from_config", "get_model", "hub_gate"]

CATALOG_DIR = Path(__file__).parent / "models"


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
    context_limit: int = 0  # longest sequence vLLM serves (lmikit.catalog._context); 0: unknown
    context_limit_key: str = ""  # the config key (and RoPE scaling) it comes from

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

    def lmcache_replication(self, tp: int) -> int:
        """How many tensor-parallel ranks store each token in LMCache's tiers: every rank
        that holds it on the GPU, except for MLA, which LMCache saves from the first rank
        only and broadcasts to the others on a hit (``save_only_first_rank`` defaults to the
        model's use of MLA; lmcache/v1/cache_engine.py, LMCache 0.5.6).
        """
        return 1 if self.attention == "mla" else self.kv_replication(tp)

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
    """Geometry for a model id: from ``config_path`` if given, else lmikit's catalog.

    ``config_path`` is read with the checks of :mod:`lmikit.catalog`: a regular
    file of bounded size, and every value the planner uses typed and in range.
    """
    if config_path is not None:
        raw = read_config_file(config_path)
        entry = raw if isinstance(raw.get("config"), dict) else {"config": raw}
        return from_config(model_id, entry["config"], entry,
                           source=f"model config {str(config_path)!r}")
    known = catalog_entry(model_id)
    return from_config(known["model_id"], known["config"], known, source=known.get("source", ""))


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
        f"model {model_id!r} is not in lmikit's catalog.{hint} Give its config.json (a spec's "
        "model.config_path, or --config with --model; planning never downloads it). Catalog "
        "models: " + ", ".join(sorted(entries))
    )


@dataclass(frozen=True)
class HubGate:
    """Whether a catalog model's Hugging Face repo is gated (a token of an approved account
    is needed to download it): True, False, or None where lmikit could not establish it."""

    gated: bool | None
    source: str


def hub_gate(model_id: str) -> HubGate | None:
    """The catalog's record of ``model_id``'s gate (its ``hub_gate``), or None for a model
    outside the catalog."""
    key = model_id.lower()
    for mid, entry in _catalog().items():
        if mid.lower() == key:
            gate = entry["hub_gate"]
            return HubGate(gate["gated"], gate["source"])
    return None


_CACHE: dict[str, dict[str, Any]] = {}


def _catalog() -> dict[str, dict[str, Any]]:
    if not _CACHE:
        for path in sorted(CATALOG_DIR.glob("*.json")):
            entry = json.loads(path.read_text())
            _CACHE[entry["model_id"]] = entry
    return _CACHE


def from_config(model_id: str, config: dict[str, Any], entry: dict[str, Any] | None = None,
                source: str = "") -> ModelGeometry:
    """Build geometry from a config.json dict (top level or ``text_config``).

    ``source`` names the config in errors (default: the model id).
    """
    if not isinstance(config, dict):
        raise CatalogError(f"{source or f'model {model_id!r}'}: the config must be a JSON "
                           f"object, not {type(config).__name__}")
    shape = config_shape(config, source or f"model {model_id!r}")
    notes: list[str] = []
    if shape.sliding_layers:
        notes.append(f"{shape.sliding_layers} of {shape.layers} layers use a "
                     f"{shape.sliding_window}-token sliding window")
    dtype = shape.dtype
    if shape.fp8_weights:
        dtype = "fp8"
        notes.append("weights are published in FP8")
    total, active = count_params(shape)
    limit, limit_key = context_limit(config)
    vision_params = 12 * shape.vision_hidden * shape.vision_hidden * shape.vision_depth
    embedding_params = shape.vocab_size * shape.hidden * (1 if shape.tie_word_embeddings else 2)
    # DeepSeek sparse attention: vLLM 0.23.0 (model_executor/models/deepseek_v2.py, Indexer)
    # caches one key of index_head_dim fp8 values plus a float32 scale per 128 values, per
    # token and layer, replicated on every tensor-parallel rank like the MLA latent.
    sparse = shape.mla and shape.index_topk > 0
    index_dim = shape.index_head_dim if sparse else 0
    index_bytes = index_dim + index_dim // 128 * 4
    if sparse:
        notes.append(f"DeepSeek sparse attention: an indexer keeps {index_bytes} more bytes of "
                     "keys per token and layer on the GPU")
    return ModelGeometry(
        model_id=model_id,
        attention="mla" if shape.mla else "gqa",
        num_layers=shape.layers,
        hidden_size=shape.hidden,
        num_attention_heads=shape.heads,
        num_kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        kv_lora_rank=shape.kv_lora_rank,
        qk_rope_head_dim=shape.qk_rope_head_dim,
        sliding_window=shape.sliding_window,
        sliding_layers=shape.sliding_layers,
        vocab_size=shape.vocab_size,
        max_position_embeddings=shape.max_position_embeddings,
        total_params=total + vision_params,
        active_params=active + vision_params,
        weight_dtype=dtype,
        is_vision_language=shape.is_vision_language,
        embedding_params=embedding_params,
        vision_params=vision_params,
        sparse_attention=sparse,
        index_kv_bytes_per_layer=index_bytes,
        source=source,
        notes=tuple(notes),
        context_limit=limit,
        context_limit_key=limit_key,
    )


def count_params(shape: ConfigShape) -> tuple[int, int]:
    """Total and active (per token) parameter counts of the language model from its shapes."""
    hidden, layers, heads = shape.hidden, shape.layers, shape.heads
    inter = shape.intermediate_size
    if shape.mla:
        q_rank, kv_rank = shape.q_lora_rank, shape.kv_lora_rank
        rope, nope, v_dim = shape.qk_rope_head_dim, shape.qk_nope_head_dim, shape.v_head_dim
        q = (hidden * q_rank + q_rank * heads * (nope + rope)) if q_rank else \
            hidden * heads * (nope + rope)
        kv = hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim)
        attn = q + kv + heads * v_dim * hidden
    else:
        head_dim, kv_heads = shape.head_dim, shape.kv_heads
        attn = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim \
            + heads * head_dim * hidden

    if shape.experts:
        experts, shared = shape.experts, shape.shared_experts
        dense_layers = shape.dense_layers
        moe_layers = layers - dense_layers
        dense_mlp = 3 * hidden * inter
        expert = 3 * hidden * shape.moe_intermediate_size
        total_mlp = dense_layers * dense_mlp + moe_layers * (
            (experts + shared) * expert + hidden * experts)
        active_mlp = dense_layers * dense_mlp + moe_layers * (
            (shape.experts_per_token + shared) * expert)
    else:
        total_mlp = active_mlp = layers * 3 * hidden * inter

    embed = shape.vocab_size * hidden * (1 if shape.tie_word_embeddings else 2)
    total = layers * attn + total_mlp + embed
    active = layers * attn + active_mlp + embed
    return total, active
