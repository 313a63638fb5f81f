"""The LMI container image URI, resolved offline and pinned (never "latest").

Uses the sagemaker package's own image URI tables (``sagemaker.core.image_uris``), imported
lazily: it takes about a second to import.
"""

from __future__ import annotations

import functools

from lmikit.errors import RenderError


@functools.lru_cache(maxsize=32)
def lmi_image_uri(region: str, lmi_version: str) -> str:
    """``<account>.dkr.ecr.<region>.amazonaws.com/djl-inference:<version>-lmi...``"""
    try:
        from sagemaker.core import image_uris
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RenderError("resolving the LMI image needs the sagemaker package: "
                          "pip install 'lmikit[sagemaker]'") from exc
    try:
        uri = image_uris.retrieve(framework="djl-lmi", region=region, version=lmi_version)
    except ValueError as exc:
        raise RenderError(f"no LMI image for engine.lmi_version {lmi_version!r} in region "
                          f"{region!r}: {exc}") from exc
    if uri.endswith(":latest"):
        raise RenderError(f"refusing an unpinned image URI {uri!r}")
    return str(uri)
