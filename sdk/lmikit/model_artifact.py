"""The base model's artifact: a deterministic .tar.gz that LMI unpacks as its model dir.

It carries the LMCache config (OPTION_LMCACHE_CONFIG_FILE is relative to the model dir)
and the base model's formatters as ``model.py``.
"""

from __future__ import annotations

from pathlib import Path

from lmikit.artifact import deterministic_tar
from lmikit.errors import RenderError
from lmikit.plan import Plan
from lmikit.render.lmcache import LMCACHE_FILE_NAME, render_lmcache_yaml
from lmikit.spec import DeploymentSpec


def model_artifact_files(spec: DeploymentSpec, plan: Plan,
                         base_dir: str | Path = ".") -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if plan.uses_lmcache:
        files[LMCACHE_FILE_NAME] = render_lmcache_yaml(plan).encode()
    sources = [p for p in (spec.formatters.input, spec.formatters.output) if p]
    if sources:
        parts = []
        for rel in dict.fromkeys(sources):
            path = Path(base_dir) / rel
            try:
                parts.append(path.read_text())
            except OSError as exc:
                raise RenderError(f"formatters: cannot read {str(path)!r}: {exc.strerror}") \
                    from exc
        files["model.py"] = "\n\n".join(parts).encode()
    return files


def model_artifact(spec: DeploymentSpec, plan: Plan, base_dir: str | Path = ".") -> bytes | None:
    """The artifact bytes, or None when there is nothing to ship."""
    files = model_artifact_files(spec, plan, base_dir)
    return deterministic_tar(files) if files else None
