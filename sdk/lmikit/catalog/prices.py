"""SageMaker real-time inference on-demand prices: one dated table, each row with its source.

Standard library only. Only prices with a public source are listed; anything else has no
price (callers say so, or take one from the user). No public copy of AWS's price list
was found for ml.g6.xlarge-8xlarge, ml.g6e.*, ml.p4de, ml.p5e, ml.p5en, ml.p5.4xlarge or
ml.p6-b200, nor for any region other than us-east-1: those stay unpriced
(``--hourly-price`` covers them). Prices change and differ by region,
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
# aws-samples/foundation-model-benchmarking-tool fmbench/configs/pricing_fallback.yml
# (last changed 2025-01-26), "SageMaker Hourly Instance Pricing" for endpoints. The file
# names no region; its ml.g5.xlarge, ml.g5.2xlarge and ml.p4d.24xlarge figures (1.4084,
# 1.515, 37.688) are the us-east-1 ones the two sources above list, so it is read as
# us-east-1.
_FMBENCH = ("aws-samples/foundation-model-benchmarking-tool "
            "fmbench/configs/pricing_fallback.yml (SageMaker endpoint hourly prices; "
            "us-east-1 by agreement with the listed us-east-1 rows)")
_FMBENCH_DATE = "2025-01-26"
_FMBENCH_USD = {
    "ml.g5.4xlarge": 2.03, "ml.g5.8xlarge": 3.06, "ml.g5.12xlarge": 7.09,
    "ml.g5.24xlarge": 10.18, "ml.g5.48xlarge": 20.36, "ml.g6.2xlarge": 1.222,
    "ml.g6.12xlarge": 5.752, "ml.g6.16xlarge": 4.246, "ml.g6.24xlarge": 8.344,
    "ml.g6.48xlarge": 16.688, "ml.p5.48xlarge": 113.068,
}
PRICES: dict[tuple[str, str], Price] = {
    ("us-east-1", "ml.g5.xlarge"): Price(
        1.41, "us-east-1", "2025-10", "zircon.tech 'Real cost of running AI models on "
        "SageMaker', us-east-1, Oct 2025"),
    ("us-east-1", "ml.g5.2xlarge"): Price(1.52, "us-east-1", "2026-03-15", _WRING),
    ("us-east-1", "ml.p4d.24xlarge"): Price(37.69, "us-east-1", "2026-03-15", _WRING),
    **{("us-east-1", name): Price(usd, "us-east-1", _FMBENCH_DATE, _FMBENCH)
       for name, usd in _FMBENCH_USD.items()},
}


def hourly_price(instance_type: str, region: str) -> Price | None:
    """The listed on-demand price of ``instance_type`` in ``region``, or None."""
    key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    return PRICES.get((region, key))
