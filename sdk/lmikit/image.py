"""The LMI container image URI, resolved offline and pinned (never "latest").

``catalog/lmi_images.json`` is the sagemaker-core package's image table for ``djl-lmi``
(``sagemaker/core/image_uri_config/djl-lmi.json``, of the version the file records) cut to
the LMI versions lmikit can serve (from :data:`lmikit.lmi_versions.ASYNC_SERVICE` on),
with the ECR host of each region as sagemaker-core resolves it (botocore's endpoint data).
lmikit reads it without sagemaker-core, which is a development dependency only: the test
suite rebuilds the slice from the installed sagemaker-core (:func:`from_sagemaker_core`),
compares, and checks every URI against ``sagemaker.core.image_uris.retrieve``.

>>> lmi_image_uri("us-west-2", "0.38.0").split(".amazonaws.com/")[1]
'djl-inference:0.38.0-lmi29.0.0-cu130'
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from lmikit.errors import RenderError

FRAMEWORK = "djl-lmi"
SOURCE_PACKAGE = "sagemaker-core"
SOURCE_FILE = f"core/image_uri_config/{FRAMEWORK}.json"  # inside the ``sagemaker`` package
TABLE_FILE = "lmi_images.json"  # in lmikit.catalog


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = resources.files("lmikit.catalog").joinpath(TABLE_FILE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=32)
def lmi_image_uri(region: str, lmi_version: str) -> str:
    """``<account>.dkr.ecr.<region>.amazonaws.com/djl-inference:<version>-lmi...``"""
    table = _table()
    versions = table["versions"]
    entry = versions.get(table["version_aliases"].get(lmi_version, lmi_version))
    if entry is None:
        raise RenderError(f"no LMI image for engine.lmi_version {lmi_version!r}; lmikit's "
                          f"image table ({SOURCE_PACKAGE} {table['sagemaker_core_version']}) "
                          f"knows: {', '.join(versions)}")
    account = entry["registries"].get(region)
    if account is None:
        raise RenderError(f"no LMI image {lmi_version} in region {region!r}; available "
                          f"in: {', '.join(sorted(entry['registries']))}")
    uri = f"{account}.dkr.{table['ecr_hosts'][region]}/{entry['repository']}:" \
        f"{entry['tag_prefix']}"
    if uri.endswith(":latest"):
        raise RenderError(f"refusing an unpinned image URI {uri!r}")
    return uri


def from_sagemaker_core(data: Mapping[str, Any], oldest: str,
                        ecr_host: Callable[[str], str]) -> dict[str, Any]:
    """lmikit's table from sagemaker-core's ``djl-lmi.json`` ``data``: the versions from
    ``oldest`` on, the aliases that name one of them, and ``ecr_host(region)`` for every
    region they list."""
    from lmikit.lmi_versions import version_tuple

    versions = {v: {k: entry[k] for k in ("registries", "repository", "tag_prefix")}
                for v, entry in data["versions"].items()
                if version_tuple(v) >= version_tuple(oldest)}
    regions = sorted({r for entry in versions.values() for r in entry["registries"]})
    return {"ecr_hosts": {r: ecr_host(r) for r in regions},
            "version_aliases": {a: v for a, v in data.get("version_aliases", {}).items()
                                if v in versions},
            "versions": versions}


def main() -> None:  # pragma: no cover - a maintainer's command, run by hand
    """Print the table from the installed sagemaker-core: ``python -m lmikit.image >
    sdk/lmikit/catalog/lmi_images.json``."""
    from importlib.metadata import version

    import botocore.loaders
    import botocore.regions
    import sagemaker

    from lmikit.lmi_versions import ASYNC_SERVICE

    data = json.loads(resources.files(sagemaker).joinpath(SOURCE_FILE).read_text())
    # sagemaker.core.image_uris.retrieve's host: botocore's "ecr" endpoint for the region
    resolver = botocore.regions.EndpointResolver(
        botocore.loaders.create_loader().load_data("endpoints"))

    def ecr_host(region: str) -> str:
        endpoint = resolver.construct_endpoint("ecr", region)
        return str(endpoint["hostname"]) if endpoint else f"ecr.{region}.amazonaws.com"

    table = from_sagemaker_core(data, ASYNC_SERVICE.version, ecr_host)
    print(json.dumps({"sagemaker_core_version": version(SOURCE_PACKAGE), **table}, indent=1,
                     sort_keys=True))


if __name__ == "__main__":  # pragma: no cover
    main()
