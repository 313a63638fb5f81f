"""One run of deploy, destroy or gc: its journal of undo actions, what is in flight, and
parallel work that stops starting new steps once one fails or Ctrl-C is pressed.

Undo actions are registered *before* the call they undo and look at the live state when
they run (delete it if it exists and is ours; switch back if it changed), so a call whose
answer was lost is undone as surely as one that answered.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lmikit.aws import Clients, Clock, ProgressEvent, ProgressFn, Stopped, Waiter
from lmikit.deploy._interrupt import Interrupts, StopRequested
from lmikit.deploy._result import Change, DeployResult
from lmikit.errors import DeployError, LmikitError


@dataclass(frozen=True)
class Undo:
    """How to take one step back. ``run`` returns what it did (None: nothing to do)."""

    left: str  # what stays changed if this undo cannot run, e.g. "endpoint-config x"
    run: Callable[[], str | None]
    group: str = ""  # consecutive undos of one non-empty group run in parallel


class Run:
    """Bookkeeping shared by every thread of one run."""

    def __init__(self, *, clients: Clients, clock: Clock, progress: ProgressFn,
                 interrupts: Interrupts, poll_seconds: float, timeout_seconds: float,
                 max_workers: int) -> None:
        self.clients = clients
        self.sm = clients.sagemaker
        self.clock = clock
        self.progress = progress
        self.interrupts = interrupts
        self.max_workers = max_workers
        self.keep_alive: Callable[[], None] = lambda: None
        self.waiter = Waiter(self.sm, clock, progress, poll_seconds, timeout_seconds,
                             should_stop=lambda: interrupts.abandon,
                             on_poll=lambda: self.keep_alive())
        self.result = DeployResult()
        self.journal: list[Undo] = []
        self.in_flight: dict[str, str] = {}
        self.failed = threading.Event()
        self.committed = False
        self._lock = threading.Lock()

    # --- bookkeeping -----------------------------------------------------------------

    def record(self, change: Change) -> None:
        with self._lock:
            self.result.changes.append(change)

    def undo(self, undo: Undo) -> None:
        with self._lock:
            self.journal.append(undo)

    def note(self, kind: str, name: str, action: str, status: str, detail: str = "") -> None:
        self.progress(ProgressEvent(kind, name, action, status, 0.0, detail,
                                    self.clock.monotonic()))

    def checkpoint(self) -> None:
        """Start no new work after Ctrl-C or after another step failed."""
        if self.interrupts.stop_requested or self.failed.is_set():
            raise StopRequested
        self.keep_alive()

    @contextmanager
    def flight(self, what: str, doing: str) -> Iterator[None]:
        """Mark ``what`` as in progress on AWS (for the message after a second Ctrl-C)."""
        with self._lock:
            self.in_flight[what] = doing
        try:
            yield
        except (Stopped, KeyboardInterrupt):  # we stop waiting; AWS goes on
            raise
        except BaseException:
            self._land(what)
            raise
        self._land(what)

    def _land(self, what: str) -> None:
        with self._lock:
            self.in_flight.pop(what, None)

    # --- parallel work ---------------------------------------------------------------

    def parallel(self, jobs: list[Callable[[], None]]) -> None:
        """Run ``jobs`` at once. After a failure (or Ctrl-C) no job that has not started
        starts; those in flight finish; then the first error (or all of them) is raised."""
        if not jobs:
            return
        if len(jobs) == 1:
            jobs[0]()
            return
        pool = cf.ThreadPoolExecutor(max_workers=min(self.max_workers, len(jobs)))
        futures = [pool.submit(self._guarded, job) for job in jobs]
        try:
            self._wait_all(futures)
        finally:
            pool.shutdown(wait=not self.interrupts.abandon, cancel_futures=True)
        errors = [f.exception() for f in futures if not f.cancelled()
                  and isinstance(f.exception(), LmikitError)]
        if errors:
            if len(errors) == 1:
                raise errors[0]  # type: ignore[misc]
            raise DeployError(f"{len(errors)} steps failed: "
                              + "; ".join(str(e) for e in errors))
        if any(not f.cancelled() and isinstance(f.exception(), StopRequested | Stopped)
               for f in futures):
            raise StopRequested

    def _guarded(self, job: Callable[[], None]) -> None:
        self.checkpoint()
        try:
            job()
        except LmikitError:
            self.failed.set()
            raise

    def _wait_all(self, futures: list[cf.Future[Any]]) -> None:
        pending = set(futures)
        while pending:
            try:
                _, pending = cf.wait(pending)
            except KeyboardInterrupt:
                if not self.interrupts.handler_installed:
                    self.interrupts.press()
                if self.interrupts.abandon:
                    raise
