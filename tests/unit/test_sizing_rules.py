"""The renderer's numeric choices, each rule stated and checked on numbers: host reserve,
component memory and CPU, the disk budget, and what the SageMaker request carries."""

from __future__ import annotations

import dataclasses
import math

import botocore.session
import pytest

from lmikit import sizing
from lmikit.catalog._instances import get_instance
from lmikit.planner._planner import plan, plan_spec
from lmikit.planner._startup import instance_volume
from lmikit.render._sagemaker import render_requests
from lmikit.spec._loader import load_spec_text
from lmikit.testing import ShapeValidator
from tests.unit.test_spec import BASE

GIB = 2**30


@pytest.mark.parametrize(("host_gib", "weights_gb", "copies", "tp"), [
    (1152, 15, 1, 1), (1152, 145, 2, 4), (64, 15, 1, 1), (2048, 700, 1, 8)])
def test_host_reserve_rule(host_gib, weights_gb, copies, tp):
    """reserve = max(20% of RAM, 2x the weights of every copy) + 4 GiB per worker;
    each of copies x tp workers gets an equal share of the rest."""
    budget = sizing.host_cache_budget(host_gib * GIB, weights_gb * 10**9, copies, tp)
    workers = copies * tp
    reserve = max(int(0.2 * host_gib * GIB), int(2 * weights_gb * 10**9 * copies)) \
        + 4 * GIB * workers
    assert budget.reserved_bytes == reserve
    assert budget.per_worker_bytes == max(0, (host_gib * GIB - reserve) // workers)


def test_component_memory_and_cpu_rule():
    """MinMemoryRequiredInMb = (CPU tier per worker x TP + weights + 4 GiB x TP) in MiB;
    NumberOfCpuCoresRequired = vCPUs / copies - 1 (one left for the host), at least 1."""
    p = plan("Qwen/Qwen2.5-72B-Instruct", "ml.p4de.24xlarge", tp=4, copies=2,
             context_tokens=8_000_000)
    cache = int(p.lmcache["max_local_cpu_size_gb"] * GIB) * p.tp
    expected = math.ceil((cache + p.weight_bytes + 4 * GIB * p.tp) / 2**20)
    assert p.min_memory_mb == expected
    assert p.cpu_cores == 96 // 2 - 1


@pytest.mark.parametrize(("free_gb", "total_gb", "per_worker_gb"), [
    (7680, 8000, 0.9 * 7680 / 8), (700, 8000, 0.0), (900, 8000, 0.9 * 900 / 8)])
def test_disk_budget_rule(free_gb, total_gb, per_worker_gb):
    """90% of the FREE space split across workers; none when under 10% of it is free."""
    budget = sizing.disk_cache_budget(free_gb * 10**9, total_gb * 10**9, copies=2, tp=4)
    assert budget.per_worker_bytes == pytest.approx(per_worker_gb * 10**9, abs=8)


def test_ebs_volume_size_reaches_the_request_and_passes_botocore():
    """Instance types without NVMe get VolumeSizeInGB (1..512) sized for the weights; the
    catalog has none today, so the plan's volume is replaced by one for such a type."""
    spec = load_spec_text(BASE)
    p = plan_spec(spec)
    ebs = instance_volume(0, p.weight_bytes, 1)
    r = render_requests(spec, dataclasses.replace(p, volume=ebs), image_uri="img:1",
                        execution_role_arn="arn:aws:iam::111122223333:role/r",
                        model_artifact_url="s3://b/m.tar.gz")
    (variant,) = r.endpoint_config["ProductionVariants"]
    assert variant["VolumeSizeInGB"] == ebs.volume_size_in_gb == max(30, math.ceil(
        1.1 * p.weight_bytes / 1e9 / 0.9))
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("CreateEndpointConfig").input_shape
    assert ShapeValidator().validate(shape, r.endpoint_config) == []


def test_catalog_instances_all_have_nvme():
    """So every plan today uses the instance store (no VolumeSizeInGB is rendered)."""
    from lmikit.catalog._instances import INSTANCES

    assert all(get_instance(name).has_nvme for name in INSTANCES)


@pytest.mark.parametrize(("model_id", "instance", "tp"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "ml.g6.2xlarge", 1),
    ("Qwen/Qwen3-VL-8B-Instruct", "ml.g6e.xlarge", 1),
    ("meta-llama/Llama-3.1-70B-Instruct", "ml.g6e.12xlarge", 4)])
def test_default_max_model_len_keeps_a_tenth_of_the_pool_estimate_free(model_id, instance, tp):
    """Without engine.max_model_len: min(the model's limit, 90% of the estimated KV pool).
    The estimate runs up to 9% above the pools vLLM measured (docs/planner-model.md), and vLLM
    refuses to start when one sequence of max_model_len does not fit the pool it measures
    (vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory)."""
    p = plan(model_id, instance, tp=tp, request_tokens=4000, mode="off")
    assert p.max_model_len < p.gpu_kv_capacity_tokens  # these models' limits exceed the pool
    assert p.max_model_len == int(0.9 * p.gpu_kv_capacity_tokens)


def test_max_model_len_set_near_the_pool_is_warned_and_the_safe_value_named():
    base = plan("meta-llama/Llama-3.1-8B-Instruct", "ml.g6.2xlarge", request_tokens=4000,
                mode="off")
    pool = base.gpu_kv_capacity_tokens
    near = plan("meta-llama/Llama-3.1-8B-Instruct", "ml.g6.2xlarge", request_tokens=4000,
                mode="off", max_model_len=pool)
    assert any(f"engine.max_model_len {pool} is over 90% of the estimated KV pool" in w
               and f"at most {int(0.9 * pool)} is safe" in w for w in near.warnings)
    safe = plan("meta-llama/Llama-3.1-8B-Instruct", "ml.g6.2xlarge", request_tokens=4000,
                mode="off", max_model_len=int(0.9 * pool))
    assert not any("max_model_len" in w for w in safe.warnings)
