"""The rate a service accepts, learned from its slow-down answers and rate-limit headers.

A concurrency limit cannot find a rate limit: a service that allows 15 calls/s at 50 ms a
call is over its limit with one call out. So beside the concurrency limit each service
paces its dispatches with a :class:`LearnedRate`, at the learned ``rate``, from a
**schedule**: each call's turn is one interval after the last one's turn (not after the
moment it went: a timer that fires late on a loaded loop costs no call), caught up at most
``LAG`` seconds behind; after a cut nothing goes until one interval of the new rate (the
service's bucket is empty: a call at once would be refused too):

- **unknown** at first (``rate`` None: no pacing; the concurrency limit bounds the calls
  out). Nothing is paced until the service refuses a call for its rate;
- a **rate refusal** (a 429 or ``Overloaded`` the service judged a rate refusal) of a call
  dispatched ``SETTLE`` seconds or more after the last cut **measures**: what the service
  accepted over the last ``WINDOW`` seconds of sending (a rate-bound server that refuses
  is saturated: what it took is its rate), less ``MARGIN``, and never above the pace it
  refused less ``2 x MARGIN`` (the window's count includes the server's burst). Within
  ``EPISODE`` seconds of the last cut it is never above what the service admitted since
  that cut, over the time since, less ``MARGIN`` (a rate that halves shows there before
  it shows in the window). A refusal of a call sent since the cut that may not measure yet
  delays the next call by an interval (the rate stays).
  Before any answer came back (the opening burst: refusals come back at once, acceptances
  after their latency) it is ``CUT`` x the rate calls were sent at; over a span shorter
  than the window the calls still out count as accepted, and the first guess is lowered
  by ``CUT`` at the shortest span, less as the span nears a window (the count is mostly
  the server's burst). A refusal with fewer than
  ``MIN_PERIOD_CALLS`` accepted since the last cut, or none in the window, does not
  measure: a service that refuses everything is not telling a rate (the backoff below
  paces that case, and the rate it had is kept for when it is back);
- the span measured never includes a **global pause** (``paused_until``): a token-bucket
  server rounds its 25 ms wait up to ``Retry-After: 1``, and counting that second would
  read 40/s as 20/s;
- a rate measured over less than a window is a **guess** (**slow start**): a refusal of a
  call sent since the last cut measures the calls sent since that cut less the ones
  refused, over the time since (the server's bucket was empty at both refusals: no
  burst in that count), once that is ``SETTLE`` seconds and ``MIN_PERIOD_CALLS`` calls;
  before, it halves (``CUT``) a guess most of whose calls since the cut were refused. An
  unrefused guess grows by ``PROVISIONAL_STEP`` x itself every period it is in use;
- **probing**: after ``PLATEAU`` periods (``PERIOD`` seconds and ``MIN_PERIOD_CALLS``
  answers each; the rest doubles, up to ``PLATEAU_MAX``, while probes find the same
  ceiling) with no rate refusal and the rate in use (``IN_USE`` of its tokens taken),
  the rate grows by ``PROBE_STEP`` x the ceiling x the periods spent probing (convex: a
  stale ceiling - the service doubled its rate - is left within seconds). The refusal that
  ends a probe measures again;
- **headers**: ``Retry-After`` (and ``Overloaded(retry_after=)``) is the refused call's
  own wait (:class:`~aiostreams.services.service.Service` holds that call, not the
  others); it pauses *every* dispatch only when nothing was accepted over the last
  ``WINDOW`` (the service is not taking calls). ``RateLimit-Remaining: 0`` pauses until the
  reset; remaining calls over the seconds to the reset cap the pace until the reset; a
  policy (``limit`` per ``window``) is the rate, not probed past;
- a rate refusal without ``Retry-After`` when nothing was accepted for a ``WINDOW`` pauses
  dispatch ``BACKOFF_START`` seconds, doubling while calls sent after the pause are
  refused, up to ``BACKOFF_MAX`` (an accepted answer resets it).

A pure state machine on explicit times (tests drive it with no clock; the service's
:class:`~aiostreams.services.dispatch_gate.DispatchGate` asks it when the next call may go).

Invariants (asserted): ``rate`` is None or at least ``MIN_RATE``; a measure never raises
the pace that was refused; the schedule never lags the present by more than ``LAG`` (in
any T seconds at most ``1 + pace x (T + LAG)`` calls go).
"""

from __future__ import annotations

import math
from collections import deque

from aiostreams.services.contract import RateHint

__all__ = ["BACKOFF_MAX", "BACKOFF_START", "CUT", "IN_USE", "MARGIN", "MIN_PERIOD_CALLS",
           "MIN_RATE", "PERIOD", "PLATEAU", "PLATEAU_MAX", "PROBE_STEP", "WINDOW", "LearnedRate"]

