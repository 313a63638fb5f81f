"""LoRA adapters with LMCache: who isolates what, and each adapter's cache tag.

LMCache's cache key does not name the LoRA adapter, so lmikit tags every adapter request
from the adapter's ``model.py`` (:mod:`lmikit.formatters.isolation` explains the path a
tag takes to LMCache's key). This module holds the packaging-side decisions (the planner
decides the deployment-wide ones: whether the base isolates, and that ``s3://`` adapters are
refused while LMCache is on):

- :func:`adapter_cache_tag`: the tag value, from the adapter's name and a digest of its
  files (weights, config), so two adapters, or two versions of one, never share keys;
- :func:`lmcache_in_environment`: whether a deployed base component runs LMCache, read
  from its container environment (for adapters registered on a running endpoint).

>>> adapter_cache_tag("legal", {"adapter_model.safetensors": b"w", "adapter_config.json": b"{}"})
'legal.6000d329d8be84db967cf40d90ec9e90'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

# Files of an adapter directory that do not change its KV: the formatter (it changes the
# prompt, and so the tokens, not what a token's KV is).
NOT_WEIGHTS = frozenset({"model.py"})
TAG_DIGEST_HEX = 32  # 128 bits of sha256


def adapter_cache_tag(name: str, files: Mapping[str, bytes]) -> str:
    """``<name>.<digest>``: the digest covers every file's name and bytes except model.py."""
    return adapter_cache_tag_from_digests(
        name, {path: hashlib.sha256(data).digest() for path, data in files.items()})


def adapter_cache_tag_from_digests(name: str, digests: Mapping[str, bytes]) -> str:
    """:func:`adapter_cache_tag` from each file's sha256 digest (the packager hashes files as
    it streams them, without holding their bytes)."""
    digest = hashlib.sha256()
    for path in sorted(digests):
        if path in NOT_WEIGHTS:
            continue
        digest.update(path.encode() + b"\0" + digests[path])
    return f"{name}.{digest.hexdigest()[:TAG_DIGEST_HEX]}"


def lmcache_in_environment(env: Mapping[str, str]) -> bool:
    """Whether a base component's container environment turns LMCache on (the keys
    :func:`lmikit.render.container_environment` writes for it, or LMI's own)."""
    if env.get("OPTION_LMCACHE_CONFIG_FILE"):
        return True
    if env.get("OPTION_LMCACHE_AUTO_CONFIG", "").lower() == "true":
        return True
    plan = _json_object(env.get("LMIKIT_PLAN"))
    if plan.get("tier") not in (None, "none"):
        return True
    transfer = _json_object(env.get("OPTION_KV_TRANSFER_CONFIG"))
    return "LMCache" in str(transfer.get("kv_connector", ""))


def _json_object(text: str | None) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
