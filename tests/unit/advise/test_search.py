"""The search on a synthetic engine whose answer is known in closed form, and its properties.

The engine: a copy of instance type ``t`` serves a closed loop of ``USERS`` users, each
request needing ``WORK / speed[t]`` seconds of one copy; with ``n`` copies the TTFT p90 is
``BASE + WORK / (speed[t] x n)``, and a copy-hour costs ``price[t]``. The cheapest
deployment meeting ``ttft_p90_s <= target`` is, for each type, the fewest copies that meet
it, ``ceil(WORK / (speed x (target - BASE)))``, and across types the one with the lowest
price x copies: computed below by formula, not by search.

Screening runs a reduced workload, whose figures are not the full run's. The properties
hold with screening whenever every screened figure is within a factor ``1 + e`` of the full
one, ``(1 + e)^2 <= 1 + SCREEN_BAND``: a candidate the screen drops is beaten there by more
than the band, so in full by another strictly cheaper and better on every metric, which
cannot be the answer's case; the screened answer is then the unscreened one. The tests draw
such screens (``noise``), and one beyond the band, which changes the answer.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmikit.advisor import Candidate, Figures, Slo, pareto, parse_slo, search
from lmikit.advisor._search import SCREEN_BAND

BASE = 0.05
WORK = 2.0
TYPES = {"ml.a.xlarge": (1.0, 1.0), "ml.b.xlarge": (2.5, 3.0), "ml.c.xlarge": (6.0, 5.0),
         "ml.d.xlarge": (1.3, 1.2)}  # name -> (speed, USD per copy-hour)
TOKENS_S = 1000.0  # what the users ask for, whatever the copies


def candidates(types: list[str], most: int) -> list[Candidate]:
    return [Candidate(t, 1, 1, n, "off", "auto", "auto", "sticky_session")
            for t in types for n in range(1, most + 1)]


def figures(c: Candidate, full: bool = True) -> Figures:
    speed, price = TYPES[c.instance_type]
    ttft = BASE + WORK / (speed * c.instances)
    usd_hour = price * c.instances
    tokens = TOKENS_S
    return Figures(ttft_p50_s=ttft * 0.8, ttft_p90_s=ttft, throughput_tokens_s=tokens,
                   usd_per_hour=usd_hour, usd_per_1k_tokens=usd_hour / 3600 / tokens * 1000)


def bound(c: Candidate) -> dict[str, float]:
    f = figures(c)
    return {"ttft_p90_s": BASE + (f.ttft_p90_s - BASE) / 2, "ttft_p50_s": f.ttft_p50_s / 2}


def by_formula(target: float, most: int, types: list[str]) -> tuple[str, int] | None:
    best = None
    for t in types:
        speed, price = TYPES[t]
        n = math.ceil(WORK / (speed * (target - BASE)) - 1e-12)
        if 1 <= n <= most:
            cost = figures(Candidate(t, 1, 1, n, "off", "auto", "auto", "x")).usd_per_1k_tokens
            if best is None or cost < best[0]:
                best = (cost, t, n)
    return None if best is None else (best[1], best[2])


WITHIN = math.sqrt(1 + SCREEN_BAND)  # 1 + e: a screened figure's largest factor off


def screened_by(noise: int | None, spread: float = WITHIN):
    """Figures whose screened cost, TTFT and throughput are each off the full run's by a
    factor up to ``spread`` either way, drawn per candidate from ``noise`` (None: exact)."""
    def evaluate(c: Candidate, full: bool) -> Figures:
        f = figures(c)
        if full or noise is None:
            return f
        draw = random.Random(f"{noise} {c.key}")
        cost, ttft, tokens = (spread ** draw.uniform(-1, 1) for _ in range(3))
        return Figures(ttft_p50_s=f.ttft_p50_s * ttft, ttft_p90_s=f.ttft_p90_s * ttft,
                       throughput_tokens_s=f.throughput_tokens_s * tokens,
                       usd_per_hour=f.usd_per_hour,
                       usd_per_1k_tokens=f.usd_per_1k_tokens * cost)
    return evaluate


def advise(target: float, most: int = 40, types: list[str] | None = None, screen: bool = True,
           noise: int | None = None):
    return search(candidates(types or sorted(TYPES), most), screened_by(noise),
                  [Slo("ttft_p90_s", target)], lower_bound=bound, screen=screen)


noises = st.none() | st.integers(0, 2**32)


def test_advise_finds_the_closed_form_optimum() -> None:
    for target in (0.1, 0.3, 0.55, 1.0, 2.05):
        result = advise(target)
        c = result.best.candidate
        assert result.best.meets_slo
        assert (c.instance_type, c.instances) == by_formula(target, 40, sorted(TYPES))


def test_pruned_candidates_are_counted_and_never_the_answer() -> None:
    result = advise(0.2)
    assert result.considered == len(TYPES) * 40
    assert result.pruned > 0  # their bound alone exceeds 0.2 s
    assert result.pruned + result.screened == result.considered


def test_a_target_none_can_meet_names_the_closest_and_its_miss() -> None:
    result = advise(0.051, most=3)
    assert not result.best.meets_slo
    assert result.best.candidate == Candidate("ml.c.xlarge", 1, 1, 3, "off", "auto", "auto",
                                              "sticky_session")
    miss = result.misses["ttft_p90_s"]
    assert miss["bound"] == 0.051 and miss["value"] > 0.051 and miss["by"] > 0


targets = st.floats(min_value=0.06, max_value=3.0)


@settings(max_examples=60, deadline=None)
@given(targets, st.integers(1, 40), st.integers(0, 2**32))
def test_a_screen_within_the_band_keeps_the_unscreened_answer(target: float, most: int,
                                                              noise: int) -> None:
    screened = advise(target, most, noise=noise)
    assert screened.screened > 0 or screened.refined <= 1  # one survivor is not screened
    assert screened.best == advise(target, most, screen=False).best


def test_a_screen_beyond_the_band_loses_the_answer() -> None:
    """The condition is needed: the answer screened at three times its cost and TTFT is
    beaten there by more than the band, and dropped."""
    exact = advise(1.0, screen=False).best

    def evaluate(c: Candidate, full: bool) -> Figures:
        f = figures(c)
        if full or c != exact.candidate:
            return f
        return Figures(f.ttft_p50_s * 3, f.ttft_p90_s * 3, f.throughput_tokens_s,
                       f.usd_per_hour, f.usd_per_1k_tokens * 3)

    wrong = search(candidates(sorted(TYPES), 40), evaluate, [Slo("ttft_p90_s", 1.0)],
                   lower_bound=bound)
    assert wrong.best.meets_slo
    assert wrong.best.figures.usd_per_1k_tokens > exact.figures.usd_per_1k_tokens


@settings(max_examples=60, deadline=None)
@given(targets, targets, noises)
def test_a_tighter_target_never_yields_a_cheaper_best(a: float, b: float,
                                                      noise: int | None) -> None:
    tight, loose = sorted((a, b))
    t, lo = advise(tight, noise=noise).best, advise(loose, noise=noise).best
    if t.meets_slo:
        assert lo.meets_slo
        assert lo.figures.usd_per_1k_tokens <= t.figures.usd_per_1k_tokens


@settings(max_examples=40, deadline=None)
@given(targets, st.integers(1, 20), st.integers(0, 20), noises)
def test_a_larger_budget_never_yields_a_worse_best(target: float, most: int, more: int,
                                                   noise: int | None) -> None:
    small = advise(target, most, noise=noise).best
    large = advise(target, most + more, noise=noise).best
    if small.meets_slo:
        assert large.meets_slo
        assert large.figures.usd_per_1k_tokens <= small.figures.usd_per_1k_tokens


@settings(max_examples=40, deadline=None)
@given(targets, st.sets(st.sampled_from(sorted(TYPES)), min_size=1), noises)
def test_more_instance_types_never_yield_a_worse_best(target: float, some: set[str],
                                                      noise: int | None) -> None:
    fewer = advise(target, types=sorted(some), noise=noise).best
    every = advise(target, noise=noise).best
    if fewer.meets_slo:
        assert every.meets_slo
        assert every.figures.usd_per_1k_tokens <= fewer.figures.usd_per_1k_tokens


@settings(max_examples=40, deadline=None)
@given(targets, st.booleans(), noises)
def test_no_pareto_entry_is_dominated(target: float, screen: bool, noise: int | None) -> None:
    result = advise(target, screen=screen, noise=noise)
    front = result.pareto
    assert front
    for e in front:
        for other in result.entries:
            ec, oc = e.figures.usd_per_1k_tokens, other.figures.usd_per_1k_tokens
            ev, ov = e.figures.ttft_p90_s, other.figures.ttft_p90_s
            assert not (oc <= ec and ov <= ev and (oc < ec or ov < ev))


def test_a_throughput_objective_is_a_lower_bound() -> None:
    result = search(candidates(sorted(TYPES), 5), figures,
                    [parse_slo("throughput_tokens_s>=3000")], screen=False)
    assert not result.best.meets_slo  # the users ask for 1,000 tokens/s
    assert result.misses["throughput_tokens_s"]["by"] == pytest.approx(2 / 3, abs=1e-4)
    assert len(result.pareto) == 1  # all serve the same: only the cheapest is not dominated


def test_pareto_of_candidates_given_twice_lists_each_point_once() -> None:
    result = search(candidates(["ml.a.xlarge"], 2) * 2, figures, [Slo("ttft_p90_s", 5.0)],
                    screen=False)
    assert result.considered == 2
    assert [e.candidate.instances for e in pareto(result.entries, Slo("ttft_p90_s", 5.0))] \
        == [1, 2]
