"""Size LMCache at container start from the baked-in plan and the host's real facts.

Pure: :func:`autoconfigure` maps (:class:`RuntimePlan`, :class:`HostFacts`) to the LMCache
config and environment; the arithmetic is the planner's (``lmikit.sizing``, copied into
the image). Better than LMI's own ``OPTION_LMCACHE_AUTO_CONFIG``, which sizes from the
whole host's memory (wrong under an inference component's cgroup limit) and the TOTAL size
of /tmp (not its free space, and whether or not it is NVMe).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmikit import sizing
from lmikit_runtime.hostfacts import HostFacts

TIERS = ("none", "cpu", "cpu+disk", "remote")
MIN_TIER_GB = 1.0  # below this a tier is not worth its bookkeeping (as the planner)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


class ConfigError(Exception):
    """The plan cannot fit this host; the message says what to change."""


@dataclass(frozen=True)
class RuntimePlan:
    """What the SDK's plan fixed at deploy time (env ``LMIKIT_PLAN``, JSON)."""

    tier: str = "cpu"
    weight_bytes: int = 0
    copies: int = 1
    tp: int | None = None  # None: every visible GPU ("max")
    chunk_size: int = 256
    cpu_size_gb: float | None = None  # None: as large as fits
    disk_size_gb: float | None = None
    disk_path: str = "/tmp/lmcache/"
    remote_url: str | None = None
    base_config: dict[str, Any] = field(default_factory=dict)  # the planned LMCache file


@dataclass(frozen=True)
class RuntimeConfig:
    lmcache: dict[str, Any]
    env: dict[str, str]
    log: list[str]


