"""A service's latency as the adaptive limits read it: a short-term average and a baseline.

Both averages are of successful calls only (a 429 answers at once and says nothing about
the service's speed). The short-term average (weight 0.1) follows queueing within a few
round trips; the long-term average (weight 0.01) moves slowly; the **baseline** - the
estimate of the no-load latency - is the lowest long-term average over the last
``window`` seconds.

Why averages and not single calls (as Netflix's Gradient2): a service whose latency varies
call to call (uniform 0-40 ms, say) has a raw minimum near zero, and comparing single
calls with it reads the noise as queueing (the enrichment example was pinned at 4 calls at
once); queueing moves the averages, noise barely does. Why a minimum over a window and not
for ever: a service that got slower for good resets its baseline within ``window``
seconds instead of pinning the limit at its ``min``.

Invariant: the baseline is ``None`` until ``WARM_UP`` successes were seen, then it is the
minimum of the long-term average over the window (a monotonic deque: O(1) amortized).
"""

from __future__ import annotations

from collections import deque

from aiostreams.errors import ConfigError

__all__ = ["WARM_UP", "LatencyBaseline"]

WARM_UP = 20
"""Successes averaged before the baseline starts (and latency growth can lower a limit)."""


class LatencyBaseline:
    def __init__(self, window: float) -> None:
        if not window > 0:
            raise ConfigError(f"a latency baseline window is positive seconds; got {window}")
        self.window = window
        self.short = 0.0  # short-term average latency of successes
        self._long = 0.0
        self._samples = 0
        self._best: deque[tuple[float, float]] = deque()  # (time, long avg), rising

    @property
    def baseline(self) -> float | None:
        """The estimated no-load latency, or None while warming up."""
        return self._best[0][1] if self._best else None

    @property
    def samples(self) -> int:
        return self._samples

    def rebase(self) -> None:
        """Forget the baseline: the next averages start it anew (the latency moved for a
        reason the caller's limit cannot change)."""
        self._best.clear()

    def observe(self, latency: float, now: float) -> None:
        """A call succeeded after ``latency`` seconds, at time ``now``."""
        self._samples += 1
        n = self._samples
        # 1/n at first, so neither average starts pinned to its first sample
        self.short += max(0.1, 1.0 / n) * (latency - self.short)
        self._long += max(0.01, 1.0 / n) * (latency - self._long)
        if n < WARM_UP:
            return
        long, best = self._long, self._best
        while best and best[-1][1] >= long:
            best.pop()
        best.append((now, long))
        while best[0][0] < now - self.window:
            best.popleft()
