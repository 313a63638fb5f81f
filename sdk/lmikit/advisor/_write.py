"""The chosen candidate as a spec: the base spec with its layout, cache and routing.

Paths the spec names relative to its own folder (``model.config_path``, adapter sources and
formatters) are rewritten relative to the new file's folder, so it validates where it is
written. A comment block on top says what it was chosen for and what it should do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lmikit.advisor._search import Entry

if TYPE_CHECKING:
    from lmikit.spec import DeploymentSpec


def spec_data(base: DeploymentSpec, entry: Entry, region: str, base_dir: Path | None,
              out_dir: Path) -> dict[str, Any]:
    """The spec of ``entry`` as plain data, from what ``base`` states."""
    data: dict[str, Any] = base.model_dump(mode="json", exclude_unset=True)
    c = entry.candidate
    data["region"] = region
    instance = data.setdefault("instance", {})
    instance.update(type=c.instance_type, min_count=c.instances, copies_per_instance=c.copies,
                    max_count=max(c.instances, int(instance.get("max_count", 1))))
    data.setdefault("engine", {})["tensor_parallel_degree"] = c.tp
    kv = data.setdefault("kv_cache", {})
    kv["mode"] = c.kv_cache
    for name, value in (("cpu_size_gb", c.cpu_size_gb), ("disk_size_gb", c.disk_size_gb)):
        if value == "auto":
            kv.pop(name, None)
        else:
            kv[name] = value
    if c.kv_cache != "remote":
        kv.pop("remote_url", None)
        kv.pop("remote_credentials_secret_arn", None)
    data.setdefault("routing", {})["strategy"] = c.routing
    if base_dir is not None:
        _rebase(data, base_dir, out_dir)
    return data


def _rebase(data: dict[str, Any], base_dir: Path, out_dir: Path) -> None:
    def moved(path: str) -> str:
        if "://" in path or Path(path).is_absolute():
            return path
        return os.path.relpath(base_dir / path, out_dir)

    model = data.get("model", {})
    if model.get("config_path"):
        model["config_path"] = moved(model["config_path"])
    for adapter in data.get("adapters", []):
        for key in ("source", "formatter"):
            if adapter.get(key):
                adapter[key] = moved(adapter[key])
    for key, value in list(data.get("formatters", {}).items()):
        if isinstance(value, str):
            data["formatters"][key] = moved(value)


def spec_yaml(data: dict[str, Any], comments: list[str]) -> str:
    head = "".join(f"# {line}\n" if line else "#\n" for line in comments)
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
