from __future__ import annotations

import pytest

from lmikit.catalog._instances import INSTANCES
from lmikit.errors import PlanError
from lmikit.planner._planner import plan, plan_spec
from lmikit.spec._loader import load_spec
from tests.conftest import EXAMPLE_SPECS, EXAMPLES

P4DE = "ml.p4de.24xlarge"


@pytest.mark.parametrize(("model_id", "tp", "published"), [
    ("Qwen/Qwen2.5-1.5B-Instruct", 1, 2_600_000),
    ("Qwen/Qwen2.5-72B-Instruct", 4, 480_000),
])
def test_gpu_capacity_within_10_percent_of_published(model_id, tp, published):
    capacity = plan(model_id, P4DE, tp=tp).gpu_kv_capacity_tokens
    assert abs(capacity - published) / published < 0.10


# Published offload recommendation for p4de.24xlarge, one copy per instance, probed at
# points well inside each range: ~1B <2M none, 2M-30M CPU, >25M disk; ~7-10B <250K none,
# 250K-8M CPU, >6M disk; ~70B+ <250K none, 250K-3M CPU, >2.5M disk.
OFFLOAD_TABLE = [
    ("Qwen/Qwen2.5-1.5B-Instruct", 1, 500_000, "none"),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1, 10_000_000, "cpu"),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1, 100_000_000, "cpu+disk"),
    ("Qwen/Qwen3-8B", 1, 100_000, "none"),
    ("Qwen/Qwen3-8B", 1, 2_000_000, "cpu"),
    ("Qwen/Qwen3-8B", 1, 20_000_000, "cpu+disk"),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, 100_000, "none"),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, 2_000_000, "cpu"),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, 20_000_000, "cpu+disk"),
    ("meta-llama/Llama-3.1-70B-Instruct", 8, 100_000, "none"),
    ("meta-llama/Llama-3.1-70B-Instruct", 8, 1_000_000, "cpu"),
    ("meta-llama/Llama-3.1-70B-Instruct", 8, 10_000_000, "cpu+disk"),
    ("Qwen/Qwen2.5-72B-Instruct", 4, 100_000, "none"),
    ("Qwen/Qwen2.5-72B-Instruct", 4, 1_000_000, "cpu"),
    ("Qwen/Qwen2.5-72B-Instruct", 4, 10_000_000, "cpu+disk"),
]


@pytest.mark.parametrize(("model_id", "tp", "context", "tier"), OFFLOAD_TABLE)
def test_tier_matches_published_offload_table(model_id, tp, context, tier):
    assert plan(model_id, P4DE, tp=tp, context_tokens=context).tier == tier


def test_plan_json_has_documented_keys():
    data = plan("Qwen/Qwen2.5-7B-Instruct", P4DE, context_tokens=2_000_000).to_dict()
    for key in ("kv_bytes_per_token", "weight_bytes", "gpu_kv_capacity_tokens",
                "working_set_tokens", "tier", "lmcache", "predicted", "assumptions", "warnings"):
        assert key in data
    assert set(data["lmcache"]) >= {"chunk_size", "max_local_cpu_size_gb",
                                    "max_local_disk_size_gb", "local_disk"}
    assert set(data["predicted"]["ttft_hit_s"]) == {"gpu", "cpu", "disk"}
    assert set(data["predicted"]["speedup"]) >= {"cpu", "disk"}
    assert len(data["assumptions"]) >= 5


def test_hits_beat_misses_and_cpu_beats_disk():
    p = plan("Qwen/Qwen3-8B", P4DE, context_tokens=20_000_000).predicted
    assert p.ttft_hit_s["gpu"] < p.ttft_hit_s["cpu"] < p.ttft_hit_s["disk"] < p.ttft_miss_s
    assert p.speedup["cpu"] > p.speedup["disk"] > 1


def test_miss_ttft_grows_faster_than_linear_with_prompt():
    short = plan("Qwen/Qwen3-8B", P4DE, request_tokens=8_000).predicted.ttft_miss_s
    long = plan("Qwen/Qwen3-8B", P4DE, request_tokens=64_000).predicted.ttft_miss_s
    assert long > 8 * (short - 0.02)  # the attention term is quadratic


