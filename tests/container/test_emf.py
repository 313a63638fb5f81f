"""The EMF emitter, read from a real prometheus_client multiprocess registry.

Two long-lived worker processes (as with tensor parallelism) record metrics under the names
vLLM and LMCache use; between intervals the test drives them, then asks the emitter for its
line. Every line is validated against a JSON Schema written from AWS's EMF specification
("Specification: Embedded metric format", CloudWatch User Guide) plus the rules a schema
cannot express (every referenced member exists; dimension values are strings; values are
numbers).
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import botocore.session
import jsonschema
import pytest
from lmikit_runtime.emf import (
    EmfConfig,
    EmfConfigError,
    Emitter,
    bucket_quantile,
    check_table,
    load_table,
    parse_config,
    run,
)
from lmikit_runtime.metrics import multiprocess_registry

from lmikit import metric_catalog as mc

ROOT = Path(__file__).resolve().parents[2]
DIMS = {"EndpointName": "docqa", "InferenceComponentName": "docqa-base"}
UNITS = botocore.session.get_session().get_service_model("cloudwatch").shape_for(
    "StandardUnit").enum

# From the EMF specification: the root carries _aws (Timestamp: ms since the epoch,
# CloudWatchMetrics: MetricDirectives); a directive has Namespace, Dimensions (DimensionSets of
# at most 30 keys) and Metrics (at most 100 MetricDefinitions: Name, optional Unit from
# CloudWatch's units, optional StorageResolution 1 or 60). Objects the spec defines take no
# other members. Names follow CloudWatch's limits (namespace 1-255 not starting with ':',
# metric and dimension names 1-255).
EMF_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["_aws"],
    "properties": {"_aws": {
        "type": "object",
        "required": ["Timestamp", "CloudWatchMetrics"],
        "additionalProperties": False,
        "properties": {
            "Timestamp": {"type": "integer", "minimum": 0},
            "CloudWatchMetrics": {"type": "array", "items": {"$ref": "#/$defs/directive"}},
        },
    }},
    "$defs": {
        "directive": {
            "type": "object",
            "required": ["Namespace", "Dimensions", "Metrics"],
            "additionalProperties": False,
            "properties": {
                "Namespace": {"type": "string", "minLength": 1, "maxLength": 255,
                              "pattern": "^[^:]"},
                "Dimensions": {"type": "array", "items": {
                    "type": "array", "maxItems": 30, "uniqueItems": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": 255}}},
                "Metrics": {"type": "array", "maxItems": 100, "items": {
                    "type": "object", "required": ["Name"], "additionalProperties": False,
                    "properties": {
                        "Name": {"type": "string", "minLength": 1, "maxLength": 255},
                        "Unit": {"enum": UNITS},
                        "StorageResolution": {"enum": [1, 60]},
                    }}},
            },
        },
    },
}


def emf_problems(doc: dict[str, Any]) -> list[str]:
    """Schema errors plus the specification's reference rules."""
    out = [e.message for e in jsonschema.Draft202012Validator(EMF_SCHEMA).iter_errors(doc)]
    for directive in doc.get("_aws", {}).get("CloudWatchMetrics", []):
        for dim_set in directive["Dimensions"]:
            for key in dim_set:
                value = doc.get(key)
                if not isinstance(value, str) or not value.strip() or len(value) > 1024:
                    out.append(f"dimension {key}: target member must be a non-empty string")
        for metric in directive["Metrics"]:
            value = doc.get(metric["Name"])
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > 100 or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values):
                out.append(f"metric {metric['Name']}: target member must be a number")
    return out


WORKER = r"""
import sys
from prometheus_client import Counter, Gauge, Histogram
W = sys.argv[1]
hit = Counter("lmcache:num_hit_tokens", "", ["model_name", "worker_id"]).labels("q", W)
evict = Counter("lmcache:local_cpu_evict_count", "", ["model_name", "worker_id"])
gq = Counter("vllm:prefix_cache_queries", "", ["model_name"])
gh = Counter("vllm:prefix_cache_hits", "", ["model_name"])
eq = Counter("vllm:external_prefix_cache_queries", "", ["model_name"])
eh = Counter("vllm:external_prefix_cache_hits", "", ["model_name"])
usage = Gauge("lmcache:local_cache_usage", "", ["model_name", "worker_id"],
              multiprocess_mode="all")
kv = Gauge("vllm:kv_cache_usage_perc", "", ["model_name"], multiprocess_mode="all")
ttft = Histogram("vllm:time_to_first_token_seconds", "", ["model_name"],
                 buckets=(0.1, 0.5, 1.0, 2.0))
speed = Histogram("lmcache:retrieve_speed", "", ["model_name"], buckets=(1e3, 1e5, 1e7))
print("ok", flush=True)
for line in sys.stdin:
    exec(line)
    print("ok", flush=True)
"""


