"""Scenarios: a deployment (from the planner) x routing x KV-cache mode, simulated and priced.

The plan gives each model copy its GPU KV pool and LMCache tier sizes for the mode; the
engine model gives the costs; the loop runs the workload. Results are what users see:
TTFT percentiles, total time, throughput, where prompt tokens came from, utilization, and
cost per 1K tokens from the dated price table.

>>> from lmikit.sim import long_doc_qa
>>> d = deployment("Qwen/Qwen3-8B", "ml.p4de.24xlarge")
>>> w = long_doc_qa(documents=4, document_tokens=2000, output_tokens=10, concurrency=2)
>>> [r.kv_cache for r in simulate(d, w, ["sticky_session"], ["off", "cpu"])]
['off', 'cpu']
"""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit.catalog import PriceTable, get_instance, price_or_reason
from lmikit.errors import PlanError, SimulationError
from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import EngineModel, engine_for
from lmikit.sim._loop import CopyConfig, RunResult, run
from lmikit.sim._routers import ROUTINGS, Router, make_router
from lmikit.sim._workloads import Workload

if TYPE_CHECKING:
    from lmikit.spec import DeploymentSpec

KV_MODES = ("off", "cpu", "cpu+disk", "remote")
MAX_INSTANCES = 512  # model copies one simulation routes across (lmikit simulate --instances)
KEY_SHARDS = 64  # repeated_tokens counts the chunk keys in this many parts (a power of 2)


@dataclass(frozen=True)
class Deployment:
    """What the simulator needs of a deployment; build it with :func:`deployment`."""

    model_id: str
    instance_type: str
    tp: int
    copies_per_instance: int
    instances: int  # model copies requests are routed across
    chunk_size: int
    max_batch_size: int
    region: str
    engine: EngineModel
    gpu_tokens: int
    tier_tokens: dict[str, tuple[int, int]]  # mode -> (cpu, disk) tokens per copy
    prefix_length_bytes: int
    concurrency_threshold: int
    has_nvme: bool
    reserve_full_prompt: bool = True  # vLLM >= 0.19's admission rule (loop.CopyConfig)
    max_model_len: int = 0  # the plan's: vLLM refuses a longer prompt + output (0: unknown)
    # LMCache modes the planner refuses on this deployment (e.g. a host with no memory left
    # for a CPU tier) -> why; they are absent from tier_tokens
    unplannable: dict[str, str] = field(default_factory=dict)

    def with_coefficients(self, coeff: Coefficients) -> Deployment:
        return Deployment(**{**self.__dict__, "engine": self.engine.with_coefficients(coeff)})

    def mode_problem(self, mode: str) -> str | None:
        """Why ``mode`` cannot be simulated on this deployment, or None if it can."""
        if mode in self.tier_tokens:
            return None
        if mode in self.unplannable:
            return f"kv_cache mode {mode!r} does not fit {self.instance_type}: " \
                   f"{self.unplannable[mode]}"
        if mode == "cpu+disk" and not self.has_nvme:
            return (f"kv_cache mode 'cpu+disk' needs local NVMe but {self.instance_type} has "
                    "none; use 'cpu' or 'remote'")
        return f"unknown kv_cache mode {mode!r}; valid: {', '.join(KV_MODES)}"

    def router(self, routing: str, rng: random.Random) -> Router:
        """The ``routing`` strategy over this deployment's copies, with its prefix length,
        concurrency threshold and batch size."""
        return make_router(routing, rng, chunk_size=self.chunk_size,
                           prefix_length_bytes=self.prefix_length_bytes,
                           concurrency_threshold=self.concurrency_threshold,
                           busy_at=self.max_batch_size, per_instance=self.copies_per_instance)

    def copies(self, mode: str) -> list[CopyConfig]:
        """One :class:`CopyConfig` per routed copy for ``mode``."""
        problem = self.mode_problem(mode)
        if problem:
            raise PlanError(problem)
        cpu, disk = self.tier_tokens[mode]
        cfg = CopyConfig(self.engine, self.gpu_tokens, self.chunk_size, self.max_batch_size,
                         cpu_tokens=cpu, disk_tokens=disk, remote=mode == "remote",
                         reserve_full_prompt=self.reserve_full_prompt)
        return [cfg] * self.instances


