"""``--plot``, as simulate and advise take it: the file checked before any work, the chart
drawn on one matplotlib figure and saved in the format its name says."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from lmikit.cli._common import check_writable

PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: Path) -> None:
    """Refuse, before any work, a chart file that could not be written, whose name says no
    format matplotlib writes (without a suffix it wrote FILE.png, not FILE), or that is not a
    regular file (to a FIFO it blocked for ever)."""
    check_writable(path, "--plot")
    if path.suffix.lower() not in PLOT_FORMATS:
        raise click.BadParameter(f"{str(path)!r} must end in {', '.join(PLOT_FORMATS)} (the "
                                 "chart's format)", param_hint="--plot")
    if path.exists() and not path.is_file():
        raise click.BadParameter(f"{str(path)!r} is not a regular file", param_hint="--plot")


@contextmanager
def chart(path: Path, command: str, what: str) -> Iterator[Any]:
    """The axes of a chart to draw, saved to ``path`` (with a grid and a legend) once the
    block ends; ``what`` names it in the line that says where it went."""
    from lmikit._extras import require

    require("matplotlib", f"lmikit {command} --plot").use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        yield ax
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        try:
            fig.savefig(path, format=path.suffix.lower()[1:])
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"cannot write {str(path)!r}: {exc}",
                                     param_hint="--plot") from exc
    finally:
        plt.close(fig)
    click.echo(f"Wrote the {what} chart to {path}", err=True)
