"""Runtime LMCache sizing on synthetic hosts, including where LMI's own auto-config oversizes.

``lmi_auto_cpu_per_gpu`` / ``lmi_auto_disk_per_gpu`` restate LMI's published formula
(REFERENCE section 5) so each comparison shows the case it gets wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from lmikit_runtime.autoconfig import (
    ConfigError,
    RuntimePlan,
    autoconfigure,
    runtime_plan_from_env,
)
from lmikit_runtime.hostfacts import DiskFacts, Host, HostFacts

from lmikit import sizing
from tests.container.conftest import GIB, INSTANCE_NVME, OVERLAY_ROOT, fake_statvfs, make_root

CFG = "/tmp/lmikit/lmcache_config.yaml"
WEIGHTS_8B = 16 * 10**9


def lmi_auto_cpu_per_gpu(available: int, model_bytes: int, tp: int) -> int:
    return (available - max(2 * model_bytes, int(0.2 * available))) // tp


def lmi_auto_disk_per_gpu(total: int, model_bytes: int, tp: int) -> int:
    return (total - max(2 * model_bytes, int(0.2 * total))) // tp


def facts(mem_total: float = 1152, mem_available: float = 1100, limit: float | None = None,
          gpus: int = 8, disk: DiskFacts | None = None) -> HostFacts:
    return HostFacts(mem_total=int(mem_total * GIB), mem_available=int(mem_available * GIB),
                     cgroup_version=2, cgroup_limit=None if limit is None else int(limit * GIB),
                     cgroup_usage=0, gpus=gpus, disk=disk)


def nvme(free: float, total: float, is_nvme: bool = True) -> DiskFacts:
    return DiskFacts(path="/tmp/lmcache/", mount_point="/tmp", fs_type="xfs",
                     device="nvme1n1", free_bytes=int(free * GIB), total_bytes=int(total * GIB),
                     is_nvme=is_nvme, reason="" if is_nvme else "EBS volume")


def test_autoconfig_under_cgroup_limit_never_exceeds_it() -> None:
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, copies=4, tp=1)
    host = facts(limit=96, gpus=1)
    cfg = autoconfigure(plan, host, CFG)
    cache = cfg.lmcache["max_local_cpu_size"] * GIB
    assert cache + 2 * WEIGHTS_8B + sizing.WORKER_HOST_OVERHEAD_GIB * GIB <= 96 * GIB
    assert "limited by cgroup limit" in cfg.log[-1]
    # LMI sizes from the whole host's available memory: ~11x the container's limit.
    assert lmi_auto_cpu_per_gpu(host.mem_available, WEIGHTS_8B, 1) > 96 * GIB


def test_autoconfig_disk_from_free_not_total_space() -> None:
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, copies=1, tp=8)
    disk = nvme(free=800, total=7600)
    cfg = autoconfigure(plan, facts(disk=disk), CFG)
    per_worker = cfg.lmcache["max_local_disk_size"]
    assert per_worker * 8 * GIB <= 800 * GIB * sizing.DISK_USABLE_FRACTION
    assert cfg.lmcache["local_disk"] == "file:///tmp/lmcache/"
    assert cfg.env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == f"{per_worker:g}"
    # LMI sizes from the total: 7x more than the free space allows.
    assert lmi_auto_disk_per_gpu(disk.total_bytes, WEIGHTS_8B, 8) * 8 > disk.free_bytes


def test_autoconfig_nearly_full_disk_falls_back_to_cpu() -> None:
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=8)
    cfg = autoconfigure(plan, facts(disk=nvme(free=300, total=7600)), CFG)
    assert "local_disk" not in cfg.lmcache
    assert any("disk tier OFF, running CPU-only" in line and "300.0 GiB free" in line
               for line in cfg.log)


def test_autoconfig_non_nvme_falls_back_to_cpu_with_reason() -> None:
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=8)
    cfg = autoconfigure(plan, facts(disk=nvme(free=500, total=1000, is_nvme=False)), CFG)
    assert "LMCACHE_LOCAL_DISK" not in cfg.env
    assert any("not on local NVMe (EBS volume)" in line for line in cfg.log)


def test_autoconfig_disk_tier_keeps_every_copys_weights_free() -> None:
    """Copies on one instance share its disk, and LMI downloads each copy's weights into /tmp
    (HF_HOME, DJL_CACHE_DIR: djl-serving lmi.Dockerfile) after this step: the tier is 90% of
    the free space less every copy's weights (1.1x download slack), over copies x TP workers."""
    weights = 145 * 10**9
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=weights, copies=2, tp=4)
    cfg = autoconfigure(plan, facts(disk=nvme(free=1000, total=3800)), CFG)
    per_worker = cfg.lmcache["max_local_disk_size"] * GIB
    room = 1000 * GIB - 2 * 1.1 * weights
    assert room * 0.9 / 8 - 0.1 * GIB <= per_worker <= room * 0.9 / 8  # floored to 0.1 GB
    assert per_worker * 8 + 2 * 1.1 * weights <= 1000 * GIB


