"""A declared external service: the one place a pipeline's calls to it go through.

``Service.call(fn)`` waits for a permit, then calls. The permit is, in this order:

1. the **breaker** lets calls out (while it is OPEN the caller waits for the cool-down
   instead of failing: the record is held, not dead-lettered);
2. a **concurrency** place: fewer than ``limit`` calls out (fixed, or adaptive: it moves
   with the outcomes, see :mod:`aiostreams.services.limit`);
3. the **dispatch gate**: a pause the service asked for and the **learned rate**
   (:mod:`aiostreams.services.learned_rate`), first come, first served - last, so paced
   calls go out at its pace;
4. a **token** of the declared rate limit (a hard cap the user sets).

Only then is the call *dispatched*: its timeout and its latency start there, so time spent
queued for a permit never times a call out (issue 20). A retry (``attempt > 0``) must
first find room in the **retry budget**; without it, the retry is *held* (not executing)
until the budget refills.

The **contract** (:mod:`aiostreams.services.contract`) judges each answer, and the call
acts on the verdict (issue 35):

- a **slow-down** (429/503, ``Overloaded``; raised or returned) is never the record's
  failure: the same call goes back through the permit - the record is *held in place*
  (its reorder-buffer slot kept, no attempt spent, never dead-lettered), after its own
  ``Retry-After``. A rate refusal - one with ``Retry-After``, or refused with no more
  calls out than the service accepts (:meth:`~aiostreams.services.learned_rate.
  LearnedRate.is_rate_refusal`), and not "busy" (a 503 without ``Retry-After`` from a
  service taking calls) - teaches the learned rate; the others lower the concurrency
  limit when the call went out with at least half the limit in use;
- a **timeout** is transient; it is a congestion signal for the concurrency limit only
  when ``TIMEOUT_SHARE`` of the last ``TIMEOUT_SAMPLE`` answers timed out (one hung call
  is not overload: 1% hangs must not drive the limit to its floor);
- a failure the breaker counts (timeout, transient) that finds the breaker
  not closed - it opened on this failure or an earlier one, or it is probing - is an
  outage, not the record's failure: the record is held until a probe succeeds;
- otherwise the error is raised, marked for the step's ``Retry``
  (:func:`~aiostreams.policies.mark_retryable`): transient and timeouts are retried,
  permanent ones never, unclassified ones as ``retry_on`` says; a failure the breaker
  counts, with no success of any call since the record's last failure, is also marked a
  suspected outage (the engine defers a record out of attempts instead of dead-lettering
  it).

Once held, the rest of the call does not count against the record's attempt timeout
(:func:`~aiostreams.runtime.permit_wait.held_in_place`) when a timeout bounds each
dispatch.

A record held longer than ``max_hold`` seconds (from when it was first held) fails with
:class:`~aiostreams.services.outcome.HoldExpired`, which the step does not retry: its
``on_error`` applies.

All waiting goes through the :class:`~aiostreams.runtime.clock.Clock`, so tests drive it
with a manual clock. Cancellation: a caller cancelled while waiting for a permit takes no
place; one cancelled during the call gives its place back and counts no outcome.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any, Literal, TypeVar, cast

from aiostreams.errors import ConfigError
from aiostreams.policies import mark_retryable, mark_suspected_outage
from aiostreams.runtime.clock import Clock, LoopClock
from aiostreams.runtime.permit_wait import held_in_place, traced_call
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.runtime.trace_hooks import CallTrace
from aiostreams.services.aimd import AimdLimit
from aiostreams.services.breaker import Breaker, BreakerState, CircuitBreaker
from aiostreams.services.budget import RetryBudget
from aiostreams.services.call_waits import CallWaits
from aiostreams.services.contract import DEFAULT_CONTRACT, ServiceContract, Verdict
from aiostreams.services.dispatch_gate import DispatchGate
from aiostreams.services.gradient import GradientLimit
from aiostreams.services.hold import Hold
from aiostreams.services.learned_rate import LearnedRate
from aiostreams.services.limit import Adaptive, FixedLimit, Limit
from aiostreams.services.outcome import HoldExpired, Outcome
from aiostreams.services.rate import RateLimit, TokenBucket
from aiostreams.services.stats import ServiceStats
from aiostreams.services.timed_call import call_within

__all__ = ["TIMEOUT_SAMPLE", "TIMEOUT_SHARE", "Service", "make_limit"]

T = TypeVar("T")

BUDGET_RECHECK = 0.25
"""Seconds between two looks at the retry budget by a retry it holds."""

SUSPECTS = 10_000
"""Records whose last failure the service remembers (to tell an outage's from their own)."""

BUSY_PAUSE = 0.05
"""Seconds a call refused as "all busy" with none of ours out waits before calling again."""

TIMEOUT_SAMPLE = 20
"""Answers over which the share of timeouts is measured..."""

TIMEOUT_SHARE = 0.25
"""...and the share from which a timeout is a congestion signal, not one hung call."""

_OUTCOME = {Verdict.SUCCESS: Outcome.SUCCESS, Verdict.SLOW_DOWN: Outcome.OVERLOADED,
            Verdict.TIMEOUT: Outcome.TIMEOUT, Verdict.TRANSIENT: Outcome.ERROR,
            Verdict.PERMANENT: Outcome.ERROR, Verdict.UNCLASSIFIED: Outcome.ERROR}

_BREAKER_FAILURES = frozenset({Verdict.TIMEOUT, Verdict.TRANSIENT})
"""What the breaker counts as a failure: what the contract says is the service failing (a
slow-down or a 404 is an answer: the service is up); a success and a permanent answer count
as successes. So do the user's own exceptions (unclassified: the service answered, the
user's code judged the answer): an ``UnknownCustomer`` raised after a 404 must not open the
breaker, nor be held as an outage (it would fail the half-open probe for ever); declare a
type in the contract's ``transient=`` for it to count as a failure."""

_RETRYABLE = {Verdict.TIMEOUT: True, Verdict.TRANSIENT: True, Verdict.PERMANENT: False,
              Verdict.UNCLASSIFIED: None}


def make_limit(concurrency: int | Adaptive) -> Limit:
    """The limit a service's ``concurrency=`` declares."""
    if not isinstance(concurrency, Adaptive):
        return FixedLimit(concurrency)
    if concurrency.algorithm == "aimd":
        return AimdLimit(concurrency)
    return GradientLimit(concurrency)


class Service:
    def __init__(self, name: str, *, concurrency: int | Adaptive = 64,
                 rate: RateLimit | None = None, breaker: CircuitBreaker | None = None,
                 timeout: float | None = None, retry_budget: float | None = None,
                 contract: ServiceContract | None = None, max_hold: float | None = None,
                 clock: Clock | None = None) -> None:
        if not name:
            raise ConfigError("a service needs a name (it labels its metrics)")
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"service {name!r}: timeout must be positive seconds; "
                              f"got {timeout}")
        if max_hold is not None and not max_hold > 0:
            raise ConfigError(f"service {name!r}: max_hold is positive seconds (or None: "
                              f"hold for ever); got {max_hold}")
        if contract is not None and not isinstance(contract, ServiceContract):
            raise TypeError(f"service {name!r}: contract= takes an ais.ServiceContract; got "
                            f"{type(contract).__name__}")
        self.name = name
        self.timeout = timeout
        self.contract = contract or DEFAULT_CONTRACT
        self.max_hold = max_hold
        self.clock: Clock = clock or LoopClock()
        self.limiter = make_limit(concurrency)
        now = self.clock.monotonic()
        self.bucket = TokenBucket(rate, now) if rate is not None else None
        self.breaker = Breaker(breaker) if breaker is not None else None
        self.budget = RetryBudget(retry_budget) if retry_budget is not None else None
        self.learned = LearnedRate(now)
        self.gate = DispatchGate(self.learned, self.clock)
        self.stats = ServiceStats()
        self.in_flight = 0
        self.waiting = 0
        self.held = 0  # calls held now (after a slow-down, or by an open breaker)
        self._recent: deque[bool] = deque(maxlen=TIMEOUT_SAMPLE)  # timed out?
        self.waits = CallWaits(self.clock, lambda: self.limit - self.in_flight)
        self._successes = 0  # answers the breaker counted as successes
        self._failed_at: OrderedDict[int, int] = OrderedDict()  # id(slot) -> _successes

    @property
    def limit(self) -> int:
        return self.limiter.limit

    @property
    def breaker_state(self) -> BreakerState:
        return self.breaker.state if self.breaker is not None else BreakerState.CLOSED

    async def call(self, fn: Callable[[], Awaitable[T]], *, attempt: int = 0,
                   timeout: float | None = None,
                   trace: CallTrace | Literal["record"] | None = "record") -> T:
        """Call ``fn()`` under the service's permit; ``attempt`` > 0 marks a retry;
        ``timeout`` (seconds from dispatch) replaces the service's own for this call (a
        step's ``Retry(timeout=)``); ``trace`` is the call's trace: by default the running
        record's (None unless it is traced), or the one given (a batch's, for its records:
        its first dispatch only). Returns ``fn()``'s result, or raises its error marked
        for the step's ``Retry`` (module docstring); holds the call across slow-downs and
        outages."""
        if self.budget is not None:
            now = self.clock.monotonic()
            if attempt == 0:
                self.budget.on_call(now)
            elif not self.budget.try_retry(now):
                self.stats.retries_refused += 1
                await self._wait_for_budget(self.budget)
        hold = Hold(self.max_hold)
        call_timeout = self.timeout if timeout is None else timeout
        with ExitStack() as held:
            try:
                while True:
                    call_trace = traced_call(self.name, attempt) if trace == "record" \
                        else trace
                    trace = None if trace != "record" else trace  # a given trace: once
                    await self._acquire(hold)
                    try:
                        verdict, result, error, again_in = await self._dispatch(
                            fn, call_timeout, call_trace)
                    finally:
                        self.in_flight -= 1
                        self.waits.wake()
                    if verdict is Verdict.SUCCESS:
                        if self._failed_at:
                            self._failed_at.pop(id(CURRENT_SLOT.get(None)), None)
                        return cast(T, result)
                    if verdict is Verdict.SLOW_DOWN:
                        self._begin_hold(hold, "slow-down answers", call_timeout, held)
                        if again_in is not None:  # this call's own Retry-After
                            await self.waits.sleep(again_in, hold.deadline)
                        elif self.in_flight:
                            # refused beyond a concurrency: one call ends, one calls
                            # again (not a spin of refusals at the speed of the network)
                            await self.waits.next_change(hold.deadline)
                        else:  # busy with others' calls: not a spin either
                            await self.waits.sleep(BUSY_PAUSE, hold.deadline)
                        continue
                    if verdict in _BREAKER_FAILURES and self.breaker_state is not \
                            BreakerState.CLOSED:
                        self.stats.held_by_breaker += 1
                        self._begin_hold(hold, "an outage: the breaker is open",
                                         call_timeout, held)
                        continue
                    assert error is not None
                    mark_retryable(error, _RETRYABLE[verdict])
                    if verdict in _BREAKER_FAILURES and self.breaker is not None:
                        self._suspect(error)
                    raise error
            finally:
                if hold.since is not None:
                    self.held -= 1

    def _suspect(self, error: Exception) -> None:
        """Mark ``error`` a suspected outage (:func:`~aiostreams.policies.
        mark_suspected_outage`: a record out of attempts is deferred, not dead-lettered)
        unless another call succeeded since the running record's last failure - then the
        service is up and the failure is the record's own."""
        slot = CURRENT_SLOT.get(None)
        if slot is None:
            return
        last = self._failed_at.pop(id(slot), None)
        if last is None or last == self._successes:
            mark_suspected_outage(error)
            self._failed_at[id(slot)] = self._successes
            while len(self._failed_at) > SUSPECTS:
                self._failed_at.popitem(last=False)

    def _begin_hold(self, hold: Hold, why: str, call_timeout: float | None = None,
                    held: ExitStack | None = None) -> None:
        """The call is held from now (once); with a timeout bounding each dispatch, the
        record's attempt timeout stops counting for the rest of the call."""
        if hold.begin(self.clock.monotonic(), why):
            self.held += 1
            self.stats.held_total += 1
            if held is not None and call_timeout is not None:
                held.enter_context(held_in_place())

    def _expired(self, hold: Hold) -> HoldExpired:
        self.stats.hold_expired += 1
        return hold.expired(self.name, self.clock.monotonic())

    def _check(self, hold: Hold) -> None:
        if hold.past(self.clock.monotonic()):
            raise self._expired(hold)

    async def _wait_for_budget(self, budget: RetryBudget) -> None:
        """Hold a retry until the budget lets it out, rechecking at least every
        ``BUDGET_RECHECK`` seconds (first calls make room before old ones leave the
        window). Cancellation: a cancelled wait takes nothing from the budget."""
        self.waiting += 1
        try:
            while True:
                now = self.clock.monotonic()
                if budget.try_retry(now):
                    return
                await self.waits.sleep(min(BUDGET_RECHECK, budget.refill_in(now)))
        finally:
            self.waiting -= 1

    async def _acquire(self, hold: Hold) -> None:
        """Wait for the breaker, a concurrency place, the gate and a token, in that order;
        raise :class:`HoldExpired` once a held call passes its ``max_hold``. The gate is
        last but the declared cap: calls it paces go out at its pace (through it first,
        they queued again for places and went out in bursts when calls ended)."""
        self.waiting += 1
        try:
            while True:
                self._check(hold)
                now = self.clock.monotonic()
                if self.breaker is not None and self.breaker.state is BreakerState.OPEN:
                    self._begin_hold(hold, "an outage: the breaker is open")
                    await self.waits.sleep(self.breaker.retry_in(now), hold.deadline)
                    if self.breaker.state is BreakerState.OPEN:
                        if not self.breaker.try_acquire(self.clock.monotonic()):
                            continue
                        break  # a half-open probe place
                if self.in_flight >= self.limit:
                    await self.waits.next_change(hold.deadline)
                    continue
                if self.breaker is not None and not self.breaker.try_acquire(now):
                    await self.waits.next_change(hold.deadline)
                    continue
                break
            self.in_flight += 1
            try:
                await self.gate.enter(hold.deadline, lambda: self._expired(hold))
                if self.bucket is not None:
                    await self.waits.sleep(self.bucket.delay(self.clock.monotonic()))
            except BaseException:
                self.in_flight -= 1
                self.waits.wake()
                raise
        finally:
            self.waiting -= 1

    async def _dispatch(self, fn: Callable[[], Awaitable[T]], timeout: float | None,
                        trace: CallTrace | None
                        ) -> tuple[Verdict, T | None, Exception | None, float | None]:
        """Make the call; judge and count its answer (not when it was cancelled). The
        last item, for a slow-down: seconds until this call may go again (its
        ``Retry-After``; 0.0: when the gate lets it), or None: once a call ends."""
        started = self.clock.monotonic()
        if trace is not None:
            trace.dispatched()
        in_flight = self.in_flight
        result: T | None = None
        error: Exception | None = None
        try:
            result = await call_within(fn, timeout, self.clock, self.name)
        except Exception as exc:
            error = exc
        except BaseException:
            if trace is not None:
                trace.ended("cancelled", None)
            raise
        verdict = self.contract.judge(error, result)
        if trace is not None:
            trace.ended(_OUTCOME[verdict].value, error)
        again_in = self._observe(verdict, error if error is not None else result, started,
                                 in_flight)
        return verdict, result, error, again_in

    def _observe(self, verdict: Verdict, answer: Any, started: float,
                 in_flight: int) -> float | None:
        """Tell the learned rate, the concurrency limit, the breaker and the figures; for
        a slow-down, when the refused call may go again (see :meth:`_dispatch`)."""
        again_in: float | None = None
        now = self.clock.monotonic()
        latency = now - started
        outcome = _OUTCOME[verdict]
        hint = self.contract.hint(answer, self.clock.wall_time())
        self._recent.append(verdict is Verdict.TIMEOUT)
        if verdict is Verdict.SLOW_DOWN:
            # "all busy" from a service taking calls is its concurrency, not a rate
            busy = self.contract.is_busy(answer, hint) and self.learned.accepting(now)
            if not busy and (hint.retry_after is not None
                             or self.learned.is_rate_refusal(now, in_flight)):
                self.learned.on_slow_down(started, now, hint, self.in_flight)
                self.gate.changed()
                again_in = 0.0  # a rate refusal: the learned rate's business, not the limit's
            elif max(in_flight, self.in_flight) * 2 >= self.limit:  # in use: it may be why
                self.limiter.on_outcome(outcome, latency, in_flight, now)
        else:
            self.learned.on_answer(now, hint, in_flight)
            if not hint.empty:
                self.gate.changed()
            if verdict is Verdict.TIMEOUT and not self._timeouts_are_congestion():
                outcome = Outcome.ERROR  # one hung call, not overload: no cut
            self.limiter.on_outcome(outcome, latency, in_flight, now)
        if verdict is Verdict.SLOW_DOWN and hint.retry_after is not None:
            again_in = hint.retry_after
        if self.breaker is not None and verdict is not Verdict.SLOW_DOWN:
            failed = verdict in _BREAKER_FAILURES
            self._successes += not failed
            self.breaker.on_outcome(Outcome.ERROR if failed else Outcome.SUCCESS, now)
            if self.breaker.state is not BreakerState.CLOSED:
                self.waits.wake()
        self.stats.record(_OUTCOME[verdict], latency)
        if verdict is Verdict.PERMANENT:
            self.stats.permanent += 1
        return again_in

    def _timeouts_are_congestion(self) -> bool:
        recent = self._recent
        return len(recent) >= TIMEOUT_SAMPLE // 2 and \
            sum(recent) >= TIMEOUT_SHARE * len(recent)
