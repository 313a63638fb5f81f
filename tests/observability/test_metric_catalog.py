"""Every metric a dashboard or alarm names exists in the catalog (and the exposition)."""

from __future__ import annotations

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lmikit import metric_catalog as mc
from lmikit.render._alarms import alarm_definitions
from lmikit.render._cloudwatch import dashboard_body, referenced_metrics
from lmikit.render._grafana import grafana_dashboard
from lmikit.render._promql import series_in


def _grafana_exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]


def _grafana_cloudwatch(dashboard: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(t["namespace"], t["metricName"], tuple(t["dimensions"]))
            for p in dashboard["panels"] for t in p.get("targets", []) if "namespace" in t]


def test_cloudwatch_dashboard_metrics_exist_in_catalog(example) -> None:
    spec, plan = example
    refs = referenced_metrics(dashboard_body(spec, plan, image="lmikit"))
    assert refs
    missing = [r for r in refs if mc.find_classic(*r) is None]
    assert not missing


def test_grafana_cloudwatch_targets_exist_in_catalog(example) -> None:
    spec, plan = example
    refs = _grafana_cloudwatch(grafana_dashboard(spec, plan, image="lmikit"))
    assert refs
    assert not [r for r in refs if mc.find_classic(*r) is None]


def test_alarm_metrics_exist_in_catalog(example) -> None:
    spec, plan = example
    for alarm in alarm_definitions(spec, plan, image="lmikit"):
        req = alarm.request()
        stats = [m["MetricStat"]["Metric"] for m in req.get("Metrics", []) if "MetricStat" in m]
        if "MetricName" in req:
            stats.append(req)
        for m in stats:
            dims = tuple(d["Name"] for d in m["Dimensions"])
            assert mc.find_classic(m["Namespace"], m["MetricName"], dims), m


def test_promql_series_exist_in_container_catalog(example) -> None:
    spec, plan = example
    exprs = _grafana_exprs(grafana_dashboard(spec, plan, image="lmikit"))
    exprs += [a.promql_query for a in alarm_definitions(spec, plan, image="lmikit")
              if a.promql_query]
    body = dashboard_body(spec, plan, image="lmikit")
    exprs += [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    used = set().union(*(series_in(e) for e in exprs))
    assert used
    assert used <= mc.container_promql_names()


def test_container_catalog_names_match_a_prometheus_client_exposition() -> None:
    """The _total/_bucket spellings are prometheus_client's, as LMCache and vLLM use it."""
    registry = prometheus_client.CollectorRegistry()
    kinds = {"counter": prometheus_client.Counter, "gauge": prometheus_client.Gauge,
             "histogram": prometheus_client.Histogram}
    for metric in mc.CONTAINER_METRICS:
        m = kinds[metric.kind](metric.name, metric.description, registry=registry)
        if metric.kind == "histogram":
            m.observe(1.0)
        elif metric.kind == "counter":
            m.inc()
        else:
            m.set(1.0)
    text = prometheus_client.generate_latest(registry).decode()
    exposed = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert mc.container_exposition_names() <= exposed


def test_catalog_has_reference_namespaces() -> None:
    namespaces = {m.namespace for m in mc.CLASSIC_METRICS}
    assert namespaces == {mc.NS_SAGEMAKER, mc.NS_INFERENCE_COMPONENTS, mc.NS_ENDPOINTS,
                          mc.CLIENT_NAMESPACE, mc.CONTAINER_NAMESPACE}


def test_container_emf_metrics_are_classic_metrics_with_their_dimension_set() -> None:
    assert mc.CONTAINER_DIMENSIONS == ("EndpointName", "InferenceComponentName")
    for metric in mc.CONTAINER_EMF_METRICS:
        found = mc.find_classic(mc.CONTAINER_NAMESPACE, metric.name, mc.CONTAINER_DIMENSIONS)
        assert found is not None and found.unit == metric.unit, metric.name
        assert mc.find_classic(mc.CONTAINER_NAMESPACE, metric.name, ("EndpointName",)) is None


def test_container_emf_metrics_read_catalogued_series_with_cloudwatch_units() -> None:
    from ._service_model import service_model

    units = set(service_model("cloudwatch").shape_for("StandardUnit").enum)
    sources = {m.name: m.kind for m in mc.CONTAINER_METRICS}
    kinds = {"counter": "counter", "histogram_count": "histogram", "histogram_mean": "histogram",
             "histogram_quantile": "histogram", "gauge": "gauge"}
    names = [m.name for m in mc.CONTAINER_EMF_METRICS]
    assert len(names) == len(set(names)) <= 100  # one EMF directive holds at most 100
    for metric in mc.CONTAINER_EMF_METRICS:
        assert metric.unit in units, metric.name
        if metric.kind == "ratio":
            assert metric.denominator in names and set(metric.numerator) <= set(names)
        else:
            assert sources.get(metric.source) == kinds[metric.kind], metric.name


def test_container_table_is_the_one_the_image_carries() -> None:
    """The Dockerfile copies the SDK's own table file: one source of truth."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "container" / "Dockerfile").read_text()
    assert f"COPY sdk/lmikit/{mc.EMF_TABLE_FILE} /opt/lmikit/lmikit/{mc.EMF_TABLE_FILE}" in (
        dockerfile)


@pytest.mark.parametrize(("name", "want"), [
    ("lmcache:num_hit_tokens_total", "lmcache_num_hit_tokens_total"),
    ("vllm:time_to_first_token_seconds_bucket", "vllm_time_to_first_token_seconds_bucket"),
    ("plain_name", "plain_name"),
])
def test_promql_name_replaces_colons(name: str, want: str) -> None:
    assert mc.promql_name(name) == want


def test_find_classic_rejects_unpublished_dimensions() -> None:
    assert mc.find_classic(mc.NS_SAGEMAKER, "NoCapacityInvocationFailures",
                           ("EndpointName", "VariantName")) is None
