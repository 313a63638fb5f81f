"""FakeSageMaker: a strict, stateful SageMaker (control plane + runtime) for tests.

It plugs in beneath real boto3 clients at botocore's ``before-send`` event and answers in
the wire format, so boto3's serialization, parsing and retries all run. The same object
also backs the sandbox HTTP server (:mod:`lmikit.testing._server`).

>>> import boto3
>>> from lmikit.testing import FakeSageMaker, VirtualClock
>>> fake = FakeSageMaker(clock=VirtualClock())
>>> session = fake.install(boto3.Session(region_name="us-east-1",
...     aws_access_key_id="testing", aws_secret_access_key="testing"))
>>> session.client("sagemaker").list_endpoints()["Endpoints"]
[]
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from lmikit.testing._cache import MetricsSink
from lmikit.testing._clock import SystemClock, VirtualClock
from lmikit.testing._control import ControlPlane, ServiceError, Timings, merge_tags
from lmikit.testing._metrics import CacheModel
from lmikit.testing._runtime import Runtime
from lmikit.testing._validate import ShapeValidator
from lmikit.testing._wire import (
    RawStream,
    WireRequest,
    WireResponse,
    body_bytes,
    json_error,
    json_ok,
    lower_headers,
    parse_rest_json,
)

FAULT_KINDS = ("throttle", "5xx", "limit", "failed", "slow", "model_error", "stream_error",
               "lost")
# Faults on calls moto answers (S3, CloudWatch, IAM, STS, Application Auto Scaling): the
# request is or is not applied.
MOTO_FAULT_KINDS = ("throttle", "5xx", "lost", "denied")  # denied: IAM and S3 only
_WRITES = {
    "CreateEndpoint": "create_endpoint", "UpdateEndpoint": "update_endpoint",
    "CreateInferenceComponent": "create_inference_component",
    "UpdateInferenceComponent": "update_inference_component",
    "UpdateInferenceComponentRuntimeConfig": "update_inference_component_runtime_config",
}
_READS = {
    "CreateEndpointConfig": "create_endpoint_config",
    "DescribeEndpointConfig": "describe_endpoint_config",
    "DeleteEndpointConfig": "delete_endpoint_config",
    "ListEndpointConfigs": "list_endpoint_configs",
    "DescribeEndpoint": "describe_endpoint", "DeleteEndpoint": "delete_endpoint",
    "ListEndpoints": "list_endpoints",
    "DescribeInferenceComponent": "describe_inference_component",
    "DeleteInferenceComponent": "delete_inference_component",
    "ListInferenceComponents": "list_inference_components",
    "ListTags": "list_tags", "AddTags": "add_tags", "DeleteTags": "delete_tags",
    "CreateModel": "create_model", "DescribeModel": "describe_model",
    "DescribeTrainingPlan": "describe_training_plan",
    "DeleteModel": "delete_model", "ListModels": "list_models",
}
SUPPORTED_OPERATIONS = sorted([*_WRITES, *_READS, "InvokeEndpoint",
                               "InvokeEndpointWithResponseStream"])
_NAME_KEYS = ("InferenceComponentName", "EndpointConfigName", "EndpointName", "ModelName")
_MOTO_SERVICES = ("s3", "cloudwatch", "iam", "sts", "application-autoscaling")
# The region a request is for, from its SigV4 credential scope (.../<date>/<region>/...).
_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/([a-z0-9-]+)/")


def request_region(headers: dict[str, str], default: str) -> str:
    """The region a signed request names (SigV4 ``Credential`` scope), else ``default``."""
    found = _SCOPE.search(headers.get("authorization", ""))
    return found.group(1) if found else default


@functools.cache
def service_model(service: str) -> Any:
    """botocore's model of ``service``, loaded once per process (it is immutable)."""
    return botocore.session.get_session().get_service_model(service)


@functools.lru_cache(maxsize=1)
def _moto_operations() -> frozenset[str]:
    return frozenset(op for service in _MOTO_SERVICES
                     for op in service_model(service).operation_names)


