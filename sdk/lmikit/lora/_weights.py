"""Check a LoRA adapter's weights by their safetensors header, never loading a tensor.

The header layout is safetensors' own (huggingface/safetensors, ``safetensors/src/tensor.rs``:
``read_metadata`` and ``Metadata::validate``): 8 bytes of little-endian length N, then N bytes
of UTF-8 JSON starting with ``{``: ``{name: {"dtype", "shape", "data_offsets": [begin, end]},
"__metadata__": {str: str}}``. Sorted by offsets, the tensors must tile the data that follows
the header exactly: each begins where the previous ended, spans ``prod(shape) * dtype bits / 8``
bytes, and the last ends at the end of the file.

Tensor names and shapes follow what vLLM loads (``vllm/lora/utils.py``
``parse_fine_tuned_lora_name``, ``vllm/lora/lora_model.py``, ``vllm/lora/peft_helper.py``) and
what PEFT writes (``peft/tuners/lora/layer.py``: ``lora_A`` is ``Linear(in, r)``, so its weight
is ``[r, in]``; ``lora_B`` is ``Linear(r, out)``, weight ``[out, r]``; embeddings keep
``lora_embedding_A`` ``[r, vocab]`` and ``lora_embedding_B`` ``[hidden, r]``):
``base_model.model.<module>.lora_A.weight`` and ``.lora_B.weight`` in pairs, for modules that
``target_modules`` names. Where the base model's shape is known, each module's input and output
widths are checked too (Llama-style layers, transformers ``modeling_llama.py``: q_proj
hidden -> heads x head_dim, k_proj/v_proj hidden -> kv_heads x head_dim, o_proj heads x head_dim
-> hidden, gate_proj/up_proj hidden -> intermediate, down_proj intermediate -> hidden).

Pure and standard library only.

>>> import json, struct
>>> head = json.dumps({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}})
>>> data = struct.pack("<Q", len(head)) + head.encode() + bytes(12)
>>> sorted(parse_header(data[:8 + len(head)], len(data)))
['w']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmikit.catalog import ConfigShape

# safetensors' own limit is 100,000,000 bytes; an adapter's header is kilobytes (a tensor
# costs ~150 bytes: 7 modules x 80 layers x 2 = 1,120 tensors is ~170 KB).
MAX_HEADER_BYTES = 16 * 1024**2
MAX_TENSORS = 100_000
MAX_NAME_CHARS = 1024
# safetensors Dtype::bitsize (tensor.rs)
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
    "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
    "U64": 64,
}
PREFIX = "base_model.model."
# Path parts of vision towers and projectors in vision-language models: their widths are not
# the language model's, so only the rank is checked there.
VISION_PARTS = ("visual", "vision_tower", "vision_model", "multi_modal_projector",
                "vision_encoder", "patch_merger")


class HeaderError(ValueError):
    """The safetensors header cannot be read; the message says why."""


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def header_length(prefix: bytes, file_size: int) -> int:
    """N from the first 8 bytes; HeaderError when it cannot be a header of this file."""
    if len(prefix) < 8 or file_size < 8:
        raise HeaderError("the file is shorter than the 8-byte header length")
    n = int.from_bytes(prefix[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise HeaderError(f"the header length is {n:,} bytes; lmikit reads at most "
                          f"{MAX_HEADER_BYTES:,} (an adapter's header is kilobytes)")
    if 8 + n > file_size:
        raise HeaderError(f"the header length {n:,} runs past the end of the file "
                          f"({file_size:,} bytes)")
    return n


def parse_header(data: bytes, file_size: int) -> dict[str, Tensor]:
    """The tensors of a safetensors file from its first ``8 + N`` bytes and its size."""
    n = header_length(data, file_size)
    raw = data[8:8 + n]
    if len(raw) != n:
        raise HeaderError("the file ended inside the header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderError("the header is not UTF-8 text") from exc
    if not text.startswith("{"):
        raise HeaderError("the header does not start with '{'")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise HeaderError(f"the header is not valid JSON: {str(exc)[:120]}") from exc
    if not isinstance(doc, dict):
        raise HeaderError("the header is not a JSON object")
    meta = doc.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(v, str) for v in meta.values())):
        raise HeaderError("__metadata__ must map strings to strings")
    if len(doc) > MAX_TENSORS:
        raise HeaderError(f"{len(doc):,} tensors; lmikit reads at most {MAX_TENSORS:,}")
    tensors = {name: _tensor(name, info) for name, info in doc.items()}
    end = 0
    for name, t in sorted(tensors.items(), key=lambda kv: (kv[1].begin, kv[1].end)):
        if t.begin != end or t.end < t.begin:
            raise HeaderError(f"tensor {name!r}: data_offsets [{t.begin}, {t.end}] do not "
                              f"follow the previous tensor's end ({end})")
        elements = 1
        for dim in t.shape:
            elements *= dim
        bits = elements * DTYPE_BITS[t.dtype]
        if bits % 8 or bits // 8 != t.end - t.begin:
            raise HeaderError(f"tensor {name!r}: {t.dtype} {list(t.shape)} needs {bits / 8:g} "
                              f"bytes but data_offsets give {t.end - t.begin}")
        end = t.end
    if 8 + n + end != file_size:
        raise HeaderError(f"the tensors cover {end:,} bytes of data but the file has "
                          f"{file_size - 8 - n:,} after the header")
    return tensors


def _tensor(name: str, info: Any) -> Tensor:
    where = f"tensor {name[:MAX_NAME_CHARS]!r}"
    if len(name) > MAX_NAME_CHARS:
        raise HeaderError(f"{where}: the name is longer than {MAX_NAME_CHARS} characters")
    if not isinstance(info, dict):
        raise HeaderError(f"{where}: must be an object with dtype, shape and data_offsets")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in DTYPE_BITS:
        raise HeaderError(f"{where}: dtype {str(dtype)[:20]!r} is not a safetensors dtype "
                          f"({', '.join(DTYPE_BITS)})")
    if not (isinstance(shape, list) and len(shape) <= 8 and all(_count(d) for d in shape)):
        raise HeaderError(f"{where}: shape must be a list of at most 8 non-negative whole "
                          "numbers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(o) for o in offsets)):
        raise HeaderError(f"{where}: data_offsets must be [begin, end], whole numbers >= 0")
    return Tensor(dtype, tuple(shape), offsets[0], offsets[1])


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


# --- adapter_config.json -------------------------------------------------------------------

@dataclass(frozen=True)
class LoraConfig:
    """What the checks need from ``adapter_config.json``."""

    rank: int
    targets: frozenset[str] | None  # module names; None: any (all-linear or an opaque regex)
    ranks: frozenset[int]  # r and every rank_pattern value
    note: str | None = None


def lora_config(config: Mapping[str, Any]) -> tuple[LoraConfig | None, list[str]]:
    """The fields vLLM's PEFTHelper reads, checked as it checks them (required r, lora_alpha
    and target_modules; no DoRA, no modules_to_save, bias 'none')."""
    problems: list[str] = []
    peft_type = config.get("peft_type")
    if peft_type is not None and peft_type != "LORA":
        problems.append(f"adapter_config.json: peft_type is {str(peft_type)[:40]!r}; vLLM "
                        "serves LORA adapters only")
    r = config.get("r")
    if not (isinstance(r, int) and not isinstance(r, bool) and r >= 1):
        problems.append(f"adapter_config.json: r must be a positive whole number [got "
                        f"{str(r)[:40]}]")
    alpha = config.get("lora_alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        problems.append("adapter_config.json: lora_alpha is required (a number; vLLM scales "
                        f"the adapter by lora_alpha / r) [got {str(alpha)[:40]}]")
    if config.get("use_dora"):
        problems.append("adapter_config.json: use_dora is true; vLLM does not serve DoRA "
                        "adapters")
    if config.get("modules_to_save"):
        problems.append("adapter_config.json: modules_to_save must be empty; vLLM serves "
                        "only LoRA weights, not fully trained modules")
    bias = config.get("bias", "none")
    if bias not in (None, "none"):
        problems.append(f"adapter_config.json: bias is {str(bias)[:20]!r}; LMI serves "
                        "adapters without LoRA bias ('none')")
    targets, note = _targets(config.get("target_modules"), problems)
    pattern = config.get("rank_pattern") or {}
    ranks = {r} if isinstance(r, int) else set()
    if isinstance(pattern, dict):
        ranks |= {v for v in pattern.values() if isinstance(v, int) and not isinstance(v, bool)}
    if problems or not isinstance(r, int):
        return None, problems
    return LoraConfig(r, targets, frozenset(ranks), note), []


def _targets(value: Any, problems: list[str]) -> tuple[frozenset[str] | None, str | None]:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return frozenset(value), None
    if isinstance(value, str) and value:
        if value == "all-linear":
            return None, None
        # a regular expression: like vLLM (is_regex_target_modules), read the module names of
        # its final group, e.g. "model.*(q_proj|v_proj)$", rather than run an unknown pattern
        match = re.search(r"\(([A-Za-z0-9_|]+)\)\$?$", value[:1024])
        if match:
            return frozenset(match.group(1).split("|")), None
        return None, "tensor names were not matched against target_modules (a pattern)"
    problems.append("adapter_config.json: target_modules is required (a list of module "
                    "names such as [\"q_proj\", \"v_proj\"], or \"all-linear\") [got "
                    f"{str(value)[:40]}]")
    return None, None


# --- tensors against the config and the base model ----------------------------------------

def _widths(shape: ConfigShape) -> dict[str, tuple[int | None, int | None]]:
    """(in, out) of each module name lmikit knows for the base model; None: not derivable."""
    h = shape.hidden
    w: dict[str, tuple[int | None, int | None]] = {
        "o_proj": (None, h), "down_proj": (None, h), "lm_head": (h, shape.vocab_size or None),
        "q_proj": (h, None), "k_proj": (h, None), "v_proj": (h, None),
        "gate_proj": (h, None), "up_proj": (h, None),
        "q_a_proj": (h, None), "kv_a_proj_with_mqa": (h, None),
    }
    if not shape.mla:
        q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        w.update(q_proj=(h, q), k_proj=(h, kv), v_proj=(h, kv), o_proj=(q, h))
    if not shape.experts and shape.intermediate_size:
        i = shape.intermediate_size
        w.update(gate_proj=(h, i), up_proj=(h, i), down_proj=(i, h))
    return w


def check_tensors(file: str, tensors: Mapping[str, Tensor], config: LoraConfig,
                  base: ConfigShape | None = None) -> list[str]:
    """Problems of the tensors against the LoRA config and (when known) the base's shape."""
    problems: list[str] = []
    pairs: dict[str, dict[str, Tensor]] = {}
    widths = _widths(base) if base else {}
    for name, tensor in sorted(tensors.items()):
        module, kind = _split(name)
        where = f"{file}: tensor {name!r}"
        if kind is None:
            problems.append(f"{where}: not a LoRA weight name vLLM reads (expected "
                            "<module>.lora_A.weight and <module>.lora_B.weight)")
            continue
        if kind == "magnitude":
            problems.append(f"{where}: a DoRA magnitude vector; vLLM does not serve DoRA")
            continue
        suffix = module.rsplit(".", 1)[-1]
        if config.targets is not None and not any(
                module == t or module.endswith("." + t) for t in config.targets):
            problems.append(f"{where}: module {suffix!r} is not in adapter_config.json "
                            f"target_modules ({', '.join(sorted(config.targets))})")
        pairs.setdefault(module, {})[kind] = tensor
        problems += _shape_problems(where, module, kind, tensor, config, base, widths)
    for module, found in sorted(pairs.items()):
        family = "embedding" if {"embA", "embB"} & set(found) else "weight"
        want = {"embA", "embB"} if family == "embedding" else {"A", "B"}
        for kind in sorted(want - set(found)):
            label = {"A": "lora_A.weight", "B": "lora_B.weight", "embA": "lora_embedding_A",
                     "embB": "lora_embedding_B"}[kind]
            problems.append(f"{file}: module {module!r} has no {label}; LoRA needs both "
                            "halves")
    if not pairs and not problems:
        problems.append(f"{file}: holds no LoRA tensors")
    return problems


