"""``lmikit.deploy._doctor`` end to end against the fake SageMaker (with its cache model) and moto:
a healthy deployment passes; each way of being unhealthy fails with the reason."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.bench._long_doc_qa import LongDocQA
from lmikit.deploy import Deployment
from lmikit.deploy._doctor import Report, doctor
from lmikit.render._alarms import alarm_prefix
from lmikit.spec._loader import load_spec_text
from lmikit.testing import (
    FakeSageMaker,
    VirtualClock,
    write_lora_adapter,
)

from .conftest import BUCKET, LMIKIT_IMAGE, REGION, ROLE, cache_spec_text

# A GPU pool (gpu_memory_utilization 0.4: ~43K tokens) smaller than the 10 documents of
# 5,900 tokens the workload keeps asking about, and a CPU tier (~590K tokens) that holds them.
WORKLOAD = LongDocQA(num_documents=10, document_tokens=5900, repeat_count=5,
                     repeat_mode="tile")

SECTIONS = """engine:
  gpu_memory_utilization: 0.4
workload:
  reused_context_tokens: 60000
  typical_request_tokens: 6000
  unique_suffix_tokens: 100
  concurrency: 1
"""


def spec_text(mode: str = "cpu", routing: str = "sticky_session", instances: int = 1,
              extra: str = "") -> str:
    return cache_spec_text(mode, routing, instances, SECTIONS + extra)


@pytest.fixture
def fake(cached_fake: FakeSageMaker) -> FakeSageMaker:
    return cached_fake


class Live:
    def __init__(self, fake: FakeSageMaker, clock: VirtualClock, tmp_path: Path,
                 **spec: Any) -> None:
        self.fake, self.clock, self.tmp_path = fake, clock, tmp_path
        self.spec = load_spec_text(spec_text(**spec), source=str(tmp_path / "spec.yaml"))
        self.session = fake.install(boto3.Session(region_name=REGION))
        Deployment(self.spec, session=self.session, role_arn=ROLE, bucket=BUCKET,
                   base_dir=tmp_path, image_uri=LMIKIT_IMAGE, clock=clock,
                   poll_seconds=10).deploy()
        self.rt = self.session.client("sagemaker-runtime")
        self.sm = self.session.client("sagemaker")

    def traffic(self, sessions: bool) -> None:
        """Long-Doc-QA: every document once, then asked about again; with ``sessions``,
        each document's conversation in its own session."""
        opened: dict[int, str] = {}
        for doc, prompt in WORKLOAD.warmup_prompts() + WORKLOAD.query_prompts():
            extra = {}
            if sessions:
                if doc not in opened:
                    out = self.rt.invoke_endpoint(
                        EndpointName="docqa", InferenceComponentName="docqa-base",
                        Body='{"requestType": "NEW_SESSION"}', SessionId="NEW_SESSION")
                    opened[doc] = out["NewSessionId"].split(";")[0]
                extra["SessionId"] = opened[doc]
            body = {"prompt": prompt, "max_tokens": 4}
            import json

            self.rt.invoke_endpoint(EndpointName="docqa", InferenceComponentName="docqa-base",
                                    Body=json.dumps(body), **extra)
            self.clock.advance(1.0)

    def doctor(self) -> Report:
        now = dt.datetime.fromtimestamp(self.clock.time(), tz=dt.timezone.utc)
        return doctor(self.spec, session=self.session, base_dir=self.tmp_path, since_s=3600,
                      now=now)


def _verdicts(report: Report) -> dict[str, str]:
    return {c.name: c.verdict for c in report.checks}


@pytest.mark.slow
def test_doctor_healthy_deployment_passes(fake: FakeSageMaker, clock: VirtualClock,
                                          tmp_path: Path) -> None:
    live = Live(fake, clock, tmp_path)
    live.traffic(sessions=True)
    report = live.doctor()
    assert report.healthy, [c.line() for c in report.checks]
    assert _verdicts(report) | {"ttft": "skip"} == {
        "endpoint": "ok", "components": "ok", "alarms": "ok", "errors": "ok", "drift": "ok",
        "serving.properties": "ok", "cache": "ok", "sessions": "ok", "ttft": "skip"}
    assert report.measured["cache"]["total"] > 0.8  # five of six rounds hit


