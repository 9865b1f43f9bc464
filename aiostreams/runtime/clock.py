"""Time sources for the engine: the event loop's clock, or a manual one for tests.

Everything time-driven in a task (task idling deadlines, wall-clock punctuation, retry
backoff, the commit interval) goes through a :class:`Clock`, so a test can drive it
deterministically with :class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def wall_time(self) -> float:
        """Seconds since the epoch: what wall-clock punctuation and record timestamps use."""
        ...

    def monotonic(self) -> float:
        """A non-decreasing time for deadlines."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (on the event loop) once ``delay`` seconds have passed."""
        ...


class LoopClock:
    """The real clock: ``time.time()`` for wall time, the running loop for timers."""

    def wall_time(self) -> float:
        return time.time()

    # the builtin itself, not a method around it: the engine reads it once per finished
    # record (``clock.monotonic`` is then a C call, with no Python frame)
    monotonic = staticmethod(time.monotonic)

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "due")

    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told to (trio's ``MockClock``, Kafka's mock time).

    Invariant: ``monotonic()`` never decreases; timers fire in due order, each exactly once,
    during :meth:`advance`, never on their own.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()

    def wall_time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(self._now + max(0.0, delay), callback)
        heapq.heappush(self._timers, (timer.due, next(self._seq), timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that falls due on the way."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward; got advance({seconds})")
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            self._now = max(self._now, due)
            if not timer.cancelled:
                timer.callback()
        self._now = target

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)
