"""The fake's published metrics: the container's (``LMIKit/Container``, when the component's
environment sets ``LMIKIT_EMF``, as lmikit's image does) and SageMaker's own invocation
metrics (``AWS/SageMaker``), sent to a sink (CloudWatch: moto in the sandbox) and kept in
:attr:`CacheModel.published` for assertions.

Unlike the container, which writes one EMF line per interval, the fake publishes one datum
set per request, timestamped on the fake's clock: sums over any window are the same; a
per-datapoint average of a ratio or quantile is per request rather than per interval.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from typing import Any

from lmikit.render import read_artifact_files
from lmikit.testing._cache import (
    Fleet,
    MetricsSink,
    Served,
    container_datums,
    emf_settings,
    setup_for,
)
from lmikit.testing._control import ControlPlane, Resource

SAGEMAKER_NAMESPACE = "AWS/SageMaker"


def prompt_words(payload: Any) -> list[str]:
    """The echo model's tokens of a request: whitespace words of every message and prompt."""
    if not isinstance(payload, dict):
        return []
    texts: list[str] = []
    for m in payload.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict)]
        elif isinstance(content, str):
            texts.append(content)
    for key in ("prompt", "inputs"):
        if isinstance(payload.get(key), str):
            texts.append(payload[key])
    return [w for t in texts for w in t.split()]


class CacheModel:
    """Fleets per base component, built from what is deployed, and the metrics they emit."""

    def __init__(self, clock: Any, artifact_reader: Callable[[str], bytes | None],
                 sink: MetricsSink | None = None) -> None:
        self.clock = clock
        self.read = artifact_reader
        self.sink = sink
        self.fleets: dict[str, tuple[str, Fleet]] = {}
        self.published: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def fleet(self, base: Resource, control: ControlPlane, env: dict[str, str]) -> Fleet:
        """The fleet of ``base``; a changed component (new containers) starts cold."""
        copies = int((base.request.get("RuntimeConfig") or {}).get("CopyCount", 1))
        spec = base.request["Specification"]
        fingerprint = json.dumps([spec, copies], sort_keys=True, default=str)
        known = self.fleets.get(base.name)
        if known is not None and known[0] == fingerprint:
            return known[1]
        variant = control.variant_of(base)
        url = (spec.get("Container") or {}).get("ArtifactUrl")
        data = self.read(url) if url else None
        files = read_artifact_files(data) if data else {}
        setup = setup_for(env, files, instance_type=variant.get("InstanceType", ""),
                          copies=copies, routing=variant.get("RoutingConfig") or {})
        fleet = Fleet(setup)
        self.fleets[base.name] = (fingerprint, fleet)
        return fleet

    def _stamp(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.clock.time(), tz=dt.timezone.utc)

    def _publish(self, namespace: str, datums: list[dict[str, Any]]) -> None:
        with self._lock:
            self.published += [(namespace, d) for d in datums]
        if self.sink is not None and datums:
            self.sink(namespace, datums)

    def container(self, served: Served, output_tokens: int, fleet: Fleet,
                  env: dict[str, str]) -> None:
        """The container's metrics for one request (only when ``LMIKIT_EMF`` is set)."""
        emf = emf_settings(env)
        if emf is None:
            return
        dims = [{"Name": k, "Value": str(v)} for k, v in emf["dimensions"].items()]
        when = self._stamp()
        self._publish(str(emf.get("namespace", "LMIKit/Container")), [
            {"MetricName": name, "Dimensions": dims, "Value": float(value), "Unit": unit,
             "Timestamp": when}
            for name, value, unit in container_datums(served, output_tokens, fleet)])

    def invocation(self, endpoint: str, variant: str, component: str | None, status: int,
                   model_error: bool, model_latency_s: float) -> None:
        """SageMaker's invocation metrics for one InvokeEndpoint(WithResponseStream)."""
        sets = [[{"Name": "EndpointName", "Value": endpoint},
                 {"Name": "VariantName", "Value": variant}]]
        if component:
            sets.append([{"Name": "InferenceComponentName", "Value": component}])
        values: list[tuple[str, float, str]] = [
            ("Invocations", 1.0, "None"),
            ("Invocation4XXErrors", 1.0 if 400 <= status < 500 else 0.0, "None"),
            ("Invocation5XXErrors", 1.0 if status >= 500 else 0.0, "None"),
            ("InvocationModelErrors", 1.0 if model_error else 0.0, "None"),
        ]
        if status < 400:
            values += [("ModelLatency", model_latency_s * 1e6, "Microseconds"),
                       ("OverheadLatency", 5_000.0, "Microseconds")]
        when = self._stamp()
        self._publish(SAGEMAKER_NAMESPACE, [
            {"MetricName": name, "Dimensions": dims, "Value": value, "Unit": unit,
             "Timestamp": when} for dims in sets for name, value, unit in values])

    def totals(self, component: str | None = None) -> dict[str, float]:
        """Sums of the container counters published so far (for tests and notebooks)."""
        out: dict[str, float] = {}
        for namespace, d in self.published:
            if namespace == SAGEMAKER_NAMESPACE or d["Unit"] not in ("Count", "Bytes"):
                continue
            if component and not any(x["Value"] == component for x in d["Dimensions"]):
                continue
            out[d["MetricName"]] = out.get(d["MetricName"], 0.0) + d["Value"]
        return out


def s3_artifact_reader(s3: Any) -> Callable[[str], bytes | None]:
    """An ``artifact_reader`` for :class:`~lmikit.testing.FakeSageMaker` backed by an S3
    client (moto): the object's bytes, or None when it is missing."""
    def read(url: str) -> bytes | None:
        if not url.startswith("s3://") or not url.endswith((".tar.gz", ".tgz")):
            return None
        bucket, key = url[len("s3://"):].split("/", 1)
        try:
            return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except s3.exceptions.ClientError:
            return None
    return read