def test_host_memory_is_split_across_copies_and_ranks():
    one = plan("Qwen/Qwen2.5-72B-Instruct", P4DE, tp=4, copies=1, context_tokens=10**6)
    two = plan("Qwen/Qwen2.5-72B-Instruct", P4DE, tp=4, copies=2, context_tokens=10**6)
    assert one.lmcache["workers"] == 4 and two.lmcache["workers"] == 8
    per_instance_one = one.lmcache["max_local_cpu_size_gb"] * 4
    per_instance_two = two.lmcache["max_local_cpu_size_gb"] * 8
    assert per_instance_two <= per_instance_one <= 1152


def test_plan_refuses_more_gpus_than_instance_has():
    with pytest.raises(PlanError, match="needs 16 GPUs but ml.p4de.24xlarge has 8"):
        plan("Qwen/Qwen2.5-72B-Instruct", P4DE, tp=8, copies=2)


def test_plan_refuses_weights_that_do_not_fit():
    with pytest.raises(PlanError, match=r"does not fit ml.g6e.2xlarge .* 135.4 GiB.*"
                       r"choose one of the instance types that hold it: ml.p5.48xlarge"):
        plan("Qwen/Qwen2.5-72B-Instruct", "ml.g6e.2xlarge")


def test_plan_refusal_suggests_a_tp_degree_that_fits_the_same_instance():
    with pytest.raises(PlanError, match="raise engine.tensor_parallel_degree to 4"):
        plan("Qwen/Qwen2.5-72B-Instruct", "ml.g6e.12xlarge", tp=1)


def test_plan_refuses_tp_that_does_not_divide_heads():
    with pytest.raises(PlanError, match="must divide the model's 28 attention heads"):
        plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.12xlarge", tp=3)


def test_plan_refuses_oversized_explicit_cpu_cache():
    with pytest.raises(PlanError, match="exceeds the .* GB per worker"):
        plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.2xlarge", mode="cpu", cpu_size_gb=500.0)


def test_auto_plans_without_lmcache_when_the_host_has_no_room_for_it():
    """ml.g5.2xlarge: 32 GiB of RAM less max(20% of it, 2 x the 7B's 15 GB of weights) and a
    4 GiB worker reserve leaves nothing for LMCache's CPU buffer, which every tier needs."""
    p = plan("Qwen/Qwen2.5-7B-Instruct", "ml.g5.2xlarge")
    assert p.tier == "none" and p.lmcache["max_local_cpu_size_gb"] == 0.0
    (warning,) = [w for w in p.warnings if "too little for an LMCache tier" in w]
    assert warning.startswith("ml.g5.2xlarge leaves 0.0 GB of host memory per worker")
    # asked for explicitly, the tier is refused, naming the field to change
    with pytest.raises(PlanError, match="no host memory is left.*kv_cache.mode 'off'"):
        plan("Qwen/Qwen2.5-7B-Instruct", "ml.g5.2xlarge", mode="cpu")


def test_weights_beyond_the_host_memory_are_refused_with_the_right_advice():
    # 16 GiB of RAM cannot hold Qwen3-8B's 16.4 GB of weights and a 4 GiB worker reserve
    with pytest.raises(PlanError, match=r"1 copy needs 19718 MB of host memory but "
                                        r"ml.g5.xlarge has 16384 MB; the weights and the "
                                        r"worker overhead alone do not fit"):
        plan("Qwen/Qwen3-8B", "ml.g5.xlarge")


def test_disk_mode_needs_nvme_backed_instance():
    # every catalog GPU instance has NVMe; the disk path is file:/// and absolute
    p = plan("Qwen/Qwen2.5-7B-Instruct", P4DE, mode="cpu+disk")
    assert p.lmcache["local_disk"] == "file:///tmp/lmcache/"
    assert p.lmcache["max_local_disk_size_gb"] > 0


def test_in_memory_only_never_uses_disk():
    p = plan("Qwen/Qwen2.5-1.5B-Instruct", P4DE, context_tokens=500_000_000,
             in_memory_only=True)
    assert p.tier == "cpu"
    assert p.lmcache["local_disk"] is None
    assert any("in_memory_only" in w for w in p.warnings)


def test_remote_tier_when_working_set_outgrows_local():
    p = plan("Qwen/Qwen2.5-72B-Instruct", "ml.g6e.48xlarge", tp=8, context_tokens=10**9,
             remote_url="redis://cache:6379")
    assert p.tier == "remote"
    assert p.lmcache["remote_url"] == "redis://cache:6379"