def deployment(model_id: str, instance_type: str, *, tp: int = 1, copies: int = 1,
               instances: int = 1, chunk_size: int = 256, max_batch_size: int = 64,
               region: str = "us-east-1", gpu_memory_utilization: float = 0.9,
               kv_cache_dtype: str = "auto", weight_dtype: str = "auto",
               cpu_size_gb: float | str = "auto", disk_size_gb: float | str = "auto",
               prefix_length: int | None = None, concurrency_threshold: int | None = None,
               config_path: str | None = None,
               coefficients: Coefficients | None = None,
               reserve_full_prompt: bool = True,
               max_model_len: int | None = None,
               remote_store: str = "redis") -> Deployment:
    """A deployment from the planner: pool and tier sizes per KV-cache mode.

    ``cpu_size_gb`` and ``disk_size_gb`` are LMCache's sizes per worker, as the spec's
    ``kv_cache`` fields ("auto": what the host and its NVMe can give, as the planner
    sizes them). ``remote_store`` is the kind of store the ``remote`` mode reads
    (:data:`lmikit.sim.STORES`: ``redis``, ``hyperpod`` for SageMaker HyperPod's
    tiered storage, ``s3``, ``mooncake``...); its round trip and read rate are the
    coefficients' defaults unless ``coefficients`` are given.

    ``max_model_len`` is the spec's ``engine.max_model_len``; without it the plan's (what
    lmikit would deploy) applies, and :func:`simulate` refuses a request that exceeds it.

    ``reserve_full_prompt`` is vLLM's ``scheduler_reserve_full_isl`` (on from vLLM 0.19.0,
    as in the pinned LMI image); pass False to simulate an older vLLM, which admits a
    request once its next chunk fits.
    """
    from lmikit.catalog import REGION_RE
    from lmikit.errors import safe_repr
    from lmikit.planner import plan
    from lmikit.spec import DEFAULT_PREFIX_LENGTH, check_arguments  # what an endpoint is given

    check_arguments({"tp": tp, "copies": copies, "chunk_size": chunk_size,
               "max_batch_size": max_batch_size,
               "gpu_memory_utilization": gpu_memory_utilization,
               "kv_cache_dtype": kv_cache_dtype, "weight_dtype": weight_dtype,
               "cpu_size_gb": cpu_size_gb, "disk_size_gb": disk_size_gb,
               "prefix_length": prefix_length, "concurrency_threshold": concurrency_threshold,
               "max_model_len": max_model_len})
    if isinstance(instances, bool) or not isinstance(instances, int) or not \
            1 <= instances <= MAX_INSTANCES:
        raise PlanError(f"instances is {safe_repr(instances)}; expected a whole number of "
                        f"model copies from 1 to {MAX_INSTANCES}")
    from lmikit.sim._stores import STORES

    if not isinstance(remote_store, str) or remote_store not in STORES:
        raise PlanError(f"remote_store is {safe_repr(remote_store)}; expected one of "
                        f"{', '.join(STORES)}")
    if not isinstance(region, str) or not REGION_RE.match(region):
        raise PlanError(f"region is {safe_repr(region)}; expected an AWS region name such as "
                        "'us-east-1'")
    common: dict[str, Any] = {
        "tp": tp, "copies": copies, "chunk_size": chunk_size,
        "gpu_memory_utilization": gpu_memory_utilization, "kv_cache_dtype": kv_cache_dtype,
        "weight_dtype": weight_dtype, "config_path": config_path,
        "max_model_len": max_model_len}
    base = plan(model_id, instance_type, mode="off", **common)
    inst = get_instance(instance_type)
    tiers: dict[str, tuple[int, int]] = {"off": (0, 0)}
    unplannable: dict[str, str] = {}
    for mode in ("cpu", "cpu+disk", "remote"):
        if mode == "cpu+disk" and not inst.has_nvme:
            continue
        try:
            p = plan(model_id, instance_type, mode=mode, cpu_size_gb=cpu_size_gb,
                     disk_size_gb=disk_size_gb if mode == "cpu+disk" else "auto", **common)
        except PlanError as exc:  # e.g. no host memory left for LMCache: off still simulates
            if mode != "remote":
                _check_sizes(model_id, instance_type, mode, cpu_size_gb, disk_size_gb, common)
            unplannable[mode] = str(exc)
            continue
        tiers[mode] = (p.cpu_capacity_tokens, p.disk_capacity_tokens)
    if disk_size_gb != "auto" and "cpu+disk" not in tiers:
        raise PlanError(f"disk_size_gb is {disk_size_gb:g}; {instance_type} has no room for a "
                        "disk tier (" + unplannable.get("cpu+disk", "no local NVMe")
                        + "): leave it 'auto' (the spec's kv_cache.disk_size_gb)")
    engine = engine_for(model_id, instance_type, tp, kv_dtype_bytes=1 if kv_cache_dtype == "fp8"
                        else 2, weight_bytes=base.weight_bytes, config_path=config_path,
                        coeff=coefficients, chunk_size=chunk_size, remote_store=remote_store)
    return Deployment(
        model_id=base.model_id, instance_type=base.instance_type, tp=tp,
        copies_per_instance=copies, instances=instances, chunk_size=chunk_size,
        max_batch_size=max_batch_size, region=region, engine=engine,
        gpu_tokens=base.gpu_kv_capacity_tokens, tier_tokens=tiers,
        prefix_length_bytes=prefix_length or DEFAULT_PREFIX_LENGTH,
        concurrency_threshold=concurrency_threshold or max_batch_size,
        has_nvme=inst.has_nvme, reserve_full_prompt=reserve_full_prompt,
        max_model_len=base.max_model_len, unplannable=unplannable)