def s3_artifact_exists(s3: Any) -> Callable[[str], bool]:
    """An ``artifact_exists`` check for :class:`FakeSageMaker` backed by an S3 client (moto)."""
    def exists(url: str) -> bool:
        bucket, key = url[len("s3://"):].split("/", 1)
        try:
            s3.head_object(Bucket=bucket, Key=key)
            return True
        except s3.exceptions.ClientError:
            return False
    return exists


@dataclass
class Fault:
    """An injected fault: the next ``times`` calls of ``operation`` (naming ``name``) fail.

    kinds: ``throttle`` (400 ThrottlingException), ``5xx`` (500 InternalFailure), ``limit``
    (400 ResourceLimitExceeded), ``failed`` (the resource ends Failed, or an update rolls
    back, with ``reason``), ``slow`` (the transition takes ``seconds`` longer),
    ``model_error`` (424 ModelError), ``stream_error`` (a ModelStreamError event after
    ``after_tokens`` tokens), ``lost`` (the request is applied, then its answer is lost: the
    client sees a read timeout, or in the sandbox a closed connection, and botocore retries).

    Operations moto answers (S3's ``PutObject``, CloudWatch's ``PutMetricAlarm``, ...) take
    ``lost``, ``throttle`` and ``5xx``; ``name`` then matches the request URL. ``skip`` lets
    that many matching calls through first (to fault the third poll, say).
    """

    operation: str
    kind: str
    times: int = 1
    name: str | None = None
    reason: str = "injected failure"
    seconds: float = 0.0
    after_tokens: int = 2
    hits: int = 0
    skip: int = 0

    def matches(self, operation: str, params: dict[str, Any]) -> bool:
        if self.hits >= self.times or operation != self.operation:
            return False
        if self.name is not None and not any(self.name in str(params.get(k, ""))
                                             for k in (*_NAME_KEYS, "url")):
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        return True


@dataclass
class Call:
    """One request the fake answered (for assertions)."""

    service: str
    operation: str
    params: dict[str, Any] = field(repr=False)
    status: int
    error: str | None = None
    region: str = ""


