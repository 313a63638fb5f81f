"""Client-side TTFT publishing: the fake SageMaker for the runtime, moto for CloudWatch."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from lmikit.client._endpoint import Endpoint
from lmikit.client._metrics import TPS_METRIC, TTFT_METRIC, TtftPublisher
from lmikit.metric_catalog import CLIENT_ADAPTER, CLIENT_ENDPOINT, CLIENT_NAMESPACE
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import REGION, deployment


@pytest.fixture
def deployed(fake: FakeSageMaker, session: Any, clock: VirtualClock, lora_spec: Any,
             tmp_path: Path) -> FakeSageMaker:
    deployment(lora_spec, session, clock, tmp_path).deploy()
    fake.runtime.ttft_seconds, fake.runtime.token_seconds = 0.25, 0.05
    return fake


@pytest.fixture
def cloudwatch(aws: None) -> Any:
    return boto3.client("cloudwatch", region_name=REGION)


def _dimension_sets(cloudwatch: Any, metric: str) -> set[tuple[str, ...]]:
    metrics = cloudwatch.list_metrics(Namespace=CLIENT_NAMESPACE, MetricName=metric)["Metrics"]
    return {tuple(sorted(f"{d['Name']}={d['Value']}" for d in m["Dimensions"]))
            for m in metrics}


def _stats(cloudwatch: Any, metric: str, dims: dict[str, str]) -> dict[str, Any]:
    now = dt.datetime.now(dt.timezone.utc)
    points = cloudwatch.get_metric_statistics(
        Namespace=CLIENT_NAMESPACE, MetricName=metric,
        Dimensions=[{"Name": k, "Value": v} for k, v in dims.items()],
        StartTime=now - dt.timedelta(minutes=5), EndTime=now + dt.timedelta(minutes=5),
        Period=60, Statistics=["SampleCount", "Average"])["Datapoints"]
    return {"count": sum(p["SampleCount"] for p in points),
            "average": points[0]["Average"] if len(points) == 1 else None}


class BlockingCloudWatch:
    """A CloudWatch client whose PutMetricData waits until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def put_metric_data(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        self.release.wait(10)
        return {}


class FailingCloudWatch:
    def __init__(self) -> None:
        self.calls = 0

    def put_metric_data(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}},
                          "PutMetricData")


def test_streams_publish_ttft_and_tokens_per_second_to_cloudwatch(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock, cloudwatch: Any) -> None:
    with Endpoint("docqa", session=session, clock=clock, publish_metrics=True,
                  cloudwatch_client=cloudwatch) as ep:
        for i in range(3):
            assert "".join(ep.stream(f"question {i} a b c")).startswith("[docqa-base]")
    assert ep.publisher is not None and ep.publisher.sent_datums == 3 * 2

    dims = {"EndpointName": "docqa"}
    assert tuple(dims) == CLIENT_ENDPOINT
    assert _dimension_sets(cloudwatch, TTFT_METRIC) == {("EndpointName=docqa",)}
    assert _stats(cloudwatch, TTFT_METRIC, dims) == {"count": 3,
                                                     "average": pytest.approx(0.25)}
    # 5 tokens, one every 0.05 s after the first
    assert _stats(cloudwatch, TPS_METRIC, dims) == {"count": 3, "average": pytest.approx(20.0)}


def test_an_adapter_stream_is_published_per_endpoint_and_per_adapter(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock, cloudwatch: Any) -> None:
    with Endpoint("docqa", session=session, clock=clock, publish_metrics=True,
                  cloudwatch_client=cloudwatch) as ep:
        list(ep.stream("what is a tort", adapter="legal"))
    assert tuple(sorted(CLIENT_ADAPTER)) == ("AdapterName", "EndpointName")
    expected = {("EndpointName=docqa",), ("AdapterName=legal", "EndpointName=docqa")}
    assert _dimension_sets(cloudwatch, TTFT_METRIC) == expected
    assert _dimension_sets(cloudwatch, TPS_METRIC) == expected
    legal = _stats(cloudwatch, TTFT_METRIC, {"EndpointName": "docqa", "AdapterName": "legal"})
    assert legal == {"count": 1, "average": pytest.approx(0.25)}


def test_closing_the_endpoint_flushes_an_injected_publisher_without_closing_it(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock, cloudwatch: Any) -> None:
    publisher = TtftPublisher(cloudwatch, flush_interval_s=3600)
    with publisher:
        with Endpoint("docqa", session=session, clock=clock, publisher=publisher) as ep:
            list(ep.stream("a b c", adapter="medical"))
        assert publisher.sent_datums == 4  # sent at endpoint close, not after an hour
        assert publisher.record(0.1, None, "docqa")  # still accepting records


def test_a_session_stream_is_published_with_its_adapter(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock, cloudwatch: Any) -> None:
    with Endpoint("docqa", session=session, clock=clock, publish_metrics=True,
                  cloudwatch_client=cloudwatch) as ep, ep.session(adapter="legal") as s:
        list(s.stream("hello"))
    assert ("AdapterName=legal", "EndpointName=docqa") in _dimension_sets(cloudwatch,
                                                                         TTFT_METRIC)


def test_invoke_publishes_nothing_because_it_measures_no_ttft(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock, cloudwatch: Any) -> None:
    with Endpoint("docqa", session=session, clock=clock, publish_metrics=True,
                  cloudwatch_client=cloudwatch) as ep:
        ep.invoke("hello")
    assert ep.publisher is not None and ep.publisher.sent_datums == 0


def test_streaming_does_not_wait_for_a_slow_cloudwatch(deployed: FakeSageMaker, session: Any,
                                                       clock: VirtualClock) -> None:
    slow = BlockingCloudWatch()
    publisher = TtftPublisher(slow, max_queue=2, batch_size=1, flush_interval_s=0.01)
    ep = Endpoint("docqa", session=session, clock=clock, publisher=publisher)
    try:
        started = time.perf_counter()
        for i in range(10):
            assert "".join(ep.stream(f"q{i}")).startswith("[docqa-base]")
        elapsed = time.perf_counter() - started
        deadline = time.monotonic() + 5
        while slow.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert slow.calls == 1  # the thread is stuck in the first PutMetricData
        assert elapsed < 5.0  # a blocked CloudWatch would otherwise hold every request
        assert publisher.dropped >= 10 - 1 - 2  # one taken by the thread, two queued
    finally:
        slow.release.set()
        publisher.close()


def test_a_failing_put_metric_data_never_reaches_the_caller(
        deployed: FakeSageMaker, session: Any, clock: VirtualClock) -> None:
    failing = FailingCloudWatch()
    with Endpoint("docqa", session=session, clock=clock, publish_metrics=True,
                  cloudwatch_client=failing) as ep:
        assert "".join(ep.stream("still answered")).strip() == "[docqa-base] still answered"
    assert failing.calls == 1
    assert ep.publisher is not None and ep.publisher.failed_calls == 1


def test_publisher_and_publish_metrics_are_exclusive(fake: FakeSageMaker, session: Any,
                                                     cloudwatch: Any) -> None:
    with TtftPublisher(cloudwatch) as publisher, pytest.raises(ValueError, match="either"):
        Endpoint("docqa", session=session, publisher=publisher, publish_metrics=True)
