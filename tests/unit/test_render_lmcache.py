"""LMCache files are checked with LMCache's own loader (lmcache.v1.config, no torch needed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
import yaml

from lmikit.planner._planner import plan, plan_spec
from lmikit.render._lmcache import lmcache_config, render_lmcache_yaml
from lmikit.spec._loader import load_spec
from tests.conftest import EXAMPLE_SPECS, ROOT, assert_golden

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


VERSIONS = ROOT / ".venv" / "lmcache-versions"  # .ci/setup installs them
LOAD = """
import json, logging, sys
messages = []
class Records(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())
import lmcache
from lmcache.v1.config import LMCacheEngineConfig
for name in list(logging.root.manager.loggerDict):
    if name.startswith("lmcache"):
        logging.getLogger(name).addHandler(Records())
cfg = LMCacheEngineConfig.from_file(sys.argv[1])
print(json.dumps({"module": lmcache.__file__, "chunk_size": cfg.chunk_size,
                  "max_local_cpu_size": cfg.max_local_cpu_size,
                  "max_local_disk_size": cfg.max_local_disk_size,
                  "warnings": [m for m in messages if "Unknown" in m]}))
"""


def _shipped_versions() -> list[str]:
    from lmikit.planner._versions import LMCACHE_SHIPPED, release_tuple

    return sorted({v for s in LMCACHE_SHIPPED.values() for v in s.candidates},
                  key=release_tuple)


@pytest.mark.parametrize("version", _shipped_versions())
def test_examples_load_with_the_lmcache_each_lmi_release_ships(version, tmp_path):
    """The LMCache file of every example loads, without an unknown key, with the loader of
    the LMCache the pinned LMI releases hold (lmikit.planner._versions.LMCACHE_SHIPPED), not only
    the one installed here. Versions .ci/setup does not install are skipped, by name."""
    where = VERSIONS / version
    if not (where / "lmcache").is_dir():
        pytest.skip(f"lmcache {version} is not installed under {VERSIONS} (.ci/setup installs "
                    "the newest candidate of each release)")
    for path in EXAMPLE_SPECS:
        p = plan_spec(load_spec(path), base_dir=path.parent)
        if not p.uses_lmcache:
            continue
        file = tmp_path / f"{path.stem}.yaml"
        file.write_text(render_lmcache_yaml(p))
        done = subprocess.run([sys.executable, "-c", LOAD, str(file)], capture_output=True,
                              text=True, timeout=120, check=True,
                              env={**os.environ, "PYTHONPATH": str(where)})
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["module"].startswith(str(where)), got["module"]
        assert got["warnings"] == [], (path.name, got["warnings"])
        assert got["chunk_size"] == p.lmcache["chunk_size"]
        assert got["max_local_cpu_size"] == pytest.approx(p.lmcache["max_local_cpu_size_gb"])
        assert got["max_local_disk_size"] == pytest.approx(p.lmcache["max_local_disk_size_gb"])


@pytest.mark.parametrize("lmi", ["0.35.0", "0.36.0", "0.38.0"])
def test_lazy_allocator_is_rendered_only_where_every_shipped_lmcache_honours_it(lmi):
    """LMCache honours enable_lazy_memory_allocator in 0.3.10-0.3.12 only (0.3.9.post2 does
    not know the key; 0.3.13+ local_cpu_backend.py falls back to full allocation): no LMI
    release lmikit pins is sure to ship such a version, so no LMCache file carries it and the
    plan counts pinning the whole tier (lmikit.planner.PIN_BYTES_PER_S)."""
    from lmikit.planner._versions import LMCACHE_SHIPPED, lazy_allocator_honoured, release_tuple

    assert release_tuple("0.3.9.post2") == (0, 3, 9)
    assert not lazy_allocator_honoured(lmi)
    assert any(release_tuple(v) >= (0, 3, 13) or release_tuple(v) < (0, 3, 10)
               for v in LMCACHE_SHIPPED[lmi].candidates)
    for path in EXAMPLE_SPECS:
        assert "enable_lazy_memory_allocator" not in render_lmcache_yaml(
            plan_spec(load_spec(path), base_dir=path.parent))


@pytest.mark.parametrize("version", _shipped_versions())
def test_the_shipped_lmcache_pins_its_whole_cpu_tier(version):
    """Read in the installed copy of each version: the lazy allocator falls back to full
    allocation (the reason the plan counts pinning time)."""
    from lmikit.planner._versions import release_tuple

    source = VERSIONS / version / "lmcache" / "v1" / "storage_backend" / "local_cpu_backend.py"
    if not source.is_file():
        pytest.skip(f"lmcache {version} is not installed under {VERSIONS}")
    honours = "LazyMixedMemoryAllocator is temporarily unavailable" not in source.read_text()
    assert honours == ((0, 3, 10) <= release_tuple(version) < (0, 3, 13))
