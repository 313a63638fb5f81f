"""Every metric an lmikit dashboard or alarm names, and where it lives.

Two stores, because SageMaker publishes to two:

* **Classic CloudWatch metrics** (namespace + dimensions; GetMetricData, metric math,
  PutMetricAlarm with MetricName or Metrics). :data:`CLASSIC_METRICS` lists them with the
  dimension sets they are published under, from REFERENCE §3 (AWS/SageMaker,
  /aws/sagemaker/InferenceComponents, /aws/sagemaker/Endpoints) plus lmikit's own
  client-side namespace :data:`CLIENT_NAMESPACE` (TTFT and tokens/s; SageMaker has no TTFT)
  and the container's own namespace :data:`CONTAINER_NAMESPACE`: the LMCache/vLLM series the
  container's emitter (``lmikit_runtime.emf``) turns into Embedded Metric Format log lines,
  which CloudWatch Logs extracts into classic metrics. :data:`CONTAINER_EMF_METRICS` lists
  them; the table itself is ``lmikit/emf_metrics.json``, the one file both this module and
  the container read.
* **Container metrics scraped by detailed observability.** SageMaker's managed OpenTelemetry
  collector scrapes the container's Prometheus endpoint and publishes the samples to
  CloudWatch *as OTLP metrics*, which are queried with PromQL (CloudWatch Query Studio,
  PromQL alarms, or the regional Prometheus-compatible endpoint
  ``https://monitoring.<region>.amazonaws.com`` with SigV4 service ``monitoring``). They have
  no classic namespace or dimensions. :data:`CONTAINER_SOURCE` is the one place that says
  how they are addressed; :data:`CONTAINER_METRICS` lists the LMCache and vLLM series the
  dashboards use (REFERENCE §6 names; counters carry ``_total``).

>>> find_classic("AWS/SageMaker", "ModelLatency", ("EndpointName", "VariantName")).unit
'Microseconds'
>>> promql_name("lmcache:num_hit_tokens_total")
'lmcache_num_hit_tokens_total'
>>> emf_metric("ExternalPrefixCacheHitRate").denominator
'ExternalPrefixCacheQueryTokens'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

NS_SAGEMAKER = "AWS/SageMaker"
NS_INFERENCE_COMPONENTS = "/aws/sagemaker/InferenceComponents"
NS_ENDPOINTS = "/aws/sagemaker/Endpoints"
CLIENT_NAMESPACE = "LMIKit/Client"
"""Custom namespace of the client-side metrics :class:`lmikit.client.TtftPublisher`
publishes (opt-in: ``observability.client_ttft_metrics``)."""

ENDPOINT_VARIANT = ("EndpointName", "VariantName")
COMPONENT = ("InferenceComponentName",)
CLIENT_ENDPOINT = ("EndpointName",)
CLIENT_ADAPTER = ("EndpointName", "AdapterName")


@dataclass(frozen=True)
class ClassicMetric:
    """A classic CloudWatch metric and the dimension sets it is published under."""

    namespace: str
    name: str
    dimension_sets: tuple[tuple[str, ...], ...]
    unit: str
    description: str


def _m(ns: str, name: str, dims: tuple[tuple[str, ...], ...], unit: str,
       description: str) -> ClassicMetric:
    return ClassicMetric(ns, name, dims, unit, description)


_INVOCATION_DIMS = (ENDPOINT_VARIANT, COMPONENT)

# --- Container metrics as Embedded Metric Format (lmikit_runtime.emf) ---------------------

EMF_TABLE_FILE = "emf_metrics.json"
EMF_CONFIG_ENV = "LMIKIT_EMF"
"""Container environment variable that turns the emitter on (JSON: namespace, dimensions,
interval_s; rendered by :func:`lmikit.render.lmi_environment`)."""
EmfKind = Literal["counter", "histogram_count", "histogram_mean", "gauge",
                  "histogram_quantile", "ratio"]


@dataclass(frozen=True)
class EmfMetric:
    """One metric of the container's EMF line (see ``emf_metrics.json`` for the kinds)."""

    name: str
    kind: EmfKind
    unit: str
    description: str
    source: str | None = None
    aggregate: str | None = None
    quantile: float | None = None
    numerator: tuple[str, ...] = ()
    denominator: str | None = None


def _load_emf_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(
        resources.files("lmikit").joinpath(EMF_TABLE_FILE).read_text(encoding="utf-8"))
    return table


_EMF = _load_emf_table()
CONTAINER_NAMESPACE: str = _EMF["namespace"]
"""Namespace of the container's EMF metrics (``LMIKit/Container``)."""
CONTAINER_DIMENSIONS: tuple[str, ...] = tuple(_EMF["dimensions"])
"""The one dimension set every container EMF metric is published under."""
CONTAINER_EMF_METRICS: tuple[EmfMetric, ...] = tuple(
    EmfMetric(name=m["name"], kind=m["kind"], unit=m["unit"], description=m["description"],
              source=m.get("source"), aggregate=m.get("aggregate"), quantile=m.get("quantile"),
              numerator=tuple(m.get("numerator", ())), denominator=m.get("denominator"))
    for m in _EMF["metrics"])


