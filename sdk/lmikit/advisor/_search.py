"""The search: prune by lower bounds, screen at a reduced request count, refine, choose.

It knows nothing of the simulator: ``evaluate(candidate, full)`` gives a candidate's figures
(``full=False``: on the reduced workload) and ``lower_bound(candidate)`` what no run of it
can beat, so a synthetic engine can stand in for the simulator in tests.

1. A candidate whose lower bound on a TTFT metric already exceeds that objective is pruned.
2. The rest are screened (reduced request count). Kept for refining: every candidate no
   other beats by more than ``band`` on cost *and* on every objective's metric, with every
   KV-cache option of its layout (cache capacity does not scale with the request count).
   Which are kept depends on which metrics the objectives name, not on their bounds.
3. The kept ones run the full workload. The frontier is their Pareto set of cost per 1K
   tokens against the first objective's metric; the answer is the cheapest that meets every
   objective, or, when none does, the one that misses by the least.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmikit.advisor._slo import Slo

SCREEN_BAND = 0.25  # kept for refining: not beaten by more than 25% on cost and every metric
FALLBACK = 3  # when every candidate is pruned, this many closest are simulated, to name one


@dataclass(frozen=True)
class Candidate:
    """One deployment the search considers; ``instances`` counts whole instances."""

    instance_type: str
    tp: int
    copies: int
    instances: int
    kv_cache: str
    cpu_size_gb: float | str
    disk_size_gb: float | str
    routing: str

    @property
    def key(self) -> tuple[str, int, int, int, str, str, str, str]:
        """Its place in the order ties are broken in (sizes as text: "auto" or GB)."""
        return (self.instance_type, self.tp, self.copies, self.instances, self.kv_cache,
                f"{self.cpu_size_gb:0>8}", f"{self.disk_size_gb:0>8}", self.routing)

    @property
    def layout(self) -> tuple[str, int, int, int, str]:
        """The candidate less its cache options."""
        return (self.instance_type, self.tp, self.copies, self.instances, self.routing)


@dataclass(frozen=True)
class Figures:
    """What a run of a candidate gives, as ``lmikit simulate`` reports it."""

    ttft_p50_s: float
    ttft_p90_s: float
    throughput_tokens_s: float
    usd_per_hour: float
    usd_per_1k_tokens: float

    def metric(self, name: str) -> float:
        value: float = getattr(self, name)
        return value


@dataclass(frozen=True)
class Entry:
    candidate: Candidate
    figures: Figures
    meets_slo: bool

    def to_dict(self) -> dict[str, Any]:
        c, f = self.candidate, self.figures
        return {"instance_type": c.instance_type, "tp": c.tp, "copies": c.copies,
                "instances": c.instances, "kv_cache": c.kv_cache,
                "cpu_size_gb": c.cpu_size_gb, "disk_size_gb": c.disk_size_gb,
                "routing": c.routing, "ttft_p50_s": f.ttft_p50_s, "ttft_p90_s": f.ttft_p90_s,
                "throughput_tokens_s": f.throughput_tokens_s, "usd_per_hour": f.usd_per_hour,
                "usd_per_1k_tokens": f.usd_per_1k_tokens, "meets_slo": self.meets_slo}


@dataclass(frozen=True)
class SearchResult:
    considered: int
    pruned: int
    screened: int  # runs at the reduced request count
    refined: int  # runs at the full request count
    entries: list[Entry]  # every candidate run at the full count
    pareto: list[Entry]
    best: Entry | None
    misses: dict[str, dict[str, float]] = field(default_factory=dict)


def search(candidates: Iterable[Candidate], evaluate: Callable[[Candidate, bool], Figures],
           slos: Sequence[Slo], *, lower_bound: Callable[[Candidate], dict[str, float]]
           | None = None, screen: bool = True, band: float = SCREEN_BAND,
           pruned_before: int = 0) -> SearchResult:
    """Search ``candidates``; ``pruned_before`` counts those the caller already pruned
    (the planner's fit rules, the budget), which count as considered."""
    pool = sorted(set(candidates), key=lambda c: c.key)
    survivors, shortfall = _prune(pool, slos, lower_bound)
    if not survivors and pool:  # name the closest all the same
        survivors = sorted(pool, key=lambda c: (shortfall[c], c.key))[:FALLBACK]
    screened = 0
    if screen and len(survivors) > 1:
        reduced = {c: evaluate(c, False) for c in survivors}
        screened = len(reduced)
        kept = _keep(reduced, slos, band)
        layouts = {c.layout for c in kept}
        refine = [c for c in survivors if c.layout in layouts]
    else:
        refine = survivors
    entries = [Entry(c, f, all(s.met(f.metric(s.metric)) for s in slos))
               for c in refine for f in [evaluate(c, True)]]
    best, misses = _choose(entries, slos)
    return SearchResult(considered=len(pool) + pruned_before,
                        pruned=len(pool) - len(survivors) + pruned_before, screened=screened,
                        refined=len(entries), entries=entries,
                        pareto=pareto(entries, slos[0]), best=best, misses=misses)


def _prune(pool: list[Candidate], slos: Sequence[Slo],
           lower_bound: Callable[[Candidate], dict[str, float]] | None,
           ) -> tuple[list[Candidate], dict[Candidate, float]]:
    """The candidates whose lower bounds meet every objective, and each one's shortfall."""
    if lower_bound is None:
        return pool, dict.fromkeys(pool, 0.0)
    shortfall = {}
    for c in pool:
        bounds = lower_bound(c)
        shortfall[c] = max([s.miss(bounds[s.metric]) for s in slos if s.metric in bounds],
                           default=0.0)
    return [c for c in pool if shortfall[c] == 0.0], shortfall


def _oriented(figures: Figures, slos: Sequence[Slo]) -> tuple[float, ...]:
    """Cost and each objective's metric, each as lower-is-better."""
    return (figures.usd_per_1k_tokens,
            *(f if s.lower_is_better else -f for s in slos for f in [figures.metric(s.metric)]))


def _keep(figures: dict[Candidate, Figures], slos: Sequence[Slo],
          band: float) -> list[Candidate]:
    """Candidates no other beats by more than ``band`` on cost and on every metric."""
    points = {c: _oriented(f, slos) for c, f in figures.items()}
    order = sorted(points, key=lambda c: (points[c], c.key))
    kept: list[Candidate] = []
    for i, c in enumerate(order):
        mine = points[c]
        beaten = any(all(_beats(o, m, band) for o, m in zip(points[other], mine, strict=True))
                     for other in order[:i])
        if not beaten:
            kept.append(c)
    return kept


def _beats(other: float, mine: float, band: float) -> bool:
    """``other`` is better than ``mine`` by more than ``band`` (lower is better; a negated
    throughput must be more than ``1 + band`` times as large)."""
    return other * (1 + band) < mine if other >= 0 else other < mine * (1 + band)


def pareto(entries: Sequence[Entry], target: Slo) -> list[Entry]:
    """Entries no other is at least as good as on cost and on ``target``'s metric and better
    on one, cheapest first (of equal points, the first in candidate order)."""
    def key(e: Entry) -> tuple[float, float, tuple[Any, ...]]:
        value = e.figures.metric(target.metric)
        return (e.figures.usd_per_1k_tokens, value if target.lower_is_better else -value,
                e.candidate.key)

    front: list[Entry] = []
    best_so_far = float("inf")
    for e in sorted(entries, key=key):
        value = key(e)[1]
        if value < best_so_far:
            front.append(e)
            best_so_far = value
    return front


def _choose(entries: Sequence[Entry], slos: Sequence[Slo],
            ) -> tuple[Entry | None, dict[str, dict[str, float]]]:
    """The cheapest entry meeting every objective; else the closest, and what it misses."""
    if not entries:
        return None, {}
    target = slos[0]

    def tie(e: Entry) -> float:
        value = e.figures.metric(target.metric)
        return value if target.lower_is_better else -value

    meeting = [e for e in entries if e.meets_slo]
    if meeting:
        cheapest = min(meeting, key=lambda e: (e.figures.usd_per_1k_tokens, tie(e),
                                              e.candidate.key))
        return cheapest, {}

    def worst(e: Entry) -> float:
        return max(s.miss(e.figures.metric(s.metric)) for s in slos)

    closest = min(entries, key=lambda e: (worst(e), e.figures.usd_per_1k_tokens,
                                          e.candidate.key))
    misses = {}
    for s in slos:
        value = closest.figures.metric(s.metric)
        if not s.met(value):
            misses[s.metric] = {"value": value, "bound": s.bound, "by": round(s.miss(value), 4)}
    return closest, misses