class FakeSageMaker:
    """The fake. Share ``clock`` with the code under test to make waits take no real time.

    A component whose ``Container.ArtifactUrl`` cannot be downloaded ends Failed: when
    ``role_reads`` (:func:`~lmikit.testing.iam_role_reads`) says the endpoint config's
    execution role may not read it, or ``artifact_exists``
    (:func:`~lmikit.testing.s3_artifact_exists`) says it is not there.
    """

    def __init__(self, region: str = "us-east-1", *, clock: Any = None,
                 timings: Timings | None = None,
                 artifact_exists: Callable[[str], bool] | None = None,
                 stream_part_bytes: int = 11, ttft_seconds: float = 0.0,
                 token_seconds: float = 0.0,
                 artifact_reader: Callable[[str], bytes | None] | None = None,
                 metrics_sink: MetricsSink | None = None,
                 role_reads: Callable[[str, str], str | None] | None = None) -> None:
        self.region = region
        self.clock = clock if clock is not None else VirtualClock()
        self.timings = timings or Timings()
        self.artifact_exists = artifact_exists
        self.role_reads = role_reads
        # Like the service, every region has its own resources (a name used in us-east-1 is
        # free in eu-west-1, and a client of one region never sees another's).
        self.planes: dict[str, ControlPlane] = {}
        self._planes_lock = threading.Lock()
        self.runtime = Runtime(self.clock, stream_part_bytes=stream_part_bytes,
                               ttft_seconds=ttft_seconds, token_seconds=token_seconds)
        if artifact_reader is not None:
            self.runtime.cache = CacheModel(self.clock, artifact_reader, metrics_sink)
        self.faults: list[Fault] = []
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._models = {"sagemaker": service_model("sagemaker"),
                        "sagemaker-runtime": service_model("sagemaker-runtime")}
        self._validator = ShapeValidator()

    # --- public helpers ----------------------------------------------------------------

    def plane(self, region: str | None = None) -> ControlPlane:
        """The control plane (every resource) of ``region`` (default: the fake's region)."""
        name = region or self.region
        with self._planes_lock:
            if name not in self.planes:
                self.planes[name] = ControlPlane(name, self.clock, self.timings,
                                                 self.artifact_exists, self.role_reads)
            return self.planes[name]

    @property
    def control(self) -> ControlPlane:
        """The default region's control plane."""
        return self.plane()

    def add_training_plan(self, name: str, instance_type: str, region: str | None = None, *,
                          count: int = 1, start: dt.datetime | None = None,
                          hours: float = 24 * 30, status: str = "Active") -> str:
        """Reserve ``count`` instances of ``instance_type`` for endpoints (a training plan
        whose target resource is "endpoint") in ``region``, from ``start`` (default: now, on
        the fake's clock) for ``hours``; returns its ARN, for a spec's
        ``instance.capacity_reservation_arn``. ``name`` may be a whole ARN (a spec's), whose
        region then picks the plane."""
        from lmikit.catalog.offers import TRAINING_PLAN_TYPES
        from lmikit.testing._plans import TrainingPlan

        if instance_type not in TRAINING_PLAN_TYPES:
            raise ValueError(f"a training plan cannot reserve {instance_type}; it reserves "
                             f"{', '.join(sorted(TRAINING_PLAN_TYPES))}")
        if name.startswith("arn:"):
            arn = name
            plane = self.plane(name.split(":")[3])
        else:
            plane = self.plane(region)
            arn = plane.arn("training-plan", name)
        begin = start or dt.datetime.fromtimestamp(self.clock.time(), dt.timezone.utc)
        plan = TrainingPlan(arn, arn.split("training-plan/", 1)[-1], instance_type, count,
                            begin, begin + dt.timedelta(hours=hours), status)
        with plane.lock:
            plane.training_plans[arn] = plan
        return arn

    def inject(self, operation: str, kind: str, *, times: int = 1, name: str | None = None,
               reason: str = "injected failure", seconds: float = 0.0,
               after_tokens: int = 2, skip: int = 0) -> Fault:
        """Make the next ``times`` matching calls fail in the way ``kind`` says."""
        if kind not in FAULT_KINDS + MOTO_FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; use one of {', '.join(FAULT_KINDS)}")
        if operation in SUPPORTED_OPERATIONS and kind not in FAULT_KINDS:
            raise ValueError(f"{operation} is answered by the fake: use one of "
                             f"{', '.join(FAULT_KINDS)}")
        if operation not in SUPPORTED_OPERATIONS:
            if operation not in _moto_operations():
                raise ValueError(f"the fake does not serve {operation!r}")
            if kind not in MOTO_FAULT_KINDS:
                raise ValueError(f"{operation} is answered by moto: use one of "
                                 f"{', '.join(MOTO_FAULT_KINDS)}")
        fault = Fault(operation, kind, times, name, reason, seconds, after_tokens, skip=skip)
        with self._lock:
            self.faults.append(fault)
        return fault

    @property
    def cache(self) -> CacheModel | None:
        """The KV cache model (None unless built with ``artifact_reader``): its fleets, the
        copy each request landed on, and every metric datum published."""
        return self.runtime.cache

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def resources(self, region: str | None = None) -> dict[str, dict[str, str | None]]:
        """Every live resource of ``region`` (default: the fake's) and its status:
        ``{"endpoint": {name: status}, ...}``."""
        control = self.plane(region)
        with control.lock:
            control.tick()
            return {
                "endpoint-config": {n: None for n in control.configs},
                "model": {n: None for n in control.models},
                "endpoint": {n: r.status for n, r in control.endpoints.items()},
                "inference-component": {n: r.status for n, r in control.components.items()},
            }

    def settle(self, max_seconds: float = 3600.0) -> None:
        """Let every pending transition finish, in every region (advances a VirtualClock)."""
        if not isinstance(self.clock, VirtualClock):
            raise TypeError("settle() needs a VirtualClock")
        deadline = self.clock.monotonic() + max_seconds
        while self.clock.monotonic() < deadline:
            due = []
            for control in list(self.planes.values()):
                with control.lock:
                    control.tick()
                    due += [r.pending_at for s in (control.endpoints, control.components)
                            for r in s.values() if r.pending_at is not None]
            if not due:
                return
            self.clock.advance(max(0.0, min(due) - self.clock.monotonic()))

    def operations(self, *names: str) -> list[Call]:
        """Calls made, optionally only of the given operations."""
        return [c for c in self.calls if not names or c.operation in names]

    # --- plugging into boto3 -------------------------------------------------------------

    def install(self, session: Any) -> Any:
        """Route a boto3 (or botocore) session's SageMaker clients to this fake; returns it."""
        events = session.events if hasattr(session, "events") else session.get_component(
            "event_emitter")
        self._register(events)
        return session

    def attach(self, client: Any) -> Any:
        """Route one existing SageMaker or SageMaker runtime client to this fake."""
        self._register(client.meta.events)
        return client

    def _register(self, events: Any) -> None:
        for service in ("sagemaker", "sagemaker-runtime"):
            events.register_first(f"before-send.{service}", self._before_send,
                                  unique_id=f"lmikit-fake-{id(self)}-{service}")
        _shield_from_moto(events, self)

    def _before_send(self, request: Any, event_name: str = "", **_: Any) -> AWSResponse:
        wire = WireRequest(request.method, request.url, lower_headers(request.headers),
                           body_bytes(request.body))
        response = self.handle(wire)
        if response.lost:
            raise ReadTimeoutError(endpoint_url=request.url)
        return AWSResponse(request.url, response.status, response.headers,
                           RawStream(response.chunks()))

    # --- the service -------------------------------------------------------------------

    def handle(self, req: WireRequest) -> WireResponse:
        """Answer one wire-level request (used by the boto3 hook and the HTTP server).

        A response with ``lost`` set was applied but must not be delivered."""
        region = request_region(req.headers, self.region)
        if req.path.startswith("/endpoints/"):
            return self._handle_runtime(req, region)
        target = req.headers.get("x-amz-target", "")
        if not target.startswith("SageMaker."):
            return json_error("UnknownOperationException", "missing X-Amz-Target", 400)
        return self._handle_control(target.split(".", 1)[1], req, region)

    def _handle_control(self, operation: str, req: WireRequest, region: str) -> WireResponse:
        model = self._models["sagemaker"]
        try:
            params = json.loads(req.body or b"{}")
        except ValueError:
            return self._record("sagemaker", operation, {},
                                json_error("SerializationException", "invalid JSON", 400))
        if operation not in _READS and operation not in _WRITES:
            return self._record("sagemaker", operation, params, json_error(
                "UnknownOperationException", f"the lmikit fake does not serve {operation}",
                400))
        op = model.operation_model(operation)
        errors = self._validator.validate(op.input_shape, params)
        if errors:
            return self._record("sagemaker", operation, params, json_error(
                "ValidationException", f"{len(errors)} validation error(s) detected: "
                + "; ".join(errors), 400))
        fault = self._take_fault(operation, params)
        if fault and fault.kind in ("throttle", "5xx", "limit"):
            return self._record("sagemaker", operation, params, _fault_error(fault), region)
        control = self.plane(region)
        try:
            with control.lock:
                control.tick()
                if operation.startswith("Create"):  # refused before anything is created
                    merge_tags({}, params.get("Tags") or [])
                if operation in _WRITES:
                    fail = fault.reason if fault and fault.kind == "failed" else None
                    extra = fault.seconds if fault and fault.kind == "slow" else 0.0
                    out = getattr(control, _WRITES[operation])(params, fail, extra)
                else:
                    out = getattr(control, _READS[operation])(params)
        except ServiceError as exc:
            response = json_error(exc.code, exc.message, exc.status)
        else:
            problems = self._validator.validate(op.output_shape, out)
            if problems:  # a bug in the fake, never in the code under test
                raise AssertionError(f"fake produced an invalid {operation} response: "
                                     f"{problems}")
            response = json_ok(out, str(uuid.uuid4()))
        response.lost = bool(fault and fault.kind == "lost")
        return self._record("sagemaker", operation, params, response, region)

    def _handle_runtime(self, req: WireRequest, region: str) -> WireResponse:
        model = self._models["sagemaker-runtime"]
        streaming = req.path.rstrip("/").endswith("invocations-response-stream")
        operation = "InvokeEndpointWithResponseStream" if streaming else "InvokeEndpoint"
        op = model.operation_model(operation)
        params = parse_rest_json(op, req)
        errors = self._validator.validate(op.input_shape, params)
        if errors:
            return self._record("sagemaker-runtime", operation, params, json_error(
                "ValidationError", "; ".join(errors), 400))
        fault = self._take_fault(operation, params)
        if fault and fault.kind in ("throttle", "5xx", "limit"):
            return self._record("sagemaker-runtime", operation, params, _fault_error(fault))
        control = self.plane(region)
        if fault and fault.kind == "model_error":
            self._invocation_metrics(params, control, 500, True, 0.0)
            return self._record("sagemaker-runtime", operation, params, json_error(
                "ModelError", f"Received server error (500) from primary with message "
                f"\"{fault.reason}\".", 424, {"OriginalStatusCode": 500,
                                             "OriginalMessage": fault.reason}))
        try:
            with control.lock:
                control.tick()
                reply = self.runtime.invoke(params, streaming, control)
        except ServiceError as exc:
            status = int(exc.extra.get("OriginalStatusCode", exc.status))
            self._invocation_metrics(params, control, status, exc.code == "ModelError", 0.0)
            return self._record("sagemaker-runtime", operation, params,
                                json_error(exc.code, exc.message, exc.status, exc.extra))
        self._invocation_metrics(params, control, 200, False, self.runtime.latency(reply))
        headers = {"x-Amzn-Invoked-Production-Variant": "AllTraffic",
                   "x-amzn-RequestId": str(uuid.uuid4()), **reply.headers}
        if streaming:
            headers["Content-Type"] = "application/vnd.amazon.eventstream"
            headers["X-Amzn-SageMaker-Content-Type"] = reply.content_type
            stream_fault = fault if fault and fault.kind == "stream_error" else None
            events = self.runtime.stream_events(
                reply, stream_fault.after_tokens if stream_fault else None,
                stream_fault.reason if stream_fault else "")
            return self._record("sagemaker-runtime", operation, params,
                                WireResponse(200, headers, events, streaming=True))
        body = self.runtime.render_body(reply)
        headers["Content-Type"] = reply.content_type
        headers["Content-Length"] = str(len(body))
        return self._record("sagemaker-runtime", operation, params,
                            WireResponse(200, headers, body))

    def _invocation_metrics(self, params: dict[str, Any], control: ControlPlane, status: int,
                            model_error: bool, latency: float) -> None:
        """SageMaker's AWS/SageMaker invocation metrics (with a cache model only)."""
        cache = self.runtime.cache
        name = params.get("EndpointName", "")
        if cache is None or name not in control.endpoints:
            return
        component = params.get("InferenceComponentName") or None
        res = control.components.get(component or "")
        variant = res.request.get("VariantName", "AllTraffic") if res else "AllTraffic"
        cache.invocation(name, variant, component if res else None, status, model_error,
                         latency)

    def _take_fault(self, operation: str, params: dict[str, Any]) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(operation, params):
                    fault.hits += 1
                    return fault
        return None

    def _record(self, service: str, operation: str, params: dict[str, Any],
                response: WireResponse, region: str = "") -> WireResponse:
        error = response.headers.get("x-amzn-ErrorType")
        if response.lost:
            error = "lost"
        with self._lock:
            self.calls.append(Call(service, operation, params, response.status, error,
                                   region or self.region))
        return response

    # --- calls moto answers ------------------------------------------------------------

    def moto_call(self, event_name: str, request: Any, answer: Callable[[], Any]) -> Any:
        """Record a call moto answers and apply an injected fault to it."""
        _, service, operation = (event_name.split(".") + ["", ""])[:3]
        params = {"url": str(request.url)}
        region = request_region(lower_headers(request.headers), self.region)
        fault = self._take_fault(operation, params)
        if fault and fault.kind in ("throttle", "5xx", "denied"):
            response = _moto_fault_response(service, fault)
            with self._lock:
                self.calls.append(Call(service, operation, params, response.status_code,
                                       fault.kind, region))
            return response
        response = answer()
        if response is None:  # not a call moto serves: botocore sends it as usual
            return None
        status = getattr(response, "status_code", 200)
        lost = bool(fault and fault.kind == "lost")
        with self._lock:
            self.calls.append(Call(service, operation, params, status,
                                   "lost" if lost else (None if status < 400 else str(status)),
                                   region))
        if lost:
            raise ReadTimeoutError(endpoint_url=request.url)
        return response


