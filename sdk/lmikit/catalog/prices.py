"""SageMaker real-time inference on-demand prices: one dated table, each row with its source.

Standard library only. Only prices with a public source are listed; anything else has no
price (callers say so, or take one from the user). Prices change and differ by region,
savings plan and discount: these are list prices, not a bill.

>>> p = hourly_price("ml.g5.2xlarge", "us-east-1")
>>> p.usd, p.as_of
(1.52, '2026-03-15')
>>> hourly_price("ml.g5.2xlarge", "eu-west-1") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    usd: float  # per instance-hour, on demand
    region: str
    as_of: str  # date of the source
    source: str


_WRING = "wring.co 'AWS SageMaker inference guide' table"
PRICES: dict[tuple[str, str], Price] = {
    ("us-east-1", "ml.g5.xlarge"): Price(
        1.41, "us-east-1", "2025-10", "zircon.tech 'Real cost of running AI models on "
        "SageMaker', us-east-1, Oct 2025"),
    ("us-east-1", "ml.g5.2xlarge"): Price(1.52, "us-east-1", "2026-03-15", _WRING),
    ("us-east-1", "ml.p4d.24xlarge"): Price(37.69, "us-east-1", "2026-03-15", _WRING),
}


def hourly_price(instance_type: str, region: str) -> Price | None:
    """The listed on-demand price of ``instance_type`` in ``region``, or None."""
    key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    return PRICES.get((region, key))
