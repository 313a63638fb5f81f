"""The planned cost per 1K tokens a dashboard shows: an ESTIMATE from a list on-demand price
(:mod:`lmikit.catalog`, with its source) and the plan's throughput at full planned load."""

from __future__ import annotations

from dataclasses import dataclass

from lmikit.catalog import PriceTable, price_or_reason
from lmikit.planner import Plan
from lmikit.spec import DeploymentSpec

DECODE_TOKENS_PER_S_ASSUMED = 30.0
"""Per-sequence decode speed assumed by the *plan* cost estimate (not measured)."""


@dataclass(frozen=True)
class CostEstimate:
    hourly_price_usd: float | None
    price_source: str
    tokens_per_hour_per_instance: float
    usd_per_1k_tokens: float | None
    assumptions: tuple[str, ...]


def plan_cost(spec: DeploymentSpec, plan: Plan, hourly_price_usd: float | None = None,
              prices: PriceTable | None = None) -> CostEstimate:
    """Planned $/1K tokens at full planned load: priced in the spec's own region (a price
    file first, then lmikit's table) unless ``hourly_price_usd`` is given."""
    found = price_or_reason(plan.instance_type, spec.region, hourly_price_usd, prices)
    price, source = (None, found) if isinstance(found, str) else (found.usd, found.source)
    w = spec.workload
    tier = {"none": "gpu", "cpu": "cpu", "cpu+disk": "disk", "remote": "cpu"}[plan.tier]
    ttft = plan.predicted.ttft_hit_s.get(tier) or plan.predicted.ttft_miss_s
    seconds = ttft + w.output_tokens / DECODE_TOKENS_PER_S_ASSUMED
    tokens = (w.typical_request_tokens + w.output_tokens) * w.concurrency * plan.copies \
        * 3600 / seconds
    usd = None if price is None else float(f"{price / tokens * 1000:.4g}")
    return CostEstimate(price, source, round(tokens), usd, (
        f"{plan.copies} copy(ies) per instance, each with {w.concurrency} requests in flight",
        f"request = {w.typical_request_tokens} prompt + {w.output_tokens} output tokens",
        f"every request hits the {tier} tier; time per request = predicted TTFT {ttft} s + "
        "output at "
        f"{DECODE_TOKENS_PER_S_ASSUMED:g} tok/s (assumed)",
        "requests in flight do not slow each other (an upper bound on throughput)",
    ))