def emf_metric(name: str) -> EmfMetric:
    """The container EMF metric called ``name`` (KeyError if the table lacks it)."""
    for metric in CONTAINER_EMF_METRICS:
        if metric.name == name:
            return metric
    raise KeyError(name)


CLASSIC_METRICS: tuple[ClassicMetric, ...] = (
    # AWS/SageMaker invocation metrics: per endpoint+variant, or per inference component.
    _m(NS_SAGEMAKER, "Invocations", _INVOCATION_DIMS, "None", "InvokeEndpoint requests"),
    _m(NS_SAGEMAKER, "Invocation4XXErrors", _INVOCATION_DIMS, "None", "4xx responses"),
    _m(NS_SAGEMAKER, "Invocation5XXErrors", _INVOCATION_DIMS, "None", "5xx responses"),
    _m(NS_SAGEMAKER, "InvocationModelErrors", _INVOCATION_DIMS, "None",
       "requests the model answered with an error"),
    _m(NS_SAGEMAKER, "ModelLatency", _INVOCATION_DIMS, "Microseconds",
       "time the container took to respond (whole response, not first token)"),
    _m(NS_SAGEMAKER, "OverheadLatency", _INVOCATION_DIMS, "Microseconds",
       "SageMaker's own overhead around the container"),
    _m(NS_SAGEMAKER, "InvocationsPerCopy", (COMPONENT,), "None",
       "invocations divided by the component's copy count"),
    _m(NS_SAGEMAKER, "ConcurrentRequestsPerCopy", (COMPONENT,), "None",
       "requests in flight per model copy"),
    _m(NS_SAGEMAKER, "NoCapacityInvocationFailures", (COMPONENT,), "None",
       "requests rejected because no copy was running (scale to zero)"),
    # Inference-component utilization, normalized to the component's reserved resources.
    *(_m(NS_INFERENCE_COMPONENTS, n, (COMPONENT,), "Percent", d) for n, d in (
        ("CPUUtilizationNormalized", "CPU use of the component's cores"),
        ("MemoryUtilizationNormalized", "memory use of the component's reservation"),
        ("GPUUtilizationNormalized", "GPU use of the component's accelerators"),
        ("GPUMemoryUtilizationNormalized", "GPU memory use of the component's accelerators"),
    )),
    # Instance (host) utilization of the endpoint: the hosts the cache tiers live on.
    *(_m(NS_ENDPOINTS, n, (ENDPOINT_VARIANT,), "Percent", d) for n, d in (
        ("CPUUtilization", "host CPU, 100% per vCPU"),
        ("MemoryUtilization", "host RAM (the LMCache CPU tier lives here)"),
        ("DiskUtilization", "instance storage (the LMCache disk tier lives here)"),
        ("GPUUtilization", "GPUs, 100% per GPU"),
        ("GPUMemoryUtilization", "GPU memory, 100% per GPU"),
    )),
    # lmikit's client-side metrics (TtftPublisher).
    _m(CLIENT_NAMESPACE, "TimeToFirstToken", (CLIENT_ENDPOINT, CLIENT_ADAPTER), "Seconds",
       "client-measured time to first streamed token"),
    _m(CLIENT_NAMESPACE, "OutputTokensPerSecond", (CLIENT_ENDPOINT, CLIENT_ADAPTER),
       "Count/Second", "client-measured decode speed after the first token"),
    # The container's EMF metrics (lmikit_runtime.emf), one dimension set.
    *(_m(CONTAINER_NAMESPACE, m.name, (CONTAINER_DIMENSIONS,), m.unit, m.description)
      for m in CONTAINER_EMF_METRICS),
)


def find_classic(namespace: str, name: str,
                 dimensions: tuple[str, ...]) -> ClassicMetric | None:
    """The catalog entry for (namespace, name) if it is published with these dimensions."""
    want = tuple(sorted(dimensions))
    for metric in CLASSIC_METRICS:
        if metric.namespace == namespace and metric.name == name and any(
                tuple(sorted(ds)) == want for ds in metric.dimension_sets):
            return metric
    return None


# --- Container metrics (detailed observability) ------------------------------------------

