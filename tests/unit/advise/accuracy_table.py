"""The simulator's accuracy table in docs/planner.md, read by category of figure.

``python -m tests.unit.advise.accuracy_table`` prints the summary that
``lmikit.advise._trust.ACCURACY`` must hold (``test_trust.py`` compares them).
"""

from __future__ import annotations

import re
from pathlib import Path

from lmikit.sim.scenario import percentile

DOC = Path(__file__).resolve().parents[3] / "docs" / "planner.md"
HEADER = "| figure | published | simulated | ratio before | ratio now | band held by the test |"
WITHIN = 1.5


def category(figure: str) -> str | None:
    """Which advise metric a row's figure measures, or None (ITL, E2E, pools, orderings)."""
    f = figure.lower()
    if "1 = holds" in f:  # an ordering, not a figure
        return None
    if "ttft" in f:
        return "ttft_p90_s" if re.search(r"\bp90\b", f) else (
            None if re.search(r"\bp9[59]\b", f) else "ttft_p50_s")
    if any(w in f for w in ("throughput", "tok/s", "output tokens", "in_t/s", "out_t/s")):
        return "throughput_tokens_s"
    return None


def rows() -> list[tuple[str, float]]:
    """(figure, simulated / published now) of every row of the table."""
    lines = DOC.read_text().splitlines()
    start = lines.index(HEADER) + 2
    out = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        out.append((cells[0], float(cells[4])))
    return out


def summary() -> dict[str, tuple[int, int, float, float, float]]:
    """category -> (rows, rows within 1.5x, median ratio, 10th and 90th percentile ratio)."""
    ratios: dict[str, list[float]] = {}
    for figure, ratio in rows():
        name = category(figure)
        if name is not None:
            ratios.setdefault(name, []).append(ratio)
    out = {}
    for name, values in sorted(ratios.items()):
        values.sort()
        inside = sum(1 for v in values if 1 / WITHIN <= v <= WITHIN)
        out[name] = (len(values), inside, round(percentile(values, 0.5), 2),
                     round(percentile(values, 0.1), 2), round(percentile(values, 0.9), 2))
    return out


if __name__ == "__main__":
    for name, figures in summary().items():
        print(f"    {name!r}: {figures},")
