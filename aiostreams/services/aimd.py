"""An additive-increase, multiplicative-decrease concurrency limit (``Adaptive(algorithm=
"aimd")``).

The limit is a congestion window, as in TCP: it grows by about one call per round trip
while latency stays near its baseline (:mod:`aiostreams.services.latency`) and the limit
is in use, and it shrinks by ``backoff`` on a congestion signal (a 429/503 or a timeout)
or when the short-term latency grows past ``tolerance`` x the baseline.

It is the simpler of the two limits and is kept for services whose latency is too noisy
for the gradient limit's window averages (few calls per round trip): it never grows by more
than one call per round trip, so it overshoots little, but it also climbs slowly (a limit
of 2,000 takes 2,000 round trips) and saws between ``backoff`` x and 1 x of the capacity.

Invariants: ``min <= limit <= max`` always; at most one decrease per smoothed round trip
(the calls of one congestion episode lower the limit once, not once each).
"""

from __future__ import annotations

import math

from aiostreams.services.latency import LatencyBaseline
from aiostreams.services.limit import Adaptive, Limit
from aiostreams.services.outcome import Outcome

__all__ = ["AimdLimit"]


class AimdLimit(Limit):
    def __init__(self, settings: Adaptive) -> None:
        self.settings = settings
        self._window = float(settings.initial)  # fractional: additive increase is 1/limit
        self._last_decrease = -math.inf
        self.latency = LatencyBaseline(settings.baseline_window)

    @property
    def limit(self) -> int:
        return int(self._window)

    def on_outcome(self, outcome: Outcome, latency: float, in_flight: int, now: float) -> None:
        s = self.settings
        if outcome.congestion:
            self._decrease(now)
        elif outcome is Outcome.SUCCESS:
            self.latency.observe(latency, now)
            best = self.latency.baseline
            if best is not None and self.latency.short > s.tolerance * max(best, 1e-4):
                self._decrease(now)
            elif in_flight * 2 >= self.limit:  # grow only a limit that is being used
                self._window = min(float(s.max), self._window + 1.0 / self._window)
        assert s.min <= self.limit <= s.max, (self.limit, s)

    def _decrease(self, now: float) -> None:
        # one decrease per smoothed round trip: one congestion episode, one cut
        if now - self._last_decrease < max(self.latency.short, 0.001):
            return
        self._last_decrease = now
        self._window = max(float(self.settings.min), self._window * self.settings.backoff)