def autoconfigure(plan: RuntimePlan, facts: HostFacts, config_path: str) -> RuntimeConfig:
    """LMCache config + environment for this container; raises :class:`ConfigError`."""
    log: list[str] = [f"host facts: {facts.summary()}"]
    if plan.tier not in TIERS:
        raise ConfigError(f"LMIKIT_PLAN tier {plan.tier!r} is not one of {TIERS}")
    tp = plan.tp or facts.gpus
    if tp < 1:
        raise ConfigError("no GPU is visible to this container; give the inference component "
                          "NumberOfAcceleratorDevicesRequired >= 1")
    if facts.gpus and tp > facts.gpus:
        raise ConfigError(f"tensor parallel degree {tp} needs {tp} GPUs but this container "
                          f"sees {facts.gpus}; set engine.tensor_parallel_degree <= "
                          f"{facts.gpus} or request {tp} accelerators per copy")
    if plan.tier == "none":
        log.append("LMCache is off for this deployment (tier: none)")
        return RuntimeConfig({}, {"OPTION_LMCACHE_AUTO_CONFIG": "false"}, log)

    if plan.weight_bytes == 0:
        log.append("weights size unknown (no LMIKIT_PLAN weight_bytes, none in the model dir): "
                   f"the host reserve is its {sizing.HOST_RESERVE_FRACTION:.0%} floor")
    cpu = sizing.container_cache_budget(
        mem_total=facts.mem_total, mem_available=facts.mem_available,
        cgroup_limit=facts.cgroup_limit, cgroup_usage=facts.cgroup_usage,
        weight_bytes=plan.weight_bytes, copies=plan.copies, tp=tp)
    budget_gb = sizing.floor_gb_tenth(cpu.per_worker_bytes)
    if budget_gb < MIN_TIER_GB:
        raise ConfigError(
            f"no host memory is left for LMCache's CPU tier: the {cpu.bound} leaves "
            f"{cpu.per_worker_bytes / sizing.GIB:.1f} GiB per worker ({tp} worker(s), weights "
            f"{plan.weight_bytes / sizing.GIB:.1f} GiB; {facts.summary()}). Raise the "
            "component's memory (MinMemoryRequiredInMb), lower instance.copies_per_instance, "
            "or set kv_cache.mode: off")
    if plan.cpu_size_gb is not None:
        if plan.cpu_size_gb > budget_gb:
            raise ConfigError(
                f"kv_cache.cpu_size_gb {plan.cpu_size_gb:g} does not fit: this container can pin "
                f"{budget_gb} GB per worker ({cpu.bound}; {facts.summary()}). Lower "
                f"kv_cache.cpu_size_gb to <= {budget_gb} or use 'auto'")
        cpu_gb = plan.cpu_size_gb
    else:
        cpu_gb = budget_gb
    log.append(f"LMCache CPU tier: {cpu_gb} GB per worker x {tp} worker(s) (limited by "
               f"{cpu.bound}; budget {budget_gb} GB)")

    cfg: dict[str, Any] = dict(plan.base_config)
    planned_extra = cfg.get("extra_config") or {}  # rebuilt below from what still applies
    for key in ("local_disk", "max_local_disk_size", "extra_config", "remote_url",
                "remote_serde", "local_device"):
        cfg.pop(key, None)
    cfg.update({"chunk_size": plan.chunk_size, "local_cpu": True,
                "max_local_cpu_size": cpu_gb})
    cfg.pop("enable_lazy_memory_allocator", None)  # ignored by LMCache >= 0.3.13
    cfg.setdefault("save_unfull_chunk", False)
    if "first_rank_max_local_cpu_size" in planned_extra:
        # MLA at TP > 1: LMCache stores from the first rank only (save_only_first_rank), so
        # that rank gets every rank's share
        first_gb = round(cpu_gb * tp, 1)
        cfg["extra_config"] = {"first_rank_max_local_cpu_size": first_gb}
        log.append(f"LMCache stores MLA from the first rank only: {first_gb} GB there "
                   "(first_rank_max_local_cpu_size)")
    env = {"OPTION_LMCACHE_AUTO_CONFIG": "false", "OPTION_LMCACHE_CONFIG_FILE": config_path,
           "LMCACHE_CONFIG_FILE": config_path, "LMCACHE_MAX_LOCAL_CPU_SIZE": f"{cpu_gb:g}",
           "LMCACHE_LOCAL_CPU": "True"}

    if plan.tier == "cpu+disk":
        disk_gb, why = _disk_tier(plan, facts, tp)
        if disk_gb:
            cfg["local_disk"] = "file://" + _dir(plan.disk_path)
            cfg["max_local_disk_size"] = disk_gb
            cfg.setdefault("extra_config", {})["use_odirect"] = True
            env["LMCACHE_LOCAL_DISK"] = cfg["local_disk"]
            env["LMCACHE_MAX_LOCAL_DISK_SIZE"] = f"{disk_gb:g}"
            log.append(f"LMCache disk tier: {disk_gb} GB per worker at {cfg['local_disk']} "
                       "(O_DIRECT)")
        else:
            log.append(f"LMCache disk tier OFF, running CPU-only: {why}")
    if plan.tier == "remote":
        if not plan.remote_url:
            raise ConfigError("tier 'remote' needs kv_cache.remote_url")
        cfg["remote_url"] = plan.remote_url
        cfg["remote_serde"] = "naive"
        if plan.remote_url.startswith("s3://"):
            # LMCache's S3 connector asserts extra_config.s3_region; the planned file has it
            region = planned_extra.get("s3_region")
            if not region:
                raise ConfigError("an s3:// kv_cache.remote_url needs extra_config.s3_region in "
                                  "the planned LMCache file; re-render it with lmikit")
            cfg.setdefault("extra_config", {})["s3_region"] = region
        log.append("LMCache remote tier: " + plan.remote_url.split("@")[-1])
    return RuntimeConfig(cfg, env, log)


def _dir(path: str) -> str:
    return "/" + path.strip("/") + "/"


def _disk_tier(plan: RuntimePlan, facts: HostFacts, tp: int) -> tuple[float, str]:
    """(GB per worker, reason when 0). ``auto`` takes what this host gives, or turns the tier
    off with the reason; a fixed ``disk_size_gb`` the host cannot give is refused."""
    budget_gb, why = _disk_budget(plan, facts, tp)
    wanted = plan.disk_size_gb
    if wanted is None:
        return (budget_gb, "") if budget_gb >= MIN_TIER_GB else (0.0, why)
    if budget_gb >= MIN_TIER_GB and wanted <= budget_gb:
        return wanted, ""
    fix = (f"Lower kv_cache.disk_size_gb to <= {budget_gb:g} or use 'auto'"
           if budget_gb >= MIN_TIER_GB else "Use kv_cache.disk_size_gb 'auto' (the tier is "
           "then off on such a host) or kv_cache.mode 'cpu'")
    raise ConfigError(f"kv_cache.disk_size_gb {wanted:g} does not fit: {why}. {fix}")


