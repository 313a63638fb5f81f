"""Service-level objectives: ``ttft_p90_s=1.0``, ``ttft_p50_s<=0.5``, ``throughput_tokens_s>=9000``.

A TTFT objective is an upper bound, a throughput one a lower bound; ``=`` takes the metric's
own direction, and the other direction is refused.

>>> parse_slo("ttft_p90_s=1.0")
Slo(metric='ttft_p90_s', bound=1.0)
>>> parse_slo("throughput_tokens_s>=9000").met(8000.0)
False
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lmikit.errors import PlanError, safe_repr

# metric -> True when lower is better (the bound is an upper bound)
METRICS: dict[str, bool] = {"ttft_p50_s": True, "ttft_p90_s": True,
                            "throughput_tokens_s": False}
_FORM = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|=)\s*([^\s]+)\s*$")


@dataclass(frozen=True)
class Slo:
    """One objective: ``metric`` at most (TTFT) or at least (throughput) ``bound``."""

    metric: str
    bound: float

    @property
    def lower_is_better(self) -> bool:
        return METRICS[self.metric]

    def met(self, value: float) -> bool:
        return value <= self.bound if self.lower_is_better else value >= self.bound

    def miss(self, value: float) -> float:
        """How far ``value`` is from meeting the objective, as a share of the bound (0 when
        met): 0.25 is a TTFT 25% over its bound or a throughput 25% under it."""
        if self.met(value):
            return 0.0
        if self.lower_is_better:
            return value / self.bound - 1.0
        return 1.0 - value / self.bound

    def text(self) -> str:
        return f"{self.metric}{'<=' if self.lower_is_better else '>='}{self.bound:g}"


def parse_slo(text: str) -> Slo:
    """``METRIC=VALUE``, ``METRIC<=VALUE`` (TTFT) or ``METRIC>=VALUE`` (throughput)."""
    valid = ", ".join(f"{m}{'<=' if low else '>='}N" for m, low in METRICS.items())
    match = _FORM.match(text) if isinstance(text, str) else None
    if match is None:
        raise PlanError(f"--slo {safe_repr(text)} is not METRIC=VALUE; valid: {valid}, "
                        "e.g. ttft_p90_s=1.0")
    metric, op, number = match.groups()
    if metric not in METRICS:
        raise PlanError(f"--slo {text!r}: unknown metric {metric!r}; valid: "
                        f"{', '.join(METRICS)}")
    try:
        bound = float(number)
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound) or bound <= 0:
        raise PlanError(f"--slo {text!r}: {number!r} is not a number above 0")
    low = METRICS[metric]
    if (op == ">=" and low) or (op == "<=" and not low):
        raise PlanError(f"--slo {text!r}: {metric} is a{'n upper' if low else ' lower'} bound; "
                        f"write {metric}{'<=' if low else '>='}{number}")
    return Slo(metric, bound)


def parse_slos(texts: str | Sequence[str]) -> list[Slo]:
    """Every objective, the first being the target the frontier is drawn against; a metric
    given twice is refused."""
    items = [texts] if isinstance(texts, str) else list(texts)
    if not items:
        raise PlanError("give at least one --slo, e.g. --slo ttft_p90_s=1.0")
    slos = [parse_slo(t) for t in items]
    seen: set[str] = set()
    for s in slos:
        if s.metric in seen:
            raise PlanError(f"--slo names {s.metric} twice; give each metric once")
        seen.add(s.metric)
    return slos
