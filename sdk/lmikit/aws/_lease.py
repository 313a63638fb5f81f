"""A deployment's lease: one S3 object that at most one run holds at a time.

``lmikit/<deployment>/lease.json`` is written with S3's conditional writes (Amazon S3 User
Guide, "Add preconditions to S3 operations with conditional requests"): ``IfNoneMatch="*"``
creates it only when no lease exists, ``IfMatch=<etag>`` renews or takes over exactly the
lease that was read, and ``DeleteObject`` with ``IfMatch`` releases only our own. A lease
names its holder and expires, so a run that died leaves a lease the next run may take once
it has expired (or at once with ``force``: ``--force-unlock``).

A lost answer is reconciled: a put whose answer was lost is retried by botocore and then
fails its precondition, and reading the lease back shows our own run id.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from lmikit.aws._clients import Clock
from lmikit.aws._errors import call, is_not_found
from lmikit.errors import AwsError, DeployError, LeaseHeld
from lmikit.names import deployment_prefix

LEASE_SECONDS = 2 * 3600.0
_CONFLICT = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


def lease_key(deployment: str) -> str:
    return f"{deployment_prefix(deployment)}lease.json"


def default_owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class LeaseInfo:
    """Who holds a lease, for what, and until when (epoch seconds)."""

    owner: str
    run_id: str
    operation: str
    acquired_at: float
    expires_at: float

    def describe(self) -> str:
        return (f"{self.owner}, running `lmikit {self.operation}` since "
                f"{_when(self.acquired_at)} (lease expires {_when(self.expires_at)})")


class Lease:
    """The lease on one deployment.

    >>> with Lease(s3, "my-bucket", "docqa", clock=RealClock()) as lease:  # doctest: +SKIP
    ...     ...  # no other lmikit run changes docqa meanwhile
    """

    def __init__(self, s3: Any, bucket: str, deployment: str, *, clock: Clock,
                 operation: str = "deploy", owner: str | None = None,
                 seconds: float = LEASE_SECONDS) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.deployment = deployment
        self.key = lease_key(deployment)
        self.clock = clock
        self.operation = operation
        self.owner = owner or default_owner()
        self.seconds = seconds
        self.run_id = uuid.uuid4().hex
        self.etag: str | None = None
        self.broken: LeaseInfo | None = None  # the lease this run took over, if any
        self._renewed_at = 0.0

    @property
    def held(self) -> bool:
        return self.etag is not None

    def _body(self) -> bytes:
        now = self.clock.time()
        info = LeaseInfo(self.owner, self.run_id, self.operation, now, now + self.seconds)
        return json.dumps(asdict(info), sort_keys=True).encode()

    def read(self) -> tuple[LeaseInfo, str] | None:
        """The current lease and its ETag, or None when there is none."""
        try:
            got = call(self.s3, "get_object", Bucket=self.bucket, Key=self.key)
        except AwsError as exc:
            if is_not_found(exc):
                return None
            raise
        body = got["Body"].read()
        try:
            info = LeaseInfo(**json.loads(body))
        except (ValueError, TypeError):
            info = LeaseInfo("an unreadable lease", "", "?", 0.0, 0.0)
        return info, str(got["ETag"])

    def acquire(self, *, force: bool = False, wait_seconds: float = 0.0,
                poll_seconds: float = 5.0) -> None:
        """Take the lease, or raise LeaseHeld naming the holder.

        An expired lease (or, with ``force``, any lease) is taken over; with
        ``wait_seconds`` a held lease is polled for that long first.
        """
        try:
            self._acquire(force, wait_seconds, poll_seconds)
        except KeyboardInterrupt:  # a put may have gone through: give back what is ours
            self.etag = (self.read() or (None, None))[1] if self._is_ours() else None
            self.release()
            raise

    def _is_ours(self) -> bool:
        current = self.read()
        return current is not None and current[0].run_id == self.run_id

    def _acquire(self, force: bool, wait_seconds: float, poll_seconds: float) -> None:
        start = self.clock.monotonic()
        while True:
            if self._put(IfNoneMatch="*"):
                return
            current = self.read()
            if current is None:
                continue  # released between our put and our read
            info, etag = current
            if info.run_id == self.run_id:  # our own put, whose answer was lost
                self.etag = etag
                self._renewed_at = self.clock.monotonic()
                return
            if force or info.expires_at <= self.clock.time():
                if self._put(IfMatch=etag):
                    self.broken = info
                    return
                continue
            if self.clock.monotonic() - start >= wait_seconds:
                raise LeaseHeld(
                    f"deployment {self.deployment!r} is locked by {info.describe()}; lease "
                    f"s3://{self.bucket}/{self.key}. Wait for that run to finish; if it is "
                    "gone, run again with --force-unlock")
            self.clock.sleep(poll_seconds)

    def _put(self, **condition: str) -> bool:
        try:
            got = call(self.s3, "put_object", Bucket=self.bucket, Key=self.key,
                       Body=self._body(), ContentType="application/json", **condition)
        except AwsError as exc:
            if exc.code in _CONFLICT or exc.status in (409, 412):
                return False
            raise
        self.etag = str(got["ETag"])
        self._renewed_at = self.clock.monotonic()
        return True

    def renew(self) -> None:
        """Push the expiry out; raise DeployError if another run took the lease."""
        if self.etag is None:
            return
        if self._put(IfMatch=self.etag):
            return
        current = self.read()
        if current is not None and current[0].run_id == self.run_id:
            self.etag = current[1]  # our renewal went through; its answer was lost
            return
        self.etag = None
        holder = current[0].describe() if current else "nobody (it was deleted)"
        raise DeployError(f"the lease on {self.deployment!r} was taken over by {holder}; "
                          "this run stopped changing anything")

    def keep_alive(self) -> None:
        """Renew when more than a quarter of the lease has passed since the last renewal."""
        if self.etag is not None and \
                self.clock.monotonic() - self._renewed_at > self.seconds / 4:
            self.renew()

    def release(self) -> None:
        """Delete the lease if it is still ours (a lost answer is fine: it is gone)."""
        if self.etag is None:
            return
        try:
            self._delete()
        except KeyboardInterrupt:  # one quick call: finish it rather than leave a lock
            self._delete()
            raise
        self.etag = None

    def _delete(self) -> None:
        try:
            call(self.s3, "delete_object", Bucket=self.bucket, Key=self.key,
                 IfMatch=self.etag)
        except AwsError as exc:
            if not (is_not_found(exc) or exc.code in _CONFLICT or exc.status in (409, 412)):
                raise

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