def _split(name: str) -> tuple[str, str | None]:
    body = name[len(PREFIX):] if name.startswith(PREFIX) else name
    for tail, kind in ((".lora_A.weight", "A"), (".lora_B.weight", "B"),
                       (".lora_embedding_A", "embA"), (".lora_embedding_B", "embB"),
                       (".lora_magnitude_vector", "magnitude"),
                       (".lora_magnitude_vector.weight", "magnitude")):
        if body.endswith(tail) and len(body) > len(tail):
            return body[:-len(tail)], kind
    return body, None


def _shape_problems(where: str, module: str, kind: str, t: Tensor, config: LoraConfig,
                    base: ConfigShape | None,
                    widths: Mapping[str, tuple[int | None, int | None]]) -> list[str]:
    if len(t.shape) != 2:
        return [f"{where}: shape {list(t.shape)} is not 2-D"]
    rank_at = 0 if kind in ("A", "embA") else 1
    rank = t.shape[rank_at]
    ranks = ", ".join(map(str, sorted(config.ranks)))
    out = []
    if rank not in config.ranks:
        out.append(f"{where}: shape {list(t.shape)} has rank {rank}, but adapter_config.json "
                   f"says r = {ranks}")
    if base is None:
        return out
    parts = module.split(".")
    if "layers" in parts:
        at = parts.index("layers") + 1
        if at < len(parts) and parts[at].isdigit() and int(parts[at]) >= base.layers \
                and not any(p in VISION_PARTS for p in parts):
            out.append(f"{where}: names layer {parts[at]}, but the base model has "
                       f"{base.layers} layers (0 to {base.layers - 1})")
    if any(p in VISION_PARTS for p in parts):
        return out
    other = t.shape[1 - rank_at]
    if kind in ("embA", "embB"):
        want, what = (base.vocab_size, "vocabulary size") if kind == "embA" else (
            base.hidden, "hidden size")
        if want and other != want:
            out.append(f"{where}: shape {list(t.shape)} does not match the base model's "
                       f"{what} {want}")
        return out
    wide_in, wide_out = widths.get(parts[-1], (None, None))
    width = wide_in if kind == "A" else wide_out
    if width and other != width:
        side = "input" if kind == "A" else "output"
        expect = [rank, width] if kind == "A" else [width, rank]
        out.append(f"{where}: shape {list(t.shape)}, but {parts[-1]}'s {side} width in the "
                   f"base model is {width} (expected {expect})")
    return out
