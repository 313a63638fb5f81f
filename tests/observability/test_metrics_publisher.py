"""TtftPublisher: batched, non-blocking, drops when full, flushes on close."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from lmikit.client._metrics import MAX_DATUMS_PER_CALL, TtftPublisher
from lmikit.metric_catalog import CLIENT_NAMESPACE, find_classic

from ._service_model import problems


class RecordingClient:
    """A CloudWatch client double that records calls and can be made to block or fail."""

    def __init__(self, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.gate = gate
        self.fail = fail

    def put_metric_data(self, **kwargs: Any) -> dict[str, Any]:
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            raise RuntimeError("boom")
        self.calls.append(kwargs)
        return {}


def test_publisher_sends_to_moto_cloudwatch(cloudwatch) -> None:
    with TtftPublisher(cloudwatch, flush_interval_s=0.05) as pub:
        assert pub.record(0.25, 80.0, endpoint="docqa", adapter="legal")
        assert pub.record(0.30, None, endpoint="docqa")
    names = {(m["MetricName"], tuple(d["Name"] for d in m["Dimensions"]))
             for m in cloudwatch.list_metrics(Namespace=CLIENT_NAMESPACE)["Metrics"]}
    assert ("TimeToFirstToken", ("EndpointName",)) in names
    assert ("TimeToFirstToken", ("EndpointName", "AdapterName")) in names
    assert ("OutputTokensPerSecond", ("EndpointName", "AdapterName")) in names
    for metric, dims in names:
        assert find_classic(CLIENT_NAMESPACE, metric, dims)
    now = datetime.now(timezone.utc)
    stats = cloudwatch.get_metric_statistics(
        Namespace=CLIENT_NAMESPACE, MetricName="TimeToFirstToken",
        Dimensions=[{"Name": "EndpointName", "Value": "docqa"},
                    {"Name": "AdapterName", "Value": "legal"}],
        StartTime=now - timedelta(minutes=5), EndTime=now + timedelta(minutes=1),
        Period=60, Statistics=["SampleCount", "Maximum"])
    assert sum(p["SampleCount"] for p in stats["Datapoints"]) == 1
    assert max(p["Maximum"] for p in stats["Datapoints"]) == 0.25


def test_publisher_batches_at_most_max_datums_per_call() -> None:
    client = RecordingClient()
    pub = TtftPublisher(client, flush_interval_s=60, max_queue=5000)
    for _ in range(1200):  # 2 datums each -> 2400 datums
        pub.record(0.1, 10.0, endpoint="e")
    pub.close()
    sizes = [len(c["MetricData"]) for c in client.calls]
    assert sum(sizes) == 2400
    assert max(sizes) <= MAX_DATUMS_PER_CALL
    assert pub.sent_datums == 2400


def test_publisher_requests_match_service_model() -> None:
    client = RecordingClient()
    with TtftPublisher(client, flush_interval_s=0.05) as pub:
        pub.record(0.1, 12.5, endpoint="docqa", adapter="legal")
    assert client.calls
    for call in client.calls:
        assert problems("cloudwatch", "PutMetricData", call) == []


def test_record_never_blocks_and_drops_when_queue_full() -> None:
    gate = threading.Event()
    client = RecordingClient(gate=gate)
    pub = TtftPublisher(client, flush_interval_s=0.01, max_queue=10, batch_size=1)
    start = time.monotonic()
    accepted = [pub.record(0.1, 1.0, endpoint="e") for _ in range(200)]
    assert time.monotonic() - start < 0.5
    assert accepted.count(False) > 0
    assert pub.dropped == accepted.count(False)
    gate.set()
    pub.close()


def test_close_flushes_pending_records() -> None:
    client = RecordingClient()
    pub = TtftPublisher(client, flush_interval_s=3600)
    pub.record(0.2, 5.0, endpoint="e")
    pub.close()
    assert sum(len(c["MetricData"]) for c in client.calls) == 2


def test_record_after_close_is_dropped() -> None:
    pub = TtftPublisher(RecordingClient(), flush_interval_s=0.05)
    pub.close()
    assert pub.record(0.1, 1.0, endpoint="e") is False
    assert pub.dropped == 1


@pytest.mark.parametrize("ttft", [float("nan"), float("inf"), -1.0])
def test_record_rejects_invalid_ttft(ttft: float) -> None:
    with TtftPublisher(RecordingClient(), flush_interval_s=0.05) as pub:
        assert pub.record(ttft, 1.0, endpoint="e") is False


def test_failed_put_is_counted_not_raised() -> None:
    client = RecordingClient(fail=True)
    with TtftPublisher(client, flush_interval_s=0.01) as pub:
        pub.record(0.1, 1.0, endpoint="e")
    assert pub.failed_calls >= 1


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": 1001},
                                    {"max_queue": 0}, {"flush_interval_s": 0}])
def test_publisher_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        TtftPublisher(RecordingClient(), **kwargs)
