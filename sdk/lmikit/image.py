"""The LMI container image URI, resolved offline and pinned (never "latest").

The source of truth is the sagemaker package's own image URI table for ``djl-lmi``
(``sagemaker/core/image_uri_config/djl-lmi.json``). Importing ``sagemaker.core`` takes over a
second (it pulls pandas and scipy), so the common case reads that table directly without
importing the package; unusual partitions fall back to ``image_uris.retrieve``. A test checks
that both give the same URI for every version and region in the table.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from lmikit.errors import RenderError

FRAMEWORK = "djl-lmi"
_DOMAINS = {"cn-": "amazonaws.com.cn"}
# Commercial and China regions; GovCloud, ISO and sovereign partitions use other domains and
# go through the sagemaker package itself.
_FAST_REGION = re.compile(
    r"^(us|eu|ap|ca|sa|me|af|il|mx|cn)-(central|north|south|east|west|northeast|southeast|"
    r"northwest|southwest)-\d+$")


@functools.lru_cache(maxsize=32)
def lmi_image_uri(region: str, lmi_version: str) -> str:
    """``<account>.dkr.ecr.<region>.amazonaws.com/djl-inference:<version>-lmi...``"""
    table = _table()
    if table is not None and _FAST_REGION.match(region):
        versions = table.get("versions", {})
        entry = versions.get(table.get("version_aliases", {}).get(lmi_version, lmi_version))
        if entry is None:
            raise RenderError(f"no LMI image for engine.lmi_version {lmi_version!r}; the "
                              f"installed sagemaker package knows: {', '.join(versions)}")
        account = entry.get("registries", {}).get(region)
        if account is None:
            raise RenderError(f"no LMI image {lmi_version} in region {region!r}; available "
                              f"in: {', '.join(sorted(entry.get('registries', {})))}")
        domain = next((d for p, d in _DOMAINS.items() if region.startswith(p)),
                      "amazonaws.com")
        uri = f"{account}.dkr.ecr.{region}.{domain}/{entry['repository']}:{entry['tag_prefix']}"
    else:
        uri = retrieve_with_sagemaker(region, lmi_version)
    if uri.endswith(":latest"):
        raise RenderError(f"refusing an unpinned image URI {uri!r}")
    return uri


def retrieve_with_sagemaker(region: str, lmi_version: str) -> str:
    """The sagemaker package's own resolution (slow to import)."""
    try:
        from sagemaker.core import image_uris
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RenderError("resolving the LMI image needs the sagemaker package: "
                          "pip install 'lmikit[sagemaker]'") from exc
    try:
        return str(image_uris.retrieve(framework=FRAMEWORK, region=region, version=lmi_version))
    except ValueError as exc:
        raise RenderError(f"no LMI image for engine.lmi_version {lmi_version!r} in region "
                          f"{region!r}: {exc}") from exc


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any] | None:
    """The sagemaker package's djl-lmi table, found without importing the package."""
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "core" / "image_uri_config" / f"{FRAMEWORK}.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                return None
            return data if isinstance(data, dict) else None
    return None