WINDOW = 1.0
"""Seconds over which what the service accepted is measured at a rate refusal."""

SETTLE = 0.25
"""Seconds after a cut during which refused calls do not measure again: the server's
bucket, emptied by the calls that were refused, refills before the new pace shows (without
this, on a loaded client whose dispatches reach the server bunched, each refusal after an
acceptance cut again, down to a fraction of the rate)."""

EPISODE = 2.0
"""Seconds after a cut within which a refusal is the same episode's: what the service
admitted since the cut, over the time since, bounds the measure (a halving shows there
within a quarter second, the window's count still holds the old rate). Over longer, the
client may have sent under the rate for a while (the server's bucket full, its tokens
lost): that count would read the client's pace, not the service's rate."""

STARTUP_SPAN = 0.05
"""The shortest span a rate is measured over (calls sent at once at the start are a burst
of unknown rate: this reads them as at most 20 x their number a second)."""

PERIOD = 1.0
"""Seconds of a probing period (it also needs ``MIN_PERIOD_CALLS`` answers to end)."""

MIN_PERIOD_CALLS = 5
"""Answers a period needs before it ends: at 1 call/s a period lasts 5 s."""

MARGIN = 0.02
"""How far below what the service accepted the rate is set."""

CUT = 0.5
"""The rate, x the sending rate, after a refusal that came before any acceptance."""

PLATEAU = 2
"""Periods the rate rests at its measure before it probes past it; doubled, up to
``PLATEAU_MAX``, each time a probe finds the same ceiling again."""

SAME_CEILING = 0.15
"""How close two measures are to be the same ceiling (a second's count of 10 calls is
+-10%: at low rates a tighter bound never saw the same ceiling twice)."""

PLATEAU_MAX = 8
"""The longest rest, in periods, between two probes."""

PROBE_STEP = 0.04
"""Growth per probing period, x the ceiling, x the periods spent probing."""

PROVISIONAL_STEP = 0.25
"""Growth per period, x the rate, while the rate is a guess from the opening burst (no
refusal since the first measure over a full window): the next refusal measures it."""

IN_USE = 0.8
"""Share of a period's tokens that must have been taken for the rate to grow."""

MIN_RATE = 0.1
"""The lowest rate (calls/s): one call every 10 s still tells the service is back."""

LAG = 0.1
"""Seconds the paced schedule may fall behind and catch up: calls go at most ``1 + pace x
(T + LAG)`` in any T seconds (a server's burst absorbs it), yet a timer fired late on a
loaded loop costs no call (pacing from "now + interval" lost each late wake-up's delay:
40/s ran at 37-39, 20/s at 17-19)."""

EPSILON = 1e-6
"""Seconds below which a wait is none (float time has no finer grain near 1e9 s)."""

