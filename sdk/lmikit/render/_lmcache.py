"""LMCache engine configuration (the YAML file LMI points OPTION_LMCACHE_CONFIG_FILE at).

Keys are LMCache v1 ``LMCacheEngineConfig`` names; sizes are GB per worker process.

>>> from lmikit.planner import plan
>>> cfg = lmcache_config(plan("Qwen/Qwen2.5-7B-Instruct", "ml.p4de.24xlarge",
...                           context_tokens=20_000_000))
>>> cfg["local_disk"], cfg["extra_config"]
('file:///tmp/lmcache/', {'use_odirect': True})
"""

from __future__ import annotations

from typing import Any

import yaml

from lmikit.errors import RenderError
from lmikit.planner import Plan
from lmikit.spec import s3_remote_bucket_region

LMCACHE_FILE_NAME = "lmcache_config.yaml"


def lmcache_config(plan: Plan) -> dict[str, Any]:
    """The LMCache config dict for a plan; empty when the plan uses no LMCache tier."""
    if not plan.uses_lmcache:
        return {}
    sizes = plan.lmcache
    cfg: dict[str, Any] = {
        "chunk_size": sizes["chunk_size"],
        "local_cpu": True,
        "max_local_cpu_size": sizes["max_local_cpu_size_gb"],
        # no enable_lazy_memory_allocator: no LMCache an LMI release lmikit knows ships is sure
        # to honour it (lmikit.planner._versions.lazy_allocator_honoured); the plan counts the time
        # to pin the whole tier instead (lmikit.planner.PIN_BYTES_PER_S)
        "save_unfull_chunk": False,
    }
    if plan.tier == "cpu+disk":
        disk = sizes["local_disk"]
        if not (isinstance(disk, str) and disk.startswith("file:///") and disk.endswith("/")):
            raise RenderError(f"local_disk must be an absolute file:/// directory, got {disk!r}")
        cfg["local_disk"] = disk
        cfg["max_local_disk_size"] = sizes["max_local_disk_size_gb"]
        cfg["extra_config"] = {"use_odirect": True}
    first_rank = sizes.get("first_rank_max_local_cpu_size_gb")
    if first_rank:  # MLA at TP > 1: LMCache stores from the first rank only (cache_engine.py)
        cfg.setdefault("extra_config", {})["first_rank_max_local_cpu_size"] = first_rank
    if plan.tier == "remote":
        cfg["remote_url"] = sizes["remote_url"]
        cfg["remote_serde"] = "naive"
        s3 = s3_remote_bucket_region(sizes["remote_url"])
        if s3:  # LMCache's S3 connector asserts extra_config.s3_region (s3_adapter.py)
            cfg.setdefault("extra_config", {})["s3_region"] = s3[1]
    return cfg


def render_lmcache_yaml(plan: Plan) -> str:
    """The LMCache YAML text, with a header saying where the sizes came from."""
    cfg = lmcache_config(plan)
    if not cfg:
        return "# LMCache is off for this deployment (tier: none)\n"
    header = (
        f"# LMCache config for {plan.model_id} on {plan.instance_type}\n"
        f"# tier: {plan.tier}; sizes are per worker ({plan.lmcache['workers']} workers = "
        f"{plan.copies} copies x TP {plan.tp})\n"
    )
    return header + yaml.safe_dump(cfg, sort_keys=True, default_flow_style=False)
