"""A retry budget: retries to a service may be at most ``ratio`` of its calls.

Counting is over a sliding ``window`` in one-second buckets, with an allowance of
``min_per_second`` retries so a quiet service can still retry its rare failures (as
Finagle's and gRPC's retry budgets). Invariant: over the window,
``retries <= ratio x first_calls + min_per_second x window``.
"""

from __future__ import annotations

import math
from collections import deque

from aiostreams.errors import ConfigError

__all__ = ["RetryBudget"]


class RetryBudget:
    def __init__(self, ratio: float, window: float = 10.0, min_per_second: float = 1.0) -> None:
        if not 0.0 <= ratio <= 10.0:
            raise ConfigError(f"retry_budget is a ratio of retries to calls (0.2 = 20%); "
                              f"got {ratio}")
        self.ratio = ratio
        self.window = window
        self.min_per_second = min_per_second
        self._buckets: deque[list[float]] = deque()  # [second, first calls, retries]

    def _bucket(self, now: float) -> list[float]:
        second = math.floor(now)
        if not self._buckets or self._buckets[-1][0] != second:
            self._buckets.append([second, 0.0, 0.0])
        while self._buckets[0][0] <= now - self.window:
            self._buckets.popleft()
        return self._buckets[-1]

    def on_call(self, now: float) -> None:
        """A first attempt went out."""
        self._bucket(now)[1] += 1

    def try_retry(self, now: float) -> bool:
        """Take a retry from the budget; False when the budget is spent."""
        bucket = self._bucket(now)
        calls = sum(b[1] for b in self._buckets)
        retries = sum(b[2] for b in self._buckets)
        if retries + 1 > self.ratio * calls + self.min_per_second * self.window:
            return False
        bucket[2] += 1
        return True

    def refill_in(self, now: float) -> float:
        """Seconds until the oldest second of the window leaves it (and its retries with
        it); first calls meanwhile make room sooner. Positive whenever retries are held."""
        self._bucket(now)
        return self._buckets[0][0] + self.window - now

    def spent(self, now: float) -> float:
        """Retries as a share of first calls over the window (for metrics)."""
        self._bucket(now)
        calls = sum(b[1] for b in self._buckets)
        return sum(b[2] for b in self._buckets) / calls if calls else 0.0
