"""vLLM/LMCache metrics as CloudWatch Embedded Metric Format (EMF): one JSON log line per interval.

SageMaker's detailed observability publishes scraped Prometheus series for PromQL only, and a
classic CloudWatch dashboard cannot plot PromQL. CloudWatch Logs, however, extracts classic
metrics from any log event that is an EMF document, and SageMaker ships the container's log
to CloudWatch Logs. So this process, started by the start step when ``LMIKIT_EMF`` is set,
reads the same multiprocess registry as the metrics front (``metrics.multiprocess_registry``)
every ``interval_s`` seconds and prints one EMF line to its stdout (the container log):

- counters: the increase since the previous line, per series, summed over series; a series
  whose value went down restarted (a worker restarted), so its increase is its value, as in
  PromQL ``increase()``. A series not seen before counts from 0: the start step empties the
  multiprocess directory before LMI starts, so everything in it is from this container;
- gauges: the current value, aggregated over series (``sum``, ``max`` or ``avg``);
- histogram quantiles: from the interval's bucket increases (summed over series), with
  PromQL ``histogram_quantile``'s linear interpolation inside the bucket;
- histogram means: the interval's increase of ``_sum`` / increase of ``_count`` (summed over
  series), omitted without observations. A quantile cannot pass the top finite bucket, so a
  histogram whose buckets end below its usual values (LMCache's ``retrieve_speed`` ends at
  65,536 tokens/s) needs the mean;
- ratios: of this line's counter increases, omitted when the denominator is 0.

A metric whose series do not exist (yet) is left out, as is any value EMF cannot carry (NaN,
infinity). A bad sample or a failed collection is one log line on stderr, never an exit. The
metric list is ``lmikit/emf_metrics.json``, the file the SDK's ``lmikit.metric_catalog``
reads, so the dashboard and alarms name exactly what this emits.

Run: ``python3 -m lmikit_runtime.emf`` with ``PROMETHEUS_MULTIPROC_DIR`` and ``LMIKIT_EMF``
(the SDK renders it: ``{"namespace": ..., "dimensions": {...}, "interval_s": 60}``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from lmikit_runtime.metrics import multiprocess_registry

log = logging.getLogger("lmikit.emf")

TABLE_FILE = "emf_metrics.json"
DEFAULT_INTERVAL = 60.0
MAX_METRICS_PER_DIRECTIVE = 100  # EMF specification
MAX_DIMENSIONS_PER_SET = 30  # EMF specification
KINDS = frozenset({"counter", "histogram_count", "histogram_mean", "gauge",
                   "histogram_quantile", "ratio"})
AGGREGATES = frozenset({"sum", "max", "avg"})

Labels = tuple[tuple[str, str], ...]
Samples = dict[str, list[tuple[Labels, float]]]


class EmfConfigError(Exception):
    """``LMIKIT_EMF`` or the metric table is unusable: the emitter does not start."""


@dataclass(frozen=True)
class EmfConfig:
    namespace: str
    dimensions: dict[str, str]
    interval_s: float = DEFAULT_INTERVAL


def load_table(path: str | None = None) -> dict[str, Any]:
    """The metric table (``lmikit/emf_metrics.json``, or ``path``), checked."""
    try:
        if path:
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        else:
            table = json.loads(resources.files("lmikit").joinpath(TABLE_FILE)
                               .read_text(encoding="utf-8"))
    except (OSError, ValueError, ModuleNotFoundError) as exc:
        raise EmfConfigError(f"cannot read the EMF metric table {path or TABLE_FILE}: "
                             f"{exc}") from exc
    check_table(table)
    return table


def check_table(table: Mapping[str, Any]) -> None:
    metrics = table.get("metrics")
    dims = table.get("dimensions")
    if not isinstance(metrics, list) or not metrics:
        raise EmfConfigError("EMF metric table has no metrics")
    if len(metrics) > MAX_METRICS_PER_DIRECTIVE:
        raise EmfConfigError(f"EMF allows {MAX_METRICS_PER_DIRECTIVE} metrics per directive; "
                             f"the table has {len(metrics)}")
    if not isinstance(dims, list) or len(dims) > MAX_DIMENSIONS_PER_SET:
        raise EmfConfigError("EMF metric table: dimensions must list at most "
                             f"{MAX_DIMENSIONS_PER_SET} names")
    seen: dict[str, str] = {}
    for m in metrics:
        name, kind = m.get("name"), m.get("kind")
        if not isinstance(name, str) or not name or name in seen or name in dims:
            raise EmfConfigError(f"EMF metric table: bad or duplicate name {name!r}")
        if kind not in KINDS:
            raise EmfConfigError(f"EMF metric {name}: unknown kind {kind!r}")
        if kind == "gauge" and m.get("aggregate") not in AGGREGATES:
            raise EmfConfigError(f"EMF metric {name}: aggregate must be one of "
                                 f"{sorted(AGGREGATES)}")
        if kind == "histogram_quantile" and not 0 <= m.get("quantile", -1) <= 1:
            raise EmfConfigError(f"EMF metric {name}: quantile must be within 0..1")
        if kind == "ratio":
            for ref in [*m.get("numerator", []), m.get("denominator")]:
                if seen.get(ref) not in ("counter", "histogram_count"):
                    raise EmfConfigError(f"EMF metric {name}: {ref!r} is not a counter "
                                         "listed before it")
        elif not isinstance(m.get("source"), str):
            raise EmfConfigError(f"EMF metric {name}: no source series")
        seen[name] = kind


def parse_config(raw: str, table: Mapping[str, Any]) -> EmfConfig:
    """``LMIKIT_EMF`` checked against the table's dimension set."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise EmfConfigError(f"LMIKIT_EMF is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EmfConfigError("LMIKIT_EMF must be a JSON object")
    namespace = data.get("namespace", table["namespace"])
    if not isinstance(namespace, str) or not 0 < len(namespace) <= 255 or namespace[0] == ":":
        raise EmfConfigError(f"LMIKIT_EMF namespace {namespace!r} is not a CloudWatch namespace")
    dims = data.get("dimensions")
    want = list(table["dimensions"])
    if not isinstance(dims, dict) or sorted(dims) != sorted(want):
        raise EmfConfigError(f"LMIKIT_EMF dimensions must give exactly {want}")
    for key, value in dims.items():
        if not isinstance(value, str) or not value.strip() or len(value) > 1024:
            raise EmfConfigError(f"LMIKIT_EMF dimension {key}: a non-empty string of at most "
                                 "1024 characters")
    interval = data.get("interval_s", DEFAULT_INTERVAL)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        raise EmfConfigError(f"LMIKIT_EMF interval_s {interval!r} must be a positive number")
    return EmfConfig(namespace, {k: dims[k] for k in want}, float(interval))


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """PromQL ``histogram_quantile`` on (upper bound, cumulative count) pairs: NaN when
    there are no observations or no +Inf bucket; the top finite bound when the rank falls in
    the +Inf bucket; else linear interpolation inside the bucket (lower bound 0 for the
    first bucket when its upper bound is positive)."""
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    merged: dict[float, float] = {}
    for le, count in buckets:
        merged[le] = merged.get(le, 0.0) + count
    pairs = sorted(merged.items())
    if not pairs or not math.isinf(pairs[-1][0]) or len(pairs) < 2:
        return math.nan
    running = 0.0
    cumulative = []
    for le, count in pairs:  # counts read across processes may be a hair non-monotonic
        running = max(running, count)
        cumulative.append((le, running))
    total = cumulative[-1][1]
    if total <= 0:
        return math.nan
    rank = q * total
    b = next(i for i, (_, c) in enumerate(cumulative) if c >= rank or i == len(cumulative) - 1)
    if b == len(cumulative) - 1:
        return cumulative[-2][0]
    if b == 0 and cumulative[0][0] <= 0:
        return cumulative[0][0]
    start, end, count = 0.0, cumulative[b][0], cumulative[b][1]
    if b > 0:
        start = cumulative[b - 1][0]
        count -= cumulative[b - 1][1]
        rank -= cumulative[b - 1][1]
    return start + (end - start) * (rank / count) if count > 0 else end


