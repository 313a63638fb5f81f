"""Ctrl-C during a deploy, destroy or gc.

The first press asks the run to stop starting new work: what is in flight finishes, then
the run rolls back (or, if nothing was left to do, reports that it finished). The second
press stops waiting: the run reports what is still in progress on AWS and how to resume,
and deletes nothing more.

>>> i = Interrupts()
>>> i.press(), i.stop_requested, i.abandon
(1, True, False)
>>> i.press(), i.abandon
(2, True)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

FIRST_PRESS = ("Ctrl-C: no new work is started; what is in flight finishes, then this run "
               "rolls back. Press Ctrl-C again to stop waiting.")


class StopRequested(Exception):  # noqa: N818 - control flow, never reaches a caller
    """Raised at a checkpoint after the first Ctrl-C (or after another step failed)."""


class Interrupts:
    """Counts Ctrl-C presses; shared by every thread of one run."""

    def __init__(self) -> None:
        self._presses = 0
        self._lock = threading.Lock()
        self.handler_installed = False

    def press(self) -> int:
        with self._lock:
            self._presses += 1
            return self._presses

    @property
    def presses(self) -> int:
        return self._presses

    @property
    def stop_requested(self) -> bool:
        return self._presses >= 1

    @property
    def abandon(self) -> bool:
        return self._presses >= 2

    @contextmanager
    def sigint(self, on_first: Callable[[str], None] = lambda message: None) -> Iterator[None]:
        """Handle SIGINT while inside: the first press only sets the flag (and calls
        ``on_first`` with a line to show); the second raises KeyboardInterrupt."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.press() == 1:
                on_first(FIRST_PRESS)
                return
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, handler)
        self.handler_installed = True
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            self.handler_installed = False
