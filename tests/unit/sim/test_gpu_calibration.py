"""GPU calibration records: the figures they yield, how they read back, what they refuse.

The measuring script (benchmarks/gpu_calibration.py) needs a GPU, PyTorch and transformers;
its plan of what to measure does not, and is tested here with the record format.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from lmikit import sizing
from lmikit.catalog._instances import INSTANCES
from lmikit.catalog._models import get_model
from lmikit.errors import SimulationError
from lmikit.sim import _gpu_calibration as gc
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import engine_for

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_calibration.py"
H100 = "NVIDIA H100 SXM 80GB"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_calibration_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(**changes) -> dict:
    data = {"format": gc.FORMAT, "measured_at": "2026-11-26",
            "hardware": {"gpu": "NVIDIA H100 80GB HBM3", "gpu_memory_mib": 81559,
                         "catalog_gpu": H100, "driver": "580.159.04", "cuda": "13.0",
                         "torch": "2.11.0", "transformers": "5.17.0", "cpu": "x", "pcie": ""},
            "prefill": [{"model_id": "Qwen/Qwen3-8B", "tokens": 4096, "seconds": 0.13}],
            "copies": [{"direction": "host_to_gpu", "chunk_bytes": 1 << 20, "chunks": 40,
                        "seconds": 0.002}],
            "decode": [{"model_id": "Qwen/Qwen3-8B", "batch": 1,
                        "weight_bytes": 16_000_000_000, "seconds": 0.0055}]}
    data.update(changes)
    return data


@pytest.mark.parametrize("mfu", [0.3, 0.55, 0.8])
@pytest.mark.parametrize("tokens", [1024, 16_384])
def test_prefill_mfu_of_a_time_the_engine_model_predicts_is_that_mfu(mfu, tokens) -> None:
    # the engine model divides the same FLOP count by peak x TP x prefill_mfu, so a time it
    # predicts at a given MFU must read back as that MFU
    engine = engine_for("Qwen/Qwen3-8B", "ml.p5.48xlarge")
    seconds = engine.with_coefficients(engine.coeff.replace(prefill_mfu=mfu)).prefill_s(tokens, 0)
    point = gc.PrefillPoint("Qwen/Qwen3-8B", tokens, seconds)
    assert gc.prefill_mfu(point, engine.tflops_per_gpu) == pytest.approx(mfu, rel=1e-12)


def test_prefill_mfu_counts_the_flops_of_sizing_prefill_flops() -> None:
    geo = get_model("Qwen/Qwen2.5-1.5B-Instruct")
    flops = sizing.prefill_flops(geo.active_params, geo.num_layers, geo.attention_dim, 2048, 0)
    point = gc.PrefillPoint("Qwen/Qwen2.5-1.5B-Instruct", 2048, 0.01)
    assert gc.prefill_mfu(point, 100.0) == pytest.approx(flops / (0.01 * 100e12))


def test_copy_gbps_is_bytes_over_seconds_in_gigabytes() -> None:
    assert gc.copy_gbps(gc.CopyPoint("host_to_gpu", 25_000_000, 40, 0.04)) == 25.0


def test_a_kv_chunk_is_256_tokens_of_the_models_bf16_kv() -> None:
    # Qwen2.5-7B: 28 layers x 4 KV heads x 128 x 2 (K and V) x 2 bytes = 56 KiB per token
    assert gc.kv_chunk_bytes("Qwen/Qwen2.5-7B-Instruct") == 256 * 57_344


@pytest.mark.parametrize(("name", "mib", "expected"), [
    ("NVIDIA H100 80GB HBM3", 81559, H100),
    ("NVIDIA H100 PCIe", 81559, ""),  # another peak than the SXM part in the catalog
    ("NVIDIA H100 NVL", 95830, ""),
    ("NVIDIA H200", 143771, "NVIDIA H200 141GB"),
    ("NVIDIA A100-SXM4-80GB", 81920, "NVIDIA A100 80GB"),
    ("NVIDIA A100-SXM4-40GB", 40960, "NVIDIA A100 40GB"),
    ("NVIDIA L40S", 46068, "NVIDIA L40S"),
    ("NVIDIA L4", 23034, "NVIDIA L4"),
    ("NVIDIA A10G", 23028, "NVIDIA A10G"),
    ("NVIDIA B200", 183359, "NVIDIA B200 180GB"),
    ("NVIDIA GeForce RTX 4090", 24564, ""),
])
def test_catalog_gpu_for_matches_cuda_device_names(name, mib, expected) -> None:
    assert gc.catalog_gpu_for(name, mib) == expected


def test_every_catalog_gpu_has_a_name_rule() -> None:
    names = {inst.gpu.name for inst in INSTANCES.values()}
    assert names == {n for n, *_ in gc._NAMES}


def test_a_record_round_trips_and_summarises_in_the_simulators_terms(tmp_path) -> None:
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(_record()))
    record = gc.load(path)
    assert gc.from_dict(record.to_dict()) == record
    summary = record.summary()
    assert summary["prefill"][0]["prefill_mfu"] == pytest.approx(0.5604, abs=1e-4)
    assert summary["copies"][0]["gbps"] == pytest.approx(40 * (1 << 20) / 0.002 / 1e9, abs=0.01)
    # 16 GB in 5.5 ms over the H100 SXM's 3,350 GB/s datasheet bandwidth
    assert summary["decode"][0]["hbm_efficiency"] == pytest.approx(16e9 / 0.0055 / 3.35e12,
                                                                   abs=1e-4)


def test_a_record_from_before_decode_was_measured_still_reads() -> None:
    data = _record()
    del data["decode"]
    record = gc.from_dict(data)
    assert record.decode == () and record.summary()["decode"] == []


def test_a_decode_point_names_its_layout_and_one_from_before_layouts_is_unfused() -> None:
    fused = {"model_id": "Qwen/Qwen3-8B", "batch": 1, "weight_bytes": 16_000_000_000,
             "seconds": 0.005, "layout": "fused"}
    record = gc.from_dict(_record(decode=[_record()["decode"][0], fused]))
    assert [d.layout for d in record.decode] == ["unfused", "fused"]
    assert [d["layout"] for d in record.summary()["decode"]] == ["unfused", "fused"]
    assert gc.from_dict(record.to_dict()) == record


def test_decode_efficiency_divides_by_the_catalog_gpus_datasheet_bandwidth() -> None:
    from lmikit.sim._coefficients import HBM_GBPS

    point = gc.DecodePoint("Qwen/Qwen3-8B", 1, 4_800_000_000, 0.002)
    for name, (gbps, _source) in HBM_GBPS.items():
        assert gc.decode_hbm_efficiency(point, gbps) == pytest.approx(2.4e12 / (gbps * 1e9)), \
            name


def test_a_record_of_a_gpu_outside_the_catalog_has_no_mfu() -> None:
    hw = {**_record()["hardware"], "gpu": "NVIDIA GeForce RTX 4090", "catalog_gpu": ""}
    record = gc.from_dict(_record(hardware=hw))
    assert record.summary()["prefill"][0]["prefill_mfu"] is None
    assert record.summary()["decode"][0]["hbm_efficiency"] is None


@pytest.mark.parametrize(("change", "message"), [
    ({"format": "x"}, "not a lmikit-gpu-calibration/v1 record"),
    ({"hardware": []}, "hardware must be an object"),
    ({"prefill": [{"model_id": "acme/none", "tokens": 1, "seconds": 1}]},
     r"prefill\[0\].model_id 'acme/none' is not a catalog model; valid: .*Qwen/Qwen3-8B"),
    ({"prefill": [{"model_id": "Qwen/Qwen3-8B", "tokens": 0, "seconds": 1}]},
     r"prefill\[0\].tokens must be a whole number from 1 .*\(got 0\)"),
    ({"prefill": [{"model_id": "Qwen/Qwen3-8B", "tokens": 8, "seconds": float("nan")}]},
     r"prefill\[0\].seconds must be a number of seconds above 0"),
    # past a float's range: math.isfinite raised OverflowError
    ({"prefill": [{"model_id": "Qwen/Qwen3-8B", "tokens": 8, "seconds": 10**400}]},
     r"prefill\[0\].seconds must be a number of seconds above 0, at most 3600 \(got <an "
     r"integer of about 401 digits>\)"),
    ({"copies": [{"direction": "sideways", "chunk_bytes": 1, "chunks": 1, "seconds": 1}]},
     r"copies\[0\].direction must be one of host_to_gpu, gpu_to_host \(got 'sideways'\)"),
    ({"decode": [{"model_id": "Qwen/Qwen3-8B", "batch": 0, "weight_bytes": 1, "seconds": 1}]},
     r"decode\[0\].batch must be a whole number from 1 .*\(got 0\)"),
    ({"decode": [{"model_id": "Qwen/Qwen3-8B", "batch": 1, "weight_bytes": 1.5,
                  "seconds": 1}]},
     r"decode\[0\].weight_bytes must be a whole number from 1 .*\(got 1.5\)"),
    ({"decode": [{"model_id": "Qwen/Qwen3-8B", "batch": 1, "weight_bytes": 1,
                  "seconds": -1}]},
     r"decode\[0\].seconds must be a number of seconds above 0"),
    ({"decode": [{"model_id": "Qwen/Qwen3-8B", "batch": 1, "weight_bytes": 1,
                  "seconds": 1, "layout": "packed"}]},
     r"decode\[0\].layout must be one of unfused, fused \(got 'packed'\)"),
    ({"suffix": [{"model_id": "Qwen/Qwen3-8B", "tp": 1, "context_tokens": -1,
                  "new_tokens": 1, "seconds": 1}]},
     r"suffix\[0\].context_tokens must be a whole number from 0 .*\(got -1\)"),
    ({"suffix": [{"model_id": "Qwen/Qwen3-8B", "tp": 0, "context_tokens": 0,
                  "new_tokens": 1, "seconds": 1}]},
     r"suffix\[0\].tp must be a whole number from 1 .*\(got 0\)"),
    ({"suffix": [{"model_id": "Qwen/Qwen3-8B", "tp": 1, "context_tokens": 0,
                  "new_tokens": 1, "seconds": 1, "kernel": "fa3"}]},
     r"suffix\[0\].kernel must be one of flash, cudnn \(got 'fa3'\)"),
    ({"prefill": [], "copies": [], "decode": []},
     "holds no prefill, decode, suffix or copy measurement"),
    ({"measured_at": 3}, "measured_at must be the date"),
    ({"prefill": [{}] * (gc.MAX_POINTS + 1)}, "at most 1000 measurements"),
])
def test_a_bad_record_is_refused_naming_the_field_and_value(change, message) -> None:
    with pytest.raises(SimulationError, match=message):
        gc.from_dict(_record(**change))


def test_a_record_naming_a_gpu_outside_the_catalog_as_catalog_gpu_is_refused() -> None:
    hw = {**_record()["hardware"], "catalog_gpu": "NVIDIA H100 PCIe"}
    with pytest.raises(SimulationError, match="catalog_gpu 'NVIDIA H100 PCIe' is not a catalog "
                                              "GPU; valid: NVIDIA H200 141GB"):
        gc.from_dict(_record(hardware=hw))


def test_load_refuses_a_fifo_without_reading_it(tmp_path) -> None:
    fifo = tmp_path / "gpu.json"
    os.mkfifo(fifo)
    with pytest.raises(SimulationError, match="not a regular file"):
        gc.load(fifo)


def test_load_refuses_a_file_over_its_limit(tmp_path) -> None:
    path = tmp_path / "gpu.json"
    path.write_bytes(b" " * (gc.MAX_FILE_BYTES + 1))
    with pytest.raises(SimulationError, match="GPU calibration file"):
        gc.load(path)


def test_the_script_plans_only_the_lengths_that_fit_the_gpu() -> None:
    plan = _script().plan
    # Qwen3-8B's bf16 weights are 16.4 GB: on a 22.5 GiB L4 a 16K pass does not fit beside them
    assert plan(["Qwen/Qwen3-8B"], [1024, 4096, 16_384], 22.5) == [("Qwen/Qwen3-8B",
                                                                     [1024, 4096])]
    assert plan(["Qwen/Qwen3-8B"], [1024, 4096, 16_384], 79.6) == [("Qwen/Qwen3-8B",
                                                                     [1024, 4096, 16_384])]
    assert plan(["Qwen/Qwen3-8B"], [1024], 16.0) == []  # the weights alone do not fit


def test_the_script_refuses_a_model_it_cannot_build() -> None:
    with pytest.raises(SystemExit, match="'deepseek-ai/DeepSeek-V3.2' has model_type "
                                         "'deepseek_v32'; this script builds llama, mistral"):
        _script().plan(["deepseek-ai/DeepSeek-V3.2"], [1024], 80.0)


def test_the_script_takes_a_suffix_model_at_a_tp_that_divides_its_heads() -> None:
    parse = _script().parse_suffix_model
    assert parse("Qwen/Qwen3-8B") == ("Qwen/Qwen3-8B", 1)
    assert parse("meta-llama/Llama-3.1-70B-Instruct@8") == ("meta-llama/Llama-3.1-70B-Instruct",
                                                            8)
    # Qwen3-8B has 8 KV heads: a rank of TP 16 would hold half a head
    for bad in ("Qwen/Qwen3-8B@16", "Qwen/Qwen3-8B@0", "Qwen/Qwen3-8B@two"):
        with pytest.raises(SystemExit, match=f"{bad!r}: TP must be a positive whole number "
                                             r"dividing .* \[32, 8, 12288\]"):
            parse(bad)
    with pytest.raises(SystemExit, match="deepseek_v32"):
        parse("deepseek-ai/DeepSeek-V3.2@8")


# The records lmikit ships (lmikit/sim/calibration/), measured with the script above on an
# H100 SXM and an H200, each on a host with a PCIe Gen5 x16 link.
MEASURED = gc.measured()
SEVEN_TO_EIGHT_B = ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B",
                    "meta-llama/Llama-3.1-8B-Instruct")


def _gpu(record: gc.GpuCalibration) -> str:
    return record.hardware.catalog_gpu


def test_lmikit_ships_a_record_per_gpu_each_naming_its_hardware() -> None:
    assert sorted(_gpu(r) for r in MEASURED) == [H100, "NVIDIA H200 141GB"]
    for record in MEASURED:
        hw = record.hardware
        assert gc.catalog_gpu_for(hw.gpu, hw.gpu_memory_mib) == hw.catalog_gpu
        assert all((hw.driver, hw.cuda, hw.torch, hw.transformers, hw.cpu, hw.pcie)), hw
        assert {p.model_id for p in record.prefill} >= {*SEVEN_TO_EIGHT_B,
                                                        "Qwen/Qwen2.5-1.5B-Instruct"}


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_default_prefill_mfu_is_within_a_tenth_of_the_mfu_measured_for_7_8b_models(
        record) -> None:
    # Rule: the default prefill_mfu (sizing.PREFILL_MFU, from public vLLM figures) lies within
    # 10% of the median MFU measured for 7-8B models at prompts of 4K tokens and more, on
    # every GPU lmikit ships a record for.
    mfus = [p["prefill_mfu"] for p in record.summary()["prefill"]
            if p["model_id"] in SEVEN_TO_EIGHT_B and p["tokens"] >= 4096]
    assert len(mfus) == 9
    median = sorted(mfus)[len(mfus) // 2]
    assert abs(sizing.PREFILL_MFU / median - 1) <= 0.10, (sizing.PREFILL_MFU, median)


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_catalog_gen5_host_link_is_within_15pct_below_the_measured_sustained_copy(
        record) -> None:
    # Rule: the catalog's effective host->GPU figure for PCIe Gen5 hosts (p5en, p6-b200) does
    # not exceed what 40 back-to-back pinned copies of KV chunks reached on a Gen5 x16 host,
    # in either direction, and is at least 85% of it.
    assert record.hardware.pcie == "Gen5 x16"
    catalog = {INSTANCES[n].host_to_gpu_gbps for n in ("ml.p5en.48xlarge",
                                                        "ml.p6-b200.48xlarge")}
    assert len(catalog) == 1
    (link,) = catalog
    sustained = [gc.copy_gbps(c) for c in record.copies if c.chunks == 40]
    assert len(sustained) == 2 * 4  # both directions, four models' chunk sizes
    for gbps in sustained:
        assert 0.85 * gbps <= link <= gbps, (link, gbps)


def _decode(record: gc.GpuCalibration, layout: str, batch: int) -> dict[str, dict]:
    return {d["model_id"]: d for d in record.summary()["decode"]
            if d["layout"] == layout and d["batch"] == batch}


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_default_decode_hbm_efficiency_is_within_a_tenth_of_the_fused_weight_reads(
        record) -> None:
    # Rule: the default decode_hbm_efficiency (a whole decode step) is within 10% of what
    # reading each 7-8B model's weights once at batch 1 reached in vLLM's fused layout (the
    # matrices vLLM reads), on every GPU lmikit ships a record for.
    from lmikit.sim._coefficients import Coefficients

    default = Coefficients().decode_hbm_efficiency
    fused = _decode(record, "fused", 1)
    assert set(SEVEN_TO_EIGHT_B) <= set(fused)
    for model_id in SEVEN_TO_EIGHT_B:
        assert abs(default / fused[model_id]["hbm_efficiency"] - 1) <= 0.10, \
            (model_id, fused[model_id])


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_the_fused_layout_reads_the_same_weights_faster(record) -> None:
    # What the records show, and why the default sits above transformers' figures: stacking
    # q/k/v and gate/up packs the same bytes into fewer, larger reads, and every model at
    # every batch read them faster that way.
    for batch in (1, 32):
        unfused, fused = _decode(record, "unfused", batch), _decode(record, "fused", batch)
        assert set(unfused) == set(fused) >= set(SEVEN_TO_EIGHT_B)
        for model_id, u in unfused.items():
            assert fused[model_id]["weight_bytes"] == u["weight_bytes"]
            assert fused[model_id]["seconds"] < u["seconds"], (model_id, batch)


# Suffix prefills: new tokens after a cached context, as a partial hit prefills them.
SUFFIX_RANKS = (("Qwen/Qwen3-8B", 1), ("meta-llama/Llama-3.1-8B-Instruct", 1),
                ("meta-llama/Llama-3.1-70B-Instruct", 4), ("meta-llama/Llama-3.1-70B-Instruct", 8))
LONG_SUFFIX = 2048


def _suffix(record: gc.GpuCalibration) -> dict[tuple, float]:
    return {(p.model_id, p.tp, p.kernel, p.context_tokens, p.new_tokens): p.seconds
            for p in record.suffix}


def _attention_share(record: gc.GpuCalibration, model_id: str, tp: int, kernel: str,
                     context: int) -> float:
    """Share of the GPU's dense peak the attention over ``context`` cached tokens reached:
    the FLOPs ``sizing.prefill_flops`` adds for that context (on one rank) over the time
    it added to a 2,048-token suffix."""
    t = _suffix(record)
    geo = get_model(model_id)
    added = (sizing.prefill_flops(0, geo.num_layers, geo.attention_dim, LONG_SUFFIX, context)
             - sizing.prefill_flops(0, geo.num_layers, geo.attention_dim, LONG_SUFFIX, 0)) / tp
    seconds = t[(model_id, tp, kernel, context, LONG_SUFFIX)] \
        - t[(model_id, tp, kernel, 0, LONG_SUFFIX)]
    peak = {r.gpu.name: r.gpu.bf16_dense_tflops for r in INSTANCES.values()}[
        record.hardware.catalog_gpu]
    return added / (seconds * peak * 1e12)


def test_a_suffix_point_round_trips_and_one_from_before_kernels_is_flash() -> None:
    row = {"model_id": "Qwen/Qwen3-8B", "tp": 1, "context_tokens": 8192, "new_tokens": 256,
           "seconds": 0.0137}
    record = gc.from_dict(_record(suffix=[row, {**row, "kernel": "cudnn"}]))
    assert [p.kernel for p in record.suffix] == ["flash", "cudnn"]
    assert gc.from_dict(record.to_dict()) == record
    # the summary adds the engine model's prediction for the same rank on the record's GPU
    predicted = record.summary()["suffix"][0]["modelled_seconds"]
    engine = engine_for("Qwen/Qwen3-8B", "ml.p5.48xlarge")
    assert predicted == pytest.approx(engine.prefill_s(256, 8192), abs=1e-6)


def test_the_modelled_suffix_of_a_tp_rank_is_the_engines_prefill_at_that_tp() -> None:
    point = gc.SuffixPoint("meta-llama/Llama-3.1-70B-Instruct", 8, 32_768, 2048, 1.0)
    engine = engine_for("meta-llama/Llama-3.1-70B-Instruct", "ml.p5.48xlarge", tp=8)
    assert gc.suffix_modelled_seconds(point, H100) == pytest.approx(
        engine.prefill_s(2048, 32_768), rel=1e-12)
    with pytest.raises(SimulationError, match="not a catalog GPU"):
        gc.suffix_modelled_seconds(point, "NVIDIA H100 PCIe")


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_each_record_times_suffixes_for_the_ranks_the_docs_quote(record) -> None:
    t = _suffix(record)
    kernels = ("flash", "cudnn") if _gpu(record) == H100 else ("flash",)
    for model_id, tp in SUFFIX_RANKS:
        for kernel in kernels:
            for context in (0, 8192, 32_768, 65_536):
                for new in (32, 256, LONG_SUFFIX):
                    assert (model_id, tp, kernel, context, new) in t


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_attention_over_the_cache_grows_linearly_with_the_context(record) -> None:
    # Rule (the engine's, from sizing.prefill_flops): each new token attends to every cached
    # one, so a suffix's time grows by a fixed cost per cached token. Measured: the share of
    # peak that growth implies is the same within 15% at 8K, 32K and 64K cached tokens, for
    # every model rank and kernel.
    for model_id, tp in SUFFIX_RANKS:
        for kernel in {p.kernel for p in record.suffix}:
            shares = [_attention_share(record, model_id, tp, kernel, c)
                      for c in (8192, 32_768, 65_536)]
            middle = sorted(shares)[1]
            assert all(abs(s / middle - 1) <= 0.15 for s in shares), (model_id, tp, kernel,
                                                                       shares)


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_default_prefill_mfu_lies_between_fa2_and_cudnn_attention_rates(record) -> None:
    # What the records show about the one MFU the engine applies to attention too:
    # PyTorch's FlashAttention-2 reaches less of a Hopper GPU's peak (0.31-0.41; its paper
    # gives 35% on the H100), cuDNN's fused attention more (0.69-0.77; FlashAttention-3,
    # which vLLM runs on Hopper, publishes up to 75% in 16-bit); the default sits between
    # them, at every model rank and context.
    default = Coefficients().prefill_mfu
    for model_id, tp in SUFFIX_RANKS:
        for context in (8192, 32_768, 65_536):
            assert _attention_share(record, model_id, tp, "flash", context) < default
            if any(p.kernel == "cudnn" for p in record.suffix):
                assert _attention_share(record, model_id, tp, "cudnn", context) > default


@pytest.mark.parametrize("record", MEASURED, ids=_gpu)
def test_a_short_suffix_never_ran_faster_than_the_engines_memory_floor(record) -> None:
    # Rule (the engine's prefill floor): a step reads every weight and the cached KV once,
    # at decode_hbm_efficiency. A floor set too high would predict a short suffix slower than
    # the GPU ran it; on both GPUs every 32- and 256-token suffix took at least the modelled
    # time, after any context, with either kernel.
    for p in record.summary()["suffix"]:
        if p["new_tokens"] <= 256:
            assert p["seconds"] >= p["modelled_seconds"], p