class Worker:
    """A process recording metrics into the multiprocess dir; ``do`` runs a line in it."""

    def __init__(self, directory: Path, worker_id: str) -> None:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(directory))
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, worker_id], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ok\n"

    def do(self, code: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(code + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n", code

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()


def _emitter(directory: Path, table: dict[str, Any] | None = None) -> Emitter:
    return Emitter(table or load_table(), EmfConfig("LMIKit/Container", dict(DIMS)),
                   multiprocess_registry(str(directory)).collect)


def _line(emitter: Emitter, ts: int) -> dict[str, Any] | None:
    out = io.StringIO()
    if not emitter.emit(out, timestamp_ms=ts):
        assert out.getvalue() == ""
        return None
    lines = out.getvalue().splitlines()
    assert len(lines) == 1  # ONE line per interval
    doc = json.loads(lines[0])
    assert emf_problems(doc) == [], doc
    return doc


def _values(doc: dict[str, Any]) -> dict[str, float]:
    names = [m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return {n: doc[n] for n in names}


def test_emitter_across_intervals_two_processes_and_a_restart(tmp_path: Path) -> None:
    directory = tmp_path / "prom"
    directory.mkdir()
    emitter = _emitter(directory)
    workers = [Worker(directory, "0"), Worker(directory, "1")]
    try:
        # Interval 1: both workers record.
        workers[0].do("eq.labels('q').inc(2000); hit.inc(800); gq.labels('q').inc(2000); "
                      "gh.labels('q').inc(1000); eh.labels('q').inc(600); usage.labels('q', W)"
                      ".set(1e9); kv.labels('q').set(0.5); "
                      "[ttft.labels('q').observe(v) for v in (0.05, 0.05, 0.3, 0.3, 0.7)]")
        workers[1].do("hit.inc(200); evict.labels('q', W).inc(3); "
                      "usage.labels('q', W).set(2e9); kv.labels('q').set(0.3); "
                      "speed.labels('q'); "
                      "[ttft.labels('q').observe(v) for v in (0.05, 0.05, 0.3, 0.3, 0.7)]")
        doc = _line(emitter, 1_700_000_060_000)
        assert doc is not None
        aws = doc["_aws"]
        assert aws["Timestamp"] == 1_700_000_060_000
        (directive,) = aws["CloudWatchMetrics"]
        assert directive["Namespace"] == "LMIKit/Container"
        assert directive["Dimensions"] == [["EndpointName", "InferenceComponentName"]]
        assert {k: doc[k] for k in DIMS} == DIMS
        units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
        assert units["TimeToFirstTokenP90"] == "Seconds"
        assert units["ExternalPrefixCacheHitRate"] == "None"
        v = _values(doc)
        assert v == pytest.approx({
            "ExternalPrefixCacheQueryTokens": 2000, "LMCacheHitTokens": 1000,
            "ExternalPrefixCacheHitRate": 0.3,
            "LMCacheCpuEvictions": 3, "GpuPrefixCacheQueryTokens": 2000,
            "GpuPrefixCacheHitTokens": 1000, "ExternalPrefixCacheHitTokens": 600,
            "GpuPrefixCacheHitRate": 0.5, "PrefixCacheHitRate": 0.8,
            "LMCacheCpuUsageBytes": 3e9,  # per-worker gauges summed: the copy's CPU tier
            "GpuKvCacheUsage": 0.4,  # averaged
            # 10 TTFTs: 4 <= 0.1 s, 4 in (0.1, 0.5], 2 in (0.5, 1.0]
            "TimeToFirstTokenCount": 10, "TimeToFirstTokenP50": 0.2,
            "TimeToFirstTokenP90": 0.75, "TimeToFirstTokenP99": 0.975,
        })
        # Series that do not exist, and a histogram without observations, are left out.
        assert "PromptTokens" not in v and "LMCacheDiskUsageBytes" not in v
        assert "LMCacheRetrieveSpeedMean" not in v

        # Interval 2: deltas only; no GPU-prefix lookups, so its ratios are left out.
        workers[0].do("eq.labels('q').inc(1000); hit.inc(50); "
                      "usage.labels('q', W).set(1.5e9); ttft.labels('q').observe(1.5)")
        workers[1].do("hit.inc(50); ttft.labels('q').observe(1.5)")
        v = _values(_line(emitter, 1_700_000_120_000) or {})
        assert v == pytest.approx({
            "ExternalPrefixCacheQueryTokens": 1000, "LMCacheHitTokens": 100,
            "ExternalPrefixCacheHitRate": 0,
            "LMCacheCpuEvictions": 0, "GpuPrefixCacheQueryTokens": 0,
            "GpuPrefixCacheHitTokens": 0, "ExternalPrefixCacheHitTokens": 0,
            "LMCacheCpuUsageBytes": 3.5e9, "GpuKvCacheUsage": 0.4,
            "TimeToFirstTokenCount": 2, "TimeToFirstTokenP50": 1.5,
            "TimeToFirstTokenP90": 1.9, "TimeToFirstTokenP99": 1.99,
        })

        # Interval 3: nothing happened. Counters 0, ratios and quantiles out, gauges current.
        v = _values(_line(emitter, 1_700_000_180_000) or {})
        assert v["ExternalPrefixCacheQueryTokens"] == 0 and v["TimeToFirstTokenCount"] == 0
        assert not {"ExternalPrefixCacheHitRate", "PrefixCacheHitRate",
                    "TimeToFirstTokenP50"} & set(v)
        assert v["LMCacheCpuUsageBytes"] == pytest.approx(3.5e9)

        # Interval 4: the server restarted (new processes, the directory emptied): the
        # counters went down, and their increase is their new value.
        for w in workers:
            w.stop()
        for f in directory.iterdir():
            f.unlink()
        workers = [Worker(directory, "0"), Worker(directory, "1")]
        workers[0].do("eq.labels('q').inc(200)")
        for w in workers:
            w.do("hit.inc(100)")
        v = _values(_line(emitter, 1_700_000_240_000) or {})
        assert v == {"ExternalPrefixCacheQueryTokens": 200, "LMCacheHitTokens": 200}
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.stop()


def test_emitter_without_any_series_writes_nothing(tmp_path: Path) -> None:
    assert _line(_emitter(tmp_path), 1) is None


def _family(*samples: tuple[Any, ...]) -> SimpleNamespace:
    """A metric family as registry.collect() yields it (samples index as name, labels,
    value, like prometheus_client's Sample namedtuple)."""
    return SimpleNamespace(samples=list(samples))


class FakeCollect:
    """collect() returning prepared families, one list per call."""

    def __init__(self, *rounds: list[Any]) -> None:
        self.rounds = list(rounds)

    def __call__(self) -> list[Any]:
        item = self.rounds.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def _fake(*rounds: Any) -> Emitter:
    return Emitter(load_table(), EmfConfig("LMIKit/Container", dict(DIMS)), FakeCollect(*rounds))


def test_counter_and_histogram_resets_per_series() -> None:
    b = "vllm:time_to_first_token_seconds_bucket"
    one = [_family(("vllm:external_prefix_cache_queries_total", {"w": "0"}, 3000.0),
                   ("vllm:external_prefix_cache_queries_total", {"w": "1"}, 500.0)),
           _family((b, {"le": "1.0"}, 8.0), (b, {"le": "+Inf"}, 10.0))]
    two = [_family(("vllm:external_prefix_cache_queries_total", {"w": "0"}, 150.0),  # restarted
                   ("vllm:external_prefix_cache_queries_total", {"w": "1"}, 700.0)),
           _family((b, {"le": "1.0"}, 1.0), (b, {"le": "+Inf"}, 2.0))]  # restarted
    emitter = _fake(one, two)
    assert emitter.values()["ExternalPrefixCacheQueryTokens"] == 3500
    second = emitter.values()
    assert second["ExternalPrefixCacheQueryTokens"] == 150 + 200
    # the restarted histogram counts its new buckets: 1 of 2 below 1.0 s -> p50 at 1.0
    assert second["TimeToFirstTokenP50"] == pytest.approx(1.0)


def test_bad_samples_and_failed_collections_never_stop_the_emitter(caplog) -> None:
    good = ("vllm:external_prefix_cache_queries_total", {}, 10.0)
    rounds = [
        [_family(good, ("lmcache:num_hit_tokens_total", {}, float("nan")),
                 ("vllm:kv_cache_usage_perc", {}, "garbage"), ("broken",),
                 ("vllm:time_to_first_token_seconds_bucket", {"le": "x"}, 1.0))],
        OSError("mmap file truncated"),
        [_family(("vllm:external_prefix_cache_queries_total", {}, 25.0),
                 ("vllm:num_requests_waiting", {}, float("inf")))],
    ]
    emitter = _fake(*rounds)
    out = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="lmikit.emf"):
        assert emitter.emit(out, timestamp_ms=1)
        assert not emitter.emit(out, timestamp_ms=2)
        assert emitter.emit(out, timestamp_ms=3)
    first, third = (json.loads(line) for line in out.getvalue().splitlines())
    assert _values(first) == {"ExternalPrefixCacheQueryTokens": 10}
    assert _values(third) == {"ExternalPrefixCacheQueryTokens": 15}  # inf gauge dropped
    assert "skipped 3 unusable sample(s)" in caplog.text
    assert "without a usable le label" in caplog.text
    assert "EMF line skipped this interval: OSError: mmap file truncated" in caplog.text


@pytest.mark.parametrize(("q", "buckets", "want"), [
    (0.5, [(0.1, 4), (0.5, 8), (1.0, 10), (math.inf, 10)], 0.2),
    (0.9, [(0.1, 4), (0.5, 8), (1.0, 10), (math.inf, 10)], 0.75),
    (0.5, [(1.0, 0), (2.0, 2), (math.inf, 2)], 1.5),
    (0.99, [(1.0, 0), (2.0, 2), (math.inf, 4)], 2.0),  # rank in +Inf: top finite bound
    (0.5, [(-1.0, 3), (0.0, 4), (math.inf, 4)], -1.0),  # first bound <= 0: returned as is
    (0.5, [(0.1, 0), (math.inf, 0)], math.nan),  # no observations
    (0.5, [(0.1, 1), (1.0, 2)], math.nan),  # no +Inf bucket
    (0.5, [(0.1, 3), (0.5, 2), (math.inf, 4)], 0.2 / 3),  # non-monotonic made monotonic
])
def test_bucket_quantile_matches_promql(q: float, buckets: list, want: float) -> None:
    got = bucket_quantile(q, buckets)
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)


def test_line_stays_under_pipe_buf_with_every_metric() -> None:
    """A write of at most PIPE_BUF (4096) bytes to a pipe is atomic: with every metric present
    and the longest names SageMaker allows, the line does not interleave with other logs."""
    samples = []
    for m in load_table()["metrics"]:
        if m["kind"] == "counter":
            samples.append((m["source"] + "_total", {}, 123456789.0))
        elif m["kind"] == "gauge":
            samples.append((m["source"], {}, 0.123456789))
        elif m["kind"] in ("histogram_quantile", "histogram_count", "histogram_mean"):
            samples += [(m["source"] + "_count", {}, 1234567.0),
                        (m["source"] + "_sum", {}, 123456789.123),
                        (m["source"] + "_bucket", {"le": "0.123"}, 7.0),
                        (m["source"] + "_bucket", {"le": "+Inf"}, 1234567.0)]
    dims = {"EndpointName": "e" * 63, "InferenceComponentName": "c" * 63}
    emitter = Emitter(load_table(), EmfConfig("LMIKit/Container", dims),
                      FakeCollect([_family(*samples)]))
    out = io.StringIO()
    assert emitter.emit(out, timestamp_ms=1_700_000_000_000)
    doc = json.loads(out.getvalue())
    assert len(_values(doc)) == len(load_table()["metrics"])
    assert emf_problems(doc) == []
    assert len(out.getvalue().encode()) <= 4096


# LMCache 0.5.6 PrometheusLogger (lmcache/observability.py, retrieve_speed_buckets): the
# buckets of lmcache:retrieve_speed, in tokens/s per retrieve.
LMCACHE_RETRIEVE_SPEED_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                  16384, 32768, 65536)


