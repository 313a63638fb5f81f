"""advise's trust statement holds the figures of docs/planner.md's accuracy table."""

from __future__ import annotations

from lmikit.advise import ACCURACY
from lmikit.advise._trust import trust
from tests.unit.advise import accuracy_table


def test_accuracy_summary_matches_the_docs_table() -> None:
    table = accuracy_table.summary()
    assert {name: (a.rows, a.within_1_5x, a.median_ratio, a.ratio_p10, a.ratio_p90)
            for name, a in ACCURACY.items()} == table


def test_trust_names_each_metric_involved_and_throughput_for_cost() -> None:
    lines = trust(["ttft_p90_s"])
    assert lines[0].startswith("TTFT p90: 53 of 61 published figures within 1.5x")
    assert lines[1].startswith("throughput:")
    assert len(trust(["throughput_tokens_s"])) == 1


def test_trust_heading_says_in_sample_and_names_the_answer_s_categories() -> None:
    from lmikit.advise._trust import heading

    assert heading().startswith("Trust, in sample: simulated/published over the published "
                                "runs the simulator was built against")
    assert "no out-of-sample error is published yet" in heading()
    assert heading("cpu", "kv_aware").endswith(
        "The answer is LMCache offload, with cache-aware routing; the figures are not split "
        "by category.")
    assert "The answer is cache-blind;" in heading("off", "sticky_session")
