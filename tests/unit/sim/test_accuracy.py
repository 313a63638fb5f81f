"""The simulator against every published figure in tests/unit/sim/published.py.

Each ratio (simulated / published) must stay inside the band its row documents: within 1.5x
where the simulator reproduces the figure, else the honest current band that
docs/planner.md explains. A change to the model that moves a ratio out of its band fails
here and must update the table and the text.
"""

from __future__ import annotations

import pytest

from tests.unit.sim.published import ROWS


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
