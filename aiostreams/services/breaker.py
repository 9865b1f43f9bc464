"""A circuit breaker per service: stop calling a service that keeps failing, probe it, resume.

States (the transition table):

    CLOSED    --consecutive_failures failures in a row, at any traffic-->  OPEN
    CLOSED    --failure ratio >= threshold over window (>= min_calls)-->  OPEN
    OPEN      --cool_down elapsed-->                                      HALF_OPEN
    HALF_OPEN --probe succeeded (probes of them)-->                       CLOSED
    HALF_OPEN --a probe failed-->                                         OPEN (cool-down anew)

Settings and their defaults (:class:`CircuitBreaker`):

- ``consecutive_failures=5``: failures in a row (no success between) that open it,
  however slowly they come - a service down under 1 call/s opens it after 5 calls
  (issue 35: the ratio alone needed ``min_calls`` in one window, which low traffic never
  reached). None: only the ratio opens it. It may exceed the steps' ``Retry.attempts``:
  a record out of attempts in a suspected outage (failures in a row, no success between)
  is deferred, not dead-lettered (:func:`~aiostreams.policies.mark_suspected_outage`);
- ``failure_ratio=0.5`` over ``window=10.0`` seconds, once ``min_calls=20`` calls were
  made in the window: the ratio rule, for a service that fails often but not always;
- ``cool_down=5.0``: seconds OPEN before ``probes=1`` calls go out HALF_OPEN.

While OPEN no call is made; the service holds the records that need it (dispatch paused)
instead of spending their retries, up to the service's ``max_hold``. In HALF_OPEN up to
``probes`` calls go out at once. Which answers are failures is the service's to say: a
timeout and a transient error are; a slow-down (the service is up and pacing us), a
permanent answer (a 404: the service answered) and the user's own unclassified exceptions
(raised after the service answered) are not. Counting uses
one-second buckets over ``window`` seconds, so memory is bounded whatever the call rate.

Invariant: ``consecutive`` is the number of failures since the last success (or the last
transition), and a CLOSED breaker never has ``consecutive >= consecutive_failures``.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass

from aiostreams.errors import ConfigError
from aiostreams.services.outcome import Outcome

__all__ = ["Breaker", "BreakerState", "CircuitBreaker"]


@dataclass(frozen=True)
class CircuitBreaker:
    """A circuit breaker's settings (see the module docstring)."""

    failure_ratio: float = 0.5
    window: float = 10.0
    cool_down: float = 5.0
    min_calls: int = 20
    probes: int = 1
    consecutive_failures: int | None = 5

    def __post_init__(self) -> None:
        if not 0.0 < self.failure_ratio <= 1.0:
            raise ConfigError(f"CircuitBreaker failure_ratio is in (0, 1]; got "
                              f"{self.failure_ratio}")
        if self.window <= 0 or self.cool_down <= 0:
            raise ConfigError("CircuitBreaker window and cool_down are positive seconds; got "
                              f"window={self.window}, cool_down={self.cool_down}")
        if self.min_calls < 1 or self.probes < 1:
            raise ConfigError("CircuitBreaker min_calls and probes are at least 1")
        if self.consecutive_failures is not None and self.consecutive_failures < 1:
            raise ConfigError("CircuitBreaker consecutive_failures is at least 1 (or None: "
                              f"the ratio alone opens it); got {self.consecutive_failures}")


class BreakerState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Breaker:
    def __init__(self, settings: CircuitBreaker) -> None:
        self.settings = settings
        self.state = BreakerState.CLOSED
        self._opened_at = -math.inf
        self._buckets: deque[list[float]] = deque()  # [second, calls, failures]
        self._probing = 0
        self._probe_successes = 0
        self.consecutive = 0  # failures since the last success
        self.opened = 0  # times it opened, for metrics

    def retry_in(self, now: float) -> float:
        """Seconds until an OPEN breaker half-opens (0.0 when it is not open)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.settings.cool_down - now)

    def try_acquire(self, now: float) -> bool:
        """May a call go out now? In HALF_OPEN this takes one of the probe places."""
        if self.state is BreakerState.OPEN:
            if now < self._opened_at + self.settings.cool_down:
                return False
            self._to(BreakerState.HALF_OPEN)
        if self.state is BreakerState.HALF_OPEN:
            if self._probing >= self.settings.probes:
                return False
            self._probing += 1
        return True

    def on_outcome(self, outcome: Outcome, now: float) -> None:
        failed = outcome is not Outcome.SUCCESS
        if self.state is BreakerState.HALF_OPEN:
            self._probing = max(0, self._probing - 1)
            if failed:
                self._open(now)
            else:
                self._probe_successes += 1
                if self._probe_successes >= self.settings.probes:
                    self._to(BreakerState.CLOSED)
            return
        if self.state is BreakerState.OPEN:
            return  # a call from before it opened: it already counted
        self._count(now, failed)
        self.consecutive = self.consecutive + 1 if failed else 0
        in_a_row = self.settings.consecutive_failures
        if in_a_row is not None and self.consecutive >= in_a_row:
            self._open(now)
            return
        calls = sum(b[1] for b in self._buckets)
        failures = sum(b[2] for b in self._buckets)
        if failed and calls >= self.settings.min_calls \
                and failures >= self.settings.failure_ratio * calls:  # a success never opens it
            self._open(now)

    def _count(self, now: float, failed: bool) -> None:
        second = math.floor(now)
        if not self._buckets or self._buckets[-1][0] != second:
            self._buckets.append([second, 0.0, 0.0])
        bucket = self._buckets[-1]
        bucket[1] += 1
        bucket[2] += 1 if failed else 0
        while self._buckets[0][0] <= now - self.settings.window:
            self._buckets.popleft()

    def _open(self, now: float) -> None:
        self._opened_at = now
        self.opened += 1
        self._to(BreakerState.OPEN)

    def _to(self, state: BreakerState) -> None:
        self.state = state
        self._probing = 0
        self._probe_successes = 0
        self.consecutive = 0
        if state is BreakerState.CLOSED:
            self._buckets.clear()