def _finite(value: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _le(labels: Labels) -> float:
    return float(dict(labels)["le"])


class Emitter:
    """Turns successive collections into EMF documents (state: the previous values)."""

    def __init__(self, table: Mapping[str, Any], config: EmfConfig,
                 collect: Callable[[], Iterable[Any]]) -> None:
        self.table = table
        self.config = config
        self.collect = collect
        self._prev: dict[tuple[str, Labels], float] = {}
        self._prev_buckets: dict[tuple[str, Labels], dict[float, float]] = {}

    # --- reading -------------------------------------------------------------------------
    def _samples(self) -> Samples:
        """Sample name -> [(labels, value)] of one collection; bad samples skipped (logged)."""
        out: Samples = {}
        bad: list[str] = []
        for family in self.collect():
            for sample in getattr(family, "samples", ()):
                try:
                    name, labels, value = sample[0], sample[1], float(sample[2])
                    key: Labels = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
                except (TypeError, ValueError, IndexError, AttributeError):
                    bad.append(repr(sample)[:80])
                    continue
                if not math.isfinite(value):
                    bad.append(f"{name}={value}")
                    continue
                out.setdefault(name, []).append((key, value))
        if bad:
            log.warning("skipped %d unusable sample(s): %s", len(bad), ", ".join(bad[:5]))
        return out

    # --- per-kind values -----------------------------------------------------------------
    def _increase(self, samples: Samples, name: str) -> float | None:
        series = samples.get(name)
        if not series:
            return None
        total = 0.0
        for labels, value in series:
            prev = self._prev.get((name, labels), 0.0)
            total += value - prev if value >= prev else value  # went down: it restarted
            self._prev[(name, labels)] = value
        return total

    def _bucket_increase(self, samples: Samples, source: str) -> list[tuple[float, float]]:
        groups: dict[Labels, dict[float, float]] = {}
        for labels, value in samples.get(f"{source}_bucket", []):
            try:
                le = _le(labels)
            except (KeyError, ValueError):
                log.warning("skipped a %s_bucket sample without a usable le label", source)
                continue
            rest = tuple(kv for kv in labels if kv[0] != "le")
            groups.setdefault(rest, {})[le] = value
        total: dict[float, float] = {}
        for rest, buckets in groups.items():
            prev = self._prev_buckets.get((source, rest), {})
            restarted = any(v < prev.get(le, 0.0) for le, v in buckets.items())
            for le, v in buckets.items():
                total[le] = total.get(le, 0.0) + (v if restarted else v - prev.get(le, 0.0))
            self._prev_buckets[(source, rest)] = buckets
        return sorted(total.items())

    @staticmethod
    def _gauge(samples: Samples, source: str, aggregate: str) -> float | None:
        values = [v for _, v in samples.get(source, [])]
        if not values:
            return None
        if aggregate == "max":
            return max(values)
        total = math.fsum(values)
        return total / len(values) if aggregate == "avg" else total

    def values(self) -> dict[str, float]:
        """This interval's value per EMF metric name (absent metrics left out)."""
        samples = self._samples()
        increases: dict[str, float | None] = {}
        buckets: dict[str, list[tuple[float, float]]] = {}
        out: dict[str, float] = {}
        for m in self.table["metrics"]:
            kind, name = m["kind"], m["name"]
            value: float | None = None
            if kind in ("counter", "histogram_count"):
                series = m["source"] + ("_total" if kind == "counter" else "_count")
                if series not in increases:
                    increases[series] = self._increase(samples, series)
                value = increases[series]
            elif kind == "histogram_mean":
                for series in (m["source"] + "_sum", m["source"] + "_count"):
                    if series not in increases:
                        increases[series] = self._increase(samples, series)
                total, count = increases[m["source"] + "_sum"], increases[m["source"] + "_count"]
                if total is not None and count:
                    value = total / count
            elif kind == "gauge":
                value = self._gauge(samples, m["source"], m["aggregate"])
            elif kind == "histogram_quantile":
                if m["source"] not in buckets:
                    buckets[m["source"]] = self._bucket_increase(samples, m["source"])
                value = bucket_quantile(m["quantile"], buckets[m["source"]])
            elif kind == "ratio":
                parts = [out.get(ref) for ref in m["numerator"]]
                denominator = out.get(m["denominator"])
                if denominator and all(p is not None for p in parts):
                    value = math.fsum(p for p in parts if p is not None) / denominator
            if value is not None and _finite(value):
                out[name] = value
        return out

    # --- the document --------------------------------------------------------------------
    def document(self, timestamp_ms: int) -> dict[str, Any] | None:
        """One EMF document for this interval, or None when nothing is there to publish."""
        values = self.values()
        if not values:
            return None
        units = {m["name"]: m["unit"] for m in self.table["metrics"]}
        doc: dict[str, Any] = {"_aws": {"Timestamp": timestamp_ms, "CloudWatchMetrics": [{
            "Namespace": self.config.namespace,
            "Dimensions": [list(self.config.dimensions)],
            "Metrics": [{"Name": n, "Unit": units[n]} for n in values],
        }]}}
        doc.update(self.config.dimensions)
        for name, value in values.items():
            doc[name] = int(value) if float(value).is_integer() and abs(value) < 2**53 else value
        return doc

    def emit(self, stream: TextIO, timestamp_ms: int | None = None) -> bool:
        """Write one line (if there is anything to publish); never raises."""
        try:
            doc = self.document(int(time.time() * 1000) if timestamp_ms is None
                                else timestamp_ms)
            if doc is None:
                return False
            stream.write(json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n")
            stream.flush()
            return True
        except Exception as exc:  # a bad mmap file or a closed pipe: log, keep going
            log.warning("EMF line skipped this interval: %s: %s", type(exc).__name__, exc)
            return False


def run(emitter: Emitter, interval_s: float, stream: TextIO, *,
        stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic) -> None:
    """Emit every ``interval_s`` (the first line one interval after start) until ``stop``."""
    stop = stop or threading.Event()
    deadline = clock() + interval_s
    while not stop.wait(max(0.0, deadline - clock())):
        emitter.emit(stream)
        deadline += interval_s
        now = clock()
        if deadline <= now:  # fell behind (a slow collection, a suspended host): skip ahead
            deadline = now + interval_s


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="lmikit-emf: %(message)s", stream=sys.stderr)
    multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not multiproc_dir:
        log.error("PROMETHEUS_MULTIPROC_DIR is not set; nothing to read")
        return 1
    try:
        table = load_table(os.environ.get("LMIKIT_EMF_TABLE"))
        config = parse_config(os.environ.get("LMIKIT_EMF", ""), table)
    except EmfConfigError as exc:
        log.error("%s", exc)
        return 1
    registry = multiprocess_registry(multiproc_dir)
    emitter = Emitter(table, config, registry.collect)
    log.info("every %g s: %d metric(s) of %s to %s as EMF (%s)", config.interval_s,
             len(table["metrics"]), multiproc_dir, config.namespace,
             ", ".join(f"{k}={v}" for k, v in config.dimensions.items()))
    try:
        run(emitter, config.interval_s, sys.stdout)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
