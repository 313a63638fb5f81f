"""Packaging-time checks of a formatter file, before it becomes an LMI ``model.py``.

A formatter file is plain Python that defines at most one input formatter and at most one
output formatter, each a top-level function decorated with ``@input_formatter`` /
``@output_formatter`` (from ``lmikit.formatters``, or LMI's own ``djl_python`` decorators),
or a top-level assignment ``name = output_formatter(<ready-made>)``.

>>> import pathlib, tempfile
>>> src = '''
... from lmikit.formatters import output_formatter, strip_reasoning
... format_output = output_formatter(strip_reasoning())
... '''
>>> p = pathlib.Path(tempfile.mkdtemp()) / "fmt.py"
>>> _ = p.write_text(src)
>>> validate_formatter_file(p)
['format_output']
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lmikit._files import FileRefused, read_limited
from lmikit.errors import AdapterError
from lmikit.formatters._pyast import compile_module, parse

KINDS = ("input", "output")
MAX_FORMATTER_BYTES = 1024**2  # a formatter file is a few kilobytes of Python
DECORATORS = {"input_formatter": "input", "output_formatter": "output"}

# Third-party top-level modules the LMI (vLLM) image ships, besides the standard library.
# Checked against the djl-inference LMI image's Python environment (vLLM and its
# dependencies); jsonschema, yaml and prometheus_client are also ensured by our Dockerfile.
IMAGE_PACKAGES = frozenset({
    "djl_python", "jsonschema", "numpy", "pydantic", "requests", "torch", "transformers",
    "tokenizers", "vllm", "yaml", "prometheus_client", "huggingface_hub", "safetensors",
    "lmcache", "boto3", "botocore", "regex", "PIL", "msgspec", "openai",
})
# Only these imports may name lmikit or djl_python; the model.py builder replaces them.
LMIKIT_MODULE = "lmikit.formatters"
DJL_MODULES = {"djl_python.input_parser": "input_formatter",
               "djl_python.output_formatter": "output_formatter"}


@dataclass(frozen=True)
class FormatterFile:
    """What a formatter file defines: ``input``/``output`` hold function names (or None)."""

    path: Path
    source: str
    input: str | None = None
    output: str | None = None
    top_level_names: frozenset[str] = field(default_factory=frozenset)

    @property
    def names(self) -> list[str]:
        return [n for n in (self.input, self.output) if n]


def validate_formatter_file(path: str | Path, *, require: Iterable[str] = ()) -> list[str]:
    """Check a formatter file and return the names of the formatter functions it defines.

    Raises :class:`lmikit.errors.AdapterError` (message names the file, line and fix) when the
    file does not compile, defines no formatter or two of a kind, or imports a module the
    LMI image does not have. ``require`` lists kinds (``"input"``, ``"output"``) that must
    be present.
    """
    return inspect_formatter_file(path, require=require).names


def inspect_formatter_file(path: str | Path, *, require: Iterable[str] = ()) -> FormatterFile:
    """Like :func:`validate_formatter_file`, returning the parsed details."""
    path = Path(path)
    try:  # a regular file of bounded size: never waits on a FIFO or reads a device
        source = read_limited(path, MAX_FORMATTER_BYTES, "it").decode("utf-8")
    except FileRefused as exc:
        raise AdapterError(f"formatter {str(path)!r}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise AdapterError(f"formatter {str(path)!r}: not UTF-8 text") from exc
    return inspect_formatter_source(source, path, require=require)


def inspect_formatter_source(source: str, path: str | Path = "<formatter>", *,
                             require: Iterable[str] = ()) -> FormatterFile:
    path = Path(path)
    where = str(path)
    try:
        tree = parse(source, where)
        compile_module(tree, where)
    except SyntaxError as exc:
        raise AdapterError(f"formatter {where!r} does not compile: {exc.msg} "
                           f"(line {exc.lineno})") from exc

    problems = _import_problems(tree)
    decorators = _decorator_names(tree)
    found: dict[str, list[tuple[str, int]]] = {"input": [], "output": []}
    top: set[str] = set()
    for node in tree.body:
        top.update(_bound_names(node))
        kind_name = _formatter_of(node, decorators)
        if kind_name is None:
            continue
        kind, name, problem = kind_name
        if problem:
            problems.append(f"line {node.lineno}: {problem}")
        found[kind].append((name, node.lineno))
    for inner in ast.walk(tree):
        if inner not in tree.body and _formatter_of(inner, decorators) is not None:
            problems.append(f"line {getattr(inner, 'lineno', '?')}: formatters must be defined "
                            "at the top level of the file")
    for kind in KINDS:
        if len(found[kind]) > 1:
            listed = ", ".join(f"{n!r} (line {ln})" for n, ln in found[kind])
            problems.append(f"defines {len(found[kind])} {kind} formatters ({listed}); LMI "
                            f"uses exactly one per model.py, keep one")
    if not found["input"] and not found["output"]:
        problems.append("defines no formatter: decorate a top-level function with "
                        "@input_formatter or @output_formatter (from lmikit.formatters)")
    for kind in require:
        if kind not in KINDS:
            raise ValueError(f"require: unknown formatter kind {kind!r}; use {KINDS}")
        if not found[kind]:
            problems.append(f"has no {kind} formatter, but the spec names this file as one: "
                            f"add a function decorated with @{kind}_formatter")
    if problems:
        raise AdapterError(f"formatter {where!r}: " + "; ".join(problems))
    return FormatterFile(
        path=path, source=source,
        input=found["input"][0][0] if found["input"] else None,
        output=found["output"][0][0] if found["output"] else None,
        top_level_names=frozenset(top),
    )


def _decorator_names(tree: ast.Module) -> dict[str, str]:
    """Decorator names in scope -> kind, following ``import ... as`` aliases."""
    names = dict(DECORATORS)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module == LMIKIT_MODULE
                                                 or node.module in DJL_MODULES):
            for alias in node.names:
                if alias.name in DECORATORS and alias.asname:
                    names[alias.asname] = DECORATORS[alias.name]
    return names


def _name_of(expr: ast.expr) -> str:
    return expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", "")


def _formatter_of(node: ast.AST, decorators: dict[str, str]
                  ) -> tuple[str, str, str | None] | None:
    """(kind, name, problem) when ``node`` defines a formatter, else None."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kinds = [decorators[n] for n in map(_name_of, node.decorator_list) if n in decorators]
        if not kinds:
            return None
        if len(kinds) > 1:
            return kinds[0], node.name, (f"{node.name!r} is decorated as both input and output "
                                         "formatter; write two functions")
        problem = None
        if isinstance(node, ast.AsyncFunctionDef):
            problem = f"{node.name!r} is async; LMI calls formatters synchronously, use def"
        elif not (node.args.posonlyargs or node.args.args or node.args.vararg):
            problem = (f"{node.name!r} takes no positional argument; LMI passes the request "
                       "dict (input) or the response (output)")
        return kinds[0], node.name, problem
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        kind = decorators.get(_name_of(node.value.func))
        if kind is None:
            return None
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return kind, "?", "assign a formatter to one plain name"
        return kind, node.targets[0].id, None
    return None


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    names: set[str] = set()
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _import_problems(tree: ast.Module) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(f"line {node.lineno}: relative import; model.py is a single "
                                "file, import absolute modules only")
                continue
            module = node.module or ""
            if module == LMIKIT_MODULE or module in DJL_MODULES:
                if node not in tree.body:
                    problems.append(f"line {node.lineno}: import {module} at the top level")
                if any(a.name == "*" for a in node.names):
                    problems.append(f"line {node.lineno}: name what you import from {module}")
                if module in DJL_MODULES and any(a.name != DJL_MODULES[module]
                                                 for a in node.names):
                    problems.append(f"line {node.lineno}: import only "
                                    f"{DJL_MODULES[module]} from {module}")
                continue
            problems.extend(_module_problem(module, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                problems.extend(_module_problem(alias.name, node.lineno))
    return problems


def _module_problem(module: str, line: int) -> list[str]:
    root = module.split(".")[0]
    if root == "lmikit" or root == "djl_python":
        return [f"line {line}: import {module!r} is not available in the image; use "
                f"'from {LMIKIT_MODULE} import ...'"]
    if root in sys.stdlib_module_names or root in IMAGE_PACKAGES:
        return []
    return [f"line {line}: imports {module!r}, which the LMI image does not ship; use the "
            "standard library or one of: " + ", ".join(sorted(IMAGE_PACKAGES))]
