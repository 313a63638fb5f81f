"""Small, valid LoRA adapters for tests and the sandbox: a PEFT ``adapter_config.json`` and an
``adapter_model.safetensors`` whose tensors have the shapes PEFT writes for the base model.

>>> import pathlib, tempfile
>>> d = write_lora_adapter(pathlib.Path(tempfile.mkdtemp()) / "legal", rank=4)
>>> sorted(p.name for p in d.iterdir())
['adapter_config.json', 'adapter_model.safetensors']
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_BASE = "Qwen/Qwen2.5-7B-Instruct"
_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


def safetensors_bytes(tensors: Mapping[str, tuple[str, list[int]]], fill: int = 0,
                      metadata: Mapping[str, str] | None = None) -> bytes:
    """A safetensors file of ``name -> (dtype, shape)`` with every data byte ``fill``."""
    head, size = safetensors_header(tensors, metadata)
    return head + bytes([fill]) * size


def safetensors_header(tensors: Mapping[str, tuple[str, list[int]]],
                       metadata: Mapping[str, str] | None = None) -> tuple[bytes, int]:
    """The first bytes of such a file (length and header) and how many data bytes follow."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(text)) + text, offset


def lora_tensors(base_model: str = DEFAULT_BASE, rank: int = 8,
                 target_modules: Iterable[str] = ("q_proj", "v_proj"),
                 layers: Iterable[int] = (0,), dtype: str = "BF16"
                 ) -> dict[str, tuple[str, list[int]]]:
    """PEFT's tensor names and shapes for a Llama-style base (lmikit's catalog entry for
    ``base_model``; 64-wide layers for a model outside it)."""
    from lmikit.lora import catalog_shape

    shape = catalog_shape(base_model)
    if shape is None:
        hidden, q, kv, inter = 64, 64, 64, 128
    else:
        hidden = shape.hidden
        q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        inter = shape.intermediate_size or 4 * hidden
    widths = {"q_proj": (hidden, q), "k_proj": (hidden, kv), "v_proj": (hidden, kv),
              "o_proj": (q, hidden), "gate_proj": (hidden, inter), "up_proj": (hidden, inter),
              "down_proj": (inter, hidden)}
    out: dict[str, tuple[str, list[int]]] = {}
    for layer in layers:
        for module in target_modules:
            width_in, width_out = widths[module]
            part = "self_attn" if module.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) \
                else "mlp"
            name = f"base_model.model.model.layers.{layer}.{part}.{module}"
            out[f"{name}.lora_A.weight"] = (dtype, [rank, width_in])
            out[f"{name}.lora_B.weight"] = (dtype, [width_out, rank])
    return out


def write_lora_adapter(directory: str | Path, *, base_model: str = DEFAULT_BASE,
                       rank: int = 8, target_modules: Iterable[str] = ("q_proj", "v_proj"),
                       layers: Iterable[int] = (0,), fill: int = 0,
                       config: Mapping[str, Any] | None = None) -> Path:
    """Write a valid LoRA adapter into ``directory`` (created); ``fill`` sets every weight
    byte (two adapters with different fills have different weights); ``config`` entries
    replace those of the written ``adapter_config.json``."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    targets = list(target_modules)
    written = {"base_model_name_or_path": base_model, "peft_type": "LORA", "r": rank,
               "lora_alpha": 2 * rank, "target_modules": targets, "bias": "none",
               "task_type": "CAUSAL_LM", **(config or {})}
    (path / "adapter_config.json").write_text(json.dumps(written, indent=2))
    (path / "adapter_model.safetensors").write_bytes(safetensors_bytes(
        lora_tensors(base_model, rank, targets, layers), fill))
    return path
