"""Packaging-time validation of formatter files (no LMI, no AWS)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lmikit.errors import AdapterError
from lmikit.formatters import inspect_formatter_file, validate_formatter_file


def _write(tmp_path: Path, source: str, name: str = "fmt.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


GOOD = """
    import json
    import time

    from lmikit.formatters import input_formatter, output_formatter

    @input_formatter
    def format_request(request: dict) -> dict:
        return {"messages": request["messages"]}

    @output_formatter
    def format_response(output):
        return output
"""


def test_validate_returns_formatter_names_in_file_order(tmp_path: Path) -> None:
    assert validate_formatter_file(_write(tmp_path, GOOD)) == ["format_request",
                                                               "format_response"]


def test_validate_accepts_lmi_native_decorators(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from djl_python.output_formatter import output_formatter

        @output_formatter
        def out(output):
            return output
    """)
    assert validate_formatter_file(path) == ["out"]


def test_validate_accepts_assigned_ready_made(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import chain, output_formatter, strip_reasoning, add_usage_metrics
        format_output = output_formatter(chain(strip_reasoning(), add_usage_metrics()))
    """)
    info = inspect_formatter_file(path)
    assert (info.input, info.output) == (None, "format_output")


def test_validate_rejects_syntax_error_with_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "def broken(:\n    pass\n")
    with pytest.raises(AdapterError, match=r"does not compile: .*\(line 1\)"):
        validate_formatter_file(path)


def test_validate_rejects_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="cannot read it"):
        validate_formatter_file(tmp_path / "nope.py")


def test_validate_rejects_file_without_formatters(tmp_path: Path) -> None:
    path = _write(tmp_path, "def helper(x):\n    return x\n")
    with pytest.raises(AdapterError, match="defines no formatter"):
        validate_formatter_file(path)


def test_validate_rejects_two_output_formatters(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        @output_formatter
        def a(output):
            return output

        @output_formatter
        def b(output):
            return output
    """)
    with pytest.raises(AdapterError, match=r"2 output formatters \('a' \(line 5\), 'b'"):
        validate_formatter_file(path)


def test_validate_rejects_module_missing_from_image(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("import time", "import pandas"))
    with pytest.raises(AdapterError, match="imports 'pandas', which the LMI image does not ship"):
        validate_formatter_file(path)


def test_validate_rejects_import_inside_function(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        @output_formatter
        def out(output):
            import scipy
            return output
    """)
    with pytest.raises(AdapterError, match="line 6: imports 'scipy'"):
        validate_formatter_file(path)


def test_validate_rejects_relative_import(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("import json", "from . import helpers"))
    with pytest.raises(AdapterError, match="relative import"):
        validate_formatter_file(path)


def test_validate_rejects_other_lmikit_modules(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("import json", "from lmikit.planner import plan"))
    with pytest.raises(AdapterError, match="'lmikit.planner' is not available in the image"):
        validate_formatter_file(path)


def test_validate_rejects_async_formatter(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        @output_formatter
        async def out(output):
            return output
    """)
    with pytest.raises(AdapterError, match="'out' is async"):
        validate_formatter_file(path)


def test_validate_rejects_formatter_without_argument(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import input_formatter

        @input_formatter
        def inp():
            return {}
    """)
    with pytest.raises(AdapterError, match="takes no positional argument"):
        validate_formatter_file(path)


def test_validate_require_names_missing_kind(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        @output_formatter
        def out(output):
            return output
    """)
    with pytest.raises(AdapterError, match="has no input formatter, but the spec names"):
        validate_formatter_file(path, require=["input"])


def test_validate_rejects_nested_formatter(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        from lmikit.formatters import output_formatter

        def factory():
            @output_formatter
            def out(output):
                return output
            return out

        @output_formatter
        def top(output):
            return output
    """)
    with pytest.raises(AdapterError, match="at the top level"):
        validate_formatter_file(path)
