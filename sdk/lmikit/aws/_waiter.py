"""Waits on SageMaker resources, on an injectable clock, reporting progress as they go.

Every wait has a timeout that names what it waited for; ``should_stop`` lets a caller cut a
wait short (the second Ctrl-C), and ``on_poll`` runs at each poll (a lease renewal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lmikit.aws._clients import Clock
from lmikit.aws._resources import KINDS, describe
from lmikit.errors import DeployError, WaitTimeout

FAILED_STATES = frozenset({"Failed", "OutOfService", "UpdateRollbackFailed"})


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a long operation, for a progress display.

    ``at`` is the clock's ``monotonic()`` when it happened, so a display shows how long each
    resource has taken (and the whole run) on the same clock the waits use.
    """

    kind: str  # "endpoint-config" | "endpoint" | "inference-component" | "model" | "artifact"
    name: str
    action: str  # "create" | "update" | "delete" | "wait" | "unchanged" | "rollback" | ...
    status: str  # the resource's current status, or "done" / "failed"
    elapsed_s: float = 0.0
    detail: str = ""
    at: float = 0.0


ProgressFn = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """The default progress callback: stay quiet."""


class Stopped(DeployError):
    """A wait was cut short because the caller asked to stop waiting."""


class Waiter:
    """Polls a resource until it is InService (or gone), reporting each status change.

    With ``timeout_seconds=0`` it never sleeps: a wait that would poll raises WaitTimeout at
    once, naming the resource and its status (a read of the account as it is, e.g. a dry
    run for ``lmikit doctor``)."""

    def __init__(self, sagemaker: Any, clock: Clock, progress: ProgressFn,
                 poll_seconds: float = 10.0, timeout_seconds: float = 3600.0,
                 should_stop: Callable[[], bool] = lambda: False,
                 on_poll: Callable[[], None] = lambda: None) -> None:
        self.sagemaker = sagemaker
        self.clock = clock
        self.progress = progress
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.should_stop = should_stop
        self.on_poll = on_poll

    def note(self, kind: str, name: str, action: str, status: str, elapsed: float = 0.0,
             detail: str = "") -> None:
        self.progress(ProgressEvent(kind, name, action, status, elapsed, detail,
                                    self.clock.monotonic()))

    def _pause(self, kind: str, name: str, waiting_for: str) -> None:
        """Sleep one poll interval, in steps of at most a second so that a request to stop
        waiting is seen at once."""
        self.on_poll()
        left = self.poll_seconds
        while True:
            if self.should_stop():
                raise Stopped(f"stopped waiting for {kind} {name} to be {waiting_for}")
            if left <= 0:
                return
            step = min(1.0, left)
            self.clock.sleep(step)
            left -= step

    def in_service(self, kind: str, name: str, action: str,
                   timeout_seconds: float | None = None) -> dict[str, Any]:
        """Wait for InService; a Failed resource raises DeployError with its reason."""
        status_key = KINDS[kind].status_key
        start = self.clock.monotonic()
        limit = timeout_seconds or self.timeout_seconds
        last = None
        while True:
            desc = describe(self.sagemaker, kind, name)
            elapsed = self.clock.monotonic() - start
            if desc is None:
                raise DeployError(f"{kind} {name} disappeared while waiting for it to be "
                                  "InService (deleted by someone else?)")
            status = str(desc[status_key]) if status_key else "InService"
            if status != last:
                self.note(kind, name, action, status, elapsed)
                last = status
            if status == "InService":
                return desc
            if status in FAILED_STATES:
                reason = desc.get("FailureReason", "no reason given")
                raise DeployError(f"{kind} {name} is {status}: {reason}")
            if elapsed >= limit:
                raise WaitTimeout(f"timed out after {limit:.0f} s waiting for {kind} {name} "
                                  f"to be InService (still {status})")
            self._pause(kind, name, "InService")

    def settled(self, kind: str, name: str) -> dict[str, Any] | None:
        """Describe a resource after waiting out Creating/Updating/Deleting.

        Returns None when it does not exist (or finished deleting); a resource that fails
        while we wait is returned as described, Failed status and all.
        """
        status_key = KINDS[kind].status_key
        start = self.clock.monotonic()
        last = None
        while True:
            desc = describe(self.sagemaker, kind, name)
            if desc is None or status_key is None:
                return desc
            status = desc[status_key]
            if status == "Deleting":
                self.gone(kind, name)
                return None
            if status not in ("Creating", "Updating", "SystemUpdating", "RollingBack"):
                return desc
            elapsed = self.clock.monotonic() - start
            if elapsed >= self.timeout_seconds:
                raise WaitTimeout(f"{_waited(self.timeout_seconds)} {kind} {name} to finish "
                                  f"{status}")
            if status != last:
                self.note(kind, name, "wait", status, elapsed)
                last = status
            self._pause(kind, name, "settled")

    def gone(self, kind: str, name: str, timeout_seconds: float | None = None) -> None:
        """Wait until a deleted resource no longer exists."""
        status_key = KINDS[kind].status_key
        start = self.clock.monotonic()
        limit = timeout_seconds or self.timeout_seconds
        while True:
            desc = describe(self.sagemaker, kind, name)
            elapsed = self.clock.monotonic() - start
            if desc is None:
                self.note(kind, name, "delete", "deleted", elapsed)
                return
            if elapsed >= limit:
                still = desc.get(status_key, "present") if status_key else "present"
                raise WaitTimeout(f"{_waited(limit)} {kind} {name} to be deleted (still "
                                  f"{still})")
            self._pause(kind, name, "deleted")


def _waited(limit: float) -> str:
    return f"timed out after {limit:.0f} s waiting for" if limit else "not waiting for"
