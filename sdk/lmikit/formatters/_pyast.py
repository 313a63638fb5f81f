"""Python parsing and compiling for formatter files, one thread at a time.

CPython 3.11 counts the AST constructor's recursion depth in per-interpreter state that all
threads share, so ``ast.parse``/``compile`` interleaving in two threads can, rarely, fail with
``SystemError: AST constructor recursion depth mismatch`` (reported in CPython gh-106905 and
by several threaded applications; it was seen here once, packaging adapters in parallel).
Adapters are packaged in parallel threads (``AdapterRegistry.register_many``, the deployer),
so every parse and compile of a formatter or generated ``model.py`` goes through this lock.

>>> parse("x = 1").body[0].__class__.__name__
'Assign'
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` under the lock."""
    with _LOCK:
        return ast.parse(source, filename=filename)


def compile_module(source: str | ast.Module, filename: str) -> CodeType:
    """``compile(source, filename, "exec")`` under the lock."""
    with _LOCK:
        return compile(source, filename, "exec")