@pytest.mark.slow
def test_doctor_kv_cache_off_on_repeated_context_says_the_cache_does_not_pay(
        fake: FakeSageMaker, clock: VirtualClock, tmp_path: Path) -> None:
    live = Live(fake, clock, tmp_path, mode="off")
    live.traffic(sessions=True)
    report = live.doctor()
    assert not report.healthy
    cache = report.check("cache")
    assert cache.verdict == "fail"
    assert "the cache does not pay" in cache.detail and "kv_cache.mode is off" in cache.detail
    assert "kv_cache.mode: cpu" in cache.fix
    assert report.measured["cache"]["total"] < 0.05  # the GPU pool cycles: nothing stays


@pytest.mark.slow
def test_doctor_random_routing_with_sessions_says_hits_collapse(
        fake: FakeSageMaker, clock: VirtualClock, tmp_path: Path) -> None:
    live = Live(fake, clock, tmp_path, routing="random", instances=4)
    live.traffic(sessions=False)  # sessions are off with random routing: requests scatter
    report = live.doctor()
    cache = report.check("cache")
    assert cache.verdict == "fail", cache.line()
    assert "routing random scatters" in cache.detail and "4 copies" in cache.detail
    assert "sticky_session" in cache.fix


def test_doctor_drift_in_the_component_environment_fails(fake: FakeSageMaker,
                                                         clock: VirtualClock,
                                                         tmp_path: Path) -> None:
    live = Live(fake, clock, tmp_path)
    desc = live.sm.describe_inference_component(InferenceComponentName="docqa-base")
    spec = desc["Specification"]
    container = spec["Container"]
    container["Image"] = container.pop("DeployedImage")["SpecifiedImage"]
    container["Environment"]["OPTION_MAX_ROLLING_BATCH_SIZE"] = "8"
    live.sm.update_inference_component(InferenceComponentName="docqa-base",
                                       Specification=spec)
    fake.settle()
    report = live.doctor()
    drift = report.check("drift")
    assert drift.verdict == "fail"
    assert "inference-component docqa-base" in drift.detail and "environment" in drift.detail


def test_doctor_alarm_in_alarm_fails(fake: FakeSageMaker, clock: VirtualClock,
                                     tmp_path: Path) -> None:
    live = Live(fake, clock, tmp_path)
    cw = live.session.client("cloudwatch")
    name = alarm_prefix(live.spec) + "5xx-rate"
    if not cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]:
        cw.put_metric_alarm(AlarmName=name, Namespace="AWS/SageMaker",
                            MetricName="Invocation5XXErrors", Statistic="Sum", Period=60,
                            EvaluationPeriods=1, Threshold=1,
                            ComparisonOperator="GreaterThanThreshold")
    cw.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="test")
    report = live.doctor()
    assert report.check("alarms").verdict == "fail"
    assert name in report.check("alarms").detail


def test_doctor_failed_adapter_names_its_reason(fake: FakeSageMaker, clock: VirtualClock,
                                                tmp_path: Path) -> None:
    write_lora_adapter(tmp_path / "adapters" / "legal", base_model="Qwen/Qwen2.5-7B-Instruct")
    live = Live(fake, clock, tmp_path,
                extra="adapters:\n  - name: legal\n    source: adapters/legal\n")
    desc = live.sm.describe_inference_component(InferenceComponentName="docqa-legal")
    fake.inject("CreateInferenceComponent", "failed", name="docqa-broken",
                reason="adapter_config.json: target_modules names no layer of the model")
    live.sm.create_inference_component(
        InferenceComponentName="docqa-broken", EndpointName="docqa",
        Specification={"BaseInferenceComponentName": "docqa-base",
                       "Container": {"ArtifactUrl": desc["Specification"]["Container"][
                           "ArtifactUrl"]}})
    fake.settle()
    report = live.doctor()
    components = report.check("components")
    assert components.verdict == "fail"
    assert "adapter docqa-broken is Failed: adapter_config.json" in components.detail
