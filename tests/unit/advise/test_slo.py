from __future__ import annotations

import pytest

from lmikit.advisor import Slo, parse_slo, parse_slos
from lmikit.errors import PlanError


def test_slo_equals_takes_the_metric_direction() -> None:
    assert parse_slo("ttft_p90_s=1.0") == Slo("ttft_p90_s", 1.0)
    assert parse_slo("throughput_tokens_s=9000").met(9500.0)
    assert not parse_slo("ttft_p50_s<=0.5").met(0.6)


def test_slo_miss_is_a_share_of_the_bound() -> None:
    assert parse_slo("ttft_p90_s=1.0").miss(1.25) == pytest.approx(0.25)
    assert parse_slo("throughput_tokens_s>=1000").miss(750.0) == pytest.approx(0.25)
    assert parse_slo("ttft_p90_s=1.0").miss(0.5) == 0.0


@pytest.mark.parametrize(("text", "match"), [
    ("ttft_p90_s", "not METRIC=VALUE"),
    ("ttft_p95_s=1", "unknown metric 'ttft_p95_s'; valid: ttft_p50_s"),
    ("ttft_p90_s=-1", "not a number above 0"),
    ("ttft_p90_s=nan", "not a number above 0"),
    ("ttft_p90_s>=1", "upper bound; write ttft_p90_s<=1"),
    ("throughput_tokens_s<=5", "lower bound; write throughput_tokens_s>=5"),
])
def test_slo_refuses_what_it_cannot_read(text: str, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        parse_slo(text)


def test_slos_refuse_none_and_a_metric_twice() -> None:
    with pytest.raises(PlanError, match="at least one --slo"):
        parse_slos([])
    with pytest.raises(PlanError, match="names ttft_p90_s twice"):
        parse_slos(["ttft_p90_s=1", "ttft_p90_s<=2"])
