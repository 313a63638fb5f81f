r"""Load a DeploymentSpec from YAML, turning every problem into one :class:`SpecError`.

Each problem names the field path, the file and line, the value given and what is allowed.

>>> try:
...     load_spec_text("api_version: v1\nname: x\n", source="inline.yaml")
... except SpecError as exc:
...     print(exc)
3 problem(s) in inline.yaml
  - instance (inline.yaml:1): required field is missing
  - model (inline.yaml:1): required field is missing
  - region (inline.yaml:1): required field is missing
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from lmikit.errors import Problem, SpecError
from lmikit.spec import FIELD_MARK, DeploymentSpec

Path_ = tuple[str | int, ...]
MAX_SPEC_BYTES = 1_000_000


def load_spec(path: str | Path) -> DeploymentSpec:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SpecError([Problem("", f"cannot read the spec file: {exc.strerror}",
                                 has_value=False)], source=str(p)) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem("", "the spec file is not UTF-8 text", has_value=False)],
                        source=str(p)) from exc
    return load_spec_text(text, source=str(p))


def load_spec_text(text: str, source: str = "<spec>") -> DeploymentSpec:
    """Validate spec YAML given as text; ``source`` names it in error messages."""
    data, lines = parse_yaml(text, source)
    return validate_data(data, lines, source)


def parse_yaml(text: str, source: str = "<spec>") -> tuple[Any, dict[Path_, int]]:
    """Parse YAML into plain data plus a map of field path -> line number."""
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"the spec is larger than {MAX_SPEC_BYTES} bytes",
                                 has_value=False)], source)
    try:  # one parse: the node tree gives the lines, then the data
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_problem(exc)], source) from exc
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise SpecError([_yaml_problem(exc)], source) from exc
        if node is None:
            raise SpecError([Problem("", "the spec is empty; it must be a mapping starting "
                                     "with 'api_version: v1'", has_value=False)], source)
        lines: dict[Path_, int] = {}
        problems: list[Problem] = []
        _walk(node, (), lines, problems, depth=0)
        if problems:
            raise SpecError(problems, source)
        try:
            data = loader.construct_document(node)
        except (yaml.YAMLError, RecursionError, TypeError, ValueError) as exc:
            raise SpecError([Problem("", f"cannot read the YAML: {exc}", has_value=False)],
                            source) from exc
    finally:
        loader.dispose()
    return data, lines


def validate_data(data: Any, lines: dict[Path_, int] | None = None,
                  source: str = "<spec>") -> DeploymentSpec:
    lines = lines or {}
    if not isinstance(data, dict):
        raise SpecError([Problem("", "the spec must be a mapping of fields (api_version, name, "
                                 f"region, model, instance, ...), not a {type(data).__name__}",
                                 value=_short(data), line=lines.get(()))], source)
    try:
        return DeploymentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, data, lines), source) from exc
    except RecursionError as exc:
        raise SpecError([Problem("", "the spec nests too deeply", has_value=False)],
                        source) from exc


# --- YAML node walk ----------------------------------------------------------------------

def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], problems: list[Problem],
          depth: int) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if depth > 30:
        problems.append(Problem(_dotted(path), "nests too deeply", has_value=False,
                                line=node.start_mark.line + 1))
        return
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            merge = key_node.tag == "tag:yaml.org,2002:merge"
            if not isinstance(key_node, yaml.ScalarNode) or merge:
                problems.append(Problem(_dotted(path), "keys must be plain names",
                                        has_value=False, line=key_node.start_mark.line + 1))
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(Problem(_dotted((*path, key)), f"is given twice (first on line "
                                        f"{seen[key]}); keep one", has_value=False, line=line))
                continue
            seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, problems, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, problems, depth + 1)


def _yaml_problem(exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"invalid YAML: {what}" + (f" ({context})" if context else "")
    return Problem("", message, has_value=False, line=mark.line + 1 if mark else None)


# --- pydantic errors -> problems ---------------------------------------------------------

def _problems(exc: ValidationError, data: dict[str, Any],
              lines: dict[Path_, int]) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors(include_url=False):
        loc: Path_ = tuple(err["loc"])
        msg = err["msg"]
        if err["type"] == "value_error" and FIELD_MARK in msg:
            problems += _field_problems(msg, data, lines)
            continue
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problems.append(_problem(loc, err["type"], msg, err.get("input"), data, lines))
    # one message per path and text, in file order
    unique = {(p.path, p.message): p for p in problems}
    return sorted(unique.values(), key=lambda p: (p.line or 0, p.path))


def _problem(loc: Path_, kind: str, msg: str, value: Any, data: dict[str, Any],
             lines: dict[Path_, int]) -> Problem:
    path = _dotted(loc)
    if kind == "missing":
        return Problem(path, "required field is missing", has_value=False,
                       line=_line(loc[:-1], lines))
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return Problem(path, f"unknown field; {hint}allowed here: {', '.join(allowed)}",
                       has_value=False, line=_line(loc, lines))
    if kind in ("literal_error", "enum"):
        close = difflib.get_close_matches(str(value), _literal_options(loc), n=1)
        if close:
            msg += f"; did you mean {close[0]!r}?"
    if kind in ("model_type", "dict_type") and not isinstance(value, dict):
        msg = "must be a mapping of fields" + (
            f": {', '.join(_allowed_keys(loc))}" if _allowed_keys(loc) else "")
    return Problem(path, _lower_first(msg), value=_short(value), line=_line(loc, lines))


def _field_problems(msg: str, data: dict[str, Any], lines: dict[Path_, int]) -> list[Problem]:
    out = []
    for chunk in msg.removeprefix("Value error, ").split("\n"):
        _, path, text = chunk.split(FIELD_MARK, 2)
        loc: Path_ = tuple(int(p) if p.isdigit() else p for p in path.split("."))
        value, found = _lookup(data, loc)
        out.append(Problem(path, text.strip(), value=_short(value), has_value=found,
                           line=_line(loc, lines)))
    return out


def _lookup(data: Any, loc: Path_) -> tuple[Any, bool]:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None, False
    return data, True


def _line(loc: Path_, lines: dict[Path_, int]) -> int | None:
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _model_at(loc: Path_) -> type[BaseModel] | None:
    model: Any = DeploymentSpec
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    for arg in (*typing.get_args(annotation), annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        inner = typing.get_args(arg)
        for sub in inner:
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                return sub
    return annotation


def _allowed_keys(loc: Path_) -> list[str]:
    model = _model_at(loc)
    return list(model.model_fields) if model else []


def _literal_options(loc: Path_) -> list[str]:
    model = _model_at(loc[:-1])
    if not model or str(loc[-1]) not in model.model_fields:
        return []
    return [str(a) for a in typing.get_args(model.model_fields[str(loc[-1])].annotation)]


def _dotted(loc: Path_) -> str:
    return ".".join(str(p) for p in loc)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _short(value: Any) -> Any:
    text = repr(value)
    if len(text) > 80:
        return text[:77] + "..."
    return value