def test_retrieve_speed_is_a_mean_because_its_buckets_end_below_real_speeds() -> None:
    """A CPU-tier retrieve moves hundreds of thousands of tokens/s (16,000 tokens in 0.16 s
    is 100,000), past LMCache's top finite bucket: every observation lands in +Inf and a
    quantile reads 65,536 (PromQL's rule, and bucket_quantile's). The mean, from the
    interval's _sum / _count, follows the real speed."""
    from prometheus_client import CollectorRegistry, Histogram

    registry = CollectorRegistry()
    speed = Histogram("lmcache:retrieve_speed", "", ["model_name", "worker_id"],
                      buckets=LMCACHE_RETRIEVE_SPEED_BUCKETS, registry=registry)
    emitter = Emitter(load_table(), EmfConfig("LMIKit/Container", dict(DIMS)),
                      registry.collect)
    emitter.values()
    for worker, value in (("0", 250_000.0), ("1", 350_000.0), ("0", 300_000.0)):
        speed.labels("q", worker).observe(value)
    values = emitter.values()
    assert values["LMCacheRetrieveSpeedMean"] == pytest.approx(300_000.0)
    buckets = [(float(le), 0.0) for le in LMCACHE_RETRIEVE_SPEED_BUCKETS] + [(math.inf, 3.0)]
    assert bucket_quantile(0.5, buckets) == 65_536  # what a p50 would have published
    assert not [m for m in load_table()["metrics"]
                if m.get("source") == "lmcache:retrieve_speed"
                and m["kind"] == "histogram_quantile"]
    assert "LMCacheRetrieveSpeedMean" not in emitter.values()  # no retrieve: left out


