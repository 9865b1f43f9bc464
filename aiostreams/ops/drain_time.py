"""How long a worker needs to catch up: its lag over the pace it has been consuming at.

An autoscaler (KEDA's Prometheus scaler, an HPA on an external metric) wants one number that
says "this worker is behind by N seconds of its own work": lag in records is not that (a
million records is nothing to a fast pipeline and hours to a slow one), and a rate alone says
nothing of the backlog. ``aiostreams_drain_time_seconds`` is ``lag / pace``, the pace being
the records consumed per second over the last ``window`` seconds of samples, so a scaler can
target "caught up within a minute" whatever the pipeline's speed.

Invariant: :meth:`DrainTime.observe` returns 0.0 when there is no lag; None while the
samples span less than ``min_span`` seconds (no pace known yet); ``math.inf`` when there is
lag and nothing was consumed over the window (stalled); else ``lag / pace`` with ``pace``
measured over at most ``window`` seconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

__all__ = ["DrainTime"]


class DrainTime:
    """Drain-time estimates from samples of a consumed-records total (see the module doc)."""

    def __init__(self, window: float = 120.0, min_span: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < min_span <= window:
            raise ValueError(f"need 0 < min_span <= window, got {min_span} and {window}")
        self.window, self.min_span = window, min_span
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, consumed_total: int, lag: int) -> float | None:
        """Record ``consumed_total`` (records consumed so far, never decreasing) now, and
        estimate the seconds ``lag`` records take at the recent pace."""
        now = self._clock()
        if self._samples and consumed_total < self._samples[-1][1]:
            self._samples.clear()  # a counter that went back (a restart): pace unknown again
        self._samples.append((now, consumed_total))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()  # keep the newest sample at least ``window`` old
        if lag <= 0:
            return 0.0
        since, consumed_then = self._samples[0]
        span = now - since
        if span < self.min_span:
            return None
        pace = (consumed_total - consumed_then) / span
        return math.inf if pace <= 0 else lag / pace
