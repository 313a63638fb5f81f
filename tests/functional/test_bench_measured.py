"""``lmikit bench --output`` against a server that counts each request's cached tokens.

LMI does not (its vLLM serving object is built without ``enable_prompt_tokens_details``), so
the fake answers as LMI does unless ``runtime.prompt_tokens_details`` is set: then as vLLM
started with ``--enable-prompt-tokens-details``, whose usage chunk carries
``prompt_tokens_details.cached_tokens`` (GPU prefix cache plus KV connector tokens).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from lmikit.sim._calibrate import load_bench
from lmikit.testing import FakeSageMaker

from .conftest import SPEC_YAML
from .test_bench_cli import lmikit, served  # noqa: F401 - the fixture, on the cached fake

ARGS = ["--num-documents", "4", "--document-tokens", "600", "--output-tokens", "8",
        "--repeat-count", "2"]


@pytest.fixture
def fake(cached_fake: FakeSageMaker) -> FakeSageMaker:
    cached_fake.runtime.prompt_tokens_details = True
    return cached_fake


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(SPEC_YAML)
    return path


def test_bench_records_the_servers_cached_tokens_as_measured(
        served: FakeSageMaker, spec: Path, tmp_path: Path) -> None:  # noqa: F811
    """4 documents of 608 words (the fake's tokens) each keep 2 full chunks in the GPU
    pool: every query request is a measured 512-token GPU hit, every warm-up one a
    measured miss."""
    out = tmp_path / "bench.json"
    r = lmikit("bench", str(spec), *ARGS, "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = load_bench(out).records
    assert {r.outcome_source for r in rows} == {"measured"}
    assert [(x.hit, x.cached_tokens) for x in rows if x.round == "warmup"] == [(False, 0)] * 4
    query = [x for x in rows if x.round == "query"]
    assert [(x.hit, x.tier, x.cached_tokens) for x in query] == [(True, "gpu", 512)] * 8


def test_a_measured_outcome_replaces_a_wrong_prediction(
        served: FakeSageMaker, spec: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's caches would keep every document (the prediction: GPU hits); this
    server's keep nothing, and the file says what it served: misses."""
    from lmikit.testing import _metrics

    real = _metrics.setup_for

    def no_room(*args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(real(*args, **kwargs), gpu_tokens=0, cpu_tokens=0)

    monkeypatch.setattr(_metrics, "setup_for", no_room)
    out = tmp_path / "bench.json"
    assert lmikit("bench", str(spec), *ARGS, "--output", str(out)).exit_code == 0
    query = [x for x in load_bench(out).records if x.round == "query"]
    assert [(x.hit, x.outcome_source) for x in query] == [(False, "measured")] * 8
