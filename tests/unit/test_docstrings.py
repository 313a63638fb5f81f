"""A module docstring says what its module is for in a few lines; the source of each fact lives
in the fact rows beside the code or in docs/."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

LIMIT = 30  # lines, counting the quote lines
FOLDERS = ("sdk", "cdk", "container", "benchmarks")


def docstring_lines(source: str) -> int:
    """Lines of a module's docstring, its quotes included; 0 without one."""
    tree = ast.parse(source)
    if ast.get_docstring(tree, clean=False) is None:
        return 0
    node = tree.body[0]
    return (node.end_lineno or node.lineno) - node.lineno + 1


def test_docstring_lines_counts_the_quote_lines():
    assert docstring_lines('"""One line."""\nx = 1\n') == 1
    assert docstring_lines('"""Two\n\nlines and quotes.\n"""\n') == 4
    assert docstring_lines("x = 1\n") == 0


def test_no_module_docstring_exceeds_thirty_lines():
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = docstring_lines(path.read_text(encoding="utf-8"))
            if lines > LIMIT:
                found[str(path.relative_to(ROOT))] = lines
    assert found == {}

