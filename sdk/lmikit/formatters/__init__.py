"""Custom input/output formatters for LMI, written as plain typed functions.

See docs/formatters.md. The SDK side validates formatter files and builds the ``model.py``
LMI loads; the helpers and ready-made formatters in :mod:`lmikit.formatters.runtime` are
standard-library only and are inlined into that ``model.py``.
"""

from __future__ import annotations

from lmikit.formatters._validate import (
                                         FormatterFile,
                                         inspect_formatter_file,
                                         validate_formatter_file,
)

__all__ = [
    "FormatterFile",
    "inspect_formatter_file",
    "validate_formatter_file",
]
