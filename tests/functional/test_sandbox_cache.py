"""The fake's cache model: hits follow the copy a request lands on and what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.deploy import Deployment
from lmikit.spec._loader import load_spec_text
from lmikit.testing import (
    FakeSageMaker,
    VirtualClock,
)

from .conftest import BUCKET, LMIKIT_IMAGE, REGION, ROLE, cache_spec_text

DOC = "contract " + "clause " * 2000  # 2001 words: 7 full 256-token chunks and a partial


def spec_text(mode: str = "cpu", routing: str = "sticky_session", instances: int = 1) -> str:
    return cache_spec_text(mode, routing, instances,
                           "workload:\n  reused_context_tokens: 460000\n")


def _deploy(fake: FakeSageMaker, clock: VirtualClock, tmp_path: Path, **spec: Any) -> Any:
    loaded = load_spec_text(spec_text(**spec), source=str(tmp_path / "spec.yaml"))
    session = fake.install(boto3.Session(region_name=REGION))
    Deployment(loaded, session=session, role_arn=ROLE, bucket=BUCKET, base_dir=tmp_path,
               image_uri=LMIKIT_IMAGE, clock=clock, poll_seconds=10).deploy()
    return session.client("sagemaker-runtime")


def _ask(rt: Any, text: str, **extra: Any) -> Any:
    return rt.invoke_endpoint(EndpointName="docqa", InferenceComponentName="docqa-base",
                              Body=f'{{"prompt": "{text}", "max_tokens": 4}}', **extra)


def _open(rt: Any) -> str:
    out = rt.invoke_endpoint(EndpointName="docqa", InferenceComponentName="docqa-base",
                             Body='{"requestType": "NEW_SESSION"}', SessionId="NEW_SESSION")
    return str(out["NewSessionId"].split(";")[0])


def _fleet(fake: FakeSageMaker, rt: Any) -> Any:
    """The base component's fleet (built by the first request; a short one holds no chunk)."""
    _ask(rt, "hello")
    assert fake.cache is not None
    return fake.cache.fleets["docqa-base"][1]


def _sum(fake: FakeSageMaker, metric: str) -> float:
    assert fake.cache is not None
    return fake.cache.totals().get(metric, 0.0)


def test_cache_model_repeated_prompt_hits_on_the_same_copy(cached_fake: FakeSageMaker,
                                                           clock: VirtualClock,
                                                           tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path)
    _ask(rt, DOC + "first?")
    assert _sum(cached_fake, "GpuPrefixCacheHitTokens") == 0  # cold
    _ask(rt, DOC + "second?")
    # the shared 2001 words hold 7 full chunks; the partial chunk is never a hit
    assert _sum(cached_fake, "GpuPrefixCacheHitTokens") == 7 * 256
    assert _sum(cached_fake, "GpuPrefixCacheQueryTokens") == 2 * 2002
    # vLLM asks LMCache for every token beyond the GPU hit, hits and misses alike
    assert _sum(cached_fake, "ExternalPrefixCacheQueryTokens") == 2 * 2002 - 7 * 256


def test_cache_model_mode_off_has_no_lmcache_metrics(cached_fake: FakeSageMaker,
                                                     clock: VirtualClock,
                                                     tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path, mode="off")
    for _ in range(3):
        _ask(rt, DOC)
    totals = cached_fake.cache.totals() if cached_fake.cache else {}
    assert "LMCacheHitTokens" not in totals
    assert totals["ExternalPrefixCacheHitTokens"] == 0
    assert totals["ExternalPrefixCacheQueryTokens"] == 0  # no KV connector to ask


def test_cache_model_cpu_tier_serves_what_the_gpu_evicted(cached_fake: FakeSageMaker,
                                                          clock: VirtualClock,
                                                          tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path)
    fleet = _fleet(cached_fake, rt)
    fleet.copies[0].gpu.capacity = 8  # a GPU pool of one document's chunks
    _ask(rt, DOC + "a")
    _ask(rt, "other " + DOC + "b")  # pushes the first document out of the GPU
    _ask(rt, DOC + "c")
    assert _sum(cached_fake, "GpuPrefixCacheHitTokens") == 0
    assert _sum(cached_fake, "ExternalPrefixCacheHitTokens") == 7 * 256


def test_cache_model_sessions_stick_and_random_routing_scatters(cached_fake: FakeSageMaker,
                                                                clock: VirtualClock,
                                                                tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path, routing="random", instances=4)
    fleet = _fleet(cached_fake, rt)
    assert len(fleet.copies) == 4 and fleet.setup.routing == "random"
    for _ in range(8):
        _ask(rt, DOC)
    assert len({copy for _, copy in fleet.placements[1:]}) > 1  # scattered
    # a document is computed once per copy it reaches: hits are what repeats on a copy
    copies_reached = len({copy for _, copy in fleet.placements[1:]})
    assert _sum(cached_fake, "GpuPrefixCacheHitTokens") == (8 - copies_reached) * 7 * 256


@pytest.mark.slow
def test_cache_model_session_pins_one_copy(cached_fake: FakeSageMaker, clock: VirtualClock,
                                           tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path, instances=4)
    assert cached_fake.cache is not None
    sid = _open(rt)
    for turn in range(6):
        _ask(rt, DOC + f"turn{turn}", SessionId=sid)
    fleet = cached_fake.cache.fleets["docqa-base"][1]
    assert len({copy for s, copy in fleet.placements if s == sid}) == 1
    # every turn after the first found the document on its copy
    assert _sum(cached_fake, "GpuPrefixCacheHitTokens") == 5 * 7 * 256


def test_cache_model_publishes_to_cloudwatch_with_deployment_dimensions(
        cached_fake: FakeSageMaker, clock: VirtualClock, tmp_path: Path) -> None:
    rt = _deploy(cached_fake, clock, tmp_path)
    _ask(rt, DOC)
    cw = boto3.client("cloudwatch", region_name=REGION)
    names = {(m["Namespace"], m["MetricName"], tuple(sorted((d["Name"], d["Value"])
                                                            for d in m["Dimensions"])))
             for m in cw.list_metrics()["Metrics"]}
    dims = (("EndpointName", "docqa"), ("InferenceComponentName", "docqa-base"))
    assert ("LMIKit/Container", "ExternalPrefixCacheQueryTokens", dims) in names
    assert ("AWS/SageMaker", "Invocations", (("InferenceComponentName", "docqa-base"),)) in names
    assert ("AWS/SageMaker", "ModelLatency",
            (("EndpointName", "docqa"), ("VariantName", "AllTraffic"))) in names
