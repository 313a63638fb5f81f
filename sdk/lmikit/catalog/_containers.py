"""What each container image serves, and where: the facts the renderers build on.

Two images run the base model:

- ``stock``: AWS's LMI image (``djl-inference:<version>-lmi...``), unchanged. djl-serving
  listens on port 8080 for both its inference and management APIs (the image's
  ``/opt/djl/conf/config.properties``: ``inference_address`` and ``management_address`` are
  both ``http://0.0.0.0:8080``). Its only Prometheus endpoint is DJL's own
  ``GET /server/metrics`` (``ManagementRequestHandler`` -> ``PrometheusExporter`` ->
  ``MetricExporter.export``), which answers 400 unless ``SERVING_PROMETHEUS=true``. vLLM runs
  inside djl-serving's Python worker, so there is no vLLM ``/metrics`` endpoint.
- ``lmikit``: ``container/Dockerfile`` on top of the stock image. Its metrics front owns port
  8080, answers ``GET <LMIKIT_METRICS_PATH>`` with vLLM and LMCache metrics and passes every
  other request to djl-serving (see docs/container.md).

Sources: deepjavalibrary/djl-serving@master serving/docker/config.properties,
serving/src/main/java/ai/djl/serving/http/{ManagementRequestHandler,PrometheusExporter,
InferenceRequestHandler,AdapterManagementRequestHandler}.java,
prometheus/src/main/java/ai/djl/prometheus/MetricExporter.java.

>>> metrics_endpoint("/metrics", "stock").path
'/server/metrics'
>>> metrics_endpoint("/metrics", "lmikit").env
{'LMIKIT_METRICS_PATH': '/metrics'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

ImageKind = Literal["stock", "lmikit"]
IMAGE_KINDS: tuple[str, ...] = ("stock", "lmikit")
CONTAINER_PORT = 8080  # SageMaker sends /ping, /invocations and its metrics scrape here
MODEL_DIR = "/opt/ml/model"  # model_store in the image's config.properties
DJL_METRICS_PATH = "/server/metrics"
SCRAPE_DEFAULT_PATH = "/metrics"  # ContainerMetricsConfig's default path (botocore docs)
STOCK_REPOSITORY = "djl-inference"

# Paths djl-serving (and so the front, which forwards them) must answer itself:
# InferenceRequestHandler: /(ping|invocations|predictions|v1/chat/completions)([/?].*)?,
# /models/.+/invoke; ManagementRequestHandler: /models, /workflows, /server/.+;
# AdapterManagementRequestHandler: (/models/<name>)?/adapters; ClusterRequestHandler:
# /cluster/...; and SageMaker's container contract adds /execution-parameters (batch
# transform). Each reserves the path and everything under it.
RESERVED_PATHS: tuple[str, ...] = ("/ping", "/invocations", "/execution-parameters",
                                   "/predictions", "/v1/chat/completions", "/models",
                                   "/workflows", "/server", "/adapters", "/cluster")


def reserved_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be the metrics path, or None.

    >>> reserved_path_problem("/ping") is not None, reserved_path_problem("/metrics")
    (True, None)
    """
    clean = path.split("?", 1)[0].rstrip("/") or "/"
    if clean == "/":
        return "'/' would answer every request with metrics; use a path such as /metrics"
    for reserved in RESERVED_PATHS:
        if clean == reserved or clean.startswith(reserved + "/"):
            return (f"{reserved} is answered by LMI (djl-serving) or SageMaker itself (health "
                    "check, inference or management API), and the metrics front would hide "
                    "it; choose another path such as /metrics")
    return None


def lmikit_image_placeholder(base_image_uri: str) -> str:
    """What a render names for lmikit's image, which only ``cdk deploy`` gives a URI (it
    builds container/Dockerfile on the stock image as a CDK asset): a placeholder that says
    so, within the API's Image shape (botocore ContainerImage: no spaces, at most 255).

    >>> lmikit_image_placeholder("djl-inference:0.38.0-lmi29.0.0-cu130")
    '<lmikit-image-built-by-cdk-deploy-from-container/Dockerfile-FROM-djl-inference:0.38.0-lmi29.0.0-cu130>'
    """
    return f"<lmikit-image-built-by-cdk-deploy-from-container/Dockerfile-FROM-{base_image_uri}>"


def image_kind_of(image_uri: str) -> ImageKind:
    """``stock`` for an AWS LMI image (repository ``djl-inference``), else ``lmikit``.

    >>> image_kind_of("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29")
    'stock'
    """
    repo = image_uri.split("@", 1)[0]  # a digest reference: <repo>@sha256:<hex>
    if re.search(r":[\w.-]+$", repo.rsplit("/", 1)[-1]):
        repo = repo.rsplit(":", 1)[0]  # a tag
    return "stock" if repo.rsplit("/", 1)[-1] == STOCK_REPOSITORY else "lmikit"


@dataclass(frozen=True)
class MetricsEndpoint:
    """A Prometheus endpoint the image really serves: path, port and the env it needs."""

    path: str
    port: int = CONTAINER_PORT
    env: dict[str, str] = field(default_factory=dict)
    what: str = ""


def metrics_endpoint(metrics_path: str, image: ImageKind) -> MetricsEndpoint:
    """Where ``image`` serves Prometheus metrics, and what must be set for it to.

    lmikit's image serves vLLM and LMCache metrics at ``metrics_path`` (the spec's
    ``observability.metrics_path``) through its front on port 8080. The stock image serves
    only DJL's server metrics, at ``/server/metrics`` with ``SERVING_PROMETHEUS=true``,
    whatever the spec's path says. The HyperPod manifest and SageMaker's
    ``ContainerMetricsConfig`` both scrape what this returns.
    """
    if image == "lmikit":
        return MetricsEndpoint(metrics_path, env={"LMIKIT_METRICS_PATH": metrics_path},
                               what="vLLM and LMCache metrics (lmikit's metrics front)")
    return MetricsEndpoint(DJL_METRICS_PATH, env={"SERVING_PROMETHEUS": "true"},
                           what="DJL's server metrics (requests, errors, latency)")


def publishes_cache_metrics(image: ImageKind, detailed_metrics: bool) -> bool:
    """Whether the container's vLLM and LMCache metrics reach CloudWatch at all: lmikit's
    image with ``observability.detailed_metrics`` serves them for the scrape (PromQL) and
    prints them as EMF lines (``LMIKit/Container``). The stock image serves only DJL's server
    metrics and has no EMF emitter, so neither exists there: no cache panel or alarm can
    receive data.

    >>> publishes_cache_metrics("stock", True), publishes_cache_metrics("lmikit", True)
    (False, True)
    """
    return image == "lmikit" and detailed_metrics


def cache_metrics_absent_reason(image: ImageKind, detailed_metrics: bool) -> str | None:
    """Why a dashboard has no cache panels (and the deployment no cache alarms), or None."""
    if publishes_cache_metrics(image, detailed_metrics):
        return None
    if not detailed_metrics:
        return ("observability.detailed_metrics is off, so the container's vLLM and LMCache "
                "metrics are not published")
    return ("AWS's stock LMI image publishes no vLLM or LMCache metrics: its only Prometheus "
            f"endpoint is DJL's own ({DJL_METRICS_PATH}) and it prints no EMF lines. Deploy "
            "lmikit's image (container/Dockerfile) for the cache panels and alarms")
