"""boto3 plumbing for deploys: clients with botocore's adaptive retries, error mapping,
and waits that report progress, honour a timeout and run on an injectable clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from lmikit.errors import DeployError, WaitTimeout


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a long operation, for a progress display."""

    kind: str  # "endpoint-config" | "endpoint" | "inference-component" | "artifact" | "alarm"
    name: str
    action: str  # "create" | "update" | "delete" | "wait" | "unchanged" | "rollback" | ...
    status: str  # the resource's current status, or "done" / "failed"
    elapsed_s: float = 0.0
    detail: str = ""


ProgressFn = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """The default progress callback: stay quiet."""


class Clients:
    """Lazily created boto3 clients sharing one session and botocore's adaptive retries."""

    def __init__(self, session: Any = None, region: str | None = None,
                 retry_mode: str = "adaptive") -> None:
        self.retry_mode = retry_mode
        if session is None:
            import boto3

            session = boto3.Session(region_name=region)
        self.session = session
        self.region = region or session.region_name

    def _client(self, service: str) -> Any:
        from botocore.config import Config

        config = Config(retries={"mode": self.retry_mode, "max_attempts": 8},
                        user_agent_extra="lmikit")
        return self.session.client(service, region_name=self.region, config=config)

    @cached_property
    def sagemaker(self) -> Any:
        return self._client("sagemaker")

    @cached_property
    def runtime(self) -> Any:
        return self._client("sagemaker-runtime")

    @cached_property
    def s3(self) -> Any:
        return self._client("s3")

    @cached_property
    def cloudwatch(self) -> Any:
        return self._client("cloudwatch")

    @cached_property
    def sts(self) -> Any:
        return self._client("sts")

    @cached_property
    def iam(self) -> Any:
        return self._client("iam")


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(exc)


def is_not_found(exc: BaseException) -> bool:
    code = error_code(exc)
    if code in ("ResourceNotFound", "NoSuchKey", "404", "NotFound", "ResourceNotFoundException"):
        return True
    return code == "ValidationException" and "Could not find" in error_message(exc)


def call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    """Call ``client.<operation>(**kwargs)``; botocore errors become :class:`DeployError`."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        result: dict[str, Any] = getattr(client, operation)(**kwargs)
        return result
    except ClientError as exc:
        raise DeployError(f"{_pascal(operation)} failed: {error_code(exc)}: "
                          f"{error_message(exc)}") from exc
    except NoCredentialsError as exc:
        raise DeployError(f"{_pascal(operation)} failed: no AWS credentials found. Configure "
                          "them (aws configure, AWS_PROFILE, or an instance role), or try "
                          "lmikit without an account: `lmikit sandbox serve`") from exc
    except BotoCoreError as exc:
        raise DeployError(f"{_pascal(operation)} failed: {exc}") from exc


def describe_or_none(client: Any, operation: str, **kwargs: Any) -> dict[str, Any] | None:
    """A describe call that returns None when the resource does not exist."""
    try:
        return call(client, operation, **kwargs)
    except DeployError as exc:
        if exc.__cause__ is not None and is_not_found(exc.__cause__):
            return None
        raise


def _pascal(snake: str) -> str:
    return "".join(p.title() for p in snake.split("_"))


_DESCRIBE = {
    "endpoint": ("describe_endpoint", "EndpointName", "EndpointStatus"),
    "inference-component": ("describe_inference_component", "InferenceComponentName",
                            "InferenceComponentStatus"),
}


class Waiter:
    """Polls a resource until it is InService (or gone), reporting each status change."""

    def __init__(self, sagemaker: Any, clock: Clock, progress: ProgressFn,
                 poll_seconds: float = 10.0, timeout_seconds: float = 3600.0) -> None:
        self.sagemaker = sagemaker
        self.clock = clock
        self.progress = progress
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds

    def in_service(self, kind: str, name: str, action: str,
                   timeout_seconds: float | None = None) -> dict[str, Any]:
        """Wait for InService; a Failed resource raises DeployError with its reason."""
        operation, key, status_key = _DESCRIBE[kind]
        start = self.clock.monotonic()
        limit = timeout_seconds or self.timeout_seconds
        last = None
        while True:
            desc = describe_or_none(self.sagemaker, operation, **{key: name})
            elapsed = self.clock.monotonic() - start
            if desc is None:
                raise DeployError(f"{kind} {name} disappeared while waiting for it to be "
                                  "InService (deleted by someone else?)")
            status = desc[status_key]
            if status != last:
                self.progress(ProgressEvent(kind, name, action, status, elapsed))
                last = status
            if status == "InService":
                return desc
            if status in ("Failed", "OutOfService", "UpdateRollbackFailed"):
                reason = desc.get("FailureReason", "no reason given")
                raise DeployError(f"{kind} {name} is {status}: {reason}")
            if elapsed >= limit:
                raise WaitTimeout(f"timed out after {limit:.0f} s waiting for {kind} {name} "
                                  f"to be InService (still {status})")
            self.clock.sleep(self.poll_seconds)

    def settled(self, kind: str, name: str) -> dict[str, Any] | None:
        """Describe a resource after waiting out Creating/Updating/Deleting.

        Returns None when it does not exist (or finished deleting); a resource that fails
        while we wait is returned as described, Failed status and all.
        """
        operation, key, status_key = _DESCRIBE[kind]
        desc = describe_or_none(self.sagemaker, operation, **{key: name})
        if desc is None:
            return None
        status = desc[status_key]
        if status in ("Creating", "Updating"):
            try:
                return self.in_service(kind, name, "wait")
            except DeployError:
                return describe_or_none(self.sagemaker, operation, **{key: name})
        if status == "Deleting":
            self.gone(kind, name)
            return None
        return desc

    def gone(self, kind: str, name: str, timeout_seconds: float | None = None) -> None:
        """Wait until a deleted resource no longer exists."""
        operation, key, status_key = _DESCRIBE[kind]
        start = self.clock.monotonic()
        limit = timeout_seconds or self.timeout_seconds
        while True:
            desc = describe_or_none(self.sagemaker, operation, **{key: name})
            elapsed = self.clock.monotonic() - start
            if desc is None:
                self.progress(ProgressEvent(kind, name, "delete", "deleted", elapsed))
                return
            if elapsed >= limit:
                raise WaitTimeout(f"timed out after {limit:.0f} s waiting for {kind} {name} "
                                  f"to be deleted (still {desc[status_key]})")
            self.clock.sleep(self.poll_seconds)
