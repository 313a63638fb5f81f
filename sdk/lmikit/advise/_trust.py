"""How far to trust an answer: the simulator's error against published measurements.

``ACCURACY`` summarizes, per metric advise reports, the rows of the accuracy table in
docs/planner.md ("Accuracy against published measurements", regenerated from
``tests/unit/sim/published.py``): simulated over published figure. TTFT means and medians
count as ``ttft_p50_s``; ratios between two setups of one run count too. A test reads the
table again and fails when these figures no longer match it.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "docs/planner.md, 'Accuracy against published measurements'"
# No coefficient was fitted to these runs, except tp_decode_step_overhead_s, an effective
# figure chosen with their tensor-parallel H100 runs in view (lmikit.sim.coefficients).
OUT_OF_SAMPLE = ("published runs no coefficient was fitted to (but the tensor-parallel "
                 "decode step overhead, set with the H100 runs in view)")


@dataclass(frozen=True)
class Accuracy:
    rows: int
    within_1_5x: int
    median_ratio: float  # simulated / published
    ratio_p10: float
    ratio_p90: float


# metric -> simulated / published over the table's rows of that metric
ACCURACY: dict[str, Accuracy] = {
    "throughput_tokens_s": Accuracy(88, 84, 0.92, 0.8, 1.2),
    "ttft_p50_s": Accuracy(61, 49, 1.1, 0.39, 1.25),
    "ttft_p90_s": Accuracy(61, 53, 1.09, 0.69, 1.34),
}
_WORDS = {"throughput_tokens_s": "throughput", "ttft_p50_s": "TTFT mean or median",
          "ttft_p90_s": "TTFT p90"}


def trust(metrics: list[str]) -> list[str]:
    """One line per metric involved (cost per 1K tokens follows throughput)."""
    lines = []
    for name in dict.fromkeys([*metrics, "throughput_tokens_s"]):
        a = ACCURACY[name]
        lines.append(f"{_WORDS[name]}: {a.within_1_5x} of {a.rows} published figures within "
                     f"1.5x, simulated/published median {a.median_ratio:g}, 80% between "
                     f"{a.ratio_p10:g} and {a.ratio_p90:g}")
    return lines
