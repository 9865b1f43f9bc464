"""A gradient concurrency limit (``Adaptive(algorithm="gradient")``, the default).

In the family of Netflix concurrency-limits' Gradient2 and Vegas, with TCP CUBIC's memory of
where the last loss happened. Outcomes are gathered per **window** of one round trip (the
short-term average latency, at least ``MIN_WINDOW``); at each window's end:

1. **gradient**: ``g = tolerance x baseline / short`` (the no-load latency against the
   round trip's, :mod:`aiostreams.services.latency`). ``g < 1`` in two windows in a row
   means calls queue in the service: the limit is multiplied by ``max(0.5, g)`` (the
   larger ``g`` of the two), a cut (one slow window alone is as often a stall of the
   caller's own event loop, and no grounds to cut). Latency cuts in a row lower the limit
   at most to half of where they started: if latency is still high then, the queue is not
   the limit's doing - the caller's own event loop is starved, other clients load the
   service, or it got slower for good - and the baseline starts anew instead (a bulkhead
   that answers 429 at its capacity never queues, and a loaded machine had the limit cut
   to 0.64 x the capacity on latency no cut could lower);
2. else, if the limit was in use (at least half of it out at once in the window) and no
   call was refused in the window, it **grows**: toward one call below the *ceiling* (the
   limit at the last cut) by half the distance (concave: back near it in a few round
   trips); there it rests ``PLATEAU``
   windows, then probes past it by ``MIN_STEP`` x the number of windows spent probing
   (convex: a ceiling that is stale - the service got bigger - is left fast, a true one
   is met gently). With no ceiling yet (from the start) it probes at once.

A **congestion signal** (a 429/503 or a timeout) cuts at once, not at the window's end, to
``backoff`` x the limit, or lower, down to what the service was measured to take: the
mean concurrency of the successes of the last window (Little's law: their summed latency
over the window's duration), but at most halving. Only a call dispatched *after* the last
cut can cut again: the calls of one congestion episode, sent at the old limit, cut once.

Why not AIMD (:mod:`aiostreams.services.aimd`): a service that answers 429 at its capacity
gives no latency signal, so any limit finds the capacity by being refused. AIMD probes
every ``(1 - backoff) x C`` round trips and saws between ``backoff x C`` and ``C``; this
limit returns to just below the last ceiling in a few round trips, and waits longer there
before probing past it, so it spends more of its time near C and is refused less often.
After the capacity halves, successive refusals of newly dispatched calls cut once each,
down to the measured concurrency, within a round trip or two.

Invariants (asserted): ``min <= limit <= max``; a cut never raises the limit and never
lowers it below half (or ``min``); growth happens only at a window's end, at most once
per window.
"""

from __future__ import annotations

import math

from aiostreams.services.latency import LatencyBaseline
from aiostreams.services.limit import Adaptive, Limit
from aiostreams.services.outcome import Outcome

__all__ = ["MIN_STEP", "MIN_WINDOW", "PLATEAU", "GradientLimit"]

MIN_WINDOW = 0.005
"""The shortest window (seconds): below it, a window holds too few calls to average."""

MIN_STEP = 0.5
"""The smallest growth per window, and the unit of the convex probe above the ceiling."""

PLATEAU = 8
"""Windows the limit rests one call below its ceiling before it probes past it: each probe
of a service that refuses at its capacity costs a refusal or two, so probing once per
``PLATEAU`` + a few round trips keeps refusals near 1 / (PLATEAU x C) of the calls."""


class GradientLimit(Limit):
    """The limit of the module docstring; ``ceiling`` and ``measured_concurrency`` are
    exposed for metrics and tests."""

    def __init__(self, settings: Adaptive) -> None:
        self.settings = settings
        self._limit = float(settings.initial)
        self.latency = LatencyBaseline(settings.baseline_window)
        self.ceiling: float | None = None  # the limit when it was last cut
        self._last_cut = -math.inf
        self._probing = 0  # windows grown at or above the ceiling since the last cut
        self._started: float | None = None  # the current window's start
        self._peak = 0  # most calls out at a dispatch in the window
        self._refused = False  # a congestion signal came in the window
        self._success_time = 0.0  # summed latency of the window's successes
        self._measured: float | None = None  # the last window's mean success concurrency
        self._streak_from: float | None = None  # the limit before latency cuts in a row
        self.windows = 0  # windows ended so far
        self._high: float | None = None  # the gradient of a first slow window

    @property
    def limit(self) -> int:
        return int(self._limit)

    @property
    def measured_concurrency(self) -> float | None:
        """How many successful calls were out on average in the last full window."""
        return self._measured

    def on_outcome(self, outcome: Outcome, latency: float, in_flight: int, now: float) -> None:
        if self._started is None:
            self._started = now - latency
        if outcome.congestion:
            self._refused = True  # no growth at this window's end
            if now - latency >= self._last_cut:  # sent at the current limit: a new signal
                self._cut(now, self.settings.backoff)
        elif outcome is Outcome.SUCCESS:
            self.latency.observe(latency, now)
            self._success_time += latency
            self._peak = max(self._peak, in_flight)
        if now - self._started >= max(MIN_WINDOW, self.latency.short):
            self._end_window(now)
        assert self.settings.min <= self.limit <= self.settings.max, (self.limit, self.settings)

    def _end_window(self, now: float) -> None:
        assert self._started is not None
        self.windows += 1
        duration = now - self._started
        if self._success_time > 0.0:
            self._measured = self._success_time / duration
        baseline, short = self.latency.baseline, self.latency.short
        gradient = (self.settings.tolerance * baseline / short
                    if baseline is not None and short > 0.0 else 1.0)
        if gradient < 1.0:
            if self._high is None:
                self._high = gradient  # one slow window may be a stall: wait for a second
            else:
                factor, self._high = max(gradient, self._high), None
                streak_from = self._streak_from or self._limit
                if self._limit * factor < streak_from / 2:
                    # halving the limit did not bring the latency down: not our queue
                    # (the caller's own loop is starved, another client loads the
                    # service, the service got slower for good): a new baseline
                    self.latency.rebase()
                    self._streak_from = None
                else:
                    self._streak_from = streak_from
                    self._cut(now, factor)
                    return
        else:
            self._high = self._streak_from = None
        if self._peak * 2 >= self._limit and not self._refused:  # grow a limit in use
            self._grow()
        self._new_window(now)

    def _grow(self) -> None:
        before = self._limit
        below = self.ceiling - 1.0 if self.ceiling is not None else -math.inf
        if self._limit < below:  # return toward the ceiling, concave
            step = min(below - self._limit, max(MIN_STEP, (below - self._limit) / 2))
        else:  # rest just below it for PLATEAU windows, then probe past it, convex
            self._probing += 1
            step = MIN_STEP * max(0, self._probing - (PLATEAU if below > 0 else 0))
        self._limit = min(float(self.settings.max), self._limit + step)
        assert self._limit >= before

    def _cut(self, now: float, factor: float) -> None:
        """Lower the limit to ``factor`` x, or to the measured concurrency if lower (at most
        halving it)."""
        before = self._limit
        target = before * max(0.5, factor)
        if self._measured is not None:
            target = min(target, max(self._measured, before * 0.5))
        self._limit = max(float(self.settings.min), target)
        assert before * 0.5 <= self._limit <= before, (self._limit, before)
        self.ceiling = before
        self._last_cut = now
        self._probing = 0
        self._new_window(now)

    def _new_window(self, now: float) -> None:
        self._started = now
        self._refused = False
        self._peak = 0
        self._success_time = 0.0