def _fault_error(fault: Fault) -> WireResponse:
    if fault.kind == "throttle":
        return json_error("ThrottlingException", "Rate exceeded", 400)
    if fault.kind == "5xx":
        return json_error("InternalFailure", "We encountered an internal error. Please try "
                          "again.", 500)
    return json_error("ResourceLimitExceeded", f"The account-level service limit was "
                      f"exceeded: {fault.reason}", 400)


def _moto_fault_response(service: str, fault: Fault) -> AWSResponse:
    """A throttling, 5xx or access-denied answer in the service's own error format (S3:
    REST-XML, whose throttling is 503 SlowDown; IAM: query XML; others: a bare 5xx, which
    botocore retries by status)."""
    if fault.kind == "denied":
        return _denied(service, fault)
    if service == "s3":
        code, status, text = (("SlowDown", 503, "Please reduce your request rate.")
                              if fault.kind == "throttle" else
                              ("InternalError", 500, "We encountered an internal error. "
                               "Please try again."))
        body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                f"<Message>{text}</Message><RequestId>{uuid.uuid4().hex}</RequestId></Error>"
                ).encode()
        return AWSResponse("", status, {"Content-Type": "application/xml",
                                        "Content-Length": str(len(body))}, RawStream([body]))
    return AWSResponse("", 503, {"Content-Length": "0"}, RawStream([b""]))