def test_autoconfig_fixed_disk_size_the_host_cannot_give_is_refused() -> None:
    """An explicit kv_cache.disk_size_gb is a promise: no NVMe, or too little of it, stops the
    container with the reason (``auto`` turns the tier off instead)."""
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=8, disk_size_gb=50)
    with pytest.raises(ConfigError, match=r"disk_size_gb 50 does not fit: /tmp/lmcache/ is not "
                                          r"on local NVMe \(EBS volume\)\. Use kv_cache"
                                          r"\.disk_size_gb 'auto'"):
        autoconfigure(plan, facts(disk=nvme(free=500, total=1000, is_nvme=False)), CFG)
    with pytest.raises(ConfigError, match=r"disk_size_gb 50 does not fit: /tmp gives 0 GB"):
        autoconfigure(plan, facts(disk=nvme(free=300, total=7600)), CFG)


def test_autoconfig_explicit_cpu_size_too_big_says_what_to_change() -> None:
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, tp=1, cpu_size_gb=200)
    with pytest.raises(ConfigError, match=r"cpu_size_gb 200 does not fit.*Lower "
                                          r"kv_cache.cpu_size_gb to <= \d+"):
        autoconfigure(plan, facts(limit=96, gpus=1), CFG)


def test_autoconfig_explicit_disk_size_too_big_is_refused() -> None:
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=1, disk_size_gb=900)
    with pytest.raises(ConfigError, match="disk_size_gb 900 does not fit"):
        autoconfigure(plan, facts(gpus=1, disk=nvme(free=800, total=3800)), CFG)


def test_autoconfig_no_memory_left_is_refused() -> None:
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, tp=1)
    with pytest.raises(ConfigError, match="no host memory is left.*MinMemoryRequiredInMb"):
        autoconfigure(plan, facts(limit=34, gpus=1), CFG)


def test_autoconfig_tp_beyond_visible_gpus_is_refused() -> None:
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, tp=4)
    with pytest.raises(ConfigError, match="needs 4 GPUs but this container sees 2"):
        autoconfigure(plan, facts(gpus=2), CFG)


def test_autoconfig_available_memory_caps_later_copies() -> None:
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, copies=2, tp=1)
    cfg = autoconfigure(plan, facts(mem_total=1152, mem_available=300, gpus=1), CFG)
    assert "limited by available memory" in cfg.log[-1]
    assert cfg.lmcache["max_local_cpu_size"] * GIB <= 300 * GIB - 2 * WEIGHTS_8B


def test_autoconfig_tier_none_disables_lmi_auto_config() -> None:
    cfg = autoconfigure(RuntimePlan(tier="none"), facts(), CFG)
    assert cfg.lmcache == {} and cfg.env == {"OPTION_LMCACHE_AUTO_CONFIG": "false"}


def test_autoconfig_writes_config_lmcache_accepts(tmp_path: Path) -> None:
    config_mod = pytest.importorskip("lmcache.v1.config")
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=8)
    cfg = autoconfigure(plan, facts(disk=nvme(free=3000, total=3800)), CFG)
    path = tmp_path / "lmcache.yaml"
    path.write_text(yaml.safe_dump(cfg.lmcache))
    loaded = config_mod.LMCacheEngineConfig.from_file(str(path))
    assert loaded.max_local_disk_size == cfg.lmcache["max_local_disk_size"]
    assert loaded.local_disk == "/tmp/lmcache/"