def test_unset_working_set_defaults_to_cpu_with_warning():
    p = plan("Qwen/Qwen2.5-7B-Instruct", P4DE)
    assert p.tier == "cpu"
    assert any("reused_context_tokens" in w for w in p.warnings)


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_examples_plan_and_fit_their_instance(path):
    p = plan_spec(load_spec(path), base_dir=path.parent)
    assert p.min_memory_mb * p.copies <= 1024 * 2048


def test_example_tiers_are_as_documented():
    tiers = {p.name: plan_spec(load_spec(p), base_dir=EXAMPLES).tier for p in EXAMPLE_SPECS}
    assert tiers == {"chat-qwen1.5b-small.yaml": "none", "docqa-qwen7b.yaml": "cpu",
                     "rag-qwen72b-nvme.yaml": "cpu+disk",
                     "regulated-llama8b-inmemory.yaml": "cpu"}


def test_fitted_costs_reprice_the_ttft_block_and_are_stated() -> None:
    """Prefill time is FLOPs / (peak x MFU): halving ``prefill_mfu`` doubles what a miss
    spends prefilling and leaves the per-request overhead and tokenizing as they were."""
    from lmikit.planner._planner import Costs
    from lmikit.sim._coefficients import Coefficients

    default = Coefficients()
    half = Coefficients(prefill_mfu=default.prefill_mfu / 2)
    args = ("meta-llama/Llama-3.1-8B-Instruct", "ml.g5.4xlarge")
    plain = plan(*args, request_tokens=8_000)
    fitted = plan(*args, request_tokens=8_000,
                  costs=Costs(half, "run1.json", ("prefill_mfu",)))
    # the miss also waits for LMCache to store its 31 full chunks, a copy MFU does not touch
    from lmikit.sim._engine import engine_for

    assert plain.tier == "cpu"
    fixed = (default.request_overhead_s + 8_000 * default.tokenize_s_per_token
             + engine_for(*args).store_s(31 * 256))
    assert fitted.predicted.ttft_miss_s - fixed == pytest.approx(
        2 * (plain.predicted.ttft_miss_s - fixed), rel=1e-3)
    line = next(a for a in fitted.assumptions if a.startswith("prefill at"))
    assert line.startswith(f"prefill at {half.prefill_mfu:.0%} (fitted to run1.json) of ")
    assert line.count("fitted") == 1  # the overhead and tokenizing are still the defaults
    # nothing but the TTFT block and its cost lines moves: sizing does not rest on them
    assert (fitted.tier, fitted.lmcache, fitted.gpu_kv_capacity_tokens) == (
        plain.tier, plain.lmcache, plain.gpu_kv_capacity_tokens)
    changed = [a for a, b in zip(plain.assumptions, fitted.assumptions, strict=True) if a != b]
    assert changed == [next(a for a in plain.assumptions if a.startswith("prefill at"))]


def test_a_tensor_parallel_plan_over_pcie_says_its_all_reduces_are_a_floor():
    pcie = plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.12xlarge", tp=4)
    line = [a for a in pcie.assumptions if a.startswith("tensor-parallel all-reduces")]
    assert line == ["tensor-parallel all-reduces cross PCIe (NVIDIA L40S has no NVLink): 2 per "
                    "layer per step, each GPU sending 1.5x the step's bf16 activations at most "
                    "at 25 GB/s, a floor"]
    nvlink = plan("Qwen/Qwen2.5-7B-Instruct", "ml.p4de.24xlarge", tp=4)
    assert [a for a in nvlink.assumptions if "all-reduces" in a] == [
        "tensor-parallel all-reduces over NVLink are not costed in the prefill; a decode "
        "step's are in its fixed overhead (docs/planner-model.md, the decode step at "
        "tensor parallel 1 and above)"]
    single = plan("Qwen/Qwen2.5-7B-Instruct", "ml.g6e.12xlarge", tp=1)
    assert not [a for a in single.assumptions if "all-reduces" in a]
    # the floor is in the miss's TTFT: four L40Ss over PCIe are not four times one
    assert pcie.predicted.ttft_miss_s > single.predicted.ttft_miss_s / 2


@pytest.mark.parametrize("instance_type", sorted(
    name for name, inst in INSTANCES.items() if inst.gpu_count >= 2))
