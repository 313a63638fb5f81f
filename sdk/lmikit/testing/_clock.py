"""Clocks for the fake: the real one, and a virtual one whose ``sleep`` only moves time."""

from __future__ import annotations

import threading
import time

from lmikit.aws._clients import RealClock


class SystemClock(RealClock):
    """Wall time; ``sleep`` really sleeps. Used by the sandbox server and benchmarks."""


class VirtualClock:
    """A clock that advances only when someone sleeps on it or calls :meth:`advance`.

    Pass the same clock to the fake and to the code under test, and a 10-minute
    endpoint creation takes no real time.

    >>> c = VirtualClock()
    >>> c.sleep(600); c.monotonic()
    600.0
    """

    EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: timestamps look real

    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        return self.EPOCH + self.monotonic()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        time.sleep(0)  # let other threads run

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, float(seconds))
