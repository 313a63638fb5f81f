"""One boto3 client factory with one retry policy, and the clock every wait runs on."""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any, Protocol

from lmikit.aws._errors import NO_REGION, call
from lmikit.errors import RegionMissing

RETRY_MODE = "adaptive"  # botocore's: exponential backoff, and it slows down after throttling
MAX_ATTEMPTS = 8


def session_region(session: Any, region: str | None = None) -> str:
    """The region AWS clients are made in: ``region``, else the boto3 session's
    (AWS_DEFAULT_REGION, AWS_REGION or the profile's); :class:`RegionMissing` when neither.

    >>> import boto3
    >>> session_region(boto3.Session(region_name="eu-west-1"))
    'eu-west-1'
    """
    found = region or session.region_name
    if not found:
        raise RegionMissing(NO_REGION)
    return str(found)


class Clock(Protocol):
    """What waits, leases and progress read time from (tests pass a virtual clock)."""

    def monotonic(self) -> float: ...
    def time(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall time; ``sleep`` really sleeps."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class Clients:
    """Lazily created boto3 clients that share one session, one region and one retry policy.

    >>> sm = Clients(region="eu-west-1").sagemaker  # doctest: +SKIP
    """

    def __init__(self, session: Any = None, region: str | None = None,
                 retry_mode: str = RETRY_MODE) -> None:
        self.retry_mode = retry_mode
        if session is None:
            import boto3

            session = boto3.Session(region_name=region)
        self.session = session
        self.region = session_region(session, region)
        self._account: str | None = None

    def account(self) -> str:
        """The caller's account id (STS, read once)."""
        if self._account is None:
            self._account = str(call(self.sts, "get_caller_identity")["Account"])
        return self._account

    def client(self, service: str) -> Any:
        """A new client of ``service`` with lmikit's retry policy and user agent."""
        from botocore.config import Config

        config = Config(retries={"mode": self.retry_mode, "max_attempts": MAX_ATTEMPTS},
                        user_agent_extra="lmikit")
        return self.session.client(service, region_name=self.region, config=config)

    @cached_property
    def sagemaker(self) -> Any:
        return self.client("sagemaker")

    @cached_property
    def runtime(self) -> Any:
        return self.client("sagemaker-runtime")

    @cached_property
    def s3(self) -> Any:
        return self.client("s3")

    @cached_property
    def cloudwatch(self) -> Any:
        return self.client("cloudwatch")

    @cached_property
    def autoscaling(self) -> Any:
        """Application Auto Scaling (the copy-count scaling of inference components)."""
        return self.client("application-autoscaling")

    @cached_property
    def sts(self) -> Any:
        return self.client("sts")

    @cached_property
    def iam(self) -> Any:
        return self.client("iam")
