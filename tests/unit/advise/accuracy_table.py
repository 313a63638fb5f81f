"""docs/accuracy.md's error by category and quantity, read from the doc as printed.

advise's trust statement must state these figures (``test_trust.py`` compares them): read
here from the Markdown a reader sees, not from the JSON the package carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "accuracy.md"
HEADING = "## Error by category and quantity"
HEADER = ("| category | quantity | setups | rows | median | worst | within 1.5x | median (LOSO) "
          "| worst (LOSO) | within 1.5x (LOSO) |")


@dataclass(frozen=True)
class Cell:
    """One row of the table, its cells as printed."""

    setups: int
    rows: int
    median: str
    worst: str
    within: str
    median_loso: str
    worst_loso: str
    within_loso: str


def cells() -> dict[tuple[str, str], Cell]:
    """(category, quantity as the doc words it) -> the row."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER, lines.index(HEADING)) + 2
    out = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        category, quantity, setups, rows, *rest = (c.strip() for c in line.strip("|").split("|"))
        out[(category, quantity)] = Cell(int(setups), int(rows), *rest)
    return out
