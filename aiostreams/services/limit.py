"""How many calls to a service may be in flight: fixed, or adaptive (AIMD on measured latency).

:class:`AdaptiveLimit` follows the idea of Netflix's concurrency-limits (the limit is a
congestion window, as in TCP): it grows by about one call per round trip while latency stays
near the best seen and the limit is in use, and it shrinks by ``backoff`` on a congestion
signal (a 429/503 or a timeout) or when latency grows past ``tolerance`` x the best seen.

Latency is compared averaged (as Netflix's Gradient2): a short-term moving average of
successes (weight 0.1) against the baseline, the lowest long-term average (weight 0.01) of
the window. A service whose latency varies call to call (uniform 0-40 ms, say) has a raw
minimum near zero; comparing single calls with it read the noise as growth and pinned the
limit at ``min`` (the enrichment example ran at 4 calls at once); queueing moves the
averages, noise barely does.

Invariants: ``min <= limit <= max`` always; at most one decrease per ``window`` of time
(the calls of one congestion episode lower the limit once, not once each); the baseline is
the minimum of the long-term average over the last ``baseline_window`` seconds, so a service
that got slower for good resets the baseline instead of pinning the limit at ``min``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from aiostreams.services.outcome import Outcome

__all__ = ["Adaptive", "AdaptiveLimit", "FixedLimit", "Limit"]

WARM_UP = 20
"""Successes averaged before the baseline starts (and latency growth can lower the limit)."""


@dataclass(frozen=True)
class Adaptive:
    """An adaptive concurrency limit's settings (see :class:`AdaptiveLimit`)."""

    initial: int = 20
    min: int = 1
    max: int = 1000
    backoff: float = 0.9
    tolerance: float = 2.0
    baseline_window: float = 30.0

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.initial <= self.max:
            raise ValueError(f"Adaptive needs 1 <= min <= initial <= max; got min={self.min}, "
                             f"initial={self.initial}, max={self.max}")
        if not 0.0 < self.backoff < 1.0:
            raise ValueError(f"Adaptive backoff is a factor in (0, 1); got {self.backoff}")
        if self.tolerance <= 1.0:
            raise ValueError(f"Adaptive tolerance must exceed 1.0; got {self.tolerance}")


class Limit:
    """The interface the service's permit gate reads: the current limit, and outcomes."""

    @property
    def limit(self) -> int:
        raise NotImplementedError

    def on_outcome(self, outcome: Outcome, latency: float, in_flight: int, now: float) -> None:
        """A call that was dispatched with ``in_flight`` calls out ended after ``latency``."""


class FixedLimit(Limit):
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a service's concurrency must be at least 1; got {limit}")
        self._limit = limit

    @property
    def limit(self) -> int:
        return self._limit


class AdaptiveLimit(Limit):
    def __init__(self, settings: Adaptive) -> None:
        self.settings = settings
        self._window = float(settings.initial)  # fractional: additive increase is 1/limit
        self._last_decrease = -math.inf
        self._smoothed = 0.0  # short-term average latency of successes (weight 0.1)
        self._long = 0.0  # long-term average (weight 0.01): the baseline's samples
        self._samples = 0
        self._best: deque[tuple[float, float]] = deque()  # (time, latency), rising latencies

    @property
    def limit(self) -> int:
        return int(self._window)

    @property
    def best_latency(self) -> float | None:
        return self._best[0][1] if self._best else None

    def on_outcome(self, outcome: Outcome, latency: float, in_flight: int, now: float) -> None:
        s = self.settings
        if outcome.congestion:
            self._decrease(now)
        elif outcome is Outcome.SUCCESS:
            self._observe(latency, now)
            best = self.best_latency
            if best is not None and self._smoothed > s.tolerance * max(best, 1e-4):
                self._decrease(now)
            elif in_flight * 2 >= self.limit:  # grow only a limit that is being used
                self._window = min(float(s.max), self._window + 1.0 / self._window)
        assert s.min <= self.limit <= s.max, (self.limit, s)

    def _decrease(self, now: float) -> None:
        # one decrease per smoothed round trip: one congestion episode, one cut
        if now - self._last_decrease < max(self._smoothed, 0.001):
            return
        self._last_decrease = now
        self._window = max(float(self.settings.min), self._window * self.settings.backoff)

    def _observe(self, latency: float, now: float) -> None:
        self._samples += 1
        n = self._samples
        # short and long averages; 1/n at first, so neither starts pinned to one sample
        self._smoothed += max(0.1, 1.0 / n) * (latency - self._smoothed)
        self._long += max(0.01, 1.0 / n) * (latency - self._long)
        if n < WARM_UP:
            return  # too few samples for a baseline (and no decrease on latency yet)
        long = self._long
        best = self._best  # a monotonic deque: the minimum over the window is best[0]
        while best and best[-1][1] >= long:
            best.pop()
        best.append((now, long))
        while best[0][0] < now - self.settings.baseline_window:
            best.popleft()
