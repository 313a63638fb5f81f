"""Client-side TTFT and tokens/s as custom CloudWatch metrics (opt-in).

SageMaker publishes no time-to-first-token metric. The runtime client measures it while it
streams and hands each measurement to :meth:`TtftPublisher.record`, which only enqueues:
a background thread batches datums into ``PutMetricData`` calls. The request path never
waits on CloudWatch: when the bounded queue is full, records are dropped and counted.

>>> import boto3
>>> pub = TtftPublisher(boto3.client("cloudwatch", region_name="us-east-1"))  # doctest: +SKIP
>>> pub.record(0.42, 55.0, endpoint="docqa-qwen7b")  # doctest: +SKIP
>>> pub.close()  # flushes what is queued  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from lmikit.metric_catalog import CLIENT_NAMESPACE

logger = logging.getLogger(__name__)

MAX_DATUMS_PER_CALL = 1000
"""PutMetricData accepts at most 1000 metrics per request (botocore cloudwatch model docs)."""
TTFT_METRIC = "TimeToFirstToken"
TPS_METRIC = "OutputTokensPerSecond"
_STOP = object()


@dataclass(frozen=True)
class _Flush:
    done: threading.Event


@dataclass(frozen=True)
class _Record:
    ttft_s: float
    tokens_per_s: float | None
    endpoint: str
    adapter: str | None
    timestamp: datetime


def _finite(x: float | None) -> bool:
    return x is not None and x == x and abs(x) != float("inf")


def datums(rec: _Record) -> list[dict[str, Any]]:
    """The PutMetricData datums of one record: per endpoint, and per adapter if any."""
    dim_sets = [[{"Name": "EndpointName", "Value": rec.endpoint}]]
    if rec.adapter:
        dim_sets.append([{"Name": "EndpointName", "Value": rec.endpoint},
                         {"Name": "AdapterName", "Value": rec.adapter}])
    out = []
    for dims in dim_sets:
        out.append({"MetricName": TTFT_METRIC, "Dimensions": dims, "Timestamp": rec.timestamp,
                    "Value": rec.ttft_s, "Unit": "Seconds"})
        if _finite(rec.tokens_per_s):
            out.append({"MetricName": TPS_METRIC, "Dimensions": dims,
                        "Timestamp": rec.timestamp, "Value": rec.tokens_per_s,
                        "Unit": "Count/Second"})
    return out


class TtftPublisher:
    """Batches client TTFT and tokens/s into PutMetricData calls on a daemon thread.

    ``cloudwatch_client``: an injected boto3 CloudWatch client (retries are botocore's).
    ``max_queue`` (default 10000): records held before new ones are dropped.
    ``flush_interval_s`` (default 10): longest a record waits before it is sent.
    ``batch_size`` (default 1000): datums per PutMetricData call, at most 1000.
    """

    def __init__(self, cloudwatch_client: Any, *, namespace: str = CLIENT_NAMESPACE,
                 max_queue: int = 10_000, flush_interval_s: float = 10.0,
                 batch_size: int = MAX_DATUMS_PER_CALL) -> None:
        if not 1 <= batch_size <= MAX_DATUMS_PER_CALL:
            raise ValueError(f"batch_size must be 1..{MAX_DATUMS_PER_CALL} (got {batch_size})")
        if max_queue < 1 or flush_interval_s <= 0:
            raise ValueError("max_queue must be >= 1 and flush_interval_s > 0")
        self._client = cloudwatch_client
        self._namespace = namespace
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._interval = flush_interval_s
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self.dropped = 0
        self.failed_calls = 0
        self.sent_datums = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="lmikit-ttft-publisher",
                                        daemon=True)
        self._thread.start()

    def record(self, ttft_s: float, tokens_per_s: float | None, endpoint: str,
               adapter: str | None = None) -> bool:
        """Queue one measurement; never blocks. Returns False if it was dropped."""
        if self._closed or not _finite(ttft_s) or ttft_s < 0 or not endpoint:
            with self._lock:
                self.dropped += 1
            return False
        rec = _Record(float(ttft_s), None if tokens_per_s is None else float(tokens_per_s),
                      endpoint, adapter, datetime.now(timezone.utc))
        try:
            self._queue.put_nowait(rec)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            return False
        return True

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Send what is queued now, keep running. True if it was sent within the timeout."""
        if self._closed:
            return True
        deadline = time.monotonic() + timeout_s
        marker = _Flush(threading.Event())
        try:
            self._queue.put(marker, timeout=timeout_s)
        except queue.Full:
            return False
        return marker.done.wait(max(0.0, deadline - time.monotonic()))

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop accepting records, send what is queued, and join the thread."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        while True:  # the stop marker must get in even if the queue is full
            try:
                self._queue.put(_STOP, timeout=0.05)
                break
            except queue.Full:
                if time.monotonic() > deadline:
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> TtftPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        pending: list[dict[str, Any]] = []
        next_flush = time.monotonic() + self._interval
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, next_flush - time.monotonic()))
            except queue.Empty:
                item = None
            if item is _STOP:
                self._send(pending)
                return
            if isinstance(item, _Flush):
                pending = self._send(pending)
                item.done.set()
                continue
            if item is not None:
                pending += datums(item)
            if len(pending) >= self._batch_size or time.monotonic() >= next_flush:
                pending = self._send(pending, full_batches_only=time.monotonic() < next_flush)
                if time.monotonic() >= next_flush:
                    next_flush = time.monotonic() + self._interval

    def _send(self, pending: list[dict[str, Any]], *,
              full_batches_only: bool = False) -> list[dict[str, Any]]:
        while pending and (len(pending) >= self._batch_size or not full_batches_only):
            batch, pending = pending[:self._batch_size], pending[self._batch_size:]
            try:
                self._client.put_metric_data(Namespace=self._namespace, MetricData=batch)
                self.sent_datums += len(batch)
            except Exception:  # noqa: BLE001 - metrics must never break the caller
                self.failed_calls += 1
                logger.warning("PutMetricData of %d datums failed; dropped", len(batch),
                               exc_info=True)
        return pending
