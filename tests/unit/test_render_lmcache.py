"""LMCache files are checked with LMCache's own loader (lmcache.v1.config, no torch needed)."""

from __future__ import annotations

import logging

import pytest
import yaml

from lmikit.planner._planner import plan, plan_spec
from lmikit.render._lmcache import lmcache_config, render_lmcache_yaml
from lmikit.spec._loader import load_spec
from tests.conftest import EXAMPLE_SPECS, assert_golden

lmcache_config_module = pytest.importorskip("lmcache.v1.config")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _load_with_lmcache(path):
    """Load with LMCache's loader, returning (config, warnings it logged)."""
    handler = _Records()
    loggers = [logging.getLogger(n) for n in logging.root.manager.loggerDict
               if n.startswith("lmcache")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        cfg = lmcache_config_module.LMCacheEngineConfig.from_file(str(path))
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    return cfg, [m for m in handler.messages if "Unknown" in m or "deprecated" in m.lower()]


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_lmcache_yaml_matches_golden(path):
    text = render_lmcache_yaml(plan_spec(load_spec(path), base_dir=path.parent))
    assert_golden(f"lmcache-{path.stem}.yaml", text)


PLANS = {
    "cpu": dict(context_tokens=2_000_000),
    "cpu+disk": dict(context_tokens=20_000_000),
    "remote": dict(mode="remote", remote_url="redis://cache.internal:6379"),
}


@pytest.mark.parametrize("tier", sorted(PLANS))
def test_lmcache_loader_accepts_every_tier_without_warnings(tier, tmp_path):
    p = plan("Qwen/Qwen3-8B", "ml.p4de.24xlarge", **PLANS[tier])
    assert p.tier == tier
    path = tmp_path / "lmcache.yaml"
    path.write_text(render_lmcache_yaml(p))
    cfg, warnings = _load_with_lmcache(path)
    assert warnings == []
    ours = lmcache_config(p)
    assert cfg.chunk_size == ours["chunk_size"]
    assert cfg.local_cpu is True
    assert cfg.max_local_cpu_size == pytest.approx(ours["max_local_cpu_size"])
    if tier == "cpu+disk":
        assert cfg.local_disk == "/tmp/lmcache/"  # LMCache resolved it to an absolute path
        assert cfg.max_local_disk_size == pytest.approx(ours["max_local_disk_size"])
        assert cfg.extra_config == {"use_odirect": True}
    if tier == "remote":
        assert cfg.remote_url == "redis://cache.internal:6379"


def test_lmcache_loader_would_flag_an_unknown_key(tmp_path):
    """The check above can fail: LMCache does report keys it does not know."""
    path = tmp_path / "bad.yaml"
    path.write_text("chunk_size: 256\nmax_local_cpu_sise: 5\n")
    _, warnings = _load_with_lmcache(path)
    assert any("max_local_cpu_sise" in w for w in warnings)


def test_lmcache_loader_two_slash_disk_url_would_be_relative(tmp_path):
    """Why we write three slashes: LMCache turns file://tmp/x into the relative tmp/x."""
    path = tmp_path / "two.yaml"
    path.write_text("local_disk: file://tmp/lmcache/\nmax_local_disk_size: 5\n")
    cfg, _ = _load_with_lmcache(path)
    assert not cfg.local_disk.startswith("/")


def test_lmcache_off_renders_no_config():
    p = plan("Qwen/Qwen2.5-1.5B-Instruct", "ml.p4de.24xlarge", context_tokens=10_000)
    assert p.tier == "none"
    assert lmcache_config(p) == {}
    assert yaml.safe_load(render_lmcache_yaml(p)) is None


def test_s3_remote_tier_carries_the_region_lmcaches_s3_connector_asserts(tmp_path):
    """LMCache's S3ConnectorAdapter asserts extra_config.s3_region ("s3_region is required",
    lmcache/v1/storage_backend/connector/s3_adapter.py); lmikit renders it from the bucket's
    endpoint, and LMCache's own loader reads it back."""
    url = "s3://kv-cache.s3.eu-west-1.amazonaws.com"
    p = plan("Qwen/Qwen3-8B", "ml.p4de.24xlarge", mode="remote", remote_url=url)
    path = tmp_path / "lmcache.yaml"
    path.write_text(render_lmcache_yaml(p))
    cfg, warnings = _load_with_lmcache(path)
    assert warnings == []
    assert cfg.remote_url == url
    assert cfg.extra_config == {"s3_region": "eu-west-1"}
    # a redis tier takes no extra_config
    redis = plan("Qwen/Qwen3-8B", "ml.p4de.24xlarge", **PLANS["remote"])
    assert "extra_config" not in lmcache_config(redis)


def test_mla_first_rank_cpu_size_is_read_by_lmcache(tmp_path):
    """LocalCPUBackend.initialize_allocator sizes the first rank of an MLA model with
    config.get_extra_config_value("first_rank_max_local_cpu_size", max_local_cpu_size)."""
    p = plan("mistralai/Mistral-Large-3-675B-Instruct-2512", "ml.p5e.48xlarge", tp=8,
             context_tokens=10**9)
    path = tmp_path / "lmcache.yaml"
    path.write_text(render_lmcache_yaml(p))
    cfg, warnings = _load_with_lmcache(path)
    assert warnings == []
    first = cfg.get_extra_config_value("first_rank_max_local_cpu_size", cfg.max_local_cpu_size)
    assert first == pytest.approx(round(cfg.max_local_cpu_size * 8, 1))
    assert cfg.extra_config["use_odirect"] is True
