"""Capacity planner: model KV geometry x instance hardware -> tiers, sizes, predicted TTFT.

>>> p = plan("Qwen/Qwen2.5-7B-Instruct", "ml.p4de.24xlarge", context_tokens=2_000_000)
>>> p.kv_bytes_per_token, p.tier
(57344, 'cpu')
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit import sizing
from lmikit.catalog import (
    InstanceType,
    ModelGeometry,
    get_instance,
    get_model,
    max_model_len_problem,
)
from lmikit.errors import PlanError
from lmikit.planner import _fit as fit
from lmikit.planner import _startup as su

if TYPE_CHECKING:
    from lmikit.sim import Coefficients, EngineModel
    from lmikit.spec import DeploymentSpec

Tier = str  # "none" | "cpu" | "cpu+disk" | "remote"
# why auto plans no LMCache tier for DeepSeek sparse attention, and an explicit one is warned
_DSA_UNVERIFIED = ("which LMCache is not verified with in LMI's vLLM (an indexer key cache per "
                   "layer and the fp8_ds_mla layout)")


@dataclass(frozen=True)
class Costs:
    """Coefficients the TTFT block is costed with instead of the simulator's defaults.

    ``source`` names what they were fitted to (a ``lmikit bench --output`` file) and
    ``fitted`` which of them the fit set; the plan's assumptions mark those, and state the
    rest as the defaults they are.
    """

    coefficients: Coefficients
    source: str
    fitted: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanInputs:
    model_id: str
    instance_type: str
    tp: int = 1
    copies: int = 1
    context_tokens: int = 0
    request_tokens: int = 10_000
    suffix_tokens: int = 100
    concurrency: int = 4
    chunk_size: int = 256
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    weight_dtype: str = "auto"
    mode: str = "auto"
    cpu_size_gb: float | str = "auto"
    disk_size_gb: float | str = "auto"
    disk_path: str = "/tmp/lmcache/"
    remote_url: str | None = None
    in_memory_only: bool = False
    max_model_len: int | None = None
    config_path: str | None = None
    weights_source: str = "hub"
    costs: Costs | None = None


@dataclass(frozen=True)
class Predicted:
    ttft_miss_s: float
    ttft_hit_s: dict[str, float | None]
    speedup: dict[str, float | None]
    matched_tokens: int
    remainder_tokens: int


@dataclass(frozen=True)
class Plan:
    model_id: str
    instance_type: str
    tp: int
    copies: int
    kv_bytes_per_token: int
    weight_bytes: int
    gpu_kv_capacity_tokens: int
    cpu_capacity_tokens: int
    disk_capacity_tokens: int
    working_set_tokens: int
    tier: Tier
    lmcache: dict[str, Any]
    predicted: Predicted
    max_model_len: int
    min_memory_mb: int
    cpu_cores: float
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    startup: su.StartupEstimate | None = None
    volume: su.Volume | None = None
    # config.json "architectures" (model.config_path's, else the catalog's); empty: none named
    architectures: tuple[str, ...] = ()

    @property
    def uses_lmcache(self) -> bool:
        return self.tier != "none"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["predicted"] = asdict(self.predicted)
        data["startup"] = self.startup.to_dict() if self.startup else None
        return data


def plan_spec(spec: DeploymentSpec, base_dir: str | Path | None = None, *,
              costs: Costs | None = None) -> Plan:
    """Plan a loaded spec; ``base_dir`` resolves ``model.config_path`` (the spec's folder).
    ``costs``: predict TTFT with fitted coefficients (``lmikit plan --calibrate``).

    Raises :class:`lmikit.errors.SpecError` on ``engine.lmi_version`` when the pinned LMI is
    older than a feature the spec uses (see :mod:`lmikit.planner`)."""
    from lmikit.planner._versions import check_lmi_version, model_architectures

    config_path = spec.model.config_path
    if config_path and base_dir is not None and not Path(config_path).is_absolute():
        config_path = str(Path(base_dir) / config_path)
    result = _plan(PlanInputs(
        model_id=spec.model.catalog_id,
        instance_type=spec.instance.type,
        tp=spec.engine.tensor_parallel_degree,
        copies=spec.instance.copies_per_instance,
        context_tokens=spec.workload.reused_context_tokens,
        request_tokens=spec.workload.typical_request_tokens,
        suffix_tokens=spec.workload.unique_suffix_tokens,
        concurrency=spec.workload.concurrency,
        chunk_size=spec.kv_cache.chunk_size,
        gpu_memory_utilization=spec.engine.gpu_memory_utilization,
        kv_cache_dtype=spec.engine.kv_cache_dtype,
        weight_dtype=spec.model.dtype,
        mode=spec.kv_cache.mode,
        cpu_size_gb=spec.kv_cache.cpu_size_gb,
        disk_size_gb=spec.kv_cache.disk_size_gb,
        disk_path=spec.kv_cache.disk_path,
        remote_url=spec.kv_cache.remote_url,
        in_memory_only=spec.kv_cache.in_memory_only,
        max_model_len=spec.engine.max_model_len,
        config_path=config_path,
        weights_source=su.weights_source(spec),
        costs=costs,
    ))
    check_adapter_sources(spec, result.uses_lmcache)
    architectures = tuple(model_architectures(spec.model.catalog_id, config_path))
    # Refuse an LMI version older than a feature or the model needs (engine.lmi_version).
    check_lmi_version(spec, uses_lmcache=result.uses_lmcache, architectures=architectures)
    return replace(result, architectures=architectures)


def isolates_base(spec: DeploymentSpec, uses_lmcache: bool) -> bool:
    """Whether the base's model.py must drop client cache tags and adapter picks."""
    return spec.lora_enabled and uses_lmcache


def check_adapter_sources(spec: DeploymentSpec, uses_lmcache: bool) -> None:
    """Refuse ``s3://`` adapter artifacts while LMCache is on (lmikit cannot tag them)."""
    if not uses_lmcache:
        return
    remote = [a.name for a in spec.adapters if a.source.startswith("s3://")]
    if remote:
        raise PlanError(
            f"adapters {', '.join(map(repr, remote))}: an s3:// source cannot be used while "
            "the KV cache (LMCache) is on. LMCache's cache key does not include the LoRA "
            "adapter, so lmikit packages each adapter itself with a model.py that tags its "
            "requests; an uploaded artifact would share KV with the base model. Give a local "
            "adapter directory as adapters[].source, or set kv_cache.mode: \"off\"")


def plan(model_id: str, instance_type: str, *, tp: int = 1, copies: int = 1,
         context_tokens: int = 0, request_tokens: int = 10_000, **kwargs: Any) -> Plan:
    """What-if planning without a spec; ``kwargs`` are :class:`PlanInputs` fields
    (``costs=Costs(...)`` predicts TTFT with fitted coefficients)."""
    from lmikit.spec import check_arguments

    for name, value, low in (("tp", tp, 1), ("copies", copies, 1),
                             ("context_tokens", context_tokens, 0),
                             ("request_tokens", request_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PlanError(f"{name} must be a whole number >= {low} (got {value!r})")
    check_arguments({"tp": tp, "copies": copies, **kwargs})  # as the spec's fields are checked
    kwargs.setdefault("suffix_tokens", min(100, request_tokens))
    return _plan(PlanInputs(model_id, instance_type, tp, copies, context_tokens,
                            request_tokens, **kwargs))


def _plan(i: PlanInputs) -> Plan:
    inst = get_instance(i.instance_type)
    geo = get_model(i.model_id, i.config_path) if i.config_path else get_model(i.model_id)
    warnings: list[str] = []
    _check_fit(i, inst, geo)

    kv_dtype_bytes = 1 if i.kv_cache_dtype == "fp8" else 2
    weight_dtype = geo.weight_dtype if i.weight_dtype == "auto" else i.weight_dtype
    weight_bytes = geo.weight_bytes_for(weight_dtype)
    kv_bpt = geo.kv_bytes_per_token(kv_dtype_bytes)
    replication = geo.kv_replication(i.tp)

    _check_context(i, geo, warnings)
    gpu_tokens = _check_holds(i, inst, geo, weight_bytes, kv_dtype_bytes)
    max_len = i.max_model_len or sizing.default_max_model_len(
        geo.max_position_embeddings or 32768, gpu_tokens)
    safe_len = sizing.default_max_model_len(i.max_model_len or 0, gpu_tokens)
    if i.max_model_len and i.max_model_len > safe_len:
        warnings.append(
            f"engine.max_model_len {i.max_model_len} is over "
            f"{sizing.MAX_MODEL_LEN_POOL_SHARE:.0%} of the estimated KV pool ({gpu_tokens} "
            "tokens), which can run a few percent above the pool vLLM measures at start-up; "
            "vLLM will not start if one sequence of max_model_len does not fit it: at most "
            f"{safe_len} is safe")
    in_flight = i.concurrency * i.request_tokens
    if in_flight > gpu_tokens:
        warnings.append(f"{i.concurrency} requests of {i.request_tokens} tokens need "
                        f"{in_flight} tokens of KV but one copy holds {gpu_tokens}; requests "
                        "will queue")

    host = sizing.host_cache_budget(int(inst.host_memory_gib * sizing.GIB), weight_bytes,
                                    i.copies, i.tp)
    volume = su.instance_volume(inst.nvme_gb, weight_bytes, i.copies)
    problem = su.volume_problem(volume)
    if problem:
        raise PlanError(f"{inst.name}: {problem}")
    # The disk tier gets what every copy's downloaded weights leave of the NVMe: the sizes
    # written into the LMCache file must fit without the container's own start-up sizing.
    disk = sizing.disk_cache_budget(volume.free_bytes, int(inst.nvme_gb * 1e9),
                                    i.copies, i.tp, is_nvme=inst.has_nvme)
    # MLA at TP > 1: LMCache stores on the first rank only, which is given the copy's whole
    # CPU share (first_rank_max_local_cpu_size); the disk tier has no such key, so that rank
    # keeps one worker's share of the NVMe
    first_rank_only = geo.lmcache_replication(i.tp) < replication
    stored_bytes = kv_bpt * geo.lmcache_replication(i.tp)  # one cached token, all ranks
    disk_ranks = 1 if first_rank_only else i.tp  # ranks whose disk share holds the copy's KV
    cpu_tokens = host.per_worker_bytes * i.tp // stored_bytes
    disk_tokens = disk.per_worker_bytes * disk_ranks // stored_bytes
    # an explicit size below what the host or the NVMe can give is what the tier holds
    if i.cpu_size_gb != "auto":
        cpu_tokens = min(cpu_tokens, int(float(i.cpu_size_gb) * sizing.GIB) * i.tp
                         // stored_bytes)
    if i.disk_size_gb != "auto":
        disk_tokens = min(disk_tokens, int(float(i.disk_size_gb) * sizing.GIB) * disk_ranks
                          // stored_bytes)

    if geo.sparse_attention and i.mode == "auto":
        # vLLM keeps a second, indexer key cache per layer for DeepSeek sparse attention, and
        # its fp8 KV layout (fp8_ds_mla) is not the (layers, chunk, heads, head size) shape
        # LMCache 0.5.6's vLLM integration stores (integration/vllm/utils.py); with the vLLM
        # in LMI an LMCache tier is unverified, so auto does not pick one
        warnings.append(f"{geo.model_id} uses DeepSeek sparse attention, {_DSA_UNVERIFIED}: "
                        "planned without an LMCache tier (GPU prefix cache only); set "
                        "kv_cache.mode to ask for one anyway")
        tier = "none"
    else:
        tier = _decide_tier(i, inst, gpu_tokens, in_flight, host, cpu_tokens, disk_tokens,
                            warnings)
        if geo.sparse_attention and tier != "none":
            warnings.append(f"kv_cache.mode {i.mode!r} puts LMCache in front of "
                            f"{geo.model_id}'s DeepSeek sparse attention, {_DSA_UNVERIFIED}: "
                            "test hits for correct output before relying on it")
    lmcache = _lmcache_sizes(i, tier, host, disk)
    if first_rank_only and tier != "none":
        lmcache["first_rank_max_local_cpu_size_gb"] = round(
            lmcache["max_local_cpu_size_gb"] * i.tp, 1)
    cpu_tokens_used = int(lmcache["max_local_cpu_size_gb"] * sizing.GIB) * i.tp // stored_bytes
    disk_tokens_used = int(lmcache["max_local_disk_size_gb"] * sizing.GIB) * disk_ranks \
        // stored_bytes

    engine = _engine(i, inst, geo, weight_bytes)
    predicted = _predict(i, engine, inst, lmcache=tier != "none", remote=tier == "remote")
    cache_bytes_per_copy = int(lmcache["max_local_cpu_size_gb"] * sizing.GIB) * i.tp
    min_memory = (cache_bytes_per_copy + weight_bytes
                  + int(sizing.WORKER_HOST_OVERHEAD_GIB * sizing.GIB) * i.tp)
    min_memory_mb = max(128, math.ceil(min_memory / 2**20))
    if min_memory_mb * i.copies > inst.host_memory_gib * 1024:
        fix = ("lower kv_cache.cpu_size_gb or instance.copies_per_instance"
               if cache_bytes_per_copy else
               "the weights and the worker overhead alone do not fit: choose an instance type "
               "with more memory" + (" or fewer copies per instance" if i.copies > 1 else ""))
        copies = "1 copy needs" if i.copies == 1 else f"{i.copies} copies need"
        raise PlanError(f"{copies} {min_memory_mb * i.copies} MB of host memory "
                        f"but {inst.name} has {int(inst.host_memory_gib * 1024)} MB; {fix}")
    cpu_cores = float(max(1, inst.vcpus // i.copies - 1))
    # the largest worker's CPU tier, pinned whole at start (su.PIN_BYTES_PER_S)
    pinned_gib = max(lmcache["max_local_cpu_size_gb"],
                     lmcache.get("first_rank_max_local_cpu_size_gb") or 0.0)
    start = su.estimate_startup(weight_bytes, _source(i.weights_source), inst.network_gbit,
                                pinned_bytes=int(pinned_gib * sizing.GIB))
    late = su.startup_warning(start)

    return Plan(
        model_id=geo.model_id, instance_type=inst.name, tp=i.tp, copies=i.copies,
        kv_bytes_per_token=kv_bpt, weight_bytes=weight_bytes,
        gpu_kv_capacity_tokens=gpu_tokens, cpu_capacity_tokens=cpu_tokens_used,
        disk_capacity_tokens=disk_tokens_used, working_set_tokens=i.context_tokens,
        tier=tier, lmcache=lmcache, predicted=predicted, max_model_len=max_len,
        min_memory_mb=min_memory_mb, cpu_cores=cpu_cores,
        assumptions=_assumptions(i, inst, geo, replication, volume, tier, engine),
        warnings=warnings + [f"model: {n}" for n in geo.notes if "sliding" in n]
        + ([late] if late else []),
        startup=start, volume=volume,
    )


def _source(name: str) -> su.WeightsSource:
    if name == "s3":
        return "s3"
    if name == "s3-sagemaker":
        return "s3-sagemaker"
    return "hub"


def _check_fit(i: PlanInputs, inst: InstanceType, geo: ModelGeometry) -> None:
    if i.tp * i.copies > inst.gpu_count:
        raise PlanError(
            f"engine.tensor_parallel_degree {i.tp} x instance.copies_per_instance {i.copies} "
            f"needs {i.tp * i.copies} GPUs but {inst.name} has {inst.gpu_count}")
    if geo.num_attention_heads % i.tp:
        valid = [t for t in (1, 2, 4, 8) if geo.num_attention_heads % t == 0
                 and t <= inst.gpu_count]
        raise PlanError(f"engine.tensor_parallel_degree {i.tp} must divide the model's "
                        f"{geo.num_attention_heads} attention heads; valid: {valid}")


def _check_context(i: PlanInputs, geo: ModelGeometry, warnings: list[str]) -> None:
    """engine.max_model_len within the model's own limit (vLLM refuses longer at start-up);
    a warning, not silence, where the model's config gives no limit."""
    if not i.max_model_len:
        return
    if not geo.context_limit:
        warnings.append(f"engine.max_model_len {i.max_model_len} was not checked against "
                        f"{geo.model_id}'s own limit: {geo.source or 'its config'} gives none "
                        "of max_position_embeddings, n_positions, max_seq_len or seq_length")
        return
    problem = max_model_len_problem(i.max_model_len, geo.context_limit, geo.context_limit_key,
                                    geo.model_id, geo.source)
    if problem:
        raise PlanError(problem)


def _check_holds(i: PlanInputs, inst: InstanceType, geo: ModelGeometry, weight_bytes: int,
                 kv_dtype_bytes: int) -> int:
    """One copy's GPU KV capacity in tokens. It must hold engine.max_model_len when set, else
    one typical request; a PlanError says why not and what would (lmikit.planner._fit)."""
    if i.max_model_len:
        need = fit.Need(i.max_model_len, "engine.max_model_len", max_model_len=True)
    else:
        need = fit.Need(min(i.request_tokens, geo.max_position_embeddings or i.request_tokens),
                        "one typical request (workload.typical_request_tokens)")
    return fit.check_holds(geo, inst, tp=i.tp, weight_bytes=weight_bytes, need=need,
                           kv_dtype_bytes=kv_dtype_bytes,
                           gpu_memory_utilization=i.gpu_memory_utilization, copies=i.copies)


def _decide_tier(i: PlanInputs, inst: InstanceType, gpu_tokens: int, in_flight: int,
                 host: sizing.HostBudget, cpu_tokens: int, disk_tokens: int,
                 warnings: list[str]) -> Tier:
    ws = i.context_tokens
    if i.mode == "off":
        return "none"
    if i.mode == "cpu":
        return "cpu"
    if i.mode == "cpu+disk":
        if not inst.has_nvme:
            raise PlanError(f"kv_cache.mode 'cpu+disk' needs local NVMe but {inst.name} has "
                            "none; use 'cpu' or 'remote'")
        return "cpu+disk"
    if i.mode == "remote":
        return "remote"
    # auto
    if not _cpu_tier_fits(host):
        # LMCache keeps its CPU buffer in front of every tier: without room for it, auto
        # plans without LMCache instead of refusing (an explicit mode is refused in
        # _lmcache_sizes)
        warnings.append(f"{inst.name} leaves {host.per_worker_gib:.1f} GB of host memory per "
                        "worker after the OS and weight-loading reserves, too little for an "
                        "LMCache tier: planned without one (GPU prefix cache only); a larger "
                        "instance or fewer copies per instance makes room")
        return "none"
    reliable_gpu = sizing.GPU_CACHE_RELIABLE_FRACTION * max(0, gpu_tokens - in_flight)
    if ws == 0:
        warnings.append("workload.reused_context_tokens is not set; assuming repeated context "
                        "worth a CPU tier. Set it to size the cache for your working set")
        return "cpu"
    if ws <= reliable_gpu:
        return "none"
    if ws <= cpu_tokens:
        return "cpu"
    # LMCache writes every chunk to every tier (StorageManager.batched_put), so the disk
    # tier holds what the CPU tier does: together they keep max(cpu, disk) tokens, not the sum
    local = max(cpu_tokens, 0 if i.in_memory_only else disk_tokens)
    if i.in_memory_only:
        warnings.append(f"working set {ws} tokens exceeds the CPU tier ({cpu_tokens}) and "
                        "in_memory_only forbids disk: expect evictions, or add instances")
        return "cpu"
    if ws > local and i.remote_url:
        return "remote"
    if not inst.has_nvme or disk_tokens == 0:
        warnings.append(f"working set {ws} tokens exceeds the CPU tier ({cpu_tokens}) and "
                        f"{inst.name} has no NVMe for a disk tier: expect evictions, or set "
                        "kv_cache.remote_url")
        return "cpu"
    if ws > local:
        warnings.append(f"working set {ws} tokens exceeds the disk tier ({local} tokens; "
                        "LMCache writes every chunk to both tiers, so the CPU tier adds none): "
                        "expect evictions, or set kv_cache.remote_url")
    return "cpu+disk"


def _cpu_tier_fits(host: sizing.HostBudget) -> bool:
    """Whether each worker gets the 1 GB (rounded down to 0.1) an LMCache CPU tier needs."""
    return _gib(host.per_worker_gib) >= 1


def _gib(value: float) -> float:
    """Round a size down to a tenth of a GB (LMCache takes fractional GB)."""
    return math.floor(value * 10) / 10


def _lmcache_sizes(i: PlanInputs, tier: Tier, host: sizing.HostBudget,
                   disk: sizing.DiskBudget) -> dict[str, Any]:
    out: dict[str, Any] = {"chunk_size": i.chunk_size, "max_local_cpu_size_gb": 0.0,
                           "max_local_disk_size_gb": 0.0, "local_disk": None,
                           "remote_url": None, "workers": host.workers}
    if tier == "none":
        return out
    budget_cpu = _gib(host.per_worker_gib)
    if not _cpu_tier_fits(host):
        raise PlanError(f"no host memory is left for an LMCache CPU tier ({host.per_worker_gib:.1f}"
                        " GB per worker after reserves); use kv_cache.mode 'off' or fewer copies")
    if i.cpu_size_gb == "auto":
        cpu = budget_cpu
    else:
        cpu = float(i.cpu_size_gb)
        if cpu > budget_cpu:
            raise PlanError(f"kv_cache.cpu_size_gb {cpu} exceeds the {budget_cpu} GB per worker "
                            f"the host can give ({host.workers} workers share "
                            f"{host.host_bytes / sizing.GIB:.0f} GiB after "
                            f"{host.reserved_bytes / sizing.GIB:.0f} GiB of reserves)")
    out["max_local_cpu_size_gb"] = cpu
    if tier == "cpu+disk":
        budget_disk = _gib(disk.per_worker_gib)
        if budget_disk < 1:
            raise PlanError(f"no NVMe space is left for a disk tier ({disk.reason or 'too small'})")
        if i.disk_size_gb == "auto":
            size = budget_disk
        else:
            size = float(i.disk_size_gb)
            if size > budget_disk:
                raise PlanError(f"kv_cache.disk_size_gb {size} exceeds the {budget_disk} GB per "
                                f"worker the NVMe can give ({disk.workers} workers)")
        out["max_local_disk_size_gb"] = size
        out["local_disk"] = "file://" + i.disk_path
    if tier == "remote":
        out["remote_url"] = i.remote_url
    return out


def _engine(i: PlanInputs, inst: InstanceType, geo: ModelGeometry,
            weight_bytes: int) -> EngineModel:
    """The simulator's engine model of this plan (with ``i.costs``' coefficients where
    given): the TTFT block and the assumptions that state its rules both read it."""
    from lmikit.sim import engine_for, store_for_url

    engine = engine_for(geo.model_id, inst.name, i.tp,
                        kv_dtype_bytes=1 if i.kv_cache_dtype == "fp8" else 2,
                        weight_bytes=weight_bytes,
                        config_path=i.config_path, chunk_size=i.chunk_size,
                        remote_store=store_for_url(i.remote_url).kind)
    if i.costs is not None:
        engine = engine.with_coefficients(i.costs.coefficients)
    return engine


def _predict(i: PlanInputs, engine: EngineModel, inst: InstanceType, lmcache: bool = False,
             remote: bool = False) -> Predicted:
    """One request alone on an idle copy, costed by ``engine``. ``lmcache``: the plan has
    an LMCache tier, so a miss waits for LMCache's store. ``remote``: the plan uses a remote
    tier, so a remote hit (a prefix another copy stored) is costed too."""
    from lmikit.sim import single_request

    one = single_request(engine, i.request_tokens, i.suffix_tokens, i.chunk_size, lmcache,
                         remote)
    miss = one.miss_s
    hits = {"gpu": one.hit_s["gpu"], "cpu": one.hit_s["cpu"],
            "disk": one.hit_s["disk"] if inst.has_nvme else None}
    if remote:
        hits["remote"] = one.hit_s["remote"]

    def _r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return Predicted(
        ttft_miss_s=_r(miss) or 0.0,
        ttft_hit_s={k: _r(v) for k, v in hits.items()},
        speedup={k: (_r(miss / v) if v else None) for k, v in hits.items()},
        matched_tokens=one.matched_tokens, remainder_tokens=one.remainder_tokens,
    )


def cost_assumptions(inst: InstanceType, coeff: Coefficients | None = None,
                     source: str = "", remote: bool = False,
                     fitted: Collection[str] = (), lmcache: bool = False,
                     store: str = "redis") -> list[str]:
    """The plan's lines on what prefill, overhead and retrieve cost, from ``coeff``.

    The TTFT block is computed from these coefficients (the simulator's defaults, or those
    ``--calibrate`` fitted to the bench file ``source``), so the lines say the values it
    used, each of the ``fitted`` ones marked as fitted to ``source``; the others are
    defaults the bench had no evidence for.
    """
    from lmikit.sim import STORES, Coefficients, hbm_gbps, remote_read_gbps

    c = coeff if coeff is not None else Coefficients()
    kind = STORES[store]

    def mark(name: str) -> str:
        return f" (fitted to {source})" if name in fitted else ""

    return [
        f"prefill at {c.prefill_mfu:.0%}{mark('prefill_mfu')} of "
        f"{inst.gpu.bf16_dense_tflops:g} dense bf16 TFLOPS per GPU, with the causal attention "
        "term, and never shorter than a read of the weights and cached KV per step at "
        f"{c.decode_hbm_efficiency:.0%}{mark('decode_hbm_efficiency')} of "
        f"{hbm_gbps(inst.gpu.name):g} GB/s; fixed overhead {c.request_overhead_s * 1000:.0f} ms"
        f"{mark('request_overhead_s')} per request, plus vLLM tokenizing the whole prompt at "
        f"{c.tokenize_s_per_token * 1e6:.1f} us per token{mark('tokenize_s_per_token')}, hit "
        "or miss",
        f"host->GPU {inst.host_to_gpu_gbps:g} GB/s per GPU, LMCache reaching "
        f"{c.cpu_retrieve_efficiency:.0%}{mark('cpu_retrieve_efficiency')} of it (ranks load "
        f"in parallel); NVMe {inst.nvme_read_gbps:g} GB/s per instance with O_DIRECT"
        + (f" at {c.disk_read_efficiency:.0%}{mark('disk_read_efficiency')}"
           if c.disk_read_efficiency != 1.0 or "disk_read_efficiency" in fitted else "")
        + ", not overlapped with the host->GPU copy",
        *([f"LMCache's lookup holds the scheduler before each request's step: "
           f"{c.lookup_rpc_s * 1e6:g} us{mark('lookup_rpc_s')} a request to the workers and "
           f"{c.hash_s_per_chunk * 1e6:g} us{mark('hash_s_per_chunk')} a chunk hashed (again "
           "in the retrieve and the store); a miss waits for the store of its full chunks"]
          if lmcache or remote else []),
        *([f"remote tier ({kind.kind}) read at {c.remote_gbps:g} GB/s{mark('remote_gbps')} "
           "per copy"
           + (f" (at most {inst.network_gbit / 8:g} GB/s, the instance's "
              f"{inst.network_gbit:g} Gbit/s network)"
              if remote_read_gbps(c.remote_gbps, inst.network_gbit / 8) < c.remote_gbps
              else "")
           + f", {c.remote_rtt_s * 1000:g} ms{mark('remote_rtt_s')} a round trip: "
           f"{kind.lookup_trips} per chunk looked up, one chunk after another, and "
           f"{kind.get_trips} per chunk read, "
           + (f"{kind.parallel_gets} reads at once" if kind.parallel_gets else
              "every chunk at once")
           + "; then copied to the GPUs"] if remote else []),
    ]


def _assumptions(i: PlanInputs, inst: InstanceType, geo: ModelGeometry,
                 replication: int, volume: su.Volume, tier: Tier,
                 engine: EngineModel) -> list[str]:
    s = sizing
    out = [
        f"KV per token = {geo.num_layers} layers x "
        + (f"MLA latent ({geo.kv_lora_rank} + {geo.qk_rope_head_dim})"
           if geo.attention == "mla" else f"2 x {geo.num_kv_heads} KV heads x {geo.head_dim}")
        + f" x {'1 byte (fp8)' if i.kv_cache_dtype == 'fp8' else '2 bytes (bf16)'}",
        f"weights = {geo.total_params / 1e9:.2f}B params from config.json shapes "
        f"({geo.weight_dtype}" + ("; embeddings, LM head and vision encoder in bf16)"
                                  if geo.weight_dtype == "fp8" else ")"),
        f"GPU: {inst.gpu_count} x {inst.gpu.name} {inst.gpu.memory_gib} GiB; vLLM uses "
        f"{i.gpu_memory_utilization:.0%} minus {s.GPU_RUNTIME_OVERHEAD_GIB} GiB runtime overhead "
        "per GPU",
        f"each cached token is held by {replication} tensor-parallel rank(s) on the GPU"
        + (f"; LMCache stores MLA's latent from the first rank only and broadcasts hits, so "
           f"that rank gets the copy's CPU share ({i.tp} x max_local_cpu_size as "
           "first_rank_max_local_cpu_size) and one worker's disk share"
           if geo.lmcache_replication(i.tp) < replication else ""),
        *([f"DeepSeek sparse attention: {geo.index_kv_bytes_per_layer} more bytes of indexer "
           "keys per token and layer on the GPU; an fp8 KV cache is vLLM's fp8_ds_mla "
           f"({geo.kv_layer_bytes(1)} bytes per token and layer)"] if geo.sparse_attention else []),
        f"GPU prefix cache counted on for {s.GPU_CACHE_RELIABLE_FRACTION:.0%} of the KV pool "
        "left after in-flight requests (vLLM evicts it for running sequences)",
        f"max_model_len, unless set, = the model's limit capped at "
        f"{s.MAX_MODEL_LEN_POOL_SHARE:.0%} of the KV pool (the estimate's margin)",
        f"host reserve = max({s.HOST_RESERVE_FRACTION:.0%} of RAM, {s.WEIGHT_LOAD_FACTOR:g}x "
        f"weights per copy) + {s.WORKER_HOST_OVERHEAD_GIB:g} GiB per vLLM worker; the rest is "
        f"split across {i.copies * i.tp} LMCache workers (copies x TP)",
        f"disk tier = {s.DISK_USABLE_FRACTION:.0%} of the NVMe's free space, split across "
        "workers; never on a non-NVMe or >90% full filesystem; /tmp/lmcache/ taken to be on "
        "the whole instance store (not documented for SageMaker hosting; lmikit's image "
        "measures it at start)",
        *cost_assumptions(inst, engine.coeff, i.costs.source if i.costs else "",
                          tier == "remote", i.costs.fitted if i.costs else (),
                          lmcache=tier != "none", store=engine.remote_store),
        *([f"tensor-parallel all-reduces cross PCIe ({inst.gpu.name} has no NVLink): 2 per "
           f"layer per step, each GPU sending {2 * (engine.tp - 1) / engine.tp:g}x the step's "
           f"bf16 activations at most at {engine.pcie_allreduce_gbps:g} GB/s, a floor"]
          if engine.allreduces_cross_pcie else []),
        *(["tensor-parallel all-reduces over NVLink are not costed in the prefill; a decode "
           "step's are in its fixed overhead (docs/planner-model.md, the decode step at "
           "tensor parallel 1 and above)"] if engine.tp > 1 and not engine.allreduces_cross_pcie
          else []),
        f"a hit matches whole {i.chunk_size}-token chunks of the request minus its "
        f"{i.suffix_tokens} new tokens, never its last token (vLLM computes it for the "
        "logits)",
        f"disk = {volume.kind} volume of {volume.size_gb:g} GB, less {volume.weights_gb:g} GB "
        "of downloaded weights (every copy keeps its own)",
        f"start-up rates are assumptions, none published by AWS: Hub download "
        f"{su.HUB_DOWNLOAD_BYTES_PER_S / 1e6:g} MB/s, S3 copy "
        f"{su.s3_download_bytes_per_s(inst.network_gbit) / 1e6:g} MB/s (the smaller of "
        f"{su.S3_DOWNLOAD_BYTES_PER_S / 1e9:g} GB/s and half of {inst.network_gbit:g} Gbit/s; "
        "basis: third-party EC2 measurements of s5cmd and S3, lmikit.planner.RATES), load "
        f"{su.LOAD_BYTES_PER_S / 1e6:g} MB/s, LMCache's CPU tier pinned whole at "
        f"{su.PIN_BYTES_PER_S / 1e9:g} GB/s per worker (third-party cudaHostAlloc "
        f"measurements, not SageMaker's), warm-up {su.WARMUP_S:g} s; no LMI version "
        "lmikit renders streams weights from S3 to the GPUs (lmikit.planner.FASTER_LOADERS); "
        f"timeouts = {su.MARGIN:g}x that, {su.TIMEOUT_FLOOR_S}..{su.API_TIMEOUT_MAX_S} s",
    ]
    return out
