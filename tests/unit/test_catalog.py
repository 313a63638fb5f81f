from __future__ import annotations

import json

import botocore.session
import pytest

from lmikit.catalog._instances import INSTANCES, get_instance
from lmikit.catalog._models import CATALOG_DIR, catalog_ids, get_model
from lmikit.errors import CatalogError

KIB = 1024
REQUIRED_MODELS = [
    "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
    "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
    "deepseek-ai/DeepSeek-V3.2", "mistralai/Mistral-Large-3-675B-Instruct-2512",
    "mistralai/Ministral-3-8B-Instruct-2512", "Qwen/Qwen3-VL-8B-Instruct",
]


@pytest.mark.parametrize(("model_id", "kib"), [
    ("Qwen/Qwen2.5-1.5B-Instruct", 28), ("Qwen/Qwen2.5-7B-Instruct", 56),
    ("Qwen/Qwen2.5-72B-Instruct", 320),
])
def test_kv_bytes_per_token_matches_published(model_id, kib):
    assert get_model(model_id).kv_bytes_per_token(2) == kib * KIB


def test_catalog_has_required_models():
    assert set(REQUIRED_MODELS) <= set(catalog_ids())


@pytest.mark.parametrize("model_id", REQUIRED_MODELS)
def test_param_count_within_3_percent_of_published(model_id):
    geo = get_model(model_id)
    entry = json.loads(next(p for p in CATALOG_DIR.glob("*.json")
                            if json.loads(p.read_text())["model_id"] == model_id).read_text())
    published = entry["published_params"]
    assert abs(geo.total_params - published) / published < 0.03


def test_mla_stores_one_latent_per_layer():
    geo = get_model("deepseek-ai/DeepSeek-V3.2")
    assert geo.attention == "mla"
    assert geo.kv_bytes_per_token(2) == 61 * (512 + 64) * 2
    assert geo.kv_replication(8) == 8  # the latent is not sharded across TP ranks
    assert geo.weight_dtype == "fp8"


def test_mla_active_params_are_a_fraction_of_total():
    geo = get_model("deepseek-ai/DeepSeek-V3.2")
    assert 30e9 < geo.active_params < 45e9 < 600e9 < geo.total_params


def test_vision_language_reads_text_config():
    geo = get_model("Qwen/Qwen3-VL-8B-Instruct")
    assert geo.is_vision_language
    assert geo.kv_bytes_per_token(2) == 2 * 36 * 8 * 128 * 2


def test_fp8_checkpoint_keeps_embeddings_and_vision_encoder_in_bf16():
    geo = get_model("mistralai/Ministral-3-8B-Instruct-2512")
    kept = geo.embedding_params + geo.vision_params
    assert geo.weight_dtype == "fp8" and kept > 10**9
    assert geo.weight_bytes == (geo.total_params - kept) + 2 * kept
    bf16 = get_model("Qwen/Qwen3-VL-8B-Instruct")
    assert bf16.weight_bytes == 2 * bf16.total_params


def test_sparse_attention_indexer_keys_add_gpu_bytes_per_layer():
    geo = get_model("deepseek-ai/DeepSeek-V3.2")
    assert geo.sparse_attention and geo.index_kv_bytes_per_layer == 128 + 4
    assert geo.gpu_kv_bytes_per_token(2) == 61 * ((512 + 64) * 2 + 132)
    assert geo.kv_bytes_per_token(2) == 61 * (512 + 64) * 2


def test_sparse_attention_fp8_kv_uses_the_656_byte_layout():
    # vLLM 0.23.0 flashmla_sparse.py: 512 fp8 latent values, 4 float32 scales, 64 bf16 rope
    assert get_model("deepseek-ai/DeepSeek-V3.2").kv_layer_bytes(1) == 512 + 4 * 4 + 64 * 2
    plain_mla = get_model("mistralai/Mistral-Large-3-675B-Instruct-2512")
    assert plain_mla.kv_layer_bytes(1) == 512 + 64


def test_gqa_replicates_kv_when_heads_fewer_than_ranks():
    geo = get_model("Qwen/Qwen2.5-1.5B-Instruct")  # 2 KV heads
    assert geo.kv_replication(2) == 1
    assert geo.kv_replication(4) == 2