def test_table_is_the_sdk_catalog() -> None:
    table = load_table()
    assert table["namespace"] == mc.CONTAINER_NAMESPACE
    assert tuple(table["dimensions"]) == mc.CONTAINER_DIMENSIONS
    assert [m["name"] for m in table["metrics"]] == [m.name for m in mc.CONTAINER_EMF_METRICS]


@pytest.mark.parametrize(("change", "match"), [
    ({"metrics": [{"name": f"M{i}", "kind": "counter", "source": "x"} for i in range(101)]},
     "100 metrics"),
    ({"dimensions": [f"d{i}" for i in range(31)]}, "at most 30"),
    ({"metrics": [{"name": "A", "kind": "ratio", "numerator": ["B"], "denominator": "B"}]},
     "not a counter"),
    ({"metrics": [{"name": "A", "kind": "gauge", "source": "x", "aggregate": "median"}]},
     "aggregate"),
])
def test_table_checks(change: dict[str, Any], match: str) -> None:
    with pytest.raises(EmfConfigError, match=match):
        check_table({**load_table(), **change})


@pytest.mark.parametrize(("raw", "match"), [
    ("not json", "not JSON"),
    (json.dumps({"dimensions": {"EndpointName": "e"}}), "exactly"),
    (json.dumps({"dimensions": {**DIMS, "EndpointName": 7}}), "non-empty string"),
    (json.dumps({"dimensions": DIMS, "interval_s": 0}), "positive"),
    (json.dumps({"namespace": ":x", "dimensions": DIMS}), "namespace"),
])
def test_bad_config_is_refused(raw: str, match: str) -> None:
    with pytest.raises(EmfConfigError, match=match):
        parse_config(raw, load_table())