def _check_sizes(model_id: str, instance_type: str, mode: str, cpu_size_gb: float | str,
                 disk_size_gb: float | str, common: dict[str, Any]) -> None:
    """Refuse an explicit LMCache size the host (or its NVMe) cannot give, naming it, with
    the most each worker can have: what ``mode`` is planned with at the auto sizes."""
    from lmikit.planner import plan

    try:
        auto = plan(model_id, instance_type, mode=mode, **common)
    except PlanError:
        return  # not the sizes: the mode does not fit this deployment at all
    lm = auto.lmcache
    for name, value, key, what in (
            ("cpu_size_gb", cpu_size_gb, "max_local_cpu_size_gb", "host memory"),
            ("disk_size_gb", disk_size_gb if mode == "cpu+disk" else "auto",
             "max_local_disk_size_gb", "NVMe")):
        if value != "auto" and float(value) > lm[key]:
            raise PlanError(f"{name} is {float(value):g}; expected at most {lm[key]:g} GB, the "
                            f"{what} {instance_type} gives each of its {lm['workers']} LMCache "
                            f"worker(s) (the spec's kv_cache.{name})")


def deployment_from_spec(spec: DeploymentSpec, base_dir: str | Path | None = None, *,
                         instances: int | None = None,
                         coefficients: Coefficients | None = None) -> Deployment:
    """A deployment from a loaded spec; ``instances`` defaults to min_count x copies."""
    config_path = spec.model.config_path
    if config_path and base_dir is not None and not Path(config_path).is_absolute():
        config_path = str(Path(base_dir) / config_path)
    from lmikit.sim._stores import store_for_url

    kv = spec.kv_cache
    copies = spec.instance.copies_per_instance
    prefix_length, threshold = spec.prefix_aware_settings  # what the endpoint is given
    return deployment(
        spec.model.catalog_id, spec.instance.type, tp=spec.engine.tensor_parallel_degree,
        copies=copies,
        instances=instances or max(1, spec.instance.min_count) * copies,
        chunk_size=kv.chunk_size, max_batch_size=spec.engine.max_batch_size,
        region=spec.region, gpu_memory_utilization=spec.engine.gpu_memory_utilization,
        kv_cache_dtype=spec.engine.kv_cache_dtype, weight_dtype=spec.model.dtype,
        cpu_size_gb=kv.cpu_size_gb if kv.mode != "off" else "auto",
        disk_size_gb=kv.disk_size_gb, prefix_length=prefix_length,
        concurrency_threshold=threshold, config_path=config_path,
        coefficients=coefficients, max_model_len=spec.engine.max_model_len,
        remote_store=store_for_url(kv.remote_url).kind)


