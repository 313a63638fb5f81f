"""The simulator against every published figure in tests/unit/sim/published.py.

Each ratio (simulated / published) must stay inside the band its row documents: within 1.5x
where the simulator reproduces the figure, else the honest current band that
docs/planner.md explains. A change to the model that moves a ratio out of its band fails
here and must update the table and the text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sim.published import ROWS, cells, outside

PLANNER_DOC = Path(__file__).resolve().parents[3] / "docs" / "planner.md"


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_published_figure_ratio_stays_in_its_band(row) -> None:
    ratio = row.simulated() / row.published
    low, high = row.band
    assert low <= ratio <= high, f"{row.name}: simulated/published = {ratio:.3f}"


def test_every_row_names_its_source_and_a_band_within_or_outside_1_5x_honestly() -> None:
    for row in ROWS:
        assert row.source and row.published > 0
        low, high = row.band
        assert low <= high
        # a band wider than 1.5x either side would hide nothing: keep pinned bands tight
        assert high / low <= 2.25 or (low, high) == (1 / 1.5, 1.5)


def test_the_table_in_docs_planner_is_the_one_the_simulator_gives_now() -> None:
    # docs/planner.md quotes every row (published | simulated | ratio before | ratio now |
    # band) and how many are within 1.5x: a model change that moves a figure must update it
    text = PLANNER_DOC.read_text(encoding="utf-8")
    names = {row.name for row in ROWS}
    documented = {}
    for line in text.splitlines():
        cell = [c.strip() for c in line.split("|")]
        if len(cell) == 8 and cell[1] in names:
            documented[cell[1]] = (cell[2], cell[3], cell[5], cell[6])
    for row in ROWS:
        assert documented.get(row.name) == cells(row), row.name
    inside = len(ROWS) - len(outside())
    assert f"**Within 1.5x** ({inside} of {len(ROWS)};" in text