@dataclass(frozen=True)
class ContainerSource:
    """How detailed observability exposes scraped container metrics. Defined once, here.

    Confirmed (AWS docs: SageMaker "detailed observability", "Connect to your observability
    tool", the OpenTelemetry metrics reference, and the botocore ``cloudwatch`` model's
    ``PutMetricAlarm.EvaluationCriteria.PromQLCriteria``):

    * samples are OTLP metrics in CloudWatch, queried with PromQL, not classic metrics;
    * the PromQL endpoint is ``https://monitoring.<region>.amazonaws.com`` (SigV4, service
      ``monitoring``; IAM cloudwatch:QueryMetrics/GetMetricData/ListMetrics);
    * resource labels are ``aws.sagemaker.endpoint.name``, ``aws.sagemaker.variant.name``,
      ``aws.sagemaker.inference_component.name`` (dotted names are single-quoted in PromQL).

    ASSUMPTION (not confirmed for LMCache's series): metric names are the Prometheus names
    with ``:`` replaced by ``_``, as in AWS's own example queries (``vllm_time_to_first_token_
    seconds_bucket``, ``vllm_kv_cache_usage_perc``); one AWS blog shows the colon form
    instead. If the deployed names keep colons, change :func:`promql_name` only.
    """

    endpoint_label: str = "aws.sagemaker.endpoint.name"
    component_label: str = "aws.sagemaker.inference_component.name"
    variant_label: str = "aws.sagemaker.variant.name"
    host_label: str = "@resource.host.id"
    promql_url: str = "https://monitoring.{region}.amazonaws.com"


CONTAINER_SOURCE = ContainerSource()


def promql_name(prometheus_name: str) -> str:
    """The name a scraped Prometheus series has in CloudWatch PromQL (see ContainerSource)."""
    return prometheus_name.replace(":", "_")


ContainerKind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class ContainerMetric:
    """A Prometheus series the container exposes (name as the exposition writes it)."""

    name: str
    kind: ContainerKind
    unit: str
    description: str

    @property
    def exposed_names(self) -> tuple[str, ...]:
        """Series names in the exposition: counters end in _total, histograms have parts."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}_{s}" for s in ("bucket", "sum", "count"))
        return (self.name,)


CONTAINER_METRICS: tuple[ContainerMetric, ...] = (
    # LMCache (v1 PrometheusLogger). Hits are not split by CPU/disk tier; remote reads are.
    ContainerMetric("lmcache:num_retrieve_requests", "counter", "requests",
                    "retrieve requests sent to LMCache"),
    ContainerMetric("lmcache:num_requested_tokens", "counter", "tokens",
                    "tokens LMCache's retrieve was asked for: only requests whose lookup "
                    "already found tokens retrieve, so misses never count here"),
    ContainerMetric("lmcache:num_hit_tokens", "counter", "tokens",
                    "tokens LMCache returned (CPU, disk and remote tiers together), counted "
                    "by every tensor-parallel rank"),
    ContainerMetric("lmcache:num_remote_read_bytes", "counter", "bytes",
                    "bytes read from the remote tier"),
    ContainerMetric("lmcache:retrieve_hit_rate", "gauge", "ratio",
                    "hit rate of retrieves since the last log interval"),
    ContainerMetric("lmcache:lookup_hit_rate", "gauge", "ratio",
                    "hit rate of lookups since the last log interval"),
    ContainerMetric("lmcache:local_cache_usage", "gauge", "bytes",
                    "bytes used in the CPU (host RAM) tier"),
    ContainerMetric("lmcache:local_storage_usage", "gauge", "bytes",
                    "bytes used in the local disk tier"),
    ContainerMetric("lmcache:local_cpu_evict_count", "counter", "evictions",
                    "evictions from the CPU tier"),
    ContainerMetric("lmcache:time_to_retrieve", "histogram", "seconds",
                    "time to retrieve KV from LMCache"),
    ContainerMetric("lmcache:retrieve_speed", "histogram", "tokens/s",
                    "retrieve speed"),
    # vLLM (v1 engine).
    ContainerMetric("vllm:prefix_cache_queries", "counter", "tokens",
                    "tokens looked up in the GPU prefix cache"),
    ContainerMetric("vllm:prefix_cache_hits", "counter", "tokens",
                    "tokens found in the GPU prefix cache"),
    ContainerMetric("vllm:external_prefix_cache_queries", "counter", "tokens",
                    "prompt tokens beyond the GPU prefix hit, looked up in the KV connector "
                    "(LMCache); counted once per request by the scheduler"),
    ContainerMetric("vllm:external_prefix_cache_hits", "counter", "tokens",
                    "tokens found by the KV connector (LMCache); counted once per request"),
    ContainerMetric("vllm:kv_cache_usage_perc", "gauge", "ratio",
                    "share of the GPU KV cache in use"),
    ContainerMetric("vllm:time_to_first_token_seconds", "histogram", "seconds",
                    "server-side time to first token"),
    ContainerMetric("vllm:prompt_tokens", "counter", "tokens", "prefill tokens processed"),
    ContainerMetric("vllm:generation_tokens", "counter", "tokens", "tokens generated"),
    ContainerMetric("vllm:num_requests_running", "gauge", "requests", "requests running"),
    ContainerMetric("vllm:num_requests_waiting", "gauge", "requests", "requests queued"),
)


def container_exposition_names() -> frozenset[str]:
    """Every series name the container exposes, in the scrape's own spelling."""
    return frozenset(n for m in CONTAINER_METRICS for n in m.exposed_names)


def container_promql_names() -> frozenset[str]:
    """Every series name as PromQL sees it in CloudWatch (see :func:`promql_name`)."""
    return frozenset(promql_name(n) for n in container_exposition_names())
