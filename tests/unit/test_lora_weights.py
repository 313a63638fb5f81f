"""The safetensors header reader agrees with the safetensors package itself, and the LoRA
checks refuse what vLLM would refuse, naming the file and the tensor."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.numpy import save

from lmikit.errors import AdapterError
from lmikit.lora._packaging import check_adapter
from lmikit.lora._weights import HeaderError, lora_config, parse_header
from lmikit.testing import lora_tensors, safetensors_bytes, write_lora_adapter

MODEL = "Qwen/Qwen2.5-7B-Instruct"  # hidden 3584, 28 heads x 128, 4 KV heads, 28 layers
NP_DTYPES = {"F16": np.float16, "F32": np.float32, "I32": np.int32, "U8": np.uint8,
             "I64": np.int64, "F64": np.float64}


def _header(data: bytes) -> dict:
    return parse_header(data, len(data))


def _theirs(path: Path) -> dict[str, tuple[str, list[int]]]:
    with safe_open(str(path), framework="numpy") as f:
        return {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}


@settings(max_examples=60)
# "__metadata__" names the header's metadata, never a tensor (safetensors' format)
@given(st.dictionaries(st.text(st.characters(codec="ascii", min_codepoint=33), min_size=1,
                               max_size=30).filter(lambda name: name != "__metadata__"),
                       st.tuples(st.sampled_from(sorted(NP_DTYPES)),
                                 st.lists(st.integers(0, 5), max_size=3)),
                       max_size=5))
def test_lora_weights_header_agrees_with_safetensors_on_files_it_writes(tmp_path_factory,
                                                                         tensors):
    arrays = {n: np.zeros(shape, dtype=NP_DTYPES[d]) for n, (d, shape) in tensors.items()}
    data = save(arrays, metadata={"format": "pt"})
    path = tmp_path_factory.mktemp("st") / "x.safetensors"
    path.write_bytes(data)
    ours = {n: (t.dtype, list(t.shape)) for n, t in _header(data).items()}
    assert ours == _theirs(path)


def _raw(header: object, data: bytes = b"", length: int | None = None) -> bytes:
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(text) if length is None else length) + text + data


W = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
BROKEN = {
    "shorter than the 8-byte": b"\x01\x02",
    "header length is 18,446,744,073,709,551,615 bytes": b"\xff" * 8 + b"{}",
    "runs past the end of the file": _raw({"w": W}, length=4000),
    "not UTF-8 text": _raw(b"{\xff\xfe}"),
    "does not start with '{'": _raw(b"[1, 2]"),
    "not valid JSON": _raw(b"{\"w\": "),
    "is not a safetensors dtype": _raw({"w": {**W, "dtype": "F128"}}, bytes(8)),
    "shape must be a list": _raw({"w": {**W, "shape": [-1]}}, bytes(8)),
    "data_offsets must be": _raw({"w": {**W, "data_offsets": [0]}}, bytes(8)),
    "needs 8 bytes but data_offsets give 4": _raw(
        {"w": {**W, "data_offsets": [0, 4]}}, bytes(4)),
    "do not follow the previous tensor's end": _raw(
        {"w": {**W, "data_offsets": [8, 16]}}, bytes(16)),
    "the tensors cover 8 bytes of data but the file has 9": _raw({"w": W}, bytes(9)),
    "__metadata__ must map strings to strings": _raw({"__metadata__": {"a": 1}, "w": W},
                                                      bytes(8)),
}


@pytest.mark.parametrize("message", sorted(BROKEN))
def test_lora_weights_broken_header_is_refused_by_us_and_by_safetensors(tmp_path, message):
    data = BROKEN[message]
    with pytest.raises(HeaderError, match=message.replace("(", r"\(").replace("[", r"\[")):
        _header(data)
    path = tmp_path / "broken.safetensors"
    path.write_bytes(data)
    with pytest.raises(Exception):  # noqa: B017 - safetensors raises its own error types
        _theirs(path)


def _adapter(tmp_path: Path, **kwargs: object) -> Path:
    return write_lora_adapter(tmp_path / "a", **kwargs)  # type: ignore[arg-type]


def _problems(path: Path, **kwargs: object) -> str:
    with pytest.raises(AdapterError) as info:
        check_adapter(path, model_id=MODEL, max_rank=64, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def _rewrite(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    (path / "adapter_model.safetensors").write_bytes(safetensors_bytes(tensors))


def test_lora_weights_valid_adapter_passes(tmp_path):
    d = _adapter(tmp_path, target_modules=("q_proj", "k_proj", "v_proj", "o_proj",
                                           "gate_proj", "up_proj", "down_proj"), rank=4)
    assert check_adapter(d, model_id=MODEL, max_rank=16).rank == 4


def test_lora_weights_tensor_outside_target_modules_names_the_tensor(tmp_path):
    d = _adapter(tmp_path, target_modules=("q_proj",))
    _rewrite(d, lora_tensors(MODEL, 8, ("q_proj", "v_proj")))
    assert ("adapter_model.safetensors: tensor 'base_model.model.model.layers.0.self_attn."
            "v_proj.lora_A.weight': module 'v_proj' is not in adapter_config.json "
            "target_modules (q_proj)") in _problems(d)


def test_lora_weights_missing_half_is_refused(tmp_path):
    d = _adapter(tmp_path)
    tensors = lora_tensors(MODEL, 8, ("q_proj",))
    del tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
    _rewrite(d, tensors)
    assert "module 'model.layers.0.self_attn.q_proj' has no lora_B.weight" in _problems(d)


def test_lora_weights_rank_must_match_r(tmp_path):
    d = _adapter(tmp_path, rank=8)
    _rewrite(d, lora_tensors(MODEL, 16, ("q_proj", "v_proj")))
    assert "q_proj.lora_A.weight': shape [16, 3584] has rank 16, but adapter_config.json " \
        "says r = 8" in _problems(d)


def test_lora_weights_widths_come_from_the_base_model(tmp_path):
    """An adapter trained for Qwen2.5-1.5B (hidden 1536, 2 KV heads) whose config names the
    7B: q_proj's input and v_proj's output do not match the 7B's 3584 and 512."""
    d = _adapter(tmp_path)
    _rewrite(d, lora_tensors("Qwen/Qwen2.5-1.5B-Instruct", 8, ("q_proj", "v_proj")))
    text = _problems(d)
    assert "q_proj.lora_A.weight': shape [8, 1536], but q_proj's input width in the base " \
        "model is 3584 (expected [8, 3584])" in text
    assert "v_proj.lora_B.weight': shape [256, 8], but v_proj's output width in the base " \
        "model is 512 (expected [512, 8])" in text