def test_fp8_kv_halves_bytes():
    geo = get_model("Qwen/Qwen2.5-7B-Instruct")
    assert geo.kv_bytes_per_token(1) * 2 == geo.kv_bytes_per_token(2)


def test_sliding_window_layers_do_not_grow_gpu_kv(tmp_path):
    cfg = {"num_hidden_layers": 10, "hidden_size": 1024, "num_attention_heads": 8,
           "num_key_value_heads": 2, "sliding_window": 4096, "vocab_size": 1000,
           "layer_types": ["sliding_attention"] * 6 + ["full_attention"] * 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    geo = get_model("acme/windowed", path)
    assert geo.sliding_layers == 6
    assert geo.gpu_kv_bytes_per_token(2) == 4 * 2 * 2 * 128 * 2
    assert geo.kv_bytes_per_token(2) == 10 * 2 * 2 * 128 * 2


def test_unknown_model_needs_config_path():
    with pytest.raises(CatalogError, match="model.config_path"):
        get_model("acme/secret-model")


def test_bad_config_file_is_a_catalog_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 10}')
    with pytest.raises(CatalogError, match="num_hidden_layers"):
        get_model("acme/x", path)


def test_instance_names_exist_in_botocore_enum():
    model = botocore.session.get_session().get_service_model("sagemaker")
    allowed = set(model.shape_for("ProductionVariantInstanceType").enum)
    assert set(INSTANCES) <= allowed


@pytest.mark.parametrize("family", ["g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en",
                                    "p6-b200"])
def test_instance_families_covered(family):
    members = [i for i in INSTANCES.values() if i.family == family]
    assert members
    assert all(i.family_source.startswith("https://aws.amazon.com/") for i in members)


def test_unknown_instance_suggests_close_names():
    with pytest.raises(CatalogError, match="Did you mean ml.p4de.24xlarge"):
        get_instance("ml.p4de.24xlarg")


def test_p4de_hardware_facts():
    inst = get_instance("p4de.24xlarge")
    assert (inst.gpu_count, inst.gpu.memory_gib, inst.host_memory_gib) == (8, 80.0, 1152)
    assert inst.has_nvme


@pytest.mark.parametrize(("name", "drives", "gb"), [
    ("ml.g6.8xlarge", 2, 900), ("ml.g6e.8xlarge", 2, 900), ("ml.g6e.16xlarge", 2, 1900),
    ("ml.g6.16xlarge", 2, 1880), ("ml.g6e.12xlarge", 2, 3800), ("ml.g5.48xlarge", 2, 7600)])
def test_instance_store_drive_counts(name, drives, gb):
    """EC2's instance store listing: g6.8xlarge and g6e.8xlarge 2 x 450 GB, g6e.16xlarge
    2 x 950 GB; a disk tier reads every drive, so the count sets its read rate."""
    inst = get_instance(name)
    assert (inst.nvme_drives, inst.nvme_gb) == (drives, gb)
    assert inst.nvme_read_gbps == 2.0 * drives


@pytest.mark.parametrize(("name", "gbit"), [
    ("ml.g6.xlarge", 10), ("ml.g6.12xlarge", 40), ("ml.g6e.8xlarge", 25),
    ("ml.g6e.16xlarge", 35), ("ml.g6e.48xlarge", 400), ("ml.p4de.24xlarge", 400),
    ("ml.p5.48xlarge", 3200)])
def test_network_bandwidth_from_the_product_pages(name, gbit):
    assert get_instance(name).network_gbit == gbit


def test_every_instance_has_a_network_bandwidth():
    assert all(inst.network_gbit > 0 for inst in INSTANCES.values())


def test_only_the_p_families_join_their_gpus_with_nvlink():
    # NVIDIA's A10, L4 and L40S data sheets list PCIe Gen4 x16 as the only interconnect;
    # AWS's P4d, P5 and P6 pages describe NVSwitch/NVLink between the eight GPUs.
    for inst in INSTANCES.values():
        assert inst.nvlink == (inst.family in {"p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"}), \
            inst.name