def _denied(service: str, fault: Fault) -> AWSResponse:
    """403 AccessDenied as IAM (query protocol: ErrorResponse) or S3 (REST-XML) send it."""
    text = f"User is not authorized to perform this action ({fault.reason})"
    error = f"<Code>AccessDenied</Code><Message>{text}</Message>"
    if service == "iam":
        body = (f"<ErrorResponse><Error><Type>Sender</Type>{error}</Error>"
                f"<RequestId>{uuid.uuid4().hex}</RequestId></ErrorResponse>").encode()
    elif service == "s3":
        body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>{error}"
                f"<RequestId>{uuid.uuid4().hex}</RequestId></Error>").encode()
    else:
        raise ValueError(f"the fake injects 'denied' on IAM and S3 calls only, not {service}")
    return AWSResponse("", 403, {"Content-Type": "text/xml",
                                 "Content-Length": str(len(body))}, RawStream([body]))


_MOTO_LOCK = threading.Lock()


def _shield_from_moto(events: Any, fake: FakeSageMaker) -> None:
    """moto's in-process stub answers every AWS call it knows, SageMaker included (and it
    has no inference components). Keep it for the other services, off for SageMaker, and
    record (and fault) the calls it answers."""
    models = sys.modules.get("moto.core.models")
    stubber = getattr(models, "botocore_stubber", None)
    if stubber is None:
        return
    from lmikit.testing._moto import teach_moto_inference_components

    teach_moto_inference_components()

    def moto_except_sagemaker(event_name: str, request: Any, **kwargs: Any) -> Any:
        if event_name.startswith(("before-send.sagemaker.", "before-send.sagemaker-runtime.")):
            return None

        def answer() -> Any:
            with _MOTO_LOCK:  # moto's backends are not thread-safe: two concurrent
                # PutObjects of one key can close each other's body
                return stubber(event_name=event_name, request=request, **kwargs)
        return fake.moto_call(event_name, request, answer)

    events.unregister("before-send", stubber)
    events.register("before-send", moto_except_sagemaker,
                    unique_id=f"lmikit-fake-moto-shield-{id(fake)}")


__all__ = ["Call", "FakeSageMaker", "Fault", "SystemClock", "Timings", "VirtualClock"]