BACKOFF_START = 0.05
"""Seconds dispatch pauses after a rate refusal without ``Retry-After`` when nothing was
accepted for a window, doubling while calls sent after the last pause are refused..."""

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
        self._next_at = -math.inf  # the paced schedule: when the next call may go
        self._first_call: float | None = None
        self._last_cut = -math.inf
        self._probing = 0
        self._provisional = False  # measured over less than a window: a guess
        self._plateau = PLATEAU
        self._accepted_since_cut = 0
        self._sent_since_cut = 0  # calls dispatched after the last cut...
        self._refused_sent_since_cut = 0  # ...and refused
        self._accepted_at: deque[float] = deque()  # answers accepted in the last WINDOW
        self._flights: deque[tuple[float, int]] = deque()  # (time, calls out), falling
        self._backoff = 0.0
        self._backoff_at = -math.inf
        self._start = now  # of the probing period
        self._taken = 0
        self._sent = 0  # since the first call
        self._answers = 0
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
        turn = self._next_at - now if self.pace(now) is not None else 0.0
        wait = max(0.0, pause, turn)
        # below a microsecond is now: at a monotonic clock of 1e9 s, now + 1e-7 == now, and
        # a timer set that close would find the same wait again, for ever
        return wait if wait >= EPSILON else 0.0

    def take(self, now: float) -> None:
        """A call goes out now (after :meth:`wait` said 0)."""
        pace = self.pace(now)
        if pace is not None:
            # the schedule moves one interval from where it was, not from now: a loaded
            # loop's timer that fires late is caught up (it lost nothing), up to LAG behind
            # (after an idle spell: no more than that at once), never into a pause
            self._next_at = max(self._next_at, now - LAG,
                                min(self.paused_until, now)) + 1.0 / pace
            assert self._next_at > now - LAG
        if self._first_call is None:
            self._first_call = now
        self._taken += 1
        self._sent += 1
        self._sent_since_cut += 1

    def on_answer(self, now: float, hint: RateHint, in_flight: int = 0) -> None:
        """The service accepted a call (any answer but a slow-down) sent with
        ``in_flight`` calls out."""
        flights = self._flights  # a monotonic deque: its head is the window's maximum
        while flights and flights[-1][1] <= in_flight:
            flights.pop()
        flights.append((now, in_flight))
        self._roll(now)
        self._answers += 1
        self._accepted_since_cut += 1
        self._backoff = 0.0
        self._accepted_at.append(now)
        self._heed(now, hint)

    def accepting(self, now: float) -> bool:
        """Has the service accepted a call in the last ``WINDOW`` seconds?"""
        self._accepted(now)
        return bool(self._accepted_at)

    def is_rate_refusal(self, now: float, in_flight: int) -> bool:
        """Was a call refused with ``in_flight`` calls out refused for its rate? Yes when
        the service accepted calls sent with twice as many out within the last window
        (so the number out is not why), or accepted none (nothing says otherwise); a
        service refusing beyond a *concurrency* refuses only calls sent with more out
        than the ones it accepts - its concurrency limit's business, not the rate's."""
        flights = self._flights
        while flights and flights[0][0] <= now - WINDOW:
            flights.popleft()
        return not flights or in_flight * 2 <= flights[0][1]

    def on_slow_down(self, dispatched_at: float, now: float, hint: RateHint,
                     out: int = 0) -> None:
        """The service refused a call dispatched at ``dispatched_at`` for its rate (see
        :meth:`is_rate_refusal`), with ``out`` other calls out now: slow down.
        ``hint.retry_after`` is the refused call's own wait; it pauses every call only
        when the service is taking none."""
        self._roll(now)
        self._answers += 1
        self._refused += 1
        started = self._first_call is not None and now - self._first_call >= WINDOW
        taking = self.accepting(now) or not started  # at the start, answers are on the way
        if hint.retry_after is not None and not taking:
            self._pause_until(now + hint.retry_after)
        self._heed(now, RateHint(None, hint.remaining, hint.reset_after, hint.limit,
                                 hint.window))
        if hint.retry_after is None and dispatched_at >= self._backoff_at and not taking:
            # nothing accepted for a window, and this was sent after the last backoff
            # began: double it (a service refusing everything is not pacing us)
            self._backoff = min(BACKOFF_MAX, max(BACKOFF_START, 2 * self._backoff))
            self._backoff_at = now
            self._pause_until(now + self._backoff)
        if self.told:
            return
        if dispatched_at >= self._last_cut:
            self._refused_sent_since_cut += 1
        if self._provisional and dispatched_at >= self._last_cut:
            self._slow_start(now)
        elif dispatched_at >= self._last_cut + SETTLE:
            self._measure(now, out)
        elif dispatched_at >= self._last_cut and self.rate is not None:
            # refused at the new pace before it may measure again: the rate stays, but
            # the next call waits an interval from now (a halving refuses every other
            # call until it measures: this spaces them; a loaded client's bunched calls
            # lose a slot each, not a cut)
            self._next_at = max(self._next_at, now) + 1.0 / self.rate

    def _admitted_since_cut(self, now: float) -> float:
        """Calls/s the service admitted since the last cut: the calls sent since, less the
        ones refused (refusals come back at once: the calls still out count as
        admitted), over the time since. Its bucket was empty at that cut's refusal and is
        at this one's: no burst in the count, a token at most either end."""
        admitted = self._sent_since_cut - self._refused_sent_since_cut
        return admitted / max(STARTUP_SPAN, now - self._last_cut)

    def _slow_start(self, now: float) -> None:
        """A refusal of a call sent since the first guess (or since the last cut of the
        opening): the server's bucket was empty at that cut and is empty now, so what it
        admitted in between - the calls sent since, less the ones refused (refusals come
        back at once: the calls still out count as admitted) - over the time between is
        its rate, without the burst the first guess counted. Over less than ``SETTLE``
        that count is too small to measure; then, if most of the calls sent since were
        refused (two at least: one may be the server's bucket a token short just after
        the cut), the guess was far too high: ``CUT`` it."""
        assert self.rate is not None
        before = self.rate
        admitted = self._sent_since_cut - self._refused_sent_since_cut
        span = now - self._last_cut
        if span >= SETTLE and admitted >= MIN_PERIOD_CALLS:
            rate = min(before * (1 - 2 * MARGIN), admitted / span * (1 - MARGIN))
            self._provisional = False  # a measure, not a guess: probing takes it on
        elif self._refused_sent_since_cut >= max(2, admitted):
            rate = before * CUT
        else:
            return
        self._cut(now, rate)

    def _measure(self, now: float, out: int) -> None:
        """Set the rate from what the service accepted over the last window (see the
        module docstring); nothing when it accepted nothing since it was first called.
        Over a span shorter than the window (the start) the ``out`` calls count as
        accepted: their answers are still on the way, and an estimate too high is
        corrected by the next refusal, one too low only by probing."""
        sending = self._sending_for(now)
        span = max(STARTUP_SPAN, min(WINDOW, sending))
        accepted = self._accepted(now) + (out if sending < WINDOW else 0)
        before = self.pace(now)
        if accepted:
            rate = accepted / span * (1 - MARGIN)
            if before is None and sending < WINDOW:
                # the first guess, over less than a window: the shorter the span, the
                # more of the count is the server's burst (8 calls in 0.15 s read 40/s
                # as 80/s): start below it, by CUT at the shortest
                rate *= CUT + (1 - CUT) * sending / WINDOW
            if before is not None:  # refused at this pace: below it, whatever the burst
                # lent us (the window's count includes the server's burst), and what it
                # admitted since a recent cut shows a drop before the window does
                rate = min(rate, before * (1 - 2 * MARGIN))
                if sending >= WINDOW and self._sent_since_cut >= MIN_PERIOD_CALLS and \
                        now - self._last_cut <= EPISODE:
                    rate = min(rate, self._admitted_since_cut(now) * (1 - MARGIN))
            if before is not None and self._accepted_since_cut < MIN_PERIOD_CALLS:
                return  # (almost) nothing taken since the last cut: going down, not a rate
        elif self.rate is None and self._first_call is not None:
            rate = CUT * self._sent / max(STARTUP_SPAN, now - self._first_call)
        else:
            return  # refusing everything: the backoff paces it
        self._cut(now, rate)
        self._provisional = sending < WINDOW

    def _cut(self, now: float, rate: float) -> None:
        """The rate is ``rate`` from now (the service refused a call just now)."""
        before = self.pace(now)
        self.rate = max(MIN_RATE, rate)
        # the service refused just now: its bucket is empty, nothing more goes until the
        # new pace says so (a call at once would be refused too)
        self._next_at = max(self._next_at, now + 1.0 / self.rate)
        last, self.ceiling = self.ceiling, self.rate / (1 - MARGIN)
        # the same ceiling again: rest longer before the next probe (each costs refusals)
        self._plateau = min(PLATEAU_MAX, 2 * self._plateau) if last is not None and \
            abs(self.ceiling - last) <= SAME_CEILING * last else PLATEAU
        assert before is None or self.rate <= max(before, MIN_RATE)
        self._accepted_since_cut = 0
        self._sent_since_cut = self._refused_sent_since_cut = 0
        self._last_cut = now
        self._probing = 0

    def _sending_for(self, now: float) -> float:
        """Seconds the service has been called for, since the last global pause ended."""
        if self._first_call is None:
            return 0.0
        return now - max(self._first_call, min(self.paused_until, now))

    def _accepted(self, now: float) -> int:
        """Answers accepted in the last ``WINDOW`` seconds, since the last pause ended."""
        accepted = self._accepted_at
        while accepted and accepted[0] <= now - WINDOW:
            accepted.popleft()
        since = min(self.paused_until, now)
        return sum(1 for at in accepted if at > since) if since > now - WINDOW \
            else len(accepted)

    def _pause_until(self, until: float) -> None:
        self.paused_until = max(self.paused_until, until)

    def _heed(self, now: float, hint: RateHint) -> None:
        if hint.retry_after is not None:
            self._pause_until(now + hint.retry_after)
        if hint.limit is not None and hint.window:
            self.rate = self.ceiling = max(MIN_RATE, hint.limit / hint.window)
            self.told = True
        if hint.remaining is not None and hint.reset_after is not None:
            if hint.remaining < 1.0:
                self._pause_until(now + hint.reset_after)
            elif hint.reset_after > 0:
                self._cap = max(MIN_RATE, hint.remaining / hint.reset_after)
                self._cap_until = now + hint.reset_after

    def _roll(self, now: float) -> None:
        """End the probing period if it is due (see the module docstring)."""
        duration = now - self._start
        if duration < PERIOD or self._answers < MIN_PERIOD_CALLS:
            return
        if self._refused:
            self._probing = 0
        elif self.rate is not None and not self.told and \
                self._taken >= IN_USE * self.rate * duration:
            self._probing += 1
            if self._provisional:  # a guess from the opening burst, maybe far too low
                self.rate *= 1 + PROVISIONAL_STEP
            elif self._probing > self._plateau:
                base = self.ceiling if self.ceiling is not None else self.rate
                self.rate += base * PROBE_STEP * (self._probing - self._plateau)
        self._start = now
        self._taken = self._answers = self._refused = 0
        assert self.rate is None or self.rate >= MIN_RATE