def test_run_emits_every_interval_until_stopped() -> None:
    stop = threading.Event()
    lines: list[str] = []

    class Stream(io.StringIO):
        def flush(self) -> None:
            lines.extend(self.getvalue().splitlines()[len(lines):])
            if len(lines) == 3:
                stop.set()

    emitter = _fake(*([[_family(("vllm:prompt_tokens_total", {}, float(i)))] for i in
                       range(1, 10)]))
    started = time.monotonic()
    run(emitter, 0.02, Stream(), stop=stop)
    assert [json.loads(x)["PromptTokens"] for x in lines] == [1, 1, 1]
    assert time.monotonic() - started >= 0.06


def test_module_prints_emf_lines_on_stdout(multiproc_dir: str) -> None:
    """``python -m lmikit_runtime.emf`` as the start step runs it (a short interval)."""
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=multiproc_dir,
               PYTHONPATH=os.pathsep.join([str(ROOT / "container"), str(ROOT / "sdk")]),
               LMIKIT_EMF=json.dumps({"dimensions": DIMS, "interval_s": 0.2}))
    proc = subprocess.Popen([sys.executable, "-m", "lmikit_runtime.emf"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert emf_problems(doc) == []
    # conftest's two workers: 2 x (4096 cpu + 1024 disk) hit tokens, 2 x 3 evictions
    assert _values(doc)["LMCacheHitTokens"] == 10240
    assert _values(doc)["LMCacheCpuEvictions"] == 6
    assert "every 0.2 s" in err


def test_module_without_config_exits_1(tmp_path: Path) -> None:
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path), LMIKIT_EMF="{",
               PYTHONPATH=os.pathsep.join([str(ROOT / "container"), str(ROOT / "sdk")]))
    run_ = subprocess.run([sys.executable, "-m", "lmikit_runtime.emf"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert run_.returncode == 1 and "LMIKIT_EMF is not JSON" in run_.stderr
