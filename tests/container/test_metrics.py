"""The metrics sidecar, read from a real prometheus_client multiprocess registry.

Two child interpreters with PROMETHEUS_MULTIPROC_DIR set record metrics under the names
vLLM and LMCache use (conftest.multiproc_dir); the sidecar's exposition and HTTP server
are then read back and parsed with prometheus_client's own parser.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lmikit_runtime.metrics import exposition, make_server
from prometheus_client.parser import text_string_to_metric_families


def samples_of(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "pid"))
            out[(s.name, labels)] = out.get((s.name, labels), 0.0) + s.value
    return out


def test_exposition_merges_processes(multiproc_dir: str) -> None:
    body, content_type = exposition(multiproc_dir)
    samples = samples_of(body.decode())
    assert content_type.startswith("text/plain")
    assert samples[("lmcache:num_hit_tokens_total",
                    (("model_name", "qwen"), ("tier", "cpu")))] == 8192
    assert samples[("lmcache:num_hit_tokens_total",
                    (("model_name", "qwen"), ("tier", "disk")))] == 2048
    assert samples[("lmcache:local_cpu_evict_count_total", (("model_name", "qwen"),))] == 6
    assert samples[("vllm:time_to_first_token_seconds_count", (("model_name", "qwen"),))] == 2
    assert samples[("lmcache:retrieve_speed_bucket",
                    (("le", "100000.0"), ("model_name", "qwen")))] == 2


def test_server_serves_path_and_404s_elsewhere(multiproc_dir: str) -> None:
    server = make_server("/metrics", 0, multiproc_dir, host="127.0.0.1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert "lmcache:local_cache_usage" in text
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_exposition_of_empty_dir_is_empty(tmp_path: Path) -> None:
    body, _ = exposition(str(tmp_path))
    assert body == b""