@dataclass(frozen=True)
class ScenarioResult:
    """One (routing, KV-cache mode) scenario, over the measured phases (a long-doc-qa
    warm-up round is not measured); the CLI's ``--json`` ``results`` are :meth:`to_dict`.

    - ``ttft_p50_s``, ``ttft_p90_s``, ``ttft_p99_s``, ``ttft_mean_s``: time to first token,
      seconds (percentiles interpolated linearly between ranks, as numpy's default);
      ``ttfts_s`` every measured request's, sorted (left out of ``to_dict()`` unless
      ``with_samples``);
    - ``total_time_s``: from the first measured request sent to the last one's end;
    - ``throughput_tokens_s``: prompt + output tokens of the served requests over
      ``total_time_s``; ``output_tokens_s``: output tokens alone;
    - ``hit_rate``: share (0 to 1) of the served requests' prompt tokens that the GPU
      prefix cache (``gpu``) and each LMCache tier (``cpu``, ``disk``, ``remote``)
      supplied, and that were computed (``miss``); they sum to 1;
    - ``usd_per_1k_tokens``: on-demand price x instances billed x ``total_time_s``, per
      1,000 prompt + output tokens; None without a price, ``price_source`` says why or
      where the price came from;
    - ``utilization``: per copy, its busy time over the run's (first request sent to last
      end, warm-up included);
    - ``requests``: measured requests served; ``failed``: measured requests a front door
      turned away (not in the figures above, but in ``total_time_s``);
    - ``evictions``: chunks each cache (``gpu`` and each LMCache tier) evicted, whole run.
    """

    routing: str
    kv_cache: str
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    ttft_mean_s: float
    total_time_s: float
    throughput_tokens_s: float
    output_tokens_s: float
    hit_rate: dict[str, float]
    usd_per_1k_tokens: float | None
    price_source: str
    utilization: list[float]
    requests: int
    evictions: dict[str, int]
    failed: int = 0  # measured requests turned away at the front door (not in requests)
    ttfts_s: list[float] = field(repr=False, default_factory=list)

    def to_dict(self, with_samples: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_samples:
            data.pop("ttfts_s")
        return data


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 1]."""
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(dep: Deployment, workload: Workload, out: RunResult, routing: str, mode: str,
              hourly_price_usd: float | None = None,
              prices: PriceTable | None = None) -> ScenarioResult:
    """One scenario's figures over the measured phases' requests.

    Requests the front door turned away (``run(..., max_in_flight=...)``) have no first
    token: they count in ``failed`` and in the span of the run (from the first measured
    request sent to the last one's end), not in the TTFTs, tokens or hit rates.
    """
    sent = [r for p in workload.phases if p.measured for s in p.sessions for r in s]
    if not sent:
        raise SimulationError(f"workload {workload.name!r} has no measured requests: every "
                              "phase is a warm-up (measured=False); mark one measured")
    start = min([out.arrival[r.id] for r in sent])
    end = max([out.end[r.id] for r in sent])
    total = max(end - start, 1e-9)
    failed = out.failed
    measured = [r for r in sent if not failed[r.id]] if failed else sent
    if not measured:
        raise SimulationError(f"all {len(sent)} measured requests of workload "
                              f"{workload.name!r} were turned away at the front door "
                              "(max_in_flight): none was served, so there is no TTFT to "
                              "report; raise the limit or send fewer at once")
    ids = [r.id for r in measured]
    ttfts = sorted([out.ttft[i] - out.arrival[i] for i in ids])
    prompt = sum([r.prompt_tokens for r in measured])
    output = sum([r.output_tokens for r in measured])
    served = {tier: sum(map(v.__getitem__, ids)) for tier, v in out.served.items()}
    hit = {tier: round(tokens / prompt, 6) for tier, tokens in served.items()}
    hit["miss"] = round(max(0.0, 1.0 - sum(hit.values())), 6)
    found = price_or_reason(dep.instance_type, dep.region, hourly_price_usd, prices)
    price: float | None = None
    if isinstance(found, str):
        source = found
    else:
        price = found.usd
        source = f"{found.source} (as of {found.as_of})" if found.as_of else found.source
    billed = -(-dep.instances // dep.copies_per_instance)
    usd = None if price is None else price * billed * total / 3600 / (prompt + output) * 1000
    # from the first request the run sent, not from 0 (a trace may start at any time), to
    # the last request's end, which comes after the last event (its request overhead)
    origin = min([out.arrival[r.id] for r in workload.requests])
    last = max(out.makespan_s, max([out.end[r.id] for r in workload.requests]))
    makespan = max(last - origin, 1e-9)
    return ScenarioResult(
        routing=routing, kv_cache=mode, ttft_p50_s=round(percentile(ttfts, 0.5), 6),
        ttft_p90_s=round(percentile(ttfts, 0.9), 6), ttft_p99_s=round(percentile(ttfts, 0.99), 6),
        ttft_mean_s=round(sum(ttfts) / len(ttfts), 6), total_time_s=round(total, 6),
        throughput_tokens_s=round((prompt + output) / total, 3),
        output_tokens_s=round(output / total, 3), hit_rate=hit,
        usd_per_1k_tokens=None if usd is None else float(f"{usd:.4g}"), price_source=source,
        utilization=[round(b / makespan, 4) for b in out.busy_s], requests=len(measured),
        evictions=out.evictions, failed=len(sent) - len(measured), ttfts_s=ttfts)


def simulate(dep: Deployment, workload: Workload, routings: list[str] | tuple[str, ...],
             kv_modes: list[str] | tuple[str, ...], *, seed: int = 0,
             hourly_price_usd: float | None = None, prices: PriceTable | None = None,
             progress: Callable[[int, int, str, str], None] | None = None,
             ) -> list[ScenarioResult]:
    """Every (routing, mode) pair of the cross product, in the order given.

    ``progress(done, total, routing, mode)`` is called before each scenario runs.
    """
    _check_simulate_args(dep, workload, routings, kv_modes, seed, hourly_price_usd, prices)
    if workload.chunk_size != dep.chunk_size:
        raise PlanError(f"the workload was cut into {workload.chunk_size}-token chunks but the "
                        f"deployment's LMCache chunk_size is {dep.chunk_size}")
    for routing in routings:
        if routing not in ROUTINGS:
            raise PlanError(f"unknown routing {routing!r}; valid: {', '.join(ROUTINGS)}")
    for mode in kv_modes:
        dep.copies(mode)  # an unknown or unavailable mode fails before anything runs
    if dep.max_model_len:
        for r in workload.requests:
            if r.prompt_tokens + r.output_tokens > dep.max_model_len:
                raise SimulationError(
                    f"request {r.id}: a prompt of {r.prompt_tokens:,} tokens and "
                    f"{r.output_tokens:,} output tokens exceed {dep.model_id}'s max_model_len "
                    f"of {dep.max_model_len:,} on this deployment (vLLM refuses such a request)")
    results = []
    done = 0
    for routing in routings:
        for mode in kv_modes:
            if progress is not None:
                progress(done, len(routings) * len(kv_modes), routing, mode)
            done += 1
            out = run(workload, dep.copies(mode), dep.router(routing, random.Random(seed)),
                      random.Random(seed + 1))
            results.append(summarize(dep, workload, out, routing, mode, hourly_price_usd,
                                     prices))
    return results


def _check_simulate_args(dep: object, workload: object, routings: object, kv_modes: object,
                         seed: object, hourly_price_usd: object, prices: object) -> None:
    """Arguments of the wrong kind are refused by name, before anything runs."""
    from lmikit.catalog import MAX_USD_PER_HOUR, is_hourly_usd
    from lmikit.errors import safe_repr

    if not isinstance(dep, Deployment):
        raise PlanError(f"dep is {safe_repr(dep)}; expected a Deployment from "
                        "lmikit.sim.deployment() or deployment_from_spec()")
    if not isinstance(workload, Workload):
        raise PlanError(f"workload is {safe_repr(workload)}; expected a Workload from a "
                        "builder such as lmikit.sim.long_doc_qa() or load_trace()")
    for name, names, valid in (("routings", routings, ROUTINGS), ("kv_modes", kv_modes,
                                                                 KV_MODES)):
        if (not isinstance(names, list | tuple) or not names
                or not all(isinstance(n, str) for n in names)):
            raise PlanError(f"{name} is {safe_repr(names)}; expected a non-empty list of "
                            f"names from {', '.join(valid)}, e.g. [{valid[0]!r}]")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise PlanError(f"seed is {safe_repr(seed)}; expected a whole number")
    if hourly_price_usd is not None and not is_hourly_usd(hourly_price_usd):
        raise PlanError(f"hourly_price_usd is {safe_repr(hourly_price_usd)}; expected US "
                        f"dollars above 0 and at most {MAX_USD_PER_HOUR:,.0f}, or None")
    if prices is not None and not isinstance(prices, PriceTable):
        raise PlanError(f"prices is {safe_repr(prices)}; expected a PriceTable from "
                        "lmikit.catalog._prices.load_prices(path), or None")


def repeated_tokens(work: Workload) -> int:
    """Tokens of distinct prompt text the workload sends more than once (full chunks: a
    chunk key names its whole prefix, so a key seen twice is a prefix sent twice).

    Keys are Python hashes, so they fit int64: they are dealt by their low bits into
    ``KEY_SHARDS`` arrays of 8-byte ints and each array is counted on its own, so the count
    holds about 9 bytes a key where one set of Python ints would hold about 40
    (``benchmarks/simulate_limits.py`` measures it at the 5,000,000-chunk bound).

    >>> from lmikit.sim import Request, Workload, Phase
    >>> reqs = [Request(i, keys, 0, 1, i) for i, keys in enumerate([(1, 2), (1, 2), (1, 3)])]
    >>> repeated_tokens(Workload("w", [Phase("p", [reqs])], 256))  # keys 1 and 2
    512
    """
    shards = [array("q") for _ in range(KEY_SHARDS)]
    add = [shard.append for shard in shards]
    last = KEY_SHARDS - 1
    for request in work.requests:
        for key in request.keys:
            add[key & last](key)
    runs = 0  # keys sent more than once
    for i, shard in enumerate(shards):
        counts = Counter(shard)
        shards[i] = array("q")  # this shard is counted: free it before the next
        runs += len(counts) - list(counts.values()).count(1)
    return runs * work.chunk_size


def engine_notes(dep: Deployment) -> list[str]:
    """What the engine model only bounds for this deployment: tensor parallel over PCIe."""
    e = dep.engine
    if e.allreduces_cross_pcie:
        return [f"{dep.instance_type}'s GPUs have no NVLink: the all-reduces of its {e.tp} "
                "tensor-parallel ranks are costed at their floor over PCIe "
                f"({e.pcie_allreduce_gbps:g} GB/s a GPU), so prefill and decode times are lower "
                "bounds; measure them with lmikit bench."]
    return []


def reading_notes(results: list[ScenarioResult], dep: Deployment, work: Workload) -> list[str]:
    """Why the LMCache modes read like ``off``, where the table cannot say it by itself.

    Only when no LMCache tier served a prompt token in any scenario, and only what the
    capacities make certain: the repeated text fits the GPU pool, which vLLM reads before
    LMCache; or it is bigger than every tier and none served it, so it was evicted before it
    came back; or nothing repeats.
    """
    with_lmcache = [r for r in results if r.kv_cache != "off"]
    if not with_lmcache or any(r.hit_rate[t] > 0 for r in with_lmcache
                               for t in ("cpu", "disk", "remote")):
        return []
    repeated = repeated_tokens(work)  # only here: a pass over every chunk key sent
    if repeated == 0:
        return ["no prompt began with a prefix an earlier prompt had sent, so no cache can "
                "serve this workload: the --kv-cache modes differ only by what storing costs."]
    gpu = dep.gpu_tokens
    if repeated <= gpu:
        return [f"the text this workload repeats ({repeated:,} tokens) fits vLLM's GPU prefix "
                f"cache ({gpu:,} tokens per copy), which vLLM reads before asking LMCache, and "
                "no LMCache tier served a prompt token: the --kv-cache modes differ only by "
                "what storing costs. LMCache pays once the repeated text outgrows the GPU "
                "pool (more or longer documents, more sessions)."]
    modes = {r.kv_cache for r in with_lmcache}
    if "remote" in modes or any(r.hit_rate["gpu"] > 0 for r in with_lmcache):
        return []
    lmcache = max(sum(dep.tier_tokens[m]) for m in modes)
    if repeated <= lmcache:
        return []
    return [f"the text this workload repeats ({repeated:,} tokens) outgrows both vLLM's GPU "
            f"prefix cache ({gpu:,} tokens per copy) and LMCache's tiers ({lmcache:,} per "
            "copy), and each prefix came back only after more than that had been sent, so "
            "every tier (least recently used first) had evicted it: no cache served a prompt "
            "token. Give LMCache room for it (kv_cache.cpu_size_gb, a disk tier) or spread "
            "it over more copies (--instances, with prefix-aware routing)."]