def test_runtime_plan_from_env_json(tmp_path: Path) -> None:
    env = {"LMIKIT_PLAN": json.dumps({"tier": "cpu+disk", "weight_bytes": 123, "copies": 2,
                                      "tp": 4, "cpu_size_gb": "auto", "disk_size_gb": 50})}
    plan = runtime_plan_from_env(env, tmp_path)
    assert (plan.tier, plan.weight_bytes, plan.copies, plan.tp) == ("cpu+disk", 123, 2, 4)
    assert (plan.cpu_size_gb, plan.disk_size_gb) == (None, 50.0)


def test_runtime_plan_from_planned_file_and_weights(tmp_path: Path) -> None:
    (tmp_path / "lmcache_config.yaml").write_text(yaml.safe_dump({
        "chunk_size": 512, "local_cpu": True, "max_local_cpu_size": 40.0,
        "local_disk": "file:///opt/dlami/nvme/lmcache/", "max_local_disk_size": 100.0}))
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    env = {"OPTION_LMCACHE_CONFIG_FILE": "lmcache_config.yaml",
           "OPTION_TENSOR_PARALLEL_DEGREE": "max"}
    plan = runtime_plan_from_env(env, tmp_path)
    assert (plan.tier, plan.chunk_size, plan.tp) == ("cpu+disk", 512, None)
    assert plan.disk_path == "/opt/dlami/nvme/lmcache/" and plan.weight_bytes == 1000


def test_autoconfig_end_to_end_from_synthetic_host(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=1152, mem_available_gib=1100,
                     cgroup=("v1", 9223372036854771712, 0), gpus=8,
                     mounts=[OVERLAY_ROOT, ("259:1", "/tmp", "xfs", "/dev/nvme1n1")],
                     models={"259:1": INSTANCE_NVME})
    host = Host(root, env={}, statvfs=fake_statvfs({"/": (50 * GIB, 100 * GIB),
                                                   "/tmp": (3000 * GIB, 3800 * GIB)}))
    plan = RuntimePlan(tier="cpu+disk", weight_bytes=WEIGHTS_8B, tp=None)
    cfg = autoconfigure(plan, host.facts(plan.disk_path), CFG)
    assert cfg.lmcache["max_local_cpu_size"] == sizing.floor_gb_tenth(
        sizing.host_cache_budget(1152 * GIB, WEIGHTS_8B, 1, 8).per_worker_bytes)
    assert cfg.lmcache["max_local_disk_size"] > 300


def test_s3_remote_tier_keeps_the_planned_region() -> None:
    """The runtime rewrite keeps extra_config.s3_region, which LMCache's S3 connector asserts
    (s3_adapter.py), and refuses a planned file without it."""
    url = "s3://kv-cache.s3.eu-west-1.amazonaws.com"
    plan = RuntimePlan(tier="remote", weight_bytes=WEIGHTS_8B, tp=1, remote_url=url,
                       base_config={"remote_url": url,
                                    "extra_config": {"s3_region": "eu-west-1"}})
    cfg = autoconfigure(plan, facts(), CFG)
    assert cfg.lmcache["remote_url"] == url
    assert cfg.lmcache["extra_config"] == {"s3_region": "eu-west-1"}
    bare = RuntimePlan(tier="remote", weight_bytes=WEIGHTS_8B, tp=1, remote_url=url)
    with pytest.raises(ConfigError, match="needs extra_config.s3_region"):
        autoconfigure(bare, facts(), CFG)


def test_mla_first_rank_gets_every_ranks_cpu_share_at_run_time() -> None:
    """A planned file with first_rank_max_local_cpu_size (MLA at TP > 1; LMCache stores
    from the first rank only) is rewritten with the run-time per-worker size x TP."""
    plan = RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, tp=8,
                       base_config={"extra_config": {"first_rank_max_local_cpu_size": 1.0}})
    cfg = autoconfigure(plan, facts(), CFG)
    per_worker = cfg.lmcache["max_local_cpu_size"]
    assert cfg.lmcache["extra_config"] == {
        "first_rank_max_local_cpu_size": round(per_worker * 8, 1)}
    plain = autoconfigure(RuntimePlan(tier="cpu", weight_bytes=WEIGHTS_8B, tp=8), facts(), CFG)
    assert "extra_config" not in plain.lmcache
