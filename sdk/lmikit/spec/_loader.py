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
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lmikit._files import FileRefused, read_limited
from lmikit.errors import Problem, SpecError, safe_repr
from lmikit.spec._credentials import mask_credentials
from lmikit.spec._model import FIELD_MARK, DeploymentSpec

Path_ = tuple[str | int, ...]
# A spec is a few kilobytes; these limits sit far above any real one and far below what would
# take noticeable time or memory to parse.
MAX_SPEC_BYTES = 256_000
MAX_SPEC_DEPTH = 32  # nesting of mappings and lists; a spec uses 4 at most (security.vpc.x.0)
MAX_SPEC_NODES = 10_000  # values after every alias is expanded; a spec has a few hundred
MAX_NUMBER_CHARS = 64  # the longest number any spec field could take has 11 digits

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_COLLECTION_TAGS = {f"{_TAG}seq", f"{_TAG}map"}
_TAG_WORDS = {f"{_TAG}bool": "true or false", f"{_TAG}int": "a whole number",
              f"{_TAG}float": "a number", f"{_TAG}null": "null or ~ or nothing"}


def load_spec(path: str | Path) -> DeploymentSpec:
    """Read and validate a spec file (a regular file of at most MAX_SPEC_BYTES)."""
    return load_spec_text(read_spec_text(path), source=str(path))


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file: a regular UTF-8 file of at most MAX_SPEC_BYTES, read without
    waiting on FIFOs or devices."""
    try:
        data = read_limited(path, MAX_SPEC_BYTES, "the spec file")
    except FileRefused as exc:
        raise SpecError([Problem("", str(exc), has_value=False)], str(path)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem("", "the spec file is not UTF-8 text", has_value=False)],
                        str(path)) from exc


def load_spec_text(text: str, source: str = "<spec>") -> DeploymentSpec:
    """Validate spec YAML given as text; ``source`` names it in error messages."""
    data, lines = parse_yaml(text, source)
    return validate_data(data, lines, source)


def parse_yaml(text: str, source: str = "<spec>") -> tuple[Any, dict[Path_, int]]:
    """Parse YAML into plain data plus a map of field path -> line number.

    Parsing is bounded: the text's size, its nesting depth and the number of values after
    aliases are expanded (an "alias bomb" of a few hundred bytes would otherwise expand to
    billions of values). Only plain YAML values are accepted: strings, numbers, booleans,
    null, lists and mappings; other tags (``!!binary``, ``!!set``, ``!!python/...``) are
    refused, and dates stay strings.
    """
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"the spec is larger than {MAX_SPEC_BYTES:,} bytes",
                                 has_value=False)], source)
    try:  # one parse: the node tree gives the lines, then the data
        loader = _SpecLoader(text)
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_problem(exc)], source) from exc
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise SpecError([_yaml_problem(exc)], source) from exc
        except _Refused as exc:
            raise SpecError([exc.problem], source) from None
        if node is None:
            raise SpecError([Problem("", "the spec is empty; it must be a mapping starting "
                                     "with 'api_version: v1'", has_value=False)], source)
        lines: dict[Path_, int] = {}
        problems: list[Problem] = []
        _walk(node, (), lines, problems)
        if problems:
            raise SpecError(problems, source)
        try:
            data = loader.construct_document(node)
        except (yaml.YAMLError, ValueError) as exc:  # _walk checked every value; a safety net
            raise SpecError([Problem("", f"cannot read the YAML: {safe_repr(exc, 200)}",
                                     has_value=False)], source) from exc
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


# --- bounded YAML composition ------------------------------------------------------------

class _Refused(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _plain_resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """SafeLoader's implicit types minus timestamps and the value/yaml oddities (they stay
    strings), plus exponent floats without a dot (``1e5``), as YAML 1.2 reads them."""
    keep = {f"{_TAG}{t}" for t in ("bool", "int", "float", "null", "merge")}
    out = {first: [(tag, rx) for tag, rx in pairs if tag in keep]
           for first, pairs in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    exponent = re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$")
    for first in "-+0123456789":
        out.setdefault(first, []).append((f"{_TAG}float", exponent))
    return {first: pairs for first, pairs in out.items() if pairs}


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a bounded composer.

    The composer recurses once per nesting level (``compose_node`` ->
    ``compose_sequence_node``/``compose_mapping_node`` -> ``compose_node``), so depth is
    checked before each descent. An alias returns the anchored node itself, so a document of
    a few hundred bytes can stand for billions of values; every node counts the values it
    stands for, aliases included, and composition stops past MAX_SPEC_NODES.
    """

    yaml_implicit_resolvers = _plain_resolvers()

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._depth = 0
        self._expanded = 0  # values composed so far, counting every alias in full
        self._sizes: dict[int, int] = {}  # id(node) -> values it stands for, once complete

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        part = _part(parent, index)
        if part is not None:
            self._path.append(part)
        try:
            return self._compose(parent, index)
        finally:
            if part is not None:
                self._path.pop()

    def _compose(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:
                size = self._sizes.get(id(target))
                if size is None:
                    self._refuse(f"alias *{event.anchor} refers to a value that contains it",
                                 line)
                self._count(size, line)
            return self._super_compose(parent, index)
        if self._depth >= MAX_SPEC_DEPTH:
            self._refuse(f"nests deeper than {MAX_SPEC_DEPTH} levels", line)
        before = self._expanded
        self._count(1, line)
        self._depth += 1
        try:
            node = self._super_compose(parent, index)
        finally:
            self._depth -= 1
        self._sizes[id(node)] = self._expanded - before
        return node

    def _super_compose(self, parent: Node | None, index: Any) -> Node:
        node = super().compose_node(parent, index)
        assert node is not None  # PyYAML returns a node for every event it composes
        return node

    def _count(self, size: int, line: int) -> None:
        self._expanded += size
        if self._expanded > MAX_SPEC_NODES:
            self._refuse(f"the spec expands to more than {MAX_SPEC_NODES:,} values once its "
                         "aliases are expanded; a spec needs a few hundred", line)

    def _refuse(self, message: str, line: int) -> typing.NoReturn:
        raise _Refused(Problem(_dotted(tuple(self._path)), message, has_value=False,
                               line=line))


def _part(parent: Node | None, index: Any) -> str | int | None:
    if isinstance(parent, SequenceNode):
        return int(index)
    if isinstance(parent, MappingNode) and isinstance(index, Node):
        return index.value if isinstance(index, ScalarNode) else "?"
    return None


# --- YAML node walk ----------------------------------------------------------------------

def _walk(node: Node, path: Path_, lines: dict[Path_, int], problems: list[Problem]) -> None:
    line = node.start_mark.line + 1
    lines.setdefault(path, line)
    if isinstance(node, ScalarNode):
        problem = _scalar_problem(node)
        if problem:
            problems.append(Problem(_dotted(path), problem, value=_short(node.value),
                                    line=line))
        return
    if node.tag not in _COLLECTION_TAGS:
        problems.append(Problem(_dotted(path), f"the YAML tag {_tag_name(node.tag)} is not "
                                "supported; a spec holds plain mappings and lists",
                                has_value=False, line=line))
        return
    if isinstance(node, MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == f"{_TAG}merge":
                problems.append(Problem(_dotted(path), "merge keys (<<) are not supported; "
                                        "write the fields out", has_value=False,
                                        line=key_line))
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != f"{_TAG}str":
                what = (f"YAML reads this key as {_tag_name(key_node.tag)}; quote it"
                        if isinstance(key_node, ScalarNode) else "lists and mappings cannot "
                        "be keys")
                problems.append(Problem(_dotted(path), f"keys must be plain names: {what}",
                                        value=_short(getattr(key_node, "value", None)),
                                        has_value=isinstance(key_node, ScalarNode),
                                        line=key_line))
                continue
            key = key_node.value
            if key in seen:
                problems.append(Problem(_dotted((*path, key)), f"is given twice (first on line "
                                        f"{seen[key]}); keep one", has_value=False,
                                        line=key_line))
                continue
            seen[key] = key_line
            lines[(*path, key)] = key_line
            _walk(value_node, (*path, key), lines, problems)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, problems)


def _scalar_problem(node: ScalarNode) -> str | None:
    """Why a scalar cannot become a spec value, or None. Explicit tags (``!!bool maybe``)
    must hold a value that tag can take; numbers must be short enough to print."""
    tag = node.tag
    if tag not in _SCALAR_TAGS:
        return (f"the YAML tag {_tag_name(tag)} is not supported; use a plain string, "
                "number, true/false or null")
    if tag == f"{_TAG}str":
        return None
    implied = _implied_tag(node.value)
    fits = implied == tag or (tag == f"{_TAG}float" and implied == f"{_TAG}int")
    if tag in (f"{_TAG}int", f"{_TAG}float") and len(node.value) > MAX_NUMBER_CHARS:
        return (f"is a number of {len(node.value):,} characters; no spec field takes more "
                f"than {MAX_NUMBER_CHARS}")
    if fits:
        try:  # PyYAML's patterns admit a few texts its constructors refuse, such as 0x_
            _CONSTRUCTOR.construct_object(node)
        except (ValueError, KeyError, IndexError, yaml.YAMLError):
            fits = False
    if not fits:
        return f"is not a valid {_tag_name(tag)} value; it must be {_TAG_WORDS[tag]}"
    return None


_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _implied_tag(value: str) -> str:
    """The tag a plain (untagged) scalar with this text would get."""
    for tag, regexp in _SpecLoader.yaml_implicit_resolvers.get(value[:1], []):
        if regexp.match(value):
            return str(tag)
    return f"{_TAG}str"


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


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
    errors = exc.errors(include_url=False)
    # A misspelt field is reported once, as "unknown field; did you mean ...", not also as
    # the required field that is then missing.
    misspelt = {(*err["loc"][:-1], close[0]) for err in errors
                if err["type"] == "extra_forbidden"
                and (close := difflib.get_close_matches(
                    _text(err["loc"][-1]), _allowed_keys(tuple(err["loc"][:-1])), n=1))}
    for err in errors:
        loc: Path_ = tuple(err["loc"])
        msg = err["msg"]
        if err["type"] == "missing" and loc in misspelt:
            continue
        if err["type"] == "value_error" and FIELD_MARK in msg:
            problems += _field_problems(msg, data, lines)
            continue
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problems.append(_problem(loc, err["type"], msg, err.get("input"), data, lines,
                                 str(err.get("ctx", {}).get("pattern", ""))))
    # one message per path and text, in file order
    unique = {(p.path, p.message): p for p in problems}
    return sorted(unique.values(), key=lambda p: (p.line or 0, p.path))


def _problem(loc: Path_, kind: str, msg: str, value: Any, data: dict[str, Any],
             lines: dict[Path_, int], pattern: str = "") -> Problem:
    path = _dotted(loc)
    if kind == "missing":
        return Problem(path, "required field is missing", has_value=False,
                       line=_line(loc[:-1], lines))
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(_text(loc[-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return Problem(path, f"unknown field; {hint}allowed here: {', '.join(allowed)}",
                       has_value=False, line=_line(loc, lines))
    if kind in ("literal_error", "enum"):
        msg += _literal_hint(value, _literal_options(loc))
    if kind == "string_pattern_mismatch":
        msg = _pattern_message(loc, pattern, value)
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


def _literal_hint(value: Any, options: list[str]) -> str:
    if isinstance(value, bool):  # YAML 1.1 reads unquoted on/off/yes/no as booleans
        words = _YAML_BOOL_WORDS[value]
        quoted = [o for o in options if o.lower() in words]
        return (f"; YAML reads an unquoted {quoted[0]} as {str(value).lower()}: write "
                f"'{quoted[0]}' in quotes" if quoted else "")
    close = difflib.get_close_matches(value, options, n=1) if isinstance(value, str) else []
    return f"; did you mean {close[0]!r}?" if close else ""


_YAML_BOOL_WORDS = {True: {"on", "yes", "y", "true"}, False: {"off", "no", "n", "false"}}


def _pattern_message(loc: Path_, pattern: str, value: Any) -> str:
    """What a field with ``pattern`` takes, in words (:data:`lmikit.spec._model.PATTERN_WORDS`),
    and the valid value the given one was probably meant to be."""
    from lmikit.spec._model import PATTERN_WORDS

    words = PATTERN_WORDS.get(pattern, f"text matching {pattern}")
    close = _meant(loc, value) if isinstance(value, str) else None
    return f"must be {words}" + (f"; did you mean {close!r}?" if close else "")


def _meant(loc: Path_, value: str) -> str | None:
    """The value a misspelt name, instance type or region was meant to be, if one is near."""
    field = ".".join(p for p in map(str, loc) if not p.isdigit())
    if field in ("name", "adapters.name"):  # the name with every other character a hyphen
        from lmikit.spec._model import NAME_PATTERN

        fixed = re.sub(r"[^A-Za-z0-9]+", "-", value).strip("-")
        return fixed if fixed != value and re.match(NAME_PATTERN, fixed) else None
    if field == "instance.type":
        from lmikit.catalog import INSTANCES, ml_name

        close = difflib.get_close_matches(ml_name(value.strip().lower()), list(INSTANCES), n=1)
        return close[0] if close else None
    if field == "kv_cache.disk_path" and re.fullmatch(r"/\S*[^/]", value):
        return value + "/"
    if field == "region":
        from lmikit.catalog import close_regions

        regions = close_regions(value.strip().lower())
        return regions[0] if len(regions) == 1 else None
    return None


def _dotted(loc: Path_) -> str:
    return ".".join(_text(p) for p in loc)


def _text(part: object) -> str:
    return part if isinstance(part, str) else safe_repr(part)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _short(value: Any) -> Any:
    """The value itself when it prints short, else its shortened text; credentials in URLs
    are masked either way."""
    value = mask_credentials(value)
    text = safe_repr(value)
    return value if len(text) < 80 else text
