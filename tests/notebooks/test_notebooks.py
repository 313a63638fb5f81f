"""Every notebook in examples/notebooks runs top to bottom (against the in-process sandbox)
and is stored without outputs."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 90
NOTEBOOK_BUDGET_S = 90


def test_notebooks_exist() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01-quickstart.ipynb", "02-adapters-and-formatters.ipynb", "03-cache-planning.ipynb",
        "04-observability.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.slow  # a Jupyter kernel per notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path: Path) -> None:
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(book, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    took = time.monotonic() - start
    assert took < NOTEBOOK_BUDGET_S, f"{path.name} took {took:.0f} s"
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    if path.name == "03-cache-planning.ipynb":
        # its charts reach the notebook (a non-interactive backend had hidden every one)
        images = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
                  if "image/png" in o.get("data", {})]
        assert len(images) >= 2


def test_the_readme_says_how_to_run_a_notebook_with_what_setup_installs() -> None:
    """The README's command is installed by .ci/setup (nbclient, in the dev extra): the
    `jupyter` it names dispatches `execute` to nbclient's runner."""
    import re
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    found = re.search(r"^\.venv/bin/jupyter execute (examples/notebooks/\S+\.ipynb)", readme,
                      re.MULTILINE)
    assert found, "the README names no command that runs a notebook"
    assert (ROOT / found[1]).is_file()
    jupyter = Path(sys.executable).parent / "jupyter"
    run = subprocess.run([str(jupyter), "execute", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "--inplace" in run.stdout, run.stderr
