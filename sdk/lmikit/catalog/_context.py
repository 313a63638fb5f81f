"""The longest sequence a model serves, derived from its ``config.json`` the way vLLM does.

vLLM (``vllm/config/model.py``, ``_get_and_verify_max_len``) takes the smallest of the length
keys a config gives (``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
``seq_length``, ``model_max_length``, ``max_target_positions``, ``max_sequence_length``,
``max_seq_length``, ``seq_len``), lets ``model_max_length`` override it, then applies RoPE
scaling: for every rope type but ``su``, ``longrope`` and ``llama3`` the length is multiplied
by ``factor``, starting from ``original_max_position_embeddings`` for ``yarn``. A larger
``--max-model-len`` is refused at start-up (unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set,
which lmikit never sets). It reads the language model's config (``text_config`` of
vision-language models). Standard library only.

>>> context_limit({"max_position_embeddings": 32768})
(32768, 'max_position_embeddings')
>>> context_limit({"max_position_embeddings": 32768, "rope_scaling": {
...     "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})
(131072, 'max_position_embeddings with yarn RoPE scaling x4')
>>> context_limit({"hidden_size": 64})
(0, '')
"""

from __future__ import annotations

from typing import Any

LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
UNSCALED_ROPE = ("su", "longrope", "llama3")
MAX_LENGTH = 2**31


def _length(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 < value < MAX_LENGTH:
        return None
    return int(value)


def context_limit(config: dict[str, Any]) -> tuple[int, str]:
    """(tokens, where they come from) for a config.json object; (0, '') when it gives no
    length (vLLM would then assume 2,048 tokens, or take max_model_len as given)."""
    text = config.get("text_config")
    cfg = text if isinstance(text, dict) else config
    limit: float = float("inf")
    key = ""
    for name in LENGTH_KEYS:
        value = _length(cfg.get(name))
        if value is not None and value < limit:
            limit, key = value, name
    override = _length(cfg.get("model_max_length"))
    if override is not None:
        limit, key = override, "model_max_length"
    if key == "":
        return 0, ""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    model_type = str(cfg.get("model_type", ""))
    if isinstance(rope, dict) and "gemma3" not in model_type:
        layers = rope.values() if rope and all(isinstance(v, dict) for v in rope.values()) \
            else [rope]
        factor = 1.0
        scaled_type = ""
        for rp in layers:
            kind = str(rp.get("rope_type", rp.get("type", "default")))
            if kind in UNSCALED_ROPE:
                continue
            raw = rp.get("factor", factor)
            if isinstance(raw, int | float) and not isinstance(raw, bool) and 0 < raw <= 1e4:
                factor = float(raw)
            if kind == "yarn":
                original = _length(rp.get("original_max_position_embeddings"))
                if original is not None:
                    limit = original
            scaled_type = kind
        if factor != 1.0:
            limit *= factor
            key += f" with {scaled_type} RoPE scaling x{factor:g}"
    return int(min(limit, MAX_LENGTH)), key


def max_model_len_problem(max_model_len: int, limit: int, key: str, model: str,
                          source: str) -> str | None:
    """Why ``engine.max_model_len`` cannot be served, or None when it is within the limit."""
    if limit <= 0 or max_model_len <= limit:
        return None
    return (f"engine.max_model_len {max_model_len} exceeds {model}'s limit of {limit} tokens "
            f"({key} in {source or 'its config.json'}); vLLM refuses a longer max_model_len at "
            f"start-up. Use at most {limit}, or leave it unset")