def test_the_plan_states_the_all_reduce_rule_the_engine_applies(instance_type):
    from lmikit.sim._engine import engine_for

    p = plan("Qwen/Qwen2.5-7B-Instruct", instance_type, tp=2)
    engine = engine_for("Qwen/Qwen2.5-7B-Instruct", instance_type, 2)
    pcie = [a for a in p.assumptions if a.startswith("tensor-parallel all-reduces cross PCIe")]
    assert len(pcie) == engine.allreduces_cross_pcie
    if pcie:  # the rate it names is the one the engine costs them at
        assert f"at most at {engine.pcie_allreduce_gbps:g} GB/s" in pcie[0]


def test_local_tiers_hold_the_larger_tier_not_the_sum():
    """LMCache writes every chunk to every tier (lmcache/v1/storage_backend/storage_manager.py,
    StorageManager.batched_put loops over all backends), so the disk tier holds what the CPU
    tier does: a working set above max(cpu, disk) outgrows the local tiers even when it is
    below their sum."""
    probe = plan("Qwen/Qwen2.5-7B-Instruct", P4DE, context_tokens=10**6, mode="cpu+disk")
    cpu, disk = probe.cpu_capacity_tokens, probe.disk_capacity_tokens
    assert cpu > 0 and disk > 0
    between = max(cpu, disk) + min(cpu, disk) // 2  # over the larger tier, under the sum
    p = plan("Qwen/Qwen2.5-7B-Instruct", P4DE, context_tokens=between,
             remote_url="redis://cache:6379")
    assert p.tier == "remote"
    p = plan("Qwen/Qwen2.5-7B-Instruct", P4DE, context_tokens=between)
    assert p.tier == "cpu+disk"
    assert any("exceeds the disk tier (" in w and "the CPU tier adds none" in w
               for w in p.warnings)


def test_auto_plans_no_lmcache_tier_for_deepseek_sparse_attention():
    """vLLM keeps an indexer key cache per layer for DeepSeek sparse attention and lays an fp8
    KV cache out as fp8_ds_mla (656 bytes per token and layer), while LMCache 0.5.6's vLLM
    integration stores (layers, chunk, heads, head size) blocks (integration/vllm/utils.py):
    auto leaves the tier off and says why; an explicit tier is planned with a warning."""
    auto = plan("deepseek-ai/DeepSeek-V3.2", "ml.p5e.48xlarge", tp=8, request_tokens=32000,
                context_tokens=10**7)
    assert auto.tier == "none"
    assert any("planned without an LMCache tier" in w for w in auto.warnings)
    asked = plan("deepseek-ai/DeepSeek-V3.2", "ml.p5e.48xlarge", tp=8, request_tokens=32000,
                 mode="cpu")
    assert asked.tier == "cpu"
    assert any("not verified" in w and "kv_cache.mode 'cpu'" in w for w in asked.warnings)
    # a model without sparse attention on the same layout still gets its tier from auto
    dense = plan("Qwen/Qwen2.5-72B-Instruct", "ml.p5e.48xlarge", tp=8, context_tokens=10**7)
    assert dense.tier != "none"


MISTRAL_LARGE_3 = "mistralai/Mistral-Large-3-675B-Instruct-2512"


def test_mla_at_tensor_parallel_stores_from_the_first_rank_with_the_copys_cpu_share():
    """LMCache saves an MLA model's KV from the first rank only (save_only_first_rank
    defaults to use_mla, lmcache/v1/cache_engine.py) and sizes that rank's CPU tier by
    extra_config.first_rank_max_local_cpu_size (local_cpu_backend.py); the other ranks build
    no storage. So the first rank gets TP x the per-worker share, a token costs its latent
    once, and the disk tier (no such key) is one worker's share."""
    from lmikit.catalog._models import get_model

    p = plan(MISTRAL_LARGE_3, "ml.p5e.48xlarge", tp=8, context_tokens=10**9)
    assert p.tier == "cpu+disk"
    latent = get_model(MISTRAL_LARGE_3).kv_bytes_per_token(2)
    per_worker = p.lmcache["max_local_cpu_size_gb"]
    assert p.lmcache["first_rank_max_local_cpu_size_gb"] == round(per_worker * 8, 1)
    assert p.cpu_capacity_tokens == int(per_worker * 2**30) * 8 // latent
    assert p.disk_capacity_tokens == int(p.lmcache["max_local_disk_size_gb"] * 2**30) // latent
    # GQA at TP 4 shards its heads: every rank stores its share, no first-rank key
    q = plan("Qwen/Qwen2.5-72B-Instruct", "ml.p4de.24xlarge", tp=4, context_tokens=10**7)
    assert "first_rank_max_local_cpu_size_gb" not in q.lmcache
