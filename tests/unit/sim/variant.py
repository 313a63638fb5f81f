"""The model variant the accuracy fixtures replay under, and the choices a fit may make.

``tests/unit/sim/accuracy.py`` fits two global things to the table (the tensor-parallel
step overhead and whether NVLink all-reduces are costed) and a few per-source choices that
were once made with a publication's figures in view. A :class:`Variant` names one point of
that search. The fixtures apply its global part to every model copy they build
(:func:`apply`, :func:`apply_deployment`) and key their caches on it (:func:`cached`); a row
reads a per-source choice with ``current().choice(name)``. With no variant set, the
fixtures replay lmikit's defaults and each choice's default (:data:`CHOICES`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lmikit.sim._coefficients import Coefficients
from lmikit.sim._engine import EngineModel
from lmikit.sim._loop import CopyConfig
from lmikit.sim._scenario import Deployment

# NCCL's all-reduce bus bandwidth on H100 NVLink (NVIDIA/nccl-tests issue #212, ~370 GB/s):
# the rate at which the "costed" alternative charges a tensor-parallel step's all-reduces.
NVLINK_ALLREDUCE_GBPS = 370.0


@dataclass(frozen=True)
class Choice:
    """A per-source modelling choice the fit may make: ``default`` is what the setup's
    source or lmikit's general rule gives (used whenever the source is held out)."""

    unit: str  # the held-out unit whose rows it changes (published.PUBLICATIONS)
    default: str
    alternatives: tuple[str, ...]
    why: str


CHOICES: dict[str, Choice] = {
    "llmd_2025_gateway": Choice(
        "llmd-kvwins-2025", "envoy-1024", ("envoy-1024", "none"),
        "requests in flight through the 2025 runs' inference gateway: its endpoint picker is "
        "an Envoy ext_proc service, and Envoy's max_requests circuit breaker defaults to "
        "1,024 (circuit_breaker.proto); neither report names the gateway or a limit"),
    "llmd_2026_pool": Choice(
        "llmd-2026", "planner", ("planner", "73-capacity"),
        "KV pool per pod of the 2026 Qwen3-32B TP 2 servers, which publish none: lmikit's "
        "planner (the rule for every setup without a published pool) or the 2025 "
        "73-capacity report's 307,328 tokens for the same model, GPU, TP and memory share"),
    "codegen_routing": Choice(
        "llmd-2026", "per-connection", ("per-connection", "per-request"),
        "the code-generation run's Service: per keep-alive connection as inference-perf "
        "3c7c4a3's client implies, or random per request"),
}


@dataclass(frozen=True)
class Variant:
    """One point of the fit: the global coefficients and the per-source choices."""

    tp_step_overhead_s: float = Coefficients().tp_decode_step_overhead_s
    nvlink_allreduce_gbps: float = 0.0  # > 0: NVLink all-reduces costed at this rate
    choices: tuple[tuple[str, str], ...] = ()  # (name, value) where not the default

    def __post_init__(self) -> None:
        for name, value in self.choices:
            if name not in CHOICES or value not in CHOICES[name].alternatives:
                raise ValueError(f"unknown choice {name}={value}")

    @property
    def engine_key(self) -> tuple[float, float]:
        return self.tp_step_overhead_s, self.nvlink_allreduce_gbps

    def choice(self, name: str) -> str:
        return dict(self.choices).get(name, CHOICES[name].default)

    def with_choices(self, **values: str) -> Variant:
        merged = {**dict(self.choices), **values}
        kept = tuple(sorted((k, v) for k, v in merged.items() if v != CHOICES[k].default))
        return dataclasses.replace(self, choices=kept)

    def global_part(self) -> Variant:
        return Variant(self.tp_step_overhead_s, self.nvlink_allreduce_gbps)

    @property
    def key(self) -> str:
        """A stable name, the accuracy record's key (:meth:`from_key` reads it back).

        >>> Variant(0.003, 370.0, (("codegen_routing", "per-request"),)).key
        'tp_step=0.003,nvlink_ar=370,codegen_routing=per-request'
        >>> Variant.from_key(Variant().key) == Variant()
        True
        """
        extra = "".join(f",{k}={v}" for k, v in self.choices)
        return (f"tp_step={self.tp_step_overhead_s:g},"
                f"nvlink_ar={self.nvlink_allreduce_gbps:g}{extra}")

    @classmethod
    def from_key(cls, key: str) -> Variant:
        pairs = dict(part.split("=", 1) for part in key.split(","))
        tp, allreduce = float(pairs.pop("tp_step")), float(pairs.pop("nvlink_ar"))
        return cls(tp, allreduce).with_choices(**pairs)

    def engine(self, e: EngineModel) -> EngineModel:
        if e.tp == 1:
            return e
        if e.coeff.tp_decode_step_overhead_s != self.tp_step_overhead_s:
            e = e.with_coefficients(e.coeff.replace(
                tp_decode_step_overhead_s=self.tp_step_overhead_s))
        if self.nvlink_allreduce_gbps and not e.allreduces_cross_pcie:
            e = dataclasses.replace(e, pcie_allreduce_gbps=self.nvlink_allreduce_gbps)
        return e


DEFAULT = Variant()
_current = DEFAULT


def current() -> Variant:
    return _current


@contextlib.contextmanager
def using(variant: Variant) -> Iterator[Variant]:
    """Replay the fixtures under ``variant`` inside the block."""
    global _current
    before, _current = _current, variant
    try:
        yield variant
    finally:
        _current = before


def apply(copies: Sequence[CopyConfig]) -> list[CopyConfig]:
    """``copies`` with the current variant's engine."""
    v = _current
    return [dataclasses.replace(c, engine=v.engine(c.engine)) for c in copies]


def apply_deployment(dep: Deployment) -> Deployment:
    return dataclasses.replace(dep, engine=_current.engine(dep.engine))


F = TypeVar("F", bound=Callable[..., Any])


def cached(fn: F) -> F:
    """``functools.cache`` keyed on the current variant's global part as well (and on the
    arguments as bound, defaults filled in, so ``f(x)`` and ``f(x, default)`` are one entry)."""
    store: dict[tuple[Any, ...], Any] = {}
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = (_current.engine_key, tuple(bound.arguments.values()))
        if key not in store:
            store[key] = fn(*bound.args, **bound.kwargs)
        return store[key]

    wrapper.cache_clear = store.clear  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
