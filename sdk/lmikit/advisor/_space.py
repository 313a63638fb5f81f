"""The search space: instance type x TP x copies x instance count x KV cache x routing.

Every (type, TP, copies, cache option) is planned once, by the simulator's own
``deployment()`` (the planner's fit rules); a layout the planner refuses is pruned without a
simulation. Prices come from ``lmikit.catalog._prices``; a type without an on-demand price in
the region is left out with a note, never priced at zero.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmikit import sim
from lmikit.advisor._search import Candidate
from lmikit.catalog import (
    INSTANCES,
    Price,
    PriceTable,
    hourly_price,
    ml_name,
    offered,
    price_or_reason,
)
from lmikit.errors import PlanError, SimulationError

if TYPE_CHECKING:
    from lmikit.advisor._calibration import Calibration
    from lmikit.spec import DeploymentSpec

# every strategy SageMaker serves with the LMI image (kv_aware is refused there: render.sagemaker)
ROUTINGS = ("sticky_session", "prefix_aware", "least_outstanding", "random")
SIZE_HEADROOM = 1.1  # a right-sized CPU tier holds the repeated text plus 10%
SIZE_STEP_GB = 0.5  # and is rounded up to this
RIGHT_SIZE_AT_MOST = 0.8  # offered only when it saves at least a fifth of the auto size


@dataclass(frozen=True)
class Settings:
    """What a candidate takes from the spec (or the what-if model): all but its layout."""

    model_id: str
    config_path: str | None
    region: str
    chunk_size: int
    max_batch_size: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    weight_dtype: str
    prefix_length: int
    concurrency_threshold: int
    max_model_len: int | None
    in_memory_only: bool
    remote_url: str | None
    routing: str

    @classmethod
    def from_spec(cls, spec: DeploymentSpec, base_dir: str | Path | None,
                  region: str | None = None) -> Settings:
        """As :func:`lmikit.sim.deployment_from_spec` reads the spec."""
        config_path = spec.model.config_path
        if config_path and base_dir is not None and not Path(config_path).is_absolute():
            config_path = str(Path(base_dir) / config_path)
        prefix_length, threshold = spec.prefix_aware_settings
        return cls(model_id=spec.model.id, config_path=config_path,
                   region=region or spec.region, chunk_size=spec.kv_cache.chunk_size,
                   max_batch_size=spec.engine.max_batch_size,
                   gpu_memory_utilization=spec.engine.gpu_memory_utilization,
                   kv_cache_dtype=spec.engine.kv_cache_dtype, weight_dtype=spec.model.dtype,
                   prefix_length=prefix_length, concurrency_threshold=threshold,
                   max_model_len=spec.engine.max_model_len,
                   in_memory_only=spec.kv_cache.in_memory_only,
                   remote_url=spec.kv_cache.remote_url, routing=spec.routing.strategy)


@dataclass
class Deployments:
    """The simulator's deployment of each candidate, planned once (the planner's fit rules
    refuse what does not fit: ``of`` says why); ``calibration`` gives the candidates it
    applies to its fitted coefficients."""

    settings: Settings
    calibration: Calibration | None = None
    _made: dict[tuple[Any, ...], sim.Deployment | str] = field(default_factory=dict)

    def of(self, c: Candidate) -> sim.Deployment | str:
        """The deployment of ``c``, or why the planner refuses it."""
        key = (c.instance_type, c.tp, c.copies, c.instances, c.kv_cache, c.cpu_size_gb,
               c.disk_size_gb)
        if key not in self._made:
            s = self.settings
            cal = self.calibration
            fitted = cal.fit.coefficients if cal is not None and cal.applies(c) else None
            try:
                dep = sim.deployment(
                    s.model_id, c.instance_type, tp=c.tp, copies=c.copies,
                    instances=c.instances * c.copies, chunk_size=s.chunk_size,
                    max_batch_size=s.max_batch_size, region=s.region,
                    gpu_memory_utilization=s.gpu_memory_utilization,
                    kv_cache_dtype=s.kv_cache_dtype, weight_dtype=s.weight_dtype,
                    cpu_size_gb=c.cpu_size_gb, disk_size_gb=c.disk_size_gb,
                    prefix_length=s.prefix_length, concurrency_threshold=s.concurrency_threshold,
                    config_path=s.config_path, coefficients=fitted,
                    max_model_len=s.max_model_len)
                made: sim.Deployment | str = dep.mode_problem(c.kv_cache) or dep
            except (PlanError, SimulationError) as exc:
                made = str(exc)
            self._made[key] = made
        return self._made[key]


@dataclass(frozen=True)
class Space:
    candidates: list[Candidate]  # planned, priced, within the budget: to search
    refused: int  # considered and pruned before the search: the planner refused, over budget
    prices: dict[str, Price]
    notes: list[str]


def instance_types(region: str, globs: Sequence[str] | None, table: PriceTable | None,
                   ) -> tuple[dict[str, Price], list[str]]:
    """The types to search, with their prices, and a note per type left out."""
    names = sorted(INSTANCES)
    notes: list[str] = []
    if globs:
        chosen: list[str] = []
        for pattern in globs:
            wanted = pattern if pattern.startswith("ml.") else f"ml.{pattern}"
            hits = fnmatch.filter(names, wanted)
            if not hits:
                raise PlanError(f"--instance-types {pattern!r} matches no instance type in "
                                f"lmikit's catalog; e.g. 'ml.g6e.*', 'ml.p5.48xlarge' (`lmikit "
                                "prices show` lists the catalog's priced types)")
            chosen += [h for h in hits if h not in chosen]
    else:
        chosen = [n for n in names if offered(region, n) is not False]
    prices: dict[str, Price] = {}
    unpriced: list[str] = []
    for name in chosen:
        price = hourly_price(name, region, table)
        if price is not None:
            prices[name] = price
        elif globs:
            notes.append(f"skipped {name}: {price_or_reason(name, region, None, table)}")
        else:
            unpriced.append(name)
    if unpriced:
        notes.append(f"skipped {len(unpriced)} instance types sold in {region} without a list "
                     f"price in lmikit's table{'' if table is None else ' or the price file'} "
                     f"({', '.join(unpriced)}); `lmikit prices fetch --region {region}` reads "
                     "them from AWS (then --prices FILE)")
    return prices, notes


def cache_options(settings: Settings, has_nvme: bool, modes: Sequence[str] | None,
                  ) -> list[str]:
    """The KV-cache modes a spec can state here: remote needs the spec's remote_url, and
    in_memory_only rules out disk and remote."""
    wanted = list(modes) if modes else ["off", "cpu", "cpu+disk", "remote"]
    out = []
    for mode in wanted:
        if mode == "cpu+disk" and (not has_nvme or settings.in_memory_only):
            continue
        if mode == "remote" and (not settings.remote_url or settings.in_memory_only):
            continue
        out.append(mode)
    return out


def right_sized_cpu_gb(settings: Settings, instance_type: str, tp: int, copies: int,
                       repeated_tokens: int) -> float | None:
    """A CPU tier per worker that holds the workload's repeated text (plus headroom), when
    that is well under what the planner gives it; None otherwise."""
    from lmikit.planner import plan

    try:
        p = plan(settings.model_id, instance_type, tp=tp, copies=copies, mode="cpu",
                 chunk_size=settings.chunk_size,
                 gpu_memory_utilization=settings.gpu_memory_utilization,
                 kv_cache_dtype=settings.kv_cache_dtype, weight_dtype=settings.weight_dtype,
                 config_path=settings.config_path, max_model_len=settings.max_model_len)
    except PlanError:
        return None
    auto_gb = float(p.lmcache["max_local_cpu_size_gb"])
    if repeated_tokens <= 0 or p.cpu_capacity_tokens <= 0 or auto_gb <= 0:
        return None
    need = repeated_tokens * SIZE_HEADROOM * auto_gb / p.cpu_capacity_tokens
    sized = max(SIZE_STEP_GB, math.ceil(need / SIZE_STEP_GB) * SIZE_STEP_GB)
    return sized if sized <= auto_gb * RIGHT_SIZE_AT_MOST else None


def build_space(settings: Settings, deployments: Deployments, *, instance_globs:
                Sequence[str] | None, table: PriceTable | None, max_instances: int,
                max_usd_hour: float | None, modes: Sequence[str] | None,
                routings: Sequence[str] | None, repeated_tokens: int,
                longest_request: int) -> Space:
    """Every candidate, planned; the refused and over-budget ones counted, not kept."""
    from lmikit.catalog import get_model
    from lmikit.planner import tp_degrees

    geometry = (get_model(settings.model_id, settings.config_path) if settings.config_path
                else get_model(settings.model_id))
    prices, notes = instance_types(settings.region, instance_globs, table)
    kept: list[Candidate] = []
    refused = 0
    too_short: set[str] = set()
    for name, price in prices.items():
        inst = INSTANCES[ml_name(name)]
        for tp in tp_degrees(geometry, inst.gpu_count):
            for copies in [c for c in range(1, inst.gpu_count // tp + 1)
                           if (inst.gpu_count // tp) % c == 0]:
                options = _options(settings, deployments, name, tp, copies, inst.has_nvme,
                                   modes, repeated_tokens)
                for n in range(1, max_instances + 1):
                    ways = (list(routings or ROUTINGS) if n * copies > 1
                            else [settings.routing])  # one copy: routing cannot differ
                    for mode, cpu_gb, disk_gb in options:
                        for routing in ways:
                            c = Candidate(name, tp, copies, n, mode, cpu_gb, disk_gb, routing)
                            dep = deployments.of(c)
                            if isinstance(dep, str) or (max_usd_hour is not None
                                                        and price.usd * n > max_usd_hour):
                                refused += 1
                            elif dep.max_model_len and longest_request > dep.max_model_len:
                                too_short.add(f"{name} TP {tp}")
                                refused += 1
                            else:
                                kept.append(c)
    if too_short:
        notes.append(f"pruned {', '.join(sorted(too_short))}: the longest request exceeds the "
                     "max_model_len the planner gives it there")
    return Space(kept, refused, prices, notes)


def _options(settings: Settings, deployments: Deployments, name: str, tp: int, copies: int,
             has_nvme: bool, modes: Sequence[str] | None,
             repeated_tokens: int) -> list[tuple[str, float | str, float | str]]:
    """(mode, cpu_size_gb, disk_size_gb) of each cache option on this layout."""
    out: list[tuple[str, float | str, float | str]] = []
    for mode in cache_options(settings, has_nvme, modes):
        out.append((mode, "auto", "auto"))
        if mode == "cpu":
            sized = right_sized_cpu_gb(settings, name, tp, copies, repeated_tokens)
            if sized is not None:
                out.append((mode, sized, "auto"))
    return out
