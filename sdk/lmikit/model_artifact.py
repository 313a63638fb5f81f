"""The base model's artifact: a deterministic .tar.gz that LMI unpacks as its model dir.

It carries ``serving.properties`` (the LMI options that are not in the container's
environment), the LMCache config (OPTION_LMCACHE_CONFIG_FILE is relative to the model dir)
and the base model's formatters as ``model.py`` (built by
:func:`lmikit.formatters.build_model_py`: validated, self-contained, raises
:class:`lmikit.errors.AdapterError` on a bad formatter file). With LoRA and LMCache both on,
that ``model.py`` also drops client cache tags (:mod:`lmikit.lora_isolation`), so it is
written even without formatters.
"""

from __future__ import annotations

from pathlib import Path

from lmikit.artifact import deterministic_tar
from lmikit.formatters import build_model_py
from lmikit.lora_isolation import isolates_base
from lmikit.plan import Plan
from lmikit.render.env import SERVING_PROPERTIES, serving_properties
from lmikit.render.lmcache import LMCACHE_FILE_NAME, render_lmcache_yaml
from lmikit.spec import DeploymentSpec


def model_artifact_files(spec: DeploymentSpec, plan: Plan,
                         base_dir: str | Path = ".") -> dict[str, bytes]:
    files: dict[str, bytes] = {SERVING_PROPERTIES: serving_properties(spec, plan).encode()}
    if plan.uses_lmcache:
        files[LMCACHE_FILE_NAME] = render_lmcache_yaml(plan).encode()
    fmt = spec.formatters
    isolate = isolates_base(spec, plan.uses_lmcache)
    if fmt.input or fmt.output or isolate:
        base = Path(base_dir)
        files["model.py"] = build_model_py(
            input_file=base / fmt.input if fmt.input else None,
            output_file=base / fmt.output if fmt.output else None,
            isolate_base=isolate).encode()
    return files


def model_artifact(spec: DeploymentSpec, plan: Plan, base_dir: str | Path = ".") -> bytes | None:
    """The artifact bytes, or None when there is nothing to ship."""
    files = model_artifact_files(spec, plan, base_dir)
    return deterministic_tar(files) if files else None
