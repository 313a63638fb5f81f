"""The files a spec names, checked as ``lmikit deploy`` would use them, without AWS.

Each local adapter (``adapters[].source``) goes through the packager's own checks in check-only
mode (:func:`lmikit.lora.check_spec_adapter`: bounded reads, nothing written): the
directory and its entries, ``adapter_config.json`` (base model, rank against the endpoint's
``OPTION_MAX_LORA_RANK``, the fields vLLM requires), the safetensors header against the base
model's shapes, and the adapter's formatter. The base model's formatters
(``formatters.input`` / ``formatters.output``) are checked as the model artifact builds them.

Every problem is collected, one per line, each naming its spec field, the spec file and line,
the value and what is wrong, and raised once as an :class:`~lmikit.errors.AdapterError`.

>>> import pathlib, tempfile
>>> from lmikit.spec import parse_yaml, validate_data
>>> from lmikit.planner import plan_spec
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> text = ("api_version: v1\\nname: d\\nregion: us-east-1\\n"
...         "model: {id: Qwen/Qwen2.5-7B-Instruct}\\ninstance: {type: ml.g6e.2xlarge}\\n"
...         "adapters:\\n  - name: legal\\n    source: adapters/legal\\n")
>>> data, lines = parse_yaml(text, "spec.yaml")
>>> spec = validate_data(data, lines, "spec.yaml")
>>> try:
...     check_spec_files(spec, plan_spec(spec, root), root, lines, "spec.yaml")
... except AdapterError as exc:
...     print(exc)
1 problem(s) in the files spec.yaml names
  - adapters.0.source (spec.yaml:8): cannot read the adapter directory: No such file or ...
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lmikit.errors import AdapterError, Problem, problem_list

if TYPE_CHECKING:
    from lmikit.planner import Plan
    from lmikit.resolve import Resolved
    from lmikit.spec import DeploymentSpec

Lines = Mapping[tuple[str | int, ...], int]


def check_spec_files(spec: DeploymentSpec, plan: Plan, base_dir: str | Path,
                     lines: Lines | None = None, source: str = "spec", *,
                     resolved: Resolved | None = None) -> tuple[str, ...]:
    """Check every file the spec names; returns notes on what could not be checked here,
    raises AdapterError listing every problem. ``resolved``: the decisions of (spec, plan),
    made once by the caller."""
    lines = lines or {}
    problems: list[Problem] = []
    notes: list[str] = []
    for i, adapter in enumerate(spec.adapters):
        if adapter.source.startswith("s3://"):
            notes.append(f"adapters.{i}.source {adapter.source!r}: an uploaded adapter is "
                         "not inspected (only local directories are)")
            continue
        problems += _adapter_problems(spec, plan, i, base_dir, lines)
    problems += _formatter_problems(spec, plan, Path(base_dir), lines, resolved)
    if problems:
        raise AdapterError(problem_list(f"{len(problems)} problem(s) in the files {source} "
                                        "names", problems, source),
                           [(p.path, p.message) for p in problems])
    return tuple(notes)


def _line(lines: Lines, *path: str | int) -> int | None:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


def _adapter_problems(spec: DeploymentSpec, plan: Plan, i: int, base_dir: str | Path,
                      lines: Lines) -> list[Problem]:
    from lmikit.lora import FORMATTER_FIELD, check_spec_adapter

    adapter = spec.adapters[i]
    try:
        check_spec_adapter(spec, plan, adapter, base_dir)
    except AdapterError as exc:
        out = []
        for field, message in exc.problems or (("source", str(exc)),):
            name = "formatter" if field == FORMATTER_FIELD and adapter.formatter else "source"
            out.append(Problem(f"adapters.{i}.{name}", message, getattr(adapter, name),
                               _line(lines, "adapters", i, name)))
        return out
    return []


def _formatter_problems(spec: DeploymentSpec, plan: Plan, base: Path, lines: Lines,
                        resolved: Resolved | None) -> list[Problem]:
    from lmikit.formatters import inspect_formatter_file

    fmt = spec.formatters
    out: list[Problem] = []
    kinds = [k for k in ("input", "output") if getattr(fmt, k)]
    same = fmt.input is not None and fmt.input == fmt.output
    for kind in kinds[:1] if same else kinds:
        value = getattr(fmt, kind)
        try:
            inspect_formatter_file(base / value, require=kinds if same else [kind])
        except AdapterError as exc:
            out.append(Problem(f"formatters.{kind}", str(exc), value,
                               _line(lines, "formatters", kind)))
    if out:
        return out
    from lmikit.render import model_artifact_files

    try:  # the model.py the model artifact ships: the two files together, base isolation
        image = resolved.image_kind if resolved else "stock"
        model_artifact_files(spec, plan, base, image=image, resolved=resolved)
    except AdapterError as exc:
        field = "formatters" if kinds else ""
        out.append(Problem(field, str(exc), has_value=False, line=_line(lines, "formatters")))
    return out
