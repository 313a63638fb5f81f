"""How far to trust an answer: the simulator's error against published measurements.

Every figure advise states about trust is here, to be re-pointed when the accuracy report
is. ``ACCURACY`` summarizes, per metric advise reports, the rows of the accuracy table in
docs/planner.md ("Accuracy against published measurements", regenerated from
``tests/unit/sim/published.py``): simulated over published figure. TTFT means and medians
count as ``ttft_p50_s``; ratios between two setups of one run count too. A test reads the
table again and fails when these figures no longer match it.

They are in sample: the simulator's rules were revised with these runs in view (the
table's "ratio before" and "ratio now") and tp_decode_step_overhead_s was set for their
tensor-parallel H100 runs (lmikit.sim.coefficients). The table is not split by category
(cache-blind, LMCache offload, cache-aware routing), so the answer's categories are named,
not matched to figures of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "docs/planner.md, 'Accuracy against published measurements'"
SAMPLE = "in sample"  # how the figures relate to the runs they were measured on
BASIS = ("the published runs the simulator was built against (its rules revised with them in "
         "view, its tensor-parallel step overhead set for them); no out-of-sample error is "
         "published yet: expect larger errors on setups unlike them")
CACHE_AWARE = ("prefix_aware", "kv_aware")


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


def categories(kv_cache: str, routing: str) -> list[str]:
    """The accuracy categories a deployment falls in."""
    out = ["cache-blind" if kv_cache == "off" else "LMCache offload"]
    if routing in CACHE_AWARE:
        out.append("cache-aware routing")
    return out


def heading(kv_cache: str | None = None, routing: str | None = None) -> str:
    """The line above :func:`trust`'s: in or out of sample, against what, and the answer's
    categories (``kv_cache`` and ``routing``: the answer's, when there is one)."""
    involved = "" if kv_cache is None or routing is None else (
        f" The answer is {', with '.join(categories(kv_cache, routing))}; the figures are not "
        "split by category.")
    return f"Trust, {SAMPLE}: simulated/published over {BASIS} ({SOURCE}).{involved}"
