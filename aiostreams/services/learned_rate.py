"""The rate a service accepts, learned from its slow-down answers and rate-limit headers.

A concurrency limit cannot find a rate limit: a service that allows 15 calls/s at 50 ms a
call is over its limit with one call out. So beside the concurrency limit each service
paces its dispatches with a :class:`LearnedRate` (a token bucket of one token, so calls are
spread evenly, at the learned ``rate``):

- **unknown** at first (``rate`` None: no pacing). Nothing is paced until the service says
  slow down;
- a **slow-down** answer (429/503, ``Overloaded``) of a call dispatched after the last cut
  cuts at once: back to just under the ``ceiling`` when the rate was probing past it, else
  by ``CUT`` (the service got stricter, or the rate is not known yet). Calls sent before
  a cut do not cut again (one episode, one cut), nor does a refusal when nothing was
  accepted since the last cut: a service that refuses everything (down behind a 503) is
  not telling a rate, and cutting on it would leave the rate at its floor after the
  outage - the backoff below paces that case;
- at the end of each measuring **period** (``PERIOD`` seconds and ``MIN_PERIOD_CALLS``
  answers at least): if the service refused calls in it, what it accepted is its rate -
  ``ceiling = max(accepted / period, rate)``, ``rate = (1 - MARGIN) x ceiling``; if it
  refused none and the rate was in use (``IN_USE`` of its tokens taken), the rate rests
  ``PLATEAU`` periods, then probes past the ceiling by ``PROBE_STEP`` x ceiling x the
  periods spent probing (convex, as the gradient limit: a stale ceiling is left fast);
- **headers** say more: ``Retry-After`` (and ``Overloaded(retry_after=)``) pauses every
  dispatch until then; ``RateLimit-Remaining: 0`` pauses until the reset; remaining calls
  over the seconds to the reset cap the pace until the reset; a policy (``limit`` per
  ``window``) is the rate, not probed past;
- a slow-down without ``Retry-After`` pauses dispatch ``BACKOFF_START`` seconds, doubling
  while calls sent after the pause are refused, up to ``BACKOFF_MAX`` (an accepted answer
  resets it).

A pure state machine on explicit times (tests drive it with no clock; the service's
:class:`~aiostreams.services.dispatch_gate.DispatchGate` asks it when the next call may go).

Invariants (asserted): ``rate`` is None or at least ``MIN_RATE``; a cut never raises it;
tokens never exceed one.
"""

from __future__ import annotations

import math

from aiostreams.services.contract import RateHint

__all__ = ["BACKOFF_MAX", "BACKOFF_START", "CUT", "IN_USE", "MARGIN", "MIN_PERIOD_CALLS",
           "MIN_RATE", "PERIOD", "PLATEAU", "PROBE_STEP", "LearnedRate"]

PERIOD = 1.0
"""Seconds of a measuring period (it also needs ``MIN_PERIOD_CALLS`` answers to end)."""

STARTUP_SPAN = 0.05
"""The shortest span the sending rate is measured over (calls sent at once at the start
are a burst of unknown rate: this reads them as at most 20 x their number a second)."""

MIN_PERIOD_CALLS = 5
"""Answers a period needs before it ends: at 1 call/s a period lasts 5 s."""

MARGIN = 0.02
"""How far below what the service accepted the rate is set."""

CUT = 0.75
"""The factor of a cut when the rate was not above its ceiling."""

PLATEAU = 5
"""Periods the rate rests below its ceiling before it probes past it."""

PROBE_STEP = 0.01
"""Growth per probing period, x the ceiling, x the periods spent probing."""

IN_USE = 0.8
"""Share of a period's tokens that must have been taken for the rate to grow."""

MIN_RATE = 0.1
"""The lowest rate (calls/s): one call every 10 s still tells the service is back."""

BACKOFF_START = 0.05
"""Seconds dispatch pauses after a slow-down without ``Retry-After``, doubling while
calls sent after the last pause are refused and none accepted...

"""

BACKOFF_MAX = 2.0
"""...up to this (then one call every 2 s sees whether the service takes calls again)."""


