"""How far to trust an answer: the simulator's error against published measurements.

The figures are docs/accuracy.md's error by category and quantity, out of sample: each
source (a publication, or publications sharing a run or setup) predicted by the simulator
fitted without it. The package carries that table as ``lmikit/sim/accuracy.json``,
generated with the doc from the same record; a test holds the statement to the doc.

An answer falls in one category, by the rule the published rows are tagged with: an LMCache
tier makes it ``lmcache_offload`` whatever the routing; otherwise prefix- or KV-aware
routing makes it ``cache_aware_routing``; otherwise ``cache_blind``. A TTFT objective
(p50 or p90 alike: the table does not split them) is judged on the category's TTFT on cache
hits and on misses, where it has figures of each; cost per 1K tokens follows throughput.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SOURCE = "docs/accuracy.md, 'Error by category and quantity'"
SAMPLE = "out of sample (leave one source out)"
BASIS = ("the simulator against published measurements, each source predicted by the fit "
         "over the others")
CACHE_AWARE = ("prefix_aware", "kv_aware")
WORDS = {"cache_blind": "cache-blind", "lmcache_offload": "LMCache offload",
         "cache_aware_routing": "cache-aware routing"}
# advise's metric -> the table's quantities that judge it
QUANTITIES = {"ttft_p50_s": ("ttft_hit", "ttft_miss"), "ttft_p90_s": ("ttft_hit", "ttft_miss"),
              "throughput_tokens_s": ("throughput",)}
# past these a figure's errors are called large: its median outside the 1.5x band, fewer
# than half its setups inside it, or one row off by 5x or more; under 3 setups, too few
LARGE_MEDIAN, LEAST_WITHIN, LARGE_WORST, FEW_SETUPS = 1.5, 0.5, 5.0, 3


@dataclass(frozen=True)
class Accuracy:
    """One cell of the table: simulated against published, as a factor either way."""

    category: str
    quantity: str
    setups: int
    rows: int
    median: float  # setup-weighted median factor
    worst: float  # worst row's factor
    within: float  # setup-weighted share within 1.5x

    def large(self) -> list[str]:
        """Why this figure's errors are large; none when they are not."""
        out = []
        if self.median > LARGE_MEDIAN:
            out.append(f"the median is outside {LARGE_MEDIAN:g}x")
        if self.within < LEAST_WITHIN:
            out.append(f"fewer than half the setups within {LARGE_MEDIAN:g}x")
        if self.worst >= LARGE_WORST:
            out.append(f"one published figure is {self.worst:.0f}x off")
        return out

    def line(self, names: dict[str, str]) -> str:
        text = (f"{WORDS[self.category]}, {names[self.quantity]}: median {self.median:.2f}x "
                f"off, worst {self.worst:.2f}x, {self.within:.0%} within 1.5x ({self.setups} "
                f"setup{'s' if self.setups > 1 else ''}, {self.rows} figures)")
        large = self.large()
        if large:
            text += ("; LARGE ERRORS: " + ", ".join(large) + ": read this figure as a rough "
                     "guide and measure it (lmikit bench)")
        if self.setups < FEW_SETUPS:
            text += (f"; only {self.setups} setup{'s' if self.setups > 1 else ''} measured: "
                     "these errors may not hold for others")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "quantity": self.quantity,
                "setups": self.setups, "rows": self.rows, "median_factor": self.median,
                "worst_factor": self.worst, "within_1_5x": self.within,
                "large": bool(self.large()), "few_setups": self.setups < FEW_SETUPS}


@cache
def table() -> dict[str, Any]:
    """The package's copy of the accuracy table (``lmikit/sim/accuracy.json``)."""
    text = resources.files("lmikit.sim").joinpath("accuracy.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def category(kv_cache: str, routing: str) -> str:
    """The accuracy category a deployment falls in (the module's docstring gives the rule)."""
    if kv_cache != "off":
        return "lmcache_offload"
    return "cache_aware_routing" if routing in CACHE_AWARE else "cache_blind"


def categories(kv_cache: str, routing: str) -> list[str]:
    """The accuracy category a deployment falls in, in words, as a list."""
    return [WORDS[category(kv_cache, routing)]]


def figures(metrics: list[str], kv_cache: str | None = None,
            routing: str | None = None) -> list[Accuracy]:
    """Out of sample, per quantity judging ``metrics`` (and throughput, for cost): the
    answer's category's figures, or every category's without an answer."""
    data = table()["out_of_sample"]
    names = [category(kv_cache, routing)] if kv_cache is not None and routing is not None \
        else list(WORDS)
    quantities = dict.fromkeys(q for m in [*metrics, "throughput_tokens_s"]
                               for q in QUANTITIES[m])
    return [Accuracy(name, q, **{k: c[k] for k in ("setups", "rows", "median", "worst",
                                                    "within")})
            for name in names for q in quantities
            if (c := data.get(name, {}).get(q)) is not None]


def trust(metrics: list[str], kv_cache: str | None = None,
          routing: str | None = None) -> list[str]:
    """One line per category and quantity involved."""
    names = table()["quantities"]
    return [a.line(names) for a in figures(metrics, kv_cache, routing)]


def heading(kv_cache: str | None = None, routing: str | None = None) -> str:
    """The line above :func:`trust`'s: out of sample, against what, and the answer's
    category (``kv_cache`` and ``routing``: the answer's, when there is one)."""
    involved = "" if kv_cache is None or routing is None else (
        f" The answer is {categories(kv_cache, routing)[0]}.")
    return (f"Trust, {SAMPLE}: {BASIS}; simulated against published, as a factor either "
            f"way ({SOURCE}).{involved}")
