"""advise's trust statement states docs/accuracy.md's out-of-sample figures for the answer's
category, and says plainly where they are large."""

from __future__ import annotations

import pytest

from lmikit.advisor._trust import category, figures, heading, trust
from tests.unit.advise import accuracy_table

# the doc's words for each table name
CATEGORIES = {"cache_blind": "cache-blind", "lmcache_offload": "LMCache offload",
              "cache_aware_routing": "cache-aware routing"}
QUANTITIES = {"ttft_hit": "TTFT on cache hits", "ttft_miss": "TTFT on misses / cold",
              "throughput": "throughput"}
# (KV-cache mode, routing) of an answer -> the category its figures are read from
LAYOUTS = [("off", "random", "cache_blind"), ("off", "sticky_session", "cache_blind"),
           ("off", "prefix_aware", "cache_aware_routing"),
           ("off", "kv_aware", "cache_aware_routing"), ("cpu", "random", "lmcache_offload"),
           ("cpu", "kv_aware", "lmcache_offload"), ("disk", "prefix_aware", "lmcache_offload")]


def _expected(name: str, quantities: tuple[str, ...]) -> list[str]:
    """The statement's lines as docs/accuracy.md prints the figures (LOSO columns)."""
    doc = accuracy_table.cells()
    out = []
    for q in quantities:
        c = doc.get((name, QUANTITIES[q]))
        if c is not None:
            out.append(f"{CATEGORIES[name]}, {QUANTITIES[q]}: median {c.median_loso} off, "
                       f"worst {c.worst_loso}, {c.within_loso} within 1.5x ({c.setups} "
                       f"setup{'s' if c.setups > 1 else ''}, {c.rows} figures)")
    return out


@pytest.mark.parametrize(("kv_cache", "routing", "name"), LAYOUTS)
def test_an_answer_falls_in_the_category_its_published_rows_would_be_tagged(
        kv_cache: str, routing: str, name: str) -> None:
    """tests/unit/sim/rows.py: an LMCache arm is lmcache_offload whatever its routing
    (llmd_offload.py tags llm-d's routed LMCache arms so); cache-aware routing over GPU
    caches only is cache_aware_routing; sticky sessions are cache-blind (llmd_reasoning)."""
    assert category(kv_cache, routing) == name


@pytest.mark.parametrize(("kv_cache", "routing", "name"), LAYOUTS)
@pytest.mark.parametrize(("metrics", "quantities"), [
    (["ttft_p90_s"], ("ttft_hit", "ttft_miss", "throughput")),
    (["ttft_p50_s", "throughput_tokens_s"], ("ttft_hit", "ttft_miss", "throughput")),
    (["throughput_tokens_s"], ("throughput",)),
])
def test_trust_states_the_doc_s_out_of_sample_figures_for_the_answer_s_category(
        kv_cache: str, routing: str, name: str, metrics: list[str],
        quantities: tuple[str, ...]) -> None:
    lines = trust(metrics, kv_cache, routing)
    expected = _expected(name, quantities)
    assert expected, (name, quantities)  # every category has throughput figures at least
    assert [line.split("; ")[0] for line in lines] == expected


def test_without_an_answer_every_category_is_stated() -> None:
    lines = trust(["ttft_p90_s"])
    assert [line.split("; ")[0] for line in lines] == [
        e for name in CATEGORIES for e in _expected(name, ("ttft_hit", "ttft_miss",
                                                           "throughput"))]


def test_large_errors_are_called_large_by_the_stated_rule() -> None:
    """Large: the median outside 1.5x, fewer than half the setups within it, or a row 5x
    off or more, each reason named; fewer than 3 setups is said apart (not an error)."""
    doc = accuracy_table.cells()
    seen = 0
    for a in figures(["ttft_p90_s"]):
        c = doc[(a.category, QUANTITIES[a.quantity])]
        median, worst = float(c.median_loso.rstrip("x")), float(c.worst_loso.rstrip("x"))
        within = int(c.within_loso.rstrip("%")) / 100
        reasons = [median > 1.5, within < 0.5, worst >= 5]
        line = a.line(QUANTITIES)
        assert ("LARGE ERRORS" in line) == any(reasons), line
        assert a.to_dict()["large"] == any(reasons)
        assert ("the median is outside 1.5x" in line) == reasons[0], line
        assert ("fewer than half the setups within 1.5x" in line) == reasons[1], line
        assert (f"one published figure is {worst:.0f}x off" in line) == reasons[2], line
        few = c.setups < 3
        assert (f"only {c.setups} setup" in line) == few == a.to_dict()["few_setups"], line
        seen += any(reasons)
    assert 0 < seen < len(figures(["ttft_p90_s"]))


def test_cache_aware_routing_ttft_on_hits_is_called_large_plainly() -> None:
    hits = [line for line in trust(["ttft_p90_s"], "off", "prefix_aware")
            if "TTFT on cache hits" in line]
    worst = accuracy_table.cells()[("cache_aware_routing", "TTFT on cache hits")].worst_loso
    assert float(worst.rstrip("x")) > 50  # the doc's worst: the case this guards
    assert len(hits) == 1 and "LARGE ERRORS" in hits[0]
    assert f"one published figure is {float(worst.rstrip('x')):.0f}x off" in hits[0]


def test_the_json_figures_are_the_lines_figures() -> None:
    doc = accuracy_table.cells()
    for a in figures(["ttft_p50_s"], "cpu", "prefix_aware"):
        got = a.to_dict()
        c = doc[(got["category"], QUANTITIES[got["quantity"]])]
        assert (got["setups"], got["rows"], f"{got['median_factor']:.2f}x",
                f"{got['worst_factor']:.2f}x", f"{got['within_1_5x']:.0%}") == (
            c.setups, c.rows, c.median_loso, c.worst_loso, c.within_loso)


def test_heading_says_out_of_sample_and_names_the_answer_s_category() -> None:
    assert heading().startswith("Trust, out of sample (leave one source out): the simulator "
                                "against published measurements")
    assert "docs/accuracy.md" in heading()
    assert heading("cpu", "kv_aware").endswith("The answer is LMCache offload.")
    assert heading("off", "sticky_session").endswith("The answer is cache-blind.")
    assert heading("off", "prefix_aware").endswith("The answer is cache-aware routing.")