class LearnedRate:
    """See the module docstring; ``rate``, ``ceiling`` and ``paused_until`` are read by
    metrics and tests."""

    def __init__(self, now: float) -> None:
        self.rate: float | None = None
        self.ceiling: float | None = None
        self.told = False  # the rate came from a declared policy: not probed past
        self.paused_until = -math.inf
        self._cap: float | None = None  # remaining / reset, until the reset
        self._cap_until = -math.inf
        self._tokens = 1.0
        self._at = now
        self._last_cut = -math.inf
        self._probing = 0
        self.upper: float | None = None  # the pace of the last refusal
        self._accepted_since_cut = 0
        self._backoff = 0.0
        self._backoff_at = -math.inf
        self._start = now
        self._paused = 0.0
        self._taken = 0
        self._accepted = 0
        self._refused = 0

    def pace(self, now: float) -> float | None:
        """The calls/s dispatch is paced at now (None: not paced)."""
        cap = self._cap if now < self._cap_until else None
        if self.rate is None:
            return cap
        return self.rate if cap is None else min(self.rate, cap)

    def wait(self, now: float) -> float:
        """Seconds until a call may go out (0.0: now). Takes nothing."""
        self._roll(now)
        pause = self.paused_until - now
        pace = self.pace(now)
        self._refill(now, pace)
        token = 0.0 if pace is None or self._tokens >= 1.0 else (1.0 - self._tokens) / pace
        return max(0.0, pause, token)

    def take(self, now: float) -> None:
        """A call goes out now (after :meth:`wait` said 0)."""
        pace = self.pace(now)
        self._refill(now, pace)
        if pace is not None:
            self._tokens -= 1.0
        self._taken += 1

    def on_answer(self, now: float, hint: RateHint) -> None:
        """The service accepted a call (any answer but a slow-down)."""
        self._roll(now)
        self._accepted += 1
        self._accepted_since_cut += 1
        self._backoff = 0.0
        self._heed(now, hint)

    def on_slow_down(self, dispatched_at: float, now: float, hint: RateHint) -> None:
        """The service refused a call dispatched at ``dispatched_at``: slow down."""
        self._roll(now)
        self._refused += 1
        self._heed(now, hint)
        if hint.retry_after is None and dispatched_at >= self._backoff_at:
            # sent after the last backoff began: it was not enough - double it while
            # nothing is accepted (a service refusing everything is not pacing us)
            self._backoff = min(BACKOFF_MAX, max(BACKOFF_START, 2 * self._backoff))
            self._backoff_at = now
            self._pause_until(now, now + self._backoff, own=True)
        if dispatched_at >= self._last_cut and not self.told and (
                self.rate is None or self._accepted_since_cut):
            self._cut(now)

    def _refill(self, now: float, pace: float | None) -> None:
        if pace is not None and now > self._at:
            self._tokens = min(1.0, self._tokens + (now - self._at) * pace)
        self._at = max(self._at, now)
        assert self._tokens <= 1.0

    def _pause_until(self, now: float, until: float, own: bool = False) -> None:
        """Pause dispatch until ``until``. An ``own`` pause (a backoff) does not count in
        the period's length; one the service asked for does (a server that says "retry
        after the window resets" accepts its rate over the whole window)."""
        if until > self.paused_until:
            if own:
                self._paused += until - max(now, self.paused_until)
            self.paused_until = until

    def _heed(self, now: float, hint: RateHint) -> None:
        if hint.retry_after is not None:
            self._pause_until(now, now + hint.retry_after)
        if hint.limit is not None and hint.window:
            self.rate = self.ceiling = max(MIN_RATE, hint.limit / hint.window)
            self.told = True
        if hint.remaining is not None and hint.reset_after is not None:
            if hint.remaining < 1.0:
                self._pause_until(now, now + hint.reset_after)
            elif hint.reset_after > 0:
                self._cap = max(MIN_RATE, hint.remaining / hint.reset_after)
                self._cap_until = now + hint.reset_after

    def _cut(self, now: float) -> None:
        before = self.pace(now) or self._sending(now)
        self.upper = before  # refused at this pace: the service's rate is below it
        if self.ceiling is not None and before > self.ceiling:
            after = self.ceiling * (1 - MARGIN)  # refused while probing: back under it
        else:
            after = before * CUT
        self.rate = max(MIN_RATE, min(before, after))
        assert self.rate <= max(before, MIN_RATE)
        self._last_cut = now
        self._accepted_since_cut = 0
        self._probing = 0

    def _sending(self, now: float) -> float:
        """Calls/s taken in this period so far (over ``STARTUP_SPAN`` at least)."""
        return max(MIN_RATE, self._taken / max(STARTUP_SPAN, now - self._start))

    def _roll(self, now: float) -> None:
        """End the period if it is due (see the module docstring)."""
        duration = now - self._start - self._paused
        if now - self._start < PERIOD or self._accepted + self._refused < MIN_PERIOD_CALLS:
            return
        if self._refused and not self.told:
            self.ceiling = max(MIN_RATE, self._accepted / duration)
            self.rate = max(MIN_RATE, self.ceiling * (1 - MARGIN))
            self._probing = 0
        elif self.rate is not None and self._taken >= IN_USE * self.rate * duration \
                and not self.told:
            assert self.ceiling is not None
            upper = self.upper
            if upper is not None and self.rate < upper * (1 - 2 * MARGIN):
                # a loose estimate: halve the distance to where it was last refused
                self.rate += (upper * (1 - MARGIN) - self.rate) / 2
            else:
                self._probing += 1
                if self._probing > PLATEAU:
                    self.rate += self.ceiling * PROBE_STEP * (self._probing - PLATEAU)
                    if upper is not None and self.rate > upper:
                        self.upper = None  # passed without a refusal: stale
        self._start = now
        self._taken = self._accepted = self._refused = 0
        self._paused = 0.0
        assert self.rate is None or self.rate >= MIN_RATE
