"""LoRA adapters: check, package deterministically, tag for LMCache, and register on a running
endpoint.

>>> from lmikit.lora import AdapterRegistry, package_adapter  # doctest: +SKIP
>>> package_adapter("adapters/legal").sha256  # doctest: +SKIP
>>> AdapterRegistry("docqa-qwen7b", bucket="my-artifacts").register(  # doctest: +SKIP
...     "legal", "adapters/legal")

:func:`check_adapter` reads an adapter directory with bounded reads (its files, its
safetensors headers against the base model's shape); :func:`package_adapter` packs it into a
deterministic ``.tar.gz`` whose ``model.py`` tags each request's cache key
(:func:`adapter_cache_tag`) while LMCache is on; :class:`AdapterRegistry` hosts it as an
adapter inference component. boto3 is imported only by the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "AdapterCheck": "lmikit.lora._packaging",
    "AdapterInfo": "lmikit.lora._registry",
    "AdapterPackage": "lmikit.lora._packaging",
    "AdapterRegistry": "lmikit.lora._registry",
    "DEFAULT_EXCLUDES": "lmikit.lora._files",
    "FORMATTER_FIELD": "lmikit.lora._packaging",
    "WEIGHT_FILES": "lmikit.lora._packaging",
    "adapter_cache_tag": "lmikit.lora._isolation",
    "catalog_shape": "lmikit.lora._packaging",
    "check_adapter": "lmikit.lora._packaging",
    "check_formatter_file": "lmikit.lora._packaging",
    "check_spec_adapter": "lmikit.lora._packaging",
    "lmcache_in_environment": "lmikit.lora._isolation",
    "package_adapter": "lmikit.lora._packaging",
    "package_spec_adapter": "lmikit.lora._packaging",
    "spec_adapter_dir": "lmikit.lora._packaging",
}

__all__ = [
    "AdapterCheck",
    "AdapterInfo",
    "AdapterPackage",
    "AdapterRegistry",
    "DEFAULT_EXCLUDES",
    "FORMATTER_FIELD",
    "WEIGHT_FILES",
    "adapter_cache_tag",
    "catalog_shape",
    "check_adapter",
    "check_formatter_file",
    "check_spec_adapter",
    "lmcache_in_environment",
    "package_adapter",
    "package_spec_adapter",
    "spec_adapter_dir",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.lora._files import DEFAULT_EXCLUDES
    from lmikit.lora._isolation import adapter_cache_tag, lmcache_in_environment
    from lmikit.lora._packaging import (
        FORMATTER_FIELD,
        WEIGHT_FILES,
        AdapterCheck,
        AdapterPackage,
        catalog_shape,
        check_adapter,
        check_formatter_file,
        check_spec_adapter,
        package_adapter,
        package_spec_adapter,
        spec_adapter_dir,
    )
    from lmikit.lora._registry import AdapterInfo, AdapterRegistry
