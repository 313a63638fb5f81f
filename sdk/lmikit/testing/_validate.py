"""Strict validation of request (and response) data against botocore's service model.

botocore's client-side validation checks required members, types and minimums only. The
service also enforces enums, patterns (Java regexes) and maximum lengths, and so does this.

>>> import botocore.session
>>> model = botocore.session.get_session().get_service_model("sagemaker")
>>> v = ShapeValidator()
>>> shape = model.operation_model("DeleteEndpoint").input_shape
>>> v.validate(shape, {"EndpointName": "bad_name"})[0].split(" pattern")[0]
"EndpointName: 'bad_name' does not match"
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import re
from typing import Any

from botocore.model import Shape

# Java character classes used in the SageMaker models, as Python class contents.
_JAVA_CLASSES = {
    r"\p{ASCII}": r"\x00-\x7f",
    r"\p{Print}": r"\x20-\x7e",
    r"\p{Graph}": r"\x21-\x7e",
    r"\p{Alnum}": r"a-zA-Z0-9",
    r"\p{Alpha}": r"a-zA-Z",
    r"\p{Digit}": r"0-9",
    r"\p{Punct}": r"!-/:-@\[-`{-~",
    r"\p{Space}": r" \t\n\x0b\f\r",
}


# Java strings are UTF-16: a class range over supplementary characters is written as a range
# of surrogate pairs (Application Auto Scaling's ResourceId pattern, among others).
_SURROGATE_RANGE = "\\uD800\\uDC00-\\uDBFF\\uDFFF"
# Unicode categories as the tag patterns use them (TagKey, TagValue: [\p{L}\p{Z}\p{N}_.:/=+\-@]*).
# Python's \w is exactly letters (L*), numbers (N*) and "_" (CPython's str.isalnum); Z is the
# 19 separators (Zs, Zl, Zp), all in the Basic Multilingual Plane. Other uses of these
# categories stay unchecked (the pattern is not translated).
_UNICODE_FRAGMENTS = {
    r"\p{L}\p{Z}\p{N}_": r"\w\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000",
}


@functools.lru_cache(maxsize=4096)
def compile_java_pattern(pattern: str) -> re.Pattern[str] | None:
    r"""Translate a Java regex from the service model to Python; None if it cannot be.

    >>> rx = compile_java_pattern(r"[\u0020-\uD7FF\uD800\uDC00-\uDBFF\uDFFF]*")
    >>> rx.fullmatch("inference-component/x \U0001F600") is not None
    True
    >>> tag = compile_java_pattern(r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)")
    >>> [bool(tag.fullmatch(v)) for v in ("lmikit:managed-by", "équipe 7", "a;b", "tab\t")]
    [True, True, False, False]
    """
    pattern = pattern.replace(_SURROGATE_RANGE, "\\U00010000-\\U0010FFFF")
    for fragment, python in _UNICODE_FRAGMENTS.items():
        pattern = pattern.replace(fragment, python)
    out: list[str] = []
    i, depth = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and pattern.startswith(r"\p{", i):
            end = pattern.find("}", i)
            token = pattern[i:end + 1]
            body = _JAVA_CLASSES.get(token)
            if body is None:
                return None
            out.append(body if depth else f"[{body}]")
            i = end + 1
            continue
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(r"\Z" if nxt == "z" else pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error:
        return None


class ShapeValidator:
    """Collects every problem in ``value`` for ``shape`` (empty list: valid)."""

    def validate(self, shape: Shape | None, value: Any, path: str = "") -> list[str]:
        errors: list[str] = []
        if shape is not None:
            self._check(shape, value, path, errors)
        return errors

    def _check(self, shape: Shape, value: Any, path: str, errors: list[str]) -> None:
        kind = shape.type_name
        meta = shape.metadata
        where = path or shape.name
        if kind == "structure":
            if not isinstance(value, dict):
                errors.append(f"{where}: expected a structure, got {type(value).__name__}")
                return
            if shape.metadata.get("union") and len(value) != 1:
                errors.append(f"{where}: exactly one member must be set")
            for name in shape.required_members:
                if name not in value:
                    errors.append(f"{_join(path, name)}: required member is missing")
            for name, item in value.items():
                member = shape.members.get(name)
                if member is None:
                    errors.append(f"{_join(path, name)}: unknown member")
                elif item is not None:
                    self._check(member, item, _join(path, name), errors)
        elif kind == "list":
            if not isinstance(value, list):
                errors.append(f"{where}: expected a list, got {type(value).__name__}")
                return
            self._length(len(value), meta, where, errors, "items")
            for i, item in enumerate(value):
                self._check(shape.member, item, f"{where}[{i}]", errors)
        elif kind == "map":
            if not isinstance(value, dict):
                errors.append(f"{where}: expected a map, got {type(value).__name__}")
                return
            self._length(len(value), meta, where, errors, "entries")
            for k, v in value.items():
                self._check(shape.key, k, f"{where} key {k!r}", errors)
                self._check(shape.value, v, f"{where}.{k}", errors)
        elif kind == "string":
            if not isinstance(value, str):
                errors.append(f"{where}: expected a string, got {type(value).__name__}")
                return
            self._length(len(value), meta, where, errors, "characters")
            if shape.enum and value not in shape.enum:
                errors.append(f"{where}: {value!r} is not one of {', '.join(shape.enum)}")
            pattern = meta.get("pattern")
            if pattern:
                rx = compile_java_pattern(pattern)
                if rx is not None and not rx.fullmatch(value):
                    errors.append(f"{where}: {value!r} does not match pattern {pattern}")
        elif kind in ("integer", "long"):
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(f"{where}: expected an integer, got {type(value).__name__}")
                return
            self._range(value, meta, where, errors)
        elif kind in ("float", "double"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(f"{where}: expected a number, got {type(value).__name__}")
                return
            self._range(value, meta, where, errors)
        elif kind == "boolean":
            if not isinstance(value, bool):
                errors.append(f"{where}: expected a boolean, got {type(value).__name__}")
        elif kind == "blob":
            if isinstance(value, str):
                try:
                    value = base64.b64decode(value, validate=True)
                except ValueError:
                    errors.append(f"{where}: blob is not valid base64")
                    return
            if not isinstance(value, bytes | bytearray):
                errors.append(f"{where}: expected bytes, got {type(value).__name__}")
                return
            self._length(len(value), meta, where, errors, "bytes")
        elif kind == "timestamp":
            if not isinstance(value, int | float | dt.datetime | str):
                errors.append(f"{where}: expected a timestamp, got {type(value).__name__}")

    @staticmethod
    def _length(n: int, meta: dict[str, Any], where: str, errors: list[str], unit: str) -> None:
        if "min" in meta and n < meta["min"]:
            errors.append(f"{where}: has {n} {unit}, fewer than the minimum {meta['min']}")
        if "max" in meta and n > meta["max"]:
            errors.append(f"{where}: has {n} {unit}, more than the maximum {meta['max']}")

    @staticmethod
    def _range(x: float, meta: dict[str, Any], where: str, errors: list[str]) -> None:
        if "min" in meta and x < meta["min"]:
            errors.append(f"{where}: {x} is less than the minimum {meta['min']}")
        if "max" in meta and x > meta["max"]:
            errors.append(f"{where}: {x} is more than the maximum {meta['max']}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