def test_lora_weights_layer_beyond_the_model_is_refused(tmp_path):
    d = _adapter(tmp_path, layers=(27, 28))
    assert "names layer 28, but the base model has 28 layers (0 to 27)" in _problems(d)


def test_lora_weights_non_lora_and_dora_tensors_are_refused(tmp_path):
    d = _adapter(tmp_path)
    tensors = lora_tensors(MODEL, 8, ("q_proj",))
    tensors["base_model.model.model.embed_tokens.weight"] = ("BF16", [4, 4])
    tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"] = (
        "BF16", [3584])
    _rewrite(d, tensors)
    text = _problems(d)
    assert "embed_tokens.weight': not a LoRA weight name vLLM reads" in text
    assert "lora_magnitude_vector': a DoRA magnitude vector" in text


@pytest.mark.parametrize(("change", "message"), [
    ({"target_modules": None}, "target_modules is required"),
    ({"lora_alpha": None}, "lora_alpha is required"),
    ({"r": 0}, "r must be a positive whole number"),
    ({"use_dora": True}, "use_dora is true; vLLM does not serve DoRA"),
    ({"modules_to_save": ["lm_head"]}, "modules_to_save must be empty"),
    ({"bias": "all"}, "bias is 'all'"),
    ({"peft_type": "IA3"}, "peft_type is 'IA3'"),
])
def test_lora_weights_config_fields_vllm_requires(tmp_path, change, message):
    d = _adapter(tmp_path, config=change)
    assert message in _problems(d)


def test_lora_weights_rank_pattern_counts_toward_the_limit(tmp_path):
    d = _adapter(tmp_path, rank=8, config={"rank_pattern": {"q_proj": 32}})
    assert "LoRA rank 32 exceeds the endpoint's max LoRA rank 16" in str(
        pytest.raises(AdapterError, check_adapter, d, max_rank=16).value)


def test_lora_weights_target_modules_pattern_reads_its_last_group():
    config, problems = lora_config({"r": 8, "lora_alpha": 16,
                                    "target_modules": r".*\.(q_proj|v_proj)$"})
    assert not problems and config is not None
    assert config.targets == frozenset({"q_proj", "v_proj"})
    config, _ = lora_config({"r": 8, "lora_alpha": 16, "target_modules": "all-linear"})
    assert config is not None and config.targets is None


def test_lora_weights_bin_weights_are_noted_not_inspected(tmp_path):
    d = _adapter(tmp_path)
    (d / "adapter_model.safetensors").rename(d / "adapter_model.bin")
    check = check_adapter(d, model_id=MODEL)
    assert any("adapter_model.bin was not inspected" in n for n in check.notes)