def _disk_budget(plan: RuntimePlan, facts: HostFacts, tp: int) -> tuple[float, str]:
    """(GB per worker this host gives, how that came about). The path's free space, less the
    weights of every copy (LMI downloads them into /tmp after this step:
    ``sizing.weights_on_disk``), split across every worker of every copy."""
    disk = facts.disk
    if disk is None:
        return 0.0, f"{plan.disk_path} is on no known mount"
    if not disk.is_nvme:
        return 0.0, f"{plan.disk_path} is not on local NVMe ({disk.reason})"
    reserve = sizing.weights_on_disk(plan.weight_bytes, plan.copies)
    budget = sizing.disk_cache_budget(max(0, disk.free_bytes - reserve), disk.total_bytes,
                                      plan.copies, tp, is_nvme=True)
    budget_gb = sizing.floor_gb_tenth(budget.per_worker_bytes)
    return budget_gb, (
        f"{disk.mount_point} gives {budget_gb:g} GB per worker: "
        f"{disk.free_bytes / sizing.GIB:.1f} GiB free of {disk.total_bytes / sizing.GIB:.1f} "
        f"GiB, {reserve / sizing.GIB:.1f} GiB of it kept for {plan.copies} copies' weights, "
        f"{plan.copies} copies x {tp} workers" + (f"; {budget.reason}" if budget.reason else ""))


# --- the plan baked into the environment ---------------------------------------------------
def runtime_plan_from_env(env: Mapping[str, str], model_dir: str | Path) -> RuntimePlan:
    """Read ``LMIKIT_PLAN`` (JSON), else derive a plan from LMI's options and model dir.

    ``LMIKIT_PLAN`` keys: tier, weight_bytes, copies, tp, chunk_size, cpu_size_gb,
    disk_size_gb (numbers or "auto"), disk_path, remote_url. Without it the planned LMCache
    file (``OPTION_LMCACHE_CONFIG_FILE``) gives the tier and sizes are "auto".
    """
    model_dir = Path(model_dir)
    base = _planned_file(env, model_dir)
    raw = env.get("LMIKIT_PLAN")
    if raw:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"LMIKIT_PLAN is not JSON: {exc}") from exc
    else:
        data = {}
    tp_raw = str(data.get("tp") or env.get("OPTION_TENSOR_PARALLEL_DEGREE") or "max")
    tier = data.get("tier") or _tier_of(base, env)
    weights = data.get("weight_bytes")
    if weights is None:
        weights = _weights_in(model_dir)
    return RuntimePlan(
        tier=tier, weight_bytes=int(weights),
        copies=int(data.get("copies") or env.get("LMIKIT_COPIES_PER_INSTANCE") or 1),
        tp=None if tp_raw == "max" else int(tp_raw),
        chunk_size=int(data.get("chunk_size") or base.get("chunk_size") or 256),
        cpu_size_gb=_size(data.get("cpu_size_gb")),
        disk_size_gb=_size(data.get("disk_size_gb")),
        disk_path=data.get("disk_path") or _path_of(base.get("local_disk")) or "/tmp/lmcache/",
        remote_url=data.get("remote_url") or base.get("remote_url"),
        base_config=base,
    )


def _size(value: Any) -> float | None:
    return None if value in (None, "auto") else float(value)


def _planned_file(env: Mapping[str, str], model_dir: Path) -> dict[str, Any]:
    name = env.get("OPTION_LMCACHE_CONFIG_FILE")
    if not name:
        return {}
    path = model_dir / name  # an absolute name replaces model_dir
    try:
        import yaml
        data = yaml.safe_load(path.read_text())
    except (OSError, ImportError):
        return {}
    except Exception as exc:  # yaml.YAMLError, without importing yaml at module level
        raise ConfigError(f"the planned LMCache file {path} is not valid YAML: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _tier_of(base: dict[str, Any], env: Mapping[str, str]) -> str:
    if not base and not env.get("OPTION_KV_TRANSFER_CONFIG"):
        return "none"
    if base.get("remote_url"):
        return "remote"
    return "cpu+disk" if base.get("local_disk") else "cpu"


def _path_of(local_disk: Any) -> str | None:
    if isinstance(local_disk, str) and local_disk.startswith("file://"):
        return local_disk[len("file://"):]
    return None


def _weights_in(model_dir: Path) -> int:
    """Weights shipped in the model dir (0 when they come from the Hub at start)."""
    if not model_dir.is_dir():
        return 0
    return sum(p.stat().st_size for p in model_dir.rglob("*")
               if p.suffix in WEIGHT_SUFFIXES and p.is_file()
               and "adapters" not in p.relative_to(model_dir).parts)
