"""One published figure as an accuracy fixture, tagged by what a user asks and how it was made.

A row's tags say what it measures and how independent it is of the others:

- ``quantity``: ``ttft_hit`` (time to first token of an arm whose caches, GPU prefix cache
  with cache-aware routing or an LMCache tier, are built to hold the prompts it repeats, or
  such an arm's gain over its baseline), ``ttft_miss`` (an arm without such a cache, a
  baseline whose working set exceeds its caches, or a cold request), ``throughput`` (tokens
  per second, or their ratio), ``total_time`` (request latency, a round's or a run's
  duration), ``itl`` (time per output token), ``kv_pool`` (the planner's pool against a
  published one) and ``order`` (a published ordering, 1 when it holds; not a ratio);
- ``category``: ``cache_blind`` (no cache-aware routing and no LMCache), ``lmcache_offload``
  (an arm with an LMCache tier, or its gain), ``cache_aware_routing`` (prefix- or KV-aware
  routing over GPU caches only);
- ``publication``: the source (a key of ``published.PUBLICATIONS``);
- ``setup``: the independent setup (one workload on one fleet; the points of one sweep, or two
  publications of one run, are one setup);
- ``replay``: the simulated run or runs the figure is read from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

QUANTITIES = ("ttft_hit", "ttft_miss", "throughput", "total_time", "itl", "kv_pool", "order")
ERROR_QUANTITIES = QUANTITIES[:5]  # the ones whose simulated / published ratio is an error
CATEGORIES = ("cache_blind", "lmcache_offload", "cache_aware_routing")


@dataclass(frozen=True)
class Row:
    name: str
    source: str
    published: float
    unit: str
    simulated: Callable[[], float]
    quantity: str
    category: str
    publication: str
    setup: str
    replay: str

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES or self.category not in CATEGORIES:
            raise ValueError(f"{self.name}: unknown quantity {self.quantity!r} or category "
                             f"{self.category!r}")
        if not (self.source and self.publication and self.setup and self.replay):
            raise ValueError(f"{self.name}: source, publication, setup and replay are required")
        if not self.published > 0:
            raise ValueError(f"{self.name}: the published figure must be positive")
